"""Processes and HTTP on loopback for the deploy integration tests: free ports, a child
process that logs to a file and dies with the test, and Prometheus' HTTP API."""

import ctypes
import json
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request


class Failure(Exception):
    pass


def free_ports(n):
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def die_with_parent():
    """Child processes get SIGKILL if this test dies (ctest timeout, kill -9)."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Process:
    def __init__(self, name, argv, log_path, cwd):
        self.name, self.log_path = name, log_path
        self.log = open(log_path, "wb")
        print(f"starting {name}: {' '.join(argv)}", flush=True)
        self.popen = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, cwd=cwd,
                                      preexec_fn=die_with_parent)

    def running(self):
        return self.popen.poll() is None

    def stop(self, timeout):
        """SIGTERM, then SIGKILL after `timeout`; returns (exit code, seconds taken)."""
        start = time.monotonic()
        if self.running():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                print(f"{self.name} ignored SIGTERM for {timeout} s: SIGKILL", flush=True)
                self.popen.kill()
                self.popen.wait()
        self.log.close()
        return self.popen.returncode, time.monotonic() - start

    def tail(self, lines=40):
        with open(self.log_path, "rb") as f:
            text = f.read().decode("utf-8", "replace").splitlines()
        return "\n".join(f"  {self.name}| {l}" for l in text[-lines:])


def http_get(url, timeout=5):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only
    with opener.open(url, timeout=timeout) as response:
        return response.status, response.read().decode("utf-8", "replace")


class PrometheusApi:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    def get(self, path, **params):
        url = self.base + path + ("?" + urllib.parse.urlencode(params) if params else "")
        _, body = http_get(url)
        reply = json.loads(body)
        if reply.get("status") != "success":
            raise Failure(f"{path} {params}: {reply}")
        return reply["data"]

    def query(self, expr):
        """[(labels, value)] of an instant query; NaN for "NaN"."""
        data = self.get("/api/v1/query", query=expr)
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        return [(r["metric"], float(r["value"][1])) for r in data["result"]]
