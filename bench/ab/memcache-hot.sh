#!/usr/bin/env bash
# bench/ab/memcache-hot.sh -- hot memcache A/B: memcached (-m 1024) and
# nvdepot memcache variants side by side, each measured with
# shared/harness/memaslap.sh, interleaved point by point; prints one line
# per run: variant, concurrency, repetition, ops/s, average latency and the
# server's CPU time per request (utime + stime from /proc).
#   VARIANTS="memcached memcached-t2 written buffered t1 pack8" \
#     bash bench/ab/memcache-hot.sh REPS SECS CONC...
# NVDEPOT: the nvdepot binary (default target/release/nvdepot); variants
# a and b run NVDEPOT_A and NVDEPOT_B with default options; scratch
# data under BENCH_DIR (default bench/work/ab-hot).
set -u
REPS=$1 SECS=$2; shift 2; CONCS=("$@")
source "$(dirname "$0")/lib.sh"
BIN=${NVDEPOT:-$ROOT/target/release/nvdepot}
W=${BENCH_DIR:-$ROOT/bench/work/ab-hot}; rm -rf "$W"; mkdir -p "$W"
start() { # variant port: starts it in the background
  local nv=("$BIN" memcache -p "$2" -l 127.0.0.1 -m 1024 --data "$W/$1" --size 4G)
  local cmd
  case $1 in
    memcached) cmd=(memcached -m 1024 -p "$2" -l 127.0.0.1 -U 0 -u root) ;;
    memcached-t1 | memcached-t2) cmd=(memcached -m 1024 -p "$2" -l 127.0.0.1 -U 0 -u root -t "${1#memcached-t}") ;;
    written) cmd=("${nv[@]}") ;;
    buffered) cmd=("${nv[@]}" --ack buffered) ;;
    t[0-9]*) cmd=("${nv[@]}" -t "${1#t}") ;; # t1, t4: worker threads
    pack*) cmd=("${nv[@]}" --pack-connections "${1#pack}") ;; # e.g. pack8
    a | b) # two builds A/B: NVDEPOT_A, NVDEPOT_B, default options
      local bin=$NVDEPOT_A; [ "$1" = b ] && bin=$NVDEPOT_B
      cmd=("$bin" "${nv[@]:1}") ;;
    *) echo "unknown variant $1" >&2; exit 2 ;;
  esac
  "${cmd[@]}" >/dev/null 2>&1 &
  PID[$1]=$!
}
VARIANTS=${VARIANTS:-"memcached written buffered"}
declare -A PID PORT
p=22500
for v in $VARIANTS; do PORT[$v]=$p; start "$v" $p; p=$((p + 1)); done
# Stop the servers and remove their stores (4 GiB files each) on exit.
trap 'kill ${PID[*]} 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
for v in $VARIANTS; do wait_serving "${PORT[$v]}"; done
for c in "${CONCS[@]}"; do
  for r in $(seq "$REPS"); do
    for v in $VARIANTS; do
      a=$(cpu_ticks "${PID[$v]}")
      out=$(bash "$H/memaslap.sh" 127.0.0.1 "${PORT[$v]}" "$SECS" "$c" 2>&1 | tail -1)
      b=$(cpu_ticks "${PID[$v]}")
      ops=$(grep -o '[0-9]* ops/s' <<<"$out" | grep -o '[0-9]*')
      avg=$(grep -o 'avg_latency_us=[0-9]*' <<<"$out" | cut -d= -f2)
      cpr=$(awk -v a="$a" -v b="$b" -v o="${ops:-0}" -v s="$SECS" \
        'BEGIN { if (o > 0) printf "%.2f", (b - a) * 10000 / (o * s); else print "-" }')
      echo "$v c=$c r=$r ops=$ops avg_us=$avg cpu_us_per_req=$cpr"
    done
  done
done
