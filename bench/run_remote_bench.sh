#!/usr/bin/env bash
# The storage: redis benchmark, run by `make bench` (bench/run_cpu_bench.sh calls it): the
# bench model served with 0%, ~10% and 100% of its embedding tables in a 3-master Redis
# Cluster of real redis-server processes on loopback (none; item_0 and item_1, 2 of the
# 18 item tables, about 11% of the lookups at 256 candidates; all 26 tables), each under
# Zipf 1.05 and 1.2 ids, closed loop at 256 candidates. Per run: qps, p50, p99 (from
# fuserank-bench), the near-cache hit rate (near / (near + remote + absent)) and remote
# round trips per fetching batch, read from the server's /metrics after the run. The
# cluster's tables are loaded with fuserank-load-redis. Writes bench/out/remote/*.json and
# the section of docs/benchmarks.md between the remote-bench markers.
#
# usage: bench/run_remote_bench.sh   env: BUILD=build DURATION=10 WARMUP=6 CANDIDATES=256
#        QUICK=1 (short runs; docs/benchmarks.md left alone)
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
PY=/usr/bin/python3
OUT=bench/out/remote
MODEL=bench/out/model/bench.yaml
BENCH=$BUILD/bin/fuserank-bench
SERVER=$BUILD/bin/fuserank-server
LOADER=$BUILD/bin/fuserank-load-redis
GEN=$BUILD/bin/fuserank-gen-model
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-6}  # at ~190 requests/s (the slowest cell) > 1,000: the pool (512) twice
CANDIDATES=${CANDIDATES:-256}
WRITE_DOCS=1
if [[ "${QUICK:-0}" == 1 ]]; then DURATION=2 WARMUP=1 WRITE_DOCS=0; fi

log() { echo "run_remote_bench: $*" >&2; }
for f in "$BENCH" "$SERVER" "$LOADER"; do
  [[ -x "$f" ]] || { log "$f is missing: build first (make build)"; exit 1; }
done
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
  log "redis-server / redis-cli missing (scripts/install-deps.sh installs them)"; exit 1
fi
[[ -f "$MODEL" ]] || bash bench/models/gen_bench_model.sh "$GEN" "$MODEL" >&2
rm -rf "$OUT"
mkdir -p "$OUT/cluster" "$OUT/results"

PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT
free_port() {  # a port whose cluster bus port (+10000) is free too
  "$PY" -c '
import socket
while True:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close()
    if p + 10000 > 65535: continue
    b = socket.socket()
    try:
        b.bind(("127.0.0.1", p + 10000)); b.close(); print(p); break
    except OSError:
        b.close()'
}
wait_port() {
  for _ in $(seq 600); do
    if ! kill -0 "$1" 2>/dev/null; then return 1; fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then return 0; fi
    sleep 0.2
  done
  return 1
}

STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
LOADAVG_START=$(cut -d' ' -f1-3 /proc/loadavg)
# The cluster: 3 masters, no persistence.
SEEDS=()
for i in 0 1 2; do
  port=$(free_port)
  mkdir -p "$OUT/cluster/node$i"
  redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes \
    --cluster-config-file nodes.conf --dir "$OUT/cluster/node$i" --save "" --appendonly no \
    --logfile redis.log >/dev/null 2>&1 &
  PIDS+=("$!")
  wait_port "$!" "$port" || { log "redis-server on $port did not start"; exit 1; }
  SEEDS+=("127.0.0.1:$port")
done
redis-cli --cluster create "${SEEDS[@]}" --cluster-yes >"$OUT/cluster/create.log" 2>&1
for _ in $(seq 200); do
  redis-cli -p "${SEEDS[0]##*:}" cluster info | grep -q cluster_state:ok && break
  sleep 0.1
done
SEED_LIST=$(IFS=,; echo "${SEEDS[*]}")
SEED_YAML="[\"$(IFS=,; echo "${SEEDS[*]}" | sed 's/,/", "/g')\"]"

# Every table in the cluster once (the variants read the ones they name).
WEIGHTS=bench/out/model/bench.safetensors
for table in $("$PY" -c 'import yaml,sys; print(" ".join(t["name"] for t in yaml.safe_load(open(sys.argv[1]))["tables"]))' "$MODEL"); do
  "$LOADER" --seed_nodes="$SEED_LIST" --table="$table" --safetensors="$WEIGHTS" \
    >>"$OUT/load.log" 2>>"$OUT/load.err" || { log "loading $table failed: $OUT/load.err"; exit 1; }
done
log "tables loaded: $(grep -c 'rows written' "$OUT/load.log") ($OUT/load.log)"

declare -A VARIANT=([local]="" [tables_11pct]="item_0,item_1" [all]="all")
# measure NAME ZIPF SEED TRAFFIC PORT METRICS_PORT: one measured window of fuserank-bench
# (the pool of SEED) and the server's tier counters over it, into results/NAME_zZIPF_TRAFFIC.json.
measure() {
  local name=$1 zipf=$2 seed=$3 traffic=$4 port=$5 metrics=$6
  local result=$OUT/results/${name}_zipf${zipf}_${traffic}.json
  curl -s "http://127.0.0.1:$metrics/metrics" >"$result.metrics0"
  if "$BENCH" --model="$MODEL" --target="127.0.0.1:$port" --candidates="$CANDIDATES" \
    --zipf="$zipf" --concurrency=4 --duration="$DURATION" --warmup=1 --seed="$seed" --json \
    2>>"$OUT/bench.err" | tail -n 1 >"$result.bench"; then
    curl -s "http://127.0.0.1:$metrics/metrics" >"$result.metrics"
    "$PY" - "$result.bench" "$result.metrics0" "$result.metrics" "$name" "$zipf" "$traffic" \
      >"$result" <<'PYEOF'
import json, re, sys
bench = json.load(open(sys.argv[1]))
before, after = open(sys.argv[2]).read(), open(sys.argv[3]).read()
def total(pattern):
    get = lambda text: sum(float(m.group(1))
                           for m in re.finditer(pattern + r"\S* (\S+)$", text, re.M))
    return get(after) - get(before)
tiers = {t: total(r'^fuserank_embedding_tier_lookups_total\{[^}]*tier="%s"' % t)
         for t in ("near", "remote", "absent")}
lookups = sum(tiers.values())
fetches = total(r"^fuserank_remote_fetches_total")
trips = total(r"^fuserank_remote_round_trips_total")
print(json.dumps({"variant": sys.argv[4], "zipf": float(sys.argv[5]), "traffic": sys.argv[6],
                  "qps": bench["qps"], "ok": bench["ok"], "p50_ms": bench["p50_ms"], "p99_ms": bench["p99_ms"],
                  "near_hit_rate": tiers["near"] / lookups if lookups else None,
                  "round_trips_per_fetch": trips / fetches if fetches else None,
                  "fetches": fetches}))
PYEOF
    log "$name zipf $zipf $traffic: $(cat "$result")"
  else
    log "fuserank-bench failed ($name, zipf $zipf, $traffic): $OUT/bench.err"
  fi
}

for name in local tables_11pct all; do
  spec=$MODEL
  if [[ -n "${VARIANT[$name]}" ]]; then
    spec=$OUT/$name.yaml
    "$PY" bench/remote_variant.py "$MODEL" "$spec" "${VARIANT[$name]}"
  fi
  for zipf in 1.05 1.2; do
    port=$(free_port)
    metrics=$(free_port)
    config=$OUT/$name-server.yaml
    cat >"$config" <<YAML
# Written by bench/run_remote_bench.sh.
server: {listen: "127.0.0.1:$port", admin_listen: "127.0.0.1:$(free_port)", metrics_listen: "127.0.0.1:$metrics"}
engine: {device: cpu}
model: {path: $spec}
remote: {seed_nodes: $SEED_YAML, near_cache_rows: 262144, near_cache_ttl_ms: 600000, fetch_deadline_ms: 200}
logging: {level: warn}
YAML
    "$SERVER" --config "$config" >>"$OUT/server.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    wait_port "$pid" "$port" || { log "server ($name) did not start: $OUT/server.log"; exit 1; }
    # The bench reads the local spec: the same tables and rows, whatever their storage. A
    # first run warms the near cache: the measured run's own pool of requests (same seed),
    # long enough to send each of them at least once, so the first measured window meets a
    # warm cache (every key it asks for seen once). The second measured window sends a new
    # pool (another seed) from the same Zipf law: its hot keys are cached, its tail keys are
    # first sightings and fetched. The counters are read before and after each window.
    "$BENCH" --model="$MODEL" --target="127.0.0.1:$port" --candidates="$CANDIDATES" \
      --zipf="$zipf" --concurrency=4 --duration="$WARMUP" --warmup=0 --seed=1 \
      >/dev/null 2>>"$OUT/bench.err" || true
    measure "$name" "$zipf" 1 replayed "$port" "$metrics"
    measure "$name" "$zipf" 3 new "$port" "$metrics"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
done

if [[ "$WRITE_DOCS" == 1 ]]; then
  "$PY" - "$OUT/results" docs/benchmarks.md "$CANDIDATES" "$DURATION" "$STARTED" "$LOADAVG_START" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PYEOF'
import glob, json, os, subprocess, sys, time
results, doc, candidates, duration, started, load_start, load_end = sys.argv[1:8]
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip() or "unknown"
if subprocess.run(["git", "diff", "--quiet", "HEAD"]).returncode != 0:
    commit += "+dirty"
sys.path.insert(0, "bench")
from machine import cpu_model as cpu
rows = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(results, "*.json")))]
order = {"local": 0, "tables_11pct": 1, "all": 2}
label = {"local": "0% (all local)", "tables_11pct": "~11% (item_0, item_1)", "all": "100% (all 26 tables)"}
traffic_order = {"replayed": 0, "new": 1}
traffic_label = {"replayed": "replayed pool (every key seen)", "new": "new pool (tail keys first seen)"}
rows.sort(key=lambda r: (r["zipf"], traffic_order[r["traffic"]], order[r["variant"]]))
local_p99 = {(r["zipf"], r["traffic"]): r["p99_ms"] for r in rows if r["variant"] == "local"}
fmt = lambda v, f: "-" if v is None else f % v
lines = ["<!-- remote-bench:begin -->",
         "Generated by `bench/run_remote_bench.sh` (`make bench`) from %s to %s, commit %s, load "
         "average %s at the start and %s at the end, on %s, %d cores; closed loop, "
         "4 calls in flight, %s candidates, %s s measured per window; near cache 262144 rows per "
         "table, TTL 600 s. Each server is warmed with the first window's pool of 512 requests, "
         "then measured twice: that pool replayed (a warm near cache), then a new pool from the "
         "same Zipf law (seed 3), whose tail keys the cache has not seen. The counters are "
         "those of each measured window." % (
             started, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), commit, load_start, load_end,
             cpu(),
             os.cpu_count(), candidates, duration),
         "",
         "| Zipf | traffic | remote share of lookups | qps | calls | p50 ms | p99 ms | p99 / all-local | near-cache hit rate | round trips per fetching batch |",
         "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
for r in rows:
    base = local_p99.get((r["zipf"], r["traffic"]))
    ratio = "-" if r["variant"] == "local" or not base else "%.2fx" % (r["p99_ms"] / base)
    lines.append("| %s | %s | %s | %.1f | %s | %.2f | %.2f | %s | %s | %s |" % (
        r["zipf"], traffic_label[r["traffic"]], label[r["variant"]], r["qps"], r.get("ok", "-"), r["p50_ms"],
        r["p99_ms"], ratio, fmt(r["near_hit_rate"], "%.3f"),
        fmt(r["round_trips_per_fetch"], "%.2f")))
lines.append("<!-- remote-bench:end -->")
text = open(doc).read()
begin, end = "<!-- remote-bench:begin -->", "<!-- remote-bench:end -->"
if begin in text:
    text = text[:text.index(begin)] + "\n".join(lines) + text[text.index(end) + len(end):]
else:
    text += "\n## Remote tables (storage: redis)\n\n" + "\n".join(lines) + "\n"
open(doc, "w").write(text)
PYEOF
  log "docs/benchmarks.md updated"
fi
log "done: $OUT/results"
