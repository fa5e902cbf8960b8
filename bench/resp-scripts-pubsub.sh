#!/usr/bin/env bash
# bench/resp-scripts-pubsub.sh -- scripts and Pub/Sub of `nvdepot serve`
# against redis-server on this machine, in one run, servers alternating
# (issue 37, Deliver 5):
#   redis-none    redis-server --appendonly no --save ''   (no persistence)
#   redis-always  redis-server --appendonly yes --appendfsync always
#   nvdepot       nvdepot serve (default --appendfsync always)
# Tests, with redis-benchmark at each concurrency, REPS times:
#   evalsha_read   EVALSHA of a 3-call read script (GET, EXISTS, TTL of a
#                  random key of 10 000 preloaded ones)
#   evalsha_write  EVALSHA of a 3-call script that writes (GET, INCR,
#                  EXPIRE): durable on reply here, so against redis-always
#   publish_S      PUBLISH of a 64-byte message to one channel with S
#                  subscribers (1, 10, 100), read by one Python process
#                  that drains every subscriber's socket
# usage: bash bench/resp-scripts-pubsub.sh          (c = 1 16, 3 reps)
#        QUICK=1 bash bench/resp-scripts-pubsub.sh  (c = 16, 1 rep)
#        NV_ARGS="--threads 1" OUT=… bash bench/resp-scripts-pubsub.sh
#        (more options for nvdepot serve: one worker, as redis-server runs
#        commands on one thread, on a machine whose other core runs
#        redis-benchmark)
#        PIN=1 QUICK=1 bash bench/resp-scripts-pubsub.sh
#        (per core, as bench/percore.sh measures: every server on core 1,
#        nvdepot with one worker; redis-benchmark and the subscribers'
#        process on core 0; output …-pinned[-quick].md)
# Output: bench/results/resp-scripts-pubsub[-quick].md, ending with
#   ratio script_vs_redis=… publish_vs_redis=…
# script_vs_redis: the LOWEST over concurrencies of evalsha_read /
# redis-none and evalsha_write / redis-always; publish_vs_redis: the
# LOWEST over subscriber counts and concurrencies of nvdepot / redis-none
# (goal >= 0.9 each).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QUICK=${QUICK:-0}
PIN=${PIN:-0}
PINNED=; [ "$PIN" = 1 ] && PINNED=-pinned
if [ "$QUICK" = 1 ]; then
  CONCS=(16) REPS=${REPS:-1} N=${N:-20000} OUT=${OUT:-$ROOT/bench/results/resp-scripts-pubsub$PINNED-quick.md}
else
  CONCS=(1 16) REPS=${REPS:-3} N=${N:-50000} OUT=${OUT:-$ROOT/bench/results/resp-scripts-pubsub$PINNED.md}
fi
SUBS=(1 10 100)
client=()
if [ "$PIN" = 1 ]; then
  export SERVER_PIN=${SERVER_CPU:-1}
  client=(taskset -c "${CLIENT_CPU:-0}")
  NV_ARGS=${NV_ARGS:---threads 1}
fi
PORT_BASE=${PORT_BASE:-26900}
source bench/lib.sh
resp_bench_setup scripts
pid= subpid=
finish() {
  [ -n "$subpid" ] && kill "$subpid" 2>/dev/null
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  wait 2>/dev/null || true; rm -rf "$WORK"/*/
}
trap finish EXIT

READ='redis.call("GET", KEYS[1]) redis.call("EXISTS", KEYS[1]) return redis.call("TTL", KEYS[1])'
WRITE='redis.call("GET", KEYS[1]) local n = redis.call("INCR", KEYS[1] .. ":n") redis.call("EXPIRE", KEYS[1] .. ":n", 3600) return n'

# SUBS PORT: a process draining S subscribers of channel `ch`.
subscribers() {
  "${client[@]}" python3 - "$1" "$2" <<'PY' &
import selectors, socket, sys
n, port = int(sys.argv[1]), int(sys.argv[2])
sel = selectors.DefaultSelector()
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"*2\r\n$9\r\nSUBSCRIBE\r\n$2\r\nch\r\n")
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
while True:
    for key, _ in sel.select():
        if not key.fileobj.recv(1 << 20):
            sys.exit(0)
PY
  subpid=$!
  for _ in $(seq 1 100); do
    [ "$(redis-cli -p "$2" pubsub numsub ch | tail -1)" = "$1" ] && return 0; sleep 0.1
  done
  return 1
}

bench() { # PORT C TEST-NAME COMMAND…: ops/s of redis-benchmark
  local port=$1 c=$2; shift 2; local name=$1; shift
  "${client[@]}" redis-benchmark -p "$port" -c "$c" -n "$N" -r 10000 --csv "$@" 2>/dev/null |
    tr -d '"' | grep -E '^[A-Za-z]' | tail -1 | cut -d, -f2
}

: >"$WORK/points.tsv"
port=$PORT_BASE
for rep in $(seq 1 "$REPS"); do
  for c in "${CONCS[@]}"; do
    for server in redis-none redis-always nvdepot; do
      port=$((port + 1))
      # shellcheck disable=SC2086
      start_server "$server" "$port" --size 2G ${NV_ARGS:-}
      redis-benchmark -p "$port" -c 8 -n 10000 -r 10000 -t set -q >/dev/null 2>&1
      r_sha=$(redis-cli -p "$port" script load "$READ")
      w_sha=$(redis-cli -p "$port" script load "$WRITE")
      rps=$(bench "$port" "$c" evalsha_read EVALSHA "$r_sha" 1 key:__rand_int__)
      printf '%s\t%s\t%s\tevalsha_read\t%s\n' "$server" "$c" "$rep" "$rps" >>"$WORK/points.tsv"
      rps=$(bench "$port" "$c" evalsha_write EVALSHA "$w_sha" 1 key:__rand_int__)
      printf '%s\t%s\t%s\tevalsha_write\t%s\n' "$server" "$c" "$rep" "$rps" >>"$WORK/points.tsv"
      for s in "${SUBS[@]}"; do
        subscribers "$s" "$port"
        rps=$(bench "$port" "$c" publish PUBLISH ch 0123456789012345678901234567890123456789012345678901234567890123)
        printf '%s\t%s\t%s\tpublish_%s\t%s\n' "$server" "$c" "$rep" "$s" "$rps" >>"$WORK/points.tsv"
        kill "$subpid" 2>/dev/null; wait "$subpid" 2>/dev/null || true; subpid=
      done
      rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
      kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
      log "$server c=$c rep $rep done (RSS ${rss} kB): $(grep -P "^$server\t$c\t$rep\t" "$WORK/points.tsv" | cut -f4,5 | tr '\t\n' '= ')"
    done
  done
done

python3 - "$WORK/points.tsv" "$OUT" "$N" "${CONCS[*]}" "$REPS" "${NV_ARGS:-}" "$PIN" <<'PY'
import sys, statistics, collections
pts = collections.defaultdict(list)
for line in open(sys.argv[1]):
    server, c, rep, test, rps = line.rstrip("\n").split("\t")
    if rps:
        pts[(server, int(c), test)].append(float(rps))
med = {k: statistics.median(v) for k, v in pts.items()}
tests = ["evalsha_read", "evalsha_write", "publish_1", "publish_10", "publish_100"]
concs = sorted({c for (_, c, _) in pts})
lines = ["# Scripts and Pub/Sub: nvdepot serve against redis-server", "",
         f"`bash bench/resp-scripts-pubsub.sh` (N={sys.argv[3]} requests per test, concurrency "
         f"{sys.argv[4]}, {sys.argv[5]} rep(s); medians in ops/s; ranges min-max"
         + (f"; nvdepot serve with `{sys.argv[6]}`" if sys.argv[6] else "")
         + ("; pinned: every server on core 1, redis-benchmark and the subscribers on core 0"
            if sys.argv[7] == "1" else "") + ").", "",
         "| test | c | redis-none | redis-always | nvdepot | nvdepot / redis-none | nvdepot / redis-always |",
         "|---|---|---|---|---|---|---|"]
script, publish = [], []
def cell(s, c, t):
    v = pts.get((s, c, t))
    return f"{statistics.median(v):.0f} ({min(v):.0f}-{max(v):.0f})" if v else "-"
for t in tests:
    for c in concs:
        a, b, n = (med.get((s, c, t)) for s in ("redis-none", "redis-always", "nvdepot"))
        if None in (a, b, n):
            continue
        lines.append(f"| {t} | {c} | {cell('redis-none', c, t)} | {cell('redis-always', c, t)} | "
                     f"{cell('nvdepot', c, t)} | {n / a:.2f} | {n / b:.2f} |")
        if t == "evalsha_read":
            script.append(n / a)
        elif t == "evalsha_write":
            script.append(n / b)
        else:
            publish.append(n / a)
ratio = f"ratio script_vs_redis={min(script):.2f} publish_vs_redis={min(publish):.2f}"
lines += ["", ratio, ""]
open(sys.argv[2], "w").write("\n".join(lines))
print("\n".join(lines))
PY
