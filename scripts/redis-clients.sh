#!/usr/bin/env bash
# Real Redis clients against `nvdepot serve` (what CI runs): redis-cli
# (one-shot and an interactive session on stdin), redis-benchmark
# (set, get, incr, mset; every request must succeed) and redis-py over
# RESP2 and RESP3 (strings, expiry, scan_iter, pipelines with and without
# transactions, WATCH). Installs redis-tools (apt) and redis-py (pip) if missing.
#
#     bash scripts/redis-clients.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
source "$repo/scripts/lib.sh"
ensure_cargo
if ! command -v redis-cli >/dev/null || ! command -v redis-benchmark >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q redis-tools
fi
if ! python3 -c 'import redis' 2>/dev/null; then
    python3 -m pip install --quiet redis || python3 -m pip install --quiet --break-system-packages redis
fi
cd "$repo"
bin=$(nvdepot_binary "$repo")
work=$(mktemp -d "$(dirname "$(dirname "$bin")")/redis-clients.XXXXXX")
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
"$bin" serve --port 0 --data "$work/store" --size 128M --segment-size 8M 2>"$work/serve.log" &
pid=$!
for _ in $(seq 1 600); do
    grep -q 'listening on' "$work/serve.log" && break
    sleep 0.1
done
port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$work/serve.log")
[[ -n $port ]] || { cat "$work/serve.log"; echo "FAIL: nvdepot serve did not start"; exit 1; }
echo "== nvdepot serve on port $port"
cli() { redis-cli -p "$port" "$@"; }
expect() { # expect WANT GOT WHAT
    if [[ "$1" != "$2" ]]; then echo "FAIL: $3: want [$1], got [$2]"; exit 1; fi
}

echo "== redis-cli"
expect OK "$(cli set greeting hello)" "set"
expect hello "$(cli get greeting)" "get"
expect 11 "$(cli incrby n 11)" "incrby"
expect 1 "$(cli expire greeting 100)" "expire"
session=$(printf 'set a 1\nincr a\nget a\nping\n' | cli)
expect $'OK\n2\n2\nPONG' "$session" "interactive session"
expect "ERR unknown command 'nosuch', with args beginning with: " \
    "$(cli nosuch 2>&1)" "unknown command"

echo "== redis-benchmark"
out=$(redis-benchmark -p "$port" -t set,get,incr,mset -n 2000 -c 8 -q 2>&1 | tr '\r' '\n' | grep 'requests per second' || true)
echo "$out"
[[ $(grep -c 'requests per second' <<<"$out") -eq 4 ]] || { echo "FAIL: redis-benchmark"; exit 1; }

echo "== redis-py"
python3 - "$port" <<'PY'
import sys, time
import redis

port = int(sys.argv[1])
for proto in (2, 3):
    r = redis.Redis(port=port, protocol=proto, decode_responses=True)
    assert r.ping()
    assert r.set("py:k", "v") is True
    assert r.get("py:k") == "v"
    assert r.get("py:none") is None
    assert r.set("py:k", "w", nx=True) is None
    assert r.set("py:k", "w", xx=True, get=True) == "v"
    assert r.incr("py:n", 5) in (5, 10)
    assert r.mget("py:k", "py:none") == ["w", None]
    r.set("py:t", "x", px=50)
    assert 0 < r.pttl("py:t") <= 50
    time.sleep(0.1)
    assert r.get("py:t") is None and r.exists("py:t") == 0
    for i in range(30):
        r.set(f"py:scan:{i}", i)
    assert len(set(r.scan_iter(match="py:scan:*", count=7))) == 30
    for transaction in (False, True):
        p = r.pipeline(transaction=transaction)
        p.set("py:p", 1).incr("py:p").get("py:p")
        assert p.execute() == [True, 2, "2"], transaction
    # Optimistic locking with WATCH, as redis-py's docs show it.
    def double(pipe):
        v = int(pipe.get("py:p"))
        pipe.multi()
        pipe.set("py:p", v * 2)
    assert r.transaction(double, "py:p") == [True]
    assert r.get("py:p") == "4"
    assert r.delete("py:p", "py:none") == 1
    # Connection admin: another client listed and killed by id.
    other = redis.Redis(port=port, protocol=proto, decode_responses=True)
    other.client_setname("victim")
    victim = other.client_id()
    listed = {int(c["id"]): c for c in r.client_list()}
    assert listed[victim]["name"] == "victim", listed
    assert r.client_kill_filter(_id=victim) == 1
    assert victim not in {int(c["id"]) for c in r.client_list()}
    other.close()
    assert r.config_set("save", "") is True
    assert r.config_get("maxmemory") == {"maxmemory": "0"}
    r.close()
    print(f"redis-py RESP{proto}: ok")
PY

kill -TERM "$pid"
wait "$pid" && echo "== clean stop on SIGTERM"
