//! Where partitions start and what is committed: the committed offsets (OffsetFetch to the group
//! coordinator), ListOffsets at the leaders, and giving every assigned partition a position.

use super::config::check_partitions;
use super::positions::ResetReason;
use super::{offsets, Consumer};
use super::{OffsetAndMetadata, OffsetAndTimestamp};
use crate::authorization::Scope;
use crate::error::{Error, Result, Timeout};
use crate::group::action::{classify, GroupAction};
use crate::group::TopicPartition;
use crate::protocol::ApiKey;
use crate::retry::{retry, Backoff, Step};
use crate::KafkaCode;
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

impl Consumer {
    /// Gives every assigned partition a position: the committed offset, else the reset policy.
    /// Gives up at `deadline` with the positions still missing (the next poll goes on), but
    /// returns errors retrying cannot fix.
    pub(super) fn ensure_positions(&mut self, deadline: Instant) -> Result<()> {
        match self.ensure_positions_by(deadline) {
            // Only transient failures are retried until a deadline: the positions come at a
            // later poll.
            Err(Error::Timeout {
                which: Timeout::Retries,
                ..
            }) => Ok(()),
            other => other,
        }
    }

    pub(super) fn ensure_positions_by(&mut self, deadline: Instant) -> Result<()> {
        let awaiting = self.positions.awaiting_committed();
        if self.member.is_none() {
            // No group, no committed offsets: `auto.offset.reset` (or a seek) decides.
            for tp in &awaiting {
                self.positions.apply_committed(tp, None);
            }
        } else if !awaiting.is_empty() {
            let committed = self.fetch_committed(&awaiting, deadline)?;
            for tp in &awaiting {
                let c = committed.get(tp).copied().flatten();
                self.positions.apply_committed(tp, c);
            }
            log::info!(
                "{}: committed offsets {:?}",
                self.ctx(),
                awaiting
                    .iter()
                    .map(|tp| (
                        tp.to_string(),
                        committed.get(tp).copied().flatten().map(|(o, _)| o)
                    ))
                    .collect::<Vec<_>>()
            );
        }
        let resets = self.positions.needing_reset();
        if resets.is_empty() {
            return Ok(());
        }
        // Requested resets (seek_to_beginning/end/timestamp) look up what was asked for; the
        // others what `auto.offset.reset` says, or fail without a policy.
        let policy = self.config.auto_offset_reset.timestamp();
        let mut by_timestamp: BTreeMap<i64, Vec<TopicPartition>> = BTreeMap::new();
        let mut no_offset = Vec::new();
        for (tp, reason) in &resets {
            match (reason, policy) {
                (ResetReason::Requested(ts), _) => by_timestamp.entry(*ts).or_default().push(tp.clone()),
                (_, Some(ts)) => by_timestamp.entry(ts).or_default().push(tp.clone()),
                (ResetReason::OutOfRange(o), None) => no_offset.push((tp.clone(), Some(*o))),
                (ResetReason::NoCommittedOffset, None) => no_offset.push((tp.clone(), None)),
            }
        }
        if !no_offset.is_empty() {
            return Err(Error::NoOffset {
                partitions: no_offset,
            });
        }
        let reasons: BTreeMap<TopicPartition, ResetReason> = resets.into_iter().collect();
        for (timestamp, tps) in by_timestamp {
            let found = self.list_offsets_found(&tps, timestamp, deadline)?;
            // A time with no record at or after it goes to the end, as Kafka's
            // `auto.offset.reset=by_duration` does.
            let past_end: Vec<TopicPartition> = tps
                .iter()
                .filter(|tp| matches!(found.get(*tp), Some(None)))
                .cloned()
                .collect();
            let ends = if past_end.is_empty() {
                BTreeMap::new()
            } else {
                self.list_offsets(&past_end, -1, deadline)?
            };
            for tp in tps {
                let offset = match found.get(&tp) {
                    Some(Some(o)) => o.offset,
                    _ => match ends.get(&tp) {
                        Some(&o) => o,
                        None => continue,
                    },
                };
                let reason = reasons.get(&tp).copied();
                log::info!(
                    "{}: {tp}: {} -> reset to {offset}",
                    self.ctx(),
                    match reason {
                        Some(ResetReason::OutOfRange(o)) =>
                            format!("offset {o} out of range ({:?})", self.config.auto_offset_reset),
                        Some(ResetReason::NoCommittedOffset) => {
                            format!("no committed offset ({:?})", self.config.auto_offset_reset)
                        }
                        Some(ResetReason::Requested(-2)) => "seek to beginning".to_string(),
                        Some(ResetReason::Requested(-1)) => "seek to end".to_string(),
                        Some(ResetReason::Requested(t)) => format!("seek to timestamp {t}"),
                        None => String::new(),
                    },
                );
                self.positions.reset_to(&tp, offset);
            }
        }
        Ok(())
    }

    /// [`list_offsets_found`](Self::list_offsets_found) for -2 (earliest) or -1 (latest),
    /// which every partition with a leader answers.
    pub(super) fn list_offsets(
        &mut self,
        tps: &[TopicPartition],
        timestamp: i64,
        deadline: Instant,
    ) -> Result<BTreeMap<TopicPartition, i64>> {
        debug_assert!(timestamp < 0);
        Ok(self
            .list_offsets_found(tps, timestamp, deadline)?
            .into_iter()
            .filter_map(|(tp, o)| Some((tp, o?.offset)))
            .collect())
    }

    /// ListOffsets at each partition's leader for `timestamp` (-2 earliest, -1 latest, else
    /// the first record at or after that time, `None` where there is none), with the
    /// consumer's `isolation.level`, retrying leader changes until `deadline`.
    pub(super) fn list_offsets_found(
        &mut self,
        tps: &[TopicPartition],
        timestamp: i64,
        deadline: Instant,
    ) -> Result<BTreeMap<TopicPartition, Option<OffsetAndTimestamp>>> {
        // Topics outside the subscription (lookups for any partition) need their metadata.
        let missing = {
            let meta = self.client.cached_metadata();
            tps.iter().any(|tp| !meta.topics.contains_key(&tp.topic))
        };
        let mut force = missing;
        for tp in tps {
            if !self.lookup_topics.contains(&tp.topic) {
                self.lookup_topics.push(tp.topic.clone());
            }
        }
        let mut left: BTreeSet<TopicPartition> = tps.iter().cloned().collect();
        let mut found = BTreeMap::new();
        let isolation = self.config.isolation_level.code();
        // How many are still without an offset, for the timeout's text.
        let remaining = Cell::new(left.len());
        let what = || format!("ListOffsets for {} partitions", remaining.get());
        let backoff = Backoff::fixed(self.client.retry_backoff());
        retry(deadline, backoff, what, || {
            let meta = match self.metadata(force, deadline) {
                Ok(m) => m,
                Err(e) if e.is_transient() => {
                    log::debug!("{}: metadata refresh failed: {e}", self.ctx());
                    self.client.cached_metadata()
                }
                Err(e) => return Err(e),
            };
            // With the leader epoch: the answer becomes a position, which a stale leader must
            // not give. Partitions without a leader wait for fresher metadata.
            let targets =
                offsets::list_offsets_targets(&meta, &left, timestamp, true, offsets::UnknownTopic::Wait)?;
            force = !targets.unled.is_empty();
            let mut last_problem = targets.unled.last().map(|tp| Error::NoLeader {
                partition: tp.clone(),
            });
            for (leader, targets) in targets.by_leader {
                let mut version = 0;
                // Resumable: a leader slower than the poll's timeout answers at a later poll.
                let resp = self.client.send_to_resumable_by(leader, deadline, |v| {
                    version = v;
                    offsets::list_offsets_request(v, isolation, &targets)
                });
                let resp = match resp {
                    Ok(r) => r,
                    Err(e) if e.is_transient() => {
                        log::debug!("{}: ListOffsets at broker {leader} failed: {e}", self.ctx());
                        last_problem = Some(e);
                        force = true;
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let times = offsets::list_offsets_timestamps(&resp);
                for (tp, result) in offsets::list_offsets_result(version, &resp) {
                    if !left.contains(&tp) {
                        continue;
                    }
                    match result {
                        Ok(offset) => {
                            left.remove(&tp);
                            let timestamp = times.get(&tp).copied().unwrap_or(-1);
                            found.insert(tp, Some(OffsetAndTimestamp { offset, timestamp }));
                        }
                        // Answered without error but without an offset: no record at or after
                        // the time. That is the answer, not a condition to wait out.
                        Err(KafkaCode::OffsetNotAvailable) if timestamp >= 0 && times.contains_key(&tp) => {
                            left.remove(&tp);
                            found.insert(tp, None);
                        }
                        Err(code) => {
                            let scope = Scope::topic(&tp.topic);
                            let e = Error::from_code_in(ApiKey::ListOffsets, code, scope, tp.to_string());
                            if !code.is_retriable() {
                                return Err(e);
                            }
                            log::debug!("{}: ListOffsets {tp}: {code}; retrying", self.ctx());
                            last_problem = Some(e);
                            force = true;
                        }
                    }
                }
            }
            remaining.set(left.len());
            if left.is_empty() {
                return Ok(Step::Done(()));
            }
            Ok(last_problem.map_or(Step::Wait, Step::Retry))
        })?;
        Ok(found)
    }

    /// The first offset still in the log of each of `partitions`, assigned or not (ListOffsets
    /// at each leader; Java `beginningOffsets`, rdkafka's low watermark from
    /// `query_watermark_offsets`). Leader changes are retried until `default.api.timeout.ms`,
    /// then [`Error::Timeout`] names the last cause. Moves no position.
    pub fn beginning_offsets(
        &mut self,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, i64>> {
        check_partitions("beginning_offsets", partitions)?;
        self.list_offsets(partitions, -2, crate::deadline::after(self.client.api_timeout()))
    }

    /// The end of the log of each of `partitions`, assigned or not: the offset the next record
    /// will get (the high watermark), or with `isolation.level=read_committed` the last stable
    /// offset, below which every transaction is decided (Java `endOffsets`, rdkafka's high
    /// watermark). A batch job that reads up to these and stops reads exactly what was there
    /// when it asked. Bounded like [`beginning_offsets`](Self::beginning_offsets).
    pub fn end_offsets(&mut self, partitions: &[TopicPartition]) -> Result<BTreeMap<TopicPartition, i64>> {
        check_partitions("end_offsets", partitions)?;
        self.list_offsets(partitions, -1, crate::deadline::after(self.client.api_timeout()))
    }

    /// For each partition, the first offset whose record timestamp is at or after the given
    /// time (milliseconds since the epoch), with that record's timestamp; `None` where no record
    /// is that recent (Java `offsetsForTimes`, rdkafka `offsets_for_times`). Needs ListOffsets
    /// v1 (Kafka 0.10.1+). Bounded like [`beginning_offsets`](Self::beginning_offsets); fails
    /// with [`Error::Config`] for a negative time, before any request.
    pub fn offsets_for_times(
        &mut self,
        times: &BTreeMap<TopicPartition, i64>,
    ) -> Result<BTreeMap<TopicPartition, Option<OffsetAndTimestamp>>> {
        let partitions: Vec<TopicPartition> = times.keys().cloned().collect();
        check_partitions("offsets_for_times", &partitions)?;
        if let Some((tp, t)) = times.iter().find(|(_, &t)| t < 0) {
            return Err(Error::Config {
                property: "offsets_for_times",
                problem: format!("timestamp {t} for {tp} is negative"),
            });
        }
        let deadline = crate::deadline::after(self.client.api_timeout());
        let mut by_time: BTreeMap<i64, Vec<TopicPartition>> = BTreeMap::new();
        for (tp, &t) in times {
            by_time.entry(t).or_default().push(tp.clone());
        }
        let mut out = BTreeMap::new();
        for (t, tps) in by_time {
            out.extend(self.list_offsets_found(&tps, t, deadline)?);
        }
        Ok(out)
    }

    /// The offsets committed for `partitions` (OffsetFetch to the group coordinator); `None`
    /// where nothing is committed.
    pub fn committed(
        &mut self,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, Option<i64>>> {
        check_partitions("committed", partitions)?;
        let got = self.fetch_committed(partitions, crate::deadline::after(self.client.api_timeout()))?;
        Ok(partitions
            .iter()
            .map(|tp| (tp.clone(), got.get(tp).copied().flatten().map(|(o, _)| o)))
            .collect())
    }

    /// The offsets committed for `partitions`, assigned or not, with their metadata strings and
    /// leader epochs (OffsetFetch to the group coordinator; Java `committed(Set)`); `None` where
    /// nothing is committed. Bounded by `default.api.timeout.ms`.
    pub fn committed_with_metadata(
        &mut self,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, Option<OffsetAndMetadata>>> {
        check_partitions("committed", partitions)?;
        let deadline = crate::deadline::after(self.client.api_timeout());
        let (got, mut metadata) = self.fetch_committed_with_metadata(partitions, deadline)?;
        Ok(partitions
            .iter()
            .map(|tp| {
                let c = got
                    .get(tp)
                    .copied()
                    .flatten()
                    .map(|(offset, leader_epoch)| OffsetAndMetadata {
                        offset,
                        metadata: metadata.remove(tp).unwrap_or_default(),
                        leader_epoch,
                    });
                (tp.clone(), c)
            })
            .collect())
    }

    pub(super) fn fetch_committed(
        &mut self,
        partitions: &[TopicPartition],
        deadline: Instant,
    ) -> Result<BTreeMap<TopicPartition, offsets::Committed>> {
        Ok(self.fetch_committed_with_metadata(partitions, deadline)?.0)
    }

    /// [`fetch_committed`](Self::fetch_committed) with the metadata strings stored beside the
    /// offsets.
    fn fetch_committed_with_metadata(
        &mut self,
        partitions: &[TopicPartition],
        deadline: Instant,
    ) -> Result<(
        BTreeMap<TopicPartition, offsets::Committed>,
        BTreeMap<TopicPartition, String>,
    )> {
        let group = self.group()?.group_id().to_string();
        // Always `require_stable` (OffsetFetch v7+, KIP-447), as Kafka's own consumer does, and
        // not only for transactions: without it, Kafka 4's coordinator answers from its last
        // replicated state, which right after a coordinator failover lags the offsets it has
        // already acknowledged, so a member taking a partition over could read no offset at all
        // and consume again what was committed (seen in chaos_tests' kill -9 of the
        // coordinator). With it, pending commits are waited for (UNSTABLE_OFFSET_COMMIT, retried).
        let require_stable = true;
        let what = || format!("OffsetFetch for group {group}");
        let backoff = Backoff::fixed(self.client.retry_backoff());
        retry(deadline, backoff, what, || {
            // Resumable: a coordinator slower than the poll's timeout answers at a later poll.
            let problem = match self.group_mut()?.coordinator_request_resumable(deadline, |v| {
                offsets::offset_fetch_request(v, &group, partitions, require_stable)
            }) {
                Ok(resp) => match offsets::offset_fetch_result(&resp) {
                    Ok(map) => return Ok(Step::Done((map, offsets::offset_fetch_metadata(&resp)))),
                    Err(offsets::FetchFailure { code, topic }) => {
                        let action = classify(code);
                        if !matches!(action, GroupAction::Retry | GroupAction::RediscoverCoordinator) {
                            let scope = Scope {
                                topic: topic.as_deref(),
                                group: Some(&group),
                                ..Scope::default()
                            };
                            let context = format!("group {group}");
                            let e = Error::from_code_in(ApiKey::OffsetFetch, code, scope, context);
                            // Denied the group: the member stops, as on any other group call.
                            return Err(self.group_mut()?.stop_if_denied(e));
                        }
                        if action == GroupAction::RediscoverCoordinator {
                            self.group_mut()?.forget_coordinator();
                        }
                        Error::Kafka {
                            api: ApiKey::OffsetFetch,
                            code,
                            message: None,
                        }
                    }
                },
                Err(e) if e.is_transient() => e,
                Err(e) => return Err(e),
            };
            log::debug!("{}: OffsetFetch: {problem}; retrying", self.ctx());
            Ok(Step::Retry(problem))
        })
    }
}
