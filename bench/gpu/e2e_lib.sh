# Shared by server_e2e.sh and server_sweep.sh: their environment, starting
# fuserank-server on a generated config and stopping every server started. Source it; it
# sets ROOT, BIN, DEVICE (E2E_DEVICE, default cuda), WORK (made if missing), PORT
# (PORT_BASE, default $DEFAULT_PORT), failed=0, and defines pids, START_ERROR, log, serve
# and stop_all, and an EXIT trap that stops the servers.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${BIN:?set BIN to the folder of fuserank-server and the tools}
DEVICE=${E2E_DEVICE:-cuda}
WORK=${WORK:-$(mktemp -d /tmp/fuserank-e2e.XXXXXX)}
PORT=${PORT_BASE:-$DEFAULT_PORT}
mkdir -p "$WORK"
failed=0
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null' EXIT

log() { echo "$(basename "$0" .sh): $*" >&2; }

# serve NAME DEVICE MODEL PORT [ENGINE_KEYS]: starts a server in the background and waits
# until it listens (metrics on PORT + 1). ENGINE_KEYS: the `engine:` keys beside device,
# in flow style (default "streams: 4"; say "streams: 8, max_batch_wait_us: 0").
# WATCH_SECONDS (0: off) and LOG_LEVEL (warn) set model.watch_interval_seconds and
# logging.level; CACHE_KEYS (none) the `cache:` keys, in flow style. On failure: returns 1
# with START_ERROR set.
serve() {
  local name=$1 device=$2 model=$3 port=$4 engine=${5:-streams: 4}
  cat >"$WORK/$name.config.yaml" <<YAML
server: {listen: "127.0.0.1:$port", admin_listen: "", metrics_listen: "127.0.0.1:$((port + 1))"}
engine: {device: $device, $engine}
model: {path: "$model", watch_interval_seconds: ${WATCH_SECONDS:-0}}
logging: {level: ${LOG_LEVEL:-warn}}
YAML
  if [[ -n ${CACHE_KEYS:-} ]]; then echo "cache: {$CACHE_KEYS}" >>"$WORK/$name.config.yaml"; fi
  "$BIN/fuserank-server" --config "$WORK/$name.config.yaml" >"$WORK/$name.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 1 600); do
    if ! kill -0 "$pid" 2>/dev/null; then
      START_ERROR="$name exited: $(tail -n 1 "$WORK/$name.log" | cut -c1-400)"
      log "$START_ERROR"
      return 1
    fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  START_ERROR="$name does not listen on $port after 60 s"
  log "$START_ERROR"
  return 1
}

stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  pids=()
}
