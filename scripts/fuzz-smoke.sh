#!/usr/bin/env bash
# A short run of every fuzz target (the on-device format parsers in fuzz/,
# the memcached protocol parsers in crates/memcache/fuzz/, the Redis
# protocol parsers in crates/resp/fuzz/, RESTORE's payload reader in
# crates/redis/fuzz/, and `nvdepot serve` over a socket
# against redis-server in crates/nvdepot/fuzz/): what CI runs.
#
#     bash scripts/fuzz-smoke.sh [SECONDS_PER_TARGET]   (default 15)
#
# Needs a nightly toolchain (cargo-fuzz uses sanitizers) and cargo-fuzz,
# which it installs from crates.io when missing. Without a nightly
# toolchain it says so and exits 0: the parsers' property tests still run
# in `cargo test` on stable.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
source "$repo/scripts/lib.sh"
ensure_cargo
secs=${1:-15}
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    echo "fuzz smoke: no nightly toolchain here; skipped (property tests cover the parsers)"
    exit 0
fi
if ! command -v cargo-fuzz >/dev/null; then
    cargo install cargo-fuzz --locked
fi
# A fixed libFuzzer seed: from the committed seeds, every run explores the
# same inputs in the same order (a slower machine just stops earlier), so
# CI's verdict does not depend on luck. Longer, unseeded runs are for
# looking for new bugs: fuzz/README.md, crates/memcache/fuzz/README.md.
export FUZZ_EXTRA=${FUZZ_EXTRA:--seed=1}
bash "$repo/fuzz/smoke.sh" "$secs"
bash "$repo/crates/memcache/fuzz/smoke.sh" "$secs"
bash "$repo/crates/resp/fuzz/smoke.sh" "$secs"
bash "$repo/crates/redis/fuzz/smoke.sh" "$secs"
# Whole servers over a socket against the reference servers (skipped
# without NVDEPOT_BIN's binary or redis-server).
bash "$repo/crates/nvdepot/fuzz/smoke.sh" "$secs"
echo "fuzz smoke: every target ran ${secs}s without a failure"
