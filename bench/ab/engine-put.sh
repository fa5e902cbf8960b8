#!/usr/bin/env bash
# bench/ab/engine-put.sh -- engine PUT A/B of two nvdepot builds: each
# build's `bench engine --op put --qd 1,128` (uring, durable) with 4 KiB and
# 1000 B values, on a fresh store per run, interleaved, REPS times. Prints
# one line per run: build, value size, rep, qd, puts/s, p50 µs.
#   [REPS=3] [SECS=8] [KEYS=200000] [SIZE=4096M] [BENCH_DIR=bench/work/ab-put] \
#     bash bench/ab/engine-put.sh BIN_A BIN_B
set -eu
A=$1 B=$2
REPS=${REPS:-3} SECS=${SECS:-8} KEYS=${KEYS:-200000} SIZE=${SIZE:-4096M}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=${BENCH_DIR:-$ROOT/bench/work/ab-put}
rm -rf "$W"; mkdir -p "$W"
trap 'rm -rf "$W"' EXIT
for rep in $(seq "$REPS"); do
  for bin in "$A" "$B"; do
    for v in 4096 1000; do
      rm -rf "$W/s"
      nice -n -5 "$bin" bench engine --keys "$KEYS" --duration "$SECS" --data "$W/s" \
        --size "$SIZE" --value-size $v --backend uring --op put --qd 1,128 2>&1 \
        | awk -v b="$bin" -v v=$v -v r=$rep '/^uring/ {print b, "value", v, "rep" r, "qd", $3, "ops/s", $6, "p50us", $7}'
    done
  done
done
