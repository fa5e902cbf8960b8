#!/usr/bin/env bash
# A smoke run of `nvdepot bench index` (a few seconds: 200k keys, 1 and 2
# threads, with and without grows, against dashmap and hashbrown+rwlock):
# fails if the benchmark cannot run or a table loses a key. It checks that
# the benchmark works, not how fast anything is; real measurements are in
# bench/results/index.md.
#
#     bash scripts/bench-smoke.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
source "$repo/scripts/lib.sh"
ensure_cargo
json=$(mktemp)
trap 'rm -f "$json"' EXIT
cargo run --release --quiet -p nvdepot --manifest-path "$repo/Cargo.toml" -- \
    bench index --quick --json "$json"
# The JSON must hold every run: 2 scenarios x 2 thread counts x 3 tables.
runs=$(grep -c '"repetition"' "$json")
if [ "$runs" -ne 12 ]; then
    echo "bench smoke: expected 12 runs in the JSON, found $runs" >&2
    exit 1
fi
echo "bench smoke: bench index ran ($runs runs)"
