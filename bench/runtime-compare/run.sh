#!/usr/bin/env bash
# Runs the runtime comparison of docs/RUNTIME.md: every variant of
# runtime-compare and fio, interleaved (rep by rep, so that a burst of load
# from other work on this shared VM hits every variant rather than one),
# then summarize.py prints the tables.
#
#   bash bench/runtime-compare/run.sh            # full: 10 s runs, 3 reps
#   SECS=2 REPS=1 bash bench/runtime-compare/run.sh   # smoke
#
# Env: FILE (default /work/rtcmp/data.bin, 2 GiB, created if missing),
# SECS, REPS, QDS, CSECS and CREPS (cached phase), PHASES (subset of
# "direct cached poll"), VARIANTS and CVARIANTS (runtime-compare variants
# of the direct and cached phases), OUT (results directory),
# CARGO_TARGET_DIR.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
FILE=${FILE:-/work/rtcmp/data.bin}
SIZE=${SIZE:-$((2 << 30))}
CACHED_SIZE=$((256 << 20))
SECS=${SECS:-10}
CSECS=${CSECS:-5}
REPS=${REPS:-3}
CREPS=${CREPS:-$REPS}
QDS=${QDS:-"1 32 128"}
PHASES=${PHASES:-"direct cached poll"}
VARIANTS=${VARIANTS:-"raw raw-fixed raw-taskrun nv nv-regfile nv-fixed monoio"}
CVARIANTS=${CVARIANTS:-"raw raw-fixed raw-taskrun nv nv-fixed monoio"}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-rtcmp}
OUT=${OUT:-$here/results/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
J=$OUT/runs.jsonl
: >"$J"

(cd "$here" && cargo build --release --quiet)
B=$CARGO_TARGET_DIR/release/runtime-compare
command -v fio >/dev/null || { echo "fio missing: apt-get install fio" >&2; exit 2; }
"$B" --variant prepare --file "$FILE" --size "$SIZE"

log() { echo "[$(date +%T)] $* | $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/log.txt" >&2; }

# ours VARIANT QD SECS [flags...]: one JSON line into $J (an error line when
# the kernel refuses a mode; that is a finding, not a failure of the script).
ours() {
  local v=$1 qd=$2 s=$3; shift 3
  log "$v qd=$qd $*"
  local rc=0
  timeout $((s + 60)) "$B" --file "$FILE" --variant "$v" --qd "$qd" --secs "$s" "$@" >>"$J" || rc=$?
  # Exit 2 already printed its error line; anything else (a timeout, a
  # crash) did not.
  if [ "$rc" != 0 ] && [ "$rc" != 2 ]; then
    echo "{\"tool\":\"rtcmp\",\"variant\":\"$v $*\",\"qd\":$qd,\"error\":\"exit $rc\"}" >>"$J"
  fi
}

# fio LABEL QD SECS [fio flags...]: fio's JSON reduced to the same fields
# (lat = submission to completion, comparable with ours; cpu per op from
# fio's usr+sys percentages).
fio_run() {
  local label=$1 qd=$2 s=$3; shift 3
  log "fio $label qd=$qd $*"
  local load; load=$(cut -d' ' -f1 /proc/loadavg)
  fio --name=r --filename="$FILE" --rw=randread --bs=4k --ioengine=io_uring \
    --iodepth="$qd" --runtime="$s" --time_based --numjobs=1 --group_reporting \
    --lat_percentiles=1 --output-format=json "$@" >"$OUT/fio.json" 2>"$OUT/fio.err" || true
  python3 - "$OUT/fio.json" "$OUT/fio.err" "$label" "$qd" "$load" >>"$J" <<'PY'
import json, sys
path, err, label, qd, load = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
out = {"tool": "fio", "variant": label, "qd": qd, "load1": load}
try:
    j = json.load(open(path))["jobs"][0]
    r = j["read"]
    if j["error"] or r["total_ios"] == 0:
        raise ValueError("fio error %d" % j["error"])
    p = r["lat_ns"]["percentile"]
    secs = r["runtime"] / 1000
    out.update(ops=r["total_ios"], secs=secs, iops=round(r["iops"]),
               p50_us=p["50.000000"] / 1000, p99_us=p["99.000000"] / 1000,
               mean_us=r["lat_ns"]["mean"] / 1000,
               cpu_us_per_op=(j["usr_cpu"] + j["sys_cpu"]) / 100 * secs * 1e6 / r["total_ios"])
except Exception as e:
    lines = [l for l in open(err).read().splitlines() if l.strip()]
    out["error"] = (lines[0] if lines else str(e)).replace('"', "'")
print(json.dumps(out))
PY
}

has() { [[ " $PHASES " == *" $1 "* ]]; }

has direct && log "start: O_DIRECT runs, ${SECS}s x $REPS reps, QD $QDS"
has direct && for rep in $(seq "$REPS"); do
  for qd in $QDS; do
    fio_run fio "$qd" "$SECS" --direct=1
    for v in $VARIANTS; do
      ours "$v" "$qd" "$SECS"
    done
  done
done

# Page-cached reads complete inline in the kernel, so these runs are
# CPU-bound and show each runtime's own cost per op, which the disk's
# latency hides above.
has cached && log "cached runs (first 256 MiB of the file, buffered)"
has cached && for rep in $(seq "$CREPS"); do
  # Re-warm each rep: other work on the VM can evict pages, and a run that
  # reads from the disk would pass for a slow runtime.
  dd if="$FILE" of=/dev/null bs=1M count=256 status=none
  for qd in 1 32; do
    # --invalidate=0: fio would otherwise drop the file's cached pages
    # before starting, making this a disk run (and the next ones too).
    fio_run fio+cached "$qd" "$CSECS" --direct=0 --invalidate=0 --size="$CACHED_SIZE"
    for v in $CVARIANTS; do
      ours "$v" "$qd" "$CSECS" --buffered --size "$CACHED_SIZE"
    done
  done
done

# Polling modes, one rep each: do they work on this disk, and what do they
# cost or buy?
has poll && log "polling modes"
has poll && for qd in 1 32; do
  fio_run fio+sqpoll "$qd" "$CSECS" --direct=1 --sqthread_poll=1
  fio_run fio+iopoll "$qd" "$CSECS" --direct=1 --hipri
  fio_run fio+sqpoll+iopoll "$qd" "$CSECS" --direct=1 --hipri --sqthread_poll=1
  for v in raw nv nv-fixed; do
    ours "$v" "$qd" "$CSECS" --sqpoll 100
    ours "$v" "$qd" "$CSECS" --iopoll
    ours "$v" "$qd" "$CSECS" --sqpoll 100 --iopoll
  done
done
log "done"
rm -f "$OUT/fio.json" "$OUT/fio.err"
python3 "$here/summarize.py" "$J" | tee "$OUT/summary.md"
