# Shared by the RESP benchmarks (bench/resp-*.sh): `source bench/lib.sh`
# from the repository's root, with ROOT set to it.
source scripts/lib.sh

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# resp_bench_setup NAME [PACKAGES…]: a fresh work folder $WORK
# ($BENCH_DIR or bench/work, then NAME and the time), redis-server,
# redis-benchmark and PACKAGES installed, the release nvdepot built: $NV.
resp_bench_setup() {
  local name=$1 missing=0 tool; shift
  WORK=${BENCH_DIR:-$ROOT/bench/work}/$name-$(date +%Y%m%d-%H%M%S)
  mkdir -p "$WORK"
  for tool in redis-server redis-benchmark "$@"; do command -v "$tool" >/dev/null || missing=1; done
  if [ "$missing" = 1 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q && apt-get install -y -q redis-server redis-tools "$@"
  fi
  ensure_cargo
  cargo build --release -q -p nvdepot
  NV=${CARGO_TARGET_DIR:-$ROOT/target}/release/nvdepot
}

# start_server SERVER PORT [SERVE OPTIONS…]: a fresh server alone, its pid
# in $pid, answering PING on return (status 1 if it never does). SERVER:
# redis-none (no persistence), redis-always (`appendfsync always`: durable
# on reply, as nvdepot is), nvdepot, or nvdepot-base ($NV_BASE, for A/B);
# the options go to `nvdepot serve` (default `--size 2G`).
start_server() {
  local server=$1 port=$2; shift 2
  local opts=("$@")
  [ ${#opts[@]} -gt 0 ] || opts=(--size 2G)
  rm -rf "${WORK:?}/$server"; mkdir -p "$WORK/$server"
  # SERVER_PIN (a core list): every server runs on those cores only
  # (taskset execs the server: $! stays its pid).
  local pin=()
  [ -z "${SERVER_PIN:-}" ] || pin=(taskset -c "$SERVER_PIN")
  case $server in
    redis-none) "${pin[@]}" redis-server --port "$port" --bind 127.0.0.1 --dir "$WORK/$server" --save '' --appendonly no >"$WORK/$server.log" 2>&1 & ;;
    redis-always) "${pin[@]}" redis-server --port "$port" --bind 127.0.0.1 --dir "$WORK/$server" --save '' --appendonly yes --appendfsync always >"$WORK/$server.log" 2>&1 & ;;
    nvdepot) "${pin[@]}" "$NV" serve --port "$port" --data "$WORK/$server/store" "${opts[@]}" 2>"$WORK/$server.log" & ;;
    nvdepot-base) "${pin[@]}" "$NV_BASE" serve --port "$port" --data "$WORK/$server/store" "${opts[@]}" 2>"$WORK/$server.log" & ;;
    *) echo "start_server: unknown server $server" >&2; return 1 ;;
  esac
  pid=$!
  for _ in $(seq 1 600); do
    if redis-cli -p "$port" ping >/dev/null 2>&1; then
      settle_store "$WORK/$server/store"
      return 0
    fi
    sleep 0.1
  done
  return 1
}

# settle_store DIR: fsync the files of a store nvdepot just created. Its
# data file was zero-filled with O_DIRECT writes, which this VM's disk
# holds in the host's cache: until a device flush has pushed them out,
# the server's first durable writes wait behind that whole backlog
# (bench/results/percore-profile.md, "A trap in the method"). No-op for
# redis-server (no such directory).
settle_store() {
  [ -d "$1" ] || return 0
  find "$1" -maxdepth 1 -type f -exec sync {} + 2>/dev/null || true
  sleep 1
}
