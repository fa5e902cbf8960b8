#!/usr/bin/env bash
# bench/memcache-vs-memcached.sh -- nvdepot memcache against memcached (DRAM)
# and memcached + extstore (flash), all in one run, on this machine, over
# 127.0.0.1 only. The memcache issue's item 8; see bench/results/README.md.
#
# usage: bash bench/memcache-vs-memcached.sh        (full: <= 30 min)
#        QUICK=1 bash bench/memcache-vs-memcached.sh (<= 5 min)
#
# Scenarios:
#   hot  the data set fits in -m: memcached -m 1024 against
#        nvdepot memcache -m 1024 --size 4G, each under
#        shared/harness/memaslap.sh at concurrency 1 4 16 64 128 (QUICK: 1 16
#        128), SECONDS each, REPS repetitions (the servers alternate).
#   big  data set >= 4x the DRAM budget (1 GiB, 4 M x 1 KiB items; QUICK:
#        256 MiB, 1 M items); every server inside shared/harness/in_memcg.sh
#        with that limit: memcached -m 90 % of it; memcached + extstore
#        twice, as the harness starts it (-m 50 %, one extstore IO thread)
#        and as bench/ab/extstore-tune.sh found best here (-m 75 %,
#        ext_threads=16); nvdepot memcache (-m 50 %). Each is loaded
#        with `nvdepot bench memcache --preload` (extstore's paced: 2
#        connections, no pipelining, or it evicts items before flushing
#        them), then uniform 9:1 get/set over all keys at concurrency 64 and
#        128 (QUICK: 64). Then fio_4k.sh randread at QD 64 on a file of the
#        data set's size on the same disk.
#   rss  memcached -m 2048, nvdepot -m 1024 and nvdepot -m 0 get the same
#        1 M items (QUICK: 200 k); (VmRSS after - VmRSS after start) / items.
# Output: a table, then last
#   ratio vs_memcached=A vs_extstore=B vs_device=C cpu_per_req_vs_memcached=D
# and bench/results/memcache-vs-memcached[-quick].{json,md,png}, where
#   A  hot: the LOWEST nvdepot ops/s / memcached ops/s (medians of the
#      repetitions) over every measured concurrency (the JSON's
#      vs_memcached_concurrency names it);
#   B  big: nvdepot GET hits/s / GET hits/s of the memcached + extstore
#      variant with the most GET hits/s (vs_extstore_reference), medians,
#      both at concurrency 64 (hits/s = hits / seconds of the run phase);
#   C  big: nvdepot GETs/s at concurrency 64 / fio 4k randread IOPS at QD 64;
#   D  hot: the HIGHEST nvdepot / memcached server CPU time per request
#      over the measured concurrencies: (utime + stime of the server
#      process, all its threads, from /proc/PID/stat, read just before and
#      just after each memaslap run; WORK/cpu.tsv) / that run's ops (median
#      of the repetitions).
# The JSON's ratios also hold latency_vs_memcached: the HIGHEST nvdepot /
# memcached memaslap average latency over the hot concurrencies.
#
# Environment (defaults in brackets):
#   QUICK [0]           1: the short run
#   SECONDS_PER_POINT   [10; QUICK 3] seconds per measured point
#   REPS                [3; QUICK 1] repetitions per point
#   BENCH_DIR [bench/work]  data, logs and cgroups' files (not a tmpfs)
#   NVDEPOT             the nvdepot binary [built: cargo build --release -p
#                       nvdepot into $CARGO_TARGET_DIR, default ./target]
#   PORT_BASE [22400]   ports PORT_BASE..PORT_BASE+9 on 127.0.0.1
#   BUDGET_MB, ITEMS    big scenario's DRAM budget and item count
#   RSS_ITEMS           items for the RSS measurement
#   KEEP=1              keep BENCH_DIR's data files at the end
#   NVDEPOT_ARGS        extra flags for every nvdepot memcache (e.g. --ack buffered)
#   SKIP="hot big rss"  scenarios to leave out (e.g. SKIP=rss)
# Needs root (memory cgroups), memcached, memcaslap (libmemcached-tools), fio;
# installs the missing ones with apt-get, and gnuplot-nox for the plot (the
# plot is optional: its failure does not fail the run).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# cpu_ticks, memcache_stats
source bench/ab/lib.sh
HARNESS=${HARNESS:-$ROOT/../shared/harness}
QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
  SECS=${SECONDS_PER_POINT:-3} REPS=${REPS:-1}
  HOT_CONCS=(1 16 128) BIG_CONCS=(64)
  BUDGET_MB=${BUDGET_MB:-256} ITEMS=${ITEMS:-1000000} RSS_ITEMS=${RSS_ITEMS:-200000}
  PREFIX=$ROOT/bench/results/memcache-vs-memcached-quick
else
  SECS=${SECONDS_PER_POINT:-10} REPS=${REPS:-3}
  HOT_CONCS=(1 4 16 64 128) BIG_CONCS=(64 128)
  BUDGET_MB=${BUDGET_MB:-1024} ITEMS=${ITEMS:-4000000} RSS_ITEMS=${RSS_ITEMS:-1000000}
  PREFIX=$ROOT/bench/results/memcache-vs-memcached
fi
VALUE=1024
BENCH_DIR=${BENCH_DIR:-$ROOT/bench/work}
PORT_BASE=${PORT_BASE:-22400}
SKIP=${SKIP:-}
# Store/extstore file sizes: the data set (items x ~1.1 KiB) with room to spare.
DATA_MB=$(( ITEMS * 1100 / 1048576 ))
STORE_MB=$(( DATA_MB * 2 < 2048 ? 2048 : DATA_MB * 2 ))

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 2; }
skipped() { [[ " $SKIP " == *" $1 "* ]]; }

[ "$(id -u)" = 0 ] || die "needs root (memory cgroups)"
[ -x "$HARNESS/memaslap.sh" ] || die "no harness at $HARNESS"
need=()
command -v memcached >/dev/null || need+=(memcached)
command -v memcaslap >/dev/null || need+=(libmemcached-tools)
command -v fio >/dev/null || need+=(fio)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null && apt-get install -y -q "${need[@]}" >/dev/null
fi

mkdir -p "$BENCH_DIR" "$ROOT/bench/results"
BENCH_DIR=$(cd "$BENCH_DIR" && pwd)
fstype=$(stat -f -c %T "$BENCH_DIR")
[ "$fstype" != tmpfs ] || die "BENCH_DIR $BENCH_DIR is a tmpfs (O_DIRECT and the disk are the point)"
WORK=$BENCH_DIR/run-$(date +%Y%m%d-%H%M%S)
LOGS=$WORK/logs
mkdir -p "$LOGS"
log "work directory $WORK (${fstype})"

if [ -z "${NVDEPOT:-}" ]; then
  log "building nvdepot (release)"
  cargo build --release -q -p nvdepot
  NVDEPOT=${CARGO_TARGET_DIR:-$ROOT/target}/release/nvdepot
fi
[ -x "$NVDEPOT" ] || die "no nvdepot binary at $NVDEPOT"

# ---- servers and cleanup ---------------------------------------------------
PIDS=() CGROUPS=() DATA_DIRS=()
SERVER_PID=
cg_path() {   # the directory in_memcg.sh uses for NAME
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then echo "/sys/fs/cgroup/nvbench-$1"
  else echo "/sys/fs/cgroup/memory/nvbench-$1"; fi
}
stop_server() {
  local pid=$1 keep=() p
  "$HARNESS/stop_pid.sh" "$pid" || true
  for p in "${PIDS[@]}"; do [ "$p" = "$pid" ] || keep+=("$p"); done
  PIDS=("${keep[@]}")
}
cleanup() {
  local pid cg dir
  for pid in "${PIDS[@]}"; do "$HARNESS/stop_pid.sh" "$pid" || true; done
  PIDS=()
  for cg in "${CGROUPS[@]}"; do rmdir "$(cg_path "$cg")" 2>/dev/null || true; done
  if [ "${KEEP:-0}" != 1 ]; then
    for dir in "${DATA_DIRS[@]}"; do rm -rf "$dir"; done
  fi
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() {   # PID PORT SECONDS: until PORT accepts, or PID died
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    kill -0 "$1" 2>/dev/null || return 1
    port_open "$2" && return 0
    sleep 0.1
  done
  return 1
}
fresh_cgroup() {   # NAME: drop a cgroup left by an earlier run (stale peak)
  rmdir "$(cg_path "$1")" 2>/dev/null || true
  CGROUPS+=("$1")
}
memcg_record() {   # NAME LIMIT_MB: peak usage and OOM kills -> memcg.tsv
  local dir peak oom
  dir=$(cg_path "$1")
  peak=$(cat "$dir/memory.max_usage_in_bytes" 2>/dev/null || cat "$dir/memory.peak" 2>/dev/null || echo 0)
  oom=$(cat "$dir/memory.oom_control" "$dir/memory.events" 2>/dev/null |
        awk '$1 == "oom_kill" {print $2; exit}' || true)
  printf '%s\t%s\t%s\t%s\n' "$1" $(( $2 << 20 )) "$peak" "${oom:-?}" >>"$WORK/memcg.tsv"
}

# start_memcached NAME PORT MB [LIMIT_MB] -> SERVER_PID
start_memcached() {
  local name=$1 port=$2 mb=$3 limit=${4:-} cmd
  port_open "$port" && die "something already listens on 127.0.0.1:$port"
  cmd=(memcached -m "$mb" -p "$port" -l 127.0.0.1 -U 0 -u root)
  if [ -n "$limit" ]; then
    fresh_cgroup "$name"
    cmd=("$HARNESS/in_memcg.sh" "${limit}M" "$name" -- "${cmd[@]}")
  fi
  "${cmd[@]}" >"$LOGS/$name.log" 2>&1 </dev/null &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  wait_port "$SERVER_PID" "$port" 10 || { cat "$LOGS/$name.log" >&2; return 1; }
}

# start_nvdepot NAME PORT MB SIZE [LIMIT_MB] -> SERVER_PID
start_nvdepot() {
  local name=$1 port=$2 mb=$3 size=$4 limit=${5:-} dir cmd
  port_open "$port" && die "something already listens on 127.0.0.1:$port"
  dir=$BENCH_DIR/data-$name
  rm -rf "$dir"
  DATA_DIRS+=("$dir")
  cmd=("$NVDEPOT" memcache -p "$port" -l 127.0.0.1 -m "$mb" --data "$dir" --size "$size" ${NVDEPOT_ARGS:-})
  if [ -n "$limit" ]; then
    fresh_cgroup "$name"
    cmd=("$HARNESS/in_memcg.sh" "${limit}M" "$name" -- "${cmd[@]}")
  fi
  "${cmd[@]}" >"$LOGS/$name.log" 2>&1 </dev/null &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  wait_port "$SERVER_PID" "$port" 120 || { cat "$LOGS/$name.log" >&2; return 1; }
}

# start_extstore NAME PORT MB EXT_SIZE LIMIT_MB EXT_OPTS -> SERVER_PID
# in_memcg.sh execs start_memcached_extstore.sh inside the cgroup; the
# memcached it starts in the background inherits the cgroup, and the script
# prints that memcached's PID.
start_extstore() {
  local name=$1 port=$2 mb=$3 ext=$4 limit=$5 opts=$6 dir
  dir=$BENCH_DIR/data-$name
  rm -rf "$dir"
  DATA_DIRS+=("$dir")
  fresh_cgroup "$name"
  SERVER_PID=$(MEM_MB=$mb EXT_SIZE=$ext THREADS=4 EXT_OPTS=$opts LOG=$LOGS/$name.log \
    "$HARNESS/in_memcg.sh" "${limit}M" "$name" -- \
    "$HARNESS/start_memcached_extstore.sh" "$port" "$dir") || return 1
  PIDS+=("$SERVER_PID")
}

record() { printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$WORK/runs.tsv"; }
CLK_TCK=$(getconf CLK_TCK)
# record_cpu SCENARIO SERVER CONCURRENCY REP TICKS_BEFORE TICKS_AFTER -> cpu.tsv
record_cpu() {
  [ -n "$5" ] && [ -n "$6" ] || return 0
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" \
    "$(awk -v t=$(( $6 - $5 )) -v hz="$CLK_TCK" 'BEGIN {printf "%.3f", t / hz}')" >>"$WORK/cpu.tsv"
}
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# bench_client ARGS...: nvdepot bench memcache, bounded in time.
bench_client() {
  timeout "${BENCH_TIMEOUT:-$(( SECS + 120 ))}" "$NVDEPOT" bench memcache "$@"
}

{
  printf 'date\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  printf 'quick\t%s\n' "$QUICK"
  printf 'machine\t%s cores (%s), %s GiB RAM, kernel %s\n' "$(nproc)" \
    "$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)" \
    "$(awk '/MemTotal/ {printf "%.0f", $2 / 1048576}' /proc/meminfo)" "$(uname -r)"
  printf 'disk\t%s (%s) for %s\n' "$(df --output=source "$BENCH_DIR" | tail -1)" "$fstype" "$BENCH_DIR"
  printf 'nvdepot\t%s (git %s)\n' "$NVDEPOT" \
    "$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
  printf 'memcached\t%s\n' "$(memcached -V 2>&1 | head -1)"
  printf 'load_average_at_start\t%s (other work on the machine adds noise)\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
  printf 'seconds_per_point\t%s\n' "$SECS"
  printf 'repetitions\t%s\n' "$REPS"
  printf 'clk_tck\t%s (server CPU time resolution: 1/%s s)\n' "$CLK_TCK" "$CLK_TCK"
  printf 'hot\tconcurrency %s; memcached -m 1024; nvdepot -m 1024 --size 4G\n' "${HOT_CONCS[*]}"
  printf 'big\tbudget %s MiB, %s items x %s B, concurrency %s\n' "$BUDGET_MB" "$ITEMS" "$VALUE" "${BIG_CONCS[*]}"
} >"$WORK/meta.tsv"
: >"$WORK/runs.tsv"
: >"$WORK/cpu.tsv"
started=$(date +%s)

# ---- hot ------------------------------------------------------------------
if ! skipped hot; then
  log "hot: memcached -m 1024 and nvdepot -m 1024, memaslap ${SECS}s x ${REPS} at ${HOT_CONCS[*]}"
  declare -A HOT_PORT=([memcached]=$PORT_BASE [nvdepot]=$(( PORT_BASE + 1 )))
  start_memcached memcached-hot "${HOT_PORT[memcached]}" 1024 || die "memcached did not start"
  mc_pid=$SERVER_PID
  start_nvdepot nvdepot-hot "${HOT_PORT[nvdepot]}" 1024 4G || die "nvdepot did not start"
  nv_pid=$SERVER_PID
  declare -A HOT_PID=([memcached]=$mc_pid [nvdepot]=$nv_pid)
  for rep in $(seq 1 "$REPS"); do
    for c in "${HOT_CONCS[@]}"; do
      for server in memcached nvdepot; do
        out=$LOGS/hot-$server-c$c-r$rep.log
        # The server's CPU time (utime + stime) around the memaslap run.
        cpu_before=$(cpu_ticks "${HOT_PID[$server]}")
        if LOG=$out "$HARNESS/memaslap.sh" 127.0.0.1 "${HOT_PORT[$server]}" "$SECS" "$c" \
            >"$out.result" 2>"$out.err"; then
          cpu_after=$(cpu_ticks "${HOT_PID[$server]}")
          log "hot $server c=$c rep $rep: $(tail -1 "$out.result" | cut -d' ' -f2-3)"
          record hot "$server" "$c" "$rep" memaslap "$out"
          record_cpu hot "$server" "$c" "$rep" "$cpu_before" "$cpu_after"
        else
          log "hot $server c=$c rep $rep failed: $(tail -1 "$out.err")"
          record hot "$server" "$c" "$rep" failed "memaslap failed, see $out.err"
        fi
      done
    done
  done
  stop_server "$mc_pid"
  stop_server "$nv_pid"
fi

# ---- big ------------------------------------------------------------------
# server_stats PORT: curr_items and evictions from `stats` (tab-separated).
server_stats() { memcache_stats "$1" curr_items evictions; }

# big_server SERVER PORT CGROUP PRELOAD_CONNECTIONS PRELOAD_PIPELINE:
# preload every key, then the measured points.
big_server() {
  local server=$1 port=$2 name=$3 conns=$4 depth=$5 json c rep
  json=$LOGS/big-$server-preload.json
  log "big $server: preloading $ITEMS items ($conns connections x $depth)"
  if BENCH_TIMEOUT=$(( ITEMS / 5000 + 60 )) bench_client --server "127.0.0.1:$port" \
      --keys "$ITEMS" --value-size "$VALUE" --preload --requests 0 --connections "$conns" \
      --preload-pipeline "$depth" --json "$json" >"$LOGS/big-$server-preload.out" 2>&1; then :; else
    log "big $server: preload exit $? ($(tail -1 "$LOGS/big-$server-preload.out"))"
  fi
  [ -s "$json" ] && record big "$server" "$conns" "$depth" preload "$json"
  grep '^preload:' "$LOGS/big-$server-preload.out" >&2 || true
  sleep 2   # let extstore's flusher finish before counting
  printf '%s\t%s\n' "$server" "$(server_stats "$port")" >>"$WORK/items.tsv"
  log "big $server after preload: curr_items, evictions = $(server_stats "$port" | tr '\t' ' ')"
  for rep in $(seq 1 "$REPS"); do
    for c in "${BIG_CONCS[@]}"; do
      json=$LOGS/big-$server-c$c-r$rep.json
      kill -0 "$SERVER_PID" 2>/dev/null || { record big "$server" "$c" "$rep" failed "server died"; continue; }
      bench_client --server "127.0.0.1:$port" --keys "$ITEMS" --value-size "$VALUE" \
        --connections "$c" --ratio 9:1 --distribution uniform --duration "$SECS" --seed "$rep" \
        --json "$json" >"$LOGS/big-$server-c$c-r$rep.out" 2>&1 || true
      if [ -s "$json" ]; then
        record big "$server" "$c" "$rep" bench "$json"
        log "big $server c=$c rep $rep: $(grep '^run:' "$LOGS/big-$server-c$c-r$rep.out" | cut -d: -f2 | cut -d'(' -f1)"
      else
        record big "$server" "$c" "$rep" failed "$(tail -1 "$LOGS/big-$server-c$c-r$rep.out")"
        log "big $server c=$c rep $rep failed: $(tail -1 "$LOGS/big-$server-c$c-r$rep.out")"
      fi
    done
  done
  memcg_record "$name" "$BUDGET_MB"
  stop_server "$SERVER_PID"
  rmdir "$(cg_path "$name")" 2>/dev/null || true
}

if ! skipped big; then
  log "big: budget ${BUDGET_MB} MiB, ${ITEMS} x ${VALUE} B (~${DATA_MB} MiB), stores ${STORE_MB} MiB"
  if start_memcached mc-big $(( PORT_BASE + 2 )) $(( BUDGET_MB * 9 / 10 )) "$BUDGET_MB"; then
    big_server memcached $(( PORT_BASE + 2 )) mc-big 16 16
  else
    record big memcached 0 1 failed "memcached did not start"
  fi
  # memcached + extstore twice: the harness's settings (ext_item_age=0: every
  # value to flash at once; one extstore IO thread, -m half the budget), and
  # the best configuration of bench/ab/extstore-tune.sh on this machine
  # (2026-11-27: 16 IO threads, -m 3/4 of the budget; bench/results/README.md).
  # Its preload is paced (2 connections, 1 request each): a faster writer
  # outruns the flusher and items are evicted before they reach flash.
  for variant in "extstore $(( BUDGET_MB / 2 )) ext_item_age=0" \
      "extstore-best $(( BUDGET_MB * 3 / 4 )) ext_item_age=0,ext_threads=16"; do
    set -- $variant
    if start_extstore "$1-big" $(( PORT_BASE + 3 )) "$2" "${STORE_MB}M" \
        "$BUDGET_MB" "$3"; then
      big_server "$1" $(( PORT_BASE + 3 )) "$1-big" 2 1
    else
      record big "$1" 0 1 failed "memcached+extstore did not start"
    fi
    rm -rf "$BENCH_DIR/data-$1-big"
  done
  if start_nvdepot nv-big $(( PORT_BASE + 4 )) $(( BUDGET_MB / 2 )) "${STORE_MB}M" "$BUDGET_MB"; then
    big_server nvdepot $(( PORT_BASE + 4 )) nv-big 16 16
  else
    record big nvdepot 0 1 failed "nvdepot did not start"
  fi
  rm -rf "$BENCH_DIR/data-nv-big"
  fio_file=$BENCH_DIR/fio-randread.dat
  DATA_DIRS+=("$fio_file")
  log "big: fio 4k randread QD 64 on $fio_file (${DATA_MB} MiB)"
  if SIZE=${DATA_MB}M timeout $(( SECS + 300 )) "$HARNESS/fio_4k.sh" "$fio_file" randread 64 "$SECS" \
      >"$LOGS/fio.out" 2>&1; then
    record big fio 64 1 fio "$LOGS/fio.out"
    log "$(tail -1 "$LOGS/fio.out")"
  else
    record big fio 64 1 failed "fio: $(tail -1 "$LOGS/fio.out")"
  fi
  rm -f "$fio_file"
fi

# ---- RSS per item ---------------------------------------------------------
rss_point() {   # SERVER CONFIG PORT
  local server=$1 config=$2 port=$3 before after
  sleep 1
  before=$(rss_kb "$SERVER_PID")
  BENCH_TIMEOUT=$(( RSS_ITEMS / 5000 + 60 )) bench_client --server "127.0.0.1:$port" \
    --keys "$RSS_ITEMS" --value-size "$VALUE" --preload --requests 0 --connections 16 \
    >"$LOGS/rss-$server-$port.out" 2>&1 || log "rss $server: load failed"
  sleep 1
  after=$(rss_kb "$SERVER_PID")
  printf '%s\t%s\t%s\t%s\t%s\n' "$server" "$RSS_ITEMS" "$before" "$after" "$config" >>"$WORK/rss.tsv"
  log "rss $server ($config): $before KiB -> $after KiB for $RSS_ITEMS items"
  stop_server "$SERVER_PID"
}
if ! skipped rss; then
  if start_memcached mc-rss $(( PORT_BASE + 5 )) 2048; then
    rss_point memcached "-m 2048" $(( PORT_BASE + 5 ))
  fi
  if start_nvdepot nv-rss $(( PORT_BASE + 6 )) 1024 4G; then
    rss_point nvdepot "-m 1024 (DRAM tier on)" $(( PORT_BASE + 6 ))
  fi
  rm -rf "$BENCH_DIR/data-nv-rss"
  if start_nvdepot nv-rss0 $(( PORT_BASE + 7 )) 0 4G; then
    rss_point nvdepot "-m 0 (index only)" $(( PORT_BASE + 7 ))
  fi
  rm -rf "$BENCH_DIR/data-nv-rss0"
fi

{
  printf 'elapsed_seconds\t%s\n' $(( $(date +%s) - started ))
  printf 'load_average_at_end\t%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
} >>"$WORK/meta.tsv"

# ---- summary, plot ----------------------------------------------------------
python3 "$ROOT/bench/memcache_summary.py" "$WORK" "$PREFIX" >"$WORK/summary.txt"
if ! skipped hot && {
  command -v gnuplot >/dev/null || {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q gnuplot-nox >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null 2>&1 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q gnuplot-nox >/dev/null 2>&1; }
  }
}; then
  gnuplot 2>"$LOGS/gnuplot.err" <<EOF || log "plot failed (see $LOGS/gnuplot.err); results are in $PREFIX.json"
set terminal pngcairo size 1100,450 font ",10"
set output "$PREFIX.png"
set multiplot layout 1,2 title "memaslap 90 % get / 10 % set, 1 KiB values, 127.0.0.1 (median of $REPS, bars min-max)"
set logscale x 2
set xlabel "concurrency (memaslap connections)"
set key top left
set grid
set ylabel "throughput (kops/s)"
set yrange [0:*]
plot "$WORK/plot-memcached.dat" using 1:2:3:4 with yerrorlines title "memcached (DRAM)", \
     "$WORK/plot-nvdepot.dat" using 1:2:3:4 with yerrorlines title "nvdepot memcache"
set ylabel "average latency (us)"
plot "$WORK/plot-memcached.dat" using 1:5 with linespoints title "memcached (DRAM)", \
     "$WORK/plot-nvdepot.dat" using 1:5 with linespoints title "nvdepot memcache"
unset multiplot
EOF
else
  log "no gnuplot: no plot"
fi
cat "$WORK/summary.txt"
log "results: $PREFIX.json $PREFIX.md $PREFIX.png; logs in $WORK"
