//! The sticky balance shared by the `sticky` and `cooperative-sticky` assignors (KIP-54,
//! KIP-429): a balanced assignment that keeps as many partitions as it can where they were.
//!
//! Pure: members, what each claims to own (and from which generation), partition counts in;
//! the new ownership out. The two assignors differ only in where the claims come from (user
//! data or the subscription's owned partitions) and in what the cooperative one withholds.

use super::MemberSubscription;
use crate::group::TopicPartition;
use std::collections::{BTreeMap, BTreeSet};

/// What a member says it owned going into this rebalance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Claim {
    /// The partitions.
    pub(crate) partitions: Vec<TopicPartition>,
    /// The generation they were assigned in; `None` when the member did not say (a first
    /// join, an older client), which loses to any generation.
    pub(crate) generation: Option<i32>,
}

/// Member id → partitions: a balanced assignment of every partition of `partitions` that some
/// member subscribes to, each to exactly one subscriber, keeping where it can the ownership
/// [`owners`] resolved from the members' claims.
///
/// 1. **Owners** keep their partitions to start with.
/// 2. **Unclaimed partitions** go one by one, those with the fewest possible owners first, to
///    the subscriber that has the fewest partitions (ties: the assignors' order).
/// 3. **Balance.** While a member has at least two partitions more than another member that
///    subscribes to one of its partitions' topics, one such partition moves — preferring one
///    the giver did not own before this rebalance. Each move lowers the sum of squared counts,
///    so this ends; with equal subscriptions counts then differ by at most one.
///
/// Deterministic: the same input gives the same output, whichever member leads.
pub(crate) fn balance(
    members: &[&MemberSubscription],
    owner: &BTreeMap<TopicPartition, String>,
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, Vec<TopicPartition>> {
    // Index of each member in the assignors' order; everything below works on indices.
    let n = members.len();
    let subscribes = |m: usize, topic: &str| members[m].subscribes(topic);
    let universe: BTreeSet<TopicPartition> = partitions
        .iter()
        .filter(|(t, _)| (0..n).any(|m| subscribes(m, t)))
        .flat_map(|(t, &count)| (0..count.max(0)).map(move |p| TopicPartition::new(t.clone(), p)))
        .collect();

    // 1. Owners.
    let index: BTreeMap<&str, usize> = (0..n).map(|m| (members[m].member_id.as_str(), m)).collect();
    let mut held: Vec<BTreeSet<TopicPartition>> = vec![BTreeSet::new(); n];
    for (tp, m) in owner {
        held[index[m.as_str()]].insert(tp.clone());
    }
    let before = held.clone();

    // 2. Unclaimed partitions, the most constrained first.
    let mut unclaimed: Vec<(usize, &TopicPartition)> = universe
        .iter()
        .filter(|tp| !owner.contains_key(*tp))
        .map(|tp| ((0..n).filter(|&m| subscribes(m, &tp.topic)).count(), tp))
        .collect();
    unclaimed.sort();
    for (_, tp) in unclaimed {
        let to = (0..n)
            .filter(|&m| subscribes(m, &tp.topic))
            .min_by_key(|&m| (held[m].len(), m));
        if let Some(to) = to {
            held[to].insert(tp.clone());
        }
    }

    // 3. Balance by single moves from the fullest giver to the emptiest taker.
    loop {
        let mut best: Option<(usize, usize, TopicPartition)> = None;
        let mut givers: Vec<usize> = (0..n).collect();
        givers.sort_by_key(|&m| (std::cmp::Reverse(held[m].len()), m));
        'givers: for &from in &givers {
            // Partitions this giver got in this rebalance move first: keeping what it owned
            // is the point of being sticky.
            let mut candidates: Vec<&TopicPartition> = held[from].iter().collect();
            candidates.sort_by_key(|tp| (before[from].contains(*tp), (*tp).clone()));
            for tp in candidates {
                let to = (0..n)
                    .filter(|&m| m != from && subscribes(m, &tp.topic))
                    .filter(|&m| held[m].len() + 2 <= held[from].len())
                    .min_by_key(|&m| (held[m].len(), m));
                if let Some(to) = to {
                    best = Some((from, to, tp.clone()));
                    break 'givers;
                }
            }
        }
        let Some((from, to, tp)) = best else {
            break;
        };
        held[from].remove(&tp);
        held[to].insert(tp);
    }

    (0..n)
        .map(|m| (members[m].member_id.clone(), held[m].iter().cloned().collect()))
        .collect()
}

/// The cooperative adjustment (KIP-429): a partition moving from one member to another is
/// withheld from its new owner in this generation, so that the old owner revokes it first;
/// the old owner, seeing it gone, rejoins, and the next generation hands it over. A contested
/// partition (two claimants of one generation) is withheld from everyone, both claimants
/// revoking it. Returns how many partitions were withheld.
pub(crate) fn withhold_moving(
    assignment: &mut BTreeMap<String, Vec<TopicPartition>>,
    owners_before: &BTreeMap<TopicPartition, String>,
    contested: &BTreeSet<TopicPartition>,
) -> usize {
    let mut withheld = 0;
    for (member, tps) in assignment.iter_mut() {
        let keep = tps.len();
        tps.retain(|tp| !contested.contains(tp) && owners_before.get(tp).map_or(true, |was| was == member));
        withheld += keep - tps.len();
    }
    withheld
}

/// Who owned each partition going into the rebalance, from the members' claims: a claimed
/// partition is its claimant's if it still exists and the claimant still subscribes to its
/// topic. Two members claiming one partition (a member that missed a generation and still
/// believes it owns what moved): the newer generation wins; at the same generation neither
/// keeps it (as in Java's assignor: which of them is right cannot be told, and both must give
/// it up before anyone gets it). Returns the owners, and those contested partitions.
pub(crate) fn owners(
    members: &[&MemberSubscription],
    claims: &BTreeMap<String, Claim>,
    partitions: &BTreeMap<String, i32>,
) -> (BTreeMap<TopicPartition, String>, BTreeSet<TopicPartition>) {
    let mut best: BTreeMap<TopicPartition, (Option<i32>, &str)> = BTreeMap::new();
    let mut contested: BTreeMap<TopicPartition, Option<i32>> = BTreeMap::new();
    for member in members {
        let Some(claim) = claims.get(&member.member_id) else {
            continue;
        };
        for tp in &claim.partitions {
            let exists = partitions
                .get(&tp.topic)
                .is_some_and(|&c| tp.partition >= 0 && tp.partition < c);
            if !exists || !member.subscribes(&tp.topic) {
                continue;
            }
            match best.get(tp) {
                Some((g, other)) if *g == claim.generation && *other != member.member_id => {
                    contested.insert(tp.clone(), *g);
                }
                Some((g, _)) if *g >= claim.generation => {}
                _ => {
                    best.insert(tp.clone(), (claim.generation, &member.member_id));
                }
            }
        }
    }
    // A tie only counts if nobody newer claims the partition.
    contested.retain(|tp, g| best.get(tp).is_some_and(|(b, _)| b == g));
    let owner = best
        .into_iter()
        .filter(|(tp, _)| !contested.contains_key(tp))
        .map(|(tp, (_, m))| (tp, m.to_string()))
        .collect();
    (owner, contested.into_keys().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::assignment::Subscription;

    fn member(id: &str, topics: &[&str]) -> MemberSubscription {
        MemberSubscription {
            member_id: id.into(),
            group_instance_id: None,
            subscription: Subscription {
                topics: topics.iter().map(|t| t.to_string()).collect(),
                ..Default::default()
            },
        }
    }

    /// `balance` of the ownership `owners` resolves from `claims`, as both assignors run it.
    fn claimed(
        members: &[&MemberSubscription],
        claims: &BTreeMap<String, Claim>,
        partitions: &BTreeMap<String, i32>,
    ) -> BTreeMap<String, Vec<TopicPartition>> {
        balance(members, &owners(members, claims, partitions).0, partitions)
    }

    fn tp(t: &str, p: i32) -> TopicPartition {
        TopicPartition::new(t, p)
    }

    fn claim(gen: i32, tps: &[(&str, i32)]) -> Claim {
        Claim {
            partitions: tps.iter().map(|(t, p)| tp(t, *p)).collect(),
            generation: Some(gen),
        }
    }

    fn counts(a: &BTreeMap<String, Vec<TopicPartition>>) -> Vec<usize> {
        a.values().map(Vec::len).collect()
    }

    /// Every partition of the subscribed topics exactly once, each to a subscriber.
    fn check_complete(
        members: &[MemberSubscription],
        a: &BTreeMap<String, Vec<TopicPartition>>,
        partitions: &BTreeMap<String, i32>,
    ) {
        let mut seen = BTreeSet::new();
        for m in members {
            for tp in &a[&m.member_id] {
                assert!(
                    m.subscription.topics.contains(&tp.topic),
                    "{tp} to {}",
                    m.member_id
                );
                assert!(seen.insert(tp.clone()), "{tp} twice");
            }
        }
        let subscribed: BTreeSet<&String> = members.iter().flat_map(|m| &m.subscription.topics).collect();
        let expect: usize = partitions
            .iter()
            .filter(|(t, _)| subscribed.contains(t))
            .map(|(_, c)| *c as usize)
            .sum();
        assert_eq!(seen.len(), expect);
    }

    #[test]
    fn a_first_assignment_is_balanced_and_complete() {
        let ms: Vec<_> = (0..3).map(|i| member(&format!("m{i}"), &["a", "b"])).collect();
        let refs: Vec<_> = ms.iter().collect();
        let p = BTreeMap::from([("a".to_string(), 5), ("b".to_string(), 3)]);
        let a = claimed(&refs, &BTreeMap::new(), &p);
        check_complete(&ms, &a, &p);
        let mut c = counts(&a);
        c.sort();
        assert_eq!(c, vec![2, 3, 3]);
    }

    #[test]
    fn a_new_member_takes_only_what_balance_needs_and_the_rest_stays() {
        // 3 members with 2 of 6 partitions each; a fourth joins: two partitions move to it,
        // one from each of two members, and nothing else changes hands.
        let ms: Vec<_> = (0..4).map(|i| member(&format!("m{i}"), &["t"])).collect();
        let refs: Vec<_> = ms.iter().collect();
        let p = BTreeMap::from([("t".to_string(), 6)]);
        let claims = BTreeMap::from([
            ("m0".to_string(), claim(3, &[("t", 0), ("t", 1)])),
            ("m1".to_string(), claim(3, &[("t", 2), ("t", 3)])),
            ("m2".to_string(), claim(3, &[("t", 4), ("t", 5)])),
        ]);
        let a = claimed(&refs, &claims, &p);
        check_complete(&ms, &a, &p);
        assert!(!a["m3"].is_empty());
        let mut moved = 0;
        for (m, c) in &claims {
            moved += c.partitions.iter().filter(|tp| !a[m].contains(tp)).count();
        }
        assert_eq!(moved, a["m3"].len(), "only the new member's partitions moved");
        let mut c = counts(&a);
        c.sort();
        assert_eq!(c, vec![1, 1, 2, 2]);
    }

    #[test]
    fn a_member_leaving_spreads_only_its_partitions() {
        let ms: Vec<_> = (0..2).map(|i| member(&format!("m{i}"), &["t"])).collect();
        let refs: Vec<_> = ms.iter().collect();
        let p = BTreeMap::from([("t".to_string(), 6)]);
        let claims = BTreeMap::from([
            ("m0".to_string(), claim(4, &[("t", 0), ("t", 1)])),
            ("m1".to_string(), claim(4, &[("t", 2), ("t", 3)])),
            // m2 left, owning 4 and 5.
        ]);
        let a = claimed(&refs, &claims, &p);
        check_complete(&ms, &a, &p);
        assert!(a["m0"].starts_with(&[tp("t", 0), tp("t", 1)]));
        assert!(a["m1"].starts_with(&[tp("t", 2), tp("t", 3)]));
        assert_eq!(counts(&a), vec![3, 3]);
    }

    #[test]
    fn the_same_input_gives_the_same_assignment() {
        let ms: Vec<_> = (0..5)
            .map(|i| member(&format!("m{i}"), &["a", "b", "c"]))
            .collect();
        let refs: Vec<_> = ms.iter().collect();
        let p = BTreeMap::from([("a".to_string(), 7), ("b".to_string(), 4), ("c".to_string(), 9)]);
        let claims = BTreeMap::from([("m2".to_string(), claim(1, &[("a", 3), ("c", 8)]))]);
        assert_eq!(claimed(&refs, &claims, &p), claimed(&refs, &claims, &p));
    }

    #[test]
    fn a_stale_claim_loses_to_a_newer_generation_and_equal_ones_to_the_order() {
        let ms: Vec<_> = (0..3).map(|i| member(&format!("m{i}"), &["t"])).collect();
        let refs: Vec<_> = ms.iter().collect();
        let p = BTreeMap::from([("t".to_string(), 3)]);
        // m0 missed a generation and still claims t-0, which m1 got in generation 5; m1 and
        // m2 both claim t-2 at generation 5.
        let claims = BTreeMap::from([
            ("m0".to_string(), claim(4, &[("t", 0)])),
            ("m1".to_string(), claim(5, &[("t", 0), ("t", 2)])),
            ("m2".to_string(), claim(5, &[("t", 2)])),
        ]);
        let (owners, contested) = owners(&refs, &claims, &p);
        assert_eq!(owners[&tp("t", 0)], "m1", "the newer generation wins");
        assert!(!owners.contains_key(&tp("t", 2)), "a tie gives it to neither");
        assert_eq!(contested, BTreeSet::from([tp("t", 2)]));
        let a = claimed(&refs, &claims, &p);
        check_complete(&ms, &a, &p);
        assert_eq!(a["m1"], [tp("t", 0)], "{a:?}");
        assert_eq!(counts(&a), vec![1, 1, 1]);
        // Cooperative: the contested partition goes to nobody this generation.
        let mut coop = a.clone();
        withhold_moving(&mut coop, &owners, &contested);
        assert!(coop.values().all(|v| !v.contains(&tp("t", 2))), "{coop:?}");
    }

    #[test]
    fn claims_of_deleted_partitions_or_unsubscribed_topics_are_dropped() {
        let ms = [member("m0", &["t"]), member("m1", &["t", "u"])];
        let refs: Vec<_> = ms.iter().collect();
        let p = BTreeMap::from([("t".to_string(), 2), ("u".to_string(), 2)]);
        let claims = BTreeMap::from([("m0".to_string(), claim(2, &[("t", 5), ("u", 0), ("t", 1)]))]);
        let (owners, _) = owners(&refs, &claims, &p);
        assert_eq!(owners.keys().cloned().collect::<Vec<_>>(), vec![tp("t", 1)]);
        let a = claimed(&refs, &claims, &p);
        check_complete(&ms, &a, &p);
        assert!(a["m0"].contains(&tp("t", 1)));
    }

    #[test]
    fn unequal_subscriptions_are_balanced_where_members_can_take_partitions() {
        // m0 alone reads x (4 partitions); y (4) is shared: m1 and m2 take y, m0 keeps x.
        let ms = [
            member("m0", &["x", "y"]),
            member("m1", &["y"]),
            member("m2", &["y"]),
        ];
        let refs: Vec<_> = ms.iter().collect();
        let p = BTreeMap::from([("x".to_string(), 4), ("y".to_string(), 4)]);
        let a = claimed(&refs, &BTreeMap::new(), &p);
        check_complete(&ms, &a, &p);
        assert_eq!(a["m0"].iter().filter(|tp| tp.topic == "x").count(), 4);
        assert_eq!(a["m1"].len() + a["m2"].len(), 4);
        assert!(a["m1"].len().abs_diff(a["m2"].len()) <= 1);
        // No member has two more than another that could take one of its partitions.
        for (i, g) in ms.iter().enumerate() {
            for (j, t) in ms.iter().enumerate() {
                let takeable = a[&g.member_id]
                    .iter()
                    .any(|tp| t.subscription.topics.contains(&tp.topic));
                if i != j && takeable {
                    assert!(a[&g.member_id].len() < a[&t.member_id].len() + 2, "{a:?}");
                }
            }
        }
    }

    #[test]
    fn any_mix_is_complete_and_balanced_under_equal_subscriptions() {
        // A deterministic sweep: members 1..6, partitions 0..13, random-ish claims.
        for n in 1..6usize {
            for count in 0..13i32 {
                let ms: Vec<_> = (0..n).map(|i| member(&format!("m{i}"), &["t"])).collect();
                let refs: Vec<_> = ms.iter().collect();
                let p = BTreeMap::from([("t".to_string(), count)]);
                let claims: BTreeMap<String, Claim> = (0..n)
                    .map(|i| {
                        let tps: Vec<(&str, i32)> = (0..count + 3)
                            .filter(|p| (p * 7 + i as i32 * 3) % 5 < 2)
                            .map(|p| ("t", p))
                            .collect();
                        (format!("m{i}"), claim((i % 2) as i32, &tps))
                    })
                    .collect();
                let a = claimed(&refs, &claims, &p);
                check_complete(&ms, &a, &p);
                let c = counts(&a);
                let (lo, hi) = (c.iter().min().unwrap(), c.iter().max().unwrap());
                assert!(hi - lo <= 1, "{n} members, {count} partitions: {c:?}");
                // Sticky: every member keeps min(its valid claims, its share) at least.
                let (owners, _) = owners(&refs, &claims, &p);
                for (i, m) in ms.iter().enumerate() {
                    let mine = owners.values().filter(|o| **o == m.member_id).count();
                    let kept = a[&m.member_id]
                        .iter()
                        .filter(|tp| owners.get(*tp) == Some(&m.member_id))
                        .count();
                    assert!(
                        kept >= mine.min(*lo),
                        "{n}/{count}: member {i} kept {kept} of {mine}"
                    );
                }
            }
        }
    }

    #[test]
    fn moving_partitions_are_withheld_from_their_new_owner_for_one_generation() {
        let mut a = BTreeMap::from([
            ("m0".to_string(), vec![tp("t", 0)]),
            ("m1".to_string(), vec![tp("t", 1), tp("t", 2)]),
        ]);
        // t-2 was m0's: m1 gets it only in the next generation; t-1 was nobody's.
        let before = BTreeMap::from([(tp("t", 0), "m0".to_string()), (tp("t", 2), "m0".to_string())]);
        assert_eq!(withhold_moving(&mut a, &before, &BTreeSet::new()), 1);
        assert_eq!(a["m0"], vec![tp("t", 0)]);
        assert_eq!(a["m1"], vec![tp("t", 1)]);
    }
}
