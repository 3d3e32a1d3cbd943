//! A simple, blocking [`Producer`]: enough for batch jobs, tests and demos.
//!
//! [`Producer::send`] only appends a record to its partition's pending batch; the network is
//! touched when a batch reaches `batch.size` (then every pending batch led by the same broker
//! goes out in one ProduceRequest, the way Java's sender drains a ready node), when `linger.ms`
//! has passed, and at [`Producer::flush`], which sends everything and waits for the
//! acknowledgements. Requests to different brokers run in parallel, one per broker at a time;
//! a partition never has more than one batch in flight, so records of a partition are written
//! in the order they were sent, retries included.
//!
//! Partitioning follows Java's default partitioner: an explicit partition wins, a key picks
//! `toPositive(murmur2(key)) % partitions` (so the same key lands on the same partition as
//! with the Java client), and records without a key stick to one available partition until
//! its batch is full (KIP-480).
//!
//! Errors are handled per partition: `NOT_LEADER_OR_FOLLOWER`, `LEADER_NOT_AVAILABLE`,
//! `UNKNOWN_TOPIC_OR_PARTITION` (and the other codes Kafka marks as stale metadata) refresh the
//! metadata and retry; other retriable codes retry after `retry.backoff.ms`; both stop at
//! `retries` or `delivery.timeout.ms`. A lost connection also refreshes and retries. Delivery
//! is at least once: a batch whose acknowledgement was lost is sent again (idempotence, which
//! needs InitProducerId, is not implemented).
//!
//! Brokers before 0.11 (Produce below v3) get legacy message sets: magic 1 for Produce v2,
//! magic 0 for v0 and v1; record headers need Produce v3 and zstd Produce v7.
//!
//! ```no_run
//! use kafka_group::producer::{Acks, ProducerRecord};
//! use kafka_group::Client;
//!
//! let client = Client::builder().bootstrap_servers("localhost:9092").build()?;
//! let mut producer = client.producer().acks(Acks::All).build()?;
//! producer.send(ProducerRecord::new("events", "hello").key("user-1"))?;
//! for (tp, offset) in producer.flush()? {
//!     println!("{}-{} starts at {offset}", tp.topic, tp.partition);
//! }
//! # Ok::<(), kafka_group::Error>(())
//! ```

use crate::authorization::Scope;
use crate::client::{topic_denied, Client, Metadata, TopicMetadata};
use crate::error::{Error, Result};
use crate::group::TopicPartition;
use crate::net::link::Purpose;
use crate::net::versions::{self, BrokerVersions, Capability};
use crate::protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use crate::protocol::messages::{ProduceRequest, ProduceResponse};
use crate::protocol::ApiKey;
use crate::records::{self, Compression, NewRecord};
use crate::KafkaCode;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::time::{Duration, Instant};

/// Record headers exist from the record batch format (magic 2), which Produce v3 brings.
pub const RECORD_HEADERS: Capability = Capability {
    name: "record headers",
    needs: &[(ApiKey::Produce, 3)],
};

/// zstd compression (KIP-110) needs Produce v7.
pub const ZSTD_COMPRESSION: Capability = Capability {
    name: "zstd compression",
    needs: &[(ApiKey::Produce, 7)],
};

/// Bytes a record adds to a batch beyond its key, value and headers: in a record batch the
/// length, attributes, timestamp and offset deltas, key and value lengths and header count are
/// varints, at most about 21 bytes together for records below 2 MiB.
const RECORD_OVERHEAD: usize = 21;
/// Per header, its key and value length varints.
const HEADER_OVERHEAD: usize = 6;
/// A record batch's header (magic 2).
const BATCH_OVERHEAD: usize = records::BATCH_HEADER;
/// A ProduceRequest's fixed part (request header with a client id, acks, timeout, counts), and
/// per partition the topic name, index and records length; used to keep requests below
/// `max.request.size`.
const REQUEST_OVERHEAD: usize = 128;
const PARTITION_OVERHEAD: usize = 16;
/// A request carrying a single batch, records aside: what `max.request.size` leaves for them.
const SINGLE_BATCH_OVERHEAD: usize = REQUEST_OVERHEAD + PARTITION_OVERHEAD + BATCH_OVERHEAD;

/// `acks`: how many replicas must have a batch before the broker acknowledges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Acks {
    /// `acks=all` (-1): every in-sync replica. The default.
    #[default]
    All,
    /// `acks=1`: the leader only; records are lost if it fails before followers copy them.
    Leader,
    /// `acks=0`: no acknowledgement at all; the broker sends no response, so no offsets are
    /// reported and broker-side errors go unnoticed: records a broker refuses (e.g. for a
    /// partition it does not lead, as right after a topic is created) are dropped, and the
    /// broker only closes the connection.
    None,
}

impl Acks {
    /// The value sent in ProduceRequest's `acks`.
    pub fn code(self) -> i16 {
        match self {
            Acks::All => -1,
            Acks::Leader => 1,
            Acks::None => 0,
        }
    }
}

impl fmt::Display for Acks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Acks::All => "all",
            Acks::Leader => "1",
            Acks::None => "0",
        })
    }
}

/// A record to send.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProducerRecord {
    /// Topic.
    pub topic: String,
    /// Partition; `None` lets the partitioner choose from the key.
    pub partition: Option<i32>,
    /// Key, if any (decides the partition when `partition` is `None`).
    pub key: Option<Bytes>,
    /// Value; `None` is a tombstone.
    pub value: Option<Bytes>,
    /// Headers, in order (brokers from 0.11).
    pub headers: Vec<(String, Option<Bytes>)>,
    /// Create time in milliseconds since the epoch; `None` takes the time of `send`.
    pub timestamp: Option<i64>,
}

impl ProducerRecord {
    /// A record with a value and no key.
    pub fn new(topic: impl Into<String>, value: impl Into<Bytes>) -> Self {
        ProducerRecord {
            topic: topic.into(),
            value: Some(value.into()),
            ..Default::default()
        }
    }

    /// Sets the key.
    pub fn key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sends to this partition, whatever the key.
    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Adds a header.
    pub fn header(mut self, key: impl Into<String>, value: impl Into<Bytes>) -> Self {
        self.headers.push((key.into(), Some(value.into())));
        self
    }

    /// Sets the create time (milliseconds since the epoch).
    pub fn timestamp(mut self, ms: i64) -> Self {
        self.timestamp = Some(ms);
        self
    }

    /// An estimate of the record's size in a record batch, for `batch.size` and
    /// `max.request.size`.
    fn size(&self) -> usize {
        let len = |b: &Option<Bytes>| b.as_ref().map_or(0, Bytes::len);
        RECORD_OVERHEAD
            + len(&self.key)
            + len(&self.value)
            + self
                .headers
                .iter()
                .map(|(k, v)| HEADER_OVERHEAD + k.len() + len(v))
                .sum::<usize>()
    }
}

/// Kafka's `Utils.murmur2`: the 32-bit MurmurHash2 with seed `0x9747b28c`, exactly as the Java
/// client computes it to partition keyed records.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    // Java's int arithmetic wraps, and `>>>` is a logical shift: u32 does both.
    let mut h: u32 = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition Java's default partitioner gives `key` in a topic of `partitions` partitions:
/// `toPositive(murmur2(key)) % partitions` (all partitions, available or not, so a key's
/// partition does not move while a leader is down).
pub fn key_partition(key: &[u8], partitions: i32) -> i32 {
    // toPositive masks the sign bit rather than taking abs(), so i32::MIN maps to 0.
    (murmur2(key) & 0x7fff_ffff) % partitions.max(1)
}

/// The producer's settings; see the setters of [`ProducerBuilder`].
#[derive(Debug, Clone)]
struct Config {
    acks: Acks,
    compression: Compression,
    linger: Duration,
    batch_size: usize,
    retries: u32,
    delivery_timeout: Duration,
    retry_backoff: Duration,
    max_request_size: usize,
    max_block: Duration,
    metadata_max_age: Duration,
}

/// Builds a [`Producer`]; every setter names the Kafka property it mirrors and its default.
#[derive(Debug, Clone)]
pub struct ProducerBuilder {
    client: Client,
    config: Config,
}

impl ProducerBuilder {
    /// `acks`. Default [`Acks::All`].
    pub fn acks(mut self, acks: Acks) -> Self {
        self.config.acks = acks;
        self
    }

    /// `compression.type`. Default none.
    pub fn compression(mut self, compression: Compression) -> Self {
        self.config.compression = compression;
        self
    }

    /// `linger.ms`: when above zero, a `send` that finds a batch waiting longer than this sends
    /// every pending batch. Default 0: since `send` does not block on the network, records
    /// accumulate between calls and go out when a batch reaches `batch.size` or at `flush`.
    /// At most `delivery.timeout.ms` - `request.timeout.ms`.
    pub fn linger(mut self, t: Duration) -> Self {
        self.config.linger = t;
        self
    }

    /// `batch.size`: bytes (uncompressed, estimated) per partition batch; a full batch is sent
    /// at once. 0 sends every record on its own. Default 16384.
    pub fn batch_size(mut self, bytes: usize) -> Self {
        self.config.batch_size = bytes;
        self
    }

    /// `retries`: how often a batch is retried after a retriable error, within
    /// `delivery.timeout.ms`. Default 2147483647 (only the timeout limits retries).
    pub fn retries(mut self, n: u32) -> Self {
        self.config.retries = n;
        self
    }

    /// `delivery.timeout.ms`: the longest a record may take from `send` to its
    /// acknowledgement, retries included; must be at least `linger.ms` + `request.timeout.ms`
    /// and at most `i32::MAX` ms (about 24.8 days), as in Kafka. Default 120 s.
    pub fn delivery_timeout(mut self, t: Duration) -> Self {
        self.config.delivery_timeout = t;
        self
    }

    /// `retry.backoff.ms`: pause before retrying a batch. Default: the client's (100 ms); a pause
    /// never outlasts the batch's `delivery.timeout.ms`.
    pub fn retry_backoff(mut self, t: Duration) -> Self {
        self.config.retry_backoff = t;
        self
    }

    /// `max.request.size`: the largest request (and so record) sent. Default 1048576.
    pub fn max_request_size(mut self, bytes: usize) -> Self {
        self.config.max_request_size = bytes;
        self
    }

    /// `max.block.ms`: how long `send` waits for a topic's metadata (e.g. a topic just
    /// created) before failing. Default 60 s; `Duration::MAX` waits without a limit.
    pub fn max_block(mut self, t: Duration) -> Self {
        self.config.max_block = t;
        self
    }

    /// `metadata.max.age.ms`: metadata older than this is refreshed before sending, so new
    /// partitions and moved leaders are picked up without an error. Default 5 min; above zero
    /// (`Duration::MAX`: never by age).
    pub fn metadata_max_age(mut self, t: Duration) -> Self {
        self.config.metadata_max_age = t;
        self
    }

    /// Validates the configuration (without touching the network) and builds the producer.
    /// `request.timeout.ms` is the client's.
    pub fn build(self) -> Result<Producer> {
        let c = &self.config;
        let request_timeout = self.client.connection_config().request_timeout;
        if c.max_request_size == 0 || c.max_request_size > i32::MAX as usize {
            return Err(Error::Config {
                property: "max.request.size",
                problem: format!("must be in 1..={}", i32::MAX),
            });
        }
        if c.batch_size > i32::MAX as usize {
            return Err(Error::Config {
                property: "batch.size",
                problem: format!("must be at most {}", i32::MAX),
            });
        }
        crate::deadline::check_int_ms("delivery.timeout.ms", c.delivery_timeout)?;
        if c.delivery_timeout < c.linger.saturating_add(request_timeout) {
            return Err(Error::Config {
                property: "delivery.timeout.ms",
                problem: format!(
                    "must be at least linger.ms + request.timeout.ms ({} ms), so that one attempt fits",
                    c.linger.saturating_add(request_timeout).as_millis()
                ),
            });
        }
        if c.metadata_max_age.is_zero() {
            return Err(Error::Config {
                property: "metadata.max.age.ms",
                problem: "must be greater than zero".into(),
            });
        }
        // The broker's own wait for replicas is kept below ours, so that its REQUEST_TIMED_OUT
        // answer (retriable, connection kept) arrives before our response timeout fires (which
        // closes the connection).
        let broker_timeout = request_timeout.saturating_sub(request_timeout / 10);
        Ok(Producer {
            client: self.client,
            acc: Accumulator::new(batch_limit(&self.config)),
            broker_timeout_ms: broker_timeout.as_millis().min(i32::MAX as u128) as i32,
            config: self.config,
            acked: Vec::new(),
            metadata_at: None,
            oldest: None,
        })
    }
}

/// The most a batch holds: `batch.size`, but never so much that one batch alone would break
/// `max.request.size`.
fn batch_limit(c: &Config) -> usize {
    c.batch_size
        .min(c.max_request_size.saturating_sub(SINGLE_BATCH_OVERHEAD))
}

impl Client {
    /// Starts building a [`Producer`] on this client.
    pub fn producer(&self) -> ProducerBuilder {
        Producer::builder(self)
    }
}

/// Why a batch failed for the last time, kept to report it when retries run out.
#[derive(Debug, Clone)]
enum LastError {
    Code(KafkaCode, Option<String>),
    Other(String),
}

impl fmt::Display for LastError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LastError::Code(code, Some(m)) if !m.is_empty() => write!(f, "{code}: {m}"),
            LastError::Code(code, _) => write!(f, "{code}"),
            LastError::Other(m) => f.write_str(m),
        }
    }
}

/// Records for one partition that go out together as one record batch.
#[derive(Debug)]
struct Batch {
    records: Vec<NewRecord>,
    /// Estimated size, see [`ProducerRecord::size`].
    bytes: usize,
    created: Instant,
    /// Closed to appends: it reached the batch limit, or it has been sent (a retry must send
    /// exactly what the broker may already have).
    closed: bool,
    attempts: u32,
    retry_at: Option<Instant>,
    /// The encoded batch and its magic, kept so a retry sends exactly the same bytes.
    encoded: Option<(i8, Bytes)>,
    last_error: Option<LastError>,
}

impl Batch {
    fn new(now: Instant) -> Self {
        Batch {
            records: Vec::new(),
            bytes: BATCH_OVERHEAD,
            created: now,
            closed: false,
            attempts: 0,
            retry_at: None,
            encoded: None,
            last_error: None,
        }
    }

    fn has_headers(&self) -> bool {
        self.records.iter().any(|r| !r.headers.is_empty())
    }
}

/// A topic's partitions as the producer sees them. A topic can have millions of partitions and
/// a producer writes to a few at a time, so what each partition costs is its leader (4 bytes):
/// batches are kept only for the partitions that have some.
#[derive(Debug, Default)]
struct TopicState {
    /// Leader broker id by partition index; -1 while unknown.
    leaders: Vec<i32>,
    /// The pending batches of each partition with any, oldest first; only the front batch is
    /// ever in flight. An emptied queue is removed.
    queues: BTreeMap<i32, VecDeque<Batch>>,
    /// Partitions with a leader, for records without a key.
    available: Vec<i32>,
    /// Where records without a key go until that batch is full.
    sticky: Option<i32>,
}

impl TopicState {
    /// The leader of partition `p`, -1 while unknown.
    fn leader(&self, p: i32) -> i32 {
        usize::try_from(p)
            .ok()
            .and_then(|i| self.leaders.get(i))
            .copied()
            .unwrap_or(-1)
    }
}

/// What a round of sending takes: the front batch of each chosen partition, by leader.
type Plan = BTreeMap<i32, Vec<TopicPartition>>;

/// The pending batches and where they go: the pure part of the producer, tested without a
/// broker.
#[derive(Debug)]
struct Accumulator {
    topics: HashMap<String, TopicState>,
    batch_limit: usize,
    /// Records appended and not yet acknowledged or failed.
    pending: usize,
    /// Round-robin position for sticky partitions.
    rr: u32,
}

impl Accumulator {
    fn new(batch_limit: usize) -> Self {
        // A different starting partition per producer, as Java's random pick gives, so that
        // many short-lived producers do not all fill partition 0 first.
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
            ^ std::process::id();
        Accumulator {
            topics: HashMap::new(),
            batch_limit,
            pending: 0,
            rr: seed,
        }
    }

    /// Takes partition counts and leaders from `meta` for every topic it knows.
    fn update(&mut self, meta: &Metadata) {
        for (name, state) in &mut self.topics {
            if let Some(t) = meta.topics.get(name) {
                apply_topic(state, t, meta);
            }
        }
    }

    /// Registers a topic seen in `meta` (with partitions).
    fn add_topic(&mut self, t: &TopicMetadata, meta: &Metadata) {
        let state = self.topics.entry(t.name.clone()).or_default();
        apply_topic(state, t, meta);
    }

    /// Appends `r` to its partition's open batch; returns the partition and whether a batch
    /// was closed (so a request is due).
    fn append(&mut self, r: ProducerRecord, size: usize, now: Instant) -> Result<(i32, bool)> {
        let t = self.topics.get_mut(&r.topic).ok_or_else(|| Error::Kafka {
            api: ApiKey::Metadata,
            code: KafkaCode::UnknownTopicOrPartition,
            message: Some(format!("topic {} has no metadata", r.topic)),
        })?;
        let count = t.leaders.len() as i32;
        let mut p = match (r.partition, &r.key) {
            (Some(p), _) if (0..count).contains(&p) => p,
            (Some(p), _) => {
                return Err(Error::Kafka {
                    api: ApiKey::Produce,
                    code: KafkaCode::UnknownTopicOrPartition,
                    message: Some(format!(
                        "partition {p} of topic {} does not exist (it has {count})",
                        r.topic
                    )),
                })
            }
            (None, Some(k)) => key_partition(k, count),
            (None, None) => match t.sticky {
                Some(p) => p,
                None => next_sticky(t, &mut self.rr),
            },
        };
        // As Java's sticky partitioner does, a keyless record that would start a new batch goes
        // to the next sticky partition instead, closing the old batch.
        let mut closed = false;
        if r.partition.is_none() && r.key.is_none() {
            let over = t
                .queues
                .get_mut(&p)
                .and_then(|q| q.back_mut())
                .filter(|b| !b.closed && !b.records.is_empty() && b.bytes + size > self.batch_limit);
            if let Some(b) = over {
                b.closed = true;
                closed = true;
                t.sticky = None;
                p = next_sticky(t, &mut self.rr);
            }
        }
        if !(0..count).contains(&p) {
            // Only reachable with a topic of no partitions, which add_topic never registers.
            return Err(Error::NoBroker(format!("{}-{p} has no metadata", r.topic)));
        }
        let queue = t.queues.entry(p).or_default();
        let open = match queue.back_mut() {
            Some(b) if !b.closed && (b.records.is_empty() || b.bytes + size <= self.batch_limit) => b,
            other => {
                if let Some(b) = other.filter(|b| !b.closed) {
                    b.closed = true;
                    closed = true;
                }
                queue.push_back(Batch::new(now));
                queue.back_mut().ok_or(Error::Closed)?
            }
        };
        open.bytes += size;
        open.records.push(NewRecord {
            key: r.key,
            value: r.value,
            headers: r.headers,
            timestamp: Some(r.timestamp.unwrap_or_else(records::now_ms)),
        });
        if open.bytes >= self.batch_limit {
            open.closed = true;
            closed = true;
            if t.sticky == Some(p) {
                t.sticky = None;
            }
        }
        self.pending += 1;
        Ok((p, closed))
    }

    fn has_closed(&self) -> bool {
        self.topics
            .values()
            .flat_map(|t| t.queues.values())
            .any(|q| q.iter().any(|b| b.closed))
    }

    fn oldest(&self) -> Option<Instant> {
        self.topics
            .values()
            .flat_map(|t| t.queues.values())
            .filter_map(|q| q.front().map(|b| b.created))
            .min()
    }

    /// The front batch of every partition to send now, by leader: all of them for a flush; for
    /// `only_closed`, those of the brokers that lead a partition with a closed batch (full, or
    /// sent and due for a retry). Also says
    /// whether a partition has no leader (metadata is due) and the earliest pending retry.
    fn plan(&self, only_closed: bool, now: Instant) -> (Plan, bool, Option<Instant>) {
        let ready: BTreeSet<i32> = self
            .topics
            .values()
            .flat_map(|t| t.queues.iter().map(move |(p, q)| (t.leader(*p), q)))
            .filter(|(_, q)| q.iter().any(|b| b.closed))
            .map(|(leader, _)| leader)
            .collect();
        let mut plan = Plan::new();
        let mut leaderless = false;
        let mut wake: Option<Instant> = None;
        for (name, t) in &self.topics {
            for (&i, q) in &t.queues {
                let Some(b) = q.front() else { continue };
                let leader = t.leader(i);
                if only_closed && !ready.contains(&leader) {
                    continue;
                }
                if let Some(at) = b.retry_at.filter(|at| *at > now) {
                    wake = Some(wake.map_or(at, |w| w.min(at)));
                    continue;
                }
                if leader < 0 {
                    leaderless = true;
                    continue;
                }
                plan.entry(leader)
                    .or_default()
                    .push(TopicPartition::new(name.clone(), i));
            }
        }
        (plan, leaderless, wake)
    }

    fn front_mut(&mut self, tp: &TopicPartition) -> Option<&mut Batch> {
        self.topics
            .get_mut(&tp.topic)?
            .queues
            .get_mut(&tp.partition)?
            .front_mut()
    }

    /// The front batch of `tp` encoded for `magic`, and closed to appends from now on. The
    /// bytes are kept, so that a retry sends exactly what the broker may already have.
    fn encode_front(
        &mut self,
        tp: &TopicPartition,
        compression: Compression,
        magic: i8,
        bv: &BrokerVersions,
    ) -> Option<Result<Bytes>> {
        let b = self.front_mut(tp)?;
        b.closed = true;
        if let Some((m, bytes)) = &b.encoded {
            if *m == magic {
                return Some(Ok(bytes.clone()));
            }
        }
        let encoded = encode_batch(b, tp, compression, magic, bv);
        if let Ok(bytes) = &encoded {
            b.encoded = Some((magic, bytes.clone()));
        }
        Some(encoded)
    }

    /// Removes the front batch of `tp` (acknowledged or failed for good).
    fn pop(&mut self, tp: &TopicPartition) -> Option<Batch> {
        let queues = &mut self.topics.get_mut(&tp.topic)?.queues;
        let queue = queues.get_mut(&tp.partition)?;
        let b = queue.pop_front();
        if queue.is_empty() {
            queues.remove(&tp.partition);
        }
        let b = b?;
        self.pending = self.pending.saturating_sub(b.records.len());
        Some(b)
    }

    /// Front batches past `delivery.timeout.ms`, removed.
    fn expire(&mut self, timeout: Duration, now: Instant) -> Vec<(TopicPartition, Batch)> {
        let mut out = Vec::new();
        for (name, t) in &mut self.topics {
            for (&i, q) in &mut t.queues {
                while q
                    .front()
                    .is_some_and(|b| now.saturating_duration_since(b.created) >= timeout)
                {
                    if let Some(b) = q.pop_front() {
                        self.pending = self.pending.saturating_sub(b.records.len());
                        out.push((TopicPartition::new(name.clone(), i), b));
                    }
                }
            }
            t.queues.retain(|_, q| !q.is_empty());
        }
        out
    }
}

/// Picks (and remembers) the next partition for keyless records: round robin over the
/// partitions with a leader, or over all while none has one.
fn next_sticky(t: &mut TopicState, rr: &mut u32) -> i32 {
    *rr = rr.wrapping_add(1);
    let p = if t.available.is_empty() {
        (*rr % (t.leaders.len().max(1) as u32)) as i32
    } else {
        t.available[*rr as usize % t.available.len()]
    };
    t.sticky = Some(p);
    p
}

fn apply_topic(state: &mut TopicState, t: &TopicMetadata, meta: &Metadata) {
    if t.error == KafkaCode::UnknownTopicOrPartition {
        // Deleted (or not yet visible on this broker): nothing can be sent until it is back.
        state.leaders.fill(-1);
        state.available.clear();
        return;
    }
    if t.partitions.is_empty() {
        return;
    }
    // Kafka numbers partitions 0..n; an index outside that is ignored rather than allowed to
    // size a vector.
    let n = t.partitions.len();
    if state.leaders.len() < n {
        state.leaders.resize(n, -1);
    }
    for p in &t.partitions {
        if let Some(s) = usize::try_from(p.partition)
            .ok()
            .filter(|i| *i < n)
            .and_then(|i| state.leaders.get_mut(i))
        {
            *s = if p.leader >= 0 && meta.brokers.contains_key(&p.leader) {
                p.leader
            } else {
                -1
            };
        }
    }
    state.available.clear();
    state
        .available
        .extend((0..state.leaders.len() as i32).filter(|i| state.leaders[*i as usize] >= 0));
    if state.sticky.is_some_and(|p| !state.available.contains(&p)) {
        state.sticky = None;
    }
}

/// The record format a Produce version carries: record batches (magic 2) from v3, legacy
/// message sets with timestamps (magic 1) in v2, and without (magic 0) in v0 and v1.
pub fn magic_for(produce_version: i16) -> i8 {
    match produce_version {
        v if v >= 3 => 2,
        2 => 1,
        _ => 0,
    }
}

/// A ProduceRequest carrying `batches` (each one partition's encoded records), grouped by
/// topic in first-seen order. The same fields exist in every version (the transactional id,
/// v3+, stays null), so it encodes for any.
fn produce_request(acks: Acks, timeout_ms: i32, batches: &[(TopicPartition, Bytes)]) -> ProduceRequest {
    let mut topic_data: Vec<TopicProduceData> = Vec::new();
    for (tp, records) in batches {
        let partition = PartitionProduceData {
            index: tp.partition,
            records: Some(records.clone()),
            ..Default::default()
        };
        match topic_data.iter_mut().find(|t| t.name == tp.topic) {
            Some(t) => t.partition_data.push(partition),
            None => topic_data.push(TopicProduceData {
                name: (&tp.topic).into(),
                partition_data: vec![partition],
                ..Default::default()
            }),
        }
    }
    ProduceRequest {
        acks: acks.code(),
        timeout_ms,
        topic_data,
        ..Default::default()
    }
}

/// Packs encoded batches into ProduceRequests of at most `max_request_size` bytes (estimated),
/// in order; a batch larger than that on its own still gets a request (the broker then says
/// what it thinks of it).
fn pack(
    batches: Vec<(TopicPartition, Bytes)>,
    max_request_size: usize,
    acks: Acks,
    timeout_ms: i32,
) -> Vec<(ProduceRequest, Vec<TopicPartition>)> {
    let mut requests = Vec::new();
    let mut group: Vec<(TopicPartition, Bytes)> = Vec::new();
    let mut size = REQUEST_OVERHEAD;
    let mut close = |group: &mut Vec<(TopicPartition, Bytes)>| {
        let tps = group.iter().map(|(tp, _)| tp.clone()).collect();
        requests.push((produce_request(acks, timeout_ms, group), tps));
        group.clear();
    };
    for (tp, bytes) in batches {
        let add = bytes.len() + tp.topic.len() + PARTITION_OVERHEAD;
        if !group.is_empty() && size + add > max_request_size {
            close(&mut group);
            size = REQUEST_OVERHEAD;
        }
        size += add;
        group.push((tp, bytes));
    }
    if !group.is_empty() {
        close(&mut group);
    }
    requests
}

/// What became of one partition's batch.
#[derive(Debug)]
enum Outcome {
    /// Written at this base offset (-1 when unknown, as with `acks=0`).
    Acked(i64),
    /// Worth another attempt; `refresh` when the metadata is probably stale.
    Retry { refresh: bool, error: LastError },
    /// Failed for good.
    Failed(Error),
}

fn produce_error(tp: &TopicPartition, code: KafkaCode, message: Option<String>) -> Error {
    Error::from_code_about(
        ApiKey::Produce,
        code,
        Scope::topic(&tp.topic),
        &tp.to_string(),
        message,
    )
}

/// One partition's answer as an [`Outcome`].
fn classify(tp: &TopicPartition, code: KafkaCode, base_offset: i64, message: Option<String>) -> Outcome {
    match code {
        KafkaCode::None => Outcome::Acked(base_offset),
        // The error table marks NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE and
        // UNKNOWN_TOPIC_OR_PARTITION (among others) retriable with a metadata refresh.
        c if c.is_retriable() => Outcome::Retry {
            refresh: c.needs_metadata_refresh(),
            error: LastError::Code(code, message),
        },
        _ => Outcome::Failed(produce_error(tp, code, message)),
    }
}

/// Matches a response to the partitions sent, in the order sent. A partition the response
/// leaves out is retried: its batch may or may not have been written.
fn outcomes(resp: &ProduceResponse, sent: &[TopicPartition]) -> Vec<Outcome> {
    let mut answers: HashMap<(&str, i32), (KafkaCode, i64, Option<String>)> = HashMap::new();
    for t in &resp.responses {
        for p in &t.partition_responses {
            let mut message = p.error_message.as_ref().map(String::from);
            if let Some(first) = p.record_errors.first() {
                // KIP-467: which record of the batch the broker rejected, and why.
                let why = first.batch_index_error_message.as_deref().unwrap_or("rejected");
                let extra = format!("record {} of the batch: {why}", first.batch_index);
                message = Some(match message {
                    Some(m) if !m.is_empty() => format!("{m} ({extra})"),
                    _ => extra,
                });
            }
            answers.insert(
                (t.name.as_str(), p.index),
                (KafkaCode::from_code(p.error_code), p.base_offset, message),
            );
        }
    }
    sent.iter()
        .map(|tp| match answers.remove(&(tp.topic.as_str(), tp.partition)) {
            Some((code, base, message)) => classify(tp, code, base, message),
            None => Outcome::Retry {
                refresh: false,
                error: LastError::Other("the broker's Produce response left this partition out".into()),
            },
        })
        .collect()
}

/// What [`Producer::prepare`] makes of a plan: requests per broker, batches refused for good
/// and batches whose broker could not be reached.
type Prepared = (
    Vec<Work>,
    Vec<(TopicPartition, Error)>,
    Vec<(TopicPartition, String)>,
);

/// One broker's share of a round: requests in order, each with the partitions it carries.
struct Work {
    leader: i32,
    version: i16,
    requests: Vec<(ProduceRequest, Vec<TopicPartition>)>,
}

/// The answer to one request: the response (`None` for `acks=0`) or the error that stopped it.
type Sent = (Vec<TopicPartition>, Result<Option<ProduceResponse>>);

/// Logs a batch's final failure and keeps it if it is the first.
fn note_failure(e: Error, first: &mut Option<Error>) {
    log::warn!("producer: {e}");
    if first.is_none() {
        *first = Some(e);
    }
}

/// Sends a broker's requests one after the other; after a broken connection the rest are
/// reported as failed with a copy of that error, not sent.
fn run_work(client: &Client, acks: Acks, work: Work) -> Vec<Sent> {
    let mut out = Vec::with_capacity(work.requests.len());
    let mut broken: Option<String> = None;
    for (req, tps) in work.requests {
        if let Some(why) = &broken {
            out.push((tps, Err(Error::NoBroker(why.clone()))));
            continue;
        }
        let version = work.version;
        let check = move |v: i16| {
            // The version was picked from the same connection's table a moment ago; a change
            // means a reconnect to a different broker build, which the leader check after the
            // answer covers.
            if magic_for(v) != magic_for(version) {
                log::warn!("Produce version changed from v{version} to v{v} between encoding and sending");
            }
            req
        };
        let result = if acks == Acks::None {
            client
                .send_no_response_for(Purpose::Produce, work.leader, check)
                .map(|()| None)
        } else {
            client
                .send_for(Purpose::Produce, work.leader, None, check)
                .map(Some)
        };
        if let Err(e) = &result {
            if e.is_unreachable() {
                broken = Some(format!("broker {}: {e}", work.leader));
            }
        }
        out.push((tps, result));
    }
    out
}

/// A blocking producer: see the [module documentation](self).
#[derive(Debug)]
pub struct Producer {
    client: Client,
    config: Config,
    acc: Accumulator,
    broker_timeout_ms: i32,
    /// Base offsets acknowledged since the last `flush` returned them.
    acked: Vec<(TopicPartition, i64)>,
    metadata_at: Option<Instant>,
    /// Creation time of the oldest pending batch (for `linger.ms`), maybe earlier than true.
    oldest: Option<Instant>,
}

impl Producer {
    /// Starts building a producer on `client`.
    pub fn builder(client: &Client) -> ProducerBuilder {
        ProducerBuilder {
            client: client.clone(),
            config: Config {
                acks: Acks::All,
                compression: Compression::None,
                linger: Duration::ZERO,
                batch_size: 16384,
                retries: i32::MAX as u32,
                delivery_timeout: Duration::from_secs(120),
                retry_backoff: client.retry_backoff(),
                max_request_size: 1024 * 1024,
                max_block: Duration::from_secs(60),
                metadata_max_age: Duration::from_secs(300),
            },
        }
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
            return Err(Error::Kafka {
                api: ApiKey::Produce,
                code: KafkaCode::MessageTooLarge,
                message: Some(format!(
                    "a record of about {size} bytes for topic {} does not fit in max.request.size {}",
                    record.topic, self.config.max_request_size
                )),
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
        loop {
            let e = match self.client.refresh_metadata(Some(&[topic])) {
                Ok(meta) => {
                    self.metadata_at = Some(Instant::now());
                    match meta.topics.get(topic) {
                        Some(t) if !t.error.is_error() && !t.partitions.is_empty() => {
                            // The other topics first: `update` would apply this one again.
                            self.acc.update(&meta);
                            self.acc.add_topic(t, &meta);
                            return Ok(());
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
            if !retriable || Instant::now() >= deadline {
                return Err(e);
            }
            log::debug!("producer: waiting for metadata of {topic}: {e}");
            std::thread::sleep(
                self.config
                    .retry_backoff
                    .max(Duration::from_millis(10))
                    .min(deadline.saturating_duration_since(Instant::now())),
            );
        }
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
                let last = b
                    .last_error
                    .map_or_else(|| "never acknowledged".to_string(), |e| e.to_string());
                note_failure(
                    Error::retries_timeout(
                        format!(
                            "Produce of {} record(s) to {tp}: delivery.timeout.ms ({} ms) passed after {} attempt(s); last error: {last}",
                            b.records.len(),
                            self.config.delivery_timeout.as_millis(),
                            b.attempts
                        ),
                        None,
                    ),
                    &mut first,
                );
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
                let until = wake.unwrap_or_else(|| crate::deadline::at(now, self.config.retry_backoff));
                let until = expiry.map_or(until, |e| until.min(e));
                let pause = until
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1));
                std::thread::sleep(pause);
                continue;
            }
            let (works, refused, unreachable) = self.prepare(plan);
            for (tp, e) in refused {
                self.acc.pop(&tp);
                note_failure(e, &mut first);
            }
            let mut refresh = leaderless;
            for (tp, why) in unreachable {
                refresh |= self.settle(
                    &tp,
                    Outcome::Retry {
                        refresh: true,
                        error: LastError::Other(why),
                    },
                    &mut first,
                );
            }
            for (tps, result) in self.execute(works) {
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
                                    error: LastError::Other(e.to_string()),
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
                let backoff = self.config.retry_backoff;
                let Some(b) = self.acc.front_mut(tp) else {
                    return refresh;
                };
                b.attempts += 1;
                log::debug!("producer: {tp} attempt {} failed: {error}; retrying", b.attempts);
                if b.attempts > retries {
                    let attempts = b.attempts;
                    let e = match error {
                        LastError::Code(code, message) => produce_error(tp, code, message),
                        LastError::Other(m) => Error::retries_timeout(
                            format!(
                                "Produce to {tp}: {attempts} attempt(s) failed ({retries} retries allowed); last error: {m}"
                            ),
                            None,
                        ),
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
                    let why = e.to_string();
                    unreachable.extend(tps.into_iter().map(|tp| (tp, why.clone())));
                    continue;
                }
                Err(e) => {
                    // No Produce version in common: nothing will change that. Only the first
                    // error is returned, so it gets the original.
                    let message = e.to_string();
                    let mut original = Some(e);
                    for tp in tps {
                        let e = original
                            .take()
                            .unwrap_or_else(|| Error::NoBroker(format!("{tp}: broker {leader}: {message}")));
                        refused.push((tp, e));
                    }
                    continue;
                }
            };
            let magic = magic_for(version);
            let compression = self.config.compression;
            let mut encoded: Vec<(TopicPartition, Bytes)> = Vec::new();
            for tp in tps {
                match self.acc.encode_front(&tp, compression, magic, &bv) {
                    Some(Ok(bytes)) => encoded.push((tp, bytes)),
                    Some(Err(e)) => refused.push((tp, e)),
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

    /// Runs each broker's requests, brokers in parallel.
    fn execute(&self, works: Vec<Work>) -> Vec<Sent> {
        let acks = self.config.acks;
        let client = &self.client;
        if works.len() <= 1 {
            return works
                .into_iter()
                .flat_map(|w| run_work(client, acks, w))
                .collect();
        }
        std::thread::scope(|s| {
            let handles: Vec<_> = works
                .into_iter()
                .map(|w| s.spawn(move || run_work(client, acks, w)))
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        })
    }
}

/// Encodes `tp`'s batch for `magic`, first checking that the broker can take what it holds.
fn encode_batch(
    b: &Batch,
    tp: &TopicPartition,
    compression: Compression,
    magic: i8,
    bv: &BrokerVersions,
) -> Result<Bytes> {
    if magic < 2 && b.has_headers() {
        versions::check(&RECORD_HEADERS, bv)?;
    }
    if compression == Compression::Zstd {
        versions::check(&ZSTD_COMPRESSION, bv)?;
    }
    // The crate's error type has no records variant; the broker's code for "this message
    // format cannot do that" describes the failure best.
    records::encode(&b.records, compression, magic).map_err(|e| Error::Kafka {
        api: ApiKey::Produce,
        code: KafkaCode::UnsupportedForMessageFormat,
        message: Some(format!("{tp}: cannot encode records as magic {magic}: {e}")),
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{Broker, PartitionMetadata};
    use crate::protocol::messages::produce_response::{
        BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
    };
    use crate::protocol::{Message, VersionRange};
    use std::sync::Arc;

    #[test]
    fn murmur2_matches_kafka_utils_test() {
        // Kafka's UtilsTest.testMurmur2.
        assert_eq!(murmur2(b"21"), -973932308);
        assert_eq!(murmur2(b"foobar"), -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1486304829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58897971
        );
        assert_eq!(murmur2(b"abc"), 479470107);
        // Each remainder length (0-3 trailing bytes) and the empty key.
        assert_eq!(murmur2(b"1"), -1993445489);
        assert_eq!(murmur2(b"12"), 126087238);
        assert_eq!(murmur2(b"123"), -267702483);
        assert_eq!(murmur2(b"1234"), -1614185708);
        assert_eq!(murmur2(b"12345"), -1188365604);
        assert_eq!(murmur2(b""), 275646681);
    }

    #[test]
    fn key_partition_masks_the_sign_bit_like_to_positive() {
        // murmur2("21") is negative: toPositive keeps the low 31 bits.
        assert_eq!(key_partition(b"21", 10), (-973932308i32 & 0x7fff_ffff) % 10);
        assert_eq!(key_partition(b"21", 10), 0);
        for n in 1..20 {
            let p = key_partition(b"foobar", n);
            assert!((0..n).contains(&p));
        }
        // A degenerate count does not divide by zero.
        assert_eq!(key_partition(b"x", 0), 0);
    }

    fn metadata(topic: &str, leaders: &[i32]) -> Metadata {
        let mut m = Metadata::default();
        for id in [1, 2, 3] {
            m.brokers.insert(
                id,
                Broker {
                    id,
                    host: "h".into(),
                    port: 9092,
                    rack: None,
                },
            );
        }
        m.topics.insert(
            topic.into(),
            Arc::new(TopicMetadata {
                name: topic.into(),
                id: Default::default(),
                error: KafkaCode::None,
                internal: false,
                partitions: leaders
                    .iter()
                    .enumerate()
                    .map(|(i, &leader)| PartitionMetadata {
                        partition: i as i32,
                        leader,
                        leader_epoch: 0,
                        replicas: [].into(),
                        isr: [].into(),
                        error: KafkaCode::None,
                    })
                    .collect(),
            }),
        );
        m
    }

    fn acc_with(topic: &str, leaders: &[i32], limit: usize) -> Accumulator {
        let mut acc = Accumulator::new(limit);
        let m = metadata(topic, leaders);
        acc.add_topic(&m.topics[topic], &m);
        acc
    }

    fn rec(topic: &str, key: Option<&'static str>, value: &'static str) -> ProducerRecord {
        ProducerRecord {
            topic: topic.into(),
            key: key.map(|k| Bytes::from_static(k.as_bytes())),
            value: Some(Bytes::from_static(value.as_bytes())),
            ..Default::default()
        }
    }

    fn append(acc: &mut Accumulator, r: ProducerRecord) -> (i32, bool) {
        let size = r.size();
        acc.append(r, size, Instant::now()).unwrap()
    }

    #[test]
    fn keyed_records_follow_murmur2_and_explicit_partitions_win() {
        let mut acc = acc_with("t", &[1, 2, 3, 1, 2, 3], 1 << 20);
        for key in ["a", "b", "user-17", "21", "foobar"] {
            let (p, _) = append(&mut acc, rec("t", Some(key), "v"));
            assert_eq!(p, key_partition(key.as_bytes(), 6), "{key}");
            // Same key, same partition, every time.
            assert_eq!(append(&mut acc, rec("t", Some(key), "w")).0, p);
        }
        assert_eq!(append(&mut acc, rec("t", Some("a"), "v").partition(5)).0, 5);
        let e = acc
            .append(rec("t", None, "v").partition(6), 10, Instant::now())
            .unwrap_err();
        assert!(
            e.to_string().contains("partition 6 of topic t does not exist"),
            "{e}"
        );
        let e = acc.append(rec("u", None, "v"), 10, Instant::now()).unwrap_err();
        assert_eq!(e.kafka_code(), Some(KafkaCode::UnknownTopicOrPartition));
        assert_eq!(acc.pending, 11);
    }

    #[test]
    fn keyless_records_stick_to_an_available_partition_until_its_batch_is_full() {
        // Partition 1 has no leader: never chosen for keyless records.
        let mut acc = acc_with("t", &[1, -1, 2], 200);
        let mut seen = Vec::new();
        let mut closes = 0;
        for _ in 0..40 {
            let (p, closed) = append(
                &mut acc,
                rec("t", None, "0123456789012345678901234567890123456789"),
            );
            seen.push(p);
            if closed {
                closes += 1;
            }
        }
        assert!(!seen.contains(&1), "{seen:?}");
        // 61 bytes of batch header and 61 per record: a third record does not fit in a 200-byte
        // batch, so the partition changes every two records, between the two available ones.
        assert!(closes >= 19, "{closes}");
        for w in seen.chunks(2) {
            assert_eq!(w[0], w[1], "{seen:?}");
        }
        // The record that does not fit goes to the next partition, not into a new batch of
        // the old one.
        for w in seen.chunks(2).collect::<Vec<_>>().windows(2) {
            assert_ne!(w[0][0], w[1][0], "{seen:?}");
        }
        assert!(seen.contains(&0) && seen.contains(&2), "{seen:?}");
    }

    #[test]
    fn batches_close_at_the_limit_and_only_the_front_batch_is_planned() {
        let mut acc = acc_with("t", &[1, 2], 61 + 3 * 31);
        // 10-byte values: 31 bytes each, three fit.
        let r = || rec("t", None, "0123456789").partition(0);
        assert_eq!(append(&mut acc, r()), (0, false));
        assert_eq!(append(&mut acc, r()), (0, false));
        assert_eq!(
            append(&mut acc, r()),
            (0, true),
            "the third record fills the batch"
        );
        assert_eq!(append(&mut acc, r()), (0, false), "a new batch opens");
        append(&mut acc, rec("t", None, "x").partition(1));
        let q = &acc.topics["t"].queues[&0];
        assert_eq!(q.len(), 2);
        assert_eq!(q[0].records.len(), 3);
        assert!(q[0].closed && !q[1].closed);
        let now = Instant::now();
        // Only broker 1 leads a partition with a closed batch.
        let (plan, leaderless, wake) = acc.plan(true, now);
        assert_eq!(plan.len(), 1);
        assert_eq!(plan[&1], vec![TopicPartition::new("t", 0)]);
        assert!(!leaderless && wake.is_none());
        let (plan, _, _) = acc.plan(false, now);
        assert_eq!(plan[&1], vec![TopicPartition::new("t", 0)]);
        assert_eq!(plan[&2], vec![TopicPartition::new("t", 1)]);
        // A record that does not fit in the open batch closes it and opens another.
        let mut acc = acc_with("t", &[1], 100);
        assert_eq!(append(&mut acc, rec("t", None, "0123456789")), (0, false));
        assert_eq!(append(&mut acc, rec("t", None, "0123456789")), (0, true));
        assert_eq!(acc.topics["t"].queues[&0].len(), 2);
        // A record bigger than the limit gets a batch of its own.
        let mut acc = acc_with("t", &[1], 0);
        assert!(append(&mut acc, rec("t", None, "0123456789")).1);
        assert!(append(&mut acc, rec("t", None, "0123456789")).1);
        assert_eq!(acc.topics["t"].queues[&0].len(), 2);
    }

    #[test]
    fn retries_wait_for_their_backoff_and_leaderless_partitions_ask_for_metadata() {
        let mut acc = acc_with("t", &[1, -1], 1 << 20);
        append(&mut acc, rec("t", None, "a").partition(0));
        append(&mut acc, rec("t", None, "b").partition(1));
        let now = Instant::now();
        let later = now + Duration::from_millis(50);
        acc.front_mut(&TopicPartition::new("t", 0)).unwrap().retry_at = Some(later);
        let (plan, leaderless, wake) = acc.plan(false, now);
        assert!(plan.is_empty());
        assert!(leaderless);
        assert_eq!(wake, Some(later));
        let (plan, _, _) = acc.plan(false, later);
        assert_eq!(plan[&1], vec![TopicPartition::new("t", 0)]);
        // A new leader shows up with fresh metadata.
        acc.update(&metadata("t", &[1, 3]));
        let (plan, leaderless, _) = acc.plan(false, later);
        assert_eq!(plan[&3], vec![TopicPartition::new("t", 1)]);
        assert!(!leaderless);
        // Expiry drops batches past delivery.timeout.ms and their records from the count.
        assert_eq!(acc.pending, 2);
        let gone = acc.expire(Duration::from_millis(10), now + Duration::from_secs(1));
        assert_eq!(gone.len(), 2);
        assert_eq!(acc.pending, 0);
    }

    #[test]
    fn a_deleted_topic_loses_its_leaders() {
        let mut acc = acc_with("t", &[1, 2], 1 << 20);
        let mut m = metadata("t", &[]);
        Arc::make_mut(m.topics.get_mut("t").unwrap()).error = KafkaCode::UnknownTopicOrPartition;
        acc.update(&m);
        assert!(acc.topics["t"].leaders.iter().all(|l| *l == -1));
        assert!(acc.topics["t"].available.is_empty());
        // A leader that is not among the brokers counts as none.
        acc.update(&metadata("t", &[1, 7]));
        assert_eq!(acc.topics["t"].leaders[1], -1);
        assert_eq!(acc.topics["t"].available, vec![0]);
    }

    #[test]
    fn magic_follows_the_produce_version() {
        assert_eq!(magic_for(0), 0);
        assert_eq!(magic_for(1), 0);
        assert_eq!(magic_for(2), 1);
        for v in 3..=ApiKey::Produce.versions().max {
            assert_eq!(magic_for(v), 2);
        }
    }

    #[test]
    fn produce_requests_encode_for_every_version() {
        let batch = records::encode(
            &[NewRecord {
                key: Some(Bytes::from_static(b"k")),
                value: Some(Bytes::from_static(b"v")),
                headers: vec![],
                timestamp: Some(1),
            }],
            Compression::None,
            2,
        )
        .unwrap();
        let batches = vec![
            (TopicPartition::new("a", 0), batch.clone()),
            (TopicPartition::new("b", 3), batch.clone()),
            (TopicPartition::new("a", 2), batch.clone()),
        ];
        for acks in [Acks::All, Acks::Leader, Acks::None] {
            let req = produce_request(acks, 27_000, &batches);
            assert_eq!(req.acks, acks.code());
            assert_eq!(req.timeout_ms, 27_000);
            assert_eq!(req.transactional_id, None);
            let names: Vec<&str> = req.topic_data.iter().map(|t| t.name.as_str()).collect();
            assert_eq!(names, ["a", "b"]);
            let a: Vec<i32> = req.topic_data[0].partition_data.iter().map(|p| p.index).collect();
            assert_eq!(a, [0, 2]);
            assert_eq!(req.topic_data[1].partition_data[0].records.as_ref(), Some(&batch));
            let VersionRange { min, max } = ApiKey::Produce.versions();
            for v in min..=max {
                let bytes = req.to_bytes(v).unwrap_or_else(|e| panic!("v{v}: {e}"));
                assert_eq!(ProduceRequest::from_bytes(bytes, v).unwrap(), req, "v{v}");
            }
        }
        assert_eq!(Acks::default(), Acks::All);
        assert_eq!(
            (Acks::All.code(), Acks::Leader.code(), Acks::None.code()),
            (-1, 1, 0)
        );
    }

    #[test]
    fn requests_stay_below_max_request_size() {
        let batch = |n: usize| Bytes::from(vec![0u8; n]);
        let tp = |p| TopicPartition::new("t", p);
        let batches = vec![
            (tp(0), batch(400)),
            (tp(1), batch(400)),
            (tp(2), batch(400)),
            (tp(3), batch(2000)),
        ];
        let reqs = pack(batches, 1000, Acks::Leader, 5);
        let split: Vec<Vec<i32>> = reqs
            .iter()
            .map(|(_, tps)| tps.iter().map(|t| t.partition).collect())
            .collect();
        // 128 + 2 × (400 + 1 + 16) fits in 1000, a third does not; the oversized one goes alone.
        assert_eq!(split, vec![vec![0, 1], vec![2], vec![3]]);
        for (req, tps) in &reqs {
            assert_eq!(req.acks, 1);
            assert_eq!(req.timeout_ms, 5);
            assert_eq!(req.topic_data[0].partition_data.len(), tps.len());
            assert!(req.to_bytes(11).unwrap().len() <= 1000 || tps == &[tp(3)]);
        }
        assert!(pack(Vec::new(), 1000, Acks::All, 5).is_empty());
    }

    fn response(parts: &[(&str, i32, KafkaCode, i64)]) -> ProduceResponse {
        let mut resp = ProduceResponse::default();
        for &(topic, index, code, base) in parts {
            let p = PartitionProduceResponse {
                index,
                error_code: code.code(),
                base_offset: base,
                ..Default::default()
            };
            match resp.responses.iter_mut().find(|t| t.name == topic) {
                Some(t) => t.partition_responses.push(p),
                None => resp.responses.push(TopicProduceResponse {
                    name: topic.into(),
                    partition_responses: vec![p],
                    ..Default::default()
                }),
            }
        }
        resp
    }

    #[test]
    fn responses_map_to_outcomes_per_partition() {
        let sent = vec![
            TopicPartition::new("t", 0),
            TopicPartition::new("t", 1),
            TopicPartition::new("t", 2),
            TopicPartition::new("t", 3),
            TopicPartition::new("u", 0),
            TopicPartition::new("u", 1),
        ];
        let resp = response(&[
            ("u", 0, KafkaCode::MessageTooLarge, -1),
            ("t", 1, KafkaCode::NotLeaderOrFollower, -1),
            ("t", 0, KafkaCode::None, 42),
            ("t", 2, KafkaCode::NotEnoughReplicas, -1),
            ("t", 3, KafkaCode::UnknownTopicOrPartition, -1),
        ]);
        let o = outcomes(&resp, &sent);
        assert!(matches!(o[0], Outcome::Acked(42)), "{o:?}");
        assert!(matches!(o[1], Outcome::Retry { refresh: true, .. }), "{o:?}");
        assert!(matches!(o[2], Outcome::Retry { refresh: false, .. }), "{o:?}");
        assert!(matches!(o[3], Outcome::Retry { refresh: true, .. }), "{o:?}");
        match &o[4] {
            Outcome::Failed(e) => {
                assert_eq!(e.kafka_code(), Some(KafkaCode::MessageTooLarge));
                assert!(e.to_string().contains("u-0"), "{e}");
            }
            other => panic!("{other:?}"),
        }
        // Left out of the response: retried, since it may not have been written.
        assert!(matches!(o[5], Outcome::Retry { refresh: false, .. }), "{o:?}");
        for code in [
            KafkaCode::LeaderNotAvailable,
            KafkaCode::RequestTimedOut,
            KafkaCode::KafkaStorageError,
        ] {
            assert!(
                matches!(classify(&sent[0], code, -1, None), Outcome::Retry { .. }),
                "{code}"
            );
        }
        match classify(&sent[0], KafkaCode::TopicAuthorizationFailed, -1, None) {
            Outcome::Failed(Error::Authorization {
                api: ApiKey::Produce,
                resource: crate::Resource::Topic(t),
                ..
            }) => assert_eq!(t, sent[0].topic),
            other => panic!("{other:?}"),
        }
        for code in [
            KafkaCode::TopicAuthorizationFailed,
            KafkaCode::InvalidRecord,
            KafkaCode::RecordListTooLarge,
        ] {
            assert!(
                matches!(classify(&sent[0], code, -1, None), Outcome::Failed(_)),
                "{code}"
            );
        }
    }

    #[test]
    fn record_errors_are_named_in_the_failure() {
        let mut resp = response(&[("t", 0, KafkaCode::InvalidRecord, -1)]);
        let p = &mut resp.responses[0].partition_responses[0];
        p.error_message = Some("batch rejected".into());
        p.record_errors = vec![BatchIndexAndErrorMessage {
            batch_index: 3,
            batch_index_error_message: Some("null key on a compacted topic".into()),
            ..Default::default()
        }];
        match &outcomes(&resp, &[TopicPartition::new("t", 0)])[0] {
            Outcome::Failed(e) => {
                let text = e.to_string();
                assert!(
                    text.contains("t-0: batch rejected (record 3 of the batch: null key"),
                    "{text}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    fn builder() -> ProducerBuilder {
        Client::builder()
            .bootstrap_servers("no-such-host.invalid:9092")
            .build()
            .unwrap()
            .producer()
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
        assert_eq!(p.config.retry_backoff, Duration::from_millis(100));
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
        assert_eq!(e.kafka_code(), Some(KafkaCode::MessageTooLarge), "{e}");
        assert!(e.to_string().contains("max.request.size 1000"), "{e}");
        // The batch limit leaves room for the request around it.
        assert_eq!(
            batch_limit(&p.config),
            1000 - REQUEST_OVERHEAD - PARTITION_OVERHEAD - BATCH_OVERHEAD
        );
    }

    #[test]
    fn a_sent_batch_takes_no_more_records_and_is_resent_as_is() {
        let mut acc = acc_with("t", &[1], 1 << 20);
        let tp = TopicPartition::new("t", 0);
        append(&mut acc, rec("t", None, "a"));
        let bv: BrokerVersions = [(ApiKey::Produce.key(), VersionRange::new(0, 11))].into();
        let first = acc.encode_front(&tp, Compression::None, 2, &bv).unwrap().unwrap();
        // Sent (say the answer was lost): the next record must not join it, or the retry
        // would carry it while the first attempt did not.
        append(&mut acc, rec("t", None, "b"));
        let q = &acc.topics["t"].queues[&0];
        assert_eq!(q.len(), 2);
        assert_eq!(q[0].records.len(), 1);
        let again = acc.encode_front(&tp, Compression::None, 2, &bv).unwrap().unwrap();
        assert_eq!(first, again);
        assert_eq!(
            records::decode(&again, &Default::default())
                .unwrap()
                .records
                .len(),
            1
        );
        assert!(acc
            .encode_front(&TopicPartition::new("t", 1), Compression::None, 2, &bv)
            .is_none());
    }

    #[test]
    fn old_brokers_cannot_take_headers_or_zstd() {
        let mut acc = acc_with("t", &[1], 1 << 20);
        append(&mut acc, rec("t", None, "v").header("h", "x"));
        let tp = TopicPartition::new("t", 0);
        let b = acc.front_mut(&tp).unwrap();
        let old: BrokerVersions = [(ApiKey::Produce.key(), VersionRange::new(0, 2))].into();
        let e = encode_batch(b, &tp, Compression::None, 1, &old).unwrap_err();
        assert!(
            matches!(
                e,
                Error::MissingCapability {
                    capability: "record headers",
                    ..
                }
            ),
            "{e}"
        );
        let e = encode_batch(b, &tp, Compression::Zstd, 2, &old).unwrap_err();
        assert!(
            matches!(
                e,
                Error::MissingCapability {
                    capability: "zstd compression",
                    ..
                }
            ),
            "{e}"
        );
        let new: BrokerVersions = [(ApiKey::Produce.key(), VersionRange::new(0, 11))].into();
        let bytes = encode_batch(b, &tp, Compression::Zstd, 2, &new).unwrap();
        let decoded = records::decode(&bytes, &Default::default()).unwrap();
        assert_eq!(
            decoded.records[0].headers,
            vec![("h".to_string(), Some(Bytes::from_static(b"x")))]
        );
    }
}
