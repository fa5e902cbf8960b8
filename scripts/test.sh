#!/usr/bin/env bash
# The project's test command: what CI (.ci/run) runs and what README.md
# tells developers to run. Extra arguments go to `cargo test`.
#
# Debug build (the dev profile, which tests use, has opt-level 1): measured on the 2-core
# machine it is faster end to end than --release (3.5 min against 6.5 min
# from a clean target), and it keeps debug assertions on.
# --no-fail-fast: one run reports every failing test binary.
#
# Then the engine's tests once more with NVDEPOT_BACKEND=uring: the blocking
# API runs every operation on a per-thread io_uring runtime, so the same
# tests cover the async paths (ring IO on files; parked waits on stripes
# and group commit everywhere). Where io_uring is unavailable the setting
# is ignored and the rerun repeats the blocking paths.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --no-fail-fast "$@"
if [ $# -eq 0 ]; then
  echo "== engine tests again on the io_uring backend (NVDEPOT_BACKEND=uring)"
  NVDEPOT_BACKEND=uring cargo test -p nvdepot-engine --no-fail-fast
fi
if [ $# -eq 0 ]; then
  echo "== the bindings' tests (scripts/bindings.sh)"
  bash scripts/bindings.sh
fi
