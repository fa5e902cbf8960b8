//! The whole shape space of Redis requests, side by side with a stock
//! redis-server (issue 35): seeded random commands whose arguments are
//! drawn from the shapes that broke servers before — the empty key and
//! value, binary bytes (NUL, CR, LF), long keys, values up to 1 MiB,
//! numbers at and past every boundary (i64 extremes, 2^31, 2^63, offsets
//! near 512 MiB, TTLs that overflow when made milliseconds, floats like
//! `inf` and `1e309`), arities from 0 to 10 000 arguments, glob patterns
//! of random `*?[]^\-`, wrong arities and unknown commands mixed in — sent
//! as pipelines of up to 3 000 commands without waiting for replies. The
//! generator is `shapes/resp.rs`; the fuzz target `serve` drives the same
//! one with libFuzzer's bytes.
//!
//! Asserted: a reply for every request, in order, equal to redis-server's
//! (up to the tolerances of `resp_differential.rs`: TTL drift, KEYS/SCAN
//! as sets, INCRBYFLOAT's last digits; and the documented key limit:
//! keys over 65 535 bytes get an error from nvdepot), the server's RSS
//! under `RSS_BOUND` after every pipeline, and no panic in its log.
//!
//! `NVDEPOT_SHAPES_OPS` commands per seed (default 2 000),
//! `NVDEPOT_SHAPES_APPENDFSYNC` the server's `--appendfsync` (default
//! `always`),
//! `NVDEPOT_SHAPES_SEEDS` seeds (default 2), `NVDEPOT_SHAPES_SEED0` the
//! first seed. The long run (≥ 1 000 000 commands) is in
//! docs/RELIABILITY.md.

mod common;
#[path = "shapes/resp.rs"]
mod shapes;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use common::{env_or, temp_dir, RefServer, Server};
use shapes::{brief, compare, next_pipeline, prepare, rss, show, Conn, Gen, RSS_BOUND};

#[test]
fn every_shape_answers_as_redis() {
    let Some(redis) = RefServer::redis_or_skip() else {
        return;
    };
    let dir = temp_dir();
    // `NVDEPOT_SHAPES_APPENDFSYNC=everysec` for long runs: the replies are
    // the same, without a device flush per write (`always`, the default
    // and what CI runs, is latency-bound at a flush per pipelined write).
    let fsync = std::env::var("NVDEPOT_SHAPES_APPENDFSYNC").unwrap_or_else(|_| "always".into());
    let server = Server::start_serve(
        &dir.path().join("store"),
        &[
            "--size",
            "512M",
            "--segment-size",
            "8M",
            "--appendfsync",
            &fsync,
        ],
    );
    let ops: usize = env_or("NVDEPOT_SHAPES_OPS", 2000);
    let seeds: u64 = env_or("NVDEPOT_SHAPES_SEEDS", 2);
    let seed0: u64 = env_or("NVDEPOT_SHAPES_SEED0", 0);
    let exat = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 100_000;
    // `NVDEPOT_SHAPES_TIMING=1`: where the run's time goes, by command.
    let timing = std::env::var_os("NVDEPOT_SHAPES_TIMING").is_some();
    let mut spent: std::collections::HashMap<String, (u64, f64)> = Default::default();
    let mut peak = 0u64;
    let mut total = 0usize;
    for seed in seed0..seed0 + seeds {
        let mut g = Gen {
            rng: StdRng::seed_from_u64(seed),
            exat,
        };
        let (mut a, mut b) = (
            Conn::connect("redis-server", redis.addr),
            Conn::connect("nvdepot", server.addr),
        );
        prepare(&mut a, &mut b);
        let mut sent = 0;
        let mut recent: Vec<String> = Vec::new();
        while sent < ops {
            let n = match g.rng.gen_range(0..20) {
                0 => g.rng.gen_range(100..3000),
                1..=3 => g.rng.gen_range(2..50),
                _ => 1,
            }
            .min(ops - sent);
            let cmds = next_pipeline(&mut g, n);
            if std::env::var_os("NVDEPOT_SHAPES_TRACE").is_some() {
                for c in &cmds {
                    eprintln!("> {}", show(c));
                }
            }
            let started = std::time::Instant::now();
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                compare(&mut a, &mut b, &cmds)
            }));
            if timing {
                let name = if cmds.len() == 1 {
                    String::from_utf8_lossy(cmds[0].first().map_or(&b""[..], |c| c)).to_uppercase()
                } else {
                    "(pipeline)".into()
                };
                let e = spent.entry(name).or_insert((0, 0.0));
                e.0 += 1;
                e.1 += started.elapsed().as_secs_f64();
                if cmds.len() > 1 && started.elapsed().as_secs_f64() > 0.5 {
                    let mut h: std::collections::BTreeMap<String, usize> = Default::default();
                    let mut bytes = 0;
                    for c in &cmds {
                        *h.entry(String::from_utf8_lossy(&c[0]).to_uppercase())
                            .or_default() += 1;
                        bytes += c.iter().map(|a| a.len()).sum::<usize>();
                    }
                    eprintln!(
                        "slow pipeline {:.2} s, {} commands, {} KiB: {h:?}",
                        started.elapsed().as_secs_f64(),
                        cmds.len(),
                        bytes >> 10
                    );
                }
            }
            let outcome = match outcome {
                Ok(o) => o,
                Err(e) => {
                    let log = server.stderr.lock().unwrap().clone();
                    eprintln!("nvdepot's log:\n{log}");
                    std::panic::resume_unwind(e)
                }
            };
            recent.extend(cmds.iter().map(|c| show(c)));
            if let Err(m) = outcome {
                let upto = recent.len() - (cmds.len() - m.index - 1);
                let from = upto.saturating_sub(40);
                panic!(
                    "seed {seed}, command {} `{}`:\nredis-server {}\nnvdepot      {}\nthe commands before it:\n{}",
                    sent + m.index,
                    show(&cmds[m.index]),
                    brief(&m.want),
                    brief(&m.got),
                    recent[from..upto].join("\n")
                );
            }
            let keep = recent.len().saturating_sub(40);
            recent.drain(..keep);
            sent += cmds.len();
            let now = rss(server.child.id());
            if std::env::var_os("NVDEPOT_SHAPES_TRACE").is_some() {
                eprintln!("# {sent} commands: RSS {} MB", now >> 20);
            }
            peak = peak.max(now);
            assert!(
                now < RSS_BOUND,
                "seed {seed}: RSS {} MB after command {sent}",
                now >> 20
            );
        }
        total += sent;
        eprintln!("resp_shapes: seed {seed}: {sent} commands, every reply the same");
    }
    if timing {
        let mut by: Vec<_> = spent.into_iter().collect();
        by.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
        for (name, (n, secs)) in by.iter().take(15) {
            eprintln!(
                "{name:>12}: {n:>6} × {:>8.3} ms = {secs:.2} s",
                secs * 1e3 / *n as f64
            );
        }
    }
    let log = server.stderr.lock().unwrap().clone();
    if timing {
        eprintln!("nvdepot's log:\n{log}");
    }
    assert!(
        !log.contains("panicked"),
        "the server logged a panic:\n{log}"
    );
    eprintln!(
        "resp_shapes: {total} commands, peak RSS {} MB (bound {} MB)",
        peak >> 20,
        RSS_BOUND >> 20
    );
}
