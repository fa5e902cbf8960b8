#!/usr/bin/env bash
# bench/resp-vs-redis.sh -- nvdepot serve against redis-server on this
# machine, over 127.0.0.1, in one run, servers alternating:
#   redis-none    redis-server --appendonly no --save ''   (no persistence)
#   redis-always  redis-server --appendonly yes --appendfsync always
#   nvdepot       nvdepot serve --cache-mb 1024 (default --appendfsync
#                 always: durable; the DRAM tier holds the hot data);
#                 NV_THREADS=N adds --threads N (default: one worker per
#                 core). One worker wins the hot scenario on this 2-core
#                 machine and loses the big one (A/B runs and profiles:
#                 bench/results/resp-vs-redis-profile.md).
# hot  (the data fits in RAM): redis-benchmark SET and GET, 1 KiB values
#      over 100 000 random keys, at each concurrency, REPS times.
# big  (data 4x an equal memory budget, BUDGET_MB, default 256, QUICK 128):
#      each server alone in shared/harness/in_memcg.sh with that budget,
#      preloaded with BUDGET_MB*4 Ki keys of 1 KiB by `nvdepot bench resp`,
#      then GETs of uniformly random preloaded keys at BIG_CONCS (16 64;
#      QUICK 64) connections: redis-server --maxmemory 90 % of the budget
#      --maxmemory-policy allkeys-lru (it can only evict: its hit ratio is
#      reported) and nvdepot serve --cache-mb half the budget; then fio
#      4 KiB randread at the same queue depths on a file of the data's size.
# rss  1 000 000 keys of 100 bytes loaded with redis-cli --pipe into
#      redis-none and into nvdepot serve --cache-mb 0.
#
# usage: bash bench/resp-vs-redis.sh            (full: concurrency 1 4 16 64 128, 3 reps)
#        QUICK=1 bash bench/resp-vs-redis.sh    (1 16 128, 1 rep, 200 k keys for RSS)
#        SKIP="big rss" ...                      (leave scenarios out)
# Output: a table, then
#   ratio get_vs_redis=… set_vs_redis_always=… big_get_vs_device=… rss_per_key_vs_redis=…
# where get_vs_redis is the LOWEST over the concurrencies of nvdepot GET/s
# / redis-none GET/s, set_vs_redis_always the LOWEST of nvdepot SET/s /
# redis-always SET/s (both durable on reply), big_get_vs_device the LOWEST
# over BIG_CONCS of nvdepot's big GET hits/s / fio IOPS at that queue
# depth (goal >= 0.9), rss_per_key_vs_redis nvdepot RSS bytes per key /
# redis-none's (the goal is <= 1/8). Results:
# bench/results/resp-vs-redis[-quick].{md,png}.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
  CONCS=(1 16 128) REPS=${REPS:-1} RSS_KEYS=${RSS_KEYS:-200000} PREFIX=$ROOT/bench/results/resp-vs-redis-quick
  BUDGET_MB=${BUDGET_MB:-128} BIG_CONCS=(64) SECS=${SECS:-8}
else
  CONCS=(1 4 16 64 128) REPS=${REPS:-3} RSS_KEYS=${RSS_KEYS:-1000000} PREFIX=$ROOT/bench/results/resp-vs-redis
  BUDGET_MB=${BUDGET_MB:-256} BIG_CONCS=(16 64) SECS=${SECS:-15}
fi
SKIP=${SKIP:-}
skipped() { [[ " $SKIP " == *" $1 "* ]]; }
HARNESS=$ROOT/../shared/harness
BIG_KEYS=$(( BUDGET_MB * 4 * 1024 ))
PORT_BASE=${PORT_BASE:-26500}
source bench/lib.sh
resp_bench_setup resp
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
# On exit: stop the servers, then drop their data directories (several GB
# of preallocated stores and AOF files); the logs and tables stay.
finish() {
  cleanup
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  find "$WORK" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
}
trap finish EXIT

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
: >"$WORK/points.tsv"
if ! skipped hot; then
start_redis redis-none "${PORT[redis-none]}" --appendonly no
start_redis redis-always "${PORT[redis-always]}" --appendonly yes --appendfsync always
# The hot scenario's data fits in DRAM: nvdepot gets a DRAM tier that
# holds it (every value is also on the device).
start_nvdepot nvdepot "${PORT[nvdepot]}" --cache-mb 1024 ${NV_THREADS:+--threads "$NV_THREADS"}
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
cleanup; pids=()
fi

# ---- big: data 4x an equal memory budget -----------------------------------
: >"$WORK/big.tsv"
cg_dir() { if [ -f /sys/fs/cgroup/cgroup.controllers ]; then echo "/sys/fs/cgroup/nvbench-$1"
           else echo "/sys/fs/cgroup/memory/nvbench-$1"; fi; }
big_run() { # SERVER PORT: preload, then GETs at each BIG_CONCS
  local server=$1 port=$2 c json
  "$NV" bench resp --server "127.0.0.1:$port" --keys "$BIG_KEYS" --value-size 1024 \
    --connections 16 --preload --preload-pipeline 16 --requests 0 >"$WORK/big-$server-preload.out" 2>&1 ||
    log "big $server: preload: $(tail -1 "$WORK/big-$server-preload.out")"
  log "big $server: $(grep '^preload:' "$WORK/big-$server-preload.out" || echo 'no preload line')"
  for c in "${BIG_CONCS[@]}"; do
    json=$WORK/big-$server-c$c.json
    if "$NV" bench resp --server "127.0.0.1:$port" --keys "$BIG_KEYS" --value-size 1024 \
        --connections "$c" --ratio 1:0 --duration "$SECS" --json "$json" >"$WORK/big-$server-c$c.out" 2>&1 ||
        [ -s "$json" ]; then
      python3 - "$json" "$server" "$c" >>"$WORK/big.tsv" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["run"]
print(f"{sys.argv[2]}\t{sys.argv[3]}\t{r['gets'] / r['seconds']:.0f}\t{r['hit_ratio']}\t{r['errors']}")
PY
      log "big $server c=$c: $(grep '^run:' "$WORK/big-$server-c$c.out" | cut -d: -f2) $(grep -o 'hit ratio [0-9.]*' "$WORK/big-$server-c$c.out")"
    else
      log "big $server c=$c failed: $(tail -1 "$WORK/big-$server-c$c.out")"
    fi
  done
}
if ! skipped big; then
  data_mb=$(( BIG_KEYS / 1024 ))
  log "big: budget $BUDGET_MB MiB, $BIG_KEYS keys x 1 KiB (~$data_mb MiB)"
  rmdir "$(cg_dir resp-redis-big)" 2>/dev/null || true
  mkdir -p "$WORK/redis-big"
  "$HARNESS/in_memcg.sh" "${BUDGET_MB}M" resp-redis-big -- redis-server --port $((PORT_BASE + 5)) \
    --bind 127.0.0.1 --dir "$WORK/redis-big" --save '' --appendonly no \
    --maxmemory "$(( BUDGET_MB * 9 / 10 ))mb" --maxmemory-policy allkeys-lru >"$WORK/redis-big.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do redis-cli -p $((PORT_BASE + 5)) ping >/dev/null 2>&1 && break; sleep 0.1; done
  big_run redis-lru $((PORT_BASE + 5))
  cleanup; pids=()
  rmdir "$(cg_dir resp-nv-big)" 2>/dev/null || true
  "$HARNESS/in_memcg.sh" "${BUDGET_MB}M" resp-nv-big -- "$NV" serve --port $((PORT_BASE + 6)) \
    --data "$WORK/nv-big" --size "$(( data_mb * 2 + 256 ))M" --cache-mb $(( BUDGET_MB / 2 )) \
    ${NV_THREADS:+--threads "$NV_THREADS"} 2>"$WORK/nv-big.log" &
  pids+=($!)
  for _ in $(seq 1 600); do redis-cli -p $((PORT_BASE + 6)) ping >/dev/null 2>&1 && break; sleep 0.1; done
  big_run nvdepot $((PORT_BASE + 6))
  cleanup; pids=()
  rm -rf "$WORK/nv-big"
  for c in "${BIG_CONCS[@]}"; do
    if SIZE=${data_mb}M "$HARNESS/fio_4k.sh" "$WORK/fio.dat" randread "$c" "$SECS" >"$WORK/fio-$c.out" 2>&1; then
      iops=$(tail -1 "$WORK/fio-$c.out" | grep -o 'iops=[0-9]*' | cut -d= -f2)
      printf 'fio\t%s\t%s\t1\t0\n' "$c" "$iops" >>"$WORK/big.tsv"
      log "big fio QD $c: $(tail -1 "$WORK/fio-$c.out")"
    else
      log "big fio QD $c failed: $(tail -1 "$WORK/fio-$c.out")"
    fi
  done
  rm -f "$WORK/fio.dat"
fi

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
if ! skipped rss; then
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
fi

python3 - "$WORK" "$PREFIX" "$QUICK" "$BUDGET_MB" "$BIG_KEYS" <<'PY'
import sys, statistics, collections
work, prefix, quick, budget, big_keys = sys.argv[1:6]
pts = collections.defaultdict(list)
for line in open(f"{work}/points.tsv"):
    server, c, rep, test, rps, p50, p99 = line.split("\t")
    pts[(server, int(c), test)].append(float(rps))
concs = sorted({c for (_, c, _) in pts})
med = {k: statistics.median(v) for k, v in pts.items()}
rows = ["| server | concurrency | SET/s median (min-max) | GET/s median (min-max) |", "|---|---|---|---|"]
for server in ("redis-none", "redis-always", "nvdepot"):
    for c in concs:
        cell = lambda t: (f"{med[(server, c, t)]:.0f} ({min(pts[(server, c, t)]):.0f}-{max(pts[(server, c, t)]):.0f})"
                          if (server, c, t) in med else "-")
        rows.append(f"| {server} | {c} | {cell('SET')} | {cell('GET')} |")
    with open(f"{work}/plot-{server}.dat", "w") as out:
        for c in concs:
            if (server, c, "GET") in med and (server, c, "SET") in med:
                out.write(f"{c} {med[(server, c, 'GET')] / 1000:.2f} {med[(server, c, 'SET')] / 1000:.2f}\n")
def low(num, den, t):
    r = [(med[(num, c, t)] / med[(den, c, t)], c) for c in concs if (num, c, t) in med and (den, c, t) in med]
    return min(r) if r else (None, None)
get_r, get_c = low("nvdepot", "redis-none", "GET")
set_r, set_c = low("nvdepot", "redis-always", "SET")
big = {}
for line in open(f"{work}/big.tsv"):
    server, c, gets, hit, errors = line.strip().split("\t")
    big[(server, int(c))] = (float(gets), float(hit), int(errors))
big_rows = []
big_r = None
if big:
    big_rows = [f"Budget {budget} MiB per server (memory cgroup), {big_keys} keys x 1 KiB "
                f"(~{int(big_keys) // 1024} MiB), uniform GETs of preloaded keys.", "",
                "| server | connections / QD | GETs/s | hit ratio | GET hits/s | errors |", "|---|---|---|---|---|---|"]
    ratios = []
    for (server, c), (gets, hit, errors) in sorted(big.items()):
        big_rows.append(f"| {server} | {c} | {gets:.0f} | {hit:.4f} | {gets * hit:.0f} | {errors} |")
        if server == "nvdepot" and ("fio", c) in big:
            ratios.append(gets * hit / big[("fio", c)][0])
    big_r = min(ratios) if ratios else None
rss = {}
try:
    for line in open(f"{work}/rss.tsv"):
        server, keys, before, after = line.split("\t")
        keys = int(keys)
        rss[server] = (int(after) - int(before)) * 1024 / keys if keys else None
except FileNotFoundError:
    pass
rss_rows = ["| server | bytes of RSS per key |", "|---|---|"] + [f"| {s} | {v:.1f} |" for s, v in rss.items() if v]
rss_r = rss.get("nvdepot") / rss["redis-none"] if rss.get("nvdepot") and rss.get("redis-none") else None
f = lambda x: "n/a" if x is None else f"{x:.2f}"
ratio = (f"ratio get_vs_redis={f(get_r)} set_vs_redis_always={f(set_r)} "
         f"big_get_vs_device={f(big_r)} rss_per_key_vs_redis={f(rss_r)}")
doc = ["# nvdepot serve vs redis-server: " + ("QUICK run" if quick == "1" else "full run"), "",
       "Generated by bench/resp-vs-redis.sh: redis-benchmark -t set,get -d 1024 -r 100000 at each "
       "concurrency; redis-none = no persistence, redis-always = appendfsync always; nvdepot serve "
       "in its default durable mode. get_vs_redis = lowest nvdepot/redis-none GET ratio over the "
       f"concurrencies (at {get_c}); set_vs_redis_always = lowest nvdepot/redis-always SET ratio "
       f"(at {set_c}); big_get_vs_device = lowest nvdepot GET hits/s / fio 4 KiB randread IOPS at "
       "the same concurrency. Plot: " + prefix.split("/")[-1] + ".png.", ""] + rows + \
      ["", "## Big scenario (data 4x the memory budget)", ""] + (big_rows or ["not run"]) + \
      ["", "## RSS per key (100-byte values; nvdepot --cache-mb 0)", ""] + rss_rows + ["", "```", ratio, "```", ""]
open(prefix + ".md", "w").write("\n".join(doc))
print("\n".join(rows + [""] + big_rows + [""] + rss_rows))
print(ratio)
PY
if [ -s "$WORK/plot-nvdepot.dat" ] && command -v gnuplot >/dev/null; then
  gnuplot 2>"$WORK/gnuplot.err" <<EOF || log "plot failed (see $WORK/gnuplot.err)"
set terminal pngcairo size 1100,450 font ",10"
set output "$PREFIX.png"
set multiplot layout 1,2 title "redis-benchmark, 1 KiB values, 127.0.0.1 (median of $REPS)"
set logscale x 2
set xlabel "concurrency (redis-benchmark clients)"
set key top left
set grid
set yrange [0:*]
set ylabel "GET (kops/s)"
plot "$WORK/plot-redis-none.dat" using 1:2 with linespoints title "redis (no persistence)", \
     "$WORK/plot-redis-always.dat" using 1:2 with linespoints title "redis appendfsync always", \
     "$WORK/plot-nvdepot.dat" using 1:2 with linespoints title "nvdepot serve (durable)"
set ylabel "SET (kops/s)"
plot "$WORK/plot-redis-none.dat" using 1:3 with linespoints title "redis (no persistence)", \
     "$WORK/plot-redis-always.dat" using 1:3 with linespoints title "redis appendfsync always", \
     "$WORK/plot-nvdepot.dat" using 1:3 with linespoints title "nvdepot serve (durable)"
unset multiplot
EOF
fi
