//! Fetch-ahead against a real broker: records the consumer fetched
//! ahead are never handed out once their partition was paused, revoked or seeked, and the
//! buffer stays within `queued.max.messages.kbytes` while the application sleeps on a big
//! backlog (peak RSS of a child process, this test binary re-run for [`rss_child`]).

use crate::group_tests::{client, HEARTBEAT, SESSION};
use crate::support::big_metadata::{peak_rss_kib, reset_peak, rss_kib};
use crate::support::{broker, create_topic, unique_name};
use bytes::Bytes;
use kafka_group::{Client, Consumer, ConsumerRecord, OffsetReset, ProducerRecord, TopicPartition};
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Writes `n` records of `size` bytes to `partition`.
fn produce(client: &Client, topic: &str, partition: i32, n: usize, size: usize) {
    let mut p = client.producer().build().unwrap();
    let value = Bytes::from(vec![b'x'; size]);
    for _ in 0..n {
        p.send(ProducerRecord::new(topic, value.clone()).partition(partition))
            .unwrap();
    }
    p.flush().unwrap();
}

/// A consumer of `partitions` without a group, one record per poll: whatever a fetch brought
/// beyond the first record stays buffered.
fn assigned(client: &Client, partitions: &[TopicPartition]) -> Consumer {
    client
        .consumer_without_group()
        .assign(partitions.iter().cloned())
        .auto_offset_reset(OffsetReset::Earliest)
        .max_poll_records(1)
        .build()
        .unwrap()
}

/// Polls until `cond` holds on what came (or fails after a minute).
fn poll_until(
    c: &mut Consumer,
    what: &str,
    mut cond: impl FnMut(&[ConsumerRecord]) -> bool,
) -> Vec<ConsumerRecord> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut out = Vec::new();
    while !cond(&out) {
        assert!(Instant::now() < deadline, "{what}: got {} records", out.len());
        out.extend(c.poll(Duration::from_millis(200)).unwrap().records);
    }
    out
}

fn offsets(records: &[ConsumerRecord], partition: i32) -> Vec<i64> {
    records
        .iter()
        .filter(|r| r.partition == partition)
        .map(|r| r.offset)
        .collect()
}

#[test]
fn a_paused_partition_never_yields_a_record_prefetched_before_the_pause() {
    let client = client(broker::shared().bootstrap());
    let topic = create_topic(&client, "fa-pause", 2, 1);
    produce(&client, &topic, 0, 200, 10);
    produce(&client, &topic, 1, 200, 10);
    let both = [TopicPartition::new(&topic, 0), TopicPartition::new(&topic, 1)];
    let mut c = assigned(&client, &both);
    // One record per poll: the rest of its partition's fetch stays buffered, more is in flight
    // for both partitions.
    let mut got = poll_until(&mut c, "a first record", |r| !r.is_empty());
    std::thread::sleep(Duration::from_millis(300));
    let (x, y) = (got[0].partition, 1 - got[0].partition);
    let paused = both[x as usize].clone();
    c.pause(std::slice::from_ref(&paused)).unwrap();
    let at = c.position(&paused).unwrap();
    assert!(at < 200, "{paused} was read to its end before the pause");
    // The other partition goes on, one record per poll; the paused one yields nothing,
    // however much was fetched for it.
    let while_paused = poll_until(&mut c, "the other partition", |r| {
        offsets(&got, y).len() + offsets(r, y).len() >= 200
    });
    assert_eq!(
        offsets(&while_paused, x),
        Vec::<i64>::new(),
        "records of a paused partition"
    );
    for _ in 0..5 {
        let polled = c.poll(Duration::from_millis(100)).unwrap();
        assert!(polled.is_empty(), "{:?}", polled.records);
    }
    assert_eq!(
        c.position(&paused),
        Some(at),
        "a paused partition's position stays"
    );
    got.extend(while_paused);
    c.resume(std::slice::from_ref(&paused));
    let after = poll_until(&mut c, "the rest of the paused partition", |r| {
        offsets(&got, x).len() + offsets(r, x).len() >= 200
    });
    assert_eq!(offsets(&after, x).first(), Some(&at), "resumed from the position");
    got.extend(after);
    for p in [0, 1] {
        assert_eq!(
            offsets(&got, p),
            (0..200).collect::<Vec<i64>>(),
            "partition {p}: each record once, in order"
        );
    }
}

#[test]
fn seek_discards_prefetched_records() {
    let client = client(broker::shared().bootstrap());
    let topic = create_topic(&client, "fa-seek", 1, 1);
    produce(&client, &topic, 0, 100, 10);
    let tp = TopicPartition::new(&topic, 0);
    let mut c = assigned(&client, std::slice::from_ref(&tp));
    let first = poll_until(&mut c, "a first record", |r| !r.is_empty());
    assert_eq!(first[0].offset, 0);
    std::thread::sleep(Duration::from_millis(300));
    for to in [50, 10, 99] {
        c.seek(&tp, to).unwrap();
        let next = poll_until(&mut c, "a record after the seek", |r| !r.is_empty());
        assert_eq!(next[0].offset, to, "the first record after seek({to})");
    }
    c.seek(&tp, 10).unwrap();
    let rest = poll_until(&mut c, "offsets 10 to 99", |r| r.len() >= 90);
    assert_eq!(offsets(&rest, 0), (10..100).collect::<Vec<i64>>());
}

#[test]
fn a_revoked_partition_never_yields_a_prefetched_record() {
    let client = client(broker::shared().bootstrap());
    let topic = create_topic(&client, "fa-revoke", 2, 1);
    const EACH: usize = 400;
    produce(&client, &topic, 0, EACH, 10);
    produce(&client, &topic, 1, EACH, 10);
    let group = unique_name("fa-revoke");
    let build = || {
        client
            .consumer(&group)
            .subscribe([topic.as_str()])
            .session_timeout(SESSION)
            .heartbeat_interval(HEARTBEAT)
            .auto_offset_reset(OffsetReset::Earliest)
            .enable_auto_commit(false)
            .max_poll_records(1)
            .build()
            .unwrap()
    };
    let seen: Arc<Mutex<Vec<(i32, i64)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut a = build();
    // `a` holds both partitions and has fetched ahead on both.
    let first = poll_until(&mut a, "a record of each partition", |r| {
        !offsets(r, 0).is_empty() && !offsets(r, 1).is_empty()
    });
    a.commit().unwrap();
    seen.lock()
        .unwrap()
        .extend(first.iter().map(|r| (r.partition, r.offset)));
    let b = {
        let (seen, stop, mut b) = (seen.clone(), stop.clone(), build());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let polled = b.poll(Duration::from_millis(100)).unwrap();
                seen.lock()
                    .unwrap()
                    .extend(polled.records.iter().map(|r| (r.partition, r.offset)));
                b.commit().unwrap();
            }
            b.close().unwrap();
        })
    };
    // `a` is slow (20 ms a record) so that the rebalance finds most records unread and buffered.
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut revoked = 0;
    while seen.lock().unwrap().len() < 2 * EACH {
        assert!(
            Instant::now() < deadline,
            "{} records",
            seen.lock().unwrap().len()
        );
        let polled = a.poll(Duration::from_millis(100)).unwrap();
        if polled.revoked().is_some() {
            revoked += 1;
        }
        let held = a.assignment();
        for r in &polled.records {
            assert!(
                held.contains(&r.topic_partition()),
                "a record of {} after it was revoked (holding {held:?})",
                r.topic_partition()
            );
        }
        seen.lock()
            .unwrap()
            .extend(polled.records.iter().map(|r| (r.partition, r.offset)));
        a.commit().unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    // Late duplicates would show up now.
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::SeqCst);
    b.join().unwrap();
    assert!(revoked >= 1, "the first member saw the rebalance");
    let seen = seen.lock().unwrap().clone();
    let unique: BTreeSet<(i32, i64)> = seen.iter().copied().collect();
    assert_eq!(unique.len(), 2 * EACH, "every record");
    let mut counts: BTreeMap<(i32, i64), usize> = BTreeMap::new();
    for r in &seen {
        *counts.entry(*r).or_default() += 1;
    }
    let twice: Vec<_> = counts.iter().filter(|(_, &n)| n > 1).collect();
    assert!(twice.is_empty(), "delivered twice: {twice:?}");
    a.close().unwrap();
}

/// Where the child finds the broker and the topic (`BOOTSTRAP TOPIC`).
const CHILD_ENV: &str = "KAFKA_GROUP_FETCH_AHEAD_CHILD";
const RSS_PARTITIONS: i32 = 4;
const RSS_RECORDS: usize = 1_600; // per partition, of RSS_VALUE bytes: 64 MB in all
const RSS_VALUE: usize = 10_000;
const RSS_LIMIT_KIB: usize = 4_096;

#[test]
fn memory_stays_within_the_bound_while_the_application_sleeps() {
    let b = broker::shared();
    let client = client(b.bootstrap());
    let topic = create_topic(&client, "fa-rss", RSS_PARTITIONS, 1);
    for p in 0..RSS_PARTITIONS {
        produce(&client, &topic, p, RSS_RECORDS, RSS_VALUE);
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "fetch_ahead_tests::rss_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, format!("{} {topic}", b.bootstrap()))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stdout}\n{stderr}");
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("FETCH-AHEAD-RSS ").map(|(_, f)| f))
        .unwrap_or_else(|| panic!("no figures in: {stdout}"));
    let figures: Vec<u64> = line.split(' ').map(|f| f.parse().unwrap()).collect();
    let [before, peak, asleep] = figures[..] else {
        panic!("{line}")
    };
    let growth = peak.saturating_sub(before);
    println!(
        "backlog {} KiB, queued.max.messages.kbytes {RSS_LIMIT_KIB}: RSS {before} KiB before, \
         peak growth {growth} KiB, {asleep} KiB while asleep",
        RSS_PARTITIONS as usize * RSS_RECORDS * RSS_VALUE / 1024
    );
    // Slack: one answer may overshoot the bound (a first batch is returned whole), the wire
    // buffer an answer is read into lives beside its decoded records until they are filed, and
    // the allocator keeps some of what was freed.
    let bound = 2 * RSS_LIMIT_KIB as u64 + 8 * 1024;
    assert!(
        growth <= bound,
        "peak RSS grew by {growth} KiB (bound {bound} KiB)"
    );
}

/// The child of the RSS test: polls once, then sleeps with the backlog unread while the
/// consumer fetches ahead, and reports its RSS; then reads everything to check nothing was
/// lost, and checks that dropping the consumer ends its fetch threads.
#[test]
#[ignore = "the child process of memory_stays_within_the_bound_while_the_application_sleeps"]
fn rss_child() {
    let spec = std::env::var(CHILD_ENV).unwrap_or_else(|_| panic!("{CHILD_ENV} is unset"));
    let (bootstrap, topic) = spec.split_once(' ').unwrap();
    let client = client(bootstrap);
    let partitions: Vec<TopicPartition> = (0..RSS_PARTITIONS)
        .map(|p| TopicPartition::new(topic, p))
        .collect();
    let mut c = client
        .consumer_without_group()
        .assign(partitions)
        .auto_offset_reset(OffsetReset::Earliest)
        .max_poll_records(10)
        .max_partition_fetch_bytes(8 << 20)
        .queued_max_messages_kbytes(RSS_LIMIT_KIB)
        // Once the backlog is read, the broker holds each fetch this long: only cutting it short
        // lets a drop end the threads at once.
        .fetch_max_wait(Duration::from_secs(10))
        .build()
        .unwrap();
    client.refresh_metadata(Some(&[topic])).unwrap();
    let before = rss_kib();
    assert!(reset_peak(), "cannot reset VmHWM");
    let mut got = poll_until(&mut c, "a first record", |r| !r.is_empty());
    // The application is busy: the consumer fetches ahead until its bound, then waits.
    std::thread::sleep(Duration::from_secs(3));
    println!("FETCH-AHEAD-RSS {before} {} {}", peak_rss_kib(), rss_kib());
    let total = RSS_PARTITIONS as usize * RSS_RECORDS;
    let have = got.len();
    got.extend(poll_until(&mut c, "the whole backlog", |r| {
        have + r.len() >= total
    }));
    for p in 0..RSS_PARTITIONS {
        assert_eq!(offsets(&got, p), (0..RSS_RECORDS as i64).collect::<Vec<i64>>());
    }
    // Alone in this process, the consumer's fetch threads are the only ones of that name; a
    // drop (no close) stops them, a fetch the broker is holding (for fetch.max.wait.ms) included.
    assert!(fetch_threads() > 0, "no fetch thread found to watch");
    drop(c);
    let deadline = Instant::now() + Duration::from_secs(3);
    while fetch_threads() > 0 {
        assert!(
            Instant::now() < deadline,
            "{} fetch threads outlived the consumer",
            fetch_threads()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Threads of this process named as the consumer names its fetch threads (`comm` keeps 15
/// bytes of the name).
fn fetch_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end() == &"kafka-group-fetch"[..15])
        .count()
}
