#!/usr/bin/env bash
# kill -9 campaign against the release binary: each trial starts
# `nvdepot kv load`, kills it with SIGKILL after a random delay, then checks
# that every acknowledged write survived (`verify`) and that the store is
# sound before and after recovery (`check`).
#
# Usage: scripts/kill9-campaign.sh [TRIALS]   (default 20)
# Environment: SEED (replays a campaign), KILL9_DIR (where stores go, not a
# tmpfs: the store uses O_DIRECT; default target/kill9-campaign),
# DELAY_MS_MIN/DELAY_MS_MAX (default 200/3000), COUNT, VALUE_SIZE,
# SEGMENT_SIZE (default: 1M, 4M or 64M at random per trial; small segments
# make the load cross segment boundaries).
# Prints one line per trial and `N passed, M failed`; exits 1 if any failed.
# A failed trial's store and logs are kept for inspection.
#
# Then the server: `nvdepot memcache` under a set load from four
# connections is killed with SIGKILL and restarted at once, TRIALS times
# (SERVER_TRIALS overrides; 0 skips), and every set answered STORED in the
# default mode must be served after each restart
# (crates/nvdepot/tests/memcache_crash.rs, NVDEPOT_RESTART_CYCLES).
set -euo pipefail

trials=${1:-20}
repo=$(cd "$(dirname "$0")/.." && pwd)
seed=${SEED:-$(( $(date +%s) % 32768 ))}
root=${KILL9_DIR:-$repo/target/kill9-campaign}
delay_min=${DELAY_MS_MIN:-200}
delay_max=${DELAY_MS_MAX:-3000}
count=${COUNT:-10000000}
value_size=${VALUE_SIZE:-100}

source "$repo/scripts/lib.sh"
ensure_cargo
echo "== building the release binary"
bin=$(release_binary "$repo")
[[ -x $bin ]] || { echo "no binary at $bin" >&2; exit 2; }

echo "== $trials trials, seed $seed (SEED=$seed replays), stores under $root"
RANDOM=$seed
mkdir -p "$root"
passed=0
failed=0

# Runs one trial in directory $1 with value seed $2, kill delay $3 ms and
# segment size $4; prints `ok ...` or `FAIL ...`.
trial() {
    local dir=$1 vseed=$2 delay_ms=$3 segment=$4
    rm -rf "$dir" && mkdir -p "$dir"
    "$bin" kv --data "$dir/store" --size 1G --segment-size "$segment" load --count "$count" \
        --value-size "$value_size" --seed "$vseed" --ack-every 1 \
        >"$dir/load.out" 2>"$dir/load.err" &
    local pid=$!
    # Start the clock at the first acknowledged write, as the cargo test does.
    local waited=0
    until grep -q '^acked ' "$dir/load.out" 2>/dev/null; do
        if ! kill -0 "$pid" 2>/dev/null || (( waited > 600 )); then
            echo "FAIL no write acknowledged: $(cat "$dir/load.err")"
            return 1
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    # Only whole lines count: drop a last line cut by the kill.
    local acked
    acked=$(grep -c '' "$dir/load.out" || true)
    [[ -n $(tail -c1 "$dir/load.out") ]] && acked=$((acked - 1))
    local last=$((acked - 1))
    "$bin" check --data "$dir/store" >"$dir/check1.out" 2>&1 ||
        { echo "FAIL check after crash (last acked $last)"; return 1; }
    "$bin" kv --data "$dir/store" verify --count "$acked" --value-size "$value_size" \
        --seed "$vseed" >"$dir/verify.out" 2>&1 ||
        { echo "FAIL $(head -1 "$dir/verify.out") (last acked $last)"; return 1; }
    "$bin" check --data "$dir/store" >"$dir/check2.out" 2>&1 ||
        { echo "FAIL check after recovery (last acked $last)"; return 1; }
    echo "ok $acked acked writes verified"
}

for ((t = 1; t <= trials; t++)); do
    vseed=$((RANDOM * 32768 + RANDOM))
    delay_ms=$((delay_min + (RANDOM * 32768 + RANDOM) % (delay_max - delay_min + 1)))
    segments=(1M 4M 64M)
    segment=${SEGMENT_SIZE:-${segments[RANDOM % 3]}}
    dir=$root/trial-$t
    if result=$(trial "$dir" "$vseed" "$delay_ms" "$segment"); then
        passed=$((passed + 1))
        rm -rf "$dir"
    else
        failed=$((failed + 1))
        result="$result; kept $dir"
    fi
    echo "trial $t/$trials: segments $segment, kill after ${delay_ms} ms," \
        "value seed $vseed: $result"
done
echo "$passed passed, $failed failed"

server_trials=${SERVER_TRIALS:-$trials}
server_ok=true
if (( server_trials > 0 )); then
    echo "== server: $server_trials kill -9 + immediate restart cycles of nvdepot memcache"
    if (cd "$repo" && NVDEPOT_RESTART_CYCLES=$server_trials cargo test --release -q -p nvdepot \
        --test memcache_crash immediate_restarts -- --nocapture); then
        echo "server: $server_trials cycles passed"
    else
        echo "server: FAILED"
        server_ok=false
    fi
fi
(( failed == 0 )) && $server_ok
