#!/usr/bin/env bash
# bench/ab/percore-memcache.sh -- pinned memcache A/B (bench/percore.sh's
# method): every variant's server on core SERVER_CPU [1] with one worker,
# memcaslap -T 1 on CLIENT_CPU [0], variants interleaved point by point.
# Prints one line per run: variant, concurrency, repetition, ops/s, server
# CPU µs per request (utime + stime, /proc), context switches and disk
# writes (of the whole disk holding the data, /proc/diskstats) per request.
#   VARIANTS="memcached a b" NVDEPOT_A=old/nvdepot NVDEPOT_B=new/nvdepot \
#     bash bench/ab/percore-memcache.sh REPS SECS CONC...
# Variants: memcached (-t 1); a, b (NVDEPOT_A, NVDEPOT_B; extra flags in
# ARGS_A, ARGS_B); buffered (NVDEPOT_A --ack buffered). Each nvdepot runs
# `memcache -t 1 -m 1024 --size 4G` on scratch data under BENCH_DIR
# (default bench/work/ab-percore).
set -u
REPS=$1 SECS=$2; shift 2; CONCS=("$@")
source "$(dirname "$0")/lib.sh"
SERVER_CPU=${SERVER_CPU:-1} CLIENT_CPU=${CLIENT_CPU:-0}
W=${BENCH_DIR:-$ROOT/bench/work/ab-percore}; rm -rf "$W"; mkdir -p "$W"
start() { # variant port: starts it pinned, in the background
  local cmd bin args
  case $1 in
    memcached) cmd=(memcached -t 1 -m 1024 -p "$2" -l 127.0.0.1 -U 0 -u root) ;;
    a | b | buffered)
      bin=${NVDEPOT_A:-$ROOT/target/release/nvdepot} args=${ARGS_A:-}
      [ "$1" = b ] && bin=$NVDEPOT_B args=${ARGS_B:-}
      [ "$1" = buffered ] && args="--ack buffered"
      # shellcheck disable=SC2206
      cmd=("$bin" memcache -t 1 -p "$2" -l 127.0.0.1 -m 1024 --data "$W/$1" --size 4G $args) ;;
    *) echo "unknown variant $1" >&2; exit 2 ;;
  esac
  taskset -c "$SERVER_CPU" "${cmd[@]}" >"$W/$1.log" 2>&1 &
  PID[$1]=$!
}
# disk_writes: writes completed by the disk holding W (/proc/diskstats).
DISK=$(lsblk -no pkname "$(df --output=source "$W" | tail -1)" 2>/dev/null || true)
[ -n "$DISK" ] || DISK=$(basename "$(df --output=source "$W" | tail -1)")
disk_writes() { awk -v d="$DISK" '$3 == d {print $8}' /proc/diskstats; }
VARIANTS=${VARIANTS:-"memcached a b"}
declare -A PID PORT
p=22600
for v in $VARIANTS; do PORT[$v]=$p; start "$v" $p; p=$((p + 1)); done
trap 'kill ${PID[*]} 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
for v in $VARIANTS; do
  wait_serving "${PORT[$v]}"
  THREADS=1 taskset -c "$CLIENT_CPU" bash "$H/memaslap.sh" 127.0.0.1 "${PORT[$v]}" 2 16 >/dev/null
done
tck=$(getconf CLK_TCK)
for c in "${CONCS[@]}"; do
  for r in $(seq "$REPS"); do
    for v in $VARIANTS; do
      a=$(cpu_ticks "${PID[$v]}") x=$(ctx_switches "${PID[$v]}") dw=$(disk_writes)
      out=$(THREADS=1 taskset -c "$CLIENT_CPU" bash "$H/memaslap.sh" 127.0.0.1 "${PORT[$v]}" "$SECS" "$c" 2>&1 | tail -1)
      b=$(cpu_ticks "${PID[$v]}") y=$(ctx_switches "${PID[$v]}") dw=$(( $(disk_writes) - dw ))
      ops=$(grep -o 'ops=[0-9]*' <<<"$out" | cut -d= -f2)
      rate=$(awk '{print $2}' <<<"$out")
      awk -v v="$v" -v c="$c" -v r="$r" -v rate="$rate" -v o="${ops:-0}" -v t=$((b - a)) \
        -v x=$((y - x)) -v k="$tck" -v dw="$dw" 'BEGIN {
          o = o > 0 ? o : 1
          printf "%s c=%s rep=%s ops/s=%s cpu_us/req=%.2f ctx/req=%.3f disk_writes/req=%.3f\n", v, c, r, rate, t * 1e6 / k / o, x / o, dw / o }'
    done
  done
done
