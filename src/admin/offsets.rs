//! Offsets: what a partition's leader holds (ListOffsets), what a group committed
//! (OffsetFetch), and the lag between them.

use super::{kafka_error, Admin, GroupDescription};
use crate::authorization::Scope;
use crate::consumer::offsets::{self, UnknownTopic};
use crate::error::{Error, Result};
use crate::group::{Assignment, TopicPartition};
use crate::protocol::ApiKey;
use crate::retry::{retry, Backoff, Step};
use crate::KafkaCode;
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// Which offset [`Admin::list_offsets`] asks each partition's leader for (ListOffsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset: the first offset still in the log.
    Earliest,
    /// The log end offset (high watermark): the offset the next record will get.
    Latest,
    /// The first offset whose record timestamp is at or after this many milliseconds since
    /// the epoch; -1 when there is none (on brokers with ListOffsets v1+, Kafka 0.10.1+).
    Timestamp(i64),
}

impl OffsetSpec {
    /// The `timestamp` field of ListOffsets: -2 earliest, -1 latest, else the time.
    fn timestamp(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::Timestamp(t) => t,
        }
    }
}

/// How far a group is behind on one partition, from [`Admin::group_lag`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLag {
    /// The partition.
    pub tp: TopicPartition,
    /// The group's committed offset; `None` for an assigned partition with no commit yet.
    pub committed: Option<i64>,
    /// The partition's log end offset (high watermark).
    pub log_end: i64,
    /// `log_end - committed`, or `None` without a committed offset. Not clamped: a commit
    /// beyond the log end (after a truncation) shows as a negative lag.
    pub lag: Option<i64>,
}

impl Admin {
    /// The offset `spec` names for each of `partitions` (ListOffsets to each partition's
    /// leader, read_uncommitted, built per negotiated version: v0 asks for one offset with
    /// `max_num_offsets`). Leader changes and partitions not yet led are retried until
    /// `default.api.timeout.ms`; a topic the cluster does not know fails at once with
    /// `UNKNOWN_TOPIC_OR_PARTITION`.
    pub fn list_offsets(
        &self,
        partitions: &[TopicPartition],
        spec: OffsetSpec,
    ) -> Result<BTreeMap<TopicPartition, i64>> {
        for tp in partitions {
            crate::names::check_topic("list_offsets", &tp.topic)?;
        }
        let deadline = crate::deadline::after(self.api_timeout);
        let mut left: BTreeSet<TopicPartition> = partitions.iter().cloned().collect();
        let mut found = BTreeMap::new();
        let topics: BTreeSet<&str> = partitions.iter().map(|tp| tp.topic.as_str()).collect();
        let topics: Vec<&str> = topics.into_iter().collect();
        if left.is_empty() {
            return Ok(found);
        }
        // How many are still without an offset, for the timeout's text.
        let remaining = Cell::new(left.len());
        let what = || format!("ListOffsets for {} partitions", remaining.get());
        let backoff = Backoff::fixed(self.client.retry_backoff());
        retry(deadline, backoff, what, || {
            // The round handles unreachable leaders itself; an unreachable error here is the
            // metadata refresh's.
            let problem = match self.list_offsets_round(&topics, &mut left, &mut found, spec, deadline) {
                Ok(problem) => problem,
                Err(e) if e.is_unreachable() => Some(e),
                Err(e) => return Err(e),
            };
            remaining.set(left.len());
            if left.is_empty() {
                return Ok(Step::Done(()));
            }
            log::debug!("ListOffsets: {problem:?}; retrying");
            Ok(problem.map_or(Step::Wait, Step::Retry))
        })?;
        Ok(found)
    }

    /// One ListOffsets to each leader of the partitions still `left`, moving those answered to
    /// `found`. Returns what held a partition back (no leader, an unreachable leader, a
    /// retriable code), if anything, as the error to report should time run out.
    fn list_offsets_round(
        &self,
        topics: &[&str],
        left: &mut BTreeSet<TopicPartition>,
        found: &mut BTreeMap<TopicPartition, i64>,
        spec: OffsetSpec,
        deadline: Instant,
    ) -> Result<Option<Error>> {
        let meta = self.client.refresh_metadata_by(Some(topics), deadline)?;
        // No leader epoch: an admin query has no position for a stale leader to corrupt. The
        // caller named the topics, so one the cluster does not know is an error at once.
        let targets =
            offsets::list_offsets_targets(&meta, left.iter(), spec.timestamp(), false, UnknownTopic::Fail)?;
        let mut problem = targets.unled.last().map(|tp| Error::NoLeader {
            partition: tp.clone(),
        });
        for (leader, targets) in targets.by_leader {
            let answers = match self.list_offsets_at(leader, &targets, spec, deadline) {
                Ok(answers) => answers,
                Err(e) if e.is_unreachable() => {
                    log::debug!("ListOffsets: broker {leader}: {e}");
                    problem = Some(e);
                    continue;
                }
                Err(e) => return Err(e),
            };
            for (tp, answer) in answers {
                match answer {
                    Ok(offset) if left.remove(&tp) => {
                        found.insert(tp, offset);
                    }
                    Ok(_) => {}
                    // Leader moves, a topic the leader does not know yet, OFFSET_NOT_AVAILABLE
                    // during a leader election: all retriable in Kafka's table.
                    Err(code) if code.is_retriable() => {
                        let scope = Scope::topic(&tp.topic);
                        problem = Some(kafka_error(
                            ApiKey::ListOffsets,
                            code,
                            scope,
                            &tp.to_string(),
                            None,
                        ));
                    }
                    Err(code) => {
                        let scope = Scope::topic(&tp.topic);
                        return Err(kafka_error(
                            ApiKey::ListOffsets,
                            code,
                            scope,
                            &tp.to_string(),
                            None,
                        ));
                    }
                }
            }
        }
        Ok(problem)
    }

    /// One ListOffsets to `leader`: per partition the offset or the error code.
    fn list_offsets_at(
        &self,
        leader: i32,
        targets: &BTreeMap<TopicPartition, (i64, i32)>,
        spec: OffsetSpec,
        deadline: Instant,
    ) -> Result<BTreeMap<TopicPartition, Result<i64, KafkaCode>>> {
        let mut version = 0;
        let resp = self.client.send_to_by(leader, deadline, |v| {
            version = v;
            offsets::list_offsets_request(v, 0, targets)
        })?;
        let mut answers = offsets::list_offsets_result(version, &resp);
        if matches!(spec, OffsetSpec::Timestamp(_)) {
            // A partition answered without error but without an offset has no record at or
            // after the time: that is the answer (-1, as Kafka's admin client gives), not a
            // condition to wait out.
            for t in &resp.topics {
                for p in &t.partitions {
                    if p.error_code == 0 {
                        let tp = TopicPartition::new(t.name.clone(), p.partition_index);
                        if let Some(a @ Err(KafkaCode::OffsetNotAvailable)) = answers.get_mut(&tp) {
                            *a = Ok(-1);
                        }
                    }
                }
            }
        }
        Ok(answers)
    }

    /// The offsets `group` has committed, for every partition it has committed one for
    /// (OffsetFetch to the coordinator; v2+ asks for all topics at once). Coordinators before
    /// OffsetFetch v2 (Kafka 0.10.2) need the topics named: they are taken from the members'
    /// current assignments (DescribeGroups), so there an empty group answers nothing.
    pub fn group_offsets(&self, group: &str) -> Result<BTreeMap<TopicPartition, i64>> {
        // Filled only if the coordinator turns out to be that old.
        let mut assigned: Option<Vec<TopicPartition>> = None;
        self.with_coordinator(group, |coordinator, deadline| {
            let version = self
                .client
                .connection_config()
                .pick_version(ApiKey::OffsetFetch, &self.client.broker_versions(coordinator.id)?)?;
            let named = if version < 2 {
                if assigned.is_none() {
                    assigned = Some(self.assigned_partitions(group)?);
                }
                assigned.clone()
            } else {
                None
            };
            let resp = self.client.send_to_by(coordinator.id, deadline, |v| {
                group_offsets_request(v, group, named.as_deref())
            })?;
            let committed = offsets::offset_fetch_result(&resp).map_err(|f| {
                let scope = Scope {
                    topic: f.topic.as_deref(),
                    group: Some(group),
                    ..Scope::default()
                };
                kafka_error(
                    ApiKey::OffsetFetch,
                    f.code,
                    scope,
                    &format!("group {group}"),
                    None,
                )
            })?;
            Ok(committed
                .into_iter()
                .filter_map(|(tp, c)| c.map(|(offset, _)| (tp, offset)))
                .collect())
        })
    }

    /// Every partition of `group`'s members' current assignments (DescribeGroups), all
    /// partitions of each assigned topic, as an OffsetFetch before v2 needs them named.
    fn assigned_partitions(&self, group: &str) -> Result<Vec<TopicPartition>> {
        let d = self.describe_group(group)?;
        let topics: BTreeSet<String> = d
            .members
            .iter()
            .filter_map(|m| m.decoded_assignment.as_ref())
            .flat_map(|a| a.partitions.keys().cloned())
            .collect();
        if topics.is_empty() {
            return Ok(Vec::new());
        }
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        let meta = self.client.refresh_metadata(Some(&names))?;
        Ok(names
            .iter()
            .filter_map(|t| meta.topics.get(*t))
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| TopicPartition::new(t.name.clone(), p.partition))
            })
            .collect())
    }

    /// How far `group` is behind: for every partition it has committed an offset for or a
    /// member is assigned, the committed offset, the log end offset and their difference,
    /// sorted by partition (OffsetFetch, DescribeGroups and ListOffsets, as
    /// `kafka-consumer-groups --describe` shows it).
    pub fn group_lag(&self, group: &str) -> Result<Vec<PartitionLag>> {
        self.describe_group_lag(group).map(|(_, lag)| lag)
    }

    /// [`describe_group`](Self::describe_group) and [`group_lag`](Self::group_lag) together,
    /// with one DescribeGroups instead of two: what `kafka-group describe` shows.
    pub fn describe_group_lag(&self, group: &str) -> Result<(GroupDescription, Vec<PartitionLag>)> {
        let committed = self.group_offsets(group)?;
        let description = self.describe_group(group)?;
        let mut partitions: BTreeSet<TopicPartition> = committed.keys().cloned().collect();
        for m in &description.members {
            partitions.extend(m.decoded_assignment.iter().flat_map(Assignment::topic_partitions));
        }
        let partitions: Vec<TopicPartition> = partitions.into_iter().collect();
        let log_end = self.list_offsets(&partitions, OffsetSpec::Latest)?;
        Ok((description, lag_of(&committed, &log_end)))
    }
}

/// OffsetFetch for everything `group` committed: the consumer's request with the topic list
/// null (v2+: all topics), or naming `partitions` for coordinators before v2.
fn group_offsets_request(
    version: i16,
    group: &str,
    partitions: Option<&[TopicPartition]>,
) -> crate::protocol::messages::OffsetFetchRequest {
    let mut req = offsets::offset_fetch_request(version, group, partitions.unwrap_or(&[]), false);
    if partitions.is_none() {
        match req.groups.first_mut() {
            Some(g) => g.topics = None,
            None => req.topics = None,
        }
    }
    req
}

/// Joins committed offsets with log end offsets; partitions without a log end are left out.
fn lag_of(
    committed: &BTreeMap<TopicPartition, i64>,
    log_end: &BTreeMap<TopicPartition, i64>,
) -> Vec<PartitionLag> {
    log_end
        .iter()
        .map(|(tp, &end)| {
            let c = committed.get(tp).copied();
            PartitionLag {
                tp: tp.clone(),
                committed: c,
                log_end: end,
                lag: c.map(|c| end - c),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Message;

    fn versions(api: ApiKey) -> std::ops::RangeInclusive<i16> {
        api.versions().min..=api.versions().max
    }

    #[test]
    fn offset_specs_map_to_list_offsets_timestamps() {
        assert_eq!(OffsetSpec::Earliest.timestamp(), -2);
        assert_eq!(OffsetSpec::Latest.timestamp(), -1);
        assert_eq!(
            OffsetSpec::Timestamp(1_700_000_000_000).timestamp(),
            1_700_000_000_000
        );
    }

    #[test]
    fn group_offsets_asks_for_all_topics_from_v2_and_names_them_below() {
        use crate::protocol::messages::OffsetFetchRequest;
        let named = [TopicPartition::new("t", 1), TopicPartition::new("t", 0)];
        for v in versions(ApiKey::OffsetFetch) {
            let back =
                |r: OffsetFetchRequest| OffsetFetchRequest::from_bytes(r.to_bytes(v).unwrap(), v).unwrap();
            if v >= 2 {
                let all = back(group_offsets_request(v, "g", None));
                if v >= 8 {
                    assert_eq!(all.groups[0].group_id, "g");
                    assert_eq!(all.groups[0].topics, None, "v{v}");
                } else {
                    assert_eq!(all.group_id, "g");
                    assert_eq!(all.topics, None, "v{v}");
                }
                assert!(!all.require_stable);
            } else {
                // Null means "all" only from v2; below it the request cannot say so.
                assert!(group_offsets_request(v, "g", None).to_bytes(v).is_err(), "v{v}");
            }
            let some = back(group_offsets_request(v, "g", Some(&named)));
            let parts = if v >= 8 {
                some.groups[0].topics.as_ref().unwrap()[0]
                    .partition_indexes
                    .clone()
            } else {
                some.topics.as_ref().unwrap()[0].partition_indexes.clone()
            };
            assert_eq!(parts, vec![0, 1], "v{v}");
        }
    }

    #[test]
    fn lag_is_log_end_minus_committed() {
        let tp = |p| TopicPartition::new("t", p);
        let committed: BTreeMap<_, _> = [(tp(0), 5), (tp(1), 12)].into_iter().collect();
        let log_end: BTreeMap<_, _> = [(tp(0), 9), (tp(1), 10), (tp(2), 3)].into_iter().collect();
        let lag = lag_of(&committed, &log_end);
        assert_eq!(
            lag,
            vec![
                PartitionLag {
                    tp: tp(0),
                    committed: Some(5),
                    log_end: 9,
                    lag: Some(4)
                },
                PartitionLag {
                    tp: tp(1),
                    committed: Some(12),
                    log_end: 10,
                    lag: Some(-2)
                },
                PartitionLag {
                    tp: tp(2),
                    committed: None,
                    log_end: 3,
                    lag: None
                },
            ]
        );
    }
}
