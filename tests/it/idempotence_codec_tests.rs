//! The idempotent producer's wire pieces against a real broker, through raw requests:
//! InitProducerId gives a producer id, batches stamped with it and consecutive sequences are
//! accepted, a resent batch is recognised as a duplicate (no second copy in the log), a gap in
//! the sequences is refused with OUT_OF_ORDER_SEQUENCE_NUMBER, and a locally bumped epoch
//! starting again at sequence 0 is accepted while the old epoch is then refused. This is what
//! the sender relies on when it reacts to those answers (`producer::idempotence`).

use crate::support::{self, broker};
use kafka_group::unstable::protocol::messages::InitProducerIdRequest;
use kafka_group::unstable::records::{self, BatchProducer, Compression, NewRecord};
use kafka_group::unstable::RawClient;
use kafka_group::{Client, KafkaCode};
use std::time::{Duration, Instant};

/// `n` small records.
fn recs(tag: &str, n: usize) -> Vec<NewRecord> {
    (0..n)
        .map(|i| NewRecord {
            value: Some(bytes::Bytes::from(format!("{tag}-{i}"))),
            ..NewRecord::default()
        })
        .collect()
}

/// Produces `batch` to partition 0 of `topic` (acks=all); the partition's code and base offset.
fn produce(client: &Client, leader: i32, topic: &str, batch: bytes::Bytes) -> (KafkaCode, i64) {
    let (_, p) = support::raw_produce(client, leader, topic, batch);
    (KafkaCode::from_code(p.error_code), p.base_offset)
}

#[test]
fn idempotent_batches_against_a_real_broker() {
    support::init_logs();
    let client = Client::builder()
        .bootstrap_servers(broker::shared().bootstrap())
        .build()
        .unwrap();
    let topic = support::create_topic(&client, "idem", 1, 1);
    let md = client.refresh_metadata(Some(&[topic.as_str()])).unwrap();
    let leader = md.topics[&topic].partitions[0].leader;

    // An idempotent producer's InitProducerId: no transactional id, -1/-1 for a fresh id. A
    // broker just started answers COORDINATOR_LOAD_IN_PROGRESS until it has a block of
    // producer ids from the controller: retried, as the sender does.
    let mut init_version = -1;
    let deadline = Instant::now() + Duration::from_secs(30);
    let init = loop {
        let init = client
            .send_to(leader, |v| {
                init_version = v;
                InitProducerIdRequest {
                    transactional_id: None,
                    transaction_timeout_ms: i32::MAX,
                    producer_id: -1,
                    producer_epoch: -1,
                    ..Default::default()
                }
            })
            .unwrap();
        let code = KafkaCode::from_code(init.error_code);
        if code == KafkaCode::None || !code.is_retriable() || Instant::now() > deadline {
            break init;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(KafkaCode::from_code(init.error_code), KafkaCode::None, "{init:?}");
    assert!(init.producer_id >= 0 && init.producer_epoch >= 0, "{init:?}");
    let (id, epoch) = (init.producer_id, init.producer_epoch);
    println!("InitProducerId v{init_version}: producer id {id} epoch {epoch}");
    let stamp = |epoch: i16, base_sequence: i32| BatchProducer {
        id,
        epoch,
        base_sequence,
        transactional: false,
    };
    let encode = |tag: &str, n: usize, p: BatchProducer| {
        records::encode_with(&recs(tag, n), Compression::Lz4, 2, &p).unwrap()
    };

    // Sequences 0-2 and 3-5.
    let first = encode("a", 3, stamp(epoch, 0));
    let (code, a) = produce(&client, leader, &topic, first.clone());
    assert_eq!(code, KafkaCode::None);
    let (code, b) = produce(&client, leader, &topic, encode("b", 3, stamp(epoch, 3)));
    assert_eq!((code, b), (KafkaCode::None, a + 3));

    // The first batch again, same bytes: a duplicate. The broker still has its metadata (one
    // of the last 5 batches), so it answers success with the original offset and writes
    // nothing; older brokers may say DUPLICATE_SEQUENCE_NUMBER.
    let (code, again) = produce(&client, leader, &topic, first);
    match code {
        KafkaCode::None => assert_eq!(again, a, "a duplicate must keep its first offset"),
        KafkaCode::DuplicateSequenceNumber => {}
        other => panic!("resent batch: {other}"),
    }

    // A gap: 6 is next, 10 is refused.
    let gap = encode("c", 3, stamp(epoch, 10));
    let (code, _) = produce(&client, leader, &topic, gap.clone());
    assert_eq!(code, KafkaCode::OutOfOrderSequenceNumber);

    // The idempotent producer's reaction: bump the epoch locally and start again at 0. The
    // refused batch is restamped, not re-encoded; the broker accepts it right after the first
    // two (so the duplicate above added nothing).
    let bumped = records::restamp(&gap, &stamp(epoch + 1, 0)).unwrap();
    let (code, c) = produce(&client, leader, &topic, bumped);
    assert_eq!((code, c), (KafkaCode::None, a + 6));
    let (code, d) = produce(&client, leader, &topic, encode("d", 2, stamp(epoch + 1, 3)));
    assert_eq!((code, d), (KafkaCode::None, a + 9));

    // The old epoch is fenced from this partition now.
    let (code, _) = produce(&client, leader, &topic, encode("e", 1, stamp(epoch, 6)));
    assert!(
        matches!(code, KafkaCode::InvalidProducerEpoch | KafkaCode::ProducerFenced),
        "old epoch: {code}"
    );

    // KIP-360's InitProducerId naming the current id and epoch: without a transactional id
    // the broker does not bump them but hands out a new id, which is why the idempotent
    // producer bumps its epoch locally instead.
    let again = client
        .send_to(leader, |_| InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: i32::MAX,
            producer_id: id,
            producer_epoch: epoch + 1,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        KafkaCode::from_code(again.error_code),
        KafkaCode::None,
        "{again:?}"
    );
    println!(
        "InitProducerId naming {id}/{}: producer id {} epoch {}",
        epoch + 1,
        again.producer_id,
        again.producer_epoch
    );
    assert_ne!(again.producer_id, id, "{again:?}");
}
