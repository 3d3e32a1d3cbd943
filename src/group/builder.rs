//! [`MemberBuilder`]: one setter per Kafka consumer property over a [`MemberConfig`], checked
//! in [`build`](MemberBuilder::build) before any network call. The membership setters are
//! written once ([`member_setters`]) and shared with
//! [`ConsumerBuilder`](crate::ConsumerBuilder), whose config embeds a member's.

use super::config::MemberConfig;
use super::member::GroupMember;
use crate::client::Client;
use crate::error::Result;

/// The membership setters, for a builder whose [`MemberConfig`] is at `self.$path`: the same
/// names and docs on [`MemberBuilder`] and [`ConsumerBuilder`](crate::ConsumerBuilder), each a
/// one-line assignment, so that the two cannot drift apart.
macro_rules! member_setters {
    ($($path:ident).+) => {
        /// `group.instance.id`: makes this a static member (KIP-345); 1 to 249 characters of
        /// `[a-zA-Z0-9._-]`, not `.` or `..`. Default: none (a dynamic member).
        pub fn group_instance_id(mut self, id: impl Into<String>) -> Self {
            self.$($path).+.group_instance_id = Some(id.into());
            self
        }

        /// The topics to subscribe to (Kafka's `subscribe()`; no property), each a valid
        /// Kafka topic name (1 to 249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`).
        /// Default: none; a consumer needs at least one.
        pub fn subscribe<I, S>(mut self, topics: I) -> Self
        where
            I: IntoIterator<Item = S>,
            S: Into<String>,
        {
            self.$($path).+.topics = topics.into_iter().map(Into::into).collect();
            self
        }

        /// `session.timeout.ms`: how long the coordinator waits for a heartbeat before
        /// evicting the member; above zero, at most `i32::MAX` ms, and within the broker's
        /// `group.min/max.session.timeout.ms`. Default: 45 s.
        pub fn session_timeout(mut self, t: std::time::Duration) -> Self {
            self.$($path).+.session_timeout = t;
            self.$($path).+.classic_only_set.push("session.timeout.ms");
            self
        }

        /// `heartbeat.interval.ms`: time between heartbeats; above zero and below
        /// `session.timeout.ms` (a third of it is usual). Default: 3 s.
        pub fn heartbeat_interval(mut self, t: std::time::Duration) -> Self {
            self.$($path).+.heartbeat_interval = t;
            self.$($path).+.classic_only_set.push("heartbeat.interval.ms");
            self
        }

        /// `max.poll.interval.ms`: the longest the application may go between polls. Sent as
        /// the rebalance timeout (how long the group waits for each member to rejoin once a
        /// rebalance starts), and enforced as Java's consumer does: when the application has
        /// not polled for this long, the heartbeat thread takes the member out of the group
        /// (a dynamic member leaves; a static one stops heartbeating, so that its session
        /// times out; under the consumer protocol the leave heartbeat, epoch -1 or -2), logs
        /// a warning naming the interval, and the next poll reports
        /// [`GroupEvent::Lost`](crate::GroupEvent::Lost) and rejoins. A poll is a call to
        /// [`Consumer::poll`](crate::Consumer::poll), or for a bare
        /// [`GroupMember`](crate::GroupMember) to its `poll` or `join`; a call in progress is
        /// never late. Above zero, at most `i32::MAX` ms. Default: 300 s.
        pub fn max_poll_interval(mut self, t: std::time::Duration) -> Self {
            self.$($path).+.max_poll_interval = t;
            self
        }

        /// `retry.backoff.ms`: pause before retrying a failed group request (coordinator
        /// lookup, join, heartbeat after an error); never slept past the caller's deadline.
        /// Default: the client's
        /// ([`ClientBuilder::retry_backoff`](crate::ClientBuilder::retry_backoff), 100 ms
        /// unless set there).
        pub fn retry_backoff(mut self, t: std::time::Duration) -> Self {
            self.$($path).+.retry_backoff = Some(t);
            self
        }

        /// `metadata.max.age.ms`: how often the leader re-checks the subscribed topics for
        /// partition changes (`Duration::MAX`: never by age). A restarted static leader told
        /// to keep the group's assignment (KIP-814) does not wait for this: it checks at once
        /// that the assignment covers every partition (see
        /// [`GroupMember`](crate::group::GroupMember)). Default: 300 s.
        pub fn metadata_max_age(mut self, t: std::time::Duration) -> Self {
            self.$($path).+.metadata_max_age = t;
            self
        }

        /// `partition.assignment.strategy`, in preference order; at least one, names
        /// distinct. Default: `[range]`
        /// ([`RangeAssignor`](crate::group::RangeAssignor)).
        pub fn assignors(
            mut self,
            assignors: Vec<std::sync::Arc<dyn crate::group::Assignor>>,
        ) -> Self {
            self.$($path).+.assignors = assignors;
            self.$($path).+.classic_only_set.push("partition.assignment.strategy");
            self
        }

        /// `client.rack`, sent in the subscription for rack-aware assignors. Default: none.
        pub fn client_rack(mut self, rack: impl Into<String>) -> Self {
            self.$($path).+.client_rack = Some(rack.into());
            self
        }

        /// How long `close` (and drop) of the member or consumer may take at most: a
        /// consumer's final auto-commit, stopping the heartbeat thread (a heartbeat in flight
        /// is cut off) and, for a dynamic member, sending LeaveGroup; a static member's close
        /// sends nothing and is quick. Like the Java consumer's `close(Duration)` (no
        /// property). Default: 30 s, as there.
        pub fn close_timeout(mut self, t: std::time::Duration) -> Self {
            self.$($path).+.close_timeout = t;
            self
        }

        /// What to do on brokers older than 2.3, which lack static membership (no Kafka
        /// property). Default:
        /// [`OldBrokerPolicy::Error`](crate::group::OldBrokerPolicy::Error).
        pub fn old_broker_policy(mut self, p: crate::group::OldBrokerPolicy) -> Self {
            self.$($path).+.old_broker_policy = p;
            self
        }

        /// `group.protocol`: [`GroupProtocol::Classic`](crate::GroupProtocol::Classic)
        /// (JoinGroup/SyncGroup, assignments made by a member) or
        /// [`GroupProtocol::Consumer`](crate::GroupProtocol::Consumer) (KIP-848, Kafka 4.0+:
        /// ConsumerGroupHeartbeat, assignments made by the coordinator, always incremental).
        /// With `Consumer`, `session.timeout.ms`, `heartbeat.interval.ms` and
        /// `partition.assignment.strategy` belong to the broker and setting them is a build
        /// error; see [`GroupMember`](crate::group::GroupMember) for how static members
        /// differ. Default: `Classic`, as in Kafka 4.x.
        pub fn group_protocol(mut self, p: crate::GroupProtocol) -> Self {
            self.$($path).+.group_protocol = p;
            self
        }

        /// `group.remote.assignor`: the coordinator's assignor under
        /// `group.protocol=consumer` — `uniform` or `range` on Apache Kafka (a broker may have
        /// more). Only with the consumer protocol (a build error otherwise). Default: none,
        /// the broker's first `group.consumer.assignors` (uniform).
        pub fn group_remote_assignor(mut self, name: impl Into<String>) -> Self {
            self.$($path).+.remote_assignor = Some(name.into());
            self
        }

        /// What a `group.protocol=consumer` member does on a coordinator without that protocol
        /// (no Kafka property; Java's consumer fails). Default:
        /// [`GroupProtocolPolicy::Error`](crate::group::GroupProtocolPolicy::Error).
        pub fn group_protocol_policy(mut self, p: crate::group::GroupProtocolPolicy) -> Self {
            self.$($path).+.group_protocol_policy = p;
            self
        }

        /// Under `group.protocol=consumer`, how long a static member keeps asking to join while
        /// the coordinator answers `UNRELEASED_INSTANCE_ID` — another member holds the
        /// `group.instance.id` and has not left — before it stops with
        /// [`Error::InstanceInUse`](crate::Error::InstanceInUse) (no Kafka property; Java's
        /// consumer fails at once). A process restarted after a crash (its predecessor sent no
        /// leave heartbeat) gets in once the predecessor's session expires, so the default is
        /// the broker's default `group.consumer.session.timeout.ms`; a second process running
        /// with the same id is refused after this long, and the running one is left alone.
        /// Default: 45 s.
        pub fn unreleased_instance_id_timeout(mut self, t: std::time::Duration) -> Self {
            self.$($path).+.unreleased_instance_id_timeout = t;
            self
        }

        /// What to do when a subscribed topic does not exist (no Kafka property): report it
        /// ([`GroupEvent::TopicsMissing`](crate::GroupEvent::TopicsMissing) and a warning) and
        /// wait for it, or return [`Error::TopicsMissing`](crate::Error::TopicsMissing). Either
        /// way the member picks the topic up once it is created. Default:
        /// [`MissingTopicPolicy::Warn`](crate::group::MissingTopicPolicy::Warn).
        pub fn missing_topic_policy(mut self, p: crate::group::MissingTopicPolicy) -> Self {
            self.$($path).+.missing_topic_policy = p;
            self
        }

        /// Applies `setting` if it is a group member's; gives it back otherwise.
        fn apply_member_setting(
            mut self,
            setting: crate::properties::Setting,
        ) -> (Self, Option<crate::properties::Setting>) {
            use crate::properties::Setting as S;
            self = match setting {
                S::GroupId(id) => {
                    self.$($path).+.group_id = id;
                    self
                }
                S::GroupInstanceId(id) => self.group_instance_id(id),
                S::SessionTimeout(t) => self.session_timeout(t),
                S::HeartbeatInterval(t) => self.heartbeat_interval(t),
                S::MaxPollInterval(t) => self.max_poll_interval(t),
                S::RetryBackoff(t) => self.retry_backoff(t),
                S::MetadataMaxAge(t) => self.metadata_max_age(t),
                S::Assignors(a) => self.assignors(a),
                S::ClientRack(rack) => self.client_rack(rack),
                S::GroupProtocol(p) => self.group_protocol(p),
                S::GroupRemoteAssignor(name) => self.group_remote_assignor(name),
                other => return (self, Some(other)),
            };
            (self, None)
        }
    };
}
pub(crate) use member_setters;

/// Builds a [`GroupMember`]; each setter names the Kafka consumer property it mirrors and its
/// default. Start with [`Client::member`].
#[derive(Debug, Clone)]
pub struct MemberBuilder {
    client: Client,
    config: MemberConfig,
}

impl MemberBuilder {
    /// A builder over `config` as it is (the consumer's, already filled in).
    pub(crate) fn with_config(client: Client, config: MemberConfig) -> Self {
        MemberBuilder { client, config }
    }

    member_setters!(config);

    /// Sets a setting by its Kafka property name, as found in a `client.properties` file (see
    /// [`ClientBuilder::property`](crate::ClientBuilder::property) for one file given to every
    /// builder). This builder's: `group.id`, `group.instance.id`, `session.timeout.ms`,
    /// `heartbeat.interval.ms`, `max.poll.interval.ms`, `retry.backoff.ms`,
    /// `metadata.max.age.ms`, `partition.assignment.strategy` (`range`, `roundrobin`,
    /// `sticky`, `cooperative-sticky` or their Java class names, comma-separated), `client.rack`,
    /// `group.protocol`, `group.remote.assignor`; the client's, a consumer's fetch settings and
    /// a producer's are skipped here. An unknown name or a value that does not parse is an
    /// error naming it, and leaves the builder as it was.
    pub fn property(&mut self, key: &str, value: &str) -> Result<&mut Self> {
        let setting = crate::properties::parse(key, value)?;
        let (builder, rest) = self.clone().apply_member_setting(setting);
        if rest.is_some() {
            log::debug!("{key}: not a group member's setting; skipped by the member builder");
        }
        *self = builder;
        Ok(self)
    }

    /// Validates the configuration and builds the member. No network call is made and no
    /// thread started: the heartbeat thread of the member's group protocol starts with its
    /// first join.
    pub fn build(self) -> Result<GroupMember> {
        self.config.validate()?;
        GroupMember::new(self.client, self.config)
    }
}

impl Client {
    /// Starts building a member of consumer group `group_id` (`group.id`: required, not
    /// empty).
    pub fn member(&self, group_id: &str) -> MemberBuilder {
        MemberBuilder::with_config(self.clone(), MemberConfig::new(group_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    fn client(retry_backoff: Duration) -> Client {
        Client::builder()
            .bootstrap_servers("localhost:1")
            .retry_backoff(retry_backoff)
            .build()
            .unwrap()
    }

    #[test]
    fn retry_backoff_is_the_clients_unless_set_on_the_member() {
        let c = client(Duration::from_millis(7));
        let b = c.member("g");
        assert_eq!(b.config.retry_backoff, None);
        assert_eq!(b.config.retry_backoff(&c), Duration::from_millis(7));
        let b = b.retry_backoff(Duration::from_millis(250));
        assert_eq!(b.config.retry_backoff(&c), Duration::from_millis(250));
    }

    #[test]
    fn each_setter_sets_its_field() {
        let c = client(Duration::from_millis(100));
        let b = c
            .member("g")
            .group_instance_id("w-1")
            .subscribe(["a", "b"])
            .session_timeout(Duration::from_secs(10))
            .heartbeat_interval(Duration::from_secs(2))
            .max_poll_interval(Duration::from_secs(20))
            .metadata_max_age(Duration::from_secs(30))
            .assignors(vec![Arc::new(crate::group::RoundRobinAssignor)])
            .client_rack("r1")
            .close_timeout(Duration::from_secs(5))
            .old_broker_policy(crate::group::OldBrokerPolicy::FallBackToDynamic)
            .missing_topic_policy(crate::group::MissingTopicPolicy::Error);
        let m = &b.config;
        assert_eq!(m.group_id, "g");
        assert_eq!(m.group_instance_id.as_deref(), Some("w-1"));
        assert_eq!(m.topics, ["a", "b"]);
        assert_eq!(m.session_timeout, Duration::from_secs(10));
        assert_eq!(m.heartbeat_interval, Duration::from_secs(2));
        assert_eq!(m.max_poll_interval, Duration::from_secs(20));
        assert_eq!(m.metadata_max_age, Duration::from_secs(30));
        assert_eq!(m.assignors.len(), 1);
        assert_eq!(m.assignors[0].name(), "roundrobin");
        assert_eq!(m.client_rack.as_deref(), Some("r1"));
        assert_eq!(m.close_timeout, Duration::from_secs(5));
        assert_eq!(
            m.old_broker_policy,
            crate::group::OldBrokerPolicy::FallBackToDynamic
        );
        assert_eq!(m.missing_topic_policy, crate::group::MissingTopicPolicy::Error);
        b.build().unwrap();
    }
}
