//! Round trips, differential checks against `kafka-protocol`, truncation, corruption,
//! decompression bombs and random input for the records codecs.

use super::compression::{compress, xxh32};
use super::legacy::put_message;
use super::*;
use crate::protocol::hostile_tests::meter;
use std::io::Write;
use std::sync::OnceLock;

const ALL: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];
const LEGACY: [Compression; 4] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
];

fn b(s: &str) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(s.as_bytes()))
}

/// Records covering what the formats must carry: null and empty keys, tombstones, a large
/// compressible value, explicit timestamps and (for magic 2) headers with repeated keys and
/// null values.
fn sample(with_headers: bool) -> Vec<NewRecord> {
    let headers = |h: Vec<(&str, Option<Bytes>)>| -> Vec<(String, Option<Bytes>)> {
        if with_headers {
            h.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
        } else {
            Vec::new()
        }
    };
    vec![
        NewRecord {
            key: b("k0"),
            value: b("v0"),
            headers: headers(vec![("h", b("1")), ("h", b("2")), ("null", None), ("", b(""))]),
            timestamp: Some(1_700_000_000_000),
        },
        NewRecord {
            key: None,
            value: b("no key"),
            headers: headers(vec![("ünï", b("código"))]),
            timestamp: Some(1_700_000_000_005),
        },
        NewRecord {
            key: b("tombstone"),
            value: None,
            headers: Vec::new(),
            timestamp: Some(1_699_999_999_000),
        },
        NewRecord {
            key: b(""),
            value: Some(Bytes::from(vec![b'x'; 100_000])),
            headers: Vec::new(),
            timestamp: Some(1_700_000_000_010),
        },
        NewRecord {
            key: None,
            value: None,
            headers: Vec::new(),
            timestamp: Some(1_700_000_000_001),
        },
    ]
}

fn limits() -> DecodeLimits {
    DecodeLimits::default()
}

fn assert_matches(decoded: &Decoded, sent: &[NewRecord], first_offset: i64, timestamps: bool) {
    assert_eq!(decoded.records.len(), sent.len());
    for (i, (got, want)) in decoded.records.iter().zip(sent).enumerate() {
        assert_eq!(got.offset, first_offset + i as i64);
        assert_eq!(got.key, want.key, "key {i}");
        assert_eq!(got.value, want.value, "value {i}");
        assert_eq!(got.headers, want.headers, "headers {i}");
        let ts = if timestamps { want.timestamp.unwrap() } else { -1 };
        assert_eq!(got.timestamp, ts, "timestamp {i}");
    }
}

fn fix_v2_crc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

fn fix_legacy_crc(msg: &mut [u8]) {
    let crc = crc32fast::hash(&msg[16..]);
    msg[12..16].copy_from_slice(&crc.to_be_bytes());
}

fn concat(parts: &[&[u8]]) -> Bytes {
    Bytes::from(parts.concat())
}

/// xorshift64*: deterministic, dependency-free randomness for the robustness loops.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[test]
fn v2_round_trips_with_every_codec() {
    let sent = sample(true);
    for c in ALL {
        let batch = encode(&sent, c, 2).unwrap();
        assert_eq!(batch[16], 2);
        assert_eq!(i16::from_be_bytes([batch[21], batch[22]]) & 7, c.code() as i16);
        let d = decode(&batch, &limits()).unwrap();
        assert_matches(&d, &sent, 0, true);
        assert_eq!(d.next_offset, Some(sent.len() as i64), "{c:?}");
        assert!(d.transactional().is_empty() && d.control.is_empty());
    }
    assert!(encode(&[], Compression::Gzip, 2).unwrap().is_empty());
    assert_eq!(decode(&Bytes::new(), &limits()).unwrap(), Decoded::default());
}

#[test]
fn v2_compression_shrinks_the_batch() {
    let sent = sample(true);
    let plain = encode(&sent, Compression::None, 2).unwrap().len();
    for c in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let n = encode(&sent, c, 2).unwrap().len();
        assert!(n * 5 < plain, "{c:?}: {n} of {plain}");
    }
}

/// kafka-protocol's record batch codec is the reference: what it writes we read, and what we
/// write it reads, with every codec. (Its headers are a map, so no repeated keys here.)
#[test]
fn v2_agrees_with_kafka_protocol() {
    use kafka_protocol::protocol::StrBytes;
    use kafka_protocol::records as kp;
    let mut sent = sample(true);
    sent[0].headers.remove(1);
    let kp_codec = |c: Compression| match c {
        Compression::None => kp::Compression::None,
        Compression::Gzip => kp::Compression::Gzip,
        Compression::Snappy => kp::Compression::Snappy,
        Compression::Lz4 => kp::Compression::Lz4,
        Compression::Zstd => kp::Compression::Zstd,
    };
    let theirs: Vec<kp::Record> = sent
        .iter()
        .enumerate()
        .map(|(i, r)| kp::Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: kp::TimestampType::Creation,
            offset: 40 + i as i64,
            sequence: -1,
            timestamp: r.timestamp.unwrap(),
            key: r.key.clone(),
            value: r.value.clone(),
            headers: r
                .headers
                .iter()
                .map(|(k, v)| (StrBytes::from_string(k.clone()), v.clone()))
                .collect(),
        })
        .collect();
    for c in ALL {
        let mut buf = bytes::BytesMut::new();
        let options = kp::RecordEncodeOptions {
            version: 2,
            compression: kp_codec(c),
        };
        kp::RecordBatchEncoder::encode(&mut buf, &theirs, &options).unwrap();
        let d = decode(&buf.freeze(), &limits()).unwrap();
        assert_matches(&d, &sent, 40, true);
        assert_eq!(d.next_offset, Some(40 + sent.len() as i64));

        let mut ours = encode(&sent, c, 2).unwrap();
        let set = kp::RecordBatchDecoder::decode(&mut ours).unwrap();
        assert_eq!(set.compression, kp_codec(c));
        assert_eq!(set.records.len(), sent.len());
        for (i, (got, want)) in set.records.iter().zip(&sent).enumerate() {
            assert_eq!(got.offset, i as i64);
            assert_eq!(got.timestamp, want.timestamp.unwrap());
            assert_eq!((&got.key, &got.value), (&want.key, &want.value));
            let headers: Vec<(String, Option<Bytes>)> = got
                .headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect();
            assert_eq!(headers, want.headers);
        }
    }
}

/// An idempotent batch (KIP-98) carries its producer id, epoch and base sequence under the
/// CRC, and both decoders read them back.
#[test]
fn v2_carries_the_producer_id_epoch_and_sequence() {
    let sent = sample(true);
    let who = BatchProducer {
        id: 4_000_000_123,
        epoch: 7,
        base_sequence: 42,
        transactional: false,
    };
    for c in ALL {
        let batch = encode_with(&sent, c, 2, &who).unwrap();
        let d = decode(&batch, &limits()).unwrap();
        assert_matches(&d, &sent, 0, true);
        let info = d.batches[0];
        assert_eq!(
            (info.producer_id, info.producer_epoch, info.base_sequence),
            (who.id, who.epoch, who.base_sequence),
            "{c:?}"
        );
        // Not transactional: an idempotent batch is returned to read_committed consumers too.
        assert!(!info.transactional && d.transactional().is_empty());
    }
    let plain = decode(&encode(&sent, Compression::None, 2).unwrap(), &limits()).unwrap();
    let info = plain.batches[0];
    assert_eq!(
        (info.producer_id, info.producer_epoch, info.base_sequence),
        (-1, -1, -1)
    );
}

#[test]
fn producer_values_that_a_broker_would_reject_are_refused() {
    let sent = sample(false);
    let bad = [
        BatchProducer {
            id: 1,
            epoch: -1,
            base_sequence: 0,
            transactional: false,
        },
        BatchProducer {
            id: 1,
            epoch: 0,
            base_sequence: -1,
            transactional: false,
        },
        BatchProducer {
            id: -1,
            epoch: 0,
            base_sequence: 0,
            transactional: false,
        },
    ];
    for p in bad {
        assert!(matches!(
            encode_with(&sent, Compression::None, 2, &p),
            Err(RecordsError::Unsupported(_))
        ));
    }
    let who = BatchProducer {
        id: 1,
        epoch: 0,
        base_sequence: 0,
        transactional: false,
    };
    for magic in [0, 1] {
        let e = encode_with(&sent, Compression::None, magic, &who).unwrap_err();
        assert!(e.to_string().contains("Produce v3+"), "{e}");
        assert!(encode_with(&sent, Compression::None, magic, &BatchProducer::NONE).is_ok());
    }
}

/// After an epoch bump a batch is resent with new values: only the header changes, the CRC is
/// valid again, and the records (compressed ones too) are the same bytes.
#[test]
fn restamp_rewrites_the_header_only() {
    let sent = sample(true);
    let first = BatchProducer {
        id: 9,
        epoch: 0,
        base_sequence: 100,
        transactional: false,
    };
    let bumped = BatchProducer {
        id: 9,
        epoch: 1,
        base_sequence: 0,
        transactional: false,
    };
    for c in ALL {
        let batch = encode_with(&sent, c, 2, &first).unwrap();
        let again = restamp(&batch, &bumped).unwrap();
        assert_eq!(again.len(), batch.len());
        assert_eq!(&again[..17], &batch[..17], "{c:?}");
        assert_eq!(&again[21..43], &batch[21..43], "{c:?}");
        assert_eq!(&again[57..], &batch[57..], "{c:?}");
        let d = decode(&again, &limits()).unwrap();
        assert_matches(&d, &sent, 0, true);
        let info = d.batches[0];
        assert_eq!(
            (info.producer_id, info.producer_epoch, info.base_sequence),
            (9, 1, 0)
        );
    }
    let batch = encode_with(&sent, Compression::None, 2, &first).unwrap();
    let mut damaged = batch.to_vec();
    damaged[70] ^= 1;
    assert!(matches!(
        restamp(&Bytes::from(damaged), &bumped),
        Err(RecordsError::Corrupt(_))
    ));
    let two = concat(&[&batch, &batch]);
    assert!(restamp(&two, &bumped).is_err());
    let legacy = encode(&sample(false), Compression::None, 1).unwrap();
    assert!(restamp(&legacy, &bumped).is_err());
    assert!(restamp(&batch.slice(..30), &bumped).is_err());
    assert!(restamp(&Bytes::new(), &bumped).unwrap().is_empty());
}

/// kafka-protocol reads the producer fields we write, and we read the ones it writes.
#[test]
fn v2_producer_fields_agree_with_kafka_protocol() {
    use kafka_protocol::records as kp;
    let sent = sample(false);
    let who = BatchProducer {
        id: 77,
        epoch: 3,
        base_sequence: 1_000,
        transactional: false,
    };
    for c in ALL {
        let mut ours = encode_with(&sent, c, 2, &who).unwrap();
        let set = kp::RecordBatchDecoder::decode(&mut ours).unwrap();
        assert_eq!(set.records.len(), sent.len());
        for (i, r) in set.records.iter().enumerate() {
            assert_eq!((r.producer_id, r.producer_epoch), (77, 3), "{c:?}");
            assert_eq!(r.sequence, 1_000 + i as i32, "{c:?}");
            assert!(!r.transactional);
        }
    }
    let theirs: Vec<kp::Record> = sent
        .iter()
        .enumerate()
        .map(|(i, r)| kp::Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: 77,
            producer_epoch: 3,
            timestamp_type: kp::TimestampType::Creation,
            offset: i as i64,
            sequence: 1_000 + i as i32,
            timestamp: r.timestamp.unwrap(),
            key: r.key.clone(),
            value: r.value.clone(),
            headers: Default::default(),
        })
        .collect();
    let mut buf = bytes::BytesMut::new();
    let options = kp::RecordEncodeOptions {
        version: 2,
        compression: kp::Compression::Lz4,
    };
    kp::RecordBatchEncoder::encode(&mut buf, &theirs, &options).unwrap();
    let d = decode(&buf.freeze(), &limits()).unwrap();
    let info = d.batches[0];
    assert_eq!(
        (info.producer_id, info.producer_epoch, info.base_sequence),
        (77, 3, 1_000)
    );
}

#[test]
fn v2_offsets_come_from_the_batch_header() {
    let sent = sample(false);
    let mut a = encode(&sent[..2], Compression::Gzip, 2).unwrap().to_vec();
    let mut b = encode(&sent[2..], Compression::None, 2).unwrap().to_vec();
    // The base offset is outside the CRC, as the broker rewrites it.
    a[..8].copy_from_slice(&100i64.to_be_bytes());
    b[..8].copy_from_slice(&102i64.to_be_bytes());
    let d = decode(&concat(&[&a, &b]), &limits()).unwrap();
    assert_matches(&d, &sent, 100, true);
    assert_eq!(d.next_offset, Some(105));

    // Compaction removed the last records of a batch (and all of another): the next fetch
    // still starts after the batch.
    b[23..27].copy_from_slice(&9i32.to_be_bytes());
    fix_v2_crc(&mut b);
    let empty = v2_around(&[], |empty| {
        empty[..8].copy_from_slice(&112i64.to_be_bytes());
        empty[23..27].copy_from_slice(&4i32.to_be_bytes());
        empty[57..61].copy_from_slice(&0i32.to_be_bytes());
    });
    let d = decode(&concat(&[&a, &b, &empty]), &limits()).unwrap();
    assert_eq!(d.records.len(), 5);
    assert_eq!(d.next_offset, Some(117));
}

#[test]
fn v2_log_append_time_stamps_every_record() {
    let sent = sample(false);
    let mut batch = encode(&sent, Compression::Lz4, 2).unwrap().to_vec();
    batch[22] |= 0x08;
    batch[35..43].copy_from_slice(&1_800_000_000_000i64.to_be_bytes());
    fix_v2_crc(&mut batch);
    let d = decode(&Bytes::from(batch), &limits()).unwrap();
    assert!(d.records.iter().all(|r| r.timestamp == 1_800_000_000_000));
}

/// A data batch of producer 7's transaction, then its commit marker.
#[test]
fn v2_transactions_and_control_batches_are_reported_not_returned() {
    let sent = sample(false);
    let mut data = encode(&sent[..3], Compression::Snappy, 2).unwrap().to_vec();
    data[..8].copy_from_slice(&10i64.to_be_bytes());
    data[22] |= 0x10;
    data[43..51].copy_from_slice(&7i64.to_be_bytes());
    fix_v2_crc(&mut data);
    let marker = |commit: bool, offset: i64| {
        let kind = [0, 0, 0, commit as u8];
        let r = NewRecord {
            key: Some(Bytes::copy_from_slice(&kind)),
            value: Some(Bytes::from_static(&[0, 0, 0, 0, 0, 0])),
            ..NewRecord::default()
        };
        let mut m = encode(&[r], Compression::None, 2).unwrap().to_vec();
        m[..8].copy_from_slice(&offset.to_be_bytes());
        m[22] |= 0x30;
        m[43..51].copy_from_slice(&7i64.to_be_bytes());
        fix_v2_crc(&mut m);
        m
    };
    let d = decode(
        &concat(&[&data, &marker(true, 13), &marker(false, 14)]),
        &limits(),
    )
    .unwrap();
    assert_eq!(d.records.len(), 3);
    assert_eq!(d.transactional(), vec![(7, 10, 12)]);
    assert_eq!(d.control, vec![(7, 13, true), (7, 14, false)]);
    assert_eq!(d.next_offset, Some(15));
}

#[test]
fn legacy_round_trips_with_every_codec() {
    let sent = sample(false);
    for magic in [0i8, 1] {
        for c in LEGACY {
            let set = encode(&sent, c, magic).unwrap();
            assert_eq!(set[16], magic as u8);
            let d = decode(&set, &limits()).unwrap();
            assert_matches(&d, &sent, 0, magic == 1);
            assert_eq!(d.next_offset, Some(sent.len() as i64), "magic {magic} {c:?}");
            if c != Compression::None {
                // One wrapper message holding them all, at the last inner offset.
                let size = i32::from_be_bytes([set[8], set[9], set[10], set[11]]);
                assert_eq!(set.len(), 12 + size as usize);
                assert_eq!(&set[..8], &(sent.len() as i64 - 1).to_be_bytes());
                assert_eq!(set[17], c.code() as u8);
            }
        }
    }
}

#[test]
fn legacy_refuses_what_it_cannot_carry() {
    let with_headers = sample(true);
    for magic in [0, 1] {
        for c in LEGACY {
            assert!(matches!(
                encode(&with_headers, c, magic),
                Err(RecordsError::Unsupported(_))
            ));
        }
        let plain = sample(false);
        assert!(matches!(
            encode(&plain, Compression::Zstd, magic),
            Err(RecordsError::Unsupported(_))
        ));
    }
    assert!(matches!(
        encode(&[], Compression::None, 3),
        Err(RecordsError::Unsupported(_))
    ));
}

/// Magic 1 inner offsets are relative to the wrapper's (which is the last one's), magic 0 inner
/// offsets are absolute; a LogAppendTime wrapper stamps its messages.
#[test]
fn legacy_wrapper_offsets_and_timestamps() {
    let sent = sample(false);
    for c in [Compression::Gzip, Compression::Snappy, Compression::Lz4] {
        let mut set = encode(&sent, c, 1).unwrap().to_vec();
        set[..8].copy_from_slice(&1004i64.to_be_bytes());
        let plain = encode(&sent[..1], Compression::None, 1).unwrap();
        let d = decode(&concat(&[&plain, &set]), &limits()).unwrap();
        assert_eq!(d.records[0].offset, 0);
        assert_matches(
            &Decoded {
                records: d.records[1..].to_vec(),
                ..Decoded::default()
            },
            &sent,
            1000,
            true,
        );
        assert_eq!(d.next_offset, Some(1005));

        set[17] |= 0x08;
        set[18..26].copy_from_slice(&1_800_000_000_000i64.to_be_bytes());
        fix_legacy_crc(&mut set);
        let d = decode(&Bytes::from(set), &limits()).unwrap();
        assert!(
            d.records.iter().all(|r| r.timestamp == 1_800_000_000_000),
            "{c:?}"
        );

        // Magic 0, as a broker stores it: inner offsets 500.., wrapper at the last one.
        let mut inner = Vec::new();
        for (i, r) in sent.iter().enumerate() {
            put_message(
                &mut inner,
                500 + i as i64,
                0,
                0,
                -1,
                r.key.as_deref(),
                r.value.as_deref(),
            )
            .unwrap();
        }
        let mut wrapper = Vec::new();
        let value = compress(c, &inner, true).unwrap();
        put_message(&mut wrapper, 504, 0, c.code() as u8, -1, None, Some(&value)).unwrap();
        let d = decode(&Bytes::from(wrapper), &limits()).unwrap();
        assert_matches(&d, &sent, 500, false);
        assert_eq!(d.next_offset, Some(505));
    }
}

#[test]
fn legacy_wrapper_contents_are_checked() {
    let wrap = |inner: &[u8], magic: u8| {
        let value = compress(Compression::Gzip, inner, false).unwrap();
        let mut w = Vec::new();
        put_message(&mut w, 9, magic, 1, 0, None, Some(&value)).unwrap();
        Bytes::from(w)
    };
    let mut inner = Vec::new();
    put_message(&mut inner, 0, 1, 0, 5, None, Some(b"abc")).unwrap();
    assert!(decode(&wrap(&inner, 1), &limits()).is_ok());
    // A flipped bit inside: the wrapper's CRC is fine, the inner message's is not.
    let mut bad = inner.clone();
    *bad.last_mut().unwrap() ^= 1;
    assert!(matches!(
        decode(&wrap(&bad, 1), &limits()),
        Err(RecordsError::Corrupt(_))
    ));
    // Magic mismatch, nested compression, truncated inner set, null wrapper value.
    assert!(matches!(
        decode(&wrap(&inner, 0), &limits()),
        Err(RecordsError::Corrupt(_))
    ));
    let mut nested = Vec::new();
    put_message(&mut nested, 0, 1, 1, 5, None, Some(b"abc")).unwrap();
    assert!(matches!(
        decode(&wrap(&nested, 1), &limits()),
        Err(RecordsError::Corrupt(_))
    ));
    assert!(matches!(
        decode(&wrap(&inner[..inner.len() - 1], 1), &limits()),
        Err(RecordsError::Corrupt(_))
    ));
    let mut null = Vec::new();
    put_message(&mut null, 0, 1, 1, 5, None, None).unwrap();
    assert!(matches!(
        decode(&Bytes::from(null), &limits()),
        Err(RecordsError::Corrupt(_))
    ));
}

#[test]
fn magic_0_lz4_carries_the_pre_kafka_3160_header_checksum() {
    let data = vec![7u8; 1000];
    for (broken, magic) in [(false, 1), (true, 0)] {
        let frame = compress(Compression::Lz4, &data, broken).unwrap();
        assert_eq!(&frame[..4], &[0x04, 0x22, 0x4d, 0x18]);
        // No content size or dictionary: the descriptor is FLG and BD, then the checksum.
        assert_eq!(frame[4] & 0x09, 0);
        let correct = (xxh32(&frame[4..6], 0) >> 8) as u8;
        let kafka_3160 = (xxh32(&frame[..6], 0) >> 8) as u8;
        assert_ne!(correct, kafka_3160);
        assert_eq!(frame[6], if broken { kafka_3160 } else { correct });
        let set = encode(&[NewRecord::default()], Compression::Lz4, magic).unwrap();
        // The wrapper's value: after its header and the null key.
        let v = if magic == 0 { 26 } else { 34 };
        assert_eq!(&set[v..v + 4], &frame[..4]);
        let from = if broken { v } else { v + 4 };
        assert_eq!(
            set[v + 6],
            (xxh32(&set[from..v + 6], 0) >> 8) as u8,
            "magic {magic}"
        );
        assert_eq!(decode(&set, &limits()).unwrap().records.len(), 1);
    }
}

#[test]
fn xxh32_matches_reference_vectors() {
    assert_eq!(xxh32(b"", 0), 0x02CC_5D05);
    assert_eq!(xxh32(b"a", 0), 0x550D_7456);
    assert_eq!(xxh32(b"abc", 0), 0x32D1_53FF);
    assert_eq!(xxh32(b"Nobody inspects the spammish repetition", 0), 0xE229_3B2F);
}

/// Every prefix of a response: complete batches decode, the cut one is skipped, nothing fails.
#[test]
fn a_partial_trailing_batch_is_skipped() {
    let sent = sample(false);
    let cases = [
        (2, Compression::None),
        (2, Compression::Zstd),
        (1, Compression::None),
        (1, Compression::Gzip),
        (0, Compression::Snappy),
    ];
    for (magic, c) in cases {
        let first = encode(&sent[..1], c, magic).unwrap();
        // The big record, at offset 1.
        let mut second = encode(&sent[3..4], c, magic).unwrap().to_vec();
        second[..8].copy_from_slice(&1i64.to_be_bytes());
        let all = concat(&[&first, &second]);
        assert_eq!(decode(&all, &limits()).unwrap().next_offset, Some(2));
        let dense = all.len().min(first.len() + 100);
        for cut in (0..dense).chain((dense..all.len()).step_by(997)) {
            let d = decode(&all.slice(..cut), &limits()).unwrap();
            if cut < first.len() {
                assert_eq!(d, Decoded::default(), "magic {magic} {c:?} cut at {cut}");
            } else {
                assert_matches(&d, &sent[..1], 0, magic > 0);
                assert_eq!(d.next_offset, Some(1));
            }
        }
    }
}

#[test]
fn corruption_is_reported() {
    let sent = sample(false);
    for (magic, c) in [
        (2, Compression::None),
        (2, Compression::Gzip),
        (1, Compression::None),
        (0, Compression::Lz4),
    ] {
        let good = encode(&sent, c, magic).unwrap().to_vec();
        for at in [20, 30, good.len() / 2, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 0x40;
            let e = decode(&Bytes::from(bad), &limits()).unwrap_err();
            assert!(
                matches!(e, RecordsError::Corrupt(ref m) if m.contains("CRC")),
                "{e}"
            );
        }
    }
    // A length no message can have, and an unknown magic.
    let mut short = encode(&sent[..1], Compression::None, 2).unwrap().to_vec();
    short[8..12].copy_from_slice(&13i32.to_be_bytes());
    assert!(matches!(
        decode(&Bytes::from(short.clone()), &limits()),
        Err(RecordsError::Corrupt(_))
    ));
    short[8..12].copy_from_slice(&(-1i32).to_be_bytes());
    assert!(matches!(
        decode(&Bytes::from(short), &limits()),
        Err(RecordsError::Corrupt(_))
    ));
    let mut magic = encode(&sent[..1], Compression::None, 2).unwrap().to_vec();
    magic[16] = 3;
    assert!(matches!(
        decode(&Bytes::from(magic), &limits()),
        Err(RecordsError::Corrupt(_))
    ));
}

/// A v2 batch header (of one empty record) around `records`, taken as they are, with its length
/// set; `edit` then changes header fields before the CRC is made correct.
fn v2_around(records: &[u8], edit: impl FnOnce(&mut [u8])) -> Bytes {
    let mut batch = encode(&[NewRecord::default()], Compression::None, 2)
        .unwrap()
        .to_vec();
    batch.truncate(v2::HEADER);
    batch.extend_from_slice(records);
    let len = batch.len() as i32 - 12;
    batch[8..12].copy_from_slice(&len.to_be_bytes());
    edit(&mut batch);
    fix_v2_crc(&mut batch);
    Bytes::from(batch)
}

/// A v2 batch around hand-written record bytes, with a correct CRC.
fn raw_v2(count: i32, base_timestamp: i64, records: &[u8]) -> Bytes {
    v2_around(records, |batch| {
        batch[27..35].copy_from_slice(&base_timestamp.to_be_bytes());
        batch[57..61].copy_from_slice(&count.to_be_bytes());
    })
}

/// One record: attributes, timestamp delta, offset delta, key "k", value "v", then `headers`
/// (count and headers, raw), behind its length.
fn raw_record(timestamp_delta: i64, offset_delta: i32, headers: &[u8]) -> Vec<u8> {
    use crate::protocol::wire::{put_varint, put_varlong};
    let mut body = vec![0];
    put_varlong(&mut body, timestamp_delta);
    put_varint(&mut body, offset_delta);
    body.extend_from_slice(&[2, b'k', 2, b'v']);
    body.extend_from_slice(headers);
    let mut r = Vec::new();
    put_varint(&mut r, body.len() as i32);
    r.extend_from_slice(&body);
    r
}

/// Counts that are absurd behind a correct CRC are rejected without reserving memory for what
/// they claim; extreme deltas wrap (as in Java) instead of panicking.
#[test]
fn hostile_counts_and_deltas_are_not_trusted() {
    let fine = raw_record(0, 0, &[2, 2, b'h', 2, b'x']);
    let d = decode(&raw_v2(1, 0, &fine), &limits()).unwrap();
    assert_eq!(d.records[0].headers, vec![("h".to_string(), b("x"))]);

    let cases = [
        ("record count", raw_v2(i32::MAX, 0, &fine)),
        (
            "header count",
            raw_v2(1, 0, &raw_record(0, 0, &[0xfe, 0xff, 0xff, 0xff, 0x0f])),
        ),
        ("negative header count", raw_v2(1, 0, &raw_record(0, 0, &[1]))),
        (
            "header key length",
            raw_v2(1, 0, &raw_record(0, 0, &[2, 0xfe, 0xff, 0xff, 0xff, 0x0f])),
        ),
        (
            "non-UTF-8 header key",
            raw_v2(1, 0, &raw_record(0, 0, &[2, 2, 0xff, 1])),
        ),
        (
            "bytes after the headers",
            raw_v2(1, 0, &raw_record(0, 0, &[0, 0])),
        ),
        (
            "bytes after the records",
            raw_v2(1, 0, &[&fine[..], &[0]].concat()),
        ),
    ];
    for (what, batch) in cases {
        let (r, peak) = meter::measure(|| decode(&batch, &limits()));
        assert!(matches!(r, Err(RecordsError::Corrupt(_))), "{what}: {r:?}");
        assert!(peak < 64 << 10, "{what}: {peak} bytes");
    }

    let extreme = raw_v2(1, i64::MAX, &raw_record(i64::MAX, i32::MAX, &[0]));
    let d = decode(&extreme, &limits()).unwrap();
    assert_eq!(d.records[0].timestamp, i64::MAX.wrapping_add(i64::MAX));
    assert_eq!(d.records[0].offset, i32::MAX as i64);
}

/// 100 MiB of zeros as a gzip stream of about 100 KiB.
fn gzip_bomb() -> &'static [u8] {
    static BOMB: OnceLock<Vec<u8>> = OnceLock::new();
    BOMB.get_or_init(|| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..100 {
            e.write_all(&zeros).unwrap();
        }
        e.finish().unwrap()
    })
}

/// A v2 batch whose records section is `body`, compressed with `c` (not checked to be records:
/// decompression must stop long before).
fn v2_with_body(c: Compression, body: &[u8]) -> Bytes {
    v2_around(body, |batch| batch[22] = c.code() as u8)
}

#[test]
fn decompression_bombs_stop_at_the_limit() {
    const MIB: usize = 1 << 20;
    let limits = DecodeLimits {
        max_decompressed: MIB,
    };
    let bomb = gzip_bomb();
    assert!(bomb.len() < 200 << 10, "{} bytes", bomb.len());

    let zeros = vec![0u8; MIB];
    let mut lz4 = lz4::EncoderBuilder::new().build(Vec::new()).unwrap();
    let mut zstd = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
    for _ in 0..100 {
        lz4.write_all(&zeros).unwrap();
        zstd.write_all(&zeros).unwrap();
    }
    let lz4 = lz4.finish().0;
    let zstd = zstd.finish().unwrap();
    // Snappy states each block's length up front: one claiming 100 MiB, then a real stream of
    // 2 MiB in 32 KiB blocks.
    let mut snappy_claim = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
    snappy_claim.extend_from_slice(&[0, 0, 0, 5, 0x80, 0x80, 0x80, 0x32, 0]);
    let snappy_real = compress(Compression::Snappy, &vec![0u8; 2 * MIB], false).unwrap();

    let mut cases = vec![
        ("v2 gzip", v2_with_body(Compression::Gzip, bomb)),
        ("v2 lz4", v2_with_body(Compression::Lz4, &lz4)),
        ("v2 zstd", v2_with_body(Compression::Zstd, &zstd)),
        (
            "v2 snappy claim",
            v2_with_body(Compression::Snappy, &snappy_claim),
        ),
        ("v2 snappy", v2_with_body(Compression::Snappy, &snappy_real)),
    ];
    for (magic, c, value) in [
        (1, Compression::Gzip, bomb),
        (0, Compression::Gzip, bomb),
        (1, Compression::Lz4, &lz4[..]),
    ] {
        let mut m = Vec::new();
        put_message(&mut m, 0, magic, c.code() as u8, 0, None, Some(value)).unwrap();
        cases.push(("legacy", Bytes::from(m)));
    }
    for (what, batch) in cases {
        let (r, peak) = meter::measure(|| decode(&batch, &limits));
        assert_eq!(r, Err(RecordsError::TooLarge { limit: MIB }), "{what}");
        // The limit, what vector growth adds on top, and the codec's own state.
        assert!(peak < 4 * MIB, "{what}: peak {peak} bytes");
    }
    // Right at the limit is fine.
    let exact = compress(Compression::Gzip, &zeros, false).unwrap();
    let mut m = Vec::new();
    put_message(&mut m, 0, 1, 1, 0, None, Some(&exact)).unwrap();
    let r = decode(&Bytes::from(m), &limits);
    assert!(matches!(r, Err(RecordsError::Corrupt(_))), "{r:?}"); // zeros are no messages
}

/// Random bytes, and valid batches with random damage behind a recomputed CRC (so that the
/// record parsers see it): never a panic, never a large allocation.
#[test]
fn random_input_never_panics() {
    let limits = DecodeLimits {
        max_decompressed: 1 << 20,
    };
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let sent = sample(false);
    let mut seeds = Vec::new();
    for c in ALL {
        seeds.push((2u8, encode(&sample(true)[..2], c, 2).unwrap().to_vec()));
        seeds.push((2u8, encode(&sent[..3], c, 2).unwrap().to_vec()));
    }
    for magic in [0i8, 1] {
        for c in LEGACY {
            seeds.push((magic as u8, encode(&sent[..3], c, magic).unwrap().to_vec()));
        }
    }
    let mut worst = 0;
    for i in 0..50_000 {
        let input = if i % 4 == 0 {
            let len = rng.below(300);
            (0..len).map(|_| rng.next() as u8).collect::<Vec<u8>>()
        } else {
            let (magic, seed) = &seeds[rng.below(seeds.len())];
            let mut m = seed.clone();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(m.len());
                m[at] = rng.next() as u8;
            }
            if rng.below(3) == 0 {
                m.truncate(rng.below(m.len() + 1));
            }
            if m.len() > 21 && m[16] == *magic {
                if *magic == 2 {
                    fix_v2_crc(&mut m);
                } else {
                    fix_legacy_crc(&mut m);
                }
            }
            m
        };
        let input = Bytes::from(input);
        let (_, peak) = meter::measure(|| decode(&input, &limits));
        worst = worst.max(peak);
    }
    assert!(worst < 8 << 20, "peak {worst} bytes");
}

#[test]
fn legacy_and_v2_batches_mix_in_one_response() {
    let sent = sample(false);
    let legacy = encode(&sent[..2], Compression::Gzip, 1).unwrap();
    let mut v2 = encode(&sent[2..], Compression::Zstd, 2).unwrap().to_vec();
    v2[..8].copy_from_slice(&2i64.to_be_bytes());
    let d = decode(&concat(&[&legacy, &v2]), &limits()).unwrap();
    assert_matches(&d, &sent, 0, true);
    assert_eq!(d.next_offset, Some(5));
}
