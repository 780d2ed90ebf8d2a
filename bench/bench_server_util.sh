# Shell helpers of the benchmarks that start a server and drive it with fuserank-bench
# (bench/run_overload_bench.sh, bench/run_refusal_floor.sh): source it after defining
# log(). Needs PY (a python3).

# bench_require FILE...: exits, naming the first FILE that is not an executable.
bench_require() {
  local f
  for f in "$@"; do
    [[ -x "$f" ]] || { log "$f is missing: build first (make build)"; exit 1; }
  done
}

# bench_model GEN MODEL: generates the bench model at MODEL with GEN unless it exists.
bench_model() {
  if [[ ! -f "$2" ]]; then
    log "generating the bench model"
    bash bench/models/gen_bench_model.sh "$1" "$2" >&2
  fi
}

# free_port: a loopback TCP port free now.
free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_listen PID PORT LOG: waits up to 120 s for PID to listen on PORT; exits, printing
# LOG, if PID exits first or the time runs out.
wait_listen() {
  for _ in $(seq 600); do
    (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return 0
    kill -0 "$1" 2>/dev/null || { log "the server exited:"; cat "$3" >&2; exit 1; }
    sleep 0.2
  done
  log "the server did not listen on $2 within 120 s"
  exit 1
}
