//! Fetch: one request per partition leader, built for the version negotiated with that leader,
//! and its answer turned into records or a per-partition verdict (refresh metadata, reset the
//! offset, fail).
//!
//! From v7 (Kafka 1.1) requests run in an incremental fetch session (KIP-227, state in
//! [`super::fetch_session`]): the first request to a leader is full and asks for a session, later
//! ones list only the partitions that are new or whose offset, byte limit or leader epoch
//! changed, and forget those no longer fetched; answers then carry only partitions with records
//! or news. A full request costs every assigned partition on every fetch (about 33 bytes a
//! partition at v17: 16.5 kB for 500 partitions, against about 160 bytes for an incremental
//! one where few partitions move), and the broker's answer to it lists every partition too,
//! idle or not; with many partitions per leader and a consumer that keeps up, that is most of
//! the traffic and the broker's work for a fetch. The answer is still read against the whole
//! target list, since a partition the broker holds keeps the offset it was last sent.
//! Partitions without an answer are simply fetched again.
//!
//! Topic ids replace names from v13; a leader is asked at v13+ only when the metadata gave an
//! id for every topic in the request (Metadata v10+, Kafka 2.8+), else at most v12; a switch
//! between the two starts the session over, since the broker keys one by names or by ids.
//!
//! Each leader gets a connection of the consumer's own (owned by that leader's fetch thread,
//! see [`super::workers`]), because a fetch can wait `fetch.max.wait.ms` on the broker and must
//! not hold up other users of the client's shared connection to that broker (a member's
//! OffsetCommit, another consumer's ListOffsets).

use super::config::IsolationLevel;
use super::fetch_session::{FetchSession, SessionPlan};
use super::ConsumerRecord;
use crate::client::{Broker, Client};
use crate::error::{Error, Result};
use crate::group::TopicPartition;
use crate::net::link::{Link, Purpose};
use crate::protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use crate::protocol::messages::{FetchRequest, FetchResponse};
use crate::protocol::{ApiKey, Uuid, VersionRange};
use crate::records::{self, BatchInfo, DecodeLimits};
use crate::worker::Stop;
use crate::KafkaCode;
use bytes::Bytes;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The least a fetch (connect, or answer beyond the broker's max_wait) is given however little is
/// left of the poll: below it a short poll against a healthy broker would cut its own fetches off.
const MIN_FETCH_WAIT: Duration = Duration::from_secs(1);

/// The highest Fetch version that names topics instead of identifying them by id.
const LAST_VERSION_WITH_NAMES: i16 = 12;

/// Request-wide fetch settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FetchSettings {
    /// `fetch.max.wait.ms` for this request (shortened to what is left of a poll).
    pub max_wait_ms: i32,
    /// `fetch.min.bytes`.
    pub min_bytes: i32,
    /// `fetch.max.bytes` (v3+).
    pub max_bytes: i32,
    /// `max.partition.fetch.bytes`.
    pub partition_max_bytes: i32,
    /// `isolation.level` (v4+).
    pub isolation: IsolationLevel,
}

/// One partition to fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FetchTarget {
    /// The partition.
    pub tp: TopicPartition,
    /// Its topic's id (nil when the metadata had none).
    pub topic_id: Uuid,
    /// Where to start.
    pub offset: i64,
    /// The leader epoch the metadata gave (-1 unknown): lets the broker reject a stale view.
    pub leader_epoch: i32,
}

/// The version to fetch at: the negotiated one, but no higher than v12 when a topic id is
/// missing, and an error when `read_committed` needs v4 and the broker is older.
pub(crate) fn fetch_version(
    negotiated: i16,
    targets: &[FetchTarget],
    isolation: IsolationLevel,
    broker: Option<VersionRange>,
) -> Result<i16> {
    let version = if targets.iter().any(|t| t.topic_id == Uuid::NIL) {
        negotiated.min(LAST_VERSION_WITH_NAMES)
    } else {
        negotiated
    };
    if isolation == IsolationLevel::ReadCommitted && version < 4 {
        return Err(Error::UnsupportedVersion {
            api: ApiKey::Fetch,
            ours: VersionRange::new(4, ApiKey::Fetch.versions().max),
            broker,
        });
    }
    Ok(version)
}

/// A Fetch for the `targets` the session `plan` sends (kept in their order, consecutive
/// partitions of a topic grouped), with its session id, epoch and forgotten partitions.
pub(crate) fn fetch_request(
    version: i16,
    targets: &[FetchTarget],
    s: &FetchSettings,
    plan: &SessionPlan,
) -> FetchRequest {
    let by_id = version > LAST_VERSION_WITH_NAMES;
    let mut topics: Vec<FetchTopic> = Vec::new();
    for t in plan.send.iter().filter_map(|&i| targets.get(i)) {
        let partition = FetchPartition {
            partition: t.tp.partition,
            current_leader_epoch: if version >= 9 { t.leader_epoch } else { -1 },
            fetch_offset: t.offset,
            partition_max_bytes: s.partition_max_bytes,
            ..Default::default()
        };
        let same_topic = |last: &FetchTopic| {
            if by_id {
                last.topic_id == t.topic_id
            } else {
                last.topic == t.tp.topic
            }
        };
        match topics.last_mut() {
            Some(last) if same_topic(last) => last.partitions.push(partition),
            _ => {
                let mut topic = FetchTopic {
                    partitions: vec![partition],
                    ..Default::default()
                };
                if by_id {
                    topic.topic_id = t.topic_id;
                } else {
                    topic.topic = (&t.tp.topic).into();
                }
                topics.push(topic);
            }
        }
    }
    let mut forgotten: Vec<ForgottenTopic> = Vec::new();
    for f in &plan.forget {
        let same_topic = |last: &ForgottenTopic| {
            if by_id {
                last.topic_id == f.topic_id
            } else {
                last.topic == f.tp.topic
            }
        };
        match forgotten.last_mut() {
            Some(last) if same_topic(last) => last.partitions.push(f.tp.partition),
            _ => {
                let mut topic = ForgottenTopic::default();
                if by_id {
                    topic.topic_id = f.topic_id;
                } else {
                    topic.topic = (&f.tp.topic).into();
                }
                topic.partitions.push(f.tp.partition);
                forgotten.push(topic);
            }
        }
    }
    FetchRequest {
        replica_id: -1,
        max_wait_ms: s.max_wait_ms,
        min_bytes: s.min_bytes,
        max_bytes: s.max_bytes,
        isolation_level: s.isolation.code(),
        session_id: plan.session_id,
        session_epoch: plan.epoch,
        topics,
        forgotten_topics_data: forgotten,
        ..Default::default()
    }
}

/// What a fetch brought for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PartitionFetch {
    /// Records from `from` on (possibly none), and where the log goes on.
    Records {
        /// The offset fetched from.
        from: i64,
        /// Records at or after `from`, aborted transactions removed under read_committed.
        records: Vec<ConsumerRecord>,
        /// One past the last complete batch, if any batch was complete.
        next_offset: Option<i64>,
    },
    /// The leader moved or is not known yet: refresh metadata, then fetch again.
    Refresh(KafkaCode),
    /// `from` is outside the log: apply `auto.offset.reset`.
    OutOfRange {
        /// The offset fetched from.
        from: i64,
    },
    /// An error retrying cannot fix (authorization, corrupt data, …).
    Failed {
        /// The code.
        code: KafkaCode,
        /// Details for the error message.
        detail: Option<String>,
    },
}

/// Partition errors after which the metadata is refreshed and the fetch retried: those Kafka
/// marks as stale metadata (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, LEADER_NOT_AVAILABLE,
/// UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID, INCONSISTENT_TOPIC_ID, KAFKA_STORAGE_ERROR,
/// REPLICA_NOT_AVAILABLE, …), and a few it does not that a fresh view of the leader fixes.
fn needs_refresh(code: KafkaCode) -> bool {
    use KafkaCode as K;
    code.needs_metadata_refresh()
        || matches!(
            code,
            K::UnknownLeaderEpoch | K::OffsetNotAvailable | K::NotEnoughReplicas | K::BrokerNotAvailable
        )
}

/// Reads a Fetch answer to a request for `targets`; partitions not asked for are ignored. A
/// request-level error is returned as `Err` with its code.
pub(crate) fn read_fetch_response(
    version: i16,
    resp: FetchResponse,
    targets: &[FetchTarget],
    isolation: IsolationLevel,
    limits: &DecodeLimits,
) -> Result<Vec<(TopicPartition, PartitionFetch)>, KafkaCode> {
    let top = KafkaCode::from_code(resp.error_code);
    if top.is_error() {
        return Err(top);
    }
    // Partition -> offset fetched from, and (v13+ answers by topic id) id -> name, borrowed
    // from the request rather than copied.
    let requested: HashMap<&TopicPartition, i64> = targets.iter().map(|t| (&t.tp, t.offset)).collect();
    let names: HashMap<Uuid, &String> = if version > LAST_VERSION_WITH_NAMES {
        targets.iter().map(|t| (t.topic_id, &t.tp.topic)).collect()
    } else {
        HashMap::new()
    };
    let mut out = Vec::new();
    for topic in resp.responses {
        let name = if version > LAST_VERSION_WITH_NAMES {
            match names.get(&topic.topic_id) {
                Some(n) => (*n).clone(),
                None => continue, // not a topic we asked for
            }
        } else {
            topic.topic.into()
        };
        for p in topic.partitions {
            let tp = TopicPartition::new(name.clone(), p.partition_index);
            let Some(&from) = requested.get(&tp) else {
                continue;
            };
            let code = KafkaCode::from_code(p.error_code);
            let verdict = match code {
                KafkaCode::None => {
                    let aborted: Vec<(i64, i64)> = p
                        .aborted_transactions
                        .unwrap_or_default()
                        .iter()
                        .map(|a| (a.producer_id, a.first_offset))
                        .collect();
                    partition_records(
                        &tp,
                        from,
                        &p.records.unwrap_or_default(),
                        isolation,
                        &aborted,
                        limits,
                    )
                }
                KafkaCode::OffsetOutOfRange => PartitionFetch::OutOfRange { from },
                c if needs_refresh(c) => PartitionFetch::Refresh(c),
                c => PartitionFetch::Failed {
                    code: c,
                    detail: None,
                },
            };
            out.push((tp, verdict));
        }
    }
    Ok(out)
}

/// Decodes one partition's records and keeps those the application should see.
fn partition_records(
    tp: &TopicPartition,
    from: i64,
    bytes: &Bytes,
    isolation: IsolationLevel,
    aborted: &[(i64, i64)],
    limits: &DecodeLimits,
) -> PartitionFetch {
    let decoded = match records::decode(bytes, limits) {
        Ok(d) => d,
        Err(e) => {
            return PartitionFetch::Failed {
                code: KafkaCode::CorruptMessage,
                detail: Some(format!("{tp} at offset {from}: {e}")),
            }
        }
    };
    let records::Decoded {
        records: decoded_records,
        next_offset,
        batches,
        control,
    } = decoded;
    let skipped = if isolation == IsolationLevel::ReadCommitted {
        aborted_batches(&batches, &control, aborted)
    } else {
        Vec::new()
    };
    let mut batch = batches.iter().peekable();
    let mut skip = skipped.iter().peekable();
    let mut records = Vec::with_capacity(decoded_records.len());
    // One allocation of the name per partition answer; each record holds a reference to it.
    let topic: Arc<str> = Arc::from(tp.topic.as_str());
    for r in decoded_records {
        if r.offset < from {
            continue; // the start of a batch the broker returned whole
        }
        while skip.peek().is_some_and(|&&(_, last)| last < r.offset) {
            skip.next();
        }
        if skip
            .peek()
            .is_some_and(|&&(base, last)| base <= r.offset && r.offset <= last)
        {
            continue;
        }
        while batch.peek().is_some_and(|b| b.last_offset < r.offset) {
            batch.next();
        }
        let leader_epoch = batch
            .peek()
            .filter(|b| b.base_offset <= r.offset)
            .and_then(|b| b.leader_epoch);
        records.push(ConsumerRecord {
            topic: Arc::clone(&topic),
            partition: tp.partition,
            offset: r.offset,
            timestamp: r.timestamp,
            key: r.key,
            value: r.value,
            headers: r.headers,
            leader_epoch,
        });
    }
    PartitionFetch::Records {
        from,
        records,
        next_offset,
    }
}

/// The offset ranges (inclusive) of batches that belong to aborted transactions, by the rule
/// Kafka's consumer uses: an aborted transaction `(producer, first_offset)` from the Fetch
/// answer makes every transactional batch of that producer from `first_offset` on aborted,
/// until the producer's ABORT marker (a control record; `control` holds
/// `(producer, offset, is_commit)`).
pub(crate) fn aborted_batches(
    batches: &[BatchInfo],
    control: &[(i64, i64, bool)],
    aborted: &[(i64, i64)],
) -> Vec<(i64, i64)> {
    let mut pending: Vec<(i64, i64)> = aborted.to_vec();
    pending.sort_by_key(|&(_, first)| first);
    let mut next = 0;
    let mut open: HashSet<i64> = HashSet::new();
    let mut out = Vec::new();
    for b in batches {
        if b.producer_id < 0 {
            continue;
        }
        while next < pending.len() && pending[next].1 <= b.last_offset {
            open.insert(pending[next].0);
            next += 1;
        }
        if b.control {
            let abort_marker = control.iter().any(|&(pid, offset, commit)| {
                pid == b.producer_id && !commit && b.base_offset <= offset && offset <= b.last_offset
            });
            if abort_marker {
                open.remove(&b.producer_id);
            }
        } else if b.transactional && open.contains(&b.producer_id) {
            out.push((b.base_offset, b.last_offset));
        }
    }
    out
}

/// The consumer's connections to partition leaders.
#[derive(Debug, Default)]
pub(crate) struct Fetcher {
    conns: HashMap<i32, Link>,
}

impl Fetcher {
    /// Sends a Fetch for `targets` to `leader` over the consumer's own connection to it, built
    /// at the version [`fetch_version`] picks, within `session` (which records what the request
    /// asks the broker to hold; the caller tells it the outcome). Returns the version used with
    /// the answer.
    #[allow(clippy::too_many_arguments)]
    pub fn fetch(
        &mut self,
        client: &Client,
        leader: &Broker,
        session: &mut FetchSession,
        targets: &[FetchTarget],
        settings: &FetchSettings,
        deadline: Instant,
        stop: &Stop,
    ) -> Result<(i16, FetchResponse)> {
        // A poll must return within about its timeout: connecting and waiting past `deadline`
        // (beyond the broker's own max_wait) would hold it up to a request timeout, e.g. behind
        // a leader that stopped answering. What is cut off is fetched again at the next poll.
        let within = client
            .connection_config()
            .request_timeout
            .min(crate::deadline::left(deadline).max(MIN_FETCH_WAIT));
        let conn = match self.conns.entry(leader.id) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let mut link = client.link(Purpose::Fetch, leader.addr());
                stop.uninterruptible(|| link.connect(Some(crate::deadline::after(within))))
                    .unwrap_or(Err(Error::Closed))?;
                e.insert(link)
            }
        };
        let negotiated = conn.version(ApiKey::Fetch)?;
        let broker = conn.versions()?.get(&ApiKey::Fetch.key()).copied();
        let version = fetch_version(negotiated, targets, settings.isolation, broker)?;
        let plan = session.plan(version, targets, settings.partition_max_bytes);
        let req = fetch_request(version, targets, settings, &plan);
        // The broker may hold the request for max_wait before answering.
        let wait = within.saturating_add(Duration::from_millis(
            u64::try_from(settings.max_wait_ms).unwrap_or(0),
        ));
        // Stopped, the read fails (its connection is shut down) or never starts; either way
        // nothing was handed out, so nothing is lost.
        stop.watch(Some(conn));
        let result = if stop.requested() {
            Err(Error::Closed)
        } else {
            conn.send_at(&req, version, Some(wait))
        };
        stop.watch(None);
        if !conn.is_connected() {
            self.conns.remove(&leader.id);
        }
        match result {
            Err(_) if stop.requested() => Err(Error::Closed),
            r => r.map(|r| (version, r)),
        }
    }

    /// Drops the connection to a broker (after it stopped leading or failed).
    pub fn disconnect(&mut self, broker: i32) {
        self.conns.remove(&broker);
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::protocol::messages::fetch_response::{
        AbortedTransaction, FetchableTopicResponse, PartitionData,
    };
    use crate::protocol::Message;
    use crate::records::{Compression, NewRecord};
    use bytes::BytesMut;
    use kafka_protocol::records::{
        Compression as KpCompression, Record as KpRecord, RecordBatchEncoder, RecordEncodeOptions,
        TimestampType,
    };

    fn settings(isolation: IsolationLevel) -> FetchSettings {
        FetchSettings {
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 50 << 20,
            partition_max_bytes: 1 << 20,
            isolation,
        }
    }

    fn targets(with_ids: bool) -> Vec<FetchTarget> {
        let id = |b: u8| if with_ids { Uuid([b; 16]) } else { Uuid::NIL };
        vec![
            FetchTarget {
                tp: TopicPartition::new("a", 0),
                topic_id: id(1),
                offset: 5,
                leader_epoch: 3,
            },
            FetchTarget {
                tp: TopicPartition::new("a", 2),
                topic_id: id(1),
                offset: 6,
                leader_epoch: 3,
            },
            FetchTarget {
                tp: TopicPartition::new("b", 0),
                topic_id: id(2),
                offset: 0,
                leader_epoch: -1,
            },
        ]
    }

    #[test]
    fn fetch_encodes_at_every_version() {
        for v in ApiKey::Fetch.versions().min..=ApiKey::Fetch.versions().max {
            for with_ids in [false, true] {
                let ts = targets(with_ids);
                let Ok(version) = fetch_version(v, &ts, IsolationLevel::ReadUncommitted, None) else {
                    panic!("v{v}");
                };
                assert!(version <= v);
                if !with_ids {
                    assert!(version <= 12, "no topic ids: names needed");
                }
                let plan = SessionPlan::sessionless(ts.len());
                let req = fetch_request(version, &ts, &settings(IsolationLevel::ReadUncommitted), &plan);
                let bytes = req
                    .to_bytes(version)
                    .unwrap_or_else(|e| panic!("Fetch v{version}: {e}"));
                let back = FetchRequest::from_bytes(bytes, version).unwrap();
                assert_eq!(back.topics.len(), 2, "partitions grouped per topic");
                assert_eq!(back.topics[0].partitions.len(), 2);
                assert_eq!(back.topics[0].partitions[1].fetch_offset, 6);
                if version >= 13 {
                    assert_eq!(back.topics[1].topic_id, Uuid([2; 16]));
                } else {
                    assert_eq!(back.topics[1].topic, "b");
                }
                if version >= 7 {
                    assert_eq!((back.session_id, back.session_epoch), (0, -1));
                }
                let epoch = back.topics[0].partitions[0].current_leader_epoch;
                assert_eq!(epoch, if version >= 9 { 3 } else { -1 });
            }
        }
    }

    #[test]
    fn incremental_requests_carry_the_plan_and_forget_by_name_or_id() {
        use super::super::fetch_session::Forget;
        for version in [7, 12, 13, 17] {
            let with_ids = version >= 13;
            let ts = targets(with_ids);
            let plan = SessionPlan {
                session_id: 42,
                epoch: 3,
                send: vec![1],
                forget: vec![
                    Forget {
                        tp: TopicPartition::new("c", 1),
                        topic_id: Uuid([3; 16]),
                    },
                    Forget {
                        tp: TopicPartition::new("c", 4),
                        topic_id: Uuid([3; 16]),
                    },
                ],
            };
            let req = fetch_request(version, &ts, &settings(IsolationLevel::ReadUncommitted), &plan);
            let back = FetchRequest::from_bytes(req.to_bytes(version).unwrap(), version).unwrap();
            assert_eq!((back.session_id, back.session_epoch), (42, 3));
            assert_eq!(back.topics.len(), 1);
            assert_eq!(back.topics[0].partitions.len(), 1);
            assert_eq!(back.topics[0].partitions[0].partition, 2);
            assert_eq!(back.forgotten_topics_data.len(), 1, "grouped per topic");
            let f = &back.forgotten_topics_data[0];
            assert_eq!(f.partitions.as_slice(), &[1, 4]);
            if with_ids {
                assert_eq!(f.topic_id, Uuid([3; 16]));
            } else {
                assert_eq!(f.topic, "c");
            }
        }
    }

    #[test]
    fn read_committed_needs_v4() {
        let ts = targets(false);
        assert!(matches!(
            fetch_version(3, &ts, IsolationLevel::ReadCommitted, None),
            Err(Error::UnsupportedVersion {
                api: ApiKey::Fetch,
                ..
            })
        ));
        assert_eq!(
            fetch_version(4, &ts, IsolationLevel::ReadCommitted, None).unwrap(),
            4
        );
        assert_eq!(
            fetch_version(17, &ts, IsolationLevel::ReadCommitted, None).unwrap(),
            12
        );
        assert_eq!(
            fetch_version(17, &targets(true), IsolationLevel::ReadCommitted, None).unwrap(),
            17
        );
    }

    fn batch(values: &[&str]) -> Bytes {
        let recs: Vec<NewRecord> = values
            .iter()
            .map(|v| NewRecord {
                value: Some(Bytes::from(v.to_string())),
                key: Some(Bytes::from_static(b"k")),
                ..Default::default()
            })
            .collect();
        records::encode(&recs, Compression::None, 2).unwrap()
    }

    /// A batch written at `base` by `producer` (transactional), or a control batch with an
    /// abort (`commit` false) or commit marker.
    fn txn_batch(base: i64, producer: i64, n: usize, control: Option<bool>, epoch: i32) -> Bytes {
        txn_batch_in(base, producer, n, control, epoch, KpCompression::None)
    }

    /// [`txn_batch`] compressed with `compression`.
    pub(crate) fn txn_batch_in(
        base: i64,
        producer: i64,
        n: usize,
        control: Option<bool>,
        epoch: i32,
        compression: KpCompression,
    ) -> Bytes {
        let recs: Vec<KpRecord> = (0..n)
            .map(|i| KpRecord {
                transactional: true,
                control: control.is_some(),
                partition_leader_epoch: epoch,
                producer_id: producer,
                producer_epoch: 0,
                timestamp_type: TimestampType::Creation,
                offset: base + i as i64,
                sequence: i as i32,
                timestamp: 1,
                key: Some(match control {
                    Some(commit) => Bytes::from(vec![0, 0, 0, u8::from(commit)]),
                    None => Bytes::from_static(b"k"),
                }),
                value: Some(match control {
                    Some(_) => Bytes::from(vec![0, 0, 0, 0, 0, 0]),
                    None => Bytes::from(format!("v{}", base + i as i64)),
                }),
                delete_horizon: false,
                headers: Default::default(),
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &recs,
            &RecordEncodeOptions {
                version: 2,
                compression,
            },
        )
        .unwrap();
        buf.freeze()
    }

    fn concat(parts: &[Bytes]) -> Bytes {
        let mut v = Vec::new();
        for p in parts {
            v.extend_from_slice(p);
        }
        Bytes::from(v)
    }

    fn response(records: Bytes, code: KafkaCode, aborted: Option<Vec<(i64, i64)>>) -> FetchResponse {
        FetchResponse {
            responses: vec![FetchableTopicResponse {
                topic: "a".into(),
                topic_id: Uuid([1; 16]),
                partitions: vec![PartitionData {
                    partition_index: 0,
                    error_code: code.code(),
                    high_watermark: 100,
                    aborted_transactions: aborted.map(|a| {
                        a.into_iter()
                            .map(|(producer_id, first_offset)| AbortedTransaction {
                                producer_id,
                                first_offset,
                                ..Default::default()
                            })
                            .collect()
                    }),
                    records: Some(records),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn read(
        version: i16,
        resp: FetchResponse,
        from: i64,
        isolation: IsolationLevel,
    ) -> Vec<(TopicPartition, PartitionFetch)> {
        let target = FetchTarget {
            tp: TopicPartition::new("a", 0),
            topic_id: Uuid([1; 16]),
            offset: from,
            leader_epoch: -1,
        };
        read_fetch_response(version, resp, &[target], isolation, &DecodeLimits::default()).unwrap()
    }

    #[test]
    fn records_below_the_fetch_offset_are_skipped() {
        let out = read(
            12,
            response(batch(&["a", "b", "c"]), KafkaCode::None, None),
            1,
            IsolationLevel::ReadUncommitted,
        );
        let PartitionFetch::Records {
            records, next_offset, ..
        } = &out[0].1
        else {
            panic!("{out:?}")
        };
        assert_eq!(records.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(records[0].value.as_deref(), Some(&b"b"[..]));
        assert_eq!(&*records[0].topic, "a");
        assert_eq!(*next_offset, Some(3));
    }

    #[test]
    fn v13_answers_are_mapped_back_by_topic_id() {
        let out = read(
            13,
            response(batch(&["x"]), KafkaCode::None, None),
            0,
            IsolationLevel::ReadUncommitted,
        );
        assert_eq!(out[0].0, TopicPartition::new("a", 0));
    }

    #[test]
    fn partition_errors() {
        let cases = [
            (KafkaCode::NotLeaderOrFollower, "refresh"),
            (KafkaCode::FencedLeaderEpoch, "refresh"),
            (KafkaCode::UnknownLeaderEpoch, "refresh"),
            (KafkaCode::LeaderNotAvailable, "refresh"),
            (KafkaCode::UnknownTopicOrPartition, "refresh"),
            (KafkaCode::UnknownTopicId, "refresh"),
            (KafkaCode::OffsetOutOfRange, "reset"),
            (KafkaCode::TopicAuthorizationFailed, "fail"),
        ];
        for (code, want) in cases {
            let out = read(
                12,
                response(Bytes::new(), code, None),
                4,
                IsolationLevel::ReadUncommitted,
            );
            let got = match &out[0].1 {
                PartitionFetch::Refresh(_) => "refresh",
                PartitionFetch::OutOfRange { from: 4 } => "reset",
                PartitionFetch::Failed { .. } => "fail",
                other => panic!("{other:?}"),
            };
            assert_eq!(got, want, "{code}");
        }
        let mut top = response(Bytes::new(), KafkaCode::None, None);
        top.error_code = KafkaCode::UnknownServerError.code();
        assert_eq!(
            read_fetch_response(
                12,
                top,
                &[],
                IsolationLevel::ReadUncommitted,
                &DecodeLimits::default()
            ),
            Err(KafkaCode::UnknownServerError)
        );
    }

    #[test]
    fn corrupt_records_fail_the_partition_naming_it() {
        let mut bad = batch(&["a"]).to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 0xff; // breaks the CRC
        let out = read(
            12,
            response(Bytes::from(bad), KafkaCode::None, None),
            0,
            IsolationLevel::ReadUncommitted,
        );
        match &out[0].1 {
            PartitionFetch::Failed {
                code: KafkaCode::CorruptMessage,
                detail: Some(d),
            } => assert!(d.contains("a-0"), "{d}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn batch_headers_come_with_the_records() {
        let bytes = concat(&[
            txn_batch(0, 7, 2, None, 4),
            txn_batch(2, 7, 1, Some(true), 4),
            batch(&["x"]),
        ]);
        let headers = |b: &[u8]| {
            records::decode(&Bytes::copy_from_slice(b), &DecodeLimits::default())
                .unwrap()
                .batches
        };
        let b = headers(&bytes);
        assert_eq!(b.len(), 3);
        assert_eq!((b[0].base_offset, b[0].last_offset, b[0].producer_id), (0, 1, 7));
        assert!(b[0].transactional && !b[0].control);
        assert_eq!(b[0].leader_epoch, Some(4));
        assert!(b[1].control);
        // The plain batch from `records::encode` has no producer and starts at 0 (the broker
        // assigns offsets on append).
        assert_eq!(b[2].producer_id, -1);
        // A truncated tail is ignored.
        assert_eq!(headers(&bytes[..bytes.len() - 3]).len(), 2);
        assert!(headers(&[]).is_empty());
    }

    #[test]
    fn read_committed_drops_aborted_transactions() {
        // Producer 7: offsets 0-1 aborted (marker at 2); producer 8: 3-4 committed (marker 5);
        // producer 7 again: 6 (a new transaction, committed at 7).
        let bytes = concat(&[
            txn_batch(0, 7, 2, None, 1),
            txn_batch(2, 7, 1, Some(false), 1),
            txn_batch(3, 8, 2, None, 1),
            txn_batch(5, 8, 1, Some(true), 1),
            txn_batch(6, 7, 1, None, 1),
            txn_batch(7, 7, 1, Some(true), 1),
        ]);
        let offsets = |isolation| {
            let out = read(
                12,
                response(bytes.clone(), KafkaCode::None, Some(vec![(7, 0)])),
                0,
                isolation,
            );
            match &out[0].1 {
                PartitionFetch::Records {
                    records, next_offset, ..
                } => {
                    assert_eq!(*next_offset, Some(8));
                    records.iter().map(|r| r.offset).collect::<Vec<_>>()
                }
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(offsets(IsolationLevel::ReadCommitted), vec![3, 4, 6]);
        assert_eq!(offsets(IsolationLevel::ReadUncommitted), vec![0, 1, 3, 4, 6]);
    }

    #[test]
    fn records_carry_their_batch_leader_epoch() {
        let bytes = concat(&[txn_batch(0, 7, 2, None, 9), txn_batch(2, 7, 1, Some(true), 9)]);
        let out = read(
            12,
            response(bytes, KafkaCode::None, None),
            0,
            IsolationLevel::ReadUncommitted,
        );
        let PartitionFetch::Records { records, .. } = &out[0].1 else {
            panic!()
        };
        assert!(records.iter().all(|r| r.leader_epoch == Some(9)));
    }

    /// Offsets and values of what one partition's answer hands out, and where it goes on.
    fn handed_out(
        bytes: &Bytes,
        from: i64,
        aborted: Vec<(i64, i64)>,
        isolation: IsolationLevel,
    ) -> (Vec<(i64, String)>, Option<i64>) {
        let out = read(
            12,
            response(bytes.clone(), KafkaCode::None, Some(aborted)),
            from,
            isolation,
        );
        match &out[0].1 {
            PartitionFetch::Records {
                records, next_offset, ..
            } => (
                records
                    .iter()
                    .map(|r| {
                        let v = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default());
                        (r.offset, v.into_owned())
                    })
                    .collect(),
                *next_offset,
            ),
            other => panic!("{other:?}"),
        }
    }

    /// Two producers' transactions interleaved on one partition, the aborted one over two
    /// batches: producer 7 writes 0-1 and 4 then aborts (marker at 6), producer 8 writes 2-3
    /// and commits (marker at 5). With every codec the data batches can carry (markers are
    /// never compressed: the broker writes them), read_committed hands out 2-3 only,
    /// read_uncommitted every data record, and neither a marker.
    #[test]
    fn interleaved_transactions_are_filtered_with_every_compression() {
        for codec in [
            KpCompression::None,
            KpCompression::Gzip,
            KpCompression::Snappy,
            KpCompression::Lz4,
            KpCompression::Zstd,
        ] {
            let bytes = concat(&[
                txn_batch_in(0, 7, 2, None, 1, codec),
                txn_batch_in(2, 8, 2, None, 1, codec),
                txn_batch_in(4, 7, 1, None, 1, codec),
                txn_batch(5, 8, 1, Some(true), 1),
                txn_batch(6, 7, 1, Some(false), 1),
            ]);
            let committed = handed_out(&bytes, 0, vec![(7, 0)], IsolationLevel::ReadCommitted);
            assert_eq!(
                committed,
                (vec![(2, "v2".into()), (3, "v3".into())], Some(7)),
                "{codec:?}"
            );
            let all = handed_out(&bytes, 0, vec![(7, 0)], IsolationLevel::ReadUncommitted);
            let want: Vec<(i64, String)> = (0..5).map(|o| (o, format!("v{o}"))).collect();
            assert_eq!(all, (want, Some(7)), "{codec:?}");
        }
    }

    /// A fetch cut short by its size limit brings an aborted transaction's records but not
    /// its marker: the broker's aborted-transaction list already names it, so the records are
    /// dropped; the next fetch, starting at the marker, hands out what follows it.
    #[test]
    fn an_abort_marker_in_a_later_fetch_still_drops_the_records() {
        let first = concat(&[txn_batch(0, 7, 2, None, 1), txn_batch(2, 7, 2, None, 1)]);
        assert_eq!(
            handed_out(&first, 0, vec![(7, 0)], IsolationLevel::ReadCommitted),
            (vec![], Some(4))
        );
        let second = concat(&[
            txn_batch(4, 7, 1, Some(false), 1),
            txn_batch(5, 7, 1, None, 1),
            txn_batch(6, 7, 1, Some(true), 1),
        ]);
        // The list still holds the transaction begun at 0 (its marker is in this answer);
        // producer 7's next transaction, from 5, committed.
        assert_eq!(
            handed_out(&second, 4, vec![(7, 0)], IsolationLevel::ReadCommitted),
            (vec![(5, "v5".into())], Some(7))
        );
        assert_eq!(
            handed_out(&first, 0, vec![(7, 0)], IsolationLevel::ReadUncommitted)
                .0
                .len(),
            4
        );
    }

    /// An answer holding nothing but a marker hands out nothing, yet says where the log goes
    /// on, so the consumer does not fetch the marker again.
    #[test]
    fn an_answer_of_only_a_marker_moves_the_position_past_it() {
        for (commit, isolation) in [
            (true, IsolationLevel::ReadCommitted),
            (false, IsolationLevel::ReadCommitted),
            (true, IsolationLevel::ReadUncommitted),
            (false, IsolationLevel::ReadUncommitted),
        ] {
            let marker = txn_batch(10, 7, 1, Some(commit), 1);
            let aborted = if commit { vec![] } else { vec![(7, 3)] };
            assert_eq!(
                handed_out(&marker, 10, aborted, isolation),
                (vec![], Some(11)),
                "{commit} {isolation:?}"
            );
        }
    }
}
