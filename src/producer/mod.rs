//! The [`Producer`]; its behaviour is documented there.
//!
//! Inside, one file a job: `record` ([`ProducerRecord`], [`Acks`]), `partitioner` (murmur2),
//! `config` and `builder` (settings, checked before any network call), `accumulator` (pending
//! batches per partition, sticky partitions, the plan of what goes to which leader; pure),
//! `request` (Produce requests packed below `max.request.size` and answers read per
//! partition; pure), `sender` (each leader's requests on the network). This file ties them
//! together: send, flush, retries.

mod accumulator;
mod builder;
mod config;
mod partitioner;
mod record;
mod request;
mod sender;

pub use builder::ProducerBuilder;
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
use accumulator::{Accumulator, Plan};
use bytes::Bytes;
use config::{ProducerConfig, SINGLE_BATCH_OVERHEAD};
use request::{outcomes, pack, produce_error, LastError, Outcome};
use sender::{Sent, Work};
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
/// Brokers before 0.11 (Produce below v3) get legacy message sets: magic 1 for Produce v2,
/// magic 0 for v0 and v1; record headers need Produce v3 and zstd Produce v7.
///
/// ```no_run
/// use kafka_group::{Acks, ProducerRecord};
/// use kafka_group::Client;
///
/// let client = Client::builder().bootstrap_servers("localhost:9092").build()?;
/// let mut producer = client.producer().acks(Acks::All).build()?;
/// producer.send(ProducerRecord::new("events", "hello").key("user-1"))?;
/// for (tp, offset) in producer.flush()? {
///     println!("{}-{} starts at {offset}", tp.topic, tp.partition);
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
    /// Base offsets acknowledged since the last `flush` returned them.
    acked: Vec<(TopicPartition, i64)>,
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

    /// Appends `record` to its partition's batch. Blocks only to fetch a topic's metadata the
    /// first time (up to `max.block.ms`) and, when a batch becomes full (or `linger.ms` has
    /// passed), to send batches and wait for their acknowledgements, with retries.
    ///
    /// An error from those sends reports a batch that failed for good; its records (which may
    /// include this one) are dropped, the rest stay pending.
    pub fn send(&mut self, record: ProducerRecord) -> Result<()> {
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
        let (_, closed) = self.acc.append(record, size, now)?;
        if self.oldest.is_none() {
            self.oldest = Some(now);
        }
        if closed {
            self.ship(true)?;
        } else if !self.config.linger.is_zero()
            && self
                .oldest
                .is_some_and(|o| now.saturating_duration_since(o) >= self.config.linger)
        {
            self.ship(false)?;
        }
        Ok(())
    }

    /// [`send`](Self::send)s each record in turn, stopping at the first error.
    pub fn send_many(&mut self, records: impl IntoIterator<Item = ProducerRecord>) -> Result<()> {
        records.into_iter().try_for_each(|r| self.send(r))
    }

    /// Sends every pending batch, one ProduceRequest per leader broker at a time, and waits for
    /// the acknowledgements, retrying as configured. Returns the base offset of every batch
    /// acknowledged since the last `flush` (including batches a full `batch.size` sent during
    /// `send`), in acknowledgement order; nothing with `acks=0`.
    ///
    /// On error (the first batch that failed for good), the other batches have still been
    /// sent; their offsets are returned by the next `flush`.
    pub fn flush(&mut self) -> Result<Vec<(TopicPartition, i64)>> {
        self.ship(false)?;
        Ok(std::mem::take(&mut self.acked))
    }

    /// Flushes and drops the producer (the client and its connections stay). Use `flush`
    /// first for the offsets.
    pub fn close(mut self) -> Result<()> {
        self.flush().map(|_| ())
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
    /// is left. Returns the first error a batch failed with, after all the others are done.
    fn ship(&mut self, only_closed: bool) -> Result<()> {
        let mut first: Option<Error> = None;
        loop {
            if !self
                .metadata_at
                .is_some_and(|at| at.elapsed() < self.config.metadata_max_age)
            {
                self.refresh();
            }
            let now = Instant::now();
            for (tp, b) in self.acc.expire(self.config.delivery_timeout, now) {
                let what = format!(
                    "Produce of {} record(s) to {tp}: delivery.timeout.ms ({} ms) passed after {} attempt(s)",
                    b.records.len(),
                    self.config.delivery_timeout.as_millis(),
                    b.attempts
                );
                let last = b
                    .last_error
                    .unwrap_or_else(|| LastError::Other("never acknowledged".into()));
                note_failure(last.into_timeout(what), &mut first);
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
                for tp in &tps {
                    self.acc.pop(tp);
                }
                note_failure(e, &mut first);
                for tp in tps.iter().skip(1) {
                    log::warn!("producer: {tp}: dropped for the same reason");
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
                    &mut first,
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
                                &mut first,
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
                            refresh |= self.settle(tp, o, &mut first);
                        }
                    }
                    Ok(None) => {
                        for tp in &tps {
                            self.settle(tp, Outcome::Acked(-1), &mut first);
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
                                &mut first,
                            );
                        }
                    }
                    Err(e) => {
                        // Not about one partition (an unsupported version, an encoding
                        // error): every batch of the request fails with it.
                        for tp in &tps {
                            self.acc.pop(tp);
                        }
                        note_failure(e, &mut first);
                    }
                }
            }
            if refresh {
                self.refresh();
            }
        }
        self.oldest = self.acc.oldest();
        first.map_or(Ok(()), Err)
    }

    /// Applies one partition's outcome; returns whether the metadata should be refreshed.
    fn settle(&mut self, tp: &TopicPartition, outcome: Outcome, first: &mut Option<Error>) -> bool {
        match outcome {
            Outcome::Acked(base) => {
                if self.acc.pop(tp).is_some() && base >= 0 {
                    self.acked.push((tp.clone(), base));
                }
                false
            }
            Outcome::Failed(e) => {
                self.acc.pop(tp);
                note_failure(e, first);
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
                    self.acc.pop(tp);
                    note_failure(e, first);
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

/// Logs a batch's final failure and keeps it if it is the first.
fn note_failure(e: Error, first: &mut Option<Error>) {
    log::warn!("producer: {e}");
    if first.is_none() {
        *first = Some(e);
    }
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

    #[test]
    fn a_produce_that_keeps_losing_its_connection_fails_with_the_io_error_as_its_cause() {
        use crate::net::script::{Answer, Script};
        use crate::protocol::messages::metadata_response::{
            MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
        };
        use crate::protocol::messages::{MetadataRequest, MetadataResponse, ProduceRequest};
        let script = Script::new();
        script.on::<MetadataRequest>(|_, _| {
            Answer::Reply(MetadataResponse {
                brokers: vec![MetadataResponseBroker {
                    node_id: 0,
                    host: "b0".into(),
                    port: 9092,
                    ..Default::default()
                }],
                topics: vec![MetadataResponseTopic {
                    name: Some("t".into()),
                    partitions: vec![MetadataResponsePartition {
                        partition_index: 0,
                        leader_id: 0,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            })
        });
        script.on::<ProduceRequest>(|_, _| Answer::Fail(std::io::ErrorKind::ConnectionReset));
        let client = script
            .client(
                Client::builder()
                    .bootstrap_servers("b0:9092")
                    .reconnect_backoff(Duration::from_millis(1))
                    .retry_backoff(Duration::from_millis(1)),
            )
            .unwrap();
        let mut p = client.producer().retries(2).build().unwrap();
        p.send(ProducerRecord::new("t", b"v".to_vec()).partition(0))
            .unwrap();
        let e = p.flush().unwrap_err();
        assert!(e.to_string().contains("3 attempt(s) failed"), "{e}");
        let source = std::error::Error::source(&e).expect("the lost connection is the cause");
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
        use crate::net::script::{Answer, Script};
        use crate::protocol::messages::{MetadataRequest, MetadataResponse};
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
