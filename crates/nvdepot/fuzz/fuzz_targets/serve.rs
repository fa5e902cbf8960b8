//! `nvdepot serve` over a socket, against redis-server: each input's bytes
//! drive the shape-space generator (`tests/shapes/resp.rs`: empty, binary
//! and over-limit keys and values, boundary numbers, thousands of
//! arguments, pipelines) instead of a seeded RNG, so libFuzzer's
//! mutations change the commands sent. Asserted per input: every reply
//! equal to redis-server's (the documented tolerances), the server alive,
//! no panic in its log, its RSS under the generator's bound.
//!
//! Needs `NVDEPOT_BIN` (the `nvdepot` binary to test; default the debug
//! build of this checkout) and `redis-server` on the PATH.
#![no_main]

mod harness;
#[path = "../../tests/shapes/resp.rs"]
mod shapes;

use std::sync::{Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;
use rand::RngCore;

use harness::{InputRng, Servers};
use shapes::{brief, compare, next_pipeline, prepare, rss, show, Conn, Gen, RSS_BOUND};

fn servers() -> &'static Mutex<Servers> {
    static SERVERS: OnceLock<Mutex<Servers>> = OnceLock::new();
    SERVERS.get_or_init(|| {
        Mutex::new(Servers::start(
            "serve",
            "redis-server",
            &[
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--enable-debug-command",
                "local",
            ],
            "--port",
            &["serve", "--bind", "127.0.0.1"],
            "--port",
        ))
    })
}

fuzz_target!(|data: &[u8]| {
    let mut s = servers().lock().unwrap_or_else(|p| p.into_inner());
    s.assert_running();
    let mut a = Conn::connect("redis-server", s.reference_addr);
    let mut b = Conn::connect("nvdepot", s.nvdepot_addr);
    prepare(&mut a, &mut b);
    let exat = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 100_000;
    let mut g = Gen {
        rng: InputRng::new(data),
        exat,
    };
    let mut commands = 0;
    while !g.rng.exhausted() && commands < 500 {
        let n = 1 + (g.rng.next_u32() % 64) as usize;
        let cmds = next_pipeline(&mut g, n);
        commands += cmds.len();
        if let Err(m) = compare(&mut a, &mut b, &cmds) {
            panic!(
                "command `{}`:\nredis-server {}\nnvdepot      {}",
                show(&cmds[m.index]),
                brief(&m.want),
                brief(&m.got)
            );
        }
    }
    s.assert_healthy(rss, RSS_BOUND);
});
