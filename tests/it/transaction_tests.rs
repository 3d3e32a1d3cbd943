//! The transactional producer against real brokers: committed transactions are read by a
//! `read_committed` consumer and aborted ones are not (a `read_uncommitted` one sees both, so
//! the check can fail); a second producer with the same transactional id fences the first;
//! offsets sent in a transaction are committed with it, and refused for a member that is no
//! longer the group's current one (KIP-447), with the error the application acts on.

use crate::support::broker;
use crate::support::{create_topic, unique_name, LOAD_MARGIN};
use kafka_group::{
    Client, Consumer, ConsumerGroupMetadata, Error, IsolationLevel, KafkaCode, OffsetAndMetadata,
    OffsetReset, Producer, ProducerRecord, TopicPartition, TransactionAction,
};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const CALL: Duration = Duration::from_secs(30);

fn client(bootstrap: &str) -> Client {
    Client::builder()
        .bootstrap_servers(bootstrap)
        .client_id("transaction-tests")
        .build()
        .unwrap()
}

fn transactional(client: &Client, id: &str) -> Producer {
    let mut p = client.producer().transactional_id(id).build().unwrap();
    p.init_transactions(CALL).unwrap();
    p
}

/// Every value of `topic` a consumer with `isolation` reads within a bound, until `expect`
/// values came (or the bound passed).
pub(crate) fn read_all(
    client: &Client,
    topic: &str,
    isolation: IsolationLevel,
    expect: usize,
) -> Vec<String> {
    let mut c = client
        .consumer(&unique_name("txn-reader"))
        .subscribe([topic])
        .auto_offset_reset(OffsetReset::Earliest)
        .isolation_level(isolation)
        .enable_auto_commit(false)
        .build()
        .unwrap();
    let mut out = Vec::new();
    // Long enough for a pipeline's output to catch up after its members were killed.
    let deadline = Instant::now() + Duration::from_secs(60) + LOAD_MARGIN;
    // Past `expect`, one more quiet poll shows nothing else is there.
    let mut quiet_after_expect = false;
    while Instant::now() < deadline {
        let polled = c.poll(Duration::from_millis(500)).unwrap();
        let records = &polled.records;
        if records.is_empty() && out.len() >= expect {
            if quiet_after_expect {
                break;
            }
            quiet_after_expect = true;
        }
        for r in records {
            out.push(String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned());
        }
    }
    c.close().unwrap();
    out
}

fn send_values(p: &mut Producer, topic: &str, values: &[&'static str]) {
    for (i, v) in values.iter().enumerate() {
        p.send(ProducerRecord::new(topic, *v).partition(i as i32 % 2))
            .unwrap();
    }
}

/// On both transaction protocols: v2 (partitions added by Produce, a new epoch at every end)
/// and v1 (AddPartitionsToTxn).
#[test]
fn committed_transactions_are_read_and_aborted_ones_are_not() {
    on_both_protocols(commit_and_abort_read_back);
}

/// Runs `check` on the shared broker (Kafka 4.x: transaction protocol v2) and on a 3.9 one
/// (protocol v1).
fn on_both_protocols(check: fn(&str)) {
    let legacy = broker::shared_legacy().to_string();
    for bootstrap in [broker::shared().bootstrap(), legacy.as_str()] {
        check(bootstrap);
    }
}

fn commit_and_abort_read_back(bootstrap: &str) {
    let client = client(bootstrap);
    let topic = create_topic(&client, "txn-basic", 2, 1);
    let mut p = transactional(&client, &unique_name("txn-basic"));

    p.begin_transaction().unwrap();
    send_values(&mut p, &topic, &["c1", "c2", "c3"]);
    p.commit_transaction(CALL).unwrap();

    p.begin_transaction().unwrap();
    send_values(&mut p, &topic, &["a1", "a2"]);
    p.flush().unwrap(); // written to the log, then aborted
    p.abort_transaction(CALL).unwrap();

    p.begin_transaction().unwrap();
    send_values(&mut p, &topic, &["c4"]);
    p.commit_transaction(CALL).unwrap();
    p.close().unwrap();

    let committed: BTreeSet<String> = read_all(&client, &topic, IsolationLevel::ReadCommitted, 4)
        .into_iter()
        .collect();
    let want: BTreeSet<String> = ["c1", "c2", "c3", "c4"].map(String::from).into();
    assert_eq!(
        committed, want,
        "read_committed: the committed records, none aborted"
    );
    let all = read_all(&client, &topic, IsolationLevel::ReadUncommitted, 6);
    assert_eq!(
        all.len(),
        6,
        "read_uncommitted sees the aborted records too: {all:?}"
    );
    assert!(
        all.iter().any(|v| v == "a1") && all.iter().any(|v| v == "a2"),
        "{all:?}"
    );
}

#[test]
fn calls_out_of_order_are_refused_by_name() {
    let broker = broker::shared();
    let client = client(broker.bootstrap());
    let topic = create_topic(&client, "txn-order", 1, 1);
    let mut plain = client.producer().build().unwrap();
    let e = plain.begin_transaction().unwrap_err();
    assert!(
        matches!(
            e,
            Error::TransactionState {
                call: "begin_transaction",
                ..
            }
        ),
        "{e:?}"
    );

    let mut p = client
        .producer()
        .transactional_id(unique_name("txn-order"))
        .build()
        .unwrap();
    let e = p.send(ProducerRecord::new(&topic, "x")).unwrap_err();
    assert!(e.to_string().contains("init_transactions"), "{e}");
    p.init_transactions(CALL).unwrap();
    let e = p.send(ProducerRecord::new(&topic, "x")).unwrap_err();
    assert!(e.to_string().contains("begin_transaction"), "{e}");
    let e = p.commit_transaction(CALL).unwrap_err();
    assert!(
        matches!(
            e,
            Error::TransactionState {
                call: "commit_transaction",
                ..
            }
        ),
        "{e:?}"
    );
    p.begin_transaction().unwrap();
    let e = p.begin_transaction().unwrap_err();
    assert!(
        matches!(
            e,
            Error::TransactionState {
                call: "begin_transaction",
                ..
            }
        ),
        "{e:?}"
    );
    // A transaction with nothing in it commits (nothing to tell the coordinator).
    p.commit_transaction(CALL).unwrap();
}

#[test]
fn a_second_producer_with_the_same_transactional_id_fences_the_first() {
    on_both_protocols(fenced_by_a_second_producer);
}

fn fenced_by_a_second_producer(bootstrap: &str) {
    let client = client(bootstrap);
    let topic = create_topic(&client, "txn-fence", 1, 1);
    let id = unique_name("txn-fence");
    let mut old = transactional(&client, &id);
    old.begin_transaction().unwrap();
    old.send(ProducerRecord::new(&topic, "zombie")).unwrap();
    old.flush().unwrap();

    // The new instance's init aborts the open transaction and bumps the epoch.
    let mut new = transactional(&client, &id);
    new.begin_transaction().unwrap();
    new.send(ProducerRecord::new(&topic, "new")).unwrap();
    new.commit_transaction(CALL).unwrap();

    old.send(ProducerRecord::new(&topic, "zombie-2")).ok();
    let e = old.commit_transaction(CALL).unwrap_err();
    match &e {
        Error::Transaction {
            action: TransactionAction::Close,
            cause,
            ..
        } => assert!(
            matches!(
                cause.kafka_code(),
                Some(KafkaCode::ProducerFenced | KafkaCode::InvalidProducerEpoch)
            ),
            "{e}"
        ),
        other => panic!("the zombie's commit must be refused as fenced, got {other:?}"),
    }
    assert!(e.to_string().contains("fenced"), "{e}");
    let e = old.begin_transaction().unwrap_err();
    assert!(
        matches!(
            e,
            Error::Transaction {
                action: TransactionAction::Close,
                ..
            }
        ),
        "every later call fails the same way: {e:?}"
    );
    drop(old);
    let read: Vec<String> = read_all(&client, &topic, IsolationLevel::ReadCommitted, 1);
    assert_eq!(
        read,
        vec!["new".to_string()],
        "none of the zombie's records is committed"
    );
}

fn group_consumer(client: &Client, group: &str, topic: &str, instance: Option<&str>) -> Consumer {
    let mut b = client
        .consumer(group)
        .subscribe([topic])
        .auto_offset_reset(OffsetReset::Earliest)
        .isolation_level(IsolationLevel::ReadCommitted)
        .enable_auto_commit(false);
    if let Some(i) = instance {
        b = b.group_instance_id(i);
    }
    b.build().unwrap()
}

/// Polls until the consumer holds an assignment (what it reads meanwhile is dropped).
pub(crate) fn join(c: &mut Consumer) {
    let deadline = Instant::now() + Duration::from_secs(30) + LOAD_MARGIN;
    while c.assignment().is_empty() {
        assert!(Instant::now() < deadline, "no assignment");
        c.poll(Duration::from_millis(200)).unwrap();
    }
}

#[test]
fn offsets_sent_in_a_transaction_are_committed_with_it_and_refused_for_a_stale_generation() {
    let broker = broker::shared();
    let client = client(broker.bootstrap());
    let input = create_topic(&client, "txn-in", 1, 1);
    let output = create_topic(&client, "txn-out", 1, 1);
    let group = unique_name("txn-group");
    let tp = TopicPartition::new(&input, 0);
    let mut c = group_consumer(&client, &group, &input, None);
    join(&mut c);
    let meta = c.group_metadata().unwrap();
    assert!(meta.generation_id >= 0 && !meta.member_id.is_empty(), "{meta:?}");

    let mut p = transactional(&client, &unique_name("txn-offsets"));
    let offsets: BTreeMap<TopicPartition, OffsetAndMetadata> =
        [(tp.clone(), OffsetAndMetadata::new(7))].into();
    // Aborted: the offset is not committed.
    p.begin_transaction().unwrap();
    p.send(ProducerRecord::new(&output, "out-aborted")).unwrap();
    p.send_offsets_to_transaction(&offsets, &meta, CALL).unwrap();
    p.abort_transaction(CALL).unwrap();
    assert_eq!(
        c.committed(std::slice::from_ref(&tp))
            .unwrap()
            .get(&tp)
            .copied()
            .flatten(),
        None
    );

    // Committed: the offset is.
    p.begin_transaction().unwrap();
    p.send(ProducerRecord::new(&output, "out-committed")).unwrap();
    p.send_offsets_to_transaction(&offsets, &meta, CALL).unwrap();
    p.commit_transaction(CALL).unwrap();
    let committed = c.committed(std::slice::from_ref(&tp)).unwrap();
    assert_eq!(committed.get(&tp).copied().flatten(), Some(7));

    // A zombie: the generation it holds is no longer the group's.
    let stale = ConsumerGroupMetadata {
        generation_id: meta.generation_id + 100,
        ..meta.clone()
    };
    p.begin_transaction().unwrap();
    let e = p
        .send_offsets_to_transaction(&[(tp.clone(), OffsetAndMetadata::new(9))].into(), &stale, CALL)
        .unwrap_err();
    match &e {
        Error::Transaction {
            action: TransactionAction::Abort,
            cause,
            ..
        } => assert_eq!(cause.kafka_code(), Some(KafkaCode::IllegalGeneration), "{e}"),
        other => panic!("a stale generation's offsets must be refused, got {other:?}"),
    }
    assert!(e.to_string().contains("abort_transaction"), "{e}");
    let e = p.commit_transaction(CALL).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Transaction {
                action: TransactionAction::Abort,
                ..
            }
        ),
        "{e:?}"
    );
    p.abort_transaction(CALL).unwrap();
    assert_eq!(
        c.committed(std::slice::from_ref(&tp))
            .unwrap()
            .get(&tp)
            .copied()
            .flatten(),
        Some(7),
        "the refused offset is not committed"
    );
    // The producer goes on after the abort.
    p.begin_transaction().unwrap();
    p.send(ProducerRecord::new(&output, "out-after")).unwrap();
    p.commit_transaction(CALL).unwrap();
    let read: BTreeSet<String> = read_all(&client, &output, IsolationLevel::ReadCommitted, 2)
        .into_iter()
        .collect();
    assert_eq!(read, ["out-committed", "out-after"].map(String::from).into());
    c.close().unwrap();
}

/// The zombie checks of KIP-447 for the two kinds of member the offsets can come from: a static
/// member of the classic protocol (a stale member id with its instance id is fenced), and a
/// member of the consumer protocol (KIP-848), whose group metadata carries its member epoch.
#[test]
fn offsets_in_a_transaction_are_checked_against_static_and_consumer_protocol_members() {
    use kafka_group::GroupProtocol;
    let cases: [(&str, &'static broker::Broker, GroupProtocol); 2] = [
        ("classic static", broker::shared(), GroupProtocol::Classic),
        (
            "consumer protocol",
            broker::consumer_protocol(),
            GroupProtocol::Consumer,
        ),
    ];
    for (what, broker, protocol) in cases {
        let client = client(broker.bootstrap());
        let input = create_topic(&client, "txn-zombie-in", 1, 1);
        let group = unique_name("txn-zombie");
        let tp = TopicPartition::new(&input, 0);
        let mut c = client
            .consumer(&group)
            .subscribe([input.as_str()])
            .group_protocol(protocol)
            .group_instance_id(unique_name("instance"))
            .isolation_level(IsolationLevel::ReadCommitted)
            .enable_auto_commit(false)
            .build()
            .unwrap();
        join(&mut c);
        let meta = c.group_metadata().unwrap();
        assert!(
            meta.generation_id > 0 && meta.group_instance_id.is_some(),
            "{what}: {meta:?}"
        );
        let mut p = transactional(&client, &unique_name("txn-zombie"));
        let offsets = |o| -> BTreeMap<TopicPartition, OffsetAndMetadata> {
            [(tp.clone(), OffsetAndMetadata::new(o))].into()
        };
        p.begin_transaction().unwrap();
        p.send_offsets_to_transaction(&offsets(3), &meta, CALL).unwrap();
        p.commit_transaction(CALL).unwrap();
        assert_eq!(
            c.committed(std::slice::from_ref(&tp)).unwrap()[&tp],
            Some(3),
            "{what}"
        );

        let zombies = [
            ConsumerGroupMetadata {
                member_id: format!("{}-old", meta.member_id),
                ..meta.clone()
            },
            ConsumerGroupMetadata {
                generation_id: meta.generation_id + 100,
                ..meta.clone()
            },
        ];
        for zombie in zombies {
            p.begin_transaction().unwrap();
            let e = p
                .send_offsets_to_transaction(&offsets(5), &zombie, CALL)
                .unwrap_err();
            let Error::Transaction {
                action: TransactionAction::Abort,
                cause,
                ..
            } = &e
            else {
                panic!("{what}: the zombie's offsets must be refused, got {e:?}");
            };
            let code = cause.kafka_code();
            assert!(
                matches!(
                    code,
                    Some(
                        KafkaCode::FencedInstanceId
                            | KafkaCode::UnknownMemberId
                            | KafkaCode::IllegalGeneration
                            | KafkaCode::StaleMemberEpoch
                            | KafkaCode::FencedMemberEpoch
                    )
                ),
                "{what}: {zombie:?}: {e}"
            );
            eprintln!("{what}: {zombie:?} refused with {e}");
            p.abort_transaction(CALL).unwrap();
        }
        assert_eq!(
            c.committed(std::slice::from_ref(&tp)).unwrap()[&tp],
            Some(3),
            "{what}"
        );
        c.close().unwrap();
    }
}

/// A producer closed (or dropped) in the middle of a transaction aborts it, so `read_committed`
/// readers are not held at its first offset until `transaction.timeout.ms` ends it.
#[test]
fn a_producer_closed_in_a_transaction_aborts_it() {
    let broker = broker::shared();
    let client = client(broker.bootstrap());
    let topic = create_topic(&client, "txn-close", 1, 1);
    let tp = TopicPartition::new(&topic, 0);
    for close in [true, false] {
        let mut p = client
            .producer()
            .transactional_id(unique_name("txn-close"))
            // Far beyond the test: only the producer's own abort can end the transaction.
            .transaction_timeout(Duration::from_secs(900))
            .build()
            .unwrap();
        p.init_transactions(CALL).unwrap();
        p.begin_transaction().unwrap();
        p.send(ProducerRecord::new(&topic, "never").partition(0)).unwrap();
        p.flush().unwrap();
        if close {
            p.close().unwrap();
        } else {
            drop(p);
        }
    }
    let mut c = client
        .consumer(&unique_name("txn-close-reader"))
        .subscribe([topic.as_str()])
        .isolation_level(IsolationLevel::ReadCommitted)
        .build()
        .unwrap();
    let end = |c: &mut Consumer| c.end_offsets(std::slice::from_ref(&tp)).unwrap()[&tp];
    // Two records and two abort markers: the last stable offset is the log's end.
    let deadline = Instant::now() + Duration::from_secs(10) + LOAD_MARGIN;
    while end(&mut c) < 4 {
        assert!(
            Instant::now() < deadline,
            "an aborted transaction still holds read_committed readers"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    c.close().unwrap();
    assert!(read_all(&client, &topic, IsolationLevel::ReadCommitted, 0).is_empty());
}
