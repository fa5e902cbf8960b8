//! The whole shape space of memcached text requests, side by side with
//! stock memcached 1.6 (issue 35): keys of 0, 1, 250 and 251 bytes and odd
//! bytes, values from 0 bytes to the 1 MiB item limit and one past it,
//! data blocks shorter or longer than their header says, flags and
//! exptimes and deltas at and past every boundary (2^32, 2^64, negative,
//! 30 days), multi-gets of up to 5 000 keys, `noreply` everywhere, wrong
//! arities and unknown commands, sent as pipelines of up to 2 000
//! requests (from a writer thread) each closed by `mn`.
//!
//! Asserted: the byte streams of the two servers' replies are the same,
//! once CAS uniques are masked (`gets`/`gats` print each server's own); a
//! request that closes one connection closes the other; nvdepot's RSS
//! stays under `RSS_BOUND` after every pipeline, and it logs no panic.
//!
//! `NVDEPOT_MC_SHAPES_OPS` requests per seed (default 2 000),
//! `NVDEPOT_MC_SHAPES_SEEDS` seeds (default 2), `NVDEPOT_MC_SHAPES_SEED0`
//! the first. The generator is `shapes/memcache.rs`; the fuzz target
//! `memcache` drives the same one with libFuzzer's bytes.

mod common;
#[path = "shapes/memcache.rs"]
mod shapes;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use common::{env_or, temp_dir, RefServer, Server};
use shapes::{compare, next_pipeline, rss, show, Conn, Gen, RSS_BOUND};

#[test]
fn every_shape_answers_as_memcached() {
    let args = [
        "-l",
        "127.0.0.1",
        "-U",
        "0",
        "-m",
        "256",
        "-t",
        "2",
        "-u",
        "root",
        "-I",
        "1m",
    ];
    let Some(memcached) = RefServer::start_or_skip("memcached", &args, "-p", "memcached") else {
        return;
    };
    let dir = temp_dir();
    let server = Server::start_sized(
        &dir.path().join("store"),
        &["--size", "512M", "--segment-size", "8M", "-I", "1m"],
    );
    let ops: usize = env_or("NVDEPOT_MC_SHAPES_OPS", 2000);
    let seeds: u64 = env_or("NVDEPOT_MC_SHAPES_SEEDS", 2);
    let seed0: u64 = env_or("NVDEPOT_MC_SHAPES_SEED0", 0);
    let mut peak = 0;
    let mut total = 0;
    for seed in seed0..seed0 + seeds {
        let mut g = Gen {
            rng: StdRng::seed_from_u64(seed),
        };
        let mut a = Conn::connect("memcached", memcached.addr);
        let mut b = Conn::connect("nvdepot", server.addr);
        let flush = b"flush_all\r\n";
        assert_eq!(a.pipeline(flush), b.pipeline(flush));
        let mut sent = 0;
        let mut recent: Vec<String> = Vec::new();
        let mut held: Option<Vec<u8>> = None;
        while sent < ops {
            let n = match g.rng.gen_range(0..20) {
                0 => g.rng.gen_range(100..2000),
                1..=3 => g.rng.gen_range(2..50),
                _ => 1,
            }
            .min(ops - sent);
            let requests = next_pipeline(&mut g, n, &mut held);
            let n = requests.len();
            if let Ok(dir) = std::env::var("NVDEPOT_MC_DUMP") {
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir_all(&dir).unwrap();
                for (i, r) in requests.iter().enumerate() {
                    std::fs::write(format!("{dir}/r{i:04}"), r).unwrap();
                }
            }
            for r in &requests {
                recent.push(show(&r[..r.len().min(200)]));
            }
            let keep = recent.len().saturating_sub(30);
            recent.drain(..keep);
            match compare(&mut a, &mut b, &requests) {
                Err(why) => {
                    let log = server.stderr.lock().unwrap().clone();
                    let tail =
                        String::from_utf8_lossy(&log.as_bytes()[log.len().saturating_sub(4000)..]);
                    panic!(
                        "seed {seed}, requests {sent}..{}: {why}\nthe requests:\n{}\nnvdepot's log (end):\n{tail}",
                        sent + n,
                        recent.join("\n")
                    )
                }
                Ok(true) => {
                    // Both closed the connection alike: go on with new ones.
                    a = Conn::connect("memcached", memcached.addr);
                    b = Conn::connect("nvdepot", server.addr);
                }
                Ok(false) => {}
            }
            sent += n;
            let now = rss(server.child.id());
            peak = peak.max(now);
            assert!(
                now < RSS_BOUND,
                "seed {seed}: RSS {} MB after request {sent}",
                now >> 20
            );
        }
        total += sent;
        eprintln!("memcache_shapes: seed {seed}: {sent} requests, every reply the same");
    }
    let log = server.stderr.lock().unwrap().clone();
    assert!(
        !log.contains("panicked"),
        "the server logged a panic:\n{log}"
    );
    eprintln!(
        "memcache_shapes: {total} requests, peak RSS {} MB (bound {} MB)",
        peak >> 20,
        RSS_BOUND >> 20
    );
}
