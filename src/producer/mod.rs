//! The [`Producer`]; its behaviour is documented there.
//!
//! Inside, one file a job: `record` ([`ProducerRecord`], [`Acks`]), `partitioner` (murmur2),
//! `config` and `builder` (settings, checked before any network call), `accumulator` (pending
//! batches per partition, sticky partitions, the plan of what goes to which leader; pure),
//! `delivery` (each record's [`DeliveryHandle`], one shared result per batch),
//! `request` (Produce requests packed below `max.request.size` and answers read per
//! partition; pure), `sender` (each leader's requests on the network). This file ties them
//! together: send, flush, retries.

mod accumulator;
mod builder;
mod config;
mod delivery;
mod idempotence;
mod partitioner;
mod record;
mod request;
mod sender;

pub use builder::ProducerBuilder;
pub use delivery::{DeliveryHandle, RecordMetadata};
pub use partitioner::key_partition;
pub use record::{Acks, ProducerRecord};
use request::magic_for;

use crate::client::{topic_denied, Client};
use crate::error::{Error, Result};
use crate::group::TopicPartition;
use crate::net::link::Purpose;
use crate::net::versions::BrokerVersions;
use crate::protocol::ApiKey;
use crate::retry::{retry_or_last, Backoff, Step};
use crate::KafkaCode;
use accumulator::Batch;
use accumulator::{Accumulator, Plan};
use bytes::Bytes;
use config::{ProducerConfig, SINGLE_BATCH_OVERHEAD};
use request::{outcomes, pack, produce_error, LastError, Outcome};
use sender::{Sent, Work};
use std::sync::Arc;
use std::time::{Duration, Instant};

impl Client {
    /// Starts building a [`Producer`] on this client.
    pub fn producer(&self) -> ProducerBuilder {
        ProducerBuilder::new(self)
    }
}

/// What [`Producer::prepare`] makes of a plan: requests per broker, batches refused for good
/// (with the one error that refused them) and batches whose broker could not be reached.
type Prepared = (
    Vec<Work>,
    Vec<(Vec<TopicPartition>, Error)>,
    Vec<(TopicPartition, LastError)>,
);

/// A simple, blocking producer: enough for batch jobs, tests and demos.
///
/// [`Producer::send`] only appends a record to its partition's pending batch; the network is
/// touched when a batch reaches `batch.size` (then every pending batch led by the same broker
/// goes out in one ProduceRequest, the way Java's sender drains a ready node), when `linger.ms`
/// has passed, and at [`Producer::flush`], which sends everything and waits for the
/// acknowledgements. Requests to different brokers run in parallel, one per broker at a time;
/// a partition never has more than one batch in flight, so records of a partition are written
/// in the order they were sent, retries included.
///
/// Partitioning follows Java's default partitioner: an explicit partition wins, a key picks
/// `toPositive(murmur2(key)) % partitions` (so the same key lands on the same partition as
/// with the Java client), and records without a key stick to one available partition until
/// its batch is full (KIP-480).
///
/// Errors are handled per partition: `NOT_LEADER_OR_FOLLOWER`, `LEADER_NOT_AVAILABLE`,
/// `UNKNOWN_TOPIC_OR_PARTITION` (and the other codes Kafka marks as stale metadata) refresh the
/// metadata and retry; other retriable codes retry after `retry.backoff.ms`; both stop at
/// `retries` or `delivery.timeout.ms`. A lost connection also refreshes and retries. Delivery
/// is at least once: a batch whose acknowledgement was lost is sent again (idempotence, which
/// needs InitProducerId, is not implemented).
///
/// Each record's result comes back on its own: `send` returns a [`DeliveryHandle`] (Java's
/// `Future<RecordMetadata>`, librdkafka's per-message delivery report), which gives the
/// record's partition, offset and timestamp ([`RecordMetadata`]) once its batch is
/// acknowledged, or the error its batch failed with for good. Every record sent before a
/// `flush` has its result when `flush` returns, and `flush` returns an error
/// ([`Error::Delivery`]) when any record since the previous `flush` failed, so no failure
/// goes unnoticed by a caller that keeps no handles.
///
/// Brokers before 0.11 (Produce below v3) get legacy message sets: magic 1 for Produce v2,
/// magic 0 for v0 and v1; record headers need Produce v3 and zstd Produce v7.
///
/// ```no_run
/// use kafka_group::{Acks, ProducerRecord};
/// use kafka_group::Client;
///
/// let client = Client::builder().bootstrap_servers("localhost:9092").build()?;
/// let mut producer = client.producer().acks(Acks::All).build()?;
/// let handle = producer.send(ProducerRecord::new("events", "hello").key("user-1"))?;
/// producer.flush()?;
/// // flush returned Ok: every record sent before it was written.
/// if let Some(Ok(written)) = handle.try_result() {
///     println!("{}-{} at offset {:?}", written.topic, written.partition, written.offset);
/// }
/// # Ok::<(), kafka_group::Error>(())
/// ```
#[derive(Debug)]
pub struct Producer {
    client: Client,
    config: ProducerConfig,
    /// `retry.backoff.ms`: the producer's own, or the client's.
    retry_backoff: Duration,
    acc: Accumulator,
    broker_timeout_ms: i32,
    /// Records that failed for good since the last `flush` reported them, and the first
    /// error among them.
    failed: usize,
    first_failure: Option<Arc<Error>>,
    metadata_at: Option<Instant>,
    /// Creation time of the oldest pending batch (for `linger.ms`), maybe earlier than true.
    oldest: Option<Instant>,
}

impl Producer {
    /// Starts building a producer on `client`; the same as [`Client::producer`].
    pub fn builder(client: &Client) -> ProducerBuilder {
        ProducerBuilder::new(client)
    }

    /// Records sent and not yet acknowledged (or failed).
    pub fn pending(&self) -> usize {
        self.acc.pending
    }

    /// Appends `record` to its partition's batch and returns its [`DeliveryHandle`] (Java's
    /// `KafkaProducer::send` returning a `Future<RecordMetadata>`; rdkafka's `send_result`).
    /// Blocks only to fetch a topic's metadata the first time (up to `max.block.ms`) and, when
    /// a batch becomes full (or `linger.ms` has passed), to send batches and wait for their
    /// acknowledgements, with retries; what becomes of those batches goes to their records'
    /// handles (and to the next [`flush`](Self::flush)), never to this call.
    ///
    /// An error means this record was refused before it was queued (nothing of it is sent and
    /// it has no handle): a topic name Kafka cannot have, a record larger than
    /// `max.request.size` ([`Error::RecordTooLarge`]), a partition the topic does not have, or
    /// a topic whose metadata did not come within `max.block.ms` (it does not exist, or the
    /// principal may not describe it: [`Error::Authorization`] from Metadata). Java reports
    /// these through the future; rdkafka, like this call, at once.
    pub fn send(&mut self, record: ProducerRecord) -> Result<DeliveryHandle> {
        let size = record.size();
        if size + SINGLE_BATCH_OVERHEAD > self.config.max_request_size {
            return Err(Error::RecordTooLarge {
                topic: record.topic,
                size,
                max: self.config.max_request_size,
                property: "max.request.size",
            });
        }
        if !self.acc.topics.contains_key(&record.topic) {
            // Before any request: a name Kafka cannot have would only come back as a broker
            // error after max.block.ms of metadata retries.
            crate::names::check_topic("ProducerRecord::topic", &record.topic)?;
            self.add_topic(&record.topic)?;
        }
        let now = Instant::now();
        let (_, closed, handle) = self.acc.append(record, size, now)?;
        if self.oldest.is_none() {
            self.oldest = Some(now);
        }
        if closed {
            self.ship(true);
        } else if !self.config.linger.is_zero()
            && self
                .oldest
                .is_some_and(|o| now.saturating_duration_since(o) >= self.config.linger)
        {
            self.ship(false);
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

    /// Sends every pending batch, one ProduceRequest per leader broker at a time, and waits for
    /// the acknowledgements, retrying as configured (Java's `KafkaProducer::flush`, rdkafka's
    /// `flush`). When it returns, every record sent before it has its result in its
    /// [`DeliveryHandle`].
    ///
    /// Returns [`Error::Delivery`] when any record since the previous `flush` failed for good
    /// (including records of batches that a full `batch.size` sent during `send`): how many,
    /// and the first error; each record's own error is in its handle. The other batches have
    /// been sent all the same.
    pub fn flush(&mut self) -> Result<()> {
        self.ship(false);
        match self.first_failure.take() {
            Some(first) => Err(Error::Delivery {
                failed: std::mem::take(&mut self.failed),
                first,
            }),
            None => Ok(()),
        }
    }

    /// Flushes and drops the producer (the client and its connections stay).
    pub fn close(mut self) -> Result<()> {
        self.flush()
    }

    /// Fetches a topic's metadata, waiting up to `max.block.ms` for it to exist with leaders.
    fn add_topic(&mut self, topic: &str) -> Result<()> {
        let deadline = crate::deadline::after(self.config.max_block);
        // At least 10 ms apart, whatever retry.backoff.ms says, not to spin on the metadata.
        let backoff = Backoff::fixed(self.retry_backoff.max(Duration::from_millis(10)));
        // `max.block.ms` ends with the last answer itself (e.g. UNKNOWN_TOPIC_OR_PARTITION, which
        // a caller can match on), not a timeout around it; `what` serves only if there is none.
        let what = || format!("waiting for the metadata of topic {topic}");
        retry_or_last(deadline, backoff, what, || {
            // Each lookup ends by `max.block.ms` too, not a whole request.timeout.ms after it.
            let e = match self.client.refresh_metadata_by(Some(&[topic]), deadline) {
                Ok(meta) => {
                    self.metadata_at = Some(Instant::now());
                    match meta.topics.get(topic) {
                        Some(t) if !t.error.is_error() && !t.partitions.is_empty() => {
                            // The other topics first: `update` would apply this one again.
                            self.acc.update(&meta);
                            self.acc.add_topic(t, &meta);
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
                    }
                }
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
        })
    }

    /// Refreshes the metadata of every topic with pending records; a failure is logged and the
    /// old metadata kept (the next round retries).
    fn refresh(&mut self) {
        let names: Vec<&str> = self.acc.topics.keys().map(String::as_str).collect();
        match self.client.refresh_metadata(Some(&names)) {
            Ok(meta) => {
                self.metadata_at = Some(Instant::now());
                self.acc.update(&meta);
            }
            Err(e) => log::debug!("producer: metadata refresh failed: {e}"),
        }
    }

    /// Sends batches until none is left (a flush) or, with `only_closed`, until no closed batch
    /// is left. Each batch's result goes to its handles; failures are also counted for `flush`.
    fn ship(&mut self, only_closed: bool) {
        loop {
            if !self
                .metadata_at
                .is_some_and(|at| at.elapsed() < self.config.metadata_max_age)
            {
                self.refresh();
            }
            let now = Instant::now();
            for (tp, mut b) in self.acc.expire(self.config.delivery_timeout, now) {
                let what = format!(
                    "Produce of {} record(s) to {tp}: delivery.timeout.ms ({} ms) passed after {} attempt(s)",
                    b.records.len(),
                    self.config.delivery_timeout.as_millis(),
                    b.attempts
                );
                let last = b
                    .last_error
                    .take()
                    .unwrap_or_else(|| LastError::Other("never acknowledged".into()));
                self.fail(&b, &failure(last.into_timeout(what)));
            }
            if only_closed && !self.acc.has_closed() {
                break;
            }
            if self.acc.oldest().is_none() {
                break;
            }
            let (plan, leaderless, wake) = self.acc.plan(only_closed, now);
            if plan.is_empty() {
                if leaderless {
                    self.refresh();
                }
                // Never past the oldest batch's delivery.timeout.ms, which a retry.backoff.ms
                // longer than it would otherwise sleep through.
                let expiry = self
                    .acc
                    .oldest()
                    .map(|o| crate::deadline::at(o, self.config.delivery_timeout));
                let until = wake.unwrap_or_else(|| crate::deadline::at(now, self.retry_backoff));
                let until = expiry.map_or(until, |e| until.min(e));
                let pause = until
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1));
                std::thread::sleep(pause);
                continue;
            }
            let (works, refused, unreachable) = self.prepare(plan);
            for (tps, e) in refused {
                let e = failure(e);
                for tp in &tps {
                    if let Some(b) = self.acc.pop(tp) {
                        self.fail(&b, &e);
                    }
                }
                for tp in tps.iter().skip(1) {
                    log::warn!("producer: {tp}: failed for the same reason");
                }
            }
            let mut refresh = leaderless;
            for (tp, why) in unreachable {
                refresh |= self.settle(
                    &tp,
                    Outcome::Retry {
                        refresh: true,
                        error: why,
                    },
                );
            }
            for sent in sender::execute(&self.client, self.config.acks, works) {
                let (tps, result) = match sent {
                    Sent::Answered(tps, result) => (tps, result),
                    Sent::Skipped(tps, why) => {
                        for tp in &tps {
                            refresh |= self.settle(
                                tp,
                                Outcome::Retry {
                                    refresh: true,
                                    error: why.clone(),
                                },
                            );
                        }
                        continue;
                    }
                };
                match result {
                    Ok(Some(resp)) => {
                        if resp.throttle_time_ms > 0 {
                            log::debug!("producer: throttled for {} ms", resp.throttle_time_ms);
                        }
                        for (tp, o) in tps.iter().zip(outcomes(&resp, &tps)) {
                            refresh |= self.settle(tp, o);
                        }
                    }
                    Ok(None) => {
                        // acks=0: written, as far as anyone will know, at no known offset.
                        for tp in &tps {
                            self.settle(
                                tp,
                                Outcome::Acked {
                                    base_offset: -1,
                                    log_append_time: -1,
                                },
                            );
                        }
                    }
                    Err(e) if e.is_unreachable() => {
                        for tp in &tps {
                            refresh |= self.settle(
                                tp,
                                Outcome::Retry {
                                    refresh: true,
                                    error: LastError::of(&e),
                                },
                            );
                        }
                    }
                    Err(e) => {
                        // Not about one partition (an unsupported version, an encoding
                        // error): every batch of the request fails with it.
                        let e = failure(e);
                        for tp in &tps {
                            if let Some(b) = self.acc.pop(tp) {
                                self.fail(&b, &e);
                            }
                        }
                    }
                }
            }
            if refresh {
                self.refresh();
            }
        }
        self.oldest = self.acc.oldest();
    }

    /// Settles a batch that failed for good: its records' handles get `e`, and `flush` will
    /// report it.
    fn fail(&mut self, b: &Batch, e: &Arc<Error>) {
        b.delivery.failed(Arc::clone(e));
        self.failed += b.records.len();
        if self.first_failure.is_none() {
            self.first_failure = Some(Arc::clone(e));
        }
    }

    /// Applies one partition's outcome; returns whether the metadata should be refreshed.
    fn settle(&mut self, tp: &TopicPartition, outcome: Outcome) -> bool {
        match outcome {
            Outcome::Acked {
                base_offset,
                log_append_time,
            } => {
                if let Some(b) = self.acc.pop(tp) {
                    b.delivery.acked(base_offset, log_append_time);
                }
                false
            }
            Outcome::Failed(e) => {
                if let Some(b) = self.acc.pop(tp) {
                    self.fail(&b, &failure(e));
                }
                false
            }
            Outcome::Retry { refresh, error } => {
                let retries = self.config.retries;
                let backoff = self.retry_backoff;
                let Some(b) = self.acc.front_mut(tp) else {
                    return refresh;
                };
                b.attempts += 1;
                log::debug!("producer: {tp} attempt {} failed: {error}; retrying", b.attempts);
                if b.attempts > retries {
                    let attempts = b.attempts;
                    let e = match error {
                        LastError::Code(code, message) => produce_error(tp, code, message),
                        other => other.into_timeout(format!(
                            "Produce to {tp}: {attempts} attempt(s) failed ({retries} retries allowed)"
                        )),
                    };
                    if let Some(b) = self.acc.pop(tp) {
                        self.fail(&b, &failure(e));
                    }
                    return false;
                }
                b.retry_at = Some(crate::deadline::after(backoff));
                b.last_error = Some(error);
                refresh
            }
        }
    }

    /// Encodes the planned batches for each leader's Produce version and packs them into
    /// requests of at most `max.request.size`. Batches that cannot be sent to that broker at
    /// all (headers to a pre-0.11 broker, …) come back as errors, still queued; so do the
    /// batches of a broker that cannot be reached for its versions, to be retried.
    fn prepare(&mut self, plan: Plan) -> Prepared {
        let mut works = Vec::new();
        let mut refused = Vec::new();
        let mut unreachable = Vec::new();
        let conn = self.client.connection_config();
        for (leader, tps) in plan {
            let versions: Result<(i16, BrokerVersions)> = self
                .client
                .broker_versions_for(Purpose::Produce, leader)
                .and_then(|bv| conn.pick_version(ApiKey::Produce, &bv).map(|v| (v, bv)));
            let (version, bv) = match versions {
                Ok(v) => v,
                Err(e) if e.is_unreachable() => {
                    let why = LastError::of(&e);
                    unreachable.extend(tps.into_iter().map(|tp| (tp, why.clone())));
                    continue;
                }
                Err(e) => {
                    // No Produce version in common: nothing will change that. One error for
                    // all of the broker's partitions, as only the first error is returned.
                    refused.push((tps, e));
                    continue;
                }
            };
            let magic = magic_for(version);
            let compression = self.config.compression;
            let mut encoded: Vec<(TopicPartition, Bytes)> = Vec::new();
            for tp in tps {
                match self.acc.encode_front(&tp, compression, magic, &bv) {
                    Some(Ok(bytes)) => encoded.push((tp, bytes)),
                    Some(Err(e)) => refused.push((vec![tp], e)),
                    None => {}
                }
            }
            let requests = pack(
                encoded,
                self.config.max_request_size,
                self.config.acks,
                self.broker_timeout_ms,
            );
            if !requests.is_empty() {
                works.push(Work {
                    leader,
                    version,
                    requests,
                });
            }
        }
        (works, refused, unreachable)
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        if self.acc.pending > 0 {
            log::warn!(
                "producer dropped with {} record(s) not acknowledged; call flush() or close() first",
                self.acc.pending
            );
        }
    }
}

/// Logs a final failure (once, whatever the number of batches it fails) and makes it
/// shareable by their handles.
fn failure(e: Error) -> Arc<Error> {
    log::warn!("producer: {e}");
    Arc::new(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Compression;
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
    use crate::protocol::messages::{MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse};

    /// A scripted broker 0 leading every partition of topic `t`, which has `partitions`.
    fn script_with_topic(partitions: i32) -> Script {
        let script = Script::new();
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
                        error_code: if p.index == 1 {
                            KafkaCode::MessageTooLarge.code()
                        } else {
                            0
                        },
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
        script.on::<ProduceRequest>(|req, _| Answer::Reply(answer_p0_written_p1_too_large(req)));
        let client = scripted_client(&script);
        let mut p = client.producer().build().unwrap();
        let to = |partition| ProducerRecord::new("t", "v").partition(partition).timestamp(7);
        let ok: Vec<DeliveryHandle> = (0..3).map(|_| p.send(to(0)).unwrap()).collect();
        let bad: Vec<DeliveryHandle> = p.send_many([to(1), to(1)]).unwrap();
        assert!(ok.iter().chain(&bad).all(|h| !h.is_done()), "nothing sent yet");
        assert_eq!(bad[0].topic_partition(), &TopicPartition::new("t", 1));
        let first = match p.flush() {
            Err(Error::Delivery { failed: 2, first }) => first,
            other => panic!("{other:?}"),
        };
        assert_eq!(first.kafka_code(), Some(KafkaCode::MessageTooLarge));
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

    #[test]
    fn a_failure_while_send_ships_full_batches_reaches_the_handle_and_the_next_flush() {
        let script = script_with_topic(2);
        script.on::<ProduceRequest>(|req, _| Answer::Reply(answer_p0_written_p1_too_large(req)));
        let client = scripted_client(&script);
        // batch.size 0: every record fills its batch, so send itself sends it.
        let mut p = client.producer().batch_size(0).build().unwrap();
        let bad = p.send(ProducerRecord::new("t", "v").partition(1)).unwrap();
        assert!(bad.is_done(), "sent during send");
        let good = p.send(ProducerRecord::new("t", "v").partition(0)).unwrap();
        assert_eq!(good.try_result().unwrap().unwrap().offset, Some(100));
        let e = bad.try_result().unwrap().unwrap_err();
        assert_eq!(e.kafka_code(), Some(KafkaCode::MessageTooLarge));
        match p.flush() {
            Err(Error::Delivery { failed: 1, first }) => assert!(Arc::ptr_eq(&first, &e)),
            other => panic!("not reported by flush: {other:?}"),
        }
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
        let mut p = client.producer().build().unwrap();
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
        let mut p = client
            .producer()
            .max_block(Duration::from_millis(300))
            .build()
            .unwrap();
        let t = Instant::now();
        let e = p.send(ProducerRecord::new("t", b"v".to_vec())).unwrap_err();
        let took = t.elapsed();
        // request.timeout.ms is 30 s: one lookup waiting it out would take that long.
        assert!(took < Duration::from_millis(1500), "send took {took:?}: {e}");
        assert!(e.is_unreachable(), "{e}");
    }

    #[test]
    fn configuration_is_checked_before_any_network_call() {
        let p = builder().build().unwrap();
        assert_eq!(p.config.acks, Acks::All);
        assert_eq!(p.config.compression, Compression::None);
        assert_eq!(p.config.batch_size, 16384);
        assert_eq!(p.config.linger, Duration::ZERO);
        assert_eq!(p.config.delivery_timeout, Duration::from_secs(120));
        assert_eq!(p.config.max_request_size, 1 << 20);
        assert_eq!(p.retry_backoff, Duration::from_millis(100));
        // 90% of the client's 30 s request.timeout.ms.
        assert_eq!(p.broker_timeout_ms, 27_000);
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
            .delivery_timeout(Duration::from_secs(30))
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
            client.producer().build().unwrap().retry_backoff,
            Duration::from_millis(250)
        );
        let p = client
            .producer()
            .retry_backoff(Duration::from_millis(7))
            .build()
            .unwrap();
        assert_eq!(p.retry_backoff, Duration::from_millis(7));
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
            p.config.batch_limit(),
            1000 - REQUEST_OVERHEAD - PARTITION_OVERHEAD - crate::records::BATCH_HEADER
        );
    }
}
