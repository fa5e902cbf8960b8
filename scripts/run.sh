#!/usr/bin/env bash
# The main job. Builds the release `nvdepot` binary (installing the Rust
# toolchain first if it is missing), then:
# - without arguments, starts the memcached-compatible server on the store
#   in ./data (created with a 1 GiB data file ./data/nvdepot.0 if missing),
#   listening on 127.0.0.1:11211 with memcached's default flags, until
#   SIGTERM or Ctrl-C (which close the store cleanly);
# - with arguments, runs `nvdepot ARGS...` (e.g. `memcache -p 11311 -vv`,
#   `kv --data ./data get key-42`).
# Paths are relative to the directory it is run from.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
source "$repo/scripts/lib.sh"
ensure_cargo
bin=$(release_binary "$repo")

if (($# > 0)); then
    exec "$bin" "$@"
fi
exec "$bin" memcache --data ./data --size 1G
