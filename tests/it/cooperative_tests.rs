//! Incremental (cooperative) rebalancing on the classic protocol, against the real broker:
//! `cooperative-sticky` (KIP-429) moves only the partitions that must move, in two rebalances,
//! while every member keeps fetching the partitions it keeps; Kafka's Java consumer with its
//! `CooperativeStickyAssignor` shares a group with ours, whichever leads; `sticky` (eager)
//! keeps partitions where they were.
//!
//! Records flow the whole time (a producer writes to every partition every 20 ms), and each
//! member records when each event and each record reached it, so that "kept fetching during
//! the rebalance" is checked on the records' arrival times rather than assumed.

use crate::group_tests::{client, SESSION};
use crate::support::java::Java;
use crate::support::process::Process;
use crate::support::{broker, create_topic, unique_name, wait_for};
use kafka_group::{
    Assignor, Client, Consumer, CooperativeStickyAssignor, GroupEvent, ProducerRecord, RebalanceProtocol,
    StickyAssignor, TopicPartition,
};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const PARTITIONS: i32 = 6;
const SETTLE: Duration = Duration::from_secs(60);
/// How often [`Flow`] writes a record to each partition.
const RECORD_INTERVAL: Duration = Duration::from_millis(20);
/// A member's window between its two generations is judged for "kept fetching" only if it
/// spans this many of its polls and this many record intervals: in a shorter one a member that
/// never stopped may rightly have received nothing of a partition.
const JUDGED_POLLS: usize = 3;
const JUDGED_INTERVALS: u32 = 5;

/// What one of our consumers saw, with arrival times.
#[derive(Debug, Default)]
struct Log {
    events: Vec<(Instant, GroupEvent)>,
    records: Vec<(Instant, TopicPartition)>,
    /// When each poll returned.
    polls: Vec<Instant>,
    owned: BTreeSet<TopicPartition>,
    error: Option<String>,
}

/// One of our consumers, polled (and committing after each poll) in its own thread.
struct Member {
    name: String,
    log: Arc<Mutex<Log>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Member {
    fn start(client: &Client, group: &str, topic: &str, name: &str, assignor: Arc<dyn Assignor>) -> Member {
        let mut consumer = crate::consumer_tests::builder(client, group, topic)
            .group_instance_id(name)
            .assignors(vec![assignor])
            .build()
            .unwrap();
        let log = Arc::new(Mutex::new(Log::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (log2, stop2) = (log.clone(), stop.clone());
        let handle = std::thread::spawn(move || {
            while !stop2.load(Ordering::SeqCst) {
                match poll_once(&mut consumer, &log2) {
                    Ok(()) => {}
                    Err(e) => {
                        log2.lock().unwrap().error = Some(e.to_string());
                        return;
                    }
                }
            }
            let _ = consumer.close();
        });
        Member {
            name: name.into(),
            log,
            stop,
            handle: Some(handle),
        }
    }

    fn owned(&self) -> BTreeSet<TopicPartition> {
        let l = self.log.lock().unwrap();
        assert!(l.error.is_none(), "{}: {:?}", self.name, l.error);
        l.owned.clone()
    }

    /// Events after `since`, with their times.
    fn events_since(&self, since: Instant) -> Vec<(Instant, GroupEvent)> {
        let l = self.log.lock().unwrap();
        l.events.iter().filter(|(t, _)| *t > since).cloned().collect()
    }

    /// Partitions of which a record arrived strictly between `from` and `to`.
    fn fetched_between(&self, from: Instant, to: Instant) -> BTreeSet<TopicPartition> {
        let l = self.log.lock().unwrap();
        l.records
            .iter()
            .filter(|(t, _)| *t > from && *t < to)
            .map(|(_, tp)| tp.clone())
            .collect()
    }

    /// How many of its polls returned strictly between `from` and `to`.
    fn polls_between(&self, from: Instant, to: Instant) -> usize {
        let l = self.log.lock().unwrap();
        l.polls.iter().filter(|t| **t > from && **t < to).count()
    }

    fn close(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            h.join().unwrap();
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn poll_once(consumer: &mut Consumer, log: &Mutex<Log>) -> kafka_group::Result<()> {
    let polled = consumer.poll(Duration::from_millis(100))?;
    let now = Instant::now();
    {
        let mut l = log.lock().unwrap();
        for e in &polled.events {
            match e {
                GroupEvent::Revoked { partitions, .. } | GroupEvent::Lost { partitions, .. } => {
                    for tp in partitions {
                        l.owned.remove(tp);
                    }
                }
                GroupEvent::Assigned { partitions, .. } => l.owned.extend(partitions.iter().cloned()),
                _ => {}
            }
            l.events.push((now, e.clone()));
        }
        for r in &polled.records {
            l.records.push((now, r.topic_partition()));
        }
        l.polls.push(now);
        // Ours and the consumer's view of the assignment agree at every step.
        let theirs: BTreeSet<TopicPartition> = consumer.assignment().into_iter().collect();
        assert_eq!(l.owned, theirs, "the events add up to the assignment");
    }
    // Commits what was consumed, revoked partitions included (the new generation may).
    match consumer.commit() {
        Ok(()) => Ok(()),
        // A rebalance under way refuses commits: the next poll's commit carries them.
        Err(e) if e.kafka_code() == Some(kafka_group::KafkaCode::RebalanceInProgress) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes one record to every partition of `topic` every 20 ms until dropped.
struct Flow {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Flow {
    fn start(client: &Client, topic: &str) -> Flow {
        let mut producer = client.producer().build().unwrap();
        let topic = topic.to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop2.load(Ordering::SeqCst) {
                for p in 0..PARTITIONS {
                    producer
                        .send(ProducerRecord::new(topic.as_str(), format!("r{i}")).partition(p))
                        .unwrap();
                }
                i += 1;
                std::thread::sleep(RECORD_INTERVAL);
            }
            producer.flush().unwrap();
        });
        Flow {
            stop,
            handle: Some(handle),
        }
    }
}

impl Drop for Flow {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn coop() -> Arc<dyn Assignor> {
    Arc::new(CooperativeStickyAssignor)
}

fn sticky() -> Arc<dyn Assignor> {
    Arc::new(StickyAssignor)
}

/// One of our consumers per name, all with `assignor`.
fn start_members(
    client: &Client,
    group: &str,
    topic: &str,
    names: &[&str],
    assignor: fn() -> Arc<dyn Assignor>,
) -> Vec<Member> {
    names
        .iter()
        .map(|n| Member::start(client, group, topic, n, assignor()))
        .collect()
}

/// Every partition owned exactly once, and the counts as even as they can be.
fn converged(owned: &[BTreeSet<TopicPartition>]) -> bool {
    let all: Vec<&TopicPartition> = owned.iter().flatten().collect();
    let distinct: BTreeSet<&TopicPartition> = all.iter().copied().collect();
    let (lo, hi) = (
        owned.iter().map(BTreeSet::len).min().unwrap_or(0),
        owned.iter().map(BTreeSet::len).max().unwrap_or(0),
    );
    all.len() == PARTITIONS as usize && distinct.len() == all.len() && hi - lo <= 1
}

fn wait_converged(members: &[&Member]) -> Vec<BTreeSet<TopicPartition>> {
    let mut last = Vec::new();
    wait_for("the group to converge", SETTLE, || {
        last = members.iter().map(|m| m.owned()).collect();
        converged(&last)
    });
    last
}

#[test]
fn cooperative_sticky_moves_only_what_must_move_while_the_rest_keeps_fetching() {
    let client = client(broker::shared().bootstrap());
    let topic = create_topic(&client, "coop", PARTITIONS, 1);
    let group = unique_name("coop-group");
    let _flow = Flow::start(&client, &topic);
    let members: Vec<Member> = start_members(&client, &group, &topic, &["a", "b", "c"], coop);
    let refs: Vec<&Member> = members.iter().collect();
    let before = wait_converged(&refs);
    assert!(before.iter().all(|o| o.len() == 2), "{before:?}");

    // A fourth member joins.
    let joined_at = Instant::now();
    let d = Member::start(&client, &group, &topic, "d", coop());
    let mut all = refs.clone();
    all.push(&d);
    let after = wait_converged(&all);
    let moved: BTreeSet<TopicPartition> = after[3].clone();
    assert!(!moved.is_empty());
    let d_events = d.events_since(joined_at);
    let handed_over = d_events
        .iter()
        .find(|(_, e)| matches!(e, GroupEvent::Assigned { partitions, .. } if !partitions.is_empty()))
        .map(|(t, _)| *t)
        .expect("d got its partitions");

    // Each member kept fetching every partition it kept from its first event of the rebalance
    // to its last: an eager rebalance would have stopped it between its revocation of
    // everything and its new assignment. A member that revoked partitions got the two
    // generations in two polls (a revocation ends the poll); one that only kept may have got
    // both in one poll, so it never stopped at all. A window too short to have fetched anything
    // in (fewer than JUDGED_POLLS polls or JUDGED_INTERVALS records) proves nothing either way
    // and is not judged; the revoking member's spans its whole rejoin, so at least it is.
    let mut window = Duration::ZERO;
    let mut spread = 0;
    let mut judged = Vec::new();
    for (i, m) in members.iter().enumerate() {
        let times: Vec<Instant> = m.events_since(joined_at).iter().map(|(t, _)| *t).collect();
        let (Some(&first), Some(&last)) = (times.first(), times.last()) else {
            panic!("{}: no event", m.name)
        };
        if last == first {
            continue;
        }
        spread += 1;
        let polls = m.polls_between(first, last);
        if polls < JUDGED_POLLS || last.duration_since(first) < RECORD_INTERVAL * JUDGED_INTERVALS {
            eprintln!(
                "{}: {:?} and {polls} polls between its two generations: too short to judge",
                m.name,
                last.duration_since(first)
            );
            continue;
        }
        judged.push(m.name.clone());
        window = window.max(last.duration_since(first));
        let fetched = m.fetched_between(first, last);
        for tp in &after[i] {
            assert!(
                fetched.contains(tp),
                "{} fetched nothing of {tp} in the {:?} between its two generations",
                m.name,
                last.duration_since(first)
            );
        }
    }
    assert!(
        spread > 0,
        "the revoking member saw its two generations in two polls"
    );
    assert!(
        !judged.is_empty(),
        "no member's two generations were far enough apart to judge its fetching"
    );
    for (i, m) in members.iter().enumerate() {
        let kept: BTreeSet<TopicPartition> = before[i].intersection(&after[i]).cloned().collect();
        assert_eq!(after[i], kept, "{} gained nothing", m.name);
        let mut revoked = BTreeSet::new();
        for (t, e) in m.events_since(joined_at) {
            match e {
                GroupEvent::Revoked { partitions, .. } => {
                    assert!(t < handed_over, "{} revoked before d got the partitions", m.name);
                    revoked.extend(partitions);
                }
                GroupEvent::Lost { .. } => panic!("{} lost its partitions", m.name),
                _ => {}
            }
        }
        let gone: BTreeSet<TopicPartition> = before[i].difference(&after[i]).cloned().collect();
        assert_eq!(revoked, gone, "{} revoked only what moved", m.name);
    }
    eprintln!(
        "cooperative-sticky: {} of {PARTITIONS} partitions moved to the new member; up to {window:?} \
         between a member's two generations, its kept partitions fetched throughout (judged: {judged:?})",
        moved.len()
    );

    // The fourth leaves: its partitions go back, and nobody else gives anything up.
    let left_at = Instant::now();
    d.close();
    let after_leave = wait_converged(&refs);
    for (i, m) in members.iter().enumerate() {
        assert!(
            after_leave[i].is_superset(&after[i]),
            "{} kept everything it had",
            m.name
        );
        for (_, e) in m.events_since(left_at) {
            assert!(
                !matches!(e, GroupEvent::Revoked { .. } | GroupEvent::Lost { .. }),
                "{}: {e:?}",
                m.name
            );
        }
    }
    for m in members {
        m.close();
    }
}

#[test]
fn sticky_keeps_partitions_where_they_were_when_a_member_joins() {
    let client = client(broker::shared().bootstrap());
    let topic = create_topic(&client, "sticky", PARTITIONS, 1);
    let group = unique_name("sticky-group");
    let members: Vec<Member> = start_members(&client, &group, &topic, &["a", "b", "c"], sticky);
    let refs: Vec<&Member> = members.iter().collect();
    let before = wait_converged(&refs);
    let joined_at = Instant::now();
    let d = Member::start(&client, &group, &topic, "d", sticky());
    let mut all = refs.clone();
    all.push(&d);
    let after = wait_converged(&all);
    // Eager: everyone revoked everything, and got back what it had minus what d took.
    let moved: usize = (0..3).map(|i| before[i].difference(&after[i]).count()).sum();
    assert_eq!(
        moved,
        after[3].len(),
        "only d's partitions changed hands: {before:?} → {after:?}"
    );
    for (i, m) in members.iter().enumerate() {
        assert!(
            before[i].is_superset(&after[i]),
            "{}: {before:?} → {after:?}",
            m.name
        );
        assert!(m
            .events_since(joined_at)
            .iter()
            .any(|(_, e)| matches!(e, GroupEvent::Revoked { partitions, .. } if partitions.len() == before[i].len())));
    }
    d.close();
    for m in members {
        m.close();
    }
}

#[test]
fn the_rebalance_protocol_follows_the_assignors_offered() {
    // Building a member makes no network call: no broker needed.
    let client = Client::builder()
        .bootstrap_servers("127.0.0.1:9")
        .build()
        .unwrap();
    let c = |assignors: Vec<Arc<dyn Assignor>>| {
        client
            .member("g")
            .subscribe(["t"])
            .assignors(assignors)
            .build()
            .unwrap()
            .rebalance_protocol()
    };
    assert_eq!(
        c(vec![Arc::new(CooperativeStickyAssignor)]),
        RebalanceProtocol::Cooperative
    );
    // Mid-migration from range: eager until range is dropped, as Java's consumer does.
    assert_eq!(
        c(vec![
            Arc::new(CooperativeStickyAssignor),
            Arc::new(kafka_group::RangeAssignor)
        ]),
        RebalanceProtocol::Eager
    );
}

pub(crate) mod java {
    //! Kafka's Java consumer with `CooperativeStickyAssignor` in one group with ours.

    use super::*;

    /// The Java consumer's partitions, from its listener's lines ("# assigned … partitions=…",
    /// "# revoked …"), which under the cooperative protocol name what was added or revoked.
    pub(crate) fn java_owned(p: &Process) -> BTreeSet<i32> {
        let mut owned = BTreeSet::new();
        for line in p.stdout() {
            let list = |s: &str| -> Vec<i32> { s.split(',').filter_map(|x| x.trim().parse().ok()).collect() };
            if let Some(rest) = line.strip_prefix("# assigned ") {
                let ps = rest
                    .split(' ')
                    .find_map(|f| f.strip_prefix("partitions="))
                    .unwrap_or("");
                owned.extend(list(ps));
            } else if let Some(rest) = line.strip_prefix("# revoked ") {
                for p in list(rest) {
                    owned.remove(&p);
                }
            }
        }
        owned
    }

    fn java_records(p: &Process) -> usize {
        p.stdout().iter().filter(|l| !l.starts_with('#')).count()
    }

    fn run(java_leads: bool) {
        let b = broker::shared();
        let client = client(b.bootstrap());
        let topic = create_topic(&client, "coop-java", PARTITIONS, 1);
        let group = unique_name("coop-java");
        let _flow = Flow::start(&client, &topic);
        let java = Java::new(b.version()).with_config(&[(
            "partition.assignment.strategy",
            "org.apache.kafka.clients.consumer.CooperativeStickyAssignor".into(),
        )]);
        let mut ours = Vec::new();
        let jc;
        if java_leads {
            jc = java.consumer(b.bootstrap(), &topic, &group, "coop-java", Some("j"));
            wait_for("the Java consumer to own everything", SETTLE, || {
                java_owned(&jc).len() == PARTITIONS as usize
            });
            ours.push(Member::start(&client, &group, &topic, "a", coop()));
        } else {
            ours.push(Member::start(&client, &group, &topic, "a", coop()));
            wait_for("ours to own everything", SETTLE, || {
                ours[0].owned().len() == PARTITIONS as usize
            });
            jc = java.consumer(b.bootstrap(), &topic, &group, "coop-java", Some("j"));
        }
        ours.push(Member::start(&client, &group, &topic, "b", coop()));
        let mut owned = Vec::new();
        wait_for("the mixed group to converge", SETTLE, || {
            let j: BTreeSet<TopicPartition> = java_owned(&jc)
                .into_iter()
                .map(|p| TopicPartition::new(topic.as_str(), p))
                .collect();
            owned = ours.iter().map(|m| m.owned()).collect::<Vec<_>>();
            owned.push(j);
            converged(&owned)
        });
        // Under the cooperative protocol, no member revoked a partition it kept.
        for (i, m) in ours.iter().enumerate() {
            let revoked: BTreeSet<TopicPartition> = m
                .events_since(Instant::now() - Duration::from_secs(3600))
                .into_iter()
                .filter_map(|(_, e)| match e {
                    GroupEvent::Revoked { partitions, .. } => Some(partitions),
                    _ => None,
                })
                .flatten()
                .collect();
            assert!(
                revoked.is_disjoint(&owned[i]),
                "{}: revoked {revoked:?}, owns {:?}",
                m.name,
                owned[i]
            );
        }
        let java_lines = jc
            .stdout()
            .into_iter()
            .filter(|l| l.starts_with("# "))
            .collect::<Vec<_>>();
        assert!(
            !java_lines.iter().any(|l| l.starts_with("# revoked ") && {
                let ps: BTreeSet<i32> = l["# revoked ".len()..]
                    .split(',')
                    .filter_map(|x| x.trim().parse().ok())
                    .collect();
                ps.iter()
                    .any(|p| owned[2].contains(&TopicPartition::new(topic.as_str(), *p)))
            }),
            "the Java consumer revoked only what moved: {java_lines:?}"
        );
        let read = java_records(&jc);
        wait_for("the Java consumer to read its partitions", SETTLE, || {
            java_records(&jc) > read
        });
        eprintln!(
            "cooperative-sticky with Java {} (leader: {}): {:?}",
            java.version(),
            if java_leads { "Java" } else { "ours" },
            owned.iter().map(BTreeSet::len).collect::<Vec<_>>()
        );
        for m in ours {
            m.close();
        }
        drop(jc);
    }

    #[test]
    fn java_cooperative_sticky_leads_ours() {
        run(true);
    }

    #[test]
    fn ours_lead_java_cooperative_sticky() {
        run(false);
    }
}

#[test]
fn a_static_cooperative_member_restarting_within_its_session_gets_its_partitions_back_untouched() {
    let client = client(broker::shared().bootstrap());
    let topic = create_topic(&client, "coop-static", PARTITIONS, 1);
    let group = unique_name("coop-static");
    let mut members: Vec<Member> = start_members(&client, &group, &topic, &["a", "b", "c"], coop);
    let before = wait_converged(&members.iter().collect::<Vec<_>>());
    // Let the group settle into its last generation.
    std::thread::sleep(Duration::from_secs(2));
    let restarted_at = Instant::now();
    members.remove(1).close();
    members.insert(1, Member::start(&client, &group, &topic, "b", coop()));
    let after = wait_converged(&members.iter().collect::<Vec<_>>());
    assert_eq!(after, before, "the same partitions, every member");
    let b_events = members[1].events_since(restarted_at);
    assert!(
        matches!(&b_events[..], [(_, GroupEvent::Assigned { partitions, .. })] if partitions.iter().cloned().collect::<BTreeSet<_>>() == before[1]),
        "{b_events:?}"
    );
    // Give a rebalance, had there been one, time to show.
    std::thread::sleep(SESSION / 2);
    for i in [0, 2] {
        assert!(
            members[i].events_since(restarted_at).is_empty(),
            "{}: {:?}",
            members[i].name,
            members[i].events_since(restarted_at)
        );
    }
    for m in members {
        m.close();
    }
}

/// Kafka 4's online migration of a classic group to the consumer protocol (KIP-848): a member
/// on `group.protocol=consumer` (Kafka's Java consumer) joins a group of our classic members;
/// the coordinator converts the group, keeps ours as classic members of it and assigns to all
/// three with its own assignor. Ours must go on consuming, each partition owned once; with
/// cooperative-sticky they give up only what moves.
fn classic_members_in_a_group_migrating_to_the_consumer_protocol(assignor: fn() -> Arc<dyn Assignor>) {
    use kafka_group::GroupProtocol;
    let b = broker::consumer_protocol();
    let client = client(b.bootstrap());
    let topic = create_topic(&client, "migrating", PARTITIONS, 1);
    let group = unique_name("migrating");
    let _flow = Flow::start(&client, &topic);
    let ours = [
        Member::start(&client, &group, &topic, "a", assignor()),
        Member::start(&client, &group, &topic, "b", assignor()),
    ];
    let before = wait_converged(&ours.iter().collect::<Vec<_>>());
    let admin = client.admin();
    assert_eq!(
        admin.describe_group(&group).unwrap().group_protocol,
        GroupProtocol::Classic
    );
    let joined_at = Instant::now();
    let java = Java::new(b.version()).with_config(&[("group.protocol", "consumer".into())]);
    let jc = java.consumer(b.bootstrap(), &topic, &group, "migrating-java", Some("j"));
    let mut owned = Vec::new();
    wait_for("the migrated group to converge", SETTLE, || {
        let j: BTreeSet<TopicPartition> = java::java_owned(&jc)
            .into_iter()
            .map(|p| TopicPartition::new(topic.as_str(), p))
            .collect();
        owned = ours.iter().map(|m| m.owned()).collect::<Vec<_>>();
        owned.push(j);
        converged(&owned) && owned.iter().all(|o| o.len() == 2)
    });
    let d = admin.describe_group(&group).unwrap();
    assert_eq!(d.group_protocol, GroupProtocol::Consumer, "{d:?}");
    for m in &d.members {
        let expected = match m.group_instance_id.as_deref() {
            Some("j") => GroupProtocol::Consumer,
            _ => GroupProtocol::Classic,
        };
        assert_eq!(m.member_protocol, Some(expected), "{m:?}");
    }
    let cooperative = assignor().rebalance_protocol() == RebalanceProtocol::Cooperative;
    for (i, m) in ours.iter().enumerate() {
        let mut revoked = BTreeSet::new();
        for (_, e) in m.events_since(joined_at) {
            match e {
                GroupEvent::Revoked { partitions, .. } => revoked.extend(partitions),
                GroupEvent::Lost { .. } => panic!("{} lost its partitions", m.name),
                _ => {}
            }
        }
        if cooperative {
            let gone: BTreeSet<TopicPartition> = before[i].difference(&owned[i]).cloned().collect();
            assert_eq!(revoked, gone, "{} revoked only what moved", m.name);
        }
        // Still consuming after the migration.
        let now = Instant::now();
        wait_for("records after the migration", SETTLE, || {
            m.fetched_between(now, Instant::now()).len() == owned[i].len()
        });
    }
    eprintln!(
        "migrating to the consumer protocol ({}): {:?}, group epoch {:?}",
        if cooperative {
            "cooperative-sticky"
        } else {
            "range"
        },
        owned.iter().map(BTreeSet::len).collect::<Vec<_>>(),
        d.group_epoch
    );
    for m in ours {
        m.close();
    }
    drop(jc);
}

#[test]
fn cooperative_classic_members_stay_in_a_group_migrating_to_the_consumer_protocol() {
    classic_members_in_a_group_migrating_to_the_consumer_protocol(coop);
}

#[test]
fn eager_classic_members_stay_in_a_group_migrating_to_the_consumer_protocol() {
    classic_members_in_a_group_migrating_to_the_consumer_protocol(|| Arc::new(kafka_group::RangeAssignor));
}
