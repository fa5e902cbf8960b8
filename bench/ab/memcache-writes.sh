#!/usr/bin/env bash
# bench/ab/memcache-writes.sh BIN CONC [SECS] -- device writes per set and
# server CPU per request of one `nvdepot memcache` build under memaslap
# 90/10 at CONC connections: `block:block_rq_issue` counted system-wide
# with perf over SECS (default 5) seconds after a 2 s warm-up, so run it
# on an otherwise idle machine (no other block IO). Counts do not move
# with a noisy host the way ops/s do. Scratch store under BENCH_DIR
# (default bench/work/writes).
set -u
BIN=$1 C=$2 S=${3:-5}
PORT=${PORT:-22601}
source "$(dirname "$0")/lib.sh"
start_memcache "$BIN" "$C" "$PORT" writes
c0=$(awk '{print $14+$15}' "/proc/$P/stat")
perf stat -x, -o "$W/stat.txt" -a -e block:block_rq_issue -- \
    bash "$H/memaslap.sh" 127.0.0.1 "$PORT" "$S" "$C" >"$W/memaslap.txt"
c1=$(awk '{print $14+$15}' "/proc/$P/stat")
ops=$(sed -n 's/.* ops=\([0-9]*\).*/\1/p' "$W/memaslap.txt" | tail -1)
rps=$(sed -n 's/memaslap: \([0-9]*\) ops.*/\1/p' "$W/memaslap.txt" | tail -1)
writes=$(grep block_rq_issue "$W/stat.txt" | cut -d, -f1)
# memaslap's default mix: a tenth of the requests are sets.
awk -v b="$(basename "$BIN")" -v c="$C" -v o="$ops" -v r="$rps" -v w="$writes" -v cpu=$((c1 - c0)) \
    'BEGIN{printf "%s c=%d ops/s=%d writes_per_set=%.3f cpu_us_per_req=%.2f\n", b, c, r, w/(o*0.1), cpu*10000/o}'
