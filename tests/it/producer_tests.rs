//! The producer against real brokers: every `acks` and compression, read back with raw Fetch
//! requests; keys land where Java's partitioner puts them; batches go out at `batch.size`;
//! retries across dropped connections and a killed leader lose nothing acknowledged; old
//! brokers (through the version-capping proxy) get legacy message sets.

use crate::support::broker;
use crate::support::proxy::{self, Proxy};
use crate::support::{create_topic, unique_name};
use bytes::Bytes;
use kafka_group::unstable::key_partition;
use kafka_group::unstable::protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_group::unstable::protocol::messages::{FetchRequest, FetchResponse};
use kafka_group::unstable::records::{self, Compression, Record};
use kafka_group::unstable::RawClient;
use kafka_group::ApiKey;
use kafka_group::{Acks, ProducerRecord};
use kafka_group::{Client, Error, KafkaCode};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A client that fetches by topic name: Fetch v13+ names topics by id, which these checks have
/// no use for.
fn client(bootstrap: &str) -> Client {
    Client::builder()
        .bootstrap_servers(bootstrap)
        .client_id("producer-tests")
        .max_api_version(ApiKey::Fetch, 12)
        .build()
        .unwrap()
}

fn topic(client: &Client, partitions: i32, replication: i16) -> String {
    create_topic(client, "prod", partitions, replication)
}

/// Every record of `topic`-`partition` up to the high watermark, read with raw Fetch requests
/// from the partition's current leader.
fn fetch_all(client: &Client, topic: &str, partition: i32) -> Vec<Record> {
    let meta = client.refresh_metadata(Some(&[topic])).unwrap();
    let leader = meta.topics[topic].partitions[partition as usize].leader;
    let mut offset = 0;
    let mut out = Vec::new();
    loop {
        let resp: FetchResponse = client
            .send_to(leader, |version| FetchRequest {
                max_wait_ms: 0,
                // Only v3+ has a response-wide limit; the per-partition one bounds v0-v2.
                max_bytes: if version >= 3 { 8 << 20 } else { i32::MAX },
                topics: vec![FetchTopic {
                    topic: topic.into(),
                    partitions: vec![FetchPartition {
                        partition,
                        fetch_offset: offset,
                        partition_max_bytes: 4 << 20,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            })
            .unwrap();
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch {topic}-{partition} at {offset}");
        let bytes = p.records.clone().unwrap_or_default();
        let decoded = records::decode(&bytes, &Default::default()).unwrap();
        out.extend(decoded.records.into_iter().filter(|r| r.offset >= offset));
        match decoded.next_offset {
            Some(next) if next > offset && next < p.high_watermark => offset = next,
            _ => return out,
        }
    }
}

/// Every record of every partition, by partition.
fn fetch_topic(client: &Client, topic: &str, partitions: i32) -> BTreeMap<i32, Vec<Record>> {
    (0..partitions)
        .map(|p| (p, fetch_all(client, topic, p)))
        .collect()
}

/// Fetches until `count` records are there (acks=0 gives no sign of when they are written).
fn fetch_until(client: &Client, topic: &str, partitions: i32, count: usize) -> BTreeMap<i32, Vec<Record>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = fetch_topic(client, topic, partitions);
        let n: usize = got.values().map(Vec::len).sum();
        if n >= count || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn text(b: &Option<Bytes>) -> String {
    String::from_utf8(b.as_deref().unwrap_or_default().to_vec()).unwrap()
}

#[test]
fn every_acks_and_compression_round_trips() {
    const PARTITIONS: i32 = 3;
    const WARM_UP: &str = "warm-up";
    const PER_RUN: usize = 300;
    let client = client(broker::shared().bootstrap());
    let compressions = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    for acks in [Acks::All, Acks::Leader, Acks::None] {
        let topic = topic(&client, PARTITIONS, 1);
        // A just-created partition may not take writes for a moment. acks=1 and all retry the
        // NOT_LEADER_OR_FOLLOWER they get; with acks=0 the broker can only drop the records
        // and close the connection. So one acknowledged record to each partition first.
        let mut warm_up = client.producer().build().unwrap();
        for p in 0..PARTITIONS {
            warm_up
                .send(ProducerRecord::new(&topic, WARM_UP).partition(p))
                .unwrap();
        }
        warm_up.close().unwrap();
        let mut expected = BTreeSet::new();
        let mut offsets = Vec::new();
        for compression in compressions {
            let mut producer = client
                .producer()
                .acks(acks)
                .compression(compression)
                .build()
                .unwrap();
            for i in 0..PER_RUN {
                let value = format!("{acks}-{compression:?}-{i}");
                producer
                    .send(
                        ProducerRecord::new(&topic, value.clone())
                            .key(format!("key-{}", i % 37))
                            .header("n", i.to_string()),
                    )
                    .unwrap();
                expected.insert(value);
            }
            let acked = producer.flush().unwrap();
            assert_eq!(producer.pending(), 0);
            if acks == Acks::None {
                assert!(acked.is_empty(), "acks=0 learns no offsets: {acked:?}");
            } else {
                // 300 small records fit one batch per partition.
                assert_eq!(acked.len(), PARTITIONS as usize, "{compression:?}: {acked:?}");
            }
            offsets.extend(acked);
            producer.close().unwrap();
        }
        let got = fetch_until(&client, &topic, PARTITIONS, expected.len() + PARTITIONS as usize);
        let mut values = BTreeSet::new();
        let mut key_home: BTreeMap<String, i32> = BTreeMap::new();
        for (&p, recs) in &got {
            for r in recs.iter().filter(|r| text(&r.value) != WARM_UP) {
                let key = text(&r.key);
                // Java's partitioner would have put it here too.
                assert_eq!(key_partition(key.as_bytes(), PARTITIONS), p, "{key}");
                assert_eq!(*key_home.entry(key).or_insert(p), p);
                let value = text(&r.value);
                let n = value.rsplit('-').next().unwrap().to_string();
                assert_eq!(r.headers, vec![("n".to_string(), Some(Bytes::from(n)))]);
                assert!(values.insert(value), "duplicate at {p}@{}", r.offset);
            }
        }
        let missing: Vec<&String> = expected.difference(&values).collect();
        assert!(
            missing.is_empty(),
            "acks={acks}: {} missing: {missing:?}",
            missing.len()
        );
        assert_eq!(key_home.len(), 37);
        // Each acknowledged base offset starts a batch of that run.
        for (tp, base) in offsets {
            let recs = &got[&tp.partition];
            assert!(recs.iter().any(|r| r.offset == base), "{tp:?} {base}");
        }
    }
}

#[test]
fn full_batches_go_out_during_send_and_keyless_records_spread() {
    const PARTITIONS: i32 = 4;
    let client = client(broker::shared().bootstrap());
    let topic = topic(&client, PARTITIONS, 1);
    let mut producer = client.producer().batch_size(2048).build().unwrap();
    let value = Bytes::from(vec![b'x'; 100]);
    for _ in 0..1000 {
        producer.send(ProducerRecord::new(&topic, value.clone())).unwrap();
    }
    // About 16 records fill a 2 KiB batch: all but the last few batches have already gone.
    assert!(producer.pending() < 100, "{} pending", producer.pending());
    let acked = producer.flush().unwrap();
    assert!(acked.len() > 50, "{} batches acknowledged", acked.len());
    let got = fetch_topic(&client, &topic, PARTITIONS);
    assert_eq!(got.values().map(Vec::len).sum::<usize>(), 1000);
    // Sticky partitioning moves on with each batch, so every partition gets some.
    assert!(
        got.values().all(|r| r.len() > 100),
        "{:?}",
        got.values().map(Vec::len).collect::<Vec<_>>()
    );
    // Offsets reported in acknowledgement order: strictly increasing per partition.
    let mut last: BTreeMap<i32, i64> = BTreeMap::new();
    for (tp, base) in acked {
        if let Some(prev) = last.insert(tp.partition, base) {
            assert!(base > prev, "{tp:?}: {base} after {prev}");
        }
    }
}

#[test]
fn linger_sends_without_a_flush() {
    let client = client(broker::shared().bootstrap());
    let topic = topic(&client, 1, 1);
    let mut producer = client
        .producer()
        .linger(Duration::from_millis(50))
        .build()
        .unwrap();
    producer.send(ProducerRecord::new(&topic, "first")).unwrap();
    assert_eq!(producer.pending(), 1);
    std::thread::sleep(Duration::from_millis(60));
    producer.send(ProducerRecord::new(&topic, "second")).unwrap();
    assert_eq!(
        producer.pending(),
        0,
        "the second send found a batch older than linger.ms"
    );
    assert_eq!(fetch_all(&client, &topic, 0).len(), 2);
}

#[test]
fn bad_topics_and_partitions_are_reported() {
    let client = client(broker::shared().bootstrap());
    let mut producer = client
        .producer()
        .max_block(Duration::from_millis(500))
        .build()
        .unwrap();
    let started = Instant::now();
    let missing = unique_name("no-such-topic");
    let e = producer.send(ProducerRecord::new(&missing, "v")).unwrap_err();
    assert_eq!(e.kafka_code(), Some(KafkaCode::UnknownTopicOrPartition), "{e}");
    assert!(e.to_string().contains(&missing), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    let topic = topic(&client, 2, 1);
    let e = producer
        .send(ProducerRecord::new(&topic, "v").partition(2))
        .unwrap_err();
    assert!(e.to_string().contains("partition 2 of topic"), "{e}");
    // The producer is still usable.
    producer
        .send(ProducerRecord::new(&topic, "v").partition(1))
        .unwrap();
    let acked = producer.flush().unwrap();
    assert_eq!(acked.len(), 1);
    assert_eq!(acked[0].0.partition, 1);
    producer.close().unwrap();
}

#[test]
fn dropped_connections_are_retried() {
    let upstream = proxy::upstream_for("kraft-4.0");
    let proxy = Proxy::start(upstream, "kraft-4.0");
    let client = client(&proxy.bootstrap());
    let topic = topic(&client, 2, 1);
    let mut producer = client.producer().build().unwrap();
    let mut sent = 0;
    for round in 0..5 {
        for i in 0..20 {
            producer
                .send(ProducerRecord::new(&topic, format!("{round}-{i}")).key(i.to_string()))
                .unwrap();
            sent += 1;
        }
        proxy.drop_connections();
        producer.flush().unwrap();
    }
    // Nothing is lost; a batch whose answer was lost may come twice (at least once).
    let direct = self::client(&upstream.to_string());
    let values: BTreeSet<String> = fetch_topic(&direct, &topic, 2)
        .values()
        .flatten()
        .map(|r| text(&r.value))
        .collect();
    assert_eq!(values.len(), sent);
}

#[test]
fn acknowledged_records_survive_a_leader_kill() {
    const PARTITIONS: i32 = 3;
    let cluster = broker::Cluster::start(3, broker::version_under_test());
    let client = client(cluster.bootstrap());
    let topic = topic(&client, PARTITIONS, 3);
    let victim = client.cached_metadata().topics[&topic].partitions[0].leader;
    let mut producer = client.producer().build().unwrap();

    // The kill happens from another thread while the producer keeps sending.
    let (go, kill_now) = mpsc::channel::<()>();
    let killer = std::thread::scope(|s| {
        let cluster = &cluster;
        let killer = s.spawn(move || {
            kill_now.recv().unwrap();
            cluster.kill(victim as usize);
            Instant::now()
        });
        let mut acked = BTreeSet::new();
        let mut longest = Duration::ZERO;
        for round in 0..30 {
            if round == 5 {
                go.send(()).unwrap();
            }
            let values: Vec<String> = (0..50).map(|i| format!("r{round}-{i}")).collect();
            for v in &values {
                producer
                    .send(ProducerRecord::new(&topic, v.clone()).key(v.clone()))
                    .unwrap();
            }
            let flushing = Instant::now();
            producer.flush().unwrap_or_else(|e| panic!("round {round}: {e}"));
            longest = longest.max(flushing.elapsed());
            acked.extend(values);
            std::thread::sleep(Duration::from_millis(100));
        }
        (killer.join().unwrap(), acked, longest)
    });
    let (killed_at, acked, longest) = killer;
    eprintln!(
        "leader {victim} killed {:?} before the last flush; longest flush {longest:?}",
        killed_at.elapsed()
    );
    let meta = client.refresh_metadata(Some(&[topic.as_str()])).unwrap();
    assert_ne!(meta.topics[&topic].partitions[0].leader, victim);
    let read: BTreeSet<String> = fetch_topic(&client, &topic, PARTITIONS)
        .values()
        .flatten()
        .map(|r| text(&r.value))
        .collect();
    let lost: Vec<&String> = acked.difference(&read).collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged records lost: {lost:?}",
        lost.len()
    );
    assert_eq!(read.len(), acked.len());
}

#[test]
fn pre_0_11_brokers_get_legacy_message_sets() {
    let proxy = Proxy::start(broker::shared_legacy(), "zk-0.10.0");
    let old = client(&proxy.bootstrap());
    // Topics are created on the real broker (CreateTopics came with 0.10.1).
    let direct = client(&broker::shared_legacy().to_string());
    let topic = topic(&direct, 2, 1);
    for compression in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
    ] {
        let mut producer = old.producer().compression(compression).build().unwrap();
        for i in 0..50 {
            producer
                .send(ProducerRecord::new(&topic, format!("{compression:?}-{i}")).key(format!("k{i}")))
                .unwrap();
        }
        let acked = producer.flush().unwrap();
        assert!(!acked.is_empty(), "{compression:?}");
    }
    let got = fetch_topic(&direct, &topic, 2);
    let mut n = 0;
    for (&p, recs) in &got {
        for r in recs {
            assert_eq!(key_partition(&r.key.clone().unwrap(), 2), p);
            n += 1;
        }
    }
    assert_eq!(n, 200);
    // Headers and zstd need a newer broker, and say which.
    let mut producer = old.producer().build().unwrap();
    producer
        .send(ProducerRecord::new(&topic, "v").header("h", "x"))
        .unwrap();
    match producer.flush() {
        Err(Error::MissingCapability { capability, .. }) => assert_eq!(capability, "record headers"),
        other => panic!("{other:?}"),
    }
    let mut producer = old.producer().compression(Compression::Zstd).build().unwrap();
    producer.send(ProducerRecord::new(&topic, "v")).unwrap();
    let e = producer.flush().unwrap_err();
    assert!(e.to_string().contains("zstd compression"), "{e}");
}
