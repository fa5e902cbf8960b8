#!/usr/bin/env bash
# The unsafe code of the io_uring runtime and the aligned buffers under
# AddressSanitizer: crates/io's unit tests and tests/uring.rs, the index's
# unit tests (its slot runs cut from huge-page blocks), and the engine's
# async tests (crates/engine/tests/uring.rs) and large-value tests
# (tests/large.rs: the huge-page advice on a GET buffer), and the Lua C
# API code that pushes a command's reply onto a script's stack
# (crates/redis/src/lua_call.rs), built with
# -Zsanitizer=address on the nightly toolchain. Any use after free, double
# free or out-of-bounds access fails the run. Leak detection is off: a
# runtime dropped with operations in flight leaks their buffers on purpose
# (the kernel may still write into them).
#
#     bash scripts/asan.sh
#
# Skipped (exit 0) where there is no nightly toolchain, as fuzz-smoke.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_cargo
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    echo "asan: no nightly toolchain here; skipped"
    exit 0
fi
target=$(rustc -vV | awk '/^host:/ {print $2}')
export ASAN_OPTIONS=detect_leaks=0
export RUSTFLAGS="-Zsanitizer=address"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}/asan
cargo +nightly test -p nvdepot-io --lib --test uring --target "$target"
cargo +nightly test -p nvdepot-index --lib --target "$target"
cargo +nightly test -p nvdepot-engine --test uring --test large --target "$target"
cargo +nightly test -p nvdepot-redis --lib lua_call --target "$target"
echo "asan: io, index (huge-page slot runs), engine uring and large-value, and script reply (lua_call) tests clean under AddressSanitizer"
