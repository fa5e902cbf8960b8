#!/usr/bin/env bash
# Runs every fuzz target for N seconds each (default 20) from this
# directory. Needs a nightly toolchain and cargo-fuzz
# (`cargo install cargo-fuzz`). Usage: ./smoke.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-20}"
for target in request value; do
    echo "== fuzz resp $target for ${secs}s"
    mkdir -p "corpus/$target"
    cp -n seeds/request/* "corpus/$target/" 2>/dev/null || true
    cp -n "seeds/$target"/* "corpus/$target/" 2>/dev/null || true
    cargo +nightly fuzz run "$target" "corpus/$target" -- -max_total_time="$secs" -max_len=4096 ${FUZZ_EXTRA:-}
done
