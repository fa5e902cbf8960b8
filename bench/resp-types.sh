#!/usr/bin/env bash
# bench/resp-types.sh -- the Redis collection types of `nvdepot serve`
# against redis-server on this machine, in one run, servers alternating
# (issue 36, Deliver 6, its first part):
#   redis-none    redis-server --appendonly no --save ''   (no persistence)
#   redis-always  redis-server --appendonly yes --appendfsync always
#   nvdepot       nvdepot serve --cache-mb 1024 (default --appendfsync
#                 always: every write durable on reply)
# redis-benchmark's own type tests (lpush rpush lpop rpop sadd hset spop
# zadd zpopmin lrange_100 lrange_600), each at each concurrency, REPS
# times. redis-benchmark pushes to ONE list (`mylist`), adds to one set,
# one sorted set and one hash (`myhash`, 100 000 random fields with -r):
# so the collections grow to tens of thousands of elements during a run,
# which is exactly the case the compact layout (a collection in one
# record, rewritten whole by each write) was slow at, and the paged
# layouts (lists, hashes, sets, sorted sets) are for.
# Not in this script yet: the big scenario (4x an equal memory cgroup:
# 1 M hashes, a 10 M-member sorted set, 1 M lists) with reads per op from
# /proc/diskstats and DRAM per element.
#
# usage: bash bench/resp-types.sh          (concurrency 1 16 128, 3 reps)
#        QUICK=1 bash bench/resp-types.sh  (16 and 128, 1 rep, fewer requests)
#        TESTS=lpush,lpop,lrange_100 OUT=… bash bench/resp-types.sh  (some tests;
#        OUT names the result file, so a partial run leaves the full one)
#        NV_ARGS="--threads 1" …  (more options for nvdepot serve: one
#        worker, as redis-server has one thread, on a machine whose other
#        core runs redis-benchmark)
# Output: bench/results/resp-types[-quick].md with the table, then
#   ratio types_write_vs_redis_always=… types_read_vs_redis=…
# types_write_vs_redis_always: the LOWEST over the write tests (lpush rpush
# sadd hset zadd) and concurrencies of nvdepot / redis-always ops/s (both
# durable on reply; goal >= 1.0); types_read_vs_redis: the LOWEST over
# lrange_100 and lrange_600 of nvdepot / redis-none (goal >= 0.9). The pops
# (lpop rpop spop zpopmin) are writes too and are in the table.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
  CONCS=(16 128) REPS=${REPS:-1} N=${N:-20000} OUT=${OUT:-$ROOT/bench/results/resp-types-quick.md}
else
  CONCS=(1 16 128) REPS=${REPS:-3} N=${N:-50000} OUT=${OUT:-$ROOT/bench/results/resp-types.md}
fi
TESTS=${TESTS:-lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange_100,lrange_600}
PORT_BASE=${PORT_BASE:-26600}
source bench/lib.sh
resp_bench_setup types
pid=
finish() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"/*/; }
trap finish EXIT

: >"$WORK/points.tsv"
port=$PORT_BASE
for rep in $(seq 1 "$REPS"); do
  for c in "${CONCS[@]}"; do
    for server in redis-none redis-always nvdepot; do
      port=$((port + 1))
      # shellcheck disable=SC2086
      start_server "$server" "$port" --size 4G --cache-mb 1024 ${NV_ARGS:-}
      out=$(redis-benchmark -p "$port" -c "$c" -n "$N" -r 100000 -t "$TESTS" --csv 2>/dev/null |
            tr -d '"' | grep -E '^[A-Z]')
      rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
      kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
      while IFS=, read -r test rps _avg _min p50 _rest; do
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$server" "$c" "$rep" "$test" "$rps" "$p50" >>"$WORK/points.tsv"
      done <<<"$out"
      log "$server c=$c rep $rep done (RSS ${rss} kB): $(echo "$out" | cut -d, -f1,2 | tr '\n' ' ')"
    done
  done
done

python3 - "$WORK/points.tsv" "$OUT" "$N" "${CONCS[*]}" "$REPS" "${NV_ARGS:-}" <<'PY'
import sys, statistics, collections
pts = collections.defaultdict(list)
for line in open(sys.argv[1]):
    server, c, rep, test, rps, p50 = line.rstrip("\n").split("\t")
    pts[(server, int(c), test)].append(float(rps))
tests = sorted({t for (_, _, t) in pts}, key=lambda t: t.split()[0])
concs = sorted({c for (_, c, _) in pts})
med = {k: statistics.median(v) for k, v in pts.items()}
lines = ["# Redis collection types: nvdepot serve against redis-server",
         "",
         f"`bash bench/resp-types.sh` (N={sys.argv[3]} requests per test, concurrency {sys.argv[4]}, "
         f"{sys.argv[5]} rep(s); medians in ops/s"
         + (f"; nvdepot serve with `{sys.argv[6]}`" if sys.argv[6] else "")
         + "). redis-benchmark's type tests work on one key "
         "per type, which grows to tens of thousands of elements. Lists past 16 KiB are "
         "paged (a push or pop writes one page and the metadata), and so are hashes "
         "and sets (a field's or member's write, one bucket and the metadata), and sorted "
         "sets (a member's write, its bucket, its tree leaf, the inner nodes above it and "
         "the metadata).",
         "",
         "| test | c | redis-none | redis-always | nvdepot | nvdepot / redis-always | nvdepot / redis-none |",
         "|---|---|---|---|---|---|---|"]
writes = ("LPUSH", "RPUSH", "SADD", "HSET", "ZADD")
reads = ("LRANGE_100", "LRANGE_600")
w_ratio, r_ratio = [], []
for t in tests:
    for c in concs:
        a, b, n = (med.get((s, c, t)) for s in ("redis-none", "redis-always", "nvdepot"))
        if None in (a, b, n):
            continue
        lines.append(f"| {t} | {c} | {a:.0f} | {b:.0f} | {n:.0f} | {n / b:.2f} | {n / a:.2f} |")
        key = t.split()[0].upper()
        if key in writes:
            w_ratio.append(n / b)
        if any(key.startswith(r) for r in reads):
            r_ratio.append(n / a)
low = lambda r: f"{min(r):.2f}" if r else "not-run"
ratio = (f"ratio types_write_vs_redis_always={low(w_ratio)} "
         f"types_read_vs_redis={low(r_ratio)} big_reads_per_op=not-run "
         f"dram_per_element_vs_redis=not-run")
lines += ["", ratio, ""]
open(sys.argv[2], "w").write("\n".join(lines))
print("\n".join(lines))
PY
