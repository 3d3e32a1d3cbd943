//! Interoperability: other clients in the same consumer group as ours, against the real broker.
//!
//! Two of our static members share a 6-partition topic with Kafka's Java consumer or with
//! librdkafka (PyPI's confluent-kafka wheel), classic protocol, range assignor. Whoever leads — they decode our
//! `ConsumerProtocolSubscription` and we decode their `ConsumerProtocolAssignment`, or the other
//! way round — every member must end up with the assignment Kafka's `RangeAssignor` computes
//! (static members ordered by `group.instance.id`, then dynamic ones by member id; 2 partitions
//! each), DescribeGroups must show the same, and the other client must consume exactly the
//! records of its own partitions. One exception: librdkafka orders a static member and a
//! dynamic one by member id, so a mixed group it leads gets another assignment, which is only
//! checked for consistency.
//!
//! Each test runs with the other client leading (it joins first and stays leader) and with ours
//! leading; the other client's own report says which it was (the Java client's assignor is
//! Kafka's `RangeAssignor` with a print added, librdkafka's is its debug log).

use crate::group_tests::{client, converged, static_member, topic_with_partitions, Running, Seen};
use crate::support::java::Java;
use crate::support::process::{Process, Record};
use crate::support::{broker, rdkafka, unique_name, wait_for};
use kafka_group::MemberState;
use kafka_group::{Admin, Client, GroupDescription, MemberDescription};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const PARTITIONS: i32 = 6;
const PER_PARTITION: usize = 10;
/// Our instance ids; the other client's static one sorts between them, so that the range order
/// (static members by instance id) decides who gets the middle partitions.
const OURS: [&str; 2] = ["member-a", "member-c"];
const OTHER_INSTANCE: &str = "member-b";
/// The other client's `client.id`: how DescribeGroups names it when it is dynamic.
const OTHER_CLIENT_ID: &str = "interop-other";
const SETTLE: Duration = Duration::from_secs(45);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Java,
    Librdkafka,
}

/// Who joins the group first, and so leads every generation after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leader {
    Other,
    Ours,
}

/// The other client's view of its membership after a rebalance.
#[derive(Debug, Clone, PartialEq, Eq)]
struct View {
    /// The generation it joined (librdkafka: from its debug log).
    generation: Option<i32>,
    /// Whether it computed that generation's assignment.
    leader: Option<bool>,
    partitions: Vec<i32>,
}

/// The client under test next to ours.
struct Other {
    kind: Kind,
    process: Process,
    instance: Option<&'static str>,
}

impl Other {
    fn start(
        kind: Kind,
        java: Option<&Java>,
        bootstrap: &str,
        topic: &str,
        group: &str,
        instance: Option<&'static str>,
    ) -> Other {
        let process = match kind {
            Kind::Java => {
                java.expect("a Java release")
                    .consumer(bootstrap, topic, group, OTHER_CLIENT_ID, instance)
            }
            Kind::Librdkafka => rdkafka::group_consumer(bootstrap, topic, group, OTHER_CLIENT_ID, instance),
        };
        Other {
            kind,
            process,
            instance,
        }
    }

    /// How DescribeGroups identifies it.
    fn identity(&self) -> String {
        self.instance.unwrap_or(OTHER_CLIENT_ID).to_string()
    }

    /// What it reported about its last rebalance, if anything yet.
    fn view(&self) -> Option<View> {
        match self.kind {
            // "# assigned generation=G leader=L partitions=0,1"
            Kind::Java => {
                let out = self.process.stdout();
                let line = out.iter().rev().find_map(|l| l.strip_prefix("# assigned "))?;
                let field = |name: &str| {
                    line.split(' ')
                        .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
                        .map(str::to_string)
                };
                Some(View {
                    generation: field("generation")?.parse().ok(),
                    leader: field("leader")?.parse().ok(),
                    partitions: partition_list(&field("partitions")?, ','),
                })
            }
            // "# assigned partitions=0,1"
            Kind::Librdkafka => {
                let out = self.process.stdout();
                let line = out
                    .iter()
                    .rev()
                    .find_map(|l| l.strip_prefix("# assigned partitions="))?;
                let partitions = partition_list(line, ',');
                let joined = rdkafka::led(&self.process.stderr());
                let last = joined.last();
                Some(View {
                    generation: last.map(|(g, _)| *g),
                    leader: last.map(|(_, l)| *l),
                    partitions,
                })
            }
        }
    }
}

/// The records the producers of these tests write: `per_partition` to each of `partitions`, value
/// `p<partition>-<i>` at offset `i`.
fn produced(partitions: impl IntoIterator<Item = i32>, per_partition: usize) -> Vec<Record> {
    partitions
        .into_iter()
        .flat_map(|p| {
            (0..per_partition).map(move |i| Record {
                partition: p,
                offset: i as i64,
                value: format!("p{p}-{i}"),
            })
        })
        .collect()
}

fn partition_list(s: &str, sep: char) -> Vec<i32> {
    s.split(sep).filter_map(|p| p.trim().parse().ok()).collect()
}

/// Instance id of a static member, client id of a dynamic one.
fn identity(m: &MemberDescription) -> String {
    m.group_instance_id.clone().unwrap_or_else(|| m.client_id.clone())
}

/// Identity → partitions of `topic`, for every member whose assignment DescribeGroups decoded.
fn described(d: &GroupDescription, topic: &str) -> BTreeMap<String, Vec<i32>> {
    d.members
        .iter()
        .filter_map(|m| {
            let a = m.decoded_assignment.as_ref()?;
            Some((identity(m), a.partitions.get(topic).cloned().unwrap_or_default()))
        })
        .collect()
}

/// What Kafka's RangeAssignor gives: static members by instance id, then dynamic ones.
fn range_expected(other: &Other) -> BTreeMap<String, Vec<i32>> {
    let mut order: Vec<String> = OURS.iter().map(|s| s.to_string()).collect();
    order.extend(other.instance.map(String::from));
    order.sort();
    if other.instance.is_none() {
        order.push(OTHER_CLIENT_ID.into());
    }
    let per = PARTITIONS / order.len() as i32;
    order
        .into_iter()
        .enumerate()
        .map(|(i, who)| (who, (i as i32 * per..(i as i32 + 1) * per).collect()))
        .collect()
}

/// A 3-member group: ours and one other client.
struct MixedGroup {
    client: Client,
    bootstrap: String,
    topic: String,
    group: String,
    ours: Vec<Running>,
    other: Other,
    /// The generation every member settled in.
    generation: i32,
    /// Identity → partitions, as DescribeGroups shows them once settled.
    assignment: BTreeMap<String, Vec<i32>>,
}

/// Polls DescribeGroups until `cond` returns `Some`; after [`SETTLE`] (or if the other client
/// exits) panics with `what`, the last group description and the other client's output.
fn settle<T>(
    what: &str,
    admin: &Admin,
    group: &str,
    other: &mut Other,
    mut cond: impl FnMut(&GroupDescription, &Other) -> Option<T>,
) -> T {
    let deadline = Instant::now() + SETTLE;
    let mut last = None;
    while Instant::now() < deadline {
        if let Ok(d) = admin.describe_group(group) {
            if let Some(t) = cond(&d, other) {
                return t;
            }
            last = Some(d);
        }
        if let Some(s) = other.process.exit_status() {
            panic!(
                "exited ({s}) while waiting for {what}\n{}",
                other.process.report()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!(
        "timed out after {SETTLE:?} waiting for {what}\nlast description: {last:#?}\n{}",
        other.process.report()
    );
}

/// Starts the group in the given order and waits until all three members are stable in one
/// generation with a disjoint covering range assignment that DescribeGroups, our members'
/// `assignment()` and the other client's own report agree on. With `exact`, it must also be
/// the very assignment Kafka's `RangeAssignor` computes (for leaders that follow its order).
fn mixed_group(
    bootstrap: &str,
    leader: Leader,
    start_other: impl FnOnce(&str, &str) -> Other,
    exact: bool,
) -> MixedGroup {
    let client = client(bootstrap);
    let admin = client.admin();
    let topic = topic_with_partitions(&client, PARTITIONS);
    let group = unique_name("interop");
    let start_ours = || -> Vec<Running> {
        OURS.iter()
            .map(|i| Running::start(static_member(&client, &group, &topic, i)))
            .collect()
    };
    let (ours, mut other) = match leader {
        Leader::Other => {
            let mut other = start_other(&topic, &group);
            settle(
                "the other client alone to own every partition",
                &admin,
                &group,
                &mut other,
                |d, o| {
                    let all: Vec<i32> = (0..PARTITIONS).collect();
                    let alone = d.state == "Stable"
                        && d.members.len() == 1
                        && described(d, &topic).get(&o.identity()) == Some(&all)
                        && o.view().is_some_and(|v| v.partitions == all);
                    alone.then_some(())
                },
            );
            (start_ours(), other)
        }
        Leader::Ours => {
            let ours = start_ours();
            wait_for("our two members to converge", SETTLE, || {
                converged(&ours, PARTITIONS as usize)
            });
            // Only now, so that the first of ours to join stays the leader.
            let ours_gen = ours[0].seen().generation;
            let other = start_other(&topic, &group);
            eprintln!(
                "ours settled in generation {ours_gen}; started {}",
                other.process.name()
            );
            (ours, other)
        }
    };
    let expected = range_expected(&other);
    let (generation, assignment) = settle(
        "the three members to settle",
        &admin,
        &group,
        &mut other,
        |d, o| {
            if d.state != "Stable" || d.members.len() != 3 || d.protocol != "range" {
                return None;
            }
            let described = described(d, &topic);
            if described.len() != 3 {
                return None;
            }
            let seen: Vec<Seen> = ours.iter().map(Running::seen).collect();
            let generation = seen[0].generation;
            for (s, id) in seen.iter().zip(OURS) {
                let mine: Vec<i32> = s.partitions.iter().map(|tp| tp.partition).collect();
                if s.state != Some(MemberState::Stable)
                    || s.generation != generation
                    || described.get(id) != Some(&mine)
                {
                    return None;
                }
            }
            let view = o.view()?;
            if described.get(&o.identity()) != Some(&view.partitions)
                || view.generation.is_some_and(|g| g != generation)
            {
                return None;
            }
            Some((generation, described))
        },
    );
    // Disjoint and covering, 2 each: checked here rather than waited for, since a settled
    // group that breaks it is the bug this test looks for.
    let all: Vec<i32> = assignment.values().flatten().copied().collect();
    let unique: BTreeSet<i32> = all.iter().copied().collect();
    assert_eq!(
        all.len(),
        PARTITIONS as usize,
        "overlapping assignment {assignment:?}"
    );
    assert_eq!(
        unique,
        (0..PARTITIONS).collect(),
        "partitions left out: {assignment:?}"
    );
    assert!(assignment.values().all(|ps| ps.len() == 2), "{assignment:?}");
    if exact {
        assert_eq!(
            assignment, expected,
            "not the assignment Kafka's RangeAssignor computes"
        );
    }
    eprintln!(
        "{} with {:?} leading: generation {generation}, assignment {assignment:?}",
        other.process.name(),
        leader
    );
    MixedGroup {
        client,
        bootstrap: bootstrap.to_string(),
        topic,
        group,
        ours,
        other,
        generation,
        assignment,
    }
}

impl MixedGroup {
    /// Checks the other client led the final generation exactly when it joined first.
    fn check_leader(&self, leader: Leader) {
        let view = self
            .other
            .view()
            .expect("the other client reported its assignment");
        assert_eq!(
            view.leader,
            Some(leader == Leader::Other),
            "{} should{} have led generation {}: {view:?}",
            self.other.process.name(),
            if leader == Leader::Other { "" } else { " not" },
            self.generation
        );
    }

    /// Produces `PER_PARTITION` records to every partition with `produce` and waits until the
    /// other client has consumed exactly those of its own partitions, and nothing else.
    fn check_consumes_its_partitions(&mut self, produce: impl FnOnce(&str, &str)) {
        produce(&self.bootstrap, &self.topic);
        let mine = self.assignment[&self.other.identity()].clone();
        let expected = produced(mine.iter().copied(), PER_PARTITION);
        let got = self.other.process.wait_for_records(expected.len(), SETTLE);
        assert_eq!(
            got,
            expected,
            "should have consumed exactly the records of partitions {mine:?}\n{}",
            self.other.process.report()
        );
        // Nobody rebalanced meanwhile.
        for (r, id) in self.ours.iter().zip(OURS) {
            let s = r.seen();
            assert_eq!(
                (s.state, s.generation),
                (Some(MemberState::Stable), self.generation),
                "{id}"
            );
            assert!(s.error.is_none(), "{id}: {:?}", s.error);
        }
        let d = self.client.admin().describe_group(&self.group).unwrap();
        assert_eq!(described(&d, &self.topic), self.assignment);
    }
}

mod java {
    //! Kafka's Java consumer (`KafkaConsumer`, classic protocol, `RangeAssignor`).

    use super::*;

    fn run(bootstrap: &str, java: &Java, instance: Option<&'static str>, leader: Leader) {
        let mut g = mixed_group(
            bootstrap,
            leader,
            |topic, group| Other::start(Kind::Java, Some(java), bootstrap, topic, group, instance),
            true,
        );
        g.check_leader(leader);
        let j = java.clone();
        g.check_consumes_its_partitions(|b, t| j.produce(b, t, PARTITIONS, PER_PARTITION));
        eprintln!("java {} consumed its partitions", java.version());
    }

    fn current() -> (&'static str, Java) {
        let b = broker::shared();
        (b.bootstrap(), Java::new(b.version()))
    }

    #[test]
    fn static_java_consumer_leads_our_static_members() {
        let (b, java) = current();
        run(b, &java, Some(OTHER_INSTANCE), Leader::Other);
    }

    #[test]
    fn static_java_consumer_follows_our_leader() {
        let (b, java) = current();
        run(b, &java, Some(OTHER_INSTANCE), Leader::Ours);
    }

    #[test]
    fn dynamic_java_consumer_leads_our_static_members() {
        let (b, java) = current();
        run(b, &java, None, Leader::Other);
    }

    #[test]
    fn dynamic_java_consumer_follows_our_leader() {
        let (b, java) = current();
        run(b, &java, None, Leader::Ours);
    }

    mod kafka_3_9 {
        //! The 3.9 consumer against a 3.9 broker.

        use super::*;

        fn legacy() -> (String, Java) {
            (broker::shared_legacy().to_string(), Java::new("3.9"))
        }

        #[test]
        fn static_java_consumer_leads_our_static_members() {
            let (b, java) = legacy();
            run(&b, &java, Some(OTHER_INSTANCE), Leader::Other);
        }

        #[test]
        fn static_java_consumer_follows_our_leader() {
            let (b, java) = legacy();
            run(&b, &java, Some(OTHER_INSTANCE), Leader::Ours);
        }
    }
}

mod librdkafka {
    //! librdkafka's balanced consumer (`support::rdkafka`).

    use super::*;

    fn run(instance: Option<&'static str>, leader: Leader, exact: bool) {
        let bootstrap = broker::shared().bootstrap();
        eprintln!("{}", rdkafka::version());
        let mut g = mixed_group(
            bootstrap,
            leader,
            |topic, group| Other::start(Kind::Librdkafka, None, bootstrap, topic, group, instance),
            exact,
        );
        g.check_leader(leader);
        g.check_consumes_its_partitions(|b, t| rdkafka::produce(b, t, PARTITIONS, PER_PARTITION, &[]));
    }

    #[test]
    fn static_librdkafka_leads_our_static_members() {
        run(Some(OTHER_INSTANCE), Leader::Other, true);
    }

    #[test]
    fn static_librdkafka_follows_our_leader() {
        run(Some(OTHER_INSTANCE), Leader::Ours, true);
    }

    #[test]
    fn dynamic_librdkafka_follows_our_leader() {
        run(None, Leader::Ours, true);
    }

    /// librdkafka orders a static and a dynamic member by member id, not statics first as
    /// Kafka's assignors (and ours) do, so a mixed group it leads gets another — still
    /// consistent — assignment; only consistency is checked.
    #[test]
    fn dynamic_librdkafka_leads_our_static_members() {
        run(None, Leader::Other, false);
    }
}

mod compression {
    //! Compressed record batches across clients: Kafka's Java producer writes batches with each
    //! `compression.type` and our consumer reads them back whole (keys, values, headers,
    //! offsets); our producer writes with each compression and Kafka's Java consumer reads the
    //! values back.

    use super::*;
    use bytes::Bytes;
    use kafka_group::Compression;
    use kafka_group::{ConsumerRecord, OffsetReset, ProducerRecord};

    const COMPRESSIONS: [(&str, Compression); 5] = [
        ("none", Compression::None),
        ("gzip", Compression::Gzip),
        ("snappy", Compression::Snappy),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
    ];
    const PARTITIONS: i32 = 2;
    const PER: usize = 25;
    const DEADLINE: Duration = Duration::from_secs(30);

    /// Reads `n` records of `topic` from the start in a fresh group with our consumer.
    fn consume_all(client: &Client, topic: &str, n: usize) -> Vec<ConsumerRecord> {
        let mut c = client
            .consumer(&unique_name("interop-compressed"))
            .subscribe([topic])
            .auto_offset_reset(OffsetReset::Earliest)
            .enable_auto_commit(false)
            .fetch_max_wait(Duration::from_millis(100))
            .build()
            .unwrap();
        let deadline = Instant::now() + DEADLINE;
        let mut got = Vec::new();
        while got.len() < n && Instant::now() < deadline {
            got.extend(c.poll(Duration::from_millis(200)).unwrap().records);
        }
        c.close().unwrap();
        got.sort_by_key(|r| (r.partition, r.offset));
        got
    }

    fn java_producer_to_our_consumer(bootstrap: &str, java: &Java) {
        let client = client(bootstrap);
        for (name, _) in COMPRESSIONS {
            let topic = topic_with_partitions(&client, PARTITIONS);
            java.produce_compressed(bootstrap, &topic, PARTITIONS, PER, name);
            let got = consume_all(&client, &topic, PARTITIONS as usize * PER);
            let seen: Vec<_> = got
                .iter()
                .map(|r| {
                    (
                        r.partition,
                        r.offset,
                        r.key.clone(),
                        r.value.clone(),
                        r.headers.clone(),
                    )
                })
                .collect();
            let expected: Vec<_> = (0..PARTITIONS)
                .flat_map(|p| {
                    (0..PER).map(move |i| {
                        (
                            p,
                            i as i64,
                            Some(Bytes::from(format!("k{p}-{i}"))),
                            Some(Bytes::from(format!("p{p}-{i}"))),
                            vec![
                                ("i".to_string(), Some(Bytes::from(i.to_string()))),
                                ("nothing".to_string(), None),
                            ],
                        )
                    })
                })
                .collect();
            assert_eq!(seen, expected, "java {} {name}", java.version());
            assert!(
                got.iter().all(|r| *r.topic == *topic && r.timestamp > 0),
                "{name}"
            );
        }
    }

    fn our_producer_to_java_consumer(bootstrap: &str, java: &Java) {
        let client = client(bootstrap);
        // Partition i holds what the producer with the i-th compression wrote.
        let topic = topic_with_partitions(&client, COMPRESSIONS.len() as i32);
        for (p, (_, compression)) in COMPRESSIONS.iter().enumerate() {
            let p = p as i32;
            let mut producer = client.producer().compression(*compression).build().unwrap();
            for i in 0..PER {
                producer
                    .send(
                        ProducerRecord::new(&topic, format!("p{p}-{i}"))
                            .key(format!("k{p}-{i}"))
                            .header("i", i.to_string())
                            .partition(p),
                    )
                    .unwrap();
            }
            producer.flush().unwrap();
            producer.close().unwrap();
        }
        let mut consumer = java.consumer(
            bootstrap,
            &topic,
            &unique_name("interop-compressed"),
            "java",
            None,
        );
        let expected = produced(0..COMPRESSIONS.len() as i32, PER);
        let got = consumer.wait_for_records(expected.len(), DEADLINE);
        assert_eq!(got, expected, "java {}\n{}", java.version(), consumer.report());
    }

    #[test]
    fn java_producer_every_compression_to_our_consumer() {
        let b = broker::shared();
        java_producer_to_our_consumer(b.bootstrap(), &Java::new(b.version()));
    }

    #[test]
    fn our_producer_every_compression_to_java_consumer() {
        let b = broker::shared();
        our_producer_to_java_consumer(b.bootstrap(), &Java::new(b.version()));
    }

    #[test]
    fn java_3_9_producer_every_compression_to_our_consumer() {
        let b = broker::shared_legacy().to_string();
        java_producer_to_our_consumer(&b, &Java::new("3.9"));
    }

    #[test]
    fn our_producer_every_compression_to_java_3_9_consumer() {
        let b = broker::shared_legacy().to_string();
        our_producer_to_java_consumer(&b, &Java::new("3.9"));
    }
}
