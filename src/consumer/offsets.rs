//! OffsetCommit, OffsetFetch and ListOffsets: requests built for the negotiated version and
//! answers turned into per-partition results. Pure functions; the consumer does the sending.
//!
//! Version notes (fields set only where the version has them, so nothing is dropped silently):
//! - OffsetCommit: v0 commits to ZooKeeper (never used: every broker with a group coordinator
//!   has v1+); v1+ carries the generation and member id; v2-v4 a retention time (-1: the
//!   broker's default); v6+ the leader epoch of the committed position; v7+ the
//!   `group.instance.id` of a static member.
//! - OffsetFetch: v0-v7 one group with top-level topics; v8+ a list of groups; v7+
//!   `require_stable` (wait out pending transactional commits).
//! - ListOffsets: v0 answers a list of offsets (`max_num_offsets` 1), v1+ one offset; v2+ has
//!   the isolation level; v4+ the current leader epoch.

use crate::authorization::Scope;
use crate::client::{topic_denied, Metadata};
use crate::error::{Error, Result};
use crate::group::action::{classify, GroupAction};
use crate::group::{Generation, TopicPartition};
use crate::protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use crate::protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use crate::protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use crate::protocol::messages::{
    ListOffsetsRequest, ListOffsetsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse,
};
use crate::protocol::{ApiKey, KafkaStr};
use crate::KafkaCode;
use std::collections::BTreeMap;

/// Groups `(topic, partition) → value` by topic, preserving order.
fn by_topic<V: Clone>(map: &BTreeMap<TopicPartition, V>) -> BTreeMap<&str, Vec<(i32, V)>> {
    let mut out: BTreeMap<&str, Vec<(i32, V)>> = BTreeMap::new();
    for (tp, v) in map {
        out.entry(tp.topic.as_str())
            .or_default()
            .push((tp.partition, v.clone()));
    }
    out
}

/// An OffsetCommit for `offsets` (`partition → (offset, leader epoch)`) at `version`.
/// `generation` is `None` for a consumer outside any generation (allowed only while the group
/// is empty); `instance_id` is sent (v7+) only for a static member.
pub(crate) fn offset_commit_request(
    version: i16,
    group: &str,
    generation: Option<&Generation>,
    instance_id: Option<&str>,
    offsets: &BTreeMap<TopicPartition, (i64, Option<i32>)>,
    metadata: &BTreeMap<TopicPartition, String>,
) -> OffsetCommitRequest {
    let topics = by_topic(offsets)
        .into_iter()
        .map(|(name, parts)| OffsetCommitRequestTopic {
            partitions: parts
                .into_iter()
                .map(|(partition, (offset, epoch))| OffsetCommitRequestPartition {
                    partition_index: partition,
                    committed_offset: offset,
                    committed_leader_epoch: if version >= 6 { epoch.unwrap_or(-1) } else { -1 },
                    committed_metadata: Some(
                        metadata
                            .get(&TopicPartition::new(name, partition))
                            .map_or_else(KafkaStr::new, |m| KafkaStr::from(m.as_str())),
                    ),
                    ..Default::default()
                })
                .collect(),
            name: name.into(),
            ..Default::default()
        })
        .collect();
    OffsetCommitRequest {
        group_id: group.into(),
        generation_id_or_member_epoch: generation.map_or(-1, |g| g.id),
        member_id: generation
            .map(|g| g.member_id.as_str().into())
            .unwrap_or_default(),
        group_instance_id: instance_id.filter(|_| version >= 7).map(KafkaStr::from),
        topics,
        ..Default::default()
    }
}

/// What a commit attempt's answer means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CommitOutcome {
    /// Every partition was committed.
    Done,
    /// Some partitions failed with errors worth retrying (`rediscover` when the coordinator
    /// must be found again first); the rest succeeded.
    Retry {
        /// The partitions to send again.
        partitions: Vec<TopicPartition>,
        /// Whether the coordinator moved.
        rediscover: bool,
        /// The code, for the log and for a final timeout.
        code: KafkaCode,
    },
    /// The commit was rejected and must not be retried: the application learns of it.
    Failed {
        /// The (first) error code.
        code: KafkaCode,
        /// The partitions it applies to.
        partitions: Vec<TopicPartition>,
        /// Whether the member must rejoin (stale generation, rebalance in progress).
        rejoin: bool,
    },
}

/// Classifies a commit error. Group codes follow the one group table ([`classify`]); codes
/// about the request itself are final for a commit even where Kafka marks them retriable
/// (e.g. UNKNOWN_TOPIC_OR_PARTITION: retrying cannot create the topic).
fn commit_action(code: KafkaCode) -> GroupAction {
    match code {
        KafkaCode::UnknownTopicOrPartition
        | KafkaCode::OffsetMetadataTooLarge
        | KafkaCode::InvalidCommitOffsetSize => GroupAction::Fatal,
        // Consumer protocol: the member epoch moved on since the commit was built (the
        // heartbeat thread got a new one); retried with the epoch read again, as Kafka's own
        // consumer does.
        KafkaCode::StaleMemberEpoch => GroupAction::Retry,
        c => classify(c),
    }
}

/// Reads an OffsetCommit answer: the successfully committed partitions and the outcome.
pub(crate) fn commit_outcome(resp: &OffsetCommitResponse) -> (Vec<TopicPartition>, CommitOutcome) {
    let mut ok = Vec::new();
    let mut retry: Vec<TopicPartition> = Vec::new();
    let mut retry_code = None;
    let mut rediscover = false;
    let mut failed: Option<(KafkaCode, bool)> = None;
    let mut failed_parts = Vec::new();
    for t in &resp.topics {
        for p in &t.partitions {
            let tp = TopicPartition::new(t.name.clone(), p.partition_index);
            let code = KafkaCode::from_code(p.error_code);
            match commit_action(code) {
                GroupAction::Proceed => ok.push(tp),
                action @ (GroupAction::Retry | GroupAction::RediscoverCoordinator) => {
                    rediscover |= action == GroupAction::RediscoverCoordinator;
                    retry_code.get_or_insert(code);
                    retry.push(tp);
                }
                action => {
                    let rejoin = matches!(action, GroupAction::Rejoin | GroupAction::RejoinWithResetMemberId);
                    failed.get_or_insert((code, rejoin));
                    failed_parts.push(tp);
                }
            }
        }
    }
    let outcome = if let Some((code, rejoin)) = failed {
        CommitOutcome::Failed {
            code,
            partitions: failed_parts,
            rejoin,
        }
    } else if let Some(code) = retry_code {
        CommitOutcome::Retry {
            partitions: retry,
            rediscover,
            code,
        }
    } else {
        CommitOutcome::Done
    };
    (ok, outcome)
}

/// An OffsetFetch for `partitions` of `group` at `version`.
pub(crate) fn offset_fetch_request(
    version: i16,
    group: &str,
    partitions: &[TopicPartition],
    require_stable: bool,
) -> OffsetFetchRequest {
    let map: BTreeMap<TopicPartition, ()> = partitions.iter().map(|tp| (tp.clone(), ())).collect();
    let by_topic = by_topic(&map);
    // v8+ nests the topics in a list of groups; the topic entry is the same fields in two
    // generated types.
    macro_rules! topics {
        ($entry:ident) => {
            Some(
                by_topic
                    .iter()
                    .map(|(name, ps)| $entry {
                        name: (*name).into(),
                        partition_indexes: ps.iter().map(|&(p, ())| p).collect(),
                        ..Default::default()
                    })
                    .collect(),
            )
        };
    }
    let mut req = OffsetFetchRequest {
        require_stable: require_stable && version >= 7,
        ..Default::default()
    };
    if version >= 8 {
        req.groups = vec![OffsetFetchRequestGroup {
            group_id: group.into(),
            topics: topics!(OffsetFetchRequestTopics),
            ..Default::default()
        }];
    } else {
        req.group_id = group.into();
        req.topics = topics!(OffsetFetchRequestTopic);
    }
    req
}

/// The metadata strings of an OffsetFetch answer, for partitions with an offset and a
/// non-empty string.
pub(crate) fn offset_fetch_metadata(resp: &OffsetFetchResponse) -> BTreeMap<TopicPartition, String> {
    let mut out = BTreeMap::new();
    let mut add = |topic: &str, partition: i32, offset: i64, metadata: &Option<KafkaStr>| {
        if let Some(m) = metadata.as_ref().filter(|m| offset >= 0 && !m.is_empty()) {
            out.insert(TopicPartition::new(topic, partition), m.to_string());
        }
    };
    match resp.groups.first() {
        Some(g) => g.topics.iter().for_each(|t| {
            t.partitions
                .iter()
                .for_each(|p| add(&t.name, p.partition_index, p.committed_offset, &p.metadata))
        }),
        None => resp.topics.iter().for_each(|t| {
            t.partitions
                .iter()
                .for_each(|p| add(&t.name, p.partition_index, p.committed_offset, &p.metadata))
        }),
    }
    out
}

/// A committed offset with its leader epoch; `None` when nothing is committed.
pub(crate) type Committed = Option<(i64, Option<i32>)>;

/// One partition of an OffsetFetch answer: topic, partition, error code, committed offset,
/// committed leader epoch.
type FetchedEntry<'a> = (&'a str, i32, i16, i64, i32);

/// Why an OffsetFetch answer gives no offsets: a group-level code, or the first
/// partition-level one with its topic (which an authorization error names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FetchFailure {
    pub(crate) code: KafkaCode,
    /// The topic of the partition the code came with; `None` for a group-level code.
    pub(crate) topic: Option<String>,
}

/// Reads an OffsetFetch answer; the failure of a group-level error or the first
/// partition-level one (the caller decides whether to retry).
pub(crate) fn offset_fetch_result(
    resp: &OffsetFetchResponse,
) -> Result<BTreeMap<TopicPartition, Committed>, FetchFailure> {
    // v8+ answers per group, older versions at the top level; the partition entries are the
    // same fields in two generated types, flattened here so they are read in one place.
    macro_rules! entries {
        ($topics:expr) => {
            $topics
                .iter()
                .flat_map(|t| {
                    t.partitions.iter().map(move |p| {
                        (
                            t.name.as_str(),
                            p.partition_index,
                            p.error_code,
                            p.committed_offset,
                            p.committed_leader_epoch,
                        )
                    })
                })
                .collect()
        };
    }
    let (group_code, entries): (i16, Vec<FetchedEntry<'_>>) = match resp.groups.first() {
        Some(g) => (g.error_code, entries!(g.topics)),
        None => (resp.error_code, entries!(resp.topics)),
    };
    let code = KafkaCode::from_code(group_code);
    if code.is_error() {
        return Err(FetchFailure { code, topic: None });
    }
    let mut out = BTreeMap::new();
    let mut first_error = None;
    for (topic, partition, error, offset, epoch) in entries {
        let code = KafkaCode::from_code(error);
        if code.is_error() {
            first_error.get_or_insert_with(|| FetchFailure {
                code,
                topic: Some(topic.to_string()),
            });
        }
        let committed = (offset >= 0).then_some((offset, (epoch >= 0).then_some(epoch)));
        out.insert(TopicPartition::new(topic, partition), committed);
    }
    match first_error {
        Some(failure) => Err(failure),
        None => Ok(out),
    }
}

/// What a caller of ListOffsets does with a topic the metadata says does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnknownTopic {
    /// Fail at once with `UNKNOWN_TOPIC_OR_PARTITION` (an admin query names the topics itself).
    Fail,
    /// Count its partitions as not led yet, to be retried (a consumer's assignment may name a
    /// topic that is being created, or that this broker has not heard of yet).
    Wait,
}

/// Where each partition's ListOffsets goes: per leader, per partition `(timestamp, leader
/// epoch)`, the targets [`list_offsets_request`] takes.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct LeaderTargets {
    /// Leader broker id → its partitions' targets.
    pub by_leader: BTreeMap<i32, BTreeMap<TopicPartition, (i64, i32)>>,
    /// Partitions with no leader in the metadata (none elected yet, or not known), in order.
    pub unled: Vec<TopicPartition>,
}

/// Groups `partitions` by their leader in `meta`, each asking for the offset at `timestamp`
/// (-2 earliest, -1 latest). `leader_epoch` sends the metadata's leader epoch (v4+) so that a
/// stale leader rejects the request (a consumer positions itself with the answer); without it
/// -1. A topic the principal may not describe is an error at once (such a topic has no
/// partitions, so waiting for leaders would only time out); an unknown topic as `unknown` says.
/// The one ListOffsets-by-leader rule, shared by the consumer's resets and [`Admin`].
///
/// [`Admin`]: crate::Admin
pub(crate) fn list_offsets_targets<'a>(
    meta: &Metadata,
    partitions: impl IntoIterator<Item = &'a TopicPartition>,
    timestamp: i64,
    leader_epoch: bool,
    unknown: UnknownTopic,
) -> Result<LeaderTargets> {
    let mut out = LeaderTargets::default();
    for tp in partitions {
        let topic = meta.topics.get(&tp.topic);
        if unknown == UnknownTopic::Fail {
            if let Some(t) = topic.filter(|t| t.error == KafkaCode::UnknownTopicOrPartition) {
                return Err(Error::from_code_about(
                    ApiKey::ListOffsets,
                    t.error,
                    Scope::topic(&tp.topic),
                    &format!("topic {}", tp.topic),
                    None,
                ));
            }
        }
        // A partition error with a leader (e.g. REPLICA_NOT_AVAILABLE) does not stop it.
        let led = topic
            .and_then(|t| t.partitions.iter().find(|p| p.partition == tp.partition))
            .filter(|p| p.leader >= 0);
        match led {
            Some(p) => {
                let epoch = if leader_epoch { p.leader_epoch } else { -1 };
                out.by_leader
                    .entry(p.leader)
                    .or_default()
                    .insert(tp.clone(), (timestamp, epoch));
            }
            None => {
                if let Some(e) = topic_denied(meta, &tp.topic) {
                    return Err(e);
                }
                out.unled.push(tp.clone());
            }
        }
    }
    Ok(out)
}

/// A ListOffsets asking, per partition, for the offset at a timestamp (-2 earliest, -1
/// latest) at `version`; `leader_epoch` (v4+) lets the leader reject a stale view.
pub(crate) fn list_offsets_request(
    version: i16,
    isolation_level: i8,
    targets: &BTreeMap<TopicPartition, (i64, i32)>,
) -> ListOffsetsRequest {
    ListOffsetsRequest {
        replica_id: -1,
        isolation_level: if version >= 2 { isolation_level } else { 0 },
        topics: by_topic(targets)
            .into_iter()
            .map(|(name, parts)| ListOffsetsTopic {
                name: name.into(),
                partitions: parts
                    .into_iter()
                    .map(|(partition, (timestamp, epoch))| ListOffsetsPartition {
                        partition_index: partition,
                        current_leader_epoch: if version >= 4 { epoch } else { -1 },
                        timestamp,
                        max_num_offsets: 1,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// The record timestamps of a ListOffsets answer (v1+), for partitions answered without error:
/// the timestamp of the record found by time, -1 for earliest/latest lookups.
pub(crate) fn list_offsets_timestamps(resp: &ListOffsetsResponse) -> BTreeMap<TopicPartition, i64> {
    resp.topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().filter(|p| p.error_code == 0).map(move |p| {
                (
                    TopicPartition::new(t.name.clone(), p.partition_index),
                    p.timestamp,
                )
            })
        })
        .collect()
}

/// Reads a ListOffsets answer: per partition the offset, or the error code.
pub(crate) fn list_offsets_result(
    version: i16,
    resp: &ListOffsetsResponse,
) -> BTreeMap<TopicPartition, Result<i64, KafkaCode>> {
    let mut out = BTreeMap::new();
    for t in &resp.topics {
        for p in &t.partitions {
            let tp = TopicPartition::new(t.name.clone(), p.partition_index);
            let code = KafkaCode::from_code(p.error_code);
            let result = if code.is_error() {
                Err(code)
            } else if version == 0 {
                // v0 answers a list (we asked for one); an empty one means the log is empty
                // in a way v0 cannot express otherwise, which the retry loop treats as
                // "not available yet".
                p.old_style_offsets
                    .first()
                    .copied()
                    .ok_or(KafkaCode::OffsetNotAvailable)
            } else if p.offset < 0 {
                Err(KafkaCode::OffsetNotAvailable)
            } else {
                Ok(p.offset)
            };
            out.insert(tp, result);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::offset_commit_response::{
        OffsetCommitResponsePartition, OffsetCommitResponseTopic,
    };
    use crate::protocol::messages::offset_fetch_response::{
        OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
        OffsetFetchResponseTopic, OffsetFetchResponseTopics,
    };
    use crate::protocol::{ApiKey, Message};

    fn tp(t: &str, p: i32) -> TopicPartition {
        TopicPartition::new(t, p)
    }

    fn generation() -> Generation {
        Generation {
            id: 7,
            member_id: "m-1".into(),
            protocol: Some("range".into()),
        }
    }

    fn offsets() -> BTreeMap<TopicPartition, (i64, Option<i32>)> {
        [
            (tp("a", 0), (10, Some(2))),
            (tp("a", 1), (11, None)),
            (tp("b", 0), (0, Some(0))),
        ]
        .into_iter()
        .collect()
    }

    #[test]
    fn offset_commit_encodes_at_every_version() {
        let g = generation();
        for v in ApiKey::OffsetCommit.versions().min..=ApiKey::OffsetCommit.versions().max {
            let metadata = BTreeMap::from([(tp("a", 1), "job 7".to_string())]);
            let r = offset_commit_request(v, "grp", Some(&g), Some("inst"), &offsets(), &metadata);
            r.to_bytes(v).unwrap_or_else(|e| panic!("OffsetCommit v{v}: {e}"));
            let back = OffsetCommitRequest::from_bytes(r.to_bytes(v).unwrap(), v).unwrap();
            assert_eq!(back.topics.len(), 2);
            let meta = |p: usize| {
                back.topics[0].partitions[p]
                    .committed_metadata
                    .as_deref()
                    .map(String::from)
            };
            assert_eq!(
                (meta(0), meta(1)),
                (Some(String::new()), Some("job 7".to_string())),
                "v{v}"
            );
            assert_eq!(back.topics[0].partitions[0].committed_offset, 10);
            if v >= 1 {
                assert_eq!(back.generation_id_or_member_epoch, 7);
                assert_eq!(back.member_id, "m-1");
            }
            assert_eq!(back.group_instance_id.as_deref(), (v >= 7).then_some("inst"));
            let epoch = back.topics[0].partitions[0].committed_leader_epoch;
            assert_eq!(epoch, if v >= 6 { 2 } else { -1 }, "v{v}");
            // A dynamic member (no instance id) and a consumer outside a generation.
            offset_commit_request(v, "grp", None, None, &offsets(), &BTreeMap::new())
                .to_bytes(v)
                .unwrap();
        }
    }

    fn commit_response(codes: &[(&str, i32, KafkaCode)]) -> OffsetCommitResponse {
        let mut topics: Vec<OffsetCommitResponseTopic> = Vec::new();
        for (t, p, c) in codes {
            if topics.last().map(|x| x.name.as_str()) != Some(*t) {
                topics.push(OffsetCommitResponseTopic {
                    name: (*t).into(),
                    ..Default::default()
                });
            }
            topics
                .last_mut()
                .unwrap()
                .partitions
                .push(OffsetCommitResponsePartition {
                    partition_index: *p,
                    error_code: c.code(),
                    ..Default::default()
                });
        }
        OffsetCommitResponse {
            topics,
            ..Default::default()
        }
    }

    #[test]
    fn commit_answers() {
        let (ok, o) = commit_outcome(&commit_response(&[("a", 0, KafkaCode::None)]));
        assert_eq!(ok, vec![tp("a", 0)]);
        assert_eq!(o, CommitOutcome::Done);

        for code in [KafkaCode::RebalanceInProgress, KafkaCode::IllegalGeneration] {
            let (ok, o) = commit_outcome(&commit_response(&[("a", 0, KafkaCode::None), ("a", 1, code)]));
            assert_eq!(ok, vec![tp("a", 0)]);
            assert_eq!(
                o,
                CommitOutcome::Failed {
                    code,
                    partitions: vec![tp("a", 1)],
                    rejoin: true
                }
            );
        }
        let (_, o) = commit_outcome(&commit_response(&[("a", 0, KafkaCode::UnknownMemberId)]));
        assert!(matches!(o, CommitOutcome::Failed { rejoin: true, .. }));
        let (_, o) = commit_outcome(&commit_response(&[("a", 0, KafkaCode::FencedInstanceId)]));
        assert!(matches!(o, CommitOutcome::Failed { rejoin: false, .. }));
        let (_, o) = commit_outcome(&commit_response(&[("a", 0, KafkaCode::UnknownTopicOrPartition)]));
        assert!(matches!(o, CommitOutcome::Failed { rejoin: false, .. }));

        let (_, o) = commit_outcome(&commit_response(&[
            ("a", 0, KafkaCode::NotCoordinator),
            ("b", 0, KafkaCode::CoordinatorLoadInProgress),
        ]));
        assert_eq!(
            o,
            CommitOutcome::Retry {
                partitions: vec![tp("a", 0), tp("b", 0)],
                rediscover: true,
                code: KafkaCode::NotCoordinator
            }
        );
        // Authorization: final, no rejoin; the first partition is the one the code is about.
        let (ok, o) = commit_outcome(&commit_response(&[
            ("mine", 0, KafkaCode::None),
            ("theirs", 3, KafkaCode::TopicAuthorizationFailed),
            ("theirs", 4, KafkaCode::TopicAuthorizationFailed),
        ]));
        assert_eq!(ok, vec![tp("mine", 0)]);
        assert_eq!(
            o,
            CommitOutcome::Failed {
                code: KafkaCode::TopicAuthorizationFailed,
                partitions: vec![tp("theirs", 3), tp("theirs", 4)],
                rejoin: false
            }
        );
        // A group denied: Kafka sets the code on every partition.
        let (ok, o) = commit_outcome(&commit_response(&[("a", 0, KafkaCode::GroupAuthorizationFailed)]));
        assert!(ok.is_empty());
        assert!(matches!(
            o,
            CommitOutcome::Failed {
                code: KafkaCode::GroupAuthorizationFailed,
                rejoin: false,
                ..
            }
        ));
        // A rejection wins over a retriable error in the same answer: retrying the rest
        // would not make the commit whole.
        let (_, o) = commit_outcome(&commit_response(&[
            ("a", 0, KafkaCode::RequestTimedOut),
            ("b", 0, KafkaCode::IllegalGeneration),
        ]));
        assert!(matches!(
            o,
            CommitOutcome::Failed {
                code: KafkaCode::IllegalGeneration,
                ..
            }
        ));
    }

    #[test]
    fn offset_fetch_encodes_at_every_version() {
        let parts = vec![tp("a", 1), tp("a", 0), tp("b", 3)];
        for v in ApiKey::OffsetFetch.versions().min..=ApiKey::OffsetFetch.versions().max {
            let r = offset_fetch_request(v, "grp", &parts, true);
            let bytes = r.to_bytes(v).unwrap_or_else(|e| panic!("OffsetFetch v{v}: {e}"));
            let back = OffsetFetchRequest::from_bytes(bytes, v).unwrap();
            if v >= 8 {
                assert_eq!(back.groups[0].group_id, "grp");
                let ts = back.groups[0].topics.as_ref().unwrap();
                assert_eq!(ts[0].partition_indexes, vec![0, 1]);
            } else {
                assert_eq!(back.group_id, "grp");
                assert_eq!(back.topics.as_ref().unwrap()[1].name, "b");
            }
            assert_eq!(back.require_stable, v >= 7);
        }
    }

    #[test]
    fn offset_fetch_answers_old_and_new_shape() {
        let old = OffsetFetchResponse {
            topics: vec![OffsetFetchResponseTopic {
                name: "a".into(),
                partitions: vec![
                    OffsetFetchResponsePartition {
                        partition_index: 0,
                        committed_offset: 12,
                        committed_leader_epoch: 4,
                        ..Default::default()
                    },
                    OffsetFetchResponsePartition {
                        partition_index: 1,
                        committed_offset: -1,
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        let r = offset_fetch_result(&old).unwrap();
        assert_eq!(r[&tp("a", 0)], Some((12, Some(4))));
        assert_eq!(r[&tp("a", 1)], None);

        let new = OffsetFetchResponse {
            groups: vec![OffsetFetchResponseGroup {
                group_id: "g".into(),
                topics: vec![OffsetFetchResponseTopics {
                    name: "a".into(),
                    partitions: vec![OffsetFetchResponsePartitions {
                        partition_index: 2,
                        committed_offset: 5,
                        committed_leader_epoch: -1,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(offset_fetch_result(&new).unwrap()[&tp("a", 2)], Some((5, None)));

        let failure = |code, topic: Option<&str>| {
            Err(FetchFailure {
                code,
                topic: topic.map(String::from),
            })
        };
        let mut err = new.clone();
        err.groups[0].error_code = KafkaCode::NotCoordinator.code();
        assert_eq!(
            offset_fetch_result(&err),
            failure(KafkaCode::NotCoordinator, None)
        );
        let mut perr = new.clone();
        perr.groups[0].topics[0].partitions[0].error_code = KafkaCode::UnstableOffsetCommit.code();
        assert_eq!(
            offset_fetch_result(&perr),
            failure(KafkaCode::UnstableOffsetCommit, Some("a"))
        );
        // A denied topic is named, so that the error can say which ACL is missing.
        let mut denied = new.clone();
        denied.groups[0].topics[0].partitions[0].error_code = KafkaCode::TopicAuthorizationFailed.code();
        assert_eq!(
            offset_fetch_result(&denied),
            failure(KafkaCode::TopicAuthorizationFailed, Some("a"))
        );
        let mut group_denied = new;
        group_denied.groups[0].error_code = KafkaCode::GroupAuthorizationFailed.code();
        assert_eq!(
            offset_fetch_result(&group_denied),
            failure(KafkaCode::GroupAuthorizationFailed, None)
        );
        let mut top = old;
        top.error_code = KafkaCode::CoordinatorLoadInProgress.code();
        assert_eq!(
            offset_fetch_result(&top),
            failure(KafkaCode::CoordinatorLoadInProgress, None)
        );
    }

    #[test]
    fn list_offsets_encodes_at_every_version() {
        let targets: BTreeMap<TopicPartition, (i64, i32)> = [(tp("a", 0), (-2, 5)), (tp("a", 1), (-1, 5))]
            .into_iter()
            .collect();
        for v in ApiKey::ListOffsets.versions().min..=ApiKey::ListOffsets.versions().max {
            let r = list_offsets_request(v, 1, &targets);
            let bytes = r.to_bytes(v).unwrap_or_else(|e| panic!("ListOffsets v{v}: {e}"));
            let back = ListOffsetsRequest::from_bytes(bytes, v).unwrap();
            assert_eq!(back.replica_id, -1);
            assert_eq!(back.isolation_level, if v >= 2 { 1 } else { 0 });
            let p = &back.topics[0].partitions;
            assert_eq!(p[0].timestamp, -2);
            assert_eq!(p[1].timestamp, -1);
            assert_eq!(p[0].current_leader_epoch, if v >= 4 { 5 } else { -1 });
        }
    }

    #[test]
    fn list_offsets_answers() {
        use crate::protocol::messages::list_offsets_response::{
            ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
        };
        let resp = ListOffsetsResponse {
            topics: vec![ListOffsetsTopicResponse {
                name: "a".into(),
                partitions: vec![
                    ListOffsetsPartitionResponse {
                        partition_index: 0,
                        offset: 17,
                        old_style_offsets: vec![17],
                        ..Default::default()
                    },
                    ListOffsetsPartitionResponse {
                        partition_index: 1,
                        error_code: KafkaCode::NotLeaderOrFollower.code(),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        for v in [0, 1, 9] {
            let r = list_offsets_result(v, &resp);
            assert_eq!(r[&tp("a", 0)], Ok(17));
            assert_eq!(r[&tp("a", 1)], Err(KafkaCode::NotLeaderOrFollower));
        }
    }

    #[test]
    fn list_offsets_targets_go_to_each_leader() {
        use crate::client::{PartitionMetadata, TopicMetadata};
        use std::collections::BTreeSet;
        let partition = |p, leader| PartitionMetadata {
            partition: p,
            leader,
            leader_epoch: 3,
            replicas: [].into(),
            isr: [].into(),
            error: KafkaCode::None,
        };
        let topic = |name: &str, error, partitions| {
            std::sync::Arc::new(TopicMetadata {
                name: name.into(),
                id: crate::protocol::Uuid::NIL,
                error,
                internal: false,
                partitions,
            })
        };
        let mut meta = Metadata::default();
        meta.topics.insert(
            "t".into(),
            topic(
                "t",
                KafkaCode::None,
                vec![partition(0, 1), partition(1, 2), partition(2, -1)],
            ),
        );
        meta.topics.insert(
            "gone".into(),
            topic("gone", KafkaCode::UnknownTopicOrPartition, vec![]),
        );
        let tp = |t: &str, p| TopicPartition::new(t, p);
        let left: BTreeSet<_> = [tp("t", 0), tp("t", 1), tp("t", 2)].into_iter().collect();
        // The admin's way: no leader epoch, unknown topics fail.
        let admin = |meta: &Metadata, left: &BTreeSet<TopicPartition>, ts| {
            list_offsets_targets(meta, left, ts, false, UnknownTopic::Fail)
        };
        let LeaderTargets { by_leader: by, unled } = admin(&meta, &left, -1).unwrap();
        assert_eq!(by[&1][&tp("t", 0)], (-1, -1));
        assert_eq!(by[&2][&tp("t", 1)], (-1, -1));
        assert_eq!(unled, vec![tp("t", 2)]);
        // The consumer's way: the leader epoch goes along, and an unknown topic is waited for.
        let left: BTreeSet<_> = [tp("t", 0), tp("t", 2), tp("gone", 0)].into_iter().collect();
        let c = list_offsets_targets(&meta, &left, -2, true, UnknownTopic::Wait).unwrap();
        assert_eq!(c.by_leader.len(), 1);
        assert_eq!(c.by_leader[&1][&tp("t", 0)], (-2, 3));
        assert_eq!(c.unled, vec![tp("gone", 0), tp("t", 2)]);
        let left: BTreeSet<_> = [tp("gone", 0)].into_iter().collect();
        let e = admin(&meta, &left, -2).unwrap_err();
        assert_eq!(e.kafka_code(), Some(KafkaCode::UnknownTopicOrPartition));
        assert!(e.to_string().contains("topic gone"), "{e}");
        // A denied topic has no partitions: an error at once, not a wait for leaders.
        meta.topics.insert(
            "denied".into(),
            topic("denied", KafkaCode::TopicAuthorizationFailed, vec![]),
        );
        let left: BTreeSet<_> = [tp("t", 0), tp("denied", 0)].into_iter().collect();
        for e in [
            admin(&meta, &left, -1).unwrap_err(),
            list_offsets_targets(&meta, &left, -1, true, UnknownTopic::Wait).unwrap_err(),
        ] {
            assert!(
                matches!(&e, Error::Authorization { api: ApiKey::Metadata, resource: crate::Resource::Topic(t), .. } if t == "denied"),
                "{e:?}"
            );
        }
    }
}
