//! Requests as Redis 7 reads them: multibulk and inline, limits, errors,
//! and any split of a request stream parses the same.

use nvdepot_resp::{parse_command, Limits, ParseError, Parsed};
use proptest::prelude::*;

fn args(input: &[u8]) -> Vec<Vec<u8>> {
    match parse_command(input, &Limits::default()).unwrap() {
        Parsed::Command(c, n) => {
            assert_eq!(n, input.len(), "consumed");
            c.args.iter().map(|a| a.to_vec()).collect()
        }
        other => panic!("{other:?}"),
    }
}

fn err(input: &[u8]) -> ParseError {
    parse_command(input, &Limits::default()).unwrap_err()
}

#[test]
fn multibulk() {
    assert_eq!(
        args(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"),
        [b"GET".to_vec(), b"k".to_vec()]
    );
    // Binary-safe values, empty ones too.
    assert_eq!(
        args(b"*2\r\n$0\r\n\r\n$3\r\n\r\n\0\r\n"),
        [b"".to_vec(), b"\r\n\0".to_vec()]
    );
    let l = Limits::default();
    assert_eq!(parse_command(b"*0\r\n", &l), Ok(Parsed::Skip(4)));
    assert_eq!(parse_command(b"*-1\r\n", &l), Ok(Parsed::Skip(5)));
    let whole = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
    for cut in 0..whole.len() {
        assert_eq!(
            parse_command(&whole[..cut], &l),
            Ok(Parsed::Incomplete),
            "cut {cut}"
        );
    }
}

#[test]
fn multibulk_errors_as_redis() {
    assert_eq!(err(b"*x\r\n"), ParseError::InvalidMultibulkLength);
    assert_eq!(err(b"*+1\r\n"), ParseError::InvalidMultibulkLength);
    assert_eq!(err(b"*01\r\n"), ParseError::InvalidMultibulkLength);
    assert_eq!(err(b"*2147483648\r\n"), ParseError::InvalidMultibulkLength);
    assert_eq!(err(b"*1\r\n+GET\r\n"), ParseError::ExpectedDollar(b'+'));
    assert_eq!(err(b"*1\r\n$-1\r\n"), ParseError::InvalidBulkLength);
    assert_eq!(err(b"*1\r\n$536870913\r\n"), ParseError::InvalidBulkLength);
    assert_eq!(
        err(b"*1\r\n$x\r\n").message(),
        "ERR Protocol error: invalid bulk length"
    );
    assert_eq!(
        err(b"*1\r\n:1\r\n").message(),
        "ERR Protocol error: expected '$', got ':'"
    );
    let long = [b"*".as_slice(), &[b'1'; 70_000]].concat();
    assert_eq!(err(&long), ParseError::TooBigMbulkCount);
    let long = [b"*1\r\n$".as_slice(), &[b'1'; 70_000]].concat();
    assert_eq!(err(&long), ParseError::TooBigBulkCount);
}

#[test]
fn inline_commands() {
    assert_eq!(args(b"GET k\r\n"), [b"GET".to_vec(), b"k".to_vec()]);
    assert_eq!(
        args(b"set k \"a b\"\n"),
        [b"set".to_vec(), b"k".to_vec(), b"a b".to_vec()]
    );
    let l = Limits::default();
    assert_eq!(parse_command(b"\r\n", &l), Ok(Parsed::Skip(2)));
    assert_eq!(parse_command(b"   \n", &l), Ok(Parsed::Skip(4)));
    assert_eq!(parse_command(b"GET k", &l), Ok(Parsed::Incomplete));
    assert_eq!(err(b"set k \"v\r\n"), ParseError::UnbalancedQuotes);
    assert_eq!(err(&[b'a'; 70_000]), ParseError::TooBigInline);
}

/// A stream of commands of every shape.
fn stream() -> impl Strategy<Value = Vec<u8>> {
    let arg = prop::collection::vec(any::<u8>(), 0..20);
    let cmd = prop::collection::vec(arg, 1..5).prop_map(|args| {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend(format!("${}\r\n", a.len()).bytes());
            out.extend(a);
            out.extend(b"\r\n");
        }
        out
    });
    let inline = "[a-z]{1,6}( [a-z0-9]{0,6}){0,3}\r\n".prop_map(String::into_bytes);
    prop::collection::vec(prop_oneof![cmd, inline], 1..8).prop_map(|v| v.concat())
}

/// Parses a whole stream fed in pieces cut at `cuts`, as a server does.
fn commands(input: &[u8], cuts: &[usize]) -> Result<Vec<Vec<Vec<u8>>>, ParseError> {
    let l = Limits::default();
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut fed = 0;
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        let cut = cut.clamp(fed, input.len());
        buf.extend_from_slice(&input[fed..cut]);
        fed = cut;
        loop {
            match parse_command(&buf, &l)? {
                Parsed::Command(c, n) => {
                    out.push(c.args.iter().map(|a| a.to_vec()).collect());
                    buf.drain(..n);
                }
                Parsed::Skip(n) => {
                    buf.drain(..n);
                }
                Parsed::Incomplete => break,
            }
        }
    }
    assert!(buf.is_empty(), "left over: {buf:?}");
    Ok(out)
}

proptest! {
    #[test]
    fn any_split_parses_the_same(input in stream(), mut cuts in prop::collection::vec(0usize..400, 0..6)) {
        cuts.sort_unstable();
        let whole = commands(&input, &[]).unwrap();
        prop_assert_eq!(commands(&input, &cuts).unwrap(), whole);
    }

    #[test]
    fn arbitrary_bytes_never_panic(input in prop::collection::vec(any::<u8>(), 0..300)) {
        let l = Limits::default();
        let mut at = 0;
        while at < input.len() {
            match parse_command(&input[at..], &l) {
                Ok(Parsed::Command(_, n)) | Ok(Parsed::Skip(n)) => {
                    prop_assert!(n > 0 && n <= input.len() - at);
                    at += n;
                }
                Ok(Parsed::Incomplete) | Err(_) => break,
            }
        }
    }
}
