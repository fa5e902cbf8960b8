#!/usr/bin/env bash
# bench/ab/type-writes.sh -- A/B of redis-benchmark's type write tests on
# two nvdepot builds (bench/results/ab-page-sizes.md's method): per test
# and repetition, each build in turn on a fresh store, one key growing to
# N elements (-r 100000), at C connections. Prints one line per run:
# build, test, ops/s, server CPU µs per request (utime + stime, /proc),
# device writes and KiB written per request (/proc/diskstats of the disk
# holding the store).
#   NVDEPOT_A=old/nvdepot NVDEPOT_B=new/nvdepot \
#     bash bench/ab/type-writes.sh REPS C TEST...      (e.g. 3 128 hset zadd)
set -u
REPS=$1 C=$2; shift 2
source "$(dirname "$0")/lib.sh"
N=${N:-20000} PORT=${PORT:-27002}
W=${BENCH_DIR:-$ROOT/bench/work/ab-type-writes}
run() { # bin test
  rm -rf "$W"; mkdir -p "$W"
  "$1" serve --port "$PORT" --data "$W/store" --size 2G >"$W.log" 2>&1 &
  local pid=$!
  for _ in $(seq 200); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  local dev; dev=$(df --output=source "$W" | tail -1); dev=${dev#/dev/}
  ds() { awk -v d="$dev" '$3 == d {print $8, $10}' /proc/diskstats; }
  local w0 s0 w1 s1 t0 t1 ops
  read -r w0 s0 <<<"$(ds)"
  t0=$(cpu_ticks "$pid")
  ops=$(timeout 300 redis-benchmark -p "$PORT" -c "$C" -n "$N" -r 100000 --csv -t "$2" 2>/dev/null |
        tr -d '"' | grep -E '^[A-Za-z]' | tail -1 | cut -d, -f2)
  t1=$(cpu_ticks "$pid")
  read -r w1 s1 <<<"$(ds)"
  kill "$pid"; wait "$pid" 2>/dev/null
  local hz; hz=$(getconf CLK_TCK)
  awk -v o="$ops" -v t=$((t1 - t0)) -v w=$((w1 - w0)) -v s=$((s1 - s0)) -v n="$N" -v hz="$hz" \
    'BEGIN {printf "ops=%s cpu_us=%.1f writes/op=%.3f KiB/op=%.2f\n", o, t * 1e6 / hz / n, w / n, s / 2 / n}'
}
for _ in $(seq "$REPS"); do
  for t in "$@"; do
    for v in a b; do
      bin=NVDEPOT_${v^^}
      echo "$v $t c=$C $(run "${!bin}" "$t")"
    done
  done
done
rm -rf "$W"
