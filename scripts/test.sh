#!/usr/bin/env bash
# The project's test command: what CI (.ci/run) runs and what README.md
# tells developers to run. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo test --workspace "$@"
