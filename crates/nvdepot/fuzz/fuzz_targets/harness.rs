//! What the whole-server targets share: the generator's random numbers
//! read from the fuzz input, and the pair of servers (the reference and
//! `nvdepot`) each target starts once and checks after every input.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rand::RngCore;

/// The generator's random numbers, read from the input (zeros past its
/// end, where generation stops).
pub struct InputRng<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> InputRng<'a> {
    pub fn new(data: &'a [u8]) -> InputRng<'a> {
        InputRng { data, at: 0 }
    }

    pub fn exhausted(&self) -> bool {
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

/// The reference server and `nvdepot`, started once per fuzzing process.
pub struct Servers {
    reference: Child,
    reference_name: &'static str,
    nvdepot: Child,
    pub reference_addr: SocketAddr,
    pub nvdepot_addr: SocketAddr,
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

/// Removes the stores and logs `fuzz-{target}-PID` of runs that are gone
/// (their servers died with them).
fn remove_stale(dir: &Path, target: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!("fuzz-{target}-");
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix(&prefix)
            .map(|p| p.trim_end_matches(".log"));
        if let Some(pid) = pid {
            if !PathBuf::from(format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(e.path());
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

impl Servers {
    /// Starts `reference` (its command with the port appended as
    /// `port_flag PORT`) and `NVDEPOT_BIN` (default: this checkout's debug
    /// build) with `face` arguments, `--port`-like `nvdepot_port_flag`, and
    /// a 512 MiB store of 8 MiB segments named after `target`.
    pub fn start(
        target: &str,
        reference_name: &'static str,
        reference: &[&str],
        port_flag: &str,
        face: &[&str],
        nvdepot_port_flag: &str,
    ) -> Servers {
        let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let dir = here.join("../../../target");
        let bin = std::env::var_os("NVDEPOT_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| dir.join("debug/nvdepot"));
        remove_stale(&dir, target);
        // Not /tmp: a tmpfs may refuse O_DIRECT.
        let store = dir.join(format!("fuzz-{target}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&store);
        let log = dir.join(format!("fuzz-{target}-{}.log", std::process::id()));
        let (rp, np) = (free_port(), free_port());
        let reference_child = spawn_tied(
            Command::new(reference_name)
                .args(reference)
                .args([port_flag, &rp.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        let nvdepot = spawn_tied(
            Command::new(&bin)
                .args(face)
                .args([nvdepot_port_flag, &np.to_string()])
                .args(["--size", "512M", "--segment-size", "8M", "--data"])
                .arg(&store)
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap()),
        );
        let reference_addr: SocketAddr = format!("127.0.0.1:{rp}").parse().unwrap();
        let nvdepot_addr: SocketAddr = format!("127.0.0.1:{np}").parse().unwrap();
        wait_for(reference_addr, reference_name);
        wait_for(nvdepot_addr, "nvdepot");
        Servers {
            reference: reference_child,
            reference_name,
            nvdepot,
            reference_addr,
            nvdepot_addr,
            log,
        }
    }

    /// Before an input: both servers still run.
    pub fn assert_running(&mut self) {
        let name = self.reference_name;
        assert!(
            self.reference.try_wait().unwrap().is_none(),
            "{name} exited"
        );
        assert!(self.nvdepot.try_wait().unwrap().is_none(), "nvdepot exited");
    }

    /// After an input: no panic in nvdepot's log, its RSS (as `rss` reads
    /// it from a pid) under `bound`.
    pub fn assert_healthy(&self, rss: impl Fn(u32) -> u64, bound: u64) {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        assert!(!log.contains("panicked"), "nvdepot logged a panic:\n{log}");
        let now = rss(self.nvdepot.id());
        assert!(now < bound, "nvdepot RSS {} MB", now >> 20);
    }
}
