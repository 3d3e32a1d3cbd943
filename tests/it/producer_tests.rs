//! The producer against real brokers: every `acks` and compression, read back with raw Fetch
//! requests; keys land where Java's partitioner puts them; batches go out at `batch.size`;
//! retries across dropped connections and a killed leader lose nothing acknowledged; old
//! brokers (through the version-capping proxy) get legacy message sets; each record's
//! delivery handle names the partition and offset it was read back at, or its own error.

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
use kafka_group::{Acks, DeliveryHandle, NewTopic, ProducerRecord};
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
    fetch_all_with_batches(client, topic, partition).0
}

/// [`fetch_all`], with the header of every batch the records came in.
fn fetch_all_with_batches(
    client: &Client,
    topic: &str,
    partition: i32,
) -> (Vec<Record>, Vec<records::BatchInfo>) {
    let meta = client.refresh_metadata(Some(&[topic])).unwrap();
    let leader = meta.topics[topic].partitions[partition as usize].leader;
    let mut offset = 0;
    let mut out = Vec::new();
    let mut batches = Vec::new();
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
        batches.extend(decoded.batches.into_iter().filter(|b| b.base_offset >= offset));
        match decoded.next_offset {
            Some(next) if next > offset && next < p.high_watermark => offset = next,
            _ => return (out, batches),
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
        // Where each record's handle says it was written, with its value.
        let mut written: Vec<(i32, i64, String)> = Vec::new();
        for compression in compressions {
            let mut producer = client
                .producer()
                .acks(acks)
                .compression(compression)
                .build()
                .unwrap();
            let mut handles = Vec::new();
            for i in 0..PER_RUN {
                let value = format!("{acks}-{compression:?}-{i}");
                let key = format!("key-{}", i % 37);
                let handle = producer
                    .send(
                        ProducerRecord::new(&topic, value.clone())
                            .key(key.clone())
                            .header("n", i.to_string()),
                    )
                    .unwrap();
                assert_eq!(
                    handle.topic_partition().partition,
                    key_partition(key.as_bytes(), PARTITIONS)
                );
                handles.push((handle, value.clone()));
                expected.insert(value);
            }
            producer.flush().unwrap();
            assert_eq!(producer.pending(), 0);
            for (handle, value) in handles {
                let m = handle
                    .try_result()
                    .expect("every record has its result after flush")
                    .unwrap_or_else(|e| panic!("{value}: {e}"));
                assert_eq!(m.topic, topic);
                assert!(!m.log_append_time, "the topic uses CreateTime");
                match (acks, m.offset) {
                    (Acks::None, None) => {}
                    (Acks::None, Some(o)) => panic!("acks=0 learns no offsets: {value} at {o}"),
                    (_, Some(o)) => written.push((m.partition, o, value)),
                    (_, None) => panic!("{value}: acknowledged without an offset"),
                }
            }
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
        // Each handle names the partition and offset its record is read back at.
        if acks != Acks::None {
            assert_eq!(written.len(), expected.len());
        }
        for (partition, offset, value) in written {
            let found = got[&partition].iter().find(|r| r.offset == offset);
            assert_eq!(
                found.map(|r| text(&r.value)),
                Some(value.clone()),
                "{value}: handle says {partition}@{offset}"
            );
        }
    }
}

#[test]
fn full_batches_go_out_without_waiting_for_linger_and_keyless_records_spread() {
    const PARTITIONS: i32 = 4;
    let client = client(broker::shared().bootstrap());
    let topic = topic(&client, PARTITIONS, 1);
    // A linger longer than the test: only full batches go before the flush.
    let mut producer = client
        .producer()
        .batch_size(2048)
        .linger(Duration::from_secs(3600))
        .delivery_timeout(Duration::from_secs(7200))
        .build()
        .unwrap();
    let value = Bytes::from(vec![b'x'; 100]);
    let mut handles = Vec::new();
    for _ in 0..1000 {
        handles.push(producer.send(ProducerRecord::new(&topic, value.clone())).unwrap());
    }
    // About 16 records fill a 2 KiB batch: all but the last batch have gone, in the
    // background, and are acknowledged without a flush.
    let deadline = Instant::now() + Duration::from_secs(30);
    while producer.pending() >= 100 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(producer.pending() < 100, "{} pending", producer.pending());
    let early = handles.iter().filter(|h| h.is_done()).count();
    assert!(early > 900, "only {early} results before flush");
    // The open batch waits for linger.ms (an hour) or the flush.
    assert!(!handles[999].is_done(), "the last record's batch is not full");
    producer.flush().unwrap();
    assert!(handles[999].is_done());
    let got = fetch_topic(&client, &topic, PARTITIONS);
    assert_eq!(got.values().map(Vec::len).sum::<usize>(), 1000);
    // Sticky partitioning moves on with each batch, so every partition gets some.
    assert!(
        got.values().all(|r| r.len() > 100),
        "{:?}",
        got.values().map(Vec::len).collect::<Vec<_>>()
    );
    // The handles name exactly the records read back, and a partition's records (in the order
    // sent) have increasing offsets.
    let mut last: BTreeMap<i32, i64> = BTreeMap::new();
    let mut named = BTreeSet::new();
    for h in &handles {
        let m = h.try_result().unwrap().unwrap();
        let offset = m.offset.unwrap();
        if let Some(prev) = last.insert(m.partition, offset) {
            assert!(offset > prev, "{m:?} after {prev}");
        }
        assert!(named.insert((m.partition, offset)), "{m:?} twice");
    }
    let read: BTreeSet<(i32, i64)> = got
        .iter()
        .flat_map(|(p, recs)| recs.iter().map(move |r| (*p, r.offset)))
        .collect();
    assert_eq!(named, read);
}

#[test]
fn linger_sends_without_a_flush() {
    let client = client(broker::shared().bootstrap());
    let topic = topic(&client, 1, 1);
    // The default linger.ms (5 ms): nothing but the send is called.
    let mut producer = client.producer().build().unwrap();
    let first = producer.send(ProducerRecord::new(&topic, "first")).unwrap();
    let written = first
        .wait_timeout(Duration::from_secs(30))
        .expect("acknowledged without a flush")
        .unwrap();
    assert_eq!(written.offset, Some(0));
    assert_eq!(producer.pending(), 0);
    // A longer linger holds the record that long, and no longer.
    let mut lingering = client
        .producer()
        .linger(Duration::from_millis(300))
        .build()
        .unwrap();
    let sent = Instant::now();
    let second = lingering.send(ProducerRecord::new(&topic, "second")).unwrap();
    assert!(
        second.wait_timeout(Duration::from_millis(100)).is_none(),
        "sent before linger.ms"
    );
    assert_eq!(second.wait().unwrap().offset, Some(1));
    assert!(
        sent.elapsed() >= Duration::from_millis(300),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(fetch_all(&client, &topic, 0).len(), 2);
    // Dropped without flush or close, both producers' records stayed written.
}

#[test]
fn bad_topics_and_partitions_are_reported() {
    let client = client(broker::shared().bootstrap());
    let max_block = Duration::from_millis(500);
    let mut producer = client.producer().max_block(max_block).build().unwrap();
    let started = Instant::now();
    let missing = unique_name("no-such-topic");
    let e = producer.send(ProducerRecord::new(&missing, "v")).unwrap_err();
    assert_eq!(e.kafka_code(), Some(KafkaCode::UnknownTopicOrPartition), "{e}");
    assert!(e.to_string().contains(&missing), "{e}");
    assert!(
        started.elapsed() < max_block + crate::support::LOAD_MARGIN,
        "{:?}",
        started.elapsed()
    );

    let topic = topic(&client, 2, 1);
    let e = producer
        .send(ProducerRecord::new(&topic, "v").partition(2))
        .unwrap_err();
    assert!(e.to_string().contains("partition 2 of topic"), "{e}");
    // The producer is still usable.
    let handle = producer
        .send(ProducerRecord::new(&topic, "v").partition(1))
        .unwrap();
    producer.flush().unwrap();
    let m = handle.try_result().unwrap().unwrap();
    assert_eq!((m.partition, m.offset), (1, Some(0)));
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
fn idempotent_pipelined_sends_survive_connection_resets_without_duplicates_gaps_or_reordering() {
    const PARTITIONS: i32 = 2;
    const PER_PARTITION: usize = 5000;
    let upstream = proxy::upstream_for("kraft-4.0");
    let proxy = Proxy::start(upstream, "kraft-4.0");
    let client = client(&proxy.bootstrap());
    let topic = topic(&client, PARTITIONS, 1);
    // Small batches, so that several of a partition's are in flight when a connection goes.
    let mut producer = client.producer().batch_size(1024).build().unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let resets = std::thread::scope(|s| {
        let resetter = s.spawn(|| {
            let mut resets = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(40));
                proxy.drop_connections();
                resets += 1;
            }
            resets
        });
        for i in 0..PER_PARTITION {
            for p in 0..PARTITIONS {
                let value = format!("{p}-{i:05}-{}", "x".repeat(40));
                producer
                    .send(ProducerRecord::new(&topic, value).partition(p))
                    .unwrap();
            }
        }
        producer.flush().unwrap();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        resetter.join().unwrap()
    });
    assert!(
        resets >= 3,
        "only {resets} connection resets happened while sending"
    );
    let direct = self::client(&upstream.to_string());
    let got = fetch_topic(&direct, &topic, PARTITIONS);
    for p in 0..PARTITIONS {
        let values: Vec<String> = got[&p].iter().map(|r| text(&r.value)).collect();
        let expected: Vec<String> = (0..PER_PARTITION)
            .map(|i| format!("{p}-{i:05}-{}", "x".repeat(40)))
            .collect();
        if values != expected {
            let dups = values.len() - values.iter().collect::<BTreeSet<_>>().len();
            let first_off = values.iter().zip(&expected).position(|(a, b)| a != b);
            panic!(
                "partition {p}: {} records read for {PER_PARTITION} sent, {dups} duplicated, first \
                 out of place at {first_off:?} ({resets} resets)",
                values.len()
            );
        }
    }
}

#[test]
fn a_full_buffer_memory_blocks_send_for_max_block_then_fails_and_loses_nothing_queued() {
    let upstream = proxy::upstream_for("kraft-4.0");
    let proxy = Proxy::start(upstream, "kraft-4.0");
    let client = client(&proxy.bootstrap());
    let topic = topic(&client, 1, 1);
    let max_block = Duration::from_millis(300);
    let mut producer = client
        .producer()
        .batch_size(16 * 1024)
        .buffer_memory(64 * 1024)
        .max_block(max_block)
        .build()
        .unwrap();
    // Metadata and the producer id first, with answers coming at once.
    producer
        .send(ProducerRecord::new(&topic, "warm-up"))
        .unwrap()
        .wait()
        .unwrap();
    // Acknowledgements now take 5 s: the buffer fills and stays full.
    proxy.delay_api(ApiKey::Produce, Duration::from_secs(5));
    let value = Bytes::from(vec![b'v'; 1000]);
    let mut queued = Vec::new();
    let (error, blocked) = loop {
        let started = Instant::now();
        match producer.send(ProducerRecord::new(&topic, value.clone())) {
            Ok(h) => queued.push(h),
            Err(e) => break (e, started.elapsed()),
        }
        assert!(queued.len() < 1000, "buffer.memory never filled");
    };
    match &error {
        Error::BufferFull {
            buffer_memory: 65536,
            waited,
        } => assert_eq!(*waited, max_block),
        other => panic!("{other:?}"),
    }
    assert!(
        blocked >= max_block,
        "failed after {blocked:?}, before max.block.ms"
    );
    // 64 KiB of about 1 KiB records were taken before it filled.
    assert!((50..=64).contains(&queued.len()), "{} queued", queued.len());
    proxy.delay_api(ApiKey::Produce, Duration::ZERO);
    producer.flush().unwrap();
    assert!(queued.iter().all(|h| h.try_result().unwrap().is_ok()));
    assert_eq!(fetch_all(&client, &topic, 0).len(), queued.len() + 1);
}

#[test]
fn close_sends_what_linger_holds_and_waits_for_it() {
    let client = client(broker::shared().bootstrap());
    let topic = topic(&client, 1, 1);
    let mut producer = client
        .producer()
        .linger(Duration::from_secs(3600))
        .delivery_timeout(Duration::from_secs(7200))
        .build()
        .unwrap();
    let handles = producer
        .send_many((0..10).map(|i| ProducerRecord::new(&topic, format!("r{i}"))))
        .unwrap();
    assert!(
        handles.iter().all(|h| !h.is_done()),
        "an hour's linger holds them"
    );
    producer.close().unwrap();
    assert!(handles.iter().all(|h| h.try_result().unwrap().is_ok()));
    assert_eq!(fetch_all(&client, &topic, 0).len(), 10);
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
fn idempotent_pipelined_sends_across_a_leader_kill_are_written_once_and_in_order() {
    const PARTITIONS: i32 = 2;
    const PER_PARTITION: usize = 4000;
    let cluster = broker::Cluster::start(3, broker::version_under_test());
    let client = client(cluster.bootstrap());
    let topic = topic(&client, PARTITIONS, 3);
    let victim = client.cached_metadata().topics[&topic].partitions[0].leader;
    // Small batches and a linger: several batches of each partition in flight when the
    // leader dies.
    let mut producer = client.producer().batch_size(1024).build().unwrap();
    let value = |p: i32, i: usize| format!("{p}-{i:05}-{}", "x".repeat(40));
    let mut handles = Vec::new();
    for i in 0..PER_PARTITION {
        if i == PER_PARTITION / 4 {
            cluster.kill(victim as usize);
        }
        for p in 0..PARTITIONS {
            handles.push(
                producer
                    .send(ProducerRecord::new(&topic, value(p, i)).partition(p))
                    .unwrap(),
            );
        }
    }
    producer.flush().unwrap();
    assert!(handles.iter().all(|h| h.try_result().unwrap().is_ok()));
    let meta = client.refresh_metadata(Some(&[topic.as_str()])).unwrap();
    assert_ne!(
        meta.topics[&topic].partitions[0].leader, victim,
        "the leader moved"
    );
    let got = fetch_topic(&client, &topic, PARTITIONS);
    for p in 0..PARTITIONS {
        let values: Vec<String> = got[&p].iter().map(|r| text(&r.value)).collect();
        let expected: Vec<String> = (0..PER_PARTITION).map(|i| value(p, i)).collect();
        if values != expected {
            let dups = values.len() - values.iter().collect::<BTreeSet<_>>().len();
            let first_off = values.iter().zip(&expected).position(|(a, b)| a != b);
            panic!(
                "partition {p}: {} records read for {PER_PARTITION} sent, {dups} duplicated, first \
                 out of place at {first_off:?}",
                values.len()
            );
        }
    }
}

/// The case idempotence exists for, under a broker kill: the leader has written and replicated
/// a partition's batches (acks=all) but its answers never reach the producer, because a proxy
/// holds them when the leader is SIGKILLed and the connections then drop. The producer must send
/// those batches again to the new leader, which already has them; with idempotence it recognises
/// their sequence numbers, so the partition reads back once and in order. The test first checks
/// that the scenario happened (more records in the log than handles answered when the leader
/// died). With `enable_idempotence(false)` the same run writes the held batches twice (14
/// records twice in one run, with one batch in flight).
#[test]
fn batches_written_by_a_killed_leader_whose_acks_were_lost_are_not_written_twice() {
    const RECORDS: usize = 3000;
    let cluster = broker::Cluster::start(3, broker::version_under_test());
    let direct = client(cluster.bootstrap());
    let topic = topic(&direct, 1, 3);
    let victim = direct.cached_metadata().topics[&topic].partitions[0].leader;
    let release = proxy::release_for(cluster.version());
    let proxy = Proxy::start(cluster.addr(1), release);
    for node in cluster.nodes() {
        proxy.listen_for(cluster.addr(node));
    }
    let bootstrap: Vec<String> = proxy.listener_addrs().iter().map(ToString::to_string).collect();
    let through_proxy = client(&bootstrap.join(","));
    // Small batches: each Produce request carries about 20 records, 5 of them in flight.
    let mut producer = through_proxy.producer().batch_size(1024).build().unwrap();
    let value = |i: usize| format!("{i:05}-{}", "x".repeat(40));
    // The first records go through unhindered, so that the producer id and the connection to
    // the leader are in place.
    let mut handles: Vec<DeliveryHandle> = (0..100)
        .map(|i| producer.send(ProducerRecord::new(&topic, value(i))).unwrap())
        .collect();
    producer.flush().unwrap();
    proxy.delay_api(ApiKey::Produce, Duration::from_secs(30));
    for i in 100..RECORDS {
        handles.push(producer.send(ProducerRecord::new(&topic, value(i))).unwrap());
    }
    // Wait until the leader has written some of what the producer has in flight (its answers
    // held), then a moment more for the rest of the requests in flight.
    let deadline = Instant::now() + Duration::from_secs(20);
    while fetch_all(&direct, &topic, 0).len() <= 100 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let written = fetch_all(&direct, &topic, 0).len();
    let answered = handles.iter().filter(|h| h.is_done()).count();
    assert!(
        written > answered,
        "the scenario needs written but unanswered records: {written} written, {answered} answered"
    );
    eprintln!("{written} records written, {answered} answered when leader {victim} is killed");
    cluster.kill(victim as usize);
    proxy.drop_connections();
    proxy.delay_api(ApiKey::Produce, Duration::ZERO);
    producer.flush().unwrap();
    assert!(handles.iter().all(|h| h.try_result().unwrap().is_ok()));
    let meta = direct.refresh_metadata(Some(&[topic.as_str()])).unwrap();
    assert_ne!(
        meta.topics[&topic].partitions[0].leader, victim,
        "the leader moved"
    );
    let values: Vec<String> = fetch_all(&direct, &topic, 0)
        .iter()
        .map(|r| text(&r.value))
        .collect();
    let expected: Vec<String> = (0..RECORDS).map(value).collect();
    if values != expected {
        let dups = values.len() - values.iter().collect::<BTreeSet<_>>().len();
        let first_off = values.iter().zip(&expected).position(|(a, b)| a != b);
        panic!(
            "{} records read for {RECORDS} sent, {dups} duplicated, first out of place at \
             {first_off:?} ({written} written and {answered} answered when the leader died)",
            values.len()
        );
    }
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
        let handles =
            producer
                .send_many((0..50).map(|i| {
                    ProducerRecord::new(&topic, format!("{compression:?}-{i}")).key(format!("k{i}"))
                }))
                .unwrap();
        producer.flush().unwrap();
        for h in handles {
            let m = h.try_result().unwrap().unwrap();
            assert!(m.offset.is_some(), "{compression:?}: {m:?}");
        }
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
    let handle = producer
        .send(ProducerRecord::new(&topic, "v").header("h", "x"))
        .unwrap();
    assert!(matches!(producer.flush(), Err(Error::Delivery { failed: 1, .. })));
    let e = handle.try_result().unwrap().unwrap_err();
    match &*e {
        Error::MissingCapability { capability, .. } => assert_eq!(*capability, "record headers"),
        other => panic!("{other:?}"),
    }
    let mut producer = old.producer().compression(Compression::Zstd).build().unwrap();
    producer.send(ProducerRecord::new(&topic, "v")).unwrap();
    let e = producer.flush().unwrap_err();
    assert!(e.to_string().contains("zstd compression"), "{e}");
}

/// Records to two partitions in one flush, one of them too large for its topic's
/// `max.message.bytes`: that record's handle has the broker's MESSAGE_TOO_LARGE, the records
/// before and after it (in batches of their own) are written, and each handle's offset is
/// where its record is read back.
#[test]
fn a_record_too_large_for_its_topic_fails_alone_and_the_others_get_their_offsets() {
    let client = client(broker::shared().bootstrap());
    let topic = unique_name("prod-too-large");
    client
        .admin()
        .create_topics(
            &[NewTopic::new(&topic, 2, 1).config("max.message.bytes", "2000")],
            Duration::from_secs(60),
        )
        .unwrap();
    // batch.size below the large record: it goes in a batch of its own.
    let mut producer = client.producer().batch_size(1000).build().unwrap();
    let to = |p: i32, value: Bytes| ProducerRecord::new(&topic, value).partition(p);
    let small = |s: &str| Bytes::from(s.to_string());
    let first = producer.send(to(0, small("first"))).unwrap();
    let other = producer.send(to(1, small("other"))).unwrap();
    let large = producer.send(to(0, Bytes::from(vec![b'x'; 5000]))).unwrap();
    let last = producer.send(to(0, small("last"))).unwrap();
    match producer.flush() {
        Err(Error::Delivery { failed: 1, first }) => {
            assert_eq!(first.kafka_code(), Some(KafkaCode::MessageTooLarge), "{first}")
        }
        other => panic!("flush: {other:?}"),
    }
    let e = large.try_result().expect("done after flush").unwrap_err();
    assert_eq!(e.kafka_code(), Some(KafkaCode::MessageTooLarge), "{e}");
    assert!(e.to_string().contains(&format!("{topic}-0")), "{e}");
    let got = fetch_topic(&client, &topic, 2);
    let at = |h: &DeliveryHandle| {
        let m = h.try_result().unwrap().unwrap();
        let read = got[&m.partition]
            .iter()
            .find(|r| Some(r.offset) == m.offset)
            .map(|r| text(&r.value));
        (m.partition, m.offset, read)
    };
    assert_eq!(at(&first), (0, Some(0), Some("first".into())));
    assert_eq!(at(&other), (1, Some(0), Some("other".into())));
    // The large record took no offset.
    assert_eq!(at(&last), (0, Some(1), Some("last".into())));
    assert_eq!(got[&0].len(), 2);
}

/// 500 records of 50 bytes and, in the middle, one of 5000, in one flush to a topic whose
/// `max.message.bytes` is 2000, with the default `batch.size` (256 KiB): the broker refuses the
/// batches as MESSAGE_TOO_LARGE, the producer splits them until they fit, and only the large
/// record fails. Every small record is written once, in send order, at consecutive offsets,
/// which its handle gives; with idempotence, each epoch's batches carry gap-free sequences
/// from 0 (the large record's failure bumps the epoch). With a `batch_size` of its own
/// (above the topic's limit, below the records'), several batches are pipelined behind each
/// refused one and must keep their sequences.
fn batches_too_large_for_the_topic_are_split(idempotent: bool, batch_size: Option<usize>) {
    let client = client(broker::shared().bootstrap());
    let topic = unique_name("prod-split");
    client
        .admin()
        .create_topics(
            &[NewTopic::new(&topic, 1, 1).config("max.message.bytes", "2000")],
            Duration::from_secs(60),
        )
        .unwrap();
    let mut builder = client
        .producer()
        .enable_idempotence(idempotent)
        .linger(Duration::from_secs(60));
    if let Some(size) = batch_size {
        builder = builder.batch_size(size);
    }
    let mut producer = builder.build().unwrap();
    let value = |i: usize| format!("{i:05}-{}", "v".repeat(44));
    let mut small = Vec::new();
    let mut large = None;
    for i in 0..500 {
        if i == 250 {
            let record = ProducerRecord::new(&topic, vec![b'x'; 5000]).partition(0);
            large = Some(producer.send(record).unwrap());
        }
        let record = ProducerRecord::new(&topic, value(i)).partition(0);
        small.push(producer.send(record).unwrap());
    }
    match producer.flush() {
        Err(Error::Delivery { failed: 1, first }) => {
            assert_eq!(first.kafka_code(), Some(KafkaCode::MessageTooLarge), "{first}")
        }
        other => panic!("flush: {other:?}"),
    }
    let e = large
        .unwrap()
        .try_result()
        .expect("done after flush")
        .unwrap_err();
    assert_eq!(e.kafka_code(), Some(KafkaCode::MessageTooLarge), "{e}");
    let (got, batches) = fetch_all_with_batches(&client, &topic, 0);
    let values: Vec<String> = got.iter().map(|r| text(&r.value)).collect();
    assert_eq!(
        values,
        (0..500).map(value).collect::<Vec<_>>(),
        "once each, in send order"
    );
    let offsets: Vec<i64> = got.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (0..500).collect::<Vec<i64>>(), "no gaps");
    for (i, h) in small.iter().enumerate() {
        let m = h.try_result().expect("done after flush").unwrap();
        assert_eq!(m.offset, Some(i as i64), "record {i}");
    }
    assert!(batches.len() > 1, "split into {} batch(es)", batches.len());
    let mut next: Option<(i16, i32)> = None;
    for b in &batches {
        if !idempotent {
            assert_eq!((b.producer_id, b.base_sequence), (-1, -1), "{b:?}");
            continue;
        }
        let expected = match next {
            Some((epoch, seq)) if epoch == b.producer_epoch => seq,
            _ => 0,
        };
        assert_eq!(b.base_sequence, expected, "{b:?} after {next:?}");
        let count = (b.last_offset - b.base_offset + 1) as i32;
        next = Some((b.producer_epoch, b.base_sequence + count));
    }
}

#[test]
fn idempotent_batches_too_large_for_the_topic_are_split_and_only_the_record_too_large_alone_fails() {
    batches_too_large_for_the_topic_are_split(true, None);
}

#[test]
fn idempotent_batches_pipelined_behind_a_split_one_keep_their_sequences() {
    batches_too_large_for_the_topic_are_split(true, Some(4000));
}

#[test]
fn batches_too_large_for_the_topic_are_split_without_idempotence_too() {
    batches_too_large_for_the_topic_are_split(false, None);
}

/// A topic with `message.timestamp.type=LogAppendTime`: the handle gives the broker's time, not
/// the create time the record was sent with.
#[test]
fn log_append_time_topics_give_the_brokers_timestamp() {
    let client = client(broker::shared().bootstrap());
    let topic = unique_name("prod-log-append");
    client
        .admin()
        .create_topics(
            &[NewTopic::new(&topic, 1, 1).config("message.timestamp.type", "LogAppendTime")],
            Duration::from_secs(60),
        )
        .unwrap();
    let mut producer = client.producer().build().unwrap();
    let handle = producer
        .send(ProducerRecord::new(&topic, "v").timestamp(1_000))
        .unwrap();
    producer.flush().unwrap();
    let m = handle.try_result().unwrap().unwrap();
    assert!(m.log_append_time, "{m:?}");
    assert!(m.timestamp > 1_000_000_000_000, "{m:?}");
    assert_eq!(fetch_all(&client, &topic, 0)[0].timestamp, m.timestamp);
}
