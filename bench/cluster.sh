#!/usr/bin/env bash
# Several nvdepot nodes on this machine behind the engines people already
# run (bench/cluster.py says what each step checks): a Redis Cluster of
# `nvdepot serve` nodes (redis-py RedisCluster, redis-benchmark --cluster,
# kill -9 and warm restart, growing from 3 to 4 nodes under writes), and
# `nvdepot memcache` / `nvdepot serve` nodes behind nutcracker. Every node
# listens on its own loopback address (127.0.0.11, .12, ...).
#
#     bash bench/cluster.sh            # 100 000 keys; bench/results/cluster.md
#     QUICK=1 bash bench/cluster.sh    # 10 000 keys (what CI runs)
#
# Installs nutcracker and redis-tools (apt), redis-py and pymemcache (pip)
# if missing.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
source "$repo/scripts/lib.sh"
ensure_cargo
if ! command -v nutcracker >/dev/null || ! command -v redis-benchmark >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q nutcracker redis-tools
fi
export PATH="$PATH:/usr/sbin"
if ! python3 -c 'import redis, pymemcache' 2>/dev/null; then
    python3 -m pip install --quiet redis pymemcache ||
        python3 -m pip install --quiet --break-system-packages redis pymemcache
fi
bin=$(nvdepot_binary "$repo")
keys=100000
[[ -n ${QUICK:-} ]] && keys=10000
target=$(dirname "$(dirname "$bin")")
work=$(mktemp -d "$target/cluster.XXXXXX")
trap 'rm -rf "$work"' EXIT
out=$work/output.txt
python3 "$repo/bench/cluster.py" "$bin" "$work" "$keys" "$work/result.json" 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
if [[ $status -ne 0 ]]; then
    for log in "$work"/*.log; do echo "--- $log"; tail -20 "$log"; done
    exit "$status"
fi
if [[ -z ${QUICK:-} ]]; then
    {
        echo "# bench/cluster.sh — $(date -u +%Y-%m-%d)"
        echo
        echo "Command: \`bash bench/cluster.sh\` ($keys keys; 2 cores shared by every node, the proxy and the clients)."
        echo
        echo '```'
        cat "$out"
        echo '```'
        echo
        echo '```json'
        cat "$work/result.json"
        echo
        echo '```'
    } > "$repo/bench/results/cluster.md"
    echo "recorded in bench/results/cluster.md"
fi
