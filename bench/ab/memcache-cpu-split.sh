#!/usr/bin/env bash
# bench/ab/memcache-cpu-split.sh -- server CPU per request at one
# connection, gets only against 9:1 gets:sets, memcached (-m 1024) and
# nvdepot memcache (default --ack written), hot data (KEYS items of 1 KiB
# preloaded, default 100 000), interleaved, REPS repetitions (default 3) of
# SECS seconds (default 8). Separates what the sets' device writes cost
# from the network path's cost (bench/results/README.md, "What remains of
# issue 11's goals"). One line per run:
#   server  ratio  rep  ops  ops/s  cpu_us/req
#   NVDEPOT=target/release/nvdepot bash bench/ab/memcache-cpu-split.sh
set -u
source "$(dirname "$0")/lib.sh"
BIN=${NVDEPOT:-$ROOT/target/release/nvdepot}
W=${BENCH_DIR:-$ROOT/bench/work/cpu-split}
REPS=${REPS:-3} SECS=${SECS:-8} KEYS=${KEYS:-100000} PORT=${PORT:-23111}
hz=$(getconf CLK_TCK)
for rep in $(seq 1 "$REPS"); do
  for server in memcached nvdepot; do
    for ratio in 1:0 9:1; do
      rm -rf "$W"; mkdir -p "$W"
      if [ "$server" = memcached ]; then
        memcached -m 1024 -p "$PORT" -l 127.0.0.1 -U 0 -u root &
      else
        "$BIN" memcache -p "$PORT" -l 127.0.0.1 -m 1024 --data "$W" --size 4G >/dev/null 2>&1 &
      fi
      pid=$!
      wait_serving "$PORT"
      "$BIN" bench memcache --server "127.0.0.1:$PORT" --keys "$KEYS" --preload --requests 0 >/dev/null 2>&1
      c0=$(cpu_ticks "$pid")
      "$BIN" bench memcache --server "127.0.0.1:$PORT" --keys "$KEYS" --connections 1 --threads 1 \
        --ratio "$ratio" --duration "$SECS" --json "$W/run.json" >/dev/null 2>&1
      c1=$(cpu_ticks "$pid")
      python3 - "$server" "$ratio" "$rep" "$c0" "$c1" "$hz" "$W/run.json" <<'PY'
import json, sys
server, ratio, rep, c0, c1, hz, f = sys.argv[1:]
r = json.load(open(f))["run"]
cpu_us = (int(c1) - int(c0)) * 1e6 / int(hz)
print(f"{server}\t{ratio}\trep {rep}\t{r['ops']}\t{r['ops_per_sec']:.0f}\t{cpu_us / r['ops']:.2f}")
PY
      kill "$pid"; wait "$pid" 2>/dev/null
    done
  done
done
rm -rf "$W"
