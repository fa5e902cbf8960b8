//! Meta requests built from the fuzz input (command, key, flags from a
//! list that includes bad ones, a data block for ms), each followed by an
//! `mn` barrier, so that the replies can be checked against the rules
//! (`check_meta_rules`: one reply per request, in order, none when `q`
//! hides the nominal code), not only for well-formedness.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvdepot_memcache_fuzz::{check, check_meta_rules, cuts, run, Grammar, MetaRequest};

const COMMANDS: [u8; 5] = [b'g', b's', b'd', b'a', b'n'];
const KEYS: [&str; 4] = ["a", "b", "c", "YQ=="];
const FLAGS: [&str; 40] = [
    "v",
    "k",
    "c",
    "f",
    "s",
    "t",
    "q",
    "h",
    "l",
    "u",
    "T0",
    "T100",
    "T-1",
    "N30",
    "R30",
    "I",
    "MS",
    "ME",
    "MA",
    "MP",
    "MR",
    "MI",
    "MD",
    "M+",
    "Mx",
    "D3",
    "J7",
    "F5",
    "C1",
    "C2",
    "Oab",
    "O0123456789012345678901234567890123",
    "b",
    "E5",
    "x",
    "Tx",
    "D-1",
    "N",
    "q",
    "v",
];

fuzz_target!(|data: &[u8]| {
    let (cuts, mut rest) = cuts(data);
    let mut input = b"mn\r\n".to_vec();
    let mut requests = Vec::new();
    while let [sel, key, nflags, more @ ..] = rest {
        rest = more;
        let cmd = COMMANDS[usize::from(*sel) % COMMANDS.len()];
        let n = usize::from(nflags % 8).min(rest.len());
        let (picks, more) = rest.split_at(n);
        rest = more;
        let flags: Vec<&str> = picks
            .iter()
            .map(|&p| FLAGS[usize::from(p) % FLAGS.len()])
            .collect();
        let opaque = flags
            .iter()
            .find(|f| f.starts_with('O') && f.len() <= 32)
            .map(|f| f.as_bytes().to_vec());
        requests.push(MetaRequest {
            cmd,
            quiet: flags.contains(&"q"),
            vivify: flags.iter().any(|f| f.starts_with('N')),
            opaque,
        });
        input.push(b'm');
        input.push(cmd);
        if cmd != b'n' {
            input.push(b' ');
            input.extend_from_slice(KEYS[usize::from(*key) % KEYS.len()].as_bytes());
        }
        let data_len = usize::from(key >> 4);
        if cmd == b's' {
            input.extend_from_slice(format!(" {data_len}").as_bytes());
        }
        for f in &flags {
            input.push(b' ');
            input.extend_from_slice(f.as_bytes());
        }
        input.extend_from_slice(b"\r\n");
        if cmd == b's' {
            // Exactly the announced length, padded.
            let n = data_len.min(rest.len());
            input.extend_from_slice(&rest[..n]);
            input.resize(input.len() + data_len - n, b'x');
            rest = &rest[n..];
            input.extend_from_slice(b"\r\n");
        }
        input.extend_from_slice(b"mn\r\n");
    }
    check(&input, &cuts, Grammar::Text);
    let (out, _, _) = run(&input, &[]);
    check_meta_rules(&out, &requests);
});
