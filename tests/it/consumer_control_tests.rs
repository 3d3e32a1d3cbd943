//! Flow and group control on a `Consumer` against a real broker: pause/resume, a rebalance
//! listener that pauses or seeks before anything is fetched, `leave_group` moving partitions at
//! once, `request_rejoin`, `group_metadata`, and manual assignment with and without a group.

use crate::group_tests::{client, topic_with_partitions, HEARTBEAT, SESSION};
use crate::support::{broker, unique_name};
use kafka_group::{
    Client, Consumer, ConsumerRebalanceListener, ConsumerRecord, Error, OffsetReset, ProducerRecord,
    TopicPartition,
};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn produce(client: &Client, topic: &str, partition: i32, n: usize) {
    let mut p = client.producer().build().unwrap();
    for i in 0..n {
        p.send(ProducerRecord::new(topic, format!("v{i}")).partition(partition))
            .unwrap();
    }
    p.flush().unwrap();
}

fn consumer(client: &Client, group: &str, topic: &str) -> Consumer {
    client
        .consumer(group)
        .subscribe([topic])
        .session_timeout(SESSION)
        .heartbeat_interval(HEARTBEAT)
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false)
        .build()
        .unwrap()
}

/// Polls until `cond` holds on what came so far (or fails after a minute).
fn poll_until(
    c: &mut Consumer,
    what: &str,
    mut cond: impl FnMut(&[ConsumerRecord], &Consumer) -> bool,
) -> Vec<ConsumerRecord> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut out = Vec::new();
    while !cond(&out, c) {
        assert!(Instant::now() < deadline, "{what}: got {} records", out.len());
        out.extend(c.poll(Duration::from_millis(300)).unwrap().records);
    }
    out
}

/// What a listener saw, and what it does on an assignment.
#[derive(Default)]
struct Script {
    calls: Vec<String>,
    pause_on_assign: Vec<TopicPartition>,
    seek_on_assign: Option<(TopicPartition, i64)>,
    poll_inside: Option<bool>,
}

struct Recorder(Arc<Mutex<Script>>);

impl ConsumerRebalanceListener for Recorder {
    fn on_partitions_revoked(&mut self, _: &mut Consumer, partitions: &[TopicPartition]) {
        self.0
            .lock()
            .unwrap()
            .calls
            .push(format!("revoked {}", partitions.len()));
    }

    fn on_partitions_assigned(&mut self, consumer: &mut Consumer, partitions: &[TopicPartition]) {
        let mut s = self.0.lock().unwrap();
        s.calls.push(format!("assigned {}", partitions.len()));
        consumer.pause(&s.pause_on_assign).unwrap();
        if let Some((tp, at)) = s.seek_on_assign.clone() {
            consumer.seek(&tp, at).unwrap();
        }
        let refused = matches!(
            consumer.poll(Duration::ZERO),
            Err(Error::Config { property: "poll", .. })
        );
        s.poll_inside = Some(refused);
    }
}

#[test]
fn paused_partitions_are_not_fetched_until_resumed_and_keep_their_positions() {
    let b = broker::shared();
    let client = client(b.bootstrap());
    let topic = topic_with_partitions(&client, 2);
    produce(&client, &topic, 0, 5);
    produce(&client, &topic, 1, 5);
    let (p0, p1) = (TopicPartition::new(&topic, 0), TopicPartition::new(&topic, 1));
    let mut c = consumer(&client, &unique_name("ctl-pause"), &topic);
    let script = Arc::new(Mutex::new(Script {
        pause_on_assign: vec![p0.clone()],
        ..Script::default()
    }));
    c.set_rebalance_listener(Recorder(script.clone()));
    // Paused by the listener before anything was fetched: only p1's records come.
    let got = poll_until(&mut c, "p1's records", |r, _| r.len() >= 5);
    assert!(got.iter().all(|r| r.partition == 1), "{got:?}");
    assert!(c.poll(Duration::from_millis(500)).unwrap().records.is_empty());
    assert_eq!(c.paused(), vec![p0.clone()]);
    assert_eq!(
        script.lock().unwrap().poll_inside,
        Some(true),
        "poll inside a listener is refused"
    );
    assert_eq!(
        c.position(&p0),
        Some(0),
        "a paused partition still gets its position"
    );
    c.resume(std::slice::from_ref(&p0));
    assert!(c.paused().is_empty());
    let got = poll_until(&mut c, "p0 after resume", |r, _| r.len() >= 5);
    assert_eq!(
        got.iter().map(|r| (r.partition, r.offset)).collect::<Vec<_>>(),
        (0..5).map(|o| (0, o)).collect::<Vec<_>>()
    );
    // Paused mid-stream: new records stay unread, the position stays.
    c.pause(std::slice::from_ref(&p0)).unwrap();
    produce(&client, &topic, 0, 3);
    produce(&client, &topic, 1, 1);
    let got = poll_until(&mut c, "p1's new record", |r, _| !r.is_empty());
    assert!(got.iter().all(|r| r.partition == 1));
    assert_eq!(c.position(&p0), Some(5));
    assert!(matches!(
        c.pause(&[TopicPartition::new(&topic, 7)]),
        Err(Error::NotAssigned(_))
    ));
    c.resume(&[p0.clone(), p1.clone()]);
    let got = poll_until(&mut c, "p0's new records", |r, _| r.len() >= 3);
    assert_eq!(got.first().map(|r| (r.partition, r.offset)), Some((0, 5)));
    c.close().unwrap();
}

#[test]
fn a_listener_seek_on_assignment_wins_over_the_committed_offset_and_rejoin_revokes_first() {
    let b = broker::shared();
    let client = client(b.bootstrap());
    let topic = topic_with_partitions(&client, 1);
    let tp = TopicPartition::new(&topic, 0);
    produce(&client, &topic, 0, 10);
    let group = unique_name("ctl-listen");
    {
        let mut c = consumer(&client, &group, &topic);
        poll_until(&mut c, "an assignment", |_, c| !c.assignment().is_empty());
        c.commit_offsets(&BTreeMap::from([(tp.clone(), 2)])).unwrap();
        c.close().unwrap();
    }
    let mut c = consumer(&client, &group, &topic);
    let script = Arc::new(Mutex::new(Script {
        seek_on_assign: Some((tp.clone(), 6)),
        ..Script::default()
    }));
    c.set_rebalance_listener(Recorder(script.clone()));
    let got = poll_until(&mut c, "records", |r, _| !r.is_empty());
    assert_eq!(
        got[0].offset, 6,
        "the listener's seek, not the committed offset 2"
    );
    let meta = c.group_metadata().unwrap();
    assert!(meta.generation_id >= 1 && !meta.member_id.is_empty(), "{meta:?}");
    assert_eq!(meta.group_id, group);
    assert_eq!(meta.group_instance_id, None);
    c.request_rejoin().unwrap();
    poll_until(&mut c, "a new generation", |_, c| {
        c.group_metadata().unwrap().generation_id > meta.generation_id && !c.assignment().is_empty()
    });
    assert_eq!(
        script.lock().unwrap().calls,
        ["assigned 1", "revoked 1", "assigned 1"]
    );
    c.close().unwrap();
}

#[test]
fn leave_group_from_a_static_consumer_moves_its_partitions_at_once() {
    let b = broker::shared();
    let client = client(b.bootstrap());
    let topic = topic_with_partitions(&client, 2);
    let group = unique_name("ctl-leave");
    // A minute of session: only the leave can move the partitions within the test's bound.
    let member = |id: &str| {
        client
            .consumer(&group)
            .group_instance_id(id)
            .subscribe([topic.as_str()])
            .session_timeout(Duration::from_secs(60))
            .heartbeat_interval(Duration::from_millis(500))
            .enable_auto_commit(false)
            .build()
            .unwrap()
    };
    let (mut a, mut bm) = (member("a"), member("b"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while a.assignment().len() + bm.assignment().len() < 2 || a.assignment().is_empty() {
        assert!(Instant::now() < deadline, "no split of the partitions");
        a.poll(Duration::from_millis(200)).unwrap();
        bm.poll(Duration::from_millis(200)).unwrap();
    }
    assert_eq!(
        a.group_metadata().unwrap().group_instance_id.as_deref(),
        Some("a")
    );
    let left = Instant::now();
    a.leave_group().unwrap();
    assert!(a.assignment().is_empty());
    while bm.assignment().len() < 2 {
        assert!(
            left.elapsed() < Duration::from_secs(30),
            "b did not get a's partition"
        );
        bm.poll(Duration::from_millis(200)).unwrap();
    }
    println!("b owned both partitions {:?} after a left", left.elapsed());
    a.close().unwrap();
    bm.close().unwrap();
}

#[test]
fn manual_assignment_reads_without_joining_and_commits_only_with_a_group() {
    let b = broker::shared();
    let client = client(b.bootstrap());
    let topic = topic_with_partitions(&client, 2);
    produce(&client, &topic, 0, 4);
    produce(&client, &topic, 1, 6);
    let (p0, p1) = (TopicPartition::new(&topic, 0), TopicPartition::new(&topic, 1));
    // Without a group.
    let mut c = client
        .consumer_without_group()
        .assign([p0.clone()])
        .auto_offset_reset(OffsetReset::Earliest)
        .build()
        .unwrap();
    assert!(c.group_metadata().is_none());
    let got = poll_until(&mut c, "p0", |r, _| r.len() >= 4);
    assert!(got.iter().all(|r| r.partition == 0));
    assert!(matches!(
        c.commit(),
        Err(Error::Config {
            property: "group.id",
            ..
        })
    ));
    c.assign(&[p0.clone(), p1.clone()]).unwrap();
    let got = poll_until(&mut c, "p1 after assign", |r, _| r.len() >= 6);
    assert!(
        got.iter().all(|r| r.partition == 1),
        "p0 goes on from its position: {got:?}"
    );
    assert!(matches!(c.request_rejoin(), Err(Error::Config { .. })));
    c.close().unwrap();
    // With a group: commits go to it, no JoinGroup.
    let group = unique_name("ctl-manual");
    let mut c = client
        .consumer(&group)
        .assign([p1.clone()])
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false)
        .build()
        .unwrap();
    let got = poll_until(&mut c, "p1", |r, _| r.len() >= 6);
    c.commit_records(&got[..3]).unwrap();
    assert_eq!(c.committed(std::slice::from_ref(&p1)).unwrap()[&p1], Some(3));
    assert_eq!(c.member().unwrap().metrics().joins, 0, "a JoinGroup was sent");
    assert_eq!(c.group_metadata().unwrap().generation_id, -1);
    c.close().unwrap();
    // The next reader of the group starts at the commit.
    let mut c = client.consumer(&group).assign([p1.clone()]).build().unwrap();
    assert_eq!(poll_until(&mut c, "p1 again", |r, _| !r.is_empty())[0].offset, 3);
    c.close().unwrap();
    // Bad input, before any request.
    let bad = client
        .consumer_without_group()
        .assign([TopicPartition::new("bad topic!", 0)])
        .build();
    assert!(matches!(
        bad,
        Err(Error::Config {
            property: "assign",
            ..
        })
    ));
    let both = client
        .consumer(&group)
        .subscribe([topic.as_str()])
        .assign([p0])
        .build();
    assert!(matches!(
        both,
        Err(Error::Config {
            property: "assign",
            ..
        })
    ));
    assert!(matches!(
        client
            .consumer_without_group()
            .subscribe([topic.as_str()])
            .build(),
        Err(Error::Config {
            property: "subscribe",
            ..
        })
    ));
}

/// A consumer that changes its subscription after build, then unsubscribes and subscribes
/// again, on `protocol`: each change shows in the assignment and in whose records arrive.
fn subscription_changes_after_build(client: &Client, protocol: kafka_group::GroupProtocol) {
    let a = topic_with_partitions(client, 2);
    let b = topic_with_partitions(client, 2);
    for p in 0..2 {
        produce(client, &a, p, 3);
        produce(client, &b, p, 3);
    }
    let group = unique_name("resubscribe");
    let mut builder = client
        .consumer(&group)
        .subscribe([a.as_str()])
        .group_protocol(protocol)
        .group_instance_id("w")
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false);
    if protocol == kafka_group::GroupProtocol::Classic {
        builder = builder.session_timeout(SESSION).heartbeat_interval(HEARTBEAT);
    }
    let mut c = builder.build().unwrap();
    let topics_of = |c: &Consumer| -> Vec<String> {
        let mut t: Vec<String> = c.assignment().into_iter().map(|tp| tp.topic).collect();
        t.sort();
        t.dedup();
        t
    };
    let got = poll_until(&mut c, "topic a's records", |r, _| r.len() >= 6);
    assert!(got.iter().all(|r| *r.topic == *a), "only a is subscribed");

    c.subscribe([b.as_str()]).unwrap();
    assert_eq!(c.subscription(), std::slice::from_ref(&b));
    let got = poll_until(&mut c, "topic b's records after resubscribing", |r, c| {
        r.len() >= 6 && topics_of(c) == [b.clone()]
    });
    assert!(
        got.iter().all(|r| *r.topic == *b),
        "a was dropped from the subscription"
    );

    c.unsubscribe().unwrap();
    assert!(c.subscription().is_empty());
    assert!(c.assignment().is_empty());
    let t = Instant::now();
    let idle = c.poll(Duration::from_millis(500)).unwrap();
    assert!(
        idle.records.is_empty() && c.assignment().is_empty(),
        "nothing joined"
    );
    assert!(
        t.elapsed() < Duration::from_millis(500) + crate::support::LOAD_MARGIN,
        "an unsubscribed poll returns within its timeout: {:?}",
        t.elapsed()
    );
    // Bad input changes nothing.
    assert!(matches!(
        c.subscribe(Vec::<String>::new()),
        Err(Error::Config {
            property: "subscribe",
            ..
        })
    ));
    assert!(matches!(
        c.subscribe(["bad name"]),
        Err(Error::Config {
            property: "subscribe",
            ..
        })
    ));
    assert!(c.subscription().is_empty());

    c.subscribe([a.as_str(), b.as_str()]).unwrap();
    poll_until(&mut c, "both topics after subscribing again", |_, c| {
        topics_of(c) == {
            let mut both = vec![a.clone(), b.clone()];
            both.sort();
            both
        }
    });
    c.close().unwrap();
}

#[test]
fn subscribe_and_unsubscribe_after_build_change_what_is_consumed() {
    let client = client(broker::shared().bootstrap());
    subscription_changes_after_build(&client, kafka_group::GroupProtocol::Classic);
}

#[test]
fn subscribe_and_unsubscribe_after_build_on_the_consumer_protocol() {
    let client = client(broker::consumer_protocol().bootstrap());
    subscription_changes_after_build(&client, kafka_group::GroupProtocol::Consumer);
}

#[test]
fn a_manually_assigned_consumer_cannot_subscribe() {
    let client = client(broker::shared().bootstrap());
    let topic = topic_with_partitions(&client, 1);
    let mut c = client
        .consumer(&unique_name("manual-sub"))
        .assign([TopicPartition::new(&topic, 0)])
        .build()
        .unwrap();
    assert!(matches!(
        c.subscribe([topic.as_str()]),
        Err(Error::Config {
            property: "subscribe",
            ..
        })
    ));
    assert!(matches!(
        c.unsubscribe(),
        Err(Error::Config {
            property: "subscribe",
            ..
        })
    ));
    assert_eq!(c.assignment(), [TopicPartition::new(&topic, 0)]);
}
