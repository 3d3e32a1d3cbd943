//! The consumer against a real broker: consume and commit, resume from committed offsets,
//! `auto.offset.reset`, seek, two members splitting a topic, commits across rebalances, old
//! protocol versions through the version-capping proxy.

use crate::group_tests::{client, failover_client, topic_with_partitions, HEARTBEAT, SESSION};
use crate::support::proxy::{self, Proxy};
use crate::support::{broker, create_topic, unique_name, wait_for};
use bytes::Bytes;
use kafka_group::unstable::protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_group::unstable::protocol::messages::ProduceRequest;
use kafka_group::unstable::records::{self, Compression, NewRecord};
use kafka_group::unstable::RawClient;
use kafka_group::ApiKey;
use kafka_group::{Client, Consumer, ConsumerRecord, Error, KafkaCode, OffsetReset, Polled};
use kafka_group::{GroupEvent, TopicPartition};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Appends `values` to one partition with a raw ProduceRequest (acks=all), retrying while a
/// new topic's leader is not known yet. Each record carries key `k<partition>` and a header.
pub fn produce(client: &Client, topic: &str, partition: i32, values: &[String]) {
    let recs: Vec<NewRecord> = values
        .iter()
        .map(|v| NewRecord {
            key: Some(Bytes::from(format!("k{partition}"))),
            value: Some(Bytes::from(v.clone())),
            headers: vec![("h".into(), Some(Bytes::from_static(b"1")))],
            timestamp: None,
        })
        .collect();
    let batch = records::encode(&recs, Compression::None, 2).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let outcome = client
            .refresh_metadata(Some(&[topic]))
            .map_err(|e| e.to_string())
            .and_then(|meta| {
                let leader = meta
                    .topics
                    .get(topic)
                    .and_then(|t| t.partitions.iter().find(|p| p.partition == partition))
                    .map(|p| p.leader)
                    .filter(|l| *l >= 0)
                    .ok_or_else(|| "no leader yet".to_string())?;
                let resp = client
                    .send_to(leader, |_| ProduceRequest {
                        acks: -1,
                        timeout_ms: 10_000,
                        topic_data: vec![TopicProduceData {
                            name: topic.into(),
                            partition_data: vec![PartitionProduceData {
                                index: partition,
                                records: Some(batch.clone()),
                                ..Default::default()
                            }],
                            ..Default::default()
                        }],
                        ..Default::default()
                    })
                    .map_err(|e| e.to_string())?;
                let code = resp.responses[0].partition_responses[0].error_code;
                if code == 0 {
                    Ok(())
                } else {
                    Err(format!("produce error {}", KafkaCode::from_code(code)))
                }
            });
        match outcome {
            Ok(()) => return,
            Err(e) if Instant::now() < deadline => {
                log::debug!("produce to {topic}-{partition}: {e}; retrying");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("produce to {topic}-{partition}: {e}"),
        }
    }
}

/// `n` records `<partition>-<i>` on each of `partitions` partitions.
fn fill(client: &Client, topic: &str, partitions: i32, n: usize, first: usize) {
    for p in 0..partitions {
        let values: Vec<String> = (first..first + n).map(|i| format!("{p}-{i}")).collect();
        produce(client, topic, p, &values);
    }
}

/// A consumer of `group` subscribed to `topic` with the suite's timings, reading from the start
/// and committing only when told.
pub fn builder(client: &Client, group: &str, topic: &str) -> kafka_group::ConsumerBuilder {
    client
        .consumer(group)
        .subscribe([topic])
        .session_timeout(SESSION)
        .heartbeat_interval(HEARTBEAT)
        .max_poll_interval(Duration::from_secs(20))
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false)
        .fetch_max_wait(Duration::from_millis(100))
}

/// Polls until `n` records came (or panics after `timeout`); commits after every poll when
/// `commit` is set.
pub fn consume(c: &mut Consumer, n: usize, timeout: Duration, commit: bool) -> Vec<ConsumerRecord> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    while out.len() < n {
        assert!(
            Instant::now() < deadline,
            "got {} of {n} records in {timeout:?}",
            out.len()
        );
        let polled = c.poll(Duration::from_millis(200)).unwrap();
        out.extend(polled.records);
        if commit {
            c.commit().unwrap();
        }
    }
    out
}

/// Polls (100 ms at a time: a join goes on across polls) until a poll assigns partitions or
/// `timeout` passes; returns everything those polls brought.
fn poll_until_assigned(c: &mut Consumer, timeout: Duration) -> Polled {
    let deadline = Instant::now() + timeout;
    let mut all = Polled::default();
    while Instant::now() < deadline && all.assigned().is_none() {
        let p = c.poll(Duration::from_millis(100)).unwrap();
        all.records.extend(p.records);
        all.events.extend(p.events);
    }
    all
}

/// Polls for `d` and returns whatever came.
fn drain_for(c: &mut Consumer, d: Duration) -> Vec<ConsumerRecord> {
    let deadline = Instant::now() + d;
    let mut out = Vec::new();
    while Instant::now() < deadline {
        out.extend(c.poll(Duration::from_millis(100)).unwrap().records);
    }
    out
}

/// Partitions `0..n` of `topic`.
fn partitions(topic: &str, n: i32) -> Vec<TopicPartition> {
    (0..n).map(|p| TopicPartition::new(topic, p)).collect()
}

fn offsets_by_partition(records: &[ConsumerRecord]) -> BTreeMap<i32, Vec<i64>> {
    let mut m: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for r in records {
        m.entry(r.partition).or_default().push(r.offset);
    }
    m
}

#[test]
fn consumes_everything_commits_and_a_restart_resumes_from_committed_offsets() {
    let client = client(broker::shared().bootstrap());
    let topic = topic_with_partitions(&client, 3);
    let group = unique_name("cons-resume");
    fill(&client, &topic, 3, 10, 0);

    let mut c = builder(&client, &group, &topic)
        .group_instance_id("a")
        .max_poll_records(7)
        .build()
        .unwrap();
    let started = Instant::now();
    let mut got = Vec::new();
    while got.len() < 30 {
        assert!(started.elapsed() < Duration::from_secs(30), "got {}", got.len());
        let polled = c.poll(Duration::from_millis(500)).unwrap();
        assert!(polled.len() <= 7, "max.poll.records: {}", polled.len());
        got.extend(polled.records);
    }
    let first_batch = started.elapsed();
    assert_eq!(got.len(), 30);
    for (p, offsets) in offsets_by_partition(&got) {
        assert_eq!(
            offsets,
            (0..10).collect::<Vec<_>>(),
            "partition {p} in order, once each"
        );
    }
    let r = &got[0];
    assert_eq!(&*r.topic, topic);
    assert_eq!(r.key.as_deref(), Some(format!("k{}", r.partition).as_bytes()));
    assert_eq!(
        r.value.as_deref(),
        Some(format!("{}-{}", r.partition, r.offset).as_bytes())
    );
    assert_eq!(r.headers, vec![("h".to_string(), Some(Bytes::from_static(b"1")))]);
    assert!(r.timestamp > 0);
    let tps = partitions(&topic, 3);
    for tp in &tps {
        assert_eq!(c.position(tp), Some(10));
    }
    c.commit().unwrap();
    let committed = c.committed(&tps).unwrap();
    assert!(committed.values().all(|o| *o == Some(10)), "{committed:?}");
    c.close().unwrap();

    // A restart of the same static member resumes where the commit left off.
    fill(&client, &topic, 3, 2, 10);
    let mut c = builder(&client, &group, &topic)
        .group_instance_id("a")
        .build()
        .unwrap();
    let again = consume(&mut c, 6, Duration::from_secs(30), false);
    let more = drain_for(&mut c, Duration::from_millis(500));
    assert!(more.is_empty(), "nothing beyond the new records: {more:?}");
    for (p, offsets) in offsets_by_partition(&again) {
        assert_eq!(offsets, vec![10, 11], "partition {p}: only the new records");
    }
    c.close().unwrap();
    println!("consumed 30 records over 3 partitions (join included) in {first_batch:?}");
}

#[test]
fn auto_offset_reset_earliest_latest_and_error() {
    let client = client(broker::shared().bootstrap());
    let topic = topic_with_partitions(&client, 1);
    let tp = TopicPartition::new(&topic, 0);
    fill(&client, &topic, 1, 5, 0);

    let mut earliest = builder(&client, &unique_name("cons-earliest"), &topic)
        .build()
        .unwrap();
    let got = consume(&mut earliest, 5, Duration::from_secs(30), false);
    assert_eq!(
        got.iter().map(|r| r.offset).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4]
    );

    let mut latest = builder(&client, &unique_name("cons-latest"), &topic)
        .auto_offset_reset(OffsetReset::Latest)
        .build()
        .unwrap();
    // The first poll joins and resets to the end of the log.
    let nothing = drain_for(&mut latest, Duration::from_millis(1500));
    assert!(nothing.is_empty(), "{nothing:?}");
    assert_eq!(latest.position(&tp), Some(5));
    fill(&client, &topic, 1, 3, 5);
    let got = consume(&mut latest, 3, Duration::from_secs(30), false);
    assert_eq!(got.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![5, 6, 7]);

    let mut none = builder(&client, &unique_name("cons-none"), &topic)
        .auto_offset_reset(OffsetReset::Error)
        .build()
        .unwrap();
    let e = none.poll(Duration::from_secs(5)).unwrap_err();
    match &e {
        Error::NoOffset { partitions } => assert_eq!(partitions, &vec![(tp.clone(), None)]),
        other => panic!("expected NoOffset, got {other}"),
    }
    assert!(e.to_string().contains(&tp.to_string()), "{e}");
    // It stays an error until the application seeks.
    assert!(matches!(none.poll(Duration::ZERO), Err(Error::NoOffset { .. })));
    none.seek(&tp, 6).unwrap();
    let got = consume(&mut none, 2, Duration::from_secs(30), false);
    assert_eq!(got.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![6, 7]);

    // A committed offset beyond the log end is out of range: earliest starts over, none
    // reports the offset.
    let group = unique_name("cons-out-of-range");
    let mut c = builder(&client, &group, &topic).build().unwrap();
    consume(&mut c, 8, Duration::from_secs(30), false);
    c.commit_offsets(&[(tp.clone(), 1000)].into_iter().collect())
        .unwrap();
    assert_eq!(c.committed(std::slice::from_ref(&tp)).unwrap()[&tp], Some(1000));
    c.close().unwrap();
    let mut strict = builder(&client, &group, &topic)
        .auto_offset_reset(OffsetReset::Error)
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let e = loop {
        match strict.poll(Duration::from_millis(200)) {
            Err(e) => break e,
            Ok(p) => assert!(p.is_empty() && Instant::now() < deadline),
        }
    };
    assert!(
        matches!(&e, Error::NoOffset { partitions } if partitions == &vec![(tp.clone(), Some(1000))]),
        "{e}"
    );
    strict.close().unwrap();
    let mut restart = builder(&client, &group, &topic).build().unwrap();
    let got = consume(&mut restart, 8, Duration::from_secs(30), false);
    assert_eq!(got[0].offset, 0, "reset to earliest");
    for c in [earliest, latest, none, restart] {
        c.close().unwrap();
    }
}

#[test]
fn seek_rewinds_and_committed_offsets_never_decrease() {
    let client = client(broker::shared().bootstrap());
    let topic = topic_with_partitions(&client, 1);
    let tp = TopicPartition::new(&topic, 0);
    fill(&client, &topic, 1, 10, 0);
    let mut c = builder(&client, &unique_name("cons-seek"), &topic)
        .build()
        .unwrap();
    consume(&mut c, 10, Duration::from_secs(30), false);
    c.commit().unwrap();
    let committed = |c: &mut Consumer| c.committed(std::slice::from_ref(&tp)).unwrap()[&tp];
    assert_eq!(committed(&mut c), Some(10));

    // A stale commit (an offset computed earlier) does not move the committed offset back.
    c.commit_offsets(&[(tp.clone(), 4)].into_iter().collect())
        .unwrap();
    assert_eq!(committed(&mut c), Some(10), "stale commit skipped");

    // An explicit seek re-reads, and lets the application commit the rewound position.
    c.seek(&tp, 3).unwrap();
    assert_eq!(c.position(&tp), Some(3));
    let again = consume(&mut c, 7, Duration::from_secs(30), false);
    assert_eq!(
        again.iter().map(|r| r.offset).collect::<Vec<_>>(),
        (3..10).collect::<Vec<_>>()
    );
    c.seek(&tp, 5).unwrap();
    c.commit().unwrap();
    assert_eq!(committed(&mut c), Some(5), "rewound on purpose");
    c.commit_offsets(&[(tp.clone(), 4)].into_iter().collect())
        .unwrap();
    assert_eq!(committed(&mut c), Some(5), "but not below the seek");

    let other = TopicPartition::new(&topic, 7);
    assert!(matches!(c.seek(&other, 0), Err(Error::NotAssigned(p)) if p == other));
    c.close().unwrap();
}

#[test]
fn auto_commit_on_interval_and_close() {
    let client = client(broker::shared().bootstrap());
    let topic = topic_with_partitions(&client, 2);
    let group = unique_name("cons-auto");
    fill(&client, &topic, 2, 5, 0);
    let tps = partitions(&topic, 2);
    let mut c = builder(&client, &group, &topic)
        .enable_auto_commit(true)
        .auto_commit_interval(Duration::from_millis(300))
        .build()
        .unwrap();
    consume(&mut c, 10, Duration::from_secs(30), false);
    // Polling on past the interval commits what earlier polls returned.
    wait_for("the auto-commit", Duration::from_secs(10), || {
        c.poll(Duration::from_millis(100)).unwrap();
        c.committed(&tps).unwrap().values().all(|o| *o == Some(5))
    });
    fill(&client, &topic, 2, 1, 5);
    consume(&mut c, 2, Duration::from_secs(30), false);
    c.close().unwrap();
    let mut check = builder(&client, &group, &topic).build().unwrap();
    let committed = check.committed(&tps).unwrap();
    assert!(
        committed.values().all(|o| *o == Some(6)),
        "close commits: {committed:?}"
    );
    check.close().unwrap();
}

type Seen = Arc<Mutex<Vec<(i32, i64)>>>;

/// A consumer thread that commits after every poll and in the revocation window, recording
/// what it read and every commit result.
fn run(
    mut c: Consumer,
    seen: Seen,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(Consumer, Vec<String>, usize)> {
    std::thread::spawn(move || {
        let mut commit_errors = Vec::new();
        let mut revocations = 0;
        while !stop.load(Ordering::SeqCst) {
            let polled = c.poll(Duration::from_millis(100)).unwrap();
            if polled.revoked().is_some() {
                revocations += 1;
                assert!(polled.is_empty(), "no records with a revocation");
            }
            seen.lock()
                .unwrap()
                .extend(polled.records.iter().map(|r| (r.partition, r.offset)));
            if let Err(e) = c.commit() {
                commit_errors.push(e.to_string());
            }
        }
        (c, commit_errors, revocations)
    })
}

#[test]
fn two_members_split_partitions_and_read_every_record_once() {
    let client = client(broker::shared().bootstrap());
    let topic = topic_with_partitions(&client, 4);
    let group = unique_name("cons-split");
    fill(&client, &topic, 4, 5, 0);
    let seen: Seen = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let a = run(
        builder(&client, &group, &topic)
            .group_instance_id("a")
            .build()
            .unwrap(),
        seen.clone(),
        stop.clone(),
    );
    wait_for("the first 20 records", Duration::from_secs(30), || {
        seen.lock().unwrap().len() >= 20
    });
    // A second member joins: the first one commits in its revocation window, the group splits
    // the partitions, and both go on from the committed offsets.
    let b2 = run(
        builder(&client, &group, &topic)
            .group_instance_id("b")
            .build()
            .unwrap(),
        seen.clone(),
        stop.clone(),
    );
    fill(&client, &topic, 4, 5, 5);
    wait_for("all 40 records", Duration::from_secs(60), || {
        seen.lock().unwrap().len() >= 40
    });
    // Let late duplicates show up if there were any.
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::SeqCst);
    let (ca, errors_a, revoked_a) = a.join().unwrap();
    let (cb, errors_b, _) = b2.join().unwrap();
    assert!(
        errors_a.is_empty() && errors_b.is_empty(),
        "{errors_a:?} {errors_b:?}"
    );
    assert!(revoked_a >= 1, "the first member saw the rebalance");
    let seen = seen.lock().unwrap().clone();
    let unique: BTreeSet<(i32, i64)> = seen.iter().copied().collect();
    assert_eq!(unique.len(), 40, "every record");
    assert_eq!(seen.len(), 40, "each exactly once: {seen:?}");
    let (pa, pb) = (ca.assignment(), cb.assignment());
    assert_eq!(pa.len() + pb.len(), 4, "{pa:?} {pb:?}");
    assert!(!pa.is_empty() && !pb.is_empty(), "both members hold partitions");
    ca.close().unwrap();
    cb.close().unwrap();
}

#[test]
fn commit_after_the_generation_ended_is_surfaced() {
    let client = client(broker::shared().bootstrap());
    let topic = topic_with_partitions(&client, 2);
    let group = unique_name("cons-stale");
    fill(&client, &topic, 2, 3, 0);
    // A dynamic member with a short rebalance timeout: when it stops polling during a
    // rebalance, the group goes on without it.
    let mut a = builder(&client, &group, &topic)
        .max_poll_interval(Duration::from_secs(3))
        .build()
        .unwrap();
    let read = consume(&mut a, 6, Duration::from_secs(30), false);
    assert_eq!(read.len(), 6);
    let generation = a.member().unwrap().generation().unwrap().id;

    let mut b2 = builder(&client, &group, &topic)
        .max_poll_interval(Duration::from_secs(3))
        .build()
        .unwrap();
    // b's join waits in JoinGroup until the rebalance times `a` out; each poll returns within
    // its timeout and the join goes on at the next one.
    let joined = std::thread::spawn(move || {
        let polled = poll_until_assigned(&mut b2, Duration::from_secs(30));
        (b2, polled)
    });
    let (mut b2, polled) = joined.join().unwrap();
    assert!(
        polled.assigned().is_some_and(|p| p.len() == 2),
        "{:?}",
        polled.events
    );

    // `a` processed 6 records in a generation that is over: its commit must fail loudly.
    let e = a.commit().unwrap_err();
    match &e {
        Error::Kafka {
            api: ApiKey::OffsetCommit,
            code,
            ..
        } => assert!(
            matches!(
                code,
                KafkaCode::IllegalGeneration | KafkaCode::UnknownMemberId | KafkaCode::RebalanceInProgress
            ),
            "{e}"
        ),
        other => panic!("expected an OffsetCommit error, got {other}"),
    }
    let tps = partitions(&topic, 2);
    assert!(b2.committed(&tps).unwrap().values().all(Option::is_none));
    // The records come again: `b` holds the partitions now, and `a`, polling again, hears of
    // the rebalance and rejoins; between them every record is read again.
    let seen: Seen = Arc::new(Mutex::new(
        polled.records.iter().map(|r| (r.partition, r.offset)).collect(),
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let b_thread = run(b2, seen.clone(), stop.clone());
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut events = Vec::new();
    while !events.iter().any(|e| matches!(e, GroupEvent::Assigned { .. })) {
        assert!(Instant::now() < deadline, "a never rejoined: {events:?}");
        let p = a.poll(Duration::from_millis(200)).unwrap();
        seen.lock()
            .unwrap()
            .extend(p.records.iter().map(|r| (r.partition, r.offset)));
        events.extend(p.events);
    }
    assert!(a.member().unwrap().generation().unwrap().id > generation);
    wait_for("the 6 records again", Duration::from_secs(30), || {
        let _ = a.poll(Duration::from_millis(50)).map(|p| {
            seen.lock()
                .unwrap()
                .extend(p.records.iter().map(|r| (r.partition, r.offset)));
        });
        a.commit().is_ok() && seen.lock().unwrap().len() >= 6
    });
    stop.store(true, Ordering::SeqCst);
    let (b2, _, _) = b_thread.join().unwrap();
    let again: BTreeSet<(i32, i64)> = seen.lock().unwrap().iter().copied().collect();
    let first: BTreeSet<(i32, i64)> = read.iter().map(|r| (r.partition, r.offset)).collect();
    assert_eq!(again, first, "the uncommitted records were delivered again");
    a.close().unwrap();
    b2.close().unwrap();
}

#[test]
fn revocation_window_commit_succeeds() {
    let client = client(broker::shared().bootstrap());
    let topic = topic_with_partitions(&client, 2);
    let group = unique_name("cons-revoke");
    fill(&client, &topic, 2, 4, 0);
    let mut a = builder(&client, &group, &topic).build().unwrap();
    consume(&mut a, 8, Duration::from_secs(30), false);
    let b2 = builder(&client, &group, &topic).build().unwrap();
    let joining = std::thread::spawn(move || {
        let mut b2 = b2;
        let p = poll_until_assigned(&mut b2, Duration::from_secs(20));
        (b2, p)
    });
    // `a` hears of the rebalance from its heartbeat and gets the revocation without records.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline, "no revocation");
        let p = a.poll(Duration::from_millis(100)).unwrap();
        if let Some(revoked) = p.revoked() {
            assert_eq!(revoked.len(), 2);
            assert!(p.is_empty());
            break;
        }
    }
    // The old generation is still valid: the commit goes through.
    a.commit().unwrap();
    // Rejoin; `b` gets its share and reads nothing `a` committed.
    let mut got_assignment = false;
    while !got_assignment {
        assert!(Instant::now() < deadline, "a never rejoined");
        got_assignment = a.poll(Duration::from_millis(100)).unwrap().assigned().is_some();
    }
    let (mut b2, first) = joining.join().unwrap();
    assert!(first.assigned().is_some(), "b never joined: {:?}", first.events);
    let mut b_records = first.records;
    b_records.extend(drain_for(&mut b2, Duration::from_millis(800)));
    assert!(b_records.is_empty(), "nothing left to read: {b_records:?}");
    let tps = partitions(&topic, 2);
    assert!(a.committed(&tps).unwrap().values().all(|o| *o == Some(4)));
    a.close().unwrap();
    b2.close().unwrap();
}

/// A partition leader crashes mid-stream: fetches to it fail, the consumer refreshes its
/// metadata until the new leader is known, fetches there and reads every record exactly once.
#[test]
fn leader_failover_mid_stream() {
    let cluster = broker::Cluster::start(3, broker::version_under_test());
    let client = failover_client(cluster.bootstrap()).build().unwrap();
    let topic = create_topic(&client, "cons-failover", 3, 3);
    fill(&client, &topic, 3, 10, 0);
    let mut c = builder(&client, &unique_name("cons-failover"), &topic)
        .group_instance_id("a")
        // Long enough to ride out a coordinator on the killed node.
        .session_timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let mut seen: Vec<(i32, i64)> = consume(&mut c, 30, Duration::from_secs(60), true)
        .iter()
        .map(|r| (r.partition, r.offset))
        .collect();
    let meta = client.refresh_metadata(Some(&[topic.as_str()])).unwrap();
    let victim = meta.topics[&topic].partitions[0].leader;
    cluster.kill(victim as usize);
    let killed = Instant::now();
    fill(&client, &topic, 3, 10, 10);
    let more = consume(&mut c, 30, Duration::from_secs(60), true);
    println!(
        "leader {victim} killed: 30 more records consumed {:?} after the kill",
        killed.elapsed()
    );
    seen.extend(more.iter().map(|r| (r.partition, r.offset)));
    let unique: BTreeSet<(i32, i64)> = seen.iter().copied().collect();
    assert_eq!((seen.len(), unique.len()), (60, 60), "every record exactly once");
    let tps = partitions(&topic, 3);
    assert!(c.committed(&tps).unwrap().values().all(|o| *o == Some(20)));
    c.close().unwrap();
}

/// A dynamic consumer through a proxy emulating an old release, against a broker that still
/// serves its versions: Fetch, ListOffsets, OffsetCommit and OffsetFetch at that release's
/// versions (down-converted legacy message sets below Fetch v4).
fn consume_through_proxy(release: &str) {
    let upstream = proxy::upstream_for(release);
    let direct = client(&upstream.to_string());
    let topic = create_topic(&direct, "cons-proxy", 2, 1);
    fill(&direct, &topic, 2, 6, 0);
    let proxy = Proxy::start(upstream, release);
    let via = client(&proxy.bootstrap());
    let group = unique_name("cons-proxy");
    let mut c = builder(&via, &group, &topic).max_poll_records(5).build().unwrap();
    let got = consume(&mut c, 12, Duration::from_secs(30), false);
    for (p, offsets) in offsets_by_partition(&got) {
        assert_eq!(offsets, (0..6).collect::<Vec<_>>(), "{release}: partition {p}");
    }
    assert_eq!(
        got[0].value.as_deref(),
        Some(format!("{}-{}", got[0].partition, got[0].offset).as_bytes())
    );
    c.commit().unwrap();
    let tps = partitions(&topic, 2);
    assert!(
        c.committed(&tps).unwrap().values().all(|o| *o == Some(6)),
        "{release}"
    );
    c.close().unwrap();
    // Latest through ListOffsets at the old version.
    let mut latest = builder(&via, &unique_name("cons-proxy"), &topic)
        .auto_offset_reset(OffsetReset::Latest)
        .build()
        .unwrap();
    assert!(drain_for(&mut latest, Duration::from_millis(800)).is_empty());
    assert_eq!(latest.position(&tps[0]), Some(6), "{release}");
    latest.close().unwrap();
}

#[test]
fn consumer_on_kafka_0_10_0_protocol() {
    consume_through_proxy("zk-0.10.0");
}

#[test]
fn consumer_on_kafka_2_0_protocol() {
    consume_through_proxy("zk-2.0");
}

/// Figures, not a check:
/// `cargo test --release --test it consumer_throughput -- --ignored --nocapture`
/// (`CONSUMER_BENCH_RECORDS`, default 200 000 records of 100 bytes over 3 partitions).
#[test]
#[ignore]
fn consumer_throughput() {
    let client = client(broker::shared().bootstrap());
    let topic = topic_with_partitions(&client, 3);
    let total: usize = std::env::var("CONSUMER_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let value = "x".repeat(100);
    let per_partition = total / 3;
    for p in 0..3 {
        let mut left = per_partition;
        while left > 0 {
            let n = left.min(5_000);
            produce(&client, &topic, p, &vec![value.clone(); n]);
            left -= n;
        }
    }
    let total = per_partition * 3;
    for (label, max_poll) in [("max.poll.records=500", 500), ("max.poll.records=5000", 5000)] {
        let mut c = builder(&client, &unique_name("cons-bench"), &topic)
            .max_poll_records(max_poll)
            .build()
            .unwrap();
        // Join first, so the figure is the fetch path alone.
        let mut got = c.poll(Duration::from_millis(10)).unwrap().len();
        let started = Instant::now();
        let mut polls = 0;
        while got < total {
            got += c.poll(Duration::from_secs(1)).unwrap().len();
            polls += 1;
        }
        let t = started.elapsed().as_secs_f64();
        println!(
            "{label}: {total} records ({:.1} MiB of values) in {t:.2} s: {:.0} records/s, {:.1} MiB/s, {polls} polls",
            (total * 100) as f64 / (1 << 20) as f64,
            total as f64 / t,
            (total * 100) as f64 / (1 << 20) as f64 / t
        );
        c.close().unwrap();
    }
    // End-to-end latency: a record produced while the consumer waits in poll.
    let mut c = builder(&client, &unique_name("cons-bench"), &topic)
        .auto_offset_reset(OffsetReset::Latest)
        .fetch_max_wait(Duration::from_millis(500))
        .build()
        .unwrap();
    drain_for(&mut c, Duration::from_millis(500));
    let mut lat = Vec::new();
    for i in 0..20 {
        let producer = client.clone();
        let topic2 = topic.clone();
        let sent = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            let at = Instant::now();
            produce(&producer, &topic2, i % 3, &[format!("lat-{i}")]);
            at
        });
        let mut n = 0;
        while n == 0 {
            n = c.poll(Duration::from_secs(5)).unwrap().len();
        }
        let seen = Instant::now();
        lat.push(seen.duration_since(sent.join().unwrap()));
    }
    lat.sort();
    println!(
        "produce-start to poll-return latency over 20 records: median {:?}, max {:?}",
        lat[lat.len() / 2],
        lat[lat.len() - 1]
    );
    c.close().unwrap();
}
