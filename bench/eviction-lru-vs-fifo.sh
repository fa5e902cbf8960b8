#!/usr/bin/env bash
# Segment LRU vs FIFO eviction: hit ratio of `nvdepot memcache` as a
# look-aside cache whose data set is ~6x its flash store.
#
#   NVDEPOT=target/release/nvdepot bash bench/eviction-lru-vs-fifo.sh
#
# Each run: a fresh 256 MiB store (4 MiB segments, -m 0 so no DRAM tier
# hides the flash policy), 1 M keys x 1 KiB preloaded (1.5 GiB of records:
# the store keeps about the last 170 k), then SECS seconds of zipf(0.99)
# gets:sets 9:1 over all keys, every missed get followed by a set of its
# key (--set-on-miss). Prints hit ratio and ops/s per policy and rep.
# Env: NVDEPOT, REPS (default 2), SECS (default 60), KEYS (default 1m),
# PORT (default 11411), OUT (default bench/results/eviction-lru-vs-fifo.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
NVDEPOT=${NVDEPOT:-target/release/nvdepot}
REPS=${REPS:-2}
SECS=${SECS:-60}
KEYS=${KEYS:-1m}
PORT=${PORT:-11411}
RATIO=${RATIO:-9:1}
OUT=${OUT:-bench/results/eviction-lru-vs-fifo.txt}
mkdir -p bench/work "$(dirname "$OUT")"
work=$(mktemp -d bench/work/evict.XXXXXX)
server=
cleanup() {
    if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

{
echo "# eviction-lru-vs-fifo $(date -u +%FT%TZ) $(git rev-parse --short HEAD)"
echo "# store 256M, segments 4M, -m 0, $KEYS keys x 1 KiB, zipf 0.99, get:set $RATIO, set on miss, ${SECS}s, 32 connections"
for rep in $(seq 1 "$REPS"); do
    for policy in ${POLICIES:-lru fifo}; do
        rm -rf "$work/data"
        "$NVDEPOT" memcache -p "$PORT" -m 0 --data "$work/data" --size 256M \
            --segment-size 4M -I 512k --eviction "$policy" 2>"$work/server.log" &
        server=$!
        for _ in $(seq 100); do
            grep -q "listening" "$work/server.log" && break
            sleep 0.1
        done
        if ! kill -0 "$server" 2>/dev/null; then cat "$work/server.log" >&2; exit 1; fi
        "$NVDEPOT" bench memcache --server "127.0.0.1:$PORT" --keys "$KEYS" \
            --preload --requests 0 >/dev/null
        "$NVDEPOT" bench memcache --server "127.0.0.1:$PORT" --keys "$KEYS" \
            --connections 32 --ratio "$RATIO" --distribution zipf --set-on-miss --duration "$SECS" \
            --json "$work/run.json" >"$work/run.txt"
        stats=$(exec 3<>"/dev/tcp/127.0.0.1/$PORT"; printf 'stats\r\nquit\r\n' >&3; timeout 5 cat <&3 || true)
        ev=$(echo "$stats" | awk '/STAT evictions /{e=$3} /STAT nvdepot_evictions_logged /{l=$3} END{print e" logged="l}' | tr -d '\r')
        kill "$server"; wait "$server" || true; server=
        python3 - "$work/run.json" "$policy" "$rep" "$ev" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["run"]
hits, misses = r["hits"], r["misses"]
print(f"policy={sys.argv[2]} rep={sys.argv[3]} hit_ratio={hits / max(1, hits + misses):.4f} "
      f"ops_per_sec={r['ops_per_sec']:.0f} gets={r['gets']} sets={r['sets']} evictions={sys.argv[4]}")
PY
    done
done
} | tee "$OUT"
