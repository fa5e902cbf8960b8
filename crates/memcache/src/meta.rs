//! Meta commands: mg, ms, md, ma, mn, me (memcached 1.6.18).
//!
//! Response flags are written in the order the request gave them. Errors
//! are always sent; `q` hides only the nominal reply (`EN` for mg, `HD` for
//! ms/md, a successful ma on an existing item).

use crate::execute::{Arith, Claim, Deleted, ExecError};
use crate::meta_flags::{self, MetaFlags, META_TOKENS_MAX};
use crate::num::{put_i64, put_u64, safe_strtol};
use crate::text::{reply, server_error, After, Tokens};
use crate::{Access, Connection, Item, ItemState, Storage, StoreMode, StoreOutcome};

const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format";

/// The recache marks of an `mg` hit.
#[derive(Clone, Copy, Debug, Default)]
struct Marks {
    /// `Z`: the win token was handed out already.
    taken: bool,
    /// `X`: the item is stale.
    stale: bool,
    /// `W`: this request won the recache.
    won: bool,
}

impl Marks {
    /// The marks `item` carries, before any win of this request.
    fn of(item: &Item) -> Marks {
        Marks {
            taken: item.state.token_sent,
            stale: item.state.stale,
            won: false,
        }
    }
}

/// The `EN` reply of an `mg` miss (none with `q`).
fn mg_miss(tok: &Tokens, f: &MetaFlags, key: &[u8], out: &mut Vec<u8>) {
    if !f.no_reply {
        out.extend_from_slice(b"EN");
        put_opaque_and_key(out, tok, key, f.key_binary);
        out.extend_from_slice(b"\r\n");
    }
}
const OPAQUE_TOO_LONG: &[u8] = b"CLIENT_ERROR opaque token too long";

/// Appends ` k<key>`, base64 with a ` b` flag when the request used `b`.
fn put_key(out: &mut Vec<u8>, key: &[u8], binary: bool) {
    out.extend_from_slice(b" k");
    if binary {
        crate::base64::encode(key, out);
        out.extend_from_slice(b" b");
    } else {
        out.extend_from_slice(key);
    }
}

/// Appends ` <opaque>` and ` k<key>` flags in request order (the only
/// flags memcached echoes on misses and failures).
fn put_opaque_and_key(out: &mut Vec<u8>, tok: &Tokens, key: &[u8], binary: bool) {
    for &t in &tok.t[2..tok.n] {
        match t[0] {
            b'O' => {
                out.push(b' ');
                out.extend_from_slice(t);
            }
            b'k' => put_key(out, key, binary),
            _ => {}
        }
    }
}

/// Remaining TTL as meta `t` reports it: -1 for none.
fn put_ttl(out: &mut Vec<u8>, exptime: u32, now: u32) {
    out.extend_from_slice(b" t");
    if exptime == 0 {
        out.extend_from_slice(b"-1");
    } else {
        put_u64(out, u64::from(exptime.wrapping_sub(now)));
    }
}

impl<S: Storage> Connection<S> {
    /// Runs a meta command; `data` is the input after its line.
    pub(crate) async fn meta_command(
        &mut self,
        tok: &Tokens<'_>,
        data: &[u8],
        out: &mut Vec<u8>,
    ) -> After {
        let mut key_buf = std::mem::take(&mut self.key_buf);
        let after = match tok.t[0][1] {
            b'g' => {
                self.mg(tok, &mut key_buf, out).await;
                After::Line
            }
            b's' => self.ms(tok, data, &mut key_buf, out).await,
            b'd' => {
                self.md(tok, &mut key_buf, out).await;
                After::Line
            }
            b'a' => {
                self.ma(tok, &mut key_buf, out).await;
                After::Line
            }
            b'n' => {
                reply(out, false, b"MN");
                After::Line
            }
            b'e' => {
                self.me(tok, &mut key_buf, out).await;
                After::Line
            }
            _ => {
                reply(out, false, b"ERROR");
                After::Line
            }
        };
        self.key_buf = key_buf;
        after
    }

    /// The checks every meta command but ms makes before its flags, and
    /// the flags; an over-long opaque token too, with `check_opaque`
    /// (mg finds it later, as memcached). `Err` = the reply was written.
    fn meta_prelude(
        &mut self,
        tok: &Tokens,
        check_opaque: bool,
        too_long: &[u8],
        flag_error: Option<&'static str>,
        key_buf: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) -> Result<MetaFlags, ()> {
        if tok.ntokens() < 3 {
            reply(out, false, b"ERROR");
            return Err(());
        }
        if tok.t[1].len() > self.limits.key_bytes_max {
            reply(out, false, BAD_FORMAT);
            return Err(());
        }
        if tok.ntokens() > META_TOKENS_MAX {
            reply(out, false, too_long);
            return Err(());
        }
        let f = match meta_flags::parse(tok, 2, key_buf) {
            Ok(f) => f,
            Err(e) => {
                reply(out, false, flag_error.unwrap_or(e).as_bytes());
                return Err(());
            }
        };
        if check_opaque && meta_flags::opaque_too_long(tok, 2) {
            reply(out, false, OPAQUE_TOO_LONG);
            return Err(());
        }
        Ok(f)
    }

    async fn mg(&mut self, tok: &Tokens<'_>, key_buf: &mut Vec<u8>, out: &mut Vec<u8>) {
        let too_long = b"CLIENT_ERROR options flags are too long";
        let Ok(mut f) = self.meta_prelude(tok, false, too_long, None, key_buf, out) else {
            return;
        };
        // memcached finds an over-long opaque token while composing the
        // reply, after the fetch: it answers the error, but what came
        // before the token (the fetch, a creation, `T`) has been done.
        let bad_opaque = meta_flags::long_opaque_at(tok, 2);
        if let Some(bad) = bad_opaque {
            let before = |flag: u8| tok.t[2..bad].iter().any(|t| t[0] == flag);
            if !before(b'T') {
                f.ttl = None;
            }
        }
        let key: &[u8] = if f.key_binary { key_buf } else { tok.t[1] };
        let mut old_exptime = None;
        let found = match f.ttl {
            Some(t) => {
                let exptime = self.exptime_abs(i64::from(t));
                self.counters.cmd_touch += 1;
                self.touch(key, exptime).await.map(|o| {
                    o.map(|(item, old)| {
                        old_exptime = Some(old);
                        item
                    })
                })
            }
            None => {
                self.counters.cmd_get += 1;
                self.live(key).await.map_err(ExecError::from)
            }
        };
        let item = match found {
            Ok(item) => item,
            Err(e) => return server_error(out, false, &e),
        };
        if let Some(bad) = bad_opaque {
            return self
                .mg_bad_opaque(tok, &f, key, item.is_some(), bad, out)
                .await;
        }
        let Some(item) = item else {
            if f.ttl.is_some() {
                self.counters.touch_misses += 1;
            } else {
                self.counters.get_misses += 1;
            }
            if let Some(ttl) = f.vivify {
                return self.mg_vivify(tok, &f, key, ttl, out).await;
            }
            return mg_miss(tok, &f, key, out);
        };
        if f.ttl.is_some() {
            self.counters.touch_hits += 1;
        } else {
            self.counters.get_hits += 1;
        }
        // memcached weighs `R` against the item's expiry as of its place
        // in the request: a `T` before it has already changed it.
        let flag_at = |flag: u8| tok.t[2..tok.n].iter().position(|t| t[0] == flag);
        let touched_first = matches!((flag_at(b'T'), flag_at(b'R')), (Some(t), Some(r)) if t < r);
        let exptime_at_r = match old_exptime {
            Some(old) if !touched_first => old,
            _ => item.exptime,
        };
        let marks = match self.mg_marks(&f, key, &item, exptime_at_r).await {
            Ok(m) => m,
            Err(e) => return server_error(out, false, &e),
        };
        self.mg_hit(tok, &f, key, &item, old_exptime, false, marks, out);
    }

    /// An `mg` whose opaque token (at `bad`) is over its limit, after its
    /// fetch: memcached answers the error, having already counted a fetch
    /// of a hit (unless `u`, or a flag that delays its bump: `h`, `l`,
    /// `R`, `N`, `T`, wherever it stands) or, on a miss with `N`, created
    /// the empty item (without its win token, which is handed out after
    /// the flags).
    async fn mg_bad_opaque(
        &mut self,
        tok: &Tokens<'_>,
        f: &MetaFlags,
        key: &[u8],
        hit: bool,
        bad: usize,
        out: &mut Vec<u8>,
    ) {
        // memcached's `locked` fetch: its bump waits for the reply, which
        // the error abandons. (`f.ttl` may have been dropped for a `T`
        // after the bad token; the flag still locks.)
        let delayed_bump = tok.t[2..tok.n]
            .iter()
            .any(|t| matches!(t[0], b'h' | b'l' | b'R' | b'N' | b'T'));
        if hit {
            if !(f.no_update || delayed_bump) {
                self.storage.fetched(key);
            }
        } else if let Some(ttl) = f.vivify {
            // The new item starts without expiry; N or T before the bad
            // token give it theirs, in order.
            let mut exptime = 0;
            for t in &tok.t[2..bad] {
                match t[0] {
                    b'N' => exptime = self.exptime_abs(i64::from(ttl)),
                    b'T' => exptime = self.exptime_abs(i64::from(f.ttl.unwrap_or(0))),
                    _ => {}
                }
            }
            let made = self
                .storage
                .store_item(key, b"", 0, exptime, ItemState::default(), StoreMode::Add)
                .await;
            if let Err(e) = made {
                return server_error(out, false, &ExecError::from(e));
            }
        }
        reply(out, false, OPAQUE_TOO_LONG);
    }

    /// The `Z`, `X` and `W` marks of a hit: a stale item, or with `R` one
    /// about to expire, hands its win token to the first request.
    ///
    /// `R<secs>` wins when the item's expiry (`exptime_at_r`: as of the
    /// flag's place in the request, so after a `T` before it) is set and
    /// earlier than `secs` as memcached converts an exptime: 0 never wins,
    /// a negative value never, up to 30 days is relative to now, more is
    /// an absolute time (never, if before the server started). An item a
    /// `T` has just expired still wins: memcached marks it and answers
    /// `W`, though no later request can see it.
    async fn mg_marks(
        &mut self,
        f: &MetaFlags,
        key: &[u8],
        item: &Item,
        exptime_at_r: u32,
    ) -> Result<Marks, ExecError> {
        let recache = f.recache.is_some_and(|secs| {
            let deadline = self.exptime_abs(i64::from(secs));
            exptime_at_r != 0 && self.rel_time(exptime_at_r) < self.rel_time(deadline)
        });
        let mut marks = Marks::of(item);
        if !marks.taken && (marks.stale || recache) {
            if !item.is_live(self.now()) {
                marks.won = true;
                return Ok(marks);
            }
            match self.claim_win(key, item).await? {
                Claim::Won => marks.won = true,
                Claim::Taken => marks.taken = true,
                Claim::Changed => {}
            }
        }
        Ok(marks)
    }

    /// An absolute exptime as memcached orders them (its `realtime`
    /// keeps times relative to its start): every time at or before the
    /// server started is the same, 1; 0 stays 0 (none).
    fn rel_time(&self, exptime: u32) -> u32 {
        let started = self
            .stats
            .started
            .load(std::sync::atomic::Ordering::Relaxed);
        if exptime != 0 && u64::from(exptime) <= started {
            1
        } else {
            exptime
        }
    }

    /// `mg <key> N<ttl>` after a miss: create an empty item and win it, or
    /// (if another request just did) answer with that one.
    async fn mg_vivify(
        &mut self,
        tok: &Tokens<'_>,
        f: &MetaFlags,
        key: &[u8],
        ttl: i32,
        out: &mut Vec<u8>,
    ) {
        let exptime = self.created_exptime(f, &tok.t[2..tok.n], ttl);
        let (item, marks) = match self.vivify(key, exptime).await {
            Ok(Some(item)) => (
                item,
                Marks {
                    won: true,
                    ..Marks::default()
                },
            ),
            Ok(None) => match self.live(key).await {
                Ok(Some(item)) => {
                    let marks = Marks::of(&item);
                    (item, marks)
                }
                Ok(None) => return mg_miss(tok, f, key, out),
                Err(e) => return server_error(out, false, &ExecError::from(e)),
            },
            Err(e) => return server_error(out, false, &e),
        };
        // Created here (not found created by another request): it started
        // without expiry until its N or T flag.
        let created = marks.won;
        let start = created.then_some(0);
        self.mg_hit(tok, f, key, &item, start, created, marks, out);
    }

    #[allow(clippy::too_many_arguments)]
    fn mg_hit(
        &self,
        tok: &Tokens,
        f: &MetaFlags,
        key: &[u8],
        item: &Item,
        old_exptime: Option<u32>,
        created: bool,
        marks: Marks,
        out: &mut Vec<u8>,
    ) {
        let now = self.now();
        // Read before this fetch counts (memcached's delayed bump).
        let access = if f.hit_before || f.last_access {
            self.storage.access(key)
        } else {
            Access::default()
        };
        out.reserve(item.value.len() + key.len() + 64);
        if f.value {
            out.extend_from_slice(b"VA ");
            put_u64(out, item.value.len() as u64);
        } else {
            out.extend_from_slice(b"HD");
        }
        // memcached applies T (and N, to an item it just created, which
        // starts without expiry) in request order: `t` reports the TTL as
        // of its place in the request.
        let mut exptime = old_exptime.unwrap_or(item.exptime);
        for &t in &tok.t[2..tok.n] {
            match t[0] {
                b'T' => {
                    exptime = f
                        .ttl
                        .map_or(item.exptime, |t| self.exptime_abs(i64::from(t)))
                }
                b'N' if created => {
                    exptime = f
                        .vivify
                        .map_or(item.exptime, |n| self.exptime_abs(i64::from(n)))
                }
                b's' => {
                    out.extend_from_slice(b" s");
                    put_u64(out, item.value.len() as u64);
                }
                b't' => put_ttl(out, exptime, now),
                b'c' => {
                    out.extend_from_slice(b" c");
                    put_u64(out, item.cas);
                }
                b'f' => {
                    out.extend_from_slice(b" f");
                    put_u64(out, u64::from(item.flags));
                }
                b'h' => out.extend_from_slice(if access.fetched { b" h1" } else { b" h0" }),
                b'l' => {
                    out.extend_from_slice(b" l");
                    put_u64(out, u64::from(access.idle_secs));
                }
                b'O' => {
                    out.push(b' ');
                    out.extend_from_slice(t);
                }
                // The item's own mark, not the request's (memcached).
                b'k' => put_key(out, key, item.state.key_binary),
                _ => {}
            }
        }
        // memcached's order: Z, X, W after the requested flags.
        if marks.taken {
            out.extend_from_slice(b" Z");
        }
        if marks.stale {
            out.extend_from_slice(b" X");
        }
        if marks.won {
            out.extend_from_slice(b" W");
        }
        out.extend_from_slice(b"\r\n");
        if f.value {
            out.extend_from_slice(&item.value);
            out.extend_from_slice(b"\r\n");
        }
        if !f.no_update {
            self.storage.fetched(key);
        }
    }

    async fn ms(
        &mut self,
        tok: &Tokens<'_>,
        data: &[u8],
        key_buf: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) -> After {
        if tok.ntokens() < 3 {
            reply(out, false, b"ERROR");
            return After::Line;
        }
        if tok.t[1].len() > self.limits.key_bytes_max || tok.ntokens() == 3 {
            reply(out, false, BAD_FORMAT);
            return After::Line;
        }
        if tok.ntokens() > META_TOKENS_MAX {
            reply(out, false, b"CLIENT_ERROR options flags too long");
            return After::Line;
        }
        let vlen = match safe_strtol(tok.t[2]) {
            Some(v) if (0..=i32::MAX - 2).contains(&v) => v as usize,
            _ => {
                reply(out, false, BAD_FORMAT);
                return After::Line;
            }
        };
        // From here on a refused request has its data swallowed.
        let refuse = |this: &mut Self, out: &mut Vec<u8>, msg: &[u8]| {
            reply(out, false, msg);
            this.swallow = vlen as u64 + 2;
            After::Line
        };
        let f = match meta_flags::parse(tok, 3, key_buf) {
            Ok(f) => f,
            Err(e) => return refuse(self, out, e.as_bytes()),
        };
        // memcached notes an over-long opaque token while it copies the
        // return flags, but reports it only after checking the mode: a bad
        // `M` mode is the error answered when both are wrong.
        let bad_opaque = meta_flags::opaque_too_long(tok, 3);
        let mode = match (f.mode, f.cas) {
            (0 | b'S', Some(c)) | (b'R', Some(c)) => StoreMode::Cas(c),
            (0 | b'S', None) => StoreMode::Set,
            (b'R', None) => StoreMode::Replace,
            (b'E', _) => StoreMode::Add,
            // Append and prepend are marked by a mode byte below.
            (b'A' | b'P', _) => StoreMode::Set,
            _ => return refuse(self, out, b"CLIENT_ERROR invalid mode for ms M token"),
        };
        if bad_opaque {
            return refuse(self, out, OPAQUE_TOO_LONG);
        }
        let key: &[u8] = if f.key_binary { key_buf } else { tok.t[1] };
        if !self.limits.item_fits(key.len(), f.client_flags, vlen) {
            let after = refuse(self, out, b"SERVER_ERROR object too large for cache");
            if let Err(e) = self.delete(key, None).await {
                server_error(out, false, &e);
            }
            return after;
        }
        if data.len() < vlen + 2 {
            return After::Incomplete;
        }
        self.counters.cmd_set += 1;
        if &data[vlen..vlen + 2] != b"\r\n" {
            reply(out, false, b"CLIENT_ERROR bad data chunk");
            return After::Data(vlen + 2);
        }
        let value = &data[..vlen];
        let exptime = self.exptime_abs(i64::from(f.ttl.unwrap_or(0)));
        let r = match f.mode {
            b'A' | b'P' => {
                self.concat(key, value, f.mode == b'A', f.cas.unwrap_or(0))
                    .await
            }
            _ => match (f.invalidate, mode) {
                (true, StoreMode::Cas(cas)) => {
                    let item = (value, f.client_flags, exptime, f.key_binary);
                    self.store_invalidating(key, item, cas).await
                }
                _ => {
                    let state = ItemState {
                        key_binary: f.key_binary,
                        ..ItemState::default()
                    };
                    self.store_item(key, value, f.client_flags, exptime, state, mode)
                        .await
                        .map_err(ExecError::from)
                }
            },
        };
        let (code, cas): (&[u8], u64) = match r {
            Ok(StoreOutcome::Stored { cas }) => {
                if f.no_reply {
                    return After::Data(vlen + 2);
                }
                (b"HD", cas)
            }
            Ok(StoreOutcome::NotStored) => (b"NS", 0),
            Ok(StoreOutcome::Exists) => (b"EX", 0),
            Ok(StoreOutcome::NotFound) => (b"NF", 0),
            Err(e) => {
                server_error(out, false, &e);
                return After::Data(vlen + 2);
            }
        };
        out.extend_from_slice(code);
        for &t in &tok.t[3..tok.n] {
            match t[0] {
                b'O' => {
                    out.push(b' ');
                    out.extend_from_slice(t);
                }
                b'k' => put_key(out, key, f.key_binary),
                b'c' => {
                    out.extend_from_slice(b" c");
                    put_u64(out, cas);
                }
                _ => {}
            }
        }
        out.extend_from_slice(b"\r\n");
        After::Data(vlen + 2)
    }

    async fn md(&mut self, tok: &Tokens<'_>, key_buf: &mut Vec<u8>, out: &mut Vec<u8>) {
        let too_long = b"CLIENT_ERROR options flags too long";
        let flag_error = Some("CLIENT_ERROR invalid or duplicate flag");
        let Ok(f) = self.meta_prelude(tok, true, too_long, flag_error, key_buf, out) else {
            return;
        };
        let key: &[u8] = if f.key_binary { key_buf } else { tok.t[1] };
        let deleted = if f.invalidate {
            // T sets the TTL only together with I.
            let exptime = f.ttl.map(|t| self.exptime_abs(i64::from(t)));
            self.invalidate(key, f.cas, exptime).await
        } else {
            self.delete(key, f.cas).await
        };
        let code: &[u8] = match deleted {
            Ok(Deleted::Yes) if f.no_reply => return,
            Ok(Deleted::Yes) => b"HD",
            Ok(Deleted::NotFound) => b"NF",
            Ok(Deleted::Exists) => b"EX",
            Err(e) => return server_error(out, false, &e),
        };
        out.extend_from_slice(code);
        put_opaque_and_key(out, tok, key, f.key_binary);
        out.extend_from_slice(b"\r\n");
    }

    async fn ma(&mut self, tok: &Tokens<'_>, key_buf: &mut Vec<u8>, out: &mut Vec<u8>) {
        let too_long = b"CLIENT_ERROR options flags too long";
        let flag_error = Some("CLIENT_ERROR invalid or duplicate flag");
        let Ok(f) = self.meta_prelude(tok, false, too_long, flag_error, key_buf, out) else {
            return;
        };
        let incr = match f.mode {
            0 | b'I' | b'+' => true,
            b'D' | b'-' => false,
            _ => return reply(out, false, b"CLIENT_ERROR invalid mode for ma M token"),
        };
        // memcached finds an over-long opaque token while composing the
        // reply, after the arithmetic: the increment (or the creation, `N`)
        // is done, and `T` and `N` before the token have set the expiry,
        // but those after it have not. A non-numeric value is reported
        // instead, as it comes first.
        let bad_opaque = meta_flags::long_opaque_at(tok, 2);
        let flags = &tok.t[2..bad_opaque.unwrap_or(tok.n)];
        let key: &[u8] = if f.key_binary { key_buf } else { tok.t[1] };
        let ttl = f
            .ttl
            .filter(|_| flags.iter().any(|t| t[0] == b'T'))
            .map(|t| self.exptime_abs(i64::from(t)));
        let delta = f.delta.unwrap_or(1);
        let create = f
            .vivify
            .map(|n| (f.initial, self.created_exptime(&f, flags, n)));
        let arith = self
            .arith(key, incr, delta, f.cas.unwrap_or(0), ttl, create)
            .await;
        if let Ok(Arith::NotFound) = arith {
            if incr {
                self.counters.incr_misses += 1;
            } else {
                self.counters.decr_misses += 1;
            }
        }
        if bad_opaque.is_some() && !matches!(arith, Ok(Arith::NonNumeric) | Err(_)) {
            return reply(out, false, OPAQUE_TOO_LONG);
        }
        let done = match arith {
            Ok(Arith::Done(d)) if d.created => (d.value, d.cas, 0, true),
            Ok(Arith::Done(d)) => {
                if f.no_reply {
                    return;
                }
                (d.value, d.cas, d.old_exptime, false)
            }
            Ok(Arith::NotFound) => return self.ma_fail(b"NF", tok, key, &f, out),
            Ok(Arith::Exists) => return self.ma_fail(b"EX", tok, key, &f, out),
            Ok(Arith::NonNumeric) => {
                let msg = b"CLIENT_ERROR cannot increment or decrement non-numeric value";
                return reply(out, false, msg);
            }
            Err(e) => return server_error(out, false, &e),
        };
        let (value, cas, mut exptime, created) = done;
        let mut digits = Vec::with_capacity(20);
        put_u64(&mut digits, value);
        if f.value {
            out.extend_from_slice(b"VA ");
            put_u64(out, digits.len() as u64);
        } else {
            out.extend_from_slice(b"HD");
        }
        let now = self.now();
        for &t in &tok.t[2..tok.n] {
            match t[0] {
                b'c' => {
                    out.extend_from_slice(b" c");
                    put_u64(out, cas);
                }
                b't' => put_ttl(out, exptime, now),
                b'T' => exptime = ttl.unwrap_or(exptime),
                b'N' if created => exptime = self.exptime_abs(i64::from(f.vivify.unwrap_or(0))),
                b'O' => {
                    out.push(b' ');
                    out.extend_from_slice(t);
                }
                b'k' => put_key(out, key, f.key_binary),
                _ => {}
            }
        }
        if f.value {
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(&digits);
        }
        out.extend_from_slice(b"\r\n");
    }

    /// The exptime of an item created on a miss (ma's and mg's `N`): what
    /// the `N` and `T` flags among `flags` give, the later one winning as
    /// in memcached, which applies them in request order to the new item
    /// (created with no expiry).
    fn created_exptime(&self, f: &MetaFlags, flags: &[&[u8]], vivify: i32) -> u32 {
        let mut exptime = 0;
        for &t in flags {
            match t[0] {
                b'N' => exptime = self.exptime_abs(i64::from(vivify)),
                b'T' => exptime = self.exptime_abs(i64::from(f.ttl.unwrap_or(0))),
                _ => {}
            }
        }
        exptime
    }

    fn ma_fail(&self, code: &[u8], tok: &Tokens, key: &[u8], f: &MetaFlags, out: &mut Vec<u8>) {
        out.extend_from_slice(code);
        put_opaque_and_key(out, tok, key, f.key_binary);
        out.extend_from_slice(b"\r\n");
    }

    /// `me <key> [b]`: memcached's debug line. `exp`, `la`, `cas` and
    /// `fetch` are real; `cls` is fixed and `size` is the key plus value
    /// length.
    async fn me(&mut self, tok: &Tokens<'_>, key_buf: &mut Vec<u8>, out: &mut Vec<u8>) {
        if tok.ntokens() < 3 || tok.t[1].len() > self.limits.key_bytes_max {
            return reply(out, false, BAD_FORMAT);
        }
        let binary = tok.ntokens() >= 4 && tok.t[2] == b"b";
        if binary && crate::base64::decode(tok.t[1], key_buf).is_none() {
            return reply(out, false, BAD_FORMAT);
        }
        let key: &[u8] = if binary { key_buf } else { tok.t[1] };
        let item = match self.live(key).await {
            Ok(Some(item)) => item,
            Ok(None) => return reply(out, false, b"EN"),
            Err(e) => return server_error(out, false, &e.into()),
        };
        out.extend_from_slice(b"ME ");
        if binary {
            crate::base64::encode(key, out);
        } else {
            out.extend_from_slice(key);
        }
        out.extend_from_slice(b" exp=");
        if item.exptime == 0 {
            out.extend_from_slice(b"-1");
        } else {
            put_i64(out, i64::from(self.now()) - i64::from(item.exptime));
        }
        let access = self.storage.access(key);
        out.extend_from_slice(b" la=");
        put_u64(out, u64::from(access.idle_secs));
        out.extend_from_slice(b" cas=");
        put_u64(out, item.cas);
        out.extend_from_slice(if access.fetched {
            &b" fetch=yes cls=1 size="[..]
        } else {
            b" fetch=no cls=1 size="
        });
        put_u64(out, (key.len() + item.value.len()) as u64);
        out.extend_from_slice(b"\r\n");
    }
}
