#!/usr/bin/env bash
# A smoke run of `nvdepot bench index` (a few seconds: 200k keys, 1 and 2
# threads, with and without grows, against dashmap, hashbrown+rwlock and
# the h32-probe bound):
# fails if the benchmark cannot run or a table loses a key. It checks that
# the benchmark works, not how fast anything is; real measurements are in
# bench/results/index.md. Runs the release binary, or $NVDEPOT_BIN (CI's
# debug build).
#
#     bash scripts/bench-smoke.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
source "$repo/scripts/lib.sh"
ensure_cargo
bin=$(nvdepot_binary "$repo")
json=$(mktemp)
trap 'rm -f "$json"' EXIT
"$bin" bench index --quick --json "$json"
# The JSON must hold every run: 2 scenarios x 2 thread counts x 5 tables
# (nvdepot one at a time and batched, dashmap, hashbrown, h32-probe).
runs=$(grep -c '"repetition"' "$json")
if [ "$runs" -ne 20 ]; then
    echo "bench smoke: expected 20 runs in the JSON, found $runs" >&2
    exit 1
fi
echo "bench smoke: bench index ran ($runs runs)"

# A smoke run of `nvdepot bench engine` (seconds: 2000 keys, both backends,
# GET, PUT and INSERT at QD 1 and 16) on a data file on the repository's disk
# (O_DIRECT needs a real filesystem, not a tmpfs). Exit 1 = a GET returned
# a wrong value.
mkdir -p "$repo/bench/work"
work=$(mktemp -d "$repo/bench/work/smoke-XXXXXX")
trap 'rm -f "$json"; rm -rf "$work"' EXIT
"$bin" bench engine --data "$work/store" --size 256M --segment-size 4M --keys 2000 \
    --duration 0.5 --backend sync,uring --op get,put,insert --qd 1,16 --json "$json"
runs=$(grep -c '"backend"' "$json")
if [ "$runs" -ne 12 ]; then
    echo "bench smoke: expected 12 engine runs in the JSON, found $runs" >&2
    exit 1
fi
echo "bench smoke: bench engine ran ($runs runs)"
