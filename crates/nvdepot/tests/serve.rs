//! `nvdepot serve`, the Redis-protocol face, as clients meet it over
//! 127.0.0.1: replies in RESP2 and RESP3, errors worded as Redis words
//! them, expiry, databases, a protocol error closing the connection, and
//! `kill -9` under a SET load: every acknowledged write is served after
//! the restart.

mod common;

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{temp_dir, Resp, Server};
use nvdepot_resp::Value;

const ARGS: &[&str] = &["--size", "64M", "--segment-size", "4M"];

fn bulk(s: &str) -> Value {
    Value::Bulk(Some(s.as_bytes().to_vec()))
}

fn simple(s: &str) -> Value {
    Value::Simple(s.as_bytes().to_vec())
}

fn error(s: &str) -> Value {
    Value::Error(s.as_bytes().to_vec())
}

#[test]
fn strings_keys_expiry_and_errors_as_redis() {
    let dir = temp_dir();
    let server = Server::start_serve(&dir.path().join("store"), ARGS);
    let mut c = Resp::connect(&server);
    assert_eq!(c.call(&["PING"]), simple("PONG"));
    assert_eq!(c.call(&["ping", "hi"]), bulk("hi"));
    assert_eq!(c.call(&["SET", "k", "v"]), simple("OK"));
    assert_eq!(c.call(&["GET", "k"]), bulk("v"));
    assert_eq!(c.call(&["GET", "nope"]), Value::Bulk(None));
    assert_eq!(c.call(&["SET", "k", "w", "NX"]), Value::Bulk(None));
    assert_eq!(c.call(&["SET", "k", "w", "XX", "GET"]), bulk("v"));
    assert_eq!(c.call(&["APPEND", "k", "xy"]), Value::Integer(3));
    assert_eq!(c.call(&["STRLEN", "k"]), Value::Integer(3));
    assert_eq!(c.call(&["INCR", "n"]), Value::Integer(1));
    assert_eq!(c.call(&["INCRBY", "n", "41"]), Value::Integer(42));
    assert_eq!(
        c.call(&["INCR", "k"]),
        error("ERR value is not an integer or out of range")
    );
    assert_eq!(c.call(&["SET", "max", "9223372036854775807"]), simple("OK"));
    assert_eq!(
        c.call(&["INCR", "max"]),
        error("ERR increment or decrement would overflow")
    );
    // Expiry: TTL, PERSIST, a time in the past deletes at once.
    assert_eq!(c.call(&["TTL", "k"]), Value::Integer(-1));
    assert_eq!(c.call(&["TTL", "nope"]), Value::Integer(-2));
    assert_eq!(c.call(&["EXPIRE", "k", "100"]), Value::Integer(1));
    assert!(matches!(c.call(&["TTL", "k"]), Value::Integer(99 | 100)));
    assert_eq!(c.call(&["EXPIRE", "k", "50", "GT"]), Value::Integer(0));
    assert_eq!(c.call(&["PERSIST", "k"]), Value::Integer(1));
    assert_eq!(c.call(&["SET", "gone", "x", "PX", "1"]), simple("OK"));
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(c.call(&["GET", "gone"]), Value::Bulk(None));
    assert_eq!(c.call(&["EXISTS", "gone", "k", "k"]), Value::Integer(2));
    assert_eq!(c.call(&["EXPIRE", "n", "-1"]), Value::Integer(1));
    assert_eq!(c.call(&["GET", "n"]), Value::Bulk(None));
    assert_eq!(
        c.call(&["SET", "k", "v", "EX", "0"]),
        error("ERR invalid expire time in 'set' command")
    );
    assert_eq!(
        c.call(&["SET", "k", "v", "NX", "XX"]),
        error("ERR syntax error")
    );
    // Keys, databases.
    assert_eq!(c.call(&["MSET", "a", "1", "b", "2"]), simple("OK"));
    assert_eq!(
        c.call(&["MGET", "a", "x", "b"]),
        Value::Array(Some(vec![bulk("1"), Value::Bulk(None), bulk("2")]))
    );
    assert_eq!(c.call(&["DEL", "a", "b", "x"]), Value::Integer(2));
    assert_eq!(c.call(&["TYPE", "k"]), simple("string"));
    assert_eq!(c.call(&["TYPE", "a"]), simple("none"));
    assert_eq!(
        c.call(&["KEYS", "*a*"]),
        Value::Array(Some(vec![bulk("max")]))
    );
    assert_eq!(c.call(&["SELECT", "2"]), simple("OK"));
    assert_eq!(c.call(&["GET", "k"]), Value::Bulk(None));
    assert_eq!(c.call(&["DBSIZE"]), Value::Integer(0));
    assert_eq!(
        c.call(&["SELECT", "16"]),
        error("ERR DB index is out of range")
    );
    assert_eq!(c.call(&["SELECT", "0"]), simple("OK"));
    assert_eq!(c.call(&["DBSIZE"]), Value::Integer(2));
    // Errors as Redis words them; the connection stays usable.
    assert_eq!(
        c.call(&["GET"]),
        error("ERR wrong number of arguments for 'get' command")
    );
    assert_eq!(
        c.call(&["FOO", "bar"]),
        error("ERR unknown command 'FOO', with args beginning with: 'bar' ")
    );
    assert_eq!(c.call(&["GET", "k"]), bulk("wxy"));
    // Inline commands, as redis-cli and telnet send them.
    c.stream
        .write_all(b"SET inline \"a b\"\r\nGET inline\r\n")
        .unwrap();
    assert_eq!(c.read(), simple("OK"));
    assert_eq!(c.read(), bulk("a b"));
    // RESP3 after HELLO 3: nulls are `_`, maps are maps.
    assert!(matches!(c.call(&["HELLO", "3"]), Value::Map(_)));
    assert_eq!(c.call(&["GET", "nope"]), Value::Null);
    // A protocol error is answered, then the connection is closed.
    c.stream.write_all(b"*1\r\n+GET\r\n").unwrap();
    assert_eq!(c.read(), error("ERR Protocol error: expected '$', got '+'"));
    let mut rest = Vec::new();
    let _ = c.stream.read_to_end(&mut rest);
    assert!(rest.is_empty());
    assert_eq!(server.terminate(), 0);
}

/// EXISTS, TYPE and the TTL family read without marking the access, as
/// Redis's (`LOOKUP_NOTOUCH`): OBJECT IDLETIME goes on counting; GET and
/// TOUCH reset it. On a value in the DRAM tier they also read without a
/// copy of it.
#[test]
fn exists_type_and_ttl_leave_the_idle_time_alone() {
    let dir = temp_dir();
    let server = Server::start_serve(&dir.path().join("store"), ARGS);
    let mut c = Resp::connect(&server);
    assert_eq!(c.call(&["SET", "k", "v", "EX", "100"]), simple("OK"));
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(c.call(&["EXISTS", "k", "k", "nope"]), Value::Integer(2));
    assert_eq!(c.call(&["TYPE", "k"]), simple("string"));
    assert!(matches!(c.call(&["TTL", "k"]), Value::Integer(97..=100)));
    assert!(matches!(
        c.call(&["PTTL", "k"]),
        Value::Integer(97_000..=100_000)
    ));
    assert!(matches!(
        c.call(&["OBJECT", "IDLETIME", "k"]),
        Value::Integer(2..)
    ));
    assert_eq!(c.call(&["TOUCH", "k"]), Value::Integer(1));
    assert_eq!(c.call(&["OBJECT", "IDLETIME", "k"]), Value::Integer(0));
    // A key that expired is gone for these as for GET.
    assert_eq!(c.call(&["SET", "e", "v", "PX", "1"]), simple("OK"));
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(c.call(&["EXISTS", "e"]), Value::Integer(0));
    assert_eq!(c.call(&["TYPE", "e"]), simple("none"));
    assert_eq!(c.call(&["TTL", "e"]), Value::Integer(-2));
}

#[test]
fn requirepass_gates_every_command_but_auth() {
    let dir = temp_dir();
    let args = [ARGS, &["--requirepass", "s3cret"]].concat();
    let server = Server::start_serve(&dir.path().join("store"), &args);
    let mut c = Resp::connect(&server);
    assert_eq!(
        c.call(&["GET", "k"]),
        error("NOAUTH Authentication required.")
    );
    assert_eq!(
        c.call(&["AUTH", "wrong"]),
        error("WRONGPASS invalid username-password pair or user is disabled.")
    );
    assert_eq!(c.call(&["AUTH", "s3cret"]), simple("OK"));
    assert_eq!(c.call(&["GET", "k"]), Value::Bulk(None));
    let mut c = Resp::connect(&server);
    assert!(matches!(
        c.call(&["HELLO", "3", "AUTH", "default", "s3cret"]),
        Value::Map(_)
    ));
    assert_eq!(c.call(&["PING"]), simple("PONG"));
    assert_eq!(server.terminate(), 0);
}

#[test]
fn kill_9_under_a_set_load_loses_no_acknowledged_write() {
    let dir = temp_dir();
    let data = dir.path().join("store");
    let server = Server::start_serve(&data, ARGS);
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let mut c = Resp::connect(&server);
            let (stop, acked) = (stop.clone(), acked.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("w{w}-{i}");
                    c.send(&["SET", &key, &key]);
                    let mut chunk = [0u8; 64];
                    match c.stream.read(&mut chunk) {
                        Ok(5) if &chunk[..5] == b"+OK\r\n" => acked.lock().unwrap().push(key),
                        _ => break, // killed mid-request
                    }
                    i += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(400));
    server.kill_9();
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let server = Server::start_serve(&data, ARGS);
    let mut c = Resp::connect(&server);
    let acked = acked.lock().unwrap();
    assert!(!acked.is_empty(), "no SET was acknowledged");
    for key in acked.iter() {
        assert_eq!(c.call(&["GET", key]), bulk(key), "{key} lost");
    }
    assert_eq!(server.terminate(), 0);
}

#[test]
fn transactions_queue_abort_watch_and_isolate() {
    let dir = temp_dir();
    let server = Server::start_serve(&dir.path().join("store"), ARGS);
    let mut c = Resp::connect(&server);
    assert_eq!(c.call(&["MULTI"]), simple("OK"));
    assert_eq!(c.call(&["SET", "a", "1"]), simple("QUEUED"));
    assert_eq!(c.call(&["INCR", "a"]), simple("QUEUED"));
    assert_eq!(c.call(&["GET", "a"]), simple("QUEUED"));
    assert_eq!(
        c.call(&["EXEC"]),
        Value::Array(Some(vec![simple("OK"), Value::Integer(2), bulk("2")]))
    );
    assert_eq!(c.call(&["EXEC"]), error("ERR EXEC without MULTI"));
    // A refused command aborts the whole transaction.
    assert_eq!(c.call(&["MULTI"]), simple("OK"));
    assert_eq!(
        c.call(&["MULTI"]),
        error("ERR MULTI calls can not be nested")
    );
    assert_eq!(c.call(&["INCR", "a"]), simple("QUEUED"));
    assert_eq!(
        c.call(&["GET"]),
        error("ERR wrong number of arguments for 'get' command")
    );
    assert_eq!(
        c.call(&["EXEC"]),
        error("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(c.call(&["GET", "a"]), bulk("2"));
    assert_eq!(c.call(&["MULTI"]), simple("OK"));
    assert_eq!(c.call(&["DISCARD"]), simple("OK"));
    // WATCH: a write by another client makes EXEC run nothing.
    let mut other = Resp::connect(&server);
    assert_eq!(c.call(&["WATCH", "a"]), simple("OK"));
    assert_eq!(other.call(&["SET", "a", "other"]), simple("OK"));
    assert_eq!(c.call(&["MULTI"]), simple("OK"));
    assert_eq!(c.call(&["SET", "a", "mine"]), simple("QUEUED"));
    assert_eq!(c.call(&["EXEC"]), Value::Array(None));
    assert_eq!(c.call(&["GET", "a"]), bulk("other"));
    // A change undone before EXEC still aborts it, as in Redis: the key
    // was absent when watched and is absent again.
    assert_eq!(c.call(&["WATCH", "gone"]), simple("OK"));
    assert_eq!(other.call(&["SET", "gone", "x"]), simple("OK"));
    assert_eq!(other.call(&["DEL", "gone"]), Value::Integer(1));
    assert_eq!(c.call(&["MULTI"]), simple("OK"));
    assert_eq!(c.call(&["SET", "gone", "mine"]), simple("QUEUED"));
    assert_eq!(c.call(&["EXEC"]), Value::Array(None));
    assert_eq!(c.call(&["EXISTS", "gone"]), Value::Integer(0));
    // UNWATCH inside MULTI is queued (and answers OK from EXEC).
    assert_eq!(c.call(&["MULTI"]), simple("OK"));
    assert_eq!(c.call(&["UNWATCH"]), simple("QUEUED"));
    assert_eq!(c.call(&["EXEC"]), Value::Array(Some(vec![simple("OK")])));
    // Isolation: another client's INCRs never interleave with a
    // transaction's, so its replies are consecutive.
    let stop = Arc::new(AtomicBool::new(false));
    let hammer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                assert!(matches!(other.call(&["INCR", "ctr"]), Value::Integer(_)));
            }
        })
    };
    for _ in 0..30 {
        assert_eq!(c.call(&["MULTI"]), simple("OK"));
        for _ in 0..5 {
            assert_eq!(c.call(&["INCR", "ctr"]), simple("QUEUED"));
        }
        let Value::Array(Some(replies)) = c.call(&["EXEC"]) else {
            panic!("EXEC");
        };
        let n: Vec<i64> = replies
            .iter()
            .map(|v| match v {
                Value::Integer(n) => *n,
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(n.windows(2).all(|w| w[1] == w[0] + 1), "interleaved: {n:?}");
    }
    stop.store(true, Ordering::Relaxed);
    hammer.join().unwrap();
    assert_eq!(server.terminate(), 0);
}

/// SETRANGE, INCRBYFLOAT, RENAME, RENAMENX and MSETNX, with the replies
/// redis-server 7.0.15 gave to the same requests.
#[test]
fn setrange_incrbyfloat_rename_msetnx_as_redis() {
    let dir = temp_dir();
    let server = Server::start_serve(&dir.path().join("store"), ARGS);
    let mut c = Resp::connect(&server);
    assert_eq!(c.call(&["SET", "k", "10.50"]), simple("OK"));
    assert_eq!(c.call(&["INCRBYFLOAT", "k", "0.1"]), bulk("10.6"));
    assert_eq!(c.call(&["SET", "e", "1e20"]), simple("OK"));
    assert_eq!(
        c.call(&["INCRBYFLOAT", "e", "0"]),
        bulk("100000000000000000000")
    );
    assert_eq!(c.call(&["INCRBYFLOAT", "nope", "3"]), bulk("3"));
    assert_eq!(c.call(&["SET", "s", "hello"]), simple("OK"));
    assert_eq!(
        c.call(&["INCRBYFLOAT", "s", "1"]),
        error("ERR value is not a valid float")
    );
    assert_eq!(c.call(&["SETRANGE", "s", "8", "xy"]), Value::Integer(10));
    assert_eq!(
        c.call(&["GET", "s"]),
        Value::Bulk(Some(b"hello\0\0\0xy".to_vec()))
    );
    assert_eq!(c.call(&["SETRANGE", "nk", "0", ""]), Value::Integer(0));
    assert_eq!(c.call(&["EXISTS", "nk"]), Value::Integer(0));
    assert_eq!(
        c.call(&["SETRANGE", "s", "-1", "x"]),
        error("ERR offset is out of range")
    );
    assert_eq!(
        c.call(&["SETRANGE", "s", "536870911", "xx"]),
        error("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    );
    assert_eq!(c.call(&["RENAME", "nokey", "x"]), error("ERR no such key"));
    assert_eq!(c.call(&["RENAME", "s", "s"]), simple("OK"));
    assert_eq!(c.call(&["RENAMENX", "s", "s"]), Value::Integer(0));
    assert_eq!(c.call(&["SET", "a", "1"]), simple("OK"));
    assert_eq!(c.call(&["RENAMENX", "s", "a"]), Value::Integer(0));
    // The TTL moves with the value.
    assert_eq!(c.call(&["EXPIRE", "s", "100"]), Value::Integer(1));
    assert_eq!(c.call(&["RENAME", "s", "b"]), simple("OK"));
    assert_eq!(c.call(&["EXISTS", "s"]), Value::Integer(0));
    assert_eq!(
        c.call(&["GET", "b"]),
        Value::Bulk(Some(b"hello\0\0\0xy".to_vec()))
    );
    assert!(matches!(c.call(&["TTL", "b"]), Value::Integer(99 | 100)));
    assert_eq!(c.call(&["MSETNX", "a", "1", "z", "2"]), Value::Integer(0));
    assert_eq!(c.call(&["EXISTS", "z"]), Value::Integer(0));
    assert_eq!(c.call(&["MSETNX", "y", "1", "z", "2"]), Value::Integer(1));
    assert_eq!(c.call(&["GET", "z"]), bulk("2"));
    // Inside a transaction too (EXEC already holds the exclusive pass).
    assert_eq!(c.call(&["MULTI"]), simple("OK"));
    assert_eq!(c.call(&["RENAME", "z", "z2"]), simple("QUEUED"));
    assert_eq!(c.call(&["EXEC"]), Value::Array(Some(vec![simple("OK")])));
    assert_eq!(c.call(&["GET", "z2"]), bulk("2"));
}

/// GETSET, SUBSTR, TOUCH, COPY, MOVE and OBJECT, each reply as
/// redis-server 7.0.15 gave it for the same sequence.
#[test]
fn getset_copy_move_object_touch_as_redis() {
    let dir = temp_dir();
    let server = Server::start_serve(&dir.path().join("store"), ARGS);
    let mut c = Resp::connect(&server);
    let int = Value::Integer;
    assert_eq!(c.call(&["SET", "k", "v"]), simple("OK"));
    assert_eq!(c.call(&["EXPIRE", "k", "100"]), int(1));
    // GETSET drops the expiry, as SET does.
    assert_eq!(c.call(&["GETSET", "k", "w"]), bulk("v"));
    assert_eq!(c.call(&["TTL", "k"]), int(-1));
    assert_eq!(c.call(&["GETSET", "nope", "x"]), Value::Bulk(None));
    assert_eq!(
        c.call(&["GETSET", "k"]),
        error("ERR wrong number of arguments for 'getset' command")
    );
    assert_eq!(c.call(&["SUBSTR", "k", "0", "0"]), bulk("w"));
    assert_eq!(
        c.call(&["SET", "big", "123456789012345678901"]),
        simple("OK")
    );
    assert_eq!(c.call(&["SET", "n", "42"]), simple("OK"));
    assert_eq!(c.call(&["SET", "z", "-0"]), simple("OK"));
    assert_eq!(c.call(&["TOUCH", "k", "n", "k", "nosuch"]), int(3));
    assert_eq!(c.call(&["OBJECT", "ENCODING", "n"]), bulk("int"));
    assert_eq!(c.call(&["OBJECT", "ENCODING", "z"]), bulk("embstr"));
    assert_eq!(c.call(&["OBJECT", "ENCODING", "big"]), bulk("embstr"));
    assert_eq!(c.call(&["SET", "long", &"x".repeat(45)]), simple("OK"));
    assert_eq!(c.call(&["OBJECT", "ENCODING", "long"]), bulk("raw"));
    assert_eq!(c.call(&["OBJECT", "ENCODING", "nosuch"]), Value::Bulk(None));
    assert_eq!(c.call(&["OBJECT", "REFCOUNT", "n"]), int(2147483647));
    assert_eq!(c.call(&["OBJECT", "REFCOUNT", "k"]), int(1));
    assert_eq!(c.call(&["OBJECT", "IDLETIME", "k"]), int(0));
    assert!(matches!(
        c.call(&["OBJECT", "FREQ", "k"]),
        Value::Error(e) if e.starts_with(b"ERR An LFU maxmemory policy is not selected")
    ));
    assert_eq!(
        c.call(&["OBJECT", "NOPE", "k"]),
        error("ERR unknown subcommand 'NOPE'. Try OBJECT HELP.")
    );
    assert_eq!(
        c.call(&["OBJECT", "ENCODING"]),
        error("ERR wrong number of arguments for 'object|encoding' command")
    );
    assert!(matches!(c.call(&["OBJECT", "HELP"]), Value::Array(Some(l)) if l.len() == 15));
    assert_eq!(
        c.call(&["COPY", "k", "k"]),
        error("ERR source and destination objects are the same")
    );
    assert_eq!(c.call(&["COPY", "k", "k2"]), int(1));
    assert_eq!(c.call(&["COPY", "k", "k2"]), int(0));
    assert_eq!(c.call(&["COPY", "k", "k2", "REPLACE"]), int(1));
    assert_eq!(c.call(&["COPY", "k", "k3", "DB", "1"]), int(1));
    assert_eq!(
        c.call(&["COPY", "k", "k3", "DB", "16"]),
        error("ERR DB index is out of range")
    );
    assert_eq!(
        c.call(&["COPY", "k", "k3", "DB", "x"]),
        error("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.call(&["COPY", "k", "k3", "DB"]),
        error("ERR syntax error")
    );
    assert_eq!(c.call(&["COPY", "nosuch", "k4"]), int(0));
    assert_eq!(c.call(&["COPY", "k", "k", "DB", "1"]), int(1));
    assert_eq!(c.call(&["SELECT", "1"]), simple("OK"));
    assert_eq!(c.call(&["GET", "k3"]), bulk("w"));
    assert_eq!(c.call(&["SELECT", "0"]), simple("OK"));
    // MOVE takes the expiry along and leaves nothing behind.
    assert_eq!(c.call(&["EXPIRE", "n", "50"]), int(1));
    assert_eq!(c.call(&["MOVE", "n", "1"]), int(1));
    assert_eq!(c.call(&["MOVE", "n", "1"]), int(0));
    assert_eq!(
        c.call(&["MOVE", "k", "0"]),
        error("ERR source and destination objects are the same")
    );
    assert_eq!(
        c.call(&["MOVE", "k", "99"]),
        error("ERR DB index is out of range")
    );
    assert_eq!(c.call(&["EXISTS", "n"]), int(0));
    assert_eq!(c.call(&["SELECT", "1"]), simple("OK"));
    assert!(matches!(c.call(&["TTL", "n"]), Value::Integer(49 | 50)));
    assert_eq!(c.call(&["SET", "k2", "other"]), simple("OK"));
    assert_eq!(c.call(&["SELECT", "0"]), simple("OK"));
    // The key exists in the target database: nothing moves.
    assert_eq!(c.call(&["MOVE", "k2", "1"]), int(0));
    assert_eq!(c.call(&["GET", "k2"]), bulk("w"));
}

/// Expired keys leave DBSIZE without being read: the background sweep
/// removes them (`--expiry-sweep-secs`).
#[test]
fn the_expiry_sweep_removes_unread_expired_keys() {
    let dir = temp_dir();
    let args = [ARGS, &["--expiry-sweep-secs", "1"]].concat();
    let server = Server::start_serve(&dir.path().join("store"), &args);
    let mut c = Resp::connect(&server);
    for i in 0..50 {
        let k = format!("short{i}");
        assert_eq!(c.call(&["SET", &k, "x", "PX", "200"]), simple("OK"));
    }
    for i in 0..20 {
        let k = format!("stays{i}");
        assert_eq!(c.call(&["SET", &k, "y", "EX", "1000"]), simple("OK"));
        let k = format!("plain{i}");
        assert_eq!(c.call(&["SET", &k, "z"]), simple("OK"));
    }
    assert_eq!(c.call(&["DBSIZE"]), Value::Integer(90));
    let start = std::time::Instant::now();
    loop {
        if c.call(&["DBSIZE"]) == Value::Integer(40) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "DBSIZE stays {:?}",
            c.call(&["DBSIZE"])
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(c.call(&["GET", "stays3"]), bulk("y"));
    assert_eq!(c.call(&["GET", "plain3"]), bulk("z"));
}

/// SCAN pages through the keys (by hash order): with writes between the
/// pages, every key present for the whole scan is returned exactly once.
#[test]
fn scan_pages_return_every_key_present_throughout_once() {
    let dir = temp_dir();
    let server = Server::start_serve(&dir.path().join("store"), ARGS);
    let mut c = Resp::connect(&server);
    for i in 0..200 {
        assert_eq!(c.call(&["SET", &format!("k{i}"), "v"]), simple("OK"));
    }
    let mut seen: std::collections::HashMap<Vec<u8>, usize> = Default::default();
    let mut cursor = "0".to_string();
    let mut pages = 0;
    loop {
        let Value::Array(Some(reply)) = c.call(&["SCAN", &cursor, "COUNT", "20"]) else {
            panic!("SCAN reply")
        };
        let Value::Bulk(Some(next)) = &reply[0] else {
            panic!("cursor")
        };
        let Value::Array(Some(keys)) = &reply[1] else {
            panic!("keys")
        };
        for k in keys {
            let Value::Bulk(Some(k)) = k else { panic!() };
            *seen.entry(k.clone()).or_default() += 1;
        }
        pages += 1;
        // Writes between pages: new keys, and some deleted.
        assert_eq!(c.call(&["SET", &format!("new{pages}"), "v"]), simple("OK"));
        c.call(&["DEL", &format!("k{}", 199 - pages)]);
        cursor = String::from_utf8(next.clone()).unwrap();
        if cursor == "0" {
            break;
        }
        assert!(pages < 100, "the scan does not end");
    }
    assert!(pages > 5, "{pages} pages");
    for i in 0..(199 - pages) {
        let k = format!("k{i}").into_bytes();
        assert_eq!(seen.get(&k), Some(&1), "k{i}");
    }
    assert!(seen.values().all(|&n| n == 1), "a key returned twice");
}

/// A string longer than one record (a quarter of a 4 MiB segment) is a
/// large value behind the same commands, and survives `kill -9`.
#[test]
fn large_strings_behave_as_any_string_and_survive_kill_9() {
    let dir = temp_dir();
    let data = dir.path().join("store");
    let server = Server::start_serve(&data, ARGS);
    let mut c = Resp::connect(&server);
    let big: String = (0..3_000_000u32)
        .map(|i| char::from(b'a' + (i.wrapping_mul(2_654_435_761) >> 27) as u8 % 26))
        .collect();
    assert_eq!(c.call(&["SET", "big", &big]), simple("OK"));
    assert_eq!(c.call(&["GET", "big"]), bulk(&big));
    assert_eq!(c.call(&["STRLEN", "big"]), Value::Integer(3_000_000));
    assert_eq!(
        c.call(&["GETRANGE", "big", "1999990", "2000009"]),
        bulk(&big[1_999_990..2_000_010])
    );
    assert_eq!(c.call(&["APPEND", "big", "END"]), Value::Integer(3_000_003));
    assert_eq!(c.call(&["EXPIRE", "big", "1000"]), Value::Integer(1));
    assert_eq!(c.call(&["SET", "other", &big[..1_500_000]]), simple("OK"));
    assert_eq!(c.call(&["DEL", "other"]), Value::Integer(1));
    assert_eq!(c.call(&["DBSIZE"]), Value::Integer(1));
    server.kill_9();
    let server = Server::start_serve(&data, ARGS);
    let mut c = Resp::connect(&server);
    let mut expect = big.clone();
    expect.push_str("END");
    assert_eq!(c.call(&["GET", "big"]), bulk(&expect));
    assert!(matches!(
        c.call(&["TTL", "big"]),
        Value::Integer(990..=1000)
    ));
    assert_eq!(c.call(&["GET", "other"]), Value::Bulk(None));
    assert_eq!(c.call(&["DBSIZE"]), Value::Integer(1));
}

/// The text of a `CLIENT LIST` / `CLIENT INFO` reply (a bulk string in
/// RESP2).
fn text(v: Value) -> String {
    match v {
        Value::Bulk(Some(b)) => String::from_utf8(b).unwrap(),
        other => panic!("not text: {other:?}"),
    }
}

/// Whether the server closed `c`'s connection (EOF or reset).
fn closed(c: &mut Resp) -> bool {
    c.stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut b = [0u8; 64];
    !matches!(c.stream.read(&mut b), Ok(n) if n > 0)
}

#[test]
fn client_list_kill_reset_and_config_as_redis() {
    let dir = temp_dir();
    let args = [ARGS, &["--requirepass", "pw"]].concat();
    let server = Server::start_serve(&dir.path().join("store"), &args);
    let mut a = Resp::connect(&server);
    let mut b = Resp::connect(&server);
    let mut d = Resp::connect(&server);
    for c in [&mut a, &mut b, &mut d] {
        assert_eq!(c.call(&["AUTH", "pw"]), simple("OK"));
    }
    assert_eq!(a.call(&["CLIENT", "SETNAME", "alpha"]), simple("OK"));
    assert_eq!(b.call(&["SELECT", "3"]), simple("OK"));
    let Value::Integer(b_id) = b.call(&["CLIENT", "ID"]) else {
        panic!("CLIENT ID")
    };

    // Every connection is listed, each with what it last did.
    let list = text(a.call(&["CLIENT", "LIST"]));
    assert_eq!(list.lines().count(), 3, "{list}");
    let line_of = |id: i64| {
        list.lines()
            .find(|l| l.starts_with(&format!("id={id} ")))
            .unwrap_or_else(|| panic!("no client {id} in {list}"))
            .to_owned()
    };
    let b_line = line_of(b_id);
    assert!(b_line.contains(" db=3 "), "{b_line}");
    assert!(b_line.contains(" cmd=client|id "), "{b_line}");
    assert!(list.contains(" name=alpha "), "{list}");
    assert!(list.contains(" cmd=client|list "), "{list}");
    let info = text(a.call(&["CLIENT", "INFO"]));
    assert!(
        info.contains(" name=alpha ") && info.contains("addr=127.0.0.1:"),
        "{info}"
    );
    let only_b = text(a.call(&["CLIENT", "LIST", "ID", &b_id.to_string()]));
    assert_eq!(only_b.lines().count(), 1);
    assert_eq!(
        text(a.call(&["CLIENT", "LIST", "TYPE", "pubsub"])),
        String::new()
    );
    assert_eq!(
        a.call(&["CLIENT", "LIST", "TYPE", "bogus"]),
        error("ERR Unknown client type 'bogus'")
    );

    // Kill by id: b is closed, a goes on.
    assert_eq!(
        a.call(&["CLIENT", "KILL", "ID", &b_id.to_string()]),
        Value::Integer(1)
    );
    assert!(closed(&mut b), "killed client still open");
    assert_eq!(
        a.call(&["CLIENT", "KILL", "ID", &b_id.to_string()]),
        Value::Integer(0)
    );
    assert_eq!(
        a.call(&["CLIENT", "KILL", "ID", "0"]),
        error("ERR client-id should be greater than 0")
    );
    // Three words are the old form, an address (as in Redis).
    assert_eq!(
        a.call(&["CLIENT", "KILL", "ID"]),
        error("ERR No such client")
    );
    assert_eq!(
        a.call(&["CLIENT", "KILL", "ID", "1", "SKIPME"]),
        error("ERR syntax error")
    );
    // The old form takes an address: d's, as the server sees it.
    let d_addr = d.stream.local_addr().unwrap().to_string();
    assert_eq!(a.call(&["CLIENT", "KILL", &d_addr]), simple("OK"));
    assert!(closed(&mut d));
    assert_eq!(
        a.call(&["CLIENT", "KILL", "127.0.0.1:1"]),
        error("ERR No such client")
    );
    // SKIPME yes (the default) spares the caller.
    assert_eq!(
        a.call(&["CLIENT", "KILL", "USER", "default"]),
        Value::Integer(0)
    );
    assert_eq!(text(a.call(&["CLIENT", "LIST"])).lines().count(), 1);

    // CONFIG: what is in force is reported; setting it again is fine,
    // another value is refused and names why.
    assert_eq!(
        a.call(&["CONFIG", "GET", "maxmemory"]),
        Value::Array(Some(vec![bulk("maxmemory"), bulk("0")]))
    );
    assert_eq!(
        a.call(&["CONFIG", "SET", "save", "", "appendonly", "YES"]),
        simple("OK")
    );
    match a.call(&["CONFIG", "SET", "maxmemory", "100mb"]) {
        Value::Error(e) => {
            let e = String::from_utf8(e).unwrap();
            assert!(
                e.starts_with("ERR CONFIG SET failed (possibly related to argument 'maxmemory')"),
                "{e}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        a.call(&["CONFIG", "SET", "no-such-thing", "1"]),
        error("ERR Unknown option or number of arguments for CONFIG SET - 'no-such-thing'")
    );

    // RESET: out of MULTI, database 0, no name, RESP2, signed out.
    assert_eq!(a.call(&["SELECT", "5"]), simple("OK"));
    assert!(matches!(a.call(&["HELLO", "3"]), Value::Map(_)));
    assert_eq!(a.call(&["MULTI"]), simple("OK"));
    assert_eq!(a.call(&["RESET"]), simple("RESET"));
    assert_eq!(
        a.call(&["GET", "k"]),
        error("NOAUTH Authentication required.")
    );
    assert_eq!(a.call(&["AUTH", "pw"]), simple("OK"));
    assert_eq!(a.call(&["CLIENT", "GETNAME"]), Value::Bulk(None));
    assert_eq!(a.call(&["EXEC"]), error("ERR EXEC without MULTI"));
    let info = text(a.call(&["CLIENT", "INFO"]));
    assert!(
        info.contains(" db=0 ") && info.contains(" resp=2"),
        "{info}"
    );
    // Killing oneself answers, then closes.
    assert_eq!(
        a.call(&["CLIENT", "KILL", "SKIPME", "no"]),
        Value::Integer(1)
    );
    assert!(closed(&mut a));
    assert_eq!(server.terminate(), 0);
}

/// The encoding settings clients and Redis's tests change at run time are
/// kept and read back as Redis 7.0 does (aliases, memory units, errors,
/// all or nothing), checked side by side with redis-server 7.0.15.
#[test]
fn config_set_of_encoding_settings_as_redis() {
    let dir = temp_dir();
    let server = Server::start_serve(&dir.path().join("store"), ARGS);
    let mut c = Resp::connect(&server);
    assert_eq!(
        c.call(&["CONFIG", "SET", "hash-max-ziplist-entries", "7"]),
        simple("OK")
    );
    assert_eq!(
        c.call(&["CONFIG", "GET", "hash-max-listpack-entries"]),
        Value::Array(Some(vec![bulk("hash-max-listpack-entries"), bulk("7")]))
    );
    assert_eq!(
        c.call(&["CONFIG", "SET", "stream-node-max-bytes", "4kb"]),
        simple("OK")
    );
    assert_eq!(
        c.call(&["CONFIG", "GET", "stream-node-max-bytes"]),
        Value::Array(Some(vec![bulk("stream-node-max-bytes"), bulk("4096")]))
    );
    assert_eq!(
        c.call(&["CONFIG", "SET", "zset-max-ziplist-value", "1gb", "zset-max-listpack-entries", "x"]),
        error("ERR CONFIG SET failed (possibly related to argument 'zset-max-listpack-entries') - argument couldn't be parsed into an integer")
    );
    // All or nothing: the valid first pair was not applied either.
    assert_eq!(
        c.call(&["CONFIG", "GET", "zset-max-listpack-value"]),
        Value::Array(Some(vec![bulk("zset-max-listpack-value"), bulk("64")]))
    );
    assert_eq!(
        c.call(&["CONFIG", "SET", "list-compress-depth", "-1"]),
        error("ERR CONFIG SET failed (possibly related to argument 'list-compress-depth') - argument must be between 0 and 2147483647 inclusive")
    );
    assert_eq!(
        c.call(&["CONFIG", "SET", "set-max-listpack-entries", "5"]),
        error(
            "ERR Unknown option or number of arguments for CONFIG SET - 'set-max-listpack-entries'"
        )
    );
}
