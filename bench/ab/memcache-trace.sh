#!/usr/bin/env bash
# bench/ab/memcache-trace.sh BIN CONC SECS -- work per request of one
# `nvdepot memcache` build, counted rather than timed (counts do not move
# with a noisy host): io_uring submissions, poll arms, completions, system
# calls, context switches and page faults per request, from `perf stat`
# on the server over SECS seconds of memaslap 90/10 at CONC connections.
# Needs perf (linux-perf) and memcaslap (libmemcached-tools). Scratch
# store under BENCH_DIR (default bench/work/trace).
set -u
BIN=$1 C=$2 S=$3
PORT=${PORT:-22710}
source "$(dirname "$0")/lib.sh"
start_memcache "$BIN" "$C" "$PORT" trace
perf stat -x, -o "$W/stat.txt" -e io_uring:io_uring_submit_req,io_uring:io_uring_poll_arm,io_uring:io_uring_complete,raw_syscalls:sys_enter,context-switches,page-faults -p "$P" -- sleep "$S" &
R=$!
out=$(bash "$H/memaslap.sh" 127.0.0.1 "$PORT" "$S" "$C" 2>&1 | tail -1)
wait $R
ops=$(grep -o '[0-9]* ops/s' <<<"$out" | grep -o '[0-9]*')
echo "$(basename "$BIN") c=$C ops/s=$ops"
awk -F, -v o="${ops:-0}" -v s="$S" '$1 ~ /^[0-9.]+$/ && o > 0 {printf "  %-32s %8.3f per request\n", $3, $1/(o*s)}' "$W/stat.txt"
