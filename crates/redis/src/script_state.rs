//! The server's scripts (EVAL's cache, SHA1 → body) and the state of the
//! one running (busy, killed, written), which every connection reads
//! before it runs a command; and the way to this server's Lua thread,
//! where FCALL, FUNCTION and SCRIPT LOAD run (`lua::serve`). The commands
//! are in `script.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;

use parking_lot::Mutex;
use sha1::{Digest, Sha1};

/// Work for the Lua thread: it finds the thread's VM itself
/// (`lua::on_lua_thread`), so that this state names nothing of the VM or
/// of the commands a script calls.
pub type LuaTask = Box<dyn FnOnce() + Send>;

/// How long a session and the Lua thread spin for the other before they
/// sleep. A/B (bench/results/ab-script-spin.md): 100 µs gave EVALSHA of a
/// 3-call read script 1.8-3.0x at c=1 and 1.3-1.7x at c=16 over none.
pub(super) const SPIN: std::time::Duration = std::time::Duration::from_micros(100);

/// `busy-reply-threshold` (`lua-time-limit`) by default, in milliseconds.
pub(super) const BUSY_REPLY_THRESHOLD_MS: u64 = 5000;

/// What a script stopped by SCRIPT KILL answers (then where it was).
pub(super) const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";

pub const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

/// The server's scripts: the cache and the state of the one running.
pub struct ScriptState {
    pub(super) bodies: Mutex<ShaMap<Arc<[u8]>>>,
    jobs: Mutex<Option<Sender<LuaTask>>>,
    /// Bumped by SCRIPT FLUSH: the Lua thread drops what it compiled.
    pub flushes: AtomicU64,
    /// A script is running …
    pub(super) running: AtomicBool,
    /// … past the threshold: others are answered BUSY.
    pub busy: AtomicBool,
    /// SCRIPT KILL asked the running script to stop …
    pub kill: AtomicBool,
    /// … and it stopped.
    pub killed: AtomicBool,
    /// The running script has written (it can no longer be killed).
    pub wrote: AtomicBool,
    pub threshold_ms: AtomicU64,
}

impl Default for ScriptState {
    fn default() -> Self {
        ScriptState {
            bodies: Mutex::default(),
            jobs: Mutex::default(),
            flushes: AtomicU64::new(0),
            running: AtomicBool::new(false),
            busy: AtomicBool::new(false),
            kill: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            wrote: AtomicBool::new(false),
            threshold_ms: AtomicU64::new(BUSY_REPLY_THRESHOLD_MS),
        }
    }
}

impl ScriptState {
    /// Scripts in the cache (INFO's `number_of_cached_scripts`).
    pub fn cached(&self) -> usize {
        self.bodies.lock().len()
    }

    /// A script has run past the threshold: answer BUSY.
    pub fn busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    /// Runs `task` on this server's Lua thread, which `serve` starts
    /// the first time. If that thread has stopped, `task` runs here,
    /// where it finds no Lua thread's VM and refuses its work.
    pub(super) fn send(&self, task: LuaTask, serve: fn(Receiver<LuaTask>)) {
        let mut jobs = self.jobs.lock();
        let sender = jobs.get_or_insert_with(|| {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::Builder::new()
                .name("nvdepot-lua".into())
                .spawn(move || serve(rx))
                .expect("spawn the Lua thread");
            tx
        });
        if let Err(e) = sender.send(task) {
            drop(jobs);
            (e.0)();
        }
    }
}

/// A script's name: the SHA1 of its body, in lower-case hex.
pub fn sha1_hex(body: &[u8]) -> String {
    Sha::of(body).as_str().to_string()
}

/// A script's SHA1 as its 40 lower-case hex digits: the key of the script
/// cache and of each VM's compiled scripts. A fixed array, hashed by its
/// first 16 digits (a SHA1 is uniform): EVALSHA finds its script without
/// an allocation or a hash of the whole name.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Sha([u8; 40]);

/// The maps keyed by [`Sha`].
pub type ShaMap<V> = HashMap<Sha, V, std::hash::BuildHasherDefault<nvdepot_cache::IdHasher>>;

impl Sha {
    /// The SHA1 of `body`.
    pub fn of(body: &[u8]) -> Sha {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut hex = [0u8; 40];
        for (i, b) in Sha1::digest(body).iter().enumerate() {
            hex[2 * i] = HEX[usize::from(b >> 4)];
            hex[2 * i + 1] = HEX[usize::from(b & 15)];
        }
        Sha(hex)
    }

    /// The name a client gave (EVALSHA, SCRIPT EXISTS), lower-cased; `None`
    /// if it is not 40 characters long, when no script can have it.
    pub fn parse(name: &[u8]) -> Option<Sha> {
        let hex: [u8; 40] = name.try_into().ok()?;
        Some(Sha(hex.map(|b| b.to_ascii_lowercase())))
    }

    /// No script's name: where a FUNCTION's job has none.
    pub const NONE: Sha = Sha([b'0'; 40]);

    pub fn as_str(&self) -> &str {
        // Made of hex digits or a client's bytes that are 40 long; a name
        // that is not UTF-8 shows lossy nowhere: only `of`'s are shown.
        std::str::from_utf8(&self.0).unwrap_or("?")
    }
}

impl std::hash::Hash for Sha {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // The first 16 hex digits' 64 bits (a name that is not hex still
        // hashes, to something).
        let prefix = self.0[..16].iter().fold(0u64, |h, &b| {
            let nibble = (b & 0x0f) + 9 * (b >> 6);
            (h << 4) | u64::from(nibble & 0x0f)
        });
        state.write_u64(prefix);
    }
}
