#!/usr/bin/python3
"""Integration test (ctest label `integration`): Debian's Prometheus scrapes a live
fuserank-server under traffic, with the recording and alert rules of deploy/prometheus,
and the recording rules must come back as numbers through Prometheus' HTTP API.

Everything listens on 127.0.0.1 (free ports picked here); the server runs the Kubernetes
ConfigMap's config (deploy/k8s/base) with only the addresses, the device (cpu) and the
model path changed, so the deployed config is also checked against the real parser. The
test is bounded (DEADLINE_S) and stops every process it started, also when killed.

  prometheus_integration_test.py --server build/bin/fuserank-server \
      --prometheus /usr/bin/prometheus --model config/models/demo.yaml [--seed N]
"""

import argparse
import ctypes
import json
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
import urllib.request

import grpc
import yaml

import deploy_util as du

sys.path.insert(0, du.DEPLOY_DIR)
import healthcheck  # noqa: E402  deploy/healthcheck.py

DEADLINE_S = 180          # the whole test
STARTUP_S = 60            # server: until SERVING
RULES_S = 75              # Prometheus: until every check holds
INVALID_EVERY = 10        # one Rank request in 10 names an unknown table: INVALID_ARGUMENT
GRPC_OPTIONS = [("grpc.enable_http_proxy", 0)]


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


# --- fuserank side ---------------------------------------------------------------------

def generate_stubs(tmp):
    out = os.path.join(tmp, "stubs")
    os.makedirs(out)
    proto_dir = os.path.join(du.SOURCE_DIR, "proto")
    subprocess.run(["protoc", f"--proto_path={proto_dir}", f"--python_out={out}",
                    f"--grpc_out={out}", "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin",
                    "fuserank/v1/ranker.proto", "fuserank/v1/admin.proto"],
                   check=True, timeout=60)
    sys.path.insert(0, out)  # a `fuserank` namespace package: no clash with `grpc`
    from fuserank.v1 import admin_pb2, admin_pb2_grpc, ranker_pb2, ranker_pb2_grpc
    return ranker_pb2, ranker_pb2_grpc, admin_pb2, admin_pb2_grpc


class Traffic(threading.Thread):
    """Sends Rank requests for the demo model until stopped; every INVALID_EVERY-th names a
    table the model does not have."""

    def __init__(self, address, spec, pb, pb_grpc, seed):
        super().__init__(daemon=True)
        self.channel = grpc.insecure_channel(address, options=GRPC_OPTIONS)
        self.stub = pb_grpc.RankerStub(self.channel)
        self.pb, self.spec, self.rng = pb, spec, random.Random(seed)
        self.user_tables = [t for t in spec["tables"] if t["side"] == "user"]
        self.item_tables = [t for t in spec["tables"] if t["side"] == "item"]
        self.stop_event = threading.Event()
        self.codes = {}
        self.problems = []

    def ids(self, table, n):
        # Half the ids among the first rows (a hot set has something to hit), half anywhere.
        rows = table["rows"]
        return [self.rng.randrange(min(rows, 4096)) if self.rng.random() < 0.5
                else self.rng.randrange(rows) for _ in range(n)]

    def request(self, i):
        pb = self.pb
        req = pb.RankRequest(request_id=f"it-{i}", top_k=10)
        for t in self.user_tables:
            req.user_features.append(pb.Feature(name=t["name"], ids=self.ids(t, 2)))
        req.user_dense.extend(self.rng.random() for _ in range(self.spec["dense"]["user"]))
        for c in range(self.rng.randrange(8, 65)):
            cand = req.candidates.add(item_id=1000 + c)
            for t in self.item_tables:
                cand.features.append(pb.Feature(name=t["name"], ids=self.ids(t, 1)))
            cand.dense.extend(self.rng.random() for _ in range(self.spec["dense"]["item"]))
        if i % INVALID_EVERY == INVALID_EVERY - 1:
            req.user_features.append(pb.Feature(name="no_such_table", ids=[1]))
        return req

    def run(self):
        i = 0
        while not self.stop_event.is_set() and i < 200000:
            req = self.request(i)
            try:
                reply = self.stub.Rank(req, timeout=10)
                code = "OK"
                scores = [item.score for item in reply.items]
                if (len(scores) != min(10, len(req.candidates))
                        or scores != sorted(scores, reverse=True)
                        or not all(0.0 <= s <= 1.0 for s in scores)):
                    self.problems.append(f"request {i}: bad reply {reply}")
            except grpc.RpcError as e:
                code = e.code().name
            self.codes[code] = self.codes.get(code, 0) + 1
            i += 1
            self.stop_event.wait(0.004)  # ~150-250 requests/s: busy, not saturated

    def stop(self):
        self.stop_event.set()
        self.join(15)
        self.channel.close()


# --- checks ----------------------------------------------------------------------------

def finite(v):
    return not math.isnan(v) and not math.isinf(v)


def checks(tables, hot_version):
    """(name, PromQL, predicate on [(labels, value)]) that must all hold together."""
    def one(pred):
        return lambda r: len(r) == 1 and pred(r[0][1])

    def per_label(label, wanted, pred):
        return lambda r: ({l.get(label) for l, v in r if pred(v)} >= set(wanted))

    # Without a hot-row cache (hot_version None) there are no lookups to count: the hit
    # rate rules must still return a series per table, but it is NaN (0 / 0).
    hit_ok = (lambda v: finite(v) and 0 <= v <= 1) if hot_version is not None else (lambda v: True)

    j = '{job="fuserank"}'
    jr = '{job="fuserank",rpc="Rank"}'
    out = [
        ("target up", f"up{j}", one(lambda v: v == 1)),
        ("QPS", f"job:fuserank_requests:rate1m{j}", one(lambda v: v > 1)),
        ("QPS of Rank", f"job_rpc:fuserank_requests:rate1m{jr}", one(lambda v: v > 1)),
        ("QPS by code",
         'job_rpc_code:fuserank_requests:rate1m{job="fuserank",rpc="Rank",code="INVALID_ARGUMENT"}',
         one(lambda v: v > 0)),
        # 1 in INVALID_EVERY requests is refused: the error ratio is near 0.1.
        ("error ratio", f"job_rpc:fuserank_request_errors:ratio_rate5m{jr}",
         one(lambda v: 0.5 / INVALID_EVERY <= v <= 2.0 / INVALID_EVERY)),
        # ... and none of it is the server's fault.
        ("server error ratio", f"job_rpc:fuserank_request_server_errors:ratio_rate5m{jr}",
         one(lambda v: v == 0)),
        ("Rank p50", f"job_rpc:fuserank_request_duration_seconds:p50_rate5m{jr}",
         one(lambda v: finite(v) and 0 < v < 10)),
        ("Rank p99", f"job_rpc:fuserank_request_duration_seconds:p99_rate5m{jr}",
         one(lambda v: finite(v) and 0 < v < 10)),
        ("Rank p99 >= p50", f"job_rpc:fuserank_request_duration_seconds:p99_rate5m{jr} - "
         f"job_rpc:fuserank_request_duration_seconds:p50_rate5m{jr}", one(lambda v: v >= 0)),
        ("stage p50, every stage", f"job_stage:fuserank_stage_duration_seconds:p50_rate5m{j}",
         per_label("stage", du.SPEC_STAGES, lambda v: finite(v) and v > 0)),
        ("stage p99, every stage", f"job_stage:fuserank_stage_duration_seconds:p99_rate5m{j}",
         per_label("stage", du.SPEC_STAGES, lambda v: finite(v) and v > 0)),
        ("batch size mean", f"job:fuserank_batch_candidates:mean_rate5m{j}",
         one(lambda v: finite(v) and v >= 8)),
        ("batch size p99", f"job:fuserank_batch_candidates:p99_rate5m{j}",
         one(lambda v: finite(v) and v >= 8)),
        ("hit rate, every table", f"job_table:fuserank_embedding_cache_hit_ratio:rate5m{j}",
         per_label("table", tables, hit_ok)),
        ("hit rate, all tables", f"job:fuserank_embedding_cache_hit_ratio:rate5m{j}",
         one(hit_ok)),
        ("queue saturation", f"instance:fuserank_queue_depth:saturation_max1m{j}",
         one(lambda v: finite(v) and 0 <= v <= 1)),
        ("in-flight", f"fuserank_inflight_requests{j}", one(lambda v: v >= 0)),
        ("model info", 'fuserank_model_info{job="fuserank",model="demo",device="cpu"}',
         one(lambda v: v == 1)),
    ]
    if hot_version is not None:  # the admin swap went through: Prometheus must see it
        out += [
            ("hot rows version", f"fuserank_hot_rows_version{j}", one(lambda v: v == hot_version)),
            (f"hot rows of {tables[0]}", f'fuserank_hot_rows{{job="fuserank",table="{tables[0]}"}}',
             one(lambda v: v == 100)),
        ]
    else:
        out.append(("hot rows version", f"fuserank_hot_rows_version{j}", one(lambda v: v >= 0)))
    return out


def check_metrics_page(text):
    """The scrape has every SPEC section 4 family with its type and labels."""
    types, labels = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            types[name] = kind
        elif line and not line.startswith("#"):
            name = line.split("{")[0].split(" ")[0]
            if "{" in line:
                body = line[line.index("{") + 1:line.rindex("}")]
                keys = {kv.split("=")[0] for kv in body.split('",') if "=" in kv}
                labels.setdefault(name, set()).update(k.strip(",") for k in keys)
    problems = []
    for name, (kind, want_labels) in du.SPEC_METRICS.items():
        if types.get(name) != kind:
            problems.append(f"{name}: TYPE {types.get(name)}, SPEC says {kind}")
            continue
        series = name + "_bucket" if kind == "histogram" else name
        got = labels.get(series, set()) - {"le"}
        if got != want_labels and not (name == "fuserank_model_info" and not got):
            problems.append(f"{name}: labels {sorted(got)}, SPEC says {sorted(want_labels)}")
    return problems


# Series that exist only for models with storage: redis tables.
REMOTE_ONLY = re.compile(r"fuserank_(embedding_tier_lookups|remote_)")


def dashboard_queries():
    with open(du.DASHBOARD, encoding="utf-8") as f:
        dashboard = json.load(f)
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"].replace("$job", "fuserank").replace("$instance", ".*")
            yield panel["title"], expr


# --- the test --------------------------------------------------------------------------

def run(args, tmp, procs):
    t0 = time.monotonic()
    for path in [args.server, args.prometheus, args.model]:
        if not os.path.exists(path):
            raise Failure(f"{path} does not exist (build everything first: `make test` does)")
    spec = du.load_yaml(args.model)
    tables = [t["name"] for t in spec["tables"]]
    grpc_port, admin_port, metrics_port, prom_port = free_ports(4)

    # The deployed config, moved to loopback and the CPU.
    config = du.configmap_config()
    config["server"].update(listen=f"127.0.0.1:{grpc_port}", admin_listen=f"127.0.0.1:{admin_port}",
                            metrics_listen=f"127.0.0.1:{metrics_port}", shutdown_grace_seconds=2)
    config["engine"]["device"] = "cpu"
    config["model"]["path"] = os.path.abspath(args.model)
    config_path = os.path.join(tmp, "fuserank.yaml")
    with open(config_path, "w") as f:
        yaml.safe_dump(config, f)
    server = Process("server", [args.server, "--config", config_path],
                     os.path.join(tmp, "server.log"), du.SOURCE_DIR)
    procs.append(server)

    pb, pb_grpc, admin_pb, admin_grpc = generate_stubs(tmp)

    address = f"127.0.0.1:{grpc_port}"
    while True:
        if not server.running():
            raise Failure(f"the server exited with {server.popen.returncode} before serving")
        healthy, text = healthcheck.check(address, timeout=1)
        if healthy:
            break
        if time.monotonic() - t0 > STARTUP_S:
            raise Failure(f"not SERVING after {STARTUP_S} s: {text}")
        time.sleep(0.5)
    print(f"server SERVING after {time.monotonic() - t0:.1f} s ({text})", flush=True)

    _, page = http_get(f"http://127.0.0.1:{metrics_port}/metrics")
    problems = check_metrics_page(page)
    if problems:
        raise Failure("/metrics does not match SPEC section 4:\n  " + "\n  ".join(problems))
    lint = subprocess.run(["promtool", "check", "metrics"], input=page, capture_output=True,
                          text=True, timeout=30)
    print(f"promtool check metrics: rc {lint.returncode} "
          f"{lint.stdout.strip()} {lint.stderr.strip()}".rstrip())

    # Prometheus with the repository's scrape config and rules, scraping every second.
    prom_config = du.load_yaml(os.path.join(du.PROM_DIR, "prometheus.yml"))
    prom_config["global"].update(scrape_interval="1s", evaluation_interval="1s",
                                 scrape_timeout="1s")
    prom_config["rule_files"] = [os.path.join(du.PROM_DIR, r) for r in prom_config["rule_files"]]
    (job,) = [j for j in prom_config["scrape_configs"] if j["job_name"] == "fuserank"]
    job["static_configs"] = [{"targets": [f"127.0.0.1:{metrics_port}"]}]
    prom_config_path = os.path.join(tmp, "prometheus.yml")
    with open(prom_config_path, "w") as f:
        yaml.safe_dump(prom_config, f)
    prometheus = Process("prometheus", [
        args.prometheus, f"--config.file={prom_config_path}",
        f"--storage.tsdb.path={os.path.join(tmp, 'tsdb')}",
        f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
        os.path.join(tmp, "prometheus.log"), tmp)
    procs.append(prometheus)
    api = PrometheusApi(prom_port)

    traffic = Traffic(address, spec, pb, pb_grpc, args.seed)
    traffic.start()
    procs.append(traffic)

    # An admin swap: the hot-rows version and the hot-row gauge must reach Prometheus.
    # A failed swap is reported at the end; the other checks still run.
    problems = []
    with grpc.insecure_channel(f"127.0.0.1:{admin_port}", options=GRPC_OPTIONS) as channel:
        try:
            reply = admin_grpc.AdminStub(channel).SetHotRows(admin_pb.SetHotRowsRequest(
                tables=[admin_pb.TableHotRows(table=tables[0], ids=list(range(100)))]),
                timeout=10)
            hot_version = reply.version
            print(f"SetHotRows({tables[0]}, 100 ids) -> version {hot_version}", flush=True)
        except grpc.RpcError as e:
            hot_version = None
            problems.append(f"Admin.SetHotRows failed: {e.code().name}: {e.details()}")

    wanted = checks(tables, hot_version)
    start = time.monotonic()
    last = {}
    while True:
        if not server.running():
            raise Failure(f"the server exited with {server.popen.returncode} under traffic")
        if not prometheus.running():
            raise Failure(f"prometheus exited with {prometheus.popen.returncode}")
        try:
            last = {name: api.query(expr) for name, expr, _ in wanted}
            failing = [name for name, _, pred in wanted if not pred(last[name])]
        except (OSError, Failure) as e:  # Prometheus still starting
            failing = [f"Prometheus API: {e}"]
        if not failing:
            break
        if time.monotonic() - start > RULES_S:
            detail = "\n".join(f"  {n}: {last.get(n)}" for n in failing)
            still = f"after {RULES_S} s these still do not hold:\n{detail}"
            raise Failure("\n  ".join(problems + [still]))
        time.sleep(1)
    print(f"every recording rule returned numbers after {time.monotonic() - start:.1f} s:")
    for name, expr, _ in wanted:
        values = ", ".join(
            f"{dict(sorted((k, v) for k, v in l.items() if k in ('stage', 'table', 'rpc')))}"
            f"={v:.6g}" for l, v in last[name])
        print(f"  ok  {name}: {values}")

    # Every rule evaluates without error in the real Prometheus.
    groups = api.get("/api/v1/rules")["groups"]
    rules = [r for g in groups for r in g["rules"]]
    expected = len(du.recording_rules()) + len(du.alert_rules())
    if len(rules) != expected:
        raise Failure(f"Prometheus loaded {len(rules)} rules, the files have {expected}")
    bad = [f"{r['name']}: {r['health']} {r.get('lastError', '')}" for r in rules
           if r["health"] != "ok"]
    if bad:
        raise Failure("rules that do not evaluate:\n  " + "\n  ".join(bad))
    print(f"  ok  all {len(rules)} rules healthy")

    # 10% refused requests: FuserankErrorRatioHigh is pending (its `for:` has not passed);
    # no server-side error alert.
    # The alert group reads the recorded series one evaluation later: wait a little.
    start = time.monotonic()
    while True:
        alerts = {(a["labels"]["alertname"], a["state"])
                  for a in api.get("/api/v1/alerts")["alerts"]}
        if ("FuserankErrorRatioHigh", "pending") in alerts:
            break
        if time.monotonic() - start > 20:
            raise Failure(f"FuserankErrorRatioHigh is not pending; alerts: {sorted(alerts)}")
        time.sleep(1)
    for name in ["FuserankServerErrorRatioHigh", "FuserankDown", "FuserankQueueSaturated"]:
        if any(a == name for a, _ in alerts):
            raise Failure(f"{name} is active: {sorted(alerts)}")
    print(f"  ok  alerts: {sorted(alerts)}")

    # Every dashboard query runs and has data; but the storage: redis panels, which have
    # none without a redis table (the demo model has none): their series are checked
    # against a real cluster by tests/e2e/remote_tables_e2e_test.cc.
    empty = []
    for title, expr in dashboard_queries():
        if REMOTE_ONLY.search(expr):
            print(f"  --  {title}: no storage: redis table here (checked by the remote e2e test)")
            continue
        if not api.query(expr):
            empty.append(f"{title}: {expr}")
    if empty:
        raise Failure("dashboard queries without data:\n  " + "\n  ".join(empty))
    print("  ok  every dashboard query has data")

    traffic.stop()
    procs.remove(traffic)
    if traffic.problems:
        raise Failure("bad Rank replies:\n  " + "\n  ".join(traffic.problems[:5]))
    print(f"traffic: {traffic.codes}")
    code, seconds = server.stop(timeout=30)
    procs.remove(server)
    print(f"server stopped on SIGTERM in {seconds:.1f} s with exit code {code}")
    if seconds > 25:
        problems.append("the server did not stop within 25 s of SIGTERM")
    if problems:
        raise Failure("\n  ".join(problems))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--prometheus", default="/usr/bin/prometheus")
    parser.add_argument("--model", default=os.path.join(du.SOURCE_DIR, "config/models/demo.yaml"))
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    if args.seed is None:
        args.seed = random.randrange(1 << 31)
    print(f"seed {args.seed} (rerun with --seed {args.seed})", flush=True)

    # ctest or a person stopping the test: clean up like a failure.
    def on_signal(signum, frame):
        raise SystemExit(f"stopped by signal {signum}")
    def on_alarm(signum, frame):
        raise Failure(f"the test ran over {DEADLINE_S} s")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(DEADLINE_S)

    procs = []
    ok = False
    with tempfile.TemporaryDirectory(prefix="fuserank-prom-") as tmp:
        try:
            run(args, tmp, procs)
            ok = True
        except Failure as e:
            print(f"FAILED: {e}", flush=True)
        except Exception:  # an unexpected error is a failure too, after the cleanup
            traceback.print_exc()
            print("FAILED: unexpected error", flush=True)
        finally:
            signal.alarm(0)
            for proc in reversed(procs):
                if isinstance(proc, Traffic):
                    proc.stop()
                else:
                    proc.stop(timeout=10)
                    if not ok:
                        print(f"--- last lines of {proc.name} (seed {args.seed}):\n{proc.tail()}")
    print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
