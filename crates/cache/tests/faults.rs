//! The memcache face over the cache layer on the in-memory fault-injecting
//! device: crashes at random points never lose an acknowledged `set` or
//! read-modify-write (sync mode: acknowledged = flushed), and device
//! errors are answered `SERVER_ERROR` on that request while the
//! connection goes on.

use std::sync::Arc;

use nvdepot_cache::memcache::MemcacheStorage;
use nvdepot_cache::CacheStore;
use nvdepot_engine::Store;
use nvdepot_io::{Device, MemDevice};
use nvdepot_memcache::{Connection, Limits, ServerStats};

const MIB: u64 = 1 << 20;

fn open(dev: Arc<MemDevice>, create: bool) -> Connection<MemcacheStorage> {
    let mut opts = CacheStore::default_options().segment_bytes(MIB);
    opts.sync = true;
    opts.background_gc = false;
    if create {
        opts = opts.create_bytes(0);
    }
    let store = Store::open_devices(vec![dev as Arc<dyn Device>], &opts).expect("open");
    let storage = MemcacheStorage::new(CacheStore::over(store, 1 << 20));
    Connection::new(
        Arc::new(storage),
        Arc::new(ServerStats::default()),
        Limits::default(),
    )
}

/// The Redis binding (two databases) over a new 32 MiB fault-injecting
/// device named `name`, with no DRAM tier: every read goes to the device.
fn resp_store(name: &'static str) -> (Arc<MemDevice>, nvdepot_cache::resp::RespStore) {
    let dev = Arc::new(MemDevice::named(name, 32 * MIB, 512));
    let mut opts = CacheStore::default_options().segment_bytes(MIB);
    opts.sync = true;
    opts.background_gc = false;
    let store = Store::open_devices(vec![dev.clone() as Arc<dyn Device>], &opts.create_bytes(0))
        .expect("open");
    let resp = nvdepot_cache::resp::RespStore::new(CacheStore::over(store, 0), 2).unwrap();
    (dev, resp)
}

/// One request, its reply (the storage never waits off a runtime).
fn call(conn: &mut Connection<MemcacheStorage>, req: &str) -> String {
    let mut out = Vec::new();
    let fed = conn.feed_ready(req.as_bytes(), &mut out);
    assert_eq!(fed.consumed, req.len(), "{req:?}");
    assert!(!fed.more, "small replies never pause");
    String::from_utf8(out).unwrap()
}

fn get(conn: &mut Connection<MemcacheStorage>, key: &str) -> Option<String> {
    let reply = call(conn, &format!("get {key}\r\n"));
    if reply == "END\r\n" {
        return None;
    }
    let mut lines = reply.split("\r\n");
    assert!(lines.next().unwrap().starts_with("VALUE "), "{reply}");
    Some(lines.next().unwrap().to_owned())
}

#[test]
fn acknowledged_writes_survive_any_crash() {
    let rounds: u64 = std::env::var("NVDEPOT_CACHE_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    for seed in 0..rounds {
        let dev = Arc::new(MemDevice::named("cache", 16 * MIB, 512));
        let mut conn = open(Arc::clone(&dev), true);
        // What the server acknowledged, per key.
        let mut acked: Vec<(String, String)> = Vec::new();
        let writes = 5 + seed % 23;
        for i in 0..writes {
            let key = format!("k{}", i % 7);
            let reply;
            let value = if i % 3 == 2 && acked.iter().any(|(k, _)| *k == key) {
                let tail = format!("+{i}");
                let req = format!("append {key} 0 0 {}\r\n{tail}\r\n", tail.len());
                reply = call(&mut conn, &req);
                let old = acked
                    .iter()
                    .rev()
                    .find(|(k, _)| *k == key)
                    .unwrap()
                    .1
                    .clone();
                format!("{old}+{i}")
            } else {
                let v = format!("v{i}-{seed}");
                reply = call(&mut conn, &format!("set {key} 0 0 {}\r\n{v}\r\n", v.len()));
                v
            };
            assert_eq!(reply, "STORED\r\n");
            acked.push((key, value));
        }
        // A write whose flush fails is not acknowledged: the crash may keep
        // it whole, tear it or drop it.
        dev.fail_flush_after(0);
        let lost = format!("unacked-{seed}");
        let req = format!("set k{} 0 0 {}\r\n{lost}\r\n", seed % 7, lost.len());
        let reply = call(&mut conn, &req);
        assert!(reply.starts_with("SERVER_ERROR "), "{reply}");
        let before = dev.unflushed_writes();
        drop(conn);
        let (after, _) = dev.crash(seed);
        let mut conn = open(Arc::new(after), false);
        for i in 0..7 {
            let key = format!("k{i}");
            let want = acked
                .iter()
                .rev()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.clone());
            let got = get(&mut conn, &key);
            if i == seed % 7 && got.as_deref() == Some(lost.as_str()) {
                continue;
            }
            assert_eq!(got, want, "seed {seed} key {key} ({before} unflushed)");
        }
    }
}

#[test]
fn device_errors_answer_server_error_and_the_connection_goes_on() {
    let dev = Arc::new(MemDevice::named("cache", 16 * MIB, 512));
    let mut conn = open(Arc::clone(&dev), true);
    assert_eq!(call(&mut conn, "set a 0 0 1\r\n1\r\n"), "STORED\r\n");
    // Reads fail everywhere: an incr of a key the DRAM tier holds at its
    // current version decides on that copy and reads nothing ...
    dev.fail_reads_at(0..16 * MIB);
    assert_eq!(call(&mut conn, "set b 0 0 1\r\n2\r\n"), "STORED\r\n");
    assert_eq!(call(&mut conn, "incr b 1\r\n"), "3\r\n");
    // ... a DRAM-tier miss (a fresh start: the tier is empty) reads the
    // device, and its failure is a SERVER_ERROR.
    dev.clear_faults();
    drop(conn);
    let mut conn = open(Arc::clone(&dev), false);
    dev.fail_reads_at(0..16 * MIB);
    let reply = call(&mut conn, "incr a 1\r\n");
    assert!(reply.starts_with("SERVER_ERROR "), "{reply}");
    dev.clear_faults();
    assert_eq!(call(&mut conn, "incr a 1\r\n"), "2\r\n");
    assert_eq!(get(&mut conn, "b").as_deref(), Some("3"));
    // A failed write: SERVER_ERROR, and writes stay refused (the store
    // does not pretend the lost write happened) while reads go on.
    dev.fail_writes_after(0);
    let reply = call(&mut conn, "set c 0 0 1\r\n3\r\n");
    assert!(reply.starts_with("SERVER_ERROR "), "{reply}");
    dev.clear_faults();
    let reply = call(&mut conn, "set d 0 0 1\r\n4\r\n");
    assert!(reply.starts_with("SERVER_ERROR "), "{reply}");
    assert_eq!(get(&mut conn, "a").as_deref(), Some("2"));
    assert_eq!(call(&mut conn, "version\r\n"), "VERSION 1.6.18-nvdepot\r\n");
}

/// The Redis-protocol binding over the same device: a read error or
/// silent corruption fails that GET (naming the device), a failed write
/// fails that SET and every later write, reads go on.
#[test]
fn resp_binding_answers_device_faults_per_request() {
    let (dev, resp) = resp_store("respdev");
    let now = 1_000;
    use nvdepot_io::uring::run_ready as run;
    for i in 0..50u32 {
        run(resp.set(0, format!("k{i}").as_bytes(), &[i as u8; 600], 0)).unwrap();
    }
    dev.fail_reads_at(0..32 * MIB);
    let err = run(resp.get(0, b"k3", now)).unwrap_err();
    assert!(err.to_string().contains("respdev"), "{err}");
    dev.clear_faults();
    dev.corrupt_reads_at(0..32 * MIB);
    let err = run(resp.get(0, b"k4", now)).unwrap_err();
    assert!(err.to_string().contains("corrupt"), "{err}");
    dev.clear_faults();
    let v = run(resp.get(0, b"k5", now)).unwrap().expect("k5");
    assert_eq!(v.data(), &[5u8; 600][..]);
    dev.fail_writes_after(0);
    assert!(run(resp.set(0, b"new", b"x", 0)).is_err());
    dev.clear_faults();
    assert!(
        run(resp.set(0, b"later", b"y", 0)).is_err(),
        "writes stay refused"
    );
    let v = run(resp.get(0, b"k6", now)).unwrap().expect("k6");
    assert_eq!(v.data(), &[6u8; 600][..]);
}

/// KEYS, SCAN and the expiry sweep of a database that holds nothing read
/// nothing (the engine would read the whole log to find a namespace's
/// records): with every device read failing, the empty database answers
/// at once and the full one reports the error.
#[test]
fn an_empty_database_is_scanned_without_reading_the_device() {
    let (dev, resp) = resp_store("scandev");
    use nvdepot_io::uring::run_ready as run;
    for i in 0..50u32 {
        run(resp.set(0, format!("k{i}").as_bytes(), &[i as u8; 600], 0)).unwrap();
    }
    assert_eq!(resp.keys(0, 1_000).unwrap().len(), 50);
    dev.fail_reads_at(0..32 * MIB);
    assert_eq!(resp.keys(1, 1_000).unwrap(), Vec::<Vec<u8>>::new());
    assert_eq!(resp.expiry_scan(1, 1_000).unwrap(), (Vec::new(), 0));
    let err = resp.keys(0, 1_000).unwrap_err();
    assert!(err.to_string().contains("scandev"), "{err}");
}
