//! `COMMAND` and its subcommands, answered from Redis 7.0's own
//! description of its commands: `data/commands-7.0.resp`, taken from
//! redis-server 7.0 by `data/gen-commands.py` (flags, ACL categories,
//! tips, key specifications and docs exactly as Redis gives them, not
//! retyped). Only the commands and subcommands this face implements are
//! described ([`COMMANDS`], [`SUBCOMMANDS`]); a container's subcommands
//! are composed from theirs. `COMMAND GETKEYS` finds keys as Redis does
//! (`command_keys.rs`).

use std::collections::HashMap;
use std::sync::OnceLock;

use nvdepot_resp::{errors, parse_value, Item, Reader, Reply, Value};

use super::command_keys::{field, flag_names, keys_of, names};
use super::commands::{Spec, COMMANDS, SUBCOMMANDS};

/// Redis 7.0's descriptions: one RESP3 array of `[name, info, docs]`.
static DATA: &[u8] = include_bytes!("../data/commands-7.0.resp");

/// One command's description: its `COMMAND INFO` entry (subcommands
/// empty) and its `COMMAND DOCS` map (no `subcommands` key), each one
/// RESP3 value inside [`DATA`].
#[derive(Clone, Copy)]
struct Described {
    info: &'static [u8],
    docs: &'static [u8],
    /// The entry's arity (read once: checked before every container
    /// command runs).
    arity: i64,
}

const WELL_FORMED: &str = "data/commands-7.0.resp is well-formed RESP3 (tested)";

/// Every description in [`DATA`], by lower-case full name (`config|get`).
fn described() -> &'static HashMap<&'static str, Described> {
    static TABLE: OnceLock<HashMap<&'static str, Described>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut r = Reader::new(DATA);
        let Ok(Some(Item::Array(n))) = r.read() else {
            panic!("{WELL_FORMED}");
        };
        let mut table = HashMap::with_capacity(n);
        for _ in 0..n {
            let (Ok(Some(Item::Array(3))), Ok(Some(Item::Bulk(Some(name))))) = (r.read(), r.read())
            else {
                panic!("{WELL_FORMED}");
            };
            let name = std::str::from_utf8(name).expect(WELL_FORMED);
            let info = value_bytes(&mut r);
            let docs = value_bytes(&mut r);
            let mut fields = Reader::new(info);
            let (
                Ok(Some(Item::Array(10))),
                Ok(Some(Item::Bulk(_))),
                Ok(Some(Item::Integer(arity))),
            ) = (fields.read(), fields.read(), fields.read())
            else {
                panic!("{WELL_FORMED}");
            };
            table.insert(name, Described { info, docs, arity });
        }
        table
    })
}

/// The bytes of the next value of `r` (read past it).
fn value_bytes(r: &mut Reader<'static>) -> &'static [u8] {
    let start = r.position();
    copy(r, None);
    &DATA[start..r.position()]
}

/// Reads one whole value of `r` and, given a reply, writes it there in
/// the client's protocol (a map as a flat array in RESP2, a set as an
/// array, as Redis writes them).
fn copy(r: &mut Reader<'_>, mut out: Option<&mut Reply<'_>>) {
    let mut left = 1usize;
    while left > 0 {
        left -= 1;
        let item = r.read().ok().flatten().expect(WELL_FORMED);
        match item {
            Item::Array(n) | Item::Set(n) | Item::Push(n) => left += n,
            Item::Map(n) => left += 2 * n,
            _ => {}
        }
        let Some(o) = out.as_deref_mut() else {
            continue;
        };
        match item {
            Item::Simple(s) => o.simple(std::str::from_utf8(s).expect(WELL_FORMED)),
            Item::Error(e) | Item::BulkError(e) => o.error(e),
            Item::Integer(i) => o.integer(i),
            Item::Bulk(Some(b)) => o.bulk(b),
            Item::Bulk(None) | Item::Null => o.null(),
            Item::NullArray => o.null_array(),
            Item::Boolean(b) => o.boolean(b),
            Item::Double(d) => o.double(d),
            Item::BigNumber(b) => o.big_number(std::str::from_utf8(b).expect(WELL_FORMED)),
            Item::Verbatim(f, t) => o.verbatim(std::str::from_utf8(f).expect(WELL_FORMED), t),
            Item::Array(n) => o.array(n),
            Item::Set(n) => o.set(n),
            Item::Push(n) => o.push(n),
            Item::Map(n) => o.map(n),
        }
    }
}

/// What this face implements, by lower-case full name: a command of
/// [`COMMANDS`] or a subcommand of [`SUBCOMMANDS`].
fn implemented(full: &str) -> bool {
    match full.split_once('|') {
        Some(_) => SUBCOMMANDS.contains(&full),
        None => super::commands::find(full.to_ascii_uppercase().as_bytes()).is_some(),
    }
}

/// The implemented subcommands of `container` (lower case), full names.
fn subcommands_of(container: &str) -> impl Iterator<Item = &'static str> + '_ {
    SUBCOMMANDS
        .iter()
        .copied()
        .filter(move |s| s.split_once('|').is_some_and(|(c, _)| c == container))
}

/// The command a `COMMAND INFO`/`DOCS` name stands for (`get`,
/// `CONFIG|GET`), as an implemented lower-case full name.
fn by_name(name: &[u8]) -> Option<String> {
    let full = String::from_utf8(name.to_ascii_lowercase()).ok()?;
    implemented(&full).then_some(full)
}

/// The command `argv` runs, as Redis's `lookupCommand` finds it: the
/// subcommand when the first word names a container and a second is
/// given, else the command. `None`: not implemented.
fn by_argv(argv: &[&[u8]]) -> Option<String> {
    let command = by_name(argv.first()?)?;
    if argv.len() > 1 && subcommands_of(&command).next().is_some() {
        let mut full = command.into_bytes();
        full.push(b'|');
        full.extend_from_slice(argv[1]);
        return by_name(&full);
    }
    Some(command)
}

/// `COMMAND INFO`'s entry for `full`: Redis's, with the implemented
/// subcommands; a command Redis lacks (CLUSTERX) from its [`Spec`].
fn describe(full: &str, r: &mut Reply<'_>) {
    let Some(d) = described().get(full) else {
        let spec = super::commands::find(full.to_ascii_uppercase().as_bytes());
        return describe_own(full, spec, r);
    };
    let mut reader = Reader::new(d.info);
    let _ = reader.read(); // the entry's header: ten fields
    r.array(10);
    for _ in 0..9 {
        copy(&mut reader, Some(r));
    }
    // Redis writes an empty set for a command without subcommands, an
    // array for a container's.
    let subs: Vec<&str> = subcommands_of(full).collect();
    if subs.is_empty() {
        r.set(0);
    } else {
        r.array(subs.len());
    }
    for s in subs {
        describe(s, r);
    }
}

/// An entry for a command of nvdepot's own, laid out as Redis's.
fn describe_own(full: &str, spec: Option<&Spec>, r: &mut Reply<'_>) {
    let (arity, first, last, step, write) = spec
        .map(|c| (c.arity, c.first, c.last, c.step, c.write))
        .unwrap_or((-1, 0, 0, 0, false));
    r.array(10);
    r.bulk(full.as_bytes());
    r.integer(i64::from(arity));
    r.set(2);
    r.simple(if write { "write" } else { "admin" });
    r.simple("noscript");
    r.integer(i64::from(first));
    r.integer(i64::from(last));
    r.integer(i64::from(step));
    r.set(1);
    r.simple("@slow");
    r.set(0);
    r.set(0);
    r.set(0);
}

/// `COMMAND DOCS`'s map for `full` (its name written by the caller).
fn docs(full: &str, r: &mut Reply<'_>) {
    let Some(d) = described().get(full) else {
        r.map(3);
        r.bulk(b"summary");
        r.bulk(b"nvdepot's cluster administration, named as Kvrocks's (docs/DEPLOY.md)");
        r.bulk(b"since");
        r.bulk(b"0.1.0");
        r.bulk(b"group");
        r.bulk(b"cluster");
        return;
    };
    let mut reader = Reader::new(d.docs);
    let Ok(Some(Item::Map(n))) = reader.read() else {
        panic!("{WELL_FORMED}");
    };
    let subs: Vec<&str> = subcommands_of(full).collect();
    r.map(n + usize::from(!subs.is_empty()));
    for _ in 0..2 * n {
        copy(&mut reader, Some(r));
    }
    if !subs.is_empty() {
        r.bulk(b"subcommands");
        r.map(subs.len());
        for s in subs {
            r.bulk(s.as_bytes());
            docs(s, r);
        }
    }
}

/// Every implemented top-level command, lower case.
fn top_level() -> impl Iterator<Item = String> {
    COMMANDS.iter().map(|c| c.name.to_ascii_lowercase())
}

/// `COMMAND`, `COMMAND COUNT`, `COMMAND INFO [name…]`, `COMMAND DOCS
/// [name…]`, `COMMAND LIST [FILTERBY …]`, `COMMAND GETKEYS[ANDFLAGS]`,
/// `COMMAND HELP`.
pub fn command(args: &[&[u8]], r: &mut Reply<'_>) {
    let Some(sub) = args.get(1).map(|a| a.to_ascii_lowercase()) else {
        r.array(COMMANDS.len());
        for name in top_level() {
            describe(&name, r);
        }
        return;
    };
    // An unknown subcommand, or a wrong argument count, was refused
    // before the command ran (`check_subcommand`).
    match sub.as_slice() {
        b"count" => r.integer(COMMANDS.len() as i64),
        b"info" if args.len() == 2 => {
            r.array(COMMANDS.len());
            for name in top_level() {
                describe(&name, r);
            }
        }
        b"info" => {
            r.array(args.len() - 2);
            for name in &args[2..] {
                match by_name(name) {
                    Some(full) => describe(&full, r),
                    None => r.null(),
                }
            }
        }
        b"docs" if args.len() == 2 => {
            r.map(COMMANDS.len());
            for name in top_level() {
                r.bulk(name.as_bytes());
                docs(&name, r);
            }
        }
        b"docs" => {
            let found: Vec<String> = args[2..].iter().filter_map(|n| by_name(n)).collect();
            r.map(found.len());
            for full in found {
                r.bulk(full.as_bytes());
                docs(&full, r);
            }
        }
        b"list" => list(args, r),
        b"getkeys" | b"getkeysandflags" => getkeys(&args[2..], sub == b"getkeysandflags", r),
        b"help" => r.simple_lines(&[
            "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
            "HELP",
            "    Prints this help.",
        ]),
        _ => r.error(errors::unknown_subcommand("COMMAND", args[1])),
    }
}

/// The containers: commands whose second word names a subcommand
/// (upper case; kept equal to [`SUBCOMMANDS`]'s by a test).
const CONTAINERS: &[&str] = &[
    "CLIENT", "CLUSTER", "COMMAND", "CONFIG", "FUNCTION", "LATENCY", "MEMORY", "MODULE", "OBJECT",
    "PUBSUB", "SCRIPT", "SLOWLOG", "XGROUP", "XINFO",
];

/// Why a container command is refused before it runs.
pub enum Refused {
    /// Its second word names no implemented subcommand.
    UnknownSubcommand,
    /// The (sub)command's argument count is not its arity; its full name.
    Arity(String),
}

/// Redis's checks before a container command runs (`processCommand`,
/// `scriptCall`): an unknown subcommand, or a subcommand given the wrong
/// number of arguments. `name` is `args[0]` upper-cased; `Ok` for a
/// command that is not a container.
pub fn check_subcommand(name: &[u8], args: &[&[u8]]) -> Result<(), Refused> {
    let Some(container) = CONTAINERS.iter().find(|c| c.as_bytes() == name) else {
        return Ok(());
    };
    let full = match args.len() {
        // The container alone: its own arity (COMMAND's allows it).
        1 => container.to_ascii_lowercase(),
        _ => by_argv(args).ok_or(Refused::UnknownSubcommand)?,
    };
    if arity_fits(&full, args.len()) {
        Ok(())
    } else {
        Err(Refused::Arity(full))
    }
}

/// [`check_subcommand`]'s refusal as Redis words it to a client.
pub fn subcommand_refusal(name: &[u8], args: &[&[u8]]) -> Option<Vec<u8>> {
    match check_subcommand(name, args) {
        Ok(()) => None,
        Err(Refused::UnknownSubcommand) => {
            let container = String::from_utf8_lossy(name);
            Some(errors::unknown_subcommand(&container, args[1]))
        }
        Err(Refused::Arity(full)) => {
            Some(format!("ERR wrong number of arguments for '{full}' command").into_bytes())
        }
    }
}

/// Whether `argc` arguments (the command's words included) fit the arity
/// Redis gives `full`; true for a command Redis lacks.
pub fn arity_fits(full: &str, argc: usize) -> bool {
    match described().get(full).map(|d| d.arity) {
        Some(a) if a >= 0 => argc as i64 == a,
        Some(a) => argc as i64 >= -a,
        None => true,
    }
}

/// `full`'s `COMMAND INFO` entry as a value tree.
fn info_value(full: &str) -> Option<Value> {
    let d = described().get(full)?;
    Some(parse_value(d.info).ok()??.0)
}

/// `COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN glob]`:
/// full names, subcommands included (`config|get`), as Redis 7.0.
fn list(args: &[&[u8]], r: &mut Reply<'_>) {
    let all = top_level().flat_map(|c| {
        let subs: Vec<String> = subcommands_of(&c).map(str::to_string).collect();
        std::iter::once(c).chain(subs)
    });
    let chosen: Vec<String> = match args.len() {
        2 => all.collect(),
        5 if args[2].eq_ignore_ascii_case(b"FILTERBY") => {
            let value = args[4].to_ascii_lowercase();
            match args[3].to_ascii_uppercase().as_slice() {
                b"MODULE" => Vec::new(),
                b"ACLCAT" => {
                    let mut category = b"@".to_vec();
                    category.extend_from_slice(&value);
                    all.filter(|c| {
                        let entry = info_value(c);
                        names(entry.as_ref().and_then(|e| field(e, 6)))
                            .iter()
                            .any(|n| n.eq_ignore_ascii_case(&category))
                    })
                    .collect()
                }
                b"PATTERN" => all
                    .filter(|c| super::glob::matches(&value, c.as_bytes()))
                    .collect(),
                _ => return r.error(errors::SYNTAX),
            }
        }
        _ => return r.error(errors::SYNTAX),
    };
    r.array(chosen.len());
    for n in chosen {
        r.bulk(n.as_bytes());
    }
}

/// `COMMAND GETKEYS[ANDFLAGS] command arg…`, as Redis 7.0's
/// `getKeysSubcommandImpl`.
fn getkeys(argv: &[&[u8]], with_flags: bool, r: &mut Reply<'_>) {
    let Some(full) = by_argv(argv) else {
        return r.error("ERR Invalid command specified");
    };
    let keys = match keys_of(&full, info_value(&full).as_ref(), argv) {
        Ok(keys) => keys,
        Err(e) => return r.error(e),
    };
    r.array(keys.len());
    for (at, flags) in keys {
        if with_flags {
            r.array(2);
            r.bulk(argv[at]);
            let names: Vec<&str> = flag_names(flags).collect();
            r.set(names.len());
            for name in names {
                r.simple(name);
            }
        } else {
            r.bulk(argv[at]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_containers_are_the_implemented_subcommands_ones() {
        let from_subcommands: std::collections::BTreeSet<String> = SUBCOMMANDS
            .iter()
            .map(|s| s.split_once('|').unwrap().0.to_ascii_uppercase())
            .collect();
        let listed: std::collections::BTreeSet<String> =
            CONTAINERS.iter().map(|c| c.to_string()).collect();
        assert_eq!(listed, from_subcommands);
    }

    /// Random command lines for every implemented command and
    /// subcommand, built from words that steer the key searches (counts,
    /// STORE, STREAMS, GET, …): GETKEYS answers each with one reply and
    /// never panics (the fuzz target `command_keys` searches further).
    #[test]
    fn getkeys_answers_any_command_line() {
        use rand::{Rng, SeedableRng};
        let words: [&[u8]; 16] = [
            b"0",
            b"1",
            b"2",
            b"3",
            b"-1",
            b"99999999999999999999",
            b"k",
            b"STORE",
            b"STREAMS",
            b"GET",
            b"BY",
            b"LIMIT",
            b"SET",
            b"GROUP",
            b"STOREDIST",
            b"",
        ];
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let names: Vec<String> = top_level()
            .chain(SUBCOMMANDS.iter().map(|s| s.replace('|', " ")))
            .collect();
        for name in &names {
            for _ in 0..40 {
                let mut line: Vec<u8> = name.clone().into_bytes();
                for _ in 0..rng.gen_range(0..8) {
                    line.push(b' ');
                    line.extend_from_slice(words[rng.gen_range(0..words.len())]);
                }
                crate::fuzzing::command_getkeys(&line);
            }
        }
    }

    #[test]
    fn every_description_reads_back_whole() {
        let table = described();
        assert_eq!(table.len(), 366, "Redis 7.0's commands and subcommands");
        for (name, d) in table {
            let (info, used) = parse_value(d.info).unwrap().unwrap();
            assert_eq!(used, d.info.len(), "{name}");
            assert!(matches!(field(&info, 0), Some(Value::Bulk(Some(n))) if n == name.as_bytes()));
            let (docs, _) = parse_value(d.docs).unwrap().unwrap();
            assert!(matches!(docs, Value::Map(_)), "{name}");
        }
    }

    #[test]
    fn the_table_agrees_with_redis_on_arity_and_key_positions() {
        let mut differ = Vec::new();
        for c in COMMANDS {
            let name = c.name.to_ascii_lowercase();
            let Some(entry) = info_value(&name) else {
                assert_eq!(
                    name, "clusterx",
                    "only nvdepot's own commands lack Redis's entry"
                );
                continue;
            };
            let ints: Vec<i64> = [1, 3, 4, 5]
                .iter()
                .map(|&i| match field(&entry, i) {
                    Some(Value::Integer(v)) => *v,
                    _ => panic!("{name}"),
                })
                .collect();
            let ours = [c.arity, c.first, c.last, c.step].map(i64::from);
            // These containers' keys are their subcommands' (OBJECT
            // ENCODING key, XINFO STREAM key): the table gives routing
            // the subcommands' position, Redis's container entry none.
            let routed_by_subcommand = matches!(name.as_str(), "object" | "xgroup" | "xinfo");
            if ints != ours && !(routed_by_subcommand && ints == [c.arity as i64, 0, 0, 0]) {
                differ.push(format!("{name}: ours {ours:?}, Redis's {ints:?}"));
            }
        }
        assert!(differ.is_empty(), "arity, first, last, step: {differ:#?}");
        for s in SUBCOMMANDS {
            assert!(described().contains_key(s), "{s} is a Redis 7.0 subcommand");
        }
    }
}
