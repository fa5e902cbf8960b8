#!/usr/bin/env bash
# bench/resp-types-big.sh -- the big scenario of issue 36 (Deliver 6, its
# second part): collections with more data than DRAM. Loads
#   HASHES hashes of FIELDS fields   (h:%012d, fields f0.., 10-byte values)
#   one sorted set of ZSET members   (big, members m:%012d, random scores,
#                                     added 100 per ZADD)
#   LISTS lists of LIST_LEN elements (l:%012d)
# into redis-server (no persistence, all in DRAM) and into nvdepot serve
# run in a memory cgroup of a quarter of the DRAM redis-server needs for
# the same data plus BASE_MB (default 32) for its own fixed footprint (the
# store is O_DIRECT, no page cache; --cache-mb is an eighth of the
# budget), then
# restarts nvdepot (cold cache) and runs point operations on random keys
# with redis-benchmark (c = 32):
#   HGET h:R f7, HSET h:R f3 v, ZSCORE big m:R, ZRANK big m:R,
#   LINDEX l:R 0, LINDEX l:R -1, LPUSH l:R x
# For each: ops/s, and device reads per operation from /proc/diskstats
# (reads completed on the store's disk during the run / operations).
# DRAM per element: RSS after loading minus RSS of the fresh server, over
# the elements loaded, nvdepot against redis-server. Reference: fio 4 KiB
# random reads at QD 32 on a file in the same directory, in the same run.
#
# usage: bash bench/resp-types-big.sh            (1/10 scale: 100 k hashes,
#        a 1 M-member sorted set, 100 k lists)
#        SCALE=full bash bench/resp-types-big.sh (1 M hashes, 10 M members,
#        1 M lists, as the issue asks)
# Output: bench/results/resp-types-big[-full].md with the table, then
#   ratio big_reads_per_op=… dram_per_element_vs_redis=…
# big_reads_per_op: the HIGHEST over the point reads (HGET ZSCORE LINDEX)
# of reads per operation (goal <= 1.1); ZRANK's (goal <= 2) and the
# writes' are in the table. dram_per_element_vs_redis: nvdepot's DRAM per
# element over Redis's (goal <= 1/8 = 0.125).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
if [ "${SCALE:-tenth}" = full ]; then
  HASHES=${HASHES:-1000000} ZSET=${ZSET:-10000000} LISTS=${LISTS:-1000000}
  OUT=${OUT:-$ROOT/bench/results/resp-types-big-full.md}
else
  HASHES=${HASHES:-100000} ZSET=${ZSET:-1000000} LISTS=${LISTS:-100000}
  OUT=${OUT:-$ROOT/bench/results/resp-types-big.md}
fi
FIELDS=${FIELDS:-20} LIST_LEN=${LIST_LEN:-10} N=${N:-20000} C=${C:-32}
PORT=${PORT:-26700}
source bench/lib.sh
resp_bench_setup types-big fio
pid=
finish() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"/store "$WORK"/fio.dat; }
trap finish EXIT

dev=$(df --output=source "$WORK" | tail -1); dev=${dev#/dev/}
disk_reads() { awk -v d="$dev" '$3 == d {print $4}' /proc/diskstats; }
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
wait_up() { for _ in $(seq 1 1200); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }

log "generating the load ($HASHES hashes x $FIELDS, $ZSET members, $LISTS lists x $LIST_LEN)"
python3 - "$WORK/load.resp" "$HASHES" "$FIELDS" "$ZSET" "$LISTS" "$LIST_LEN" >"$WORK/load.meta" <<'PY'
import sys, random
path, hashes, fields, zset, lists, list_len = sys.argv[1], *map(int, sys.argv[2:])
rng = random.Random(36)
elements = payload = 0
def cmd(*args):
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)
with open(path, "wb") as f:
    for i in range(hashes):
        key = b"h:%012d" % i
        args = [b"HSET", key]
        for j in range(fields):
            args += [b"f%d" % j, b"v%09d" % rng.randrange(10**9)]
        f.write(cmd(*args))
        elements += fields
        payload += len(key) + sum(len(a) for a in args[2:])
    batch = 100
    for start in range(0, zset, batch):
        args = [b"ZADD", b"big"]
        for i in range(start, min(start + batch, zset)):
            m = b"m:%012d" % i
            args += [b"%d" % rng.randrange(10**9), m]
            payload += len(m) + 8
        f.write(cmd(*args))
        elements += len(args) // 2 - 1
    for i in range(lists):
        key = b"l:%012d" % i
        args = [b"RPUSH", key] + [b"e%09d" % rng.randrange(10**9) for _ in range(list_len)]
        f.write(cmd(*args))
        elements += list_len
        payload += len(key) + sum(len(a) for a in args[2:])
print(elements, payload)
PY
read -r ELEMENTS PAYLOAD <"$WORK/load.meta"
log "$ELEMENTS elements, $PAYLOAD payload bytes"

OPS=("HGET h:__rand_int__ f7|$HASHES" "ZSCORE big m:__rand_int__|$ZSET" "ZRANK big m:__rand_int__|$ZSET"
     "LINDEX l:__rand_int__ 0|$LISTS" "LINDEX l:__rand_int__ -1|$LISTS"
     "HSET h:__rand_int__ f3 v000000000|$HASHES" "LPUSH l:__rand_int__ x|$LISTS")
: >"$WORK/points.tsv"
run_ops() { # SERVER
  for spec in "${OPS[@]}"; do
    local op=${spec%|*} range=${spec#*|}
    local r0; r0=$(disk_reads)
    # shellcheck disable=SC2086
    local rps; rps=$(redis-benchmark -p "$PORT" -c "$C" -n "$N" -r "$range" --csv $op 2>/dev/null |
      tr -d '"' | grep -E '^[A-Z]' | cut -d, -f2 | head -1)
    local r1; r1=$(disk_reads)
    printf '%s\t%s\t%s\t%s\n' "$1" "${op//__rand_int__/R}" "$rps" "$(( r1 - r0 ))" >>"$WORK/points.tsv"
    log "$1 $op: $rps ops/s, $(( r1 - r0 )) device reads"
  done
}

log "redis-server: load"
redis-server --port "$PORT" --bind 127.0.0.1 --dir "$WORK" --save '' --appendonly no >"$WORK/redis.log" 2>&1 &
pid=$!; wait_up
redis0=$(rss_kb "$pid")
redis-cli -p "$PORT" --pipe <"$WORK/load.resp" | tail -1 >&2
redis1=$(rss_kb "$pid")
# The budget: a quarter of the DRAM redis-server needs for the data, plus
# BASE_MB for the server's own fixed footprint (an empty nvdepot serve is
# ~20 MiB: threads, rings, the index's first table; with the quarter alone
# at 1/10 scale, 46 MiB, it was OOM-killed while loading).
BASE_MB=${BASE_MB:-32}
LIMIT=$(( (redis1 - redis0) * 1024 / 4 + BASE_MB * 1048576 ))
CACHE_MB=$(( LIMIT / 8 / 1048576 )); [ "$CACHE_MB" -lt 4 ] && CACHE_MB=4
log "redis-server holds the data in $(( (redis1 - redis0) / 1024 )) MiB; nvdepot's cgroup: $LIMIT bytes, --cache-mb $CACHE_MB"
run_ops redis
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=

log "nvdepot: load (in a $LIMIT-byte memory cgroup)"
mkdir -p "$WORK/store"
serve() { bash ../shared/harness/in_memcg.sh "$LIMIT" types-big -- \
  "$NV" serve --port "$PORT" --bind 127.0.0.1 --data "$WORK/store" --size 4G --cache-mb "$CACHE_MB" \
  2>>"$WORK/nvdepot.log" & pid=$!; wait_up; }
[ -d ../shared/harness ] || { echo "needs ../shared/harness/in_memcg.sh" >&2; exit 2; }
serve
nv0=$(rss_kb "$pid")
redis-cli -p "$PORT" --pipe <"$WORK/load.resp" | tail -1 >&2
nv1=$(rss_kb "$pid")
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
log "nvdepot: restart (cold cache)"
serve
run_ops nvdepot
nvrss=$(rss_kb "$pid")
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
rmdir /sys/fs/cgroup/memory/nvbench-types-big /sys/fs/cgroup/nvbench-types-big 2>/dev/null || true

log "fio: 4 KiB random reads, QD $C"
fio_line=$(SIZE=2G bash ../shared/harness/fio_4k.sh "$WORK/fio.dat" randread "$C" 10 | tail -1)
fio_iops=$(sed -n 's/.*iops=\([0-9]*\).*/\1/p' <<<"$fio_line")

python3 - "$WORK/points.tsv" "$OUT" "$ELEMENTS" "$PAYLOAD" "$LIMIT" "$redis0" "$redis1" "$nv0" "$nv1" \
  "$nvrss" "$fio_iops" "$N" "$C" "$HASHES" "$ZSET" "$LISTS" "$FIELDS" "$LIST_LEN" "$CACHE_MB" <<'PY'
import sys
(pts, out, elements, payload, limit, r0, r1, n0, n1, nvrss, fio, n, c,
 hashes, zset, lists, fields, list_len, cache_mb) = sys.argv[1:]
elements, payload, limit, n, fio = int(elements), int(payload), int(limit), int(n), int(fio or 0)
rows = {}
for line in open(pts):
    server, op, rps, reads = line.rstrip("\n").split("\t")
    rows[(server, op)] = (float(rps or 0), int(reads))
ops = list(dict.fromkeys(op for (_, op) in rows))
redis_b = (int(r1) - int(r0)) * 1024 / elements
nv_b = (int(n1) - int(n0)) * 1024 / elements
lines = ["# Redis collections bigger than DRAM: nvdepot serve against redis-server",
         "",
         f"`bash bench/resp-types-big.sh`: {hashes} hashes of {fields} fields, one sorted set of "
         f"{zset} members, {lists} lists of {list_len} elements: {elements} elements, "
         f"{payload / 2**20:.0f} MiB of keys, fields and values. redis-server holds them in DRAM "
         f"(no persistence); nvdepot runs in a memory cgroup of {limit / 2**20:.0f} MiB (a quarter "
         f"of redis-server's DRAM for the data plus 32 MiB for the server's fixed footprint) with --cache-mb {cache_mb}, restarted after loading (cold cache). "
         f"redis-benchmark -c {c} -n {n}, random keys (and members). Device reads from "
         f"/proc/diskstats over each run. fio 4 KiB random reads at QD {c} on the same file "
         f"system: {fio} IOPS.",
         "",
         "| operation | redis-server ops/s | nvdepot ops/s | nvdepot / fio | device reads per op (nvdepot) |",
         "|---|---|---|---|---|"]
worst = []
for op in ops:
    rr = rows.get(("redis", op), (0, 0))[0]
    nr, reads = rows.get(("nvdepot", op), (0, 0))
    per = reads / n
    vs_fio = f"{nr / fio:.2f}" if fio else "-"
    lines.append(f"| {op} | {rr:.0f} | {nr:.0f} | {vs_fio} | {per:.2f} |")
    if op.split()[0] in ("HGET", "ZSCORE") or op.startswith("LINDEX"):
        worst.append(per)
lines += ["",
          f"DRAM per element (RSS after loading minus RSS fresh, over {elements} elements): "
          f"redis-server {redis_b:.1f} B, nvdepot {nv_b:.1f} B (nvdepot's RSS after the reads: "
          f"{int(nvrss) / 1024:.0f} MiB, cgroup limit {limit / 2**20:.0f} MiB).",
          "",
          f"ratio big_reads_per_op={max(worst):.2f} dram_per_element_vs_redis={nv_b / redis_b:.3f}",
          ""]
open(out, "w").write("\n".join(lines))
print("\n".join(lines))
PY
