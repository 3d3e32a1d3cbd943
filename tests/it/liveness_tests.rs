//! What a user relies on without reading the docs, against a real broker: a dropped producer
//! writes what it was sent, a dropped consumer commits its position, and a member whose
//! application stops polling for longer than `max.poll.interval.ms` leaves its partitions to
//! the others (classic eager and cooperative, and KIP-848), hears of it at its next poll and
//! rejoins.

use crate::group_tests::{client, member_builder, SESSION};
use crate::support::{broker, create_topic, unique_name};
use kafka_group::{
    Client, CooperativeStickyAssignor, GroupEvent, GroupMember, GroupProtocol, OffsetReset, OffsetSpec,
    ProducerRecord, TopicPartition,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PARTITIONS: i32 = 6;
/// The late member's `max.poll.interval.ms`.
const MAX_POLL_INTERVAL: Duration = Duration::from_secs(2);
/// How long the late member goes without a poll: four times its interval.
const NO_POLL: Duration = Duration::from_secs(8);

#[test]
fn a_dropped_producer_writes_what_it_was_sent() {
    let b = broker::shared();
    let client = client(b.bootstrap());
    let topic = create_topic(&client, "drop-producer", 2, 1);
    // A linger far beyond the test: only the drop can send these batches.
    let mut producer = client.producer().linger(Duration::from_secs(60)).build().unwrap();
    let handles: Vec<_> = (0..1000)
        .map(|i| {
            producer
                .send(ProducerRecord::new(&topic, format!("v{i}")).key(format!("k{i}")))
                .unwrap()
        })
        .collect();
    assert!(handles.iter().all(|h| !h.is_done()), "sent before the drop");
    drop(producer);
    let failed = handles
        .iter()
        .filter(|h| !matches!(h.try_result(), Some(Ok(_))))
        .count();
    assert_eq!(failed, 0, "records not written by the drop");
    let partitions: Vec<TopicPartition> = (0..2).map(|p| TopicPartition::new(&topic, p)).collect();
    let ends = client
        .admin()
        .list_offsets(&partitions, OffsetSpec::Latest)
        .unwrap();
    assert_eq!(ends.values().sum::<i64>(), 1000, "end offsets {ends:?}");
}

#[test]
fn a_dropped_consumer_commits_its_position() {
    let b = broker::shared();
    let client = client(b.bootstrap());
    let topic = create_topic(&client, "drop-consumer", 1, 1);
    let mut producer = client.producer().build().unwrap();
    for i in 0..10 {
        producer
            .send(ProducerRecord::new(&topic, format!("v{i}")))
            .unwrap();
    }
    producer.close().unwrap();
    let group = unique_name("drop-consumer");
    let mut consumer = client
        .consumer(&group)
        .subscribe([&topic])
        .auto_offset_reset(OffsetReset::Earliest)
        // Auto-commit on, but no periodic commit within the test: only the drop commits.
        .auto_commit_interval(Duration::from_secs(600))
        .fetch_max_wait(Duration::from_millis(100))
        .build()
        .unwrap();
    let tp = TopicPartition::new(&topic, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = 0;
    while got < 10 {
        assert!(Instant::now() < deadline, "consumed {got} of 10");
        got += consumer.poll(Duration::from_millis(200)).unwrap().records.len();
    }
    assert_eq!(consumer.position(&tp), Some(10));
    let admin = client.admin();
    assert_eq!(
        admin.group_offsets(&group).unwrap(),
        BTreeMap::new(),
        "committed before the drop"
    );
    drop(consumer);
    assert_eq!(admin.group_offsets(&group).unwrap(), BTreeMap::from([(tp, 10)]));
}

fn owned(m: &GroupMember) -> BTreeSet<TopicPartition> {
    m.assignment().topic_partitions().into_iter().collect()
}

/// Polls both members until each owns half the partitions.
fn settle(a: &mut GroupMember, b: &mut GroupMember, what: &str) -> Vec<GroupEvent> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut a_events = Vec::new();
    loop {
        a_events.extend(a.poll(Duration::from_millis(20)).unwrap());
        b.poll(Duration::from_millis(20)).unwrap();
        let half = PARTITIONS as usize / 2;
        if owned(a).len() == half && owned(b).len() == half && owned(a).is_disjoint(&owned(b)) {
            return a_events;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not balanced within 60 s: a {:?}, b {:?}",
            owned(a),
            owned(b)
        );
    }
}

/// Member `a` (`max.poll.interval.ms` 2 s) stops polling for [`NO_POLL`] while `b` goes on:
/// `b` gets all the partitions, `a`'s next poll reports its own lost, and it rejoins.
fn a_late_poll_hands_the_partitions_over(build: impl Fn(&Client, &str, &str, &str, Duration) -> GroupMember) {
    a_late_poll_hands_the_partitions_over_by(broker::shared(), build, Duration::ZERO)
}

/// [`a_late_poll_hands_the_partitions_over`], where the partitions cannot move before `not_before`
/// (a static member, whose session must time out first: it sends no leave for good).
fn a_late_poll_hands_the_partitions_over_by(
    broker: &broker::Broker,
    build: impl Fn(&Client, &str, &str, &str, Duration) -> GroupMember,
    not_before: Duration,
) {
    let client = client(broker.bootstrap());
    let topic = create_topic(&client, "late-poll", PARTITIONS, 1);
    let group = unique_name("late-poll");
    let mut a = build(&client, &group, &topic, "a", MAX_POLL_INTERVAL);
    let mut b = build(&client, &group, &topic, "b", Duration::from_secs(60));
    settle(&mut a, &mut b, "before");
    let a_had = owned(&a);

    let stopped = Instant::now();
    let mut b_all_at = None;
    // NO_POLL without polling `a`; longer only if `b` has not got everything yet (a slow
    // machine), up to a bound far beyond the interval and the rebalance it starts.
    while stopped.elapsed() < NO_POLL || (b_all_at.is_none() && stopped.elapsed() < Duration::from_secs(40)) {
        b.poll(Duration::from_millis(50)).unwrap();
        if owned(&b).len() == PARTITIONS as usize {
            b_all_at.get_or_insert(stopped.elapsed());
        }
    }
    let took = b_all_at.unwrap_or_else(|| {
        panic!(
            "{:?} without a poll of a (max.poll.interval.ms {MAX_POLL_INTERVAL:?}): b still owns {:?}",
            stopped.elapsed(),
            owned(&b)
        )
    });
    assert_eq!(
        owned(&b).len(),
        PARTITIONS as usize,
        "b lost partitions again before a came back"
    );
    println!("b owned every partition {took:?} after a's last poll");
    assert!(
        took >= not_before,
        "a's partitions moved after {took:?}, before {not_before:?}"
    );

    let events = a.poll(Duration::from_millis(20)).unwrap();
    let lost: BTreeSet<TopicPartition> = events
        .iter()
        .filter_map(|e| match e {
            GroupEvent::Lost { partitions, .. } => Some(partitions.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(lost, a_had, "a's first poll after the pause: {events:?}");
    settle(&mut a, &mut b, "after a came back");
    a.close().unwrap();
    b.close().unwrap();
}

fn classic(client: &Client, group: &str, topic: &str, _name: &str, interval: Duration) -> GroupMember {
    member_builder(client, group, topic)
        .max_poll_interval(interval)
        .build()
        .unwrap()
}

#[test]
fn a_late_poll_hands_the_partitions_over_eager() {
    a_late_poll_hands_the_partitions_over(classic);
}

#[test]
fn a_late_poll_hands_the_partitions_over_cooperative() {
    a_late_poll_hands_the_partitions_over(|client, group, topic, _, interval| {
        member_builder(client, group, topic)
            .assignors(vec![Arc::new(CooperativeStickyAssignor)])
            .max_poll_interval(interval)
            .build()
            .unwrap()
    });
}

/// A static member's late poll sends no LeaveGroup (its instance id is for a member that goes
/// for good): its heartbeats stop and the session timeout (`SESSION`, 6 s) hands its
/// partitions over.
#[test]
fn a_late_poll_of_a_static_member_hands_the_partitions_over_at_its_session_timeout() {
    a_late_poll_hands_the_partitions_over_by(
        broker::shared(),
        |client, group, topic, name, interval| {
            member_builder(client, group, topic)
                .group_instance_id(name)
                .max_poll_interval(interval)
                .build()
                .unwrap()
        },
        SESSION,
    );
}

fn kip848(
    client: &Client,
    group: &str,
    topic: &str,
    instance: Option<&str>,
    interval: Duration,
) -> GroupMember {
    let b = client
        .member(group)
        .subscribe([topic])
        .group_protocol(GroupProtocol::Consumer)
        .max_poll_interval(interval);
    match instance {
        Some(id) => b.group_instance_id(id),
        None => b,
    }
    .build()
    .unwrap()
}

#[test]
fn a_late_poll_hands_the_partitions_over_consumer_protocol() {
    a_late_poll_hands_the_partitions_over_by(
        broker::consumer_protocol(),
        |client, group, topic, _, interval| kip848(client, group, topic, None, interval),
        Duration::ZERO,
    );
}

/// Epoch -2: the coordinator keeps the static member's partitions until its session (the
/// broker's 6 s here) times out, then hands them over.
#[test]
fn a_late_poll_of_a_static_consumer_protocol_member_hands_the_partitions_over_at_its_session_timeout() {
    a_late_poll_hands_the_partitions_over_by(
        broker::consumer_protocol(),
        |client, group, topic, name, interval| kip848(client, group, topic, Some(name), interval),
        SESSION,
    );
}
