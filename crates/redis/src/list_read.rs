//! The list commands that read one list: LLEN, LINDEX, LRANGE and LPOS.
//! A paged list answers LLEN from its metadata and LINDEX and LRANGE from
//! only the pages they need, a compact list from its record's bytes (no
//! copy per element); LPOS reads the list whole.

use std::collections::VecDeque;

use nvdepot_cache::resp::{Kind, RespStore, Value};
use nvdepot_cache::Error;
use nvdepot_resp::{errors, string2ll, Reply};

use super::args::arity;
use super::compact;
use super::key_locks;
use super::list::{normalize, normalize_u64, positive, range, range_u64, read};
use super::list_pages::{self as pages, Stop};

/// Runs LLEN, LINDEX, LRANGE or LPOS (`None` for any other command).
pub async fn execute(
    store: &RespStore,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Option<Result<(), Error>> {
    if !matches!(name, b"LLEN" | b"LINDEX" | b"LRANGE" | b"LPOS") {
        return None;
    }
    Some(read_command(store, db, name, args, now, r).await)
}

/// The commands that read one list.
async fn read_command(
    store: &RespStore,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    now: u64,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let (min, max) = match name {
        b"LLEN" => (2, Some(2)),
        b"LINDEX" => (3, Some(3)),
        b"LRANGE" => (4, Some(4)),
        _ => (3, None),
    };
    if !arity(args, min, max, r) {
        return Ok(());
    }
    // LINDEX reads its index after the key (Redis's order).
    let ints = match name {
        b"LRANGE" => string2ll(args[2]).zip(string2ll(args[3])),
        _ => Some((0, 0)),
    };
    let Some((a, b)) = ints else {
        r.error(errors::NOT_INTEGER);
        return Ok(());
    };
    let pos = if name == b"LPOS" {
        match Pos::parse(&args[3..]) {
            Ok(p) => Some(p),
            Err(msg) => {
                r.error(msg);
                return Ok(());
            }
        }
    } else {
        None
    };
    if name != b"LPOS" {
        return match read_paged(store, db, name, args, (a, b), now, r).await? {
            Read::Answered => Ok(()),
            Read::NotPaged(v) => answer_compact(name, args, (a, b), v.as_ref(), r),
        };
    }
    let Ok(l) = read(store, db, args[1], now, r).await? else {
        return Ok(());
    };
    pos.expect("parsed")
        .answer(&l.unwrap_or_default(), args[2], r);
    Ok(())
}

/// LLEN, LINDEX and LRANGE of what a key holds when it is not a paged
/// list: a compact list answered from its record's bytes as they lie
/// (checked whole first, so an error is never half a reply), a missing
/// key as an empty list, anything else WRONGTYPE.
fn answer_compact(
    name: &[u8],
    args: &[&[u8]],
    (start, stop): (i64, i64),
    v: Option<&Value>,
    r: &mut Reply<'_>,
) -> Result<(), Error> {
    let Some(v) = v else {
        match name {
            b"LLEN" => r.integer(0),
            b"LINDEX" => r.null(),
            _ => r.array(0),
        }
        return Ok(());
    };
    if v.kind() != Kind::List {
        r.error(errors::WRONGTYPE);
        return Ok(());
    }
    let data = v.data();
    let (_, len) = compact::check_items(data)?;
    // Every item parsed: the walks below meet no error.
    let mut elements = compact::items(data).flatten().map(|(_, e)| e);
    match name {
        b"LLEN" => r.integer(len as i64),
        b"LINDEX" => match string2ll(args[2]).map(|i| normalize(i, len)) {
            None => r.error(errors::NOT_INTEGER),
            Some(None) => r.null(),
            Some(Some(i)) => r.bulk(elements.nth(i).unwrap_or_default()),
        },
        _ => match range(start, stop, len) {
            None => r.array(0),
            Some((a, b)) => {
                r.array(b - a + 1);
                for e in elements.skip(a).take(b - a + 1) {
                    r.bulk(e);
                }
            }
        },
    }
    Ok(())
}

/// What [`read_paged`] did.
enum Read {
    Answered,
    /// The key is not a paged list: what it holds, as read.
    NotPaged(Option<Value>),
}

/// LLEN, LINDEX and LRANGE of a paged list: the metadata, then only the
/// pages the answer needs (checked against the metadata after reading
/// them). Nothing answered when the key is not a paged list.
async fn read_paged(
    store: &RespStore,
    db: usize,
    name: &[u8],
    args: &[&[u8]],
    (start, stop): (i64, i64),
    now: u64,
    r: &mut Reply<'_>,
) -> Result<Read, Error> {
    let mut attempt = 0u32;
    loop {
        let _held = key_locks::turn_shared(&mut attempt, db, args[1]).await;
        let Some(v) = store.get(db, args[1], now).await? else {
            return Ok(Read::NotPaged(None));
        };
        if v.kind() != Kind::List || !pages::is_paged(v.data()) {
            return Ok(Read::NotPaged(Some(v)));
        }
        let m = pages::Meta::decode(v.data())?;
        let mut edit = pages::Edit::new(store, db, args[1], m, v.version());
        if name == b"LLEN" {
            r.integer(m.len as i64);
            return Ok(Read::Answered);
        }
        if name == b"LINDEX" {
            let Some(i) = string2ll(args[2]) else {
                r.error(errors::NOT_INTEGER);
                return Ok(Read::Answered);
            };
            let Some(i) = normalize_u64(i, m.len) else {
                r.null();
                return Ok(Read::Answered);
            };
            match edit.get(i).await {
                Ok(e) if edit.unchanged().await? => r.bulk(&e),
                Ok(_) | Err(Stop::Retry) => continue,
                Err(Stop::Fail(e)) => return Err(e),
            }
            return Ok(Read::Answered);
        }
        let Some((a, b)) = range_u64(start, stop, m.len) else {
            r.array(0);
            return Ok(Read::Answered);
        };
        match edit.load_range(a, b).await {
            Ok(()) if edit.unchanged().await? => {
                // The pages are read and still the list's: answer from
                // them as they lie (a damaged one takes back the half
                // answer: the error is the whole reply).
                let mark = r.out.len();
                r.array((b - a + 1) as usize);
                if let Err(e) = edit.each_in(a, b, |e| r.bulk(e)) {
                    r.out.truncate(mark);
                    return Err(e);
                }
            }
            Ok(()) | Err(Stop::Retry) => continue,
            Err(Stop::Fail(e)) => return Err(e),
        }
        return Ok(Read::Answered);
    }
}

/// LPOS's options.
struct Pos {
    rank: i64,
    count: Option<usize>,
    maxlen: usize,
}

impl Pos {
    fn parse(opts: &[&[u8]]) -> Result<Pos, &'static str> {
        let mut p = Pos {
            rank: 1,
            count: None,
            maxlen: 0,
        };
        let mut i = 0;
        while i < opts.len() {
            let Some(arg) = opts.get(i + 1) else {
                return Err(errors::SYNTAX);
            };
            let opt = opts[i].to_ascii_uppercase();
            match opt.as_slice() {
                b"RANK" => {
                    p.rank = string2ll(arg).ok_or(errors::NOT_INTEGER)?;
                    if p.rank == 0 {
                        return Err("ERR RANK can't be zero: use 1 to start from the first \
                                    match, 2 from the second ... or use negative to start \
                                    from the end of the list");
                    }
                }
                b"COUNT" => p.count = Some(positive(arg, "ERR COUNT can't be negative")? as usize),
                b"MAXLEN" => p.maxlen = positive(arg, "ERR MAXLEN can't be negative")? as usize,
                _ => return Err(errors::SYNTAX),
            }
            i += 2;
        }
        Ok(p)
    }

    fn answer(&self, l: &VecDeque<Vec<u8>>, elem: &[u8], r: &mut Reply<'_>) {
        let want = match self.count {
            Some(0) => usize::MAX,
            Some(n) => n,
            None => 1,
        };
        let scan = if self.maxlen == 0 {
            l.len()
        } else {
            self.maxlen.min(l.len())
        };
        // Redis negates a negative rank in a C long: i64::MIN stays
        // negative, and every match then counts (as rank -1).
        let mut skip = match self.rank {
            i64::MIN => 0,
            rank => rank.unsigned_abs() - 1,
        };
        let mut found = Vec::new();
        let indices: Box<dyn Iterator<Item = usize>> = if self.rank > 0 {
            Box::new(0..scan)
        } else {
            Box::new((l.len() - scan..l.len()).rev())
        };
        for i in indices {
            if l[i] != elem {
                continue;
            }
            if skip > 0 {
                skip -= 1;
                continue;
            }
            found.push(i);
            if found.len() >= want {
                break;
            }
        }
        match self.count {
            None => match found.first() {
                Some(&i) => r.integer(i as i64),
                None => r.null(),
            },
            Some(_) => {
                r.array(found.len());
                for i in found {
                    r.integer(i as i64);
                }
            }
        }
    }
}
