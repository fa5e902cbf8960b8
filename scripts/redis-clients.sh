#!/usr/bin/env bash
# Real Redis clients against `nvdepot serve` (what CI runs): redis-cli
# (one-shot and an interactive session on stdin), redis-benchmark
# (set, get, incr, mset; every request must succeed) and redis-py over
# RESP2 and RESP3 (strings, expiry, scan_iter, pipelines with and without
# transactions, WATCH, hashes, lists, sets, sorted sets, a blocking job
# queue, Pub/Sub with patterns and a listener thread, Lock (EVALSHA) under
# contention of 16 processes, a rate-limiter script, keyspace notifications,
# redis-py's client-side cache over CLIENT TRACKING) and an RQ job queue
# end to end (rq, pip). Installs redis-tools (apt) and redis-py (pip) if missing.
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
    # Collections through redis-py's own APIs.
    r.delete("py:h", "py:l", "py:s", "py:z", "py:s2")
    assert r.hset("py:h", mapping={"a": "1", "b": "2"}) == 2
    assert r.hgetall("py:h") == {"a": "1", "b": "2"}
    assert r.hincrby("py:h", "a", 4) == 5 and r.hget("py:h", "a") == "5"
    assert r.hincrbyfloat("py:h", "f", 0.5) == 0.5
    assert sorted(r.hkeys("py:h")) == ["a", "b", "f"] and r.hlen("py:h") == 3
    assert dict(r.hscan_iter("py:h")) == {"a": "5", "b": "2", "f": "0.5"}
    assert r.hdel("py:h", "a", "zz") == 1 and r.type("py:h") == "hash"
    assert r.rpush("py:l", *range(5)) == 5 and r.lpush("py:l", "x") == 6
    assert r.lrange("py:l", 0, -1) == ["x", "0", "1", "2", "3", "4"]
    assert r.lpop("py:l") == "x" and r.rpop("py:l", 2) == ["4", "3"]
    assert r.lmove("py:l", "py:l", "LEFT", "RIGHT") == "0"
    assert r.lpos("py:l", "2") == 1 and r.llen("py:l") == 3
    assert r.sadd("py:s", "a", "b", "c") == 3 and r.sismember("py:s", "a")
    assert r.smembers("py:s") == {"a", "b", "c"}
    assert r.sadd("py:s2", "b", "z") == 2 and r.sinter("py:s", "py:s2") == {"b"}
    assert r.sunionstore("py:s3", ["py:s", "py:s2"]) == 4
    assert set(r.sscan_iter("py:s3")) == {"a", "b", "c", "z"}
    # The scan iterators over paged collections (answered a few buckets
    # per call): every entry once or more, nothing else.
    big = {f"f{i}": str(i) for i in range(4000)}
    r.delete("py:bh", "py:bs", "py:bz")
    assert r.hset("py:bh", mapping=big) == 4000
    assert r.sadd("py:bs", *big) == 4000
    assert r.zadd("py:bz", {f: int(v) for f, v in big.items()}) == 4000
    assert r.object("encoding", "py:bh") == "hashtable"
    cursor, first = r.hscan("py:bh", 0, count=10)
    assert cursor != 0 and len(first) < 4000, (cursor, len(first))
    assert dict(r.hscan_iter("py:bh", count=50)) == big
    assert set(r.sscan_iter("py:bs")) == set(big)
    assert {m: s for m, s in r.zscan_iter("py:bz")} == {f: float(v) for f, v in big.items()}
    assert {f for f, _ in r.hscan_iter("py:bh", match="f39*")} == {f for f in big if f.startswith("f39")}
    r.delete("py:bh", "py:bs", "py:bz")
    assert r.zadd("py:z", {"a": 1, "b": 2.5, "c": -1}) == 3
    # (redis-py answers pairs as tuples over RESP2, lists over RESP3.)
    pairs = [tuple(p) for p in r.zrange("py:z", 0, -1, withscores=True)]
    assert pairs == [("c", -1.0), ("a", 1.0), ("b", 2.5)], pairs
    assert r.zincrby("py:z", 2, "a") == 3.0 and r.zrank("py:z", "a") == 2
    assert r.zrangebyscore("py:z", 0, "+inf") == ["b", "a"]
    popped = r.zpopmin("py:z")
    assert popped in ([("c", -1.0)], ["c", -1.0]), popped
    assert r.zcard("py:z") == 2
    assert r.zscore("py:z", "b") == 2.5 and r.object("encoding", "py:z") == "listpack"
    # A job queue: a worker blocked in BRPOP is handed the job pushed later.
    import threading
    got = []
    worker = redis.Redis(port=port, protocol=proto, decode_responses=True)
    t = threading.Thread(target=lambda: got.append(worker.brpop(["py:jobs"], timeout=5)))
    t.start()
    time.sleep(0.2)
    r.lpush("py:jobs", "job-1")
    t.join()
    assert got == [("py:jobs", "job-1")] or got == [["py:jobs", "job-1"]], got
    assert worker.brpop(["py:jobs"], timeout=0.1) is None
    worker.close()
    # Pub/Sub: a PubSub object with channels and patterns, and a
    # listener thread (run_in_thread) as cache-invalidation code uses.
    p = r.pubsub()
    p.subscribe("py:news")
    p.psubscribe("py:ev.*")
    assert p.get_message(timeout=1)["type"] == "subscribe"
    assert p.get_message(timeout=1)["type"] == "psubscribe"
    assert r.publish("py:news", "n1") == 1 and r.publish("py:ev.a", "e1") == 1
    assert r.publish("py:other", "x") == 0
    m1, m2 = p.get_message(timeout=1), p.get_message(timeout=1)
    assert (m1["type"], m1["channel"], m1["data"]) == ("message", "py:news", "n1"), m1
    assert (m2["type"], m2["pattern"], m2["channel"], m2["data"]) == ("pmessage", "py:ev.*", "py:ev.a", "e1"), m2
    assert r.pubsub_numsub("py:news") == [("py:news", 1)] and r.pubsub_numpat() == 1
    p.close()
    heard = []
    q = r.pubsub(ignore_subscribe_messages=True)
    q.subscribe(**{"py:inval": lambda m: heard.append(m["data"])})
    listener = q.run_in_thread(sleep_time=0.01, daemon=True)
    # SUBSCRIBE goes out on the listener's connection: publish only once
    # the server counts the subscriber, or the first messages reach no one.
    deadline = time.time() + 5
    while dict(r.pubsub_numsub("py:inval")).get("py:inval", 0) < 1 and time.time() < deadline:
        time.sleep(0.01)
    for i in range(100):
        r.publish("py:inval", f"k{i}")
    deadline = time.time() + 5
    while len(heard) < 100 and time.time() < deadline:
        time.sleep(0.01)
    listener.stop()
    listener.join(timeout=5)
    q.close()
    assert heard == [f"k{i}" for i in range(100)], heard[:5]
    r.close()
    print(f"redis-py RESP{proto}: ok")
PY

echo "== redis-py Lock (EVALSHA) under contention, a rate limiter script"
python3 - "$port" <<'PY'
import multiprocessing, sys, time
import redis

port = int(sys.argv[1])

def worker(i):
    r = redis.Redis(port=port)
    holders = 0
    for _ in range(15):
        with r.lock("py:lock", timeout=10, blocking_timeout=60):
            # Two holders at once would both see 0 here.
            if r.incr("py:holders") != 1:
                holders += 1
            v = int(r.get("py:counter") or 0)
            time.sleep(0.001)
            r.set("py:counter", v + 1)
            r.decr("py:holders")
    return holders

if __name__ == "__main__":
    r = redis.Redis(port=port)
    r.delete("py:counter", "py:holders", "py:lock")
    with multiprocessing.Pool(16) as pool:
        doubles = sum(pool.map(worker, range(16)))
    assert doubles == 0, f"{doubles} times two holders"
    assert int(r.get("py:counter")) == 16 * 15, r.get("py:counter")
    # A lock released by another owner's token is refused (the script
    # compares tokens).
    a = r.lock("py:l2", timeout=5)
    assert a.acquire()
    b = r.lock("py:l2", timeout=5)
    b.local.token = b"not-the-owner"
    try:
        b.release()
        raise AssertionError("released a lock it does not own")
    except redis.exceptions.LockNotOwnedError:
        pass
    a.release()
    # A fixed-window rate limiter as applications write it.
    limiter = r.register_script(
        "local n = redis.call('INCR', KEYS[1]) "
        "if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end "
        "if n > tonumber(ARGV[1]) then return {0, redis.call('PTTL', KEYS[1])} end "
        "return {1, tonumber(ARGV[1]) - n}")
    results = [limiter(keys=["py:rate:user1"], args=[5, 60000]) for _ in range(8)]
    assert [x[0] for x in results] == [1] * 5 + [0] * 3, results
    assert results[4][1] == 0 and 0 < results[7][1] <= 60000, results
    r.script_flush()
    # After SCRIPT FLUSH redis-py's Script reloads on NOSCRIPT.
    assert limiter(keys=["py:rate:user2"], args=[5, 60000]) == [1, 4]
    print("redis-py Lock x16 processes, rate limiter: ok")
PY

echo "== redis-py: client-side caching (RESP3, CLIENT TRACKING) and keyspace notifications"
python3 - "$port" <<'PY'
import sys, time
import redis

port = int(sys.argv[1])
writer = redis.Redis(port=port, decode_responses=True)
# Keyspace notifications as cache-invalidation and scheduler code use them.
writer.config_set("notify-keyspace-events", "KEA")
assert writer.config_get("notify-keyspace-events") == {"notify-keyspace-events": "AKE"}
p = writer.pubsub(ignore_subscribe_messages=True)
p.psubscribe("__keyspace@0__:ks:*")
time.sleep(0.1)
writer.set("ks:a", "1", px=100)
writer.hset("ks:h", "f", "v")
writer.hdel("ks:h", "f")
time.sleep(0.3)
writer.get("ks:a")  # found expired: `expired`
events, deadline = [], time.time() + 5
while len(events) < 6 and time.time() < deadline:
    m = p.get_message(timeout=0.2)
    if m:
        events.append((m["channel"].split(":", 1)[1], m["data"]))
assert events == [("ks:a", "set"), ("ks:a", "expire"), ("ks:h", "hset"),
                  ("ks:h", "hdel"), ("ks:h", "del"), ("ks:a", "expired")], events
p.close()
writer.config_set("notify-keyspace-events", "")
# CLIENT TRACKING as a RESP3 client library sees it: redis-py's parser
# hands invalidation pushes to a handler (what its near cache installs;
# redis-py's `cache_config` itself refuses servers reporting a version
# below 7.4, and nvdepot reports 7.0.0).
inval = []
tracked = redis.Redis(port=port, protocol=3, single_connection_client=True, decode_responses=True)
tracked.connection._parser.set_invalidation_push_handler(lambda m: inval.append(m))
assert tracked.execute_command("CLIENT", "TRACKING", "ON") in (b"OK", "OK", True)
writer.set("csc:k", "v1")
assert tracked.get("csc:k") == "v1"
writer.set("csc:k", "v2")
deadline = time.time() + 5
while not inval and time.time() < deadline:
    tracked.ping()  # a reply read: pending pushes are handled first
    time.sleep(0.01)
assert inval and inval[0][0] in (b"invalidate", "invalidate"), inval
assert [k if isinstance(k, str) else k.decode() for k in inval[0][1]] == ["csc:k"], inval
writer.flushall()
deadline = time.time() + 5
while len(inval) < 2 and time.time() < deadline:
    tracked.ping()
    time.sleep(0.01)
assert len(inval) == 2 and inval[1][1] is None, inval  # all keys
tracked.close()
print("redis-py RESP3 invalidation pushes (CLIENT TRACKING): ok")
writer.close()
print("keyspace notifications: ok")
PY

echo "== RQ: a job queue end to end (enqueue, a burst worker, results, a failed job)"
if ! python3 -c 'import rq' 2>/dev/null; then
    python3 -m pip install --quiet rq || python3 -m pip install --quiet --break-system-packages rq
fi
mkdir -p "$work/rq"
cat >"$work/rq/rqjobs.py" <<'PY'
def add(a, b):
    return a + b

def fail():
    raise ValueError("boom")
PY
(cd "$work/rq" && python3 - "$port" <<'PY'
import subprocess, sys
from redis import Redis
from rq import Queue
import rqjobs

port = sys.argv[1]
q = Queue("ci", connection=Redis(port=int(port)))
jobs = [q.enqueue(rqjobs.add, i, i) for i in range(20)]
bad = q.enqueue(rqjobs.fail)
# `python -m rq.cli`: the `rq` script may not be on PATH where pip put it.
worker = subprocess.run([sys.executable, "-m", "rq.cli", "worker", "--burst", "-u",
                         f"redis://127.0.0.1:{port}", "ci"],
                        capture_output=True, text=True, timeout=300)
assert worker.returncode == 0, worker.stderr[-2000:]
for j in jobs:
    j.refresh()
assert [j.get_status() for j in jobs] == ["finished"] * 20, [j.get_status() for j in jobs]
assert [j.return_value() for j in jobs] == [2 * i for i in range(20)]
bad.refresh()
assert bad.get_status() == "failed" and "ValueError: boom" in bad.latest_result().exc_string
assert len(q) == 0
print("RQ: 20 jobs done, 1 failed as raised: ok")
PY
)

kill -TERM "$pid"
wait "$pid" && echo "== clean stop on SIGTERM"
