//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT, as Redis 7.0.
//!
//! A script runs while its session holds the exclusive pass of the gate,
//! so no other command runs between its calls (Redis's atomicity): EVAL's
//! on the worker's own VM (`lua::run_here`), FCALL's on the Lua thread
//! (`lua.rs`). Other connections that ask for anything wait at the gate —
//! or, once the script has run past `busy-reply-threshold`, are answered
//! `-BUSY` (only SCRIPT KILL is served then, as in Redis; a script on a
//! worker lets that worker's other connections run between its
//! instructions once it is past the threshold).
//!
//! The script cache (SHA1 → body, in `script_state.rs`) is server-wide;
//! each VM compiles a script once, when it first runs it (SCRIPT FLUSH
//! empties them all).

use std::future::poll_fn;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Poll, Waker};

use parking_lot::Mutex;

use nvdepot_resp::{errors, Reply, Version};

use super::args::arity;
use super::lua::{Args, Job, Outcome, Vm};
use super::script_state::{ScriptState, Sha, SPIN};
use super::session::{RespSession, Shared};

/// Work for the Lua thread and where to leave its outcome.
pub struct Work {
    what: What,
    done: Arc<Done>,
}

enum What {
    Eval(Job<'static>),
    Load(Sha, Arc<[u8]>),
    /// A FUNCTION subcommand: its arguments, the client's protocol.
    Function(Arc<Shared>, Vec<Vec<u8>>, Version),
}

impl Work {
    pub fn run(self, vm: &mut Vm) {
        let outcome = match self.what {
            What::Eval(job) => vm.run(job),
            What::Function(shared, args, version) => Outcome {
                reply: vm.function_command(&shared, &args, version),
                wakes: Vec::new(),
                compiled: true,
                owed: None,
            },
            What::Load(sha, body) => match vm.compile(&sha, &body) {
                Ok(()) => Outcome {
                    reply: Vec::new(),
                    wakes: Vec::new(),
                    compiled: true,
                    owed: None,
                },
                Err(e) => Outcome {
                    reply: e.into_bytes(),
                    wakes: Vec::new(),
                    compiled: false,
                    owed: None,
                },
            },
        };
        self.done.finish(outcome);
    }

    pub fn refuse(self, msg: &str) {
        self.done.finish(Outcome::error(Version::Resp2, msg));
    }

    /// Hands this work to the server's Lua thread.
    fn send(self, state: &ScriptState) {
        let task = move || {
            super::lua::on_lua_thread(|vm| match vm {
                Ok(vm) => self.run(vm),
                Err(e) => self.refuse(e),
            })
        };
        state.send(Box::new(task), super::lua::serve);
    }
}

#[derive(Default)]
struct Done {
    slot: Mutex<(Option<Outcome>, Option<Waker>)>,
}

impl Done {
    fn finish(&self, outcome: Outcome) {
        let waker = {
            let mut slot = self.slot.lock();
            slot.0 = Some(outcome);
            slot.1.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    async fn wait(&self) -> Outcome {
        // Most scripts take microseconds: a short spin saves parking the
        // worker's task (and the wake-up that costs two context switches).
        let spin_until = std::time::Instant::now() + SPIN;
        while std::time::Instant::now() < spin_until {
            if let Some(o) = self.slot.lock().0.take() {
                return o;
            }
            std::hint::spin_loop();
        }
        poll_fn(|cx| {
            let mut slot = self.slot.lock();
            match slot.0.take() {
                Some(o) => Poll::Ready(o),
                None => {
                    slot.1 = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await
    }
}

/// A script's shebang (`#!lua flags=no-writes,…`): whether it forbids
/// writes, and the body with the shebang line blanked (line numbers
/// kept); or the error for a malformed one.
fn shebang(body: &[u8]) -> Result<(bool, Option<Vec<u8>>), String> {
    if !body.starts_with(b"#!") {
        return Ok((false, None));
    }
    let end = body.iter().position(|&b| b == b'\n').unwrap_or(body.len());
    let line = String::from_utf8_lossy(&body[2..end]).into_owned();
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or("");
    if engine != "lua" {
        return Err(format!("ERR Could not find engine '{engine}'"));
    }
    let mut no_writes = false;
    for p in parts {
        let Some(flags) = p.strip_prefix("flags=") else {
            return Err(format!("ERR Unknown lua shebang option: {p}"));
        };
        for f in flags.split(',').filter(|f| !f.is_empty()) {
            match f {
                "no-writes" => no_writes = true,
                "allow-oom" | "allow-stale" | "no-cluster" | "allow-cross-slot-keys" => {}
                _ => return Err(format!("ERR Unexpected flag in script shebang: {f}")),
            }
        }
    }
    let mut rest = body[end..].to_vec();
    rest.shrink_to_fit();
    Ok((no_writes, Some(rest)))
}

impl RespSession {
    /// EVAL, EVALSHA and their `_RO` forms (the caller holds the
    /// exclusive pass of the gate).
    pub(super) async fn eval(&mut self, name: &[u8], args: &[&[u8]], r: &mut Reply<'_>) {
        if !arity(args, 3, None, r) {
            return;
        }
        let Some(numkeys) = super::args::int_arg(args[2]) else {
            if name.starts_with(b"FCALL") {
                return r.error("ERR Bad number of keys provided");
            }
            return r.error(errors::NOT_INTEGER);
        };
        if numkeys < 0 {
            return r.error("ERR Number of keys can't be negative");
        }
        if numkeys as usize > args.len() - 3 {
            return r.error("ERR Number of keys can't be greater than number of args");
        }
        let shared = self.shared();
        let by_sha = matches!(name, b"EVALSHA" | b"EVALSHA_RO");
        let fcall = matches!(name, b"FCALL" | b"FCALL_RO");
        let (sha, body) = if fcall {
            (Sha::NONE, Arc::from(&b""[..]))
        } else if by_sha {
            let found = Sha::parse(args[1]).and_then(|sha| {
                let bodies = shared.scripts.bodies.lock();
                bodies.get(&sha).map(|b| (sha, Arc::clone(b)))
            });
            match found {
                Some(found) => found,
                None => return r.error("NOSCRIPT No matching script. Please use EVAL."),
            }
        } else {
            let sha = Sha::of(args[1]);
            let body: Arc<[u8]> = Arc::from(args[1]);
            (sha, body)
        };
        let (no_writes, stripped) = match if fcall {
            Ok((false, None))
        } else {
            shebang(&body)
        } {
            Ok(s) => s,
            Err(e) => return r.error(e),
        };
        let run_body = stripped.map_or_else(|| Arc::clone(&body), Arc::from);
        let keys_end = 3 + numkeys as usize;
        let job = Job {
            shared: Arc::clone(&shared),
            sha,
            body: run_body,
            keys: Args::Borrowed(&args[3..keys_end]),
            argv: Args::Borrowed(&args[keys_end..]),
            db: self.db,
            version: self.version(),
            read_only: no_writes || name.ends_with(b"_RO"),
            function: fcall.then(|| String::from_utf8_lossy(args[1]).into_owned()),
            staging: nvdepot_cache::staging::current(),
        };
        let state = &shared.scripts;
        let threshold = shared.tunables.value("busy-reply-threshold").max(0) as u64;
        state.threshold_ms.store(threshold, Ordering::Relaxed);
        state.kill.store(false, Ordering::Release);
        state.killed.store(false, Ordering::Release);
        state.wrote.store(false, Ordering::Release);
        state.running.store(true, Ordering::Release);
        // The reply is composed straight into the connection's buffer
        // (at `at`); messages the script sends this client go before it.
        let at = r.out.len();
        let outcome = if !fcall && nvdepot_io::uring::in_runtime() {
            super::lua::run_here(job, r.out)
        } else {
            let done = Arc::new(Done::default());
            Work {
                what: What::Eval(job.owned()),
                done: Arc::clone(&done),
            }
            .send(state);
            done.wait().await
        };
        state.running.store(false, Ordering::Release);
        state.busy.store(false, Ordering::Release);
        if let Some(lsn) = outcome.owed {
            // Waited for by `dispatch` once the gate is released.
            self.owed_durability = Some(self.owed_durability.map_or(lsn, |o| o.max(lsn)));
        }
        if outcome.compiled && !by_sha && !fcall {
            state.bodies.lock().entry(sha).or_insert(body);
        }
        r.out.extend_from_slice(&outcome.reply);
        let mut messages = Vec::new();
        self.take_messages(&mut messages);
        if !messages.is_empty() {
            r.out.splice(at..at, messages);
        }
        for (db, key) in &outcome.wakes {
            shared.blocked.signal(*db, key);
        }
    }

    /// `FUNCTION …`: answered by the Lua thread, which holds the
    /// libraries (`functions.rs`); KILL as SCRIPT KILL.
    pub(super) async fn function(&mut self, args: &[&[u8]], r: &mut Reply<'_>) {
        if args.len() < 2 {
            return r.error(errors::wrong_arity(args[0]));
        }
        let shared = self.shared();
        if args[1].eq_ignore_ascii_case(b"KILL") {
            return script_kill(&shared.scripts, r);
        }
        let done = Arc::new(Done::default());
        let owned = args.iter().map(|a| a.to_vec()).collect();
        Work {
            what: What::Function(Arc::clone(&shared), owned, self.version()),
            done: Arc::clone(&done),
        }
        .send(&shared.scripts);
        let outcome = done.wait().await;
        r.out.extend_from_slice(&outcome.reply);
    }

    /// `SCRIPT LOAD|EXISTS|FLUSH|KILL|HELP`.
    pub(super) async fn script(&mut self, args: &[&[u8]], r: &mut Reply<'_>) {
        let shared = self.shared();
        let state = &shared.scripts;
        let Some(sub) = args.get(1).map(|a| a.to_ascii_uppercase()) else {
            return r.error(errors::wrong_arity(args[0]));
        };
        let wrong = |r: &mut Reply<'_>| r.error(errors::wrong_sub_arity("script", &sub));
        match sub.as_slice() {
            b"LOAD" => {
                if args.len() != 3 {
                    return wrong(r);
                }
                let sha = Sha::of(args[2]);
                let body: Arc<[u8]> = Arc::from(args[2]);
                let (_, stripped) = match shebang(&body) {
                    Ok(s) => s,
                    Err(e) => return r.error(e),
                };
                let done = Arc::new(Done::default());
                Work {
                    what: What::Load(sha, stripped.map_or_else(|| Arc::clone(&body), Arc::from)),
                    done: Arc::clone(&done),
                }
                .send(state);
                let outcome = done.wait().await;
                if !outcome.compiled {
                    return r.error(&outcome.reply);
                }
                state.bodies.lock().insert(sha, body);
                r.bulk(sha.as_str().as_bytes());
            }
            b"EXISTS" => {
                if args.len() < 3 {
                    return wrong(r);
                }
                let bodies = state.bodies.lock();
                r.array(args.len() - 2);
                for a in &args[2..] {
                    let cached = Sha::parse(a).is_some_and(|sha| bodies.contains_key(&sha));
                    r.integer(i64::from(cached));
                }
            }
            b"FLUSH" => {
                if args.len() > 3 {
                    return wrong(r);
                }
                if let Some(mode) = args.get(2) {
                    if !mode.eq_ignore_ascii_case(b"ASYNC") && !mode.eq_ignore_ascii_case(b"SYNC") {
                        return r.error("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
                    }
                }
                state.bodies.lock().clear();
                state.flushes.fetch_add(1, Ordering::AcqRel);
                r.ok();
            }
            b"KILL" => {
                if args.len() != 2 {
                    return wrong(r);
                }
                script_kill(state, r);
            }
            b"HELP" => {
                let lines = [
                    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                    "DEBUG (YES|SYNC|NO)",
                    "    Set the debug mode for subsequent scripts executed.",
                    "EXISTS <sha1> [<sha1> ...]",
                    "    Return information about the existence of the scripts in the script cache.",
                    "FLUSH [ASYNC|SYNC]",
                    "    Flush the Lua scripts cache. Very dangerous on replicas.",
                    "    When called without the optional mode argument, the behavior is determined by the",
                    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
                    "    * ASYNC: Asynchronously flush the scripts cache.",
                    "    * SYNC: Synchronously flush the scripts cache.",
                    "KILL",
                    "    Kill the currently executing Lua script.",
                    "LOAD <script>",
                    "    Load a script into the scripts cache without executing it.",
                    "HELP",
                    "    Prints this help.",
                ];
                r.simple_lines(&lines);
            }
            b"DEBUG" => r.error("ERR SCRIPT DEBUG is not supported by nvdepot"),
            _ => r.error(errors::unknown_subcommand("SCRIPT", args[1])),
        }
    }
}

/// SCRIPT KILL, served without waiting for the gate (the running script
/// holds it).
pub(super) fn script_kill(state: &ScriptState, r: &mut Reply<'_>) {
    if !state.running.load(Ordering::Acquire) {
        r.error("NOTBUSY No scripts in execution right now.");
    } else if state.wrote.load(Ordering::Acquire) {
        r.error(
            "UNKILLABLE Sorry the script already executed write commands against the dataset. \
             You can either wait the script termination or kill the server in a hard way using \
             the SHUTDOWN NOSAVE command.",
        );
    } else {
        state.kill.store(true, Ordering::Release);
        r.ok();
    }
}
