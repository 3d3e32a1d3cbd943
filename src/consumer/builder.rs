//! [`ConsumerBuilder`]: the consumer's settings, each named after its Kafka property.

use super::config::{ConsumerConfig, IsolationLevel, OffsetReset};
use super::fetcher::Fetcher;
use super::positions::Positions;
use super::Consumer;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::group::{Assignor, MemberBuilder, OldBrokerPolicy};
use crate::records::DecodeLimits;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Builds a [`Consumer`]; every setter names the Kafka consumer property it mirrors and its
/// default. Membership settings are those of [`MemberBuilder`]; the common ones are forwarded,
/// the rest are reachable through [`configure_member`](Self::configure_member).
#[derive(Debug, Clone)]
pub struct ConsumerBuilder {
    client: Client,
    member: MemberBuilder,
    topics: Vec<String>,
    config: ConsumerConfig,
}

impl ConsumerBuilder {
    pub(super) fn new(client: Client, group_id: &str) -> Self {
        ConsumerBuilder {
            member: client.member(group_id),
            client,
            topics: Vec::new(),
            config: ConsumerConfig::default(),
        }
    }

    /// The topics to consume (`subscribe()` in Kafka's client). Required; at least one, each a
    /// valid Kafka topic name (1 to 249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`).
    pub fn subscribe<I, S>(mut self, topics: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.topics = topics.into_iter().map(Into::into).collect();
        self
    }

    /// `group.instance.id`: makes the consumer a static member (KIP-345). Default: none.
    pub fn group_instance_id(mut self, id: impl Into<String>) -> Self {
        self.member = self.member.group_instance_id(id);
        self
    }

    /// `session.timeout.ms`. Default 45 s; above zero, at most `i32::MAX` ms.
    pub fn session_timeout(mut self, t: Duration) -> Self {
        self.member = self.member.session_timeout(t);
        self
    }

    /// `heartbeat.interval.ms`. Default 3 s; above zero and below `session.timeout.ms`.
    pub fn heartbeat_interval(mut self, t: Duration) -> Self {
        self.member = self.member.heartbeat_interval(t);
        self
    }

    /// The bound on [`Consumer::close`](super::Consumer::close) and drop: the final
    /// auto-commit, stopping the heartbeat thread and, for a dynamic member, LeaveGroup (Java's
    /// `close(Duration)`). Default 30 s.
    pub fn close_timeout(mut self, t: Duration) -> Self {
        self.member = self.member.close_timeout(t);
        self
    }

    /// `max.poll.interval.ms`, sent as the rebalance timeout: how long the group waits for this
    /// consumer to rejoin (poll again) after a rebalance starts. Default 300 s; above zero, at
    /// most `i32::MAX` ms.
    pub fn max_poll_interval(mut self, t: Duration) -> Self {
        self.member = self.member.rebalance_timeout(t);
        self
    }

    /// `partition.assignment.strategy`, in preference order. Default `[range]`.
    pub fn assignors(mut self, assignors: Vec<Arc<dyn Assignor>>) -> Self {
        self.member = self.member.assignors(assignors);
        self
    }

    /// `client.rack`, for rack-aware assignors. Default: none.
    pub fn client_rack(mut self, rack: impl Into<String>) -> Self {
        self.member = self.member.client_rack(rack);
        self
    }

    /// What to do on brokers too old for static membership. Default
    /// [`OldBrokerPolicy::Error`].
    pub fn old_broker_policy(mut self, p: OldBrokerPolicy) -> Self {
        self.member = self.member.old_broker_policy(p);
        self
    }

    /// Any other membership setting, e.g. `|m| m.metadata_max_age(d)`. The subscription is
    /// always the one given to [`subscribe`](Self::subscribe).
    pub fn configure_member(mut self, f: impl FnOnce(MemberBuilder) -> MemberBuilder) -> Self {
        self.member = f(self.member);
        self
    }

    /// `auto.offset.reset`: where a partition without a committed offset, or with an offset
    /// outside the log, starts. Default [`OffsetReset::Latest`].
    pub fn auto_offset_reset(mut self, reset: OffsetReset) -> Self {
        self.config.auto_offset_reset = reset;
        self
    }

    /// `enable.auto.commit`: commit positions every `auto.commit.interval.ms` inside `poll`,
    /// before a revocation and on close. Default `true` (as Kafka's Java client).
    pub fn enable_auto_commit(mut self, on: bool) -> Self {
        self.config.enable_auto_commit = on;
        self
    }

    /// `auto.commit.interval.ms`. Default 5 s; above zero when auto-commit is on, and at most
    /// `i32::MAX` ms (about 24.8 days), as in Kafka.
    pub fn auto_commit_interval(mut self, t: Duration) -> Self {
        self.config.auto_commit_interval = t;
        self
    }

    /// `max.poll.records`: most records one `poll` returns. Default 500.
    pub fn max_poll_records(mut self, n: usize) -> Self {
        self.config.max_poll_records = n;
        self
    }

    /// `fetch.min.bytes`: the broker holds a fetch until this much data is there (or
    /// `fetch.max.wait.ms` passes). Default 1.
    pub fn fetch_min_bytes(mut self, bytes: i32) -> Self {
        self.config.fetch_min_bytes = bytes;
        self
    }

    /// `fetch.max.bytes`: most data one fetch returns (Fetch v3+; a first batch larger than
    /// this is still returned, so the consumer makes progress). Default 50 MiB.
    pub fn fetch_max_bytes(mut self, bytes: i32) -> Self {
        self.config.fetch_max_bytes = bytes;
        self
    }

    /// `fetch.max.wait.ms`: how long the broker may hold a fetch waiting for
    /// `fetch.min.bytes`. Default 500 ms; at most `i32::MAX` ms (it is an int32 on the wire).
    pub fn fetch_max_wait(mut self, t: Duration) -> Self {
        self.config.fetch_max_wait = t;
        self
    }

    /// `max.partition.fetch.bytes`: most data per partition per fetch. Default 1 MiB.
    pub fn max_partition_fetch_bytes(mut self, bytes: i32) -> Self {
        self.config.max_partition_fetch_bytes = bytes;
        self
    }

    /// `isolation.level`. Default [`IsolationLevel::ReadUncommitted`].
    pub fn isolation_level(mut self, level: IsolationLevel) -> Self {
        self.config.isolation_level = level;
        self
    }

    /// Validates the configuration and creates the consumer (its member's heartbeat thread
    /// starts idle). No network call is made; the first [`Consumer::poll`] joins the group.
    pub fn build(self) -> Result<Consumer> {
        self.config.validate()?;
        if self.topics.is_empty() {
            return Err(Error::Config {
                property: "subscribe",
                problem: "at least one topic is needed".into(),
            });
        }
        // A name no topic can have would be subscribed to and silently assign nothing.
        for t in &self.topics {
            crate::names::check_topic("subscribe", t)?;
        }
        let member = self.member.topics(self.topics).build()?;
        Ok(Consumer {
            client: self.client,
            member,
            config: self.config,
            positions: Positions::default(),
            buffer: VecDeque::new(),
            fetcher: Fetcher::default(),
            last_auto_commit: Instant::now(),
            metadata_stale: true,
            last_metadata_refresh: None,
            rotation: 0,
            limits: DecodeLimits::default(),
        })
    }
}

impl Client {
    /// Starts building a consumer in group `group_id`.
    pub fn consumer(&self, group_id: &str) -> ConsumerBuilder {
        ConsumerBuilder::new(self.clone(), group_id)
    }
}
