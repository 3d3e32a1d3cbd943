//! The pending batches and where they go: per partition a queue of record batches, the
//! sticky partition for keyless records (KIP-480; moved on every batch.size bytes, KIP-794),
//! leaders from metadata, and the plan of which front batches to send to which broker. Pure,
//! tested without a broker.

use super::delivery::{BatchDelivery, DeliveryHandle};
use super::partitioner::key_partition;
use super::record::{queued_size, ProducerRecord};
use super::request::LastError;
use crate::client::{Metadata, TopicMetadata};
use crate::error::{Error, Result};
use crate::group::TopicPartition;
use crate::net::versions::{self, BrokerVersions, RECORD_HEADERS, ZSTD_COMPRESSION};
use crate::protocol::ApiKey;
use crate::records::{self, BatchProducer, Compression, NewRecord};
use crate::KafkaCode;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A record batch's header (magic 2).
pub(super) const BATCH_OVERHEAD: usize = records::BATCH_HEADER;

/// Records for one partition that go out together as one record batch.
#[derive(Debug)]
pub(super) struct Batch {
    /// Shared with the broker thread that encodes it ([`Taken::records`]): taking a batch
    /// for sending copies no record, under the lock every `send` needs. Appended to only
    /// while no one else holds it (the batch is open, so it was never taken).
    pub(super) records: Arc<Vec<NewRecord>>,
    /// Estimated size, see [`ProducerRecord::size`].
    pub(super) bytes: usize,
    pub(super) created: Instant,
    /// Closed to appends: it reached the batch limit, or it has been sent (a retry must send
    /// exactly what the broker may already have).
    pub(super) closed: bool,
    pub(super) attempts: u32,
    /// Taken for sending and not answered yet.
    pub(super) in_flight: bool,
    /// Unique within the producer, to find the batch when its answer comes back (an answer
    /// may come after batches of its partition that were sent later, to a new leader).
    pub(super) id: u64,
    pub(super) retry_at: Option<Instant>,
    /// The encoded batch and its magic, kept so a retry sends exactly the same bytes.
    pub(super) encoded: Option<(i8, Bytes)>,
    /// The producer id, epoch and base sequence the batch was first given (idempotence): set
    /// once it is numbered, sent or not, so that it is never numbered twice.
    pub(super) stamp: Option<BatchProducer>,
    /// The producer header `encoded` carries (a bump may have renumbered the batch since).
    pub(super) encoded_stamp: Option<BatchProducer>,
    pub(super) last_error: Option<LastError>,
    /// The result its records' [`DeliveryHandle`]s share; settled when the batch is
    /// acknowledged or fails for good.
    pub(super) delivery: Arc<BatchDelivery>,
}

impl Batch {
    pub(super) fn new(partition: TopicPartition, id: u64, now: Instant) -> Self {
        Batch {
            in_flight: false,
            id,
            delivery: BatchDelivery::new(partition),
            records: Arc::default(),
            bytes: BATCH_OVERHEAD,
            created: now,
            closed: false,
            attempts: 0,
            retry_at: None,
            encoded: None,
            stamp: None,
            encoded_stamp: None,
            last_error: None,
        }
    }

    /// The records' estimated size, without the batch header: what they hold of
    /// `buffer.memory`.
    pub(super) fn record_bytes(&self) -> usize {
        self.bytes - BATCH_OVERHEAD
    }
}

impl Drop for Batch {
    /// A batch dropped unsettled (the producer dropped with records pending) tells its records'
    /// handles so, rather than leaving them pending for ever.
    fn drop(&mut self) {
        if !self.delivery.is_settled() {
            self.delivery.failed(Arc::new(Error::Closed));
        }
    }
}

/// A topic's partitions as the producer sees them. A topic can have millions of partitions and
/// a producer writes to a few at a time, so what each partition costs is its leader (4 bytes):
/// batches are kept only for the partitions that have some.
#[derive(Debug, Default)]
pub(super) struct TopicState {
    /// Leader broker id by partition index; -1 while unknown.
    pub(super) leaders: Vec<i32>,
    /// The pending batches of each partition with any, oldest first; only the front batch is
    /// ever in flight. An emptied queue is removed.
    pub(super) queues: BTreeMap<i32, VecDeque<Batch>>,
    /// Partitions with a leader, for records without a key.
    pub(super) available: Vec<i32>,
    /// Where records without a key go until that batch is full, or batch.size bytes went
    /// there.
    pub(super) sticky: Option<i32>,
    /// Bytes of keyless records appended to `sticky` since it was chosen.
    pub(super) sticky_bytes: usize,
}

impl TopicState {
    /// The leader of partition `p`, -1 while unknown.
    pub(super) fn leader(&self, p: i32) -> i32 {
        usize::try_from(p)
            .ok()
            .and_then(|i| self.leaders.get(i))
            .copied()
            .unwrap_or(-1)
    }
}

/// When a batch not in flight is due to be sent.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ready {
    /// `linger.ms`: an open batch waits this long from its first record for more.
    pub(super) linger: Duration,
    /// Every batch is due at once (a flush or close is waiting).
    pub(super) all: bool,
}

impl Ready {
    /// `Ok` when `b` is due at `now`: it is full (closed), it was sent before (a retry), a
    /// flush is waiting, or `linger.ms` has passed since its first record; else when it will
    /// be, by linger.
    pub(super) fn due(&self, b: &Batch, now: Instant) -> std::result::Result<(), Instant> {
        let at = crate::deadline::at(b.created, self.linger);
        if self.all || b.closed || b.attempts > 0 || at <= now {
            Ok(())
        } else {
            Err(at)
        }
    }
}

/// A batch taken for sending: what the network side needs, outside the producer's lock.
#[derive(Debug)]
pub(super) struct Taken {
    pub(super) tp: TopicPartition,
    /// The batch's id in its partition's queue.
    pub(super) id: u64,
    /// The records, to encode: the batch's own, shared.
    pub(super) records: Arc<Vec<NewRecord>>,
    /// The bytes an earlier attempt sent, with their magic: a retry sends exactly those.
    pub(super) encoded: Option<(i8, Bytes)>,
    /// The producer header `encoded` carries (idempotence).
    pub(super) encoded_stamp: Option<BatchProducer>,
    /// Whether the batch has been given a sequence (idempotence).
    pub(super) numbered: bool,
    /// The producer header to send with (idempotence): set by the broker thread from the
    /// sequence state; when it differs from `encoded_stamp`, the bytes are restamped.
    pub(super) stamp: Option<BatchProducer>,
}

/// The pending batches and where they go: the pure part of the producer, tested without a
/// broker.
#[derive(Debug)]
pub(super) struct Accumulator {
    pub(super) topics: HashMap<String, TopicState>,
    pub(super) batch_limit: usize,
    /// Records appended and not yet acknowledged or failed.
    pub(super) pending: usize,
    /// Round-robin position for sticky partitions.
    pub(super) rr: u32,
    /// Bytes (estimated, as `batch.size` counts them) of the records not yet acknowledged or
    /// failed: what `buffer.memory` bounds.
    pub(super) buffered: usize,
    /// The next batch id.
    next_id: u64,
}

impl Accumulator {
    pub(super) fn new(batch_limit: usize) -> Self {
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
            buffered: 0,
            next_id: 0,
        }
    }

    /// Takes partition counts and leaders from `meta` for every topic it knows.
    pub(super) fn update(&mut self, meta: &Metadata) {
        for (name, state) in &mut self.topics {
            if let Some(t) = meta.topics.get(name) {
                apply_topic(state, t, meta);
            }
        }
    }

    /// Registers a topic seen in `meta` (with partitions).
    pub(super) fn add_topic(&mut self, t: &TopicMetadata, meta: &Metadata) {
        let state = self.topics.entry(t.name.clone()).or_default();
        apply_topic(state, t, meta);
    }

    /// [`append_to`](Self::append_to) with the record's own topic.
    #[cfg(test)]
    pub(super) fn append(
        &mut self,
        mut r: ProducerRecord,
        size: usize,
        now: Instant,
    ) -> Result<(i32, bool, DeliveryHandle)> {
        let topic = std::mem::take(&mut r.topic);
        self.append_to(&topic, r, size, now)
    }

    /// Appends `r` to the open batch of its partition of `topic`; returns the partition,
    /// whether a batch was closed (so a request is due) and the record's handle. The record's
    /// own topic is ignored: the caller took the name out, to use it afterwards without a
    /// copy.
    pub(super) fn append_to(
        &mut self,
        topic: &str,
        r: ProducerRecord,
        size: usize,
        now: Instant,
    ) -> Result<(i32, bool, DeliveryHandle)> {
        let t = self.topics.get_mut(topic).ok_or_else(|| Error::Kafka {
            api: ApiKey::Metadata,
            code: KafkaCode::UnknownTopicOrPartition,
            message: Some(format!("topic {topic} has no metadata")),
        })?;
        let count = t.leaders.len() as i32;
        let mut p = match (r.partition, &r.key) {
            (Some(p), _) if (0..count).contains(&p) => p,
            (Some(p), _) => {
                return Err(Error::Kafka {
                    api: ApiKey::Produce,
                    code: KafkaCode::UnknownTopicOrPartition,
                    message: Some(format!(
                        "partition {p} of topic {topic} does not exist (it has {count})"
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
        // to the next sticky partition instead, closing the old batch. So does one that would
        // take the bytes sent to the sticky partition past batch.size (KIP-794), however many
        // batches carried them: batches that leave before they fill (a flush, linger.ms, a
        // slow producer) would otherwise keep every keyless record in one partition for good.
        let mut closed = false;
        if r.partition.is_none() && r.key.is_none() {
            let mut over = false;
            if let Some(b) = t
                .queues
                .get_mut(&p)
                .and_then(|q| q.back_mut())
                .filter(|b| !b.closed && !b.records.is_empty() && b.bytes + size > self.batch_limit)
            {
                b.closed = true;
                over = true;
            }
            let spent = t.sticky_bytes > 0 && t.sticky_bytes + size > self.batch_limit;
            if over || spent {
                closed |= over;
                t.sticky = None;
                p = next_sticky(t, &mut self.rr);
            }
            t.sticky_bytes += size;
        }
        if !(0..count).contains(&p) {
            // Only reachable with a topic of no partitions, which add_topic never registers.
            return Err(Error::NoLeader {
                partition: TopicPartition::new(topic, p),
            });
        }
        let queue = t.queues.entry(p).or_default();
        let open = match queue.back_mut() {
            Some(b) if !b.closed && (b.records.is_empty() || b.bytes + size <= self.batch_limit) => b,
            other => {
                if let Some(b) = other.filter(|b| !b.closed) {
                    b.closed = true;
                    closed = true;
                }
                self.next_id += 1;
                queue.push_back(Batch::new(TopicPartition::new(topic, p), self.next_id, now));
                queue.back_mut().ok_or(Error::Closed)?
            }
        };
        open.bytes += size;
        let timestamp = r.timestamp.unwrap_or_else(records::now_ms);
        // A batch holds at most i32::MAX records on the wire, far below what memory allows.
        let handle = open.delivery.handle(open.records.len() as u32, timestamp);
        Arc::make_mut(&mut open.records).push(NewRecord {
            key: r.key,
            value: r.value,
            headers: r.headers,
            timestamp: Some(timestamp),
        });
        if open.bytes >= self.batch_limit {
            open.closed = true;
            closed = true;
            if t.sticky == Some(p) {
                t.sticky = None;
            }
        }
        self.pending += 1;
        self.buffered += size;
        Ok((p, closed, handle))
    }

    /// Creation time of the oldest batch not in flight.
    pub(super) fn oldest(&self) -> Option<Instant> {
        self.topics
            .values()
            .flat_map(|t| t.queues.values())
            .filter_map(|q| q.iter().find(|b| !b.in_flight).map(|b| b.created))
            .min()
    }

    /// The leaders that have a batch waiting to be sent (not in flight), and whether some
    /// waiting batch's partition has no leader (metadata is due).
    pub(super) fn leaders_with_work(&self) -> (BTreeSet<i32>, bool) {
        let mut leaders = BTreeSet::new();
        let mut leaderless = false;
        for t in self.topics.values() {
            for (&i, q) in &t.queues {
                if q.iter().any(|b| !b.in_flight) {
                    match t.leader(i) {
                        l if l < 0 => leaderless = true,
                        l => {
                            leaders.insert(l);
                        }
                    }
                }
            }
        }
        (leaders, leaderless)
    }

    /// Takes for sending, at most one batch per partition led by `leader`: each partition's
    /// first batch not in flight, when it is [`Ready::due`] at `now`, no earlier batch of the
    /// partition waits for a retry, and the partition has fewer than `per_partition` batches
    /// in flight. Taken batches are marked in flight and closed to appends. Also returns the
    /// earliest time a batch of `leader` not taken becomes due (linger or retry backoff).
    pub(super) fn take_ready(
        &mut self,
        leader: i32,
        now: Instant,
        ready: Ready,
        per_partition: usize,
        may_send: &dyn Fn(&str, i32) -> bool,
    ) -> (Vec<Taken>, Option<Instant>) {
        let mut taken = Vec::new();
        let mut wake: Option<Instant> = None;
        let mut soonest = |at: Instant| wake = Some(wake.map_or(at, |w: Instant| w.min(at)));
        for (name, t) in &mut self.topics {
            let leaders = &t.leaders;
            let leader_of = |p: i32| usize::try_from(p).ok().and_then(|i| leaders.get(i)).copied();
            for (&i, q) in &mut t.queues {
                // A transaction's partition waits until its coordinator knows of it (whoever
                // makes that so wakes the broker threads).
                if leader_of(i) != Some(leader) || !may_send(name, i) {
                    continue;
                }
                let flying = q.iter().take_while(|b| b.in_flight).count();
                if flying >= per_partition.max(1) {
                    continue;
                }
                let Some(b) = q.iter_mut().find(|b| !b.in_flight) else {
                    continue;
                };
                if let Some(at) = b.retry_at.filter(|at| *at > now) {
                    soonest(at);
                    continue;
                }
                if let Err(at) = ready.due(b, now) {
                    soonest(at);
                    continue;
                }
                b.in_flight = true;
                b.closed = true;
                b.retry_at = None;
                taken.push(Taken {
                    tp: TopicPartition::new(name.clone(), i),
                    id: b.id,
                    records: Arc::clone(&b.records),
                    encoded: b.encoded.clone(),
                    encoded_stamp: b.encoded_stamp,
                    numbered: b.stamp.is_some(),
                    stamp: None,
                });
            }
        }
        (taken, wake)
    }

    /// The batch `id` of `tp`.
    pub(super) fn batch_mut(&mut self, tp: &TopicPartition, id: u64) -> Option<&mut Batch> {
        self.topics
            .get_mut(&tp.topic)?
            .queues
            .get_mut(&tp.partition)?
            .iter_mut()
            .find(|b| b.id == id)
    }

    /// Splits batch `id` of `tp` (of at least two records), which the broker refused as
    /// `MESSAGE_TOO_LARGE`, into two pieces that take its place in its queue, so they go
    /// before every later batch of the partition: Java's `splitAndReenqueue`. The pieces are
    /// new batches (new ids, not in flight, no attempts yet, as Java treats them) that keep
    /// the batch's creation time, so `delivery.timeout.ms` still counts from the first
    /// record; its records' handles follow them. Returns the pieces' ids and record counts,
    /// in order; `None` (nothing changed) for a batch not found or of one record.
    ///
    /// Halves rather than Java's `batch.size` pieces: the broker does not say its limit
    /// (`max.message.bytes` of the topic), and pieces of `batch.size` would be refused again
    /// for ever when `batch.size` is above it, the very case that needs splitting. Halving by
    /// estimated bytes needs no limit, reaches pieces small enough within log2(records)
    /// refusals, and leaves a record too large on its own alone in its piece, to fail alone.
    pub(super) fn split(&mut self, tp: &TopicPartition, id: u64) -> Option<[(u64, usize); 2]> {
        let queue = self.topics.get_mut(&tp.topic)?.queues.get_mut(&tp.partition)?;
        let at = queue.iter().position(|b| b.id == id)?;
        if queue[at].records.len() < 2 {
            return None;
        }
        let mut whole = queue.remove(at)?;
        let sizes: Vec<usize> = whole.records.iter().map(queued_size).collect();
        let k = split_point(&sizes);
        let second_records = Arc::new(Arc::make_mut(&mut whole.records).split_off(k));
        let first_bytes: usize = sizes[..k].iter().sum();
        // The pieces hold exactly what the whole held of buffer.memory, estimate or not.
        let second_bytes = whole.record_bytes().saturating_sub(first_bytes);
        let mut pieces = Vec::with_capacity(2);
        for (records, bytes) in [
            (std::mem::take(&mut whole.records), first_bytes),
            (second_records, second_bytes),
        ] {
            self.next_id += 1;
            let mut piece = Batch::new(tp.clone(), self.next_id, whole.created);
            piece.records = records;
            piece.bytes += bytes;
            // Sent as they are: nothing may join a piece of a batch already sent.
            piece.closed = true;
            pieces.push(piece);
        }
        let ids = [
            (pieces[0].id, pieces[0].records.len()),
            (pieces[1].id, pieces[1].records.len()),
        ];
        whole.delivery.split(vec![
            (0, Arc::clone(&pieces[0].delivery)),
            (k as u32, Arc::clone(&pieces[1].delivery)),
        ]);
        for piece in pieces.into_iter().rev() {
            queue.insert(at, piece);
        }
        Some(ids)
    }

    /// Removes the batch `id` of `tp` (acknowledged or failed for good).
    pub(super) fn remove(&mut self, tp: &TopicPartition, id: u64) -> Option<Batch> {
        let queues = &mut self.topics.get_mut(&tp.topic)?.queues;
        let queue = queues.get_mut(&tp.partition)?;
        let at = queue.iter().position(|b| b.id == id)?;
        let b = queue.remove(at);
        if queue.is_empty() {
            queues.remove(&tp.partition);
        }
        let b = b?;
        self.pending = self.pending.saturating_sub(b.records.len());
        self.buffered = self.buffered.saturating_sub(b.record_bytes());
        Some(b)
    }

    /// Batches in flight (sent, not yet answered).
    pub(super) fn in_flight(&self) -> usize {
        self.topics
            .values()
            .flat_map(|t| t.queues.values())
            .map(|q| q.iter().filter(|b| b.in_flight).count())
            .sum()
    }

    /// Every batch not in flight, removed (the producer is closing).
    pub(super) fn drain_waiting(&mut self) -> Vec<Batch> {
        let mut out = Vec::new();
        for t in self.topics.values_mut() {
            for q in t.queues.values_mut() {
                let (flying, waiting): (VecDeque<Batch>, VecDeque<Batch>) =
                    std::mem::take(q).into_iter().partition(|b| b.in_flight);
                *q = flying;
                out.extend(waiting);
            }
            t.queues.retain(|_, q| !q.is_empty());
        }
        for b in &out {
            self.pending = self.pending.saturating_sub(b.records.len());
            self.buffered = self.buffered.saturating_sub(b.record_bytes());
        }
        out
    }

    /// Batches not in flight past `delivery.timeout.ms`, removed. (A batch in flight waits
    /// for its answer, which `request.timeout.ms` bounds, so its records are never reported
    /// failed while the broker may still be writing them.)
    pub(super) fn expire(&mut self, timeout: Duration, now: Instant) -> Vec<(TopicPartition, Batch)> {
        let mut out = Vec::new();
        for (name, t) in &mut self.topics {
            for (&i, q) in &mut t.queues {
                while let Some(at) = q
                    .iter()
                    .position(|b| !b.in_flight && now.saturating_duration_since(b.created) >= timeout)
                {
                    if let Some(b) = q.remove(at) {
                        self.pending = self.pending.saturating_sub(b.records.len());
                        self.buffered = self.buffered.saturating_sub(b.record_bytes());
                        out.push((TopicPartition::new(name.clone(), i), b));
                    }
                }
            }
            t.queues.retain(|_, q| !q.is_empty());
        }
        out
    }

    /// The earliest time a batch not in flight passes `delivery.timeout.ms`.
    pub(super) fn next_expiry(&self, timeout: Duration) -> Option<Instant> {
        self.oldest().map(|o| crate::deadline::at(o, timeout))
    }
}

/// How many of a batch's records (estimated `sizes`, at least two) go to the first of its two
/// pieces: the fewest whose bytes reach half the batch's, but at least one and leaving one.
pub(super) fn split_point(sizes: &[usize]) -> usize {
    let total: usize = sizes.iter().sum();
    let mut sum = 0;
    let mut k = 0;
    while k < sizes.len() && sum * 2 < total {
        sum += sizes[k];
        k += 1;
    }
    k.clamp(1, sizes.len().saturating_sub(1).max(1))
}

/// Picks (and remembers) the next partition for keyless records: round robin over the
/// partitions with a leader, or over all while none has one.
pub(super) fn next_sticky(t: &mut TopicState, rr: &mut u32) -> i32 {
    *rr = rr.wrapping_add(1);
    let p = if t.available.is_empty() {
        (*rr % (t.leaders.len().max(1) as u32)) as i32
    } else {
        t.available[*rr as usize % t.available.len()]
    };
    t.sticky = Some(p);
    t.sticky_bytes = 0;
    p
}

pub(super) fn apply_topic(state: &mut TopicState, t: &TopicMetadata, meta: &Metadata) {
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

/// Encodes the `records` of `tp`'s batch for `magic`, first checking that the broker can take
/// what they hold.
#[cfg(test)]
pub(super) fn encode_batch(
    records: &[NewRecord],
    tp: &TopicPartition,
    compression: Compression,
    magic: i8,
    bv: &BrokerVersions,
) -> Result<Bytes> {
    encode_stamped(records, tp, compression, magic, bv, &BatchProducer::NONE)
}

/// [`encode_batch`] with a producer header (idempotence).
pub(super) fn encode_stamped(
    records: &[NewRecord],
    tp: &TopicPartition,
    compression: Compression,
    magic: i8,
    bv: &BrokerVersions,
    stamp: &BatchProducer,
) -> Result<Bytes> {
    if magic < 2 && records.iter().any(|r| !r.headers.is_empty()) {
        versions::check(&RECORD_HEADERS, bv)?;
    }
    if compression == Compression::Zstd {
        versions::check(&ZSTD_COMPRESSION, bv)?;
    }
    records::encode_with(records, compression, magic, stamp).map_err(|source| Error::NotEncodable {
        partition: tp.clone(),
        magic,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{Broker, PartitionMetadata};
    use crate::protocol::VersionRange;
    use std::sync::Arc;

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

    fn ids(taken: &[Taken]) -> Vec<(TopicPartition, usize)> {
        taken.iter().map(|t| (t.tp.clone(), t.records.len())).collect()
    }

    fn append(acc: &mut Accumulator, r: ProducerRecord) -> (i32, bool) {
        let size = r.size();
        let (p, closed, _) = acc.append(r, size, Instant::now()).unwrap();
        (p, closed)
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
    fn keyless_records_move_on_after_a_batch_size_of_bytes_even_when_each_batch_leaves_early() {
        // A slow producer (or one that flushes often) sends every batch long before it fills:
        // the sticky partition must still change once batch.size bytes went to it, or every
        // keyless record lands in one partition for the producer's whole life.
        let mut acc = acc_with("t", &[1, 1, 1], 200);
        let flush = Ready {
            linger: Duration::from_secs(3600),
            all: true,
        };
        let mut seen = Vec::new();
        for _ in 0..12 {
            let (p, _) = append(
                &mut acc,
                rec("t", None, "0123456789012345678901234567890123456789"),
            );
            seen.push(p);
            // The batch leaves at once, holding this one record.
            let (taken, _) = acc.take_ready(1, Instant::now(), flush, 100, &|_, _| true);
            assert_eq!(taken.len(), 1, "{seen:?}");
        }
        // 61 bytes a record: three fit in 200 bytes, the fourth goes to the next partition.
        for w in seen.chunks(3) {
            assert!(w.iter().all(|p| *p == w[0]), "{seen:?}");
        }
        let used: std::collections::BTreeSet<i32> = seen.iter().copied().collect();
        assert_eq!(used.len(), 3, "{seen:?}");
    }

    #[test]
    fn full_batches_go_at_once_the_others_after_linger_or_at_a_flush() {
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
        let lingering = Ready {
            linger: Duration::from_secs(3600),
            all: false,
        };
        // Only the full batch is due; the others wait for linger.ms.
        let (taken, wake) = acc.take_ready(1, now, lingering, 1, &|_, _| true);
        assert_eq!(ids(&taken), vec![(TopicPartition::new("t", 0), 3)]);
        // The next batch of partition 0 waits for the first's answer, not for a time.
        assert_eq!(wake, None);
        let (taken, wake) = acc.take_ready(2, now, lingering, 1, &|_, _| true);
        assert!(taken.is_empty());
        assert!(
            wake.is_some_and(|w| w > now + Duration::from_secs(3000)),
            "{wake:?}"
        );
        // A flush makes every batch due, but a partition has one batch in flight at a time
        // unless more are allowed.
        let flush = Ready {
            linger: Duration::from_secs(3600),
            all: true,
        };
        assert!(acc.take_ready(1, now, flush, 1, &|_, _| true).0.is_empty());
        assert_eq!(
            ids(&acc.take_ready(2, now, flush, 1, &|_, _| true).0),
            vec![(TopicPartition::new("t", 1), 1)]
        );
        assert_eq!(
            ids(&acc.take_ready(1, now, flush, 2, &|_, _| true).0),
            vec![(TopicPartition::new("t", 0), 1)]
        );
        // linger.ms passed: due without a flush.
        append(&mut acc, rec("t", None, "y").partition(1));
        let later = now + Duration::from_secs(3601);
        let (taken, _) = acc.take_ready(
            2,
            later,
            Ready {
                all: false,
                ..lingering
            },
            2,
            &|_, _| true,
        );
        assert_eq!(ids(&taken), vec![(TopicPartition::new("t", 1), 1)]);
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
        let t0 = TopicPartition::new("t", 0);
        let id = acc.topics["t"].queues[&0][0].id;
        acc.batch_mut(&t0, id).unwrap().retry_at = Some(later);
        let due = Ready {
            linger: Duration::ZERO,
            all: false,
        };
        let (taken, wake) = acc.take_ready(1, now, due, 1, &|_, _| true);
        assert!(taken.is_empty());
        assert_eq!(wake, Some(later));
        let (leaders, leaderless) = acc.leaders_with_work();
        assert!(leaderless);
        assert_eq!(leaders.into_iter().collect::<Vec<_>>(), vec![1]);
        let (taken, _) = acc.take_ready(1, later, due, 1, &|_, _| true);
        assert_eq!(ids(&taken), vec![(t0.clone(), 1)]);
        // A new leader shows up with fresh metadata.
        acc.update(&metadata("t", &[1, 3]));
        let (taken, _) = acc.take_ready(3, later, due, 1, &|_, _| true);
        assert_eq!(ids(&taken), vec![(TopicPartition::new("t", 1), 1)]);
        let (leaders, leaderless) = acc.leaders_with_work();
        assert!(leaders.is_empty() && !leaderless, "both in flight");
        // In flight: not expired (its answer is awaited); waiting again: expired.
        assert!(acc
            .expire(Duration::from_millis(10), now + Duration::from_secs(1))
            .is_empty());
        for (tp, id) in [(t0, taken[0].id - 1), (TopicPartition::new("t", 1), taken[0].id)] {
            if let Some(b) = acc.batch_mut(&tp, id) {
                b.in_flight = false;
            }
        }
        // Expiry drops batches past delivery.timeout.ms and their records from the count.
        assert_eq!(acc.pending, 2);
        let gone = acc.expire(Duration::from_millis(10), now + Duration::from_secs(1));
        assert_eq!(gone.len(), 2);
        assert_eq!(acc.pending, 0);
    }

    #[test]
    fn a_topic_without_partitions_has_no_leader_to_send_to() {
        let mut acc = acc_with("t", &[1], 1 << 20);
        acc.topics.insert("empty".into(), TopicState::default());
        let e = acc
            .append(rec("empty", None, "v"), 10, Instant::now())
            .unwrap_err();
        match &e {
            Error::NoLeader { partition } => assert_eq!(partition, &TopicPartition::new("empty", 0)),
            other => panic!("{other:?}"),
        }
        assert_eq!(e.to_string(), "empty-0: no leader is known for this partition");
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
    fn a_batch_taken_for_sending_shares_its_records_with_the_queue() {
        let mut acc = acc_with("t", &[1], 1 << 20);
        for v in ["a", "b", "c"] {
            append(&mut acc, rec("t", None, v));
        }
        let due = Ready {
            linger: Duration::ZERO,
            all: false,
        };
        let (taken, _) = acc.take_ready(1, Instant::now(), due, 5, &|_, _| true);
        let queued = &acc.topics["t"].queues[&0][0];
        // Taking happens under the lock every send needs: no record is copied there.
        assert!(Arc::ptr_eq(&taken[0].records, &queued.records));
        assert_eq!(taken[0].records.len(), 3);
        // A later record goes to a new batch; the one taken is unchanged.
        append(&mut acc, rec("t", None, "d"));
        assert_eq!(taken[0].records.len(), 3);
        assert_eq!(acc.topics["t"].queues[&0][1].records.len(), 1);
    }

    #[test]
    fn a_sent_batch_takes_no_more_records_and_settled_batches_free_the_buffer() {
        let mut acc = acc_with("t", &[1], 1 << 20);
        let tp = TopicPartition::new("t", 0);
        append(&mut acc, rec("t", None, "a"));
        let one = acc.buffered;
        assert!(one > 0);
        let due = Ready {
            linger: Duration::ZERO,
            all: false,
        };
        let (taken, _) = acc.take_ready(1, Instant::now(), due, 5, &|_, _| true);
        assert_eq!(taken.len(), 1);
        // Sent (say the answer was lost): the next record must not join it, or the retry
        // would carry it while the first attempt did not.
        append(&mut acc, rec("t", None, "b"));
        let q = &acc.topics["t"].queues[&0];
        assert_eq!(q.len(), 2);
        assert_eq!(q[0].records.len(), 1);
        assert!(q[0].in_flight && !q[1].in_flight);
        assert_eq!(acc.buffered, 2 * one);
        // The bytes kept for a retry come back with the batch.
        let bytes = Bytes::from_static(b"sent");
        acc.batch_mut(&tp, taken[0].id).unwrap().encoded = Some((2, bytes.clone()));
        acc.batch_mut(&tp, taken[0].id).unwrap().in_flight = false;
        let (again, _) = acc.take_ready(1, Instant::now(), due, 1, &|_, _| true);
        assert_eq!(again[0].id, taken[0].id);
        assert_eq!(again[0].encoded, Some((2, bytes)));
        assert!(acc.remove(&tp, taken[0].id).is_some());
        assert_eq!((acc.pending, acc.buffered), (1, one));
        let waiting = acc.drain_waiting();
        assert_eq!(waiting.len(), 1);
        assert_eq!((acc.pending, acc.buffered), (0, 0));
    }

    #[test]
    fn the_split_point_halves_the_bytes_and_leaves_a_record_on_each_side() {
        assert_eq!(split_point(&[10, 10, 10, 10]), 2);
        assert_eq!(split_point(&[10, 10, 10]), 2);
        assert_eq!(split_point(&[10, 10]), 1);
        // A large record goes alone, or with the small ones before it, never all in one.
        assert_eq!(split_point(&[1000, 1, 1]), 1);
        assert_eq!(split_point(&[1, 1, 1000]), 2);
        assert_eq!(split_point(&[1, 1000, 1]), 2);
        assert_eq!(split_point(&[1, 1000]), 1);
    }

    /// A batch refused as too large becomes two pieces in its place, ahead of the later
    /// batches, with its records, bytes and creation time, ready to send at once; its handles
    /// follow the pieces, split again or not.
    #[test]
    fn a_split_batch_is_replaced_in_its_queue_by_its_two_halves() {
        let mut acc = acc_with("t", &[1], 61 + 5 * 31);
        let tp = TopicPartition::new("t", 0);
        let r = |v: &'static str| rec("t", None, v).partition(0);
        let mut handles = Vec::new();
        for v in [
            "0000000000",
            "1111111111",
            "2222222222",
            "3333333333",
            "4444444444",
            "5555555555",
        ] {
            let size = r(v).size();
            handles.push(acc.append(r(v), size, Instant::now()).unwrap().2);
        }
        let (pending, buffered) = (acc.pending, acc.buffered);
        let due = Ready {
            linger: Duration::ZERO,
            all: true,
        };
        let taken = acc.take_ready(1, Instant::now(), due, 1, &|_, _| true).0;
        assert_eq!(ids(&taken), vec![(tp.clone(), 5)]);
        let whole = taken[0].id;
        let created = acc.topics["t"].queues[&0][0].created;
        let later = acc.topics["t"].queues[&0][1].id;
        // Equal records: the first piece takes the three that reach half the bytes.
        let [(a, 3), (b, 2)] = acc.split(&tp, whole).unwrap() else {
            panic!("not halves")
        };
        assert!(acc.batch_mut(&tp, whole).is_none());
        let q = &acc.topics["t"].queues[&0];
        assert_eq!(q.iter().map(|b| b.id).collect::<Vec<_>>(), vec![a, b, later]);
        for piece in [&q[0], &q[1]] {
            assert!(
                piece.closed && !piece.in_flight && piece.attempts == 0,
                "{piece:?}"
            );
            assert_eq!(
                (piece.created, piece.stamp, &piece.encoded),
                (created, None, &None)
            );
        }
        assert_eq!((q[0].record_bytes(), q[1].record_bytes()), (3 * 31, 2 * 31));
        // The records stay pending and hold the same buffer.memory.
        assert_eq!((acc.pending, acc.buffered), (pending, buffered));
        // The first piece goes next, ahead of the later batch.
        let again = acc.take_ready(1, Instant::now(), due, 1, &|_, _| true).0;
        assert_eq!(ids(&again), vec![(tp.clone(), 3)]);
        assert_eq!(again[0].records[2].value, Some(Bytes::from_static(b"2222222222")));
        // A piece splits again; one record does not.
        let [(b1, 1), (b2, 1)] = acc.split(&tp, b).unwrap() else {
            panic!()
        };
        let [(a1, 2), (a2, 1)] = acc.split(&tp, a).unwrap() else {
            panic!()
        };
        assert!(acc.split(&tp, b1).is_none());
        assert!(acc.split(&tp, 999).is_none());
        let pieces: Vec<u64> = acc.topics["t"].queues[&0].iter().map(|b| b.id).collect();
        assert_eq!(pieces, vec![a1, a2, b1, b2, later]);
        // Each handle reads its result from its own piece.
        let offsets = [(a1, 10), (a2, 20), (b1, 30), (b2, 40), (later, 50)];
        for (id, offset) in offsets {
            acc.remove(&tp, id).unwrap().delivery.acked(offset, -1);
        }
        let got: Vec<Option<i64>> = handles
            .iter()
            .map(|h| h.try_result().unwrap().unwrap().offset)
            .collect();
        assert_eq!(got, [Some(10), Some(11), Some(20), Some(30), Some(40), Some(50)]);
        assert_eq!((acc.pending, acc.buffered), (0, 0));
    }

    #[test]
    fn old_brokers_cannot_take_headers_or_zstd() {
        let mut acc = acc_with("t", &[1], 1 << 20);
        append(&mut acc, rec("t", None, "v").header("h", "x"));
        let tp = TopicPartition::new("t", 0);
        let b = &acc.topics["t"].queues[&0][0].records;
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
        // What the capability checks let through but the legacy format cannot carry is the
        // encoder's refusal, named as such (not dressed up as a broker code).
        let e = encode_batch(b, &tp, Compression::None, 1, &new).unwrap_err();
        match &e {
            Error::NotEncodable {
                partition,
                magic: 1,
                source: records::RecordsError::Unsupported(why),
            } => {
                assert_eq!(partition, &tp);
                assert!(why.contains("headers"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(e.kafka_code(), None);
        assert!(
            e.to_string()
                .starts_with("t-0: the leader's record format (magic 1)"),
            "{e}"
        );
        let bytes = encode_batch(b, &tp, Compression::Zstd, 2, &new).unwrap();
        let decoded = records::decode(&bytes, &Default::default()).unwrap();
        assert_eq!(
            decoded.records[0].headers,
            vec![("h".to_string(), Some(Bytes::from_static(b"x")))]
        );
    }
}
