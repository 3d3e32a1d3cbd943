//! A read_committed and a read_uncommitted [`Consumer`](super::Consumer) end to end on the
//! scripted broker, which answers each fetch with exactly one batch of a transactional log
//! (as a broker does under a small `max.partition.fetch.bytes`): aborted records arrive in
//! fetches before their abort marker, and several fetches bring nothing but a marker. What
//! the consumer hands out and where its position ends are checked exactly.

use super::fetcher::tests::txn_batch_in;
use crate::client::Client;
use crate::group::TopicPartition;
use crate::net::script::{topic_id, Answer, Script};
use crate::protocol::messages::fetch_response::{AbortedTransaction, FetchableTopicResponse, PartitionData};
use crate::protocol::messages::{FetchRequest, FetchResponse};
use crate::IsolationLevel;
use bytes::Bytes;
use kafka_protocol::records::Compression as Kp;
use std::time::{Duration, Instant};

/// Producer 7 writes 0-1 and 4 and aborts (marker at 6); producer 8 writes 2-3 and commits
/// (marker at 5), interleaved with it; producer 9 writes 7 and commits (marker at 8). Each
/// data batch with another codec. `(first offset, last offset, bytes)` per batch.
fn log() -> Vec<(i64, i64, Bytes)> {
    vec![
        (0, 1, txn_batch_in(0, 7, 2, None, 0, Kp::Gzip)),
        (2, 3, txn_batch_in(2, 8, 2, None, 0, Kp::Lz4)),
        (4, 4, txn_batch_in(4, 7, 1, None, 0, Kp::Zstd)),
        (5, 5, txn_batch_in(5, 8, 1, Some(true), 0, Kp::None)),
        (6, 6, txn_batch_in(6, 7, 1, Some(false), 0, Kp::None)),
        (7, 7, txn_batch_in(7, 9, 1, None, 0, Kp::Snappy)),
        (8, 8, txn_batch_in(8, 9, 1, Some(true), 0, Kp::None)),
    ]
}

const LOG_END: i64 = 9;

/// The one batch holding the offset fetched, and (read_committed only, as Kafka does) the
/// aborted transactions the fetched range overlaps: producer 7's, up to its marker at 6.
fn answer(req: &FetchRequest) -> Answer<FetchResponse> {
    let t = &req.topics[0];
    let p = &t.partitions[0];
    let from = p.fetch_offset;
    let batch = log()
        .into_iter()
        .find(|&(first, last, _)| first <= from && from <= last);
    let aborted = (req.isolation_level == 1).then(|| {
        let mut list = Vec::new();
        if from <= 6 {
            list.push(AbortedTransaction {
                producer_id: 7,
                first_offset: 0,
                ..Default::default()
            });
        }
        list
    });
    let data = PartitionData {
        partition_index: p.partition,
        high_watermark: LOG_END,
        last_stable_offset: LOG_END,
        aborted_transactions: aborted,
        records: batch.map(|(_, _, bytes)| bytes),
        ..Default::default()
    };
    let resp = FetchResponse {
        responses: vec![FetchableTopicResponse {
            topic: t.topic.clone(),
            topic_id: t.topic_id,
            partitions: vec![data],
            ..Default::default()
        }],
        ..Default::default()
    };
    if from >= LOG_END {
        Answer::Delayed(Duration::from_millis(20), resp)
    } else {
        Answer::Reply(resp)
    }
}

/// The values `isolation` hands out from offset 0 until its position is the log end (failing
/// after 10 s with the position reached), then three more polls to see nothing else comes.
fn read(isolation: IsolationLevel) -> Vec<(i64, String)> {
    let s = Script::new();
    s.cluster(&[(0, "b0", 9092)]).topic("t", 1);
    assert_ne!(topic_id("t"), crate::protocol::Uuid::NIL);
    s.on::<FetchRequest>(|req, _| answer(req));
    let client = s.client(Client::builder().bootstrap_servers("b0:9092")).unwrap();
    let tp = TopicPartition::new("t", 0);
    let mut c = client
        .consumer_without_group()
        .assign([tp.clone()])
        .isolation_level(isolation)
        .fetch_max_wait(Duration::from_millis(20))
        .build()
        .unwrap();
    c.seek(&tp, 0).unwrap();
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut take = |c: &mut super::Consumer| {
        for r in c.poll(Duration::from_millis(50)).unwrap().records {
            let v = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
            got.push((r.offset, v));
        }
    };
    while c.position(&tp) != Some(LOG_END) {
        assert!(
            Instant::now() < deadline,
            "{isolation:?}: position {:?}, never the log end {LOG_END}",
            c.position(&tp)
        );
        take(&mut c);
    }
    for _ in 0..3 {
        take(&mut c);
    }
    assert_eq!(c.position(&tp), Some(LOG_END), "{isolation:?}");
    got
}

fn values(offsets: &[i64]) -> Vec<(i64, String)> {
    offsets.iter().map(|&o| (o, format!("v{o}"))).collect()
}

#[test]
fn read_committed_one_batch_a_fetch_skips_aborted_records_and_moves_past_markers() {
    assert_eq!(read(IsolationLevel::ReadCommitted), values(&[2, 3, 7]));
}

#[test]
fn read_uncommitted_one_batch_a_fetch_returns_aborted_records_but_no_marker() {
    assert_eq!(read(IsolationLevel::ReadUncommitted), values(&[0, 1, 2, 3, 4, 7]));
}
