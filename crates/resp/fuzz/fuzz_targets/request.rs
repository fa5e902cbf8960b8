//! Requests: any bytes, parsed whole and fed in two pieces cut at a point
//! the input chooses, must give the same commands or the same error, and
//! never consume more than they were given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvdepot_resp::{parse_command, Limits, ParseError, Parsed};

fn run(input: &[u8], cut: usize, limits: &Limits) -> (Vec<Vec<Vec<u8>>>, Option<ParseError>) {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    for piece in [&input[..cut], &input[cut..]] {
        buf.extend_from_slice(piece);
        loop {
            match parse_command(&buf, limits) {
                Ok(Parsed::Command(c, n)) => {
                    assert!(n > 0 && n <= buf.len());
                    out.push(c.args.iter().map(|a| a.to_vec()).collect());
                    buf.drain(..n);
                }
                Ok(Parsed::Skip(n)) => {
                    assert!(n > 0 && n <= buf.len());
                    buf.drain(..n);
                }
                Ok(Parsed::Incomplete) => break,
                Err(e) => return (out, Some(e)),
            }
        }
    }
    (out, None)
}

fuzz_target!(|data: &[u8]| {
    let Some((&c, input)) = data.split_first() else {
        return;
    };
    // Small limits so the fuzzer reaches them.
    let limits = Limits {
        bulk_bytes_max: 64,
        args_max: 16,
        inline_bytes_max: 128,
    };
    let cut = usize::from(c) % (input.len() + 1);
    let whole = run(input, input.len(), &limits);
    let split = run(input, cut, &limits);
    // A limit error may come earlier when the input arrives in pieces (a
    // line is judged too long before its end arrives), but the commands
    // before it are the same.
    if whole.1.is_none() && split.1.is_none() {
        assert_eq!(whole, split);
    } else {
        let n = whole.0.len().min(split.0.len());
        assert_eq!(whole.0[..n], split.0[..n]);
    }
});
