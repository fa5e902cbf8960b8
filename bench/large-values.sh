#!/usr/bin/env bash
# bench/large-values.sh -- large values (issue 10, item 3) against the raw
# device, in one run: `nvdepot bench engine` putting and getting values of
# VALUE bytes (8 MiB chunks behind a head record), one at a time, then fio
# on the same data file doing what a large put and get do underneath:
# sequential 8 MiB writes with an fdatasync after each (every chunk is made
# durable before the next) and sequential 8 MiB reads at queue depth 1.
#
# Reads are measured before writes (engine GETs, then its PUTs; fio's
# reads, then its writes): on this virtual disk a burst of writes slows the
# reads that follow it for a while.
#
# usage: bash bench/large-values.sh
# Environment (defaults in brackets):
#   VALUE [256M]   value size; KEYS [4] values written; SECS [10] per point
#   REPS [3]       repetitions (min/median/max of ops/s reported)
#   BENCH_DIR [bench/work]  where the data file goes
#   NVDEPOT        the binary [cargo build --release -p nvdepot]
# Output: per repetition the rows, then
#   `ratio put_vs_fio_seqwrite_fdatasync=... get_vs_fio_seqread_qd1=...`
# (medians, MB/s over MB/s).
set -euo pipefail
cd "$(dirname "$0")/.."
VALUE=${VALUE:-256M}
KEYS=${KEYS:-4}
SECS=${SECS:-10}
REPS=${REPS:-3}
BENCH_DIR=${BENCH_DIR:-bench/work}
if [ -z "${NVDEPOT:-}" ]; then
  cargo build --release -q -p nvdepot
  NVDEPOT=${CARGO_TARGET_DIR:-target}/release/nvdepot
fi
command -v fio > /dev/null || apt-get install -y -q fio > /dev/null
mkdir -p "$BENCH_DIR"
STORE=$BENCH_DIR/large-values.nvd
trap 'rm -rf "$STORE" "$BENCH_DIR/large-values.json"' EXIT
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
puts=() gets=() fws=() frs=()
for rep in $(seq "$REPS"); do
  rm -rf "$STORE"
  json=$BENCH_DIR/large-values.json
  "$NVDEPOT" bench engine --data "$STORE" --size 6G --value-size "$VALUE" \
    --keys "$KEYS" --op get,put --qd 1 --backend uring --duration "$SECS" --json "$json" |
    grep -E "^(backend|uring)" | sed "s/^/rep $rep: /"
  # MB/s from the exact op counts (the table rounds ops/s).
  rate() {
    python3 -c 'import json,sys; r=[x for x in json.load(open(sys.argv[1]))["runs"] if x["op"]==sys.argv[2]][0]; print(r["ops"]*r["value_bytes"]/r["seconds"]/1e6)' "$json" "$1"
  }
  puts+=("$(rate put)") gets+=("$(rate get)")
  file=$STORE/nvdepot.0
  fr=$(fio --name=r --filename="$file" --rw=read --bs=8M --iodepth=1 --ioengine=io_uring \
    --direct=1 --size=4G --offset=1G --runtime="$SECS" --time_based \
    --output-format=json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["read"]["bw_bytes"]/1e6)')
  fw=$(fio --name=w --filename="$file" --rw=write --bs=8M --iodepth=1 --ioengine=io_uring \
    --direct=1 --fdatasync=1 --size=4G --offset=1G --runtime="$SECS" --time_based \
    --output-format=json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["write"]["bw_bytes"]/1e6)')
  fws+=("$fw") frs+=("$fr")
  printf 'rep %s: nvdepot put %.0f MB/s, get %.0f MB/s; fio write+fdatasync %.0f MB/s, read QD1 %.0f MB/s\n' \
    "$rep" "${puts[-1]}" "${gets[-1]}" "$fw" "$fr"
done
mp=$(printf '%s\n' "${puts[@]}" | median)
mg=$(printf '%s\n' "${gets[@]}" | median)
mfw=$(printf '%s\n' "${fws[@]}" | median)
mfr=$(printf '%s\n' "${frs[@]}" | median)
printf 'medians: nvdepot put %.0f MB/s, get %.0f MB/s; fio write+fdatasync %.0f MB/s, read QD1 %.0f MB/s\n' \
  "$mp" "$mg" "$mfw" "$mfr"
printf 'ratio put_vs_fio_seqwrite_fdatasync=%.2f get_vs_fio_seqread_qd1=%.2f\n' \
  "$(echo "$mp / $mfw" | bc -l)" "$(echo "$mg / $mfr" | bc -l)"
