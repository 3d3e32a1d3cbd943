//! The compatibility suite: what a group client needs, against the one real release that
//! `KAFKA_VERSION` selects. `scripts/compat` runs it on every pinned release from 0.10.0 to 4.4
//! (`cargo test --test it compat_tests::` with `KAFKA_VERSION` set to each); the default run
//! covers the default release like every other test.
//!
//! Each test knows which release brought the feature it checks. On an older release it checks
//! the one clear error the client gives instead (and the fallback, where there is one), and says
//! so on stderr with a `compat: n/a` line that `scripts/compat` copies into its matrix. Where a
//! scenario exists elsewhere in the suite (static restarts, fencing, dynamic members) this runs
//! the same function.
//!
//! SASL runs on the release's own `scripts/kafka start --security` broker (module `secure`):
//! PLAIN everywhere (before 1.0 through SaslHandshake v0 and raw tokens), SCRAM-SHA-512 from
//! 0.10.2, KIP-368 re-authentication of a group member from 2.2.
//!
//! Not here yet: the TLS, MTLS and authorization suites on old releases (they run on the
//! default releases), and the KIP-848 consumer protocol (4.0+), which joins from the KIP-848
//! work.

use crate::consumer_tests::{builder, consume};
use crate::group_tests::{self, client, converged, failover_client, member_builder, static_member, Running};
use crate::support::{broker, unique_name, wait_for};
use kafka_group::unstable::RawClient;
use kafka_group::Compression;
use kafka_group::{Client, Error, NewTopic, OffsetSpec, ProducerRecord};
use kafka_group::{GroupEvent, OldBrokerPolicy, TopicPartition};
use std::time::Duration;

/// The release under test as numbers: `0.10.0.1` → `[0, 10, 0]`, `2.3.1` → `[2, 3, 1]`.
fn release() -> [u32; 3] {
    let mut parts = broker::shared()
        .version()
        .split('.')
        .map(|p| p.parse::<u32>().unwrap_or(0));
    [(); 3].map(|()| parts.next().unwrap_or(0))
}

/// Whether the release under test is `version` or newer.
fn since(version: [u32; 3]) -> bool {
    release() >= version
}

/// Marks a scenario the release cannot run (after checking what it does instead).
fn not_applicable(test: &str, why: &str) {
    eprintln!(
        "compat: n/a {test} on Kafka {}: {why}",
        broker::shared().version()
    );
}

/// A new topic: through CreateTopics where the release has it (0.10.1+), else through the
/// broker's own TopicCommand, after checking that our Admin refuses clearly.
fn topic(client: &Client, prefix: &str, partitions: i32) -> String {
    let name = unique_name(prefix);
    let admin = client.admin();
    let created = admin.create_topics(&[NewTopic::new(&name, partitions, 1)], Duration::from_secs(60));
    if since([0, 10, 1]) {
        created.unwrap_or_else(|e| panic!("CreateTopics {name}: {e}"));
    } else {
        let err = created.expect_err("Kafka 0.10.0 has no CreateTopics");
        assert_missing(&err, "CreateTopics");
        broker::shared().create_topic_with_zookeeper(&name, partitions);
    }
    name
}

/// `err` is the clear error for an API the broker lacks: it names the API.
fn assert_missing(err: &Error, api: &str) {
    let text = err.to_string();
    assert!(
        matches!(
            err,
            Error::MissingCapability { .. } | Error::UnsupportedVersion { .. }
        ),
        "expected a missing-API error naming {api}, got {err:?}"
    );
    assert!(text.contains(api), "{api} not named in: {text}");
}

fn codecs() -> Vec<Compression> {
    let mut codecs = vec![
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
    ];
    if since([2, 1, 0]) {
        codecs.push(Compression::Zstd);
    }
    codecs
}

#[test]
fn compat_produce_consume_every_compression_commit_and_lag() {
    let client = client(broker::shared().bootstrap());
    let topic = topic(&client, "compat-codec", 1);
    // Headers need record batches (magic 2, Kafka 0.11+).
    let headers = since([0, 11, 0]);
    let mut expected = Vec::new();
    for codec in codecs() {
        let mut p = client.producer().compression(codec).build().unwrap();
        for i in 0..3 {
            let value = format!("{codec:?}-{i}");
            let mut r = ProducerRecord::new(&topic, value.clone())
                .key(format!("k{i}"))
                .partition(0);
            if headers {
                r = r.header("codec", format!("{codec:?}"));
            }
            p.send(r).unwrap();
            expected.push((format!("k{i}"), value, codec));
        }
        p.flush()
            .unwrap_or_else(|e| panic!("{codec:?} on Kafka {}: {e}", broker::shared().version()));
        p.close().unwrap();
    }
    let group = unique_name("compat-codec");
    let mut c = builder(&client, &group, &topic).build().unwrap();
    let got = consume(&mut c, expected.len(), Duration::from_secs(60), false);
    assert_eq!(got.len(), expected.len());
    for (r, (key, value, codec)) in got.iter().zip(&expected) {
        assert_eq!(r.key.as_deref(), Some(key.as_bytes()), "{codec:?}");
        assert_eq!(r.value.as_deref(), Some(value.as_bytes()), "{codec:?}");
        let want: Vec<(String, Option<bytes::Bytes>)> = if headers {
            vec![("codec".into(), Some(format!("{codec:?}").into()))]
        } else {
            Vec::new()
        };
        assert_eq!(r.headers, want, "{codec:?}");
    }
    let n = expected.len() as i64;
    c.commit().unwrap();
    let tp = TopicPartition::new(topic.clone(), 0);
    assert_eq!(c.committed(std::slice::from_ref(&tp)).unwrap()[&tp], Some(n));
    let admin = client.admin();
    let lag = admin.group_lag(&group).unwrap();
    assert_eq!(lag.len(), 1, "{lag:?}");
    assert_eq!(
        (lag[0].committed, lag[0].log_end, lag[0].lag),
        (Some(n), n, Some(0))
    );
    let mut p = client.producer().build().unwrap();
    for i in 0..2 {
        p.send(ProducerRecord::new(&topic, format!("more-{i}")).partition(0))
            .unwrap();
    }
    p.close().unwrap();
    let lag = admin.group_lag(&group).unwrap();
    assert_eq!(lag[0].lag, Some(2), "{lag:?}");
    c.close().unwrap();
}

/// Transactions (0.11+): committed records read by a `read_committed` consumer, aborted ones
/// only by a `read_uncommitted` one; offsets in a transaction checked against the group's
/// generation (KIP-447, 2.5+). Older releases get the clear error naming the release.
#[test]
fn compat_transactions_commit_abort_and_group_offsets() {
    use kafka_group::{ConsumerGroupMetadata, IsolationLevel, OffsetAndMetadata};
    use std::collections::BTreeMap;
    const CALL: Duration = Duration::from_secs(60);
    let client = client(broker::shared().bootstrap());
    let topic = topic(&client, "compat-txn", 1);
    let mut p = client
        .producer()
        .transactional_id(unique_name("compat-txn"))
        .build()
        .unwrap();
    if !since([0, 11, 0]) {
        let e = p.init_transactions(CALL).unwrap_err();
        assert!(matches!(e, Error::MissingCapability { .. }), "{e:?}");
        assert!(e.to_string().contains("0.11"), "{e}");
        not_applicable(
            "compat_transactions_commit_abort_and_group_offsets",
            "transactions need 0.11",
        );
        return;
    }
    p.init_transactions(CALL).unwrap();
    let tp = TopicPartition::new(topic.clone(), 0);
    for (values, commit) in [
        (&["c1", "c2"][..], true),
        (&["a1"][..], false),
        (&["c3"][..], true),
    ] {
        p.begin_transaction().unwrap();
        for v in values {
            p.send(ProducerRecord::new(&topic, *v).partition(0)).unwrap();
        }
        if commit {
            p.commit_transaction(CALL).unwrap();
        } else {
            p.flush().unwrap();
            p.abort_transaction(CALL).unwrap();
        }
    }
    let read = |isolation, n| {
        let mut c = builder(&client, &unique_name("compat-txn-read"), &topic)
            .isolation_level(isolation)
            .build()
            .unwrap();
        let mut got: Vec<String> = consume(&mut c, n, Duration::from_secs(60), false)
            .iter()
            .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
            .collect();
        // Nothing more: an aborted record would come now.
        for r in c.poll(Duration::from_secs(1)).unwrap().records {
            got.push(String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned());
        }
        c.close().unwrap();
        got
    };
    assert_eq!(read(IsolationLevel::ReadCommitted, 3), ["c1", "c2", "c3"]);
    assert_eq!(read(IsolationLevel::ReadUncommitted, 4), ["c1", "c2", "a1", "c3"]);

    let group = ConsumerGroupMetadata {
        group_id: unique_name("compat-txn-group"),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
    };
    let offsets: BTreeMap<TopicPartition, OffsetAndMetadata> =
        [(tp.clone(), OffsetAndMetadata::new(2))].into();
    p.begin_transaction().unwrap();
    let sent = p.send_offsets_to_transaction(&offsets, &group, CALL);
    if !since([2, 5, 0]) {
        let e = sent.unwrap_err();
        assert!(matches!(e, Error::MissingCapability { .. }), "{e:?}");
        assert!(e.to_string().contains("2.5"), "{e}");
        p.abort_transaction(CALL).unwrap();
        not_applicable(
            "compat_transactions_commit_abort_and_group_offsets",
            "offsets in a transaction checked against the group (KIP-447) need 2.5",
        );
        return;
    }
    // A group with no members (generation -1, as a standalone consumer commits) takes them.
    sent.unwrap();
    p.commit_transaction(CALL).unwrap();
    let mut c = builder(&client, &group.group_id, &topic).build().unwrap();
    assert_eq!(c.committed(std::slice::from_ref(&tp)).unwrap()[&tp], Some(2));
    c.close().unwrap();
}

/// What the release does with what it cannot store: headers before 0.11, zstd before 2.1.
#[test]
fn compat_headers_and_zstd_refused_clearly_where_missing() {
    if since([2, 1, 0]) {
        not_applicable(
            "compat_headers_and_zstd_refused_clearly_where_missing",
            "headers and zstd are supported",
        );
        return;
    }
    let client = client(broker::shared().bootstrap());
    let topic = topic(&client, "compat-refuse", 1);
    let mut p = client.producer().compression(Compression::Zstd).build().unwrap();
    let sent = p
        .send(ProducerRecord::new(&topic, "z").partition(0))
        .and_then(|_| p.flush());
    let err = sent.expect_err("zstd before Kafka 2.1");
    eprintln!("zstd on Kafka {}: {err}", broker::shared().version());
    assert!(err.to_string().to_lowercase().contains("zstd"), "{err}");
    if !since([0, 11, 0]) {
        let mut p = client.producer().build().unwrap();
        let sent = p
            .send(ProducerRecord::new(&topic, "h").partition(0).header("h", "v"))
            .and_then(|_| p.flush());
        let err = sent.expect_err("headers before Kafka 0.11");
        eprintln!("headers on Kafka {}: {err}", broker::shared().version());
        assert!(err.to_string().to_lowercase().contains("header"), "{err}");
    }
}

#[test]
fn compat_static_restart_without_rebalance() {
    if !since([2, 3, 0]) {
        not_applicable(
            "compat_static_restart_without_rebalance",
            "static membership needs 2.3",
        );
        return;
    }
    group_tests::static_restart_within_session_timeout_does_not_rebalance_on(broker::shared().bootstrap());
}

#[test]
fn compat_static_member_away_past_session_timeout() {
    if !since([2, 3, 0]) {
        not_applicable(
            "compat_static_member_away_past_session_timeout",
            "static membership needs 2.3",
        );
        return;
    }
    group_tests::static_restart_beyond_session_timeout_rebalances_and_converges_on(
        broker::shared().bootstrap(),
    );
}

#[test]
fn compat_duplicate_instance_id_is_fenced() {
    if !since([2, 3, 0]) {
        not_applicable(
            "compat_duplicate_instance_id_is_fenced",
            "static membership needs 2.3",
        );
        return;
    }
    group_tests::duplicate_instance_id_fences_the_older_member_once_on(broker::shared().bootstrap());
}

/// Before 2.3: one clear error naming the release that has static membership, and with
/// `FallBackToDynamic` a working dynamic member.
#[test]
fn compat_static_member_before_2_3_is_a_clear_error_or_falls_back() {
    if since([2, 3, 0]) {
        not_applicable(
            "compat_static_member_before_2_3_is_a_clear_error_or_falls_back",
            "static membership is supported",
        );
        return;
    }
    let client = client(broker::shared().bootstrap());
    let topic = topic(&client, "compat-old-static", 2);
    let group = unique_name("compat-old-static");
    let join = |policy| {
        let mut m = member_builder(&client, &group, &topic)
            .group_instance_id("s1")
            .old_broker_policy(policy)
            .build()?;
        let events = m.join(Duration::from_secs(30))?;
        assert!(
            matches!(events.last(), Some(GroupEvent::Assigned { .. })),
            "{events:?}"
        );
        Ok::<_, Error>(m)
    };
    let err = join(OldBrokerPolicy::Error).expect_err("static member before Kafka 2.3");
    let text = err.to_string();
    assert!(matches!(err, Error::MissingCapability { .. }), "{err:?}");
    assert!(text.contains("Kafka 2.3 or newer"), "{text}");
    let m = join(OldBrokerPolicy::FallBackToDynamic).unwrap();
    assert!(!m.is_static());
    assert_eq!(m.assignment().len(), 2);
    m.close().unwrap();
}

#[test]
fn compat_dynamic_members() {
    // KIP-394 (MEMBER_ID_REQUIRED on a first JoinGroup) arrived with JoinGroup v4 in 2.2.
    group_tests::dynamic_members_on(broker::shared().bootstrap(), since([2, 2, 0]));
}

#[test]
fn compat_admin_calls() {
    let client = client(broker::shared().bootstrap());
    let admin = client.admin();
    let topic = topic(&client, "compat-admin", 2);
    // Offsets and groups: every release has them.
    let tps = [0, 1].map(|p| TopicPartition::new(topic.clone(), p));
    let mut p = client.producer().build().unwrap();
    for i in 0..3 {
        p.send(ProducerRecord::new(&topic, format!("v{i}")).partition(1))
            .unwrap();
    }
    p.close().unwrap();
    let latest = admin.list_offsets(&tps, OffsetSpec::Latest).unwrap();
    assert_eq!((latest[&tps[0]], latest[&tps[1]]), (0, 3), "{latest:?}");
    let earliest = admin.list_offsets(&tps, OffsetSpec::Earliest).unwrap();
    assert_eq!(earliest[&tps[1]], 0, "{earliest:?}");

    let group = unique_name("compat-admin");
    let mut c = builder(&client, &group, &topic).build().unwrap();
    consume(&mut c, 3, Duration::from_secs(60), true);
    wait_for("the group in ListGroups", Duration::from_secs(30), || {
        admin.list_groups().unwrap().iter().any(|g| g.group_id == group)
    });
    let d = admin.describe_group(&group).unwrap();
    assert_eq!((d.state.as_str(), d.members.len()), ("Stable", 1), "{d:?}");
    assert_eq!(admin.group_offsets(&group).unwrap()[&tps[1]], 3);
    c.close().unwrap();

    // CreatePartitions arrived in 1.0.
    let grown = admin.create_partitions(&[(&topic, 3)], Duration::from_secs(60));
    if since([1, 0, 0]) {
        grown.unwrap();
        let meta = client.refresh_metadata(Some(&[topic.as_str()])).unwrap();
        assert_eq!(meta.topics[&topic].partitions.len(), 3);
    } else {
        assert_missing(&grown.unwrap_err(), "CreatePartitions");
    }
    // DeleteTopics arrived in 0.10.1.
    let deleted = admin.delete_topics(&[&topic], Duration::from_secs(60));
    if since([0, 10, 1]) {
        deleted.unwrap();
    } else {
        assert_missing(&deleted.unwrap_err(), "DeleteTopics");
    }
    // Removing members by instance id arrived in 2.4 (KIP-345's LeaveGroup v3).
    let removed = admin.remove_members(&group, &["nobody"]);
    if since([2, 4, 0]) {
        let outcomes = removed.unwrap();
        assert_eq!(outcomes.len(), 1);
        assert!(outcomes[0].1.is_err(), "{outcomes:?}");
    } else {
        let err = removed.unwrap_err();
        assert!(matches!(err, Error::MissingCapability { .. }), "{err:?}");
        assert!(err.to_string().contains("Kafka 2.4 or newer"), "{err}");
    }
}

/// A partition leader of a 3-node cluster of the release crashes mid-stream (`scripts/kafka
/// kill`): the producer and a consumer group carry on through the new leader, no record lost
/// and no offset read twice (the producer is not idempotent: a retried batch may be written
/// twice, at new offsets); the node comes back (`scripts/kafka restart`, which in ZooKeeper mode waits for
/// the dead broker's registration to expire) and serves again.
#[test]
fn compat_leader_killed_and_restarted() {
    let cluster = broker::Cluster::start(3, broker::shared().version());
    let client = failover_client(cluster.bootstrap()).build().unwrap();
    let topic = unique_name("compat-failover");
    if since([0, 10, 1]) {
        client
            .admin()
            .create_topics(&[NewTopic::new(&topic, 2, 3)], Duration::from_secs(60))
            .unwrap();
    } else {
        cluster.create_topic_with_zookeeper(&topic, 2);
    }
    let produce = |first: usize| {
        let mut p = client.producer().build().unwrap();
        for i in first..first + 10 {
            for partition in 0..2 {
                p.send(ProducerRecord::new(&topic, format!("{partition}-{i}")).partition(partition))
                    .unwrap();
            }
        }
        p.close().unwrap();
    };
    produce(0);
    let group = unique_name("compat-failover");
    let mut c = builder(&client, &group, &topic)
        // Long enough to ride out a coordinator on the killed node.
        .session_timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let mut seen = consume(&mut c, 20, Duration::from_secs(60), true);
    let meta = client.refresh_metadata(Some(&[topic.as_str()])).unwrap();
    let victim = meta.topics[&topic].partitions[0].leader;
    cluster.kill(usize::try_from(victim).unwrap());
    produce(10);
    let value = |r: &kafka_group::ConsumerRecord| {
        String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned()
    };
    let expected: std::collections::BTreeSet<String> = (0..20)
        .flat_map(|i| [format!("0-{i}"), format!("1-{i}")])
        .collect();
    let tps = [0, 1].map(|p| TopicPartition::new(topic.clone(), p));
    // Until every value came and the group has read to the end of the log.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let values: std::collections::BTreeSet<String> = seen.iter().map(value).collect();
        let ends = client.admin().list_offsets(&tps, OffsetSpec::Latest);
        let total = ends.map_or(i64::MAX, |e| e.values().sum::<i64>());
        if values.is_superset(&expected) && seen.len() as i64 >= total {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "missing: {:?}",
            expected.difference(&values)
        );
        seen.extend(c.poll(Duration::from_millis(500)).unwrap().records);
        c.commit().unwrap();
    }
    let offsets: std::collections::BTreeSet<(i32, i64)> =
        seen.iter().map(|r| (r.partition, r.offset)).collect();
    assert_eq!(offsets.len(), seen.len(), "an offset was read twice");
    c.close().unwrap();

    cluster.restart(usize::try_from(victim).unwrap());
    wait_for(
        "the restarted node in the metadata",
        Duration::from_secs(60),
        || {
            client
                .refresh_metadata(Some(&[topic.as_str()]))
                .is_ok_and(|m| m.brokers.contains_key(&victim))
        },
    );
    // The restarted node answers requests of its own.
    client.broker_versions(victim).unwrap();
    let mut again = builder(&client, &unique_name("compat-failover"), &topic)
        .build()
        .unwrap();
    let total = seen.len();
    assert_eq!(
        consume(&mut again, total, Duration::from_secs(60), false).len(),
        total
    );
    again.close().unwrap();
}

/// The table name of the release under test: `zk-0.10.0`, `zk-2.3`, `kraft-3.9` …
fn table_name() -> String {
    let [major, minor, patch] = release();
    let number = if major == 0 {
        format!("{major}.{minor}.{patch}")
    } else {
        format!("{major}.{minor}")
    };
    let mode = if since([3, 3, 0]) { "kraft" } else { "zk" };
    format!("{mode}-{number}")
}

/// The broker advertises what `data/broker-api-versions.tsv` says its release does, for every
/// API the table follows (it leaves out inter-broker APIs): the table names releases in errors
/// and picks versions in tests, so a wrong row misleads both.
#[test]
fn compat_api_versions_are_the_release_table() {
    let name = table_name();
    let Some(row) = kafka_group::unstable::releases::by_name(&name) else {
        not_applicable(
            "compat_api_versions_are_the_release_table",
            &format!("{name} is newer than the table"),
        );
        return;
    };
    let tracked: std::collections::BTreeSet<i16> = kafka_group::unstable::releases::all()
        .iter()
        .flat_map(|r| r.apis.keys().copied())
        .collect();
    // Client telemetry (71, 72) is advertised only with a metrics reporter configured.
    let follow = |k: &i16| tracked.contains(k) && ![71, 72].contains(k);
    let client = client(broker::shared().bootstrap());
    let meta = client.refresh_metadata(Some(&[])).unwrap();
    let id = *meta.brokers.keys().next().unwrap();
    let got: std::collections::BTreeMap<i16, kafka_group::VersionRange> = client
        .broker_versions(id)
        .unwrap()
        .into_iter()
        .filter(|(k, _)| follow(k))
        .collect();
    let want: std::collections::BTreeMap<i16, kafka_group::VersionRange> = row
        .apis
        .iter()
        .filter(|(k, _)| follow(k))
        .map(|(k, v)| (*k, *v))
        .collect();
    let diff: Vec<String> = got
        .keys()
        .chain(want.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|k| got.get(k) != want.get(k))
        .map(|k| format!("key {k}: broker {:?}, table {:?}", got.get(k), want.get(k)))
        .collect();
    assert!(
        diff.is_empty(),
        "Kafka {} differs from {name}: {}",
        broker::shared().version(),
        diff.join("; ")
    );
}

mod cli {
    use super::*;
    use crate::cli_tests::{cli, json};

    /// The release name `broker-versions` must give: `0.10.0`, `0.11.0`, `2.3`, `3.9` …, as
    /// in `data/broker-api-versions.tsv`.
    fn expected_release() -> String {
        let [major, minor, patch] = release();
        if major == 0 {
            format!("{major}.{minor}.{patch}")
        } else {
            format!("{major}.{minor}")
        }
    }

    #[test]
    fn compat_cli_broker_versions_names_the_release() {
        let b = broker::shared();
        let run = cli(b.bootstrap(), &["--json", "broker-versions"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let doc = json(&run);
        let want = expected_release();
        let known = kafka_group::unstable::releases::all()
            .iter()
            .any(|r| r.version() == want);
        for broker in doc["brokers"].as_array().unwrap() {
            let named = broker["release_version"].as_str().unwrap_or_default();
            if known {
                assert_eq!(named, want, "Kafka {} named as {broker}", b.version());
            } else {
                // Newer than the table: the newest known release, never an older one,
                // and said not to be an exact match unless the tables are the same.
                let newest = kafka_group::unstable::releases::all().last().unwrap().version();
                assert_eq!(named, newest, "{broker}");
                assert_ne!(broker["release_match"], "unknown", "{broker}");
                eprintln!(
                    "compat: Kafka {} named {named} ({})",
                    b.version(),
                    broker["release_match"]
                );
            }
        }
    }

    #[test]
    fn compat_cli_describe_and_remove_member() {
        let b = broker::shared();
        let bootstrap = b.bootstrap();
        let client = client(bootstrap);
        let topic = topic(&client, "compat-cli", 2);
        let group = unique_name("compat-cli");
        let statics = since([2, 3, 0]);
        let member = |i: &str| {
            if statics {
                static_member(&client, &group, &topic, i)
            } else {
                member_builder(&client, &group, &topic).build().unwrap()
            }
        };
        let a = Running::start(member("cli-a"));
        let m_b = Running::start(member("cli-b"));
        wait_for("two members", Duration::from_secs(60), || {
            converged([&a, &m_b], 2)
        });

        let run = cli(bootstrap, &["describe", &group]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(run.stdout.contains("State:          Stable"), "{}", run.stdout);
        let doc = json(&cli(bootstrap, &["--json", "describe", &group]));
        let members = doc["members"].as_array().unwrap();
        assert_eq!(members.len(), 2, "{doc}");
        if since([2, 4, 0]) {
            // DescribeGroups v4+ carries the instance id.
            for id in ["cli-a", "cli-b"] {
                assert!(
                    members.iter().any(|m| m["group_instance_id"] == id),
                    "{id} missing: {doc}"
                );
            }
        } else if statics {
            // 2.3 has static members but DescribeGroups v3 has no instance id: the CLI says
            // it cannot tell, and infers the id from the member id (`<instance id>-<uuid>`).
            for id in ["cli-a", "cli-b"] {
                assert!(
                    members
                        .iter()
                        .any(|m| m["group_instance_id"].is_null() && m["inferred_group_instance_id"] == id),
                    "{id} not inferred: {doc}"
                );
            }
            assert!(
                run.stdout.contains("DescribeGroups v3"),
                "no note that the broker cannot tell: {}",
                run.stdout
            );
        } else {
            assert!(members.iter().all(|m| m["group_instance_id"].is_null()), "{doc}");
        }

        // A stopped static member stays until its session times out; removing it by instance
        // id ends that at once. (A running one would just join again.)
        drop(m_b.stop());
        let removed = cli(bootstrap, &["remove-member", &group, "--instance-id", "cli-b"]);
        if since([2, 4, 0]) {
            assert_eq!(removed.code, 0, "{}\n{}", removed.stdout, removed.stderr);
            assert!(removed.stdout.contains("removed"), "{}", removed.stdout);
            wait_for("cli-b removed", Duration::from_secs(30), || {
                let doc = json(&cli(bootstrap, &["--json", "describe", &group]));
                let members = doc["members"].as_array().unwrap().clone();
                members.len() == 1 && members[0]["group_instance_id"] == "cli-a"
            });
        } else {
            assert_eq!(removed.code, 4, "{}\n{}", removed.stdout, removed.stderr);
            assert!(
                removed.stderr.contains("Kafka 2.4 or newer"),
                "{}",
                removed.stderr
            );
        }
        drop(a);

        let unknown = cli(bootstrap, &["describe", &unique_name("compat-nobody")]);
        assert_eq!(unknown.code, 3, "{}\n{}", unknown.stdout, unknown.stderr);
        assert!(unknown.stderr.contains("does not exist"), "{}", unknown.stderr);
    }
}

/// SASL on the release's own secure broker (`scripts/kafka start --security`, which on
/// ZooKeeper-mode releases configures what each can: see `write_zk_security` there): SCRAM
/// since 0.10.2, PLAIN on every release, and on those before 1.0 over the pre-KIP-152 framing
/// (SaslHandshake v0, then raw tokens), the only one they have; KIP-368 re-authentication
/// since 2.2. Every client here is the super user admin, so the authorizer does not get in the
/// way (the authorization suite runs on KRaft).
mod secure {
    use super::*;
    use crate::reauth_tests::{self, at_least, at_most, member_runs, scram512, HEARTBEAT, REAUTH};
    use crate::support::secure::{self as support, SecureBroker, ADMIN};
    use kafka_group::sasl::{Mechanism, Secret};
    use kafka_group::ApiKey;
    use kafka_group::SecurityProtocol;
    use std::sync::OnceLock;

    /// How long the KIP-368 member runs: five sessions of [`REAUTH`].
    const RUN: Duration = Duration::from_secs(15);

    /// The secure broker of the release under test, shared by this module: from 2.2 with
    /// `connections.max.reauth.ms` = [`REAUTH`], so the round trips re-authenticate too.
    fn secure_broker() -> &'static SecureBroker {
        static BROKER: OnceLock<support::Private> = OnceLock::new();
        if since([2, 2, 0]) {
            BROKER.get_or_init(|| support::reauth(REAUTH.as_millis() as u64))
        } else {
            support::shared()
        }
    }

    fn plain() -> Mechanism {
        Mechanism::Plain {
            username: ADMIN.name.into(),
            password: Secret::new(ADMIN.password),
        }
    }

    fn secure_client(protocol: SecurityProtocol, mechanism: Mechanism) -> Client {
        let b = secure_broker();
        let addr = match protocol {
            SecurityProtocol::SaslPlaintext => b.sasl_plaintext,
            _ => b.sasl_ssl,
        };
        reauth_tests::builder(addr, protocol, b)
            .sasl(mechanism)
            .build()
            .unwrap()
    }

    /// Produce, consume in a group (a static member from 2.3, a dynamic one before) and commit,
    /// all over `client`'s listener.
    fn round_trip(what: &str, client: &Client) {
        let topic = unique_name("compat-sasl");
        if since([0, 10, 1]) {
            client
                .admin()
                .create_topics(&[NewTopic::new(&topic, 1, 1)], Duration::from_secs(60))
                .unwrap_or_else(|e| panic!("{what}: create_topics: {e}"));
        } else {
            broker::create_topic_with_zookeeper(secure_broker().dir(), &topic, 1);
        }
        let mut p = client.producer().build().unwrap();
        for i in 0..3 {
            p.send(ProducerRecord::new(&topic, format!("v{i}")).partition(0))
                .unwrap_or_else(|e| panic!("{what}: send: {e}"));
        }
        p.close().unwrap_or_else(|e| panic!("{what}: produce: {e}"));
        let group = unique_name("compat-sasl");
        let mut b = builder(client, &group, &topic);
        if since([2, 3, 0]) {
            b = b.group_instance_id("sasl-1");
        }
        let mut c = b.build().unwrap();
        let got = consume(&mut c, 3, Duration::from_secs(60), false);
        let values: Vec<_> = got.iter().map(|r| r.value.clone().unwrap_or_default()).collect();
        assert_eq!(values, ["v0", "v1", "v2"], "{what}");
        c.commit().unwrap_or_else(|e| panic!("{what}: commit: {e}"));
        let tp = TopicPartition::new(topic.clone(), 0);
        assert_eq!(
            c.committed(std::slice::from_ref(&tp)).unwrap()[&tp],
            Some(3),
            "{what}"
        );
        c.close().unwrap_or_else(|e| panic!("{what}: close: {e}"));
        eprintln!(
            "Kafka {}: {what}: produced, consumed, committed",
            secure_broker().version
        );
    }

    /// PLAIN over SASL_SSL, and on releases before 1.0 (which offer PLAIN on SASL_PLAINTEXT
    /// too) over SASL_PLAINTEXT. Before 1.0 the broker has SaslHandshake v0 and no
    /// SaslAuthenticate: the client must have used the raw-token framing.
    #[test]
    fn compat_sasl_plain_round_trip() {
        let client = secure_client(SecurityProtocol::SaslSsl, plain());
        round_trip("SASL_SSL PLAIN", &client);
        let meta = client.refresh_metadata(Some(&[])).unwrap();
        let versions = client
            .broker_versions(*meta.brokers.keys().next().unwrap())
            .unwrap();
        let authenticate = versions.get(&(ApiKey::SaslAuthenticate.key()));
        if since([1, 0, 0]) {
            assert!(authenticate.is_some(), "{versions:?}");
        } else {
            assert_eq!(
                authenticate, None,
                "SaslAuthenticate before Kafka 1.0: {versions:?}"
            );
            assert_eq!(versions[&(ApiKey::SaslHandshake.key())].max, 0, "{versions:?}");
            let client = secure_client(SecurityProtocol::SaslPlaintext, plain());
            round_trip("SASL_PLAINTEXT PLAIN (SaslHandshake v0, raw tokens)", &client);
        }
    }

    /// SCRAM-SHA-512 over SASL_PLAINTEXT and SASL_SSL (users made with the release's own
    /// ConfigCommand on ZooKeeper-mode releases). On 0.10.0, which has no SCRAM, the one clear
    /// error naming the mechanism.
    #[test]
    fn compat_sasl_scram_round_trip() {
        if !since([0, 10, 2]) {
            let client = reauth_tests::builder(
                secure_broker().sasl_ssl,
                SecurityProtocol::SaslSsl,
                secure_broker(),
            )
            .sasl(scram512())
            .build()
            .unwrap();
            let err = client
                .refresh_metadata(Some(&[]))
                .expect_err("SCRAM on Kafka 0.10.0");
            let text = err.to_string();
            assert!(
                matches!(
                    err,
                    Error::UnsupportedMechanism { .. } | Error::Authentication { .. }
                ),
                "{err:?}"
            );
            assert!(text.contains("SCRAM-SHA-512"), "{text}");
            assert!(!text.contains(ADMIN.password), "{text}");
            eprintln!("SCRAM on Kafka {}: {text}", secure_broker().version);
            not_applicable("compat_sasl_scram_round_trip", "SCRAM needs 0.10.2");
            return;
        }
        for (what, protocol) in [
            ("SASL_PLAINTEXT SCRAM-SHA-512", SecurityProtocol::SaslPlaintext),
            ("SASL_SSL SCRAM-SHA-512", SecurityProtocol::SaslSsl),
        ] {
            round_trip(what, &secure_client(protocol, scram512()));
        }
    }

    /// KIP-368: a member over SASL_SSL SCRAM-SHA-512 runs for five sessions of [`REAUTH`]
    /// (static from 2.3, dynamic on 2.2) and keeps its generation while its connections
    /// re-authenticate; no connection is closed by the broker for an expired session.
    #[test]
    fn compat_reauthentication_keeps_the_member() {
        if !since([2, 2, 0]) {
            not_applicable(
                "compat_reauthentication_keeps_the_member",
                "KIP-368 re-authentication needs 2.2",
            );
            return;
        }
        let b = secure_broker();
        let client = secure_client(SecurityProtocol::SaslSsl, scram512());
        let instance = since([2, 3, 0]).then_some("reauth-compat");
        let o = member_runs("SASL_SSL SCRAM-SHA-512", &client, instance, RUN);
        let n = o.metrics.reauthentications;
        eprintln!(
            "Kafka {}: {n} re-authentications in {:.1} s ({} heartbeats, heartbeat every {HEARTBEAT:?})",
            b.version,
            o.elapsed.as_secs_f64(),
            o.metrics.heartbeats
        );
        let (low, high) = (at_least(o.elapsed, REAUTH), at_most(o.elapsed, REAUTH));
        assert!(
            (low..=high).contains(&n),
            "{n} re-authentications in {:?}, expected {low}..={high}",
            o.elapsed
        );
        crate::reauth_tests::assert_no_expired_channel(b.dir());
    }
}
