//! The binary protocol. Expected responses were checked against
//! memcached 1.6.18.

mod common;

use common::Harness;
use nvdepot_memcache::Limits;

const GET: u8 = 0x00;
const SET: u8 = 0x01;
const ADD: u8 = 0x02;
const REPLACE: u8 = 0x03;
const DELETE: u8 = 0x04;
const INCR: u8 = 0x05;
const DECR: u8 = 0x06;
const QUIT: u8 = 0x07;
const FLUSH: u8 = 0x08;
const GETQ: u8 = 0x09;
const NOOP: u8 = 0x0a;
const VERSION: u8 = 0x0b;
const GETK: u8 = 0x0c;
const GETKQ: u8 = 0x0d;
const APPEND: u8 = 0x0e;
const PREPEND: u8 = 0x0f;
const STAT: u8 = 0x10;
const SETQ: u8 = 0x11;
const ADDQ: u8 = 0x12;
const REPLACEQ: u8 = 0x13;
const DELETEQ: u8 = 0x14;
const INCRQ: u8 = 0x15;
const DECRQ: u8 = 0x16;
const QUITQ: u8 = 0x17;
const FLUSHQ: u8 = 0x18;
const APPENDQ: u8 = 0x19;
const PREPENDQ: u8 = 0x1a;
const TOUCH: u8 = 0x1c;
const GAT: u8 = 0x1d;
const GATQ: u8 = 0x1e;
const GATK: u8 = 0x23;

#[derive(Default)]
struct Req<'a> {
    op: u8,
    key: &'a [u8],
    extras: Vec<u8>,
    value: &'a [u8],
    opaque: u32,
    cas: u64,
}

fn req(r: Req) -> Vec<u8> {
    let body = r.extras.len() + r.key.len() + r.value.len();
    let mut v = vec![0x80, r.op];
    v.extend_from_slice(&(r.key.len() as u16).to_be_bytes());
    v.push(r.extras.len() as u8);
    v.extend_from_slice(&[0, 0, 0]);
    v.extend_from_slice(&(body as u32).to_be_bytes());
    v.extend_from_slice(&r.opaque.to_be_bytes());
    v.extend_from_slice(&r.cas.to_be_bytes());
    v.extend_from_slice(&r.extras);
    v.extend_from_slice(r.key);
    v.extend_from_slice(r.value);
    v
}

fn simple(op: u8, key: &[u8]) -> Vec<u8> {
    req(Req {
        op,
        key,
        ..Default::default()
    })
}

fn set(op: u8, key: &[u8], value: &[u8], flags: u32, exptime: u32, cas: u64) -> Vec<u8> {
    let mut extras = flags.to_be_bytes().to_vec();
    extras.extend_from_slice(&exptime.to_be_bytes());
    req(Req {
        op,
        key,
        extras,
        value,
        cas,
        ..Default::default()
    })
}

fn arith(op: u8, key: &[u8], delta: u64, initial: u64, exptime: u32) -> Vec<u8> {
    let mut extras = delta.to_be_bytes().to_vec();
    extras.extend_from_slice(&initial.to_be_bytes());
    extras.extend_from_slice(&exptime.to_be_bytes());
    req(Req {
        op,
        key,
        extras,
        ..Default::default()
    })
}

fn with_exptime(op: u8, key: &[u8], exptime: u32) -> Vec<u8> {
    req(Req {
        op,
        key,
        extras: exptime.to_be_bytes().to_vec(),
        ..Default::default()
    })
}

#[derive(Debug, PartialEq, Eq)]
struct Resp {
    op: u8,
    status: u16,
    opaque: u32,
    cas: u64,
    extras: Vec<u8>,
    key: Vec<u8>,
    value: Vec<u8>,
}

fn parse(mut out: &[u8]) -> Vec<Resp> {
    let mut v = Vec::new();
    while !out.is_empty() {
        assert!(
            out.len() >= 24 && out[0] == 0x81,
            "bad response bytes {out:?}"
        );
        let kl = usize::from(u16::from_be_bytes([out[2], out[3]]));
        let el = usize::from(out[4]);
        let bl = u32::from_be_bytes(out[8..12].try_into().unwrap()) as usize;
        let body = &out[24..24 + bl];
        v.push(Resp {
            op: out[1],
            status: u16::from_be_bytes([out[6], out[7]]),
            opaque: u32::from_be_bytes(out[12..16].try_into().unwrap()),
            cas: u64::from_be_bytes(out[16..24].try_into().unwrap()),
            extras: body[..el].to_vec(),
            key: body[el..el + kl].to_vec(),
            value: body[el + kl..].to_vec(),
        });
        out = &out[24 + bl..];
    }
    v
}

fn run(h: &mut Harness, parts: &[Vec<u8>]) -> (Vec<Resp>, bool) {
    let input = parts.concat();
    let (out, fed) = h.feed(&input);
    (parse(&out), fed.close)
}

/// (opcode, status, value) of each response.
fn brief(r: &[Resp]) -> Vec<(u8, u16, Vec<u8>)> {
    r.iter()
        .map(|r| (r.op, r.status, r.value.clone()))
        .collect()
}

#[test]
fn get_set_variants() {
    let mut h = Harness::new();
    let mut get = simple(GET, b"k");
    get[12..16].copy_from_slice(&7u32.to_be_bytes());
    let (r, _) = run(
        &mut h,
        &[
            get,
            simple(GETQ, b"k"),
            simple(NOOP, b""),
            set(SET, b"k", b"val", 5, 0, 0),
        ],
    );
    assert_eq!(
        brief(&r),
        vec![
            (GET, 1, b"Not found".to_vec()),
            (NOOP, 0, vec![]),
            (SET, 0, vec![])
        ]
    );
    assert_eq!(r[0].opaque, 7);
    assert_eq!(r[2].cas, 1);
    let (r, _) = run(
        &mut h,
        &[
            simple(GETK, b"k"),
            simple(GETKQ, b"k"),
            simple(GET, b"k"),
            simple(GETQ, b"k"),
        ],
    );
    for (i, resp) in r.iter().enumerate() {
        assert_eq!(
            (resp.status, resp.cas, &resp.extras[..], &resp.value[..]),
            (0, 1, &[0, 0, 0, 5][..], &b"val"[..])
        );
        assert_eq!(resp.key, if i < 2 { b"k".to_vec() } else { vec![] });
    }
    let (r, _) = run(&mut h, &[simple(GETK, b"zz")]);
    assert_eq!(
        (r[0].status, &r[0].key[..], &r[0].value[..]),
        (1, &b"zz"[..], &b""[..])
    );
}

#[test]
fn quiet_variants_hide_success_not_errors() {
    let mut h = Harness::new();
    let (r, _) = run(
        &mut h,
        &[
            set(SETQ, b"k", b"v", 0, 0, 0),
            set(ADDQ, b"k2", b"v", 0, 0, 0),
            set(REPLACEQ, b"k", b"w", 0, 0, 0),
            req(Req {
                op: APPENDQ,
                key: b"k",
                value: b"x",
                ..Default::default()
            }),
            req(Req {
                op: PREPENDQ,
                key: b"k",
                value: b"y",
                ..Default::default()
            }),
            simple(GETQ, b"k"),
            simple(DELETEQ, b"k2"),
            arith(INCRQ, b"n", 1, 5, 0),
            arith(DECRQ, b"n", 1, 5, 0),
            simple(GETQ, b"n"),
            simple(GETQ, b"missing"),
            simple(FLUSHQ, b""),
            simple(NOOP, b""),
        ],
    );
    assert_eq!(
        brief(&r),
        vec![
            (GETQ, 0, b"ywx".to_vec()),
            (GETQ, 0, b"4".to_vec()),
            (NOOP, 0, vec![])
        ]
    );
    let (r, _) = run(
        &mut h,
        &[
            set(SET, b"k", b"v", 0, 0, 0),
            set(ADDQ, b"k", b"v", 0, 0, 0),
            simple(DELETEQ, b"zz"),
            set(REPLACEQ, b"zz", b"v", 0, 0, 0),
            set(SETQ, b"k", b"v", 0, 0, 1),
            req(Req {
                op: APPENDQ,
                key: b"zz",
                value: b"v",
                ..Default::default()
            }),
            arith(INCRQ, b"k", 1, 0, 0),
            simple(NOOP, b""),
        ],
    );
    let want: Vec<(u8, u16, Vec<u8>)> = vec![
        (SET, 0, vec![]),
        (ADDQ, 2, b"Data exists for key.".to_vec()),
        (DELETEQ, 1, b"Not found".to_vec()),
        (REPLACEQ, 1, b"Not found".to_vec()),
        (SETQ, 2, b"Data exists for key.".to_vec()),
        (APPENDQ, 5, b"Not stored.".to_vec()),
        (
            INCRQ,
            6,
            b"Non-numeric server-side value for incr or decr".to_vec(),
        ),
        (NOOP, 0, vec![]),
    ];
    assert_eq!(brief(&r), want);
}

#[test]
fn incr_decr() {
    let mut h = Harness::new();
    let (r, _) = run(
        &mut h,
        &[
            arith(INCR, b"n", 1, 5, 0),
            arith(INCR, b"n", 10, 5, 0),
            arith(DECR, b"n", 100, 5, 0),
            arith(INCR, b"n2", 1, 5, u32::MAX),
            simple(GET, b"n"),
            set(SET, b"w", b"18446744073709551615", 0, 0, 0),
            arith(INCR, b"w", 2, 0, 0),
        ],
    );
    let num = |v: u64| v.to_be_bytes().to_vec();
    assert_eq!(
        brief(&r),
        vec![
            (INCR, 0, num(5)),
            (INCR, 0, num(15)),
            (DECR, 0, num(0)),
            (INCR, 1, b"Not found".to_vec()),
            (GET, 0, b"0 ".to_vec()),
            (SET, 0, vec![]),
            (INCR, 0, num(1)),
        ]
    );
    assert_eq!(r[0].cas, 1);
    let mut with_cas = arith(INCR, b"n", 1, 0, 0);
    with_cas[16..24].copy_from_slice(&99u64.to_be_bytes());
    let (r, _) = run(&mut h, &[with_cas]);
    assert_eq!(r[0].status, 2);
    assert_eq!(h.stat(|s| &s.incr_misses), 1);
}

#[test]
fn cas_on_set_add_replace() {
    let mut h = Harness::new();
    let (r, _) = run(
        &mut h,
        &[
            set(SET, b"nokey", b"v", 0, 0, 5),
            set(ADD, b"nokey", b"v", 0, 0, 5),
            set(REPLACE, b"nokey", b"v", 0, 0, 5),
            set(SET, b"a", b"x", 0, 0, 0),
            set(ADD, b"a", b"x", 0, 0, 0),
            set(REPLACE, b"b", b"x", 0, 0, 0),
            set(SET, b"a", b"y", 0, 0, 1),
        ],
    );
    let st: Vec<u16> = r.iter().map(|r| r.status).collect();
    assert_eq!(st, vec![1, 1, 1, 0, 2, 1, 0]);
    assert_eq!(r[6].cas, 2);
}

#[test]
fn delete_touch_gat() {
    let mut h = Harness::new();
    let mut del_cas = simple(DELETE, b"a");
    del_cas[16..24].copy_from_slice(&9u64.to_be_bytes());
    let (r, _) = run(
        &mut h,
        &[
            set(SET, b"a", b"x", 3, 0, 0),
            del_cas,
            simple(DELETE, b"a"),
            simple(DELETE, b"a"),
        ],
    );
    let st: Vec<u16> = r.iter().map(|r| r.status).collect();
    assert_eq!(st, vec![0, 2, 0, 1]);
    let (r, _) = run(
        &mut h,
        &[
            set(SET, b"t", b"tv", 3, 0, 0),
            with_exptime(TOUCH, b"t", 100),
            with_exptime(GAT, b"t", 100),
            with_exptime(GATQ, b"zz", 100),
            with_exptime(GATK, b"t", 100),
            with_exptime(TOUCH, b"zz", 100),
            with_exptime(GATK, b"zz", 100),
        ],
    );
    let b: Vec<(u8, u16, Vec<u8>, Vec<u8>)> = r
        .iter()
        .map(|r| (r.op, r.status, r.key.clone(), r.value.clone()))
        .collect();
    assert_eq!(
        b,
        vec![
            (SET, 0, vec![], vec![]),
            (TOUCH, 0, vec![], vec![]),
            (GAT, 0, vec![], b"tv".to_vec()),
            (GATK, 0, b"t".to_vec(), b"tv".to_vec()),
            (TOUCH, 1, vec![], b"Not found".to_vec()),
            (GATK, 1, b"zz".to_vec(), vec![]),
        ]
    );
    assert_eq!(r[1].extras, vec![0, 0, 0, 3]);
}

#[test]
fn append_prepend() {
    let mut h = Harness::new();
    let app = |op, key, value, cas| {
        req(Req {
            op,
            key,
            value,
            cas,
            ..Default::default()
        })
    };
    let (r, _) = run(
        &mut h,
        &[
            set(SET, b"a", b"x", 0, 0, 0),
            app(APPEND, b"a", b"y", 0),
            app(PREPEND, b"a", b"z", 0),
            simple(GET, b"a"),
            app(APPEND, b"a", b"y", 1),
            app(APPEND, b"none", b"y", 0),
        ],
    );
    assert_eq!(
        brief(&r),
        vec![
            (SET, 0, vec![]),
            (APPEND, 0, vec![]),
            (PREPEND, 0, vec![]),
            (GET, 0, b"zxy".to_vec()),
            (APPEND, 2, b"Data exists for key.".to_vec()),
            (APPEND, 5, b"Not stored.".to_vec()),
        ]
    );
}

#[test]
fn flush_version_stat_noop_quit() {
    let mut h = Harness::new();
    let flush_delay = req(Req {
        op: FLUSH,
        extras: 100u32.to_be_bytes().to_vec(),
        ..Default::default()
    });
    let (r, _) = run(
        &mut h,
        &[
            set(SET, b"a", b"x", 0, 0, 0),
            flush_delay,
            simple(GET, b"a"),
            simple(VERSION, b""),
        ],
    );
    assert_eq!(
        brief(&r)[1..],
        [
            (FLUSH, 0, vec![]),
            (GET, 0, b"x".to_vec()),
            (VERSION, 0, b"1.6.18-nvdepot".to_vec())
        ]
    );
    h.storage.advance(99);
    let (r, _) = run(&mut h, &[simple(GET, b"a")]);
    assert_eq!(r[0].status, 1);
    let (r, _) = run(&mut h, &[simple(STAT, b"")]);
    assert!(r.iter().any(|r| r.key == b"cmd_get" && r.value == b"2"));
    let last = r.last().unwrap();
    assert_eq!((last.status, last.key.len(), last.value.len()), (0, 0, 0));
    let (r, _) = run(
        &mut h,
        &[
            simple(STAT, b"foo"),
            simple(STAT, b"reset"),
            simple(STAT, b"sizes"),
        ],
    );
    assert_eq!(
        brief(&r),
        vec![
            (STAT, 1, b"Not found".to_vec()),
            (STAT, 0, vec![]),
            (STAT, 0, b"disabled".to_vec()),
            (STAT, 0, vec![]),
        ]
    );
    let (r, close) = run(&mut h, &[simple(QUIT, b""), simple(NOOP, b"")]);
    assert_eq!(brief(&r), vec![(QUIT, 0, vec![])]);
    assert!(close);
    let mut h = Harness::new();
    let (r, close) = run(&mut h, &[simple(QUITQ, b""), simple(NOOP, b"")]);
    assert!(r.is_empty() && close);
}

#[test]
fn protocol_errors() {
    let mut h = Harness::new();
    // Unknown opcode: error, body swallowed, connection stays.
    let unknown = req(Req {
        op: 0x50,
        value: b"abc",
        ..Default::default()
    });
    let (r, close) = run(&mut h, &[unknown, simple(NOOP, b"")]);
    assert_eq!(
        brief(&r),
        vec![(0x50, 0x81, b"Unknown command".to_vec()), (NOOP, 0, vec![])]
    );
    assert!(!close);
    // Malformed known commands: "Invalid arguments" and close.
    for bad in [
        simple(GET, b""),
        req(Req {
            op: SET,
            key: b"k",
            extras: vec![1, 2, 3, 4],
            value: b"v",
            ..Default::default()
        }),
        req(Req {
            op: VERSION,
            value: b"x",
            ..Default::default()
        }),
        req(Req {
            op: INCR,
            key: b"k",
            extras: vec![0; 4],
            ..Default::default()
        }),
        req(Req {
            op: FLUSH,
            extras: vec![0; 3],
            ..Default::default()
        }),
        req(Req {
            op: DELETE,
            key: b"k",
            value: b"v",
            ..Default::default()
        }),
        simple(TOUCH, b"k"),
        simple(GET, &[b'k'; 251]),
    ] {
        let mut h = Harness::new();
        let (r, close) = run(&mut h, &[bad, simple(NOOP, b"")]);
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].status, &r[0].value[..]),
            (4, &b"Invalid arguments"[..])
        );
        assert!(close);
    }
    // Key and extras longer than the body.
    let mut h = Harness::new();
    let mut bad = simple(GET, b"k");
    bad[8..12].copy_from_slice(&0u32.to_be_bytes());
    let (r, close) = run(&mut h, &[bad]);
    assert_eq!(r[0].status, 0x81);
    assert!(close);
    // Wrong magic: close without a reply.
    let mut h = Harness::new();
    let mut bad = simple(NOOP, b"");
    let (r, _) = run(&mut h, &[simple(NOOP, b"")]);
    assert_eq!(r.len(), 1);
    bad[0] = 0x81;
    let (out, fed) = h.feed(&bad);
    assert!(out.is_empty() && fed.close);
}

#[test]
fn limits() {
    let mut h = Harness::with_limits(Limits {
        key_bytes_max: 250,
        // memcached's 59 bytes of item overhead + the 1-byte key: values
        // of up to 340 bytes fit.
        item_bytes_max: 400,
    });
    let (r, _) = run(
        &mut h,
        &[
            set(SET, &[b'k'; 250], b"v", 0, 0, 0),
            set(SET, b"a", &[b'v'; 340], 0, 0, 0),
            set(SET, b"a", &[b'v'; 341], 0, 0, 0),
            simple(GET, b"a"),
            set(SETQ, b"b", &[b'v'; 341], 0, 0, 0),
            simple(NOOP, b""),
        ],
    );
    let st: Vec<u16> = r.iter().map(|r| r.status).collect();
    assert_eq!(st, vec![0, 0, 3, 1, 3, 0]);
    // The oversized body is swallowed across feeds.
    let big = set(SET, b"c", &[b'v'; 500], 0, 0, 0);
    let (out, fed) = h.feed(&big[..50]);
    assert_eq!(parse(&out)[0].status, 3);
    assert_eq!(fed.consumed, 50);
    let mut rest = big[50..].to_vec();
    rest.extend_from_slice(&simple(NOOP, b""));
    let (out, _) = h.feed(&rest);
    assert_eq!(parse(&out)[0].op, NOOP);
}

#[test]
fn text_and_binary_are_per_connection() {
    let mut h = Harness::new();
    let (r, _) = run(&mut h, &[set(SET, b"a", b"x", 0, 0, 0)]);
    assert_eq!(r[0].status, 0);
    let mut text = h.connect();
    let mut out = Vec::new();
    text.feed_ready(b"get a\r\n", &mut out);
    assert_eq!(out, b"VALUE a 0 1\r\nx\r\nEND\r\n");
}
