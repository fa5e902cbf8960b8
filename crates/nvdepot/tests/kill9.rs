//! `kill -9` durability: every write `nvdepot kv load` acknowledged before
//! the process was killed must be readable afterwards, and the store must
//! pass `nvdepot check` both before and after recovery.
//!
//! Each trial kills a loading process after a random delay, derived from a
//! seed that is printed; `NVDEPOT_KILL9_SEED` replays a run and
//! `NVDEPOT_KILL9_TRIALS` (default 3) runs more trials. The release-build
//! campaign is `scripts/kill9-campaign.sh`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use rand::{rngs::StdRng, Rng, SeedableRng};

const BIN: &str = env!("CARGO_BIN_EXE_nvdepot");

/// More keys than any trial can write before it is killed.
const COUNT: &str = "1000000";
const VALUE_BYTES: &str = "100";

fn env_u64(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    Some(
        text.parse()
            .unwrap_or_else(|_| panic!("{name}={text:?} is not a number")),
    )
}

#[test]
fn acknowledged_writes_survive_kill_9() {
    let trials = env_u64("NVDEPOT_KILL9_TRIALS").unwrap_or(3);
    let seed = env_u64("NVDEPOT_KILL9_SEED").unwrap_or_else(|| {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap();
        now.as_nanos() as u64
    });
    eprintln!("kill9: seed {seed} ({trials} trials; NVDEPOT_KILL9_SEED={seed} replays)");
    let mut rng = StdRng::seed_from_u64(seed);
    for number in 0..trials {
        let trial = Trial {
            number,
            delay: Duration::from_millis(rng.gen_range(200..=1500)),
            value_seed: rng.gen::<u64>().to_string(),
            // Small segments make the load cross segment boundaries.
            segment: ["1M", "2M", "16M"][rng.gen_range(0..3)],
        };
        run_trial(&trial);
    }
}

/// One trial: a new store with `segment`-byte segments, loaded with values
/// from `value_seed`, killed `delay` after the first acknowledged write.
struct Trial {
    number: u64,
    delay: Duration,
    value_seed: String,
    segment: &'static str,
}

impl std::fmt::Display for Trial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "trial {}: segments {}, value seed {}, kill after {:?}",
            self.number, self.segment, self.value_seed, self.delay
        )
    }
}

/// Runs one command to completion and returns (exit code, stdout).
fn nvdepot(args: &[&str]) -> (i32, String) {
    let out = Command::new(BIN).args(args).output().expect("spawn");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let Some(code) = out.status.code() else {
        panic!("{args:?} died: {stderr}");
    };
    if code != 0 {
        eprintln!("nvdepot {args:?} exited {code}\nstdout: {stdout}\nstderr: {stderr}");
    }
    (code, stdout)
}

fn run_trial(trial: &Trial) {
    let dir = tempfile::Builder::new()
        .prefix("kill9-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("temp dir");
    let store = dir.path().join("store");
    let store = store.to_str().expect("utf-8 path");
    let (last, killed) = load_and_kill(store, trial);
    let how = if killed {
        "killed"
    } else {
        "load finished first"
    };
    eprintln!("kill9 {trial}: last acked {last}, {how}");

    let (code, report) = nvdepot(&["check", "--data", store]);
    assert_eq!(code, 0, "{trial}: check after the crash failed:\n{report}");
    let count = (last + 1).to_string();
    let mut verify = vec!["kv", "--data", store, "verify", "--count", &count];
    verify.extend(["--value-size", VALUE_BYTES, "--seed", &trial.value_seed]);
    let (code, out) = nvdepot(&verify);
    assert_eq!(code, 0, "{trial}: acknowledged write lost: {out}");
    assert_eq!(out, format!("verified {count}\n"));
    let (code, report) = nvdepot(&["check", "--data", store]);
    assert_eq!(code, 0, "{trial}: check after recovery failed:\n{report}");
}

/// Starts `load`, kills it with SIGKILL `trial.delay` after its first
/// `acked` line, and returns the last index it acknowledged and whether
/// the kill came before the load finished.
fn load_and_kill(store: &str, trial: &Trial) -> (u64, bool) {
    let mut child = Command::new(BIN)
        .args(["kv", "--data", store, "--size", "256M"])
        .args(["--segment-size", trial.segment])
        .args(["load", "--count", COUNT, "--value-size", VALUE_BYTES])
        .args(["--seed", &trial.value_seed, "--ack-every", "1"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn load");
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut stdout = BufReader::new(stdout);
        let mut line = Vec::new();
        // Only whole lines count: the process may die in the middle of one.
        while stdout.read_until(b'\n', &mut line).expect("read stdout") > 0 {
            let Some(text) = line.strip_suffix(b"\n") else {
                break;
            };
            let text = String::from_utf8_lossy(text);
            let i = text
                .strip_prefix("acked ")
                .and_then(|i| i.parse::<u64>().ok());
            tx.send(i.unwrap_or_else(|| panic!("unexpected line {text:?}")))
                .unwrap();
            line.clear();
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(60));
    let Ok(mut last) = first else {
        let _ = child.kill();
        panic!("load acknowledged nothing within 60 s: {:?}", child.wait());
    };
    std::thread::sleep(trial.delay);
    let killed = child.try_wait().expect("try_wait").is_none();
    child.kill().expect("kill -9");
    let status = child.wait().expect("wait");
    reader.join().expect("stdout reader");
    for i in rx.try_iter() {
        assert_eq!(i, last + 1, "acks out of order");
        last = i;
    }
    if !killed {
        assert!(status.success(), "load failed: {status}");
    }
    (last, killed)
}
