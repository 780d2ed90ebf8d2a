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
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import traceback

import grpc
import yaml

import deploy_util as du
from live_process_util import Failure, Process, PrometheusApi, free_ports, http_get
from prometheus_checks_util import REMOTE_ONLY, check_metrics_page, checks, dashboard_queries
from rank_traffic_util import GRPC_OPTIONS, Traffic, generate_stubs

sys.path.insert(0, du.DEPLOY_DIR)
import healthcheck  # noqa: E402  deploy/healthcheck.py

DEADLINE_S = 180          # the whole test
STARTUP_S = 60            # server: until SERVING
RULES_S = 75              # Prometheus: until every check holds


def start_server(args, tmp, procs, grpc_port, admin_port, metrics_port):
    """The server on the deployed config, moved to loopback and the CPU."""
    config = du.configmap_config()
    config["server"].update(listen=f"127.0.0.1:{grpc_port}", admin_listen=f"127.0.0.1:{admin_port}",
                            metrics_listen=f"127.0.0.1:{metrics_port}", shutdown_grace_seconds=2)
    du.move_to_cpu(config)
    config["model"]["path"] = os.path.abspath(args.model)
    config_path = os.path.join(tmp, "fuserank.yaml")
    with open(config_path, "w") as f:
        yaml.safe_dump(config, f)
    server = Process("server", [args.server, "--config", config_path],
                     os.path.join(tmp, "server.log"), du.SOURCE_DIR)
    procs.append(server)
    return server


def wait_serving(server, address, t0):
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


def check_scrape(metrics_port):
    _, page = http_get(f"http://127.0.0.1:{metrics_port}/metrics")
    problems = check_metrics_page(page)
    if problems:
        raise Failure("/metrics does not match SPEC section 4:\n  " + "\n  ".join(problems))
    lint = subprocess.run(["promtool", "check", "metrics"], input=page, capture_output=True,
                          text=True, timeout=30)
    print(f"promtool check metrics: rc {lint.returncode} "
          f"{lint.stdout.strip()} {lint.stderr.strip()}".rstrip())


def start_prometheus(args, tmp, procs, metrics_port, prom_port):
    """Prometheus with the repository's scrape config and rules, scraping every second."""
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
    return prometheus


def swap_hot_rows(admin_port, admin_pb, admin_grpc, table, problems):
    """An admin swap: the hot-rows version and the hot-row gauge must reach Prometheus.
    A failed swap is reported at the end (in `problems`); the other checks still run.
    Returns the new version, or None."""
    with grpc.insecure_channel(f"127.0.0.1:{admin_port}", options=GRPC_OPTIONS) as channel:
        try:
            reply = admin_grpc.AdminStub(channel).SetHotRows(admin_pb.SetHotRowsRequest(
                tables=[admin_pb.TableHotRows(table=table, ids=list(range(100)))]),
                timeout=10)
            hot_version = reply.version
            print(f"SetHotRows({table}, 100 ids) -> version {hot_version}", flush=True)
        except grpc.RpcError as e:
            hot_version = None
            problems.append(f"Admin.SetHotRows failed: {e.code().name}: {e.details()}")
    return hot_version


def wait_for_rules(server, prometheus, api, wanted, problems):
    """Until every check of `wanted` holds at once (RULES_S at most)."""
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


def check_rules_healthy(api):
    """Every rule evaluates without error in the real Prometheus."""
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


def check_alerts(api):
    """10% refused requests: FuserankErrorRatioHigh is pending (its `for:` has not passed);
    no server-side error alert. The alert group reads the recorded series one evaluation
    later: wait a little."""
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


def check_dashboard(api):
    """Every dashboard query runs and has data; but the storage: redis panels, which have
    none without a redis table (the demo model has none): their series are checked against
    a real cluster by tests/e2e/remote_tables_e2e_test.cc."""
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


def run(args, tmp, procs):
    t0 = time.monotonic()
    for path in [args.server, args.prometheus, args.model]:
        if not os.path.exists(path):
            raise Failure(f"{path} does not exist (build everything first: `make test` does)")
    spec = du.load_yaml(args.model)
    tables = [t["name"] for t in spec["tables"]]
    grpc_port, admin_port, metrics_port, prom_port = free_ports(4)
    server = start_server(args, tmp, procs, grpc_port, admin_port, metrics_port)
    pb, pb_grpc, admin_pb, admin_grpc = generate_stubs(tmp)
    address = f"127.0.0.1:{grpc_port}"
    wait_serving(server, address, t0)
    check_scrape(metrics_port)

    prometheus = start_prometheus(args, tmp, procs, metrics_port, prom_port)
    api = PrometheusApi(prom_port)
    traffic = Traffic(address, spec, pb, pb_grpc, args.seed)
    traffic.start()
    procs.append(traffic)

    problems = []
    hot_version = swap_hot_rows(admin_port, admin_pb, admin_grpc, tables[0], problems)
    wait_for_rules(server, prometheus, api, checks(tables, hot_version), problems)
    check_rules_healthy(api)
    check_alerts(api)
    check_dashboard(api)

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
