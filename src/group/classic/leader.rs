//! What a restarted static leader checks before it keeps the group's assignment (KIP-814
//! `skip_assignment`): whether that assignment was made for the partitions the subscribed
//! topics have now. A leader that assigns compares later metadata with the partition counts it
//! assigned; one that skipped must compare it with what the assignment it inherited covers,
//! since the counts it sees at its rejoin may already include partitions nobody owns.
//!
//! Pure: the DescribeGroups request that yields the assignments is the member's.

use crate::error::Error;
use crate::group::action::{classify, GroupAction};
use crate::group::assignment::{Assignment, TopicPartition};
use crate::protocol::DecodeError;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The count recorded for a topic whose assigned partitions are not `0..n` once each (a gap,
/// a partition owned twice, an index past the end): no topic has it, so it differs from
/// every metadata answer and the next comparison rebalances.
pub(crate) const NOT_A_COUNT: i32 = -1;

/// What a leader compares the subscribed topics' metadata with between rebalances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeaderSnapshot {
    /// Every topic any member subscribed to in the generation (not only the leader's own), so
    /// that a check also sees a topic of another member appear or grow.
    pub topics: BTreeSet<String>,
    /// Topic → partition count the group's assignment was made for; topics without partitions
    /// (missing, or owned by nobody) are absent, as [`GroupMember`]'s metadata lookup leaves
    /// them out. `None` while a leader that skipped the assignment has not yet been able to
    /// read the group's assignment: it asks again at the next check.
    ///
    /// [`GroupMember`]: crate::GroupMember
    pub counts: Option<BTreeMap<String, i32>>,
}

/// Why a DescribeGroups answer does not tell what the group's assignment is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum Unreadable {
    /// The group is not `Stable`. Coordinators report members' assignments only in `Stable`
    /// (during a rebalance they are empty), so the answer says nothing; the rebalance under
    /// way, or the next check, settles it.
    NotStable(String),
    /// A member's assignment does not decode.
    Undecodable {
        /// The member.
        member_id: String,
        /// Why.
        source: DecodeError,
    },
}

impl Unreadable {
    /// Whether asking again later may give a readable answer. A group that is not `Stable`
    /// will be again; bytes that do not decode stay so until a leader assigns anew.
    pub(crate) fn is_transient(&self) -> bool {
        matches!(self, Unreadable::NotStable(_))
    }
}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unreadable::NotStable(state) => {
                write!(f, "the group is {state}, not Stable: no assignments reported")
            }
            Unreadable::Undecodable { member_id, source } => {
                write!(f, "member {member_id}'s assignment does not decode: {source}")
            }
        }
    }
}

impl std::error::Error for Unreadable {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Unreadable::NotStable(_) => None,
            Unreadable::Undecodable { source, .. } => Some(source),
        }
    }
}

/// Why a leader that skipped the assignment could not check what the group's assignment
/// covers.
#[derive(Debug)]
pub(crate) enum Unchecked {
    /// DescribeGroups failed.
    Request(Error),
    /// DescribeGroups answered, but not with the group's assignment.
    Answer(Unreadable),
}

impl Unchecked {
    /// Whether to ask again at the next check rather than give up on the assignment: the
    /// coordinator moving, loading or unreachable, a timeout, a retriable code, or a group
    /// that is not `Stable`. Anything else will not pass by waiting, and a leader that cannot
    /// check has to rebalance (what it would have done without KIP-814) rather than trust an
    /// assignment it cannot see.
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            Unchecked::Request(e) => {
                e.is_coordinator_transient()
                    || matches!(e, Error::Timeout { .. })
                    || e.kafka_code().is_some_and(|c| {
                        matches!(
                            classify(c),
                            GroupAction::Retry | GroupAction::RediscoverCoordinator
                        )
                    })
            }
            Unchecked::Answer(u) => u.is_transient(),
        }
    }
}

impl fmt::Display for Unchecked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unchecked::Request(e) => e.fmt(f),
            Unchecked::Answer(u) => u.fmt(f),
        }
    }
}

/// The assignments the coordinator keeps for the members of a group in state `state`, from
/// a DescribeGroups answer (each member as member id and assignment bytes).
///
/// Only a `Stable` answer counts. In `Stable` a member's bytes are exactly what its SyncGroup
/// is handed, so an empty one is a member that really owns nothing — and a member id the
/// leader does not know yet (one that rejoined after our JoinGroup) still holds the
/// assignment of the instance it replaced. Reading an empty assignment of a member that is
/// about to get partitions can therefore only happen outside `Stable`, where every
/// assignment is reported empty; taking such an answer as the truth would find every
/// partition unowned and rebalance for nothing, so it is refused instead. The one error the
/// rule allows is in the safe direction: an answer that shows a partition unowned costs a
/// rebalance, it never leaves a partition without a consumer.
pub(crate) fn kept_assignments<'a>(
    state: &str,
    members: impl IntoIterator<Item = (&'a str, &'a Bytes)>,
) -> Result<Vec<Assignment>, Unreadable> {
    if state != "Stable" {
        return Err(Unreadable::NotStable(state.to_string()));
    }
    members
        .into_iter()
        .map(|(member_id, bytes)| {
            Assignment::decode(bytes).map_err(|source| Unreadable::Undecodable {
                member_id: member_id.to_string(),
                source,
            })
        })
        .collect()
}

/// Topic → the partition count `assignments` together were made for: `n` when the topic's
/// partitions owned across all members are exactly `0..n`, each once; [`NOT_A_COUNT`] when
/// they are anything else. Topics no member owns a partition of are absent.
///
/// Compared with the counts metadata gives now (topics with partitions only), equality means
/// every partition of every subscribed topic has exactly one owner and nothing else is owned.
pub(crate) fn assigned_counts<'a>(
    assignments: impl IntoIterator<Item = &'a Assignment>,
) -> BTreeMap<String, i32> {
    let mut owned: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for a in assignments {
        for (topic, partitions) in &a.partitions {
            owned.entry(topic).or_default().extend(partitions);
        }
    }
    owned
        .into_iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(topic, mut ps)| {
            ps.sort_unstable();
            let exact = ps.iter().zip(0..).all(|(p, i)| *p == i);
            let count = if exact {
                i32::try_from(ps.len()).unwrap_or(NOT_A_COUNT)
            } else {
                NOT_A_COUNT
            };
            (topic.to_string(), count)
        })
        .collect()
}

/// The partitions of `counts` (topic → partition count) that none of `assignments` owns,
/// sorted: what a log line names when the leader rebalances.
pub(crate) fn unowned<'a>(
    counts: &BTreeMap<String, i32>,
    assignments: impl IntoIterator<Item = &'a Assignment>,
) -> Vec<TopicPartition> {
    let owned: BTreeSet<TopicPartition> = assignments
        .into_iter()
        .flat_map(Assignment::topic_partitions)
        .collect();
    counts
        .iter()
        .flat_map(|(topic, n)| (0..*n).map(move |p| TopicPartition::new(topic.clone(), p)))
        .filter(|tp| !owned.contains(tp))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owns(parts: &[(&str, &[i32])]) -> Assignment {
        let mut a = Assignment::default();
        for (t, ps) in parts {
            a.partitions.insert(t.to_string(), ps.to_vec());
        }
        a
    }

    fn counts(c: &[(&str, i32)]) -> BTreeMap<String, i32> {
        c.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    #[test]
    fn an_assignment_covering_every_partition_once_matches_the_metadata() {
        let kept = [
            owns(&[("t", &[0, 1]), ("u", &[0])]),
            owns(&[("t", &[2])]),
            owns(&[]),
        ];
        assert_eq!(assigned_counts(&kept), counts(&[("t", 3), ("u", 1)]));
        assert!(unowned(&counts(&[("t", 3), ("u", 1)]), &kept).is_empty());
    }

    #[test]
    fn partitions_added_after_the_assignment_are_found_unowned() {
        // A topic grew from 6 to 8 partitions, then the leader restarted and skipped the
        // assignment (KIP-814): partitions 6 and 7 are in no member's owned list.
        let kept = [
            owns(&[("t", &[0, 1])]),
            owns(&[("t", &[2, 3])]),
            owns(&[("t", &[4, 5])]),
        ];
        let now = counts(&[("t", 8)]);
        assert_eq!(assigned_counts(&kept), counts(&[("t", 6)]));
        assert_ne!(assigned_counts(&kept), now);
        assert_eq!(
            unowned(&now, &kept),
            vec![TopicPartition::new("t", 6), TopicPartition::new("t", 7)]
        );
    }

    #[test]
    fn a_subscribed_topic_nobody_owns_is_missing_from_the_counts() {
        // A topic created after the assignment (or subscribed to since) has no entry, where
        // the metadata has one.
        let kept = [owns(&[("t", &[0])])];
        let now = counts(&[("t", 1), ("new", 2)]);
        assert_eq!(assigned_counts(&kept), counts(&[("t", 1)]));
        assert_eq!(
            unowned(&now, &kept),
            vec![TopicPartition::new("new", 0), TopicPartition::new("new", 1)]
        );
        // A member that lists a topic with no partitions owns nothing of it.
        assert_eq!(assigned_counts(&[owns(&[("t", &[])])]), BTreeMap::new());
    }

    #[test]
    fn gaps_and_double_owners_match_no_count() {
        // Partition 1 unowned, 2 owned: the count of no topic.
        let gap = [owns(&[("t", &[0])]), owns(&[("t", &[2])])];
        assert_eq!(assigned_counts(&gap), counts(&[("t", NOT_A_COUNT)]));
        assert_eq!(
            unowned(&counts(&[("t", 3)]), &gap),
            vec![TopicPartition::new("t", 1)]
        );
        // Three owned partitions of a three-partition topic, but 1 twice and 2 by nobody.
        let twice = [owns(&[("t", &[0, 1])]), owns(&[("t", &[1])])];
        assert_eq!(assigned_counts(&twice), counts(&[("t", NOT_A_COUNT)]));
        // Owned twice, yet every index below the count once: still no count.
        let dup = [owns(&[("t", &[0, 1])]), owns(&[("t", &[0, 1])])];
        assert_eq!(assigned_counts(&dup), counts(&[("t", NOT_A_COUNT)]));
        // Negative indexes from a broken peer.
        assert_eq!(
            assigned_counts(&[owns(&[("t", &[-1, 0])])]),
            counts(&[("t", NOT_A_COUNT)])
        );
    }

    #[test]
    fn an_assignment_of_a_topic_that_shrank_or_vanished_differs_from_the_metadata() {
        // Re-created with fewer partitions, or deleted: the metadata's count differs or is absent.
        let kept = [owns(&[("t", &[0, 1, 2])]), owns(&[("gone", &[0])])];
        assert_eq!(assigned_counts(&kept), counts(&[("gone", 1), ("t", 3)]));
        assert_ne!(assigned_counts(&kept), counts(&[("t", 2)]));
    }

    #[test]
    fn only_a_stable_answer_says_what_the_group_keeps() {
        let a = owns(&[("t", &[0])]).encode();
        let empty = Bytes::new();
        let kept = kept_assignments("Stable", [("m1", &a), ("m2", &empty)]).unwrap();
        assert_eq!(kept, vec![owns(&[("t", &[0])]), Assignment::default()]);
        for state in ["CompletingRebalance", "PreparingRebalance", "Empty", "Dead"] {
            let e = kept_assignments(state, [("m1", &empty)]).unwrap_err();
            assert_eq!(e, Unreadable::NotStable(state.into()));
            assert!(e.is_transient());
        }
        let garbage = Bytes::from_static(&[0xff, 0xff]);
        let e = kept_assignments("Stable", [("m1", &a), ("m2", &garbage)]).unwrap_err();
        assert!(matches!(&e, Unreadable::Undecodable { member_id, .. } if member_id == "m2"));
        assert!(!e.is_transient());
        assert!(e.to_string().contains("m2"), "{e}");
    }

    #[test]
    fn a_passing_failure_is_retried_and_a_lasting_one_is_not() {
        use crate::error::Timeout;
        use crate::protocol::ApiKey;
        use crate::KafkaCode;
        let kafka = |code| {
            Unchecked::Request(Error::Kafka {
                api: ApiKey::DescribeGroups,
                code,
                message: None,
            })
        };
        for code in [
            KafkaCode::NotCoordinator,
            KafkaCode::CoordinatorNotAvailable,
            KafkaCode::CoordinatorLoadInProgress,
            KafkaCode::RequestTimedOut,
        ] {
            assert!(kafka(code).is_transient(), "{code}");
        }
        assert!(!kafka(KafkaCode::GroupAuthorizationFailed).is_transient());
        let timeout = Unchecked::Request(Error::Timeout {
            which: Timeout::Retries,
            operation: "coordinator".into(),
            last: None,
        });
        assert!(timeout.is_transient());
        // A broken connection is found again at the next check; a fenced member never will be.
        assert!(Unchecked::Request(Error::Closed).is_transient());
        let fenced = Error::Fenced {
            group: "g".into(),
            instance_id: "a".into(),
        };
        assert!(!Unchecked::Request(fenced).is_transient());
        assert!(Unchecked::Answer(Unreadable::NotStable("PreparingRebalance".into())).is_transient());
    }
}
