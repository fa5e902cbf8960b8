//! Property tests of the on-device parsers (records, superblock, segment
//! header, index checkpoint, segment scan): the stable-Rust counterpart of
//! the fuzz targets in `fuzz/`, fast enough for every `cargo test`.
//!
//! `NVDEPOT_WRITE_FUZZ_SEEDS=1 cargo test -p nvdepot-engine --test parsers`
//! also rewrites the fuzzers' seed corpus in `fuzz/seeds/`.

use std::path::Path;

use nvdepot_engine::format::{
    check_record_head, decode_evictions, encode_evictions, encode_pad, encode_record, record_bytes,
    EvictedKey, FlushMark, RecordCheck, RecordHeader, RecordKind, SegmentHeader, SegmentKind,
    Superblock, FORMAT_VERSION, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES, SEGMENT_HEADER_ENCODED,
    SUPERBLOCK_BYTES,
};
use nvdepot_engine::fuzzing::{
    check_record, decode_checkpoint, decode_segment_header, decode_superblock, scan_image,
};
use proptest::prelude::*;

const GRAIN: usize = 512;

/// A put or tombstone record, padded to whole grains.
fn record(h: &RecordHeader, key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; record_bytes(key.len(), value.len(), GRAIN)];
    encode_record(&mut out, h, key, value);
    out
}

fn put(key: &[u8], value: &[u8], seq: u64, segment_seq: u64) -> Vec<u8> {
    let h = RecordHeader {
        kind: RecordKind::Put,
        member: false,
        key_len: key.len() as u16,
        value_len: value.len() as u32,
        namespace: 1,
        seq,
        segment_seq,
        flushed: FlushMark::default(),
    };
    record(&h, key, value)
}

/// One namespace entry of a checkpoint: (name, logical, physical, count).
type Ns = (String, u32, u32, i64);

/// A checkpoint payload that decodes: the given namespaces, `segments`
/// segment entries and an empty index of one table of 2^10 entries.
fn checkpoint(segments: u32, namespaces: &[Ns]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"NVCKPT02");
    out.extend_from_slice(&77u64.to_le_bytes());
    out.extend_from_slice(&(namespaces.len() as u32 + 2).to_le_bytes());
    out.extend_from_slice(&(namespaces.len() as u32).to_le_bytes());
    for (name, logical, physical, count) in namespaces {
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&logical.to_le_bytes());
        out.extend_from_slice(&physical.to_le_bytes());
        out.extend_from_slice(&count.to_le_bytes());
    }
    out.extend_from_slice(&3i64.to_le_bytes());
    out.extend_from_slice(&segments.to_le_bytes());
    for s in 0..segments as u64 {
        out.push((s % 2) as u8);
        for v in [s + 1, 2 * s, s, 0, 0] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out.extend_from_slice(&10u32.to_le_bytes()); // table_entries_log2
    out.extend_from_slice(&0u32.to_le_bytes()); // tables_log2
    out.extend_from_slice(&24u32.to_le_bytes()); // pba_bits
    let words = (1u64 << 10) + 31; // entries + H - 1 (neighborhood overhang)
    out.extend_from_slice(&words.to_le_bytes());
    for _ in 0..words {
        out.extend_from_slice(&u64::MAX.to_le_bytes()); // a free entry
    }
    out
}

fn superblock() -> Superblock {
    Superblock {
        format_version: FORMAT_VERSION,
        uuid: 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
        device_index: 0,
        device_count: 1,
        grain_bytes: 512,
        segment_bytes: 64 << 20,
        device_bytes: 1 << 30,
        created_secs: 1_700_000_000,
    }
}

fn arb_header(kind: RecordKind) -> impl Strategy<Value = (RecordHeader, Vec<u8>, Vec<u8>)> {
    let value_max = if kind == RecordKind::Tombstone {
        0
    } else {
        5000
    };
    (
        prop::collection::vec(any::<u8>(), 1..=300),
        prop::collection::vec(any::<u8>(), 0..=value_max),
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
        any::<(u32, u8)>(),
    )
        .prop_map(move |(key, value, namespace, seq, segment_seq, mark)| {
            let h = RecordHeader {
                kind,
                member: false,
                key_len: key.len() as u16,
                value_len: value.len() as u32,
                namespace,
                seq,
                segment_seq,
                flushed: FlushMark {
                    segment_seq_low: mark.0,
                    fraction: mark.1,
                },
            };
            (h, key, value)
        })
}

fn arb_record() -> impl Strategy<Value = (RecordHeader, Vec<u8>, Vec<u8>)> {
    prop_oneof![
        3 => arb_header(RecordKind::Put),
        1 => arb_header(RecordKind::Tombstone),
    ]
}

fn arb_superblock() -> impl Strategy<Value = Superblock> {
    (
        any::<u128>(),
        1u32..=64,
        any::<u32>(),
        0u32..=3,
        1u64..=1 << 20,
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(|(uuid, count, index, grain_log2, units, device, secs)| {
            let grain_bytes = 512 << grain_log2;
            Superblock {
                format_version: FORMAT_VERSION,
                uuid,
                device_index: index % count,
                device_count: count,
                grain_bytes,
                // a multiple of 1 MiB is a multiple of every grain
                segment_bytes: units << 20,
                device_bytes: device,
                created_secs: secs,
            }
        })
}

fn arb_segment_header() -> impl Strategy<Value = SegmentHeader> {
    (
        prop_oneof![
            Just(SegmentKind::Free),
            Just(SegmentKind::Kv),
            Just(SegmentKind::Checkpoint)
        ],
        any::<u128>(),
        any::<u64>(),
        any::<(u32, u32, u64, u32)>(),
    )
        .prop_map(
            |(kind, uuid, seq, (part, parts, payload_bytes, payload_crc))| SegmentHeader {
                kind,
                uuid,
                seq,
                part,
                parts,
                payload_bytes,
                payload_crc,
            },
        )
}

fn arb_namespaces() -> impl Strategy<Value = Vec<Ns>> {
    prop::collection::vec(
        ("[a-z0-9_]{0,20}", any::<u32>(), any::<u32>(), any::<i64>()),
        0..8,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..2048),
        segments in 0u32..1 << 20,
    ) {
        let _ = check_record(&bytes);
        let _ = check_record_head(&bytes);
        let _ = decode_superblock(&bytes);
        let _ = decode_segment_header(&bytes);
        let _ = decode_checkpoint(&bytes, segments);
        // The same bytes behind a checkpoint's magic get past the first check.
        let mut ckpt = b"NVCKPT02".to_vec();
        ckpt.extend_from_slice(&bytes);
        let _ = decode_checkpoint(&ckpt, segments);
    }

    #[test]
    fn record_round_trip((h, key, value) in arb_record()) {
        let buf = record(&h, &key, &value);
        let end = RECORD_HEADER_BYTES + key.len() + value.len();
        prop_assert_eq!(buf.len(), end.div_ceil(GRAIN) * GRAIN);
        prop_assert_eq!(h.body_bytes(), end);
        prop_assert_eq!(check_record(&buf), RecordCheck::Valid(h));
        prop_assert_eq!(check_record(&buf[..end]), RecordCheck::Valid(h));
        let head = RECORD_HEADER_BYTES + key.len();
        prop_assert_eq!(check_record_head(&buf[..head]), RecordCheck::Valid(h));
        prop_assert_eq!(&buf[RECORD_HEADER_BYTES..head], &key[..]);
        prop_assert_eq!(&buf[head..end], &value[..]);
        prop_assert_eq!(check_record(&buf[..end - 1]), RecordCheck::Truncated { need: end });
    }

    #[test]
    fn any_bit_flip_in_a_record_is_detected(
        (h, key, value) in arb_record(),
        at in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let mut buf = record(&h, &key, &value);
        let i = at.index(h.body_bytes());
        buf[i] ^= 1 << bit;
        let check = check_record(&buf);
        prop_assert!(check != RecordCheck::Valid(h), "flip of bit {} at byte {}: {:?}", bit, i, check);
    }

    #[test]
    fn evictions_round_trip(
        keys in prop::collection::vec((any::<u32>(), any::<u64>(), any::<u64>()), 0..300)
    ) {
        let keys: Vec<EvictedKey> = keys
            .into_iter()
            .map(|(namespace, hash, hash2)| EvictedKey { namespace, hash, hash2 })
            .collect();
        let value = encode_evictions(&keys);
        let h = RecordHeader {
            kind: RecordKind::Evictions,
            member: false,
            key_len: 0,
            value_len: value.len() as u32,
            namespace: 0,
            seq: 7,
            segment_seq: 3,
            flushed: FlushMark::default(),
        };
        let mut buf = vec![0u8; record_bytes(0, value.len(), GRAIN)];
        encode_record(&mut buf, &h, &[], &value);
        prop_assert_eq!(check_record(&buf), RecordCheck::Valid(h));
        let body = &buf[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + value.len()];
        prop_assert_eq!(decode_evictions(body).collect::<Vec<_>>(), keys);
    }

    #[test]
    fn superblock_round_trip(sb in arb_superblock()) {
        let mut buf = vec![0u8; 4096];
        sb.encode(&mut buf);
        prop_assert_eq!(decode_superblock(&buf), Ok(sb));
        prop_assert_eq!(decode_superblock(&buf[..SUPERBLOCK_BYTES]), Ok(sb));
        prop_assert!(decode_superblock(&buf[..SUPERBLOCK_BYTES - 1]).is_err());
    }

    #[test]
    fn segment_header_round_trip(h in arb_segment_header()) {
        let mut buf = vec![0u8; SEGMENT_HEADER_BYTES as usize];
        h.encode(&mut buf);
        prop_assert_eq!(decode_segment_header(&buf), Ok(h));
        prop_assert!(decode_segment_header(&buf[..SEGMENT_HEADER_ENCODED - 1]).is_err());
    }

    #[test]
    fn truncated_checkpoint_is_an_error(
        segments in 0u32..64,
        namespaces in arb_namespaces(),
        cut in any::<prop::sample::Index>(),
    ) {
        let payload = checkpoint(segments, &namespaces);
        prop_assert_eq!(decode_checkpoint(&payload, segments), Ok(()));
        let n = cut.index(payload.len());
        prop_assert!(decode_checkpoint(&payload[..n], segments).is_err(), "cut at {}", n);
        let mut longer = payload.clone();
        longer.push(0);
        prop_assert!(decode_checkpoint(&longer, segments).is_err());
        prop_assert!(decode_checkpoint(&payload, segments + 1).is_err());
    }
}

proptest! {
    // Each case scans a whole in-memory segment.
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn scan_yields_exactly_the_records_written(
        records in prop::collection::vec(arb_record(), 0..12),
        seq in any::<u64>(),
        tail in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut image = vec![0u8; SEGMENT_HEADER_BYTES as usize];
        image[32..40].copy_from_slice(&seq.to_le_bytes());
        let mut want = Vec::new();
        for (i, (h, key, value)) in records.iter().enumerate() {
            let h = RecordHeader { segment_seq: seq, ..*h };
            if i % 3 == 2 {
                let mut pad = vec![0u8; GRAIN * (1 + i % 2)];
                encode_pad(&mut pad, seq);
                image.extend_from_slice(&pad);
            }
            want.push((image.len() as u64, h));
            image.extend_from_slice(&record(&h, key, value));
        }
        let end = image.len() as u64;
        image.extend_from_slice(&tail); // garbage after the last record
        let scan = scan_image(&image);
        let got: Vec<(u64, RecordHeader)> =
            scan.records.iter().map(|r| (r.offset, r.header)).collect();
        prop_assert_eq!(got, want);
        prop_assert_eq!(scan.stopped.map(|(offset, _)| offset), Some(end));
    }
}

/// Found by the `record` fuzzer: a record whose header checksum is wrong
/// but whose whole-record checksum was computed over it anyway.
#[test]
fn header_checksum_is_checked() {
    let mut rec = put(b"key", b"value", 1, 2);
    let end = RECORD_HEADER_BYTES + 3 + 5;
    rec[4] ^= 1;
    let crc = crc32c::crc32c(&rec[4..end]);
    rec[0..4].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(
        check_record(&rec),
        RecordCheck::Invalid("header checksum mismatch")
    );
}

/// Found by the `headers` fuzzer: reserved bytes must be zero, or a
/// decoded header does not re-encode to its bytes.
#[test]
fn reserved_bytes_must_be_zero() {
    for at in [12, 15, 44, 47] {
        let mut b = vec![0u8; SUPERBLOCK_BYTES];
        superblock().encode(&mut b);
        b[at] = 1;
        let crc = crc32c::crc32c(&b[0..72]);
        b[72..76].copy_from_slice(&crc.to_le_bytes());
        assert!(decode_superblock(&b).is_err(), "superblock byte {at}");
    }
    for at in 9..16 {
        let mut b = vec![0u8; SEGMENT_HEADER_ENCODED];
        SegmentHeader {
            kind: SegmentKind::Kv,
            uuid: 1,
            seq: 2,
            part: 0,
            parts: 0,
            payload_bytes: 0,
            payload_crc: 0,
        }
        .encode(&mut b);
        b[at] = 1;
        let crc = crc32c::crc32c(&b[0..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        assert!(
            decode_segment_header(&b).is_err(),
            "segment header byte {at}"
        );
    }
}

/// Counts and lengths that claim far more than the payload holds are
/// errors, not panics (a table length whose byte count overflowed the
/// cursor's offset used to panic in debug builds).
#[test]
fn checkpoint_with_huge_counts_is_an_error() {
    let payload = checkpoint(1, &[]);
    let words_at = payload.len() - 1055 * 8 - 8;
    let mut huge = payload[..words_at].to_vec();
    huge.extend_from_slice(&(u64::MAX / 8).to_le_bytes());
    huge.extend_from_slice(&[0xff; 64]);
    assert!(decode_checkpoint(&huge, 1).is_err());
    let mut many = payload[..20].to_vec(); // magic, seq, next namespace id
    many.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode_checkpoint(&many, 1).is_err());
    assert!(decode_checkpoint(&payload, u32::MAX).is_err());
}

/// The fuzzers' seeds are valid inputs of each target.
#[test]
fn fuzz_seeds() {
    let mut seeds: Vec<(&str, &str, Vec<u8>)> = Vec::new();

    let key = b"user:1";
    let rec = put(key, b"hello, nvdepot", 5, 9);
    assert!(matches!(check_record(&rec), RecordCheck::Valid(_)));
    seeds.push(("record", "put", rec.clone()));
    let tomb = RecordHeader {
        kind: RecordKind::Tombstone,
        member: false,
        key_len: key.len() as u16,
        value_len: 0,
        namespace: 0,
        seq: 6,
        segment_seq: 9,
        flushed: FlushMark::default(),
    };
    seeds.push(("record", "tombstone", record(&tomb, key, b"")));
    let mut pad = vec![0u8; GRAIN];
    encode_pad(&mut pad, 9);
    seeds.push(("record", "pad", pad.clone()));

    let mut sb = vec![0u8; SUPERBLOCK_BYTES];
    superblock().encode(&mut sb);
    assert!(decode_superblock(&sb).is_ok());
    seeds.push(("headers", "superblock", sb));
    let mut sh = vec![0u8; SEGMENT_HEADER_ENCODED];
    SegmentHeader {
        kind: SegmentKind::Kv,
        uuid: superblock().uuid,
        seq: 9,
        part: 0,
        parts: 0,
        payload_bytes: 0,
        payload_crc: 0,
    }
    .encode(&mut sh);
    assert!(decode_segment_header(&sh).is_ok());
    seeds.push(("headers", "segment", sh));

    // checkpoint target input: segment count, then the payload
    let ns = [
        ("default".to_string(), 1, 1, 2),
        ("users".to_string(), 2, 5, 0),
    ];
    let payload = checkpoint(4, &ns);
    assert_eq!(decode_checkpoint(&payload, 4), Ok(()));
    let mut ckpt = 4u32.to_le_bytes().to_vec();
    ckpt.extend_from_slice(&payload);
    seeds.push(("checkpoint", "small", ckpt));

    // scan target input: segment sequence number, then the records
    let mut scan = 9u64.to_le_bytes().to_vec();
    scan.extend_from_slice(&rec);
    scan.extend_from_slice(&pad);
    scan.extend_from_slice(&put(b"k2", &[7u8; 600], 7, 9));
    scan.extend_from_slice(&record(&tomb, key, b""));
    let mut image = vec![0u8; SEGMENT_HEADER_BYTES as usize];
    image[32..40].copy_from_slice(&scan[..8]);
    image.extend_from_slice(&scan[8..]);
    assert_eq!(scan_image(&image).records.len(), 3);
    seeds.push(("scan", "records", scan));

    if std::env::var_os("NVDEPOT_WRITE_FUZZ_SEEDS").is_some() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
        for (target, name, bytes) in seeds {
            let dir = root.join(target);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
}
