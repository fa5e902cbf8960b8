//! End-to-end tests of the `nvdepot` binary: every command runs in its own
//! process, so each test also crosses a close and a reopen of the store.
//!
//! Stores live under `CARGO_TARGET_TMPDIR` (not /tmp, which may be a tmpfs
//! that refuses `O_DIRECT`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// One finished run of the binary.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn nvdepot(args: &[&str]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_nvdepot"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("spawn nvdepot");
    let run = Run {
        code: output.status.code().expect("nvdepot died from a signal"),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert!(
        !run.stderr.contains("panicked"),
        "nvdepot {args:?} panicked: {run:?}"
    );
    run
}

/// A fresh directory; the store goes in `<dir>/store`, which does not exist
/// yet (`put`/`load` create it).
fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("cli-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("create temp dir")
}

fn store_path(dir: &tempfile::TempDir) -> String {
    dir.path()
        .join("store")
        .to_str()
        .expect("utf-8 path")
        .to_owned()
}

/// `nvdepot kv --data <store> --size 128M --segment-size 8M <args...>`.
fn kv(store: &str, args: &[&str]) -> Run {
    let mut all = vec![
        "kv",
        "--data",
        store,
        "--size",
        "128M",
        "--segment-size",
        "8M",
    ];
    all.extend_from_slice(args);
    nvdepot(&all)
}

fn assert_ok(run: &Run, what: &str) {
    assert_eq!(run.code, 0, "{what}: {run:?}");
}

fn sorted_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    lines
}

#[test]
fn put_get_del_scan_round_trip_across_processes() {
    let dir = temp_dir();
    let store = store_path(&dir);
    assert_ok(&kv(&store, &["put", "alpha", "one"]), "put alpha");
    assert_ok(&kv(&store, &["put", "beta", "two"]), "put beta");
    assert_ok(&kv(&store, &["put", "alpha", "uno"]), "overwrite alpha");

    let get = kv(&store, &["get", "alpha"]);
    assert_ok(&get, "get alpha");
    assert_eq!(get.stdout, "uno\n");
    assert_eq!(kv(&store, &["get", "beta"]).stdout, "two\n");
    assert_eq!(
        sorted_lines(&kv(&store, &["scan"]).stdout),
        ["alpha", "beta"]
    );

    assert_ok(&kv(&store, &["del", "beta"]), "del beta");
    let gone = kv(&store, &["get", "beta"]);
    assert_eq!(gone.code, 1, "get of a deleted key: {gone:?}");
    assert_eq!(gone.stdout, "");
    let again = kv(&store, &["del", "beta"]);
    assert_eq!(again.code, 1, "del of an absent key: {again:?}");
    assert!(
        !again.stderr.is_empty(),
        "del of an absent key says why: {again:?}"
    );
    assert_eq!(sorted_lines(&kv(&store, &["scan"]).stdout), ["alpha"]);

    // Every command closed the store, so this open restored the checkpoint.
    let stats = kv(&store, &["stats"]);
    assert_ok(&stats, "stats");
    assert!(stats.stdout.contains("open.clean true"), "{}", stats.stdout);
    assert!(
        stats.stdout.contains("namespace.default.keys 1"),
        "{}",
        stats.stdout
    );
}

#[test]
fn get_of_missing_key_exits_1_with_nothing_on_stdout() {
    let dir = temp_dir();
    let store = store_path(&dir);
    assert_ok(&kv(&store, &["put", "present", "x"]), "put");
    let run = kv(&store, &["get", "absent"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains("absent"),
        "stderr names the key: {run:?}"
    );
}

#[test]
fn namespaces_are_separate() {
    let dir = temp_dir();
    let store = store_path(&dir);
    assert_ok(
        &kv(&store, &["--namespace", "users", "put", "k", "in-users"]),
        "put users",
    );
    assert_ok(&kv(&store, &["put", "k", "in-default"]), "put default");
    assert_eq!(kv(&store, &["get", "k"]).stdout, "in-default\n");
    // The options are global: they may also follow the command.
    assert_eq!(
        kv(&store, &["get", "k", "--namespace", "users"]).stdout,
        "in-users\n"
    );
    assert_eq!(
        sorted_lines(&kv(&store, &["--namespace", "users", "scan"]).stdout),
        ["k"]
    );

    let missing = kv(&store, &["--namespace", "nope", "get", "k"]);
    assert_eq!(missing.code, 2, "{missing:?}");
    assert!(missing.stderr.starts_with("error: "), "{missing:?}");
    assert!(missing.stderr.contains("nope"), "{missing:?}");

    let stats = kv(&store, &["stats"]);
    assert!(
        stats.stdout.contains("namespace.users.keys 1"),
        "{}",
        stats.stdout
    );
}

#[test]
fn bad_arguments_give_a_clear_error_and_touch_nothing() {
    let dir = temp_dir();
    let store = store_path(&dir);
    let cases: [(&[&str], &str); 5] = [
        (
            &["kv", "--data", &store, "--size", "12X", "put", "a", "b"],
            "invalid size",
        ),
        (&["kv", "--data", &store, "get"], "<KEY>"),
        (&["kv", "--data", &store, "frobnicate"], "frobnicate"),
        (
            &["kv", "--data", &store, "load", "--value-size", "10"],
            "--count",
        ),
        (&["kv", "--data", &store, "get", "k"], "no store"),
    ];
    for (args, expected) in cases {
        let run = nvdepot(args);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(run.stderr.starts_with("error: "), "{args:?}: {run:?}");
        assert!(
            run.stderr.contains(expected),
            "{args:?} should mention {expected}: {run:?}"
        );
        assert_eq!(run.stdout, "", "{args:?}");
    }
    assert!(
        !Path::new(&store).exists(),
        "a rejected command created the store"
    );

    assert_ok(&kv(&store, &["put", "k", "v"]), "put");
    // The empty key is a key (as in Redis and RocksDB).
    assert_ok(&kv(&store, &["put", "", "empty"]), "put of the empty key");
    let got = kv(&store, &["get", ""]);
    assert_eq!((got.code, got.stdout.as_str()), (0, "empty\n"), "{got:?}");
}

#[test]
fn load_then_verify() {
    let dir = temp_dir();
    let store = store_path(&dir);
    let load = kv(
        &store,
        &[
            "load",
            "--count",
            "2500",
            "--value-size",
            "300",
            "--seed",
            "42",
        ],
    );
    assert_ok(&load, "load");
    assert_eq!(load.stdout, "acked 999\nacked 1999\nacked 2499\n");

    let verify = kv(
        &store,
        &[
            "verify",
            "--count",
            "2500",
            "--value-size",
            "300",
            "--seed",
            "42",
        ],
    );
    assert_ok(&verify, "verify");
    assert_eq!(verify.stdout, "verified 2500\n");

    let wrong = kv(
        &store,
        &[
            "verify",
            "--count",
            "10",
            "--value-size",
            "300",
            "--seed",
            "43",
        ],
    );
    assert_eq!(
        (wrong.code, wrong.stdout.as_str()),
        (1, "wrong value for key-0\n")
    );
    let short = kv(
        &store,
        &[
            "verify",
            "--count",
            "10",
            "--value-size",
            "299",
            "--seed",
            "42",
        ],
    );
    assert_eq!(
        (short.code, short.stdout.as_str()),
        (1, "wrong value for key-0\n")
    );
    let missing = kv(
        &store,
        &[
            "verify",
            "--count",
            "2501",
            "--value-size",
            "300",
            "--seed",
            "42",
        ],
    );
    assert_eq!(
        (missing.code, missing.stdout.as_str()),
        (1, "missing key-2500\n")
    );

    let scan = kv(&store, &["scan"]);
    assert_eq!(scan.stdout.lines().count(), 2500);
}

/// The store's data file: `nvdepot.0` inside the store directory.
fn data_file(store: &str) -> PathBuf {
    let path = Path::new(store).join("nvdepot.0");
    assert!(path.exists(), "no data file at {}", path.display());
    path
}

/// Offset of the first occurrence of `pattern` in `file`, read in chunks.
fn find_in_file(file: &Path, pattern: &[u8]) -> Option<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(file).expect("open data file");
    let mut buf = vec![0u8; 4 << 20];
    let mut start = 0u64;
    loop {
        f.seek(SeekFrom::Start(start)).expect("seek");
        let n = f.read(&mut buf).expect("read data file");
        if n < pattern.len() {
            return None;
        }
        if let Some(at) = buf[..n].windows(pattern.len()).position(|w| w == pattern) {
            return Some(start + at as u64);
        }
        start += (n - pattern.len() + 1) as u64;
    }
}

fn flip_byte(file: &Path, offset: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)
        .expect("open");
    let mut byte = [0u8; 1];
    f.read_exact_at(&mut byte, offset).expect("read byte");
    byte[0] ^= 0x5a;
    f.write_all_at(&byte, offset).expect("write byte");
    f.sync_all().expect("sync");
}

#[test]
fn check_passes_on_a_good_store_and_fails_after_corruption() {
    let dir = temp_dir();
    let store = store_path(&dir);
    let canary = "nvdepot-corruption-canary-".repeat(20);
    assert_ok(&kv(&store, &["put", "before", "some value"]), "put before");
    assert_ok(&kv(&store, &["put", "victim", &canary]), "put victim");
    assert_ok(&kv(&store, &["put", "after", "another value"]), "put after");

    let good = nvdepot(&["check", "--data", &store]);
    assert_ok(&good, "check of a good store");
    assert!(!good.stdout.is_empty(), "check prints a report");

    let file = data_file(&store);
    let at = find_in_file(&file, canary.as_bytes()).expect("canary value in the data file");
    assert!(
        at >= (1 << 20) + 4096,
        "records start after the headers, found at {at:#x}"
    );
    flip_byte(&file, at + 100);

    let bad = nvdepot(&["check", "--data", &store]);
    assert_eq!(bad.code, 1, "check must report the flipped byte: {bad:?}");
    let get = kv(&store, &["get", "victim"]);
    assert_eq!(get.code, 2, "reading a corrupt record is an error: {get:?}");
    assert!(get.stderr.starts_with("error: "), "{get:?}");
    assert_eq!(kv(&store, &["get", "before"]).stdout, "some value\n");
}

#[test]
fn check_of_a_missing_store_is_an_error() {
    let dir = temp_dir();
    let run = nvdepot(&["check", "--data", &store_path(&dir)]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.starts_with("error: "), "{run:?}");
}

#[test]
fn a_file_goes_in_with_put_file_and_comes_back_with_get_output() {
    let dir = temp_dir();
    let store = store_path(&dir);
    // 3 MB with 4 MiB segments: a large value (chunks behind a head).
    let input = dir.path().join("in.bin");
    let bytes: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    std::fs::write(&input, &bytes).unwrap();
    let run = nvdepot(&[
        "kv",
        "--data",
        &store,
        "--size",
        "64M",
        "--segment-size",
        "4M",
        "put",
        "blob",
        "--file",
        input.to_str().unwrap(),
    ]);
    assert_ok(&run, "put --file");
    let output = dir.path().join("out.bin");
    let run = kv(
        &store,
        &["get", "blob", "--output", output.to_str().unwrap()],
    );
    assert_ok(&run, "get --output");
    assert_eq!(run.stdout, "");
    assert!(
        std::fs::read(&output).unwrap() == bytes,
        "round trip differs"
    );
    let run = kv(
        &store,
        &["get", "absent", "--output", output.to_str().unwrap()],
    );
    assert_eq!(run.code, 1, "{run:?}");
    let run = kv(&store, &["put", "k", "--file", "/nonexistent/file"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("/nonexistent/file"), "{run:?}");
}
