//! The pending batches and where they go: per partition a queue of record batches, the
//! sticky partition for keyless records (KIP-480), leaders from metadata, and the plan of which
//! front batches to send to which broker. Pure, tested without a broker.

use super::delivery::{BatchDelivery, DeliveryHandle};
use super::partitioner::key_partition;
use super::record::ProducerRecord;
use super::request::LastError;
use crate::client::{Metadata, TopicMetadata};
use crate::error::{Error, Result};
use crate::group::TopicPartition;
use crate::net::versions::{self, BrokerVersions, RECORD_HEADERS, ZSTD_COMPRESSION};
use crate::protocol::ApiKey;
use crate::records::{self, Compression, NewRecord};
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
    pub(super) records: Vec<NewRecord>,
    /// Estimated size, see [`ProducerRecord::size`].
    pub(super) bytes: usize,
    pub(super) created: Instant,
    /// Closed to appends: it reached the batch limit, or it has been sent (a retry must send
    /// exactly what the broker may already have).
    pub(super) closed: bool,
    pub(super) attempts: u32,
    pub(super) retry_at: Option<Instant>,
    /// The encoded batch and its magic, kept so a retry sends exactly the same bytes.
    pub(super) encoded: Option<(i8, Bytes)>,
    pub(super) last_error: Option<LastError>,
    /// The result its records' [`DeliveryHandle`]s share; settled when the batch is
    /// acknowledged or fails for good.
    pub(super) delivery: Arc<BatchDelivery>,
}

impl Batch {
    pub(super) fn new(partition: TopicPartition, now: Instant) -> Self {
        Batch {
            delivery: BatchDelivery::new(partition),
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

    pub(super) fn has_headers(&self) -> bool {
        self.records.iter().any(|r| !r.headers.is_empty())
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
    /// Where records without a key go until that batch is full.
    pub(super) sticky: Option<i32>,
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

/// What a round of sending takes: the front batch of each chosen partition, by leader.
pub(super) type Plan = BTreeMap<i32, Vec<TopicPartition>>;

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

    /// Appends `r` to its partition's open batch; returns the partition, whether a batch was
    /// closed (so a request is due) and the record's handle.
    pub(super) fn append(
        &mut self,
        r: ProducerRecord,
        size: usize,
        now: Instant,
    ) -> Result<(i32, bool, DeliveryHandle)> {
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
            return Err(Error::NoLeader {
                partition: TopicPartition::new(r.topic, p),
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
                queue.push_back(Batch::new(TopicPartition::new(r.topic.as_str(), p), now));
                queue.back_mut().ok_or(Error::Closed)?
            }
        };
        open.bytes += size;
        let timestamp = r.timestamp.unwrap_or_else(records::now_ms);
        // A batch holds at most i32::MAX records on the wire, far below what memory allows.
        let handle = open.delivery.handle(open.records.len() as u32, timestamp);
        open.records.push(NewRecord {
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
        Ok((p, closed, handle))
    }

    pub(super) fn has_closed(&self) -> bool {
        self.topics
            .values()
            .flat_map(|t| t.queues.values())
            .any(|q| q.iter().any(|b| b.closed))
    }

    pub(super) fn oldest(&self) -> Option<Instant> {
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
    pub(super) fn plan(&self, only_closed: bool, now: Instant) -> (Plan, bool, Option<Instant>) {
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

    pub(super) fn front_mut(&mut self, tp: &TopicPartition) -> Option<&mut Batch> {
        self.topics
            .get_mut(&tp.topic)?
            .queues
            .get_mut(&tp.partition)?
            .front_mut()
    }

    /// The front batch of `tp` encoded for `magic`, and closed to appends from now on. The
    /// bytes are kept, so that a retry sends exactly what the broker may already have.
    pub(super) fn encode_front(
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
    pub(super) fn pop(&mut self, tp: &TopicPartition) -> Option<Batch> {
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
    pub(super) fn expire(&mut self, timeout: Duration, now: Instant) -> Vec<(TopicPartition, Batch)> {
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
pub(super) fn next_sticky(t: &mut TopicState, rr: &mut u32) -> i32 {
    *rr = rr.wrapping_add(1);
    let p = if t.available.is_empty() {
        (*rr % (t.leaders.len().max(1) as u32)) as i32
    } else {
        t.available[*rr as usize % t.available.len()]
    };
    t.sticky = Some(p);
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

/// Encodes `tp`'s batch for `magic`, first checking that the broker can take what it holds.
pub(super) fn encode_batch(
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
    records::encode(&b.records, compression, magic).map_err(|source| Error::NotEncodable {
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
