//! Meta commands. Expected replies were checked against memcached 1.6.18
//! except where the README lists a difference.

mod common;

use common::Harness;
use nvdepot_memcache::testing::START_TIME;

fn check(h: &mut Harness, input: &str, want: &str) {
    assert_eq!(h.run(input.as_bytes()), want, "input: {input:?}");
}

#[test]
fn mg_flags_in_request_order() {
    let mut h = Harness::new();
    check(
        &mut h,
        "ms m1 2 T0 F5 c k O99\r\nhi\r\n",
        "HD c1 km1 O99\r\n",
    );
    check(
        &mut h,
        "mg m1 s v f t c k O1 q\r\n",
        "VA 2 s2 f5 t-1 c1 km1 O1\r\nhi\r\n",
    );
    check(
        &mut h,
        "mg m1\r\nmg m1 q\r\nmg m1 k v\r\n",
        "HD\r\nHD\r\nVA 2 km1\r\nhi\r\n",
    );
    check(
        &mut h,
        "mg m2 k O1 s v\r\nmg m2 k O1 s v q\r\nmn\r\n",
        "EN km2 O1\r\nMN\r\n",
    );
    check(
        &mut h,
        "mg m1 v O\r\nmg m1 u P L\r\n",
        "VA 2 O\r\nhi\r\nHD\r\n",
    );
    assert_eq!(h.stat(|s| &s.get_hits), 6);
    assert_eq!(h.stat(|s| &s.get_misses), 2);
}

#[test]
fn mg_ttl_and_touch() {
    let mut h = Harness::new();
    check(&mut h, "set e1 0 100 2\r\nab\r\n", "STORED\r\n");
    h.storage.advance(1);
    check(&mut h, "mg e1 t\r\n", "HD t99\r\n");
    // t before T reports the old TTL.
    check(
        &mut h,
        "mg e1 t T30 v\r\nmg e1 T20 t\r\n",
        "VA 2 t99\r\nab\r\nHD t20\r\n",
    );
    check(&mut h, "mg e1 T30 t v\r\n", "VA 2 t30\r\nab\r\n");
    assert_eq!(h.storage.peek(b"e1").unwrap().exptime, START_TIME + 31);
    check(&mut h, "mg e1 T-1 v\r\nmg e1 v\r\n", "VA 2\r\nab\r\nEN\r\n");
    assert_eq!(h.stat(|s| &s.touch_hits), 4);
}

#[test]
fn mg_errors() {
    let mut h = Harness::new();
    check(&mut h, "mg\r\n", "ERROR\r\n");
    check(
        &mut h,
        "mg foo x\r\nmg foo E5\r\nmg foo Q\r\n",
        &"CLIENT_ERROR invalid flag\r\n".repeat(3),
    );
    check(
        &mut h,
        "mg foo v v\r\nmg foo \u{7f}\r\n",
        &"CLIENT_ERROR duplicate flag\r\n".repeat(2),
    );
    check(
        &mut h,
        "mg foo T\r\nmg foo Tx\r\n",
        &"CLIENT_ERROR bad token in command line format\r\n".repeat(2),
    );
    let opaque = format!("mg foo O{}\r\n", "1".repeat(32));
    check(&mut h, &opaque, "CLIENT_ERROR opaque token too long\r\n");
    let many = format!(
        "mg foo {}\r\n",
        "a1 a2 a3 a4 a5 a6 a7 a8 a9 b0 b1 b2 b3 b4 b5 b6 b7 b8"
    );
    check(&mut h, &many, "CLIENT_ERROR options flags are too long\r\n");
    // Flags other commands use are accepted and ignored.
    check(&mut h, "mg foo q M1 D1 J1 F1 C1 I\r\nmn\r\n", "MN\r\n");
}

/// `h` (fetched before) and `l` (seconds since last access), as memcached
/// 1.6.18 answered these requests sent one at a time: a fetch (get, gat,
/// touch, mg without `u`) marks an item fetched after `h` is read; a new
/// item (set, append, an increment that outgrows the number) starts
/// unfetched; an in-place change (touch, an increment that fits, `md I`)
/// keeps the mark. (Pipelined behind the `mg` that fetched it, memcached's
/// `incr bar 1` makes a new item instead, since the `mg`'s unsent reply
/// still holds the old one; one request at a time it changes it in place.)
#[test]
fn hit_before_and_last_access() {
    let mut h = Harness::new();
    check(
        &mut h,
        "set foo 0 0 3\r\nabc\r\nmg foo h l t v\r\nmg foo h\r\nmg foo h u\r\n",
        "STORED\r\nVA 3 h0 l0 t-1\r\nabc\r\nHD h1\r\nHD h1\r\n",
    );
    check(
        &mut h,
        "set bar 0 0 1\r\n5\r\nmg bar h u\r\nmg bar h\r\nmg bar h\r\n",
        "STORED\r\nHD h0\r\nHD h0\r\nHD h1\r\n",
    );
    check(
        &mut h,
        "append bar 0 0 1\r\n1\r\nmg bar h\r\nincr bar 1\r\nmg bar h\r\nincr bar 50\r\nmg bar h\r\n",
        "STORED\r\nHD h0\r\n52\r\nHD h1\r\n102\r\nHD h0\r\n",
    );
    check(
        &mut h,
        "set baz 0 0 1\r\n1\r\ntouch baz 0\r\nmg baz h\r\nmd baz I\r\nmg baz h\r\n",
        "STORED\r\nTOUCHED\r\nHD h1\r\nHD\r\nHD h1 X W\r\n",
    );
    check(
        &mut h,
        "mg nope h N30\r\nmg nope h\r\nset q 0 0 1\r\n1\r\nget q\r\nmg q h\r\n",
        "HD h0 W\r\nHD h1 Z\r\nSTORED\r\nVALUE q 0 1\r\n1\r\nEND\r\nHD h1\r\n",
    );
    check(
        &mut h,
        "set q2 0 0 1\r\n1\r\ngat 0 q2\r\nmg q2 h k\r\n",
        "STORED\r\nVALUE q2 0 1\r\n1\r\nEND\r\nHD h1 kq2\r\n",
    );
    // `l` counts from the last access: a write, then a fetch after the
    // first.
    h.storage.advance(5);
    check(&mut h, "mg q2 l\r\n", "HD l5\r\n");
    check(&mut h, "mg q2 l\r\n", "HD l0\r\n");
}

/// An over-long opaque token in `mg` is found after the fetch, as in
/// memcached 1.6.18 (these replies are its): the error is answered, but a
/// hit was fetched (unless `h` delays the bump), `T` before the token was
/// applied, and `N` created the item (expiry from N or T before the
/// token, in order; no win token). Found by the differential test.
#[test]
fn mg_over_long_opaque_after_the_fetch() {
    let mut h = Harness::new();
    let o = format!("O{}", "o".repeat(40));
    let e = "CLIENT_ERROR opaque token too long\r\n";
    let steps = [
        ("set k 0 0 1\r\n1\r\n".to_string(), "STORED\r\n"),
        (format!("mg k v {o}\r\n"), e),
        ("mg k h\r\n".into(), "HD h1\r\n"),
        ("set k2 0 0 1\r\n1\r\n".into(), "STORED\r\n"),
        (format!("mg k2 h {o}\r\n"), e),
        ("mg k2 h\r\n".into(), "HD h0\r\n"),
        (format!("mg n1 N30 {o}\r\n"), e),
        ("mg n1 t v h\r\n".into(), "VA 0 t30 h0\r\n\r\n"),
        (format!("mg n2 {o} N30\r\n"), e),
        ("mg n2 t v h\r\n".into(), "VA 0 t-1 h0\r\n\r\n"),
        (format!("mg n3 T50 N30 {o}\r\n"), e),
        ("mg n3 t\r\n".into(), "HD t30\r\n"),
        (format!("mg k T99 {o}\r\n"), e),
        ("mg k t\r\n".into(), "HD t99\r\n"),
        (format!("mg nn {o}\r\n"), e),
    ];
    for (req, want) in steps {
        check(&mut h, &req, want);
    }
}

/// Where each meta command reports an opaque token over 32 bytes, against
/// its other errors (found by the differential test). Every reply was
/// checked against memcached 1.6.18, request by request on one
/// connection; the comments give memcached's replies.
///
/// - ms: flag errors first, then the mode, then the opaque token (its
///   data swallowed every time);
/// - ma: flag errors (all "invalid or duplicate flag"), the mode, a
///   non-numeric value, and only then the token: the increment or the
///   creation is done, and `T`/`N` before the token apply, those after it
///   do not; a miss still counts;
/// - md: flag errors, then the token, before the delete is tried;
/// - mg: after the fetch, whose bump a `T` anywhere holds back (`h0`).
#[test]
fn over_long_opaque_reported_after_what_memcached_checks_first() {
    let mut h = Harness::new();
    let o = format!("O{}", "o".repeat(40));
    let too_long = "CLIENT_ERROR opaque token too long\r\n";
    let steps: Vec<(String, &str)> = vec![
        // memcached: CLIENT_ERROR invalid mode for ms M token (twice)
        (
            format!("ms k 2 {o} MZ\r\nhi\r\nms k 2 MZ {o}\r\nhi\r\n"),
            "CLIENT_ERROR invalid mode for ms M token\r\n\
             CLIENT_ERROR invalid mode for ms M token\r\n",
        ),
        // memcached: CLIENT_ERROR incorrect length for M token
        (
            format!("ms k 2 {o} MAB\r\nhi\r\n"),
            "CLIENT_ERROR incorrect length for M token\r\n",
        ),
        // memcached: CLIENT_ERROR opaque token too long
        (format!("ms k 2 {o} ME\r\nhi\r\n"), too_long),
        // memcached: CLIENT_ERROR bad command line format
        (
            format!("ms k 2 {o} Fx\r\nhi\r\n"),
            "CLIENT_ERROR bad command line format\r\n",
        ),
        // memcached: EN
        ("mg k\r\n".into(), "EN\r\n"),
        // memcached: CLIENT_ERROR invalid mode for ma M token (twice)
        (
            format!("ma n {o} MZ\r\nma n MZ {o}\r\n"),
            "CLIENT_ERROR invalid mode for ma M token\r\n\
             CLIENT_ERROR invalid mode for ma M token\r\n",
        ),
        // memcached: CLIENT_ERROR invalid or duplicate flag (3 times)
        (
            format!("ma n {o} Dx\r\nma n {o} Jx\r\nma n {o} Nx\r\n"),
            "CLIENT_ERROR invalid or duplicate flag\r\n\
             CLIENT_ERROR invalid or duplicate flag\r\n\
             CLIENT_ERROR invalid or duplicate flag\r\n",
        ),
        // memcached: STORED, then twice CLIENT_ERROR cannot increment or
        // decrement non-numeric value (q hides no error)
        (
            format!("set n 0 0 3\r\nabc\r\nma n {o}\r\nma n {o} q\r\n"),
            "STORED\r\n\
             CLIENT_ERROR cannot increment or decrement non-numeric value\r\n\
             CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
        ),
        // memcached: STORED, CLIENT_ERROR opaque token too long (twice),
        // VA 1 / 7: both increments were made.
        (
            format!("set n 0 0 1\r\n5\r\nma n {o}\r\nma n {o} q\r\nmg n v\r\n"),
            "STORED\r\n\
             CLIENT_ERROR opaque token too long\r\n\
             CLIENT_ERROR opaque token too long\r\n\
             VA 1\r\n7\r\n",
        ),
        // memcached: CLIENT_ERROR opaque token too long, VA 1 t100 / 8
        (
            format!("ma n T100 {o}\r\nmg n t v\r\n"),
            "CLIENT_ERROR opaque token too long\r\nVA 1 t100\r\n8\r\n",
        ),
        // memcached: CLIENT_ERROR opaque token too long, VA 1 t100 / 9
        (
            format!("ma n {o} T200\r\nmg n t v\r\n"),
            "CLIENT_ERROR opaque token too long\r\nVA 1 t100\r\n9\r\n",
        ),
        // memcached: CLIENT_ERROR opaque token too long, VA 1 t-1 / 7
        (
            format!("ma m1 N0 J7 {o}\r\nmg m1 t v\r\n"),
            "CLIENT_ERROR opaque token too long\r\nVA 1 t-1\r\n7\r\n",
        ),
        // memcached: CLIENT_ERROR opaque token too long, VA 1 t-1 / 0
        (
            format!("ma m2 {o} N100\r\nmg m2 t v\r\n"),
            "CLIENT_ERROR opaque token too long\r\nVA 1 t-1\r\n0\r\n",
        ),
        // memcached: CLIENT_ERROR opaque token too long, VA 1 t50 / 0
        (
            format!("ma m3 T50 {o} N100\r\nmg m3 t v\r\n"),
            "CLIENT_ERROR opaque token too long\r\nVA 1 t50\r\n0\r\n",
        ),
        // memcached: CLIENT_ERROR opaque token too long, VA 1 t100 / 0
        (
            format!("ma m4 N100 {o}\r\nmg m4 t v\r\n"),
            "CLIENT_ERROR opaque token too long\r\nVA 1 t100\r\n0\r\n",
        ),
        // memcached: CLIENT_ERROR opaque token too long (3 times: NF, NF
        // with q, EX), then VA 1 / 9
        (
            format!("ma none {o}\r\nma none {o} q\r\nma n C1 {o}\r\nmg n v\r\n"),
            "CLIENT_ERROR opaque token too long\r\n\
             CLIENT_ERROR opaque token too long\r\n\
             CLIENT_ERROR opaque token too long\r\n\
             VA 1\r\n9\r\n",
        ),
        // memcached: CLIENT_ERROR invalid or duplicate flag, then
        // CLIENT_ERROR opaque token too long (md has no mode to check)
        (
            format!("md k {o} Cx\r\nmd k {o} MZ\r\n"),
            "CLIENT_ERROR invalid or duplicate flag\r\n\
             CLIENT_ERROR opaque token too long\r\n",
        ),
        // memcached: STORED, CLIENT_ERROR opaque token too long (twice),
        // VA 2 / hi: neither delete nor invalidation was made.
        (
            format!("set k 0 100 2\r\nhi\r\nmd k {o} q\r\nmd k q {o} I\r\nmg k v\r\n"),
            "STORED\r\n\
             CLIENT_ERROR opaque token too long\r\n\
             CLIENT_ERROR opaque token too long\r\n\
             VA 2\r\nhi\r\n",
        ),
        // memcached: STORED, CLIENT_ERROR opaque token too long, HD h0 t100
        (
            format!("set a 0 100 2\r\nhi\r\nmg a {o} T30\r\nmg a h t\r\n"),
            "STORED\r\nCLIENT_ERROR opaque token too long\r\nHD h0 t100\r\n",
        ),
        // memcached: STORED, CLIENT_ERROR opaque token too long, HD h0 t30
        (
            format!("set b 0 100 2\r\nhi\r\nmg b T30 {o}\r\nmg b h t\r\n"),
            "STORED\r\nCLIENT_ERROR opaque token too long\r\nHD h0 t30\r\n",
        ),
    ];
    for (req, want) in &steps {
        check(&mut h, req, want);
    }
    // memcached: STAT incr_hits 4, STAT incr_misses 2
    assert_eq!(h.stat(|s| &s.incr_hits), 4);
    assert_eq!(h.stat(|s| &s.incr_misses), 2);
}

/// `mg … R<secs>`, quiet or not (found by the differential test): memcached
/// weighs `R` against the item's expiry as of the flag's place in the
/// request (after a `T` before it, before a `T` after it), converts `secs`
/// as an exptime (0 and negative never win, more than 30 days is an
/// absolute time, never winning if before the server started), hands the
/// token to an item a `T` has just expired, and `q` hides only `EN`.
/// Every reply was checked against memcached 1.6.18 request by request;
/// the comments give memcached's replies.
#[test]
fn mg_recache_win_weighs_r_in_request_order() {
    let mut h = Harness::new();
    let steps: &[(&str, &str)] = &[
        // memcached: STORED, HD t10, HD W, HD Z
        (
            "set r 0 100 2\r\nhi\r\nmg r R30 T10 q t\r\nmg r R30 q\r\nmg r R30 q\r\n",
            "STORED\r\nHD t10\r\nHD W\r\nHD Z\r\n",
        ),
        // memcached: STORED, HD t-1 W, HD t-1 Z
        (
            "set s 0 10 2\r\nhi\r\nmg s R30 T0 q t\r\nmg s R30 q t\r\n",
            "STORED\r\nHD t-1 W\r\nHD t-1 Z\r\n",
        ),
        // memcached: STORED, HD t-1
        (
            "set u 0 10 2\r\nhi\r\nmg u T0 R30 q t\r\n",
            "STORED\r\nHD t-1\r\n",
        ),
        // memcached: STORED, HD kv W, (nothing), EN
        (
            "set v 0 100 2\r\nhi\r\nmg v T-1 R30 q k\r\nmg v R30 q\r\nmg v R30\r\n",
            "STORED\r\nHD kv W\r\nEN\r\n",
        ),
        // memcached: STORED, HD
        (
            "set w 0 100 2\r\nhi\r\nmg w T-1 R3000000 q\r\n",
            "STORED\r\nHD\r\n",
        ),
        // memcached: STORED, HD, HD, HD, HD W
        (
            "set x 0 10 2\r\nhi\r\nmg x R3000000 q\r\nmg x R0 q\r\nmg x R-1 q\r\n\
             mg x R2000000000 q\r\n",
            "STORED\r\nHD\r\nHD\r\nHD\r\nHD W\r\n",
        ),
        // memcached: (nothing), (nothing), EN ky, VA 0 ky t30 W, VA 0 ky t30 Z
        (
            "mg y R30 q\r\nmg y R30 q k v t\r\nmg y R30 k v t\r\n\
             mg y N30 R30 q k v t\r\nmg y R30 q k v t\r\n",
            "EN ky\r\nVA 0 ky t30 W\r\n\r\nVA 0 ky t30 Z\r\n\r\n",
        ),
        // memcached: STORED, VA 2 kz t10 W / hi, VA 2 kz t10 Z / hi
        (
            "set z 0 10 2\r\nhi\r\nmg z R30 q k v t\r\nmg z R30 q k v t\r\n",
            "STORED\r\nVA 2 kz t10 W\r\nhi\r\nVA 2 kz t10 Z\r\nhi\r\n",
        ),
        // memcached: STORED, HD, HD X W, HD Z X
        (
            "set st 0 100 2\r\nhi\r\nmd st I\r\nmg st R30 q\r\nmg st R30 q\r\n",
            "STORED\r\nHD\r\nHD X W\r\nHD Z X\r\n",
        ),
        // memcached: STORED, HD (no expiry: never wins)
        ("set nx 0 0 2\r\nhi\r\nmg nx R30 q\r\n", "STORED\r\nHD\r\n"),
    ];
    for &(req, want) in steps {
        check(&mut h, req, want);
    }
}

/// `ms … I C0`: CAS 0 is "no CAS", which memcached's compare never
/// matches, invalidating or not (EX, not a stale store). Found by the
/// differential test; replies as memcached 1.6.18's.
#[test]
fn ms_invalidate_with_cas_zero_is_exists() {
    let mut h = Harness::new();
    check(
        &mut h,
        "set k 0 0 1\r\n1\r\nms k 2 I C0\r\n22\r\nms k 2 C0\r\n22\r\nmg k v\r\n",
        "STORED\r\nEX\r\nEX\r\nVA 1\r\n1\r\n",
    );
}

#[test]
fn base64_keys() {
    let mut h = Harness::new();
    check(
        &mut h,
        "ms Zm9vYmFy 1 b k c\r\nx\r\n",
        "HD kZm9vYmFy b c1\r\n",
    );
    check(&mut h, "get foobar\r\n", "VALUE foobar 0 1\r\nx\r\nEND\r\n");
    check(&mut h, "mg Zm9vYmFy b k v\r\n", "VA 1 kZm9vYmFy b\r\nx\r\n");
    check(
        &mut h,
        "mg ZTE b k v\r\nmg ZTE=x b v\r\n",
        &"CLIENT_ERROR error decoding key\r\n".repeat(2),
    );
    check(
        &mut h,
        "ms ZTE 1 b\r\nx\r\nmn\r\n",
        "CLIENT_ERROR error decoding key\r\nMN\r\n",
    );
    check(
        &mut h,
        "md ZTE b\r\nma ZTE b\r\n",
        &"CLIENT_ERROR invalid or duplicate flag\r\n".repeat(2),
    );
    check(&mut h, "md ZTE= b k\r\n", "NF kZTE= b\r\n");
    check(
        &mut h,
        "me Zm9vYmFy b\r\n",
        "ME Zm9vYmFy exp=-1 la=0 cas=1 fetch=yes cls=1 size=7\r\n",
    );
}

#[test]
fn ms_modes_and_noreply() {
    let mut h = Harness::new();
    check(
        &mut h,
        "ms m1 2 MA\r\nxx\r\nms m1 2 MP c\r\nyy\r\nms m1 2 MR\r\nzz\r\n",
        "NS\r\nNS c0\r\nNS\r\n",
    );
    check(
        &mut h,
        "ms m1 2 ME\r\nzz\r\nms m1 2 ME\r\nzz\r\n",
        "HD\r\nNS\r\n",
    );
    check(
        &mut h,
        "ms m1 1 MA\r\na\r\nms m1 1 MP\r\np\r\nmg m1 v\r\n",
        "HD\r\nHD\r\nVA 4\r\npzza\r\n",
    );
    check(
        &mut h,
        "ms m1 2 MS c C1\r\nzz\r\nms m1 2 C3 c\r\nab\r\n",
        "EX c0\r\nHD c4\r\n",
    );
    check(
        &mut h,
        "ms m1 2 MA C1\r\nzz\r\nms m1 2 MR C4 q\r\ncd\r\n",
        "EX\r\n",
    );
    check(
        &mut h,
        "ms nope 2 q MR\r\nhi\r\nms nope 2 q C1\r\nhi\r\nms m1 2 q\r\nhi\r\nmn\r\n",
        "NS\r\nNF\r\nMN\r\n",
    );
    check(
        &mut h,
        "ms m1 2 F7 T100\r\nhi\r\nmg m1 f t\r\n",
        "HD\r\nHD f7 t100\r\n",
    );
    assert_eq!(h.storage.peek(b"m1").unwrap().exptime, START_TIME + 100);
}

#[test]
fn ms_errors_swallow_data() {
    let mut h = Harness::new();
    let bad = "CLIENT_ERROR bad command line format\r\n";
    // Before the length is known nothing is swallowed.
    check(&mut h, "ms m1 x\r\nhi\r\n", &format!("{bad}ERROR\r\n"));
    check(&mut h, "ms m1\r\nhi\r\n", &format!("{bad}ERROR\r\n"));
    check(&mut h, "ms m1 -1\r\nhi\r\n", &format!("{bad}ERROR\r\n"));
    // After it, the data block is swallowed.
    check(&mut h, "ms m1 2 Fx\r\nhi\r\n", bad);
    check(
        &mut h,
        "ms m1 2 Tx\r\nhi\r\nms m1 2 Cx\r\nhi\r\n",
        &"CLIENT_ERROR bad token in command line format\r\n".repeat(2),
    );
    check(
        &mut h,
        "ms m1 2 MEE\r\nhi\r\nms m1 2 M\r\nhi\r\n",
        &"CLIENT_ERROR incorrect length for M token\r\n".repeat(2),
    );
    check(
        &mut h,
        "ms m1 2 MX\r\nhi\r\n",
        "CLIENT_ERROR invalid mode for ms M token\r\n",
    );
    let opaque = format!("ms m1 2 O{}\r\nhi\r\n", "1".repeat(32));
    check(&mut h, &opaque, "CLIENT_ERROR opaque token too long\r\n");
    check(
        &mut h,
        "ms m1 2 q\r\nhix\r\nmn\r\n",
        "CLIENT_ERROR bad data chunk\r\nERROR\r\nMN\r\n",
    );
    let big = format!(
        "ms m1 2 T0\r\nhi\r\nms m1 2000000 T0\r\n{}\r\nmg m1\r\n",
        "v".repeat(2_000_000)
    );
    check(
        &mut h,
        &big,
        "HD\r\nSERVER_ERROR object too large for cache\r\nEN\r\n",
    );
}

#[test]
fn md_commands() {
    let mut h = Harness::new();
    check(
        &mut h,
        "ms m1 2\r\nhi\r\nmd m1 q\r\nmd m1 q\r\n",
        "HD\r\nNF\r\n",
    );
    check(
        &mut h,
        "ms m1 2\r\nhi\r\nmd m1 k O5 C99\r\nmd m1 C2 O6\r\n",
        "HD\r\nEX km1 O5\r\nHD O6\r\n",
    );
    check(
        &mut h,
        "md m1 T5\r\nmd m1 v\r\nmd\r\n",
        "NF\r\nNF\r\nERROR\r\n",
    );
    check(
        &mut h,
        "md m1 x\r\nmd m1 I\r\n",
        "CLIENT_ERROR invalid or duplicate flag\r\nNF\r\n",
    );
    assert_eq!(h.stat(|s| &s.delete_hits), 2);
}

#[test]
fn ma_commands() {
    let mut h = Harness::new();
    check(
        &mut h,
        "ma c1\r\nma c1 N0 J10 v\r\nma c1 v t c\r\n",
        "NF\r\nVA 2\r\n10\r\nVA 2 t-1 c2\r\n11\r\n",
    );
    check(
        &mut h,
        "ma c1 MD D100 v\r\nma c1 M- D1 v k O9\r\nget c1\r\n",
        "VA 1\r\n0\r\nVA 1 kc1 O9\r\n0\r\nVALUE c1 0 2\r\n0 \r\nEND\r\n",
    );
    check(
        &mut h,
        "ma c1 MX\r\n",
        "CLIENT_ERROR invalid mode for ma M token\r\n",
    );
    check(
        &mut h,
        "ma c1 D-1\r\nma c1 Dx\r\nma c1 Jx\r\n",
        &"CLIENT_ERROR invalid or duplicate flag\r\n".repeat(3),
    );
    check(
        &mut h,
        "ma c1 q\r\nma c2 q\r\nma c1 C1 q\r\nmn\r\n",
        "NF\r\nEX\r\nMN\r\n",
    );
    check(
        &mut h,
        "ms c3 2\r\nab\r\nma c3\r\nma c3 q\r\n",
        &format!(
            "HD\r\n{}",
            "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n".repeat(2)
        ),
    );
    // N and T: the later one sets a created item's TTL; t reports as of its place.
    check(
        &mut h,
        "ma e3 N100 T200 t J5 v\r\nma e4 T200 N100 t J5 v\r\n",
        "VA 1 t200\r\n5\r\nVA 1 t100\r\n5\r\n",
    );
    assert_eq!(h.storage.peek(b"e3").unwrap().exptime, START_TIME + 200);
    assert_eq!(h.storage.peek(b"e4").unwrap().exptime, START_TIME + 100);
    check(
        &mut h,
        "ma e3 t T50\r\nma e3 T60 t\r\n",
        "HD t200\r\nHD t60\r\n",
    );
    // q hides a hit but not a creation.
    check(
        &mut h,
        "ma e4 N0 q\r\nma e5 N0 q\r\nma e5 q v\r\n",
        "HD\r\n",
    );
    check(
        &mut h,
        "set w 0 0 20\r\n18446744073709551615\r\nma w v\r\n",
        "STORED\r\nVA 1\r\n0\r\n",
    );
}

#[test]
fn mn_me() {
    let mut h = Harness::new();
    check(&mut h, "mn\r\nmn x\r\n", "MN\r\nMN\r\n");
    check(
        &mut h,
        "me\r\nme nope\r\n",
        "CLIENT_ERROR bad command line format\r\nEN\r\n",
    );
    check(
        &mut h,
        "set e1 0 100 2\r\nab\r\nme e1\r\n",
        "STORED\r\nME e1 exp=-100 la=0 cas=1 fetch=no cls=1 size=4\r\n",
    );
}

/// Stale-while-revalidate: vivify on miss (N), recache wins (R), invalidation
/// (md I, ms I with an older CAS), and the W / Z / X marks. The transcript
/// is memcached 1.6.18's, request for request, on a fresh server.
#[test]
fn win_tokens_and_stale_items_as_memcached() {
    let mut h = Harness::new();
    let transcript: &[(&str, &str)] = &[
        ("mg foo v c N30 t", "VA 0 c1 t30 W\r\n\r\n"),
        ("mg foo v c N30 t", "VA 0 c1 t30 Z\r\n\r\n"),
        ("mg foo v c t", "VA 0 c1 t30 Z\r\n\r\n"),
        ("ms foo 3 T60\r\nbar", "HD\r\n"),
        ("mg foo v c t", "VA 3 c2 t60\r\nbar\r\n"),
        ("mg foo v c R90 t", "VA 3 c2 t60 W\r\nbar\r\n"),
        ("mg foo v c R90 t", "VA 3 c2 t60 Z\r\nbar\r\n"),
        ("ms foo 3 I\r\nbaz", "HD\r\n"),
        ("mg foo v c t", "VA 3 c3 t-1\r\nbaz\r\n"),
        ("md foo I T30", "HD\r\n"),
        ("mg foo v c t", "VA 3 c4 t30 X W\r\nbaz\r\n"),
        ("mg foo v", "VA 3 Z X\r\nbaz\r\n"),
        ("ms k2 1 T100\r\na", "HD\r\n"),
        ("ms k2 1 I C1\r\nb", "HD\r\n"),
        ("mg k2 v c t", "VA 1 c6 t100 X W\r\nb\r\n"),
        ("mg k2 v c t", "VA 1 c6 t100 Z X\r\nb\r\n"),
        ("ms k2 1 I C99\r\nc", "EX\r\n"),
        ("ms k2 1 I C6 c\r\nd", "HD c7\r\n"),
        ("mg k2 v c t", "VA 1 c7 t-1\r\nd\r\n"),
        ("md nope I", "NF\r\n"),
        ("mg k3 N0 v c", "VA 0 c8 W\r\n\r\n"),
        ("ms k4 1\r\nx", "HD\r\n"),
        ("mg k4 R30 v t", "VA 1 t-1\r\nx\r\n"),
        ("mg k4 N30 v", "VA 1\r\nx\r\n"),
        ("md k4 I q", ""),
        ("mg k4 v c", "VA 1 c10 X W\r\nx\r\n"),
        ("ms k4 1 C5\r\ny", "EX\r\n"),
        ("mg k4 c", "HD c10 Z X\r\n"),
        ("md k4 I C1", "EX\r\n"),
        ("md k4 I", "HD\r\n"),
        ("mg k4 v c", "VA 1 c11 X W\r\nx\r\n"),
        ("ms k5 1 T0\r\nz", "HD\r\n"),
        ("md k5 I T0", "HD\r\n"),
        ("mg k5 v t", "VA 1 t-1 X W\r\nz\r\n"),
        ("ms k6 1 T1000\r\nz", "HD\r\n"),
        ("md k6 I", "HD\r\n"),
        ("mg k6 v t", "VA 1 t1000 X W\r\nz\r\n"),
        ("get k6", "VALUE k6 0 1\r\nz\r\nEND\r\n"),
        ("ms k6 1 T1000\r\nw", "HD\r\n"),
        ("mg k6 v t c", "VA 1 t1000 c16\r\nw\r\n"),
        ("mg k7 N30 q k", "HD kk7 W\r\n"),
        ("mg k7 q k", "HD kk7 Z\r\n"),
    ];
    for (request, reply) in transcript {
        check(&mut h, &format!("{request}\r\n"), reply);
    }
}

/// A recache is won by one request only, even when the storage answers
/// both requests' reads before either writes.
#[test]
fn one_winner_per_stale_item() {
    let mut h = Harness::new();
    check(&mut h, "ms k 1\r\nx\r\nmd k I\r\n", "HD\r\nHD\r\n");
    let item = h.storage.peek(b"k").unwrap();
    assert!(item.state.stale && !item.state.token_sent);
    // Another client claims first, with the item this one is about to see.
    let claimed = h.storage.store_item_now(
        b"k",
        &item.value,
        item.flags,
        item.exptime,
        nvdepot_memcache::ItemState {
            token_sent: true,
            ..item.state
        },
        nvdepot_memcache::StoreMode::Win(item.cas),
    );
    assert_eq!(
        claimed.unwrap(),
        nvdepot_memcache::StoreOutcome::Stored { cas: item.cas }
    );
    let again = h.storage.store_item_now(
        b"k",
        &item.value,
        item.flags,
        item.exptime,
        item.state,
        nvdepot_memcache::StoreMode::Win(item.cas),
    );
    assert_eq!(again.unwrap(), nvdepot_memcache::StoreOutcome::NotStored);
    check(&mut h, "mg k v\r\n", "VA 1 Z X\r\nx\r\n");
}

/// Found by the differential test (crates/nvdepot/tests/differential.rs),
/// replies recorded from memcached 1.6.18: `mg k` answers the key in
/// base64 only if the *item* was stored by `ms` with `b` (memcached's
/// `ITEM_KEY_BINARY`); `md`, `ms` and `ma` follow the request. An `incr`
/// that fits changes the item in place and keeps the mark; a longer
/// result, an append, a vivify or `ma N` make an item without it.
#[test]
fn key_in_base64_follows_the_item() {
    let mut h = Harness::new();
    // r0-k3 is cjAtazM= in base64.
    let script = [
        ("set r0-k3 0 0 2\r\n41\r\n", "STORED\r\n"),
        ("md cjAtazM= b k I\r\n", "HD kcjAtazM= b\r\n"),
        ("mg cjAtazM= b k\r\n", "HD kr0-k3 X W\r\n"),
        ("md cjAtazM= b k\r\n", "HD kcjAtazM= b\r\n"),
        ("ms cjAtazM= 1 b k\r\n5\r\n", "HD kcjAtazM= b\r\n"),
        ("mg r0-k3 k v\r\n", "VA 1 kcjAtazM= b\r\n5\r\n"),
        ("incr r0-k3 1\r\n", "6\r\n"),
        ("mg r0-k3 k v\r\n", "VA 1 kcjAtazM= b\r\n6\r\n"),
        ("incr r0-k3 10\r\n", "16\r\n"),
        ("mg r0-k3 k v\r\n", "VA 2 kr0-k3\r\n16\r\n"),
        ("touch r0-k3 100\r\n", "TOUCHED\r\n"),
        ("mg r0-k3 k\r\n", "HD kr0-k3\r\n"),
        ("md r0-k3\r\n", "HD\r\n"),
        ("mg cjAtazM= b k N30\r\n", "HD kr0-k3 W\r\n"),
        ("mg r0-k3 k\r\n", "HD kr0-k3 Z\r\n"),
        ("md r0-k3\r\n", "HD\r\n"),
        ("ma cjAtazM= b k N30\r\n", "HD kcjAtazM= b\r\n"),
        ("mg r0-k3 k\r\n", "HD kr0-k3\r\n"),
        ("append r0-k3 0 0 1\r\n1\r\n", "STORED\r\n"),
        ("mg r0-k3 k\r\n", "HD kr0-k3\r\n"),
        ("ms cjAtazM= 1 b MA\r\n5\r\n", "HD\r\n"),
        ("mg r0-k3 k\r\n", "HD kr0-k3\r\n"),
    ];
    for (input, want) in script {
        check(&mut h, input, want);
    }
}

/// Found by the differential test, recorded from memcached 1.6.18: on a
/// miss that `N` vivifies, memcached creates the item without expiry and
/// applies `N` and `T` in request order, so a `t` before them reports
/// `-1`, and the later of the two sets the TTL.
#[test]
fn mg_vivify_applies_n_and_t_in_request_order() {
    let mut h = Harness::new();
    check(&mut h, "mg a s t T100 N30\r\n", "HD s0 t-1 W\r\n");
    check(&mut h, "mg a t\r\n", "HD t30 Z\r\n");
    check(&mut h, "mg b N30 T100 t\r\n", "HD t100 W\r\n");
    check(&mut h, "mg b t\r\n", "HD t100 Z\r\n");
    check(&mut h, "mg c N30 t T100\r\n", "HD t30 W\r\n");
    check(&mut h, "mg c t\r\n", "HD t100 Z\r\n");
}
