# bench/ab/lib.sh -- sourced by the A/B scripts that measure one
# `nvdepot memcache` build alone. Sets ROOT (the repository) and H (the
# harness: HARNESS, default ../shared/harness).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
H=${HARNESS:-$ROOT/../shared/harness}

# start_memcache BIN CONC PORT NAME: starts BIN's memcache face on
# 127.0.0.1:PORT with a 4 GiB store (-m 1024) under W (BENCH_DIR, default
# bench/work/NAME), sets P to its pid and W, stops it and removes W on
# exit, waits until it accepts, then warms it up with 2 s of memaslap at
# CONC connections.
start_memcache() {
    local bin=$1 conc=$2 port=$3
    W=${BENCH_DIR:-$ROOT/bench/work/$4}
    rm -rf "$W"
    mkdir -p "$W"
    "$bin" memcache -p "$port" -l 127.0.0.1 -m 1024 --data "$W/d" --size 4G >/dev/null 2>&1 &
    P=$!
    # shellcheck disable=SC2064 # expand now: the trap must name this server
    trap "kill $P 2>/dev/null; wait $P 2>/dev/null; rm -rf '$W'" EXIT
    for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.2; done
    bash "$H/memaslap.sh" 127.0.0.1 "$port" 2 "$conc" >/dev/null 2>&1 # warm-up
}
