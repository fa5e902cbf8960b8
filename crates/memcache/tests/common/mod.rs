//! Shared test harness: a connection over [`MemStorage`].
#![allow(dead_code)]

use std::sync::atomic::Ordering;
use std::sync::Arc;

use nvdepot_memcache::testing::{MemStorage, START_TIME};
use nvdepot_memcache::{Connection, Fed, Limits, ServerStats, Storage};

pub struct Harness<S: Storage = MemStorage> {
    pub storage: Arc<S>,
    pub stats: Arc<ServerStats>,
    pub conn: Connection<S>,
    pub limits: Limits,
}

impl Harness<MemStorage> {
    pub fn new() -> Self {
        Self::with_limits(Limits::default())
    }

    pub fn with_limits(limits: Limits) -> Self {
        Harness::over(Arc::new(MemStorage::new()), limits)
    }
}

impl<S: Storage> Harness<S> {
    pub fn over(storage: Arc<S>, limits: Limits) -> Self {
        let stats = Arc::new(ServerStats::default());
        stats
            .started
            .store(u64::from(START_TIME), Ordering::Relaxed);
        let conn = Connection::new(storage.clone(), stats.clone(), limits);
        Harness {
            storage,
            stats,
            conn,
            limits,
        }
    }

    /// A second connection to the same storage and stats.
    pub fn connect(&self) -> Connection<S> {
        Connection::new(self.storage.clone(), self.stats.clone(), self.limits)
    }

    /// Feeds `input` whole; returns the output and what feed said.
    /// (Fed again at once while it pauses with `more`, as the kit does;
    /// the `Fed` returned counts everything consumed.)
    pub fn feed(&mut self, input: &[u8]) -> (Vec<u8>, Fed) {
        let mut out = Vec::new();
        let mut consumed = 0;
        loop {
            let fed = self.conn.feed_ready(&input[consumed..], &mut out);
            consumed += fed.consumed;
            assert!(consumed <= input.len());
            if !fed.more || fed.close {
                return (out, Fed { consumed, ..fed });
            }
        }
    }

    /// Feeds `input`, which must be made of complete requests, and returns
    /// the output as a string (lossy).
    pub fn run(&mut self, input: &[u8]) -> String {
        let (out, fed) = self.feed(input);
        assert_eq!(
            fed.consumed,
            input.len(),
            "input not fully consumed: {:?}",
            String::from_utf8_lossy(input)
        );
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Feeds `input` in chunks ending at `cuts`, as a server would:
    /// unconsumed bytes are kept and fed again with the next chunk.
    /// Returns the output and whether the connection closed.
    pub fn run_chunks(&mut self, input: &[u8], cuts: &[usize]) -> (Vec<u8>, bool) {
        let mut buf = Vec::new();
        let mut out = Vec::new();
        let mut start = 0;
        let mut ends: Vec<usize> = cuts.iter().copied().filter(|&c| c <= input.len()).collect();
        ends.sort_unstable();
        ends.push(input.len());
        for end in ends {
            if end < start {
                continue;
            }
            buf.extend_from_slice(&input[start..end]);
            start = end;
            loop {
                let fed = self.conn.feed_ready(&buf, &mut out);
                assert!(fed.consumed <= buf.len());
                buf.drain(..fed.consumed);
                if fed.close {
                    return (out, true);
                }
                if !fed.more {
                    break;
                }
            }
        }
        (out, false)
    }

    /// Feeds `input`, all received at once, as nvdepot's server kit does:
    /// a window of its first 1 KiB, doubled while no request fits in it,
    /// back to 1 KiB after each step that consumed something. Returns the
    /// output and whether the connection closed.
    pub fn run_windows(&mut self, input: &[u8]) -> (Vec<u8>, bool) {
        let mut out = Vec::new();
        let mut pos = 0;
        let mut window = 1 << 10;
        while pos < input.len() {
            let end = input.len().min(pos + window);
            let fed = self.conn.feed_ready(&input[pos..end], &mut out);
            assert!(fed.consumed <= end - pos);
            pos += fed.consumed;
            if fed.close {
                return (out, true);
            }
            if fed.consumed > 0 || fed.more {
                window = 1 << 10;
            } else if end == input.len() {
                break;
            } else {
                window *= 2;
            }
        }
        (out, false)
    }

    pub fn stat(&self, f: impl Fn(&ServerStats) -> &std::sync::atomic::AtomicU64) -> u64 {
        f(&self.stats).load(Ordering::Relaxed)
    }
}
