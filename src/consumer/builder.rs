//! [`ConsumerBuilder`]: one setter per Kafka consumer property over a [`ConsumerConfig`]
//! (which embeds the member's), checked in [`build`](ConsumerBuilder::build) before any network
//! call.

use super::config::{ConsumerConfig, IsolationLevel, OffsetReset};
use super::positions::Positions;
use super::prefetch::FetchBuffer;
use super::workers::Workers;
use super::Consumer;
use crate::client::Client;
use crate::error::Result;
use crate::group::{member_setters, MemberBuilder, MemberConfig, TopicPartition};
use crate::records::DecodeLimits;
use std::time::{Duration, Instant};

/// Builds a [`Consumer`]; every setter names the Kafka consumer property it mirrors and its
/// default. The membership setters are the same as [`MemberBuilder`]'s. Start with
/// [`Client::consumer`].
#[derive(Debug, Clone)]
pub struct ConsumerBuilder {
    client: Client,
    config: ConsumerConfig,
}

impl ConsumerBuilder {
    pub(super) fn new(client: Client, group_id: &str) -> Self {
        ConsumerBuilder {
            client,
            config: ConsumerConfig {
                member: MemberConfig::new(group_id),
                ..ConsumerConfig::default()
            },
        }
    }

    member_setters!(config.member);

    /// Sets a setting by its Kafka property name, as found in a `client.properties` file (see
    /// [`ClientBuilder::property`](crate::ClientBuilder::property) for one file given to every
    /// builder). This builder's: a group member's
    /// ([`MemberBuilder::property`](crate::MemberBuilder::property); `group.id` gives a
    /// consumer without a group one), and `auto.offset.reset`, `enable.auto.commit`,
    /// `auto.commit.interval.ms`, `max.poll.records`, `fetch.min.bytes`, `fetch.max.bytes`,
    /// `fetch.max.wait.ms`, `max.partition.fetch.bytes`, `isolation.level`,
    /// `queued.max.messages.kbytes`; the client's and a producer's are skipped here. An unknown
    /// name or a value that does not parse is an error naming it, and leaves the builder as it
    /// was.
    pub fn property(&mut self, key: &str, value: &str) -> Result<&mut Self> {
        use crate::properties::Setting as S;
        let setting = crate::properties::parse(key, value)?;
        let mut builder = self.clone();
        if matches!(setting, S::GroupId(_)) {
            builder.config.has_group = true;
        }
        let (builder, rest) = builder.apply_member_setting(setting);
        *self = match rest {
            None => builder,
            Some(S::AutoOffsetReset(r)) => builder.auto_offset_reset(r),
            Some(S::EnableAutoCommit(on)) => builder.enable_auto_commit(on),
            Some(S::AutoCommitInterval(t)) => builder.auto_commit_interval(t),
            Some(S::MaxPollRecords(n)) => builder.max_poll_records(n),
            Some(S::FetchMinBytes(n)) => builder.fetch_min_bytes(n),
            Some(S::FetchMaxBytes(n)) => builder.fetch_max_bytes(n),
            Some(S::FetchMaxWait(t)) => builder.fetch_max_wait(t),
            Some(S::MaxPartitionFetchBytes(n)) => builder.max_partition_fetch_bytes(n),
            Some(S::IsolationLevel(l)) => builder.isolation_level(l),
            Some(S::QueuedMaxMessagesKbytes(n)) => builder.queued_max_messages_kbytes(n),
            Some(_) => {
                log::debug!("{key}: not a consumer setting; skipped by the consumer builder");
                builder
            }
        };
        Ok(self)
    }

    /// Consumes exactly `partitions`, chosen by the application, instead of subscribing (Java
    /// `assign`, rdkafka `assign`): no group membership, no JoinGroup, no heartbeats, no
    /// rebalances. With a group (from [`Client::consumer`]) commits and committed offsets go to
    /// that group as a consumer outside any generation (generation -1, no member id), which the
    /// coordinator accepts only while the group has no active members; without one (from
    /// [`Client::consumer_without_group`]) partitions start where `auto.offset.reset` or a seek
    /// puts them and commits fail with [`Error::Config`](crate::Error::Config) for `group.id`.
    /// Either this or `subscribe`; change the partitions later with [`Consumer::assign`].
    /// Topic names and partition numbers are checked by `build`.
    pub fn assign(mut self, partitions: impl IntoIterator<Item = TopicPartition>) -> Self {
        self.config.manual = Some(partitions.into_iter().collect());
        self
    }

    /// `auto.offset.reset`: where a partition without a committed offset, or with an offset
    /// outside the log, starts. Default: [`OffsetReset::Latest`].
    pub fn auto_offset_reset(mut self, reset: OffsetReset) -> Self {
        self.config.auto_offset_reset = reset;
        self
    }

    /// `enable.auto.commit`: commit positions every `auto.commit.interval.ms` inside `poll`,
    /// before a revocation and on close. Default: `true` (as Kafka's Java client).
    pub fn enable_auto_commit(mut self, on: bool) -> Self {
        self.config.enable_auto_commit = on;
        self
    }

    /// `auto.commit.interval.ms`: above zero when auto-commit is on, and at most `i32::MAX` ms
    /// (about 24.8 days), as in Kafka. Default: 5 s.
    pub fn auto_commit_interval(mut self, t: Duration) -> Self {
        self.config.auto_commit_interval = t;
        self
    }

    /// `max.poll.records`: most records one `poll` returns; at least 1. Default: 500.
    pub fn max_poll_records(mut self, n: usize) -> Self {
        self.config.max_poll_records = n;
        self
    }

    /// `fetch.min.bytes`: the broker holds a fetch until this much data is there (or
    /// `fetch.max.wait.ms` passes); not negative. Default: 1.
    pub fn fetch_min_bytes(mut self, bytes: usize) -> Self {
        self.config.fetch_min_bytes = bytes;
        self
    }

    /// `fetch.max.bytes`: most data one fetch returns (Fetch v3+; a first batch larger than
    /// this is still returned, so the consumer makes progress); above zero. Default: 50 MiB.
    pub fn fetch_max_bytes(mut self, bytes: usize) -> Self {
        self.config.fetch_max_bytes = bytes;
        self
    }

    /// `fetch.max.wait.ms`: how long the broker may hold a fetch waiting for
    /// `fetch.min.bytes`; at most `i32::MAX` ms (it is an int32 on the wire). Default: 500 ms.
    pub fn fetch_max_wait(mut self, t: Duration) -> Self {
        self.config.fetch_max_wait = t;
        self
    }

    /// `max.partition.fetch.bytes`: most data per partition per fetch; above zero. Default: 1 MiB.
    pub fn max_partition_fetch_bytes(mut self, bytes: usize) -> Self {
        self.config.max_partition_fetch_bytes = bytes;
        self
    }

    /// `isolation.level`: whether records of open and aborted transactions are returned.
    /// Default: [`IsolationLevel::ReadUncommitted`].
    pub fn isolation_level(mut self, level: IsolationLevel) -> Self {
        self.config.isolation_level = level;
        self
    }

    /// `queued.max.messages.kbytes` (librdkafka's name; the Java consumer has no such bound):
    /// most KiB of records the consumer fetches ahead and holds until `poll` hands them out,
    /// across all partitions; 1 to 2,097,151. Default: 65,536 (64 MiB, librdkafka's).
    ///
    /// The consumer fetches from every leader at once, on threads of its own, and keeps doing
    /// so between polls while the application processes records, until this much is buffered
    /// (counted as decoded: payload, headers and per-record overhead, plus what fetches in
    /// flight asked for). Then it sends no fetch until `poll` has handed enough out:
    /// backpressure on a slow application. Like librdkafka's it may be overshot by one answer,
    /// since a broker returns a first batch larger than asked for whole, and by the
    /// decompressed size of compressed batches. Chosen over Java's model (at most
    /// `fetch.max.bytes` per fetch in flight, one fetch per broker, each partition fetched
    /// only once drained) because it bounds the whole buffer by one number whatever the
    /// number of partitions and leaders, which is what a memory budget needs.
    pub fn queued_max_messages_kbytes(mut self, kbytes: usize) -> Self {
        self.config.queued_max_messages_kbytes = kbytes;
        self
    }

    /// Validates the configuration and creates the consumer (its member's heartbeat thread
    /// starts idle). No network call is made; the first [`Consumer::poll`] joins the group.
    pub fn build(mut self) -> Result<Consumer> {
        self.config.validate()?;
        // Nothing to commit to (Java turns enable.auto.commit off without a group.id too).
        if !self.config.has_group {
            self.config.enable_auto_commit = false;
        }
        let member = if self.config.has_group {
            Some(MemberBuilder::with_config(self.client.clone(), self.config.member.clone()).build()?)
        } else {
            None
        };
        let mut positions = Positions::default();
        if let Some(partitions) = &self.config.manual {
            positions.assign(partitions);
        }
        let limits = DecodeLimits::default();
        let workers = Workers::new(self.client.clone(), self.config.isolation_level, limits);
        let buffer = FetchBuffer::new(self.config.queued_max_bytes());
        Ok(Consumer {
            client: self.client,
            wakeup: member
                .as_ref()
                .map_or_else(Default::default, |m| m.wakeup().clone()),
            member,
            config: self.config,
            positions,
            buffer,
            workers,
            deferred: None,
            last_auto_commit: Instant::now(),
            metadata_stale: true,
            last_metadata_refresh: None,
            rotation: 0,
            lookup_topics: Vec::new(),
            listener: None,
            in_listener: false,
            closed: false,
        })
    }
}

impl Client {
    /// Starts building a consumer in group `group_id` (`group.id`: required, not empty).
    pub fn consumer(&self, group_id: &str) -> ConsumerBuilder {
        ConsumerBuilder::new(self.clone(), group_id)
    }

    /// Starts building a consumer without a group (Java: no `group.id`), which reads the
    /// partitions given to [`ConsumerBuilder::assign`] and commits nothing (`enable.auto.commit`
    /// is off whatever it is set to).
    pub fn consumer_without_group(&self) -> ConsumerBuilder {
        let mut b = ConsumerBuilder::new(self.clone(), "");
        b.config.has_group = false;
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::{OldBrokerPolicy, RoundRobinAssignor};
    use std::sync::Arc;

    fn client() -> Client {
        Client::builder()
            .bootstrap_servers("localhost:1")
            .retry_backoff(Duration::from_millis(7))
            .build()
            .unwrap()
    }

    #[test]
    fn a_properties_file_configures_a_consumer() {
        let c = client();
        let mut b = c.consumer_without_group();
        for (k, v) in crate::properties::JAVA_FILE {
            b.property(k, v).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
        }
        let cfg = &b.config;
        assert!(cfg.has_group, "group.id gives the consumer its group");
        assert_eq!(cfg.member.group_id, "billing");
        assert_eq!(cfg.member.group_instance_id.as_deref(), Some("billing-1"));
        assert_eq!(cfg.member.session_timeout, Duration::from_secs(10));
        assert_eq!(cfg.member.assignors[0].name(), "cooperative-sticky");
        assert_eq!(cfg.auto_offset_reset, OffsetReset::Earliest);
        assert!(!cfg.enable_auto_commit);
        assert_eq!(cfg.max_poll_records, 50);
        assert_eq!(cfg.isolation_level, IsolationLevel::ReadCommitted);
        b.subscribe(["t"]).build().unwrap();
    }

    #[test]
    fn a_properties_file_configures_a_member() {
        let c = client();
        let mut b = c.member("g");
        for (k, v) in crate::properties::JAVA_FILE {
            b.property(k, v).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
        }
        let m = b.clone().subscribe(["t"]).build().unwrap();
        assert_eq!(m.group_id(), "billing");
    }

    #[test]
    fn a_bad_property_is_an_error_naming_it_and_leaves_the_builder_as_it_was() {
        let c = client();
        let mut b = c.consumer("g");
        b.property("max.poll.records", "7").unwrap();
        let e = b.property("max.poll.records", "many").unwrap_err();
        assert!(e.to_string().contains("max.poll.records"), "{e}");
        let e = b.property("auto.offset.rest", "earliest").unwrap_err();
        assert!(e.to_string().contains("did you mean `auto.offset.reset`?"), "{e}");
        assert_eq!(b.config.max_poll_records, 7);
        assert_eq!(b.config.auto_offset_reset, OffsetReset::Latest);
    }

    #[test]
    fn retry_backoff_is_the_clients_unless_set_on_the_consumer() {
        let c = client();
        let b = c.consumer("g");
        assert_eq!(b.config.member.retry_backoff(&c), Duration::from_millis(7));
        let b = b.retry_backoff(Duration::from_millis(250));
        assert_eq!(b.config.member.retry_backoff(&c), Duration::from_millis(250));
    }

    #[test]
    fn every_membership_setter_sets_the_embedded_member_config() {
        let b = client()
            .consumer("g")
            .group_instance_id("w-1")
            .subscribe(["a", "b"])
            .session_timeout(Duration::from_secs(10))
            .heartbeat_interval(Duration::from_secs(2))
            .max_poll_interval(Duration::from_secs(20))
            .retry_backoff(Duration::from_secs(1))
            .metadata_max_age(Duration::from_secs(30))
            .assignors(vec![Arc::new(RoundRobinAssignor)])
            .client_rack("r1")
            .close_timeout(Duration::from_secs(5))
            .old_broker_policy(OldBrokerPolicy::FallBackToDynamic)
            .max_poll_records(7);
        let m = &b.config.member;
        assert_eq!(m.group_id, "g");
        assert_eq!(m.group_instance_id.as_deref(), Some("w-1"));
        assert_eq!(m.topics, ["a", "b"]);
        assert_eq!(m.session_timeout, Duration::from_secs(10));
        assert_eq!(m.heartbeat_interval, Duration::from_secs(2));
        assert_eq!(m.max_poll_interval, Duration::from_secs(20));
        assert_eq!(m.retry_backoff, Some(Duration::from_secs(1)));
        assert_eq!(m.metadata_max_age, Duration::from_secs(30));
        assert_eq!(m.assignors[0].name(), "roundrobin");
        assert_eq!(m.client_rack.as_deref(), Some("r1"));
        assert_eq!(m.close_timeout, Duration::from_secs(5));
        assert_eq!(m.old_broker_policy, OldBrokerPolicy::FallBackToDynamic);
        assert_eq!(b.config.max_poll_records, 7);
        let consumer = b.build().unwrap();
        assert_eq!(consumer.subscription(), ["a".to_string(), "b".to_string()]);
    }
}
