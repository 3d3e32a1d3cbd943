//! The join loop and every heartbeat reaction, end to end through a [`GroupMember`] built on
//! the scripted broker ([`Script`]): no broker, no socket. Short timeouts (session 1.5 s,
//! heartbeat 100 ms) keep each test well under a few seconds; every wait is on a condition
//! with a deadline.

use super::*;
use crate::client::Client;
use crate::group::assignment::{Assignment, Subscription};
use crate::group::GroupMember;
use crate::net::script::{Answer, Script};
use crate::protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use crate::protocol::messages::join_group_response::JoinGroupResponseMember;
use crate::protocol::messages::{
    DescribeGroupsRequest, DescribeGroupsResponse, FindCoordinatorRequest, HeartbeatRequest,
    HeartbeatResponse, JoinGroupRequest, LeaveGroupRequest, LeaveGroupResponse, MetadataRequest,
    SyncGroupResponse,
};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

const MS: Duration = Duration::from_millis(1);
const SESSION: Duration = Duration::from_millis(1500);
const INTERVAL: Duration = Duration::from_millis(100);
/// How long a condition is waited for before the test fails (never reached when it passes, so
/// it costs nothing to leave a loaded machine plenty of room).
const WAIT: Duration = Duration::from_secs(30);

/// Two brokers, broker 1 the coordinator, topic `t` with 4 partitions; heartbeats and
/// LeaveGroup answered fine.
fn script() -> Script {
    let s = Script::new();
    s.cluster(&[(0, "b0", 9092), (1, "b1", 9092)]).coordinator(1);
    s.topic("t", 4);
    s.on::<HeartbeatRequest>(|_, _| heartbeat_answer(KafkaCode::None));
    s.on::<LeaveGroupRequest>(|_, _| Answer::Reply(LeaveGroupResponse::default()));
    s
}

fn heartbeat_answer(code: KafkaCode) -> Answer<HeartbeatResponse> {
    Answer::Reply(HeartbeatResponse {
        error_code: code.code(),
        ..Default::default()
    })
}

/// A coordinator for followers: each JoinGroup opens the next generation (from 1), led by
/// someone else; an empty member id gets `m-<n>` (n counting the joins), any other is kept.
/// SyncGroup gives `t` 0 and 1.
fn follower_group(s: &Script) {
    let generation = Arc::new(AtomicI32::new(0));
    s.on::<JoinGroupRequest>(move |req, _| {
        let n = generation.fetch_add(1, Ordering::SeqCst) + 1;
        let member_id = match req.member_id.as_str() {
            "" => format!("m-{n}"),
            id => id.to_string(),
        };
        Answer::Reply(join_reply(n, &member_id, "someone-else"))
    });
    let kept = assignment(&[0, 1]);
    s.on::<SyncGroupRequest>(move |req, _| sync_reply(req, &kept));
}

fn join_reply(generation: i32, member_id: &str, leader: &str) -> JoinGroupResponse {
    JoinGroupResponse {
        generation_id: generation,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        leader: leader.into(),
        member_id: member_id.into(),
        ..Default::default()
    }
}

/// The SyncGroup answer: what the leader assigned us if it assigned, else `kept`.
fn sync_reply(req: &SyncGroupRequest, kept: &Bytes) -> Answer<SyncGroupResponse> {
    let mine = req
        .assignments
        .iter()
        .find(|a| a.member_id == req.member_id)
        .map_or_else(|| kept.clone(), |a| a.assignment.clone());
    Answer::Reply(SyncGroupResponse {
        protocol_type: Some("consumer".into()),
        protocol_name: req.protocol_name.clone(),
        assignment: mine,
        ..Default::default()
    })
}

fn assignment(partitions: &[i32]) -> Bytes {
    Assignment {
        partitions: [("t".to_string(), partitions.to_vec())].into_iter().collect(),
        user_data: None,
    }
    .encode()
}

fn tps(partitions: &[i32]) -> Vec<TopicPartition> {
    partitions.iter().map(|p| TopicPartition::new("t", *p)).collect()
}

pub(in crate::group) fn client(s: &Script) -> Client {
    s.client(
        Client::builder()
            .bootstrap_servers("b0:9092")
            .reconnect_backoff(10 * MS)
            .reconnect_backoff_max(50 * MS),
    )
    .unwrap()
}

/// A member of `g` subscribed to `t`, static with `instance`, with short timeouts.
fn member(s: &Script, instance: Option<&str>) -> GroupMember {
    member_with_session(s, instance, SESSION)
}

/// [`member`] with another `session.timeout.ms`.
fn member_with_session(s: &Script, instance: Option<&str>, session: Duration) -> GroupMember {
    let mut b = client(s)
        .member("g")
        .subscribe(["t"])
        .session_timeout(session)
        .heartbeat_interval(INTERVAL)
        .max_poll_interval(Duration::from_secs(1))
        .retry_backoff(20 * MS)
        .close_timeout(Duration::from_secs(1));
    if let Some(i) = instance {
        b = b.group_instance_id(i);
    }
    b.build().unwrap()
}

/// Polls `m` until `done` holds, failing the test after [`WAIT`] or on an error; returns the
/// events polled meanwhile.
pub(in crate::group) fn poll_until(
    m: &mut GroupMember,
    what: &str,
    mut done: impl FnMut(&GroupMember) -> bool,
) -> Vec<GroupEvent> {
    let until = crate::deadline::after(WAIT);
    let mut events = Vec::new();
    while !done(m) {
        assert!(
            Instant::now() < until,
            "no {what} within {WAIT:?}; events {events:?}"
        );
        events.extend(
            m.poll(10 * MS)
                .unwrap_or_else(|e| panic!("waiting for {what}: {e}")),
        );
    }
    events
}

/// Polls `m` for `d` (a condition that must *not* come), returning the events.
fn poll_for(m: &mut GroupMember, d: Duration) -> Vec<GroupEvent> {
    let until = crate::deadline::after(d);
    let mut events = Vec::new();
    while Instant::now() < until {
        events.extend(m.poll(10 * MS).unwrap());
    }
    events
}

fn stable(m: &GroupMember) -> bool {
    m.state() == MemberState::Stable && !m.rejoin_pending()
}

fn joins(s: &Script) -> Vec<JoinGroupRequest> {
    s.requests::<JoinGroupRequest>()
}

fn heartbeats(s: &Script) -> Vec<HeartbeatRequest> {
    s.requests::<HeartbeatRequest>()
}

/// Joins `m` (generation 1 of [`follower_group`]) and waits for its first heartbeat.
fn joined(s: &Script, m: &mut GroupMember) {
    let events = m.join(WAIT).unwrap();
    assert_eq!(
        events,
        [GroupEvent::Assigned {
            generation: 1,
            partitions: tps(&[0, 1]),
            // A follower: a dynamic one's generation is always new, a static one cannot tell.
            rebalanced: (!m.is_static()).then_some(true),
        }]
    );
    poll_until(m, "a first heartbeat", |_| !heartbeats(s).is_empty());
}

/// A heartbeat answered `code` makes the member rejoin (eager: all revoked, then assigned
/// in the next generation); returns the rejoin's JoinGroup.
fn a_heartbeat_error_rejoins(code: KafkaCode, instance: Option<&str>) -> (JoinGroupRequest, GroupMember) {
    let s = script();
    follower_group(&s);
    let mut m = member(&s, instance);
    joined(&s, &mut m);
    s.push::<HeartbeatRequest>(heartbeat_answer(code));
    let events = poll_until(&mut m, "a rejoin", |m| joins(&s).len() == 2 && stable(m));
    assert_eq!(
        events,
        [
            GroupEvent::Revoked {
                generation: 1,
                partitions: tps(&[0, 1]),
            },
            GroupEvent::Assigned {
                generation: 2,
                partitions: tps(&[0, 1]),
                rebalanced: Some(true),
            },
        ],
        "{code}"
    );
    assert_eq!(m.generation().map(|g| g.id), Some(2));
    // Heartbeats go on for the new generation.
    poll_until(&mut m, "a heartbeat of generation 2", |_| {
        heartbeats(&s).iter().any(|h| h.generation_id == 2)
    });
    (joins(&s).remove(1), m)
}

#[test]
fn a_heartbeat_finding_a_rebalance_rejoins_with_the_same_member_id() {
    let (rejoin, m) = a_heartbeat_error_rejoins(KafkaCode::RebalanceInProgress, None);
    assert_eq!(rejoin.member_id.as_str(), "m-1");
    assert_eq!(m.member_id(), "m-1");
}

#[test]
fn a_heartbeat_answered_illegal_generation_rejoins_with_the_same_member_id() {
    let (rejoin, m) = a_heartbeat_error_rejoins(KafkaCode::IllegalGeneration, None);
    assert_eq!(rejoin.member_id.as_str(), "m-1");
    assert_eq!(m.member_id(), "m-1");
}

/// As Kafka's Java client (`AbstractCoordinator`: UNKNOWN_MEMBER_ID resets the generation,
/// member id included, for static and dynamic members alike): the rejoin has an empty member
/// id; a static member still sends its instance id, by which the coordinator knows it.
#[test]
fn a_heartbeat_answered_unknown_member_id_rejoins_with_an_empty_member_id() {
    let (rejoin, m) = a_heartbeat_error_rejoins(KafkaCode::UnknownMemberId, None);
    assert_eq!(rejoin.member_id.as_str(), "");
    assert_eq!(rejoin.group_instance_id, None);
    assert_eq!(m.member_id(), "m-2");

    let (rejoin, m) = a_heartbeat_error_rejoins(KafkaCode::UnknownMemberId, Some("w-1"));
    assert_eq!(rejoin.member_id.as_str(), "");
    assert_eq!(rejoin.group_instance_id.as_deref(), Some("w-1"));
    assert_eq!(m.member_id(), "m-2");
    assert!(m.is_static());
}

#[test]
fn a_heartbeat_told_the_coordinator_moved_finds_it_and_heartbeats_there() {
    let s = script();
    follower_group(&s);
    let mut m = member(&s, None);
    joined(&s, &mut m);
    assert_eq!(m.coordinator().map(|c| c.id), Some(1));
    for (code, to) in [
        (KafkaCode::NotCoordinator, 0),
        (KafkaCode::CoordinatorNotAvailable, 1),
    ] {
        let lookups = s.requests::<FindCoordinatorRequest>().len();
        s.coordinator(to);
        s.push::<HeartbeatRequest>(heartbeat_answer(code));
        let addr = format!("b{to}:9092");
        let beats_at = |s: &Script| {
            s.seen()
                .iter()
                .filter(|r| r.api == ApiKey::Heartbeat && r.addr == addr)
                .count()
        };
        let before = beats_at(&s);
        let events = poll_until(&mut m, "heartbeats at the new coordinator", |m| {
            beats_at(&s) >= before + 2 && m.coordinator().map(|c| c.id) == Some(to)
        });
        assert!(
            events
                .iter()
                .any(|e| matches!(e, GroupEvent::CoordinatorMoved { coordinator } if coordinator.id == to)),
            "{code}: {events:?}"
        );
        assert!(s.requests::<FindCoordinatorRequest>().len() > lookups, "{code}");
    }
    // A coordinator move is no rebalance.
    assert_eq!(joins(&s).len(), 1);
    assert!(stable(&m));
    assert_eq!(m.assignment().topic_partitions(), tps(&[0, 1]));
}

#[test]
fn a_fenced_static_member_stops_for_good() {
    let s = script();
    follower_group(&s);
    let mut m = member(&s, Some("w-1"));
    joined(&s, &mut m);
    s.push::<HeartbeatRequest>(heartbeat_answer(KafkaCode::FencedInstanceId));
    let until = crate::deadline::after(WAIT);
    let e = loop {
        match m.poll(10 * MS) {
            Ok(events) => assert!(events.is_empty(), "{events:?}"),
            Err(e) => break e,
        }
        assert!(Instant::now() < until, "never fenced");
    };
    let fenced =
        |e: &Error| matches!(e, Error::Fenced { group, instance_id } if group == "g" && instance_id == "w-1");
    assert!(fenced(&e), "{e:?}");
    assert_eq!(m.state(), MemberState::Fenced);
    assert!(m.assignment().is_empty());
    let beats = heartbeats(&s).len();
    assert!(fenced(&m.poll(10 * MS).unwrap_err()));
    assert!(fenced(&m.join(Duration::from_millis(100)).unwrap_err()));
    // No rejoin, and no heartbeat either, for three heartbeat intervals.
    std::thread::sleep(3 * INTERVAL);
    assert_eq!(joins(&s).len(), 1);
    assert_eq!(heartbeats(&s).len(), beats);
}

#[test]
fn a_lost_heartbeat_connection_is_reopened_and_heartbeats_go_on() {
    let s = script();
    follower_group(&s);
    let mut m = member(&s, None);
    joined(&s, &mut m);
    let last_connection = |s: &Script| s.seen().iter().map(|r| r.connection).max().unwrap_or(0);
    // Broken under the thread (and refused twice when it reconnects), or failing in the middle
    // of a heartbeat.
    for failure in 0..2 {
        let before = last_connection(&s);
        if failure == 0 {
            s.refuse(2, io::ErrorKind::ConnectionRefused);
            s.break_connections();
        } else {
            s.push::<HeartbeatRequest>(Answer::Fail(io::ErrorKind::ConnectionReset));
        }
        let ok_beats_after = |s: &Script| {
            s.seen()
                .iter()
                .filter(|r| r.api == ApiKey::Heartbeat && r.connection > before)
                .count()
        };
        let events = poll_until(&mut m, "heartbeats on a new connection", |_| {
            ok_beats_after(&s) >= 2
        });
        assert!(events.is_empty(), "{failure}: {events:?}");
    }
    assert_eq!(joins(&s).len(), 1);
    assert!(stable(&m));
    assert!(m.metrics().heartbeat_failures >= 2);
}

/// The application stops polling for longer than `max.poll.interval.ms` (1 s here) while the
/// heartbeats go on: the heartbeat thread takes the member out — a dynamic member with a
/// LeaveGroup, a static one by going silent (its session then ends at the coordinator) — and
/// the next poll reports the partitions lost and rejoins. Returns the LeaveGroups and the
/// rejoin's JoinGroup.
fn a_late_poll_leaves_and_the_next_poll_rejoins(
    instance: Option<&str>,
) -> (Vec<LeaveGroupRequest>, JoinGroupRequest) {
    let s = script();
    follower_group(&s);
    let mut m = member(&s, instance);
    joined(&s, &mut m);
    let last_poll = Instant::now();
    // No poll from here: wait on the heartbeats alone until they stop.
    let until = crate::deadline::after(WAIT);
    let mut seen = heartbeats(&s).len();
    let mut quiet_since = Instant::now();
    // Silence only counts once max.poll.interval.ms (1 s) is over: a heartbeat thread starved
    // of CPU on a loaded machine also goes quiet for a while before then, and resumes.
    while quiet_since.elapsed() < 5 * INTERVAL || last_poll.elapsed() < Duration::from_secs(1) + 5 * INTERVAL
    {
        assert!(Instant::now() < until, "heartbeats never stopped without polls");
        std::thread::sleep(INTERVAL / 2);
        let now_seen = heartbeats(&s).len();
        if now_seen != seen {
            (seen, quiet_since) = (now_seen, Instant::now());
        }
    }
    let stopped = quiet_since.duration_since(last_poll);
    assert!(
        stopped >= Duration::from_secs(1) - INTERVAL,
        "heartbeats stopped {stopped:?} after the last poll, before max.poll.interval.ms"
    );
    assert_eq!(joins(&s).len(), 1, "no rejoin without a poll");
    let leaves = s.requests::<LeaveGroupRequest>();
    let events = poll_until(&mut m, "a rejoin", |m| joins(&s).len() == 2 && stable(m));
    assert_eq!(
        events,
        [
            GroupEvent::Lost {
                generation: 1,
                partitions: tps(&[0, 1]),
            },
            GroupEvent::Assigned {
                generation: 2,
                partitions: tps(&[0, 1]),
                // A rejoin: the generation differs from the one the member held.
                rebalanced: Some(true),
            },
        ]
    );
    // Polling again starts the clock again: the member stays.
    poll_for(&mut m, Duration::from_millis(1500));
    assert_eq!(joins(&s).len(), 2, "rejoined while polling");
    (leaves, joins(&s)[1].clone())
}

#[test]
fn a_late_poll_of_a_dynamic_member_sends_leave_group_and_rejoins_as_a_new_member() {
    let (leaves, rejoin) = a_late_poll_leaves_and_the_next_poll_rejoins(None);
    assert_eq!(leaves.len(), 1, "{leaves:?}");
    let ids: Vec<&str> = match leaves[0].members.as_slice() {
        [] => vec![leaves[0].member_id.as_str()],
        members => members.iter().map(|m| m.member_id.as_str()).collect(),
    };
    assert_eq!(ids, ["m-1"]);
    assert_eq!(rejoin.member_id.as_str(), "");
}

#[test]
fn a_late_poll_of_a_static_member_sends_nothing_and_rejoins_by_its_instance_id() {
    let (leaves, rejoin) = a_late_poll_leaves_and_the_next_poll_rejoins(Some("w-1"));
    assert!(leaves.is_empty(), "{leaves:?}");
    assert_eq!(rejoin.group_instance_id.as_deref(), Some("w-1"));
}

#[test]
fn heartbeats_failing_for_a_whole_session_lose_the_partitions_and_rejoin() {
    let s = script();
    follower_group(&s);
    let mut m = member(&s, None);
    joined(&s, &mut m);
    s.on::<HeartbeatRequest>(|_, _| Answer::Fail(io::ErrorKind::ConnectionReset));
    let failing_since = Instant::now();
    // The poll that finds the session over rejoins at once (there is nothing to revoke).
    let events = poll_until(&mut m, "a rejoin", |m| joins(&s).len() == 2 && stable(m));
    // The last heartbeat answered was sent at most an interval before they started failing.
    assert!(
        failing_since.elapsed() >= SESSION - 2 * INTERVAL,
        "lost after {:?}",
        failing_since.elapsed()
    );
    assert_eq!(
        events,
        [
            GroupEvent::Lost {
                generation: 1,
                partitions: tps(&[0, 1]),
            },
            GroupEvent::Assigned {
                generation: 2,
                partitions: tps(&[0, 1]),
                rebalanced: Some(true),
            },
        ]
    );
    // A dynamic member's session is gone at the broker: it rejoins as a new member.
    assert_eq!(joins(&s)[1].member_id.as_str(), "");
    assert_eq!(m.member_id(), "m-2");
}

/// KIP-394: the first JoinGroup of a new member is answered MEMBER_ID_REQUIRED with the id
/// the coordinator gives it; the member joins again at once with that id.
#[test]
fn member_id_required_joins_again_with_the_given_member_id() {
    let s = script();
    follower_group(&s);
    s.push::<JoinGroupRequest>(Answer::Reply(JoinGroupResponse {
        error_code: KafkaCode::MemberIdRequired.code(),
        member_id: "given-1".into(),
        ..Default::default()
    }));
    let mut m = member(&s, None);
    m.join(WAIT).unwrap();
    let ids: Vec<String> = joins(&s).iter().map(|j| j.member_id.to_string()).collect();
    assert_eq!(ids, ["", "given-1"]);
    assert_eq!(m.member_id(), "given-1");
    assert_eq!(m.metrics().member_id_required, 1);
    poll_until(&mut m, "a heartbeat", |_| !heartbeats(&s).is_empty());
    assert_eq!(heartbeats(&s)[0].member_id.as_str(), "given-1");
}

/// How long the heartbeat answer of the old generation is held back: past the rejoin (which
/// takes milliseconds) by the margin a loaded machine needs, so that it surely comes after it.
const HELD: Duration = crate::deadline::LOAD_MARGIN;

/// A heartbeat for the first generation, answered `code` only after the member has joined the
/// second: the answer is ignored (no third JoinGroup), and heartbeats of the second go on.
fn a_late_answer_of_the_old_generation_is_ignored(
    instance: Option<&str>,
    first: (i32, &str),
    second: (i32, &str),
    code: KafkaCode,
) {
    let s = script();
    follower_group(&s);
    // Queued answers go first; the handler answers a third JoinGroup, which only a stale
    // answer taken for a current one would bring.
    for (generation, member_id) in [first, second] {
        s.push::<JoinGroupRequest>(Answer::Reply(join_reply(generation, member_id, "someone-else")));
    }
    // A session longer than the held heartbeat: the member must not give up on it for that.
    let mut m = member_with_session(&s, instance, 3 * HELD);
    m.join(WAIT).unwrap();
    assert_eq!(m.generation().map(|g| (g.id, &*g.member_id)), Some(first));
    poll_until(&mut m, "a first heartbeat", |_| !heartbeats(&s).is_empty());
    let sent = heartbeats(&s).len();
    s.push::<HeartbeatRequest>(Answer::Delayed(
        HELD,
        HeartbeatResponse {
            error_code: code.code(),
            ..Default::default()
        },
    ));
    poll_until(&mut m, "the held heartbeat", |_| heartbeats(&s).len() > sent);
    let held = Instant::now();
    let stale = heartbeats(&s)[sent].clone();
    assert_eq!((stale.generation_id, stale.member_id.as_str()), first);
    m.request_rejoin();
    poll_until(&mut m, "the rejoin", |m| joins(&s).len() == 2 && stable(m));
    assert!(
        held.elapsed() < HELD,
        "rejoined after the held answer came: proves nothing"
    );
    assert_eq!(m.generation().map(|g| (g.id, &*g.member_id)), Some(second));
    // Past the held answer, and a few heartbeats further.
    let events = poll_for(&mut m, HELD - held.elapsed() + 3 * INTERVAL);
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(joins(&s).len(), 2, "the stale {code} made the member rejoin");
    assert!(stable(&m));
    assert_eq!(m.generation().map(|g| (g.id, &*g.member_id)), Some(second));
    let after = heartbeats(&s);
    assert!(
        after[sent + 1..]
            .iter()
            .any(|h| (h.generation_id, h.member_id.as_str()) == second),
        "no heartbeat for the new generation: {after:?}"
    );
}

#[test]
fn a_heartbeat_error_of_a_previous_generation_is_ignored() {
    a_late_answer_of_the_old_generation_is_ignored(
        None,
        (1, "m-1"),
        (2, "m-1"),
        KafkaCode::IllegalGeneration,
    );
}

/// A static member that rejoins an unchanged group keeps its generation id but gets a new
/// member id: an answer for the old member id is as stale as one for an older generation.
#[test]
fn a_static_members_heartbeat_error_for_its_old_member_id_is_ignored() {
    a_late_answer_of_the_old_generation_is_ignored(
        Some("w-1"),
        (5, "w-1-old"),
        (5, "w-1-new"),
        KafkaCode::UnknownMemberId,
    );
}

#[test]
fn a_join_gives_up_at_its_deadline_and_can_be_taken_up_later() {
    let timeout = Duration::from_millis(200);
    let is_join_timeout = |e: &Error| matches!(e, Error::Timeout { which: crate::error::Timeout::Retries, operation, .. } if operation.contains("joining group g"));
    // A coordinator that never answers the JoinGroup.
    let s = script();
    s.on::<JoinGroupRequest>(|_, _| Answer::Silence);
    let mut m = member(&s, None);
    let started = Instant::now();
    let e = m.join(timeout).unwrap_err();
    assert!(
        started.elapsed() < timeout + crate::deadline::LOAD_MARGIN,
        "{:?}",
        started.elapsed()
    );
    assert!(is_join_timeout(&e), "{e:?}");
    assert_eq!(m.state(), MemberState::Joining);
    drop(m);

    // One that answers, but after the first call's deadline: the next call takes the same
    // JoinGroup up and joins.
    let s = script();
    follower_group(&s);
    s.push::<JoinGroupRequest>(Answer::Delayed(
        Duration::from_millis(600),
        join_reply(1, "m-1", "someone-else"),
    ));
    let mut m = member(&s, None);
    let started = Instant::now();
    let e = m.join(timeout).unwrap_err();
    assert!(
        started.elapsed() < timeout + crate::deadline::LOAD_MARGIN,
        "{:?}",
        started.elapsed()
    );
    assert!(is_join_timeout(&e), "{e:?}");
    let events = m.join(WAIT).unwrap();
    assert!(
        matches!(&events[..], [GroupEvent::Assigned { generation: 1, .. }]),
        "{events:?}"
    );
    assert_eq!(joins(&s).len(), 1, "the JoinGroup in flight was not taken up");
    assert!(stable(&m));
}

fn subscription(topics: &[&str]) -> Bytes {
    Subscription {
        topics: topics.iter().map(|t| t.to_string()).collect(),
        user_data: None,
        owned: Vec::new(),
        rack_id: None,
        generation: None,
    }
    .encode()
}

/// The JoinGroup answer that makes `me` the leader of `me` and `other`, both on `t`.
fn leader_reply(generation: i32, me: (&str, Option<&str>), other: (&str, Option<&str>)) -> JoinGroupResponse {
    JoinGroupResponse {
        members: [me, other]
            .iter()
            .map(|(id, instance)| JoinGroupResponseMember {
                member_id: (*id).into(),
                group_instance_id: instance.map(Into::into),
                metadata: subscription(&["t"]),
                ..Default::default()
            })
            .collect(),
        ..join_reply(generation, me.0, me.0)
    }
}

/// What each member got in the `n`th SyncGroup, decoded from the request.
fn synced(s: &Script, n: usize) -> BTreeMap<String, BTreeMap<String, Vec<i32>>> {
    s.requests::<SyncGroupRequest>()[n]
        .assignments
        .iter()
        .map(|a| {
            let decoded = Assignment::decode(&a.assignment).unwrap();
            (a.member_id.to_string(), decoded.partitions.into_iter().collect())
        })
        .collect()
}

fn owns(partitions: &[i32]) -> BTreeMap<String, Vec<i32>> {
    [("t".to_string(), partitions.to_vec())].into_iter().collect()
}

#[test]
fn the_leader_syncs_the_assignment_its_assignor_computed() {
    let s = script();
    s.on::<JoinGroupRequest>(|_, _| Answer::Reply(leader_reply(1, ("m-1", None), ("m-2", None))));
    s.on::<SyncGroupRequest>(|req, _| sync_reply(req, &Bytes::new()));
    let mut m = member(&s, None);
    let events = m.join(WAIT).unwrap();
    // Range over 4 partitions and two members, in member id order.
    let expected: BTreeMap<String, _> = [
        ("m-1".to_string(), owns(&[0, 1])),
        ("m-2".to_string(), owns(&[2, 3])),
    ]
    .into_iter()
    .collect();
    assert_eq!(synced(&s, 0), expected);
    let sync = &s.requests::<SyncGroupRequest>()[0];
    assert_eq!((sync.generation_id, sync.member_id.as_str()), (1, "m-1"));
    assert_eq!(
        events,
        [GroupEvent::Assigned {
            generation: 1,
            partitions: tps(&[0, 1]),
            rebalanced: Some(true),
        }]
    );
    // The leader looked the subscribed topic up for it.
    let asked = s.requests::<MetadataRequest>();
    assert!(
        asked
            .iter()
            .any(|r| r.topics.iter().flatten().any(|t| t.name.as_deref() == Some("t"))),
        "{asked:?}"
    );
}

/// KIP-814: a restarted static leader told to skip the assignment sends none, reads the
/// group's kept assignment (DescribeGroups) and compares it with the metadata; returns the
/// script and the member after its first join.
fn a_restarted_leader_skips_the_assignment(kept: [&[i32]; 2]) -> (Script, GroupMember) {
    let s = script();
    s.topic("t", 3);
    let me = ("w-1-new", Some("w-1"));
    let other = ("w-2-id", Some("w-2"));
    s.push::<JoinGroupRequest>(Answer::Reply(JoinGroupResponse {
        skip_assignment: true,
        ..leader_reply(4, me, other)
    }));
    s.on::<JoinGroupRequest>(move |_, _| Answer::Reply(leader_reply(5, me, other)));
    let mine = assignment(kept[0]);
    s.on::<SyncGroupRequest>(move |req, _| sync_reply(req, &mine));
    let described = [(me, kept[0]), (other, kept[1])]
        .iter()
        .map(|((id, instance), partitions)| DescribedGroupMember {
            member_id: (*id).into(),
            group_instance_id: instance.map(Into::into),
            member_assignment: assignment(partitions),
            ..Default::default()
        })
        .collect::<Vec<_>>();
    s.on::<DescribeGroupsRequest>(move |_, _| {
        Answer::Reply(DescribeGroupsResponse {
            groups: vec![DescribedGroup {
                group_id: "g".into(),
                group_state: "Stable".into(),
                protocol_type: "consumer".into(),
                protocol_data: "range".into(),
                members: described.clone(),
                ..Default::default()
            }],
            ..Default::default()
        })
    });
    let mut m = member(&s, Some("w-1"));
    let events = m.join(WAIT).unwrap();
    assert_eq!(
        events,
        [GroupEvent::Assigned {
            generation: 4,
            partitions: tps(kept[0]),
            // KIP-814: told to skip the assignment, so it took its generation back over.
            rebalanced: Some(false),
        }]
    );
    assert!(synced(&s, 0).is_empty(), "a leader told to skip assigned");
    assert_eq!(m.metrics().skipped_assignments, 1);
    assert_eq!(s.requests::<DescribeGroupsRequest>().len(), 1);
    (s, m)
}

#[test]
fn a_restarted_static_leader_keeps_an_assignment_that_covers_the_topics() {
    let (s, mut m) = a_restarted_leader_skips_the_assignment([&[0], &[1, 2]]);
    let events = poll_for(&mut m, 5 * INTERVAL);
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(joins(&s).len(), 1);
    assert!(stable(&m));
}

/// Partitions were added while the old leader ran: the kept assignment was made for 2, the
/// topic has 3, so the leader rebalances at once and assigns all three.
#[test]
fn a_restarted_static_leader_rebalances_when_partitions_were_added() {
    let (s, mut m) = a_restarted_leader_skips_the_assignment([&[0], &[1]]);
    let events = poll_until(&mut m, "a rebalance", |m| joins(&s).len() == 2 && stable(m));
    assert_eq!(
        events,
        [
            GroupEvent::Revoked {
                generation: 4,
                partitions: tps(&[0]),
            },
            GroupEvent::Assigned {
                generation: 5,
                partitions: tps(&[0, 1]),
                rebalanced: Some(true),
            },
        ]
    );
    let expected: BTreeMap<String, _> = [
        ("w-1-new".to_string(), owns(&[0, 1])),
        ("w-2-id".to_string(), owns(&[2])),
    ]
    .into_iter()
    .collect();
    assert_eq!(synced(&s, 1), expected);
    assert_eq!(joins(&s)[1].group_instance_id.as_deref(), Some("w-1"));
}

/// A member whose client backs reconnects off from 100 ms, doubling to 400 ms, and knows
/// both brokers already: its coordinator lookups go to broker 0, so every connection attempt
/// to broker 1 is the member's own or its heartbeat thread's.
fn backing_off_member(s: &Script, session: Duration) -> GroupMember {
    let client = s
        .client(
            Client::builder()
                .bootstrap_servers("b0:9092")
                .reconnect_backoff(100 * MS)
                .reconnect_backoff_max(400 * MS),
        )
        .unwrap();
    client.refresh_metadata(None).unwrap();
    client
        .member("g")
        .subscribe(["t"])
        .session_timeout(session)
        .heartbeat_interval(INTERVAL)
        .retry_backoff(20 * MS)
        .close_timeout(Duration::from_secs(1))
        .build()
        .unwrap()
}

/// Connection attempts to the coordinator (broker 1) since the `from`th dial.
fn dials_to_coordinator(s: &Script, from: usize) -> usize {
    s.dials()[from..].iter().filter(|a| *a == "b1:9092").count()
}

/// The reconnect backoff of 100 ms doubling to 400 ms allows about five attempts in 1.2 s (at
/// 0, 0.1, 0.3, 0.7 and 1.1 s); a fresh connection at every retry (`retry.backoff.ms`, 20 ms)
/// would make some fifty.
const BACKED_OFF_DIALS: usize = 8;

#[test]
fn a_member_backs_off_reconnecting_to_a_coordinator_that_refuses() {
    let s = script();
    follower_group(&s);
    s.refuse_to("b1:9092", true);
    let mut m = backing_off_member(&s, SESSION);
    let e = m.join(Duration::from_millis(1200)).unwrap_err();
    let dials = dials_to_coordinator(&s, 0);
    assert!(
        (2..=BACKED_OFF_DIALS).contains(&dials),
        "{dials} dials: {:?}",
        s.dials()
    );
    // The timeout names the refusal, not the backoff that held the last attempt back.
    let Error::Timeout { last: Some(last), .. } = &e else {
        panic!("{e:?}")
    };
    assert!(
        matches!(&**last, Error::Io { addr, source } if addr == "b1:9092" && source.kind() == io::ErrorKind::ConnectionRefused),
        "{e:?}"
    );
    s.refuse_to("b1:9092", false);
    m.join(WAIT).unwrap();
    assert!(stable(&m));
}

#[test]
fn the_heartbeat_thread_backs_off_reconnecting_and_heartbeats_again() {
    let s = script();
    follower_group(&s);
    // A session long enough to outlast the refusals and the backoff after them.
    let mut m = backing_off_member(&s, Duration::from_secs(3));
    m.join(WAIT).unwrap();
    poll_until(&mut m, "a first heartbeat", |_| !heartbeats(&s).is_empty());
    let from = s.dials().len();
    let last_connection = s.seen().iter().map(|r| r.connection).max().unwrap_or(0);
    s.refuse_to("b1:9092", true);
    s.break_connections();
    let events = poll_for(&mut m, Duration::from_millis(1200));
    let dials = dials_to_coordinator(&s, from);
    assert!(
        (2..=BACKED_OFF_DIALS).contains(&dials),
        "{dials} dials: {:?}",
        &s.dials()[from..]
    );
    s.refuse_to("b1:9092", false);
    let beats_after = |s: &Script| {
        s.seen()
            .iter()
            .filter(|r| r.api == ApiKey::Heartbeat && r.connection > last_connection)
            .count()
    };
    let more = poll_until(&mut m, "heartbeats on a new connection", |_| beats_after(&s) >= 2);
    assert!(events.is_empty() && more.is_empty(), "{events:?} {more:?}");
    assert_eq!(joins(&s).len(), 1);
    assert!(stable(&m));
}

/// A leader's metadata lookup is bounded by the call's time (or one [`MIN_LOOKUP`] when less
/// is left), not by `request.timeout.ms`: a silent broker does not hold `join` for 30 s.
#[test]
fn a_leaders_metadata_lookup_ends_with_the_calls_time() {
    let s = script();
    s.on::<JoinGroupRequest>(|_, _| Answer::Reply(leader_reply(1, ("m-1", None), ("m-2", None))));
    s.on::<SyncGroupRequest>(|req, _| sync_reply(req, &Bytes::new()));
    // The first Metadata request gets no answer; later ones are answered.
    s.push::<MetadataRequest>(Answer::Silence);
    let mut m = member(&s, None);
    let t = Instant::now();
    let _ = m.join(300 * MS);
    let took = t.elapsed();
    let asked = s.requests::<MetadataRequest>();
    assert!(
        asked
            .first()
            .is_some_and(|r| r.topics.iter().flatten().any(|t| t.name.as_deref() == Some("t"))),
        "the silent answer went to the leader's lookup: {asked:?}"
    );
    assert!(
        took < crate::group::member::MIN_LOOKUP + crate::deadline::LOAD_MARGIN,
        "join(300 ms) took {took:?} behind a silent Metadata"
    );
    // The member goes on and assigns once the broker answers.
    poll_until(&mut m, "the assignment", stable);
    assert_eq!(synced(&s, 0)["m-1"], owns(&[0, 1]));
}

/// A coordinator refusing `session.timeout.ms` (JoinGroup answers INVALID_SESSION_TIMEOUT);
/// `configs` answers the DescribeConfigs the member then sends, if any. Returns the error.
fn a_refused_session_timeout(
    configs: Option<Answer<crate::protocol::messages::DescribeConfigsResponse>>,
) -> Error {
    use crate::protocol::messages::DescribeConfigsRequest;
    let s = script();
    s.on::<JoinGroupRequest>(|_, _| {
        Answer::Reply(JoinGroupResponse {
            error_code: KafkaCode::InvalidSessionTimeout.code(),
            ..Default::default()
        })
    });
    if let Some(a) = configs {
        s.push::<DescribeConfigsRequest>(a);
    }
    let mut m = member(&s, Some("w-1"));
    let e = m.join(WAIT).unwrap_err();
    if !s.requests::<DescribeConfigsRequest>().is_empty() {
        let asked = &s.requests::<DescribeConfigsRequest>()[0].resources[0];
        // The coordinator's own settings: broker 1.
        assert_eq!((asked.resource_type, asked.resource_name.as_str()), (4, "1"));
    }
    assert_eq!(e.kafka_code(), Some(KafkaCode::InvalidSessionTimeout), "{e}");
    e
}

#[test]
fn an_invalid_session_timeout_names_the_value_and_the_brokers_bounds() {
    use crate::protocol::messages::describe_configs_response::{
        DescribeConfigsResourceResult, DescribeConfigsResult,
    };
    let config = |name: &str, value: &str| DescribeConfigsResourceResult {
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    };
    let answer = crate::protocol::messages::DescribeConfigsResponse {
        results: vec![DescribeConfigsResult {
            resource_type: 4,
            resource_name: "1".into(),
            configs: vec![
                config("group.min.session.timeout.ms", "6000"),
                config("group.max.session.timeout.ms", "1800000"),
            ],
            ..Default::default()
        }],
        ..Default::default()
    };
    let e = a_refused_session_timeout(Some(Answer::Reply(answer)));
    match &e {
        Error::InvalidSessionTimeout {
            group,
            session_timeout,
            broker_bounds,
            bounds_unread,
        } => {
            assert_eq!(group, "g");
            assert_eq!(*session_timeout, SESSION);
            assert_eq!(
                *broker_bounds,
                Some((Duration::from_millis(6000), Duration::from_millis(1_800_000)))
            );
            assert_eq!(*bounds_unread, None);
        }
        other => panic!("{other}"),
    }
    let text = e.to_string();
    for part in [
        "session.timeout.ms 1500 ms",
        "group.min.session.timeout.ms 6000 ms",
        "group.max.session.timeout.ms 1800000 ms",
    ] {
        assert!(text.contains(part), "{text}");
    }
}

#[test]
fn an_invalid_session_timeout_says_when_the_bounds_could_not_be_read() {
    use crate::protocol::messages::describe_configs_response::DescribeConfigsResult;
    let denied = crate::protocol::messages::DescribeConfigsResponse {
        results: vec![DescribeConfigsResult {
            error_code: KafkaCode::ClusterAuthorizationFailed.code(),
            resource_type: 4,
            resource_name: "1".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let e = a_refused_session_timeout(Some(Answer::Reply(denied)));
    let Error::InvalidSessionTimeout {
        broker_bounds: None,
        bounds_unread: Some(why),
        ..
    } = &e
    else {
        panic!("{e}")
    };
    assert!(why.contains("CLUSTER_AUTHORIZATION_FAILED"), "{why}");
    let text = e.to_string();
    assert!(
        text.contains("session.timeout.ms 1500 ms") && text.contains("could not be read"),
        "{text}"
    );
}

/// A follower subscribed to `t` and `nope`, which does not exist, with `policy`; joined.
fn missing_topic_member(s: &Script, policy: crate::group::MissingTopicPolicy) -> GroupMember {
    follower_group(s);
    let mut m = client(s)
        .member("g")
        .subscribe(["t", "nope"])
        .session_timeout(SESSION)
        .heartbeat_interval(INTERVAL)
        .retry_backoff(20 * MS)
        .close_timeout(Duration::from_secs(1))
        .missing_topic_policy(policy)
        .build()
        .unwrap();
    let before = s.requests::<MetadataRequest>().len();
    let events = m.join(WAIT).unwrap();
    assert!(matches!(events[..], [GroupEvent::Assigned { .. }]), "{events:?}");
    // The join itself looked nothing up: the check waits for the next poll.
    assert_eq!(s.requests::<MetadataRequest>().len(), before);
    m
}

#[test]
fn a_missing_subscribed_topic_is_reported_once_by_a_follower() {
    let s = script();
    let mut m = missing_topic_member(&s, crate::group::MissingTopicPolicy::Warn);
    let events = m.poll(10 * MS).unwrap();
    assert_eq!(
        events,
        [GroupEvent::TopicsMissing {
            topics: vec!["nope".into()],
        }]
    );
    // Once per generation.
    let events = poll_for(&mut m, 5 * INTERVAL);
    assert!(events.is_empty(), "{events:?}");
    assert!(stable(&m));
}

#[test]
fn a_missing_subscribed_topic_is_an_error_with_the_error_policy() {
    let s = script();
    let mut m = missing_topic_member(&s, crate::group::MissingTopicPolicy::Error);
    let e = m.poll(10 * MS).unwrap_err();
    match &e {
        Error::TopicsMissing { group, topics } => {
            assert_eq!(
                (group.as_str(), topics.as_slice()),
                ("g", &["nope".to_string()][..])
            );
        }
        other => panic!("{other}"),
    }
    assert!(
        e.to_string().contains("nope") && e.to_string().contains("create"),
        "{e}"
    );
    // The member stays in its group.
    let events = poll_for(&mut m, 3 * INTERVAL);
    assert!(events.is_empty(), "{events:?}");
    assert!(stable(&m));
}

// -------------------------------------------------------------------------------------------
// The cooperative protocol (KIP-429): partitions kept through a rebalance, only moved ones
// revoked, lost when the generation ends under the member.

/// A follower group for a cooperative member: generation n's SyncGroup gives `t` the n-th of
/// `assignments` (the last one from then on).
fn cooperative_group(s: &Script, assignments: &'static [&'static [i32]]) {
    let generation = Arc::new(AtomicI32::new(0));
    let g = generation.clone();
    s.on::<JoinGroupRequest>(move |req, _| {
        let n = g.fetch_add(1, Ordering::SeqCst) + 1;
        let member_id = match req.member_id.as_str() {
            "" => format!("m-{n}"),
            id => id.to_string(),
        };
        let mut reply = join_reply(n, &member_id, "someone-else");
        reply.protocol_name = Some("cooperative-sticky".into());
        Answer::Reply(reply)
    });
    s.on::<SyncGroupRequest>(move |req, _| {
        let n = generation.load(Ordering::SeqCst) as usize;
        let mine = assignment(assignments[(n - 1).min(assignments.len() - 1)]);
        sync_reply(req, &mine)
    });
}

fn cooperative_member(s: &Script) -> GroupMember {
    client(s)
        .member("g")
        .subscribe(["t"])
        .assignors(vec![Arc::new(crate::group::CooperativeStickyAssignor)])
        .session_timeout(SESSION)
        .heartbeat_interval(INTERVAL)
        .max_poll_interval(Duration::from_secs(1))
        .retry_backoff(20 * MS)
        .close_timeout(Duration::from_secs(1))
        .build()
        .unwrap()
}

/// The subscription a JoinGroup sent for its first protocol.
fn sent_subscription(j: &JoinGroupRequest) -> Subscription {
    assert_eq!(j.protocols[0].name.as_str(), "cooperative-sticky");
    Subscription::decode(&j.protocols[0].metadata).unwrap()
}

#[test]
fn a_cooperative_member_keeps_its_partitions_and_revokes_only_what_moves() {
    let s = script();
    cooperative_group(&s, &[&[0, 1], &[1], &[1, 2]]);
    let mut m = cooperative_member(&s);
    assert_eq!(m.rebalance_protocol(), RebalanceProtocol::Cooperative);
    let events = m.join(WAIT).unwrap();
    assert!(
        matches!(&events[..], [GroupEvent::Assigned { generation: 1, partitions, .. }] if *partitions == tps(&[0, 1]))
    );
    let first = sent_subscription(&joins(&s)[0]);
    assert_eq!(
        (first.owned, first.generation),
        (vec![], None),
        "a first join owns nothing"
    );
    poll_until(&mut m, "a first heartbeat", |_| !heartbeats(&s).is_empty());

    // A rebalance: no revocation before the join, which says what the member owns.
    s.push::<HeartbeatRequest>(heartbeat_answer(KafkaCode::RebalanceInProgress));
    let events = poll_until(&mut m, "generation 2", |m| {
        m.generation().map(|g| g.id) == Some(2)
    });
    let rejoin = sent_subscription(&joins(&s)[1]);
    assert_eq!(rejoin.owned, tps(&[0, 1]));
    assert_eq!(rejoin.generation, Some(1));
    // Generation 2 moves t-0 away: only it is revoked, in generation 2, with the (empty)
    // addition, and the member asks for the follow-up rebalance.
    assert_eq!(
        events,
        [
            GroupEvent::Revoked {
                generation: 2,
                partitions: tps(&[0]),
            },
            GroupEvent::Assigned {
                generation: 2,
                partitions: vec![],
                rebalanced: Some(true),
            },
        ]
    );
    assert_eq!(m.assignment().topic_partitions(), tps(&[1]));
    assert!(m.rejoin_pending());
    // The follow-up: generation 3 adds t-2, nothing is revoked.
    let events = poll_until(&mut m, "generation 3", |m| {
        m.generation().map(|g| g.id) == Some(3)
    });
    let follow_up = sent_subscription(&joins(&s)[2]);
    assert_eq!((follow_up.owned, follow_up.generation), (tps(&[1]), Some(2)));
    assert_eq!(
        events,
        [GroupEvent::Assigned {
            generation: 3,
            partitions: tps(&[2]),
            rebalanced: Some(true),
        }]
    );
    assert_eq!(m.assignment().topic_partitions(), tps(&[1, 2]));
}

#[test]
fn a_cooperative_member_whose_generation_ends_loses_its_partitions() {
    for code in [KafkaCode::IllegalGeneration, KafkaCode::UnknownMemberId] {
        let s = script();
        cooperative_group(&s, &[&[0, 1]]);
        let mut m = cooperative_member(&s);
        m.join(WAIT).unwrap();
        poll_until(&mut m, "a first heartbeat", |_| !heartbeats(&s).is_empty());
        s.push::<HeartbeatRequest>(heartbeat_answer(code));
        let events = poll_until(&mut m, "generation 2", |m| {
            m.generation().map(|g| g.id) == Some(2)
        });
        assert_eq!(
            events[0],
            GroupEvent::Lost {
                generation: 1,
                partitions: tps(&[0, 1]),
            },
            "{code}: {events:?}"
        );
        // What it lost it no longer claims.
        let rejoin = sent_subscription(&joins(&s)[1]);
        assert_eq!(rejoin.owned, vec![], "{code}");
        assert!(matches!(&events[1], GroupEvent::Assigned { partitions, .. } if *partitions == tps(&[0, 1])));
    }
}

#[test]
fn a_joining_member_still_fetches_committed_offsets_but_refuses_commits() {
    use crate::protocol::messages::{OffsetCommitRequest, OffsetFetchRequest, OffsetFetchResponse};
    let s = script();
    cooperative_group(&s, &[&[0, 1]]);
    s.on::<OffsetFetchRequest>(|_, _| Answer::Reply(OffsetFetchResponse::default()));
    let mut m = cooperative_member(&s);
    m.join(WAIT).unwrap();
    // The next JoinGroup is held: the member stays joining, its connection carrying it.
    s.push::<JoinGroupRequest>(Answer::Delayed(
        Duration::from_secs(3),
        join_reply(2, "m-1", "someone-else"),
    ));
    m.request_rejoin();
    m.poll(10 * MS).unwrap();
    assert_eq!(joins(&s).len(), 2, "the rejoin is in flight");
    let deadline = crate::deadline::after(WAIT);
    let fetched = m.coordinator_request(deadline, |v| {
        crate::consumer::offsets::offset_fetch_request(v, "g", &tps(&[0]), true)
    });
    assert!(fetched.is_ok(), "{fetched:?}");
    assert_eq!(s.requests::<OffsetFetchRequest>().len(), 1);
    let committed = m.coordinator_request(deadline, |_| OffsetCommitRequest {
        group_id: "g".into(),
        ..Default::default()
    });
    assert_eq!(
        committed.unwrap_err().kafka_code(),
        Some(KafkaCode::RebalanceInProgress)
    );
}
