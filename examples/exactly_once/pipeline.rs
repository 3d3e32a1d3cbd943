//! One static member of an exactly-once consume → transform → produce job: each poll's records
//! are transformed and written to the output topic, and the consumer's positions committed, in
//! one transaction. A crash anywhere before `commit_transaction` leaves nothing visible to
//! `read_committed` readers and no offset committed, so the next incarnation redoes the batch.

use kafka_group::{
    Client, Consumer, ConsumerRecord, Error, GroupProtocol, IsolationLevel, OffsetAndMetadata, OffsetReset,
    Producer, ProducerRecord, TopicPartition, TransactionAction,
};
use std::collections::BTreeMap;
use std::time::Duration;

/// Errors `main` prints.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Bound of each transactional call.
const CALL: Duration = Duration::from_secs(30);

/// What one member runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `bootstrap.servers`.
    pub bootstrap: String,
    /// The application's name: the consumer group, and the prefix of `transactional.id`.
    pub app: String,
    /// `group.instance.id` of this member; its `transactional.id` is `<app>-<instance>`.
    pub instance: String,
    /// Topic read.
    pub input: String,
    /// Topic written.
    pub output: String,
    /// `group.protocol`: `classic`, or KIP-848's `consumer` (Kafka 4.0+).
    pub group_protocol: GroupProtocol,
    /// `session.timeout.ms` under the classic protocol: a restart within it keeps the member's
    /// partitions (no rebalance). Under the consumer protocol the broker's
    /// `group.consumer.session.timeout.ms` decides instead, and this is not used.
    pub session_timeout: Duration,
    /// Tests and the demo only: after a batch's records are written, hold the transaction open this long
    /// before committing it, so that a kill lands in the middle of a transaction.
    pub hold_open: Duration,
}

/// The transformation: what an input value becomes on the output topic.
pub fn transform(value: &[u8]) -> String {
    format!("out:{}", String::from_utf8_lossy(value).to_uppercase())
}

/// Runs the member until `stop` says so (or forever). Prints one line per assignment
/// (`assigned generation G ...`) and per transaction (`committed N ...`, `aborted: ...`).
/// Returns an error when the producer cannot go on (fenced: another process took the
/// instance id) or the consumer fails.
pub fn run(s: &Settings, stop: impl Fn() -> bool) -> Result<(), BoxError> {
    let client = Client::builder().bootstrap_servers(&s.bootstrap).build()?;
    let mut consumer = client
        .consumer(&s.app)
        .subscribe([&s.input])
        .group_instance_id(&s.instance)
        .group_protocol(s.group_protocol)
        .isolation_level(IsolationLevel::ReadCommitted)
        .enable_auto_commit(false)
        .auto_offset_reset(OffsetReset::Earliest);
    if s.group_protocol == GroupProtocol::Classic {
        consumer = consumer.session_timeout(s.session_timeout);
    }
    let mut consumer = consumer.build()?;
    // The same transactional.id in every incarnation of this member: its init_transactions
    // fences the previous one and aborts whatever transaction it left open.
    let mut producer = client
        .producer()
        .transactional_id(format!("{}-{}", s.app, s.instance))
        .build()?;
    producer.init_transactions(CALL)?;
    while !stop() {
        let polled = consumer.poll(Duration::from_millis(200))?;
        for event in &polled.events {
            println!("{}: {event:?}", s.instance);
        }
        // A revocation needs nothing here: every batch is committed before the next poll.
        if polled.records.is_empty() {
            continue;
        }
        match process(s, &mut producer, &consumer, &polled.records) {
            Ok(()) => println!("{}: committed {}", s.instance, polled.records.len()),
            Err(Error::Transaction {
                action: TransactionAction::Abort,
                cause,
                ..
            }) => {
                // Nothing of the batch is visible or committed: undo, and redo it from the
                // committed offsets (the partitions may have moved meanwhile).
                println!("{}: aborted: {cause}", s.instance);
                again_on_timeout(|| producer.abort_transaction(CALL))?;
                rewind(&mut consumer)?;
            }
            // TransactionAction::Close (fenced, not authorized) and everything else: stop.
            Err(e) => return Err(e.into()),
        }
    }
    producer.close()?;
    consumer.close()?;
    Ok(())
}

/// One transaction: the batch's output records and the positions after it.
fn process(
    s: &Settings,
    producer: &mut Producer,
    consumer: &Consumer,
    records: &[ConsumerRecord],
) -> Result<(), Error> {
    producer.begin_transaction()?;
    let mut offsets = BTreeMap::new();
    for r in records {
        let value = transform(r.value.as_deref().unwrap_or_default());
        producer.send(ProducerRecord::new(&s.output, value))?;
        offsets.insert(r.topic_partition(), OffsetAndMetadata::new(r.offset + 1));
    }
    if !s.hold_open.is_zero() {
        producer.flush()?;
        println!("{}: transaction open", s.instance);
        std::thread::sleep(s.hold_open);
    }
    // Taken now, not at the start: the coordinator refuses the offsets of an old generation.
    let group = consumer.group_metadata().ok_or(Error::Closed)?;
    producer.send_offsets_to_transaction(&offsets, &group, CALL)?;
    again_on_timeout(|| producer.commit_transaction(CALL))
}

/// A commit or abort that ran out of time is still under way at the coordinator: the same
/// call again picks it up (never the other one). Here, up to three more times.
fn again_on_timeout(mut call: impl FnMut() -> Result<(), Error>) -> Result<(), Error> {
    let mut tries = 0;
    loop {
        match call() {
            Err(Error::Timeout { .. }) if tries < 3 => tries += 1,
            done => return done,
        }
    }
}

/// Moves every assigned partition back to its committed offset (its beginning when none is).
fn rewind(consumer: &mut Consumer) -> Result<(), Error> {
    let assigned: Vec<TopicPartition> = consumer.assignment();
    for (tp, committed) in consumer.committed(&assigned)? {
        match committed {
            Some(offset) => consumer.seek(&tp, offset)?,
            None => consumer.seek_to_beginning(std::slice::from_ref(&tp))?,
        }
    }
    Ok(())
}
