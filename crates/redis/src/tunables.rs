//! The encoding settings Redis 7.0 lets `CONFIG SET` change at run time
//! (`hash-max-listpack-entries` and the rest, with their `ziplist`
//! aliases): clients and Redis's own test suites set them. Their values
//! are kept, checked and read back exactly as Redis 7.0 does (ranges,
//! memory units, error texts, checked against redis-server 7.0.15). The
//! collection types read the thresholds to name their encodings as Redis
//! would (OBJECT ENCODING).

use std::sync::atomic::{AtomicI64, Ordering};

use parking_lot::Mutex;

/// How a setting's value is written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// An integer in `min..=max` (Redis's INTEGER_CONFIG).
    Integer,
    /// Bytes with an optional unit (`5k`, `4kb`, `1gb`: MEMORY_CONFIG).
    Memory,
}

/// One setting: its name, its old (`ziplist`) alias, its kind, range and
/// Redis 7.0's default.
struct Spec {
    name: &'static str,
    alias: Option<&'static str>,
    kind: Kind,
    min: i64,
    max: i64,
    default: i64,
}

const LONG_MAX: i64 = i64::MAX;
const INT_MIN: i64 = i32::MIN as i64;
const INT_MAX: i64 = i32::MAX as i64;

const SPECS: &[Spec] = &[
    spec(
        "hash-max-listpack-entries",
        Some("hash-max-ziplist-entries"),
        Kind::Integer,
        0,
        LONG_MAX,
        512,
    ),
    spec(
        "hash-max-listpack-value",
        Some("hash-max-ziplist-value"),
        Kind::Memory,
        0,
        LONG_MAX,
        64,
    ),
    spec(
        "list-max-listpack-size",
        Some("list-max-ziplist-size"),
        Kind::Integer,
        INT_MIN,
        INT_MAX,
        -2,
    ),
    spec("list-compress-depth", None, Kind::Integer, 0, INT_MAX, 0),
    spec(
        "set-max-intset-entries",
        None,
        Kind::Integer,
        0,
        LONG_MAX,
        512,
    ),
    spec(
        "zset-max-listpack-entries",
        Some("zset-max-ziplist-entries"),
        Kind::Integer,
        0,
        LONG_MAX,
        128,
    ),
    spec(
        "zset-max-listpack-value",
        Some("zset-max-ziplist-value"),
        Kind::Memory,
        0,
        LONG_MAX,
        64,
    ),
    spec(
        "stream-node-max-bytes",
        None,
        Kind::Memory,
        0,
        LONG_MAX,
        4096,
    ),
    spec(
        "stream-node-max-entries",
        None,
        Kind::Integer,
        0,
        LONG_MAX,
        100,
    ),
    spec(
        "hll-sparse-max-bytes",
        None,
        Kind::Memory,
        0,
        LONG_MAX,
        3000,
    ),
    // Not encodings: the slow log (`observe.rs`), in microseconds and
    // entries, and the latency monitor's threshold in milliseconds.
    spec(
        "slowlog-log-slower-than",
        None,
        Kind::Integer,
        -1,
        LONG_MAX,
        10_000,
    ),
    spec("slowlog-max-len", None, Kind::Integer, 0, LONG_MAX, 128),
    spec(
        "latency-monitor-threshold",
        None,
        Kind::Integer,
        0,
        LONG_MAX,
        0,
    ),
    // Not an encoding: how long a script runs before others are answered
    // BUSY (milliseconds).
    spec(
        "busy-reply-threshold",
        Some("lua-time-limit"),
        Kind::Integer,
        0,
        LONG_MAX,
        5000,
    ),
    // Not an encoding: seconds a client may stay idle before it is
    // closed (0: never), read by the clients' cron (`clients.rs`).
    spec("timeout", None, Kind::Integer, 0, INT_MAX, 0),
];

const fn spec(
    name: &'static str,
    alias: Option<&'static str>,
    kind: Kind,
    min: i64,
    max: i64,
    default: i64,
) -> Spec {
    Spec {
        name,
        alias,
        kind,
        min,
        max,
        default,
    }
}

/// The settings' current values: each read alone without a lock (a
/// script reads `busy-reply-threshold` per run); `CONFIG SET` of several
/// at once holds `setting` so two never interleave.
pub struct Tunables {
    values: Vec<AtomicI64>,
    setting: Mutex<()>,
}

impl Default for Tunables {
    fn default() -> Self {
        Tunables {
            values: SPECS.iter().map(|s| AtomicI64::new(s.default)).collect(),
            setting: Mutex::new(()),
        }
    }
}

impl Tunables {
    /// Every (name, value) pair, aliases included, as `CONFIG GET` lists
    /// them.
    pub fn all(&self) -> Vec<(&'static str, String)> {
        let _setting = self.setting.lock();
        let mut out = Vec::new();
        for (s, v) in SPECS.iter().zip(self.values.iter()) {
            let v = v.load(Ordering::Relaxed);
            out.push((s.name, v.to_string()));
            if let Some(a) = s.alias {
                out.push((a, v.to_string()));
            }
        }
        out
    }

    /// Whether `name` (lowercase) is one of these settings.
    pub fn knows(name: &str) -> bool {
        index_of(name).is_some()
    }

    /// Checks `value` for `name`: the value to set, or the reason Redis
    /// gives for refusing it.
    pub fn check(name: &str, value: &[u8]) -> Result<(usize, i64), String> {
        let i = index_of(name).expect("a known setting");
        let s = &SPECS[i];
        let v = match s.kind {
            Kind::Integer => {
                parse_ll(value).ok_or("argument couldn't be parsed into an integer")?
            }
            Kind::Memory => match mem_to_ull(value) {
                Some(v) if v <= LONG_MAX as u64 => v as i64,
                Some(_) => return Err(range(s)),
                None => return Err("argument must be a memory value".into()),
            },
        };
        if v < s.min || v > s.max {
            return Err(range(s));
        }
        Ok((i, v))
    }

    /// The current value of setting `name` (a known name).
    pub fn value(&self, name: &str) -> i64 {
        let i = index_of(name).expect("a known setting");
        self.values[i].load(Ordering::Relaxed)
    }

    /// Sets checked values (all of one `CONFIG SET`, at once).
    pub fn set(&self, checked: &[(usize, i64)]) {
        let _setting = self.setting.lock();
        for &(i, v) in checked {
            self.values[i].store(v, Ordering::Relaxed);
        }
    }
}

fn index_of(name: &str) -> Option<usize> {
    static BY_NAME: std::sync::OnceLock<super::name_map::NameMap> = std::sync::OnceLock::new();
    BY_NAME
        .get_or_init(|| {
            let names = SPECS
                .iter()
                .enumerate()
                .map(|(i, s)| (s.name.as_bytes(), i));
            let aliases = SPECS
                .iter()
                .enumerate()
                .filter_map(|(i, s)| Some((s.alias?.as_bytes(), i)));
            super::name_map::NameMap::new(names.chain(aliases))
        })
        .get(name.as_bytes())
}

fn range(s: &Spec) -> String {
    format!("argument must be between {} and {} inclusive", s.min, s.max)
}

/// Redis's `string2ll`: an optional `-`, digits, no blanks, no `+`, no
/// leading zeros, within i64.
fn parse_ll(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty()
        || !digits.bytes().all(|c| c.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
        || s == "-0"
    {
        return None;
    }
    s.parse().ok()
}

/// Redis's `memtoull`: digits, then nothing or one of the units b, k, kb,
/// m, mb, g, gb (any case); no sign.
fn mem_to_ull(b: &[u8]) -> Option<u64> {
    if b.first() == Some(&b'-') {
        return None;
    }
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    let unit = std::str::from_utf8(&b[digits..]).ok()?.to_ascii_lowercase();
    let mul: u64 = match unit.as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    // strtoull of the digits: none reads as 0 and too many saturate, as
    // C's do; Redis 7.0 then multiplies without an overflow check (the
    // bounds check refuses what wrapped past them).
    let val: u64 = b[..digits].iter().fold(0u64, |v, &c| {
        v.saturating_mul(10).saturating_add(u64::from(c - b'0'))
    });
    Some(val.wrapping_mul(mul))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_errors_as_redis_7_0() {
        assert_eq!(
            Tunables::check("hash-max-ziplist-entries", b"7"),
            Ok((0, 7))
        );
        assert_eq!(
            Tunables::check("hash-max-listpack-entries", b"-1").unwrap_err(),
            "argument must be between 0 and 9223372036854775807 inclusive"
        );
        assert_eq!(
            Tunables::check("hash-max-listpack-entries", b"5k").unwrap_err(),
            "argument couldn't be parsed into an integer"
        );
        assert_eq!(
            Tunables::check("hash-max-listpack-value", b"5k"),
            Ok((1, 5000))
        );
        assert_eq!(
            Tunables::check("stream-node-max-bytes", b"4kb"),
            Ok((7, 4096))
        );
        assert_eq!(
            Tunables::check("zset-max-ziplist-value", b"1GB"),
            Ok((6, 1 << 30))
        );
        for bad in [&b"abc"[..], b"-1", b"5x", b"1.5", b" 5"] {
            assert_eq!(
                Tunables::check("stream-node-max-bytes", bad).unwrap_err(),
                "argument must be a memory value",
                "{bad:?}"
            );
        }
        assert_eq!(
            Tunables::check("list-max-listpack-size", b"-7"),
            Ok((2, -7))
        );
        assert_eq!(
            Tunables::check("list-max-listpack-size", b"99999999999").unwrap_err(),
            "argument must be between -2147483648 and 2147483647 inclusive"
        );
        assert_eq!(
            Tunables::check("list-compress-depth", b"-1").unwrap_err(),
            "argument must be between 0 and 2147483647 inclusive"
        );
        assert_eq!(
            Tunables::check("set-max-intset-entries", b"9223372036854775808").unwrap_err(),
            "argument couldn't be parsed into an integer"
        );
        assert!(
            !Tunables::knows("set-max-listpack-entries"),
            "Redis 7.2's, not 7.0's"
        );
        for big in [&b"99999999999999999999"[..], b"99999999999999999999k"] {
            assert_eq!(
                Tunables::check("stream-node-max-bytes", big).unwrap_err(),
                "argument must be between 0 and 9223372036854775807 inclusive"
            );
        }
        assert_eq!(Tunables::check("hash-max-listpack-value", b""), Ok((1, 0)));
        let t = Tunables::default();
        t.set(&[Tunables::check("hash-max-ziplist-entries", b"7").unwrap()]);
        let all = t.all();
        assert!(all.contains(&("hash-max-listpack-entries", "7".into())));
        assert!(all.contains(&("hash-max-ziplist-entries", "7".into())));
        assert!(all.contains(&("list-max-listpack-size", "-2".into())));
    }
}
