//! `nvdepot serve --cluster-enabled`: Redis Cluster routing (MOVED,
//! CROSSSLOT, hash tags), the CLUSTER commands cluster clients read, the
//! topology kept across a restart, and a slot migration under a write
//! load that loses no acknowledged write.

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{temp_dir, Resp, Server};
use nvdepot_resp::Value;

const ARGS: &[&str] = &["--size", "64M", "--segment-size", "4M", "--cluster-enabled"];

fn text(v: &Value) -> String {
    match v {
        Value::Simple(s) | Value::Error(s) | Value::Bulk(Some(s)) => {
            String::from_utf8_lossy(s).into_owned()
        }
        other => format!("{other:?}"),
    }
}

fn myid(s: &Server) -> String {
    text(&Resp::connect(s).call(&["CLUSTERX", "MYID"]))
}

/// Sends every node the topology `nodes` (id, address, slots) at `version`.
fn set_nodes(servers: &[&Server], nodes: &[(String, SocketAddr, &str)], version: i64) {
    let text_nodes: String = nodes
        .iter()
        .map(|(id, a, slots)| format!("{id} {} {} master - {slots}\n", a.ip(), a.port()))
        .collect();
    for s in servers {
        let v = Resp::connect(s).call(&["CLUSTERX", "SETNODES", &text_nodes, &version.to_string()]);
        assert_eq!(text(&v), "OK");
    }
}

/// A cluster client that follows MOVED, ASK and TRYAGAIN, as redis-py's
/// RedisCluster does.
struct Follower {
    conns: HashMap<SocketAddr, Resp>,
    start: SocketAddr,
}

impl Follower {
    fn conn(&mut self, a: SocketAddr) -> &mut Resp {
        self.conns.entry(a).or_insert_with(|| Resp::connect_to(a))
    }

    fn call(&mut self, args: &[&str]) -> Value {
        let mut at = self.start;
        let mut asking = false;
        for _ in 0..50 {
            let c = self.conn(at);
            if asking {
                assert_eq!(text(&c.call(&["ASKING"])), "OK");
            }
            let v = c.call(args);
            let Value::Error(e) = &v else { return v };
            let e = String::from_utf8_lossy(e).into_owned();
            let f: Vec<&str> = e.split(' ').collect();
            match f[0] {
                "MOVED" => {
                    at = f[2].parse().unwrap();
                    asking = false;
                }
                "ASK" => {
                    at = f[2].parse().unwrap();
                    asking = true;
                }
                "TRYAGAIN" => std::thread::sleep(Duration::from_millis(5)),
                _ => return v,
            }
        }
        panic!("{args:?}: too many redirections");
    }
}

#[test]
fn routing_redirections_and_cluster_commands() {
    let (da, db) = (temp_dir(), temp_dir());
    let a = Server::start_serve(&da.path().join("a"), ARGS);
    let b = Server::start_serve(&db.path().join("b"), ARGS);
    let (ida, idb) = (myid(&a), myid(&b));
    assert_eq!(ida.len(), 40);
    assert_ne!(ida, idb);
    let nodes = [
        (ida.clone(), a.addr, "0-8191"),
        (idb.clone(), b.addr, "8192-16383"),
    ];
    set_nodes(&[&a, &b], &nodes, 1);
    let mut ca = Resp::connect(&a);
    let mut cb = Resp::connect(&b);
    assert_eq!(
        ca.call(&["CLUSTER", "KEYSLOT", "foo"]),
        Value::Integer(12182)
    );
    // foo (12182) is b's, bar (5061) is a's.
    assert_eq!(
        text(&ca.call(&["SET", "foo", "1"])),
        format!("MOVED 12182 {}", b.addr)
    );
    assert_eq!(text(&cb.call(&["SET", "foo", "1"])), "OK");
    assert_eq!(text(&ca.call(&["SET", "bar", "2"])), "OK");
    assert_eq!(
        text(&ca.call(&["MSET", "bar", "1", "foo", "2"])),
        "CROSSSLOT Keys in request don't hash to the same slot"
    );
    // Hash tags put keys in one slot.
    assert_eq!(
        text(&ca.call(&["MSET", "{bar}x", "1", "{bar}y", "2"])),
        "OK"
    );
    assert_eq!(
        ca.call(&["MGET", "{bar}x", "{bar}y"]),
        Value::Array(Some(vec![
            Value::Bulk(Some(b"1".to_vec())),
            Value::Bulk(Some(b"2".to_vec()))
        ]))
    );
    assert_eq!(
        ca.call(&["CLUSTER", "COUNTKEYSINSLOT", "5061"]),
        Value::Integer(3)
    );
    assert_eq!(
        ca.call(&["CLUSTER", "GETKEYSINSLOT", "12182", "10"]),
        Value::Array(Some(vec![]))
    );
    assert_eq!(
        text(&ca.call(&["SELECT", "1"])),
        "ERR SELECT is not allowed in cluster mode"
    );
    // A transaction naming another node's key is refused when queued.
    assert_eq!(text(&ca.call(&["MULTI"])), "OK");
    assert!(text(&ca.call(&["SET", "foo", "x"])).starts_with("MOVED"));
    assert!(text(&ca.call(&["EXEC"])).starts_with("EXECABORT"));
    // What cluster clients read.
    let Value::Array(Some(slots)) = ca.call(&["CLUSTER", "SLOTS"]) else {
        panic!("CLUSTER SLOTS")
    };
    assert_eq!(slots.len(), 2);
    let nodes_text = text(&ca.call(&["CLUSTER", "NODES"]));
    assert!(
        nodes_text.contains(&format!("{ida} {}@", a.addr)),
        "{nodes_text}"
    );
    assert!(nodes_text.contains("myself,master"));
    assert!(text(&cb.call(&["CLUSTER", "INFO"])).contains("cluster_state:ok"));
    assert!(text(&cb.call(&["INFO", "cluster"])).contains("cluster_enabled:1"));
    let Value::Array(Some(cmds)) = ca.call(&["COMMAND"]) else {
        panic!("COMMAND")
    };
    assert!(cmds.len() > 50);
    // An older topology is refused.
    let v = ca.call(&["CLUSTERX", "SETNODES", "", "1"]);
    assert!(text(&v).contains("Invalid cluster version"), "{v:?}");

    // The topology and data survive a restart.
    drop((ca, cb));
    assert_eq!(b.terminate(), 0);
    let b = Server::start_serve(&db.path().join("b"), ARGS);
    let mut cb = Resp::connect(&b);
    assert_eq!(text(&cb.call(&["CLUSTERX", "MYID"])), idb);
    assert_eq!(cb.call(&["CLUSTERX", "VERSION"]), Value::Integer(1));
    assert_eq!(text(&cb.call(&["GET", "foo"])), "1");
    assert!(text(&cb.call(&["GET", "bar"])).starts_with("MOVED 5061"));
}

#[test]
fn migrating_slots_under_writes_loses_nothing() {
    let (da, db) = (temp_dir(), temp_dir());
    let a = Server::start_serve(&da.path().join("a"), ARGS);
    let b = Server::start_serve(&db.path().join("b"), ARGS);
    let (ida, idb) = (myid(&a), myid(&b));
    set_nodes(
        &[&a, &b],
        &[(ida.clone(), a.addr, "0-16383"), (idb.clone(), b.addr, "")],
        1,
    );
    const KEYS: usize = 2000;
    let mut c = Follower {
        conns: HashMap::new(),
        start: a.addr,
    };
    let acked: Arc<Mutex<Vec<u64>>> = Arc::new(Mutex::new(vec![0; KEYS]));
    for k in 0..KEYS {
        assert_eq!(text(&c.call(&["SET", &format!("key{k}"), "0"])), "OK");
    }
    // Hashes move too (as their records, with their expiry).
    const HASHES: usize = 200;
    for k in 0..HASHES {
        let (h, n) = (format!("hash{k}"), k.to_string());
        let v = c.call(&["HSET", &h, "a", &n, "b", "", "", "empty field"]);
        assert_eq!(v, Value::Integer(3), "HSET {h}");
        if k % 2 == 0 {
            assert_eq!(c.call(&["EXPIRE", &h, "1000"]), Value::Integer(1));
        }
    }
    // Writers: each SET acknowledged is recorded.
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (stop, acked, start) = (Arc::clone(&stop), Arc::clone(&acked), a.addr);
            std::thread::spawn(move || {
                let mut c = Follower {
                    conns: HashMap::new(),
                    start,
                };
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    // Writer w writes its own keys, so values only grow.
                    let k = (n as usize * 7) % (KEYS / 2) * 2 + w;
                    let v = c.call(&["SET", &format!("key{k}"), &n.to_string()]);
                    assert_eq!(text(&v), "OK", "SET key{k}");
                    acked.lock().unwrap()[k] = n;
                }
                n
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut ca = Resp::connect(&a);
    let v = ca.call(&["CLUSTERX", "MIGRATE", "8192-16383", &idb]);
    assert_eq!(text(&v), "OK");
    let started = Instant::now();
    let info = loop {
        let info = text(&ca.call(&["CLUSTER", "INFO"]));
        if info.contains("migrating_state:success") {
            break info;
        }
        assert!(!info.contains("migrating_state:fail"), "{info}");
        assert!(started.elapsed() < Duration::from_secs(60), "{info}");
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let writes: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    assert!(writes > 100, "only {writes} writes ran");
    // The administrator's new topology.
    set_nodes(
        &[&a, &b],
        &[
            (ida.clone(), a.addr, "0-8191"),
            (idb.clone(), b.addr, "8192-16383"),
        ],
        2,
    );
    // Every acknowledged write is served, from its slot's node.
    let acked = acked.lock().unwrap().clone();
    let mut on_b = 0;
    for (k, want) in acked.iter().enumerate() {
        let key = format!("key{k}");
        let got = text(&c.call(&["GET", &key]));
        assert_eq!(got, want.to_string(), "{key}");
        if nvdepot_resp::slot::key_slot(key.as_bytes()) >= 8192 {
            on_b += 1;
        }
    }
    for k in 0..HASHES {
        let h = format!("hash{k}");
        let all = c.call(&["HGETALL", &h]);
        let want = ["a", &k.to_string(), "b", "", "", "empty field"];
        let Value::Array(Some(got)) = all else {
            panic!("HGETALL {h}: {all:?}")
        };
        let got: Vec<String> = got.iter().map(text).collect();
        assert_eq!(got, want, "{h}");
        let Value::Integer(ttl) = c.call(&["TTL", &h]) else {
            panic!()
        };
        assert_eq!(ttl > 0, k % 2 == 0, "TTL of {h}: {ttl}");
        if nvdepot_resp::slot::key_slot(h.as_bytes()) >= 8192 {
            on_b += 1;
        }
    }
    let mut cb = Resp::connect(&b);
    let Value::Integer(db_b) = cb.call(&["DBSIZE"]) else {
        panic!()
    };
    let Value::Integer(db_a) = ca.call(&["DBSIZE"]) else {
        panic!()
    };
    assert_eq!(db_b as usize, on_b, "keys on the new node");
    assert_eq!(
        db_a as usize,
        KEYS + HASHES - on_b,
        "keys left on the old node"
    );
    assert!(
        info.contains(&format!("migrated_keys:{on_b}\r\n")),
        "{info}"
    );
}
