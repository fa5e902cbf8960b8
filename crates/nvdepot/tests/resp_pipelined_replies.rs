//! Replies go out whole and in order while the connection already waits
//! for its next request (the server kit sends a turn's replies and arms
//! the next receive together): a large reply pipelined before a blocking
//! command arrives at once, not after the block, and many pipelined
//! requests get their replies in order.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::{temp_dir, Resp, Server};
use nvdepot_resp::Value;

#[test]
fn a_large_reply_before_a_blocking_command_is_not_held_back() {
    let dir = temp_dir();
    let server = Server::start_serve(&dir.path().join("store"), &["--size", "1G"]);
    let mut c = Resp::connect(&server);
    let value = vec![b'x'; 512 << 10];
    let keys: Vec<String> = (0..64).map(|i| format!("k{i}")).collect();
    for k in &keys {
        let ok = c.call_bytes(&[b"SET", k.as_bytes(), &value]);
        assert_eq!(ok, Value::Simple(b"OK".to_vec()));
    }
    // 32 MiB of MGET reply, more than the loopback socket buffers hold,
    // then a BLPOP that blocks for 3 s, in one write; not read for a
    // while, so the reply's send cannot complete at once.
    let mut mget: Vec<&str> = vec!["MGET"];
    mget.extend(keys.iter().map(String::as_str));
    let mut req = Vec::new();
    for args in [&mget[..], &["BLPOP", "nothing", "3"]] {
        req.extend(format!("*{}\r\n", args.len()).bytes());
        for a in args {
            req.extend(format!("${}\r\n{a}\r\n", a.len()).bytes());
        }
    }
    c.stream.write_all(&req).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // Read as bytes (the test client's parser would parse the growing
    // reply again per read), then parsed once.
    let t = Instant::now();
    let bulk = format!("${}\r\n", value.len()).len() + value.len() + 2;
    let whole = "*64\r\n".len() + 64 * bulk;
    let mut got = std::mem::take(&mut c.buf);
    let mut chunk = vec![0u8; 1 << 20];
    while got.len() < whole {
        let n = c.stream.read(&mut chunk).expect("read");
        assert!(n > 0, "connection closed");
        got.extend_from_slice(&chunk[..n]);
    }
    let took = t.elapsed();
    let (reply, n) = nvdepot_resp::parse_value(&got)
        .expect("valid RESP")
        .expect("the whole reply");
    c.buf = got.split_off(n);
    match reply {
        Value::Array(Some(vs)) => {
            assert_eq!(vs.len(), 64);
            assert!(vs.iter().all(|v| *v == Value::Bulk(Some(value.clone()))));
        }
        other => panic!("MGET answered {other:?}"),
    }
    assert!(
        took < Duration::from_millis(2500),
        "the MGET reply took {took:?}: held behind the BLPOP"
    );
    assert_eq!(
        c.read(),
        Value::Array(None),
        "BLPOP times out with a nil array"
    );
    // Many small pipelined requests: every reply, in order.
    let mut req = Vec::new();
    for i in 0..10_000 {
        let s = i.to_string();
        req.extend(format!("*2\r\n$4\r\nECHO\r\n${}\r\n{s}\r\n", s.len()).bytes());
    }
    c.stream.write_all(&req).unwrap();
    for i in 0..10_000 {
        assert_eq!(c.read(), Value::Bulk(Some(i.to_string().into_bytes())));
    }
}
