#!/usr/bin/env bash
# Builds every fuzz target and runs each for N seconds (default 20), for CI:
#
#     fuzz/smoke.sh [SECONDS]
#
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
# Each target starts from the committed seeds (fuzz/seeds/<target>, copied
# into fuzz/corpus/<target>) and keeps what it finds in fuzz/corpus/<target>
# (not committed). A failing
# input is saved under fuzz/artifacts/<target>/; the script runs every
# target, then exits non-zero if any of them failed.
set -euo pipefail

secs=${1:-20}
toolchain=${FUZZ_TOOLCHAIN:-nightly}
cd "$(dirname "$0")"

# Longest input per target: enough for what it parses (a checkpoint's
# smallest index table alone is 8 KiB; records start 4 KiB into a segment).
max_len() {
    case "$1" in
        headers | large | options) echo 256 ;;
        record) echo 16384 ;;
        *) echo 65536 ;;
    esac
}

cargo "+$toolchain" fuzz build
failed=()
for target in $(cargo "+$toolchain" fuzz list); do
    # The seeds are copied in rather than passed as a second corpus
    # directory, so that libFuzzer never writes into the committed seeds.
    mkdir -p "corpus/$target"
    cp "seeds/$target"/* "corpus/$target"/
    echo "=== $target: ${secs}s"
    if ! cargo "+$toolchain" fuzz run "$target" "corpus/$target" -- \
        -max_total_time="$secs" -max_len="$(max_len "$target")" -timeout=10 \
        -print_final_stats=1 ${FUZZ_EXTRA:-}; then
        failed+=("$target")
    fi
done
if ((${#failed[@]})); then
    echo "fuzz targets failed: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
    exit 1
fi
echo "all fuzz targets ran ${secs}s without failure"
