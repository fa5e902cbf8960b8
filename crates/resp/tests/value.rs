//! Client-side parsing of every RESP2/RESP3 type, and what `Reply` writes
//! parses back to what was meant.

use nvdepot_resp::{parse_value, Item, Reader, Reply, Value, ValueError, Version};

fn one(input: &[u8]) -> Value {
    let (v, n) = parse_value(input).unwrap().expect("complete");
    assert_eq!(n, input.len());
    v
}

#[test]
fn every_type() {
    assert_eq!(one(b"+OK\r\n"), Value::Simple(b"OK".to_vec()));
    assert_eq!(one(b"-ERR x\r\n"), Value::Error(b"ERR x".to_vec()));
    assert_eq!(one(b":-3\r\n"), Value::Integer(-3));
    assert_eq!(one(b"$-1\r\n"), Value::Bulk(None));
    assert_eq!(one(b"$2\r\n\r\n\r\n"), Value::Bulk(Some(b"\r\n".to_vec())));
    assert_eq!(one(b"*-1\r\n"), Value::Array(None));
    assert_eq!(one(b"_\r\n"), Value::Null);
    assert_eq!(one(b"#t\r\n"), Value::Boolean(true));
    assert_eq!(one(b",-inf\r\n"), Value::Double(f64::NEG_INFINITY));
    assert_eq!(one(b"(123\r\n"), Value::BigNumber(b"123".to_vec()));
    assert_eq!(
        one(b"=7\r\ntxt:abc\r\n"),
        Value::Verbatim(b"txt".to_vec(), b"abc".to_vec())
    );
    assert_eq!(
        one(b"%1\r\n+a\r\n:1\r\n"),
        Value::Map(vec![(Value::Simple(b"a".to_vec()), Value::Integer(1))])
    );
    assert_eq!(one(b"~1\r\n:1\r\n"), Value::Set(vec![Value::Integer(1)]));
    assert_eq!(parse_value(b"*2\r\n:1\r\n").unwrap(), None);
    assert!(parse_value(b"?\r\n").is_err());
    let deep = "*1\r\n".repeat(200);
    assert_eq!(parse_value(deep.as_bytes()), Err(ValueError::TooDeep));
}

#[test]
fn replies_parse_back() {
    for version in [Version::Resp2, Version::Resp3] {
        let mut out = Vec::new();
        let mut r = Reply::new(&mut out, version);
        r.map(1);
        r.bulk(b"k");
        r.double(2.5);
        let v = one(&out);
        match version {
            Version::Resp2 => assert_eq!(
                v,
                Value::Array(Some(vec![
                    Value::Bulk(Some(b"k".to_vec())),
                    Value::Bulk(Some(b"2.5".to_vec()))
                ]))
            ),
            Version::Resp3 => assert_eq!(
                v,
                Value::Map(vec![(Value::Bulk(Some(b"k".to_vec())), Value::Double(2.5))])
            ),
        }
    }
}

/// The pull reader gives a nested value item by item, borrowing the
/// input, and stops (position kept) where the input is cut.
#[test]
fn reader_items_in_order_and_stops_at_a_cut() {
    let input = b"*3\r\n$2\r\nab\r\n%1\r\n+k\r\n,1.5\r\n_\r\n$1\r\n";
    let mut r = Reader::new(input);
    let mut items = Vec::new();
    while let Some(item) = r.read().unwrap() {
        items.push(item);
    }
    assert_eq!(
        items,
        [
            Item::Array(3),
            Item::Bulk(Some(b"ab")),
            Item::Map(1),
            Item::Simple(b"k"),
            Item::Double(1.5),
            Item::Null,
        ]
    );
    assert_eq!(r.position(), input.len() - 4);
    assert_eq!(r.remaining(), 4);
    assert!(Reader::new(b"*x\r\n").read().is_err());
}
