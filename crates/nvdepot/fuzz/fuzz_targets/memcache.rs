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

#[path = "../../tests/shapes/memcache.rs"]
mod shapes;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use rand::RngCore;

use shapes::{compare, next_pipeline, rss, Conn, Gen, RSS_BOUND};

/// The generator's random numbers, read from the input (zeros past its
/// end, where generation stops).
struct InputRng<'a> {
    data: &'a [u8],
    at: usize,
}

impl InputRng<'_> {
    fn exhausted(&self) -> bool {
        self.at >= self.data.len()
    }
}

impl RngCore for InputRng<'_> {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        self.fill_bytes(&mut b);
        u64::from_le_bytes(b)
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for d in dest {
            *d = self.data.get(self.at).copied().unwrap_or(0);
            self.at += 1;
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

struct Servers {
    reference: Child,
    nvdepot: Child,
    reference_addr: SocketAddr,
    nvdepot_addr: SocketAddr,
    log: PathBuf,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Spawns `cmd` so that it dies with this process (libFuzzer exits
/// without running destructors).
fn spawn_tied(cmd: &mut Command) -> Child {
    // SAFETY: prctl is async-signal-safe and touches no memory of ours;
    // it runs in the child between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.spawn().expect("spawn")
}

fn wait_for(addr: SocketAddr, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "{what} did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn servers() -> &'static Mutex<Servers> {
    static SERVERS: OnceLock<Mutex<Servers>> = OnceLock::new();
    SERVERS.get_or_init(|| {
        let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let target = here.join("../../../target");
        let bin = std::env::var_os("NVDEPOT_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| target.join("debug/nvdepot"));
        // Stores of earlier runs (their servers died with them).
        if let Ok(entries) = std::fs::read_dir(&target) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let pid = name
                    .strip_prefix("fuzz-memcache-")
                    .map(|p| p.trim_end_matches(".log"));
                if let Some(pid) = pid {
                    if !PathBuf::from(format!("/proc/{pid}")).exists() {
                        let _ = std::fs::remove_dir_all(e.path());
                        let _ = std::fs::remove_file(e.path());
                    }
                }
            }
        }
        // Not /tmp: a tmpfs may refuse O_DIRECT.
        let store = target.join(format!("fuzz-memcache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&store);
        let log = target.join(format!("fuzz-memcache-{}.log", std::process::id()));
        let (rp, np) = (free_port(), free_port());
        let reference = spawn_tied(
            Command::new("memcached")
                .args([
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
                ])
                .args(["-I", "1m", "-p", &rp.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        let nvdepot = spawn_tied(
            Command::new(&bin)
                .args(["memcache", "-l", "127.0.0.1", "-p", &np.to_string()])
                .args([
                    "--size",
                    "512M",
                    "--segment-size",
                    "8M",
                    "-I",
                    "1m",
                    "--data",
                ])
                .arg(&store)
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap()),
        );
        let reference_addr: SocketAddr = format!("127.0.0.1:{rp}").parse().unwrap();
        let nvdepot_addr: SocketAddr = format!("127.0.0.1:{np}").parse().unwrap();
        wait_for(reference_addr, "memcached");
        wait_for(nvdepot_addr, "nvdepot memcache");
        Mutex::new(Servers {
            reference,
            nvdepot,
            reference_addr,
            nvdepot_addr,
            log,
        })
    })
}

fuzz_target!(|data: &[u8]| {
    let s = servers().lock().unwrap_or_else(|p| p.into_inner());
    let mut s = s;
    assert!(
        s.reference.try_wait().unwrap().is_none(),
        "memcached exited"
    );
    assert!(s.nvdepot.try_wait().unwrap().is_none(), "nvdepot exited");
    let mut a = Conn::connect("memcached", s.reference_addr);
    let mut b = Conn::connect("nvdepot", s.nvdepot_addr);
    let flush = b"flush_all\r\n";
    assert_eq!(a.pipeline(flush), b.pipeline(flush));
    let mut g = Gen {
        rng: InputRng { data, at: 0 },
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
    let log = std::fs::read_to_string(&s.log).unwrap_or_default();
    assert!(!log.contains("panicked"), "nvdepot logged a panic:\n{log}");
    let now = rss(s.nvdepot.id());
    assert!(now < RSS_BOUND, "nvdepot RSS {} MB", now >> 20);
});
