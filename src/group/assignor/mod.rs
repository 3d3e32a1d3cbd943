//! Partition assignors run by the group leader: `range`, `roundrobin`, `sticky` and
//! `cooperative-sticky`, interoperable with Kafka's Java assignors of those names so that mixed
//! groups agree. The sticky balance itself is in `sticky.rs`; the subscription user data the
//! sticky assignors exchange in `user_data.rs`.

use super::assignment::{Assignment, Subscription};
use crate::group::TopicPartition;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::fmt;

mod sticky;
mod user_data;

/// A member as an assignor sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSubscription {
    /// Member id.
    pub member_id: String,
    /// `group.instance.id` of static members.
    pub group_instance_id: Option<String>,
    /// What it subscribed to.
    pub subscription: Subscription,
}

impl MemberSubscription {
    /// Whether the member subscribed to `topic`.
    fn subscribes(&self, topic: &str) -> bool {
        self.subscription.topics.iter().any(|t| t == topic)
    }

    /// The order Kafka's assignors use: static members by instance id (stable across
    /// restarts, which is what keeps a restarted static member on its partitions), then
    /// dynamic ones by member id.
    fn sort_key(&self) -> (bool, &str) {
        match &self.group_instance_id {
            Some(i) => (false, i.as_str()),
            None => (true, self.member_id.as_str()),
        }
    }
}

/// How the members of a group give up partitions when it rebalances (KIP-429).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RebalanceProtocol {
    /// Every member gives up all its partitions before it rejoins
    /// ([`GroupEvent::Revoked`](crate::GroupEvent::Revoked) with all of them), and gets its
    /// whole new assignment after the rebalance. Range, round-robin and sticky.
    Eager,
    /// Members keep their partitions, and keep fetching them, through the rebalance; each
    /// gives up only the partitions the new assignment moves away from it, and the group
    /// rebalances once more to hand those to their new owners (so a partition is never owned
    /// twice). `cooperative-sticky`.
    Cooperative,
}

/// Computes assignments for a generation.
///
/// A member uses the cooperative protocol when every assignor it offers supports it, and the
/// eager one otherwise (as Kafka's Java client does): offering `[cooperative-sticky, range]`
/// while a group moves from range to cooperative-sticky keeps it eager until the second
/// rolling restart drops range.
pub trait Assignor: Send + Sync + fmt::Debug {
    /// The protocol name sent in JoinGroup (`range`, `roundrobin`, `sticky`,
    /// `cooperative-sticky`).
    fn name(&self) -> &'static str;

    /// The rebalance protocol this assignor's assignments are made for. Default: eager. A
    /// cooperative assignor must not give a partition to a member while another member owns
    /// it ([`Subscription::owned`]); it hands it over in the next generation instead.
    fn rebalance_protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Eager
    }

    /// The assignor-specific bytes ([`Subscription::user_data`]) this member sends when it
    /// joins, given the assignment it last received and that assignment's generation (`None`
    /// before its first). Default: none.
    fn subscription_user_data(&self, last: Option<(&Assignment, i32)>) -> Option<Bytes> {
        let _ = last;
        None
    }

    /// Member id → assignment, given each member's subscription and the partition count of
    /// every subscribed topic (topics missing from `partitions` are skipped).
    fn assign(
        &self,
        members: &[MemberSubscription],
        partitions: &BTreeMap<String, i32>,
    ) -> BTreeMap<String, Assignment>;
}

fn sorted(members: &[MemberSubscription]) -> Vec<&MemberSubscription> {
    let mut v: Vec<&MemberSubscription> = members.iter().collect();
    v.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    v
}

fn empty_for(members: &[MemberSubscription]) -> BTreeMap<String, Assignment> {
    members
        .iter()
        .map(|m| (m.member_id.clone(), Assignment::default()))
        .collect()
}

/// `member`'s partitions of `topic` in `out`, created empty if missing.
fn partitions_of<'a>(
    out: &'a mut BTreeMap<String, Assignment>,
    member: &MemberSubscription,
    topic: &str,
) -> &'a mut Vec<i32> {
    out.entry(member.member_id.clone())
        .or_default()
        .partitions
        .entry(topic.to_string())
        .or_default()
}

/// Kafka's `RangeAssignor`: per topic, consecutive ranges of partitions to the subscribed
/// members in order, the first `partitions % members` getting one extra.
#[derive(Debug, Clone, Copy, Default)]
pub struct RangeAssignor;

impl Assignor for RangeAssignor {
    fn name(&self) -> &'static str {
        "range"
    }

    fn assign(
        &self,
        members: &[MemberSubscription],
        partitions: &BTreeMap<String, i32>,
    ) -> BTreeMap<String, Assignment> {
        let mut out = empty_for(members);
        let order = sorted(members);
        for (topic, &count) in partitions {
            let subs: Vec<&MemberSubscription> =
                order.iter().copied().filter(|m| m.subscribes(topic)).collect();
            if subs.is_empty() || count <= 0 {
                continue;
            }
            let n = subs.len() as i32;
            let (per, extra) = (count / n, count % n);
            for (i, m) in subs.iter().enumerate() {
                let i = i as i32;
                let start = per * i + i.min(extra);
                let len = per + i32::from(i < extra);
                if len > 0 {
                    partitions_of(&mut out, m, topic).extend(start..start + len);
                }
            }
        }
        out
    }
}

/// Kafka's `RoundRobinAssignor`: all partitions sorted by topic and index, dealt one by one
/// to the members in order, skipping members not subscribed to the partition's topic.
#[derive(Debug, Clone, Copy, Default)]
pub struct RoundRobinAssignor;

impl Assignor for RoundRobinAssignor {
    fn name(&self) -> &'static str {
        "roundrobin"
    }

    fn assign(
        &self,
        members: &[MemberSubscription],
        partitions: &BTreeMap<String, i32>,
    ) -> BTreeMap<String, Assignment> {
        let mut out = empty_for(members);
        let order = sorted(members);
        if order.is_empty() {
            return out;
        }
        let mut next = 0usize;
        for (topic, &count) in partitions {
            for p in 0..count.max(0) {
                // Find the next member (cyclically) subscribed to this topic.
                for step in 0..order.len() {
                    let m = order[(next + step) % order.len()];
                    if m.subscribes(topic) {
                        partitions_of(&mut out, m, topic).push(p);
                        next = (next + step + 1) % order.len();
                        break;
                    }
                }
            }
        }
        out
    }
}

/// The rebalance protocol of a member offering `assignors`: cooperative only if every one of
/// them is (Java's `ConsumerCoordinator` picks the protocol all of them support).
pub(crate) fn common_protocol(assignors: &[std::sync::Arc<dyn Assignor>]) -> RebalanceProtocol {
    assignors
        .iter()
        .map(|a| a.rebalance_protocol())
        .min()
        .unwrap_or(RebalanceProtocol::Eager)
}

/// Kafka's `StickyAssignor` (KIP-54), eager: a balanced assignment that moves as few
/// partitions as it can. Each member sends its last assignment and generation in its
/// subscription's user data (Java's `StickyAssignorUserData` v1), which is what the leader
/// keeps partitions by; members of a newer generation win conflicting claims.
#[derive(Debug, Clone, Copy, Default)]
pub struct StickyAssignor;

impl Assignor for StickyAssignor {
    fn name(&self) -> &'static str {
        "sticky"
    }

    fn subscription_user_data(&self, last: Option<(&Assignment, i32)>) -> Option<Bytes> {
        let (assignment, generation) = last?;
        Some(user_data::encode_sticky(
            &assignment.topic_partitions(),
            generation,
        ))
    }

    fn assign(
        &self,
        members: &[MemberSubscription],
        partitions: &BTreeMap<String, i32>,
    ) -> BTreeMap<String, Assignment> {
        let order = sorted(members);
        let claims = claims(members, user_data::sticky_claim);
        let (owners, _) = sticky::owners(&order, &claims, partitions);
        into_assignments(members, sticky::balance(&order, &owners, partitions))
    }
}

/// Kafka's `CooperativeStickyAssignor` (KIP-429): the sticky balance under the cooperative
/// protocol. Members say what they own in the subscription itself (owned partitions, and the
/// generation from ConsumerProtocol v2, also sent as 4 bytes of user data for older
/// readers); a partition that moves is withheld from its new owner for one generation, while
/// its old owner revokes it, and the follow-up rebalance hands it over.
#[derive(Debug, Clone, Copy, Default)]
pub struct CooperativeStickyAssignor;

impl Assignor for CooperativeStickyAssignor {
    fn name(&self) -> &'static str {
        "cooperative-sticky"
    }

    fn rebalance_protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Cooperative
    }

    fn subscription_user_data(&self, last: Option<(&Assignment, i32)>) -> Option<Bytes> {
        Some(user_data::encode_generation(last.map_or(-1, |(_, g)| g)))
    }

    fn assign(
        &self,
        members: &[MemberSubscription],
        partitions: &BTreeMap<String, i32>,
    ) -> BTreeMap<String, Assignment> {
        let order = sorted(members);
        let claims = claims(members, user_data::cooperative_claim);
        let (before, contested) = sticky::owners(&order, &claims, partitions);
        let mut balanced = sticky::balance(&order, &before, partitions);
        let withheld = sticky::withhold_moving(&mut balanced, &before, &contested);
        if withheld > 0 {
            log::debug!(
                "cooperative-sticky: {withheld} partition(s) move: revoked now, reassigned next generation"
            );
        }
        into_assignments(members, balanced)
    }
}

/// Member id → what the member claims to own, read from its subscription by `claim`.
fn claims(
    members: &[MemberSubscription],
    claim: fn(&Subscription) -> sticky::Claim,
) -> BTreeMap<String, sticky::Claim> {
    members
        .iter()
        .map(|m| (m.member_id.clone(), claim(&m.subscription)))
        .collect()
}

/// Member id → partitions as assignments, every member with an entry (an empty one if it gets
/// nothing).
fn into_assignments(
    members: &[MemberSubscription],
    balanced: BTreeMap<String, Vec<TopicPartition>>,
) -> BTreeMap<String, Assignment> {
    let mut out = empty_for(members);
    for (member, tps) in balanced {
        let a = out.entry(member).or_default();
        for tp in tps {
            a.partitions.entry(tp.topic).or_default().push(tp.partition);
        }
        for ps in a.partitions.values_mut() {
            ps.sort_unstable();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, instance: Option<&str>, topics: &[&str]) -> MemberSubscription {
        MemberSubscription {
            member_id: id.into(),
            group_instance_id: instance.map(String::from),
            subscription: Subscription {
                topics: topics.iter().map(|t| t.to_string()).collect(),
                ..Default::default()
            },
        }
    }

    fn parts(a: &BTreeMap<String, Assignment>, m: &str, t: &str) -> Vec<i32> {
        a[m].partitions.get(t).cloned().unwrap_or_default()
    }

    #[test]
    fn range_matches_kafka() {
        // Java's RangeAssignorTest: 2 consumers, 2 topics of 3 partitions.
        let ms = [
            member("c0", None, &["t1", "t2"]),
            member("c1", None, &["t1", "t2"]),
        ];
        let p = BTreeMap::from([("t1".to_string(), 3), ("t2".to_string(), 3)]);
        let a = RangeAssignor.assign(&ms, &p);
        assert_eq!(parts(&a, "c0", "t1"), vec![0, 1]);
        assert_eq!(parts(&a, "c1", "t1"), vec![2]);
        assert_eq!(parts(&a, "c0", "t2"), vec![0, 1]);
        assert_eq!(parts(&a, "c1", "t2"), vec![2]);
    }

    #[test]
    fn range_orders_static_members_by_instance_id() {
        // Member ids change on restart; instance ids do not, so the assignment must not move.
        let ms = [
            member("zzz", Some("a"), &["t"]),
            member("aaa", Some("b"), &["t"]),
            member("mmm", Some("c"), &["t"]),
        ];
        let p = BTreeMap::from([("t".to_string(), 6)]);
        let a = RangeAssignor.assign(&ms, &p);
        assert_eq!(parts(&a, "zzz", "t"), vec![0, 1]);
        assert_eq!(parts(&a, "aaa", "t"), vec![2, 3]);
        assert_eq!(parts(&a, "mmm", "t"), vec![4, 5]);
    }

    #[test]
    fn roundrobin_matches_kafka() {
        let ms = [
            member("c0", None, &["t1", "t2"]),
            member("c1", None, &["t1", "t2"]),
        ];
        let p = BTreeMap::from([("t1".to_string(), 3), ("t2".to_string(), 3)]);
        let a = RoundRobinAssignor.assign(&ms, &p);
        assert_eq!(parts(&a, "c0", "t1"), vec![0, 2]);
        assert_eq!(parts(&a, "c1", "t1"), vec![1]);
        assert_eq!(parts(&a, "c0", "t2"), vec![1]);
        assert_eq!(parts(&a, "c1", "t2"), vec![0, 2]);
    }

    #[test]
    fn every_partition_assigned_exactly_once() {
        for assignor in [
            &RangeAssignor as &dyn Assignor,
            &RoundRobinAssignor,
            &StickyAssignor,
            &CooperativeStickyAssignor,
        ] {
            for n in 1..6 {
                let ms: Vec<_> = (0..n)
                    .map(|i| member(&format!("m{i}"), None, &["a", "b"]))
                    .collect();
                let p = BTreeMap::from([("a".to_string(), 7), ("b".to_string(), 2), ("c".to_string(), 4)]);
                let a = assignor.assign(&ms, &p);
                let mut all: Vec<(String, i32)> = a
                    .values()
                    .flat_map(|x| x.topic_partitions())
                    .map(|tp| (tp.topic, tp.partition))
                    .collect();
                all.sort();
                let expect: Vec<(String, i32)> = (0..7)
                    .map(|i| ("a".into(), i))
                    .chain((0..2).map(|i| ("b".into(), i)))
                    .collect();
                assert_eq!(all, expect, "{} with {n} members", assignor.name());
                assert_eq!(a.len(), n, "every member gets an entry, even an empty one");
            }
        }
    }

    #[test]
    fn a_member_is_cooperative_only_if_every_assignor_it_offers_is() {
        use std::sync::Arc;
        let coop: Arc<dyn Assignor> = Arc::new(CooperativeStickyAssignor);
        let range: Arc<dyn Assignor> = Arc::new(RangeAssignor);
        assert_eq!(
            common_protocol(std::slice::from_ref(&coop)),
            RebalanceProtocol::Cooperative
        );
        assert_eq!(
            common_protocol(&[coop.clone(), range.clone()]),
            RebalanceProtocol::Eager
        );
        assert_eq!(common_protocol(&[range, coop]), RebalanceProtocol::Eager);
        assert_eq!(
            common_protocol(&[Arc::new(StickyAssignor)]),
            RebalanceProtocol::Eager
        );
    }

    #[test]
    fn the_sticky_assignors_keep_partitions_where_they_were() {
        // Three members own two partitions each; a fourth joins.
        let owned = |m: &str, ps: &[i32]| -> MemberSubscription {
            let mut s = member(m, None, &["t"]);
            let tps: Vec<TopicPartition> = ps.iter().map(|p| TopicPartition::new("t", *p)).collect();
            let mut a = Assignment::default();
            a.partitions.insert("t".into(), ps.to_vec());
            s.subscription.owned = tps;
            s.subscription.generation = Some(3);
            s.subscription.user_data = StickyAssignor.subscription_user_data(Some((&a, 3)));
            s
        };
        let ms = [
            owned("a", &[0, 1]),
            owned("b", &[2, 3]),
            owned("c", &[4, 5]),
            member("d", None, &["t"]),
        ];
        let p = BTreeMap::from([("t".to_string(), 6)]);

        // Eager sticky: the new member gets its share at once, and nothing else moves.
        let a = StickyAssignor.assign(&ms, &p);
        let moved: usize = ms[..3]
            .iter()
            .map(|m| {
                m.subscription
                    .owned
                    .iter()
                    .filter(|tp| !a[&m.member_id].topic_partitions().contains(tp))
                    .count()
            })
            .sum();
        assert_eq!(moved, a["d"].topic_partitions().len());
        assert!(moved >= 1);

        // Cooperative: the partitions that move are first revoked and given to nobody; the
        // next generation (their old owners no longer claiming them) hands them over.
        let first = CooperativeStickyAssignor.assign(&ms, &p);
        assert!(first["d"].is_empty(), "{first:?}");
        let kept: usize = first.values().map(|x| x.topic_partitions().len()).sum();
        assert_eq!(kept, 6 - moved);
        let next: Vec<MemberSubscription> = ms
            .iter()
            .map(|m| {
                let mut m = m.clone();
                m.subscription.owned = first[&m.member_id].topic_partitions();
                m.subscription.generation = Some(4);
                m
            })
            .collect();
        let second = CooperativeStickyAssignor.assign(&next, &p);
        assert_eq!(second["d"].topic_partitions().len(), moved);
        for m in &ms[..3] {
            assert_eq!(
                second[&m.member_id], first[&m.member_id],
                "{} keeps what it kept",
                m.member_id
            );
        }
    }

    #[test]
    fn members_only_get_subscribed_topics() {
        let ms = [member("a", None, &["x"]), member("b", None, &["y"])];
        let p = BTreeMap::from([("x".to_string(), 2), ("y".to_string(), 2)]);
        for assignor in [
            &RangeAssignor as &dyn Assignor,
            &RoundRobinAssignor,
            &StickyAssignor,
            &CooperativeStickyAssignor,
        ] {
            let a = assignor.assign(&ms, &p);
            assert_eq!(a["a"].partitions.keys().collect::<Vec<_>>(), vec!["x"]);
            assert_eq!(a["b"].partitions.keys().collect::<Vec<_>>(), vec!["y"]);
        }
    }
}
