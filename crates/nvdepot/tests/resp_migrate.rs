//! MIGRATE against redis-server 7.0: the same commands sent to a
//! redis-server source and to `nvdepot serve`, each migrating to a
//! redis-server target of its own, answer the same (NOKEY, BUSYKEY from
//! the target, REPLACE, COPY, KEYS, AUTH and AUTH2 to a protected target,
//! a database the target lacks, an unreachable target, every syntax
//! error), leave the same keys behind, and put values Redis digests the
//! same (`DEBUG DIGEST-VALUE`) on the targets, with their TTLs. And the
//! other way: redis-server's MIGRATE into nvdepot, and RESTORE-ASKING.

mod common;

use nvdepot_resp::Value;

use common::{serve_beside_redis, show_value, RefServer, Resp};

/// Builds the same keys of every type on a source.
fn fill(c: &mut Resp) {
    let big: Vec<String> = (0..300).map(|i| format!("member-{i:04}")).collect();
    let mut cmds: Vec<Vec<String>> = vec![
        vec!["SET".into(), "s1".into(), "hello".into()],
        vec!["SET".into(), "".into(), "the empty key".into()],
        vec!["SET".into(), "n".into(), "12345".into()],
        vec![
            "HSET".into(),
            "h1".into(),
            "a".into(),
            "1".into(),
            "b".into(),
            "2".into(),
        ],
        vec![
            "RPUSH".into(),
            "l1".into(),
            "x".into(),
            "y".into(),
            "z".into(),
        ],
        vec![
            "ZADD".into(),
            "z1".into(),
            "1".into(),
            "a".into(),
            "2.5".into(),
            "b".into(),
        ],
        vec![
            "SADD".into(),
            "st".into(),
            "a".into(),
            "b".into(),
            "c".into(),
        ],
        vec![
            "SADD".into(),
            "ints".into(),
            "1".into(),
            "2".into(),
            "3".into(),
        ],
        vec![
            "SET".into(),
            "ttlk".into(),
            "v".into(),
            "PX".into(),
            "500000".into(),
        ],
        vec![
            "XADD".into(),
            "x1".into(),
            "1-1".into(),
            "f".into(),
            "v".into(),
        ],
    ];
    let mut hbig = vec!["HSET".to_string(), "hbig".into()];
    let mut sbig = vec!["SADD".to_string(), "sbig".into()];
    let mut zbig = vec!["ZADD".to_string(), "zbig".into()];
    let mut lbig = vec!["RPUSH".to_string(), "lbig".into()];
    for (i, m) in big.iter().enumerate() {
        hbig.extend([m.clone(), format!("{i}")]);
        sbig.push(m.clone());
        zbig.extend([format!("{}", i % 17), m.clone()]);
        lbig.push(m.repeat(20));
    }
    cmds.extend([hbig, sbig, zbig, lbig]);
    for cmd in &cmds {
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let v = c.call(&args);
        assert!(!matches!(v, Value::Error(_)), "{cmd:?}: {}", show_value(&v));
    }
}

const KEYS: &[&str] = &[
    "s1", "", "n", "h1", "l1", "z1", "st", "ints", "ttlk", "x1", "hbig", "sbig", "zbig", "lbig",
];

#[test]
fn migrate_answers_and_moves_as_redis_does() {
    let Some((source, _dir, ours)) = serve_beside_redis(&[]) else {
        return;
    };
    let theirs_target = RefServer::redis_or_skip().unwrap();
    let ours_target = RefServer::redis_or_skip().unwrap();
    let protected = |_: ()| {
        RefServer::start(
            "redis-server",
            &["--bind", "127.0.0.1", "--save", "", "--requirepass", "pw"],
            "--port",
        )
        .unwrap()
    };
    let (theirs_locked, ours_locked) = (protected(()), protected(()));
    let closed = common::free_port().to_string();

    let mut src = [Resp::connect_to(source.addr), Resp::connect(&ours)];
    let targets = [
        [theirs_target.addr.port(), theirs_locked.addr.port()],
        [ours_target.addr.port(), ours_locked.addr.port()],
    ];
    for c in &mut src {
        fill(c);
    }
    // `T` is the side's target, `L` its password-protected one, `X` a
    // port nothing listens on.
    let script: &[&[&str]] = &[
        &["MIGRATE", "127.0.0.1", "T", "s1", "0", "5000"],
        &["MIGRATE", "127.0.0.1", "T", "s1", "0", "5000"],
        &["EXISTS", "s1"],
        &[
            "MIGRATE",
            "127.0.0.1",
            "T",
            "",
            "3",
            "5000",
            "KEYS",
            "h1",
            "l1",
            "nokey",
            "z1",
        ],
        &[
            "MIGRATE",
            "127.0.0.1",
            "T",
            "",
            "3",
            "5000",
            "KEYS",
            "nokey",
        ],
        &["MIGRATE", "127.0.0.1", "T", "", "3", "5000", "KEYS"],
        &["MIGRATE", "127.0.0.1", "T", "", "0", "5000"],
        &["MIGRATE", "127.0.0.1", "T", "", "0", "5000", "COPY"],
        &["EXISTS", ""],
        &["MIGRATE", "127.0.0.1", "T", "", "0", "5000", "COPY"],
        &[
            "MIGRATE",
            "127.0.0.1",
            "T",
            "",
            "0",
            "5000",
            "COPY",
            "REPLACE",
        ],
        &["SET", "s1", "again"],
        // BUSYKEY from the target; then REPLACE; then the database the
        // target lacks, and a move after that error (SELECT again).
        &["MIGRATE", "127.0.0.1", "T", "s1", "0", "5000"],
        &["EXISTS", "s1"],
        &[
            "MIGRATE",
            "127.0.0.1",
            "T",
            "s1",
            "0",
            "5000",
            "REPLACE",
            "COPY",
        ],
        &["MIGRATE", "127.0.0.1", "T", "n", "99", "5000"],
        &["MIGRATE", "127.0.0.1", "T", "n", "0", "5000"],
        &["MIGRATE", "127.0.0.1", "T", "s1", "0", "5000", "REPLACE"],
        // Several keys, one of which the target already holds: the others
        // move, the error is the target's.
        &["SET", "n", "again"],
        &[
            "MIGRATE",
            "127.0.0.1",
            "T",
            "",
            "0",
            "5000",
            "KEYS",
            "st",
            "n",
            "ints",
        ],
        &["EXISTS", "st", "n", "ints"],
        &[
            "MIGRATE",
            "127.0.0.1",
            "T",
            "",
            "5",
            "0",
            "KEYS",
            "ttlk",
            "x1",
            "hbig",
            "sbig",
        ],
        &["MIGRATE", "127.0.0.1", "T", "zbig", "5", "-7", "REPLACE"],
        // Authentication.
        &["MIGRATE", "127.0.0.1", "L", "lbig", "0", "5000", "COPY"],
        &[
            "MIGRATE",
            "127.0.0.1",
            "L",
            "lbig",
            "0",
            "5000",
            "COPY",
            "AUTH",
            "wrong",
        ],
        &[
            "MIGRATE",
            "127.0.0.1",
            "L",
            "lbig",
            "0",
            "5000",
            "COPY",
            "AUTH",
            "pw",
        ],
        &[
            "MIGRATE",
            "127.0.0.1",
            "L",
            "lbig",
            "1",
            "5000",
            "AUTH2",
            "default",
            "pw",
        ],
        &[
            "MIGRATE",
            "127.0.0.1",
            "L",
            "lbig",
            "1",
            "5000",
            "AUTH2",
            "default",
        ],
        // Unreachable, and every syntax error.
        &["SET", "s2", "v"],
        &["MIGRATE", "127.0.0.1", "X", "s2", "0", "200"],
        &["MIGRATE", "127.0.0.1", "notaport", "s2", "0", "200"],
        &["MIGRATE", "127.0.0.1", "T", "s2", "0", "5000", "BOGUS"],
        &["MIGRATE", "127.0.0.1", "T", "s2", "0", "5000", "AUTH"],
        &["MIGRATE", "127.0.0.1", "T", "s2", "0", "5000", "KEYS", "s2"],
        &["MIGRATE", "127.0.0.1", "T", "s2", "x", "5000"],
        &["MIGRATE", "127.0.0.1", "T", "s2", "0", "1.5"],
        &[
            "MIGRATE",
            "127.0.0.1",
            "T",
            "s2",
            "0",
            "99999999999999999999",
        ],
        &["MIGRATE", "127.0.0.1", "T", "s2", "0"],
        &["EXISTS", "s2"],
        // Inside MULTI and from a script, as any write.
        &["MULTI"],
        &["MIGRATE", "127.0.0.1", "T", "s2", "7", "5000"],
        &["EXISTS", "s2"],
        &["EXEC"],
        &["SET", "s3", "v"],
        &[
            "EVAL",
            "return redis.call('MIGRATE', '127.0.0.1', ARGV[1], KEYS[1], '7', '5000')",
            "1",
            "s3",
            "T",
        ],
        &["EXISTS", "s3"],
        &["DBSIZE"],
    ];
    for line in script {
        let mut replies = Vec::new();
        for (side, c) in src.iter_mut().enumerate() {
            let [t, l] = targets[side].map(|p| p.to_string());
            let args: Vec<&str> = line
                .iter()
                .map(|&a| match a {
                    "T" => t.as_str(),
                    "L" => l.as_str(),
                    "X" => closed.as_str(),
                    a => a,
                })
                .collect();
            replies.push(show_value(&c.call(&args)));
        }
        assert_eq!(
            replies[0], replies[1],
            "{line:?}: redis-server, then nvdepot"
        );
    }

    // What each target now holds, by Redis's own digest of each value.
    let holds = |port: u16| {
        let mut c = Resp::connect_to(format!("127.0.0.1:{port}").parse().unwrap());
        let mut all = Vec::new();
        for db in ["0", "1", "3", "5", "7"] {
            c.call(&["SELECT", db]);
            for key in KEYS.iter().chain(&["s2", "s3"]) {
                let digest = show_value(&c.call(&["DEBUG", "DIGEST-VALUE", key]));
                let ttl = match c.call(&["PTTL", key]) {
                    Value::Integer(t) if t > 0 => "some".to_string(),
                    v => show_value(&v),
                };
                all.push(format!("db {db} {key:?}: {digest} ttl {ttl}"));
            }
        }
        all
    };
    let (theirs, ours_held) = (
        holds(theirs_target.addr.port()),
        holds(ours_target.addr.port()),
    );
    assert_eq!(theirs, ours_held);
    assert!(theirs
        .iter()
        .any(|l| l.contains("ttlk") && l.contains("ttl some")));
    // The protected targets too (they need AUTH to be read).
    for (a, b) in [(&theirs_locked, &ours_locked)] {
        let mut digests = Vec::new();
        for t in [a, b] {
            let mut c = Resp::connect_to(t.addr);
            c.call(&["AUTH", "pw"]);
            c.call(&["SELECT", "1"]);
            digests.push(show_value(&c.call(&["DEBUG", "DIGEST-VALUE", "lbig"])));
        }
        assert_eq!(digests[0], digests[1]);
    }
}

#[test]
fn redis_migrates_into_nvdepot() {
    let Some((source, _dir, ours)) = serve_beside_redis(&[]) else {
        return;
    };
    let mut src = Resp::connect_to(source.addr);
    fill(&mut src);
    let mut c = Resp::connect(&ours);
    let reads = |c: &mut Resp, key: &str| -> String {
        let ty = show_value(&c.call(&["TYPE", key]));
        let cmd: Vec<&str> = match ty.as_str() {
            t if t.contains("hash") => vec!["HGETALL", key],
            t if t.contains("list") => vec!["LRANGE", key, "0", "-1"],
            t if t.contains("zset") => vec!["ZRANGE", key, "0", "-1", "WITHSCORES"],
            t if t.contains("set") => vec!["SORT", key, "ALPHA"],
            t if t.contains("stream") => vec!["XRANGE", key, "-", "+"],
            _ => vec!["GET", key],
        };
        format!("{ty} {}", show_value(&c.call(&cmd)))
    };
    let expected: Vec<String> = KEYS.iter().map(|k| reads(&mut src, k)).collect();
    let port = ours.addr.port().to_string();
    let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "2", "5000", "KEYS"];
    args.extend(KEYS);
    assert_eq!(
        show_value(&src.call(&args)),
        show_value(&Value::Simple(b"OK".to_vec()))
    );
    assert_eq!(src.call(&["DBSIZE"]), Value::Integer(0));
    c.call(&["SELECT", "2"]);
    let got: Vec<String> = KEYS.iter().map(|k| reads(&mut c, k)).collect();
    assert_eq!(expected, got);
    assert!(matches!(c.call(&["PTTL", "ttlk"]), Value::Integer(t) if t > 0));

    // RESTORE-ASKING is RESTORE (outside a cluster, ASKING changes nothing).
    let payload = match c.call(&["DUMP", "h1"]) {
        Value::Bulk(Some(p)) => p,
        v => panic!("DUMP: {}", show_value(&v)),
    };
    let restore = |c: &mut Resp, cmd: &str, key: &str| {
        show_value(&c.call_bytes(&[cmd.as_bytes(), key.as_bytes(), b"0", &payload]))
    };
    let mut theirs = Resp::connect_to(source.addr);
    theirs.call(&["SELECT", "2"]);
    restore(&mut theirs, "RESTORE", "h1");
    for cmd in ["RESTORE-ASKING", "RESTORE"] {
        for key in ["h1", "h2"] {
            assert_eq!(
                restore(&mut theirs, cmd, key),
                restore(&mut c, cmd, key),
                "{cmd} {key}"
            );
        }
    }
    assert_eq!(reads(&mut c, "h2"), expected[3]);
}

/// `redis-cli --cluster import` (Redis's own tool: MIGRATE sent to the
/// source, one key at a time) into a one-node nvdepot cluster; then that
/// node's MIGRATE, which sends RESTORE-ASKING as a cluster node does.
#[test]
fn redis_cli_cluster_import_and_restore_asking() {
    let Some((source, _dir, node)) =
        serve_beside_redis(&["--size", "64M", "--segment-size", "4M", "--cluster-enabled"])
    else {
        return;
    };
    let target = RefServer::redis_or_skip().unwrap();
    let mut c = Resp::connect(&node);
    let id = "0123456789012345678901234567890123456789";
    let a = node.addr;
    let nodes = format!("{id} {} {} master - 0-16383", a.ip(), a.port());
    assert_eq!(show_value(&c.call(&["CLUSTERX", "SETNODEID", id])), "+OK");
    assert_eq!(
        show_value(&c.call(&["CLUSTERX", "SETNODES", &nodes, "1"])),
        "+OK"
    );
    let mut src = Resp::connect_to(source.addr);
    fill(&mut src);
    let out = std::process::Command::new("redis-cli")
        .args(["--cluster", "import", &a.to_string()])
        .args(["--cluster-from", &source.addr.to_string(), "--cluster-copy"])
        .output();
    let Ok(out) = out else {
        assert!(
            std::env::var_os("CI").is_none(),
            "redis-cli is not installed"
        );
        return;
    };
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{log}");
    let moved = KEYS.len();
    assert_eq!(log.matches(": \u{1b}[32;1mOK").count(), moved, "{log}");
    assert_eq!(c.call(&["DBSIZE"]), Value::Integer(moved as i64));
    assert!(matches!(c.call(&["PTTL", "ttlk"]), Value::Integer(t) if t > 0));
    // (Redis's digest covers whether a key expires, so not ttlk's.)
    for key in ["hbig", "zbig", "lbig", "x1", ""] {
        let digest = |r: &mut Resp| show_value(&r.call(&["DEBUG", "DIGEST-VALUE", key]));
        // nvdepot's value back on redis-server, to digest it there.
        let payload = match c.call(&["DUMP", key]) {
            Value::Bulk(Some(p)) => p,
            v => panic!("DUMP {key}: {}", show_value(&v)),
        };
        let copy = format!("copy:{key}");
        let mut t = Resp::connect_to(target.addr);
        t.call_bytes(&[b"RESTORE", copy.as_bytes(), b"0", &payload]);
        let theirs = digest(&mut src);
        assert_eq!(
            show_value(&t.call(&["DEBUG", "DIGEST-VALUE", &copy])),
            theirs,
            "{key}"
        );
    }

    // The node's own MIGRATE: RESTORE-ASKING, as Redis's cluster nodes.
    let port = target.addr.port().to_string();
    let v = c.call(&["MIGRATE", "127.0.0.1", &port, "h1", "0", "5000"]);
    assert_eq!(show_value(&v), "+OK");
    let mut t = Resp::connect_to(target.addr);
    let stats = show_value(&t.call(&["INFO", "commandstats"]));
    assert!(stats.contains("cmdstat_restore-asking:calls=1,"), "{stats}");
    assert_eq!(c.call(&["EXISTS", "h1"]), Value::Integer(0));
    // Keys of two slots: refused before anything moves, as in Redis.
    let v = c.call(&[
        "MIGRATE",
        "127.0.0.1",
        &port,
        "",
        "0",
        "5000",
        "KEYS",
        "l1",
        "z1",
    ]);
    assert!(
        show_value(&v).starts_with("-CROSSSLOT"),
        "{}",
        show_value(&v)
    );
}
