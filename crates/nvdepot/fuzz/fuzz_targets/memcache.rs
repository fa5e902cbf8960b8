//! `nvdepot memcache` over a socket, against memcached: each input's bytes
//! drive the shape-space generator (`tests/shapes/memcache.rs`: keys of
//! 0-251 bytes, values to the item limit and past it, boundary numbers,
//! multi-gets of thousands of keys, noreply, pipelines) instead of a
//! seeded RNG. Asserted per input: the reply stream equal to memcached's
//! (CAS masked), closes alike, the server alive, no panic in its log, its
//! RSS under the generator's bound.
//!
//! Needs `NVDEPOT_BIN` (the `nvdepot` binary to test; default the debug
//! build of this checkout) and `memcached` on the PATH.
#![no_main]

mod harness;
#[path = "../../tests/shapes/memcache.rs"]
mod shapes;

use std::sync::{Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;
use rand::RngCore;

use harness::{InputRng, Servers};
use shapes::{compare, next_pipeline, rss, Conn, Gen, RSS_BOUND};

fn servers() -> &'static Mutex<Servers> {
    static SERVERS: OnceLock<Mutex<Servers>> = OnceLock::new();
    SERVERS.get_or_init(|| {
        Mutex::new(Servers::start(
            "memcache",
            "memcached",
            &[
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
            ],
            "-p",
            &["memcache", "-l", "127.0.0.1", "-I", "1m"],
            "-p",
        ))
    })
}

fuzz_target!(|data: &[u8]| {
    let mut s = servers().lock().unwrap_or_else(|p| p.into_inner());
    s.assert_running();
    let mut a = Conn::connect("memcached", s.reference_addr);
    let mut b = Conn::connect("nvdepot", s.nvdepot_addr);
    let flush = b"flush_all\r\n";
    assert_eq!(a.pipeline(flush), b.pipeline(flush));
    let mut g = Gen {
        rng: InputRng::new(data),
    };
    let mut held = None;
    let mut requests = 0;
    while !g.rng.exhausted() && requests < 500 {
        let n = 1 + (g.rng.next_u32() % 64) as usize;
        let batch = next_pipeline(&mut g, n, &mut held);
        requests += batch.len();
        match compare(&mut a, &mut b, &batch) {
            Err(why) => panic!("{why}"),
            Ok(true) => {
                a = Conn::connect("memcached", s.reference_addr);
                b = Conn::connect("nvdepot", s.nvdepot_addr);
            }
            Ok(false) => {}
        }
    }
    s.assert_healthy(rss, RSS_BOUND);
});
