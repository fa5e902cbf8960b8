#!/usr/bin/env python3
"""Several nvdepot nodes on this machine, each on its own loopback address
and store, behind the engines people already run (bench/cluster.sh runs
this; see docs/DEPLOY.md):

1. a Redis Cluster of 3 `nvdepot serve --cluster-enabled` nodes: redis-py's
   RedisCluster (RESP2 and RESP3) writes and reads every key, keys per node
   reported; `redis-benchmark --cluster` runs, and its throughput is
   compared with one node's at the same total concurrency;
2. kill -9 of one cluster node: the other nodes' keys are all served, the
   dead node's fail with a clear error; restarted on its store, it serves
   its keys again (warm restart);
3. the cluster grows from 3 to 4 nodes by moving slots (CLUSTERX MIGRATE)
   under a running write load: afterwards every acknowledged write is
   read back through the cluster client;
4. 3 `nvdepot memcache` nodes behind nutcracker (ketama, auto-ejection):
   every key written and read back through the proxy; kill -9 of one node:
   the proxy ejects it, the other nodes' keys are all served; restarted on
   its store, every key is served again; then the same nodes without a
   proxy, through pymemcache's HashClient with a ketama continuum;
5. 3 `nvdepot serve` nodes behind nutcracker (Redis protocol, ketama):
   every key written and read back.

Usage: cluster.py NVDEPOT_BINARY WORK_DIR KEYS RESULT_JSON
Exits non-zero, saying which step, if any check fails.
"""

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings

import bisect
import hashlib

import redis
from pymemcache.client.hash import HashClient
from redis.cluster import ClusterNode, RedisCluster

BIN, WORK, KEYS, RESULT = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
PROCS = []
warnings.filterwarnings("ignore", category=DeprecationWarning)
RESULTS = {"keys": KEYS}


def say(msg):
    print(msg, flush=True)


def fail(msg):
    say(f"FAIL: {msg}")
    stop_all()
    sys.exit(1)


class Proc:
    def __init__(self, name, args, ready, log):
        self.name, self.args, self.ready, self.log = name, args, ready, log
        self.p = None
        self.start()

    def start(self):
        self.logf = open(self.log, "ab")
        self.p = subprocess.Popen(self.args, stdout=self.logf, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL)
        PROCS.append(self)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.ready():
                return
            if self.p.poll() is not None:
                fail(f"{self.name} exited at start: {open(self.log).read()[-2000:]}")
            time.sleep(0.05)
        fail(f"{self.name} did not start: {open(self.log).read()[-2000:]}")

    def kill9(self):
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()

    def stop(self):
        if self.p and self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.p.kill()


def stop_all():
    for p in PROCS:
        try:
            p.stop()
        except Exception:
            pass


def listening(ip, port):
    def check():
        try:
            socket.create_connection((ip, port), timeout=0.2).close()
            return True
        except OSError:
            return False
    return check


def serve(name, ip, port, cluster):
    args = [BIN, "serve", "--bind", ip, "--port", str(port), "--data", f"{WORK}/{name}",
            "--size", "512M", "--segment-size", "8M", "--threads", "1", "--cache-mb", "16"]
    if cluster:
        args.append("--cluster-enabled")
    return Proc(name, args, listening(ip, port), f"{WORK}/{name}.log")


def memcache(name, ip, port):
    args = [BIN, "memcache", "-l", ip, "-p", str(port), "-t", "1", "-m", "16",
            "--data", f"{WORK}/{name}", "--size", "512M", "--segment-size", "8M"]
    return Proc(name, args, listening(ip, port), f"{WORK}/{name}.log")


def client(ip, port):
    return redis.Redis(host=ip, port=port, protocol=2, decode_responses=True,
                       lib_name=None, lib_version=None)


def set_nodes(nodes, version):
    text = "".join(f"{n['id']} {n['ip']} {n['port']} master - {n['slots']}\n" for n in nodes)
    for n in nodes:
        r = client(n["ip"], n["port"]).execute_command("CLUSTERX", "SETNODES", text, version)
        if r != "OK":
            fail(f"SETNODES on {n['ip']}: {r}")


def even_slots(count):
    bounds = [round(i * 16384 / count) for i in range(count + 1)]
    return [f"{bounds[i]}-{bounds[i + 1] - 1}" for i in range(count)]


def cluster_client(ip, port, protocol=2):
    return RedisCluster(startup_nodes=[ClusterNode(ip, port)], protocol=protocol,
                        decode_responses=True, cluster_error_retry_attempts=10)


def keys_per_node(nodes):
    return {f"{n['ip']}:{n['port']}": client(n["ip"], n["port"]).dbsize() for n in nodes}


def bench_rps(args):
    out = subprocess.run(["redis-benchmark"] + args, capture_output=True, text=True, timeout=600)
    rps = {}
    for line in out.stdout.replace("\r", "\n").splitlines():
        if "requests per second" in line and ":" in line:
            name, rest = line.split(":", 1)
            rps[name.strip()] = float(rest.split("requests per second")[0].strip())
    return rps


def redis_cluster_steps():
    say("== 1. Redis Cluster: 3 nodes of nvdepot serve --cluster-enabled")
    procs, nodes = [], []
    for i, slots in enumerate(even_slots(3), start=1):
        ip = f"127.0.0.{10 + i}"
        procs.append(serve(f"rc{i}", ip, 7000, True))
        nid = client(ip, 7000).execute_command("CLUSTERX", "MYID")
        nodes.append({"id": nid, "ip": ip, "port": 7000, "slots": slots})
    set_nodes(nodes, 1)
    n = max(KEYS, 20000)
    conc = 48
    clustered = bench_rps(["--cluster", "-h", "127.0.0.11", "-p", "7000", "-t", "set,get",
                           "-n", str(n), "-c", str(conc), "-d", "100", "-r", str(KEYS), "-q"])
    if set(clustered) != {"SET", "GET"}:
        fail(f"redis-benchmark --cluster: {clustered}")
    single = serve("single", "127.0.0.19", 7000, False)
    alone = bench_rps(["-h", "127.0.0.19", "-p", "7000", "-t", "set,get", "-n", str(n),
                       "-c", str(conc), "-d", "100", "-r", str(KEYS), "-q"])
    single.stop()
    RESULTS["throughput"] = {"cluster_3_nodes": clustered, "one_node": alone, "clients": conc}
    for op in ("SET", "GET"):
        say(f"redis-benchmark {op} at {conc} clients: 3-node cluster {clustered[op]:.0f}/s, "
            f"one node {alone[op]:.0f}/s ({clustered[op] / alone[op]:.2f}x; the nodes share 2 cores)")

    # The benchmark's keys go: what follows counts only this script's keys.
    for n_ in nodes:
        client(n_["ip"], n_["port"]).flushall()
    for proto in (2, 3):
        rc = cluster_client("127.0.0.11", 7000, proto)
        for start in range(0, KEYS, 1000):
            rc.mset_nonatomic({f"key:{i}": f"v{proto}-{i}" for i in range(start, min(KEYS, start + 1000))})
        for start in range(0, KEYS, 1000):
            names = [f"key:{i}" for i in range(start, min(KEYS, start + 1000))]
            got = rc.mget_nonatomic(names)
            for n, g in zip(names, got):
                if g != f"v{proto}-{n[4:]}":
                    fail(f"RESP{proto}: {n} read back {g!r}")
        rc.close()
        say(f"redis-py RedisCluster RESP{proto}: {KEYS} keys written and read back")
    per_node = keys_per_node(nodes)
    RESULTS["cluster_keys_per_node"] = per_node
    say(f"keys per node: {per_node}")
    if min(per_node.values()) < KEYS / 3 * 0.9:
        fail(f"keys are not spread evenly: {per_node}")

    say("== 2. kill -9 of one cluster node, then a warm restart")
    procs[2].kill9()
    rc = cluster_client("127.0.0.11", 7000)
    dead = nodes[2]
    lo, hi = map(int, dead["slots"].split("-"))
    served = failed = 0
    for i in range(KEYS):
        k = f"key:{i}"
        on_dead = lo <= rc.keyslot(k) <= hi
        if on_dead and failed >= 20:
            continue  # each failure waits for the client's retries
        try:
            v = rc.get(k)
            if on_dead:
                fail(f"{k} of the dead node was served: {v!r}")
            if v != f"v3-{i}":
                fail(f"{k} read back {v!r} while a node is down")
            served += 1
        except (redis.exceptions.ConnectionError, redis.exceptions.ClusterError,
                redis.exceptions.TimeoutError) as e:
            if not on_dead:
                fail(f"{k} of a live node failed: {e}")
            failed += 1
            if failed == 1:
                say(f"a key of the dead node: {type(e).__name__}: {e}")
    rc.close()
    say(f"node 3 down: every key of nodes 1-2 served ({served}), the 20 keys of node 3 "
        f"tried fail")
    procs[2] = serve("rc3", dead["ip"], 7000, True)
    rc = cluster_client("127.0.0.11", 7000)
    bad = [i for i in range(0, KEYS) if rc.get(f"key:{i}") != f"v3-{i}"]
    if bad:
        fail(f"after the restart, {len(bad)} keys are not served, e.g. key:{bad[0]}")
    say(f"node 3 restarted on its store: all {KEYS} keys served")
    RESULTS["kill9_cluster"] = {"served_while_down": served, "all_served_after_restart": True}

    say("== 3. grow the cluster from 3 to 4 nodes under a write load")
    procs.append(serve("rc4", "127.0.0.14", 7000, True))
    n4 = {"id": client("127.0.0.14", 7000).execute_command("CLUSTERX", "MYID"),
          "ip": "127.0.0.14", "port": 7000, "slots": ""}
    nodes.append(n4)
    # The new node's first slot moves before the clients start: redis-py
    # follows an ASK only to a node it knows, and it learns nodes from
    # CLUSTER SLOTS, which lists only nodes that serve a slot.
    first = nodes[0]["slots"].split("-")[1]
    c = client(nodes[0]["ip"], 7000)
    set_nodes(nodes, 2)
    if c.execute_command("CLUSTERX", "MIGRATE", first, n4["id"]) != "OK":
        fail("the first slot's migration")
    while "migrating_state:success" not in c.execute_command("CLUSTER", "INFO"):
        time.sleep(0.05)
    nodes[0]["slots"] = f"0-{int(first) - 1}"
    n4["slots"] = first
    set_nodes(nodes, 3)
    acked = {}
    stop = threading.Event()
    errors = []

    def writer(w):
        c = cluster_client("127.0.0.11", 7000)
        n = 0
        while not stop.is_set():
            n += 1
            k = f"key:{random.randrange(w, KEYS, 2)}"
            try:
                c.set(k, f"w{w}-{n}")
                acked[k] = f"w{w}-{n}"
            except Exception as e:  # noqa: BLE001 — reported below
                errors.append(f"{k}: {type(e).__name__}: {e}")
                return
        c.close()

    writers = [threading.Thread(target=writer, args=(w,)) for w in range(2)]
    for t in writers:
        t.start()
    time.sleep(0.5)
    # Each of the 3 nodes gives the top quarter of its range to node 4.
    final = []
    for n in nodes[:3]:
        lo, hi = map(int, n["slots"].split("-"))
        cut = hi - (hi - lo + 1) // 4
        moved = f"{cut + 1}-{hi}"
        c = client(n["ip"], n["port"])
        r = c.execute_command("CLUSTERX", "MIGRATE", moved, n4["id"])
        if r != "OK":
            fail(f"CLUSTERX MIGRATE {moved} on {n['ip']}: {r}")
        t0 = time.time()
        while True:
            info = c.execute_command("CLUSTER", "INFO")
            if "migrating_state:success" in info:
                break
            if "migrating_state:fail" in info or time.time() - t0 > 300:
                fail(f"migration of {moved} from {n['ip']}: {info}")
            time.sleep(0.05)
        moved_keys = [l for l in info.split("\r\n") if l.startswith("migrated_keys:")]
        say(f"slots {moved} moved from {n['ip']} to 127.0.0.14 in {time.time() - t0:.1f} s "
            f"({moved_keys[0] if moved_keys else ''})")
        final.append((n, f"{lo}-{cut}", moved))
    stop.set()
    for t in writers:
        t.join()
    if errors:
        fail(f"a write failed during the growth: {errors[0]}")
    for n, kept, _ in final:
        n["slots"] = kept
    n4["slots"] = " ".join([first] + [m for _, _, m in final])
    set_nodes(nodes, 4)
    rc = cluster_client("127.0.0.11", 7000)
    for i in range(KEYS):
        k = f"key:{i}"
        want = acked.get(k, f"v3-{i}")
        got = rc.get(k)
        if got != want:
            fail(f"after the growth {k} reads {got!r}, last acknowledged {want!r}")
    per_node = keys_per_node(nodes)
    say(f"every acknowledged write read back ({len(acked)} keys rewritten during the moves); "
        f"keys per node: {per_node}")
    RESULTS["grow_3_to_4"] = {"keys_rewritten_during": len(acked), "keys_per_node": per_node}
    for p in procs:
        p.stop()


def mc_call(sock, payload, until_count, token):
    sock.sendall(payload)
    buf = b""
    while buf.count(token) < until_count and not buf.endswith(b"ERROR\r\n") \
            and b"SERVER_ERROR" not in buf:
        d = sock.recv(1 << 20)
        if not d:
            raise ConnectionError("closed")
        buf += d
    return buf


def mc_set_all(addr, keys, prefix):
    s = socket.create_connection(addr)
    for start in range(0, len(keys), 500):
        batch = keys[start:start + 500]
        req = b"".join(f"set {k} 0 0 {len(prefix + k)}\r\n{prefix + k}\r\n".encode() for k in batch)
        out = mc_call(s, req, len(batch), b"\r\n")
        if out.count(b"STORED\r\n") != len(batch):
            fail(f"nutcracker set: {out[:200]!r}")
    s.close()


def mc_get_all(addr, keys):
    """Values by key (misses absent), and the errors seen (an error line,
    or the proxy closing the connection, fails that multiget whole)."""
    got, errors = {}, []
    s = None
    for start in range(0, len(keys), 100):
        batch = keys[start:start + 100]
        try:
            if s is None:
                s = socket.create_connection(addr)
                s.settimeout(30)
            out = mc_call(s, ("get " + " ".join(batch) + "\r\n").encode(), 1, b"END\r\n")
        except OSError as e:
            errors.append(f"connection: {e}")
            s = None
            continue
        lines = out.split(b"\r\n")
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.startswith(b"VALUE "):
                got[line.split()[1].decode()] = lines[i + 1].decode()
                i += 2
                continue
            if line.startswith((b"SERVER_ERROR", b"CLIENT_ERROR")) or line == b"ERROR":
                errors.append(line.decode())
                break
            i += 1
    if s is not None:
        s.close()
    return got, errors


def nutcracker(conf_name, pool, node_port, redis_protocol):
    """nutcracker with one ketama pool over nodes 127.0.0.11-13:node_port,
    ejecting a node after one failure and retrying it after 3 s."""
    listen = POOL_ADDR[conf_name]
    servers = "".join(f"   - 127.0.0.{10 + i}:{node_port}:1 {pool}{i}\n" for i in (1, 2, 3))
    conf = f"{WORK}/{conf_name}.yml"
    with open(conf, "w") as f:
        f.write(f"""{pool}:
  listen: {listen[0]}:{listen[1]}
  redis: {"true" if redis_protocol else "false"}
  hash: fnv1a_64
  distribution: ketama
  timeout: 2000
  auto_eject_hosts: true
  server_retry_timeout: 3000
  server_failure_limit: 1
  servers:
{servers}""")
    log = f"{WORK}/{conf_name}.log"
    stats_port = 22300 + len(PROCS)
    return Proc(conf_name, ["nutcracker", "-c", conf, "-s", str(stats_port), "-o", log],
                lambda: os.path.exists(log) and listening(*POOL_ADDR[conf_name])(), log)


POOL_ADDR = {"nutcracker-memcache": ("127.0.0.1", 22121), "nutcracker-resp": ("127.0.0.1", 22122)}


class Ketama:
    """libketama's continuum, as a pymemcache hasher: 160 points per
    server (40 MD5 digests of "host:port-i", 4 points each), a key goes to
    the first point at or after the MD5 of the key."""

    def __init__(self):
        self.points, self.nodes = [], []

    @staticmethod
    def _hashes(text):
        d = hashlib.md5(text.encode()).digest()
        return [int.from_bytes(d[4 * j:4 * j + 4], "little") for j in range(4)]

    def add_node(self, node):
        for i in range(40):
            for h in self._hashes(f"{node}-{i}"):
                j = bisect.bisect(self.points, h)
                self.points.insert(j, h)
                self.nodes.insert(j, node)

    def remove_node(self, node):
        keep = [(p, n) for p, n in zip(self.points, self.nodes) if n != node]
        self.points = [p for p, _ in keep]
        self.nodes = [n for _, n in keep]

    def get_node(self, key):
        if isinstance(key, bytes):
            key = key.decode()
        h = self._hashes(key)[0]
        j = bisect.bisect_left(self.points, h) % len(self.points)
        return self.nodes[j]


def memcache_steps():
    say("== 4. 3 nvdepot memcache nodes behind nutcracker (ketama, auto-ejection)")
    nodes = [memcache(f"mc{i}", f"127.0.0.{10 + i}", 11211) for i in (1, 2, 3)]
    proxy = nutcracker("nutcracker-memcache", "memcache", 11211, False)
    addr = POOL_ADDR["nutcracker-memcache"]
    keys = [f"mkey:{i}" for i in range(KEYS)]
    mc_set_all(addr, keys, "v-")
    got, errs = mc_get_all(addr, keys)
    if errs or len(got) != KEYS or any(got[k] != "v-" + k for k in keys):
        fail(f"through nutcracker: {len(got)} of {KEYS} read back, errors {errs[:3]}")
    # Where each key lives: ask every node directly.
    home = {}
    per_node = {}
    for i in (1, 2, 3):
        g, _ = mc_get_all((f"127.0.0.{10 + i}", 11211), keys)
        per_node[f"127.0.0.{10 + i}"] = len(g)
        for k in g:
            home[k] = i
    say(f"{KEYS} keys written and read back through nutcracker; keys per node: {per_node}")
    RESULTS["memcache_nutcracker_keys_per_node"] = per_node
    nodes[1].kill9()
    # The proxy ejects the node after its first failure.
    deadline = time.time() + 30
    while True:
        got, errs = mc_get_all(addr, keys)
        live_ok = all(got.get(k) == "v-" + k for k in keys if home[k] != 2)
        if live_ok or time.time() > deadline:
            break
        time.sleep(0.5)
    if not live_ok:
        missing = [k for k in keys if home[k] != 2 and got.get(k) != "v-" + k]
        fail(f"node 2 down: {len(missing)} keys of live nodes not served, e.g. {missing[:3]}; errors {errs[:3]}")
    dead_served = sum(1 for k in keys if home[k] == 2 and k in got)
    say(f"node 2 killed: nutcracker ejected it; all {sum(1 for k in keys if home[k] != 2)} keys of "
        f"nodes 1 and 3 served, {dead_served} of node 2's {per_node['127.0.0.12']} (they miss)")
    nodes[1] = memcache("mc2", "127.0.0.12", 11211)
    deadline = time.time() + 30
    while True:
        got, errs = mc_get_all(addr, keys)
        if len(got) == KEYS or time.time() > deadline:
            break
        time.sleep(0.5)
    if len(got) != KEYS or any(got[k] != "v-" + k for k in keys):
        fail(f"after node 2's restart: {len(got)} of {KEYS} keys served; errors {errs[:3]}")
    say(f"node 2 restarted on its store and back in the pool: all {KEYS} keys served")
    RESULTS["memcache_kill9"] = {"all_live_served": True, "all_served_after_restart": True}
    proxy.stop()

    # The same nodes, no proxy: a ketama client.
    hc = HashClient([(f"127.0.0.{10 + i}", 11211) for i in (1, 2, 3)], hasher=Ketama,
                    default_noreply=False, timeout=10, connect_timeout=10)
    for start in range(0, KEYS, 1000):
        batch = {f"kkey:{i}": f"k{i}" for i in range(start, min(KEYS, start + 1000))}
        failed = hc.set_many(batch)
        if failed:
            fail(f"HashClient set_many: {len(failed)} keys failed")
    for start in range(0, KEYS, 1000):
        names = [f"kkey:{i}" for i in range(start, min(KEYS, start + 1000))]
        got = hc.get_many(names)
        for n in names:
            if got.get(n) != ("k" + n[5:]).encode():
                fail(f"HashClient: {n} read back {got.get(n)!r}")
    per_node = {}
    for i in (1, 2, 3):
        g, _ = mc_get_all((f"127.0.0.{10 + i}", 11211), [f"kkey:{j}" for j in range(KEYS)])
        per_node[f"127.0.0.{10 + i}"] = len(g)
    say(f"pymemcache HashClient (ketama, no proxy): {KEYS} keys written and read back; "
        f"keys per node: {per_node}")
    RESULTS["memcache_ketama_client_keys_per_node"] = per_node
    for n in nodes:
        n.stop()


def resp_proxy_steps():
    say("== 5. 3 nvdepot serve nodes behind nutcracker (Redis protocol, ketama)")
    nodes = [serve(f"rp{i}", f"127.0.0.{10 + i}", 6379, False) for i in (1, 2, 3)]
    proxy = nutcracker("nutcracker-resp", "resp", 6379, True)
    r = redis.Redis(host="127.0.0.1", port=22122, protocol=2, decode_responses=True,
                    lib_name=None, lib_version=None)
    for start in range(0, KEYS, 1000):
        p = r.pipeline(transaction=False)
        for i in range(start, min(KEYS, start + 1000)):
            p.set(f"rkey:{i}", f"r{i}")
        if not all(p.execute()):
            fail("SET through nutcracker")
    for start in range(0, KEYS, 500):
        names = [f"rkey:{i}" for i in range(start, min(KEYS, start + 500))]
        for n, v in zip(names, r.mget(names)):
            if v != "r" + n[5:]:
                fail(f"{n} read back {v!r} through nutcracker")
    per_node = {f"127.0.0.{10 + i}": client(f"127.0.0.{10 + i}", 6379).dbsize() for i in (1, 2, 3)}
    say(f"{KEYS} keys written and read back through nutcracker (redis-py, pipelines, MGET); "
        f"keys per node: {per_node}")
    RESULTS["resp_nutcracker_keys_per_node"] = per_node
    proxy.stop()
    for n in nodes:
        n.stop()


try:
    redis_cluster_steps()
    memcache_steps()
    resp_proxy_steps()
finally:
    stop_all()
with open(RESULT, "w") as f:
    json.dump(RESULTS, f, indent=1)
say("cluster: every step passed")
