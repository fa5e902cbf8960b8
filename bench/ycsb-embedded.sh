#!/usr/bin/env bash
# bench/ycsb-embedded.sh -- the seeds' YCSB experiment (uDepot, papers/000
# §5.3: YCSB from Java through JNI) on nvdepot's embedded store against
# RocksDB, side by side in one run (issue 38, Deliver 4):
#   nvdepot   io.nvdepot over JNI (site.ycsb.db.nvdepot.NvdepotClient)
#   rocksdb   rocksdbjni (site.ycsb.db.nvdepot.RocksDbClient: 256 MiB LRU
#             block cache with index and filter blocks, Bloom filters,
#             2 background jobs, dynamic level bytes)
# Same disk (DIR), same records (RECORDS x 10 fields x 100 bytes), each JVM
# in an equal memory cgroup (MEMCG, heap and page cache alike; -Xmx HEAP),
# the data set about 4x the cgroup by default. For each durability (SYNC:
# synced writes on both, then unsynced on both) each store is loaded with
# LOAD_THREADS threads, then runs YCSB workloads A, B, C, D and F for
# SECONDS each at every thread count of THREADS. The page cache is dropped
# before each store's load and first run.
# Reported per run: throughput, p99 latency of reads and of writes, device
# reads and writes per operation (/proc/diskstats of DIR's disk, whole
# machine: run on an idle one).
# usage: bash bench/ycsb-embedded.sh
#        QUICK=1 bash bench/ycsb-embedded.sh     (small, seconds: a smoke run)
# Output: bench/results/ycsb-embedded[-quick].md, ending with
#   ratio ycsb_a_vs_rocksdb=... ycsb_b_... ycsb_c_... ycsb_d_... ycsb_f_...
# each the best throughput over THREADS of nvdepot over RocksDB's, with
# synced writes (goal >= 1.5 each).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
  RECORDS=${RECORDS:-20000} MEMCG=${MEMCG:-1G} THREADS=${THREADS:-"4"} SECONDS_PER_RUN=${SECONDS_PER_RUN:-3}
  SYNC=${SYNC:-"true"} OUT=${OUT:-$ROOT/bench/results/ycsb-embedded-quick.md} CREATE=${CREATE:-1G}
else
  RECORDS=${RECORDS:-3600000} MEMCG=${MEMCG:-1G} THREADS=${THREADS:-"1 16 64"} SECONDS_PER_RUN=${SECONDS_PER_RUN:-30}
  SYNC=${SYNC:-"true false"} OUT=${OUT:-$ROOT/bench/results/ycsb-embedded.md} CREATE=${CREATE:-12G}
fi
HEAP=${HEAP:-256m}
# nvdepot's DRAM value cache (value_cache_bytes): what the cgroup leaves
# once the JVM (about 260 MB measured at 64 threads) and the index are
# counted; RocksDB has its block cache and the page cache in the same
# budget. NV_CACHE=0 runs without it.
NV_CACHE=${NV_CACHE:-448M}
# More store options for nvdepot, as YCSB properties, e.g.
# NV_EXTRA="-p nvdepot.option.unlock_before_durable=true"; SYSTEMS="nvdepot"
# runs one store only (no ratio line then).
NV_EXTRA=${NV_EXTRA:-}
SYSTEMS=${SYSTEMS:-"nvdepot rocksdb"}
LOAD_THREADS=${LOAD_THREADS:-32}
WORKLOADS=${WORKLOADS:-"a b c d f"}
DIR=${DIR:-$ROOT/bench/work/ycsb}
source scripts/lib.sh
ensure_cargo
if ! command -v mvn >/dev/null || ! command -v javac >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q && apt-get install -y -q default-jdk-headless maven
fi

echo "== building: the JNI library (release), io.nvdepot, the YCSB bindings"
cargo build --release --quiet -p nvdepot-jni
(cd bindings/java && mvn -q -B install -DskipTests -Dnvdepot.native.dir="$ROOT/target/release")
(cd bindings/java/ycsb && mvn -q -B package && mvn -q -B dependency:build-classpath -Dmdep.outputFile=target/classpath.txt)
CP=$ROOT/bindings/java/ycsb/target/classes:$(cat bindings/java/ycsb/target/classpath.txt)
LIB=$ROOT/target/release/libnvdepot_jni.so

disk=$(lsblk -no PKNAME "$(df --output=source "$(dirname "$DIR")" | tail -1)" 2>/dev/null || true)
[ -n "$disk" ] || disk=$(basename "$(df --output=source "$(dirname "$DIR")" | tail -1)")
diskstats() { awk -v d="$disk" '$3 == d { print $4, $8 }' /proc/diskstats; }

# ycsb NAME SYSTEM SYNC PHASE(-load|-t) WORKLOAD THREADS -> the YCSB output in $DIR/NAME.log
ycsb() {
  local name=$1 system=$2 sync=$3 phase=$4 workload=$5 threads=$6 db props=()
  if [ "$system" = nvdepot ]; then
    db=site.ycsb.db.nvdepot.NvdepotClient
    props=(-p nvdepot.dir="$DIR/nvdepot" -p nvdepot.option.create_bytes="$CREATE" -p nvdepot.option.sync="$sync"
      -p nvdepot.option.value_cache_bytes="$NV_CACHE")
    # shellcheck disable=SC2206 # NV_EXTRA is split into -p pairs on purpose
    props+=($NV_EXTRA)
  else
    db=site.ycsb.db.nvdepot.RocksDbClient
    props=(-p rocksdb.dir="$DIR/rocksdb" -p rocksdb.sync="$sync")
  fi
  local limits=()
  [ "$phase" = -t ] && limits=(-p operationcount=1000000000 -p maxexecutiontime="$SECONDS_PER_RUN")
  [ "$phase" = -load ] && limits=(-p operationcount="$RECORDS")
  local before after
  before=$(diskstats)
  bash /work/shared/harness/in_memcg.sh "$MEMCG" "ycsb-$system" -- \
    java -Xmx"$HEAP" -Dnvdepot.library="$LIB" -cp "$CP" site.ycsb.Client "$phase" -db "$db" \
    -P bindings/java/ycsb/workloads/workload"$workload" -p recordcount="$RECORDS" \
    -p fieldcount=10 -p fieldlength=100 "${limits[@]}" "${props[@]}" -threads "$threads" -s \
    > "$DIR/$name.log" 2> "$DIR/$name.err" || { echo "ycsb $name failed:"; tail -20 "$DIR/$name.err"; exit 1; }
  after=$(diskstats)
  echo "$before $after" > "$DIR/$name.disk"
}

# summary NAME -> "throughput p99_read_us p99_write_us reads_per_op writes_per_op"
summary() {
  local log=$DIR/$1.log
  python3 - "$log" "$DIR/$1.disk" <<'PY'
import sys
tput = 0.0; runtime = 0.0; p99 = {}; ops = 0
for line in open(sys.argv[1]):
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 3: continue
    kind, metric, value = parts
    if kind == "[OVERALL]" and metric == "Throughput(ops/sec)": tput = float(value)
    if kind == "[OVERALL]" and metric == "RunTime(ms)": runtime = float(value)
    if metric == "99thPercentileLatency(us)": p99[kind] = float(value)
    if metric == "Operations" and kind not in ("[CLEANUP]",) and not kind.endswith("-FAILED]"): ops += int(value)
    if metric == "Return=ERROR" and int(value) > 0: sys.exit(f"{sys.argv[1]}: {kind} returned errors")
r0, w0, r1, w1 = map(int, open(sys.argv[2]).read().split())
reads = p99.get("[READ]", 0)
writes = max(p99.get("[UPDATE]", 0), p99.get("[INSERT]", 0), p99.get("[READ-MODIFY-WRITE]", 0))
ops = max(ops, 1)
print(f"{tput:.0f} {reads:.0f} {writes:.0f} {(r1 - r0) / ops:.2f} {(w1 - w0) / ops:.2f}")
PY
}

mkdir -p "$DIR" "$(dirname "$OUT")"
{
  echo "# YCSB on the embedded store: nvdepot (JNI) vs RocksDB (rocksdbjni)"
  echo
  echo "\`bench/ycsb-embedded.sh\`$([ "$QUICK" = 1 ] && echo " (QUICK=1)"), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores."
  echo "$RECORDS records of 10 x 100-byte fields; each JVM in a $MEMCG memory cgroup (heap $HEAP);"
  echo "$SECONDS_PER_RUN s per run; device ops per YCSB op from /proc/diskstats ($disk)."
  echo "nvdepot's value cache: $NV_CACHE; RocksDB: 256 MiB block cache and the page cache."
  echo
  echo "| sync | workload | threads | nvdepot ops/s | rocksdb ops/s | ratio | p99 read us (nv / rocks) | p99 write us (nv / rocks) | dev reads/op (nv / rocks) | dev writes/op (nv / rocks) |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
} > "$OUT.tmp"

declare -A best
for sync in $SYNC; do
  declare -A res=()
  for system in $SYSTEMS; do
    rm -rf "${DIR:?}/$system"
    sync; echo 3 > /proc/sys/vm/drop_caches
    echo "== $system, sync=$sync: loading $RECORDS records with $LOAD_THREADS threads"
    ycsb "load-$system-$sync" "$system" "$sync" -load a "$LOAD_THREADS"
    echo "   load: $(summary "load-$system-$sync")"
    res[load,$system]=$(summary "load-$system-$sync")
    sync; echo 3 > /proc/sys/vm/drop_caches
    for w in $WORKLOADS; do
      for t in $THREADS; do
        ycsb "run-$system-$sync-$w-$t" "$system" "$sync" -t "$w" "$t"
        res[$w,$t,$system]=$(summary "run-$system-$sync-$w-$t")
        echo "   workload $w, $t threads: ${res[$w,$t,$system]}"
      done
    done
    rm -rf "${DIR:?}/$system"
  done
  if [ "$SYSTEMS" != "nvdepot rocksdb" ]; then
    continue # one store: its lines above are the result
  fi
  read -r nl _ _ nr nw <<< "${res[load,nvdepot]}"
  read -r rl _ _ rr rw <<< "${res[load,rocksdb]}"
  echo "| $sync | load | $LOAD_THREADS | $nl | $rl | $(python3 -c "print(f'{$nl/max($rl,1):.2f}')") | | | $nr / $rr | $nw / $rw |" >> "$OUT.tmp"
  for w in $WORKLOADS; do
    bn=0 br=0
    for t in $THREADS; do
      read -r n np99r np99w nr nw <<< "${res[$w,$t,nvdepot]}"
      read -r r rp99r rp99w rr rw <<< "${res[$w,$t,rocksdb]}"
      echo "| $sync | $w | $t | $n | $r | $(python3 -c "print(f'{$n/max($r,1):.2f}')") | $np99r / $rp99r | $np99w / $rp99w | $nr / $rr | $nw / $rw |" >> "$OUT.tmp"
      bn=$(python3 -c "print(max($bn, $n))"); br=$(python3 -c "print(max($br, $r))")
    done
    best[$sync,$w]=$(python3 -c "print(f'{$bn/max($br,1):.2f}')")
  done
done
if [ "$SYSTEMS" != "nvdepot rocksdb" ]; then
  echo "one store ($SYSTEMS): no comparison written; its runs are above and in $DIR/*.log"
  rm -f "$OUT.tmp"
  exit 0
fi
{
  echo
  line="ratio"
  for w in $WORKLOADS; do
    first=${SYNC%% *}
    line+=" ycsb_${w}_vs_rocksdb=${best[$first,$w]}"
  done
  echo "Best throughput over thread counts, nvdepot / RocksDB, sync=${SYNC%% *}:"
  echo
  echo "$line"
} >> "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
cat "$OUT"
