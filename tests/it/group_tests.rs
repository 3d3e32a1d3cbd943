//! Group membership against a real broker: static restarts, eviction, fencing, dynamic joins.

use crate::support::{broker, create_topic, thread_names, unique_name, wait_for};
use kafka_group::unstable::TestHooks;
use kafka_group::{Client, ClientBuilder, Consumer, Error, KafkaCode};
use kafka_group::{GroupEvent, GroupMember, MemberBuilder, MemberState, TopicPartition};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub const SESSION: Duration = Duration::from_millis(6000);
pub const HEARTBEAT: Duration = Duration::from_millis(300);

pub fn client(bootstrap: &str) -> Client {
    Client::builder()
        .bootstrap_servers(bootstrap)
        .client_id("group-tests")
        .build()
        .unwrap()
}

/// A client for a test that kills brokers: short request and connect timeouts, so that a dead
/// node costs seconds rather than the defaults' minutes.
pub fn failover_client(bootstrap: &str) -> ClientBuilder {
    Client::builder()
        .bootstrap_servers(bootstrap)
        .request_timeout(Duration::from_secs(5))
        .connect_timeout(Duration::from_secs(2))
}

pub fn topic_with_partitions(client: &Client, partitions: i32) -> String {
    create_topic(client, "grp-topic", partitions, 1)
}

/// What the test sees of a member running in its own thread.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    pub state: Option<MemberState>,
    pub generation: i32,
    pub member_id: String,
    pub partitions: BTreeSet<TopicPartition>,
    pub events: Vec<GroupEvent>,
    pub error: Option<String>,
    pub fenced: bool,
}

impl Seen {
    pub fn revocations(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, GroupEvent::Revoked { .. }))
            .count()
    }
}

/// A member polled in a background thread, as an application would run it.
pub struct Running {
    pub instance: Option<String>,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Option<GroupMember>>>,
}

impl Running {
    pub fn start(member: GroupMember) -> Running {
        let instance = member.group_instance_id().map(String::from);
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        let handle = std::thread::spawn(move || {
            let mut member = member;
            // A member handed over already joined just keeps polling.
            let mut first = member.state() != MemberState::Stable;
            while !stop2.load(Ordering::SeqCst) {
                let r = if first {
                    member.join(Duration::from_secs(60))
                } else {
                    member.poll(Duration::from_millis(50))
                };
                first = false;
                let mut s = seen2.lock().unwrap();
                match r {
                    Ok(events) => s.events.extend(events),
                    Err(e) => {
                        s.fenced = matches!(e, Error::Fenced { .. });
                        s.error = Some(e.to_string());
                        s.state = Some(member.state());
                        return Some(member);
                    }
                }
                s.state = Some(member.state());
                s.generation = member.generation().map_or(-1, |g| g.id);
                s.member_id = member.member_id().to_string();
                s.partitions = member.assignment().topic_partitions().into_iter().collect();
            }
            Some(member)
        });
        Running {
            instance,
            seen,
            stop,
            handle: Some(handle),
        }
    }

    pub fn seen(&self) -> Seen {
        self.seen.lock().unwrap().clone()
    }

    pub fn is_stable(&self) -> bool {
        self.seen.lock().unwrap().state == Some(MemberState::Stable)
    }

    /// Stops polling and hands the member back.
    pub fn stop(mut self) -> GroupMember {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.take().unwrap().join().unwrap().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// A member of `group` subscribed to `topic` with the suite's timings; dynamic unless the caller
/// adds an instance id.
pub fn member_builder(client: &Client, group: &str, topic: &str) -> MemberBuilder {
    client
        .member(group)
        .subscribe([topic])
        .session_timeout(SESSION)
        .heartbeat_interval(HEARTBEAT)
        .max_poll_interval(Duration::from_secs(20))
}

pub fn static_member(client: &Client, group: &str, topic: &str, instance: &str) -> GroupMember {
    member_builder(client, group, topic)
        .group_instance_id(instance)
        .build()
        .unwrap()
}

/// All members stable in one generation whose assignments cover `partitions` exactly once.
pub fn converged<'a>(members: impl IntoIterator<Item = &'a Running>, partitions: usize) -> bool {
    let seen: Vec<Seen> = members.into_iter().map(Running::seen).collect();
    let gen = seen[0].generation;
    let total: usize = seen.iter().map(|s| s.partitions.len()).sum();
    let union: BTreeSet<&TopicPartition> = seen.iter().flat_map(|s| s.partitions.iter()).collect();
    seen.iter()
        .all(|s| s.state == Some(MemberState::Stable) && s.generation == gen)
        && total == partitions
        && union.len() == partitions
}

/// Starts `member("a")`, `member("b")` and `member("c")` and waits until they converge on
/// 6 partitions.
pub fn three_converged(member: impl Fn(&str) -> GroupMember) -> Vec<Running> {
    let ms: Vec<Running> = ["a", "b", "c"].map(|i| Running::start(member(i))).into();
    wait_for("three members to converge", Duration::from_secs(60), || {
        converged(&ms, 6)
    });
    ms
}

fn three_static(client: &Client, group: &str, topic: &str) -> Vec<Running> {
    three_converged(|i| static_member(client, group, topic, i))
}

#[test]
fn static_restart_within_session_timeout_does_not_rebalance() {
    static_restart_within_session_timeout_does_not_rebalance_on(broker::shared().bootstrap());
}

/// Three static members; one restarts within the session timeout and gets its partitions back in the same generation, the others see nothing. Also run per release by the compatibility suite.
pub fn static_restart_within_session_timeout_does_not_rebalance_on(bootstrap: &str) {
    let client = client(bootstrap);
    let topic = topic_with_partitions(&client, 6);
    let group = unique_name("static-restart");
    let mut ms = three_static(&client, &group, &topic);
    let before: Vec<Seen> = ms.iter().map(Running::seen).collect();

    // Restart "b": close (no LeaveGroup for a static member) and start a new member with the
    // same instance id well within the session timeout.
    let old = ms.remove(1).stop();
    let old_member_id = old.member_id().to_string();
    old.close().unwrap();
    let restarted = Running::start(static_member(&client, &group, &topic, "b"));
    wait_for(
        "the restarted member to be stable",
        Duration::from_secs(30),
        || restarted.is_stable(),
    );
    let r = restarted.seen();
    assert_eq!(
        r.partitions, before[1].partitions,
        "the restarted member got its own partitions back"
    );
    assert_eq!(r.generation, before[1].generation, "no new generation");
    assert_ne!(
        r.member_id, old_member_id,
        "the coordinator handed out a new member id"
    );
    // The others saw nothing: no revocation, same generation, same partitions, for a few
    // heartbeats more.
    std::thread::sleep(HEARTBEAT * 4);
    for (m, b) in ms.iter().zip([&before[0], &before[2]]) {
        let s = m.seen();
        // Counted from the snapshot: a member that joined alone first (older brokers let the
        // first JoinGroup complete a generation of its own) had a revocation before it.
        assert_eq!(
            s.revocations(),
            b.revocations(),
            "{:?} saw a revocation after the restart",
            m.instance
        );
        assert_eq!(s.generation, b.generation);
        assert_eq!(s.partitions, b.partitions);
    }
}

#[test]
fn static_restart_beyond_session_timeout_rebalances_and_converges() {
    static_restart_beyond_session_timeout_rebalances_and_converges_on(broker::shared().bootstrap());
}

/// Three static members; one stays away past the session timeout: the others rebalance without it, and all three converge once it returns. Also run per release by the compatibility suite.
pub fn static_restart_beyond_session_timeout_rebalances_and_converges_on(bootstrap: &str) {
    let client = client(bootstrap);
    let topic = topic_with_partitions(&client, 6);
    let group = unique_name("static-slow");
    let mut ms = three_static(&client, &group, &topic);
    let gen0 = ms[0].seen().generation;
    ms.remove(2).stop().close().unwrap();
    // The broker evicts "c" after the session timeout; the other two rebalance without it.
    wait_for("the survivors to rebalance without c", SESSION * 3, || {
        converged([&ms[0], &ms[1]], 6) && ms[0].seen().generation > gen0
    });
    assert!(ms[0].seen().revocations() >= 1);
    let c = Running::start(static_member(&client, &group, &topic, "c"));
    wait_for("all three to converge again", Duration::from_secs(60), || {
        converged([&ms[0], &ms[1], &c], 6)
    });
}

#[test]
fn duplicate_instance_id_fences_the_older_member_once() {
    duplicate_instance_id_fences_the_older_member_once_on(broker::shared().bootstrap());
}

/// A second process with a static member's instance id fences the first once; the newer one stays. Also run per release by the compatibility suite.
pub fn duplicate_instance_id_fences_the_older_member_once_on(bootstrap: &str) {
    let client = client(bootstrap);
    let topic = topic_with_partitions(&client, 6);
    let group = unique_name("static-dup");
    let ms = three_static(&client, &group, &topic);
    let a_partitions = ms[0].seen().partitions;
    let started = Instant::now();
    let dup = Running::start(static_member(&client, &group, &topic, "a"));
    wait_for("the older member to be fenced", Duration::from_secs(20), || {
        ms[0].seen().fenced
    });
    let fenced_after = started.elapsed();
    let s = ms[0].seen();
    assert_eq!(s.state, Some(MemberState::Fenced));
    assert!(
        s.error
            .as_deref()
            .unwrap_or_default()
            .contains("another process uses group.instance.id"),
        "{s:?}"
    );
    wait_for("the newer member to be stable", Duration::from_secs(20), || {
        dup.is_stable()
    });
    assert_eq!(
        dup.seen().partitions,
        a_partitions,
        "the newer member keeps the partitions"
    );
    // No ping-pong: the newer member stays in its generation for several heartbeats.
    let gen = dup.seen().generation;
    std::thread::sleep(HEARTBEAT * 6);
    let d = dup.seen();
    assert_eq!(
        (d.generation, d.state, d.revocations()),
        (gen, Some(MemberState::Stable), 0)
    );
    assert!(d.error.is_none());
    eprintln!("fenced {fenced_after:?} after the duplicate started (heartbeat interval {HEARTBEAT:?})");
}

#[test]
fn dynamic_members_join_with_member_id_required() {
    dynamic_members_on(broker::shared().bootstrap(), true);
}

/// Two dynamic members converge; closing one sends LeaveGroup and the other takes over at once.
/// `kip394`: whether the broker answers a first JoinGroup with MEMBER_ID_REQUIRED (JoinGroup
/// v4+, Kafka 2.2+). Also run per release by the compatibility suite.
pub fn dynamic_members_on(bootstrap: &str, kip394: bool) {
    let client = client(bootstrap);
    let topic = topic_with_partitions(&client, 4);
    let group = unique_name("dynamic");
    let build = || member_builder(&client, &group, &topic).build().unwrap();
    let m1 = Running::start(build());
    let m2 = Running::start(build());
    wait_for("two dynamic members to converge", Duration::from_secs(60), || {
        converged([&m1, &m2], 4)
    });
    // Closing a dynamic member sends LeaveGroup: the survivor takes everything at once,
    // long before the session timeout.
    let left = Instant::now();
    let member = m2.stop();
    if kip394 {
        assert!(
            member.metrics().member_id_required >= 1,
            "KIP-394 round trip expected on this broker"
        );
    } else {
        assert_eq!(
            member.metrics().member_id_required,
            0,
            "no KIP-394 round trip before JoinGroup v4"
        );
    }
    member.close().unwrap();
    wait_for("the survivor to own all partitions", SESSION / 2, || {
        converged([&m1], 4)
    });
    eprintln!("survivor took over {:?} after LeaveGroup", left.elapsed());
}

#[test]
fn a_member_that_stops_heartbeating_is_evicted() {
    let client = client(broker::shared().bootstrap());
    let topic = topic_with_partitions(&client, 6);
    let group = unique_name("hung");
    let ms = three_static(&client, &group, &topic);
    let gen0 = ms[0].seen().generation;
    let mut it = ms.into_iter();
    let (a, b2, c) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
    let frozen = c.stop();
    frozen.freeze_heartbeats_for_tests();
    let started = Instant::now();
    wait_for(
        "the others to take over the hung member's partitions",
        SESSION * 3,
        || converged([&a, &b2], 6) && a.seen().generation > gen0,
    );
    let took = started.elapsed();
    assert!(
        took >= SESSION / 2,
        "evicted after {took:?}, before the session timeout could have passed"
    );
    drop(frozen);
}

/// KIP-814: the restarted static leader is told to skip the assignment, keeps the group as it
/// is, but still notices when a subscribed topic grows and rebalances then.
#[test]
fn restarted_static_leader_skips_assignment_but_watches_metadata() {
    let client = client(broker::shared().bootstrap());
    let topic = topic_with_partitions(&client, 6);
    let group = unique_name("kip814");
    let leader_member = |instance: &str| {
        member_builder(&client, &group, &topic)
            .group_instance_id(instance)
            .metadata_max_age(Duration::from_millis(500))
            .build()
            .unwrap()
    };
    // "a" joins first and alone, so it leads.
    let a = Running::start(leader_member("a"));
    wait_for("a to be stable", Duration::from_secs(30), || a.is_stable());
    let others: Vec<Running> = ["b", "c"]
        .iter()
        .map(|i| Running::start(static_member(&client, &group, &topic, i)))
        .collect();
    wait_for("three members to converge", Duration::from_secs(60), || {
        converged([&a, &others[0], &others[1]], 6)
    });
    let before = a.seen();
    a.stop().close().unwrap();
    let a = Running::start(leader_member("a"));
    wait_for(
        "the restarted leader to be stable",
        Duration::from_secs(30),
        || a.is_stable(),
    );
    let after = a.seen();
    assert_eq!(
        after.generation, before.generation,
        "the leader's restart did not rebalance"
    );
    assert_eq!(after.partitions, before.partitions);
    // Every broker the suite runs (3.9, 4.x) has JoinGroup v9, so the skip must have happened.
    let a_member = a.stop();
    assert_eq!(
        a_member.metrics().skipped_assignments,
        1,
        "KIP-814 skip_assignment expected"
    );
    let a = Running::start(a_member);
    // The topic grows: the leader's metadata check must rebalance the group onto 9 partitions.
    client
        .admin()
        .create_partitions(&[(topic.as_str(), 9)], Duration::from_secs(30))
        .unwrap();
    wait_for(
        "the group to rebalance onto 9 partitions",
        Duration::from_secs(30),
        || converged([&a, &others[0], &others[1]], 9),
    );
    assert!(a.seen().generation > before.generation);
}

/// The coordinator's broker dies: members find the new coordinator, which loaded the group
/// from `__consumer_offsets`, and a static group keeps its generation and assignment.
#[test]
fn coordinator_failover_keeps_a_static_group() {
    let cluster = broker::Cluster::start(3, broker::version_under_test());
    let client = failover_client(cluster.bootstrap()).build().unwrap();
    let topic = create_topic(&client, "failover-topic", 6, 3);
    let group = unique_name("failover");
    let ms = three_converged(|i| {
        member_builder(&client, &group, &topic)
            .group_instance_id(i)
            // Long enough to ride out the broker's own failure detection (6 s in scripts/kafka).
            .session_timeout(Duration::from_secs(20))
            .build()
            .unwrap()
    });
    let before: Vec<Seen> = ms.iter().map(Running::seen).collect();
    let coordinator = client.find_coordinator(&group).unwrap();
    cluster.kill(coordinator.id as usize);
    let killed = Instant::now();
    wait_for(
        "every member to report the coordinator move",
        Duration::from_secs(60),
        || {
            ms.iter().all(|m| {
                m.seen()
                    .events
                    .iter()
                    .any(|e| matches!(e, GroupEvent::CoordinatorMoved { .. }))
            })
        },
    );
    let moved_after = killed.elapsed();
    // Heartbeats keep succeeding at the new coordinator for a while, with nothing revoked.
    std::thread::sleep(HEARTBEAT * 6);
    for (m, b) in ms.iter().zip(&before) {
        let s = m.seen();
        assert!(s.error.is_none(), "{:?}: {:?}", m.instance, s.error);
        assert_eq!(s.revocations(), 0, "{:?} was revoked", m.instance);
        assert_eq!(
            (s.generation, &s.partitions),
            (b.generation, &b.partitions),
            "{:?}",
            m.instance
        );
    }
    let new = client.find_coordinator(&group).unwrap();
    assert_ne!(new.id, coordinator.id);
    eprintln!(
        "coordinator moved {} -> {} and members followed within {moved_after:?}",
        coordinator.id, new.id
    );
}

#[test]
fn close_leaves_no_thread_behind() {
    let client = client(broker::shared().bootstrap());
    let topic = topic_with_partitions(&client, 1);
    let group = format!("thr{}", std::process::id() % 100_000);
    let mut m = static_member(&client, &group, &topic, "t");
    m.join(Duration::from_secs(30)).unwrap();
    let name = format!("kafka-hb-{group}");
    let prefix: String = name.chars().take(15).collect();
    assert!(
        thread_names().contains(&prefix),
        "heartbeat thread {prefix} should be running"
    );
    m.close().unwrap();
    // close() joins the thread; the kernel drops its /proc entry a moment after the join
    // returns, so allow that moment (a thread really left behind stays for good).
    wait_for(
        &format!("heartbeat thread {prefix} to be gone"),
        Duration::from_secs(2),
        || !thread_names().contains(&prefix),
    );
}

mod through_the_proxy {
    //! Older brokers, emulated by the version-capping proxy in front of a Kafka 3.9 broker.

    use super::*;
    use crate::support::proxy::{self, Proxy};
    use kafka_group::OldBrokerPolicy;

    fn legacy_client() -> Client {
        client(&broker::shared_legacy().to_string())
    }

    fn join_once(
        p: &Proxy,
        topic: &str,
        instance: Option<&str>,
        policy: OldBrokerPolicy,
    ) -> Result<GroupMember, Error> {
        let client = client(&p.bootstrap());
        let mut b = member_builder(&client, &unique_name("proxy-grp"), topic)
            .max_poll_interval(Duration::from_secs(10))
            .old_broker_policy(policy);
        if let Some(i) = instance {
            b = b.group_instance_id(i);
        }
        let mut m = b.build()?;
        let events = m.join(Duration::from_secs(30))?;
        assert!(
            matches!(events.last(), Some(GroupEvent::Assigned { .. })),
            "{events:?}"
        );
        assert_eq!(m.assignment().len(), 2);
        Ok(m)
    }

    #[test]
    fn dynamic_member_on_2_1_joins_in_one_round_trip() {
        let topic = topic_with_partitions(&legacy_client(), 2);
        let p = Proxy::start(broker::shared_legacy(), "zk-2.1");
        let m = join_once(&p, &topic, None, OldBrokerPolicy::Error).unwrap();
        assert_eq!(
            m.metrics().member_id_required,
            0,
            "JoinGroup v3 has no KIP-394 round trip"
        );
        m.close().unwrap();
    }

    #[test]
    fn static_member_on_2_2_is_one_clear_error_or_falls_back() {
        let topic = topic_with_partitions(&legacy_client(), 2);
        let p = Proxy::start(broker::shared_legacy(), "zk-2.2");
        let err = join_once(&p, &topic, Some("s1"), OldBrokerPolicy::Error).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::MissingCapability { .. }), "{text}");
        assert!(
            text.contains("JoinGroup needs v5+") && text.contains("Kafka 2.3 or newer"),
            "{text}"
        );
        let m = join_once(&p, &topic, Some("s1"), OldBrokerPolicy::FallBackToDynamic).unwrap();
        assert!(!m.is_static(), "fell back to a dynamic member");
        m.close().unwrap();
    }

    #[test]
    fn static_member_works_on_2_3_and_every_later_release() {
        let topic = topic_with_partitions(&legacy_client(), 2);
        let releases: Vec<&str> = proxy::releases()
            .into_iter()
            .filter(|r| {
                kafka_group::unstable::releases::by_name(r)
                    .is_some_and(|x| x.range(11).is_some_and(|v| v.max >= 5))
            })
            .collect();
        assert!(releases.contains(&"zk-2.3") && releases.contains(&"kraft-4.0"));
        for release in &releases {
            let p = Proxy::start(broker::shared_legacy(), release);
            let m = join_once(&p, &topic, Some("s1"), OldBrokerPolicy::Error)
                .unwrap_or_else(|e| panic!("{release}: static join failed: {e}"));
            assert!(m.is_static(), "{release}");
            m.close().unwrap();
        }
        eprintln!("static membership joined on {} emulated releases", releases.len());
    }

    #[test]
    fn close_leaves_no_connection_behind() {
        let topic = topic_with_partitions(&legacy_client(), 2);
        let p = Proxy::start(broker::shared_legacy(), "kraft-3.9");
        let c = client(&p.bootstrap());
        c.refresh_metadata(Some(&[])).unwrap();
        // The client's own connections, opened before the baseline: one per purpose it uses
        // here (the bootstrap address's, and the broker's for metadata and for coordinator
        // lookups, which are two since connections are kept by purpose).
        c.refresh_metadata(Some(&[topic.as_str()])).unwrap();
        c.find_coordinator(&unique_name("conns")).unwrap();
        let baseline = p.connections();
        for instance in [Some("conn-count"), None] {
            let mut b = c.member(&unique_name("conns")).subscribe([topic.as_str()]);
            if let Some(i) = instance {
                b = b.group_instance_id(i);
            }
            let mut m = b.build().unwrap();
            m.join(Duration::from_secs(30)).unwrap();
            // Give the heartbeat thread time to open its own connection.
            wait_for("the heartbeat connection", Duration::from_secs(10), || {
                p.connections() > baseline + 1
            });
            m.close().unwrap();
            // The client keeps its own connections (in the baseline); the member's two
            // (requests and heartbeats) must be gone.
            wait_for(
                "the member's connections to close",
                Duration::from_secs(5),
                || p.connections() <= baseline,
            );
        }
    }

    #[test]
    fn a_blackholed_member_is_evicted_and_the_other_takes_over() {
        let c = legacy_client();
        let topic = topic_with_partitions(&c, 4);
        let group = unique_name("blackhole");
        let p = Proxy::start(broker::shared_legacy(), "kraft-3.9");
        let via_proxy = client(&p.bootstrap());
        let a = Running::start(static_member(&c, &group, &topic, "direct"));
        let b = Running::start(static_member(&via_proxy, &group, &topic, "proxied"));
        wait_for("two members to converge", Duration::from_secs(60), || {
            converged([&a, &b], 4)
        });
        let gen = a.seen().generation;
        p.blackhole(true);
        let started = Instant::now();
        wait_for("the direct member to own everything", SESSION * 3, || {
            converged([&a], 4) && a.seen().generation > gen
        });
        assert!(
            started.elapsed() >= SESSION / 2,
            "evicted after only {:?}",
            started.elapsed()
        );
        p.blackhole(false);
        drop(b);
    }

    /// The restarted leader that skipped the assignment cannot read the group's
    /// assignment. A passing failure (the coordinator loading) is retried at the next polls,
    /// not given up on until `metadata.max.age.ms` (300 s, the default, here); a lasting one
    /// (access denied) makes it rebalance rather than trust an assignment it cannot see.
    /// Either way the partition added before the restart gets its owner.
    #[test]
    fn a_restarted_leader_that_cannot_read_the_assignment_retries_or_rebalances() {
        for (code, times) in [
            (KafkaCode::CoordinatorLoadInProgress, 3),
            (KafkaCode::GroupAuthorizationFailed, 1),
        ] {
            let p = Proxy::start(proxy::upstream_for("kraft-3.9"), "kraft-3.9");
            let c = client(&p.bootstrap());
            let topic = topic_with_partitions(&c, 2);
            let group = unique_name("kip814-describe");
            let a = Running::start(static_member(&c, &group, &topic, "a"));
            wait_for("a to own both partitions", Duration::from_secs(30), || {
                converged([&a], 2)
            });
            c.admin()
                .create_partitions(&[(topic.as_str(), 3)], Duration::from_secs(30))
                .unwrap();
            a.stop().close().unwrap();
            p.fail_describe_groups(code, times);
            let a = Running::start(static_member(&c, &group, &topic, "a"));
            wait_for(
                &format!("{code}: the restarted leader to own all three partitions"),
                Duration::from_secs(30),
                || converged([&a], 3),
            );
            assert_eq!(
                p.describe_groups_failures_left(),
                0,
                "{code}: every failure was served"
            );
            let m = a.stop();
            assert_eq!(
                m.metrics().skipped_assignments,
                1,
                "{code}: KIP-814 skip expected"
            );
            m.close().unwrap();
        }
    }
}

/// What the test sees of a static consumer polled in its own thread.
#[derive(Debug, Default, Clone)]
struct ConsumerSeen {
    state: Option<MemberState>,
    generation: i32,
    assignment: BTreeSet<TopicPartition>,
    error: Option<String>,
    skipped_assignments: u64,
}

/// A static consumer polled in a background thread; every record it returns goes into the
/// shared `consumed` set as (partition, offset).
struct Consuming {
    instance: String,
    seen: Arc<Mutex<ConsumerSeen>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Option<Consumer>>>,
}

impl Consuming {
    fn start(
        client: &Client,
        group: &str,
        topic: &str,
        instance: &str,
        consumed: &Arc<Mutex<BTreeSet<(i32, i64)>>>,
    ) -> Self {
        let mut consumer = crate::consumer_tests::builder(client, group, topic)
            .group_instance_id(instance)
            .build()
            .unwrap();
        let seen = Arc::new(Mutex::new(ConsumerSeen::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2, consumed) = (seen.clone(), stop.clone(), consumed.clone());
        let handle = std::thread::spawn(move || {
            while !stop2.load(Ordering::SeqCst) {
                let polled = consumer.poll(Duration::from_millis(100));
                let mut s = seen2.lock().unwrap();
                match polled {
                    Ok(p) => consumed
                        .lock()
                        .unwrap()
                        .extend(p.records.iter().map(|r| (r.partition, r.offset))),
                    Err(e) => {
                        s.error = Some(e.to_string());
                        return None;
                    }
                }
                let member = consumer.member().unwrap();
                s.state = Some(member.state());
                s.generation = member.generation().map_or(-1, |g| g.id);
                s.assignment = consumer.assignment().into_iter().collect();
                s.skipped_assignments = member.metrics().skipped_assignments;
            }
            Some(consumer)
        });
        Consuming {
            instance: instance.to_string(),
            seen,
            stop,
            handle: Some(handle),
        }
    }

    fn seen(&self) -> ConsumerSeen {
        self.seen.lock().unwrap().clone()
    }

    /// Stops polling and closes the consumer as a process shutting down would: a static member
    /// sends no LeaveGroup, so a restart within the session timeout takes its place.
    fn close(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let consumer = self.handle.take().unwrap().join().unwrap();
        let consumer = consumer.unwrap_or_else(|| panic!("{}: {:?}", self.instance, self.seen().error));
        consumer.close().unwrap();
    }
}

impl Drop for Consuming {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// All consumers stable in one generation, their assignments covering partitions
/// `0..partitions` of `topic`, each exactly once.
fn consumers_cover(cs: &[Consuming], topic: &str, partitions: i32) -> bool {
    let seen: Vec<ConsumerSeen> = cs.iter().map(Consuming::seen).collect();
    // A consumer whose poll failed has stopped: say why now, not as a wait that timed out.
    for (c, s) in cs.iter().zip(&seen) {
        assert!(s.error.is_none(), "{}: poll failed: {:?}", c.instance, s.error);
    }
    let all: BTreeSet<TopicPartition> = (0..partitions).map(|p| TopicPartition::new(topic, p)).collect();
    let total: usize = seen.iter().map(|s| s.assignment.len()).sum();
    let union: BTreeSet<TopicPartition> = seen.iter().flat_map(|s| s.assignment.iter().cloned()).collect();
    seen.iter()
        .all(|s| s.state == Some(MemberState::Stable) && s.generation == seen[0].generation)
        && total == all.len()
        && union == all
}

/// A subscribed topic grows from `before` to `after` partitions, then every static
/// member restarts in turn within the session timeout, the leader (the first instance) in the
/// middle of the others or alone. The restarted leader is told to skip the assignment
/// (KIP-814) and learns the new partition count at its rejoin, so only the group's assignment
/// can tell it that the new partitions have no owner: the group must end up owning every
/// partition, and the records on the new ones must be consumed. The metadata check interval
/// stays at its default (300 s), so the periodic check cannot be what fixes it.
fn rolling_restart_after_topic_growth(instances: &[&str], before: i32, after: i32) {
    let client = client(broker::shared().bootstrap());
    let topic = topic_with_partitions(&client, before);
    let group = unique_name("kip814-grow");
    let consumed = Arc::new(Mutex::new(BTreeSet::new()));
    let start = |instance: &str| Consuming::start(&client, &group, &topic, instance, &consumed);
    // The first instance joins alone, so it leads.
    let mut cs = vec![start(instances[0])];
    wait_for("the leader to be stable", Duration::from_secs(30), || {
        consumers_cover(&cs, &topic, before)
    });
    cs.extend(instances[1..].iter().map(|i| start(i)));
    wait_for("the group to converge", Duration::from_secs(60), || {
        consumers_cover(&cs, &topic, before)
    });
    let generation = cs[0].seen().generation;
    client
        .admin()
        .create_partitions(&[(topic.as_str(), after)], Duration::from_secs(30))
        .unwrap();
    const PER_PARTITION: i64 = 20;
    for p in 0..after {
        let values: Vec<String> = (0..PER_PARTITION).map(|i| format!("p{p}-{i}")).collect();
        crate::consumer_tests::produce(&client, &topic, p, &values);
    }
    // Followers first, then the leader, then the rest: the leader's restart is neither the
    // first nor the last thing to happen to the group.
    let mut order: Vec<usize> = (1..instances.len()).collect();
    order.insert(order.len().min(1), 0);
    for i in order {
        let instance = cs[i].instance.clone();
        // The replacement starts only once the old one is closed, as a restarted process
        // would, so the two never fence each other.
        cs.remove(i).close();
        cs.insert(i, start(&instance));
        wait_for(
            &format!("restarted {instance} to be stable"),
            Duration::from_secs(30),
            || cs[i].seen().state == Some(MemberState::Stable),
        );
    }
    // The scenario of the bug, not a rebalance for some other reason (a restart beyond the
    // session timeout): the restarted leader was told to keep the group's assignment.
    assert_eq!(
        cs[0].seen().skipped_assignments,
        1,
        "KIP-814 skip_assignment expected for the restarted leader"
    );
    wait_for(
        &format!("every one of the {after} partitions to be assigned exactly once"),
        Duration::from_secs(60),
        || consumers_cover(&cs, &topic, after),
    );
    assert!(cs[0].seen().generation > generation, "the group rebalanced");
    let expected: BTreeSet<(i32, i64)> = (0..after)
        .flat_map(|p| (0..PER_PARTITION).map(move |o| (p, o)))
        .collect();
    wait_for(
        "the records of every partition, the new ones included, to be consumed",
        Duration::from_secs(30),
        || consumed.lock().unwrap().is_superset(&expected),
    );
    for c in &cs {
        assert_eq!(c.seen().error, None, "{}", c.instance);
    }
}

#[test]
fn rolling_restart_after_topic_growth_assigns_the_new_partitions() {
    rolling_restart_after_topic_growth(&["a", "b", "c"], 6, 8);
}

#[test]
fn restart_of_a_lone_static_member_after_topic_growth_assigns_the_new_partitions() {
    rolling_restart_after_topic_growth(&["a"], 2, 3);
}
