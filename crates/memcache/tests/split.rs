//! Framing: a request stream gives the same output however it is cut into
//! reads, and whether it is fed in one piece or byte by byte.

mod common;

use common::Harness;
use nvdepot_memcache::Limits;
use proptest::prelude::*;

fn limits() -> Limits {
    // A small item limit so oversized (swallowed) payloads are cheap.
    Limits {
        key_bytes_max: 250,
        // 16 bytes of value beyond memcached's 59 of item overhead and
        // a 1-byte key.
        item_bytes_max: 76,
    }
}

fn whole(input: &[u8]) -> (Vec<u8>, bool) {
    Harness::with_limits(limits()).run_chunks(input, &[])
}

/// Every two-piece split, and byte-by-byte feeding, match the whole feed.
fn assert_split_invariant(input: &[u8]) {
    let want = whole(input);
    for cut in 0..=input.len() {
        let got = Harness::with_limits(limits()).run_chunks(input, &[cut]);
        assert_eq!(
            got,
            want,
            "cut at {cut} of {:?}",
            String::from_utf8_lossy(input)
        );
    }
    let cuts: Vec<usize> = (0..input.len()).collect();
    assert_eq!(
        Harness::with_limits(limits()).run_chunks(input, &cuts),
        want
    );
}

#[test]
fn text_every_boundary() {
    let input = b"set a 0 0 3\r\nabc\r\nget a b\r\nincr n 1\r\nset n 0 0 1 noreply\r\n5\r\n\
incr n 10\r\nappend a 0 0 2\r\nde\r\ngets a\r\nset big 0 0 20\r\n01234567890123456789\r\n\
set a 0 0 1\r\nxy\r\nms m 2 T0 c\r\nhi\r\nmg m v k\r\nma n D2 v\r\nmd m q\r\nmn\r\n\
delete a\r\nbogus\r\nstats settings\r\nquit\r\nget a\r\n";
    assert_split_invariant(input);
    let (out, closed) = whole(input);
    assert!(closed);
    assert!(
        out.ends_with(b"END\r\n"),
        "{}",
        String::from_utf8_lossy(&out)
    );
}

fn bin(op: u8, key: &[u8], extras: &[u8], value: &[u8]) -> Vec<u8> {
    let body = extras.len() + key.len() + value.len();
    let mut v = vec![0x80, op];
    v.extend_from_slice(&(key.len() as u16).to_be_bytes());
    v.push(extras.len() as u8);
    v.extend_from_slice(&[0, 0, 0]);
    v.extend_from_slice(&(body as u32).to_be_bytes());
    v.extend_from_slice(&[0; 12]);
    v.extend_from_slice(extras);
    v.extend_from_slice(key);
    v.extend_from_slice(value);
    v
}

#[test]
fn binary_every_boundary() {
    let set_extras = [0u8; 8];
    let incr_extras = [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0];
    let input = [
        bin(0x01, b"a", &set_extras, b"abc"),
        bin(0x00, b"a", &[], &[]),
        bin(0x09, b"zz", &[], &[]),
        bin(0x05, b"n", &incr_extras, &[]),
        bin(0x11, b"big", &set_extras, &[b'v'; 20]),
        bin(0x0e, b"a", &[], b"de"),
        bin(0x50, b"", &[], b"xyz"),
        bin(0x0c, b"a", &[], &[]),
        bin(0x0a, b"", &[], &[]),
        bin(0x07, b"", &[], &[]),
        bin(0x0a, b"", &[], &[]),
    ]
    .concat();
    assert_split_invariant(&input);
}

/// Requests for the property test: valid, invalid and oversized.
fn text_request() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec!["a", "b", "n", "Zm9v"]);
    let val = "[a-z0-9]{0,20}";
    prop_oneof![
        (key.clone(), val).prop_map(|(k, v)| format!("set {k} 1 0 {}\r\n{v}\r\n", v.len())),
        (key.clone(), val).prop_map(|(k, v)| format!("append {k} 0 0 {}\r\n{v}\r\n", v.len())),
        (key.clone(), val).prop_map(|(k, v)| format!("ms {k} {} T0 c q\r\n{v}\r\n", v.len())),
        (key.clone(), val).prop_map(|(k, v)| format!("set {k} 0 0 1 noreply\r\n{v}\r\n")),
        key.clone().prop_map(|k| format!("get {k} a b\r\n")),
        key.clone().prop_map(|k| format!("gets {k}\r\n")),
        key.clone().prop_map(|k| format!("incr {k} 7\r\n")),
        key.clone().prop_map(|k| format!("decr {k} 3\r\n")),
        key.clone()
            .prop_map(|k| format!("mg {k} v k c t s f O1\r\n")),
        key.clone().prop_map(|k| format!("mg {k} b v q\r\n")),
        key.clone().prop_map(|k| format!("ma {k} N0 J5 D3 v\r\n")),
        key.clone().prop_map(|k| format!("md {k} q\r\n")),
        key.clone().prop_map(|k| format!("delete {k}\r\n")),
        key.prop_map(|k| format!("touch {k} 10\r\n")),
        Just("mn\r\n".to_string()),
        Just("bogus command\r\n".to_string()),
        Just("flush_all\r\n".to_string()),
        Just("\r\n".to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn text_stream_split_anywhere(
        reqs in prop::collection::vec(text_request(), 1..12),
        cuts in prop::collection::vec(0usize..2000, 0..8),
    ) {
        let input = reqs.concat().into_bytes();
        let want = whole(&input);
        let got = Harness::with_limits(limits()).run_chunks(&input, &cuts);
        prop_assert_eq!(got, want);
    }

    #[test]
    fn arbitrary_bytes_split_anywhere(
        input in prop::collection::vec(any::<u8>(), 0..300),
        cuts in prop::collection::vec(0usize..300, 0..6),
    ) {
        let want = whole(&input);
        let got = Harness::with_limits(limits()).run_chunks(&input, &cuts);
        prop_assert_eq!(got, want);
    }
}
