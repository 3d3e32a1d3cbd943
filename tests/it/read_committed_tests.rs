//! read_committed against real Kafka, with Java's and librdkafka's transactional producers as
//! the writers: committed transactions are read exactly once, aborted ones never, and no
//! transaction marker is ever handed out (under read_uncommitted either, which does return the
//! aborted records, so each test can fail). Every log ends with a commit marker, so a reader
//! whose position did not move past markers would never reach the end offset.
//!
//! Each writer follows one script on partition 0, with two transactional ids A and B:
//! 1. A commits `c0..c4`;
//! 2. A and B interleave, one record each in turn: A's `x0..x3` (aborted), B's `b0..b3`
//!    (committed);
//! 3. A writes three batches `big<r>-<j>` and aborts;
//! 4. B commits `last`.

use crate::group_tests::client;
use crate::support::{broker, java, rdkafka, unique_name};
use kafka_group::{Client, IsolationLevel, TopicPartition};
use std::time::{Duration, Instant};

/// The records the script commits and those it aborts, with the writer's `prefix`.
fn expected(prefix: &str) -> (Vec<String>, Vec<String>) {
    let mut committed: Vec<String> = (0..5).map(|i| format!("{prefix}-c{i}")).collect();
    committed.extend((0..4).map(|i| format!("{prefix}-b{i}")));
    committed.push(format!("{prefix}-last"));
    let mut aborted: Vec<String> = (0..4).map(|i| format!("{prefix}-x{i}")).collect();
    for r in 0..3 {
        aborted.extend((0..5).map(|j| format!("{prefix}-big{r}-{j}")));
    }
    committed.sort();
    aborted.sort();
    (committed, aborted)
}

/// The script above for Java's KafkaProducer. Arguments: bootstrap, topic, compression.type,
/// transactional id A, transactional id B, prefix of the values.
const TRANSACTIONS: &str = r#"
import java.util.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.StringSerializer;
public class Transactions {
    static KafkaProducer<String, String> open(String[] a, String id) {
        Properties p = new Properties();
        p.put("bootstrap.servers", a[0]);
        p.put("compression.type", a[2]);
        p.put("transactional.id", id);
        p.put("linger.ms", "0");
        KafkaProducer<String, String> producer =
            new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
        producer.initTransactions();
        return producer;
    }
    static void send(KafkaProducer<String, String> p, String topic, String value) {
        p.send(new ProducerRecord<>(topic, 0, null, value));
    }
    public static void main(String[] a) throws Exception {
        String topic = a[1], x = a[5];
        KafkaProducer<String, String> pa = open(a, a[3]), pb = open(a, a[4]);
        pa.beginTransaction();
        for (int i = 0; i < 5; i++) send(pa, topic, x + "-c" + i);
        pa.commitTransaction();
        pa.beginTransaction();
        pb.beginTransaction();
        for (int i = 0; i < 4; i++) {
            send(pa, topic, x + "-x" + i);
            pa.flush();
            send(pb, topic, x + "-b" + i);
            pb.flush();
        }
        pa.abortTransaction();
        pb.commitTransaction();
        pa.beginTransaction();
        for (int r = 0; r < 3; r++) {
            for (int j = 0; j < 5; j++) send(pa, topic, x + "-big" + r + "-" + j);
            pa.flush();
        }
        pa.abortTransaction();
        pb.beginTransaction();
        send(pb, topic, x + "-last");
        pb.commitTransaction();
        pa.close();
        pb.close();
    }
}
"#;

/// Everything `isolation` hands out of partition 0 from offset 0 to the end offset, sorted;
/// fails if the position does not reach the end offset (the high watermark: every
/// transaction has ended, so the last stable offset is the same) within a minute.
fn read_all(
    client: &Client,
    topic: &str,
    isolation: IsolationLevel,
    fetch_bytes: Option<usize>,
) -> Vec<String> {
    let tp = TopicPartition::new(topic, 0);
    let mut builder = client
        .consumer_without_group()
        .assign([tp.clone()])
        .isolation_level(isolation)
        .fetch_max_wait(Duration::from_millis(100));
    if let Some(bytes) = fetch_bytes {
        builder = builder.fetch_max_bytes(bytes).max_partition_fetch_bytes(bytes);
    }
    let mut c = builder.build().unwrap();
    let end = c.end_offsets(std::slice::from_ref(&tp)).unwrap()[&tp];
    c.seek(&tp, 0).unwrap();
    let mut got: Vec<(i64, String)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.position(&tp) != Some(end) {
        assert!(
            Instant::now() < deadline,
            "{isolation:?}: position {:?}, never the end offset {end}; read {got:?}",
            c.position(&tp)
        );
        for r in c.poll(Duration::from_millis(200)).unwrap().records {
            let v = r.value.as_deref().unwrap_or_default();
            got.push((r.offset, String::from_utf8_lossy(v).into_owned()));
        }
    }
    // Nothing more: no marker and no record twice.
    for _ in 0..3 {
        let more = c.poll(Duration::from_millis(200)).unwrap().records;
        assert!(
            more.is_empty(),
            "{isolation:?}: past the end offset {end}: {more:?}"
        );
    }
    assert_eq!(c.position(&tp), Some(end));
    c.close().unwrap();
    let offsets: Vec<i64> = got.iter().map(|(o, _)| *o).collect();
    assert!(
        offsets.windows(2).all(|w| w[0] < w[1]),
        "{isolation:?}: offsets out of order {offsets:?}"
    );
    let mut values: Vec<String> = got.into_iter().map(|(_, v)| v).collect();
    values.sort();
    values
}

/// Reads what the writer left in `topic` under both isolation levels, with default and with
/// one-batch fetches (which put abort markers in later fetches than their records, and make
/// fetches of nothing but a marker).
fn check(client: &Client, topic: &str, prefix: &str) {
    let (committed, aborted) = expected(prefix);
    let mut everything: Vec<String> = committed.iter().chain(&aborted).cloned().collect();
    everything.sort();
    for fetch_bytes in [None, Some(1)] {
        assert_eq!(
            read_all(client, topic, IsolationLevel::ReadCommitted, fetch_bytes),
            committed,
            "read_committed, fetch bytes {fetch_bytes:?}"
        );
        assert_eq!(
            read_all(client, topic, IsolationLevel::ReadUncommitted, fetch_bytes),
            everything,
            "read_uncommitted, fetch bytes {fetch_bytes:?}"
        );
    }
}

fn java_writer(compression: &str) {
    let broker = broker::shared();
    let client = client(broker.bootstrap());
    let topic = crate::support::create_topic(&client, &format!("rc-java-{compression}"), 1, 1);
    let prefix = format!("java-{compression}");
    java::run_source(
        broker.version(),
        "Transactions",
        TRANSACTIONS,
        &[
            broker.bootstrap(),
            &topic,
            compression,
            &unique_name("rc-a"),
            &unique_name("rc-b"),
            &prefix,
        ],
    );
    check(&client, &topic, &prefix);
}

#[test]
fn read_committed_of_java_transactions_uncompressed() {
    java_writer("none");
}

#[test]
fn read_committed_of_java_transactions_gzip() {
    java_writer("gzip");
}

#[test]
fn read_committed_of_java_transactions_snappy() {
    java_writer("snappy");
}

#[test]
fn read_committed_of_java_transactions_lz4() {
    java_writer("lz4");
}

#[test]
fn read_committed_of_java_transactions_zstd() {
    java_writer("zstd");
}

#[test]
fn read_committed_of_librdkafka_transactions() {
    let broker = broker::shared();
    let client = client(broker.bootstrap());
    let topic = crate::support::create_topic(&client, "rc-rdkafka", 1, 1);
    let prefix = "rdkafka";
    let args = [
        broker.bootstrap().to_string(),
        topic.clone(),
        unique_name("rc-a"),
        unique_name("rc-b"),
        prefix.to_string(),
    ];
    let props = [("compression.type", "lz4".to_string())];
    let json = rdkafka::run("produce-transactions", &args, &props, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("librdkafka transactions to {topic}: {e}"));
    let (committed, aborted) = expected(prefix);
    assert_eq!(json["committed"], committed.len(), "{json}");
    assert_eq!(json["aborted"], aborted.len(), "{json}");
    check(&client, &topic, prefix);
}
