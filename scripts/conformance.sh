#!/usr/bin/env bash
# memcached conformance of `nvdepot memcache`: builds the release binary
# (or runs $NVDEPOT_BIN, as CI does),
# starts the server on a fresh store (a free port on 127.0.0.1, a 512M data
# file with 8M segments under the cargo target directory), runs the shared
# harness's memccapable cases (shared/harness/conformance.sh) in ascii and
# binary mode, then stops the server with SIGTERM and checks it exits 0
# within 30 s. What CI (.ci/run) runs; developers can run it too.
#
# Until every case passes, the cases known to fail are listed, one per line,
# in scripts/conformance-expected-failures.txt. The script fails when the
# failing set differs from that list in either direction: a case that
# passed before fails (a regression), or a listed case now passes (take it
# off the list, so that it cannot regress unnoticed).
#
# Needs memccapable (Debian: apt-get install libmemcached-tools).
# Environment: MODES (default "ascii binary"), CASE_TIMEOUT (seconds per
# case, default 20), KEEP=1 keeps the work directory (store, logs).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
source "$repo/scripts/lib.sh"

harness="$(cd "$repo/.." && pwd)/shared/harness"
[[ -f $harness/conformance.sh ]] || harness=/work/shared/harness
if [[ ! -f $harness/conformance.sh ]]; then
    echo "error: shared/harness/conformance.sh is neither beside the repository" \
        "nor in /work/shared" >&2
    exit 2
fi
if ! command -v memccapable >/dev/null; then
    echo "error: memccapable not found (apt-get install libmemcached-tools)" >&2
    exit 2
fi
expected_file=$repo/scripts/conformance-expected-failures.txt
modes=${MODES:-ascii binary}
export CASE_TIMEOUT=${CASE_TIMEOUT:-20}

ensure_cargo
bin=$(nvdepot_binary "$repo")
# Under the target directory, not /tmp: a tmpfs may refuse O_DIRECT.
work=$(mktemp -d "$(dirname "$(dirname "$bin")")/conformance.XXXXXX")
server_pid=
cleanup() {
    if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill -KILL "$server_pid" 2>/dev/null || true
    fi
    if [[ ${KEEP:-0} == 1 ]]; then
        echo "conformance: work directory kept: $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT

server_log=$work/server.log
"$bin" memcache -p 0 -l 127.0.0.1 --data "$work/data" --size 512M --segment-size 8M \
    2>"$server_log" &
server_pid=$!

# The server prints its address once the store is open; then wait until
# the port accepts.
port=
for _ in $(seq 600); do
    port=$(sed -n 's/^nvdepot memcache listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' \
        "$server_log")
    [[ -n $port ]] && break
    if ! kill -0 "$server_pid" 2>/dev/null; then
        echo "error: nvdepot memcache exited at start-up:" >&2
        cat "$server_log" >&2
        exit 1
    fi
    sleep 0.1
done
if [[ -z $port ]]; then
    echo "error: nvdepot memcache did not start within 60 s:" >&2
    cat "$server_log" >&2
    exit 1
fi
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
done
echo "conformance: nvdepot memcache (pid $server_pid) on 127.0.0.1:$port"

failed=()
for mode in $modes; do
    out=$work/$mode.out
    MODE=$mode LOG_DIR=$work/logs-$mode bash "$harness/conformance.sh" 127.0.0.1 "$port" \
        >"$out" 2>&1 || true
    echo "== memccapable $mode: $(tail -n 1 "$out")"
    mapfile -t -O "${#failed[@]}" failed < <(sed -n 's/^FAIL //p' "$out")
done

# Stop: SIGTERM must bring a clean exit (0, store closed) within 30 s.
stopped=ok
kill -TERM "$server_pid"
for _ in $(seq 300); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$server_pid" 2>/dev/null; then
    echo "error: nvdepot memcache still running 30 s after SIGTERM" >&2
    stopped="still running after 30 s"
else
    code=0
    wait "$server_pid" || code=$?
    server_pid=
    if ((code != 0)); then
        echo "error: nvdepot memcache exited $code after SIGTERM" >&2
        stopped="exit $code"
    fi
fi
status=0
if [[ $stopped != ok ]]; then
    status=1
    echo "--- server log (last 40 lines)" >&2
    tail -n 40 "$server_log" >&2
fi

# Compare the failing set with the expected one (for the modes run).
expected=()
if [[ -f $expected_file ]]; then
    while IFS= read -r line; do
        line=${line%%#*}
        line=$(echo "$line" | sed 's/^[[:space:]]*//; s/[[:space:]]*$//')
        [[ -z $line ]] && continue
        for mode in $modes; do
            [[ $line == "$mode "* ]] && expected+=("$line")
        done
    done <"$expected_file"
fi
contains() {
    local needle=$1 item
    shift
    for item in "$@"; do [[ $item == "$needle" ]] && return 0; done
    return 1
}
for case in "${failed[@]}"; do
    if ! contains "$case" "${expected[@]}"; then
        echo "REGRESSION: '$case' fails and is not in scripts/conformance-expected-failures.txt"
        status=1
    fi
done
for case in "${expected[@]}"; do
    if ! contains "$case" "${failed[@]}"; then
        echo "FIXED: '$case' passes: remove it from scripts/conformance-expected-failures.txt"
        status=1
    fi
done
echo "conformance: ${#failed[@]} cases failed, ${#expected[@]} expected to fail;" \
    "stop on SIGTERM: $stopped"
exit "$status"
