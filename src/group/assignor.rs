//! Partition assignors run by the group leader: `range` and `roundrobin`, computing the same
//! assignments as Kafka's Java assignors of those names so that mixed groups agree.

use super::assignment::{Assignment, Subscription};
use std::collections::BTreeMap;
use std::fmt;

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

/// Computes assignments for a generation.
pub trait Assignor: Send + Sync + fmt::Debug {
    /// The protocol name sent in JoinGroup (`range`, `roundrobin`).
    fn name(&self) -> &'static str;

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
        for assignor in [&RangeAssignor as &dyn Assignor, &RoundRobinAssignor] {
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
    fn members_only_get_subscribed_topics() {
        let ms = [member("a", None, &["x"]), member("b", None, &["y"])];
        let p = BTreeMap::from([("x".to_string(), 2), ("y".to_string(), 2)]);
        for assignor in [&RangeAssignor as &dyn Assignor, &RoundRobinAssignor] {
            let a = assignor.assign(&ms, &p);
            assert_eq!(a["a"].partitions.keys().collect::<Vec<_>>(), vec!["x"]);
            assert_eq!(a["b"].partitions.keys().collect::<Vec<_>>(), vec!["y"]);
        }
    }
}
