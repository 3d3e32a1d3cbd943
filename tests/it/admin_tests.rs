//! `Admin` against a real broker: topic creation waits for leaders, duplicate creation and
//! deletion report the topic, unknown groups describe as `Dead`, group listing works.

use crate::support;
use kafka_group::ApiKey;
use kafka_group::{Client, Error, KafkaCode, NewTopic};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(60);

fn client() -> Client {
    Client::builder()
        .bootstrap_servers(support::broker::shared().bootstrap())
        .build()
        .unwrap()
}

#[test]
fn create_topic_waits_for_leaders_then_delete_removes_it() {
    let client = client();
    let admin = client.admin();
    let name = support::unique_name("admin-topic");
    let topic = NewTopic::new(&name, 6, 1).config("retention.ms", "600000");

    admin
        .create_topics(std::slice::from_ref(&topic), TIMEOUT)
        .unwrap();
    // No polling here: create_topics returns only once the metadata has settled, and leaves
    // the client's cache showing it.
    let cached = client.cached_metadata();
    let t = &cached.topics[&name];
    assert_eq!(t.error, KafkaCode::None);
    assert_eq!(t.partitions.len(), 6);
    assert!(t.partitions.iter().all(|p| p.leader >= 0), "{t:?}");
    // A client that never saw the creation agrees.
    let fresh = self::client().refresh_metadata(Some(&[name.as_str()])).unwrap();
    assert_eq!(fresh.topics[&name].partitions.len(), 6);
    assert!(fresh.topics[&name].partitions.iter().all(|p| p.leader >= 0));

    let e = admin
        .create_topics(std::slice::from_ref(&topic), TIMEOUT)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Kafka {
                api: ApiKey::CreateTopics,
                code: KafkaCode::TopicAlreadyExists,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains(&name), "{e}");
    admin.create_topics_if_missing(&[topic], TIMEOUT).unwrap();

    admin.delete_topics(&[&name], TIMEOUT).unwrap();
    let after = client.refresh_metadata(Some(&[name.as_str()])).unwrap();
    assert!(
        after
            .topics
            .get(&name)
            .map_or(true, |t| t.error == KafkaCode::UnknownTopicOrPartition),
        "{:?}",
        after.topics.get(&name)
    );
    let e = admin.delete_topics(&[&name], TIMEOUT).unwrap_err();
    assert_eq!(e.kafka_code(), Some(KafkaCode::UnknownTopicOrPartition), "{e}");
    assert!(e.to_string().contains(&name), "{e}");
}

#[test]
fn create_topics_if_missing_creates_what_is_missing() {
    let admin = client().admin();
    let existing = support::unique_name("admin-existing");
    let missing = support::unique_name("admin-missing");
    admin
        .create_topics(&[NewTopic::new(&existing, 1, 1)], TIMEOUT)
        .unwrap();
    admin
        .create_topics_if_missing(
            &[NewTopic::new(&existing, 1, 1), NewTopic::new(&missing, 3, 1)],
            TIMEOUT,
        )
        .unwrap();
    let meta = client().refresh_metadata(Some(&[missing.as_str()])).unwrap();
    assert_eq!(meta.topics[&missing].partitions.len(), 3);
    admin.delete_topics(&[&existing, &missing], TIMEOUT).unwrap();
}

#[test]
fn an_unknown_group_is_dead_and_empty() {
    let admin = client().admin();
    let group = support::unique_name("admin-no-such-group");
    let d = admin.describe_group(&group).unwrap();
    assert_eq!(d.group_id, group);
    assert_eq!(d.state, "Dead");
    assert!(d.members.is_empty(), "{d:?}");
}

#[test]
fn list_groups_answers_from_every_broker() {
    let groups = client().admin().list_groups().unwrap();
    // Merged and sorted by id, so no group appears twice.
    assert!(
        groups.windows(2).all(|w| w[0].group_id < w[1].group_id),
        "{groups:?}"
    );
}

#[test]
fn removing_an_unknown_instance_reports_it_per_member() {
    let admin = client().admin();
    let group = support::unique_name("admin-remove");
    assert!(admin.remove_members(&group, &[]).unwrap().is_empty());
    // Both the classic and the KIP-848 coordinator (3.9, 4.x) answer per member.
    let out = admin.remove_members(&group, &["nobody"]).unwrap();
    assert_eq!(out, vec![("nobody".to_string(), Err(KafkaCode::UnknownMemberId))]);
}

/// Committed offsets and lag of a group whose consumer has read three partitions of 10
/// records and committed 4 on partition 0 and 10 on partition 1; `old` when `via` speaks the
/// 0.10.0 protocol (OffsetFetch v1 must name the topics, ListOffsets v0).
fn offsets_and_lag(direct: &Client, via: &Client, old: bool) {
    use crate::consumer_tests::{consume, produce};
    use kafka_group::TopicPartition;
    use kafka_group::{OffsetReset, OffsetSpec, PartitionLag};
    use std::collections::BTreeMap;

    let topic = support::create_topic(direct, "admin-lag", 3, 1);
    for p in 0..3 {
        let values: Vec<String> = (0..10).map(|i| format!("{p}-{i}")).collect();
        produce(direct, &topic, p, &values);
    }
    let admin = via.admin();
    let tp = |p| TopicPartition::new(&topic, p);
    let all = [tp(0), tp(1), tp(2)];
    let each = |o: i64| all.iter().map(|t| (t.clone(), o)).collect::<BTreeMap<_, _>>();
    assert_eq!(admin.list_offsets(&all, OffsetSpec::Earliest).unwrap(), each(0));
    assert_eq!(admin.list_offsets(&all, OffsetSpec::Latest).unwrap(), each(10));
    if !old {
        assert_eq!(
            admin.list_offsets(&all, OffsetSpec::Timestamp(0)).unwrap(),
            each(0)
        );
        let future = i64::MAX / 2;
        assert_eq!(
            admin.list_offsets(&all, OffsetSpec::Timestamp(future)).unwrap(),
            each(-1)
        );
    }

    let group = support::unique_name("admin-lag");
    let mut c = via
        .consumer(&group)
        .subscribe([&topic])
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false)
        .fetch_max_wait(Duration::from_millis(100))
        .build()
        .unwrap();
    consume(&mut c, 30, Duration::from_secs(30), false);
    let commits: BTreeMap<_, _> = [(tp(0), 4), (tp(1), 10)].into_iter().collect();
    c.commit_offsets(&commits).unwrap();

    assert_eq!(admin.group_offsets(&group).unwrap(), commits);
    let lag = |p, committed: Option<i64>| PartitionLag {
        tp: tp(p),
        committed,
        log_end: 10,
        lag: committed.map(|c| 10 - c),
    };
    // Partition 2 is assigned but has no commit yet.
    assert_eq!(
        admin.group_lag(&group).unwrap(),
        vec![lag(0, Some(4)), lag(1, Some(10)), lag(2, None)]
    );
    // Both at once: the same description and the same lag.
    let (d, both) = admin.describe_group_lag(&group).unwrap();
    assert_eq!(both, vec![lag(0, Some(4)), lag(1, Some(10)), lag(2, None)]);
    assert_eq!(d.state, "Stable");
    assert_eq!(d.members.len(), 1);
    let assigned: BTreeMap<String, Vec<i32>> = [(topic.clone(), vec![0, 1, 2])].into_iter().collect();
    assert_eq!(
        d.members[0].decoded_assignment.as_ref().map(|a| &a.partitions),
        Some(&assigned)
    );

    c.close().unwrap();
    if old {
        // OffsetFetch v1 can only ask for the topics an (empty) group's members are assigned.
        assert!(admin.group_offsets(&group).unwrap().is_empty());
    } else {
        // Once the group is empty only the commits remain.
        assert_eq!(admin.group_offsets(&group).unwrap(), commits);
        assert_eq!(
            admin.group_lag(&group).unwrap(),
            vec![lag(0, Some(4)), lag(1, Some(10))]
        );
    }
    let unknown = support::unique_name("admin-no-such-group");
    assert!(admin.group_offsets(&unknown).unwrap().is_empty());
    assert!(admin.group_lag(&unknown).unwrap().is_empty());
    direct.admin().delete_topics(&[&topic], TIMEOUT).unwrap();
}

#[test]
fn group_offsets_and_lag_after_commits() {
    let client = client();
    offsets_and_lag(&client, &client, false);
}

#[test]
fn group_offsets_and_lag_on_kafka_0_10_0_protocol() {
    use crate::support::proxy::{self, Proxy};
    let release = "zk-0.10.0";
    let upstream = proxy::upstream_for(release);
    let direct = crate::group_tests::client(&upstream.to_string());
    let proxy = Proxy::start(upstream, release);
    let via = crate::group_tests::client(&proxy.bootstrap());
    offsets_and_lag(&direct, &via, true);
}

/// Three static members with a 30 s session timeout: DescribeGroups shows their instance ids,
/// client ids, hosts and assignments; after one closes (no LeaveGroup, being static), removing
/// it by instance id makes the coordinator hand its partitions to the other two at once, long
/// before its session would have expired.
#[test]
fn describe_shows_static_members_and_removal_rebalances_at_once() {
    use crate::group_tests::{converged, member_builder, three_converged, topic_with_partitions, Running};
    use crate::support::wait_for;
    use kafka_group::TopicPartition;
    use std::collections::BTreeSet;
    use std::time::Instant;

    const SESSION: Duration = Duration::from_secs(30);
    let bootstrap = support::broker::shared().bootstrap();
    let client = client();
    let admin = client.admin();
    let topic = topic_with_partitions(&client, 6);
    let group = support::unique_name("admin-static");
    let mut ms: Vec<Running> = three_converged(|instance| {
        let c = Client::builder()
            .bootstrap_servers(bootstrap)
            .client_id(format!("admin-static-{instance}"))
            .build()
            .unwrap();
        member_builder(&c, &group, &topic)
            .group_instance_id(instance)
            .session_timeout(SESSION)
            .build()
            .unwrap()
    });

    let d = admin.describe_group(&group).unwrap();
    assert_eq!(
        (d.state.as_str(), d.protocol_type.as_str()),
        ("Stable", "consumer"),
        "{d:?}"
    );
    assert_eq!(d.members.len(), 3, "{d:?}");
    for r in &ms {
        let instance = r.instance.as_deref().unwrap();
        let seen = r.seen();
        let m = d
            .members
            .iter()
            .find(|m| m.group_instance_id.as_deref() == Some(instance))
            .unwrap_or_else(|| panic!("no member {instance} in {d:?}"));
        assert_eq!(m.member_id, seen.member_id, "{instance}");
        assert_eq!(m.client_id, format!("admin-static-{instance}"));
        assert!(
            m.client_host.contains("127.0.0.1"),
            "{instance}: {}",
            m.client_host
        );
        let described: BTreeSet<TopicPartition> = m
            .decoded_assignment
            .as_ref()
            .unwrap()
            .partitions
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |&p| TopicPartition::new(t, p)))
            .collect();
        assert_eq!(described, seen.partitions, "{instance}");
        assert_eq!(described.len(), 2, "{instance}");
    }
    let generation = ms[0].seen().generation;

    // Static: close sends no LeaveGroup, so "b" would keep its partitions for 30 s.
    ms.remove(1).stop().close().unwrap();
    let removed_at = Instant::now();
    assert_eq!(
        admin.remove_members(&group, &["b"]).unwrap(),
        vec![("b".to_string(), Ok(()))]
    );
    // Well before b's session could expire, with room for a loaded machine.
    let bound = SESSION - support::LOAD_MARGIN;
    wait_for("the other two to take over all six partitions", bound, || {
        converged(&ms, 6) && ms[0].seen().generation > generation
    });
    let elapsed = removed_at.elapsed();
    eprintln!("removal to a settled group of two: {elapsed:?}");
    assert!(elapsed < bound, "{elapsed:?}");
    for r in &ms {
        let s = r.seen();
        assert_eq!(s.partitions.len(), 3, "{:?}: {s:?}", r.instance);
        assert!(s.error.is_none(), "{:?}: {:?}", r.instance, s.error);
    }

    let d = admin.describe_group(&group).unwrap();
    let instances: BTreeSet<_> = d
        .members
        .iter()
        .filter_map(|m| m.group_instance_id.as_deref())
        .collect();
    assert_eq!(instances, BTreeSet::from(["a", "c"]), "{d:?}");
    assert_eq!(d.members.len(), 2, "{d:?}");
}
