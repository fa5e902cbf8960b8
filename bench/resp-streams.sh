#!/usr/bin/env bash
# bench/resp-streams.sh -- long streams in `nvdepot serve` against
# redis-server on this machine, in one run, servers alternating (issue 36:
# "XADD appends without reading the stream's body"; the paged layout of
# crates/redis/src/stream_pages.rs):
#   redis-none    redis-server --appendonly no --save ''   (no persistence)
#   redis-always  redis-server --appendonly yes --appendfsync always
#   nvdepot       nvdepot serve (default --appendfsync always)
#   nvdepot-base  NV_BASE=path: another nvdepot build, for an A/B
# Tests, with redis-benchmark at concurrency C, REPS times, entries of one
# 100-byte field and one random-integer field:
#   xadd_maxlen_L  XADD s MAXLEN ~ L * … (L = 100, 1000, 10000): the
#                  capped event stream of BullMQ (default 10 000) and RQ
#   xrevrange_1    XREVRANGE s + - COUNT 1 on the 10 000-entry stream
#   xrange_10      XRANGE s - + COUNT 10
#   xlen           XLEN s
# usage: bash bench/resp-streams.sh            (C = 16, 3 reps)
#        QUICK=1 bash bench/resp-streams.sh    (1 rep, fewer requests)
# Output: bench/results/resp-streams[-quick].md with a ratio line
#   ratio xadd_vs_redis_always=… stream_reads_vs_redis=…
# each the LOWEST over its tests of nvdepot's median over redis-always's
# (XADD: durable on reply in both) or redis-none's (reads).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
  REPS=${REPS:-1} N=${N:-5000} OUT=${OUT:-$ROOT/bench/results/resp-streams-quick.md}
else
  REPS=${REPS:-3} N=${N:-20000} OUT=${OUT:-$ROOT/bench/results/resp-streams.md}
fi
C=${C:-16}
PORT_BASE=${PORT_BASE:-27900}
source bench/lib.sh
resp_bench_setup streams
SERVERS="redis-none redis-always nvdepot"
[ -n "${NV_BASE:-}" ] && SERVERS="$SERVERS nvdepot-base"
pid=
finish() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  wait 2>/dev/null || true; rm -rf "$WORK"/*/
}
trap finish EXIT

PAYLOAD=$(printf 'p%.0s' $(seq 1 100))
bench() { # PORT N COMMAND…: ops/s of redis-benchmark (bounded: redis-benchmark 7.0 can spin forever)
  local port=$1 n=$2; shift 2
  timeout 300 redis-benchmark -p "$port" -c "$C" -n "$n" -r 1000000 --csv "$@" 2>/dev/null |
    tr -d '"' | grep -E '^[A-Za-z]' | tail -1 | cut -d, -f2
}

: >"$WORK/points.tsv"
port=$PORT_BASE
for rep in $(seq 1 "$REPS"); do
  for server in $SERVERS; do
    port=$((port + 1))
    start_server "$server" "$port"
    for cap in 100 1000 10000; do
      redis-cli -p "$port" del s >/dev/null
      # Fill to the cap first: every measured XADD then trims.
      bench "$port" "$cap" XADD s MAXLEN '~' "$cap" '*' n __rand_int__ payload "$PAYLOAD" >/dev/null
      rps=$(bench "$port" "$N" XADD s MAXLEN '~' "$cap" '*' n __rand_int__ payload "$PAYLOAD")
      printf '%s\t%s\txadd_maxlen_%s\t%s\n' "$server" "$rep" "$cap" "$rps" >>"$WORK/points.tsv"
    done
    len=$(redis-cli -p "$port" xlen s)
    rps=$(bench "$port" "$N" XREVRANGE s + - COUNT 1)
    printf '%s\t%s\txrevrange_1\t%s\n' "$server" "$rep" "$rps" >>"$WORK/points.tsv"
    rps=$(bench "$port" "$N" XRANGE s - + COUNT 10)
    printf '%s\t%s\txrange_10\t%s\n' "$server" "$rep" "$rps" >>"$WORK/points.tsv"
    rps=$(bench "$port" "$N" XLEN s)
    printf '%s\t%s\txlen\t%s\n' "$server" "$rep" "$rps" >>"$WORK/points.tsv"
    rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
    log "$server rep $rep done (stream of $len entries, RSS ${rss} kB): $(grep -P "^$server\t$rep\t" "$WORK/points.tsv" | cut -f3,4 | tr '\t\n' '= ')"
  done
done

python3 - "$WORK/points.tsv" "$OUT" "$N" "$C" "$REPS" "$SERVERS" <<'PY'
import sys, statistics, collections
pts = collections.defaultdict(list)
for line in open(sys.argv[1]):
    server, rep, test, rps = line.rstrip("\n").split("\t")
    if rps:
        pts[(server, test)].append(float(rps))
med = {k: statistics.median(v) for k, v in pts.items()}
servers = sys.argv[6].split()
tests = ["xadd_maxlen_100", "xadd_maxlen_1000", "xadd_maxlen_10000", "xrevrange_1", "xrange_10", "xlen"]
lines = ["# Long streams: nvdepot serve against redis-server", "",
         f"`bash bench/resp-streams.sh` (N={sys.argv[3]} requests per test, concurrency {sys.argv[4]}, "
         f"{sys.argv[5]} rep(s); medians in ops/s, ranges min-max; entries of a 100-byte field "
         "and a random integer; reads on the stream capped at ~10 000 entries).", "",
         "| test | " + " | ".join(servers) + " | nvdepot / redis-always | nvdepot / redis-none |",
         "|---|" + "---|" * (len(servers) + 2)]
def cell(s, t):
    v = pts.get((s, t))
    return f"{med[(s, t)]:.0f} ({min(v):.0f}-{max(v):.0f})" if v else "-"
xadd, reads = [], []
for t in tests:
    nv, always, none = med.get(("nvdepot", t)), med.get(("redis-always", t)), med.get(("redis-none", t))
    ra = f"{nv / always:.2f}" if nv and always else "-"
    rn = f"{nv / none:.2f}" if nv and none else "-"
    if nv and always and t.startswith("xadd"):
        xadd.append(nv / always)
    if nv and none and not t.startswith("xadd"):
        reads.append(nv / none)
    lines.append(f"| {t} | " + " | ".join(cell(s, t) for s in servers) + f" | {ra} | {rn} |")
lines += ["", f"ratio xadd_vs_redis_always={min(xadd):.2f} stream_reads_vs_redis={min(reads):.2f}"]
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
