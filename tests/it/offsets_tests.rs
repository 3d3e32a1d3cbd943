//! The consumer's offset calls against a real broker: beginning/end offsets and offsets by time
//! for any partition, the lazy seeks to beginning, end and timestamp (working right after an
//! assignment, before any fetch), commits with metadata strings read back, and commits of
//! exactly the records a job processed.

use crate::group_tests::{client, topic_with_partitions, HEARTBEAT, SESSION};
use crate::support::{broker, java, unique_name};
use kafka_group::TopicPartition;
use kafka_group::{
    Client, Consumer, ConsumerRecord, Error, IsolationLevel, OffsetAndMetadata, OffsetReset, ProducerRecord,
};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Record timestamps: `BASE + offset * STEP` ms on partition 0.
const BASE: i64 = 1_700_000_000_000;
const STEP: i64 = 1000;

/// Writes `n` records to partition `partition` of `topic`, with the timestamps above.
fn produce_timed(client: &Client, topic: &str, partition: i32, from: i64, n: i64) {
    let mut p = client.producer().build().unwrap();
    for i in from..from + n {
        let r = ProducerRecord::new(topic, format!("v{i}"))
            .partition(partition)
            .timestamp(BASE + i * STEP);
        p.send(r).unwrap();
    }
    p.flush().unwrap();
}

fn consumer(client: &Client, group: &str, topic: &str, reset: OffsetReset) -> Consumer {
    client
        .consumer(group)
        .subscribe([topic])
        .session_timeout(SESSION)
        .heartbeat_interval(HEARTBEAT)
        .auto_offset_reset(reset)
        .enable_auto_commit(false)
        .build()
        .unwrap()
}

/// Polls until the consumer has `n` partitions assigned.
fn until_assigned(c: &mut Consumer, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.assignment().len() < n {
        assert!(Instant::now() < deadline, "no assignment of {n} partitions");
        let polled = c.poll(Duration::from_millis(500)).unwrap();
        assert!(polled.records.is_empty(), "records before any were produced");
    }
}

/// Polls until `n` records came (or fails after a minute, naming the caller's line).
#[track_caller]
fn records(c: &mut Consumer, n: usize) -> Vec<ConsumerRecord> {
    records_polling(c, n, Duration::from_millis(500), Duration::from_secs(60))
}

/// [`records`] with polls of `poll`, failing after `within` with the positions reached.
#[track_caller]
fn records_polling(c: &mut Consumer, n: usize, poll: Duration, within: Duration) -> Vec<ConsumerRecord> {
    let deadline = Instant::now() + within;
    let mut out = Vec::new();
    while out.len() < n {
        if Instant::now() >= deadline {
            let positions: Vec<_> = c
                .assignment()
                .iter()
                .map(|tp| (tp.to_string(), c.position(tp)))
                .collect();
            panic!(
                "only {} of {n} records in {within:?} of poll({poll:?}); positions {positions:?}",
                out.len()
            );
        }
        out.extend(c.poll(poll).unwrap().records);
    }
    out
}

#[test]
fn beginning_end_and_time_offsets_of_partitions_not_assigned() {
    let b = broker::shared();
    let client = client(b.bootstrap());
    let topic = topic_with_partitions(&client, 2);
    produce_timed(&client, &topic, 0, 0, 10);
    // Subscribed to another topic: the partitions asked about are not assigned.
    let other = topic_with_partitions(&client, 1);
    let mut c = consumer(&client, &unique_name("offsets-g"), &other, OffsetReset::Latest);
    let (p0, p1) = (TopicPartition::new(&topic, 0), TopicPartition::new(&topic, 1));
    let both = [p0.clone(), p1.clone()];
    let begin = c.beginning_offsets(&both).unwrap();
    assert_eq!(begin, BTreeMap::from([(p0.clone(), 0), (p1.clone(), 0)]));
    let end = c.end_offsets(&both).unwrap();
    assert_eq!(end, BTreeMap::from([(p0.clone(), 10), (p1.clone(), 0)]));
    let times = BTreeMap::from([(p0.clone(), BASE + 5 * STEP - 1), (p1.clone(), 0)]);
    let found = c.offsets_for_times(&times).unwrap();
    let at = found[&p0].expect("a record at or after the time");
    assert_eq!((at.offset, at.timestamp), (5, BASE + 5 * STEP));
    assert_eq!(found[&p1], None, "an empty partition has no record at any time");
    let later = BTreeMap::from([(p0.clone(), BASE + 100 * STEP)]);
    assert_eq!(c.offsets_for_times(&later).unwrap()[&p0], None);
    assert!(c
        .committed_with_metadata(&both)
        .unwrap()
        .values()
        .all(Option::is_none));
    // Bad input fails before any request.
    let bad = [TopicPartition::new("no such topic!", 0)];
    assert!(matches!(c.end_offsets(&bad), Err(Error::Config { .. })));
    let negative = BTreeMap::from([(p0.clone(), -5)]);
    assert!(matches!(
        c.offsets_for_times(&negative),
        Err(Error::Config { .. })
    ));
    c.close().unwrap();
}

#[test]
fn seeks_to_beginning_timestamp_and_end_work_before_the_first_fetch() {
    let b = broker::shared();
    let client = client(b.bootstrap());
    let topic = topic_with_partitions(&client, 1);
    let tp = TopicPartition::new(&topic, 0);
    produce_timed(&client, &topic, 0, 0, 10);
    // A committed offset, which the seeks must win over.
    let group = unique_name("offsets-seek");
    {
        let mut c = consumer(&client, &group, &topic, OffsetReset::Latest);
        until_assigned(&mut c, 1);
        c.commit_offsets(&BTreeMap::from([(tp.clone(), 7)])).unwrap();
        c.close().unwrap();
    }
    let mut c = consumer(&client, &group, &topic, OffsetReset::Latest);
    // The first poll that brings the assignment may fetch from the committed offset 7; a seek
    // right after it applies to the next poll whatever was buffered.
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.assignment().is_empty() {
        assert!(Instant::now() < deadline);
        c.poll(Duration::from_millis(200)).unwrap();
    }
    assert!(matches!(
        c.seek_to_beginning(&[TopicPartition::new(&topic, 9)]),
        Err(Error::NotAssigned(_))
    ));
    c.seek_to_beginning(&[]).unwrap();
    assert_eq!(c.position(&tp), None, "resolved by the next poll, as in Java");
    let got = records(&mut c, 1);
    assert_eq!(got[0].offset, 0, "seek_to_beginning");
    c.seek_to_timestamp(std::slice::from_ref(&tp), BASE + 4 * STEP - 1)
        .unwrap();
    assert_eq!(records(&mut c, 1)[0].offset, 4, "seek_to_timestamp");
    // A time after every record goes to the end.
    c.seek_to_timestamp(&[], BASE + 1000 * STEP).unwrap();
    assert!(c.poll(Duration::from_millis(300)).unwrap().records.is_empty());
    assert_eq!(c.position(&tp), Some(10));
    c.seek(&tp, 2).unwrap();
    c.seek_to_end(std::slice::from_ref(&tp)).unwrap();
    assert!(c.poll(Duration::from_millis(300)).unwrap().records.is_empty());
    assert_eq!(c.position(&tp), Some(10), "seek_to_end");
    produce_timed(&client, &topic, 0, 10, 1);
    assert_eq!(records(&mut c, 1)[0].offset, 10);
    // A rewind by seek_to_beginning may be committed, as with seek.
    c.seek_to_beginning(&[]).unwrap();
    let again = records(&mut c, 1);
    assert_eq!(again[0].offset, 0);
    c.commit_records(&again[..1]).unwrap();
    assert_eq!(c.committed(std::slice::from_ref(&tp)).unwrap()[&tp], Some(1));
    c.close().unwrap();
}

#[test]
fn commit_records_and_metadata_strings_are_what_the_group_reads_back() {
    let b = broker::shared();
    let client = client(b.bootstrap());
    let topic = topic_with_partitions(&client, 1);
    let tp = TopicPartition::new(&topic, 0);
    produce_timed(&client, &topic, 0, 0, 10);
    let group = unique_name("offsets-commit");
    let mut c = consumer(&client, &group, &topic, OffsetReset::Earliest);
    let got = records(&mut c, 10);
    // The job processed the first four only (a snapshot), though poll returned more.
    c.commit_records(&got[..4]).unwrap();
    let committed = c.committed_with_metadata(std::slice::from_ref(&tp)).unwrap();
    let first = committed[&tp].clone().unwrap();
    assert_eq!(first.offset, 4);
    assert_eq!(first.leader_epoch, got[3].leader_epoch);
    c.commit_records(&[]).unwrap();
    let with = OffsetAndMetadata::new(6).with_metadata("job-42: rows 0-5 written");
    c.commit_offsets_with_metadata(&BTreeMap::from([(tp.clone(), with)]))
        .unwrap();
    let read = c.committed_with_metadata(std::slice::from_ref(&tp)).unwrap()[&tp]
        .clone()
        .unwrap();
    assert_eq!(
        (read.offset, read.metadata.as_str()),
        (6, "job-42: rows 0-5 written")
    );
    c.close().unwrap();
    // The next member of the group starts exactly there.
    let mut next = consumer(&client, &group, &topic, OffsetReset::Earliest);
    assert_eq!(records(&mut next, 1)[0].offset, 6);
    next.close().unwrap();
}

/// A Java producer that leaves a transaction open: 3 records, neither committed nor aborted.
const OPEN_TRANSACTION: &str = r#"
import java.util.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.StringSerializer;
public class OpenTransaction {
    public static void main(String[] a) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", a[0]);
        p.put("transactional.id", a[3]);
        p.put("transaction.timeout.ms", "60000");
        KafkaProducer<String, String> producer =
            new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
        producer.initTransactions();
        producer.beginTransaction();
        for (int i = 0; i < Integer.parseInt(a[2]); i++) {
            producer.send(new ProducerRecord<>(a[1], 0, null, "open-" + i)).get();
        }
        producer.flush();
        // Neither commit nor abort: a closing producer would abort.
        Runtime.getRuntime().halt(0);
    }
}
"#;

#[test]
fn end_offsets_under_read_committed_stop_at_an_open_transaction() {
    let broker = broker::shared();
    let client = client(broker.bootstrap());
    let topic = topic_with_partitions(&client, 1);
    produce_timed(&client, &topic, 0, 0, 5);
    let tp = TopicPartition::new(&topic, 0);
    java::run_source(
        broker.version(),
        "OpenTransaction",
        OPEN_TRANSACTION,
        &[broker.bootstrap(), &topic, "3", &unique_name("offs-lso-tx")],
    );
    let end = |level| {
        let mut c = client
            .consumer(&unique_name("offs-lso"))
            .subscribe([topic.as_str()])
            .isolation_level(level)
            .build()
            .unwrap();
        let end = c.end_offsets(std::slice::from_ref(&tp)).unwrap()[&tp];
        c.close().unwrap();
        end
    };
    assert_eq!(end(IsolationLevel::ReadUncommitted), 8, "the high watermark");
    assert_eq!(
        end(IsolationLevel::ReadCommitted),
        5,
        "the last stable offset: the open transaction's first record"
    );
}

/// A broker farther away than the poll's timeout (ListOffsets and OffsetFetch answered after
/// 300 ms, polls of 100 ms: a consumer polling often against a distant cluster, or a loaded
/// one) must still resolve positions and deliver, as Java's consumer does by keeping the
/// lookup in flight across polls.
#[test]
fn lookups_slower_than_the_poll_timeout_still_resolve_positions() {
    use crate::support::proxy::{self, Proxy};
    use kafka_group::ApiKey;
    let upstream = proxy::upstream_for("kraft-4.0");
    let proxy = Proxy::start(upstream, "kraft-4.0");
    let client = client(&proxy.bootstrap());
    let topic = topic_with_partitions(&client, 1);
    let tp = TopicPartition::new(&topic, 0);
    produce_timed(&client, &topic, 0, 0, 10);
    let group = unique_name("offsets-slow");
    proxy.delay_api(ApiKey::ListOffsets, Duration::from_millis(300));
    proxy.delay_api(ApiKey::OffsetFetch, Duration::from_millis(300));
    let mut c = consumer(&client, &group, &topic, OffsetReset::Earliest);
    // After the assignment: OffsetFetch, then ListOffsets for earliest.
    let (poll, within) = (Duration::from_millis(100), Duration::from_secs(30));
    let got = records_polling(&mut c, 10, poll, within);
    assert_eq!(got[0].offset, 0);
    c.seek_to_timestamp(std::slice::from_ref(&tp), BASE + 4 * STEP - 1)
        .unwrap();
    assert_eq!(
        records_polling(&mut c, 1, poll, within)[0].offset,
        4,
        "seek_to_timestamp"
    );
    c.close().unwrap();
}
