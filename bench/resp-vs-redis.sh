#!/usr/bin/env bash
# bench/resp-vs-redis.sh -- nvdepot serve against redis-server on this
# machine, over 127.0.0.1, in one run, servers alternating:
#   redis-none    redis-server --appendonly no --save ''   (no persistence)
#   redis-always  redis-server --appendonly yes --appendfsync always
#   nvdepot       nvdepot serve --cache-mb 1024 (default --appendfsync
#                 always: durable; the DRAM tier holds the hot data);
#                 NV_THREADS=N adds --threads N (default: one worker per
#                 core). On 2026-11-24, NV_THREADS=1 gave GET 0.84x
#                 redis-none at 4 clients (2 workers: 0.63x; perf showed
#                 finish_task_switch at 31 % of the server's samples) but
#                 0.66x at 128 (2 workers: 0.85x): no overall win, so the
#                 default stays.
# Hot scenario only (the data fits in RAM): redis-benchmark SET and GET,
# 1 KiB values over 100 000 random keys, at each concurrency, REPS times.
# Then RSS per key: 1 000 000 keys of 100 bytes loaded with redis-cli
# --pipe into redis-none and into nvdepot serve --cache-mb 0.
#
# usage: bash bench/resp-vs-redis.sh            (full: concurrency 1 4 16 64 128, 3 reps)
#        QUICK=1 bash bench/resp-vs-redis.sh    (1 16 128, 1 rep, 200 k keys for RSS)
# Output: a table, then
#   ratio get_vs_redis=… set_vs_redis_always=… big_get_vs_device=n/a rss_per_key_vs_redis=…
# where get_vs_redis is the LOWEST over the concurrencies of nvdepot GET/s
# / redis-none GET/s, set_vs_redis_always the LOWEST of nvdepot SET/s /
# redis-always SET/s (both durable on reply), rss_per_key_vs_redis nvdepot
# RSS bytes per key / redis-none's (the goal is <= 1/8). The big scenario
# (data larger than an equal memory budget) is not measured by this
# script yet. Results: bench/results/resp-vs-redis[-quick].md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
  CONCS=(1 16 128) REPS=${REPS:-1} RSS_KEYS=${RSS_KEYS:-200000} PREFIX=$ROOT/bench/results/resp-vs-redis-quick
else
  CONCS=(1 4 16 64 128) REPS=${REPS:-3} RSS_KEYS=${RSS_KEYS:-1000000} PREFIX=$ROOT/bench/results/resp-vs-redis
fi
PORT_BASE=${PORT_BASE:-26500}
WORK=${BENCH_DIR:-$ROOT/bench/work}/resp-$(date +%Y%m%d-%H%M%S)
mkdir -p "$WORK"
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null || {
  export DEBIAN_FRONTEND=noninteractive; apt-get update -q; apt-get install -y -q redis-server redis-tools; }
source scripts/lib.sh
ensure_cargo
cargo build --release -q -p nvdepot
NV=${CARGO_TARGET_DIR:-$ROOT/target}/release/nvdepot
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

start_redis() { # NAME PORT ARGS...
  local name=$1 port=$2; shift 2
  mkdir -p "$WORK/$name"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$WORK/$name" --save '' "$@" \
    >"$WORK/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
  return 1
}
start_nvdepot() { # NAME PORT ARGS...
  local name=$1 port=$2; shift 2
  "$NV" serve --port "$port" --data "$WORK/$name" --size 4G "$@" 2>"$WORK/$name.log" &
  pids+=($!)
  for _ in $(seq 1 600); do redis-cli -p "$port" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
  return 1
}

declare -A PORT=([redis-none]=$PORT_BASE [redis-always]=$((PORT_BASE + 1)) [nvdepot]=$((PORT_BASE + 2)))
start_redis redis-none "${PORT[redis-none]}" --appendonly no
start_redis redis-always "${PORT[redis-always]}" --appendonly yes --appendfsync always
# The hot scenario's data fits in DRAM: nvdepot gets a DRAM tier that
# holds it (every value is also on the device).
start_nvdepot nvdepot "${PORT[nvdepot]}" --cache-mb 1024 ${NV_THREADS:+--threads "$NV_THREADS"}
: >"$WORK/points.tsv"
for rep in $(seq 1 "$REPS"); do
  for c in "${CONCS[@]}"; do
    for server in redis-none redis-always nvdepot; do
      n=$(( c < 16 ? 20000 : 100000 ))
      out=$(redis-benchmark -p "${PORT[$server]}" -c "$c" -n "$n" -d 1024 -r 100000 \
            -t set,get --csv 2>/dev/null | tr -d '"' | grep -E '^(SET|GET),')
      while IFS=, read -r test rps avg _min p50 _p95 p99 _max; do
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$server" "$c" "$rep" "$test" "$rps" "$p50" "$p99" >>"$WORK/points.tsv"
        log "$server c=$c rep $rep: $test $rps/s p50 ${p50} ms"
      done <<<"$out"
    done
  done
done

# RSS per key: KEYS keys of 100 bytes through redis-cli --pipe.
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
load_keys() { # PORT
  python3 - "$RSS_KEYS" <<'PY' | redis-cli -p "$1" --pipe >/dev/null
import sys
n = int(sys.argv[1]); v = b"v" * 100; out = sys.stdout.buffer
for i in range(n):
    k = b"rss:%010d" % i
    out.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v))
PY
}
: >"$WORK/rss.tsv"
start_redis rss-redis $((PORT_BASE + 3)) --appendonly no
rpid=${pids[-1]}
start_nvdepot rss-nvdepot $((PORT_BASE + 4)) --cache-mb 0
npid=${pids[-1]}
for entry in "redis-none $((PORT_BASE + 3)) $rpid" "nvdepot $((PORT_BASE + 4)) $npid"; do
  set -- $entry
  before=$(rss_kb "$3"); load_keys "$2"; after=$(rss_kb "$3")
  keys=$(redis-cli -p "$2" dbsize)
  printf '%s\t%s\t%s\t%s\n' "$1" "$keys" "$before" "$after" >>"$WORK/rss.tsv"
  log "rss $1: $keys keys, RSS $before -> $after KiB"
done

python3 - "$WORK" "$PREFIX" "$QUICK" <<'PY'
import sys, statistics, collections
work, prefix, quick = sys.argv[1], sys.argv[2], sys.argv[3]
pts = collections.defaultdict(list)
lat = {}
for line in open(f"{work}/points.tsv"):
    server, c, rep, test, rps, p50, p99 = line.split("\t")
    pts[(server, int(c), test)].append(float(rps))
    lat[(server, int(c), test, rep)] = (p50, p99.strip())
concs = sorted({c for (_, c, _) in pts})
med = {k: statistics.median(v) for k, v in pts.items()}
rows = ["| server | concurrency | SET/s median (min-max) | GET/s median (min-max) |", "|---|---|---|---|"]
for server in ("redis-none", "redis-always", "nvdepot"):
    for c in concs:
        cell = lambda t: (f"{med[(server, c, t)]:.0f} ({min(pts[(server, c, t)]):.0f}-{max(pts[(server, c, t)]):.0f})"
                          if (server, c, t) in med else "-")
        rows.append(f"| {server} | {c} | {cell('SET')} | {cell('GET')} |")
def low(num, den, t):
    r = [(med[(num, c, t)] / med[(den, c, t)], c) for c in concs if (num, c, t) in med and (den, c, t) in med]
    return min(r) if r else (None, None)
get_r, get_c = low("nvdepot", "redis-none", "GET")
set_r, set_c = low("nvdepot", "redis-always", "SET")
rss = {}
for line in open(f"{work}/rss.tsv"):
    server, keys, before, after = line.split("\t")
    keys = int(keys)
    rss[server] = (int(after) - int(before)) * 1024 / keys if keys else None
rss_rows = ["| server | bytes of RSS per key |", "|---|---|"] + [f"| {s} | {v:.1f} |" for s, v in rss.items() if v]
rss_r = rss.get("nvdepot") / rss["redis-none"] if rss.get("nvdepot") and rss.get("redis-none") else None
f = lambda x: "n/a" if x is None else f"{x:.2f}"
ratio = (f"ratio get_vs_redis={f(get_r)} set_vs_redis_always={f(set_r)} "
         f"big_get_vs_device=n/a rss_per_key_vs_redis={f(rss_r)}")
doc = ["# nvdepot serve vs redis-server: " + ("QUICK run" if quick == "1" else "full run"), "",
       "Generated by bench/resp-vs-redis.sh: redis-benchmark -t set,get -d 1024 -r 100000 at each "
       "concurrency; redis-none = no persistence, redis-always = appendfsync always; nvdepot serve "
       "in its default durable mode. get_vs_redis = lowest nvdepot/redis-none GET ratio over the "
       f"concurrencies (at {get_c}); set_vs_redis_always = lowest nvdepot/redis-always SET ratio "
       f"(at {set_c}); big scenario not measured yet.", ""] + rows + ["", "## RSS per key (100-byte values; nvdepot --cache-mb 0)", ""] + rss_rows + ["", "```", ratio, "```", ""]
open(prefix + ".md", "w").write("\n".join(doc))
print("\n".join(rows + [""] + rss_rows))
print(ratio)
PY
