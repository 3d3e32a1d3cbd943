//! A [`Consumer`](super::Consumer) of a consumer-protocol group (KIP-848) end to end on the
//! scripted broker: what its polls tell the application about the assignment, against what it
//! actually fetches.

use crate::client::Client;
use crate::group::TopicPartition;
use crate::net::script::{topic_id, Answer, Script};
use crate::protocol::messages::consumer_group_heartbeat_response as heartbeat;
use crate::protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use crate::protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
};
use crate::protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, FetchRequest, FetchResponse,
    OffsetFetchRequest, OffsetFetchResponse,
};
use crate::protocol::{ApiKey, VersionRange};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MS: Duration = Duration::from_millis(1);

fn script() -> Script {
    let s = Script::new();
    s.cluster(&[(0, "b0", 9092), (1, "b1", 9092)]).coordinator(1);
    s.topic("t", 2);
    // OffsetFetch by topic name (v8–v9); v10 names topics by id, which this script does not
    // answer.
    s.version_range(ApiKey::OffsetFetch, Some(VersionRange { min: 0, max: 9 }));
    s
}

fn reply(epoch: i32, partitions: Option<&[i32]>) -> Answer<ConsumerGroupHeartbeatResponse> {
    Answer::Reply(ConsumerGroupHeartbeatResponse {
        member_epoch: epoch,
        heartbeat_interval_ms: 50,
        assignment: partitions.map(|ps| heartbeat::Assignment {
            topic_partitions: vec![heartbeat::TopicPartitions {
                topic_id: topic_id("t"),
                partitions: ps.iter().copied().collect(),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// Every partition asked for is committed at offset 0.
fn committed_at_0(req: &OffsetFetchRequest) -> OffsetFetchResponse {
    OffsetFetchResponse {
        groups: req
            .groups
            .iter()
            .map(|g| OffsetFetchResponseGroup {
                group_id: g.group_id.clone(),
                topics: g
                    .topics
                    .iter()
                    .flatten()
                    .map(|t| OffsetFetchResponseTopics {
                        name: t.name.clone(),
                        partitions: t
                            .partition_indexes
                            .iter()
                            .map(|p| OffsetFetchResponsePartitions {
                                partition_index: *p,
                                committed_offset: 0,
                                committed_leader_epoch: -1,
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// An empty log: every partition asked for answers with no records, after `fetch.max.wait.ms`.
fn nothing_yet(req: &FetchRequest) -> Answer<FetchResponse> {
    Answer::Delayed(
        50 * MS,
        FetchResponse {
            responses: req
                .topics
                .iter()
                .map(|t| FetchableTopicResponse {
                    topic: t.topic.clone(),
                    topic_id: t.topic_id,
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| PartitionData {
                            partition_index: p.partition,
                            high_watermark: 0,
                            records: None,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        },
    )
}

/// The coordinator grows the assignment in two steps, the second while the poll that reported
/// the first is still running (it is looking the committed offsets up): partition 0 at epoch 1,
/// then 0 and 1 at epoch 2. An application that tracks its partitions by what each poll's
/// `assigned()`, `revoked()` and `lost()` say must end up holding exactly what the consumer
/// fetches after every poll; a poll that carried two `Assigned` events but let `assigned()`
/// show only the last one hid partition 0 from it while its records were handed out.
#[test]
fn each_poll_reports_every_partition_it_starts_fetching() {
    let s = script();
    let looked_up = Arc::new(AtomicBool::new(false));
    let seen = looked_up.clone();
    s.on::<OffsetFetchRequest>(move |req, _| {
        seen.store(true, Ordering::SeqCst);
        Answer::Reply(committed_at_0(req))
    });
    let grown = looked_up.clone();
    s.on::<ConsumerGroupHeartbeatRequest>(move |req, _| match req.member_epoch {
        e if e < 0 => reply(e, None),
        0 => reply(1, Some(&[0])),
        _ if grown.load(Ordering::SeqCst) => reply(2, Some(&[0, 1])),
        _ => reply(1, None),
    });
    s.on::<FetchRequest>(|req, _| nothing_yet(req));
    let client = s
        .client(
            Client::builder()
                .bootstrap_servers("b0:9092")
                .reconnect_backoff(10 * MS)
                .reconnect_backoff_max(50 * MS),
        )
        .unwrap();
    let mut c = client
        .consumer("g")
        .subscribe(["t"])
        .group_protocol(crate::GroupProtocol::Consumer)
        .enable_auto_commit(false)
        .fetch_max_wait(50 * MS)
        .retry_backoff(20 * MS)
        .build()
        .unwrap();
    let mut held: BTreeSet<TopicPartition> = BTreeSet::new();
    let until = Instant::now() + Duration::from_secs(20);
    let mut polls = Vec::new();
    loop {
        let polled = c.poll(Duration::from_secs(2)).unwrap();
        if let Some(lost) = polled.lost() {
            lost.iter().for_each(|tp| {
                held.remove(tp);
            });
        }
        if let Some(revoked) = polled.revoked() {
            revoked.iter().for_each(|tp| {
                held.remove(tp);
            });
        }
        if let Some(assigned) = polled.assigned() {
            held.extend(assigned.iter().cloned());
        }
        polls.push(polled.events);
        let fetching: BTreeSet<TopicPartition> = c.assignment().into_iter().collect();
        assert_eq!(
            held, fetching,
            "what the polls reported (left) is not what the consumer fetches (right); the \
             polls' events: {polls:?}"
        );
        if fetching.len() == 2 {
            break;
        }
        assert!(Instant::now() < until, "partition 1 never came; events {polls:?}");
    }
    c.close().unwrap();
}
