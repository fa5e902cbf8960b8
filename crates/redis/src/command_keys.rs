//! The keys of a command line as Redis 7.0 finds them for `COMMAND
//! GETKEYS` (`getKeysFromCommandWithSpecs`): by the command's key
//! specifications, read from its `COMMAND INFO` entry, or for the
//! commands whose specs are incomplete or whose flags vary with the
//! arguments (SET … GET, BITFIELD, SORT), by Redis's own per-command
//! procedures, with the access flags each gives its keys.

use nvdepot_resp::{string2ll, Value};

/// Field `i` of an entry.
pub fn field(entry: &Value, i: usize) -> Option<&Value> {
    match entry {
        Value::Array(Some(items)) => items.get(i),
        _ => None,
    }
}

/// The names in a set or array of status strings.
pub fn names(v: Option<&Value>) -> Vec<&[u8]> {
    match v {
        Some(Value::Set(items) | Value::Array(Some(items))) => items
            .iter()
            .filter_map(|i| match i {
                Value::Simple(s) => Some(s.as_slice()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Key access flags, in the order Redis writes them.
const KEY_FLAGS: [&str; 11] = [
    "RO",
    "RW",
    "OW",
    "RM",
    "access",
    "update",
    "insert",
    "delete",
    "not_key",
    "incomplete",
    "variable_flags",
];

fn flag(name: &str) -> u16 {
    KEY_FLAGS
        .iter()
        .position(|f| *f == name)
        .map_or(0, |i| 1 << i)
}

const NOT_KEY: usize = 8;
const INCOMPLETE: usize = 9;
const VARIABLE_FLAGS: usize = 10;

/// One key specification of a command (Redis's `keySpec`).
struct KeySpec {
    flags: u16,
    begin: Begin,
    find: Find,
}

enum Begin {
    Index(i64),
    Keyword(Vec<u8>, i64),
    Unknown,
}

enum Find {
    Range {
        lastkey: i64,
        keystep: i64,
        limit: i64,
    },
    Keynum {
        keynumidx: i64,
        firstkey: i64,
        keystep: i64,
    },
    Unknown,
}

/// A value of a map by its (bulk) key.
fn get<'v>(map: &'v Value, key: &str) -> Option<&'v Value> {
    match map {
        Value::Map(pairs) => pairs.iter().find_map(|(k, v)| match k {
            Value::Bulk(Some(b)) if b == key.as_bytes() => Some(v),
            _ => None,
        }),
        _ => None,
    }
}

fn int(map: Option<&Value>, key: &str) -> i64 {
    match map.and_then(|m| get(m, key)) {
        Some(Value::Integer(i)) => *i,
        _ => 0,
    }
}

fn key_specs(entry: &Value) -> Vec<KeySpec> {
    let Some(Value::Array(Some(specs)) | Value::Set(specs)) = field(entry, 8) else {
        return Vec::new();
    };
    specs
        .iter()
        .map(|s| {
            let flags = names(get(s, "flags"))
                .iter()
                .map(|n| flag(std::str::from_utf8(n).unwrap_or("")))
                .fold(0, |a, b| a | b);
            let kind = |part: &str| match get(s, part).and_then(|p| get(p, "type")) {
                Some(Value::Bulk(Some(t))) => t.clone(),
                _ => Vec::new(),
            };
            let spec = |part: &str| get(s, part).and_then(|p| get(p, "spec"));
            let begin = match kind("begin_search").as_slice() {
                b"index" => Begin::Index(int(spec("begin_search"), "index")),
                b"keyword" => match spec("begin_search").and_then(|m| get(m, "keyword")) {
                    Some(Value::Bulk(Some(k))) => {
                        Begin::Keyword(k.clone(), int(spec("begin_search"), "startfrom"))
                    }
                    _ => Begin::Unknown,
                },
                _ => Begin::Unknown,
            };
            let f = spec("find_keys");
            let find = match kind("find_keys").as_slice() {
                b"range" => Find::Range {
                    lastkey: int(f, "lastkey"),
                    keystep: int(f, "keystep"),
                    limit: int(f, "limit"),
                },
                b"keynum" => Find::Keynum {
                    keynumidx: int(f, "keynumidx"),
                    firstkey: int(f, "firstkey"),
                    keystep: int(f, "keystep"),
                },
                _ => Find::Unknown,
            };
            KeySpec { flags, begin, find }
        })
        .collect()
}

/// The keys of `argv` by its command's key specs (Redis's
/// `getKeysUsingKeySpecs`): positions and flags, or `None` where a spec
/// does not apply (an invalid or incomplete one).
fn keys_by_specs(specs: &[KeySpec], argv: &[&[u8]]) -> Option<Vec<(usize, u16)>> {
    let argc = argv.len() as i64;
    let mut out = Vec::new();
    for spec in specs {
        if spec.flags & (1 << NOT_KEY) != 0 {
            continue;
        }
        let mut first = match &spec.begin {
            Begin::Index(i) => *i,
            Begin::Keyword(word, from) => {
                let (start, end) = if *from > 0 {
                    (*from, argc - 1)
                } else {
                    (argc + from, 1)
                };
                let mut i = start;
                let mut found = 0;
                loop {
                    if i >= argc || i < 1 {
                        break;
                    }
                    if argv[i as usize].eq_ignore_ascii_case(word) {
                        found = i + 1;
                        break;
                    }
                    if i == end {
                        break;
                    }
                    i += if start <= end { 1 } else { -1 };
                }
                if found == 0 {
                    continue;
                }
                found
            }
            Begin::Unknown => return None,
        };
        let (last, step) = match spec.find {
            Find::Range {
                lastkey,
                keystep,
                limit,
            } => {
                let last = if lastkey >= 0 {
                    first + lastkey
                } else if limit == 0 {
                    argc + lastkey
                } else {
                    first + ((argc - first) / limit + lastkey)
                };
                (last, keystep)
            }
            Find::Keynum {
                keynumidx,
                firstkey,
                keystep,
            } => {
                if keynumidx >= argc {
                    return None;
                }
                let at = usize::try_from(first + keynumidx).ok()?;
                let n = string2ll(argv.get(at)?)?;
                if n < 0 {
                    return None;
                }
                first += firstkey;
                (first + n - 1, keystep)
            }
            Find::Unknown => return None,
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        // Inside the arguments, as just checked.
        let mut i = first;
        while i <= last {
            out.push((i as usize, spec.flags));
            i += step.max(1);
        }
        if spec.flags & (1 << INCOMPLETE) != 0 {
            return None;
        }
    }
    Some(out)
}

/// The commands with a key procedure of their own in Redis 7.0 (its
/// `get_keys_function`s), which implemented here.
const PROCEDURES: &[&str] = &[
    "sintercard",
    "zunion",
    "zinter",
    "zdiff",
    "zintercard",
    "lmpop",
    "zmpop",
    "zunionstore",
    "zinterstore",
    "zdiffstore",
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
    "blmpop",
    "bzmpop",
    "sort_ro",
    "sort",
    "georadius",
    "georadiusbymember",
    "xread",
    "xreadgroup",
    "set",
    "bitfield",
    "migrate",
];

/// C's `atoi`: leading blanks, a sign, digits up to the first other byte.
fn atoi(a: &[u8]) -> i64 {
    let s = a.iter().skip_while(|b| b.is_ascii_whitespace());
    let mut sign = 1;
    let mut n: i64 = 0;
    for (i, &b) in s.enumerate() {
        match b {
            b'-' if i == 0 => sign = -1,
            b'+' if i == 0 => {}
            b'0'..=b'9' => n = n.saturating_mul(10).saturating_add(i64::from(b - b'0')),
            _ => break,
        }
    }
    sign * n
}

/// The keys of `argv` by Redis's own key procedure for `full` (one of
/// [`PROCEDURES`]), with the flags that procedure gives them.
fn keys_by_procedure(full: &str, argv: &[&[u8]]) -> Vec<(usize, u16)> {
    let is = |a: &[u8], w: &str| a.eq_ignore_ascii_case(w.as_bytes());
    let ro_access = flag("RO") | flag("access");
    let rw_access_update = flag("RW") | flag("access") | flag("update");
    // COMMAND [destkey] numkeys key… options (Redis's genericGetKeys).
    let counted = |store: usize, count: usize, first: usize| {
        let n = atoi(argv.get(count).copied().unwrap_or(b""));
        if n < 1 || n > (argv.len() as i64 - first as i64) {
            return Vec::new();
        }
        let mut keys: Vec<(usize, u16)> = (0..n as usize).map(|i| (first + i, 0)).collect();
        if store > 0 {
            keys.push((store, 0));
        }
        keys
    };
    match full {
        "sintercard" | "zunion" | "zinter" | "zdiff" | "zintercard" | "lmpop" | "zmpop" => {
            counted(0, 1, 2)
        }
        "zunionstore" | "zinterstore" | "zdiffstore" => counted(1, 2, 3),
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" | "blmpop"
        | "bzmpop" => counted(0, 2, 3),
        "sort_ro" => vec![(1, ro_access)],
        "migrate" => {
            let rw_access_delete = flag("RW") | flag("access") | flag("delete");
            super::commands::migrate_keys(argv)
                .filter(|&i| i < argv.len())
                .map(|i| (i, rw_access_delete))
                .collect()
        }
        "sort" => {
            let mut keys = vec![(1, ro_access)];
            let mut store = None;
            let mut i = 2;
            while i < argv.len() {
                if is(argv[i], "limit") {
                    i += 2;
                } else if is(argv[i], "get") || is(argv[i], "by") {
                    i += 1;
                } else if is(argv[i], "store") && i + 1 < argv.len() {
                    store = Some(i + 1);
                }
                i += 1;
            }
            keys.extend(store.map(|s| (s, flag("OW") | flag("update"))));
            keys
        }
        "georadius" | "georadiusbymember" => {
            let mut stored = None;
            let mut i = 5;
            while i < argv.len() {
                if (is(argv[i], "store") || is(argv[i], "storedist")) && i + 1 < argv.len() {
                    stored = Some(i + 1);
                    i += 1;
                }
                i += 1;
            }
            std::iter::once((1, 0))
                .chain(stored.map(|s| (s, 0)))
                .collect()
        }
        "xread" | "xreadgroup" => {
            let mut streams = None;
            let mut i = 1;
            while i < argv.len() {
                let a = argv[i];
                if is(a, "block") || is(a, "count") {
                    i += 1;
                } else if is(a, "group") {
                    i += 2;
                } else if is(a, "streams") {
                    streams = Some(i);
                    break;
                } else if !is(a, "noack") {
                    break;
                }
                i += 1;
            }
            let Some(at) = streams else {
                return Vec::new();
            };
            let n = argv.len() - at - 1;
            if n == 0 || !n.is_multiple_of(2) {
                return Vec::new();
            }
            (at + 1..at + 1 + n / 2).map(|p| (p, 0)).collect()
        }
        "set" => {
            let get = argv.iter().skip(3).any(|a| is(a, "get"));
            let flags = if get {
                rw_access_update
            } else {
                flag("OW") | flag("update")
            };
            vec![(1, flags)]
        }
        "bitfield" => {
            let mut readonly = true;
            let mut i = 2;
            while i < argv.len() {
                let rest = argv.len() - i - 1;
                let a = argv[i];
                if is(a, "get") && rest >= 2 {
                    i += 2;
                } else if (is(a, "set") || is(a, "incrby")) && rest >= 3 {
                    readonly = false;
                    break;
                } else if is(a, "overflow") && rest >= 1 {
                    i += 1;
                } else {
                    readonly = false;
                    break;
                }
                i += 1;
            }
            vec![(
                1,
                if readonly {
                    ro_access
                } else {
                    rw_access_update
                },
            )]
        }
        _ => Vec::new(),
    }
}

/// The names of a key's access flags, in Redis's order.
pub fn flag_names(flags: u16) -> impl Iterator<Item = &'static str> {
    KEY_FLAGS
        .iter()
        .enumerate()
        .filter(move |(i, _)| flags & (1 << i) != 0)
        .map(|(_, n)| *n)
}

/// The keys of `argv` (positions, access flags), run by command `full`
/// whose `COMMAND INFO` entry is `entry`; or Redis's error for `COMMAND
/// GETKEYS`.
pub fn keys_of(
    full: &str,
    entry: Option<&Value>,
    argv: &[&[u8]],
) -> Result<Vec<(usize, u16)>, &'static str> {
    let specs = entry.map(key_specs).unwrap_or_default();
    let has_procedure = PROCEDURES.contains(&full);
    let has_keys = specs.iter().any(|s| s.flags & (1 << NOT_KEY) == 0);
    if !has_procedure && !has_keys {
        return Err("ERR The command has no key arguments");
    }
    let arity = match entry.and_then(|e| field(e, 1)) {
        Some(Value::Integer(a)) => *a,
        _ => -1,
    };
    let argc = argv.len() as i64;
    if (arity > 0 && arity != argc) || argc < -arity {
        return Err("ERR Invalid number of arguments specified for command");
    }
    // Key specs first, if any apply and their flags do not vary; else
    // the command's own procedure.
    let variable = specs.iter().any(|s| s.flags & (1 << VARIABLE_FLAGS) != 0);
    let by_specs = if has_keys && !variable {
        keys_by_specs(&specs, argv)
    } else {
        None
    };
    let keys = match by_specs {
        Some(keys) => keys,
        None if has_procedure => keys_by_procedure(full, argv),
        None => Vec::new(),
    };
    if keys.is_empty() {
        let no_mandatory = names(entry.and_then(|e| field(e, 2)))
            .iter()
            .any(|f| *f == b"no_mandatory_keys");
        if !no_mandatory {
            return Err("ERR Invalid arguments specified for command");
        }
    }
    Ok(keys)
}
