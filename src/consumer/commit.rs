//! Commits: synchronous OffsetCommits to the group coordinator, by hand or automatic
//! (`enable.auto.commit`), with the generation that owns the partitions.

use super::offsets::CommitOutcome;
use super::{offsets, Consumer, ConsumerRecord, OffsetAndMetadata};
use crate::authorization::Scope;
use crate::error::{Error, Result};
use crate::group::TopicPartition;
use crate::protocol::ApiKey;
use crate::retry::{retry_or_last, Backoff, Step};
use std::collections::BTreeMap;
use std::time::Instant;

impl Consumer {
    pub(super) fn maybe_auto_commit(&mut self, deadline: Instant) {
        if !self.config.enable_auto_commit
            || self.positions.is_revoked()
            || self.last_auto_commit.elapsed() < self.config.auto_commit_interval
        {
            return;
        }
        self.last_auto_commit = Instant::now();
        let offsets = self.positions.uncommitted();
        if let Err(e) = self.commit_by(offsets, deadline) {
            log::warn!(
                "{}: auto-commit failed: {e}; records since the last commit may be delivered again",
                self.ctx()
            );
        }
    }

    /// Commits the positions of every assigned partition — everything [`poll`](Self::poll)
    /// has returned — synchronously. Between a poll that returned [`GroupEvent::Revoked`](crate::GroupEvent::Revoked) and
    /// the next poll, commits the revoked partitions with the generation that owned them.
    /// Partitions whose position equals the committed offset are not sent again; with nothing
    /// to commit no request is made.
    ///
    /// A rejection because the generation is over comes back as [`Error::Kafka`] with
    /// `api: ApiKey::OffsetCommit` and the code (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION,
    /// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID); the next poll rejoins and the uncommitted
    /// records are delivered again.
    pub fn commit(&mut self) -> Result<()> {
        let offsets = self.positions.uncommitted();
        self.commit_by(offsets, crate::deadline::after(self.client.api_timeout()))
    }

    /// Commits the given offsets (the offset of the next record to read, as Kafka counts),
    /// synchronously, with the same error rules as [`commit`](Self::commit). An offset below
    /// the partition's committed offset is skipped with a warning (see the [`Consumer`] docs).
    ///
    /// Fails before any request with [`Error::Config`] for a negative offset (Kafka has none,
    /// and the coordinator would store it as "no offset") or a topic name Kafka cannot have.
    pub fn commit_offsets(&mut self, offsets: &BTreeMap<TopicPartition, i64>) -> Result<()> {
        let offsets = offsets
            .iter()
            .map(|(tp, &o)| (tp.clone(), OffsetAndMetadata::new(o)))
            .collect();
        self.commit_offsets_with_metadata(&offsets)
    }

    /// [`commit_offsets`](Self::commit_offsets) with a metadata string and leader epoch per
    /// partition (Java `commitSync(Map<TopicPartition, OffsetAndMetadata>)`); the metadata comes
    /// back from [`committed_with_metadata`](Self::committed_with_metadata). A metadata string
    /// longer than the broker's `offset.metadata.max.bytes` is rejected by the coordinator with
    /// `OFFSET_METADATA_TOO_LARGE`.
    pub fn commit_offsets_with_metadata(
        &mut self,
        offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
    ) -> Result<()> {
        for (tp, o) in offsets {
            crate::names::check_topic("commit_offsets", &tp.topic)?;
            if o.offset < 0 {
                return Err(Error::Config {
                    property: "commit_offsets",
                    problem: format!("offset {} for {tp} is negative", o.offset),
                });
            }
        }
        let metadata: BTreeMap<TopicPartition, String> = offsets
            .iter()
            .filter(|(_, o)| !o.metadata.is_empty())
            .map(|(tp, o)| (tp.clone(), o.metadata.clone()))
            .collect();
        let offsets = offsets
            .iter()
            .map(|(tp, o)| (tp.clone(), (o.offset, o.leader_epoch)))
            .collect();
        self.commit_with(
            offsets,
            &metadata,
            crate::deadline::after(self.client.api_timeout()),
        )
    }

    /// Commits, for each partition among `records`, one past the highest offset there: what a
    /// job that processed exactly these records (and not everything [`poll`](Self::poll)
    /// returned, e.g. because it stops at a snapshot of the end offsets) has done. With the
    /// leader epoch of that record. Same rules as [`commit_offsets`](Self::commit_offsets);
    /// nothing to commit for an empty slice.
    pub fn commit_records(&mut self, records: &[ConsumerRecord]) -> Result<()> {
        // Keyed by the records' shared names: a partition's name is copied once, not per record.
        let mut upto: BTreeMap<(&str, i32), OffsetAndMetadata> = BTreeMap::new();
        for r in records {
            let next = r.offset + 1;
            let e = upto
                .entry((&*r.topic, r.partition))
                .or_insert_with(|| OffsetAndMetadata::new(next));
            if next >= e.offset {
                e.offset = next;
                e.leader_epoch = r.leader_epoch;
            }
        }
        if upto.is_empty() {
            return Ok(());
        }
        let upto: BTreeMap<TopicPartition, OffsetAndMetadata> = upto
            .into_iter()
            .map(|((topic, partition), o)| (TopicPartition::new(topic, partition), o))
            .collect();
        self.commit_offsets_with_metadata(&upto)
    }

    /// [`commit_with`](Self::commit_with) without metadata strings.
    pub(super) fn commit_by(
        &mut self,
        offsets: BTreeMap<TopicPartition, (i64, Option<i32>)>,
        deadline: Instant,
    ) -> Result<()> {
        self.commit_with(offsets, &BTreeMap::new(), deadline)
    }

    /// Commits `offsets` (with `metadata` where given), retrying what a retry can fix until
    /// `deadline` (at least one try).
    fn commit_with(
        &mut self,
        offsets: BTreeMap<TopicPartition, (i64, Option<i32>)>,
        metadata: &BTreeMap<TopicPartition, String>,
        deadline: Instant,
    ) -> Result<()> {
        let check = self.positions.check_commit(&offsets);
        for (tp, (offset, floor)) in &check.stale {
            log::warn!(
                "{}: not committing {tp} at {offset}: {floor} is already committed and committed \
                 offsets do not move backwards (seek first to rewind)",
                self.ctx()
            );
        }
        let mut pending = check.send;
        if pending.is_empty() {
            return Ok(());
        }
        let member = self.group()?;
        let group = member.group_id().to_string();
        let instance = member
            .group_instance_id()
            .filter(|_| member.is_static())
            .map(String::from);
        // A commit that runs out of time answers with its last error itself (the OffsetCommit
        // code, the lost connection), as it always has; `what` serves only if there is none.
        let what = || format!("OffsetCommit for group {group}");
        let backoff = Backoff::fixed(self.client.retry_backoff());
        retry_or_last(deadline, backoff, what, || {
            let generation = self.group_mut()?.commit_generation();
            let result = self.group_mut()?.coordinator_request(deadline, |v| {
                offsets::offset_commit_request(
                    v,
                    &group,
                    generation.as_ref(),
                    instance.as_deref(),
                    &pending,
                    metadata,
                )
            });
            let problem = match result {
                Ok(resp) => {
                    let (ok, outcome) = offsets::commit_outcome(&resp);
                    for tp in ok {
                        if let Some((offset, _)) = pending.remove(&tp) {
                            self.positions.committed_ok(&tp, offset);
                        }
                    }
                    match outcome {
                        CommitOutcome::Done => {
                            log::debug!("{}: committed", self.ctx());
                            return Ok(Step::Done(()));
                        }
                        CommitOutcome::Retry {
                            partitions,
                            rediscover,
                            code,
                        } => {
                            if rediscover {
                                self.group_mut()?.forget_coordinator();
                            }
                            pending.retain(|tp, _| partitions.contains(tp));
                            Error::Kafka {
                                api: ApiKey::OffsetCommit,
                                code,
                                message: None,
                            }
                        }
                        CommitOutcome::Failed {
                            code,
                            partitions,
                            rejoin,
                        } => {
                            if rejoin {
                                self.group_mut()?.request_rejoin();
                            }
                            let list: Vec<String> = partitions.iter().map(ToString::to_string).collect();
                            let list = list.join(", ");
                            log::warn!("{}: commit of {list} rejected: {code}", self.ctx());
                            let context = format!(
                                "commit of {list} rejected in generation {}",
                                generation.map_or(-1, |g| g.id)
                            );
                            // The first partition is the one the (first) code is about.
                            let scope = Scope {
                                topic: partitions.first().map(|tp| tp.topic.as_str()),
                                group: Some(&group),
                                ..Scope::default()
                            };
                            let e = Error::from_code_in(ApiKey::OffsetCommit, code, scope, context);
                            return Err(self.group_mut()?.stop_if_denied(e));
                        }
                    }
                }
                Err(e) if e.is_transient() => e,
                Err(e) => return Err(e),
            };
            log::debug!("{}: OffsetCommit: {problem}; retrying", self.ctx());
            Ok(Step::Retry(problem))
        })
    }
}
