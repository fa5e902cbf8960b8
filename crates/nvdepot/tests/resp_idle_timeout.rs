//! CONFIG `timeout` (and `--timeout`) as redis-server 7.0 applies it: a
//! client idle past it is closed; a subscriber, a blocked client, a
//! MONITOR and a client that keeps talking are not; its CONFIG GET/SET
//! answers (and errors) are Redis's.

mod common;

use std::io::Read;
use std::time::{Duration, Instant};

use common::{serve_beside_redis, show_value, temp_dir, Resp, Server};

/// Whether the server closed `c` within `within` (EOF on a read).
fn closed_within(c: &mut Resp, within: Duration) -> bool {
    c.stream.set_read_timeout(Some(within)).unwrap();
    let mut b = [0u8; 64];
    matches!(c.stream.read(&mut b), Ok(0) | Err(_))
        && c.stream.read(&mut b).map_or(true, |n| n == 0)
}

#[test]
fn idle_clients_are_closed_as_redis_closes_them() {
    let Some((redis, _dir, server)) = serve_beside_redis(&[]) else {
        return;
    };
    let addrs = [redis.addr, server.addr];
    let mut admin: Vec<Resp> = addrs.iter().map(|&a| Resp::connect_to(a)).collect();
    let both = |admin: &mut Vec<Resp>, args: &[&str]| {
        let r: Vec<String> = admin
            .iter_mut()
            .map(|c| show_value(&c.call(args)))
            .collect();
        assert_eq!(r[0], r[1], "{args:?}: redis-server, then nvdepot");
        r[1].clone()
    };
    for line in [
        &["CONFIG", "GET", "timeout"][..],
        &["CONFIG", "SET", "timeout", "-1"],
        &["CONFIG", "SET", "timeout", "abc"],
        &["CONFIG", "SET", "timeout", "2147483648"],
        &["CONFIG", "SET", "timeout", "1"],
        &["CONFIG", "GET", "timeout"],
    ] {
        both(&mut admin, line);
    }
    // Both servers at once: per server, an idle client, a subscriber, a
    // MONITOR, a client blocked for 4 s and one that keeps talking.
    let open = |f: &dyn Fn(&mut Resp)| -> Vec<Resp> {
        addrs
            .iter()
            .map(|&a| {
                let mut c = Resp::connect_to(a);
                f(&mut c);
                c
            })
            .collect()
    };
    let mut idle = open(&|c| assert_eq!(show_value(&c.call(&["PING"])), "+PONG"));
    let mut subscriber = open(&|c| drop(c.call(&["SUBSCRIBE", "ch"])));
    let mut monitor = open(&|c| drop(c.call(&["MONITOR"])));
    let mut blocked = open(&|c| c.send(&["BLPOP", "nothing", "4"]));
    let mut talker = open(&|_| {});
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(3500) {
        for t in talker.iter_mut() {
            assert_eq!(show_value(&t.call(&["PING"])), "+PONG");
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    for side in 0..2 {
        let name = ["redis-server", "nvdepot"][side];
        let idle = &mut idle[side];
        assert!(closed_within(idle, Duration::from_secs(3)), "{name}: idle");
        // The blocked client's own timeout answers it.
        let blocked = &mut blocked[side];
        blocked
            .stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(
            show_value(&blocked.read()),
            "Array(None)",
            "{name}: blocked"
        );
        assert_eq!(show_value(&talker[side].call(&["PING"])), "+PONG", "{name}");
        let still = |c: &mut Resp| {
            c.stream
                .set_read_timeout(Some(Duration::from_millis(50)))
                .unwrap();
            let mut b = [0u8; 1];
            matches!(c.stream.read(&mut b), Err(_) | Ok(1..))
        };
        assert!(still(&mut subscriber[side]), "{name}: subscriber closed");
        assert!(still(&mut monitor[side]), "{name}: monitor closed");
    }
    // The admin connections sat idle meanwhile: closed too.
    for c in admin.iter_mut() {
        assert!(closed_within(c, Duration::from_secs(1)));
    }
    let mut admin: Vec<Resp> = addrs.iter().map(|&a| Resp::connect_to(a)).collect();
    both(&mut admin, &["CONFIG", "SET", "timeout", "0"]);

    // Set at start-up.
    let dir = temp_dir();
    let server = Server::start_serve(&dir.path().join("store"), &["--timeout", "1"]);
    let mut c = Resp::connect(&server);
    let got = show_value(&c.call(&["CONFIG", "GET", "timeout"]));
    assert_eq!(got, r#"["timeout", "1"]"#);
}
