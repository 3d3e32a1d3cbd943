//! What a member tells its user about mistakes and restarts, against a real broker:
//! a refused session timeout names the broker's bounds; a restarted static member knows,
//! where the coordinator's answer says, whether its join rebalanced the group.

use crate::group_tests::{client, member_builder, topic_with_partitions, Running};
use crate::support::{broker, unique_name, wait_for};
use kafka_group::{Error, GroupEvent, KafkaCode};
use std::time::Duration;

const JOIN: Duration = Duration::from_secs(30);

/// The shared test broker allows 500 ms to 300 s (`scripts/kafka`); 400 ms is below that.
#[test]
fn an_invalid_session_timeout_names_the_brokers_bounds() {
    let b = broker::shared();
    let c = client(b.bootstrap());
    let topic = topic_with_partitions(&c, 1);
    let mut m = member_builder(&c, &unique_name("short-session"), &topic)
        .group_instance_id("w-1")
        .session_timeout(Duration::from_millis(400))
        .heartbeat_interval(Duration::from_millis(100))
        .build()
        .unwrap();
    let e = m.join(JOIN).unwrap_err();
    assert_eq!(e.kafka_code(), Some(KafkaCode::InvalidSessionTimeout), "{e}");
    let Error::InvalidSessionTimeout {
        session_timeout,
        broker_bounds,
        ..
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!(*session_timeout, Duration::from_millis(400));
    assert_eq!(
        *broker_bounds,
        Some((Duration::from_millis(500), Duration::from_millis(300_000))),
        "{e}"
    );
    let text = e.to_string();
    assert!(
        text.contains("session.timeout.ms 400 ms") && text.contains("group.min.session.timeout.ms 500 ms"),
        "{text}"
    );
}

fn rebalanced(events: &[GroupEvent]) -> Vec<Option<bool>> {
    events
        .iter()
        .filter_map(|e| match e {
            GroupEvent::Assigned { rebalanced, .. } => Some(*rebalanced),
            _ => None,
        })
        .collect()
}

/// Two static members: the first is the leader. Restarted within the session timeout, the
/// leader is told (KIP-814 `skip_assignment`) that it took its generation back over; the
/// follower cannot be told (`None`). A dynamic member's first join always rebalances.
#[test]
fn a_restarted_static_member_knows_whether_it_rebalanced() {
    let b = broker::shared();
    let c = client(b.bootstrap());
    let topic = topic_with_partitions(&c, 2);
    let group = unique_name("rebalanced");
    let builder = |instance: &str| member_builder(&c, &group, &topic).group_instance_id(instance);

    // A new group: the first join makes generation 1, a rebalance of an empty group.
    let mut leader = builder("leader").build().unwrap();
    assert_eq!(rebalanced(&leader.join(JOIN).unwrap()), [Some(true)]);
    let leader = Running::start(leader);
    let mut follower = builder("follower").build().unwrap();
    let events = follower.join(JOIN).unwrap();
    // A static follower joining for the first time: the answer does not say.
    assert_eq!(rebalanced(&events), [None]);
    let generation = follower.generation().unwrap().id;
    wait_for("the leader in the follower's generation", JOIN, || {
        leader.is_stable() && leader.seen().generation == generation
    });
    // The leader saw its generation change: a rejoin it can compare.
    assert_eq!(rebalanced(&leader.seen().events).last(), Some(&Some(true)));

    // The follower restarts: same generation, and it cannot know that.
    follower.close().unwrap();
    let mut follower = builder("follower").build().unwrap();
    assert_eq!(rebalanced(&follower.join(JOIN).unwrap()), [None]);
    assert_eq!(follower.generation().unwrap().id, generation);
    let follower = Running::start(follower);

    // The leader restarts: skip_assignment, so it knows it did not rebalance.
    leader.stop().close().unwrap();
    let mut leader = builder("leader").build().unwrap();
    assert_eq!(rebalanced(&leader.join(JOIN).unwrap()), [Some(false)]);
    assert_eq!(leader.generation().unwrap().id, generation);
    let leader = Running::start(leader);

    // A dynamic member joins: a real rebalance, which its first join knows.
    let mut dynamic = member_builder(&c, &group, &topic).build().unwrap();
    let running = [leader, follower];
    // The others rejoin from their threads; the dynamic member's JoinGroup waits for them.
    let events = dynamic.join(JOIN).unwrap();
    assert_eq!(rebalanced(&events), [Some(true)]);
    assert!(dynamic.generation().unwrap().id > generation);
    drop(running);
}

/// A member subscribed to a topic that does not exist says so (the event), keeps waiting, and
/// is assigned the topic's partitions once it is created: well within metadata.max.age.ms's
/// default 5 minutes, which the leader's check no longer waits for while a topic is missing.
#[test]
fn a_missing_topic_is_reported_then_assigned_once_created() {
    let b = broker::shared();
    let c = client(b.bootstrap());
    let topic = unique_name("not-yet");
    let mut m = member_builder(&c, &unique_name("missing"), &topic)
        .group_instance_id("w-1")
        .build()
        .unwrap();
    let mut events = m.join(JOIN).unwrap();
    assert!(m.assignment().is_empty());
    let until = std::time::Instant::now() + Duration::from_secs(20);
    while !events
        .iter()
        .any(|e| matches!(e, GroupEvent::TopicsMissing { .. }))
    {
        assert!(std::time::Instant::now() < until, "no TopicsMissing: {events:?}");
        events.extend(m.poll(Duration::from_millis(100)).unwrap());
    }
    assert!(
        events.contains(&GroupEvent::TopicsMissing {
            topics: vec![topic.clone()]
        }),
        "{events:?}"
    );
    c.admin()
        .create_topics(&[kafka_group::NewTopic::new(&topic, 2, 1)], JOIN)
        .unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while m.assignment().topic_partitions().len() != 2 {
        assert!(
            std::time::Instant::now() < until,
            "the new topic was not assigned"
        );
        m.poll(Duration::from_millis(100)).unwrap();
    }
}

/// `remove-member` on a member whose process still runs: the member rejoins with a new member
/// id, which `--wait` sees, exiting 5; without `--wait` the removal warns.
#[test]
fn remove_member_on_a_live_member_reports_it_came_back() {
    use crate::cli_tests::cli;
    let b = broker::shared();
    let c = client(b.bootstrap());
    let topic = topic_with_partitions(&c, 1);
    let group = unique_name("came-back");
    let mut m = member_builder(&c, &group, &topic)
        .group_instance_id("live")
        .build()
        .unwrap();
    m.join(JOIN).unwrap();
    let first_id = m.member_id().to_string();
    let running = Running::start(m);

    let run = cli(
        b.bootstrap(),
        &["remove-member", &group, "--instance-id", "live", "--wait", "20"],
    );
    assert_eq!(run.code, 5, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("came back as"), "{}", run.stdout);
    assert!(run.stderr.contains("live"), "{}", run.stderr);
    wait_for("the member rejoined", JOIN, || {
        running.is_stable() && running.seen().member_id != first_id
    });

    // Without --wait: removed (exit 0), with a warning that a running process comes back.
    let run = cli(b.bootstrap(), &["remove-member", &group, "--instance-id", "live"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("does not stop a process"), "{}", run.stderr);
    drop(running);
}
