//! Flow control and group control on a [`Consumer`]: pausing partitions, leaving the group,
//! asking for a rebalance, and what the group knows of this consumer.

use super::Consumer;
use crate::error::{Error, Result};
use crate::group::{GroupMember, TopicPartition};

/// What the group knows of a consumer, from [`Consumer::group_metadata`] (Java's
/// `ConsumerGroupMetadata`, rdkafka's `rd_kafka_consumer_group_metadata`).
///
/// A transactional producer sends it with the offsets it commits in a transaction
/// (`send_offsets_to_transaction`, TxnOffsetCommit, KIP-447): the group coordinator refuses
/// the commit unless the generation (or member epoch), member id and instance id are the
/// member's current ones, which is how a zombie that lost its partitions is kept from
/// committing. Take it afresh for each transaction: a value kept across a rebalance is stale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupMetadata {
    /// `group.id`.
    pub group_id: String,
    /// The generation the consumer holds: under the classic protocol the group's generation
    /// id from its last JoinGroup; under the consumer protocol (KIP-848) the member epoch from
    /// its last heartbeat answer. -1 outside a generation (before the first join, after
    /// leaving, or with manual assignment).
    pub generation_id: i32,
    /// The member id the coordinator gave; empty outside a generation.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
}

impl Consumer {
    /// Stops fetching `partitions` until [`resume`](Self::resume)d (Java `pause`, rdkafka
    /// `pause_partitions`): they stay assigned, keep their positions, and `poll` returns none
    /// of their records meanwhile; records already fetched for them are dropped and fetched
    /// again from the position on resume, so nothing is skipped. A paused partition that stays
    /// assigned through a rebalance stays paused. Paused partitions are still committed by
    /// [`commit`](Self::commit) (their positions do not move). Fails with
    /// [`Error::NotAssigned`], pausing none, if a partition is not assigned.
    pub fn pause(&mut self, partitions: &[TopicPartition]) -> Result<()> {
        if let Some(tp) = partitions.iter().find(|tp| !self.positions.is_assigned(tp)) {
            return Err(Error::NotAssigned(tp.clone()));
        }
        for tp in partitions {
            self.positions.pause(tp);
            self.buffer.discard(tp);
        }
        log::info!("{}: paused {}", self.ctx(), list(partitions));
        Ok(())
    }

    /// Fetches `partitions` again from their positions (Java `resume`, rdkafka
    /// `resume_partitions`). Partitions not paused are ignored.
    pub fn resume(&mut self, partitions: &[TopicPartition]) {
        let resumed: Vec<TopicPartition> = partitions
            .iter()
            .filter(|tp| self.positions.resume(tp))
            .cloned()
            .collect();
        if !resumed.is_empty() {
            log::info!("{}: resumed {}", self.ctx(), list(&resumed));
        }
    }

    /// The assigned partitions that are paused (Java `paused`).
    pub fn paused(&self) -> Vec<TopicPartition> {
        self.positions.paused()
    }

    /// Leaves the group now, so that its partitions move to the other members at once instead
    /// of after `session.timeout.ms`: what scaling down needs. With auto-commit on, commits the
    /// positions first. A static member leaves by its `group.instance.id` (LeaveGroup v3+,
    /// Kafka 2.4+), which [`close`](Self::close) deliberately does not do (a static member that
    /// closes keeps its partitions for a restart). Afterwards the consumer holds no partitions;
    /// a later [`poll`](Self::poll) joins the group again as a new member, so call this last and
    /// then `close`. Java's consumer has no direct equivalent for static members (its
    /// `unsubscribe` leaves only as a dynamic member); KIP-345's admin `removeMembersFromConsumerGroup`
    /// does the same from outside. Returns the commit's error if it failed (the member has left
    /// regardless), or the LeaveGroup's.
    pub fn leave_group(&mut self) -> Result<()> {
        let deadline = crate::deadline::after(self.client.api_timeout());
        let committed = if self.config.enable_auto_commit && !self.positions.is_revoked() {
            let offsets = self.positions.uncommitted();
            self.commit_by(offsets, deadline)
        } else {
            Ok(())
        };
        let left = self.group_mut()?.leave_group();
        self.buffer.discard_all();
        self.positions.assign(&[]);
        committed.and(left)
    }

    /// Replaces the subscribed topics (Java's `subscribe` called again), at least one, each a
    /// valid name; see [`GroupMember::subscribe`] for how each group protocol takes the change
    /// at the next [`poll`](Self::poll), whose events revoke the partitions that move (a
    /// dropped topic's among them) and assign the new ones. After
    /// [`unsubscribe`](Self::unsubscribe) the next poll joins the group again. Fails with
    /// [`Error::Config`] without a group or on a consumer built with
    /// [`assign`](crate::ConsumerBuilder::assign), changing nothing.
    pub fn subscribe<I, S>(&mut self, topics: I) -> Result<()>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        if self.config.manual.is_some() {
            return Err(Error::Config {
                property: "subscribe",
                problem: "this consumer is assigned its partitions (assign); it cannot also subscribe".into(),
            });
        }
        self.group_mut()?.subscribe(topics)?;
        self.metadata_stale = true;
        Ok(())
    }

    /// Stops consuming and leaves the group (Java's `unsubscribe`): with auto-commit on,
    /// commits the positions first; then [`leave_group`](Self::leave_group) (the partitions
    /// move to the other members at once, a static member's included) and the subscription
    /// is empty: [`poll`](Self::poll) returns no records and joins nothing until
    /// [`subscribe`](Self::subscribe). Returns the commit's or the LeaveGroup's error, if
    /// any; the consumer has unsubscribed regardless.
    pub fn unsubscribe(&mut self) -> Result<()> {
        if self.config.manual.is_some() {
            return Err(Error::Config {
                property: "subscribe",
                problem: "this consumer is assigned its partitions (assign); it has no subscription".into(),
            });
        }
        let left = self.leave_group();
        self.group_mut()?.unsubscribe()?;
        left
    }

    /// Asks for a rebalance of the group: the next [`poll`](Self::poll) revokes this
    /// consumer's partitions and rejoins (Java `enforceRebalance`), e.g. after the application
    /// changed what its assignor's metadata says. Fails without a group.
    pub fn request_rejoin(&mut self) -> Result<()> {
        self.group_mut()?.request_rejoin();
        log::info!("{}: rejoin requested", self.ctx());
        Ok(())
    }

    /// Group id, generation, member id and instance id as of now (Java `groupMetadata`);
    /// `None` for a consumer without a group. After a rebalance (classic) or an assignment
    /// change (consumer protocol), it gives the new generation or member epoch as soon as the
    /// `poll` that went through it returns; a member fenced and rejoined gives its new ones.
    /// See [`ConsumerGroupMetadata`] for what a transactional producer does with it.
    pub fn group_metadata(&self) -> Option<ConsumerGroupMetadata> {
        let m: &GroupMember = self.member.as_ref()?;
        Some(ConsumerGroupMetadata {
            group_id: m.group_id().to_string(),
            generation_id: m.generation().map_or(-1, |g| g.id),
            member_id: m.member_id().to_string(),
            group_instance_id: m.group_instance_id().map(String::from),
        })
    }
}

fn list(partitions: &[TopicPartition]) -> String {
    let names: Vec<String> = partitions.iter().map(ToString::to_string).collect();
    names.join(", ")
}
