//! The sweep of dead collections' pages (`crates/redis/src/expiry.rs`):
//! it runs once after a start, then only when a write replaced or deleted
//! a paged collection, and then drops every dead page and no live one.
//!
//! Paged lists, hashes, sets and sorted sets are grown and written for
//! several sweep intervals without any of them dying: INFO nvdepot's
//! `page_sweeps` must not move (before, every interval read every page).
//! Then each dies its own way (DEL, SET over it, RENAME away, emptied by
//! a pop, expired): every page but the surviving list's goes, and the
//! surviving list reads back whole.

mod common;
#[path = "shapes/resp.rs"]
mod shapes;

use std::time::{Duration, Instant};

use nvdepot_resp::Value;

use common::{temp_dir, Server};
use shapes::{nvdepot_stat, pages, pipeline, Cmd, Conn};

fn cmd(parts: &[&[u8]]) -> Cmd {
    parts.iter().map(|p| p.to_vec()).collect()
}

/// Runs `cmds`, each answered without an error.
fn run(conn: &mut Conn, cmds: &[Cmd]) -> Vec<Value> {
    let replies = pipeline(conn, cmds);
    for (c, r) in cmds.iter().zip(&replies) {
        assert!(
            !matches!(r, Value::Error(_)),
            "{:?}: {r:?}",
            String::from_utf8_lossy(&c[0])
        );
    }
    replies
}

/// A command of `verb key` and `n` generated arguments of ~24 bytes
/// (pairs when `pairs`), enough past 16 KiB to page the collection.
fn grow(verb: &str, key: &str, n: usize, pairs: bool) -> Cmd {
    let mut c = cmd(&[verb.as_bytes(), key.as_bytes()]);
    for i in 0..n {
        if pairs {
            let first = if verb == "ZADD" {
                i.to_string()
            } else {
                format!("field-{i:018}")
            };
            c.push(first.into_bytes());
        }
        c.push(format!("element-of-{key}-{i:012}").into_bytes());
    }
    c
}

fn wait_for(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {secs} s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn pages_are_swept_after_a_collection_dies_and_only_then() {
    let dir = temp_dir();
    let server = Server::start_serve(
        &dir.path().join("store"),
        &[
            "--size",
            "512M",
            "--segment-size",
            "16M",
            "--expiry-sweep-secs",
            "1",
        ],
    );
    let mut c = Conn::connect("nvdepot", server.addr);

    // The survivor alone, and the first sweep after the start.
    run(&mut c, &[grow("RPUSH", "survivor", 2000, false)]);
    let survivor = run(&mut c, &[cmd(&[b"LRANGE", b"survivor", b"0", b"-1"])]);
    let live = pages(&mut c);
    assert!(live > 1, "the survivor is paged ({live} pages)");
    wait_for("the first sweep", 10, || {
        nvdepot_stat(&mut c, "page_sweeps") >= 1
    });

    // Collections grown, written, popped, expired and persisted: no
    // page dies, no sweep runs.
    run(
        &mut c,
        &[
            grow("RPUSH", "list", 2000, false),
            grow("HSET", "hash", 1000, true),
            grow("SADD", "set", 2000, false),
            grow("ZADD", "zset", 2000, true),
            grow("ZADD", "popped", 2000, true),
        ],
    );
    let sweeps = nvdepot_stat(&mut c, "page_sweeps");
    for round in 0..25 {
        let n = round.to_string();
        let n = n.as_bytes();
        run(
            &mut c,
            &[
                cmd(&[b"LPUSH", b"list", n]),
                cmd(&[b"RPOP", b"list"]),
                cmd(&[b"HSET", b"hash", b"f", n]),
                cmd(&[b"HDEL", b"hash", b"field-000000000000000007"]),
                cmd(&[b"SADD", b"set", n]),
                cmd(&[b"ZADD", b"zset", n, b"m"]),
                cmd(&[b"EXPIRE", b"set", b"1000"]),
                cmd(&[b"PERSIST", b"set"]),
                cmd(&[b"SET", b"a-string", n]),
            ],
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(pages(&mut c) > live);
    assert_eq!(
        nvdepot_stat(&mut c, "page_sweeps"),
        sweeps,
        "a sweep ran with no collection dead"
    );

    // Each dies its own way.
    run(
        &mut c,
        &[
            cmd(&[b"DEL", b"list"]),
            cmd(&[b"SET", b"hash", b"now a string"]),
            cmd(&[b"RENAME", b"set", b"set-renamed"]),
            cmd(&[b"ZPOPMIN", b"popped", b"5000"]),
            cmd(&[b"PEXPIRE", b"zset", b"1"]),
        ],
    );
    wait_for("every dead page swept", 30, || pages(&mut c) == live);
    assert!(nvdepot_stat(&mut c, "page_sweeps") > sweeps);
    assert_eq!(
        run(&mut c, &[cmd(&[b"LRANGE", b"survivor", b"0", b"-1"])]),
        survivor,
        "the survivor's pages were kept"
    );
    let log = server.stderr.lock().unwrap().clone();
    assert!(!log.contains("panicked"), "a panic:\n{log}");
}
