//! ShareFetch and ShareAcknowledge for one broker, as pure functions: the requests a share
//! session's plan and the waiting acknowledgements make, and what an answer gives back —
//! records of the acquired ranges with their delivery counts, the offsets of those ranges that
//! held no record (acknowledged as gaps), and each partition's fetch and acknowledgement
//! errors.

use super::acks::Batch;
use super::session::{IdPartition, Plan};
use crate::consumer::ConsumerRecord;
use crate::protocol::messages::share_acknowledge_request as ack_req;
use crate::protocol::messages::share_fetch_request as fetch_req;
use crate::protocol::messages::{
    ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
};
use crate::protocol::Uuid;
use crate::records::{self, DecodeLimits};
use crate::KafkaCode;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// The fetch settings every ShareFetch carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FetchSettings {
    /// `fetch.max.wait.ms`, or less when the poll has less left.
    pub(crate) max_wait: Duration,
    /// `fetch.min.bytes`.
    pub(crate) min_bytes: i32,
    /// `fetch.max.bytes`.
    pub(crate) max_bytes: i32,
    /// `max.poll.records`: also the batch size the broker acquires in.
    pub(crate) max_records: i32,
}

/// The ShareFetch for one broker: the partitions `plan` adds or forgets, and those with
/// acknowledgements to carry (`acks`, only on an open session).
pub(crate) fn share_fetch_request(
    group: &str,
    member_id: &str,
    plan: &Plan,
    acks: &BTreeMap<IdPartition, Vec<Batch>>,
    settings: &FetchSettings,
) -> ShareFetchRequest {
    let mut topics: BTreeMap<Uuid, BTreeMap<i32, Vec<fetch_req::AcknowledgementBatch>>> = BTreeMap::new();
    for (id, p) in &plan.add {
        topics.entry(*id).or_default().entry(*p).or_default();
    }
    for ((id, p), batches) in acks {
        topics
            .entry(*id)
            .or_default()
            .entry(*p)
            .or_default()
            .extend(batches.iter().map(|b| fetch_req::AcknowledgementBatch {
                first_offset: b.first,
                last_offset: b.last,
                acknowledge_types: b.types.clone(),
                ..Default::default()
            }));
    }
    let mut forgotten: BTreeMap<Uuid, Vec<i32>> = BTreeMap::new();
    for (id, p) in &plan.forget {
        forgotten.entry(*id).or_default().push(*p);
    }
    ShareFetchRequest {
        group_id: Some(group.into()),
        member_id: Some(member_id.into()),
        share_session_epoch: plan.epoch,
        max_wait_ms: i32::try_from(settings.max_wait.as_millis()).unwrap_or(i32::MAX),
        min_bytes: settings.min_bytes,
        max_bytes: settings.max_bytes,
        max_records: settings.max_records,
        batch_size: settings.max_records,
        topics: topics
            .into_iter()
            .map(|(topic_id, partitions)| fetch_req::FetchTopic {
                topic_id,
                partitions: partitions
                    .into_iter()
                    .map(
                        |(partition_index, acknowledgement_batches)| fetch_req::FetchPartition {
                            partition_index,
                            acknowledgement_batches,
                            ..Default::default()
                        },
                    )
                    .collect(),
                ..Default::default()
            })
            .collect(),
        forgotten_topics_data: forgotten
            .into_iter()
            .map(|(topic_id, ps)| fetch_req::ForgottenTopic {
                topic_id,
                partitions: ps.into(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// The ShareAcknowledge carrying `acks` in session epoch `epoch` (-1 also closes the session).
pub(crate) fn share_acknowledge_request(
    group: &str,
    member_id: &str,
    epoch: i32,
    acks: &BTreeMap<IdPartition, Vec<Batch>>,
) -> ShareAcknowledgeRequest {
    let mut topics: BTreeMap<Uuid, Vec<ack_req::AcknowledgePartition>> = BTreeMap::new();
    for ((id, p), batches) in acks {
        topics
            .entry(*id)
            .or_default()
            .push(ack_req::AcknowledgePartition {
                partition_index: *p,
                acknowledgement_batches: batches
                    .iter()
                    .map(|b| ack_req::AcknowledgementBatch {
                        first_offset: b.first,
                        last_offset: b.last,
                        acknowledge_types: b.types.clone(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            });
    }
    ShareAcknowledgeRequest {
        group_id: Some(group.into()),
        member_id: Some(member_id.into()),
        share_session_epoch: epoch,
        topics: topics
            .into_iter()
            .map(|(topic_id, partitions)| ack_req::AcknowledgeTopic {
                topic_id,
                partitions,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// A record the broker acquired for this member, with how often it has been delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Acquired {
    pub(crate) record: ConsumerRecord,
    pub(crate) delivery_count: i16,
}

/// One partition of a ShareFetch or ShareAcknowledge answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct PartitionAnswer {
    /// The fetch error (`NONE` when records, or none, came).
    pub(crate) code: Option<KafkaCode>,
    /// The error of the acknowledgements this request carried for the partition.
    pub(crate) ack_code: Option<KafkaCode>,
    /// The broker's message for either error.
    pub(crate) message: Option<String>,
    /// The records acquired, in offset order.
    pub(crate) records: Vec<Acquired>,
    /// Acquired ranges' offsets that held no record for the application (to acknowledge as
    /// gaps), as inclusive ranges.
    pub(crate) gaps: Vec<(i64, i64)>,
}

/// A whole answer: the session-level error, if any, the acquisition lock's duration, and each
/// partition's part.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Answer {
    pub(crate) code: Option<KafkaCode>,
    pub(crate) message: Option<String>,
    pub(crate) lock_timeout: Option<Duration>,
    pub(crate) partitions: BTreeMap<IdPartition, PartitionAnswer>,
}

fn error(code: i16) -> Option<KafkaCode> {
    let c = KafkaCode::from_code(code);
    c.is_error().then_some(c)
}

/// Reads a ShareFetch answer; `names` gives each topic id's name (a topic the member does not
/// know is skipped). Records that do not decode fail only their partition (`CORRUPT_MESSAGE`).
pub(crate) fn read_share_fetch(
    resp: ShareFetchResponse,
    names: &HashMap<Uuid, Arc<str>>,
    limits: &DecodeLimits,
) -> Answer {
    let mut answer = Answer {
        code: error(resp.error_code),
        message: resp.error_message.map(|m| m.to_string()),
        lock_timeout: u64::try_from(resp.acquisition_lock_timeout_ms)
            .ok()
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis),
        partitions: BTreeMap::new(),
    };
    for topic in resp.responses {
        let Some(name) = names.get(&topic.topic_id) else {
            continue;
        };
        for p in topic.partitions {
            let mut part = PartitionAnswer {
                code: error(p.error_code),
                ack_code: error(p.acknowledge_error_code),
                message: p
                    .error_message
                    .or(p.acknowledge_error_message)
                    .map(|m| m.to_string()),
                ..Default::default()
            };
            if !p.acquired_records.is_empty() {
                match acquired(name, p.partition_index, &p.records, &p.acquired_records, limits) {
                    Ok((records, gaps)) => {
                        part.records = records;
                        part.gaps = gaps;
                    }
                    Err(e) => {
                        part.code = Some(KafkaCode::CorruptMessage);
                        part.message = Some(e);
                    }
                }
            }
            answer
                .partitions
                .insert((topic.topic_id, p.partition_index), part);
        }
    }
    answer
}

/// Reads a ShareAcknowledge answer: the session-level error and each partition's.
pub(crate) fn read_share_acknowledge(resp: ShareAcknowledgeResponse) -> Answer {
    let mut answer = Answer {
        code: error(resp.error_code),
        message: resp.error_message.map(|m| m.to_string()),
        lock_timeout: None,
        partitions: BTreeMap::new(),
    };
    for topic in resp.responses {
        for p in topic.partitions {
            answer.partitions.insert(
                (topic.topic_id, p.partition_index),
                PartitionAnswer {
                    ack_code: error(p.error_code),
                    message: p.error_message.map(|m| m.to_string()),
                    ..Default::default()
                },
            );
        }
    }
    answer
}

/// Inclusive offset ranges.
type Gaps = Vec<(i64, i64)>;

/// The records of `bytes` inside the acquired ranges, each with its range's delivery count,
/// and the offsets of those ranges no record came for.
fn acquired(
    topic: &Arc<str>,
    partition: i32,
    bytes: &bytes::Bytes,
    ranges: &[crate::protocol::messages::share_fetch_response::AcquiredRecords],
    limits: &DecodeLimits,
) -> Result<(Vec<Acquired>, Gaps), String> {
    let decoded = records::decode(bytes, limits).map_err(|e| format!("{topic}-{partition}: {e}"))?;
    let mut by_offset: BTreeMap<i64, records::Record> =
        decoded.records.into_iter().map(|r| (r.offset, r)).collect();
    let mut out = Vec::new();
    let mut gaps = Vec::new();
    for range in ranges {
        if range.last_offset < range.first_offset {
            continue;
        }
        let mut next = range.first_offset;
        let inside: Vec<i64> = by_offset
            .range(range.first_offset..=range.last_offset)
            .map(|(o, _)| *o)
            .collect();
        for offset in inside {
            if offset > next {
                gaps.push((next, offset - 1));
            }
            next = offset + 1;
            let Some(r) = by_offset.remove(&offset) else {
                continue;
            };
            out.push(Acquired {
                record: ConsumerRecord {
                    topic: Arc::clone(topic),
                    partition,
                    offset: r.offset,
                    timestamp: r.timestamp,
                    key: r.key,
                    value: r.value,
                    headers: r.headers,
                    leader_epoch: None,
                },
                delivery_count: range.delivery_count,
            });
        }
        if next <= range.last_offset {
            gaps.push((next, range.last_offset));
        }
    }
    out.sort_by_key(|a| a.record.offset);
    Ok((out, gaps))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::share_fetch_response as resp;
    use crate::records::{encode, Compression, NewRecord};

    fn id() -> Uuid {
        Uuid([3; 16])
    }

    fn plan(epoch: i32, add: &[i32], forget: &[i32]) -> Plan {
        Plan {
            epoch,
            add: add.iter().map(|p| (id(), *p)).collect(),
            forget: forget.iter().map(|p| (id(), *p)).collect(),
        }
    }

    fn settings() -> FetchSettings {
        FetchSettings {
            max_wait: Duration::from_millis(500),
            min_bytes: 1,
            max_bytes: 1 << 20,
            max_records: 500,
        }
    }

    #[test]
    fn a_fetch_lists_added_partitions_and_those_with_acknowledgements() {
        let acks = BTreeMap::from([(
            (id(), 2),
            vec![Batch {
                first: 5,
                last: 6,
                types: vec![1],
            }],
        )]);
        let req = share_fetch_request("g", "m", &plan(3, &[0], &[1]), &acks, &settings());
        assert_eq!(req.share_session_epoch, 3);
        assert_eq!(
            (req.max_wait_ms, req.max_records, req.batch_size),
            (500, 500, 500)
        );
        let parts: Vec<(i32, usize)> = req.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.acknowledgement_batches.len()))
            .collect();
        assert_eq!(parts, vec![(0, 0), (2, 1)]);
        assert_eq!(req.forgotten_topics_data[0].partitions, [1][..]);
        let ack = share_acknowledge_request("g", "m", -1, &acks);
        assert_eq!(ack.share_session_epoch, -1);
        assert_eq!(
            ack.topics[0].partitions[0].acknowledgement_batches[0].last_offset,
            6
        );
    }

    /// A record batch at `base` (the producer's encoding numbers from 0; the base offset is
    /// outside the batch's CRC, as a broker rewrites it).
    fn batch(base: i64, values: &[&str]) -> Vec<u8> {
        let records: Vec<NewRecord> = values
            .iter()
            .map(|v| NewRecord {
                value: Some(bytes::Bytes::from(v.to_string())),
                timestamp: Some(0),
                ..Default::default()
            })
            .collect();
        let mut b = encode(&records, Compression::None, 2).unwrap().to_vec();
        b[..8].copy_from_slice(&base.to_be_bytes());
        b
    }

    #[test]
    fn only_acquired_records_are_read_and_holes_are_gaps() {
        let mut bytes = batch(10, &["a", "b", "c"]);
        bytes.extend_from_slice(&batch(15, &["d"]));
        let answer = ShareFetchResponse {
            acquisition_lock_timeout_ms: 30_000,
            responses: vec![resp::ShareFetchableTopicResponse {
                topic_id: id(),
                partitions: vec![resp::PartitionData {
                    partition_index: 0,
                    records: bytes.into(),
                    acquired_records: vec![
                        resp::AcquiredRecords {
                            first_offset: 11,
                            last_offset: 12,
                            delivery_count: 1,
                            ..Default::default()
                        },
                        resp::AcquiredRecords {
                            first_offset: 13,
                            last_offset: 15,
                            delivery_count: 2,
                            ..Default::default()
                        },
                    ],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let names = HashMap::from([(id(), Arc::<str>::from("t"))]);
        let a = read_share_fetch(answer, &names, &DecodeLimits::default());
        assert_eq!(a.lock_timeout, Some(Duration::from_secs(30)));
        let p = &a.partitions[&(id(), 0)];
        let got: Vec<(i64, i16)> = p
            .records
            .iter()
            .map(|r| (r.record.offset, r.delivery_count))
            .collect();
        assert_eq!(got, vec![(11, 1), (12, 1), (15, 2)]);
        assert_eq!(p.gaps, vec![(13, 14)]);
        assert_eq!(p.code, None);
    }

    #[test]
    fn errors_are_kept_per_partition_and_unknown_topics_skipped() {
        let answer = ShareFetchResponse {
            error_code: KafkaCode::None.code(),
            responses: vec![
                resp::ShareFetchableTopicResponse {
                    topic_id: id(),
                    partitions: vec![resp::PartitionData {
                        partition_index: 1,
                        error_code: KafkaCode::NotLeaderOrFollower.code(),
                        acknowledge_error_code: KafkaCode::InvalidRecordState.code(),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                resp::ShareFetchableTopicResponse {
                    topic_id: Uuid([9; 16]),
                    partitions: vec![resp::PartitionData::default()],
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let names = HashMap::from([(id(), Arc::<str>::from("t"))]);
        let a = read_share_fetch(answer, &names, &DecodeLimits::default());
        assert_eq!(a.partitions.len(), 1);
        let p = &a.partitions[&(id(), 1)];
        assert_eq!(p.code, Some(KafkaCode::NotLeaderOrFollower));
        assert_eq!(p.ack_code, Some(KafkaCode::InvalidRecordState));
    }

    #[test]
    fn corrupt_records_fail_their_partition_only() {
        let mut corrupt = batch(0, &["a"]);
        // The last byte is inside the record, which the batch's CRC covers.
        *corrupt.last_mut().unwrap() ^= 0xff;
        let answer = ShareFetchResponse {
            responses: vec![resp::ShareFetchableTopicResponse {
                topic_id: id(),
                partitions: vec![resp::PartitionData {
                    partition_index: 0,
                    records: corrupt.into(),
                    acquired_records: vec![resp::AcquiredRecords {
                        first_offset: 0,
                        last_offset: 0,
                        delivery_count: 1,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let names = HashMap::from([(id(), Arc::<str>::from("t"))]);
        let a = read_share_fetch(answer, &names, &DecodeLimits::default());
        let p = &a.partitions[&(id(), 0)];
        assert!(p.records.is_empty());
        assert_eq!(p.code, Some(KafkaCode::CorruptMessage), "{p:?}");
    }
}
