//! [`MemberBuilder`]: a [`GroupMember`]'s configuration, one setter per Kafka consumer
//! property.

use super::assignor::Assignor;
use super::config::{MemberConfig, OldBrokerPolicy};
use super::member::GroupMember;
use crate::client::Client;
use crate::error::Result;
use std::sync::Arc;
use std::time::Duration;

/// Builds a [`GroupMember`]; each setter names the Kafka consumer property and its default.
#[derive(Debug, Clone)]
pub struct MemberBuilder {
    client: Client,
    config: MemberConfig,
}

impl MemberBuilder {
    pub(crate) fn new(client: Client, group_id: &str) -> Self {
        MemberBuilder {
            client,
            config: MemberConfig::new(group_id),
        }
    }

    /// `group.instance.id`: makes this a static member (KIP-345). Default: none (dynamic).
    pub fn group_instance_id(mut self, id: impl Into<String>) -> Self {
        self.config.group_instance_id = Some(id.into());
        self
    }

    /// `session.timeout.ms`: how long the coordinator waits for a heartbeat before evicting
    /// the member. Default 45 s; above zero and at most `i32::MAX` ms. Must lie within the
    /// broker's `group.min/max.session.timeout.ms`.
    pub fn session_timeout(mut self, t: Duration) -> Self {
        self.config.session_timeout = t;
        self
    }

    /// `heartbeat.interval.ms`: time between heartbeats; above zero and below the session
    /// timeout (a third of it is usual). Default 3 s.
    pub fn heartbeat_interval(mut self, t: Duration) -> Self {
        self.config.heartbeat_interval = t;
        self
    }

    /// `max.poll.interval.ms`: sent as the rebalance timeout, the time each member has to
    /// rejoin during a rebalance. Default 300 s; above zero and at most `i32::MAX` ms.
    pub fn rebalance_timeout(mut self, t: Duration) -> Self {
        self.config.rebalance_timeout = t;
        self
    }

    /// `retry.backoff.ms`: pause before retrying a failed group request. Default 100 ms.
    pub fn retry_backoff(mut self, t: Duration) -> Self {
        self.config.retry_backoff = t;
        self
    }

    /// `metadata.max.age.ms`: how often the leader re-checks the subscribed topics for
    /// partition changes. Default 300 s. A restarted static leader told to keep the group's
    /// assignment (KIP-814) does not wait for this: it checks at once that the assignment
    /// covers every partition (see [`GroupMember`]).
    pub fn metadata_max_age(mut self, t: Duration) -> Self {
        self.config.metadata_max_age = t;
        self
    }

    /// `partition.assignment.strategy`, in preference order. Default `[range]`.
    pub fn assignors(mut self, assignors: Vec<Arc<dyn Assignor>>) -> Self {
        self.config.assignors = assignors;
        self
    }

    /// The topics to subscribe to, each a valid Kafka topic name (1 to 249 characters of
    /// `[a-zA-Z0-9._-]`, not `.` or `..`). Default: none.
    pub fn topics<I, S>(mut self, topics: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.config.topics = topics.into_iter().map(Into::into).collect();
        self
    }

    /// `client.rack`, sent in the subscription for rack-aware assignors. Default: none.
    pub fn client_rack(mut self, rack: impl Into<String>) -> Self {
        self.config.client_rack = Some(rack.into());
        self
    }

    /// How long [`GroupMember::close`] (and drop) may take at most: stopping the heartbeat
    /// thread (a heartbeat in flight is cut off) and, for a dynamic member, sending LeaveGroup.
    /// A static member's close sends nothing and is quick. Like the Java consumer's
    /// `close(Duration)`; default 30 s, as there.
    pub fn close_timeout(mut self, t: Duration) -> Self {
        self.config.close_timeout = t;
        self
    }

    /// What to do on brokers older than 2.3, which lack static membership. Default
    /// [`OldBrokerPolicy::Error`].
    pub fn old_broker_policy(mut self, p: OldBrokerPolicy) -> Self {
        self.config.old_broker_policy = p;
        self
    }

    /// Validates the configuration and starts the member's heartbeat thread (idle until the
    /// first join). No network call is made.
    pub fn build(self) -> Result<GroupMember> {
        self.config.validate()?;
        GroupMember::new(self.client, self.config)
    }
}

impl Client {
    /// Starts building a member of consumer group `group_id`.
    pub fn member(&self, group_id: &str) -> MemberBuilder {
        MemberBuilder::new(self.clone(), group_id)
    }
}
