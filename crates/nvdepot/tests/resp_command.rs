//! `COMMAND` against redis-server 7.0: for every command nvdepot
//! implements, `COMMAND INFO` and `COMMAND DOCS` answer as Redis's do
//! (flags, ACL categories, tips, key specs, docs, in RESP2 and RESP3),
//! listing only the subcommands implemented, each of those as Redis
//! gives it; `COMMAND LIST` (filters too) and `COMMAND COUNT` name what
//! is implemented; `COMMAND GETKEYS` and `GETKEYSANDFLAGS` find the same
//! keys with the same flags and the same errors, over the key-spec
//! shapes and the commands Redis gives key procedures of their own.

mod common;

use std::collections::BTreeSet;

use nvdepot_resp::Value;

use common::{serve_beside_redis, show_value, Resp};

fn bulk_text(v: &Value) -> String {
    match v {
        Value::Bulk(Some(b)) | Value::Simple(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("not a name: {}", show_value(other)),
    }
}

fn items(v: &Value) -> &[Value] {
    match v {
        Value::Array(Some(items)) | Value::Set(items) => items,
        other => panic!("not an array: {}", show_value(other)),
    }
}

fn names(v: &Value) -> BTreeSet<String> {
    items(v).iter().map(bulk_text).collect()
}

/// `COMMAND INFO` entries compared with Redis's: equal but for the
/// subcommands, of which ours are some of Redis's, each equal.
fn same_entry(name: &str, ours: &Value, theirs: &Value) {
    let (o, t) = (items(ours), items(theirs));
    assert_eq!(o.len(), 10, "{name}");
    assert!(
        o[..9] == t[..9],
        "{name}: COMMAND INFO differs: {:?} against {:?}",
        &o[..9],
        &t[..9]
    );
    for sub in items(&o[9]) {
        let sub_name = bulk_text(&items(sub)[0]);
        let theirs = items(&t[9])
            .iter()
            .find(|e| bulk_text(&items(e)[0]) == sub_name)
            .unwrap_or_else(|| panic!("{sub_name} is not Redis's"));
        same_entry(&sub_name, sub, theirs);
    }
}

/// `COMMAND DOCS` maps compared as [`same_entry`] does: equal but for
/// `subcommands`, ours a part of Redis's.
fn same_docs(name: &str, ours: &Value, theirs: &Value) {
    let pairs = |v: &Value| match v {
        Value::Map(p) => p.clone(),
        Value::Array(Some(flat)) => flat
            .chunks(2)
            .map(|c| (c[0].clone(), c[1].clone()))
            .collect(),
        other => panic!("{name}: not a map: {}", show_value(other)),
    };
    let split = |v: &Value| {
        let (subs, rest): (Vec<_>, Vec<_>) = pairs(v)
            .into_iter()
            .partition(|(k, _)| bulk_text(k) == "subcommands");
        (rest, subs.into_iter().next().map(|(_, s)| pairs(&s)))
    };
    let (o, o_subs) = split(ours);
    let (t, t_subs) = split(theirs);
    assert!(o == t, "{name}: COMMAND DOCS differ");
    for (k, v) in o_subs.unwrap_or_default() {
        let theirs = t_subs
            .iter()
            .flatten()
            .find(|(tk, _)| *tk == k)
            .unwrap_or_else(|| panic!("{} is not Redis's", bulk_text(&k)));
        same_docs(&bulk_text(&k), &v, &theirs.1);
    }
}

/// The value of a one-pair map (or RESP2's two-element array).
fn only_value(v: &Value) -> Value {
    match v {
        Value::Map(pairs) if pairs.len() == 1 => pairs[0].1.clone(),
        Value::Array(Some(flat)) if flat.len() == 2 => flat[1].clone(),
        other => panic!("not a one-pair map: {}", show_value(other)),
    }
}

/// Runs a line of words split at spaces (`''`: an empty argument).
fn call(c: &mut Resp, line: &str) -> Value {
    let words = line.split(' ').map(|w| if w == "''" { "" } else { w });
    c.call(&words.collect::<Vec<_>>())
}

#[test]
fn command_describes_what_is_implemented_as_redis_does() {
    let Some((redis, _dir, server)) = serve_beside_redis(&[]) else {
        return;
    };
    for protocol in ["2", "3"] {
        let mut ours = Resp::connect(&server);
        let mut theirs = Resp::connect_to(redis.addr);
        call(&mut ours, &format!("HELLO {protocol}"));
        call(&mut theirs, &format!("HELLO {protocol}"));

        let listed = names(&call(&mut ours, "COMMAND LIST"));
        let redis_listed = names(&call(&mut theirs, "COMMAND LIST"));
        let own: BTreeSet<&String> = listed.difference(&redis_listed).collect();
        assert_eq!(
            own,
            BTreeSet::from([&"clusterx".to_string()]),
            "commands Redis lacks"
        );
        assert!(listed.contains("config|get") && listed.contains("client|tracking"));
        let top: Vec<&String> = listed.iter().filter(|n| !n.contains('|')).collect();
        assert_eq!(
            call(&mut ours, "COMMAND COUNT"),
            Value::Integer(top.len() as i64)
        );
        assert_eq!(items(&call(&mut ours, "COMMAND")).len(), top.len());

        for name in listed.iter().filter(|n| *n != "clusterx") {
            let o = call(&mut ours, &format!("COMMAND INFO {name}"));
            let t = call(&mut theirs, &format!("COMMAND INFO {name}"));
            same_entry(name, &items(&o)[0], &items(&t)[0]);
            let o = call(&mut ours, &format!("COMMAND DOCS {name}"));
            let t = call(&mut theirs, &format!("COMMAND DOCS {name}"));
            same_docs(name, &only_value(&o), &only_value(&t));
        }
        for line in [
            "COMMAND INFO nosuch get",
            "COMMAND DOCS nosuch",
            "COMMAND DOCS GET Config|Get",
            "COMMAND LIST x",
            "COMMAND LIST FILTERBY foo bar",
            "COMMAND LIST FILTERBY MODULE x",
            "COMMAND LIST FILTERBY ACLCAT nosuch",
            "COMMAND NOSUCH",
            "COMMAND GETKEYS",
            "COMMAND COUNT x",
        ] {
            assert_eq!(call(&mut ours, line), call(&mut theirs, line), "{line}");
        }
        for filter in [
            "ACLCAT write",
            "ACLCAT read",
            "ACLCAT keyspace",
            "ACLCAT pubsub",
            "ACLCAT admin",
            "PATTERN x*",
            "PATTERN *|*",
            "PATTERN CONFIG*",
        ] {
            let o = names(&call(&mut ours, &format!("COMMAND LIST FILTERBY {filter}")));
            let t = names(&call(
                &mut theirs,
                &format!("COMMAND LIST FILTERBY {filter}"),
            ));
            let expected: BTreeSet<String> = t.intersection(&listed).cloned().collect();
            assert_eq!(o, expected, "COMMAND LIST FILTERBY {filter}");
        }
    }
}

#[test]
fn getkeys_finds_redis_keys_and_flags() {
    let Some((redis, _dir, server)) = serve_beside_redis(&[]) else {
        return;
    };
    let mut ours = Resp::connect(&server);
    let mut theirs = Resp::connect_to(redis.addr);
    let lines = [
        "GET k",
        "GET",
        "GET a b",
        "SET k v",
        "SET k v GET",
        "SET k v EX 10 get",
        "MSET a 1 b 2 c 3",
        "MSET a 1 b",
        "DEL a b c",
        "LMOVE a b LEFT RIGHT",
        "RPOPLPUSH a b",
        "SMOVE a b m",
        "RENAME a b",
        "COPY a b",
        "SORT k",
        "SORT k BY w:* LIMIT 0 1 GET # STORE d",
        "SORT k STORE d1 STORE d2",
        "SORT_RO k BY x",
        "MIGRATE h 1 k 0 5",
        "MIGRATE h 1 '' 0 5 KEYS a b",
        "MIGRATE h 1 '' 0 5 COPY AUTH keys KEYS a",
        "MIGRATE h 1 '' 0 5 AUTH2 u keys KEYS a",
        "MIGRATE h 1 k 0 5 KEYS a",
        "MIGRATE h 1 k 0 5 REPLACE",
        "RESTORE-ASKING k 0 p",
        "EVAL x 0",
        "EVAL x 2 a b c",
        "EVAL x 3 a b",
        "EVALSHA x abc a",
        "FCALL f 1 a",
        "FCALL_RO f 0",
        "ZUNIONSTORE d 2 a b WEIGHTS 1 2",
        "ZUNIONSTORE d x a",
        "ZINTER 2 a b",
        "ZDIFF 0 a",
        "ZINTERCARD 1 a LIMIT 3",
        "SINTERCARD 2 a b",
        "SINTERSTORE d a b",
        "LMPOP 2 a b LEFT",
        "BLMPOP 0 2 a b LEFT",
        "BZMPOP 0 1 a MIN",
        "ZMPOP 1 a MAX",
        "BLPOP a b 0",
        "XREAD STREAMS a b 0 0",
        "XREAD COUNT 2 BLOCK 0 STREAMS a 0",
        "XREAD STREAMS a",
        "XREADGROUP GROUP g c STREAMS a >",
        "XREADGROUP GROUP g c NOACK STREAMS a b > >",
        "XADD s * f v",
        "XINFO STREAM s",
        "XGROUP CREATE s g $",
        "OBJECT ENCODING k",
        "OBJECT NOSUCH k",
        "MEMORY USAGE k",
        "BITFIELD k GET u8 0",
        "BITFIELD k GET u8 0 SET u8 0 1",
        "BITFIELD k OVERFLOW SAT",
        "BITFIELD_RO k GET u8 0",
        "BITOP AND d a b",
        "GEORADIUS k 0 0 1 km STORE d",
        "GEORADIUS k 0 0 1 km STOREDIST d WITHDIST",
        "GEORADIUSBYMEMBER k m 1 km",
        "GEOSEARCHSTORE d s FROMMEMBER m BYRADIUS 1 km",
        "PFMERGE d a b",
        "PFCOUNT a b",
        "WATCH a b",
        "EXISTS a a",
        "TOUCH a",
        "PING",
        "CONFIG GET x",
        "NOSUCH k",
        "SPUBLISH ch m",
        "PUBLISH ch m",
        "HSET h f v f2 v2",
        "LCS a b",
        "RESTORE k 0 x",
        "OBJECT FREQ k",
        "SINTER a",
        "MGET a b c",
        "GETEX k PERSIST",
        "BLMOVE a b LEFT LEFT 0",
        "ZRANGESTORE d s 0 -1",
        "SUNIONSTORE d a",
    ];
    for with_flags in [false, true] {
        let sub = if with_flags {
            "GETKEYSANDFLAGS"
        } else {
            "GETKEYS"
        };
        for line in lines {
            let full = format!("COMMAND {sub} {line}");
            assert_eq!(call(&mut ours, &full), call(&mut theirs, &full), "{full}");
        }
    }
}

#[test]
fn every_container_helps_and_refuses_as_redis_does() {
    let Some((redis, _dir, server)) = serve_beside_redis(&[]) else {
        return;
    };
    let mut ours = Resp::connect(&server);
    let mut theirs = Resp::connect_to(redis.addr);
    let listed = names(&call(&mut ours, "COMMAND LIST"));
    let containers: BTreeSet<&str> = listed
        .iter()
        .filter_map(|n| n.split_once('|').map(|(c, _)| c))
        .collect();
    for c in containers {
        // LATENCY GRAPH and HISTOGRAM are not built, MODULE LOAD, LOADEX
        // and UNLOAD refused: their HELP does not offer them.
        let help = !matches!(c, "latency" | "module");
        // Bare COMMAND lists every command (in Redis's hash order).
        let bare = c != "command";
        let lines = [
            (help, format!("{c} HELP")),
            (bare, c.to_string()),
            (true, format!("{c} NOSUCH")),
            (true, format!("{c} HELP extra")),
        ];
        for line in lines.into_iter().filter(|(on, _)| *on).map(|(_, l)| l) {
            assert_eq!(call(&mut ours, &line), call(&mut theirs, &line), "{line}");
        }
    }
    for line in ["CONFIG REWRITE", "CONFIG REWRITE x"] {
        assert_eq!(call(&mut ours, line), call(&mut theirs, line), "{line}");
    }
    // Scripts' calls are checked alike (Redis's scriptCall): an unknown
    // subcommand, a subcommand's wrong argument count.
    for script in [
        "return redis.pcall('object', 'nosuch', 'k')",
        "return redis.pcall('object', 'encoding')",
        "return redis.pcall('xinfo', 'help', 'x')",
        "return redis.pcall('object', 'help')",
        "return redis.pcall('xgroup', 'help')",
    ] {
        let line = ["EVAL", script, "0"];
        assert_eq!(ours.call(&line), theirs.call(&line), "{script}");
    }
}
