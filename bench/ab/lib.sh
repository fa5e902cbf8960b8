# bench/ab/lib.sh -- sourced by the A/B scripts (and by
# bench/memcache-vs-memcached.sh for its helpers). Sets ROOT (the
# repository) and H (the harness: HARNESS, default ../shared/harness).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
H=${HARNESS:-$ROOT/../shared/harness}

# cpu_ticks PID: utime + stime (fields 14 and 15 of /proc/PID/stat, every
# thread of the process) in clock ticks; empty if the process is gone. The
# fields are counted after the ")" that ends field 2 (comm may hold spaces).
cpu_ticks() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
    stat=${stat##*) }
    # shellcheck disable=SC2086
    set -- $stat # $1 is field 3 (state): utime is $12, stime $13
    echo $((${12} + ${13}))
}

# ctx_switches PID: voluntary + involuntary context switches of every
# thread of the process (/proc/PID/task/*/status).
ctx_switches() {
    cat /proc/"$1"/task/*/status 2>/dev/null |
        awk '/^(voluntary|nonvoluntary)_ctxt_switches:/ {n += $2} END {print n + 0}'
}

# wait_serving PORT: returns once the memcache server on 127.0.0.1:PORT
# answers `version` (at most 100 tries). Accepting is not enough: `nvdepot
# memcache` listens before it has created its store (a new 4 GiB store is
# zero-filled first, seconds), so a connection accepted early waits.
wait_serving() {
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'version\r\n' >&3 &&
            timeout 1 head -c 7 <&3 | grep -q VERSION) 2>/dev/null && return 0
        sleep 0.2
    done
    return 1
}

# memcache_stats PORT FIELD...: those fields of the server's `stats`,
# tab-separated ("?" for a field it lacks, all "?" if it cannot be asked).
memcache_stats() {
    local port=$1
    shift
    local unknown=? field
    for field in "${@:2}"; do unknown+=$'\t?'; done
    python3 - "$port" "$@" <<'PY' 2>/dev/null || echo "$unknown"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"stats\r\n")
buf = b""
while not buf.endswith(b"END\r\n"):
    chunk = s.recv(65536)
    if not chunk:
        break
    buf += chunk
st = dict(l.split()[1:3] for l in buf.decode().splitlines() if l.startswith("STAT "))
print(*(st.get(f, "?") for f in sys.argv[2:]), sep="\t")
PY
}

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
    wait_serving "$port"
    bash "$H/memaslap.sh" 127.0.0.1 "$port" 2 "$conc" >/dev/null 2>&1 # warm-up
}
