//! Member configuration, validated before any network call.

use super::assignor::{Assignor, RangeAssignor};
use super::GroupProtocol;
use crate::client::Client;
use crate::error::{Error, Result};
use std::sync::Arc;
use std::time::Duration;

/// What to do when the coordinator is too old for static membership (Kafka < 2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OldBrokerPolicy {
    /// Refuse to join, with an error naming the APIs and versions missing. The default:
    /// silently becoming a dynamic member would give up the guarantees the application chose
    /// static membership for.
    #[default]
    Error,
    /// Join as a dynamic member (logged once as a warning).
    FallBackToDynamic,
}

/// What a member configured with `group.protocol=consumer` does when its coordinator does not
/// serve that protocol (Kafka before 4.0, 3.7/3.8 with it disabled, or a broker that
/// advertises ConsumerGroupHeartbeat and still refuses it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupProtocolPolicy {
    /// Refuse to join, with an error naming what the broker lacks. The default: the two
    /// protocols differ in who assigns partitions and how a duplicate `group.instance.id` is
    /// treated, so the switch is the application's to make.
    #[default]
    Error,
    /// Join with the classic protocol instead (logged once as a warning).
    FallBackToClassic,
}

/// What a member does when a topic it subscribes to does not exist (no Kafka property; Java's
/// consumer waits silently, logging the metadata warning at most).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissingTopicPolicy {
    /// Report it with [`GroupEvent::TopicsMissing`](crate::GroupEvent::TopicsMissing) and a
    /// warning, and wait for the topic: the member picks it up when it is created. The default.
    #[default]
    Warn,
    /// Return [`Error::TopicsMissing`] from the poll that finds it (once per generation); the
    /// member stays in its group and still picks the topic up when it is created.
    Error,
}

/// A member's settings; see [`MemberBuilder`](super::MemberBuilder) for each one's Kafka
/// property and default. Crate-private: users configure a member through `MemberBuilder` (or
/// `ConsumerBuilder`, whose config embeds this one), so a new setting never breaks them.
#[derive(Debug, Clone)]
pub(crate) struct MemberConfig {
    /// `group.id`.
    pub group_id: String,
    /// `group.instance.id`; `Some` makes a static member.
    pub group_instance_id: Option<String>,
    /// `session.timeout.ms`.
    pub session_timeout: Duration,
    /// `heartbeat.interval.ms`.
    pub heartbeat_interval: Duration,
    /// `max.poll.interval.ms`, sent as the rebalance timeout and held against the
    /// application's polls by the heartbeat threads.
    pub max_poll_interval: Duration,
    /// `retry.backoff.ms`; `None`: the client's, so that one setting serves every part of the
    /// client unless the member is told otherwise (read it with [`Self::retry_backoff`]).
    pub retry_backoff: Option<Duration>,
    /// `metadata.max.age.ms`: how often the leader re-checks subscribed topics.
    pub metadata_max_age: Duration,
    /// `partition.assignment.strategy`, in preference order.
    pub assignors: Vec<Arc<dyn Assignor>>,
    /// The subscription (`subscribe()`).
    pub topics: Vec<String>,
    /// `client.rack`, sent in the subscription.
    pub client_rack: Option<String>,
    /// What to do on brokers too old for static membership.
    pub old_broker_policy: OldBrokerPolicy,
    /// `close.timeout.ms`-style bound on [`GroupMember::close`](super::GroupMember::close) and
    /// drop (Java's consumer closes within 30 s by default).
    pub close_timeout: Duration,
    /// What to do about a subscribed topic that does not exist.
    pub missing_topic_policy: MissingTopicPolicy,
    /// `group.protocol`.
    pub group_protocol: GroupProtocol,
    /// `group.remote.assignor`: the coordinator's assignor under the consumer protocol.
    pub remote_assignor: Option<String>,
    /// What to do when the coordinator lacks the consumer protocol.
    pub group_protocol_policy: GroupProtocolPolicy,
    /// How long a consumer-protocol member retries `UNRELEASED_INSTANCE_ID`.
    pub unreleased_instance_id_timeout: Duration,
    /// A share group's member (KIP-932), for a share consumer: ShareGroupHeartbeat instead of
    /// ConsumerGroupHeartbeat, no static membership, no fallback.
    pub share: bool,
    /// The properties set explicitly (by their setters) that the consumer protocol moves to
    /// the broker, so that setting them with it is an error rather than silently ignored.
    pub classic_only_set: Vec<&'static str>,
}

impl Default for MemberConfig {
    /// The Java consumer's defaults (`retry.backoff.ms` left to the client); `group.id` is
    /// empty, which [`validate`](Self::validate) refuses.
    fn default() -> Self {
        MemberConfig {
            group_id: String::new(),
            group_instance_id: None,
            session_timeout: Duration::from_millis(45_000),
            heartbeat_interval: Duration::from_millis(3_000),
            max_poll_interval: Duration::from_millis(300_000),
            retry_backoff: None,
            metadata_max_age: Duration::from_millis(300_000),
            assignors: vec![Arc::new(RangeAssignor)],
            topics: Vec::new(),
            client_rack: None,
            old_broker_policy: OldBrokerPolicy::Error,
            close_timeout: Duration::from_secs(30),
            missing_topic_policy: MissingTopicPolicy::Warn,
            group_protocol: GroupProtocol::Classic,
            remote_assignor: None,
            group_protocol_policy: GroupProtocolPolicy::Error,
            unreleased_instance_id_timeout: Duration::from_secs(45),
            share: false,
            classic_only_set: Vec::new(),
        }
    }
}

impl MemberConfig {
    /// The defaults, in group `group_id` (the one setting without a default).
    pub fn new(group_id: impl Into<String>) -> Self {
        MemberConfig {
            group_id: group_id.into(),
            ..Default::default()
        }
    }

    /// This member's `retry.backoff.ms`: its own if set, else `client`'s.
    pub fn retry_backoff(&self, client: &Client) -> Duration {
        self.retry_backoff.unwrap_or_else(|| client.retry_backoff())
    }

    /// Checks every setting the way Kafka's client and broker would, so that mistakes surface
    /// before the first request rather than as a broker error mid-join.
    pub fn validate(&self) -> Result<()> {
        let err = |property: &'static str, problem: String| Err(Error::Config { property, problem });
        if self.group_id.is_empty() {
            return err("group.id", "must not be empty".into());
        }
        if let Some(id) = &self.group_instance_id {
            validate_instance_id(id)?;
        }
        let ms = |d: Duration| d.as_millis();
        if self.session_timeout.is_zero() || ms(self.session_timeout) > i32::MAX as u128 {
            return err(
                "session.timeout.ms",
                format!("{} ms is out of range", ms(self.session_timeout)),
            );
        }
        if self.heartbeat_interval.is_zero() || self.heartbeat_interval >= self.session_timeout {
            return err(
                "heartbeat.interval.ms",
                format!(
                    "must be above 0 and below session.timeout.ms ({} ms >= {} ms)",
                    ms(self.heartbeat_interval),
                    ms(self.session_timeout)
                ),
            );
        }
        if self.max_poll_interval.is_zero() || ms(self.max_poll_interval) > i32::MAX as u128 {
            return err(
                "max.poll.interval.ms",
                format!("{} ms is out of range", ms(self.max_poll_interval)),
            );
        }
        if self.assignors.is_empty() {
            return err(
                "partition.assignment.strategy",
                "at least one assignor is needed".into(),
            );
        }
        let mut names: Vec<&str> = self.assignors.iter().map(|a| a.name()).collect();
        names.sort_unstable();
        if names.windows(2).any(|w| w[0] == w[1]) {
            return err(
                "partition.assignment.strategy",
                format!("duplicate assignor names in {names:?}"),
            );
        }
        // A name the broker cannot have would otherwise be subscribed to and silently match
        // nothing. Named after the setter: the subscription is no Kafka property.
        for t in &self.topics {
            crate::names::check_topic("subscribe", t)?;
        }
        self.validate_group_protocol()
    }

    /// The consumer protocol's rules (Kafka's `ConsumerConfig` checks the same): the broker
    /// owns the session timeout, the heartbeat interval and the assignment, so setting them
    /// here would be silently ignored; the remote assignor means nothing to classic.
    fn validate_group_protocol(&self) -> Result<()> {
        let err = |property: &'static str, problem: String| Err(Error::Config { property, problem });
        match self.group_protocol {
            GroupProtocol::Consumer => {
                if let Some(property) = self.classic_only_set.first() {
                    let broker = match *property {
                        "session.timeout.ms" => "the broker's group.consumer.session.timeout.ms",
                        "heartbeat.interval.ms" => "the broker's group.consumer.heartbeat.interval.ms",
                        _ => "the coordinator's assignor (group.remote.assignor)",
                    };
                    return err(
                        property,
                        format!(
                            "cannot be set with group.protocol=consumer: {broker} decides it; \
                             remove the setting or use group.protocol=classic"
                        ),
                    );
                }
                if let Some(name) = &self.remote_assignor {
                    if name.is_empty()
                        || !name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
                    {
                        return err(
                            "group.remote.assignor",
                            format!("{name:?} is not an assignor name (Kafka's are uniform and range)"),
                        );
                    }
                }
                Ok(())
            }
            GroupProtocol::Classic if self.remote_assignor.is_some() => err(
                "group.remote.assignor",
                "is only used with group.protocol=consumer; with classic, set \
                 partition.assignment.strategy (assignors)"
                    .into(),
            ),
            GroupProtocol::Classic => Ok(()),
        }
    }
}

/// Kafka's rule for `group.instance.id` (and topic names): 1 to 249 characters of
/// `[a-zA-Z0-9._-]`, not `.` or `..`.
fn validate_instance_id(id: &str) -> Result<()> {
    crate::names::check("group.instance.id", id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_ids_follow_kafka_rules() {
        assert!(validate_instance_id("worker-1.eu_west").is_ok());
        assert!(validate_instance_id(&"a".repeat(249)).is_ok());
        assert!(validate_instance_id(&"a".repeat(250)).is_err());
        assert!(validate_instance_id("").is_err());
        assert!(validate_instance_id("a b").is_err());
        assert!(validate_instance_id("é").is_err());
        assert!(validate_instance_id("..").is_err());
    }

    #[test]
    fn heartbeat_must_be_below_session() {
        let mut c = MemberConfig::new("g");
        assert!(c.validate().is_ok());
        c.heartbeat_interval = c.session_timeout;
        let e = c.validate().unwrap_err();
        assert!(
            matches!(
                e,
                Error::Config {
                    property: "heartbeat.interval.ms",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn other_checks() {
        let mut c = MemberConfig::new("");
        assert!(c.validate().is_err());
        c = MemberConfig::new("g");
        c.assignors.clear();
        assert!(c.validate().is_err());
        c = MemberConfig::new("g");
        c.assignors.push(Arc::new(RangeAssignor));
        assert!(c.validate().is_err());
        for bad in ["bad topic!", "", ".."] {
            c = MemberConfig::new("g");
            c.topics = vec!["ok".into(), bad.into()];
            assert!(
                matches!(
                    c.validate(),
                    Err(Error::Config {
                        property: "subscribe",
                        ..
                    })
                ),
                "{bad}"
            );
        }
        c = MemberConfig::new("g");
        c.session_timeout = Duration::MAX;
        assert!(matches!(
            c.validate(),
            Err(Error::Config {
                property: "session.timeout.ms",
                ..
            })
        ));
        c = MemberConfig::new("g");
        c.max_poll_interval = Duration::from_secs(u64::MAX);
        assert!(matches!(
            c.validate(),
            Err(Error::Config {
                property: "max.poll.interval.ms",
                ..
            })
        ));
        c = MemberConfig::new("g");
        c.remote_assignor = Some("uniform".into());
        assert!(matches!(
            c.validate(),
            Err(Error::Config {
                property: "group.remote.assignor",
                ..
            })
        ));
        c = MemberConfig::new("g");
        c.group_instance_id = Some("bad id".into());
        assert!(matches!(
            c.validate(),
            Err(Error::Config {
                property: "group.instance.id",
                ..
            })
        ));
    }

    #[test]
    fn the_consumer_protocol_refuses_what_the_broker_decides() {
        let mut c = MemberConfig::new("g");
        c.group_protocol = GroupProtocol::Consumer;
        c.remote_assignor = Some("uniform".into());
        assert!(c.validate().is_ok());
        for property in [
            "session.timeout.ms",
            "heartbeat.interval.ms",
            "partition.assignment.strategy",
        ] {
            let mut c = c.clone();
            c.classic_only_set.push(property);
            let e = c.validate().unwrap_err();
            assert!(
                matches!(&e, Error::Config { property: p, problem } if *p == property && problem.contains("group.protocol=consumer")),
                "{e}"
            );
        }
        c.remote_assignor = Some("no such!".into());
        assert!(matches!(
            c.validate(),
            Err(Error::Config {
                property: "group.remote.assignor",
                ..
            })
        ));
        // Classic takes them as before.
        let mut c = MemberConfig::new("g");
        c.classic_only_set = vec!["session.timeout.ms", "heartbeat.interval.ms"];
        assert!(c.validate().is_ok());
    }
}
