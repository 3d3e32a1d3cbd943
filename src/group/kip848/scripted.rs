//! The consumer-protocol member (`group.protocol=consumer`) end to end through a
//! [`GroupMember`] on the scripted broker: what its heartbeats carry, how it reports and
//! acknowledges what the coordinator assigns and revokes, how it leaves, and the error paths a
//! real broker will not produce on demand (a broker advertising the protocol and refusing it,
//! an instance id never released).

use crate::group::assignment::{Assignment, TopicPartition};
use crate::group::classic::scripted::{client, poll_until};
use crate::group::GroupProtocolPolicy;
use crate::group::{GroupEvent, GroupMember, RebalanceProtocol};
use crate::net::script::{topic_id, Answer, Script};
use crate::protocol::messages::consumer_group_heartbeat_response as response;
use crate::protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, HeartbeatRequest, HeartbeatResponse,
    JoinGroupResponse, SyncGroupResponse,
};
use crate::protocol::messages::{JoinGroupRequest, SyncGroupRequest};
use crate::{Error, KafkaCode};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

const MS: Duration = Duration::from_millis(1);
/// How long a condition is waited for before the test fails (never reached when it passes).
const WAIT: Duration = Duration::from_secs(30);

fn script() -> Script {
    let s = Script::new();
    s.cluster(&[(0, "b0", 9092), (1, "b1", 9092)]).coordinator(1);
    s.topic("t", 4);
    s
}

fn member(s: &Script, instance: Option<&str>, policy: GroupProtocolPolicy) -> GroupMember {
    let mut b = client(s)
        .member("g")
        .subscribe(["t"])
        .group_protocol(crate::GroupProtocol::Consumer)
        .group_protocol_policy(policy)
        .retry_backoff(20 * MS)
        .unreleased_instance_id_timeout(200 * MS)
        .close_timeout(Duration::from_secs(1));
    if let Some(i) = instance {
        b = b.group_instance_id(i);
    }
    b.build().unwrap()
}

fn reply(epoch: i32, partitions: Option<&[i32]>) -> Answer<ConsumerGroupHeartbeatResponse> {
    Answer::Reply(ConsumerGroupHeartbeatResponse {
        member_epoch: epoch,
        heartbeat_interval_ms: 50,
        assignment: partitions.map(|ps| response::Assignment {
            topic_partitions: vec![response::TopicPartitions {
                topic_id: topic_id("t"),
                partitions: ps.iter().copied().collect(),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    })
}

fn refuse(code: KafkaCode) -> Answer<ConsumerGroupHeartbeatResponse> {
    Answer::Reply(ConsumerGroupHeartbeatResponse {
        error_code: code.code(),
        ..Default::default()
    })
}

fn heartbeats(s: &Script) -> Vec<ConsumerGroupHeartbeatRequest> {
    s.requests::<ConsumerGroupHeartbeatRequest>()
}

fn tps(partitions: &[i32]) -> Vec<TopicPartition> {
    partitions.iter().map(|p| TopicPartition::new("t", *p)).collect()
}

fn owned_in(hb: &ConsumerGroupHeartbeatRequest) -> Option<Vec<i32>> {
    hb.topic_partitions
        .as_ref()
        .map(|ts| ts.iter().flat_map(|t| t.partitions.iter().copied()).collect())
}

#[test]
fn a_member_joins_names_its_partitions_and_acknowledges_a_revocation_after_the_application_had_it() {
    let s = script();
    // Epoch 1 with 0..=2 until the test shrinks the target to 0 only, at epoch 2.
    let shrink = Arc::new(AtomicBool::new(false));
    let shrunk = shrink.clone();
    s.on::<ConsumerGroupHeartbeatRequest>(move |_, v| {
        assert_eq!(v, 1);
        match shrunk.load(std::sync::atomic::Ordering::SeqCst) {
            false => reply(1, Some(&[0, 1, 2])),
            true => reply(2, Some(&[0])),
        }
    });
    let mut m = member(&s, Some("i-1"), GroupProtocolPolicy::Error);
    let events = m.join(WAIT).unwrap();
    assert_eq!(
        events,
        [GroupEvent::Assigned {
            generation: 1,
            partitions: tps(&[0, 1, 2]),
            rebalanced: None
        }]
    );
    assert_eq!(m.rebalance_protocol(), RebalanceProtocol::Cooperative);
    let join = &heartbeats(&s)[0];
    assert_eq!(join.member_epoch, 0);
    assert_eq!(
        join.member_id.len(),
        22,
        "a client-made id (KIP-1082): {:?}",
        join.member_id
    );
    assert_eq!(join.instance_id.as_deref(), Some("i-1"));
    assert_eq!(join.subscribed_topic_names.as_ref().map(Vec::len), Some(1));
    shrink.store(true, std::sync::atomic::Ordering::SeqCst);
    let events = poll_until(&mut m, "the revocation", |m| m.assignment().len() == 1);
    assert_eq!(
        events,
        [GroupEvent::Revoked {
            generation: 2,
            partitions: tps(&[1, 2])
        }]
    );
    // Not acknowledged until the application polls again (it commits in between).
    std::thread::sleep(200 * MS);
    assert!(
        heartbeats(&s).iter().all(|hb| owned_in(hb) != Some(vec![0])),
        "acknowledged before the application was done"
    );
    m.poll(10 * MS).unwrap();
    poll_until(&mut m, "the acknowledgement", |_| {
        heartbeats(&s).iter().any(|hb| owned_in(hb) == Some(vec![0]))
    });
    assert_eq!(m.generation().map(|g| g.id), Some(2));
    // Every heartbeat after the join carries the same member id.
    let ids: std::collections::BTreeSet<String> =
        heartbeats(&s).iter().map(|hb| hb.member_id.to_string()).collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
}

#[test]
fn close_sends_the_static_leave_epoch_and_leave_group_the_final_one() {
    for (instance, leave_group, epoch) in [
        (Some("i-1"), false, -2),
        (Some("i-1"), true, -1),
        (None, false, -1),
    ] {
        let s = script();
        s.on::<ConsumerGroupHeartbeatRequest>(|req, _| match req.member_epoch {
            e if e < 0 => reply(e, None),
            _ => reply(1, Some(&[0, 1])),
        });
        let mut m = member(&s, instance, GroupProtocolPolicy::Error);
        m.join(WAIT).unwrap();
        if leave_group {
            m.leave_group().unwrap();
        } else {
            m.close().unwrap();
        }
        let last = heartbeats(&s).pop().unwrap();
        assert_eq!(last.member_epoch, epoch, "{instance:?} leave_group={leave_group}");
    }
}

#[test]
fn a_broker_that_advertises_the_protocol_but_refuses_it_is_one_error_or_classic_by_policy() {
    let s = script();
    s.on::<ConsumerGroupHeartbeatRequest>(|_, _| refuse(KafkaCode::UnsupportedVersion));
    let mut m = member(&s, Some("i-1"), GroupProtocolPolicy::Error);
    let e = m.join(WAIT).unwrap_err();
    assert_eq!(e.kafka_code(), Some(KafkaCode::UnsupportedVersion), "{e}");
    // The fallback joins with JoinGroup/SyncGroup instead.
    s.on::<JoinGroupRequest>(|req, _| {
        Answer::Reply(JoinGroupResponse {
            generation_id: 1,
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            leader: "other".into(),
            member_id: if req.member_id.is_empty() {
                "m-1".into()
            } else {
                req.member_id.clone()
            },
            ..Default::default()
        })
    });
    s.on::<SyncGroupRequest>(|_, _| {
        let a = Assignment {
            partitions: [("t".to_string(), vec![0, 1])].into(),
            user_data: None,
        };
        Answer::Reply(SyncGroupResponse {
            assignment: a.encode(),
            ..Default::default()
        })
    });
    s.on::<HeartbeatRequest>(|_, _| Answer::Reply(HeartbeatResponse::default()));
    let mut m = member(&s, Some("i-1"), GroupProtocolPolicy::FallBackToClassic);
    let events = m.join(WAIT).unwrap();
    assert_eq!(m.group_protocol(), crate::GroupProtocol::Classic);
    assert!(
        matches!(&events[..], [GroupEvent::Assigned { partitions, .. }] if *partitions == tps(&[0, 1])),
        "{events:?}"
    );
}

#[test]
fn an_instance_id_never_released_stops_the_newcomer_with_a_clear_error() {
    let s = script();
    s.on::<ConsumerGroupHeartbeatRequest>(|_, _| refuse(KafkaCode::UnreleasedInstanceId));
    let mut m = member(&s, Some("i-1"), GroupProtocolPolicy::Error);
    let e = m.join(WAIT).unwrap_err();
    let Error::InstanceInUse {
        instance_id,
        attempts,
        ..
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!(instance_id, "i-1");
    // 200 ms of retries, one per 20 ms backoff, then the answer that ends it.
    assert_eq!(*attempts, 11);
    let sent = heartbeats(&s).len();
    assert!(matches!(m.poll(50 * MS), Err(Error::InstanceInUse { .. })));
    std::thread::sleep(100 * MS);
    assert_eq!(heartbeats(&s).len(), sent, "heartbeats stopped");
}

#[test]
fn a_fenced_member_loses_its_partitions_and_rejoins_at_epoch_0_with_its_ids() {
    let s = script();
    let fenced = Arc::new(AtomicBool::new(false));
    let f2 = fenced.clone();
    s.on::<ConsumerGroupHeartbeatRequest>(move |req, _| {
        if req.member_epoch == 0 {
            return reply(5, Some(&[0, 1]));
        }
        if !f2.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return refuse(KafkaCode::FencedMemberEpoch);
        }
        reply(5, None)
    });
    let mut m = member(&s, Some("i-1"), GroupProtocolPolicy::Error);
    // The fence may come while `join` still runs (the acknowledgement of the assignment is the
    // first heartbeat at epoch 5): its events count too.
    let mut events = m.join(WAIT).unwrap();
    let until = crate::deadline::after(WAIT);
    while events
        .iter()
        .filter(|e| matches!(e, GroupEvent::Assigned { .. }))
        .count()
        < 2
    {
        assert!(
            Instant::now() < until,
            "no rejoin; events {events:?}; epochs {:?}",
            heartbeats(&s).iter().map(|h| h.member_epoch).collect::<Vec<_>>()
        );
        events.extend(m.poll(10 * MS).unwrap());
    }
    assert!(
        matches!(&events[..], [GroupEvent::Assigned { .. }, GroupEvent::Lost { partitions, .. }, GroupEvent::Assigned { .. }] if *partitions == tps(&[0, 1])),
        "{events:?}"
    );
    let joins: Vec<_> = heartbeats(&s)
        .into_iter()
        .filter(|hb| hb.member_epoch == 0)
        .collect();
    assert_eq!(joins[0].member_id, joins[1].member_id);
    assert_eq!(joins[1].instance_id.as_deref(), Some("i-1"));
}
