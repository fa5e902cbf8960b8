//! The classic text protocol: line framing, memcached's tokenizer and the
//! commands get/gets/gat/gats, set/add/replace/append/prepend/cas,
//! incr/decr, delete, touch, flush_all, stats, version, verbosity, quit.
//! Meta commands (`m?`) are handed to `meta`.

use crate::execute::{Arith, Deleted, ExecError};
use crate::num::{put_u64, safe_strtol, safe_strtoul, safe_strtoull};
use crate::stats::Group;
use crate::{Connection, Step, Storage, StoreMode, StoreOutcome, REPLY_PAUSE_BYTES, VERSION};

/// A line without its newline in this many bytes closes the connection
/// (unless it looks like a long multiget): memcached's read buffer
/// (`READ_BUFFER_SIZE`). memcached reads up to this much at once and
/// closes when what it read holds more than 2048 bytes of a line and no
/// newline. It decides on what one read brought; this crate cannot see
/// reads (a server may hand it any prefix of what it received), so it
/// decides on a full buffer's worth: a line that arrives whole is served
/// however long it is up to that size, as memcached serves it, where
/// deciding at 2048 bytes of a prefix would close (only a client that
/// stops mid-line after 2 KiB sees a difference: memcached closes at
/// once, this waits for more).
pub(crate) const LINE_BYTES_MAX: usize = 16 << 10;

/// memcached lets a multiget line grow without bound; this crate stops at
/// 4 MiB (about 16 000 keys of 250 bytes) and closes.
pub(crate) const GET_LINE_BYTES_MAX: usize = 4 << 20;

/// Keys of a multi-get read from storage at once.
const GET_CHUNK_KEYS: usize = 32;

/// memcached's `MAX_TOKENS`: the tokenizer keeps at most 23 tokens; the
/// count it reports (`ntokens`) includes a terminal token, so is at most 24.
const TOKENS_MAX: usize = 23;

/// The 2-byte data terminator.
const CRLF: &[u8] = b"\r\n";

/// The first tokens of a command line, split on spaces as memcached does.
pub(crate) struct Tokens<'a> {
    pub t: [&'a [u8]; TOKENS_MAX],
    /// Tokens held (at most 23; later ones are not kept).
    pub n: usize,
}

impl<'a> Tokens<'a> {
    pub(crate) fn new(line: &'a [u8]) -> Tokens<'a> {
        let mut tokens = Tokens {
            t: [&[]; TOKENS_MAX],
            n: 0,
        };
        for tok in line.split(|&b| b == b' ').filter(|t| !t.is_empty()) {
            tokens.t[tokens.n] = tok;
            tokens.n += 1;
            if tokens.n == TOKENS_MAX {
                break;
            }
        }
        tokens
    }

    /// memcached's `ntokens`: tokens plus the terminal one.
    #[inline]
    pub(crate) fn ntokens(&self) -> usize {
        self.n + 1
    }

    /// memcached's `set_noreply_maybe`: the last token is `noreply`.
    #[inline]
    fn noreply(&self) -> bool {
        self.n > 0 && self.t[self.n - 1] == b"noreply"
    }
}

/// Appends `line` + CRLF unless the command said `noreply`.
#[inline]
pub(crate) fn reply(out: &mut Vec<u8>, noreply: bool, line: &[u8]) {
    if !noreply {
        out.extend_from_slice(line);
        out.extend_from_slice(CRLF);
    }
}

/// Appends `SERVER_ERROR <message>` unless `noreply`.
pub(crate) fn server_error(out: &mut Vec<u8>, noreply: bool, e: &ExecError) {
    if !noreply {
        out.extend_from_slice(b"SERVER_ERROR ");
        out.extend_from_slice(e.message().as_bytes());
        out.extend_from_slice(CRLF);
    }
}

/// How much a command used beyond its line.
pub(crate) enum After {
    /// Only the command line.
    Line,
    /// The line and this many bytes of data after it.
    Data(usize),
    /// The data block has not fully arrived.
    Incomplete,
    /// Close the connection (`quit`).
    Close,
    /// A multi-get answered in part; the line is fed again.
    Paused,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Update {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    Cas,
}

impl<S: Storage> Connection<S> {
    /// Frames one text request at the start of `input` and runs it.
    pub(crate) async fn text_step(&mut self, input: &[u8], out: &mut Vec<u8>) -> Step {
        let nl = memchr::memchr(b'\n', input);
        // No newline in a read buffer's worth: junk, unless a multiget
        // (decided on the first `LINE_BYTES_MAX` bytes alone, so the same
        // whatever prefix of the input a server hands over).
        if nl.unwrap_or(input.len()) >= LINE_BYTES_MAX {
            let lead = input.iter().take_while(|&&b| b == b' ').count();
            let rest = &input[lead..];
            let multiget = rest.starts_with(b"get ") || rest.starts_with(b"gets ");
            if !(lead <= 100 && multiget) {
                return Step::Close(0);
            }
            if nl.is_none() && input.len() > GET_LINE_BYTES_MAX {
                return Step::Close(0);
            }
        }
        let Some(nl) = nl else {
            return Step::Incomplete;
        };
        let mut line = &input[..nl];
        if line.len() > 1 && line[line.len() - 1] == b'\r' {
            line = &line[..line.len() - 1];
        }
        // memcached works on C strings: a NUL ends the command.
        if let Some(z) = memchr::memchr(0, line) {
            line = &line[..z];
        }
        self.check_pending_flush();
        if self.get_resume.is_none() && self.read_ahead_wanted(is_plain_get(line)) {
            self.prefetch_gets(input).await;
        }
        match self.text_command(line, &input[nl + 1..], out).await {
            After::Line => Step::Done(nl + 1),
            After::Data(n) => Step::Done(nl + 1 + n),
            After::Incomplete => Step::Incomplete,
            After::Close => Step::Close(nl + 1),
            After::Paused => Step::Paused,
        }
    }

    /// Pipelined gets: when `input` starts with two or more complete
    /// `get`/`gets` lines, reads all their keys at once (up to
    /// [`PREFETCH_KEYS_MAX`]), so a client that pipelines single-key gets
    /// has them in flight together, as one multi-key get would. Only reads
    /// are moved earlier, and only past other reads of this connection, so
    /// the replies are those of executing the lines one by one.
    async fn prefetch_gets(&mut self, input: &[u8]) {
        let mut keys: Vec<&[u8]> = Vec::new();
        let mut lines = 0;
        let mut rest = input;
        while let Some(nl) = memchr::memchr(b'\n', rest) {
            let mut line = &rest[..nl];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            if !is_plain_get(line) || memchr::memchr(0, line).is_some() {
                break;
            }
            let before = keys.len();
            keys.extend(line.split(|&b| b == b' ').filter(|t| !t.is_empty()).skip(1));
            if keys[before..]
                .iter()
                .any(|k| k.len() > self.limits.key_bytes_max)
                || keys.len() > PREFETCH_KEYS_MAX
            {
                keys.truncate(before);
                break;
            }
            lines += 1;
            rest = &rest[nl + 1..];
        }
        if lines >= 2 {
            self.read_ahead(&keys).await;
        }
    }

    /// Dispatches one command line; `data` is the input after it.
    async fn text_command(&mut self, line: &[u8], data: &[u8], out: &mut Vec<u8>) -> After {
        let tok = Tokens::new(line);
        let nt = tok.ntokens();
        if tok.n == 0 || tok.t[0].len() < 2 {
            reply(out, false, b"ERROR");
            return After::Line;
        }
        let cmd = tok.t[0];
        if cmd.len() == 2 && cmd[0] == b'm' {
            return self.meta_command(&tok, data, out).await;
        }
        let want = |ok: bool, out: &mut Vec<u8>| {
            if !ok {
                reply(out, false, b"ERROR");
            }
            ok
        };
        match cmd {
            b"get" | b"bget" | b"gets" | b"gat" | b"gats" => {
                if want(nt >= 3, out) {
                    let cas = cmd == b"gets" || cmd == b"gats";
                    let touch = cmd == b"gat" || cmd == b"gats";
                    if self.text_get(line, &tok, cas, touch, out).await {
                        return After::Paused;
                    }
                }
                After::Line
            }
            b"set" | b"add" | b"replace" | b"append" | b"prepend" => {
                if !want(nt == 6 || nt == 7, out) {
                    return After::Line;
                }
                let u = match cmd {
                    b"set" => Update::Set,
                    b"add" => Update::Add,
                    b"replace" => Update::Replace,
                    b"append" => Update::Append,
                    _ => Update::Prepend,
                };
                self.text_update(&tok, u, data, out).await
            }
            b"cas" => {
                if !want(nt == 7 || nt == 8, out) {
                    return After::Line;
                }
                self.text_update(&tok, Update::Cas, data, out).await
            }
            b"incr" | b"decr" => {
                if want(nt == 4 || nt == 5, out) {
                    self.text_arith(&tok, cmd == b"incr", out).await;
                }
                After::Line
            }
            b"delete" => {
                if want((3..=5).contains(&nt), out) {
                    self.text_delete(&tok, out).await;
                }
                After::Line
            }
            b"touch" => {
                if want(nt == 4 || nt == 5, out) {
                    self.text_touch(&tok, out).await;
                }
                After::Line
            }
            b"flush_all" => {
                if want((2..=4).contains(&nt), out) {
                    self.text_flush_all(&tok, out);
                }
                After::Line
            }
            b"stats" => {
                self.text_stats(&tok, out);
                After::Line
            }
            b"version" => {
                out.extend_from_slice(b"VERSION ");
                out.extend_from_slice(VERSION.as_bytes());
                out.extend_from_slice(CRLF);
                After::Line
            }
            b"verbosity" => {
                if want(nt == 3 || nt == 4, out) {
                    let noreply = tok.noreply();
                    match safe_strtoul(tok.t[1]) {
                        Some(_) => reply(out, noreply, b"OK"),
                        None => reply(out, noreply, b"CLIENT_ERROR bad command line format"),
                    }
                }
                After::Line
            }
            b"quit" => After::Close,
            b"shutdown" => {
                reply(out, false, b"ERROR: shutdown not enabled");
                After::Line
            }
            b"slabs" => {
                self.text_slabs(&tok, out);
                After::Line
            }
            // Commands memcached knows that do not apply here.
            b"lru_crawler" | b"lru" | b"watch" | b"cache_memlimit" | b"extstore" | b"debugtime"
            | b"misbehave" => {
                reply(out, false, b"ERROR");
                After::Line
            }
            // Not memcached's protocol: an HTTP request line (`GET /
            // HTTP/1.0`) or the like. memcached closes without a word.
            _ if tok.t[tok.n - 1].starts_with(b"HTTP/") => After::Close,
            _ => {
                reply(out, false, b"ERROR");
                After::Line
            }
        }
    }

    /// `slabs reassign <src> <dst>` and `slabs automove <0|1|2|ratio N>`,
    /// answered as memcached answers them on a server whose slab classes
    /// have no spare pages: nvdepot has no slab classes to move memory
    /// between (items live in log segments), so a reassignment never has
    /// anything to move, and automove settings are accepted and have no
    /// effect.
    fn text_slabs(&self, tok: &Tokens<'_>, out: &mut Vec<u8>) {
        let nt = tok.ntokens();
        if nt == 5 && tok.t[1] == b"reassign" {
            let (Some(src), Some(dst)) = (safe_strtol(tok.t[2]), safe_strtol(tok.t[3])) else {
                reply(out, false, b"CLIENT_ERROR bad command line format");
                return;
            };
            let largest = slab_class_largest(self.limits.item_bytes_max);
            let line: &[u8] = if src == dst {
                b"SAME src and dst class are identical"
            } else if !(0..=largest).contains(&src) || !(0..=largest).contains(&dst) {
                b"BADCLASS invalid src or dst class id"
            } else {
                b"NOSPARE source class has no spare pages"
            };
            reply(out, false, line);
        } else if nt >= 4 && tok.t[1] == b"automove" {
            let noreply = tok.noreply();
            let line: &[u8] = if tok.t[2] == b"ratio" {
                let ratio = (nt >= 5)
                    .then(|| std::str::from_utf8(tok.t[3]).ok())
                    .flatten()
                    .and_then(|t| t.parse::<f64>().ok());
                if ratio.is_some() {
                    b"OK"
                } else {
                    b"ERROR"
                }
            } else {
                match safe_strtoul(tok.t[2]) {
                    None => b"CLIENT_ERROR bad command line format",
                    Some(0..=2) => b"OK",
                    Some(_) => b"ERROR",
                }
            };
            reply(out, noreply, line);
        } else {
            reply(out, false, b"ERROR");
        }
    }

    /// get, gets, gat, gats over every key of the line (not only the first
    /// 23 tokens). A key over the limit discards the hits so far and
    /// replies `CLIENT_ERROR bad command line format`, as memcached does.
    ///
    /// Keys are read [`GET_CHUNK_KEYS`] at a time, and once a call has
    /// composed [`REPLY_PAUSE_BYTES`] of values with keys left, it pauses
    /// (returns true) and remembers the next key: the kit sends what is
    /// composed and feeds the line again. So a multi-get of any size holds
    /// about a megabyte of replies, not all of them (a storage error after
    /// a pause ends the reply with `SERVER_ERROR` after the values sent).
    async fn text_get(
        &mut self,
        line: &[u8],
        tok: &Tokens<'_>,
        cas: bool,
        touch: bool,
        out: &mut Vec<u8>,
    ) -> bool {
        let mut skip = 1;
        let mut exptime = 0;
        if touch {
            let Some(t) = safe_strtol(tok.t[1]) else {
                reply(out, false, b"CLIENT_ERROR invalid exptime argument");
                return false;
            };
            exptime = self.exptime_abs(i64::from(t));
            skip = 2;
        }
        let mark = out.len();
        let keys: Vec<&[u8]> = line
            .split(|&b| b == b' ')
            .filter(|t| !t.is_empty())
            .skip(skip)
            .collect();
        // memcached runs the keys before a bad one (counters, touches)
        // and then discards their replies.
        let bad = keys
            .iter()
            .position(|k| k.len() > self.limits.key_bytes_max);
        let end = bad.unwrap_or(keys.len());
        let mut at = self.get_resume.take().unwrap_or(0);
        while at < end {
            let chunk = &keys[at..end.min(at + GET_CHUNK_KEYS)];
            let chunk_at = at;
            at += chunk.len();
            // Several keys: read them all at once (on flash, one device
            // read each, in flight together), then answer in order, unless
            // the pipelined gets' read-ahead (`prefetch_gets`) holds them.
            let mut fetched = if !touch && chunk.len() > 1 && self.prefetched.is_empty() {
                self.fetch_many(chunk).await
            } else {
                Vec::new()
            }
            .into_iter();
            for (i, &key) in chunk.iter().enumerate() {
                if bad.is_none() && out.len() - mark >= REPLY_PAUSE_BYTES {
                    // Pause before this key (the rest of the chunk's reads
                    // are dropped and done again on resuming).
                    self.get_resume = Some(chunk_at + i);
                    return true;
                }
                let found = if touch {
                    self.counters.cmd_touch += 1;
                    self.touch(key, exptime)
                        .await
                        .map(|o| o.map(|(item, _)| item))
                } else {
                    self.counters.cmd_get += 1;
                    match fetched.next() {
                        Some(got) => self.live_fetched(key, got).await,
                        None => self.live_read_ahead(key).await,
                    }
                    .map_err(ExecError::from)
                };
                let item = match found {
                    Ok(item) => item,
                    Err(e) => {
                        out.truncate(mark);
                        server_error(out, false, &e);
                        return false;
                    }
                };
                let Some(item) = item else {
                    if touch {
                        self.counters.touch_misses += 1;
                    } else {
                        self.counters.get_misses += 1;
                    }
                    continue;
                };
                if touch {
                    self.counters.touch_hits += 1;
                } else {
                    self.counters.get_hits += 1;
                }
                self.storage.fetched(key);
                out.reserve(key.len() + item.value.len() + 64);
                out.extend_from_slice(b"VALUE ");
                out.extend_from_slice(key);
                out.push(b' ');
                put_u64(out, u64::from(item.flags));
                out.push(b' ');
                put_u64(out, item.value.len() as u64);
                if cas {
                    out.push(b' ');
                    put_u64(out, item.cas);
                }
                out.extend_from_slice(CRLF);
                out.extend_from_slice(&item.value);
                out.extend_from_slice(CRLF);
            }
            if bad.is_some() {
                out.truncate(mark);
            }
        }
        if bad.is_some() {
            out.truncate(mark);
            reply(out, false, b"CLIENT_ERROR bad command line format");
            return false;
        }
        out.extend_from_slice(b"END\r\n");
        false
    }

    /// set, add, replace, append, prepend, cas and their data block.
    async fn text_update(
        &mut self,
        tok: &Tokens<'_>,
        u: Update,
        data: &[u8],
        out: &mut Vec<u8>,
    ) -> After {
        let noreply = tok.noreply();
        let key = tok.t[1];
        let bad = b"CLIENT_ERROR bad command line format";
        if key.len() > self.limits.key_bytes_max {
            reply(out, noreply, bad);
            return After::Line;
        }
        let (Some(flags), Some(exptime), Some(vlen)) = (
            safe_strtoul(tok.t[2]),
            safe_strtol(tok.t[3]),
            safe_strtol(tok.t[4]),
        ) else {
            reply(out, noreply, bad);
            return After::Line;
        };
        let exptime = self.exptime_abs(i64::from(exptime));
        let mut req_cas = 0;
        if u == Update::Cas {
            let Some(c) = safe_strtoull(tok.t[5]) else {
                reply(out, noreply, bad);
                return After::Line;
            };
            req_cas = c;
        }
        if !(0..=i32::MAX - 2).contains(&vlen) {
            reply(out, noreply, bad);
            return After::Line;
        }
        let vlen = vlen as usize;
        if !self.limits.item_fits(key.len(), flags, vlen) {
            reply(out, noreply, b"SERVER_ERROR object too large for cache");
            self.swallow = vlen as u64 + 2;
            // memcached drops the old value of a refused set, so a reader
            // cannot see stale data.
            if u == Update::Set {
                if let Err(e) = self.delete(key, None).await {
                    server_error(out, noreply, &e);
                }
            }
            return After::Line;
        }
        if data.len() < vlen + 2 {
            return After::Incomplete;
        }
        self.counters.cmd_set += 1;
        if &data[vlen..vlen + 2] != CRLF {
            reply(out, noreply, b"CLIENT_ERROR bad data chunk");
            return After::Data(vlen + 2);
        }
        let value = &data[..vlen];
        let r = match u {
            Update::Set => self.store(key, value, flags, exptime, StoreMode::Set).await,
            Update::Add => self.store(key, value, flags, exptime, StoreMode::Add).await,
            Update::Replace => {
                self.store(key, value, flags, exptime, StoreMode::Replace)
                    .await
            }
            Update::Cas => {
                self.store(key, value, flags, exptime, StoreMode::Cas(req_cas))
                    .await
            }
            Update::Append | Update::Prepend => {
                match self.concat(key, value, u == Update::Append, 0).await {
                    Ok(r) => Ok(r),
                    Err(e) => {
                        server_error(out, noreply, &e);
                        return After::Data(vlen + 2);
                    }
                }
            }
        };
        match r {
            Ok(StoreOutcome::Stored { .. }) => reply(out, noreply, b"STORED"),
            Ok(StoreOutcome::NotStored) => reply(out, noreply, b"NOT_STORED"),
            Ok(StoreOutcome::Exists) => reply(out, noreply, b"EXISTS"),
            Ok(StoreOutcome::NotFound) => reply(out, noreply, b"NOT_FOUND"),
            Err(e) => server_error(out, noreply, &e.into()),
        }
        After::Data(vlen + 2)
    }

    async fn text_arith(&mut self, tok: &Tokens<'_>, incr: bool, out: &mut Vec<u8>) {
        let noreply = tok.noreply();
        let key = tok.t[1];
        if key.len() > self.limits.key_bytes_max {
            reply(out, noreply, b"CLIENT_ERROR bad command line format");
            return;
        }
        let Some(delta) = safe_strtoull(tok.t[2]) else {
            reply(out, noreply, b"CLIENT_ERROR invalid numeric delta argument");
            return;
        };
        match self.arith(key, incr, delta, 0, None, None).await {
            Ok(Arith::Done(d)) => {
                if !noreply {
                    put_u64(out, d.value);
                    out.extend_from_slice(CRLF);
                }
            }
            Ok(Arith::NotFound) | Ok(Arith::Exists) => {
                if incr {
                    self.counters.incr_misses += 1;
                } else {
                    self.counters.decr_misses += 1;
                }
                reply(out, noreply, b"NOT_FOUND");
            }
            Ok(Arith::NonNumeric) => reply(
                out,
                noreply,
                b"CLIENT_ERROR cannot increment or decrement non-numeric value",
            ),
            Err(e) => server_error(out, noreply, &e),
        }
    }

    async fn text_delete(&mut self, tok: &Tokens<'_>, out: &mut Vec<u8>) {
        let nt = tok.ntokens();
        let mut noreply = false;
        if nt > 3 {
            let hold_is_zero = tok.t[2] == b"0";
            noreply = tok.noreply();
            let valid =
                (nt == 4 && (hold_is_zero || noreply)) || (nt == 5 && hold_is_zero && noreply);
            if !valid {
                reply(
                    out,
                    noreply,
                    b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]",
                );
                return;
            }
        }
        let key = tok.t[1];
        if key.len() > self.limits.key_bytes_max {
            reply(out, noreply, b"CLIENT_ERROR bad command line format");
            return;
        }
        match self.delete(key, None).await {
            Ok(Deleted::Yes) => reply(out, noreply, b"DELETED"),
            Ok(_) => reply(out, noreply, b"NOT_FOUND"),
            Err(e) => server_error(out, noreply, &e),
        }
    }

    async fn text_touch(&mut self, tok: &Tokens<'_>, out: &mut Vec<u8>) {
        let noreply = tok.noreply();
        let key = tok.t[1];
        if key.len() > self.limits.key_bytes_max {
            reply(out, noreply, b"CLIENT_ERROR bad command line format");
            return;
        }
        let Some(t) = safe_strtol(tok.t[2]) else {
            reply(out, noreply, b"CLIENT_ERROR invalid exptime argument");
            return;
        };
        let exptime = self.exptime_abs(i64::from(t));
        self.counters.cmd_touch += 1;
        match self.touch(key, exptime).await {
            Ok(Some(_)) => {
                self.counters.touch_hits += 1;
                self.storage.fetched(key);
                reply(out, noreply, b"TOUCHED");
            }
            Ok(None) => {
                self.counters.touch_misses += 1;
                reply(out, noreply, b"NOT_FOUND");
            }
            Err(e) => server_error(out, noreply, &e),
        }
    }

    fn text_flush_all(&mut self, tok: &Tokens, out: &mut Vec<u8>) {
        let noreply = tok.noreply();
        let mut delay = 0;
        if tok.ntokens() != if noreply { 3 } else { 2 } {
            let Some(t) = safe_strtol(tok.t[1]) else {
                self.counters.cmd_flush += 1;
                reply(out, noreply, b"CLIENT_ERROR invalid exptime argument");
                return;
            };
            delay = t;
        }
        match self.flush_all(i64::from(delay)) {
            Ok(()) => reply(out, noreply, b"OK"),
            Err(e) => server_error(out, noreply, &e.into()),
        }
    }

    fn text_stats(&mut self, tok: &Tokens, out: &mut Vec<u8>) {
        let group = if tok.n == 1 {
            Group::General
        } else {
            match tok.t[1] {
                b"reset" => {
                    self.stats_reset();
                    reply(out, false, b"RESET");
                    return;
                }
                b"detail" => {
                    let line: &[u8] = match tok.t.get(2).filter(|_| tok.n > 2) {
                        Some(&b"on") | Some(&b"off") => b"OK",
                        Some(&b"dump") => b"END",
                        _ => b"CLIENT_ERROR usage: stats detail on|off|dump",
                    };
                    reply(out, false, line);
                    return;
                }
                b"cachedump" => {
                    let line: &[u8] = if tok.n < 4 {
                        b"CLIENT_ERROR bad command line"
                    } else if safe_strtoul(tok.t[2]).is_none() || safe_strtoul(tok.t[3]).is_none() {
                        b"CLIENT_ERROR bad command line format"
                    } else {
                        b"END"
                    };
                    reply(out, false, line);
                    return;
                }
                b"settings" => Group::Settings,
                b"items" | b"slabs" | b"conns" => Group::Empty,
                b"sizes" => Group::Sizes,
                _ => {
                    reply(out, false, b"ERROR");
                    return;
                }
            }
        };
        self.stats_lines(group, &mut |name, value| {
            out.extend_from_slice(b"STAT ");
            out.extend_from_slice(name);
            out.push(b' ');
            out.extend_from_slice(value);
            out.extend_from_slice(CRLF);
        });
        out.extend_from_slice(b"END\r\n");
    }
}

/// Keys read ahead for pipelined gets, at most.
const PREFETCH_KEYS_MAX: usize = 256;

/// A `get` or `gets` line (the commands whose reads may be started early).
fn is_plain_get(line: &[u8]) -> bool {
    line.starts_with(b"get ") || line.starts_with(b"gets ")
}

/// The largest slab class id memcached 1.6 would have (`power_largest`)
/// for this item size limit, with its defaults: classes from 96-byte
/// chunks growing by a factor of 1.25 up to the slab chunk limit (512 KiB,
/// or the item limit if smaller). `slabs reassign` names classes by id.
fn slab_class_largest(item_bytes_max: usize) -> i32 {
    let chunk_max = (item_bytes_max as f64).min(f64::from(512 * 1024));
    let mut size: u32 = 96;
    let mut class = 0;
    loop {
        class += 1;
        if class >= 63 || f64::from(size) >= chunk_max / 1.25 {
            return class;
        }
        size = size.next_multiple_of(8);
        size = (f64::from(size) * 1.25) as u32;
    }
}

#[cfg(test)]
mod slab_tests {
    #[test]
    fn memcached_default_has_39_slab_classes() {
        assert_eq!(super::slab_class_largest(1 << 20), 39);
        assert_eq!(super::slab_class_largest(4 << 20), 39);
    }
}
