#!/usr/bin/env bash
# Runs the whole-server fuzz targets for N seconds each (default 20).
# Needs a nightly toolchain, cargo-fuzz, redis-server, memcached and NVDEPOT_BIN
# (the nvdepot binary under test; default this checkout's debug build).
# Usage: ./smoke.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-20}"
bin="${NVDEPOT_BIN:-$(pwd)/../../../target/debug/nvdepot}"
if [ ! -x "$bin" ] || ! command -v redis-server >/dev/null || ! command -v memcached >/dev/null; then
    echo "== fuzz server targets skipped: need $bin, redis-server and memcached"
    exit 0
fi
export NVDEPOT_BIN="$bin"
for target in serve memcache; do
    echo "== fuzz server $target for ${secs}s"
    mkdir -p "corpus/$target"
    cp -n "seeds/$target"/* "corpus/$target/" 2>/dev/null || true
    # No sanitizer: the target's own code is safe Rust (the server it
    # drives runs as its own, uninstrumented process).
    cargo +nightly fuzz run --sanitizer none "$target" "corpus/$target" -- \
        -max_total_time="$secs" -max_len=4096 -timeout=60 ${FUZZ_EXTRA:-}
done
