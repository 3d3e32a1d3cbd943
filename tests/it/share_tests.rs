//! Share groups (KIP-932) against a real Kafka 4.x broker ([`broker::consumer_protocol`]): two
//! share consumers of one partition both receive records and no record goes to both; a
//! released record comes back with its delivery count one higher, a rejected one never;
//! explicit acknowledgements from worker threads, and `commit`'s per-partition results.
//!
//! The group's `share.auto.offset.reset` is `latest` (Kafka's default), so each test first
//! produces warm-up records until one is delivered: from then on the share partitions exist
//! and every record produced is delivered. Records are told apart by value.

use crate::consumer_tests::produce;
use crate::group_tests::client;
use crate::support::{broker, create_topic, unique_name};
use kafka_group::{AcknowledgeType, AcknowledgementMode, Client, ShareConsumer, ShareRecord};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

fn share(client: &Client, group: &str, topic: &str, mode: AcknowledgementMode) -> ShareConsumer {
    client
        .share_consumer(group)
        .subscribe([topic])
        .acknowledgement_mode(mode)
        .max_poll_records(10)
        .fetch_max_wait(Duration::from_millis(200))
        .build()
        .unwrap()
}

fn value(r: &ShareRecord) -> String {
    String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned()
}

/// Produces warm-up records to partition 0 until one of `consumers` gets one, polling them in
/// turn; the records they got are accepted (or left to their mode).
fn warm_up(client: &Client, topic: &str, consumers: &mut [&mut ShareConsumer]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut n = 0;
    loop {
        assert!(
            Instant::now() < deadline,
            "no warm-up record reached the share consumers in 60 s"
        );
        produce(client, topic, 0, &[format!("warm-{n}")]);
        n += 1;
        for c in consumers.iter_mut() {
            let got = c.poll(Duration::from_millis(500)).unwrap();
            for r in &got {
                r.acknowledge(AcknowledgeType::Accept).unwrap();
            }
            if got.iter().any(|r| value(r).starts_with("warm-")) {
                return;
            }
        }
    }
}

/// `n` records `r-0` … to partition 0, in batches of 5 (a broker acquires whole batches).
fn produce_records(client: &Client, topic: &str, n: usize) -> BTreeSet<String> {
    let values: Vec<String> = (0..n).map(|i| format!("r-{i}")).collect();
    for chunk in values.chunks(5) {
        produce(client, topic, 0, chunk);
    }
    values.into_iter().collect()
}

#[test]
fn two_share_consumers_of_one_partition_both_receive_and_no_record_goes_to_both() {
    let b = broker::consumer_protocol();
    let c = client(b.bootstrap());
    let topic = create_topic(&c, "share", 1, 1);
    let group = unique_name("share-two");
    let mut a = share(&c, &group, &topic, AcknowledgementMode::Implicit);
    let mut z = share(&c, &group, &topic, AcknowledgementMode::Implicit);
    warm_up(&c, &topic, &mut [&mut a, &mut z]);
    let want = produce_records(&c, &topic, 200);
    let mut by: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while want.iter().any(|v| !by.contains_key(v)) && Instant::now() < deadline {
        for (name, consumer) in [("a", &mut a), ("z", &mut z)] {
            for r in consumer.poll(Duration::from_millis(200)).unwrap() {
                let v = value(&r);
                if v.starts_with("r-") {
                    by.entry(v).or_default().push(name);
                }
            }
        }
    }
    let missing: Vec<&String> = want.iter().filter(|v| !by.contains_key(*v)).collect();
    assert!(missing.is_empty(), "never delivered: {missing:?}");
    let twice: Vec<(&String, &Vec<&str>)> = by.iter().filter(|(_, who)| who.len() > 1).collect();
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
    let per: BTreeMap<&str, usize> = by.values().fold(BTreeMap::new(), |mut m, who| {
        *m.entry(who[0]).or_default() += 1;
        m
    });
    assert!(
        per.get("a").is_some_and(|n| *n > 0) && per.get("z").is_some_and(|n| *n > 0),
        "both consumers of the one partition should receive records: {per:?}"
    );
    a.close().unwrap();
    z.close().unwrap();
}

#[test]
fn a_released_record_comes_back_counted_and_a_rejected_one_never() {
    let b = broker::consumer_protocol();
    let c = client(b.bootstrap());
    let topic = create_topic(&c, "share", 1, 1);
    let group = unique_name("share-release");
    let mut s = share(&c, &group, &topic, AcknowledgementMode::Explicit);
    warm_up(&c, &topic, &mut [&mut s]);
    let want = produce_records(&c, &topic, 10);
    // First delivery: release r-3, reject r-4, accept the rest.
    let mut first: BTreeMap<String, u16> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while first.len() < want.len() && Instant::now() < deadline {
        for r in s.poll(Duration::from_millis(500)).unwrap() {
            let v = value(&r);
            let kind = match v.as_str() {
                "r-3" => AcknowledgeType::Release,
                "r-4" => AcknowledgeType::Reject,
                _ => AcknowledgeType::Accept,
            };
            r.acknowledge(kind).unwrap();
            if v.starts_with("r-") {
                first.insert(v, r.delivery_count);
            }
        }
    }
    assert_eq!(first.keys().cloned().collect::<BTreeSet<_>>(), want);
    assert!(first.values().all(|n| *n == 1), "first deliveries: {first:?}");
    let results = s.commit(Duration::from_secs(30)).unwrap();
    assert!(results.values().all(|r| r.is_ok()), "commit: {results:?}");
    // Only the released record comes back, counted twice; the rejected one never does.
    let mut again: Vec<(String, u16)> = Vec::new();
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        for r in s.poll(Duration::from_millis(500)).unwrap() {
            r.acknowledge(AcknowledgeType::Accept).unwrap();
            let v = value(&r);
            if v.starts_with("r-") {
                again.push((v, r.delivery_count));
            }
        }
    }
    assert_eq!(again, vec![("r-3".to_string(), 2)], "redeliveries");
    s.close().unwrap();
}

#[test]
fn worker_threads_acknowledge_and_commit_reports_each_partition() {
    let b = broker::consumer_protocol();
    let c = client(b.bootstrap());
    let topic = create_topic(&c, "share", 1, 1);
    let group = unique_name("share-workers");
    let mut s = share(&c, &group, &topic, AcknowledgementMode::Explicit);
    warm_up(&c, &topic, &mut [&mut s]);
    s.commit(Duration::from_secs(30)).unwrap();
    let want = produce_records(&c, &topic, 20);
    let mut got = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.len() < want.len() && Instant::now() < deadline {
        let records = s.poll(Duration::from_millis(500)).unwrap();
        for r in &records {
            let expires = r.lock_expires_at().expect("Kafka 4.4 says how long a lock lasts");
            assert!(
                expires > Instant::now() && expires <= Instant::now() + LOCK,
                "a fresh record's lock runs out within group.share.record.lock.duration.ms"
            );
        }
        let handles: Vec<_> = records
            .iter()
            .map(|r| (value(r), r.acknowledger()))
            .filter(|(v, _)| v.starts_with("r-"))
            .collect();
        got.extend(handles.iter().map(|(v, _)| v.clone()));
        std::thread::scope(|scope| {
            for (_, ack) in handles {
                scope.spawn(move || ack.acknowledge(AcknowledgeType::Accept).unwrap());
            }
        });
    }
    assert_eq!(got, want);
    let results = s.commit(Duration::from_secs(30)).unwrap();
    let tp = kafka_group::TopicPartition::new(topic.as_str(), 0);
    assert!(
        matches!(results.get(&tp), Some(Ok(()))),
        "commit results: {results:?}"
    );
    // Accepted: nothing comes back.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let back: Vec<String> = s
            .poll(Duration::from_millis(500))
            .unwrap()
            .iter()
            .map(value)
            .filter(|v| v.starts_with("r-"))
            .collect();
        assert!(back.is_empty(), "accepted records delivered again: {back:?}");
    }
    s.close().unwrap();
}

#[test]
fn an_acknowledger_refuses_once_its_consumer_closed() {
    let b = broker::consumer_protocol();
    let c = &client(b.bootstrap());
    let topic = &create_topic(c, "share", 1, 1);
    let group = unique_name("share-closed");
    let mut s = share(c, &group, topic, AcknowledgementMode::Explicit);
    warm_up(c, topic, &mut [&mut s]);
    produce(c, topic, 0, &["late".to_string()]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let ack = loop {
        assert!(Instant::now() < deadline, "the late record never came");
        if let Some(r) = s
            .poll(Duration::from_millis(500))
            .unwrap()
            .into_iter()
            .find(|r| value(r) == "late")
        {
            break r.acknowledger();
        }
    };
    s.close().unwrap();
    let e = ack.acknowledge(AcknowledgeType::Accept);
    assert!(matches!(e, Err(kafka_group::Error::Closed)), "{e:?}");
}

#[test]
fn a_broker_without_share_groups_is_one_clear_error() {
    let c = client(&broker::shared_legacy().to_string());
    let topic = create_topic(&c, "share-old", 1, 1);
    let mut s = share(
        &c,
        &unique_name("share-old"),
        &topic,
        AcknowledgementMode::Implicit,
    );
    let e = s.poll(Duration::from_secs(30)).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, kafka_group::Error::MissingCapability { .. }), "{e}");
    for part in ["share groups", "share.version=1", "Kafka 3.9", "4.1"] {
        assert!(text.contains(part), "{text}");
    }
}

/// The brokers' `group.share.record.lock.duration.ms` in these tests (`scripts/kafka`).
const LOCK: Duration = Duration::from_secs(10);

/// A first consumer (explicit mode) acquires `n` records and acknowledges none of them; then
/// `after` happens to it, and a second consumer of the group must get every one of them again
/// (delivery count 2) within the lock duration plus a margin for a loaded machine.
fn held_records_come_back(after: impl FnOnce(ShareConsumer) -> Option<ShareConsumer>) {
    let b = broker::consumer_protocol();
    let c = client(b.bootstrap());
    let topic = create_topic(&c, "share", 1, 1);
    let group = unique_name("share-held");
    let mut a = share(&c, &group, &topic, AcknowledgementMode::Explicit);
    warm_up(&c, &topic, &mut [&mut a]);
    a.commit(Duration::from_secs(30)).unwrap();
    let want = produce_records(&c, &topic, 5);
    let mut held = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while held.len() < want.len() && Instant::now() < deadline {
        for r in a.poll(Duration::from_millis(500)).unwrap() {
            held.insert(value(&r));
        }
    }
    assert_eq!(held, want, "the first consumer acquired every record");
    let acquired = Instant::now();
    let a = after(a);
    let mut z = share(&c, &group, &topic, AcknowledgementMode::Implicit);
    let mut again: BTreeMap<String, u16> = BTreeMap::new();
    let bound = LOCK + Duration::from_secs(30);
    while again.len() < want.len() && acquired.elapsed() < bound {
        for r in z.poll(Duration::from_millis(500)).unwrap() {
            let v = value(&r);
            if v.starts_with("r-") {
                again.insert(v, r.delivery_count);
            }
        }
    }
    assert_eq!(
        again.keys().cloned().collect::<BTreeSet<_>>(),
        want,
        "redelivered within {bound:?}"
    );
    assert!(
        again.values().all(|n| *n == 2),
        "each a second delivery: {again:?}"
    );
    z.close().unwrap();
    drop(a);
}

#[test]
fn records_a_crashed_consumer_held_go_to_another() {
    use kafka_group::unstable::TestHooks;
    held_records_come_back(|a| {
        a.crash_for_tests();
        None
    });
}

#[test]
fn records_a_stalled_consumer_holds_go_to_another_once_their_locks_expire() {
    // Still a member with its share session open, it just does not poll or acknowledge.
    held_records_come_back(Some);
}

/// The broker's `group.share.delivery.count.limit` (Kafka's default).
const DELIVERY_LIMIT: u16 = 5;

#[test]
fn a_record_released_at_every_delivery_is_archived_after_the_delivery_limit() {
    let b = broker::consumer_protocol();
    let c = client(b.bootstrap());
    let topic = create_topic(&c, "share", 1, 1);
    let group = unique_name("share-limit");
    let mut s = share(&c, &group, &topic, AcknowledgementMode::Explicit);
    warm_up(&c, &topic, &mut [&mut s]);
    s.commit(Duration::from_secs(30)).unwrap();
    produce(&c, &topic, 0, &["again".to_string()]);
    let mut counts = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    // Released each time: delivered at counts 1..=limit, then never again.
    let mut quiet_since = Instant::now();
    while Instant::now() < deadline {
        let mut got = false;
        for r in s.poll(Duration::from_millis(300)).unwrap() {
            if value(&r) == "again" {
                counts.push(r.delivery_count);
                got = true;
                r.acknowledge(AcknowledgeType::Release).unwrap();
            } else {
                r.acknowledge(AcknowledgeType::Accept).unwrap();
            }
        }
        if got {
            quiet_since = Instant::now();
        } else if counts.len() >= DELIVERY_LIMIT as usize && quiet_since.elapsed() > Duration::from_secs(3) {
            break;
        }
    }
    assert_eq!(
        counts,
        (1..=DELIVERY_LIMIT).collect::<Vec<_>>(),
        "delivery counts of the released record"
    );
    s.close().unwrap();
}

/// Kafka's Java share consumer: joins share group `args[1]` on topic `args[2]`, polls for
/// `args[3]` ms accepting everything (implicit mode), prints `v <value> <delivery count>` per
/// record, and closes.
const JAVA_SHARE: &str = r#"
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

public class JavaShare {
    public static void main(String[] args) {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("group.id", args[1]);
        p.put("max.poll.records", "10");
        try (KafkaShareConsumer<String, String> c =
                 new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            c.subscribe(List.of(args[2]));
            long end = System.currentTimeMillis() + Long.parseLong(args[3]);
            while (System.currentTimeMillis() < end) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    System.out.println("v " + r.value() + " " + r.deliveryCount().orElse((short) -1));
                }
            }
        }
    }
}
"#;

#[test]
fn our_share_consumer_and_javas_share_one_group() {
    let b = broker::consumer_protocol();
    let c = client(b.bootstrap());
    let topic = create_topic(&c, "share-java", 1, 1);
    let group = unique_name("share-java");
    let mut ours = share(&c, &group, &topic, AcknowledgementMode::Implicit);
    warm_up(&c, &topic, &mut [&mut ours]);
    let java = {
        let (bootstrap, group, topic) = (b.bootstrap().to_string(), group.clone(), topic.clone());
        std::thread::spawn(move || {
            crate::support::java::run_source_output(
                &broker::consumer_protocol_version(),
                "JavaShare",
                JAVA_SHARE,
                &[&bootstrap, &group, &topic, "25000"],
            )
        })
    };
    // Written while both consume, in batches of 5 over about 12 s (the Java consumer starts a
    // JVM and joins meanwhile), so that each has something to acquire.
    let want: BTreeSet<String> = (0..200).map(|i| format!("r-{i}")).collect();
    let writer = {
        let (c, topic, want) = (c.clone(), topic.clone(), want.clone());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(5));
            let values: Vec<String> = want.into_iter().collect();
            for chunk in values.chunks(5) {
                produce(&c, &topic, 0, chunk);
                std::thread::sleep(Duration::from_millis(300));
            }
        })
    };
    let mut got: Vec<String> = Vec::new();
    while !java.is_finished() {
        for r in ours.poll(Duration::from_millis(200)).unwrap() {
            let v = value(&r);
            if v.starts_with("r-") {
                got.push(v);
            }
        }
    }
    writer.join().unwrap();
    let out = java.join().unwrap();
    let theirs: Vec<String> = out
        .lines()
        .filter_map(|l| l.strip_prefix("v "))
        .filter_map(|l| l.split(' ').next())
        .filter(|v| v.starts_with("r-"))
        .map(String::from)
        .collect();
    // What the Java consumer had when its time ran out may come to ours after its close.
    let until = Instant::now() + Duration::from_secs(20);
    let seen = |got: &Vec<String>| got.iter().chain(&theirs).cloned().collect::<BTreeSet<_>>();
    while seen(&got) != want && Instant::now() < until {
        for r in ours.poll(Duration::from_millis(200)).unwrap() {
            let v = value(&r);
            if v.starts_with("r-") {
                got.push(v);
            }
        }
    }
    assert_eq!(seen(&got), want, "every record delivered to one of them");
    let all = got.len() + theirs.len();
    assert_eq!(
        all,
        want.len(),
        "no record delivered twice (ours {}, Java's {})",
        got.len(),
        theirs.len()
    );
    assert!(
        !got.is_empty() && !theirs.is_empty(),
        "both consumed: ours {}, Java's {}",
        got.len(),
        theirs.len()
    );
    ours.close().unwrap();
}
