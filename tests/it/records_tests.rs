//! The records codecs against real brokers: batches we encode are accepted by Produce, and
//! what Fetch returns decodes to the same records. Through the `zk-0.10.0` proxy, Produce v2
//! carries magic 1 message sets (the Kafka 3.9 broker behind it converts them up), and Fetch
//! v0–v2 makes that broker down-convert to magic 0 and 1: real legacy message sets, compressed
//! wrappers included, for the legacy decoder.

use crate::support::{self, broker, proxy::Proxy};
use kafka_group::unstable::protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_group::unstable::protocol::messages::FetchRequest;
use kafka_group::unstable::protocol::{ApiKey, Uuid};
use kafka_group::unstable::records::{self, Compression, DecodeLimits, Decoded, NewRecord};
use kafka_group::unstable::Connection;
use kafka_group::unstable::RawClient;
use kafka_group::{Client, KafkaCode};
use std::time::{SystemTime, UNIX_EPOCH};

fn client(bootstrap: &str) -> Client {
    Client::builder().bootstrap_servers(bootstrap).build().unwrap()
}

/// A new one-partition topic on the broker `admin` talks to: `(name, id, leader)`.
fn topic(admin: &Client, prefix: &str) -> (String, Uuid, i32) {
    let name = support::create_topic(admin, prefix, 1, 1);
    let md = admin.refresh_metadata(Some(&[name.as_str()])).unwrap();
    let t = &md.topics[&name];
    (name, t.id, t.partitions[0].leader)
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// Three records per batch, distinct across batches: a keyed one, an unkeyed one, a tombstone.
fn batch_records(n: usize, timestamp: i64, headers: bool) -> Vec<NewRecord> {
    let b = |s: String| Some(bytes::Bytes::from(s));
    vec![
        NewRecord {
            key: b(format!("key-{n}")),
            value: b(format!("value-{n}-").repeat(50)),
            headers: if headers {
                vec![("h".into(), b(format!("{n}"))), ("h".into(), None)]
            } else {
                Vec::new()
            },
            timestamp: Some(timestamp),
        },
        NewRecord {
            key: None,
            value: b(format!("unkeyed-{n}")),
            headers: Vec::new(),
            timestamp: Some(timestamp + 1),
        },
        NewRecord {
            key: b(format!("gone-{n}")),
            value: None,
            headers: Vec::new(),
            timestamp: Some(timestamp + 2),
        },
    ]
}

/// Produces `batch` to partition 0 of `topic` at the version negotiated with `leader`; returns
/// the version and the base offset the broker assigned.
fn produce(client: &Client, leader: i32, topic: &str, batch: bytes::Bytes) -> (i16, i64) {
    let (used, p) = support::raw_produce(client, leader, topic, batch);
    assert_eq!(
        KafkaCode::from_code(p.error_code),
        KafkaCode::None,
        "Produce v{used}: {p:?}"
    );
    (used, p.base_offset)
}

/// Fetches partition 0 of `topic` from `offset` at `version`; returns the raw records.
fn fetch(conn: &mut Connection, topic: &str, id: Uuid, offset: i64, max: i32, version: i16) -> bytes::Bytes {
    let partitions = vec![FetchPartition {
        partition: 0,
        fetch_offset: offset,
        partition_max_bytes: max,
        ..Default::default()
    }];
    let t = if version >= 13 {
        FetchTopic {
            topic_id: id,
            partitions,
            ..Default::default()
        }
    } else {
        FetchTopic {
            topic: topic.into(),
            partitions,
            ..Default::default()
        }
    };
    let req = FetchRequest {
        max_wait_ms: 500,
        min_bytes: 1,
        max_bytes: if version >= 3 { max } else { i32::MAX },
        topics: vec![t],
        ..Default::default()
    };
    let resp = conn.send_at(&req, version, None).unwrap();
    assert_eq!(resp.error_code, 0, "Fetch v{version}");
    let p = &resp.responses[0].partitions[0];
    assert_eq!(
        KafkaCode::from_code(p.error_code),
        KafkaCode::None,
        "Fetch v{version}: {p:?}"
    );
    p.records.clone().unwrap_or_default()
}

fn decode(bytes: &bytes::Bytes) -> Decoded {
    records::decode(bytes, &DecodeLimits::default()).unwrap()
}

/// Fetches everything up to `end` as a consumer does: from where the last fetch ended, skipping
/// the records of a batch that starts before the fetch offset. A down-converting broker may
/// cut its answer short of what it had (KIP-283: the converted data is larger than the stored),
/// leaving a partial message at the end, so one fetch is not enough.
fn fetch_all(conn: &mut Connection, topic: &str, id: Uuid, end: i64, version: i16) -> (Decoded, usize) {
    let mut all = Decoded::default();
    let mut fetches = 0;
    let mut offset = 0;
    while offset < end {
        let raw = fetch(conn, topic, id, offset, 4 << 20, version);
        fetches += 1;
        let d = decode(&raw);
        let next = d.next_offset.expect("a fetch returns at least one whole batch");
        assert!(next > offset, "Fetch v{version} from {offset} made no progress");
        all.records
            .extend(d.records.into_iter().filter(|r| r.offset >= offset));
        offset = next;
        all.next_offset = Some(next);
    }
    (all, fetches)
}

/// Checks `got` against `sent` (batches of three records from offset 0), `timestamps` giving
/// what each batch's records should carry (`None`: -1, none kept).
fn assert_records(got: &Decoded, sent: &[Vec<NewRecord>], timestamps: &[bool], headers: bool, what: &str) {
    let want: Vec<(&NewRecord, bool)> = sent
        .iter()
        .zip(timestamps)
        .flat_map(|(b, &t)| b.iter().map(move |r| (r, t)))
        .collect();
    assert_eq!(got.records.len(), want.len(), "{what}");
    for (i, (r, (w, ts))) in got.records.iter().zip(&want).enumerate() {
        assert_eq!(r.offset, i as i64, "{what}");
        assert_eq!((&r.key, &r.value), (&w.key, &w.value), "{what}: record {i}");
        let ts = if *ts { w.timestamp.unwrap() } else { -1 };
        assert_eq!(r.timestamp, ts, "{what}: record {i}");
        if headers {
            assert_eq!(r.headers, w.headers, "{what}: record {i}");
        }
    }
    assert_eq!(got.next_offset, Some(want.len() as i64), "{what}");
}

/// Magic 2 batches with each codec, produced and fetched at the versions the broker offers,
/// against the shared broker and Kafka 3.9.
#[test]
fn record_batches_round_trip_through_the_broker() {
    support::init_logs();
    let codecs = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    for bootstrap in [
        broker::shared().bootstrap().to_string(),
        broker::shared_legacy().to_string(),
    ] {
        let client = client(&bootstrap);
        let (name, id, leader) = topic(&client, "records-v2");
        let start = now_ms();
        let mut sent = Vec::new();
        for (n, &c) in codecs.iter().enumerate() {
            let recs = batch_records(n, start + 10 * n as i64, true);
            let (version, base) = produce(&client, leader, &name, records::encode(&recs, c, 2).unwrap());
            assert!(version >= 3, "{bootstrap}: Produce v{version}");
            assert_eq!(base, 3 * n as i64, "{bootstrap} {c:?}");
            sent.push(recs);
        }
        let mut conn = client.connect(&client.broker(leader).unwrap()).unwrap();
        let version = conn.version(ApiKey::Fetch).unwrap();
        let all = fetch(&mut conn, &name, id, 0, 4 << 20, version);
        let what = format!("{bootstrap} Fetch v{version}");
        assert_records(&decode(&all), &sent, &[true; 5], true, &what);

        // From the middle of the gzip batch: the broker returns it whole, offsets stay exact.
        let d = decode(&fetch(&mut conn, &name, id, 4, 4 << 20, version));
        assert_eq!(d.records[0].offset, 3, "{what}");
        assert_eq!(d.records[1].value, sent[1][1].value, "{what}");
        assert_eq!(d.next_offset, Some(15), "{what}");

        // A limit that cuts the second batch: only the first is returned, the rest next time.
        let first = i32::from_be_bytes([all[8], all[9], all[10], all[11]]) as usize + 12;
        let cut = fetch(&mut conn, &name, id, 0, first as i32 + 40, version);
        let d = decode(&cut);
        assert_records(
            &d,
            &sent[..1],
            &[true],
            true,
            &format!("{what}, cut at {}", cut.len()),
        );
    }
}

/// Magic 0 and 1 message sets with every legacy codec, produced through a proxy that makes the
/// Kafka 3.9 broker look like 0.10.0 (Produce v2), then fetched as the broker down-converts them:
/// magic 0 for Fetch v0/v1, magic 1 for v2, and as the magic 2 batches it stores.
#[test]
fn legacy_message_sets_round_trip_through_a_down_converting_broker() {
    support::init_logs();
    let direct = client(&broker::shared_legacy().to_string());
    let (name, id, leader) = topic(&direct, "records-legacy");
    let proxy = Proxy::start(broker::shared_legacy(), "zk-0.10.0");
    let old = client(&proxy.bootstrap());
    old.refresh_metadata(Some(&[name.as_str()])).unwrap();

    let start = now_ms();
    let mut sent = Vec::new();
    let mut has_timestamps = Vec::new();
    let sets = [
        (1, Compression::None),
        (1, Compression::Gzip),
        (1, Compression::Snappy),
        (1, Compression::Lz4),
        (0, Compression::None),
        (0, Compression::Gzip),
        (0, Compression::Snappy),
        (0, Compression::Lz4),
    ];
    for (n, &(magic, c)) in sets.iter().enumerate() {
        let recs = batch_records(n, start + 10 * n as i64, false);
        let set = records::encode(&recs, c, magic).unwrap();
        let (version, base) = produce(&old, leader, &name, set);
        assert_eq!(version, 2, "Produce through the zk-0.10.0 proxy");
        assert_eq!(base, 3 * n as i64, "magic {magic} {c:?}");
        sent.push(recs);
        has_timestamps.push(magic == 1);
    }

    let mut conn = old.connect(&old.broker(leader).unwrap()).unwrap();
    assert_eq!(conn.version(ApiKey::Fetch).unwrap(), 2);
    for version in 0..=2 {
        let raw = fetch(&mut conn, &name, id, 0, 4 << 20, version);
        let magic = if version == 2 { 1 } else { 0 };
        assert_eq!(raw[16], magic, "Fetch v{version}");
        let timestamps: Vec<bool> = has_timestamps.iter().map(|&t| t && magic == 1).collect();
        let (all, fetches) = fetch_all(&mut conn, &name, id, 24, version);
        log::info!("Fetch v{version}: 24 records in {fetches} fetches");
        assert_records(&all, &sent, &timestamps, false, &format!("Fetch v{version}"));

        // From inside a compressed wrapper (offsets 3-5, gzip): it comes whole.
        let d = decode(&fetch(&mut conn, &name, id, 4, 4 << 20, version));
        assert_eq!(d.records[0].offset, 3, "Fetch v{version}");
        assert_eq!(d.records[1].value, sent[1][1].value, "Fetch v{version}");
        // Past the wrapper at least; down-conversion may cut the answer short (see `fetch_all`).
        assert!(
            d.next_offset.is_some_and(|n| n >= 6),
            "Fetch v{version}: {:?}",
            d.next_offset
        );
    }

    // What the broker stored: magic 2 batches, converted from the message sets.
    let mut conn = direct.connect(&direct.broker(leader).unwrap()).unwrap();
    let version = conn.version(ApiKey::Fetch).unwrap();
    let raw = fetch(&mut conn, &name, id, 0, 4 << 20, version);
    assert_eq!(raw[16], 2);
    assert_records(
        &decode(&raw),
        &sent,
        &has_timestamps,
        false,
        &format!("direct Fetch v{version}"),
    );
}
