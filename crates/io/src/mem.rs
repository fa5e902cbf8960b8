//! An in-memory device for tests that models a disk with a volatile write
//! cache, after TigerBeetle's `testing/storage.zig`: it loses unflushed
//! writes and tears the last one on [`MemDevice::crash`], and injects on
//! demand read, write and flush errors, `ENOSPC`, silent corruption (at
//! rest and on read) and seeded latency that makes concurrent operations
//! complete out of order, on the blocking and the async (io_uring) path.
//!
//! Model. The device keeps
//! - the *durable image*: what survives a crash (a sparse map of 4 KiB
//!   pages; pages never written read as zeros),
//! - the *dirty pages*: the current contents of every page written since
//!   the last flush (reads look here first, then in the durable image), and
//! - the *pending writes*: a copy of every write since the last flush, in
//!   the order the writes returned.
//!
//! `flush` moves the dirty pages into the durable image and forgets the
//! pending writes (cost proportional to the dirty data, not the capacity).
//! `crash` takes the durable image (no copy: the crashed device serves
//! nothing more) and replays onto it the pending writes that the seeded RNG
//! lets survive, one possibly torn at a byte.
//!
//! One `RwLock` guards the state: reads share it, writes, flushes and
//! crashes take it exclusively, so an operation is atomic with respect to a
//! crash: it either returned before the crash (and is subject to it) or
//! fails with [`IoError::Crashed`].

use crate::{Device, IoError, IoResult};
use parking_lot::RwLock;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Granularity of the sparse page maps.
const PAGE: usize = 4096;

/// What a crash did (for test logs).
#[derive(Debug, Clone, Default)]
pub struct CrashReport {
    /// Unflushed writes that were dropped.
    pub dropped_writes: usize,
    /// The write that was torn: (offset, len, bytes kept).
    pub torn: Option<(u64, usize, usize)>,
    /// Unflushed writes that survived whole (the cache destaged them before
    /// the power went).
    pub kept_writes: usize,
    /// The seed the crash was made with, to replay it.
    pub seed: u64,
}

/// An in-memory device with a volatile write cache.
///
/// Cheap to create at any capacity (storage is allocated per 4 KiB page on
/// first write). `Send + Sync`: use it from many threads at once, and crash
/// it from any of them. Unlike [`crate::FileDevice`], the alignment and
/// range rules of [`Device`] are checked with `assert!` in every build, so
/// tests that pass here also pass on an `O_DIRECT` file.
pub struct MemDevice {
    name: String,
    capacity: u64,
    alignment: usize,
    state: RwLock<State>,
    counters: Counters,
    latency: RwLock<Option<Latency>>,
}

#[derive(Default)]
struct State {
    crashed: bool,
    durable: PageMap,
    dirty: PageMap,
    pending: Vec<Pending>,
    faults: Faults,
}

/// A write that returned since the last flush.
struct Pending {
    offset: u64,
    data: Box<[u8]>,
}

#[derive(Default)]
struct Faults {
    reads_at: Option<Range<u64>>,
    /// Reads overlapping this range return their data with a bit flipped.
    corrupt_reads_at: Option<Range<u64>>,
    writes_left: Option<u64>,
    /// What a write refused by `writes_left` fails with.
    no_space: bool,
    flushes_left: Option<u64>,
}

/// Seeded completion delays (see [`MemDevice::set_latency`]).
struct Latency {
    max: Duration,
    rng: parking_lot::Mutex<StdRng>,
}

#[derive(Default)]
struct Counters {
    reads: AtomicU64,
    bytes_read: AtomicU64,
    writes: AtomicU64,
    bytes_written: AtomicU64,
    flushes: AtomicU64,
}

/// What becomes of one unflushed write at a crash.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fate {
    Dropped,
    Kept,
    /// Only the first `n` bytes (0 < n < len) reach the durable image.
    Torn(usize),
}

type PageMap = HashMap<u64, Box<[u8]>, BuildHasherDefault<PageHasher>>;

/// Page numbers are small dense integers; a multiply is all the hashing
/// they need (SipHash would dominate small IOs).
#[derive(Default)]
struct PageHasher(u64);

impl Hasher for PageHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

fn zero_page() -> Box<[u8]> {
    vec![0u8; PAGE].into_boxed_slice()
}

/// Splits `[offset, offset + len)` into (page, offset in page, offset in
/// buffer, length) pieces.
fn pieces(offset: u64, len: usize) -> impl Iterator<Item = (u64, usize, usize, usize)> {
    let mut done = 0;
    std::iter::from_fn(move || {
        if done == len {
            return None;
        }
        let at = offset + done as u64;
        let in_page = (at % PAGE as u64) as usize;
        let n = (PAGE - in_page).min(len - done);
        let piece = (at / PAGE as u64, in_page, done, n);
        done += n;
        Some(piece)
    })
}

/// Copies `data` into the page map at `offset`, filling new pages from
/// `base` (or zeros).
fn apply(map: &mut PageMap, base: Option<&PageMap>, offset: u64, data: &[u8]) {
    for (page, in_page, at, n) in pieces(offset, data.len()) {
        let p = map.entry(page).or_insert_with(|| {
            base.and_then(|b| b.get(&page))
                .cloned()
                .unwrap_or_else(zero_page)
        });
        p[in_page..in_page + n].copy_from_slice(&data[at..at + n]);
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

impl MemDevice {
    /// A zeroed device of `capacity` bytes with the given alignment.
    ///
    /// Panics if `alignment` is not a power of two ≥ 512 or `capacity` is
    /// not a multiple of it. The name is `mem#N`, N counting devices made
    /// by this process.
    pub fn new(capacity: u64, alignment: usize) -> MemDevice {
        let name = format!("mem#{}", NEXT_ID.fetch_add(1, Relaxed));
        MemDevice::named(&name, capacity, alignment)
    }

    /// Like [`MemDevice::new`] with a chosen name for error messages.
    pub fn named(name: &str, capacity: u64, alignment: usize) -> MemDevice {
        assert!(
            alignment.is_power_of_two() && alignment >= 512,
            "alignment {alignment} must be a power of two >= 512"
        );
        assert!(
            capacity & (alignment as u64 - 1) == 0,
            "capacity {capacity} is not a multiple of the alignment {alignment}"
        );
        MemDevice {
            name: name.to_string(),
            capacity,
            alignment,
            state: RwLock::new(State::default()),
            counters: Counters::default(),
            latency: RwLock::new(None),
        }
    }

    /// A device whose durable contents are `image` (capacity
    /// `image.len()`, which must be a multiple of `alignment`). All-zero
    /// pages take no memory.
    pub fn from_image(image: &[u8], alignment: usize) -> MemDevice {
        let dev = MemDevice::new(image.len() as u64, alignment);
        {
            let mut st = dev.state.write();
            for (i, chunk) in image.chunks(PAGE).enumerate() {
                if chunk.iter().any(|&b| b != 0) {
                    let mut page = zero_page();
                    page[..chunk.len()].copy_from_slice(chunk);
                    st.durable.insert(i as u64, page);
                }
            }
        }
        dev
    }

    /// A new device (same name, capacity and alignment) holding what a read
    /// of this one would return now, all of it durable; no faults, zeroed
    /// counters. Costs a copy of the written pages. Fails if this device
    /// has crashed.
    pub fn snapshot(&self) -> IoResult<MemDevice> {
        let st = self.state.read();
        self.check_crashed(&st)?;
        let mut durable = st.durable.clone();
        for (&page, data) in &st.dirty {
            durable.insert(page, data.clone());
        }
        Ok(self.successor(durable))
    }

    /// Crashes the device: from now on every operation on `self` fails with
    /// `IoError::Crashed`. Returns a new device holding what survived: all
    /// flushed data, none of the unflushed writes except that the last
    /// write (flushed or not, if unflushed) may survive torn at a random
    /// byte chosen from `seed`.
    ///
    /// Precisely: the last unflushed write is dropped (1 in 4), kept whole
    /// (1 in 4) or torn (1 in 2) at a byte `n` in `1..len`: its first `n`
    /// bytes are new, the rest of its range keeps the durable bytes. Every
    /// other unflushed write is dropped. The new device has the same name,
    /// capacity and alignment, no faults and zeroed counters. The same
    /// seed and the same writes give the same outcome.
    ///
    /// Panics if the device has already crashed.
    pub fn crash(&self, seed: u64) -> (MemDevice, CrashReport) {
        self.crash_with(seed, |n, rng| {
            let mut fates = vec![Fate::Dropped; n];
            if let Some(last) = fates.last_mut() {
                *last = match rng.gen_range(0..4) {
                    0 => Fate::Dropped,
                    1 => Fate::Kept,
                    _ => Fate::Torn(0), // tear point chosen by crash_with
                };
            }
            fates
        })
    }

    /// Crashes like [`MemDevice::crash`], but models a write cache that
    /// destages out of order: each unflushed write independently survives
    /// whole or is dropped (1 in 2 each), and then, 1 in 2, one unflushed
    /// write chosen at random is instead torn at a random byte. Survivors
    /// are applied in the order they returned, so of two overlapping
    /// survivors the later one wins.
    ///
    /// Panics if the device has already crashed.
    pub fn crash_reordered(&self, seed: u64) -> (MemDevice, CrashReport) {
        self.crash_with(seed, |n, rng| {
            let mut fates: Vec<Fate> = (0..n)
                .map(|_| {
                    if rng.gen_bool(0.5) {
                        Fate::Kept
                    } else {
                        Fate::Dropped
                    }
                })
                .collect();
            if n > 0 && rng.gen_bool(0.5) {
                fates[rng.gen_range(0..n)] = Fate::Torn(0);
            }
            fates
        })
    }

    fn crash_with(
        &self,
        seed: u64,
        choose: impl FnOnce(usize, &mut StdRng) -> Vec<Fate>,
    ) -> (MemDevice, CrashReport) {
        let (mut durable, pending) = {
            let mut st = self.state.write();
            assert!(
                !st.crashed,
                "crash() on {}, which has already crashed",
                self.name
            );
            st.crashed = true;
            st.dirty = PageMap::default();
            (
                std::mem::take(&mut st.durable),
                std::mem::take(&mut st.pending),
            )
        };
        let mut rng = StdRng::seed_from_u64(seed);
        let fates = choose(pending.len(), &mut rng);
        let mut report = CrashReport {
            seed,
            ..CrashReport::default()
        };
        for (w, fate) in pending.iter().zip(fates) {
            match fate {
                Fate::Dropped => report.dropped_writes += 1,
                Fate::Kept => {
                    report.kept_writes += 1;
                    apply(&mut durable, None, w.offset, &w.data);
                }
                Fate::Torn(_) => {
                    let len = w.data.len();
                    // A write shorter than 2 bytes cannot tear; alignment
                    // rules make that impossible, but stay total.
                    let kept = if len < 2 { len } else { rng.gen_range(1..len) };
                    report.torn = Some((w.offset, len, kept));
                    apply(&mut durable, None, w.offset, &w.data[..kept]);
                }
            }
        }
        (self.successor(durable), report)
    }

    /// A fresh device like this one holding `durable`.
    fn successor(&self, durable: PageMap) -> MemDevice {
        let dev = MemDevice::named(&self.name, self.capacity, self.alignment);
        dev.state.write().durable = durable;
        dev
    }

    /// True once [`MemDevice::crash`] (or `crash_reordered`) was called.
    pub fn is_crashed(&self) -> bool {
        self.state.read().crashed
    }

    /// Writes that returned since the last successful flush (what a crash
    /// now could lose).
    pub fn unflushed_writes(&self) -> usize {
        self.state.read().pending.len()
    }

    /// From now on, reads that overlap `range` (byte offsets) fail with
    /// [`IoError::Injected`], as from a bad sector, until
    /// [`MemDevice::clear_faults`]. Replaces an earlier read fault.
    pub fn fail_reads_at(&self, range: Range<u64>) {
        self.state.write().faults.reads_at = Some(range);
    }

    /// The next `n` writes succeed; every write after them fails with
    /// [`IoError::Injected`] and changes nothing, until
    /// [`MemDevice::clear_faults`].
    pub fn fail_writes_after(&self, n: u64) {
        self.state.write().faults.writes_left = Some(n);
    }

    /// The next `n` flushes succeed; every flush after them fails with
    /// [`IoError::Injected`] and makes nothing durable (the writes stay in
    /// the cache), until [`MemDevice::clear_faults`].
    pub fn fail_flush_after(&self, n: u64) {
        self.state.write().faults.flushes_left = Some(n);
    }

    /// Like [`MemDevice::fail_writes_after`], but the refused writes fail
    /// as on a full file system: an OS error `ENOSPC` ("No space left on
    /// device"), naming the device and offset.
    pub fn fail_writes_no_space_after(&self, n: u64) {
        let mut st = self.state.write();
        st.faults.writes_left = Some(n);
        st.faults.no_space = true;
    }

    /// From now on, reads that overlap `range` succeed but return their
    /// data with one bit flipped (the lowest bit of the first byte read
    /// inside `range`), as from a medium or a bus that corrupts silently,
    /// until [`MemDevice::clear_faults`]. The stored data is unchanged.
    pub fn corrupt_reads_at(&self, range: Range<u64>) {
        self.state.write().faults.corrupt_reads_at = Some(range);
    }

    /// Silent corruption at rest: flips the bits of `mask` in the byte at
    /// `offset`, in what reads return now and in what survives a crash
    /// (the medium itself is damaged). Returns the byte's new value.
    pub fn corrupt_at_rest(&self, offset: u64, mask: u8) -> u8 {
        assert!(offset < self.capacity, "offset {offset} past the device");
        let mut st = self.state.write();
        let page = offset / PAGE as u64;
        let at = (offset % PAGE as u64) as usize;
        let State { dirty, durable, .. } = &mut *st;
        let durable_page = durable.entry(page).or_insert_with(zero_page);
        durable_page[at] ^= mask;
        let new = durable_page[at];
        if let Some(p) = dirty.get_mut(&page) {
            p[at] ^= mask;
            return p[at];
        }
        new
    }

    /// Every read, write and flush from now on takes a random time up to
    /// `max` (drawn from `seed`) to complete: a blocking call sleeps; an
    /// async call through [`crate::uring`] parks its task for it, so other
    /// tasks' operations complete first (out of order). `Duration::ZERO`
    /// turns it off. Not cleared by [`MemDevice::clear_faults`].
    pub fn set_latency(&self, max: Duration, seed: u64) {
        *self.latency.write() = (!max.is_zero()).then(|| Latency {
            max,
            rng: parking_lot::Mutex::new(StdRng::seed_from_u64(seed)),
        });
    }

    /// The next completion delay, if latency is on.
    fn draw_delay(&self) -> Option<Duration> {
        let lat = self.latency.read();
        let lat = lat.as_ref()?;
        let nanos = lat.rng.lock().gen_range(0..=lat.max.as_nanos() as u64);
        Some(Duration::from_nanos(nanos))
    }

    /// A blocking call's wait; async callers wait in
    /// [`Device::completion_delay`] instead.
    fn blocking_delay(&self) {
        if !crate::uring::in_runtime() {
            if let Some(d) = self.draw_delay() {
                std::thread::sleep(d);
            }
        }
    }

    /// Removes every injected fault (not a crash, not the latency).
    pub fn clear_faults(&self) {
        self.state.write().faults = Faults::default();
    }

    /// Successful reads so far.
    pub fn reads(&self) -> u64 {
        self.counters.reads.load(Relaxed)
    }

    /// Bytes returned by successful reads so far.
    pub fn bytes_read(&self) -> u64 {
        self.counters.bytes_read.load(Relaxed)
    }

    /// Successful writes so far.
    pub fn writes(&self) -> u64 {
        self.counters.writes.load(Relaxed)
    }

    /// Bytes of successful writes so far (for write amplification).
    pub fn bytes_written(&self) -> u64 {
        self.counters.bytes_written.load(Relaxed)
    }

    /// Successful flushes so far.
    pub fn flushes(&self) -> u64 {
        self.counters.flushes.load(Relaxed)
    }

    fn check_crashed(&self, st: &State) -> IoResult<()> {
        if st.crashed {
            return Err(IoError::Crashed {
                device: self.name.clone(),
            });
        }
        Ok(())
    }

    fn no_space(&self, offset: u64, len: usize) -> IoError {
        IoError::Os {
            op: "write",
            device: self.name.clone(),
            offset,
            len,
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        }
    }

    fn injected(&self, op: &'static str, offset: u64) -> IoError {
        IoError::Injected {
            op,
            device: self.name.clone(),
            offset,
        }
    }

    /// The `Device` contract, asserted in every build.
    fn check_args(&self, op: &str, addr: *const u8, len: usize, offset: u64) {
        let io = (addr, len, offset);
        let limits = (self.alignment, self.capacity);
        if let Some(why) = crate::aligned::contract_violation(&self.name, op, io, limits) {
            panic!("{why}");
        }
    }
}

impl Device for MemDevice {
    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn alignment(&self) -> usize {
        self.alignment
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> IoResult<()> {
        self.check_args("read", buf.as_ptr(), buf.len(), offset);
        self.blocking_delay();
        let st = self.state.read();
        self.check_crashed(&st)?;
        if let Some(bad) = &st.faults.reads_at {
            if offset < bad.end && bad.start < offset + buf.len() as u64 {
                return Err(self.injected("read", offset));
            }
        }
        for (page, in_page, at, n) in pieces(offset, buf.len()) {
            let dst = &mut buf[at..at + n];
            match st.dirty.get(&page).or_else(|| st.durable.get(&page)) {
                Some(p) => dst.copy_from_slice(&p[in_page..in_page + n]),
                None => dst.fill(0),
            }
        }
        if let Some(bad) = &st.faults.corrupt_reads_at {
            let end = offset + buf.len() as u64;
            if offset < bad.end && bad.start < end {
                buf[(bad.start.max(offset) - offset) as usize] ^= 1;
            }
        }
        drop(st);
        self.counters.reads.fetch_add(1, Relaxed);
        self.counters
            .bytes_read
            .fetch_add(buf.len() as u64, Relaxed);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> IoResult<()> {
        self.check_args("write", buf.as_ptr(), buf.len(), offset);
        self.blocking_delay();
        let mut st = self.state.write();
        self.check_crashed(&st)?;
        if let Some(left) = &mut st.faults.writes_left {
            if *left == 0 {
                if st.faults.no_space {
                    return Err(self.no_space(offset, buf.len()));
                }
                return Err(self.injected("write", offset));
            }
            *left -= 1;
        }
        let State {
            dirty,
            durable,
            pending,
            ..
        } = &mut *st;
        apply(dirty, Some(durable), offset, buf);
        pending.push(Pending {
            offset,
            data: buf.into(),
        });
        drop(st);
        self.counters.writes.fetch_add(1, Relaxed);
        self.counters
            .bytes_written
            .fetch_add(buf.len() as u64, Relaxed);
        Ok(())
    }

    fn flush(&self) -> IoResult<()> {
        self.blocking_delay();
        let mut st = self.state.write();
        self.check_crashed(&st)?;
        if let Some(left) = &mut st.faults.flushes_left {
            if *left == 0 {
                return Err(self.injected("flush", 0));
            }
            *left -= 1;
        }
        let State {
            dirty,
            durable,
            pending,
            ..
        } = &mut *st;
        durable.extend(dirty.drain());
        pending.clear();
        drop(st);
        self.counters.flushes.fetch_add(1, Relaxed);
        Ok(())
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn completion_delay(&self) -> Option<Duration> {
        self.draw_delay()
    }
}

impl std::fmt::Debug for MemDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemDevice")
            .field("name", &self.name)
            .field("capacity", &self.capacity)
            .field("alignment", &self.alignment)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_split_at_page_boundaries() {
        let v: Vec<_> = pieces(4096 - 512, 4096 + 1024).collect();
        assert_eq!(
            v,
            vec![(0, 3584, 0, 512), (1, 0, 512, 4096), (2, 0, 4608, 512)]
        );
        assert_eq!(pieces(0, 0).count(), 0);
    }
}
