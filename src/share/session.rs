//! A share session (KIP-932) with one broker, as pure data: which of the member's partitions
//! the broker already has in the session, and the epoch the next request carries.
//!
//! Epoch 0 opens a session and lists every partition; each answered request moves the epoch
//! on by one (after `i32::MAX`, back to 1) and the next lists only partitions added
//! (`Topics`) and those dropped (`ForgottenTopicsData`); -1 closes it. Acknowledgements ride
//! only on an open session (epoch above 0): the records they name were acquired in it. When
//! the broker says the session is gone (`SHARE_SESSION_NOT_FOUND`,
//! `INVALID_SHARE_SESSION_EPOCH`) or the connection breaks, the records it had acquired are
//! released by the broker, and the next request opens a new session.

use crate::protocol::Uuid;
use std::collections::BTreeSet;

/// A partition by topic id, as share requests name it.
pub(crate) type IdPartition = (Uuid, i32);

/// The epoch that closes a session.
pub(crate) const CLOSE_EPOCH: i32 = -1;

/// What the next request to the broker carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The session epoch to send.
    pub(crate) epoch: i32,
    /// Partitions to fetch that the session does not have yet (all of them at epoch 0).
    pub(crate) add: Vec<IdPartition>,
    /// Partitions the session has that are no longer wanted.
    pub(crate) forget: Vec<IdPartition>,
}

/// One broker's share session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ShareSession {
    epoch: i32,
    partitions: BTreeSet<IdPartition>,
}

impl ShareSession {
    /// The request that makes the session hold exactly `wanted`.
    pub(crate) fn plan(&self, wanted: &BTreeSet<IdPartition>) -> Plan {
        if self.epoch == 0 {
            return Plan {
                epoch: 0,
                add: wanted.iter().copied().collect(),
                forget: Vec::new(),
            };
        }
        Plan {
            epoch: self.epoch,
            add: wanted.difference(&self.partitions).copied().collect(),
            forget: self.partitions.difference(wanted).copied().collect(),
        }
    }

    /// The broker answered the request made from `plan` without a session error.
    pub(crate) fn answered(&mut self, plan: &Plan) {
        if plan.epoch == 0 {
            self.partitions.clear();
        }
        self.partitions.extend(plan.add.iter().copied());
        for p in &plan.forget {
            self.partitions.remove(p);
        }
        self.epoch = next_epoch(plan.epoch);
    }

    /// The session is gone (a session error, a broken connection, a close): the next request
    /// opens a new one.
    pub(crate) fn reset(&mut self) {
        *self = ShareSession::default();
    }

    /// Whether acknowledgements can ride on the next request (the session is open).
    pub(crate) fn is_open(&self) -> bool {
        self.epoch > 0
    }

    /// The epoch the next request carries.
    pub(crate) fn epoch(&self) -> i32 {
        self.epoch
    }

    /// The partitions the broker has in the session.
    pub(crate) fn partitions(&self) -> &BTreeSet<IdPartition> {
        &self.partitions
    }
}

fn next_epoch(epoch: i32) -> i32 {
    if (0..i32::MAX).contains(&epoch) {
        epoch + 1
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ps: &[(u8, i32)]) -> BTreeSet<IdPartition> {
        ps.iter().map(|(t, p)| (Uuid([*t; 16]), *p)).collect()
    }

    #[test]
    fn a_new_session_lists_everything_then_only_changes() {
        let mut s = ShareSession::default();
        assert!(!s.is_open());
        let first = s.plan(&set(&[(1, 0), (1, 1)]));
        assert_eq!((first.epoch, first.add.len(), first.forget.len()), (0, 2, 0));
        s.answered(&first);
        assert!(s.is_open());
        assert_eq!(s.epoch(), 1);
        let same = s.plan(&set(&[(1, 0), (1, 1)]));
        assert_eq!((same.epoch, same.add.len(), same.forget.len()), (1, 0, 0));
        s.answered(&same);
        let moved = s.plan(&set(&[(1, 1), (2, 0)]));
        assert_eq!(moved.epoch, 2);
        assert_eq!(moved.add, set(&[(2, 0)]).into_iter().collect::<Vec<_>>());
        assert_eq!(moved.forget, set(&[(1, 0)]).into_iter().collect::<Vec<_>>());
        s.answered(&moved);
        assert_eq!(s.partitions(), &set(&[(1, 1), (2, 0)]));
    }

    #[test]
    fn a_reset_opens_a_new_session_with_every_partition() {
        let mut s = ShareSession::default();
        let p = s.plan(&set(&[(1, 0)]));
        s.answered(&p);
        s.reset();
        let again = s.plan(&set(&[(1, 0), (1, 2)]));
        assert_eq!((again.epoch, again.add.len()), (0, 2));
    }

    #[test]
    fn the_epoch_wraps_to_one() {
        assert_eq!(next_epoch(i32::MAX), 1);
        assert_eq!(next_epoch(0), 1);
        assert_eq!(next_epoch(CLOSE_EPOCH), 1);
        assert_eq!(next_epoch(41), 42);
    }
}
