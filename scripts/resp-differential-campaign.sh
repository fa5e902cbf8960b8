#!/usr/bin/env bash
# The long differential run of issues 36 and 37: every differential test of the
# Redis face against a stock redis-server, each with many more commands
# and fresh seeds than `cargo test` runs, summing past 1 000 000 commands.
# Each test asserts every reply equal (but its documented deviations);
# the summary lines they print are collected in
# bench/results/resp-differential-campaign.md.
#
#     bash scripts/resp-differential-campaign.sh        (~20 min on 2 cores)
#     SCALE=0.1 bash scripts/resp-differential-campaign.sh   (a tenth)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
source "$repo/scripts/lib.sh"
ensure_cargo
cd "$repo"
SCALE=${SCALE:-1}
n() { python3 -c "print(max(1, int($1 * $SCALE)))"; }
out=${OUT:-$repo/bench/results/resp-differential-campaign.md}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo build --release -q -p nvdepot
run() { # run TEST FILTER ENV... : one test binary, its env, its summary lines
    local test=$1 filter=$2; shift 2
    echo "== $test $filter $*" | tee -a "$log"
    env "$@" cargo test --release -q -p nvdepot --test "$test" "$filter" -- --nocapture 2>&1 \
        | grep -E "every reply|commands|test result|panicked" | tee -a "$log"
    grep -q "panicked" "$log" && { echo "FAIL: $test"; exit 1; } || true
}
start=$(date +%s)
run resp_differential "" NVDEPOT_RESP_DIFF_OPS="$(n 50000)" NVDEPOT_RESP_DIFF_SEEDS=6
run resp_types "" NVDEPOT_TYPES_OPS="$(n 30000)" NVDEPOT_TYPES_SEEDS=10 NVDEPOT_TYPES_SEED0=100
run resp_stream_groups consumer NVDEPOT_GROUPS_OPS="$(n 50000)" NVDEPOT_GROUPS_SEEDS=6
run resp_shapes "" NVDEPOT_SHAPES_OPS="$(n 25000)" NVDEPOT_SHAPES_SEEDS=2 NVDEPOT_SHAPES_SEED0=100
run resp_paged long_lists NVDEPOT_LISTS_OPS="$(n 25000)" NVDEPOT_LISTS_SEEDS=2 NVDEPOT_LISTS_SEED0=100
run resp_paged large_hashes NVDEPOT_HASHES_OPS="$(n 25000)" NVDEPOT_HASHES_SEEDS=2
run resp_paged large_sets NVDEPOT_SETS_OPS="$(n 25000)" NVDEPOT_SETS_SEEDS=2
run resp_paged_zset large NVDEPOT_ZSETS_OPS="$(n 25000)" NVDEPOT_ZSETS_SEEDS=2
run resp_paged_zset deep NVDEPOT_ZSETS_OPS="$(n 25000)" NVDEPOT_ZSETS_SEEDS=2
run resp_paged_stream long NVDEPOT_STREAMS_OPS="$(n 25000)" NVDEPOT_STREAMS_SEEDS=2
run resp_scripts scripts_answer NVDEPOT_SCRIPTS_OPS="$(n 12500)" NVDEPOT_SCRIPTS_SEEDS=8 NVDEPOT_SCRIPTS_SEED0=100
run resp_pubsub pubsub_replies NVDEPOT_PUBSUB_OPS="$(n 25000)" NVDEPOT_PUBSUB_SEEDS=4 NVDEPOT_PUBSUB_SEED0=100
secs=$(( $(date +%s) - start ))
total=$(python3 - "$log" <<'PY'
import re, sys
total = 0
for line in open(sys.argv[1]):
    m = re.search(r"(\d+) commands", line)
    if m and "every reply" in line:
        total += int(m.group(1))
    m = re.search(r"(\d+) commands, (\d+) seeds", line)
print(total)
PY
)
{
    echo "# The long differential run against redis-server"
    echo
    echo "\`bash scripts/resp-differential-campaign.sh\` (SCALE=$SCALE) on $(date -u +%F), $(nproc) cores, redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), in ${secs} s."
    echo "Every test asserts every reply equal to redis-server's, but the deviations it documents."
    echo
    echo '```'
    cat "$log"
    echo '```'
    echo
    echo "Commands counted from the lines that say so: **$total**, 0 differences."
} > "$out"
echo "== $total commands, every reply the same; $out"
