//! The paged collections' differential runner (tests/resp_paged*.rs):
//! seeds of random commands side by side with a stock redis-server.

use nvdepot_resp::Value;

use super::common::{temp_dir, RefServer, Server};
use super::shapes::{brief, pipeline, prepare, show, Cmd, Conn, RSS_BOUND};

pub use super::shapes::pages;

pub fn flat(v: &Value) -> Vec<Vec<u8>> {
    let bytes = |i: &Value| match i {
        Value::Bulk(Some(b)) => b.clone(),
        other => format!("{other:?}").into_bytes(),
    };
    match v {
        Value::Array(Some(items)) => items.iter().map(bytes).collect(),
        Value::Map(pairs) => pairs
            .iter()
            .flat_map(|(k, v)| [bytes(k), bytes(v)])
            .collect(),
        _ => Vec::new(),
    }
}

/// The replies as a test compares them: a hash table's order (HGETALL,
/// HKEYS, HVALS) as sorted pairs or elements, HRANDFIELD by its size.
pub fn comparable(cmd: &Cmd, v: &Value) -> Value {
    let name = String::from_utf8_lossy(&cmd[0]).to_ascii_uppercase();
    match name.as_str() {
        "HGETALL" if matches!(v, Value::Array(Some(_)) | Value::Map(_)) => {
            let items = flat(v);
            let mut pairs: Vec<Vec<u8>> = items
                .chunks(2)
                .map(|p| [&p[0][..], b"\0", &p[1][..]].concat())
                .collect();
            pairs.sort();
            Value::Array(Some(
                pairs.into_iter().map(|p| Value::Bulk(Some(p))).collect(),
            ))
        }
        "HKEYS" | "HVALS" | "SMEMBERS" | "SINTER" | "SUNION" | "SDIFF"
            if matches!(v, Value::Array(Some(_))) =>
        {
            let mut items = flat(v);
            items.sort();
            Value::Array(Some(
                items.into_iter().map(|p| Value::Bulk(Some(p))).collect(),
            ))
        }
        "HRANDFIELD" | "SRANDMEMBER" | "SPOP" | "ZRANDMEMBER" => match v {
            Value::Array(Some(items)) => Value::Integer(items.len() as i64),
            Value::Bulk(Some(_)) => Value::Simple(b"a member".to_vec()),
            other => other.clone(),
        },
        _ => v.clone(),
    }
}

/// Every key of `keys` as the comparison sees it: its TYPE, then each
/// read of `reads` with `$` standing for the key (e.g. `["HGETALL", "$"]`),
/// made [`comparable`].
pub fn snapshot(conn: &mut Conn, keys: &[&str], reads: &[&[&str]]) -> Vec<Value> {
    let mut cmds: Vec<Cmd> = Vec::new();
    for k in keys {
        cmds.push(vec![b"TYPE".to_vec(), k.as_bytes().to_vec()]);
        for read in reads {
            let arg = |a: &str| if a == "$" { k.as_bytes() } else { a.as_bytes() }.to_vec();
            cmds.push(read.iter().map(|a| arg(a)).collect());
        }
    }
    let got = pipeline(conn, &cmds);
    cmds.iter()
        .zip(&got)
        .map(|(c, v)| comparable(c, v))
        .collect()
}

/// Seeds of random commands (`next` per seed) side by side with a stock
/// redis-server, compared reply by reply as [`comparable`] says; a SPOP
/// (random) is followed by a DEL of its key on both sides, to stay in
/// step. After each seed `snapshot` must agree, the largest size
/// `size_cmd` answered must pass `grown` (the collections grew past the
/// paged threshold), and some pages must exist.
pub fn differential(
    what: &str,
    ops: usize,
    seeds: u64,
    mut next: impl FnMut(u64) -> Box<dyn FnMut() -> Cmd>,
    snapshot: fn(&mut Conn) -> Vec<Value>,
    size_cmd: &[u8],
    grown: i64,
) {
    let Some(redis) = RefServer::redis_or_skip() else {
        return;
    };
    let dir = temp_dir();
    let server = Server::start_serve(
        &dir.path().join("store"),
        &[
            "--size",
            "1G",
            "--segment-size",
            "16M",
            "--expiry-sweep-secs",
            "1",
            // The DRAM tier at half its default: the RSS bound then
            // leaves room for the allocator's arenas in long runs.
            "--cache-mb",
            "32",
        ],
    );
    let mut peak = 0;
    for seed in 0..seeds {
        let mut command = next(seed);
        let (mut a, mut b) = (
            Conn::connect("redis-server", redis.addr),
            Conn::connect("nvdepot", server.addr),
        );
        prepare(&mut a, &mut b);
        let mut recent: Vec<String> = Vec::new();
        let mut largest = 0;
        for sent in 0..ops {
            let cmd = command();
            let want = comparable(&cmd, &pipeline(&mut a, std::slice::from_ref(&cmd))[0]);
            let got = comparable(&cmd, &pipeline(&mut b, std::slice::from_ref(&cmd))[0]);
            if want != got {
                panic!(
                    "seed {seed}, command {sent}: {}\n redis-server: {}\n nvdepot:      {}\n \
                     before it:\n  {}",
                    show(&cmd).chars().take(300).collect::<String>(),
                    brief(&want),
                    brief(&got),
                    recent.join("\n  ")
                );
            }
            // A random pop leaves the two sets different: drop it on both.
            if cmd[0] == b"SPOP" {
                let del = vec![b"DEL".to_vec(), cmd[1].clone()];
                pipeline(&mut a, std::slice::from_ref(&del));
                pipeline(&mut b, std::slice::from_ref(&del));
            }
            if cmd[0] == size_cmd {
                if let Value::Integer(n) = want {
                    largest = largest.max(n);
                }
            }
            recent.push(show(&cmd).chars().take(160).collect());
            let keep = recent.len().saturating_sub(
                std::env::var("NVDEPOT_RECENT")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(12),
            );
            recent.drain(..keep);
            if sent % 100 == 0 {
                peak = peak.max(server.rss());
                if std::env::var("NVDEPOT_RSS_LOG").is_ok() {
                    let info = vec![b"INFO".to_vec(), b"nvdepot".to_vec()];
                    let text = match &pipeline(&mut b, &[info])[0] {
                        Value::Bulk(Some(t)) => String::from_utf8_lossy(t).replace("\r\n", " "),
                        _ => String::new(),
                    };
                    eprintln!("{sent} rss {} MB {text}", server.rss() >> 20);
                }
                assert!(peak < RSS_BOUND, "RSS {peak} past {RSS_BOUND}");
            }
        }
        let (want, got) = (snapshot(&mut a), snapshot(&mut b));
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            assert!(
                w == g,
                "seed {seed}: snapshot item {i} differs: {} vs {}",
                brief(w),
                brief(g)
            );
        }
        eprintln!(
            "resp_paged {what}: seed {seed}: {ops} commands, every reply the same (largest {largest})"
        );
        assert!(
            largest > grown,
            "the {what} grew large enough to page ({largest})"
        );
        assert!(pages(&mut b) > 0, "some {what} are paged");
    }
    eprintln!("resp_paged {what}: peak RSS {} MB", peak >> 20);
    let log = server.stderr.lock().unwrap().clone();
    assert!(
        !log.contains("panicked"),
        "the server logged a panic:\n{log}"
    );
}
