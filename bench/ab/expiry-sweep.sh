#!/usr/bin/env bash
# bench/ab/expiry-sweep.sh BIN… -- what the background expiry sweep of
# `nvdepot serve` costs an idle server: a store of N 16 KiB strings in
# database 0 (1 GiB at the default N=60000) and one key with an expiry,
# `--expiry-sweep-secs 2`; then, with no traffic for 30 s, the bytes read
# from the device (/proc/diskstats of the data directory's disk) and the
# server's CPU; and how long a pass took (its debug log). One run per
# binary, in the order given (an idle machine: nothing else reads the
# disk meanwhile). Results: bench/results/expiry-sweep.md.
set -euo pipefail
N=${N:-60000}
W=${TMPDIR:-/tmp}/nv-expiry-sweep
port=${PORT:-27811}
disk() { # the disk (not the partition) holding $1, as /proc/diskstats names it
  local dev; dev=$(df --output=source "$1" | tail -1)
  dev=$(basename "$(readlink -f "$dev")")
  [ -e "/sys/class/block/$dev/partition" ] && dev=$(basename "$(readlink -f "/sys/class/block/$dev/..")")
  echo "$dev"
}
for BIN in "$@"; do
  rm -rf "$W"; mkdir -p "$W"
  DISK=$(disk "$W")
  RUST_LOG=nvdepot_redis=debug setsid "$BIN" serve --port "$port" --data "$W/store" --size 8G \
    --expiry-sweep-secs 2 2>"$W/log" </dev/null &
  pid=$!
  for _ in $(seq 1 300); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-benchmark -p "$port" -t set -d 16384 -n "$N" -r 100000000 -c 32 -q >/dev/null 2>&1
  redis-cli -p "$port" set ttlkey v ex 100000 >/dev/null
  keys=$(redis-cli -p "$port" dbsize)
  sleep 5
  r0=$(awk -v d="$DISK" '$3==d{print $6}' /proc/diskstats); t0=$(awk '{print $14+$15}' "/proc/$pid/stat")
  sleep 30
  r1=$(awk -v d="$DISK" '$3==d{print $6}' /proc/diskstats); t1=$(awk '{print $14+$15}' "/proc/$pid/stat")
  pass=$(sed -n 's/.*a pass took \([0-9.]*\)s.*/\1 s/p' "$W/log" | tail -1)
  echo "$(basename "$BIN"): $keys keys; idle 30 s: read $(( (r1 - r0) * 512 / 1048576 )) MiB, server CPU $(( (t1 - t0) * 10 )) ms; sweep passes $(grep -c 'expiry sweep:' "$W/log"), last pass ${pass:-not logged}"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "$W"
done
