#!/usr/bin/env bash
# Runs every fuzz target of the Redis face (RESTORE's payload readers,
# COMMAND GETKEYS's key search) for N seconds
# each (default 20), from the committed seeds (DUMP payloads of every
# type, written by redis-server 7.0). Needs a nightly toolchain and
# cargo-fuzz. Usage: ./smoke.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-20}"
for target in restore command_keys; do
    echo "== fuzz redis $target for ${secs}s"
    mkdir -p "corpus/$target"
    cp -n "seeds/$target"/* "corpus/$target/" 2>/dev/null || true
    cargo +nightly fuzz run "$target" "corpus/$target" -- -max_total_time="$secs" -max_len=4096 ${FUZZ_EXTRA:-}
done
