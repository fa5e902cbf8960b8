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
    pub(super) bodies: Mutex<HashMap<String, Arc<[u8]>>>,
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
    let digest = Sha1::digest(body);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
