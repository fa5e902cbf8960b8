#!/usr/bin/env bash
# The main job. Builds the release `nvdepot` binary (installing the Rust
# toolchain first if it is missing), then:
# - with arguments, runs `nvdepot ARGS...` (e.g. `kv --data ./data get key-42`);
# - without, creates or opens the store in ./data (1 GiB data file
#   ./data/nvdepot.0), loads 10 000 keys, verifies them and prints the
#   store's statistics.
# Paths are relative to the directory it is run from.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
source "$repo/scripts/lib.sh"
ensure_cargo
bin=$(release_binary "$repo")

if (($# > 0)); then
    exec "$bin" "$@"
fi
work=(--count 10000 --value-size 100 --seed 1)
echo "== nvdepot kv --data ./data load ${work[*]}"
"$bin" kv --data ./data --size 1G load "${work[@]}"
echo "== nvdepot kv --data ./data verify ${work[*]}"
"$bin" kv --data ./data verify "${work[@]}"
echo "== nvdepot kv --data ./data stats"
"$bin" kv --data ./data stats
