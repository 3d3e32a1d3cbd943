//! Helpers shared by the integration tests.

// Each test module uses the helpers it needs; the ones it does not are not dead code.
#![allow(dead_code)]

pub mod big_metadata;
pub mod broker;
pub mod certs;
pub mod checker;
pub mod java;
pub mod load;
pub mod process;
pub mod proxy;
pub mod rdkafka;
pub mod rng;
pub mod scripted;
pub mod secure;
pub mod wire;

use kafka_group::{Client, NewTopic};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What a test adds to a bound the code promises (a configured timeout) before calling it
/// broken: room for a loaded 2-core machine, where brokers and other test binaries share the
/// cores and a thread may wait seconds for one. A test whose point is that something returns
/// well before another timeout makes that timeout larger than its bound plus this.
pub const LOAD_MARGIN: Duration = Duration::from_secs(10);

/// A topic or group name no other test uses: tests run in parallel against one shared broker,
/// and an external one (`KAFKA_BOOTSTRAP`) keeps names from earlier runs. The pid and counter
/// separate tests of this run, the timestamp runs whose pids coincide. Only characters Kafka
/// allows in topic names.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{prefix}-{}-{n}-{millis}", std::process::id())
}

/// Creates a topic named after `prefix` (see [`unique_name`]) through `client`; returns its name
/// once every partition has a leader.
///
/// Kafka 0.10.0 has no CreateTopics: there (the compatibility suite's shared broker) the topic is
/// made with the broker's own TopicCommand instead.
pub fn create_topic(client: &Client, prefix: &str, partitions: i32, replication: i16) -> String {
    let name = unique_name(prefix);
    let created = client.admin().create_topics(
        &[NewTopic::new(&name, partitions, replication)],
        Duration::from_secs(60),
    );
    match created {
        Err(kafka_group::Error::UnsupportedVersion {
            api: kafka_group::ApiKey::CreateTopics,
            broker: None,
            ..
        }) if replication == 1 => broker::shared().create_topic_with_zookeeper(&name, partitions),
        other => other.unwrap(),
    }
    name
}

/// Sends the crate's log lines (`RUST_LOG=info`, `=debug` for the heartbeat log) to the test
/// output; called by every fixture so that each test gets it without thinking about it.
/// Produces the raw `batch` to partition 0 of `topic` on broker `leader` (acks=all), at the
/// version negotiated with it: that version and the partition's answer.
pub fn raw_produce(
    client: &Client,
    leader: i32,
    topic: &str,
    batch: bytes::Bytes,
) -> (
    i16,
    kafka_group::unstable::protocol::messages::produce_response::PartitionProduceResponse,
) {
    use kafka_group::unstable::protocol::messages::produce_request::{
        PartitionProduceData, TopicProduceData,
    };
    use kafka_group::unstable::protocol::messages::ProduceRequest;
    use kafka_group::unstable::RawClient;
    let mut used = -1;
    let mut resp = client
        .send_to(leader, |v| {
            used = v;
            ProduceRequest {
                acks: -1,
                timeout_ms: 30_000,
                topic_data: vec![TopicProduceData {
                    name: topic.into(),
                    partition_data: vec![PartitionProduceData {
                        index: 0,
                        records: Some(batch),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }
        })
        .unwrap();
    (used, resp.responses.remove(0).partition_responses.remove(0))
}

pub fn init_logs() {
    let _ = env_logger::builder().is_test(true).try_init();
}

/// Polls `cond` every 20 ms until it holds; panics naming `what` after `timeout`.
pub fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if cond() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("timed out after {timeout:?} waiting for {what}");
}

/// The names of this process's threads (Linux: `/proc/self/task/*/comm`, at most 15 bytes).
pub fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task (Linux only)")
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .map(|s| s.trim().to_string())
        .collect()
}
