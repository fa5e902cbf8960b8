#!/usr/bin/env bash
# bench/engine-vs-fio.sh -- the store against the raw device, in one run:
# fio (io_uring and libaio, O_DIRECT, 4 KiB random reads at QD 1, 32, 128;
# sequential write bandwidth), then `nvdepot bench engine` at the same queue
# depths on both backends, a 2-file striped store, and RocksDB's db_bench
# readrandom as the embedded store users would pick instead. Issue 4.
#
# A GET of a 4 KiB value reads its whole record: 4.5 KiB at a 512-byte
# aligned offset, which this virtual disk serves like an 8 KiB read (about
# 70 % of the 4 KiB IOPS at QD 32). So the run also has fio reading 4608
# bytes at 512-byte alignment (like for like), and a store of 4000-byte
# values in 4 KiB grains, whose GETs are page-aligned 4 KiB reads like fio's.
#
# usage: bash bench/engine-vs-fio.sh          (full: ~25 min)
#        QUICK=1 bash bench/engine-vs-fio.sh  (~4 min; also the CI-free smoke)
#
# Environment (defaults in brackets):
#   QUICK [0]        1: one repetition, 3 s per point, 100 k keys
#   REPS [3]         repetitions of every point (min/median/max reported)
#   SECS [10]        seconds per measured point
#   KEYS [600k]      keys of 8-32 B with 4 KiB values (a ~2.8 GB data set)
#   BENCH_DIR [bench/work]  where the data files go (same disk as fio's)
#   NICE [-5]        nice level of fio, nvdepot and db_bench (all the same),
#                    so background work on a shared VM disturbs them less
#   NVDEPOT          the binary [cargo build --release -p nvdepot]
#   SKIP             words to leave out: rocksdb stripe put page
#   KEEP=1           keep the data files
# Output: one line per comparison, last
#   `ratio get_qd128=... get_qd1_latency_delta_us=... put_durable_vs_fio=... put_unflushed_vs_fio=... vs_rocksdb=...`
# (puts: inserts of new keys, as uDepot measures PUTs, against fio's 4 KiB
# writes at QD 128 with an fdatasync every 64 / without; overwrites of
# loaded keys, with the device reads each one costs, on the line before)
# and bench/results/engine-vs-fio[-quick].{json,md} + PNGs (gnuplot).
# Needs fio (apt), rocksdb-tools (apt, for db_bench), gnuplot-nox (apt,
# optional); installs missing ones with apt-get when run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
  REPS=${REPS:-1} SECS=${SECS:-3} KEYS=${KEYS:-100000}
  PREFIX=$ROOT/bench/results/engine-vs-fio-quick
else
  REPS=${REPS:-3} SECS=${SECS:-10} KEYS=${KEYS:-600000}
  PREFIX=$ROOT/bench/results/engine-vs-fio
fi
case $KEYS in *k) KEYS=$(( ${KEYS%k} * 1000 ));; *m) KEYS=$(( ${KEYS%m} * 1000000 ));; esac
QDS=(1 32 128)
NICE=${NICE:--5}
SKIP=${SKIP:-}
BENCH_DIR=${BENCH_DIR:-$ROOT/bench/work}
# A 4 KiB value's record is 4.5 KiB on the device (header, key, 512 B grains).
DATA_MB=$(( KEYS * 4608 / 1048576 + 1 ))
STORE_MB=$(( DATA_MB * 2 + 1024 ))

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 2; }
skipped() { [[ " $SKIP " == *" $1 "* ]]; }
run_nice() { if [ "$(id -u)" = 0 ]; then nice -n "$NICE" "$@"; else "$@"; fi; }

need=()
command -v fio >/dev/null || need+=(fio)
skipped rocksdb || command -v db_bench >/dev/null || need+=(rocksdb-tools)
command -v gnuplot >/dev/null || need+=(gnuplot-nox)
if [ ${#need[@]} -gt 0 ] && [ "$(id -u)" = 0 ]; then
  log "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -q && apt-get install -y -q "${need[@]}"; } >/dev/null 2>&1 || log "apt-get failed for ${need[*]}"
fi
command -v fio >/dev/null || die "fio is needed (apt-get install fio)"
command -v python3 >/dev/null || die "python3 is needed for the summary"

mkdir -p "$BENCH_DIR" "$ROOT/bench/results"
BENCH_DIR=$(cd "$BENCH_DIR" && pwd)
[ "$(stat -f -c %T "$BENCH_DIR")" != tmpfs ] || die "BENCH_DIR is a tmpfs: O_DIRECT and the disk are the point"
WORK=$BENCH_DIR/engine-$(date +%Y%m%d-%H%M%S)
mkdir -p "$WORK/logs"
cleanup() { [ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"/*.dat "$WORK"/*.nvd "$WORK/store" "$WORK/store-page" "$WORK/store-insert" "$WORK/rocksdb"; }
trap cleanup EXIT
log "work directory $WORK; $KEYS keys, ${DATA_MB} MiB of records, REPS=$REPS SECS=$SECS"

if [ -z "${NVDEPOT:-}" ]; then
  log "building nvdepot (release)"
  cargo build --release -q -p nvdepot
  NVDEPOT=${CARGO_TARGET_DIR:-$ROOT/target}/release/nvdepot
fi
[ -x "$NVDEPOT" ] || die "no nvdepot binary at $NVDEPOT"

# runs.tsv: kind engine_or_backend op qd rep path-of-json
RUNS=$WORK/runs.tsv
: >"$RUNS"
{
  echo -e "date\t$(date -u +%FT%TZ)"
  echo -e "commit\t$(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo -e "cpu\t$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo) x $(nproc)"
  echo -e "kernel\t$(uname -r)"
  echo -e "fs\t$(df -T "$WORK" | awk 'NR==2 {print $1" "$2}')"
  echo -e "fio\t$(fio --version)"
  echo -e "loadavg_start\t$(cut -d' ' -f1-3 /proc/loadavg)"
  echo -e "keys\t$KEYS"
  echo -e "reps\t$REPS"
  echo -e "secs\t$SECS"
} >"$WORK/meta.tsv"

# ---- fio: the device ---------------------------------------------------------
FIO_FILE=$WORK/fio.dat
log "fio: laying out ${DATA_MB} MiB"
fio --name=layout --filename="$FIO_FILE" --size="${DATA_MB}M" --rw=write --bs=1M --direct=1 \
    --ioengine=libaio --iodepth=32 --end_fsync=1 >/dev/null
fio_run() {   # NAME ENGINE RW BS QD OUT [FIO ARGS...]
  local name=$1 eng=$2 rw=$3 bs=$4 qd=$5 out=$6
  shift 6
  run_nice fio --name="$name" --filename="$FIO_FILE" --size="${DATA_MB}M" --direct=1 --bs="$bs" \
      --rw="$rw" --ioengine="$eng" --iodepth="$qd" --numjobs=1 --time_based --runtime="$SECS" \
      --norandommap --randrepeat=0 --lat_percentiles=1 --output-format=json --output="$out" \
      "$@" >/dev/null
}
for rep in $(seq 1 "$REPS"); do
  for qd in "${QDS[@]}"; do
    for eng in io_uring libaio; do
      out=$WORK/logs/fio-$eng-qd$qd-$rep.json
      fio_run randread "$eng" randread 4k "$qd" "$out" && echo -e "fio\t$eng\tget\t$qd\t$rep\t$out" >>"$RUNS"
    done
    # What a GET of a 4 KiB value reads: its 4.5 KiB record at a 512-byte
    # aligned offset (header + key + value in 512 B grains).
    out=$WORK/logs/fio-record-qd$qd-$rep.json
    fio_run randread io_uring randread 4608 "$qd" "$out" --blockalign=512 \
        && echo -e "fio\tio_uring-4608\tget\t$qd\t$rep\t$out" >>"$RUNS"
  done
  # The issue's PUT reference: sequential write bandwidth (1 MiB blocks).
  out=$WORK/logs/fio-seqwrite-$rep.json
  fio_run seqwrite io_uring write 1M 32 "$out" && echo -e "fio\tio_uring\tseqwrite\t32\t$rep\t$out" >>"$RUNS"
  # Closer to what a PUT is: 4 KiB sequential writes at QD 128, unflushed
  # and with an fdatasync every 64 writes (a group commit's worth).
  out=$WORK/logs/fio-write4k-$rep.json
  fio_run write4k io_uring write 4k 128 "$out" && echo -e "fio\tio_uring\twrite4k\t128\t$rep\t$out" >>"$RUNS"
  out=$WORK/logs/fio-write4k-sync-$rep.json
  fio_run write4ksync io_uring write 4k 128 "$out" --fdatasync=64 \
      && echo -e "fio\tio_uring\twrite4k-fdatasync64\t128\t$rep\t$out" >>"$RUNS"
  log "fio rep $rep done"
done
rm -f "$FIO_FILE"

# ---- nvdepot: the store on the same disk -------------------------------------
STORE=$WORK/store
DISK=$(basename "$(df --output=source "$WORK" | tail -1)")
disk_reads() { awk -v d="$DISK" '$3 == d {n = $4} END {print n + 0}' /proc/diskstats; }
nv() {   # OUT SECONDS ARGS...: one bench engine invocation
  local out=$1 secs=$2
  shift 2
  run_nice "$NVDEPOT" bench engine --keys "${NV_KEYS:-$KEYS}" --duration "$secs" --json "$out" "$@" \
      >>"$WORK/logs/nvdepot.log" 2>&1
}
log "nvdepot: loading $KEYS keys into $STORE (${STORE_MB} MiB file)"
nv "$WORK/logs/load.json" 0.1 --data "$STORE" --size "${STORE_MB}M" --backend uring --qd 1
for rep in $(seq 1 "$REPS"); do
  out=$WORK/logs/nv-get-$rep.json
  nv "$out" "$SECS" --data "$STORE" --size "${STORE_MB}M" --backend sync,uring --op get \
      --qd "$(IFS=,; echo "${QDS[*]}")" && echo -e "nvdepot\t-\tget\t-\t$rep\t$out" >>"$RUNS"
  log "nvdepot get rep $rep done"
done
# Page-sized records: 4000-byte values in 4 KiB grains, so every GET is one
# page-aligned 4 KiB read, exactly what fio's 4k randread does.
if ! skipped page; then
  PAGE=$WORK/store-page
  nv "$WORK/logs/load-page.json" 0.1 --data "$PAGE" --size "${STORE_MB}M" --grain-size 4096 \
      --value-size 4000 --backend uring --qd 1
  for rep in $(seq 1 "$REPS"); do
    out=$WORK/logs/nv-page-$rep.json
    nv "$out" "$SECS" --data "$PAGE" --size "${STORE_MB}M" --value-size 4000 --backend sync,uring \
        --op get --qd "$(IFS=,; echo "${QDS[*]}")" && echo -e "nvdepot-page\t-\tget\t-\t$rep\t$out" >>"$RUNS"
    log "nvdepot page-record get rep $rep done"
  done
  rm -rf "$PAGE"
fi
if ! skipped put; then
  # Overwrites of loaded keys at random. Each must first learn whether the
  # index entry with its fingerprint is this key (the index holds no keys):
  # the location cache answers for keys written since the store opened,
  # else the old record's header is read. diskstats counts those reads.
  for rep in $(seq 1 "$REPS"); do
    out=$WORK/logs/nv-put-$rep.json
    r0=$(disk_reads)
    nv "$out" "$SECS" --data "$STORE" --size "${STORE_MB}M" --backend uring --op put --qd 128 \
        && echo -e "nvdepot\t-\tput\t-\t$rep\t$out" >>"$RUNS"
    echo -e "nvdepot-uring\t$rep\t$(( $(disk_reads) - r0 ))\t$out" >>"$WORK/put-reads.tsv"
    out=$WORK/logs/nv-put-nosync-$rep.json
    r0=$(disk_reads)
    nv "$out" "$SECS" --data "$STORE" --size "${STORE_MB}M" --backend uring --op put --qd 128 --no-sync \
        && echo -e "nvdepot-nosync\t-\tput\t-\t$rep\t$out" >>"$RUNS"
    echo -e "nvdepot-nosync\t$rep\t$(( $(disk_reads) - r0 ))\t$out" >>"$WORK/put-reads.tsv"
    log "nvdepot put rep $rep done"
  done
  # Inserts: puts of new keys into a fresh store (uDepot's PUT benchmark,
  # §5.2: random PUTs into an empty store), durable and unflushed. The
  # phase ends early if the file's free segments run out.
  INSERT=$WORK/store-insert
  INSERT_MB=$(( SECS * 1500 + 1024 ))
  for rep in $(seq 1 "$REPS"); do
    for mode in durable unflushed; do
      rm -rf "$INSERT"
      flags=(); kind=nvdepot-insert
      if [ "$mode" = unflushed ]; then flags=(--no-sync); kind=nvdepot-insert-nosync; fi
      out=$WORK/logs/nv-insert-$mode-$rep.json
      NV_KEYS=1000 nv "$out" "$SECS" --data "$INSERT" --size "${INSERT_MB}M" --backend uring \
          --op insert --qd 128 "${flags[@]}" && echo -e "$kind\t-\tinsert\t-\t$rep\t$out" >>"$RUNS"
    done
    log "nvdepot insert rep $rep done"
  done
  rm -rf "$INSERT"
fi
rm -rf "$STORE"

# ---- striping: two files, half the size each ---------------------------------
if ! skipped stripe; then
  half=$(( STORE_MB / 2 + 512 ))
  log "nvdepot: 2-file striped store"
  nv "$WORK/logs/load2.json" 0.1 --data "$WORK/s0.nvd,$WORK/s1.nvd" --size "${half}M" --backend uring --qd 1
  for rep in $(seq 1 "$REPS"); do
    out=$WORK/logs/nv-stripe-$rep.json
    nv "$out" "$SECS" --data "$WORK/s0.nvd,$WORK/s1.nvd" --size "${half}M" --backend uring --op get --qd 1,128 \
        && echo -e "nvdepot-2files\t-\tget\t-\t$rep\t$out" >>"$RUNS"
  done
  rm -f "$WORK"/s0.nvd "$WORK"/s1.nvd
fi

# ---- RocksDB db_bench --------------------------------------------------------
if ! skipped rocksdb && command -v db_bench >/dev/null; then
  DB=$WORK/rocksdb
  log "rocksdb: fillrandom $KEYS x 4 KiB, compact"
  db_bench --db="$DB" --benchmarks=fillrandom,compact --num="$KEYS" --key_size=16 --value_size=4096 \
      --compression_type=none --use_direct_io_for_flush_and_compaction=true --threads=1 \
      --disable_wal=true >"$WORK/logs/rocksdb-fill.txt" 2>&1 || log "db_bench fill failed (see logs)"
  for rep in $(seq 1 "$REPS"); do
    out=$WORK/logs/rocksdb-read-qd128-$rep.txt
    run_nice db_bench --db="$DB" --use_existing_db=true --benchmarks=readrandom --num="$KEYS" \
        --key_size=16 --value_size=4096 --use_direct_reads=true --cache_size=8388608 \
        --threads=128 --duration="$SECS" --reads=100000000 >"$out" 2>&1 \
        && echo -e "rocksdb\tdb_bench\tget\t128\t$rep\t$out" >>"$RUNS"
  done
  rm -rf "$DB"
fi

echo -e "loadavg_end\t$(cut -d' ' -f1-3 /proc/loadavg)" >>"$WORK/meta.tsv"
python3 "$ROOT/bench/engine_summary.py" "$WORK" "$PREFIX"
