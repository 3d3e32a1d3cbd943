//! The [`Producer`]; its behaviour is documented there.
//!
//! Inside, one file a job: `record` ([`ProducerRecord`], [`Acks`]), `partitioner` (murmur2),
//! `config` and `builder` (settings, checked before any network call), `accumulator` (pending
//! batches per partition, sticky partitions, which batches are due, splitting one the broker
//! refused as too large; pure), `delivery` (each
//! record's [`DeliveryHandle`], one shared result per batch), `request` (Produce requests
//! packed below `max.request.size` and answers read per partition; pure), `state` (what the
//! caller and the threads share, and how an answer settles a batch), `sender` (the background
//! thread: metadata, expiry, one thread per leader), `broker` (a leader's thread: requests in
//! flight on its connection), `transaction` (the transactional producer's states, its
//! reaction to each coordinator answer, and its requests; pure) and `transactional` (the
//! transaction calls and their coordinator I/O). This file is the caller's side: send, flush,
//! close.

mod accumulator;
mod broker;
mod builder;
mod config;
mod delivery;
mod idempotence;
mod partitioner;
mod record;
mod request;
mod sender;
mod state;
mod transaction;
mod transactional;

pub use builder::ProducerBuilder;
pub use delivery::{DeliveryHandle, RecordMetadata};
pub use partitioner::key_partition;
pub use record::{Acks, ProducerRecord};

use crate::client::{topic_denied, Client};
use crate::error::{Error, Result};
use crate::protocol::ApiKey;
use crate::retry::{retry_or_last, Backoff, Step};
use crate::worker::Worker;
use crate::KafkaCode;
use accumulator::Accumulator;
use broker::Settings;
use config::SINGLE_BATCH_OVERHEAD;
use state::Shared;
use std::sync::Arc;
use std::time::{Duration, Instant};

impl Client {
    /// Starts building a [`Producer`] on this client.
    pub fn producer(&self) -> ProducerBuilder {
        ProducerBuilder::new(self)
    }
}

/// A producer with a blocking API and its network work in the background, as Java's
/// `KafkaProducer` and librdkafka's producer have.
///
/// [`Producer::send`] appends a record to its partition's pending batch and returns at once
/// (it blocks only for a topic's first metadata, and while `buffer.memory` is full, each up to
/// `max.block.ms`). A sender thread sends a batch when it is full (`batch.size`) or has waited
/// `linger.ms` (5 ms by default) since its first record, so a producer that never calls
/// [`flush`](Producer::flush) still gets its records out: Kafka's meaning of `linger.ms`.
/// Each leader broker gets a thread and a connection of its own, with up to
/// `max.in.flight.requests.per.connection` (5) Produce requests outstanding, so that batching,
/// the network and the broker overlap.
///
/// The producer is idempotent by default (KIP-98; see
/// [`ProducerBuilder::enable_idempotence`]): it gets a producer id with InitProducerId and
/// numbers each partition's batches, so the broker writes a retried batch once and in order,
/// with up to 5 batches of a partition in flight. Without idempotence (turned off, excluded by
/// `acks` or `retries`, or a broker before 0.11, logged once) a partition has one batch in
/// flight at a time, so its records are still written in the order they were sent, retries
/// included, but a batch whose acknowledgement was lost may be written twice.
///
/// Partitioning follows Java's default partitioner: an explicit partition wins, a key picks
/// `toPositive(murmur2(key)) % partitions` (so the same key lands on the same partition as
/// with the Java client), and records without a key stick to one available partition until
/// its batch is full (KIP-480).
///
/// Errors are handled per partition: `NOT_LEADER_OR_FOLLOWER`, `LEADER_NOT_AVAILABLE`,
/// `UNKNOWN_TOPIC_OR_PARTITION` (and the other codes Kafka marks as stale metadata) refresh the
/// metadata and retry; other retriable codes retry after `retry.backoff.ms`; both stop at
/// `retries` or `delivery.timeout.ms`. A lost connection also refreshes and retries: the same
/// bytes, which an idempotent producer's broker recognises if they were written already.
///
/// Each record's result comes back on its own: `send` returns a [`DeliveryHandle`] (Java's
/// `Future<RecordMetadata>`, librdkafka's per-message delivery report), which gives the
/// record's partition, offset and timestamp ([`RecordMetadata`]) once its batch is
/// acknowledged, or the error its batch failed with for good; [`DeliveryHandle::wait`]
/// blocks for it. A batch of several records that the broker refuses as `MESSAGE_TOO_LARGE`
/// (its topic's `max.message.bytes` is below it) is split in two and sent again, halves first,
/// ahead of the partition's later batches, and again while refused, as Java's producer splits
/// such batches: only a record too large on its own fails with `MESSAGE_TOO_LARGE`, and each
/// other record gets its own offset, in send order (with idempotence the pieces take the
/// refused batch's sequence numbers, so the partition's sequence has no gap).
/// Every record sent before a `flush` has its result when `flush` returns,
/// and `flush` returns an error ([`Error::Delivery`]) when any record since the previous
/// `flush` failed, so no failure goes unnoticed by a caller that keeps no handles.
///
/// Brokers before 0.11 (Produce below v3) get legacy message sets: magic 1 for Produce v2,
/// magic 0 for v0 and v1; record headers need Produce v3 and zstd Produce v7.
///
/// # Transactions: exactly once
///
/// With [`ProducerBuilder::transactional_id`] the producer writes in transactions (KIP-98):
/// the records sent between [`begin_transaction`](Self::begin_transaction) and
/// [`commit_transaction`](Self::commit_transaction), and the consumer offsets given to
/// [`send_offsets_to_transaction`](Self::send_offsets_to_transaction), are committed together
/// or, after [`abort_transaction`](Self::abort_transaction) or a crash, not at all; consumers
/// with `isolation.level=read_committed` never see an aborted record. A consumer group job
/// that reads, transforms and writes this way processes every input record exactly once,
/// across crashes and rebalances: the offsets commit only with the output they produced, and
/// the group coordinator refuses the offsets of a member that is no longer current (KIP-447),
/// so a zombie's transaction aborts instead of writing a second copy.
///
/// Each transaction call blocks for at most the timeout it is given, retrying what a retry can
/// fix (`CONCURRENT_TRANSACTIONS`, a coordinator moving or loading) inside it. What is left
/// comes back as [`Error::Transaction`], whose [`TransactionAction`](crate::TransactionAction)
/// says what to do: `Abort` (abort, rewind the consumer to its committed offsets, redo the
/// work) or `Close` (fenced by a newer instance with the same `transactional.id`, or not
/// authorized: stop). A call that ran out of time ([`Error::Timeout`]) can be called again.
/// Where the cluster has finalized `transaction.version` 2 (Kafka 4.0+), the producer speaks
/// transaction protocol v2 (KIP-890): Produce adds a partition to the transaction itself and
/// every transaction ends with a new epoch, so a late write of an ended transaction cannot
/// land in the next one. Elsewhere, from Kafka 0.11, it speaks v1 (AddPartitionsToTxn before a
/// partition's first batch). Offsets checked against the group need Kafka 2.5.
///
/// ```no_run
/// use kafka_group::{Client, Error, IsolationLevel, OffsetAndMetadata, ProducerRecord, TransactionAction};
/// use std::collections::BTreeMap;
/// use std::time::Duration;
///
/// let client = Client::builder().bootstrap_servers("localhost:9092").build()?;
/// let instance = "worker-1"; // stable across restarts of this worker
/// let mut consumer = client
///     .consumer("enricher")
///     .group_instance_id(instance)
///     .subscribe(["orders"])
///     .isolation_level(IsolationLevel::ReadCommitted)
///     .enable_auto_commit(false)
///     .build()?;
/// let mut producer = client
///     .producer()
///     .transactional_id(format!("enricher-{instance}"))
///     .build()?;
/// let t = Duration::from_secs(30);
/// producer.init_transactions(t)?; // fences this worker's previous incarnation
/// loop {
///     let polled = consumer.poll(Duration::from_millis(500))?;
///     if polled.records.is_empty() {
///         continue;
///     }
///     producer.begin_transaction()?;
///     let mut offsets = BTreeMap::new();
///     for r in &polled.records {
///         producer.send(ProducerRecord::new("orders-enriched", r.value.clone().unwrap_or_default()))?;
///         offsets.insert(r.topic_partition(), OffsetAndMetadata::new(r.offset + 1));
///     }
///     let group = consumer.group_metadata().expect("a consumer group");
///     let done = producer
///         .send_offsets_to_transaction(&offsets, &group, t)
///         .and_then(|()| producer.commit_transaction(t));
///     match done {
///         Ok(()) => {}
///         Err(Error::Transaction { action: TransactionAction::Abort, .. }) => {
///             producer.abort_transaction(t)?;
///             // Redo from the last committed offsets.
///             let assigned = consumer.assignment();
///             for (tp, offset) in consumer.committed(&assigned)? {
///                 match offset {
///                     Some(o) => consumer.seek(&tp, o)?,
///                     None => consumer.seek_to_beginning(std::slice::from_ref(&tp))?,
///                 }
///             }
///         }
///         Err(e) => return Err(e.into()), // fenced or unusable: stop
///     }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// ```no_run
/// use kafka_group::{Acks, ProducerRecord};
/// use kafka_group::Client;
///
/// let client = Client::builder().bootstrap_servers("localhost:9092").build()?;
/// let mut producer = client.producer().acks(Acks::All).build()?;
/// let handle = producer.send(ProducerRecord::new("events", "hello").key("user-1"))?;
/// // Sent within linger.ms (5 ms) in the background; wait for this one record:
/// let written = handle.wait().map_err(|e| e.to_string())?;
/// println!("{}-{} at offset {:?}", written.topic, written.partition, written.offset);
/// producer.flush()?; // waits for every record sent before it
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Producer {
    client: Client,
    settings: Arc<Settings>,
    shared: Arc<Shared>,
    sender: Option<Worker>,
}

impl Producer {
    /// Starts building a producer on `client`; the same as [`Client::producer`].
    pub fn builder(client: &Client) -> ProducerBuilder {
        ProducerBuilder::new(client)
    }

    /// A producer with its sender thread running; `settings` are validated.
    fn start(client: Client, settings: Settings) -> Result<Producer> {
        let settings = Arc::new(settings);
        let shared = Shared::new(Accumulator::new(settings.config.batch_limit()));
        if let Some(id) = &settings.config.transactional_id {
            shared.lock().txn = Some(transaction::Transaction::new(id.clone()));
        }
        let sender = {
            let (client, shared, settings) = (client.clone(), Arc::clone(&shared), Arc::clone(&settings));
            let stop = sender::producer_stop(&shared);
            Worker::spawn("kafka-producer-sender".into(), None, stop, move || {
                sender::run(client, shared, settings)
            })
            .map_err(|e| Error::Io {
                addr: "the producer's sender thread".into(),
                source: e,
            })?
        };
        Ok(Producer {
            client,
            settings,
            shared,
            sender: Some(sender),
        })
    }

    /// Records sent and not yet acknowledged (or failed).
    pub fn pending(&self) -> usize {
        self.shared.lock().acc.pending
    }

    /// Appends `record` to its partition's batch and returns its [`DeliveryHandle`] (Java's
    /// `KafkaProducer::send` returning a `Future<RecordMetadata>`; rdkafka's `send_result`).
    /// Returns at once, unless it must wait (each up to `max.block.ms`) for the topic's
    /// metadata, the first time the topic is written to, or for room in `buffer.memory`. The
    /// sender thread sends the batch when it is full or `linger.ms` has passed; what becomes
    /// of it goes to its records' handles (and to the next [`flush`](Self::flush)), never to
    /// a later `send`.
    ///
    /// An error means this record was refused before it was queued (nothing of it is sent and
    /// it has no handle): a topic name Kafka cannot have, a record larger than
    /// `max.request.size` or `buffer.memory` ([`Error::RecordTooLarge`]), a partition the
    /// topic does not have, a topic whose metadata did not come within `max.block.ms` (it
    /// does not exist, or the principal may not describe it: [`Error::Authorization`] from
    /// Metadata; no broker answering at all is [`Timeout::Retries`](crate::Timeout::Retries)
    /// naming `max.block.ms`, the connection's error as its cause), `buffer.memory` full for
    /// `max.block.ms` ([`Error::BufferFull`]). Java
    /// reports these through the future; rdkafka, like this call, at once.
    pub fn send(&mut self, mut record: ProducerRecord) -> Result<DeliveryHandle> {
        let transactional = self.settings.config.transactional_id.is_some();
        let size = record.size();
        let config = &self.settings.config;
        let (max_request_size, buffer_memory, max_block) =
            (config.max_request_size, config.buffer_memory, config.max_block);
        // One lock for the state check, the topic lookup and the append, when the topic is
        // known and there is room: a send is on every record's path.
        let mut st = self.shared.lock();
        if transactional {
            transactional::check_in(&st, transaction::Call::Send)?;
        }
        if size + SINGLE_BATCH_OVERHEAD > max_request_size {
            return Err(Error::RecordTooLarge {
                topic: record.topic,
                size,
                max: max_request_size,
                property: "max.request.size",
            });
        }
        if size > buffer_memory {
            return Err(Error::RecordTooLarge {
                topic: record.topic,
                size,
                max: buffer_memory,
                property: "buffer.memory",
            });
        }
        // Whether the lock was let go since the state check (which must then be made again).
        let mut unlocked = false;
        if !st.acc.topics.contains_key(&record.topic) {
            drop(st);
            // Before any request: a name Kafka cannot have would only come back as a broker
            // error after max.block.ms of metadata retries.
            crate::names::check_topic("ProducerRecord::topic", &record.topic)?;
            self.add_topic(&record.topic)?;
            st = self.shared.lock();
            unlocked = true;
        }
        if st.acc.buffered + size > buffer_memory {
            let deadline = crate::deadline::after(max_block);
            while st.acc.buffered + size > buffer_memory {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(Error::BufferFull {
                        buffer_memory,
                        waited: max_block,
                    });
                }
                st = self.shared.wait(&self.shared.settled, st, left);
            }
            unlocked = true;
        }
        if transactional && unlocked {
            // A batch that failed meanwhile may have made the transaction abortable.
            transactional::check_in(&st, transaction::Call::Send)?;
        }
        let topic = std::mem::take(&mut record.topic);
        let (partition, closed, handle) = st.acc.append_to(&topic, record, size, Instant::now())?;
        // Under the lock the append took: no broker thread sends the batch before the
        // partition is known to need adding to the transaction. Only a batch's first record
        // can bring a partition into the transaction: every batch of a transaction is created
        // in it, as commit and abort settle them all before the next begins.
        let add = handle.is_first()
            && st
                .txn
                .as_mut()
                .is_some_and(|txn| txn.add_partition(&topic, partition));
        drop(st);
        if add {
            self.shared.work.notify_all();
        }
        // A batch full, or a new one whose linger the broker threads must start timing.
        if closed || handle.is_first() {
            self.shared.work.notify_all();
        }
        Ok(handle)
    }

    /// [`send`](Self::send)s each record in turn, stopping at the first refused; the handles
    /// of those queued, in order.
    pub fn send_many(
        &mut self,
        records: impl IntoIterator<Item = ProducerRecord>,
    ) -> Result<Vec<DeliveryHandle>> {
        records.into_iter().map(|r| self.send(r)).collect()
    }

    /// Sends every pending batch at once, whatever `linger.ms` says, and waits for the
    /// acknowledgements, retrying as configured (Java's `KafkaProducer::flush`, rdkafka's
    /// `flush`). When it returns, every record sent before it has its result in its
    /// [`DeliveryHandle`]; it takes at most about `delivery.timeout.ms`, after which pending
    /// records fail.
    ///
    /// Returns [`Error::Delivery`] when any record since the previous `flush` failed for good
    /// (including records whose batches were sent in the background before this call): how
    /// many, and the first error; each record's own error is in its handle. The other batches
    /// have been sent all the same.
    pub fn flush(&mut self) -> Result<()> {
        self.flush_within(Duration::MAX);
        self.take_failures()
    }

    /// Flushes for up to `timeout`; whether everything was settled.
    fn flush_within(&self, timeout: Duration) -> bool {
        let deadline = crate::deadline::after(timeout);
        let mut st = self.shared.lock();
        st.flushing += 1;
        self.shared.work.notify_all();
        let mut done = st.acc.pending == 0;
        while !done {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            // Also woken by every settled batch; the bound only guards against a lost wakeup.
            st = self
                .shared
                .wait(&self.shared.settled, st, left.min(Duration::from_millis(100)));
            done = st.acc.pending == 0;
        }
        st.flushing -= 1;
        done
    }

    /// The failures since the last report, as [`Error::Delivery`].
    fn take_failures(&self) -> Result<()> {
        let mut st = self.shared.lock();
        match st.first_failure.take() {
            Some(first) => Err(Error::Delivery {
                failed: std::mem::take(&mut st.failed),
                first,
            }),
            None => Ok(()),
        }
    }

    /// Flushes for up to the builder's
    /// [`close_timeout`](ProducerBuilder::close_timeout) (default 30 s), stops the background
    /// threads and drops the producer (the client and its connections stay): Java's `close()`,
    /// but bounded. Dropping the producer does the same. See [`close_timeout`](Self::close_timeout)
    /// for what a record still pending then becomes.
    pub fn close(self) -> Result<()> {
        let timeout = self.settings.config.close_timeout;
        self.close_timeout(timeout)
    }

    /// Flushes for up to `timeout`, then stops the background threads: records not settled
    /// by then fail with [`Error::Closed`] (a request in flight may still be written by the
    /// broker). Returns [`Error::Delivery`] when any record since the last `flush` failed,
    /// those included. Java's `close(Duration)`.
    pub fn close_timeout(mut self, timeout: Duration) -> Result<()> {
        self.abort_open_transaction(timeout);
        if !self.flush_within(timeout) {
            log::warn!(
                "producer closed with {} record(s) not acknowledged after {timeout:?}; they fail",
                self.pending()
            );
        }
        self.stop();
        self.take_failures()
    }

    /// Stops the threads; every record still pending fails with [`Error::Closed`].
    fn stop(&mut self) {
        let Some(sender) = self.sender.take() else {
            return;
        };
        {
            let mut st = self.shared.lock();
            st.stop = true;
            let closed = Arc::new(Error::Closed);
            for b in st.acc.drain_waiting() {
                st.fail(&b, &closed);
            }
        }
        self.shared.work.notify_all();
        let mut sender = sender;
        // The sender stops the broker threads, each within its own bound, before it ends.
        sender.shutdown(sender::STOP_BOUND * 2);
        // The broker threads failed what they had in flight; nothing is left.
        let mut st = self.shared.lock();
        let closed = Arc::new(Error::Closed);
        for b in st.acc.drain_waiting() {
            st.fail(&b, &closed);
        }
        drop(st);
        self.shared.settled.notify_all();
    }

    /// Fetches a topic's metadata, waiting up to `max.block.ms` for it to exist with leaders.
    fn add_topic(&mut self, topic: &str) -> Result<()> {
        let deadline = crate::deadline::after(self.settings.config.max_block);
        // At least 10 ms apart, whatever retry.backoff.ms says, not to spin on the metadata.
        let backoff = Backoff::fixed(self.settings.retry_backoff.max(Duration::from_millis(10)));
        // `max.block.ms` ends with the last answer itself (e.g. UNKNOWN_TOPIC_OR_PARTITION, which
        // a caller can match on), not a timeout around it; `what` serves only if there is none.
        let what = || format!("waiting for the metadata of topic {topic}");
        let max_block = self.settings.config.max_block;
        let result = retry_or_last(deadline, backoff, what, || {
            // Each lookup ends by `max.block.ms` too, not a whole request.timeout.ms after it.
            let e = match self.client.refresh_metadata_by(Some(&[topic]), deadline) {
                Ok(meta) => match meta.topics.get(topic) {
                    Some(t) if !t.error.is_error() && !t.partitions.is_empty() => {
                        let mut st = self.shared.lock();
                        st.metadata_at = Some(Instant::now());
                        // The other topics first: `update` would apply this one again.
                        st.acc.update(&meta);
                        st.acc.add_topic(t, &meta);
                        return Ok(Step::Done(()));
                    }
                    Some(t) => match topic_denied(&meta, topic) {
                        Some(denied) => denied,
                        None => Error::Kafka {
                            api: ApiKey::Metadata,
                            code: if t.error.is_error() {
                                t.error
                            } else {
                                KafkaCode::LeaderNotAvailable
                            },
                            message: Some(format!("topic {topic}")),
                        },
                    },
                    None => Error::Kafka {
                        api: ApiKey::Metadata,
                        code: KafkaCode::UnknownTopicOrPartition,
                        message: Some(format!("topic {topic}: not in the metadata response")),
                    },
                },
                Err(e) => e,
            };
            let retriable = match &e {
                Error::Kafka { code, .. } => code.is_retriable(),
                other => other.is_unreachable(),
            };
            if !retriable {
                return Err(e);
            }
            log::debug!("producer: waiting for metadata of {topic}: {e}");
            Ok(Step::Retry(e))
        });
        // No broker answered at all: the error is the bound that ran out, with the connection's
        // error as its cause (only retried errors get here unreachable). A broker's own answer
        // stays the error, as above.
        result.map_err(|e| match e.is_unreachable() {
            true => Error::retries_timeout(
                format!("waiting for the metadata of topic {topic} within max.block.ms ({max_block:?})"),
                Some(e),
            ),
            false => e,
        })
    }
}

impl Drop for Producer {
    /// What [`Producer::close`] does: records sent and not flushed are written, not dropped,
    /// for up to `close_timeout`; a failure can only be logged. While the thread panics the
    /// flush is skipped, so that unwinding is not held up by a broker.
    fn drop(&mut self) {
        if self.sender.is_none() {
            return;
        }
        let timeout = self.settings.config.close_timeout;
        if std::thread::panicking() {
            let pending = self.pending();
            if pending > 0 {
                log::warn!("producer dropped while panicking: {pending} record(s) not acknowledged fail");
            }
        } else if self.abort_open_transaction(timeout) && !self.flush_within(timeout) {
            log::warn!(
                "producer dropped with {} record(s) not acknowledged after close_timeout ({timeout:?}); they fail",
                self.pending()
            );
        }
        self.stop();
        if let Err(e) = self.take_failures() {
            log::warn!("producer dropped: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::TopicPartition;
    use crate::records::Compression;
    use bytes::Bytes;
    use request::{PARTITION_OVERHEAD, REQUEST_OVERHEAD};

    fn builder() -> ProducerBuilder {
        Client::builder()
            .bootstrap_servers("no-such-host.invalid:9092")
            .build()
            .unwrap()
            .producer()
    }

    use crate::net::script::{Answer, Script};
    use crate::protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use crate::protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
    use crate::protocol::messages::{
        InitProducerIdRequest, InitProducerIdResponse, MetadataRequest, MetadataResponse, ProduceRequest,
        ProduceResponse,
    };

    /// A scripted broker 0 leading every partition of topic `t`, which has `partitions`, and
    /// handing out producer id 7.
    fn script_with_topic(partitions: i32) -> Script {
        let script = Script::new();
        script.on::<InitProducerIdRequest>(|_, _| {
            Answer::Reply(InitProducerIdResponse {
                producer_id: 7,
                producer_epoch: 0,
                ..Default::default()
            })
        });
        script.on::<MetadataRequest>(move |_, _| {
            Answer::Reply(MetadataResponse {
                brokers: vec![MetadataResponseBroker {
                    node_id: 0,
                    host: "b0".into(),
                    port: 9092,
                    ..Default::default()
                }],
                topics: vec![MetadataResponseTopic {
                    name: Some("t".into()),
                    partitions: (0..partitions)
                        .map(|p| MetadataResponsePartition {
                            partition_index: p,
                            leader_id: 0,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }],
                ..Default::default()
            })
        });
        script
    }

    fn scripted_client(script: &Script) -> Client {
        script
            .client(
                Client::builder()
                    .bootstrap_servers("b0:9092")
                    .reconnect_backoff(Duration::from_millis(1))
                    .retry_backoff(Duration::from_millis(1)),
            )
            .unwrap()
    }

    /// Partition 0 is written at offset 100 (LogAppendTime 5555), partition 1 refuses its
    /// batch with MESSAGE_TOO_LARGE.
    fn answer_p0_written_p1_too_large(req: &ProduceRequest) -> ProduceResponse {
        answer_p0_written_p1_refused(req, KafkaCode::MessageTooLarge)
    }

    /// Partition 0 is written at offset 100 (LogAppendTime 5555), partition 1 refuses its
    /// batch with `code`.
    fn answer_p0_written_p1_refused(req: &ProduceRequest, code: KafkaCode) -> ProduceResponse {
        let responses = req
            .topic_data
            .iter()
            .map(|t| TopicProduceResponse {
                name: t.name.clone(),
                partition_responses: t
                    .partition_data
                    .iter()
                    .map(|p| PartitionProduceResponse {
                        index: p.index,
                        error_code: if p.index == 1 { code.code() } else { 0 },
                        base_offset: if p.index == 1 { -1 } else { 100 },
                        log_append_time_ms: if p.index == 1 { -1 } else { 5555 },
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect();
        ProduceResponse {
            responses,
            ..Default::default()
        }
    }

    #[test]
    fn each_record_gets_its_offset_or_its_batchs_error_and_flush_counts_the_failures() {
        let script = script_with_topic(2);
        // A refusal of the whole batch that splitting does not address (MESSAGE_TOO_LARGE
        // would split this batch of two: its own test below).
        script.on::<ProduceRequest>(|req, _| {
            Answer::Reply(answer_p0_written_p1_refused(req, KafkaCode::InvalidRecord))
        });
        let client = scripted_client(&script);
        // A linger longer than the test: only the flush sends.
        let mut p = client
            .producer()
            .linger(Duration::from_secs(3600))
            .delivery_timeout(Duration::from_secs(7200))
            .build()
            .unwrap();
        let to = |partition| ProducerRecord::new("t", "v").partition(partition).timestamp(7);
        let ok: Vec<DeliveryHandle> = (0..3).map(|_| p.send(to(0)).unwrap()).collect();
        let bad: Vec<DeliveryHandle> = p.send_many([to(1), to(1)]).unwrap();
        assert!(ok.iter().chain(&bad).all(|h| !h.is_done()), "nothing sent yet");
        assert_eq!(bad[0].topic_partition(), &TopicPartition::new("t", 1));
        let first = match p.flush() {
            Err(Error::Delivery { failed: 2, first }) => first,
            other => panic!("{other:?}"),
        };
        assert_eq!(first.kafka_code(), Some(KafkaCode::InvalidRecord));
        for (i, h) in ok.iter().enumerate() {
            let m = h.try_result().expect("done after flush").unwrap();
            assert_eq!((m.topic.as_str(), m.partition), ("t", 0));
            assert_eq!(m.offset, Some(100 + i as i64));
            assert_eq!((m.timestamp, m.log_append_time), (5555, true));
        }
        for h in &bad {
            let e = h.try_result().expect("done after flush").unwrap_err();
            assert!(Arc::ptr_eq(&e, &first), "one error shared by the batch: {e}");
            assert!(e.to_string().contains("t-1"), "{e}");
        }
        // Reported once: the next flush has nothing to report.
        p.send(to(0)).unwrap();
        p.flush().unwrap();
    }

    /// A scripted broker for partition 0 of `t` that refuses every batch above `limit` bytes
    /// with MESSAGE_TOO_LARGE (writing none of it) and, for an idempotent batch, one whose
    /// sequence is not the next it expects with OUT_OF_ORDER_SEQUENCE_NUMBER (a higher epoch
    /// restarts at 0), as Kafka does; the values it wrote, in offset order, and how many
    /// batches it refused as out of order.
    #[allow(clippy::type_complexity)]
    fn size_limited_log(
        script: &Script,
        limit: usize,
    ) -> (
        Arc<std::sync::Mutex<Vec<Bytes>>>,
        Arc<std::sync::atomic::AtomicUsize>,
    ) {
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let written = Arc::clone(&log);
        let out_of_order = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let refused = Arc::clone(&out_of_order);
        let mut expected: Option<(i16, i32)> = None;
        let mut first_refusal_sent = false;
        script.on::<ProduceRequest>(move |req, _| {
            let mut log = written.lock().unwrap();
            let bytes = req.topic_data[0].partition_data[0]
                .records
                .clone()
                .unwrap_or_default();
            let decoded = crate::records::decode(&bytes, &Default::default()).unwrap();
            let h = decoded.batches[0];
            // The same epoch continues at the next sequence; a higher one starts at 0.
            let in_order = h.producer_id < 0
                || expected.map_or(true, |(epoch, seq)| match epoch.cmp(&h.producer_epoch) {
                    std::cmp::Ordering::Equal => seq == h.base_sequence,
                    std::cmp::Ordering::Less => h.base_sequence == 0,
                    std::cmp::Ordering::Greater => false,
                });
            let code = if bytes.len() > limit {
                KafkaCode::MessageTooLarge
            } else if !in_order {
                KafkaCode::OutOfOrderSequenceNumber
            } else {
                KafkaCode::None
            };
            let base_offset = log.len() as i64;
            if code == KafkaCode::OutOfOrderSequenceNumber {
                refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            if code == KafkaCode::None {
                if h.producer_id >= 0 {
                    expected = Some((h.producer_epoch, h.base_sequence + decoded.records.len() as i32));
                }
                log.extend(
                    decoded
                        .records
                        .iter()
                        .map(|r| r.value.clone().unwrap_or_default()),
                );
            }
            let answer = ProduceResponse {
                responses: vec![TopicProduceResponse {
                    name: "t".into(),
                    partition_responses: vec![PartitionProduceResponse {
                        index: 0,
                        error_code: code.code(),
                        base_offset: if code == KafkaCode::None { base_offset } else { -1 },
                        log_start_offset: 0,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            };
            // The first refusal comes late, so that the batches behind it are surely in
            // flight when it does (answers keep their order on a connection, as Kafka's do):
            // otherwise whether any is depends on the machine's speed.
            if code == KafkaCode::MessageTooLarge && !first_refusal_sent {
                first_refusal_sent = true;
                return Answer::Delayed(Duration::from_millis(200), answer);
            }
            Answer::Reply(answer)
        });
        (log, out_of_order)
    }

    /// A batch refused as too large is split until its pieces fit, so only the record too
    /// large on its own fails; every other record is written once, in send order, and its
    /// handle has its offset. With idempotence (several batches in flight behind the refused
    /// one, the broker checking sequences) and without.
    #[test]
    fn a_record_that_expires_waiting_for_a_producer_id_says_why_there_was_none() {
        // A Kafka 3.0.2 broker answered InitProducerId with REQUEST_TIMED_OUT for minutes, its
        // controller handing out no id block: the record, never sent, must say so rather than
        // "never acknowledged".
        let script = script_with_topic(1);
        script.on::<InitProducerIdRequest>(|_, _| {
            Answer::Reply(InitProducerIdResponse {
                error_code: KafkaCode::RequestTimedOut.code(),
                producer_id: -1,
                producer_epoch: -1,
                ..Default::default()
            })
        });
        let client = script
            .client(
                Client::builder()
                    .bootstrap_servers("b0:9092")
                    .request_timeout(Duration::from_millis(200))
                    .retry_backoff(Duration::from_millis(1)),
            )
            .unwrap();
        let mut p = client
            .producer()
            .linger(Duration::ZERO)
            .delivery_timeout(Duration::from_millis(300))
            .build()
            .unwrap();
        let h = p.send(ProducerRecord::new("t", "v").partition(0)).unwrap();
        match p.flush() {
            Err(Error::Delivery { failed: 1, first }) => {
                let text = first.to_string();
                assert!(
                    text.contains("0 attempt(s)")
                        && text.contains("InitProducerId answered REQUEST_TIMED_OUT"),
                    "{text}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(h.try_result().expect("done after flush").is_err());
        assert_eq!(
            script.requests::<ProduceRequest>().len(),
            0,
            "nothing is sent without a producer id"
        );
    }

    #[test]
    fn a_batch_refused_as_too_large_is_split_and_only_the_record_too_large_alone_fails() {
        for idempotent in [true, false] {
            let script = script_with_topic(1);
            let (log, out_of_order) = size_limited_log(&script, 400);
            let client = scripted_client(&script);
            // Batches of about 30 records, each far above the broker's 400 bytes.
            let mut p = client
                .producer()
                .enable_idempotence(idempotent)
                .batch_size(1000)
                .linger(Duration::from_secs(3600))
                .delivery_timeout(Duration::from_secs(7200))
                .build()
                .unwrap();
            let value = |i: usize| Bytes::from(format!("record-{i:04}"));
            let mut handles = Vec::new();
            for i in 0..100 {
                handles.push((
                    i,
                    p.send(ProducerRecord::new("t", value(i)).partition(0)).unwrap(),
                ));
                if i == 50 {
                    let big = ProducerRecord::new("t", vec![b'x'; 600]).partition(0);
                    handles.push((usize::MAX, p.send(big).unwrap()));
                }
            }
            match p.flush() {
                Err(Error::Delivery { failed: 1, first }) => {
                    assert_eq!(first.kafka_code(), Some(KafkaCode::MessageTooLarge), "{first}")
                }
                other => panic!("idempotent {idempotent}: {other:?}"),
            }
            let log = log.lock().unwrap();
            let values: Vec<Bytes> = (0..100).map(value).collect();
            assert_eq!(*log, values, "idempotent {idempotent}: written once, in order");
            for (i, h) in &handles {
                match h.try_result().expect("done after flush") {
                    Ok(m) => assert_eq!(m.offset, Some(*i as i64), "record {i}"),
                    Err(e) => {
                        assert_eq!(*i, usize::MAX, "record {i}: {e}");
                        assert_eq!(e.kafka_code(), Some(KafkaCode::MessageTooLarge), "{e}");
                    }
                }
            }
            assert_eq!(p.pending(), 0);
            // With idempotence, batches pipelined behind a refused one were refused as out of
            // order and retried with their own sequences; without, one batch is in flight.
            let out_of_order = out_of_order.load(std::sync::atomic::Ordering::Relaxed);
            assert_eq!(out_of_order > 0, idempotent, "{out_of_order}");
        }
    }

    #[test]
    fn records_go_out_after_linger_without_flush_and_failures_reach_the_handle_and_the_next_flush() {
        let script = script_with_topic(2);
        script.on::<ProduceRequest>(|req, _| Answer::Reply(answer_p0_written_p1_too_large(req)));
        let client = scripted_client(&script);
        // Neither batch fills: only linger.ms (the default 5 ms) sends them.
        let mut p = client.producer().build().unwrap();
        let bad = p.send(ProducerRecord::new("t", "v").partition(1)).unwrap();
        let good = p.send(ProducerRecord::new("t", "v").partition(0)).unwrap();
        assert_eq!(good.wait().unwrap().offset, Some(100));
        let e = bad.wait().unwrap_err();
        assert_eq!(e.kafka_code(), Some(KafkaCode::MessageTooLarge));
        match p.flush() {
            Err(Error::Delivery { failed: 1, first }) => assert!(Arc::ptr_eq(&first, &e)),
            other => panic!("not reported by flush: {other:?}"),
        }
    }

    /// Every ProduceRequest's batches for partition 0, as sent; answered as written at
    /// offset 10 per batch seen.
    fn recording_produce(script: &Script) -> Arc<std::sync::Mutex<Vec<Bytes>>> {
        let sent = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = Arc::clone(&sent);
        script.on::<ProduceRequest>(move |req, _| {
            let mut seen = seen.lock().unwrap();
            for t in &req.topic_data {
                for p in &t.partition_data {
                    seen.push(p.records.clone().unwrap_or_default());
                }
            }
            let mut resp = answer_p0_written_p1_too_large(req);
            resp.responses[0].partition_responses[0].base_offset = 10 * seen.len() as i64;
            Answer::Reply(resp)
        });
        sent
    }

    fn header(bytes: &Bytes) -> crate::records::BatchInfo {
        crate::records::decode(bytes, &Default::default())
            .unwrap()
            .batches[0]
    }

    #[test]
    fn idempotent_batches_carry_the_producer_id_and_consecutive_sequences_and_a_retry_the_same_bytes() {
        let script = script_with_topic(1);
        let sent = recording_produce(&script);
        // The first attempt's connection breaks after the request went out: its answer is lost.
        script.push::<ProduceRequest>(Answer::Fail(std::io::ErrorKind::ConnectionReset));
        let client = scripted_client(&script);
        let mut p = client.producer().batch_size(0).build().unwrap();
        let first = p.send(ProducerRecord::new("t", "a").partition(0)).unwrap();
        first.wait().unwrap();
        let more = p
            .send_many((0..3).map(|_| ProducerRecord::new("t", "b").partition(0)))
            .unwrap();
        p.flush().unwrap();
        assert!(more.iter().all(|h| h.try_result().unwrap().is_ok()));
        let sent = sent.lock().unwrap();
        // The lost attempt is not recorded (the scripted failure answers before the handler):
        // the retry is the first seen, then one batch per record.
        assert_eq!(sent.len(), 4, "{sent:?}");
        let headers: Vec<_> = sent.iter().map(header).collect();
        for h in &headers {
            assert_eq!((h.producer_id, h.producer_epoch), (7, 0), "{h:?}");
        }
        let sequences: Vec<i32> = headers.iter().map(|h| h.base_sequence).collect();
        assert_eq!(sequences, [0, 1, 2, 3]);
    }

    #[test]
    fn a_broker_without_init_producer_id_gets_plain_batches() {
        let script = script_with_topic(1);
        let sent = recording_produce(&script);
        // Kafka 0.10: no InitProducerId (and Produce v2).
        script.versions(
            [
                (
                    ApiKey::ApiVersions.key(),
                    crate::protocol::VersionRange::new(0, 0),
                ),
                (ApiKey::Metadata.key(), crate::protocol::VersionRange::new(0, 2)),
                (ApiKey::Produce.key(), crate::protocol::VersionRange::new(0, 2)),
            ]
            .into_iter()
            .collect(),
        );
        let client = scripted_client(&script);
        let mut p = client.producer().build().unwrap();
        p.send(ProducerRecord::new("t", "a").partition(0)).unwrap();
        p.flush().unwrap();
        let sent = sent.lock().unwrap();
        assert_eq!(sent.len(), 1);
        // A legacy message set: no producer header at all.
        assert_eq!(header(&sent[0]).producer_id, -1);
    }

    #[test]
    fn explicit_idempotence_with_a_setting_that_excludes_it_is_refused() {
        let e = builder()
            .enable_idempotence(true)
            .acks(Acks::Leader)
            .build()
            .unwrap_err();
        assert!(matches!(e, Error::Config { property: "acks", .. }), "{e}");
        // Left at its default, the same setting only turns it off.
        builder().acks(Acks::Leader).build().unwrap();
    }

    #[test]
    fn acks_0_gives_records_without_offsets() {
        let script = script_with_topic(1);
        // No answer is read for acks=0.
        script.on::<ProduceRequest>(|_, _| Answer::Silence);
        let client = scripted_client(&script);
        let mut p = client.producer().acks(Acks::None).build().unwrap();
        let h = p.send(ProducerRecord::new("t", "v").timestamp(42)).unwrap();
        p.flush().unwrap();
        let m = h.try_result().unwrap().unwrap();
        assert_eq!((m.partition, m.offset, m.timestamp), (0, None, 42));
        assert!(!m.log_append_time);
    }

    #[test]
    fn records_of_a_dropped_producer_are_closed_not_pending_for_ever() {
        let script = script_with_topic(1);
        let client = scripted_client(&script);
        // The broker never answers: the drop's flush ends at close_timeout.
        let mut p = client
            .producer()
            .close_timeout(Duration::from_millis(200))
            .build()
            .unwrap();
        let h = p.send(ProducerRecord::new("t", "v")).unwrap();
        assert!(!h.is_done());
        drop(p);
        assert!(matches!(*h.try_result().unwrap().unwrap_err(), Error::Closed));
    }

    #[test]
    fn a_produce_that_keeps_losing_its_connection_fails_with_the_io_error_as_its_cause() {
        let script = script_with_topic(1);
        script.on::<ProduceRequest>(|_, _| Answer::Fail(std::io::ErrorKind::ConnectionReset));
        let client = scripted_client(&script);
        let mut p = client.producer().retries(2).build().unwrap();
        let h = p
            .send(ProducerRecord::new("t", b"v".to_vec()).partition(0))
            .unwrap();
        let flushed = p.flush().unwrap_err();
        assert!(flushed.to_string().contains("3 attempt(s) failed"), "{flushed}");
        let e = h.try_result().unwrap().unwrap_err();
        assert!(e.to_string().contains("3 attempt(s) failed"), "{e}");
        let source = std::error::Error::source(&*e).expect("the lost connection is the cause");
        match source.downcast_ref::<Error>() {
            Some(Error::Io { addr, source }) => {
                assert_eq!(addr, "b0:9092");
                assert_eq!(source.kind(), std::io::ErrorKind::ConnectionReset);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn waiting_for_a_topics_metadata_ends_at_max_block_ms() {
        let script = Script::new();
        script.on::<MetadataRequest>(|_, _| Answer::<MetadataResponse>::Silence);
        let client = script
            .client(Client::builder().bootstrap_servers("b0:9092"))
            .unwrap();
        let max_block = Duration::from_millis(300);
        let mut p = client.producer().max_block(max_block).build().unwrap();
        let t = Instant::now();
        let e = p.send(ProducerRecord::new("t", b"v".to_vec())).unwrap_err();
        let took = t.elapsed();
        // request.timeout.ms is 30 s: one lookup waiting it out would take that long.
        assert!(
            took < max_block + crate::deadline::LOAD_MARGIN,
            "send took {took:?}: {e}"
        );
        // The bound that ran out is the error; the broker that did not answer, its cause.
        assert!(
            matches!(
                &e,
                Error::Timeout {
                    which: crate::Timeout::Retries,
                    ..
                }
            ) && e.to_string().contains("max.block.ms"),
            "{e}"
        );
        let cause = std::error::Error::source(&e).and_then(|c| c.downcast_ref::<Error>());
        assert!(cause.is_some_and(Error::is_unreachable), "{cause:?}");
    }

    #[test]
    fn configuration_is_checked_before_any_network_call() {
        let p = builder().build().unwrap();
        assert_eq!(p.settings.config.acks, Acks::All);
        assert_eq!(p.settings.config.compression, Compression::None);
        assert_eq!(p.settings.config.batch_size, 256 * 1024);
        assert_eq!(p.settings.config.linger, Duration::from_millis(5));
        assert_eq!(p.settings.config.buffer_memory, 32 << 20);
        assert_eq!(p.settings.config.max_in_flight, 5);
        assert_eq!(p.settings.config.delivery_timeout, Duration::from_secs(120));
        assert_eq!(p.settings.config.max_request_size, 1 << 20);
        assert_eq!(p.settings.retry_backoff, Duration::from_millis(100));
        // 90% of the client's 30 s request.timeout.ms.
        assert_eq!(p.settings.broker_timeout_ms, 27_000);
        let property = |b: ProducerBuilder| match b.build() {
            Err(Error::Config { property, .. }) => property,
            other => panic!("{other:?}"),
        };
        assert_eq!(property(builder().max_request_size(0)), "max.request.size");
        assert_eq!(property(builder().batch_size(usize::MAX)), "batch.size");
        assert_eq!(
            property(builder().delivery_timeout(Duration::from_secs(10))),
            "delivery.timeout.ms"
        );
        assert_eq!(
            property(
                builder()
                    .linger(Duration::from_secs(100))
                    .delivery_timeout(Duration::from_secs(120))
            ),
            "delivery.timeout.ms"
        );
        assert_eq!(
            property(builder().metadata_max_age(Duration::ZERO)),
            "metadata.max.age.ms"
        );
        assert!(builder()
            .acks(Acks::None)
            .compression(Compression::Lz4)
            .batch_size(0)
            .retries(0)
            .delivery_timeout(Duration::from_secs(31))
            .build()
            .is_ok());
    }

    #[test]
    fn retry_backoff_is_the_clients_unless_set_on_the_producer() {
        let client = Client::builder()
            .bootstrap_servers("no-such-host.invalid:9092")
            .retry_backoff(Duration::from_millis(250))
            .build()
            .unwrap();
        assert_eq!(
            client.producer().build().unwrap().settings.retry_backoff,
            Duration::from_millis(250)
        );
        let p = client
            .producer()
            .retry_backoff(Duration::from_millis(7))
            .build()
            .unwrap();
        assert_eq!(p.settings.retry_backoff, Duration::from_millis(7));
        // The client keeps its own.
        assert_eq!(client.retry_backoff(), Duration::from_millis(250));
    }

    #[test]
    fn int_ms_settings_and_record_topics_follow_kafka_rules() {
        let property = |b: ProducerBuilder| match b.build() {
            Err(Error::Config { property, .. }) => property,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            property(builder().delivery_timeout(Duration::MAX)),
            "delivery.timeout.ms"
        );
        assert_eq!(
            property(builder().delivery_timeout(Duration::from_millis(i32::MAX as u64 + 1))),
            "delivery.timeout.ms"
        );
        // linger.ms + request.timeout.ms must fit delivery.timeout.ms, which fits an i32.
        assert_eq!(property(builder().linger(Duration::MAX)), "delivery.timeout.ms");
        // Long-typed settings saturate.
        let mut p = builder()
            .max_block(Duration::MAX)
            .metadata_max_age(Duration::MAX)
            .retry_backoff(Duration::MAX)
            .delivery_timeout(Duration::from_millis(i32::MAX as u64))
            .build()
            .unwrap();
        for topic in ["bad topic!", "", &"t".repeat(250)] {
            let e = p.send(ProducerRecord::new(topic, "v")).unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::Config {
                        property: "ProducerRecord::topic",
                        ..
                    }
                ),
                "{e}"
            );
        }
    }

    #[test]
    fn oversized_records_are_refused_before_any_network_call() {
        let mut p = builder().max_request_size(1000).build().unwrap();
        let e = p.send(ProducerRecord::new("t", vec![0u8; 1000])).unwrap_err();
        // A local refusal, not the broker's MESSAGE_TOO_LARGE.
        match &e {
            Error::RecordTooLarge {
                topic,
                size,
                max: 1000,
                property: "max.request.size",
            } => {
                assert_eq!(topic, "t");
                assert!(*size > 1000, "{size}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(e.kafka_code(), None);
        assert!(e.to_string().contains("max.request.size 1000"), "{e}");
        // The batch limit leaves room for the request around it.
        assert_eq!(
            p.settings.config.batch_limit(),
            1000 - REQUEST_OVERHEAD - PARTITION_OVERHEAD - crate::records::BATCH_HEADER
        );
    }
}
