//! The rebalance listener: application code that [`Consumer::poll`] calls when partitions are
//! assigned, revoked or lost, before anything is fetched for a new assignment.

use super::Consumer;
use crate::group::TopicPartition;

/// Called by [`Consumer::poll`] when the group changes what this consumer owns, as Java's
/// `ConsumerRebalanceListener` and librdkafka's rebalance callback are. Each method gets the
/// consumer itself, so it can [`commit`](Consumer::commit), [`seek`](Consumer::seek),
/// [`seek_to_end`](Consumer::seek_to_end), [`pause`](Consumer::pause) … (but not
/// [`poll`](Consumer::poll), which returns an error from inside a listener). Install it with
/// [`Consumer::set_rebalance_listener`] before the first poll.
///
/// - [`on_partitions_revoked`](Self::on_partitions_revoked): the partitions are about to go
///   (a rebalance started), while the old generation can still commit them; with auto-commit on,
///   after the consumer has committed. Under the eager protocol these are all the consumer's
///   partitions; under the cooperative one
///   ([`CooperativeStickyAssignor`](crate::CooperativeStickyAssignor)) only those that move to
///   another member, and the commit is in the new generation.
/// - [`on_partitions_assigned`](Self::on_partitions_assigned): the consumer got these partitions
///   and has fetched nothing for them yet; a seek here decides where they start, over the
///   committed offset. Eager: the whole assignment; cooperative: only the partitions added
///   (possibly none, as Java's calls it too).
/// - [`on_partitions_lost`](Self::on_partitions_lost): the session expired and the partitions
///   may already belong to another member: nothing can be committed for them. By default this
///   calls `on_partitions_revoked`, as Java's does.
///
/// Every method has an empty default, so a listener implements only what it needs. The same
/// events are also in [`Polled::events`](super::Polled::events).
pub trait ConsumerRebalanceListener: Send {
    /// `partitions` are being taken away; commit what was processed of them.
    fn on_partitions_revoked(&mut self, consumer: &mut Consumer, partitions: &[TopicPartition]) {
        let _ = (consumer, partitions);
    }

    /// `partitions` were assigned; nothing is fetched for them before this returns.
    fn on_partitions_assigned(&mut self, consumer: &mut Consumer, partitions: &[TopicPartition]) {
        let _ = (consumer, partitions);
    }

    /// `partitions` were lost without a chance to commit. Defaults to
    /// [`on_partitions_revoked`](Self::on_partitions_revoked).
    fn on_partitions_lost(&mut self, consumer: &mut Consumer, partitions: &[TopicPartition]) {
        self.on_partitions_revoked(consumer, partitions)
    }
}

/// The installed listener (a box, so that `Consumer` stays `Debug`).
pub(super) struct Listener(pub(super) Box<dyn ConsumerRebalanceListener>);

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConsumerRebalanceListener")
    }
}

/// Which listener method to call.
#[derive(Debug, Clone, Copy)]
pub(super) enum Change {
    Revoked,
    Assigned,
    Lost,
}

impl Consumer {
    /// Installs `listener`, called from inside [`poll`](Self::poll) when partitions are
    /// assigned, revoked or lost (Java passes it to `subscribe(topics, listener)`, librdkafka
    /// sets a `rebalance_cb`). Replaces any earlier one.
    pub fn set_rebalance_listener(&mut self, listener: impl ConsumerRebalanceListener + 'static) {
        self.listener = Some(Listener(Box::new(listener)));
    }

    /// Calls the listener, if any, with the consumer lent to it.
    pub(super) fn notify(&mut self, change: Change, partitions: &[TopicPartition]) {
        let Some(mut l) = self.listener.take() else {
            return;
        };
        self.in_listener = true;
        match change {
            Change::Revoked => l.0.on_partitions_revoked(self, partitions),
            Change::Assigned => l.0.on_partitions_assigned(self, partitions),
            Change::Lost => l.0.on_partitions_lost(self, partitions),
        }
        self.in_listener = false;
        // A listener that installed another one keeps the newer.
        if self.listener.is_none() {
            self.listener = Some(l);
        }
    }
}
