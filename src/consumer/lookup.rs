//! Where partitions start and what is committed: the committed offsets (OffsetFetch to the group
//! coordinator), ListOffsets at the leaders, and giving every assigned partition a position.

use super::positions::ResetReason;
use super::{offsets, Consumer};
use crate::authorization::Scope;
use crate::error::{Error, Result, Timeout};
use crate::group::action::{classify, GroupAction};
use crate::group::TopicPartition;
use crate::protocol::ApiKey;
use crate::retry::{retry, Backoff, Step};
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
        if !awaiting.is_empty() {
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
        let Some(timestamp) = self.config.auto_offset_reset.timestamp() else {
            return Err(Error::NoOffset {
                partitions: resets
                    .into_iter()
                    .map(|(tp, r)| {
                        let offset = match r {
                            ResetReason::OutOfRange(o) => Some(o),
                            ResetReason::NoCommittedOffset => None,
                        };
                        (tp, offset)
                    })
                    .collect(),
            });
        };
        let tps: Vec<TopicPartition> = resets.iter().map(|(tp, _)| tp.clone()).collect();
        let found = self.list_offsets(&tps, timestamp, deadline)?;
        for (tp, reason) in resets {
            if let Some(&offset) = found.get(&tp) {
                log::info!(
                    "{}: {tp}: {} -> reset to {offset} ({:?})",
                    self.ctx(),
                    match reason {
                        ResetReason::OutOfRange(o) => format!("offset {o} out of range"),
                        ResetReason::NoCommittedOffset => "no committed offset".to_string(),
                    },
                    self.config.auto_offset_reset
                );
                self.positions.reset_to(&tp, offset);
            }
        }
        Ok(())
    }

    /// ListOffsets at each partition's leader for `timestamp` (-2 earliest, -1 latest),
    /// retrying leader changes until `default.api.timeout.ms`.
    pub(super) fn list_offsets(
        &mut self,
        tps: &[TopicPartition],
        timestamp: i64,
        deadline: Instant,
    ) -> Result<BTreeMap<TopicPartition, i64>> {
        let mut left: BTreeSet<TopicPartition> = tps.iter().cloned().collect();
        let mut found = BTreeMap::new();
        let mut force = false;
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
                let resp = self.client.send_to_by(leader, deadline, |v| {
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
                for (tp, result) in offsets::list_offsets_result(version, &resp) {
                    if !left.contains(&tp) {
                        continue;
                    }
                    match result {
                        Ok(offset) => {
                            left.remove(&tp);
                            found.insert(tp, offset);
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

    /// The offsets committed for `partitions` (OffsetFetch to the group coordinator); `None`
    /// where nothing is committed.
    pub fn committed(
        &mut self,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, Option<i64>>> {
        for tp in partitions {
            crate::names::check_topic("committed", &tp.topic)?;
        }
        let got = self.fetch_committed(partitions, crate::deadline::after(self.client.api_timeout()))?;
        Ok(partitions
            .iter()
            .map(|tp| (tp.clone(), got.get(tp).copied().flatten().map(|(o, _)| o)))
            .collect())
    }

    pub(super) fn fetch_committed(
        &mut self,
        partitions: &[TopicPartition],
        deadline: Instant,
    ) -> Result<BTreeMap<TopicPartition, offsets::Committed>> {
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
            let problem = match self.group_mut()?.coordinator_request(deadline, |v| {
                offsets::offset_fetch_request(v, &group, partitions, require_stable)
            }) {
                Ok(resp) => match offsets::offset_fetch_result(&resp) {
                    Ok(map) => return Ok(Step::Done(map)),
                    Err(offsets::FetchFailure { code, topic }) => {
                        let action = classify(code);
                        if !matches!(action, GroupAction::Retry | GroupAction::RediscoverCoordinator) {
                            let scope = Scope {
                                topic: topic.as_deref(),
                                group: Some(&group),
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
