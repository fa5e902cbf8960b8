#!/usr/bin/env bash
# bench/ab/engine-get.sh -- engine GET A/B of two nvdepot builds against fio
# on the same disk: each build's `bench engine --op get --qd 1,128`
# (uring) on two preloaded stores -- 4000 B values in 4 KiB grains
# (page-aligned 4 KiB reads) and 4 KiB values (4.5 KiB reads) -- then fio
# 4 KiB randread at QD 1 and 128, interleaved, REPS times. Stores and the
# fio file are made once under BENCH_DIR and removed on exit.
#   [REPS=3] [SECS=10] [KEYS=600000] [BENCH_DIR=bench/work/ab-get] \
#     bash bench/ab/engine-get.sh BIN_A BIN_B
set -eu
A=$1 B=$2
REPS=${REPS:-3} SECS=${SECS:-10} KEYS=${KEYS:-600000}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=${BENCH_DIR:-$ROOT/bench/work/ab-get}
rm -rf "$W"; mkdir -p "$W"
trap 'rm -rf "$W"' EXIT
DATA_MB=$(( KEYS * 4608 / 1048576 + 1 ))
STORE_MB=$(( DATA_MB * 2 + 1024 ))
load() { # STORE VALUE_SIZE [ARGS...]
  local s=$1 v=$2; shift 2
  "$A" bench engine --keys "$KEYS" --duration 0.1 --data "$W/$s" --size "${STORE_MB}M" \
    --value-size "$v" --backend uring --qd 1 "$@" >/dev/null
}
load page 4000 --grain-size 4096
load record 4096
fio --name=layout --filename="$W/fio.dat" --size="${DATA_MB}M" --rw=write --bs=1M --direct=1 \
  --ioengine=libaio --iodepth=32 --end_fsync=1 >/dev/null
for rep in $(seq "$REPS"); do
  for bin in "$A" "$B"; do
    for s in page record; do
      v=4000; [ $s = record ] && v=4096
      nice -n -5 "$bin" bench engine --keys "$KEYS" --duration "$SECS" --data "$W/$s" \
        --size "${STORE_MB}M" --value-size $v --backend uring --op get --qd 1,128 2>&1 \
        | awk -v b="$bin" -v s=$s -v r=$rep '/^uring/ {print b, s, "rep" r, "qd", $3, "ops/s", $6, "p50us", $7}'
    done
  done
  for qd in 1 128; do
    nice -n -5 fio --name=x --filename="$W/fio.dat" --size="${DATA_MB}M" --direct=1 --bs=4k \
      --rw=randread --ioengine=io_uring --iodepth=$qd --time_based --runtime="$SECS" \
      --norandommap --randrepeat=0 --output-format=json \
      | python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]['read']; print('fio 4k rep$rep qd $qd ops/s', int(j['iops']), 'p50us', j['clat_ns']['percentile']['50.000000']/1000)"
  done
done
