#!/usr/bin/env bash
# bench/ab/memcache-simul.sh A B REPS SECS CONC... -- two `nvdepot
# memcache` builds loaded at the same moment, each by its own memaslap
# (90/10, 1 KiB), so that a host's slow spells (steal) hit both alike;
# prints per pair the ops/s of each, their ratio, and each server's CPU
# per request (utime + stime from /proc). Scratch stores under BENCH_DIR
# (default bench/work/simul).
set -u
A=$1 B=$2 REPS=$3 S=$4; shift 4
source "$(dirname "$0")/lib.sh"
W=${BENCH_DIR:-$ROOT/bench/work/simul}; rm -rf "$W"; mkdir -p "$W"
"$A" memcache -p 22801 -l 127.0.0.1 -m 1024 --data "$W/a" --size 4G >/dev/null 2>&1 & PA=$!
"$B" memcache -p 22802 -l 127.0.0.1 -m 1024 --data "$W/b" --size 4G >/dev/null 2>&1 & PB=$!
trap 'kill $PA $PB 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
for port in 22801 22802; do wait_serving "$port"; done
ops() { tail -1 "$1" | grep -o '[0-9]* ops/s' | grep -o '[0-9]*'; }
for c in "$@"; do
  for r in $(seq "$REPS"); do
    a0=$(cpu_ticks $PA) b0=$(cpu_ticks $PB)
    bash "$H/memaslap.sh" 127.0.0.1 22801 "$S" "$c" >"$W/oa" 2>&1 & MA=$!
    bash "$H/memaslap.sh" 127.0.0.1 22802 "$S" "$c" >"$W/ob" 2>&1
    wait $MA
    a1=$(cpu_ticks $PA) b1=$(cpu_ticks $PB)
    awk -v c="$c" -v r="$r" -v oa="$(ops "$W/oa")" -v ob="$(ops "$W/ob")" \
      -v a=$((a1 - a0)) -v b=$((b1 - b0)) -v s="$S" 'BEGIN {
        if (oa <= 0 || ob <= 0) { printf "c=%d r=%d no result\n", c, r; exit }
        ca = a * 10000 / (oa * s); cb = b * 10000 / (ob * s)
        printf "c=%d r=%d a_ops=%d b_ops=%d b/a=%.3f a_cpu_us=%.2f b_cpu_us=%.2f b/a_cpu=%.3f\n", c, r, oa, ob, ob / oa, ca, cb, cb / ca }'
  done
done
