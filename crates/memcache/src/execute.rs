//! Commands against a [`Storage`], with memcached's semantics: expiry
//! checks, exptime conversion, and read-modify-write commands, each one
//! [`Storage::update`] whose decision is made here, so it is atomic per
//! key (no other write of the key between its read and its write) and
//! never retried.

use crate::{
    Change, Connection, Item, ItemState, NewItem, Storage, StorageError, StoreMode, StoreOutcome,
    Updated,
};

/// memcached's `REALTIME_MAXDELTA`: larger exptimes are absolute Unix
/// times, smaller ones are relative to now.
pub(crate) const RELATIVE_EXPTIME_MAX: i64 = 60 * 60 * 24 * 30;

/// Why a command could not run.
#[derive(Debug)]
pub(crate) enum ExecError {
    Storage(StorageError),
}

impl From<StorageError> for ExecError {
    fn from(e: StorageError) -> Self {
        ExecError::Storage(e)
    }
}

impl ExecError {
    /// The message after `SERVER_ERROR ` (text) or as the body (binary).
    pub(crate) fn message(&self) -> &str {
        match self {
            ExecError::Storage(e) => &e.0,
        }
    }
}

/// Result of incr/decr on a present item.
#[derive(Debug)]
pub(crate) enum Arith {
    Done(ArithDone),
    NotFound,
    NonNumeric,
    /// The supplied CAS does not match.
    Exists,
}

#[derive(Debug)]
pub(crate) struct ArithDone {
    pub value: u64,
    pub cas: u64,
    pub old_exptime: u32,
    /// The key was absent and created with the initial value.
    pub created: bool,
}

/// Write `item` as a new version of the key (a new CAS unique); a new
/// memcached item unless `in_place` ([`NewItem::in_place`]).
fn rewrite(value: Vec<u8>, flags: u32, exptime: u32, state: ItemState, in_place: bool) -> Change {
    Change::Write(NewItem {
        value,
        flags,
        exptime,
        state,
        kept_cas: None,
        in_place,
    })
}

/// `outcome`, with the CAS unique of what the update stored.
fn stored(outcome: StoreOutcome, done: Updated) -> StoreOutcome {
    match (outcome, done) {
        (StoreOutcome::Stored { .. }, Updated::Stored { cas }) => StoreOutcome::Stored { cas },
        (other, _) => other,
    }
}

/// Result of a delete.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Deleted {
    Yes,
    NotFound,
    /// The supplied CAS does not match.
    Exists,
}

impl<S: Storage> Connection<S> {
    #[inline]
    pub(crate) fn now(&self) -> u32 {
        self.storage.now()
    }

    /// memcached's `realtime(EXPTIME_TO_POSITIVE_TIME(t))` as an absolute
    /// Unix time: 0 = never; negative = already expired; up to 30 days =
    /// relative to now; larger = absolute.
    pub(crate) fn exptime_abs(&self, t: i64) -> u32 {
        if t == 0 {
            0
        } else if t < 0 {
            1
        } else if t > RELATIVE_EXPTIME_MAX {
            t.min(i64::from(u32::MAX)) as u32
        } else {
            self.now().saturating_add(t as u32)
        }
    }

    /// The live item under `key`: an expired one counts as absent (and is
    /// reclaimed, best effort).
    pub(crate) async fn live(&mut self, key: &[u8]) -> Result<Option<Item>, StorageError> {
        let got = self.storage.get(key).await;
        self.live_from(key, got).await
    }

    /// [`Connection::live`] of an item already read.
    pub(crate) async fn live_from(
        &mut self,
        key: &[u8],
        got: Result<Option<Item>, StorageError>,
    ) -> Result<Option<Item>, StorageError> {
        let now = self.now();
        match got? {
            Some(it) if !it.is_live(now) => {
                self.counters.get_expired += 1;
                // Reclaim it, unless it was rewritten meanwhile.
                let _ = self
                    .storage
                    .update(key, |cur| match cur {
                        Some(cur) if cur.cas == it.cas && !cur.is_live(now) => (Change::Delete, ()),
                        _ => (Change::Keep, ()),
                    })
                    .await;
                Ok(None)
            }
            other => Ok(other),
        }
    }

    /// [`Connection::live_from`] of an item read ahead, together with
    /// other keys: an expired one is read again, since an earlier request
    /// of the same batch (the same key named twice) may have reclaimed it
    /// meanwhile. memcached then counts one expired get and one miss, and
    /// so does this, however the requests were batched.
    pub(crate) async fn live_fetched(
        &mut self,
        key: &[u8],
        got: Result<Option<Item>, StorageError>,
    ) -> Result<Option<Item>, StorageError> {
        match got {
            Ok(Some(it)) if !it.is_live(self.now()) => self.live(key).await,
            other => self.live_from(key, other).await,
        }
    }

    /// Reads the keys up to the first one over the key limit, all at once
    /// (their futures are polled together), in key order.
    pub(crate) async fn fetch_many(
        &self,
        keys: &[&[u8]],
    ) -> Vec<Result<Option<Item>, StorageError>> {
        let storage = &*self.storage;
        let keys = keys
            .iter()
            .take_while(|k| k.len() <= self.limits.key_bytes_max);
        for k in keys.clone() {
            storage.prefetch(k);
        }
        // Each read gets a waker of its own and only woken ones are polled
        // (polling all on every completion cost n² polls for n keys).
        futures_util::future::join_all(keys.map(|k| storage.get(k))).await
    }

    /// Before a request: whether to read ahead for pipelined gets. A plain
    /// get (text `get`/`gets`, binary Get/GetK) keeps what was read ahead
    /// and asks for a new read-ahead once it is used up; any other request
    /// drops it, and so does a pending delayed `flush_all`, which may fall
    /// due between two gets (then each reads at its turn).
    pub(crate) fn read_ahead_wanted(&mut self, plain_get: bool) -> bool {
        let flush_pending = self
            .stats
            .flush_at
            .load(std::sync::atomic::Ordering::Relaxed)
            != 0;
        if plain_get && !flush_pending {
            return self.prefetched.is_empty();
        }
        self.prefetched.clear();
        false
    }

    /// Reads the keys of two or more pipelined gets at once and keeps the
    /// results for [`Connection::live_read_ahead`]; fewer keys: nothing.
    pub(crate) async fn read_ahead(&mut self, keys: &[&[u8]]) {
        if keys.len() < 2 {
            return;
        }
        let results = self.fetch_many(keys).await;
        self.prefetched = keys.iter().map(|k| k.to_vec()).zip(results).collect();
    }

    /// [`Connection::live`], from the read-ahead when it holds `key` next
    /// (otherwise the read-ahead is dropped and `key` read now).
    pub(crate) async fn live_read_ahead(
        &mut self,
        key: &[u8],
    ) -> Result<Option<Item>, StorageError> {
        match self.prefetched.pop_front() {
            Some((k, got)) if k == key => self.live_fetched(key, got).await,
            _ => {
                self.prefetched.clear();
                self.live(key).await
            }
        }
    }

    /// A conditional write, counting CAS outcomes as memcached does.
    pub(crate) async fn store(
        &mut self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
        mode: StoreMode,
    ) -> Result<StoreOutcome, StorageError> {
        self.store_item(key, value, flags, exptime, ItemState::default(), mode)
            .await
    }

    /// [`Connection::store`] of an item with marks.
    pub(crate) async fn store_item(
        &mut self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
        state: ItemState,
        mode: StoreMode,
    ) -> Result<StoreOutcome, StorageError> {
        let r = self
            .storage
            .store_item(key, value, flags, exptime, state, mode)
            .await?;
        if let StoreMode::Cas(_) = mode {
            match r {
                StoreOutcome::Stored { .. } => self.counters.cas_hits += 1,
                StoreOutcome::Exists => self.counters.cas_badval += 1,
                _ => self.counters.cas_misses += 1,
            }
        }
        Ok(r)
    }

    /// append (or prepend) `data` to the live item; `cas` 0 = any.
    /// NotStored when absent or when the result would exceed the item size
    /// limit; Exists on a CAS mismatch.
    pub(crate) async fn concat(
        &mut self,
        key: &[u8],
        data: &[u8],
        append: bool,
        cas: u64,
    ) -> Result<StoreOutcome, ExecError> {
        let (now, limits) = (self.now(), self.limits);
        let (outcome, done) = self
            .storage
            .update(key, |it| {
                let Some(old) = it.filter(|it| it.is_live(now)) else {
                    return (Change::Keep, StoreOutcome::NotStored);
                };
                if cas != 0 && cas != old.cas {
                    return (Change::Keep, StoreOutcome::Exists);
                }
                if !limits.item_fits(key.len(), old.flags, old.value.len() + data.len()) {
                    return (Change::Keep, StoreOutcome::NotStored);
                }
                let mut v = Vec::with_capacity(old.value.len() + data.len());
                if append {
                    v.extend_from_slice(&old.value);
                    v.extend_from_slice(data);
                } else {
                    v.extend_from_slice(data);
                    v.extend_from_slice(&old.value);
                }
                let change = rewrite(v, old.flags, old.exptime, ItemState::default(), false);
                (change, StoreOutcome::Stored { cas: 0 })
            })
            .await?;
        Ok(stored(outcome, done))
    }

    /// incr/decr by `delta` (`cas` 0 = any), as memcached's `do_add_delta`:
    /// decr floors at 0, incr wraps at 2^64, and a result no longer than
    /// the old value is padded with spaces to the old length. `exptime`
    /// replaces the item's expiry when given (meta `T`). `create`
    /// (initial value, exptime) makes an absent key that value instead,
    /// in the same atomic step (binary incr with an expiration, meta `N`).
    /// Counts hits; the caller counts misses.
    pub(crate) async fn arith(
        &mut self,
        key: &[u8],
        incr: bool,
        delta: u64,
        cas: u64,
        exptime: Option<u32>,
        create: Option<(u64, u32)>,
    ) -> Result<Arith, ExecError> {
        let (now, limits) = (self.now(), self.limits);
        let (arith, done) = self
            .storage
            .update(key, |it| {
                let Some(old) = it.filter(|it| it.is_live(now)) else {
                    let Some((initial, exptime)) = create else {
                        return (Change::Keep, Arith::NotFound);
                    };
                    let mut digits = Vec::with_capacity(20);
                    crate::num::put_u64(&mut digits, initial);
                    let done = ArithDone {
                        value: initial,
                        cas: 0,
                        old_exptime: 0,
                        created: true,
                    };
                    let change = rewrite(digits, 0, exptime, ItemState::default(), false);
                    return (change, Arith::Done(done));
                };
                if old.value.is_empty()
                    || limits.item_chunked(key.len(), old.flags, old.value.len())
                {
                    return (Change::Keep, Arith::NonNumeric);
                }
                if cas != 0 && cas != old.cas {
                    return (Change::Keep, Arith::Exists);
                }
                let Some(v) = crate::num::safe_strtoull(&old.value) else {
                    return (Change::Keep, Arith::NonNumeric);
                };
                let value = if incr {
                    v.wrapping_add(delta)
                } else {
                    v.saturating_sub(delta)
                };
                let mut digits = Vec::with_capacity(old.value.len().max(20));
                crate::num::put_u64(&mut digits, value);
                // memcached changes the item in place when the number fits
                // (padding it with spaces), keeping its marks; a longer one
                // is a new item, without them.
                let in_place = digits.len() <= old.value.len();
                if in_place {
                    digits.resize(old.value.len(), b' ');
                }
                let state = if in_place {
                    old.state
                } else {
                    ItemState::default()
                };
                let done = ArithDone {
                    value,
                    cas: 0,
                    old_exptime: old.exptime,
                    created: false,
                };
                let new_exptime = exptime.unwrap_or(old.exptime);
                let change = rewrite(digits, old.flags, new_exptime, state, in_place);
                (change, Arith::Done(done))
            })
            .await?;
        Ok(match (arith, done) {
            (Arith::Done(mut d), Updated::Stored { cas }) => {
                d.cas = cas;
                if !d.created {
                    if incr {
                        self.counters.incr_hits += 1;
                    } else {
                        self.counters.decr_hits += 1;
                    }
                }
                Arith::Done(d)
            }
            (Arith::Done(_), other) => {
                return Err(StorageError(format!("incr/decr ended as {other:?}")).into())
            }
            (other, _) => other,
        })
    }

    /// Sets a new expiry on the live item, keeping its CAS unique; returns
    /// it as stored and its old exptime.
    pub(crate) async fn touch(
        &mut self,
        key: &[u8],
        exptime: u32,
    ) -> Result<Option<(Item, u32)>, ExecError> {
        let now = self.now();
        let (found, _) = self
            .storage
            .update(key, |it| match it.filter(|it| it.is_live(now)) {
                None => (Change::Keep, None),
                Some(old) => {
                    let change = Change::Write(NewItem {
                        value: old.value.clone(),
                        flags: old.flags,
                        exptime,
                        state: old.state,
                        kept_cas: Some(old.cas),
                        in_place: true,
                    });
                    (change, Some(old.clone()))
                }
            })
            .await?;
        Ok(found.map(|old| {
            let old_exptime = old.exptime;
            (Item { exptime, ..old }, old_exptime)
        }))
    }

    /// Deletes the live item (only if its CAS is `cas`, when given).
    /// Counts delete hits and misses.
    pub(crate) async fn delete(
        &mut self,
        key: &[u8],
        cas: Option<u64>,
    ) -> Result<Deleted, ExecError> {
        self.remove(key, cas, None).await
    }

    /// [`Connection::delete`], or with `invalidate = Some(exptime)` the
    /// live item is marked stale instead ([`Connection::invalidate`]).
    async fn remove(
        &mut self,
        key: &[u8],
        cas: Option<u64>,
        invalidate: Option<Option<u32>>,
    ) -> Result<Deleted, ExecError> {
        let now = self.now();
        let (deleted, _) = self
            .storage
            .update(key, |it| match it.filter(|it| it.is_live(now)) {
                None => (Change::Keep, Deleted::NotFound),
                Some(old) if cas.is_some_and(|c| c != old.cas) => (Change::Keep, Deleted::Exists),
                Some(old) => match invalidate {
                    None => (Change::Delete, Deleted::Yes),
                    Some(exptime) => {
                        let state = ItemState {
                            stale: true,
                            token_sent: false,
                            ..old.state
                        };
                        let exptime = exptime.unwrap_or(old.exptime);
                        let change = rewrite(old.value.clone(), old.flags, exptime, state, true);
                        (change, Deleted::Yes)
                    }
                },
            })
            .await?;
        if deleted == Deleted::Yes {
            self.counters.delete_hits += 1;
        } else {
            self.counters.delete_misses += 1;
        }
        Ok(deleted)
    }

    /// `flush_all [delay]` (text and binary): a delay of 0 (or negative)
    /// flushes now; otherwise the flush is recorded in the shared state and
    /// applied by commands that find it due (see `check_pending_flush`).
    /// As memcached, a delay of 1 flushes now and also kills items written
    /// later in this second, and an absolute time before the server started
    /// cancels any pending flush without flushing.
    pub(crate) fn flush_all(&mut self, delay: i64) -> Result<(), StorageError> {
        use std::sync::atomic::Ordering;
        self.counters.cmd_flush += 1;
        let now = i64::from(self.now());
        let at = if delay <= 0 {
            now
        } else if delay > RELATIVE_EXPTIME_MAX {
            let started = self.stats.started.load(Ordering::Relaxed) as i64;
            if delay <= started {
                self.stats.flush_at.store(0, Ordering::Relaxed);
                return Ok(());
            }
            delay
        } else {
            now + delay
        };
        // memcached's `oldest_live = at - 1`: items last written at or
        // before it are dead once it is reached; if it is this second,
        // items written later in this second die too.
        let oldest_live = at - 1;
        let pending = if oldest_live >= now {
            oldest_live as u64
        } else {
            0
        };
        self.stats.flush_at.store(pending, Ordering::Relaxed);
        if oldest_live <= now {
            self.storage.flush_all()?;
        }
        Ok(())
    }
}

/// How a claim of an item's win token ended ([`Connection::claim_win`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// This request won (`W`).
    Won,
    /// Another request had won (`Z`).
    Taken,
    /// The item changed or went away meanwhile (no mark).
    Changed,
}

/// The stale-while-revalidate commands of the meta protocol (memcached's
/// `ITEM_STALE` / `ITEM_TOKEN_SENT`).
impl<S: Storage> Connection<S> {
    /// Hands `item`'s win token to this request unless another has it.
    pub(crate) async fn claim_win(&mut self, key: &[u8], item: &Item) -> Result<Claim, ExecError> {
        let state = ItemState {
            token_sent: true,
            ..item.state
        };
        let mode = StoreMode::Win(item.cas);
        Ok(
            match self
                .storage
                .store_item(key, &item.value, item.flags, item.exptime, state, mode)
                .await?
            {
                StoreOutcome::Stored { .. } => Claim::Won,
                StoreOutcome::NotStored => Claim::Taken,
                StoreOutcome::Exists | StoreOutcome::NotFound => Claim::Changed,
            },
        )
    }

    /// `mg <key> N<ttl>` on a miss: an empty item whose win token this
    /// request holds. `None` if another request created the key first.
    pub(crate) async fn vivify(
        &mut self,
        key: &[u8],
        exptime: u32,
    ) -> Result<Option<Item>, ExecError> {
        let state = ItemState {
            token_sent: true,
            ..ItemState::default()
        };
        Ok(
            match self
                .storage
                .store_item(key, b"", 0, exptime, state, StoreMode::Add)
                .await?
            {
                StoreOutcome::Stored { cas } => Some(Item {
                    value: Vec::new(),
                    flags: 0,
                    exptime,
                    cas,
                    state,
                }),
                _ => None,
            },
        )
    }

    /// `md <key> I [T<ttl>]`: marks the live item stale, with a new CAS, its
    /// win token back, and `exptime` if given.
    pub(crate) async fn invalidate(
        &mut self,
        key: &[u8],
        cas: Option<u64>,
        exptime: Option<u32>,
    ) -> Result<Deleted, ExecError> {
        self.remove(key, cas, Some(exptime)).await
    }

    /// `ms <key> I C<cas>`: a CAS older than the live item's stores the
    /// value anyway, marked stale, keeping the item's TTL and win token (as
    /// memcached's `CAS_STALE`); an equal one is a plain CAS store; a newer
    /// one fails with `Exists`.
    /// `item` is the value, client flags, exptime and whether the request
    /// named its key in base64 (`b`).
    pub(crate) async fn store_invalidating(
        &mut self,
        key: &[u8],
        item: (&[u8], u32, u32, bool),
        cas: u64,
    ) -> Result<StoreOutcome, ExecError> {
        let (value, flags, exptime, key_binary) = item;
        let now = self.now();
        let (outcome, done) = self
            .storage
            .update(key, |it| match it.filter(|it| it.is_live(now)) {
                None => (Change::Keep, StoreOutcome::NotFound),
                // CAS 0 is "none", which a compare-and-set never matches
                // (memcached's CAS_NONE), invalidating or not.
                Some(old) if cas == 0 || cas > old.cas => (Change::Keep, StoreOutcome::Exists),
                Some(old) => {
                    let (exptime, state) = if cas == old.cas {
                        let state = ItemState {
                            key_binary,
                            ..ItemState::default()
                        };
                        (exptime, state)
                    } else {
                        let state = ItemState {
                            stale: true,
                            token_sent: old.state.token_sent,
                            key_binary,
                        };
                        (old.exptime, state)
                    };
                    let change = rewrite(value.to_vec(), flags, exptime, state, false);
                    (change, StoreOutcome::Stored { cas: 0 })
                }
            })
            .await?;
        match outcome {
            StoreOutcome::Stored { .. } => self.counters.cas_hits += 1,
            StoreOutcome::Exists => self.counters.cas_badval += 1,
            _ => self.counters.cas_misses += 1,
        }
        Ok(stored(outcome, done))
    }
}
