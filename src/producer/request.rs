//! Produce requests and answers, pure: which record format a version carries, packing encoded
//! batches into requests below `max.request.size`, and reading each partition's answer as an
//! [`Outcome`]. Unit-tested at every Produce version.

use super::record::Acks;
use crate::authorization::Scope;
use crate::error::Error;
use crate::group::TopicPartition;
use crate::net::link::copy_of;
use crate::protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use crate::protocol::messages::{ProduceRequest, ProduceResponse};
use crate::protocol::ApiKey;
use crate::KafkaCode;
use bytes::Bytes;
use std::collections::HashMap;
use std::fmt;

/// A ProduceRequest's fixed part (request header with a client id, acks, timeout, counts), and
/// per partition the topic name, index and records length; used to keep requests below
/// `max.request.size`.
pub(super) const REQUEST_OVERHEAD: usize = 128;
pub(super) const PARTITION_OVERHEAD: usize = 16;

/// Why a batch failed for the last time, kept to report it when retries run out.
#[derive(Debug)]
pub(super) enum LastError {
    Code(KafkaCode, Option<String>),
    /// The error itself (a lost connection: its address and I/O error), so that the timeout a
    /// user sees keeps it as its `last`/`source()`.
    Failed(Error),
    Other(String),
}

impl LastError {
    /// What to keep of `e`, an error a later attempt may get past.
    pub(super) fn of(e: &Error) -> LastError {
        copy_of(e).map_or_else(|| LastError::Other(e.to_string()), LastError::Failed)
    }

    /// The retries timeout for `what` that ended with this error: kept as the timeout's cause
    /// when it is an error, appended to `what` when it is only a code or a text.
    pub(super) fn into_timeout(self, what: String) -> Error {
        match self {
            LastError::Failed(e) => Error::retries_timeout(what, Some(e)),
            other => Error::retries_timeout(format!("{what}; last error: {other}"), None),
        }
    }
}

impl Clone for LastError {
    fn clone(&self) -> Self {
        match self {
            LastError::Code(code, message) => LastError::Code(*code, message.clone()),
            LastError::Failed(e) => LastError::of(e),
            LastError::Other(m) => LastError::Other(m.clone()),
        }
    }
}

impl fmt::Display for LastError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LastError::Code(code, Some(m)) if !m.is_empty() => write!(f, "{code}: {m}"),
            LastError::Code(code, _) => write!(f, "{code}"),
            LastError::Failed(e) => write!(f, "{e}"),
            LastError::Other(m) => f.write_str(m),
        }
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
pub(super) fn produce_request(
    acks: Acks,
    timeout_ms: i32,
    batches: &[(TopicPartition, Bytes)],
) -> ProduceRequest {
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
pub(super) fn pack(
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
pub(super) enum Outcome {
    /// Written at this base offset (-1 when unknown, as with `acks=0`), at the broker's
    /// log-append time (-1 unless the topic uses LogAppendTime).
    Acked { base_offset: i64, log_append_time: i64 },
    /// Worth another attempt; `refresh` when the metadata is probably stale.
    Retry { refresh: bool, error: LastError },
    /// Failed for good.
    Failed(Error),
    /// Refused as too large (`MESSAGE_TOO_LARGE`), a batch of more than one record: not
    /// written, so split it and send the pieces in its place, as Java's `Sender` does; the
    /// error is for a batch that turns out not to split.
    Split(Error),
}

pub(super) fn produce_error(tp: &TopicPartition, code: KafkaCode, message: Option<String>) -> Error {
    Error::from_code_about(
        ApiKey::Produce,
        code,
        Scope::topic(&tp.topic),
        &tp.to_string(),
        message,
    )
}

/// A partition's base offset and log-append time, as its answer gives them.
pub(super) type Written = (i64, i64);

/// One partition's answer as an [`Outcome`].
pub(super) fn classify(
    tp: &TopicPartition,
    code: KafkaCode,
    (base_offset, log_append_time): Written,
    message: Option<String>,
) -> Outcome {
    match code {
        KafkaCode::None => Outcome::Acked {
            base_offset,
            log_append_time,
        },
        // The error table marks NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE and
        // UNKNOWN_TOPIC_OR_PARTITION (among others) retriable with a metadata refresh.
        c if c.is_retriable() => Outcome::Retry {
            refresh: c.needs_metadata_refresh(),
            error: LastError::Code(code, message),
        },
        _ => Outcome::Failed(produce_error(tp, code, message)),
    }
}

/// One partition's answer, as the response gives it.
#[derive(Debug, Clone)]
pub(super) struct Answer {
    pub(super) code: KafkaCode,
    pub(super) base_offset: i64,
    pub(super) log_append_time: i64,
    /// Produce v5+; -1 when unknown.
    pub(super) log_start_offset: i64,
    pub(super) message: Option<String>,
}

impl Answer {
    /// What the answer means without idempotence, for a batch of `records` records: a
    /// batch too large is split while it has more than one (only a record too large on its
    /// own fails with `MESSAGE_TOO_LARGE`).
    pub(super) fn outcome(self, tp: &TopicPartition, records: usize) -> Outcome {
        if self.code == KafkaCode::MessageTooLarge && records > 1 {
            return Outcome::Split(produce_error(tp, self.code, self.message));
        }
        classify(
            tp,
            self.code,
            (self.base_offset, self.log_append_time),
            self.message,
        )
    }
}

/// What to do with a partition a response leaves out: retried, since its batch may or may
/// not have been written.
pub(super) fn left_out() -> Outcome {
    Outcome::Retry {
        refresh: false,
        error: LastError::Other("the broker's Produce response left this partition out".into()),
    }
}

/// Matches a response to the partitions sent, in the order sent: each one's answer, `None`
/// where the response leaves it out.
pub(super) fn answers(resp: &ProduceResponse, sent: &[TopicPartition]) -> Vec<Option<Answer>> {
    let mut answers: HashMap<(&str, i32), Answer> = HashMap::new();
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
                Answer {
                    code: KafkaCode::from_code(p.error_code),
                    base_offset: p.base_offset,
                    log_append_time: p.log_append_time_ms,
                    log_start_offset: p.log_start_offset,
                    message,
                },
            );
        }
    }
    sent.iter()
        .map(|tp| answers.remove(&(tp.topic.as_str(), tp.partition)))
        .collect()
}

/// [`answers`] read without idempotence: one [`Outcome`] per partition sent.
#[cfg(test)]
pub(super) fn outcomes(resp: &ProduceResponse, sent: &[TopicPartition]) -> Vec<Outcome> {
    answers(resp, sent)
        .into_iter()
        .zip(sent)
        .map(|(a, tp)| a.map_or_else(left_out, |a| a.outcome(tp, 1)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::produce_response::{
        BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
    };
    use crate::protocol::Message;
    use crate::records::{self, Compression, NewRecord};

    #[test]
    fn magic_follows_the_produce_version() {
        assert_eq!(magic_for(0), 0);
        assert_eq!(magic_for(1), 0);
        assert_eq!(magic_for(2), 1);
        for v in 3..=crate::net::versions::implemented(ApiKey::Produce) {
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
            let min = ApiKey::Produce.versions().min;
            for v in min..=crate::net::versions::implemented(ApiKey::Produce) {
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
        assert!(
            matches!(
                o[0],
                Outcome::Acked {
                    base_offset: 42,
                    log_append_time: -1
                }
            ),
            "{o:?}"
        );
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
                matches!(classify(&sent[0], code, (-1, -1), None), Outcome::Retry { .. }),
                "{code}"
            );
        }
        match classify(&sent[0], KafkaCode::TopicAuthorizationFailed, (-1, -1), None) {
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
                matches!(classify(&sent[0], code, (-1, -1), None), Outcome::Failed(_)),
                "{code}"
            );
        }
    }

    /// Without idempotence, MESSAGE_TOO_LARGE splits a batch of more than one record and fails
    /// a record alone; other refusals fail the batch whatever its size.
    #[test]
    fn message_too_large_splits_a_batch_of_more_than_one_record() {
        let tp = TopicPartition::new("t", 0);
        let resp = response(&[
            ("t", 0, KafkaCode::MessageTooLarge, -1),
            ("t", 1, KafkaCode::InvalidRecord, -1),
        ]);
        let answer = |i: usize| {
            answers(&resp, &[tp.clone(), TopicPartition::new("t", 1)])[i]
                .clone()
                .unwrap()
        };
        match answer(0).outcome(&tp, 2) {
            Outcome::Split(e) => {
                assert_eq!(e.kafka_code(), Some(KafkaCode::MessageTooLarge));
                assert!(e.to_string().contains("t-0"), "{e}");
            }
            other => panic!("{other:?}"),
        }
        match answer(0).outcome(&tp, 1) {
            Outcome::Failed(e) => assert_eq!(e.kafka_code(), Some(KafkaCode::MessageTooLarge)),
            other => panic!("{other:?}"),
        }
        assert!(matches!(answer(1).outcome(&tp, 100), Outcome::Failed(_)));
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
}
