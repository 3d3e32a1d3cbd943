//! The leader's watch of the subscribed topics between rebalances (Kafka's metadata snapshot):
//! every `metadata.max.age.ms` it compares their partition counts with those the group's
//! assignment was made for, and rebalances when they differ. A leader that kept the group's
//! assignment (KIP-814 `skip_assignment`) first reads that assignment (DescribeGroups) and
//! checks that it covers every partition; the pure rules are in
//! [`group::leader`](super::leader).

use super::leader::{self, LeaderSnapshot, Unchecked};
use super::Classic;
use crate::group::action::{classify, GroupAction};
use crate::group::assignment::Assignment;
use crate::group::member::core::Core;
use crate::group::requests;
use crate::group::state::MemberState;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

impl Classic {
    /// The leader rebalances when a subscribed topic (of any member) gains partitions or
    /// appears/disappears: every `metadata.max.age.ms`, comparing the metadata with the
    /// partition counts the group's assignment was made for. A leader that skipped the
    /// assignment and could not yet read the group's assignment retries that instead, every
    /// `retry.backoff.ms`, so a failed DescribeGroups is not the end of the check.
    pub(super) fn check_leader_metadata(&mut self, core: &mut Core, deadline: Instant) {
        let Some(snapshot) = &self.leader_snapshot else {
            return;
        };
        let due = check_interval(
            snapshot,
            core.config.metadata_max_age,
            core.config.retry_backoff(&core.client),
        );
        // With a rejoin pending the next join leads (or follows) anew; nothing to check.
        if core.state.state() != MemberState::Stable
            || self.rejoin.is_some()
            || self.last_metadata_check.elapsed() < due
        {
            return;
        }
        self.last_metadata_check = Instant::now();
        let topics = watched_topics(snapshot, &core.config.topics);
        let expected = snapshot.counts.clone();
        let now = match self.partition_counts(core, topics.iter().map(String::as_str), deadline) {
            Ok(now) => now,
            Err(e) => {
                log::debug!("{}: metadata check failed: {e}", core.ctx());
                return;
            }
        };
        match compare(expected.as_ref(), &now) {
            Watch::Changed => {
                log::info!(
                    "{}: subscribed topics changed ({expected:?} -> {now:?}); rebalancing",
                    core.ctx()
                );
                self.schedule_rejoin(false);
            }
            Watch::Unchanged => {}
            Watch::ReadKeptAssignment => self.check_kept_assignment(core, &now),
        }
    }

    /// KIP-814: reads the assignment the group keeps (DescribeGroups) and compares the
    /// partition counts it was made for with `now`, the subscribed topics' counts in the
    /// metadata; rebalances when they differ (a partition owned by no one or by two, a topic
    /// nobody owns). Records those counts, not `now`, as the snapshot, so that the periodic
    /// check also compares later metadata with what the group owns. When the assignment
    /// cannot be read for now (see [`Unchecked::is_transient`]) the snapshot stays unchecked
    /// and [`check_leader_metadata`](Self::check_leader_metadata) tries again; when it cannot
    /// be read at all, the leader rebalances rather than trust what it cannot see.
    pub(super) fn check_kept_assignment(&mut self, core: &mut Core, now: &BTreeMap<String, i32>) {
        let kept = match self.kept_assignments(core) {
            Ok(kept) => kept,
            Err(e) if e.is_transient() => {
                log::info!(
                    "{}: cannot read the group's assignment yet ({e}); checking again",
                    core.ctx()
                );
                return;
            }
            Err(e) => {
                log::warn!(
                    "{}: cannot read the group's assignment ({e}); rebalancing instead of keeping it",
                    core.ctx()
                );
                self.schedule_rejoin(false);
                return;
            }
        };
        let covered = leader::assigned_counts(&kept);
        if &covered == now {
            log::info!(
                "{}: the group's assignment covers the subscribed topics ({now:?}); keeping it",
                core.ctx()
            );
        } else {
            let unowned: Vec<String> = leader::unowned(now, &kept)
                .iter()
                .map(ToString::to_string)
                .collect();
            log::info!(
                "{}: the group's assignment was made for {covered:?}, the subscribed topics have {now:?} (owned by no one: [{}]); rebalancing",
                core.ctx(),
                unowned.join(", ")
            );
            self.schedule_rejoin(false);
        }
        if let Some(s) = &mut self.leader_snapshot {
            s.counts = Some(covered);
        }
    }

    /// The members' assignments as the coordinator keeps them, from DescribeGroups over the
    /// member's own coordinator connection.
    fn kept_assignments(&mut self, core: &mut Core) -> std::result::Result<Vec<Assignment>, Unchecked> {
        let group = core.config.group_id.clone();
        let described = self
            .coordinator_request(
                core,
                crate::deadline::after(core.client.connection_config().request_timeout),
                |_| requests::describe_group(&group),
                false,
            )
            .and_then(|resp| crate::admin::group_description(&group, resp));
        let described = match described {
            Ok(d) => d,
            Err(e) => {
                if e.kafka_code()
                    .is_some_and(|c| classify(c) == GroupAction::RediscoverCoordinator)
                {
                    self.forget_coordinator(core);
                }
                return Err(Unchecked::Request(e));
            }
        };
        leader::kept_assignments(
            &described.state,
            described
                .members
                .iter()
                .map(|m| (m.member_id.as_str(), &m.assignment)),
        )
        .map_err(Unchecked::Answer)
    }
}

/// How often a leader looks while a subscribed topic does not exist: a fixed second (at most
/// `metadata.max.age.ms`), Java's `retry.backoff.max.ms` default, the pace at which its
/// consumer asks again for a topic it does not know. Fixed rather than growing: a batch job
/// waiting for its topic should start within a second of its creation however long it
/// waited, and one Metadata request a second per group leader costs the broker nothing.
const MISSING_TOPIC_CHECK: Duration = Duration::from_secs(1);

/// How often the leader looks: every `metadata.max.age.ms` once it knows what the group's
/// assignment was made for, every [`MISSING_TOPIC_CHECK`] while a watched topic has no
/// partitions in it (so that the topic is picked up soon after it is created), every
/// `retry.backoff.ms` while a kept assignment (KIP-814) could not be read yet.
fn check_interval(snapshot: &LeaderSnapshot, max_age: Duration, retry_backoff: Duration) -> Duration {
    match &snapshot.counts {
        Some(counts) if snapshot.topics.iter().any(|t| !counts.contains_key(t)) => {
            MISSING_TOPIC_CHECK.min(max_age)
        }
        Some(_) => max_age,
        None => retry_backoff,
    }
}

/// The topics to look up: every member's of the generation, and ours, which may have been
/// changed since.
fn watched_topics(snapshot: &LeaderSnapshot, own: &[String]) -> BTreeSet<String> {
    snapshot.topics.iter().chain(own).cloned().collect()
}

/// What a look at the metadata found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watch {
    /// The partition counts are those the assignment was made for.
    Unchanged,
    /// A topic gained partitions, appeared or disappeared: rebalance.
    Changed,
    /// Nothing to compare with yet: read the assignment the group kept (KIP-814).
    ReadKeptAssignment,
}

fn compare(expected: Option<&BTreeMap<String, i32>>, now: &BTreeMap<String, i32>) -> Watch {
    match expected {
        Some(expected) if expected != now => Watch::Changed,
        Some(_) => Watch::Unchanged,
        None => Watch::ReadKeptAssignment,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(c: &[(&str, i32)]) -> BTreeMap<String, i32> {
        c.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    fn snapshot(counts: Option<BTreeMap<String, i32>>) -> LeaderSnapshot {
        LeaderSnapshot {
            topics: ["a".to_string(), "b".to_string()].into(),
            counts,
        }
    }

    #[test]
    fn an_unchecked_kept_assignment_is_looked_at_again_sooner() {
        let (age, backoff) = (Duration::from_secs(300), Duration::from_millis(100));
        let all = counts(&[("a", 1), ("b", 2)]);
        assert_eq!(check_interval(&snapshot(Some(all)), age, backoff), age);
        assert_eq!(check_interval(&snapshot(None), age, backoff), backoff);
    }

    #[test]
    fn a_missing_topic_is_looked_for_every_second() {
        let (age, backoff) = (Duration::from_secs(300), Duration::from_millis(100));
        let only_a = counts(&[("a", 1)]);
        assert_eq!(
            check_interval(&snapshot(Some(only_a.clone())), age, backoff),
            MISSING_TOPIC_CHECK
        );
        // Never later than metadata.max.age.ms asks for.
        let short = Duration::from_millis(200);
        assert_eq!(check_interval(&snapshot(Some(only_a)), short, backoff), short);
    }

    #[test]
    fn every_members_topics_and_ours_are_watched() {
        let topics: Vec<_> = watched_topics(&snapshot(None), &["c".into(), "a".into()])
            .into_iter()
            .collect();
        assert_eq!(topics, ["a", "b", "c"]);
    }

    #[test]
    fn a_change_in_any_topic_rebalances() {
        let was = counts(&[("a", 3), ("b", 1)]);
        assert_eq!(compare(Some(&was), &was.clone()), Watch::Unchanged);
        // Grown, appeared, gone.
        assert_eq!(
            compare(Some(&was), &counts(&[("a", 4), ("b", 1)])),
            Watch::Changed
        );
        assert_eq!(
            compare(Some(&was), &counts(&[("a", 3), ("b", 1), ("c", 2)])),
            Watch::Changed
        );
        assert_eq!(compare(Some(&was), &counts(&[("a", 3)])), Watch::Changed);
        assert_eq!(compare(None, &was), Watch::ReadKeptAssignment);
    }
}
