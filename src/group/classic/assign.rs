//! The leader's part of a rebalance: read the members' subscriptions from the JoinGroup
//! answer, look up the subscribed topics' partition counts, run the assignor the group chose,
//! and hand SyncGroup one assignment per member (Kafka's `performAssignment`). A restarted
//! static leader told to skip it (KIP-814) checks the group's kept assignment instead
//! ([`metadata_watch`](super::metadata_watch)).

use super::leader::LeaderSnapshot;
use super::Classic;
use crate::client::{topic_denied, Metadata};
use crate::error::{Error, Result};
use crate::group::assignment::{Assignment, Subscription};
use crate::group::assignor::{Assignor, MemberSubscription};
use crate::group::member::core::Core;
use crate::group::member::lookup_deadline;
use crate::protocol::messages::join_group_response::JoinGroupResponseMember;
use crate::protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use crate::protocol::messages::JoinGroupResponse;
use crate::protocol::DecodeError;
use crate::KafkaCode;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

impl Classic {
    /// The leader's part: decode subscriptions, look up partition counts, run the assignor.
    ///
    /// A restarted static leader that the coordinator tells to skip the assignment (KIP-814
    /// `skip_assignment`) sends none; instead it checks that the assignment the group keeps
    /// was made for the partitions the subscribed topics have now (see
    /// [`check_kept_assignment`](Self::check_kept_assignment)), because partitions added
    /// while the old leader ran may be in the metadata it sees at its rejoin but owned by
    /// no one.
    pub(super) fn lead(
        &mut self,
        core: &mut Core,
        resp: &JoinGroupResponse,
        deadline: Instant,
    ) -> Result<Vec<SyncGroupRequestAssignment>> {
        let assignor =
            chosen_assignor(&core.config.assignors, resp.protocol_name.as_deref()).ok_or_else(|| {
                Error::Group {
                    group: core.config.group_id.clone(),
                    code: KafkaCode::InconsistentGroupProtocol,
                    during: "assigning partitions",
                }
            })?;
        let members = member_subscriptions(&resp.members, |member_id, e| {
            log::warn!(
                "{}: member {member_id} sent unreadable metadata ({e}); it gets nothing",
                core.ctx()
            )
        });
        let topics = subscribed_topics(&members);
        let partitions = self.partition_counts(core, topics.iter().map(String::as_str), deadline)?;
        if resp.skip_assignment {
            log::info!(
                "{}: leader rejoined with skip_assignment; checking that the group's assignment covers the subscribed topics",
                core.ctx()
            );
            core.metrics.skipped_assignment();
            // Unchecked until the group's assignment is read: the partition counts at our
            // rejoin say nothing about what the assignment was made for.
            self.leader_snapshot = Some(LeaderSnapshot { topics, counts: None });
            self.check_kept_assignment(core, &partitions);
            return Ok(Vec::new());
        }
        self.leader_snapshot = Some(LeaderSnapshot {
            topics,
            counts: Some(partitions.clone()),
        });
        Ok(sync_assignments(assignor.assign(&members, &partitions)))
    }

    /// Partition counts of `topics` (each asked for once, however often it is named) that exist,
    /// looked up by `deadline` (or within one `MIN_LOOKUP` when less is left, so that a poll
    /// with no time to spare still gets one lookup of a useful length, as for the coordinator).
    pub(super) fn partition_counts<'a>(
        &self,
        core: &Core,
        topics: impl IntoIterator<Item = &'a str>,
        deadline: Instant,
    ) -> Result<BTreeMap<String, i32>> {
        let topics: Vec<&str> = topics.into_iter().collect::<BTreeSet<_>>().into_iter().collect();
        if topics.is_empty() {
            return Ok(BTreeMap::new());
        }
        let meta = core
            .client
            .refresh_metadata_by(Some(&topics), lookup_deadline(deadline))?;
        partition_counts_in(&meta, &topics)
    }
}

/// The partition count of each of `topics` in `meta` that has partitions: a topic missing, in
/// error or without partitions is left out (nobody can be assigned any of it). A topic the
/// principal may not describe is an error instead: leaving it out silently would have the
/// consumer wait for its records forever.
fn partition_counts_in(meta: &Metadata, topics: &[&str]) -> Result<BTreeMap<String, i32>> {
    if let Some(e) = topics.iter().find_map(|t| topic_denied(meta, t)) {
        return Err(e);
    }
    Ok(topics
        .iter()
        .filter_map(|t| meta.topics.get(*t))
        .filter(|t| !t.error.is_error() && !t.partitions.is_empty())
        .map(|t| (t.name.clone(), t.partitions.len() as i32))
        .collect())
}

/// The assignor named by the protocol the coordinator chose (one of ours, since the group only
/// picks a protocol every member offered); `None` if it is none of them.
fn chosen_assignor(assignors: &[Arc<dyn Assignor>], protocol: Option<&str>) -> Option<Arc<dyn Assignor>> {
    let protocol = protocol.unwrap_or_default();
    assignors.iter().find(|a| a.name() == protocol).cloned()
}

/// Each member's subscription from the JoinGroup answer. A member whose metadata does not
/// decode (another client's bug, a newer format gone wrong) is kept with an empty subscription,
/// so it gets nothing rather than stopping the whole group; `unreadable` hears about it.
fn member_subscriptions(
    members: &[JoinGroupResponseMember],
    mut unreadable: impl FnMut(&str, DecodeError),
) -> Vec<MemberSubscription> {
    members
        .iter()
        .map(|m| MemberSubscription {
            member_id: m.member_id.clone().into(),
            group_instance_id: m.group_instance_id.clone().map(Into::into),
            subscription: Subscription::decode(&m.metadata).unwrap_or_else(|e| {
                unreadable(&m.member_id, e);
                Subscription::default()
            }),
        })
        .collect()
}

/// Every topic any member subscribed to, each once: the leader assigns, and then watches, all
/// of them, not only its own.
fn subscribed_topics(members: &[MemberSubscription]) -> BTreeSet<String> {
    members
        .iter()
        .flat_map(|m| m.subscription.topics.iter().cloned())
        .collect()
}

/// What the leader's SyncGroup carries: each member's assignment, encoded.
fn sync_assignments(assigned: BTreeMap<String, Assignment>) -> Vec<SyncGroupRequestAssignment> {
    assigned
        .into_iter()
        .map(|(member_id, a)| SyncGroupRequestAssignment {
            member_id: member_id.into(),
            assignment: a.encode(),
            ..Default::default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{PartitionMetadata, TopicMetadata};
    use crate::group::{RangeAssignor, RoundRobinAssignor};
    use crate::protocol::Uuid;
    use bytes::Bytes;

    fn member(id: &str, instance: Option<&str>, metadata: Bytes) -> JoinGroupResponseMember {
        JoinGroupResponseMember {
            member_id: id.into(),
            group_instance_id: instance.map(Into::into),
            metadata,
            ..Default::default()
        }
    }

    fn subscribing(topics: &[&str]) -> Bytes {
        Subscription {
            topics: topics.iter().map(ToString::to_string).collect(),
            ..Default::default()
        }
        .encode()
    }

    fn topic(name: &str, error: KafkaCode, partitions: i32) -> Arc<TopicMetadata> {
        Arc::new(TopicMetadata {
            name: name.into(),
            id: Uuid::NIL,
            error,
            internal: false,
            partitions: (0..partitions)
                .map(|p| PartitionMetadata {
                    partition: p,
                    leader: 1,
                    leader_epoch: 0,
                    replicas: Arc::from([1]),
                    isr: Arc::from([1]),
                    error: KafkaCode::None,
                })
                .collect(),
        })
    }

    fn metadata(topics: &[Arc<TopicMetadata>]) -> Metadata {
        Metadata {
            topics: topics.iter().map(|t| (t.name.clone(), t.clone())).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn only_topics_with_partitions_are_counted() {
        let meta = metadata(&[
            topic("a", KafkaCode::None, 3),
            topic("b", KafkaCode::None, 1),
            topic("empty", KafkaCode::None, 0),
            topic("gone", KafkaCode::UnknownTopicOrPartition, 0),
            topic("electing", KafkaCode::LeaderNotAvailable, 2),
        ]);
        let counts = partition_counts_in(&meta, &["a", "b", "empty", "gone", "electing", "unasked"]).unwrap();
        assert_eq!(
            counts,
            BTreeMap::from([("a".to_string(), 3), ("b".to_string(), 1)])
        );
        assert!(partition_counts_in(&meta, &[]).unwrap().is_empty());
    }

    #[test]
    fn a_topic_the_principal_may_not_describe_is_an_error() {
        let meta = metadata(&[
            topic("a", KafkaCode::None, 3),
            topic("secret", KafkaCode::TopicAuthorizationFailed, 0),
        ]);
        let e = partition_counts_in(&meta, &["a", "secret"]).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Authorization {
                    code: KafkaCode::TopicAuthorizationFailed,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn the_assignor_is_the_one_the_group_chose() {
        let ours: Vec<Arc<dyn Assignor>> = vec![Arc::new(RangeAssignor), Arc::new(RoundRobinAssignor)];
        let name = |p| chosen_assignor(&ours, p).map(|a| a.name());
        assert_eq!(name(Some("roundrobin")), Some("roundrobin"));
        assert_eq!(name(Some("range")), Some("range"));
        assert_eq!(name(Some("cooperative-sticky")), None);
        assert_eq!(name(None), None);
    }

    #[test]
    fn subscriptions_are_read_and_an_unreadable_one_gets_nothing() {
        let members = [
            member("a", Some("worker-a"), subscribing(&["t1", "t2"])),
            member("b", None, Bytes::from_static(b"\xff")),
            member("c", None, subscribing(&["t2", "t3"])),
        ];
        let mut unreadable = Vec::new();
        let subs = member_subscriptions(&members, |id, _| unreadable.push(id.to_string()));
        assert_eq!(unreadable, ["b"]);
        let ids: Vec<_> = subs
            .iter()
            .map(|m| (m.member_id.as_str(), m.group_instance_id.as_deref()))
            .collect();
        assert_eq!(ids, [("a", Some("worker-a")), ("b", None), ("c", None)]);
        assert_eq!(subs[0].subscription.topics, ["t1", "t2"]);
        assert!(subs[1].subscription.topics.is_empty());
        // Every member's topics, each once.
        let topics: Vec<_> = subscribed_topics(&subs).into_iter().collect();
        assert_eq!(topics, ["t1", "t2", "t3"]);
    }

    #[test]
    fn the_sync_request_carries_each_assignment_encoded() {
        let mut assigned = BTreeMap::new();
        let a = Assignment {
            partitions: BTreeMap::from([("t".to_string(), vec![0, 1])]),
            user_data: None,
        };
        assigned.insert("a".to_string(), a.clone());
        assigned.insert("b".to_string(), Assignment::default());
        let sync = sync_assignments(assigned);
        assert_eq!(sync.len(), 2);
        assert_eq!(sync[0].member_id, "a");
        assert_eq!(Assignment::decode(&sync[0].assignment).unwrap(), a);
        assert_eq!(sync[1].member_id, "b");
        assert!(Assignment::decode(&sync[1].assignment).unwrap().is_empty());
    }
}
