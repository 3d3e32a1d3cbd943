//! KIP-848's `consumer` group protocol (`group.protocol=consumer`) against a real Kafka 4.x
//! broker ([`broker::consumer_protocol`]: the shared one, or a 4.x node of its own when
//! `KAFKA_VERSION` selects 3.9): static members keep their partitions across a quick restart with nobody else
//! touched, a restart beyond the session timeout moves them and back, a duplicate instance id
//! refuses the newcomer, `leave_group` moves partitions at once, a member whose heartbeats stop
//! is fenced and rejoins, commits carry the member epoch; on Kafka 3.9 the protocol is one
//! clear error, or classic by policy.
//!
//! The broker runs with `group.consumer.session.timeout.ms=6000` and
//! `group.consumer.heartbeat.interval.ms=500` (`scripts/kafka`), the classic tests' values.

use crate::group_tests::client;
use crate::support::{broker, create_topic, unique_name};
use kafka_group::unstable::TestHooks;
use kafka_group::{
    Client, Error, GroupEvent, GroupMember, GroupProtocol, GroupProtocolPolicy, OffsetReset, TopicPartition,
};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const PARTITIONS: i32 = 6;
/// The broker's `group.consumer.session.timeout.ms` in these tests.
const BROKER_SESSION: Duration = Duration::from_secs(6);

fn member(client: &Client, group: &str, topic: &str, instance: Option<&str>) -> GroupMember {
    let b = client
        .member(group)
        .subscribe([topic])
        .group_protocol(GroupProtocol::Consumer);
    match instance {
        Some(id) => b.group_instance_id(id),
        None => b,
    }
    .build()
    .unwrap()
}

/// Polls every member until `done` holds, panicking after `timeout`; returns each member's
/// events meanwhile.
fn poll_until(
    members: &mut [&mut GroupMember],
    timeout: Duration,
    what: &str,
    mut done: impl FnMut(&[&mut GroupMember]) -> bool,
) -> Vec<Vec<GroupEvent>> {
    let deadline = Instant::now() + timeout;
    let mut seen = vec![Vec::new(); members.len()];
    loop {
        for (m, seen) in members.iter_mut().zip(&mut seen) {
            seen.extend(m.poll(Duration::from_millis(20)).unwrap());
        }
        if done(members) {
            return seen;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {timeout:?}; events {seen:?}"
        );
    }
}

fn owned(m: &GroupMember) -> BTreeSet<TopicPartition> {
    m.assignment().topic_partitions().into_iter().collect()
}

fn balanced(members: &[&mut GroupMember], each: usize) -> bool {
    let mut all = BTreeSet::new();
    for m in members {
        let mine = owned(m);
        if mine.len() != each {
            return false;
        }
        all.extend(mine);
    }
    all.len() == members.len() * each
}

#[test]
fn three_static_members_share_the_partitions_and_a_quick_restart_touches_nobody_else() {
    let c = client(broker::consumer_protocol().bootstrap());
    let topic = create_topic(&c, "cp-static", PARTITIONS, 1);
    let group = unique_name("cp-static");
    let mut a = member(&c, &group, &topic, Some("a"));
    let mut b = member(&c, &group, &topic, Some("b"));
    let mut m3 = member(&c, &group, &topic, Some("c"));
    for m in [&mut a, &mut b, &mut m3] {
        m.join(Duration::from_secs(30)).unwrap();
        assert_eq!(m.group_protocol(), GroupProtocol::Consumer);
        assert!(m.generation().unwrap().id > 0);
    }
    poll_until(
        &mut [&mut a, &mut b, &mut m3],
        Duration::from_secs(30),
        "2 partitions each",
        |ms| balanced(ms, 2),
    );
    let mine = owned(&m3);
    let (epoch_a, epoch_b) = (a.generation().unwrap().id, b.generation().unwrap().id);
    // Quick restart: close sends the static leave heartbeat (epoch -2), and a new process with
    // the same instance id takes its place within the session timeout.
    m3.close().unwrap();
    let mut m3 = member(&c, &group, &topic, Some("c"));
    let events = m3.join(Duration::from_secs(30)).unwrap();
    poll_until(
        &mut [&mut m3],
        Duration::from_secs(10),
        "the partitions back",
        |ms| owned(ms[0]) == mine,
    );
    assert!(
        events
            .iter()
            .all(|e| !matches!(e, GroupEvent::Revoked { .. } | GroupEvent::Lost { .. })),
        "{events:?}"
    );
    // The others: no event at all, and their epochs did not move.
    let seen = poll_for(&mut [&mut a, &mut b], Duration::from_secs(3));
    for (name, events) in ["a", "b"].iter().zip(&seen) {
        assert!(events.is_empty(), "{name} saw {events:?}");
    }
    assert_eq!(a.generation().unwrap().id, epoch_a);
    assert_eq!(b.generation().unwrap().id, epoch_b);
    assert_eq!(owned(&a).len() + owned(&b).len(), 4);
}

/// Two members (static `a` and `b`, or dynamic) of a new group on a new 6-partition topic, with
/// 3 partitions each: `(group, topic, a, b)`.
fn settled_pair(
    c: &Client,
    prefix: &str,
    static_members: bool,
) -> (String, String, GroupMember, GroupMember) {
    let topic = create_topic(c, prefix, PARTITIONS, 1);
    let group = unique_name(prefix);
    let id = |i: &'static str| static_members.then_some(i);
    let mut a = member(c, &group, &topic, id("a"));
    let mut b = member(c, &group, &topic, id("b"));
    for m in [&mut a, &mut b] {
        m.join(Duration::from_secs(30)).unwrap();
    }
    poll_until(&mut [&mut a, &mut b], Duration::from_secs(30), "3 each", |ms| {
        balanced(ms, 3)
    });
    (group, topic, a, b)
}

/// Polls every member for `d`; returns what each saw.
fn poll_for(members: &mut [&mut GroupMember], d: Duration) -> Vec<Vec<GroupEvent>> {
    let until = Instant::now() + d;
    poll_until(members, d + Duration::from_secs(5), "polling", |_| {
        Instant::now() >= until
    })
}

/// The names of this process's threads that start with `prefix` (Linux keeps the first 15
/// bytes of a thread's name).
fn threads_named(prefix: &str) -> Vec<String> {
    let mut names = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        if let Ok(comm) = std::fs::read_to_string(task.path().join("comm")) {
            if comm.trim_end().starts_with(prefix) {
                names.push(comm.trim_end().to_string());
            }
        }
    }
    names
}

#[test]
fn a_consumer_protocol_member_runs_one_heartbeat_thread() {
    let c = client(broker::consumer_protocol().bootstrap());
    let topic = create_topic(&c, "cp-threads", 2, 1);
    // Thread names keep 15 bytes: `kafka-hb-` and `kafka-cghb-` plus the group's start, which
    // no other test's group shares (a digit could: group_tests names one `thr<pid>`).
    let group = unique_name("onehb");
    let mut m = member(&c, &group, &topic, Some("worker"));
    poll_until(&mut [&mut m], Duration::from_secs(30), "assigned", |ms| {
        owned(ms[0]).len() == 2
    });
    assert_eq!(
        threads_named("kafka-cghb-oneh").len(),
        1,
        "the consumer protocol's own"
    );
    assert_eq!(
        threads_named("kafka-hb-onehb-"),
        Vec::<String>::new(),
        "no classic heartbeat thread beside it"
    );
    m.close().unwrap();
    // A classic member of the same name runs the classic one, once it has joined.
    let mut classic = c.member(&group).subscribe([topic.as_str()]).build().unwrap();
    assert!(
        threads_named("kafka-hb-onehb-").is_empty(),
        "none before the first join"
    );
    classic.join(Duration::from_secs(30)).unwrap();
    assert_eq!(threads_named("kafka-hb-onehb-").len(), 1);
    classic.close().unwrap();
}

#[test]
fn a_restart_beyond_the_session_timeout_moves_the_partitions_and_back() {
    let c = client(broker::consumer_protocol().bootstrap());
    let (group, topic, mut a, b) = settled_pair(&c, "cp-slow", true);
    let closed = Instant::now();
    b.close().unwrap();
    // Kept for b for the session timeout, then a takes them all.
    poll_until(&mut [&mut a], Duration::from_secs(30), "a owning all 6", |ms| {
        owned(ms[0]).len() == 6
    });
    assert!(
        closed.elapsed() >= BROKER_SESSION - Duration::from_millis(500),
        "moved after {:?}, before the session timeout: the static leave was not -2",
        closed.elapsed()
    );
    let mut b = member(&c, &group, &topic, Some("b"));
    b.join(Duration::from_secs(30)).unwrap();
    let seen = poll_until(
        &mut [&mut a, &mut b],
        Duration::from_secs(30),
        "3 each again",
        |ms| balanced(ms, 3),
    );
    // a gave 3 back incrementally: revoked, never lost.
    assert!(seen[0]
        .iter()
        .any(|e| matches!(e, GroupEvent::Revoked { partitions, .. } if partitions.len() == 3)));
    assert!(
        seen[0].iter().all(|e| !matches!(e, GroupEvent::Lost { .. })),
        "{:?}",
        seen[0]
    );
}

#[test]
fn a_duplicate_instance_id_refuses_the_newcomer_and_leaves_the_incumbent_consuming() {
    let c = client(broker::consumer_protocol().bootstrap());
    let topic = create_topic(&c, "cp-dup", PARTITIONS, 1);
    let group = unique_name("cp-dup");
    let mut a = member(&c, &group, &topic, Some("same"));
    a.join(Duration::from_secs(30)).unwrap();
    poll_until(&mut [&mut a], Duration::from_secs(30), "all 6", |ms| {
        owned(ms[0]).len() == 6
    });
    let epoch = a.generation().unwrap().id;
    let mut newcomer = c
        .member(&group)
        .subscribe([topic.as_str()])
        .group_protocol(GroupProtocol::Consumer)
        .group_instance_id("same")
        .unreleased_instance_id_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let e = newcomer.join(Duration::from_secs(30)).unwrap_err();
    assert!(matches!(e, Error::InstanceInUse { .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains("\"same\"") && text.contains("newcomer"), "{text}");
    // It stays stopped, and the incumbent was not touched.
    assert!(matches!(
        newcomer.poll(Duration::ZERO),
        Err(Error::InstanceInUse { .. })
    ));
    let seen = poll_for(&mut [&mut a], Duration::from_secs(2));
    assert!(seen[0].is_empty(), "{:?}", seen[0]);
    assert_eq!(owned(&a).len(), 6);
    assert_eq!(a.generation().unwrap().id, epoch);
}

#[test]
fn leave_group_moves_the_partitions_at_once() {
    let c = client(broker::consumer_protocol().bootstrap());
    let (group, _, mut a, mut b) = settled_pair(&c, "cp-leave", true);
    b.leave_group().unwrap();
    // Gone from the group at once (epoch -1). A static close (-2) would leave it there, its
    // partitions kept for it, until its session timed out. Checked on the group rather than on
    // the clock: the broker's session (6 s) is too short for a time bound on a loaded machine.
    let d = c.admin().describe_group(&group).unwrap();
    let instances: Vec<_> = d.members.iter().map(|m| m.group_instance_id.as_deref()).collect();
    assert_eq!(instances, [Some("a")], "{d:?}");
    poll_until(&mut [&mut a], Duration::from_secs(30), "a owning all 6", |ms| {
        owned(ms[0]).len() == 6
    });
    b.close().unwrap();
}

#[test]
fn a_member_whose_heartbeats_stop_is_fenced_and_rejoins() {
    let c = client(broker::consumer_protocol().bootstrap());
    let (_, _, mut a, mut b) = settled_pair(&c, "cp-fenced", false);
    b.freeze_heartbeats_for_tests();
    // The broker expires b and gives its partitions to a.
    poll_until(&mut [&mut a], Duration::from_secs(30), "a owning all 6", |ms| {
        owned(ms[0]).len() == 6
    });
    b.thaw_heartbeats_for_tests();
    // b learns it was fenced (UNKNOWN_MEMBER_ID): its partitions are lost, it rejoins at epoch
    // 0 and gets a share again.
    let seen = poll_until(
        &mut [&mut a, &mut b],
        Duration::from_secs(30),
        "3 each again",
        |ms| balanced(ms, 3),
    );
    assert!(
        seen[1]
            .iter()
            .any(|e| matches!(e, GroupEvent::Lost { partitions, .. } if partitions.len() == 3)),
        "{:?}",
        seen[1]
    );
}

#[test]
fn a_consumer_commits_with_its_member_epoch_and_a_restart_resumes_there() {
    let c = client(broker::consumer_protocol().bootstrap());
    let topic = create_topic(&c, "cp-commit", 3, 1);
    let group = unique_name("cp-commit");
    let values: Vec<String> = (0..30).map(|i| format!("v{i}")).collect();
    for p in 0..3 {
        crate::consumer_tests::produce(&c, &topic, p, &values[p as usize * 10..p as usize * 10 + 10]);
    }
    let build = || {
        c.consumer(&group)
            .subscribe([topic.as_str()])
            .group_protocol(GroupProtocol::Consumer)
            .group_instance_id("worker")
            .auto_offset_reset(OffsetReset::Earliest)
            .enable_auto_commit(false)
            .fetch_max_wait(Duration::from_millis(100))
            .build()
            .unwrap()
    };
    let mut consumer = build();
    let got = crate::consumer_tests::consume(&mut consumer, 20, Duration::from_secs(30), false);
    consumer.commit().unwrap();
    let rest: usize = got.len();
    consumer.close().unwrap();
    let mut consumer = build();
    let more = crate::consumer_tests::consume(&mut consumer, 30 - rest, Duration::from_secs(30), true);
    let mut all: Vec<String> = got
        .iter()
        .chain(&more)
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap()).into_owned())
        .collect();
    all.sort();
    let mut want = values.clone();
    want.sort();
    assert_eq!(
        all, want,
        "every record once: committed offsets were kept across the restart"
    );
    consumer.close().unwrap();
}

#[test]
fn the_consumer_protocol_on_kafka_3_9_is_one_clear_error_or_classic_by_policy() {
    let c = client(&broker::shared_legacy().to_string());
    let topic = create_topic(&c, "cp-old", 2, 1);
    let group = unique_name("cp-old");
    refused_then_classic_by_policy(
        &c,
        &group,
        &topic,
        &["group.protocol=consumer", "Kafka 3.9", "4.0"],
    );
}

/// On a coordinator without the consumer protocol: the join fails with the capability error
/// (its text has every one of `says`); with the fallback policy the member joins as classic.
fn refused_then_classic_by_policy(c: &Client, group: &str, topic: &str, says: &[&str]) {
    let mut m = member(c, group, topic, Some("a"));
    let e = m.join(Duration::from_secs(30)).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, Error::MissingCapability { .. }), "{e}");
    assert!(says.iter().all(|s| text.contains(s)), "{text}");
    drop(m);
    let mut m = c
        .member(group)
        .subscribe([topic])
        .group_instance_id("a")
        .group_protocol(GroupProtocol::Consumer)
        .group_protocol_policy(GroupProtocolPolicy::FallBackToClassic)
        .build()
        .unwrap();
    m.join(Duration::from_secs(30)).unwrap();
    assert_eq!(m.group_protocol(), GroupProtocol::Classic);
    assert_eq!(m.assignment().len(), 2);
    m.close().unwrap();
}

#[test]
fn our_members_and_javas_share_a_consumer_protocol_group() {
    use crate::cooperative_tests::java::java_owned;
    use crate::support::java::Java;
    let b = broker::consumer_protocol();
    let c = client(b.bootstrap());
    let topic = create_topic(&c, "cp-java", PARTITIONS, 1);
    let group = unique_name("cp-java");
    let mut x = member(&c, &group, &topic, Some("x"));
    let mut y = member(&c, &group, &topic, Some("y"));
    for m in [&mut x, &mut y] {
        m.join(Duration::from_secs(30)).unwrap();
    }
    let java = Java::new(b.version()).with_config(&[("group.protocol", "consumer".into())]);
    let jc = java.consumer(b.bootstrap(), &topic, &group, "cp-java", Some("j"));
    let java_partitions = |jc: &crate::support::process::Process| -> BTreeSet<TopicPartition> {
        java_owned(jc)
            .into_iter()
            .map(|p| TopicPartition::new(topic.as_str(), p))
            .collect()
    };
    poll_until(
        &mut [&mut x, &mut y],
        Duration::from_secs(60),
        "2 each with Java's",
        |ms| {
            let j = java_partitions(&jc);
            let mut all = j.clone();
            ms.iter().for_each(|m| all.extend(owned(m)));
            j.len() == 2 && balanced(ms, 2) && all.len() == 6
        },
    );
    let d = c.admin().describe_group(&group).unwrap();
    assert_eq!(d.group_protocol, GroupProtocol::Consumer);
    assert!(d
        .members
        .iter()
        .all(|m| m.member_protocol == Some(GroupProtocol::Consumer)));
    // A quick restart of ours leaves Java's assignment alone.
    let java_before = java_partitions(&jc);
    let mine = owned(&y);
    y.close().unwrap();
    let mut y = member(&c, &group, &topic, Some("y"));
    y.join(Duration::from_secs(30)).unwrap();
    poll_until(
        &mut [&mut x, &mut y],
        Duration::from_secs(10),
        "y's partitions back",
        |ms| owned(ms[1]) == mine,
    );
    poll_for(&mut [&mut x, &mut y], Duration::from_secs(1));
    assert_eq!(java_partitions(&jc), java_before);
    assert!(
        !jc.stdout()
            .iter()
            .any(|l| l.starts_with("# revoked") && l.len() > "# revoked ".len()),
        "Java revoked something: {:?}",
        jc.stdout()
            .iter()
            .filter(|l| l.starts_with('#'))
            .collect::<Vec<_>>()
    );
    drop(jc);
}

#[test]
fn our_member_and_librdkafkas_share_a_consumer_protocol_group() {
    use crate::support::rdkafka;
    let b = broker::consumer_protocol();
    let c = client(b.bootstrap());
    let topic = create_topic(&c, "cp-rdkafka", PARTITIONS, 1);
    let group = unique_name("cp-rdkafka");
    for p in 0..PARTITIONS {
        let values: Vec<String> = (0..10).map(|i| format!("p{p}-{i}")).collect();
        crate::consumer_tests::produce(&c, &topic, p, &values);
    }
    let mut x = member(&c, &group, &topic, Some("x"));
    x.join(Duration::from_secs(30)).unwrap();
    poll_until(&mut [&mut x], Duration::from_secs(30), "all 6", |ms| {
        owned(ms[0]).len() == 6
    });
    // librdkafka gets half (the broker's uniform assignor) and reads exactly their records.
    let (bootstrap, t, g) = (b.bootstrap().to_string(), topic.clone(), group.clone());
    let rd = std::thread::spawn(move || {
        rdkafka::consume(&bootstrap, &t, &g, 30, &[("group.protocol", "consumer".into())])
    });
    let mut mine_while = BTreeSet::new();
    let seen = poll_until(&mut [&mut x], Duration::from_secs(60), "librdkafka done", |ms| {
        if owned(ms[0]).len() == 3 {
            mine_while = owned(ms[0]);
        }
        rd.is_finished()
    });
    let records = rd.join().unwrap();
    let theirs: BTreeSet<TopicPartition> = records
        .iter()
        .map(|r| TopicPartition::new(topic.as_str(), r.partition))
        .collect();
    assert_eq!(theirs.len(), 3, "{records:?}");
    assert_eq!(mine_while.len(), 3, "{seen:?}");
    assert!(theirs.is_disjoint(&mine_while), "{theirs:?} / {mine_while:?}");
    // It left (dynamic: epoch -1), so its half comes back at once.
    poll_until(&mut [&mut x], Duration::from_secs(30), "all 6 again", |ms| {
        owned(ms[0]).len() == 6
    });
    x.close().unwrap();
}

/// A member of either protocol, static, polled by the tests below.
fn either(client: &Client, group: &str, topic: &str, instance: &str, protocol: GroupProtocol) -> GroupMember {
    let b = client
        .member(group)
        .subscribe([topic])
        .group_instance_id(instance);
    match protocol {
        GroupProtocol::Consumer => b.group_protocol(GroupProtocol::Consumer),
        GroupProtocol::Classic => b
            .session_timeout(crate::group_tests::SESSION)
            .heartbeat_interval(crate::group_tests::HEARTBEAT),
    }
    .build()
    .unwrap()
}

#[test]
fn a_classic_group_is_upgraded_online_by_restarting_its_static_members_and_downgraded_back() {
    let c = client(broker::consumer_protocol().bootstrap());
    let topic = create_topic(&c, "cp-migrate", PARTITIONS, 1);
    let group = unique_name("cp-migrate");
    let admin = c.admin();
    let names = ["a", "b", "c"];
    let mut members: Vec<GroupMember> = names
        .iter()
        .map(|n| either(&c, &group, &topic, n, GroupProtocol::Classic))
        .collect();
    let converge = |members: &mut Vec<GroupMember>, what: &str| {
        let mut refs: Vec<&mut GroupMember> = members.iter_mut().collect();
        poll_until(&mut refs, Duration::from_secs(60), what, |ms| balanced(ms, 2));
    };
    converge(&mut members, "classic: 2 each");
    assert_eq!(
        admin.describe_group(&group).unwrap().group_protocol,
        GroupProtocol::Classic
    );
    for (steps, to) in [(0..3, GroupProtocol::Consumer), (0..3, GroupProtocol::Classic)] {
        for i in steps {
            // A rolling restart: each process comes back on the other protocol, same id.
            let old = std::mem::replace(&mut members[i], either(&c, &group, &topic, names[i], to));
            old.close().unwrap();
            converge(&mut members, &format!("{} on {to}: 2 each", names[i]));
            let d = admin.describe_group(&group).unwrap();
            eprintln!(
                "{} restarted on {to}: group {} {:?}",
                names[i],
                d.group_protocol,
                d.members
                    .iter()
                    .map(|m| (
                        m.group_instance_id.clone(),
                        m.member_id.clone(),
                        m.member_protocol
                    ))
                    .collect::<Vec<_>>()
            );
            let on_new: Vec<_> = d
                .members
                .iter()
                // DescribeGroups (a classic group) does not say: all are classic then.
                .filter(|m| m.member_protocol.unwrap_or(d.group_protocol) == to)
                .filter_map(|m| m.group_instance_id.clone())
                .collect();
            assert!(on_new.contains(&names[i].to_string()), "{d:?}");
        }
        assert_eq!(
            admin.describe_group(&group).unwrap().group_protocol,
            to,
            "every member restarted on {to}"
        );
    }
    for m in members {
        m.close().unwrap();
    }
}

#[test]
fn the_consumer_protocol_through_the_proxys_3_8_table_is_one_clear_error_or_classic_by_policy() {
    use crate::support::proxy::{upstream_for, Proxy};
    let p = Proxy::start(upstream_for("kraft-3.8"), "kraft-3.8");
    let c = client(&p.bootstrap());
    let direct = client(&upstream_for("kraft-3.8").to_string());
    let topic = create_topic(&direct, "cp-proxy", 2, 1);
    let group = unique_name("cp-proxy");
    refused_then_classic_by_policy(
        &c,
        &group,
        &topic,
        &["group.protocol=consumer", "Kafka 3.8", "4.0"],
    );
}

#[test]
fn a_static_member_restarted_after_a_crash_gets_in_once_the_old_session_expires() {
    let c = client(broker::consumer_protocol().bootstrap());
    let (group, topic, mut a, b) = settled_pair(&c, "cp-crash", true);
    let mine = owned(&b);
    // No leave heartbeat: the coordinator holds b's instance id until its session expires, and
    // answers the restarted process UNRELEASED_INSTANCE_ID until then (retried, by default for
    // 45 s).
    let crashed = Instant::now();
    b.crash_for_tests();
    let mut b = member(&c, &group, &topic, Some("b"));
    b.join(Duration::from_secs(30)).unwrap();
    let joined = crashed.elapsed();
    poll_until(
        &mut [&mut a, &mut b],
        Duration::from_secs(30),
        "3 each again",
        |ms| balanced(ms, 3),
    );
    assert!(
        joined >= BROKER_SESSION - Duration::from_secs(1),
        "joined after {joined:?}"
    );
    eprintln!(
        "restart after a crash: joined after {joined:?}, b had {mine:?}, has {:?}",
        owned(&b)
    );
}

/// The coordinator's broker dies (3-node cluster): the members find the new coordinator, which
/// loaded the group from `__consumer_offsets`, and keep their partitions and epochs.
#[test]
fn coordinator_failover_keeps_a_consumer_protocol_group() {
    let cluster = broker::Cluster::start(3, &broker::consumer_protocol_version());
    let c = crate::group_tests::failover_client(cluster.bootstrap())
        .build()
        .unwrap();
    let topic = create_topic(&c, "cp-failover", PARTITIONS, 3);
    let group = unique_name("cp-failover");
    let mut ms: Vec<GroupMember> = ["a", "b", "c"]
        .iter()
        .map(|i| member(&c, &group, &topic, Some(i)))
        .collect();
    {
        let mut refs: Vec<&mut GroupMember> = ms.iter_mut().collect();
        poll_until(&mut refs, Duration::from_secs(60), "2 each", |ms| balanced(ms, 2));
    }
    let before: Vec<(BTreeSet<TopicPartition>, i32)> = ms
        .iter()
        .map(|m| (owned(m), m.generation().unwrap().id))
        .collect();
    let coordinator = c.find_coordinator(&group).unwrap();
    cluster.kill(coordinator.id as usize);
    let killed = Instant::now();
    let mut refs: Vec<&mut GroupMember> = ms.iter_mut().collect();
    let mut seen = poll_until(
        &mut refs,
        Duration::from_secs(60),
        "every member at the new coordinator",
        |ms| {
            ms.iter()
                .all(|m| m.coordinator().is_some_and(|b| b.id != coordinator.id))
        },
    );
    let moved_after = killed.elapsed();
    // Heartbeats go on at the new coordinator, with nothing revoked or lost.
    for (all, more) in seen.iter_mut().zip(poll_for(&mut refs, Duration::from_secs(3))) {
        all.extend(more);
    }
    for ((m, events), (partitions, epoch)) in refs.iter().zip(&seen).zip(&before) {
        assert!(
            events
                .iter()
                .all(|e| !matches!(e, GroupEvent::Revoked { .. } | GroupEvent::Lost { .. })),
            "{:?}: {events:?}",
            m.group_instance_id()
        );
        assert!(
            events
                .iter()
                .any(|e| matches!(e, GroupEvent::CoordinatorMoved { .. })),
            "{events:?}"
        );
        assert_eq!((&owned(m), m.generation().unwrap().id), (partitions, *epoch));
    }
    eprintln!(
        "consumer protocol: coordinator {} died, members followed within {moved_after:?}",
        coordinator.id
    );
}

#[test]
fn an_assignor_the_broker_lacks_is_one_clear_error() {
    let c = client(broker::consumer_protocol().bootstrap());
    let topic = create_topic(&c, "cp-assignor", 2, 1);
    let mut m = c
        .member(&unique_name("cp-assignor"))
        .subscribe([topic.as_str()])
        .group_protocol(GroupProtocol::Consumer)
        .group_remote_assignor("no-such-assignor")
        .build()
        .unwrap();
    let e = m.join(Duration::from_secs(30)).unwrap_err();
    assert_eq!(
        e.kafka_code(),
        Some(kafka_group::KafkaCode::UnsupportedAssignor),
        "{e}"
    );
    assert!(e.to_string().contains("no-such-assignor"), "{e}");
    // Stopped for good: no retry hammers the coordinator.
    assert_eq!(m.poll(Duration::ZERO).unwrap_err().kafka_code(), e.kafka_code());
    // The broker's own assignors work.
    for name in ["uniform", "range"] {
        let mut m = c
            .member(&unique_name("cp-assignor"))
            .subscribe([topic.as_str()])
            .group_protocol(GroupProtocol::Consumer)
            .group_remote_assignor(name)
            .build()
            .unwrap();
        m.join(Duration::from_secs(30)).unwrap();
        poll_until(&mut [&mut m], Duration::from_secs(10), "both partitions", |ms| {
            owned(ms[0]).len() == 2
        });
        m.close().unwrap();
    }
}
