#!/usr/bin/env bash
# Two builds of fuserank side by side on this machine, taking turns (never at once): the
# CPU engine's Run() at 16, 256 and 1024 candidates on one thread, on the same ISA in both
# (ISA=generic, the default: the 128-bit path, forced with FUSERANK_CPU_ISA=generic, or
# FUSERANK_CPU_GENERIC=1 in trees from before run-time ISA dispatch; ISA=native: each
# build's own choice, which differs between builds), and the whole server through gRPC
# (closed loop, 4 in flight, 16 and 256 candidates) with each build's default engine and
# ISA. Prints a Markdown table of medians, ranges and ratios, and the ISA label each
# engine run reported (a build without dispatch reports none). For
# checking that a change of structure left the figures alone (docs/benchmarks.md, "Two
# builds side by side").
#
# usage: BEFORE=<build dir> bench/run_build_compare.sh   (AFTER defaults to build)
# env:   ROUNDS=3 DURATION=8 MODEL=bench/out/model/bench.yaml (generated when missing)
#        ISA=generic (or native)
#        BEFORE needs bin/fuserank-server and bin/fuserank-microbench; AFTER also
#        bin/fuserank-bench, which drives both servers.
set -euo pipefail
cd "$(dirname "$0")/.."

BEFORE=${BEFORE:?set BEFORE to the build directory of the older tree}
AFTER=${AFTER:-build}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8}
MODEL=${MODEL:-bench/out/model/bench.yaml}
ISA=${ISA:-generic}
PY=/usr/bin/python3
OUT=bench/out/build_compare
log() { echo "run_build_compare: $*" >&2; }
for f in "$BEFORE/bin/fuserank-server" "$BEFORE/bin/fuserank-microbench" \
  "$AFTER/bin/fuserank-server" "$AFTER/bin/fuserank-microbench" "$AFTER/bin/fuserank-bench"; do
  [[ -x "$f" ]] || { log "$f is missing"; exit 1; }
done
[[ -f "$MODEL" ]] || bash bench/models/gen_bench_model.sh "$AFTER/bin/fuserank-gen-model" "$MODEL" >&2
rm -rf "$OUT"
mkdir -p "$OUT"
PID=""
trap '[[ -n "$PID" ]] && kill "$PID" 2>/dev/null || true' EXIT
free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# Without ISA dispatch the argument list ends in real_time; with it, isa:0 is the
# process's choice, which the environment below forces to the generic path.
FILTER='BM_EngineRun/candidates:(16|256|1024)/threads:1/(real_time|isa:0)$'
case $ISA in
  generic) ISA_ENV=(FUSERANK_CPU_ISA=generic FUSERANK_CPU_GENERIC=1) ;;
  native) ISA_ENV=() ;;
  *) log "ISA must be generic or native, not '$ISA'"; exit 1 ;;
esac

for round in $(seq "$ROUNDS"); do
  for side in before after; do
    dir=$BEFORE
    [[ $side == after ]] && dir=$AFTER
    env "${ISA_ENV[@]}" "$dir/bin/fuserank-microbench" --benchmark_filter="$FILTER" --benchmark_min_time=0.5 \
      --benchmark_format=json >"$OUT/micro_${side}_$round.json" 2>>"$OUT/micro.err"
    port=$(free_port)
    cat >"$OUT/server_$side.yaml" <<YAML
# Written by bench/run_build_compare.sh.
server: {listen: "127.0.0.1:$port", admin_listen: "", metrics_listen: ""}
engine: {device: cpu}
model: {path: $PWD/$MODEL}
logging: {level: warn}
YAML
    "$dir/bin/fuserank-server" --config "$OUT/server_$side.yaml" >>"$OUT/server_$side.log" 2>&1 &
    PID=$!
    for _ in $(seq 600); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
      kill -0 "$PID" 2>/dev/null || { log "the $side server did not start: $OUT/server_$side.log"; exit 1; }
      sleep 0.1
    done
    for c in 16 256; do
      "$AFTER/bin/fuserank-bench" --model="$MODEL" --target="127.0.0.1:$port" --candidates="$c" \
        --concurrency=4 --duration="$DURATION" --warmup=2 --json 2>>"$OUT/bench.err" |
        tail -n 1 >"$OUT/service_${side}_${c}_$round.json"
    done
    kill "$PID"
    wait "$PID" 2>/dev/null || true
    PID=""
    log "round $round, $side: done"
  done
done

"$PY" - "$OUT" "$ISA" <<'PYEOF'
import glob, json, os, statistics, sys
out, isa = sys.argv[1:]
res = {}
labels = {}
for side in ("before", "after"):
    for f in sorted(glob.glob(os.path.join(out, "micro_%s_*.json" % side))):
        for b in json.load(open(f))["benchmarks"]:
            c = b["name"].split("candidates:")[1].split("/")[0]
            scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3}[b["time_unit"]]
            labels.setdefault(side, set()).add(b.get("label") or "no label")
            res.setdefault(("engine Run() us, ISA=%s" % isa, int(c), side), []).append(b["real_time"] * scale)
    for f in sorted(glob.glob(os.path.join(out, "service_%s_*.json" % side))):
        c = int(os.path.basename(f).split("_")[2])
        j = json.load(open(f))
        res.setdefault(("service requests/s", c, side), []).append(j["qps"])
        res.setdefault(("service p99 ms", c, side), []).append(j["p99_ms"])
print("Engine ISA as each run reported it: before %s; after %s (FUSERANK_CPU_ISA=%s)." % (
    ", ".join(sorted(labels.get("before", []))) or "-", ", ".join(sorted(labels.get("after", []))) or "-", isa))
print()
print("| measure | candidates | before: median (range) | after: median (range) | after / before |")
print("| --- | ---: | ---: | ---: | ---: |")
for m, c in sorted({(k[0], k[1]) for k in res}):
    b, a = res.get((m, c, "before"), []), res.get((m, c, "after"), [])
    if not b or not a:
        continue
    mb, ma = statistics.median(b), statistics.median(a)
    print("| %s | %d | %.1f (%.1f-%.1f) | %.1f (%.1f-%.1f) | %.2f |" % (
        m, c, mb, min(b), max(b), ma, min(a), max(a), ma / mb))
PYEOF
