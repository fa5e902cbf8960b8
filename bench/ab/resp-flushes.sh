#!/usr/bin/env bash
# bench/ab/resp-flushes.sh -- one write point of `nvdepot serve` with its
# group commit's shape: a fresh one-worker server (serve args follow),
# `redis-benchmark -c 16 -n 20000 -r 100000 -t TEST` to grow the key, then
# `-c CONC -n N`; prints ops/s, server CPU µs per request (utime + stime,
# /proc), requests per device flush (INFO nvdepot_flushes) and combined
# steps per batch and batches per flush (INFO combined_steps /
# combined_batches).
#   bash bench/ab/resp-flushes.sh BIN TEST CONC N [serve args...]
set -u
BIN=$1 T=$2 C=$3 N=$4; shift 4
D=${TMPDIR:-/tmp}/resp-flushes-$$; rm -rf "$D"; mkdir -p "$D"
PORT=${PORT:-26995}
"$BIN" serve --data "$D" --port "$PORT" --bind 127.0.0.1 --threads 1 --size 2G "$@" >/dev/null 2>&1 &
P=$!
trap 'kill $P 2>/dev/null; wait $P 2>/dev/null; rm -rf "$D"' EXIT
for _ in $(seq 50); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
timeout 120 redis-benchmark -p "$PORT" -c 16 -n 20000 -r 100000 -t "$T" -q >/dev/null 2>&1; sync; sleep 1
info() { redis-cli -p "$PORT" info | tr -d '\r' | awk -F: -v k="$1" '$1==k{print $2}'; }
f0=$(info nvdepot_flushes) b0=$(info combined_batches) s0=$(info combined_steps)
c0=$(awk '{print $14+$15}' /proc/$P/stat)
ops=$(timeout 300 redis-benchmark -p "$PORT" -c "$C" -n "$N" -r 100000 -t "$T" -q 2>/dev/null |
  tr '\r' '\n' | grep -a "per second" | tail -1 | awk '{print $2}')
f1=$(info nvdepot_flushes) b1=$(info combined_batches) s1=$(info combined_steps)
c1=$(awk '{print $14+$15}' /proc/$P/stat)
tck=$(getconf CLK_TCK)
python3 -c "n=$N; print(f'$(basename "$BIN") $T c=$C ops={float(\"${ops:-0}\"):.0f} cpu_us={($c1-$c0)*1e6/$tck/n:.1f} ops/flush={n/max($f1-$f0,1):.1f} steps/batch={($s1-$s0)/max($b1-$b0,1):.1f} batches/flush={($b1-$b0)/max($f1-$f0,1):.2f}')"
