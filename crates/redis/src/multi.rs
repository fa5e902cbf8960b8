//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH, as Redis 7 runs
//! them. Commands after MULTI are checked (known name, arity) and queued;
//! a refused one makes EXEC answer EXECABORT. EXEC runs the queue holding
//! the exclusive pass of the isolation gate, so no other client's command
//! interleaves; a runtime error of one queued command is that command's
//! reply and the others still run (no rollback, as Redis). WATCH records
//! the versions of keys; EXEC answers a null array, running nothing, if
//! any changed (a write, a delete, or an expiry).

use std::sync::Arc;

use nvdepot_cache::resp::unix_now_ms;
use nvdepot_cache::staging::{self, Staging};
use nvdepot_resp::{errors, Reply};

use super::commands::arity_of;
use super::session::{Multi, RespSession, Watched};

impl RespSession {
    /// Handles a transaction command, or queues `args` inside MULTI.
    /// Returns false when `args` is neither (run it now).
    pub(super) async fn transaction(
        &mut self,
        name: &[u8],
        args: &[&[u8]],
        out: &mut Vec<u8>,
    ) -> bool {
        let start = out.len();
        let mut r = Reply::new(out, self.version());
        match name {
            b"MULTI" => {
                if self.multi.is_some() {
                    r.error(errors::MULTI_NESTED);
                } else if args.len() != 1 {
                    r.error(errors::wrong_arity(args[0]));
                } else {
                    self.multi = Some(Multi::default());
                    r.ok();
                }
            }
            b"DISCARD" => match self.multi.take() {
                None => r.error(errors::DISCARD_WITHOUT_MULTI),
                Some(_) => {
                    self.watched.clear();
                    r.ok();
                }
            },
            b"WATCH" => {
                if self.multi.is_some() {
                    r.error("ERR WATCH inside MULTI is not allowed");
                } else if args.len() < 2 {
                    r.error(errors::wrong_arity(args[0]));
                } else {
                    let shared = self.shared();
                    let _pass = shared.gate.shared().await;
                    let now = unix_now_ms();
                    for key in &args[1..] {
                        // The stamp after the read (which may remove the
                        // key if it expired, a change of its own): a write
                        // between the two shows as a changed version.
                        match shared.store.get(self.db, key, now).await {
                            Ok(v) => self.watched.push(Watched {
                                db: self.db,
                                key: key.to_vec(),
                                version: v.map(|v| v.version()),
                                stamp: shared.store.write_stamp(self.db, key),
                            }),
                            Err(e) => {
                                r.error(format!("ERR {e}"));
                                return true;
                            }
                        }
                    }
                    r.ok();
                }
            }
            // Inside MULTI, Redis queues UNWATCH like any command.
            b"UNWATCH" if self.multi.is_none() => {
                self.watched.clear();
                r.ok();
            }
            b"EXEC" => {
                let Some(multi) = self.multi.take() else {
                    r.error(errors::EXEC_WITHOUT_MULTI);
                    return true;
                };
                let watched = std::mem::take(&mut self.watched);
                if multi.refused {
                    r.error(errors::EXECABORT);
                    return true;
                }
                let shared = self.shared();
                let _pass = shared.gate.exclusive().await;
                let now = unix_now_ms();
                for w in &watched {
                    let current = match shared.store.get(w.db, &w.key, now).await {
                        Ok(v) => v.map(|v| v.version()),
                        Err(e) => {
                            r.error(format!("ERR {e}"));
                            return true;
                        }
                    };
                    // A version that changed, or one that changed back (a
                    // key created and deleted again): either aborts.
                    if current != w.version || shared.store.write_stamp(w.db, &w.key) != w.stamp {
                        r.null_array();
                        return true;
                    }
                }
                // The replies follow the header, each written by its command
                // (`r` is not used again, so `out` is free for them).
                r.array(multi.queued.len());
                // The commands' writes are staged and written after the
                // last as one crash-atomic batch (`nvdepot_cache::staging`;
                // Redis's AOF holds a transaction as one MULTI/EXEC),
                // while the gate is still held, so the next command sees
                // them; their durability is waited for once the gate is
                // released (`dispatch`), as a script's.
                let staging = Arc::new(Staging::default());
                // Boxed: unboxed, this loop's future (a command's own) would
                // double the size of every command's dispatch.
                staging::stage_async(
                    &staging,
                    Box::pin(async {
                        for cmd in &multi.queued {
                            let args: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
                            self.execute(&args, out).await;
                        }
                    }),
                )
                .await;
                let commit = shared.store.cache().commit_staged(&staging);
                let (done, owed) = nvdepot_engine::defer_durability_async(commit).await;
                if let Some(lsn) = owed {
                    self.owed_durability = Some(self.owed_durability.map_or(lsn, |o| o.max(lsn)));
                }
                if let Err(e) = done {
                    out.truncate(start);
                    Reply::new(out, self.version()).error(format!(
                        "ERR the transaction's writes could not be written: {e}"
                    ));
                }
            }
            _ => {
                let shared = self.shared();
                let Some(multi) = self.multi.as_mut() else {
                    return false;
                };
                if matches!(name, b"QUIT" | b"RESET") {
                    return false;
                }
                match arity_of(name) {
                    None => {
                        multi.refused = true;
                        r.error(errors::unknown_command(args));
                    }
                    Some(a) if !arity_ok(a, args.len()) => {
                        multi.refused = true;
                        r.error(errors::wrong_arity(args[0]));
                    }
                    Some(_) => {
                        let refusal =
                            super::command_info::subcommand_refusal(name, args).or_else(|| {
                                super::cluster::queue_redirect(
                                    shared.cluster.as_deref(),
                                    name,
                                    args,
                                )
                                .map(String::into_bytes)
                            });
                        match refusal {
                            Some(e) => {
                                multi.refused = true;
                                r.error(&e);
                            }
                            None => {
                                multi.queued.push(args.iter().map(|a| a.to_vec()).collect());
                                r.simple("QUEUED");
                            }
                        }
                    }
                }
            }
        }
        true
    }
}

/// Redis's arity convention: `n` exactly, or at least `-n`.
fn arity_ok(arity: i32, n: usize) -> bool {
    if arity >= 0 {
        n == arity as usize
    } else {
        n >= arity.unsigned_abs() as usize
    }
}
