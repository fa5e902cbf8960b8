//! SWAPDB against redis-server 7.0: the same lines answer the same and
//! leave the same databases (errors included); a WATCHed key that exists
//! in either database aborts EXEC, one in neither does not; a client
//! blocked on a key the swap brings is served. Then the swap's
//! durability: after kill -9 the databases are as swapped, a paged
//! collection swapped into another database keeps its pages through the
//! page sweep, and its pages are swept once it is deleted there.

mod common;
#[path = "shapes/resp.rs"]
mod shapes;

use std::time::{Duration, Instant};

use nvdepot_resp::Value;

use common::{serve_beside_redis, show_value, temp_dir, Resp, Server};
use shapes::{nvdepot_stat, pages, Conn};

fn both(c: &mut [Resp; 2], args: &[&str]) -> String {
    let theirs = show_value(&c[0].call(args));
    let ours = show_value(&c[1].call(args));
    assert_eq!(theirs, ours, "{args:?}: redis-server, then nvdepot");
    ours
}

#[test]
fn swapdb_answers_and_swaps_as_redis_does() {
    let Some((redis, _dir, server)) = serve_beside_redis(&[]) else {
        return;
    };
    let connect = || [Resp::connect_to(redis.addr), Resp::connect(&server)];
    let mut c = connect();
    let fill: &[&[&str]] = &[
        &["SET", "a", "zero"],
        &["HSET", "h", "f", "0"],
        &["SELECT", "1"],
        &["SET", "a", "one"],
        &["RPUSH", "l", "x", "y"],
        &["SET", "only1", "v", "PX", "100000"],
        &["SELECT", "2"],
        &["SADD", "s", "m"],
        &["SELECT", "0"],
    ];
    for line in fill {
        both(&mut c, line);
    }
    let reads: &[&[&str]] = &[
        &["GET", "a"],
        &["HGETALL", "h"],
        &["LRANGE", "l", "0", "-1"],
        &["EXISTS", "only1"],
        &["SMEMBERS", "s"],
        &["DBSIZE"],
    ];
    let lines: &[&[&str]] = &[
        &["SWAPDB", "0", "1"],
        &["SWAPDB", "1", "2"],
        &["SWAPDB", "2", "2"],
        &["SWAPDB", "0", "16"],
        &["SWAPDB", "-1", "0"],
        &["SWAPDB", "x", "0"],
        &["SWAPDB", "0", "1.5"],
        &["SWAPDB", "0", "4294967296"],
        &["SWAPDB", "0"],
        &["SWAPDB", "0", "1", "2"],
        &["SWAPDB", "15", "0"],
        &["SWAPDB", "0", "15"],
    ];
    for line in lines {
        both(&mut c, line);
        for db in ["0", "1", "2", "15"] {
            both(&mut c, &["SELECT", db]);
            for read in reads {
                both(&mut c, read);
            }
        }
        both(&mut c, &["SELECT", "0"]);
    }

    // WATCH: a key that exists in either database is touched by the
    // swap; one in neither is not.
    for (watched, aborts) in [("a", true), ("only1", true), ("nowhere", false)] {
        let mut watcher = connect();
        both(&mut watcher, &["WATCH", watched]);
        both(&mut c, &["SWAPDB", "0", "1"]);
        both(&mut watcher, &["MULTI"]);
        both(&mut watcher, &["SET", "w", "1"]);
        let exec = both(&mut watcher, &["EXEC"]);
        assert_eq!(exec.contains("OK"), !aborts, "{watched}: {exec}");
    }

    // A client blocked on a key the swap brings is served.
    both(&mut c, &["SELECT", "3"]);
    both(&mut c, &["RPUSH", "q", "job"]);
    both(&mut c, &["SELECT", "0"]);
    let mut blocked = connect();
    for b in blocked.iter_mut() {
        b.send(&["BLPOP", "q", "10"]);
    }
    std::thread::sleep(Duration::from_millis(200));
    both(&mut c, &["SWAPDB", "3", "0"]);
    let started = Instant::now();
    let served: Vec<String> = blocked.iter_mut().map(|b| show_value(&b.read())).collect();
    assert_eq!(served[0], served[1]);
    assert!(served[1].contains("job"), "{}", served[1]);
    assert!(started.elapsed() < Duration::from_secs(5));

    // Deviation: not inside MULTI (Redis runs it there).
    let mut ours = Resp::connect(&server);
    ours.call(&["MULTI"]);
    ours.call(&["SWAPDB", "0", "1"]);
    let exec = show_value(&ours.call(&["EXEC"]));
    assert!(exec.contains("SWAPDB inside MULTI"), "{exec}");
}

/// Waits for a page sweep after `after` sweeps; the pages left.
fn swept(c: &mut Conn, after: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    while nvdepot_stat(c, "page_sweeps") <= after {
        assert!(Instant::now() < deadline, "no page sweep after {after}");
        std::thread::sleep(Duration::from_millis(100));
    }
    pages(c)
}

#[test]
fn swapdb_is_durable_and_keeps_paged_collections_whole() {
    let dir = temp_dir();
    let data = dir.path().join("store");
    let args = [
        "--size",
        "256M",
        "--segment-size",
        "8M",
        "--expiry-sweep-secs",
        "1",
    ];
    let server = Server::start_serve(&data, &args);
    let mut c = Resp::connect(&server);
    let items: Vec<String> = (0..5000).map(|i| format!("item-{i}")).collect();
    let mut push = vec!["RPUSH", "big"];
    push.extend(items.iter().map(String::as_str));
    c.call(&["SELECT", "1"]);
    assert_eq!(c.call(&push), Value::Integer(5000));
    c.call(&["SET", "a", "one"]);
    c.call(&["SELECT", "0"]);
    c.call(&["SET", "a", "zero"]);
    let paged = pages(&mut Conn::connect("nvdepot", server.addr));
    assert!(paged > 1, "the list is paged: {paged} pages");
    assert_eq!(show_value(&c.call(&["SWAPDB", "0", "1"])), "+OK");
    server.kill_9();

    let server = Server::start_serve(&data, &args);
    let mut c = Resp::connect(&server);
    let mut stats = Conn::connect("nvdepot", server.addr);
    assert_eq!(c.call(&["GET", "a"]), Value::Bulk(Some(b"one".to_vec())));
    assert_eq!(c.call(&["LLEN", "big"]), Value::Integer(5000));
    c.call(&["SELECT", "1"]);
    assert_eq!(c.call(&["GET", "a"]), Value::Bulk(Some(b"zero".to_vec())));
    c.call(&["SELECT", "0"]);
    // The sweep after the start keeps every live page.
    assert_eq!(swept(&mut stats, 0), paged);
    let v = c.call(&["LINDEX", "big", "4321"]);
    assert_eq!(v, Value::Bulk(Some(b"item-4321".to_vec())));
    // Swapped back and forth, then deleted where it is now: its pages go.
    assert_eq!(show_value(&c.call(&["SWAPDB", "1", "0"])), "+OK");
    assert_eq!(show_value(&c.call(&["SWAPDB", "0", "2"])), "+OK");
    c.call(&["SELECT", "1"]);
    assert_eq!(c.call(&["LLEN", "big"]), Value::Integer(5000));
    let sweeps = nvdepot_stat(&mut stats, "page_sweeps");
    assert_eq!(c.call(&["DEL", "big"]), Value::Integer(1));
    assert_eq!(swept(&mut stats, sweeps), 0);
    assert_eq!(server.terminate(), 0);
}
