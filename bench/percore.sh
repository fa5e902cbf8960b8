#!/usr/bin/env bash
# bench/percore.sh -- per core: each server gets ONE worker pinned to ONE
# core (taskset -c $SERVER_CPU, every thread of the process), the load
# generator is pinned to the other ($CLIENT_CPU), so nothing shares a core.
# How an operator sizing hardware measures a server (issue 39); the other
# bench scripts let server and client share both cores, where scheduling
# noise decides much.
#
# memcache face: memcached -t 1 -m 1024 against nvdepot memcache -t 1
#   -m 1024 --size 4G (default --ack written: every set written to the
#   device before its reply), each under memcaslap -T 1 (90 % get / 10 %
#   set, 1 KiB values, the harness's workload) at each concurrency.
# redis face: redis-server --appendonly no (GET's reference) and
#   --appendonly yes --appendfsync always (SET's: durable on reply) against
#   nvdepot serve --threads 1 --cache-mb 1024 (default: durable), each under
#   redis-benchmark --threads 1 -t set,get -d 1024 -r 100000.
# The servers alternate within each repetition. Per run: ops/s, the server's
# CPU time (utime + stime of all its threads, /proc/PID/stat) per request,
# and its context switches (voluntary + involuntary, /proc/PID/task/*/status)
# per request. Then, once per point, a separate counting run under
# `perf stat -p` (tracepoints slow syscalls a little, so its ops/s are not
# used): syscalls, io_uring_enter calls, futex calls and context switches
# per request.
#
# usage: bash bench/percore.sh              (full: c = 1 4 16 64 128, 3 reps, ~15 min)
#        QUICK=1 bash bench/percore.sh      (c = 1 16 64, 1 rep, ~3 min)
#        FACES=memcache bash bench/percore.sh   (one face)
# Environment: SECS (seconds per memcache point [6; QUICK 3]), REPS,
#   CONCS="1 4 ...", SERVER_CPU [1], CLIENT_CPU [0], NVDEPOT (binary; built
#   if unset), NV_ARGS (extra flags for nvdepot memcache), NV_SERVE_ARGS (for
#   nvdepot serve), NO_PERF=1 (skip the counting runs), PORT_BASE [23400],
#   TAG (appended to the result files' names, for A/B runs).
# Output: a table, then last
#   ratio percore_min_vs_memcached=A cpu_per_req_max_vs_memcached=B percore_min_get_vs_redis=C percore_min_set_vs_redis_always=D
# where A = lowest nvdepot/memcached ops/s (medians) over the concurrencies,
# B = highest nvdepot/memcached CPU per request, C = lowest nvdepot/redis
# GET/s, D = lowest nvdepot/redis-always SET/s. Goals (issue 39): A >= 1.0,
# B <= 1.0, C >= 1.0. Results: bench/results/percore[-quick][-TAG].md and
# the raw bench/work/percore-*/points.tsv, counts.tsv.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
source bench/ab/lib.sh # cpu_ticks, ctx_switches, wait_serving
HARNESS=${HARNESS:-$ROOT/../shared/harness}
QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
  read -r -a CONCS <<<"${CONCS:-1 16 64}"
  REPS=${REPS:-1} SECS=${SECS:-3} PREFIX=$ROOT/bench/results/percore-quick
else
  read -r -a CONCS <<<"${CONCS:-1 4 16 64 128}"
  REPS=${REPS:-3} SECS=${SECS:-6} PREFIX=$ROOT/bench/results/percore
fi
[ -z "${TAG:-}" ] || PREFIX=$PREFIX-$TAG
FACES=${FACES:-memcache redis}
SERVER_CPU=${SERVER_CPU:-1} CLIENT_CPU=${CLIENT_CPU:-0}
PORT_BASE=${PORT_BASE:-23400}
WORK=${BENCH_DIR:-$ROOT/bench/work}/percore-$(date +%Y%m%d-%H%M%S)
mkdir -p "$WORK"
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 2; }

[ "$(nproc)" -ge 2 ] || die "needs two cores (one for the server, one for the client)"
need=()
command -v memcached >/dev/null || need+=(memcached)
command -v memcaslap >/dev/null || need+=(libmemcached-tools)
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-benchmark >/dev/null || need+=(redis-tools)
command -v perf >/dev/null || [ "${NO_PERF:-0}" = 1 ] || need+=(linux-perf)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null && apt-get install -y -q "${need[@]}" >/dev/null
fi
if [ -z "${NVDEPOT:-}" ]; then
  source scripts/lib.sh
  ensure_cargo
  NVDEPOT=$(release_binary "$ROOT")
fi
[ -x "$NVDEPOT" ] || die "no nvdepot binary at $NVDEPOT"
PERF=1
if [ "${NO_PERF:-0}" = 1 ] || ! perf stat -e syscalls:sys_enter_io_uring_enter true >/dev/null 2>&1; then
  PERF=0
  log "perf cannot count syscall tracepoints here: no counting runs"
fi

pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap 'cleanup; rm -rf "$WORK"/data-*' EXIT
trap 'log interrupted; exit 130' INT TERM

wait_ping() { # PORT: until a Redis server answers PING (60 s)
  for _ in $(seq 600); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
  return 1
}
client() { taskset -c "$CLIENT_CPU" "$@"; }
# settle DIR: fsync the files of a new store before measuring. Its data
# file was just zero-filled with O_DIRECT writes, which this VM's disk
# holds in the host's cache: until a device flush has pushed them out,
# the server's first periodic flushes take that whole backlog, and sets
# stall behind them (seen: one repetition at 10 k ops/s against 52-58 k).
settle() {
  [ -d "$1" ] || return 0
  find "$1" -maxdepth 1 -type f -exec sync {} + 2>/dev/null || true
  sleep 1
}

: >"$WORK/points.tsv" # face server conc rep test ops_per_s ops cpu_ticks ctx
: >"$WORK/counts.tsv" # face server conc test ops ctx syscalls io_uring_enter futex
CLK_TCK=$(getconf CLK_TCK)

# perf_count PID SECS OUT: counts for SECS seconds into OUT (perf stat -x,).
perf_count() {
  perf stat -x, -o "$3" -p "$1" \
    -e context-switches,raw_syscalls:sys_enter,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_futex \
    -- sleep "$2" >/dev/null 2>&1
}
perf_field() { awk -F, -v e="$2" '$3 == e {print $1 + 0}' "$1"; }
# count_row FACE SERVER CONC TEST OPS PERF_CSV: one line of counts.tsv.
count_row() {
  local f=$6
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" \
    "$(perf_field "$f" context-switches)" "$(perf_field "$f" raw_syscalls:sys_enter)" \
    "$(perf_field "$f" syscalls:sys_enter_io_uring_enter)" "$(perf_field "$f" syscalls:sys_enter_futex)" >>"$WORK/counts.tsv"
}

# ---- memcache face ----------------------------------------------------------
memaslap_run() { # PORT CONC SECS -> "ops_per_s ops"
  local line
  line=$(THREADS=1 client bash "$HARNESS/memaslap.sh" 127.0.0.1 "$1" "$3" "$2" | tail -1)
  echo "$(awk '{print $2}' <<<"$line") $(grep -o 'ops=[0-9]*' <<<"$line" | cut -d= -f2)"
}
start_mc() { # NAME PORT -> SERVER_PID
  case $1 in
  memcached) taskset -c "$SERVER_CPU" memcached -t 1 -m 1024 -p "$2" -l 127.0.0.1 -U 0 -u root >"$WORK/$1.log" 2>&1 & ;;
  nvdepot)
    # shellcheck disable=SC2086
    taskset -c "$SERVER_CPU" "$NVDEPOT" memcache -t 1 -m 1024 -p "$2" -l 127.0.0.1 --data "$WORK/data-mc" --size 4G \
      ${NV_ARGS:-} >"$WORK/$1.log" 2>&1 & ;;
  esac
  # Started directly (not through a shell function, which would fork a
  # subshell): $! is the server itself, whose /proc the counters read.
  SERVER_PID=$!
  pids+=("$SERVER_PID")
  wait_serving "$2" || die "$1 did not start (log: $WORK/$1.log)"
  settle "$WORK/data-mc"
  client bash "$HARNESS/memaslap.sh" 127.0.0.1 "$2" 2 16 >/dev/null # warm-up
}
if [[ " $FACES " == *" memcache "* ]]; then
  declare -A MC_PORT=([memcached]=$PORT_BASE [nvdepot]=$((PORT_BASE + 1)))
  declare -A MC_PID=()
  for s in memcached nvdepot; do start_mc "$s" "${MC_PORT[$s]}"; MC_PID[$s]=$SERVER_PID; done
  for rep in $(seq "$REPS"); do
    for c in "${CONCS[@]}"; do
      for s in memcached nvdepot; do
        pid=${MC_PID[$s]}
        t0=$(cpu_ticks "$pid") x0=$(ctx_switches "$pid")
        read -r rate ops < <(memaslap_run "${MC_PORT[$s]}" "$c" "$SECS")
        t1=$(cpu_ticks "$pid") x1=$(ctx_switches "$pid")
        printf 'memcache\t%s\t%s\t%s\tmix\t%s\t%s\t%s\t%s\n' "$s" "$c" "$rep" "$rate" "$ops" \
          $((t1 - t0)) $((x1 - x0)) >>"$WORK/points.tsv"
        log "memcache $s c=$c rep $rep: $rate ops/s, $(( (t1 - t0) * 1000000 / CLK_TCK / (ops > 0 ? ops : 1) )) us CPU/request"
      done
    done
  done
  if [ "$PERF" = 1 ]; then
    for c in "${CONCS[@]}"; do
      for s in memcached nvdepot; do
        perf_count "${MC_PID[$s]}" "$SECS" "$WORK/perf-mc-$s-$c.csv" &
        ppid=$!
        read -r _ ops < <(memaslap_run "${MC_PORT[$s]}" "$c" "$SECS")
        wait "$ppid" || true
        count_row memcache "$s" "$c" mix "$ops" "$WORK/perf-mc-$s-$c.csv"
      done
    done
  fi
  cleanup
fi

# ---- redis face -------------------------------------------------------------
rb_requests() { # CONC TEST: requests for about SECS seconds at this machine's pace
  local per_s
  case $2 in
  GET) per_s=$(( $1 == 1 ? 16000 : 60000 )) ;;
  SET) per_s=$(( $1 == 1 ? 3000 : 15000 )) ;;
  esac
  echo $(( per_s * SECS ))
}
# redis-benchmark 7.0 sometimes never ends (one thread at 100 % CPU after
# its last reply; seen twice here): every run has a deadline.
redis_run() { # PORT CONC TEST N -> ops/s
  client timeout $((SECS * 5 + 30)) redis-benchmark -p "$1" -c "$2" -n "$4" -d 1024 -r 100000 --threads 1 -t "${3,,}" --csv 2>/dev/null |
    tr -d '"' | awk -F, -v t="$3" '$1 == t {print $2}'
}
start_redis_face() { # NAME PORT -> SERVER_PID
  case $1 in
  redis-none | redis-always)
    local aof=no fsync=everysec
    [ "$1" = redis-always ] && aof=yes fsync=always
    mkdir -p "$WORK/data-$1"
    taskset -c "$SERVER_CPU" redis-server --port "$2" --bind 127.0.0.1 --dir "$WORK/data-$1" --save '' \
      --appendonly "$aof" --appendfsync "$fsync" --io-threads 1 >"$WORK/$1.log" 2>&1 & ;;
  nvdepot)
    # shellcheck disable=SC2086
    taskset -c "$SERVER_CPU" "$NVDEPOT" serve --threads 1 --cache-mb 1024 --port "$2" --data "$WORK/data-serve" \
      --size 4G ${NV_SERVE_ARGS:-} >"$WORK/$1.log" 2>&1 & ;;
  esac
  # Started directly (not through a shell function, which would fork a
  # subshell): $! is the server itself, whose /proc the counters read.
  SERVER_PID=$!
  pids+=("$SERVER_PID")
  wait_ping "$2" || die "$1 did not start (log: $WORK/$1.log)"
  settle "$WORK/data-serve"
  # Every key of the GET runs present (SET over the key space first).
  client timeout 120 redis-benchmark -p "$2" -c 16 -n 200000 -d 1024 -r 100000 --threads 1 -t set -q >/dev/null 2>&1 || true
}
if [[ " $FACES " == *" redis "* ]]; then
  declare -A R_PORT=([redis-none]=$((PORT_BASE + 2)) [redis-always]=$((PORT_BASE + 3)) [nvdepot]=$((PORT_BASE + 4)))
  declare -A R_PID=()
  for s in redis-none redis-always nvdepot; do start_redis_face "$s" "${R_PORT[$s]}"; R_PID[$s]=$SERVER_PID; done
  for rep in $(seq "$REPS"); do
    for c in "${CONCS[@]}"; do
      for s in redis-none redis-always nvdepot; do
        for test in GET SET; do
          # GET against the unpersisted redis, SET against the durable one.
          [ "$test" = GET ] && [ "$s" = redis-always ] && continue
          [ "$test" = SET ] && [ "$s" = redis-none ] && continue
          pid=${R_PID[$s]} n=$(rb_requests "$c" "$test")
          t0=$(cpu_ticks "$pid") x0=$(ctx_switches "$pid")
          rate=$(redis_run "${R_PORT[$s]}" "$c" "$test" "$n")
          t1=$(cpu_ticks "$pid") x1=$(ctx_switches "$pid")
          printf 'redis\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$s" "$c" "$rep" "$test" "${rate:-0}" "$n" \
            $((t1 - t0)) $((x1 - x0)) >>"$WORK/points.tsv"
          log "redis $s c=$c rep $rep: $test ${rate:-?}/s, $(( (t1 - t0) * 1000000 / CLK_TCK / n )) us CPU/request"
        done
      done
    done
  done
  if [ "$PERF" = 1 ]; then
    for c in "${CONCS[@]}"; do
      for s in redis-none nvdepot; do
        n=$(rb_requests "$c" GET)
        f=$WORK/perf-r-$s-$c.csv
        # The counting window: the run's expected length; requests past it
        # are not counted, so the per-request figures use the counted
        # window's share (ops = rate x window).
        perf_count "${R_PID[$s]}" "$SECS" "$f" &
        ppid=$!
        rate=$(redis_run "${R_PORT[$s]}" "$c" GET "$n")
        wait "$ppid" || true
        ops=$(awk -v r="${rate:-0}" -v n="$n" -v s="$SECS" 'BEGIN {o = r * s; print int(o < n ? o : n)}')
        count_row redis "$s" "$c" GET "$ops" "$f"
      done
    done
  fi
  cleanup
fi

python3 - "$WORK" "$PREFIX" "$CLK_TCK" "$QUICK" "$SECS" "$REPS" <<'PY'
import collections, statistics, sys
work, prefix, clk, quick, secs, reps = sys.argv[1:7]
clk = int(clk)
runs = collections.defaultdict(list)
for line in open(f"{work}/points.tsv"):
    face, server, c, rep, test, rate, ops, ticks, ctx = line.rstrip("\n").split("\t")
    ops = max(int(ops), 1)
    runs[(face, server, int(c), test)].append(
        (float(rate), int(ticks) * 1e6 / clk / ops, int(ctx) / ops))
counts = {}
for line in open(f"{work}/counts.tsv"):
    face, server, c, test, ops, ctx, sysc, uring, futex = line.rstrip("\n").split("\t")
    ops = max(int(ops or 0), 1)
    per = lambda x: (float(x) / ops) if x else None
    counts[(face, server, int(c), test)] = (per(ctx), per(sysc), per(uring), per(futex))
med = lambda k, i: statistics.median(r[i] for r in runs[k])
fmt = lambda x, d=2: "-" if x is None else f"{x:.{d}f}"
out = [f"# Per core: one pinned server worker against memcached and redis-server "
       f"({'QUICK run' if quick == '1' else 'full run'})", "",
       f"Generated by bench/percore.sh: each server pinned to one core, its load generator to the "
       f"other; {reps} repetition(s), servers alternating; {secs} s per memcache point. CPU = the "
       f"server's utime + stime (all threads) per request; ctx = context switches per request "
       f"(/proc); the syscall columns come from a separate `perf stat` counting run per point.", ""]
ratios = {}
def table(face, servers, test, title, ref):
    concs = sorted({k[2] for k in runs if k[0] == face and k[3] == test})
    if not concs:
        return
    out.extend([f"## {title}", "",
                "| server | c | ops/s median (min-max) | CPU µs/req | ctx/req | syscalls/req | io_uring_enter/req | futex/req | vs " + ref + " ops/s | CPU vs " + ref + " |",
                "|---|---|---|---|---|---|---|---|---|---|"])
    worst = {}
    for s in servers:
        for c in concs:
            k = (face, s, c, test)
            if k not in runs:
                continue
            rates = [r[0] for r in runs[k]]
            cnt = counts.get(k, (None,) * 4)
            rk = (face, ref, c, test)
            vs = med(k, 0) / med(rk, 0) if s != ref and rk in runs and med(rk, 0) else None
            cpu_vs = med(k, 1) / med(rk, 1) if s != ref and rk in runs and med(rk, 1) else None
            if vs is not None:
                worst.setdefault("rate", []).append((vs, c))
                worst.setdefault("cpu", []).append((cpu_vs, c))
            out.append(f"| {s} | {c} | {med(k, 0):.0f} ({min(rates):.0f}-{max(rates):.0f}) | "
                       f"{med(k, 1):.1f} | {med(k, 2):.2f} | {fmt(cnt[1])} | {fmt(cnt[2])} | {fmt(cnt[3])} | "
                       f"{fmt(vs)} | {fmt(cpu_vs)} |")
    out.append("")
    return worst
w = table("memcache", ["memcached", "nvdepot"], "mix", "memcache face: memcaslap -T 1, 90 % get / 10 % set, 1 KiB", "memcached")
if w:
    ratios["percore_min_vs_memcached"] = min(w["rate"])
    ratios["cpu_per_req_max_vs_memcached"] = max(w["cpu"])
w = table("redis", ["redis-none", "nvdepot"], "GET", "Redis face GET: redis-benchmark --threads 1 -t get -d 1024 -r 100000", "redis-none")
if w:
    ratios["percore_min_get_vs_redis"] = min(w["rate"])
w = table("redis", ["redis-always", "nvdepot"], "SET", "Redis face SET, durable on reply: redis-server appendfsync always", "redis-always")
if w:
    ratios["percore_min_set_vs_redis_always"] = min(w["rate"])
names = ["percore_min_vs_memcached", "cpu_per_req_max_vs_memcached", "percore_min_get_vs_redis", "percore_min_set_vs_redis_always"]
line = "ratio " + " ".join(f"{n}={fmt(ratios[n][0])}" if n in ratios else f"{n}=n/a" for n in names)
where = ", ".join(f"{n} at c={ratios[n][1]}" for n in names if n in ratios)
out.extend(["```", line, "```", "", f"({where})", ""])
open(prefix + ".md", "w").write("\n".join(out))
print("\n".join(out[5:]))
print(line)
PY
