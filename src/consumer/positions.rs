//! Where each assigned partition stands: the position handed to the application, the offset the
//! next fetch starts at, and the offset known to be committed. Pure: no I/O, unit-tested.
//!
//! Three offsets per partition, `committed <= position <= fetch_offset` in the usual case:
//! - `position`: the offset of the next record [`poll`](super::Consumer::poll) returns; what
//!   [`commit`](super::Consumer::commit) commits (the application has seen everything before).
//! - `fetch_offset`: where the next Fetch starts. Records between the two are buffered or in
//!   flight; the consumer fetches ahead from it within its buffer's byte bound.
//! - `committed`: the offset known to be committed (OffsetFetch at assignment, then each
//!   successful commit); a position equal to it is not committed again.
//! - `floor`: the lowest offset a commit may carry in this assignment (see
//!   [`Positions::check_commit`]): the committed offset at assignment, raised by each successful
//!   commit, lowered only by an explicit seek.

use crate::group::TopicPartition;
use std::collections::{BTreeMap, BTreeSet};

/// Why a partition has no position yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResetReason {
    /// Nothing is committed for the partition.
    NoCommittedOffset,
    /// The broker answered OFFSET_OUT_OF_RANGE for this fetch offset.
    OutOfRange(i64),
    /// The application asked for a position by ListOffsets timestamp (`seek_to_beginning`:
    /// -2, `seek_to_end`: -1, `seek_to_timestamp`: the time), looked up at the next poll.
    Requested(i64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Init {
    /// Assigned; the committed offset has not been asked for yet.
    AwaitingCommitted,
    /// Needs `auto.offset.reset` (or a seek).
    Reset(ResetReason),
    /// Has a position.
    Ready,
}

#[derive(Debug, Clone)]
struct PartitionState {
    init: Init,
    position: i64,
    fetch_offset: i64,
    /// Leader epoch of the batch of the last record handed out, committed with the position
    /// (OffsetCommit v6+) so that a later consumer can detect log truncation.
    epoch: Option<i32>,
    committed: Option<i64>,
    floor: Option<i64>,
    /// Records were handed to the application since the position was last committed.
    returned: bool,
}

impl PartitionState {
    fn new() -> Self {
        PartitionState {
            init: Init::AwaitingCommitted,
            position: -1,
            fetch_offset: -1,
            epoch: None,
            committed: None,
            floor: None,
            returned: false,
        }
    }

    fn ready_at(&mut self, offset: i64, epoch: Option<i32>) {
        self.init = Init::Ready;
        self.position = offset;
        self.fetch_offset = offset;
        self.epoch = epoch;
    }
}

/// What [`Positions::check_commit`] decided for a set of offsets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CommitCheck {
    /// Offsets to send.
    pub send: BTreeMap<TopicPartition, (i64, Option<i32>)>,
    /// Offsets below what is already committed: refused, as `(requested, committed)`.
    pub stale: BTreeMap<TopicPartition, (i64, i64)>,
}

/// The positions of the current assignment.
#[derive(Debug, Clone, Default)]
pub(crate) struct Positions {
    parts: BTreeMap<TopicPartition, PartitionState>,
    /// Set between a revocation and the next assignment: nothing is fetched, but the positions
    /// stay so that the application can still commit them with the old generation.
    revoked: bool,
    /// Partitions the application paused: not fetched, still assigned. Kept across a
    /// rebalance for the partitions that stay assigned.
    paused: BTreeSet<TopicPartition>,
    /// Partitions a cooperative rebalance revoked (the others stay): as `revoked` for them
    /// alone, until [`forget_revoked`](Self::forget_revoked) drops them.
    leaving: BTreeSet<TopicPartition>,
}

impl Positions {
    /// Replaces the assignment; every partition waits for its committed offset.
    pub fn assign(&mut self, partitions: &[TopicPartition]) {
        self.parts = partitions
            .iter()
            .map(|tp| (tp.clone(), PartitionState::new()))
            .collect();
        self.revoked = false;
        self.leaving.clear();
        let parts = &self.parts;
        self.paused.retain(|tp| parts.contains_key(tp));
    }

    /// Adds `partitions` to what a cooperative rebalance left assigned (after an eager
    /// revocation, replaces it as [`assign`](Self::assign) does); each new one waits for its
    /// committed offset, the others keep their positions.
    pub fn assign_more(&mut self, partitions: &[TopicPartition]) {
        if self.revoked {
            return self.assign(partitions);
        }
        for tp in partitions {
            self.leaving.remove(tp);
            self.parts.insert(tp.clone(), PartitionState::new());
        }
    }

    /// A cooperative rebalance revoked `partitions`, and only them: they are no longer fetched
    /// nor assigned, but keep their positions for a commit until
    /// [`forget_revoked`](Self::forget_revoked).
    pub fn revoke_some(&mut self, partitions: &[TopicPartition]) {
        self.leaving.extend(
            partitions
                .iter()
                .filter(|tp| self.parts.contains_key(*tp))
                .cloned(),
        );
    }

    /// Drops the partitions [`revoke_some`](Self::revoke_some) kept for a commit.
    pub fn forget_revoked(&mut self) {
        for tp in std::mem::take(&mut self.leaving) {
            self.parts.remove(&tp);
            self.paused.remove(&tp);
        }
    }

    /// Whether `tp` is assigned and neither revoked nor leaving (without checking that it is
    /// in `parts`).
    fn live(&self, tp: &TopicPartition) -> bool {
        !self.revoked && !self.leaving.contains(tp)
    }

    /// Pauses `tp`: it is not fetched until [`resume`](Self::resume)d, and the next fetch
    /// starts again at the position (what was fetched ahead is dropped by the caller). Returns
    /// false if `tp` is not assigned.
    pub fn pause(&mut self, tp: &TopicPartition) -> bool {
        if !self.is_assigned(tp) {
            return false;
        }
        if let Some(p) = self.parts.get_mut(tp) {
            if p.init == Init::Ready {
                p.fetch_offset = p.position;
            }
        }
        self.paused.insert(tp.clone());
        true
    }

    /// Resumes `tp`; false if it was not paused.
    pub fn resume(&mut self, tp: &TopicPartition) -> bool {
        self.paused.remove(tp)
    }

    /// Whether `tp` is paused.
    pub fn is_paused(&self, tp: &TopicPartition) -> bool {
        self.paused.contains(tp)
    }

    /// The paused partitions that are assigned.
    pub fn paused(&self) -> Vec<TopicPartition> {
        self.paused
            .iter()
            .filter(|tp| self.is_assigned(tp))
            .cloned()
            .collect()
    }

    /// The partitions were revoked: stop fetching them, keep their positions for a commit.
    pub fn revoke(&mut self) {
        self.revoked = true;
    }

    /// Whether the partitions were revoked and no new assignment came yet.
    pub fn is_revoked(&self) -> bool {
        self.revoked
    }

    /// The assigned partitions (empty after a revocation).
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.assigned().cloned().collect()
    }

    /// [`assignment`](Self::assignment) without the copy.
    pub fn assigned(&self) -> impl Iterator<Item = &TopicPartition> + '_ {
        self.parts.keys().filter(|tp| self.live(tp))
    }

    /// Whether `tp` is assigned (and not revoked).
    pub fn is_assigned(&self, tp: &TopicPartition) -> bool {
        self.live(tp) && self.parts.contains_key(tp)
    }

    /// Partitions whose committed offset must be fetched before they can be consumed.
    pub fn awaiting_committed(&self) -> Vec<TopicPartition> {
        self.with_init(|i| i == Init::AwaitingCommitted)
            .filter(|(tp, _)| self.live(tp))
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    /// Takes an OffsetFetch answer: start at the committed offset, or reset if there is none.
    pub fn apply_committed(&mut self, tp: &TopicPartition, committed: Option<(i64, Option<i32>)>) {
        let Some(p) = self.parts.get_mut(tp) else {
            return;
        };
        if p.init != Init::AwaitingCommitted {
            return; // a seek came first; it wins
        }
        match committed {
            Some((offset, epoch)) => {
                p.ready_at(offset, epoch);
                p.committed = Some(offset);
                p.floor = Some(offset);
            }
            None => p.init = Init::Reset(ResetReason::NoCommittedOffset),
        }
    }

    /// Partitions that need `auto.offset.reset`, with the reason.
    pub fn needing_reset(&self) -> Vec<(TopicPartition, ResetReason)> {
        if self.revoked {
            return Vec::new();
        }
        self.parts
            .iter()
            .filter(|(tp, _)| self.live(tp))
            .filter_map(|(tp, p)| match p.init {
                Init::Reset(r) => Some((tp.clone(), r)),
                _ => None,
            })
            .collect()
    }

    /// Sets the position found by ListOffsets for a partition that needed a reset (ignored if
    /// the partition was seeked in the meantime).
    pub fn reset_to(&mut self, tp: &TopicPartition, offset: i64) {
        if let Some(p) = self.parts.get_mut(tp) {
            if let Init::Reset(reason) = p.init {
                p.ready_at(offset, None);
                if matches!(reason, ResetReason::Requested(_)) {
                    // The application chose to go there, as with a seek: a rewind may commit.
                    p.floor = p.floor.map(|f| f.min(offset));
                }
            }
        }
    }

    /// Moves the position (`seek`). An explicit seek is the application deciding to re-read,
    /// so it also lowers the commit floor to the new position. Returns false if `tp` is not
    /// assigned.
    pub fn seek(&mut self, tp: &TopicPartition, offset: i64) -> bool {
        if !self.live(tp) {
            return false;
        }
        let Some(p) = self.parts.get_mut(tp) else {
            return false;
        };
        p.ready_at(offset, None);
        p.floor = p.floor.map(|f| f.min(offset));
        true
    }

    /// Asks for `tp`'s position by ListOffsets `timestamp` (-2 beginning, -1 end, else a time),
    /// resolved lazily by the next poll, as Java's `seekToBeginning`/`seekToEnd`. Like
    /// [`seek`](Self::seek) it wins over a committed offset still to come and lowers the commit
    /// floor once resolved ([`reset_to`](Self::reset_to)). Returns false if `tp` is not assigned.
    pub fn request_reset(&mut self, tp: &TopicPartition, timestamp: i64) -> bool {
        if !self.live(tp) {
            return false;
        }
        let Some(p) = self.parts.get_mut(tp) else {
            return false;
        };
        p.init = Init::Reset(ResetReason::Requested(timestamp));
        true
    }

    /// Partitions to fetch and where from: ready, and with nothing buffered (what the consumer
    /// fetched before fetch-ahead; kept for the tests of the offsets' rules).
    #[cfg(test)]
    pub fn fetchable(&self) -> Vec<(TopicPartition, i64)> {
        self.unbuffered()
            .map(|(tp, p)| (tp.clone(), p.fetch_offset))
            .collect()
    }

    /// Whether [`fetchable`](Self::fetchable) has any partition, without copying them: asked
    /// on every turn of the poll loop.
    #[cfg(test)]
    pub fn has_fetchable(&self) -> bool {
        self.unbuffered().next().is_some()
    }

    /// Partitions to fetch ahead and where from: ready, not paused, and the fetch offset
    /// (which runs ahead of the position by what is buffered or in flight), whether or not
    /// records are buffered for them; the caller bounds how much.
    pub fn fetch_ahead(&self) -> Vec<(TopicPartition, i64)> {
        if self.revoked {
            return Vec::new();
        }
        self.with_init(|i| i == Init::Ready)
            .filter(|(tp, _)| !self.paused.contains(*tp) && self.live(tp))
            .map(|(tp, p)| (tp.clone(), p.fetch_offset))
            .collect()
    }

    #[cfg(test)]
    fn unbuffered(&self) -> impl Iterator<Item = (&TopicPartition, &PartitionState)> + '_ {
        self.with_init(|i| i == Init::Ready)
            .filter(|(tp, p)| self.live(tp) && p.position == p.fetch_offset && !self.paused.contains(*tp))
    }

    /// The position the next fetch of `tp` starts at, if it has one.
    #[cfg(test)]
    pub fn fetch_offset(&self, tp: &TopicPartition) -> Option<i64> {
        self.parts
            .get(tp)
            .filter(|p| p.init == Init::Ready)
            .map(|p| p.fetch_offset)
    }

    /// A fetch from `from` returned records up to (not including) `next`, now buffered. Ignored
    /// unless the partition still stands at `from` (a seek in between wins).
    pub fn fetched(&mut self, tp: &TopicPartition, from: i64, next: i64) {
        if let Some(p) = self.parts.get_mut(tp) {
            if p.init == Init::Ready && p.fetch_offset == from && next > from {
                p.fetch_offset = next;
            }
        }
    }

    /// A fetch from `from` returned nothing for the application but the log goes on at `next`
    /// (control records, aborted transactions, compacted gaps): move both offsets.
    pub fn skip_to(&mut self, tp: &TopicPartition, from: i64, next: i64) {
        if let Some(p) = self.parts.get_mut(tp) {
            if p.init == Init::Ready && p.fetch_offset == from && p.position == from && next > from {
                p.position = next;
                p.fetch_offset = next;
            }
        }
    }

    /// Records up to (not including) `next` were handed to the application.
    pub fn consumed(&mut self, tp: &TopicPartition, next: i64, epoch: Option<i32>) {
        if let Some(p) = self.parts.get_mut(tp) {
            if p.init == Init::Ready && next > p.position {
                p.position = next;
                p.returned = true;
                if epoch.is_some() {
                    p.epoch = epoch;
                }
            }
        }
    }

    /// The broker said `offset` is outside the log.
    pub fn out_of_range(&mut self, tp: &TopicPartition, offset: i64) {
        if let Some(p) = self.parts.get_mut(tp) {
            if p.init == Init::Ready && p.fetch_offset == offset {
                p.init = Init::Reset(ResetReason::OutOfRange(offset));
            }
        }
    }

    /// The offset of the next record the application will see.
    pub fn position(&self, tp: &TopicPartition) -> Option<i64> {
        self.parts
            .get(tp)
            .filter(|p| p.init == Init::Ready)
            .map(|p| p.position)
    }

    /// Every position that differs from what is committed: what `commit()` sends. Includes
    /// revoked partitions until the next assignment, which is when committing them matters most.
    pub fn uncommitted(&self) -> BTreeMap<TopicPartition, (i64, Option<i32>)> {
        self.with_init(|i| i == Init::Ready)
            .filter(|(_, p)| p.committed != Some(p.position))
            .map(|(tp, p)| (tp.clone(), (p.position, p.epoch)))
            .collect()
    }

    /// Partitions with records handed to the application since their last commit, and their
    /// positions: what a close without auto-commit would leave to be delivered again.
    pub fn returned_uncommitted(&self) -> Vec<(TopicPartition, i64)> {
        self.with_init(|i| i == Init::Ready)
            .filter(|(_, p)| p.returned && p.committed != Some(p.position))
            .map(|(tp, p)| (tp.clone(), p.position))
            .collect()
    }

    /// The rule that keeps committed offsets from moving backwards: within one assignment, an
    /// offset below the partition's commit floor (the committed offset OffsetFetch reported at
    /// assignment, raised by each successful commit, lowered only by an explicit seek) is
    /// refused, and one equal to the committed offset is not sent again. Partitions this
    /// consumer does not hold pass unchecked: the broker's generation check guards them.
    pub fn check_commit(&self, offsets: &BTreeMap<TopicPartition, (i64, Option<i32>)>) -> CommitCheck {
        let mut check = CommitCheck::default();
        for (tp, &(offset, epoch)) in offsets {
            let p = self.parts.get(tp);
            match p.and_then(|p| p.floor) {
                Some(floor) if offset < floor => {
                    check.stale.insert(tp.clone(), (offset, floor));
                }
                _ if p.is_some_and(|p| p.committed == Some(offset)) => {}
                _ => {
                    check.send.insert(tp.clone(), (offset, epoch));
                }
            }
        }
        check
    }

    /// A commit of `offset` succeeded.
    pub fn committed_ok(&mut self, tp: &TopicPartition, offset: i64) {
        if let Some(p) = self.parts.get_mut(tp) {
            p.committed = Some(offset);
            if offset >= p.position {
                p.returned = false;
            }
            p.floor = Some(p.floor.map_or(offset, |f| f.max(offset)));
        }
    }

    fn with_init(
        &self,
        f: fn(Init) -> bool,
    ) -> impl Iterator<Item = (&TopicPartition, &PartitionState)> + '_ {
        self.parts.iter().filter(move |(_, p)| f(p.init))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    fn assigned(n: i32) -> Positions {
        let mut s = Positions::default();
        s.assign(&(0..n).map(tp).collect::<Vec<_>>());
        s
    }

    #[test]
    fn a_cooperative_rebalance_keeps_the_positions_of_the_partitions_that_stay() {
        let mut s = assigned(3);
        for p in 0..3 {
            s.apply_committed(&tp(p), Some((10 * i64::from(p), None)));
        }
        s.consumed(&tp(0), 5, None);
        s.consumed(&tp(1), 15, None);
        // t-1 moves away, t-3 arrives; t-0 and t-2 carry on where they were.
        s.revoke_some(&[tp(1)]);
        s.assign_more(&[tp(3)]);
        assert!(!s.is_revoked());
        assert_eq!(s.assignment(), vec![tp(0), tp(2), tp(3)]);
        assert_eq!(s.position(&tp(0)), Some(5));
        assert_eq!(s.awaiting_committed(), vec![tp(3)]);
        let fetch: Vec<TopicPartition> = s.fetch_ahead().into_iter().map(|(tp, _)| tp).collect();
        assert_eq!(fetch, vec![tp(0), tp(2)], "the revoked partition is not fetched");
        assert!(!s.seek(&tp(1), 0), "nor seekable");
        // Until the next poll, its position can still be committed (in the new generation).
        assert_eq!(s.uncommitted().get(&tp(1)), Some(&(15, None)));
        s.forget_revoked();
        assert_eq!(s.uncommitted().get(&tp(1)), None);
        assert_eq!(s.assignment(), vec![tp(0), tp(2), tp(3)]);
        // After an eager revocation, an assignment replaces everything.
        s.revoke();
        s.assign_more(&[tp(7)]);
        assert_eq!(s.assignment(), vec![tp(7)]);
    }

    #[test]
    fn assignment_starts_at_committed_or_needs_reset() {
        let mut s = assigned(2);
        assert_eq!(s.awaiting_committed(), vec![tp(0), tp(1)]);
        assert!(s.fetchable().is_empty());
        assert!(!s.has_fetchable());
        s.apply_committed(&tp(0), Some((42, Some(3))));
        s.apply_committed(&tp(1), None);
        assert_eq!(s.position(&tp(0)), Some(42));
        assert_eq!(s.position(&tp(1)), None);
        assert_eq!(s.needing_reset(), vec![(tp(1), ResetReason::NoCommittedOffset)]);
        assert_eq!(s.fetchable(), vec![(tp(0), 42)]);
        assert!(s.has_fetchable());
        s.reset_to(&tp(1), 7);
        assert_eq!(s.fetchable(), vec![(tp(0), 42), (tp(1), 7)]);
        // Nothing consumed on tp0: its committed offset is not sent again; tp1's reset
        // position is (it pins the reset, as the Java consumer does).
        let unc = s.uncommitted();
        assert_eq!(unc.len(), 1);
        assert_eq!(unc[&tp(1)], (7, None));
    }

    #[test]
    fn buffered_partitions_are_not_fetched_until_drained() {
        let mut s = assigned(1);
        s.apply_committed(&tp(0), Some((0, None)));
        s.fetched(&tp(0), 0, 10);
        assert!(s.fetchable().is_empty(), "records 0..10 are buffered");
        assert_eq!(s.position(&tp(0)), Some(0));
        s.consumed(&tp(0), 5, Some(1));
        assert!(s.fetchable().is_empty());
        s.consumed(&tp(0), 10, Some(1));
        assert_eq!(s.fetchable(), vec![(tp(0), 10)]);
        assert_eq!(s.uncommitted()[&tp(0)], (10, Some(1)));
        // A stale fetch answer (the partition moved on) changes nothing.
        s.fetched(&tp(0), 3, 20);
        assert_eq!(s.fetch_offset(&tp(0)), Some(10));
    }

    #[test]
    fn skip_moves_past_control_records() {
        let mut s = assigned(1);
        s.apply_committed(&tp(0), Some((5, None)));
        s.skip_to(&tp(0), 5, 9);
        assert_eq!(s.position(&tp(0)), Some(9));
        assert_eq!(s.fetchable(), vec![(tp(0), 9)]);
    }

    #[test]
    fn out_of_range_needs_reset_until_seek() {
        let mut s = assigned(1);
        s.apply_committed(&tp(0), Some((100, None)));
        s.out_of_range(&tp(0), 100);
        assert_eq!(s.needing_reset(), vec![(tp(0), ResetReason::OutOfRange(100))]);
        assert!(s.fetchable().is_empty());
        assert!(s.seek(&tp(0), 3));
        assert!(s.needing_reset().is_empty());
        assert_eq!(s.position(&tp(0)), Some(3));
        assert!(!s.seek(&tp(9), 3), "not assigned");
    }

    #[test]
    fn commits_never_go_below_the_floor() {
        let mut s = assigned(2);
        s.apply_committed(&tp(0), Some((50, None)));
        s.apply_committed(&tp(1), None);
        let offsets: BTreeMap<_, _> = [
            (tp(0), (40, None)),
            (tp(1), (5, None)),
            (TopicPartition::new("other", 0), (1, None)),
        ]
        .into_iter()
        .collect();
        let c = s.check_commit(&offsets);
        assert_eq!(c.stale.get(&tp(0)), Some(&(40, 50)), "below the committed offset");
        assert!(c.send.contains_key(&tp(1)), "nothing committed yet");
        assert!(c.send.contains_key(&TopicPartition::new("other", 0)));
        s.committed_ok(&tp(1), 5);
        // The same offset again is not sent; a lower one is refused.
        let again: BTreeMap<_, _> = [(tp(1), (5, None))].into_iter().collect();
        assert!(s.check_commit(&again).send.is_empty());
        let lower: BTreeMap<_, _> = [(tp(1), (4, None))].into_iter().collect();
        assert_eq!(s.check_commit(&lower).stale[&tp(1)], (4, 5));
        // A successful commit never lowers the floor (only a seek does).
        s.committed_ok(&tp(1), 3);
        assert_eq!(s.check_commit(&lower).stale[&tp(1)], (4, 5));
    }

    #[test]
    fn seek_lowers_the_floor() {
        let mut s = assigned(1);
        s.apply_committed(&tp(0), Some((50, None)));
        assert!(s.seek(&tp(0), 10));
        assert_eq!(s.uncommitted()[&tp(0)], (10, None));
        let c = s.check_commit(&s.uncommitted());
        assert!(c.stale.is_empty());
        assert_eq!(c.send[&tp(0)], (10, None));
        s.committed_ok(&tp(0), 10);
        assert!(s.uncommitted().is_empty());
        // Below the seek position is still refused.
        let lower: BTreeMap<_, _> = [(tp(0), (9, None))].into_iter().collect();
        assert_eq!(s.check_commit(&lower).stale[&tp(0)], (9, 10));
    }

    #[test]
    fn seek_before_offset_fetch_wins() {
        let mut s = assigned(1);
        assert!(s.seek(&tp(0), 8));
        s.apply_committed(&tp(0), Some((50, None)));
        assert_eq!(s.position(&tp(0)), Some(8));
    }

    #[test]
    fn revoked_positions_stay_committable_but_not_fetchable() {
        let mut s = assigned(1);
        s.apply_committed(&tp(0), Some((0, None)));
        s.fetched(&tp(0), 0, 4);
        s.consumed(&tp(0), 4, None);
        s.revoke();
        assert!(s.fetchable().is_empty());
        assert!(!s.has_fetchable());
        assert!(s.assignment().is_empty());
        assert!(!s.seek(&tp(0), 1));
        assert_eq!(s.uncommitted()[&tp(0)], (4, None));
        s.assign(&[tp(1)]);
        assert!(s.uncommitted().is_empty());
        assert_eq!(s.awaiting_committed(), vec![tp(1)]);
    }

    #[test]
    fn requested_resets_win_over_committed_offsets_and_lower_the_floor() {
        let mut s = assigned(2);
        // Right after the assignment, before OffsetFetch answered: the request wins.
        assert!(s.request_reset(&tp(0), -2));
        s.apply_committed(&tp(0), Some((50, None)));
        assert_eq!(s.needing_reset(), vec![(tp(0), ResetReason::Requested(-2))]);
        assert_eq!(s.position(&tp(0)), None);
        s.reset_to(&tp(0), 3);
        assert_eq!(s.position(&tp(0)), Some(3));
        assert_eq!(s.fetchable(), vec![(tp(0), 3)]);
        // With a committed offset known, a requested rewind lowers the floor like a seek.
        s.apply_committed(&tp(1), Some((40, None)));
        let stale = BTreeMap::from([(tp(1), (10, None))]);
        assert_eq!(s.check_commit(&stale).stale.len(), 1);
        assert!(s.request_reset(&tp(1), 1_700_000_000_000));
        assert!(!s.has_fetchable() || s.fetchable() == vec![(tp(0), 3)]);
        s.reset_to(&tp(1), 10);
        assert!(s.check_commit(&stale).stale.is_empty());
        assert_eq!(s.check_commit(&stale).send.len(), 1);
        // A seek after the request and before the lookup wins over it.
        assert!(s.request_reset(&tp(1), -1));
        assert!(s.seek(&tp(1), 7));
        s.reset_to(&tp(1), 99);
        assert_eq!(s.position(&tp(1)), Some(7));
        // Not assigned, or revoked: refused.
        assert!(!s.request_reset(&tp(5), -1));
        s.revoke();
        assert!(!s.request_reset(&tp(0), -1));
    }

    #[test]
    fn paused_partitions_are_not_fetched_keep_their_position_and_survive_a_rebalance_if_kept() {
        let mut s = assigned(2);
        s.apply_committed(&tp(0), Some((5, None)));
        s.apply_committed(&tp(1), Some((8, None)));
        s.fetched(&tp(0), 5, 9);
        assert!(s.pause(&tp(0)));
        assert!(!s.pause(&tp(7)), "not assigned");
        assert_eq!(s.fetchable(), vec![(tp(1), 8)]);
        assert_eq!(s.paused(), vec![tp(0)]);
        assert_eq!(s.position(&tp(0)), Some(5));
        assert!(s.resume(&tp(0)));
        assert!(!s.resume(&tp(0)));
        // Fetched-ahead records were dropped on pause: fetching starts again at the position.
        assert_eq!(s.fetchable(), vec![(tp(0), 5), (tp(1), 8)]);
        s.pause(&tp(0));
        s.pause(&tp(1));
        s.assign(&[tp(1), tp(2)]);
        assert_eq!(
            s.paused(),
            vec![tp(1)],
            "kept for the partition still assigned only"
        );
    }

    #[test]
    fn records_returned_and_not_committed_are_known() {
        let mut s = assigned(2);
        s.apply_committed(&tp(0), Some((5, None)));
        s.reset_to(&tp(1), 0);
        s.apply_committed(&tp(1), None);
        s.reset_to(&tp(1), 30);
        assert!(
            s.returned_uncommitted().is_empty(),
            "a reset position alone is no record"
        );
        s.fetched(&tp(0), 5, 9);
        s.consumed(&tp(0), 7, None);
        assert_eq!(s.returned_uncommitted(), vec![(tp(0), 7)]);
        s.committed_ok(&tp(0), 6);
        assert_eq!(
            s.returned_uncommitted(),
            vec![(tp(0), 7)],
            "committed short of the position"
        );
        s.committed_ok(&tp(0), 7);
        assert!(s.returned_uncommitted().is_empty());
    }
}
