//! Consumer settings: the member's (`group::MemberConfig`) plus fetching and committing, with
//! Kafka's defaults, validated before any network call.

use crate::error::{Error, Result};
use crate::group::MemberConfig;
use crate::group::TopicPartition;
use std::time::Duration;

/// `auto.offset.reset`: where to start a partition that has no committed offset, or whose
/// position fell outside the log (retention deleted it, or the log was truncated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OffsetReset {
    /// `earliest`: the oldest offset still in the log.
    Earliest,
    /// `latest`: the end of the log, so only records produced from now on are read. Kafka's
    /// default.
    #[default]
    Latest,
    /// `none`: [`poll`](super::Consumer::poll) fails with [`Error::NoOffset`] naming the
    /// partitions, and keeps failing until the application [`seek`](super::Consumer::seek)s
    /// them.
    Error,
}

impl std::str::FromStr for OffsetReset {
    type Err = Error;

    /// Parses Kafka's values (`auto.offset.reset`), case-insensitively: `earliest`, `latest`,
    /// `none`.
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "earliest" => Ok(OffsetReset::Earliest),
            "latest" => Ok(OffsetReset::Latest),
            "none" => Ok(OffsetReset::Error),
            _ => Err(Error::Config {
                property: "auto.offset.reset",
                problem: format!("{s:?} is not one of earliest, latest, none"),
            }),
        }
    }
}

impl OffsetReset {
    /// The ListOffsets timestamp that asks for this position (-2 earliest, -1 latest).
    pub(crate) fn timestamp(self) -> Option<i64> {
        match self {
            OffsetReset::Earliest => Some(-2),
            OffsetReset::Latest => Some(-1),
            OffsetReset::Error => None,
        }
    }
}

/// `isolation.level`: which records of transactional producers a consumer sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationLevel {
    /// `read_uncommitted`: every data record, including those of open and aborted
    /// transactions. Transaction markers (control records) are never handed out, and positions
    /// move past them as under [`ReadCommitted`](Self::ReadCommitted). Kafka's default.
    #[default]
    ReadUncommitted,
    /// `read_committed`: what a transactional producer committed, and every record written
    /// outside a transaction. Needs Fetch v4 (Kafka 0.11); an older broker fails the poll with
    /// [`Error::UnsupportedVersion`](crate::Error::UnsupportedVersion) naming Fetch.
    ///
    /// - The consumer reads no further than the partition's **last stable offset** (the first
    ///   offset of the oldest transaction still open): a poll hands out nothing past it until
    ///   that transaction ends, and [`end_offsets`](crate::Consumer::end_offsets) answers it
    ///   instead of the high watermark.
    /// - Records of **aborted transactions are skipped**, with every compression, when the
    ///   transaction spans several batches, is interleaved with other producers' transactions
    ///   on the partition, or has its abort marker in a later fetch than its records (the
    ///   broker lists the aborted transactions a fetch overlaps).
    /// - **Control records** (the commit and abort markers the broker writes when a
    ///   transaction ends) are never returned.
    /// - **Positions advance past markers**: a fetch that brings only a marker moves
    ///   [`position`](crate::Consumer::position) past it, so after the last transaction of a
    ///   partition the position reaches the partition's end offset and a commit of positions
    ///   does not leave the marker to be fetched again.
    ReadCommitted,
}

impl std::str::FromStr for IsolationLevel {
    type Err = Error;

    /// Parses Kafka's values (`isolation.level`), case-insensitively: `read_uncommitted`,
    /// `read_committed`.
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "read_uncommitted" => Ok(IsolationLevel::ReadUncommitted),
            "read_committed" => Ok(IsolationLevel::ReadCommitted),
            _ => Err(Error::Config {
                property: "isolation.level",
                problem: format!("{s:?} is not one of read_uncommitted, read_committed"),
            }),
        }
    }
}

impl IsolationLevel {
    /// The wire value.
    pub(crate) fn code(self) -> i8 {
        match self {
            IsolationLevel::ReadUncommitted => 0,
            IsolationLevel::ReadCommitted => 1,
        }
    }
}

/// librdkafka's default for `queued.max.messages.kbytes`: 64 MiB.
pub(crate) const DEFAULT_QUEUED_MAX_KBYTES: usize = 65_536;
/// librdkafka's upper bound for `queued.max.messages.kbytes` (about 2 GiB).
const MAX_QUEUED_MAX_KBYTES: usize = 2_097_151;

/// A consumer's settings; see [`ConsumerBuilder`](super::ConsumerBuilder) for each one's Kafka
/// property and default.
#[derive(Debug, Clone)]
pub(crate) struct ConsumerConfig {
    /// Group membership: the consumer's member is built from this.
    pub member: MemberConfig,
    pub auto_offset_reset: OffsetReset,
    pub enable_auto_commit: bool,
    pub auto_commit_interval: Duration,
    pub max_poll_records: usize,
    pub fetch_min_bytes: usize,
    pub fetch_max_bytes: usize,
    pub fetch_max_wait: Duration,
    pub max_partition_fetch_bytes: usize,
    pub isolation_level: IsolationLevel,
    /// `queued.max.messages.kbytes`: the fetch-ahead buffer's bound, in KiB.
    pub queued_max_messages_kbytes: usize,
    /// Partitions assigned by the application (`assign`) instead of a subscription: no
    /// membership, no JoinGroup.
    pub manual: Option<Vec<TopicPartition>>,
    /// Whether the consumer has a group (`group.id`); false for `consumer_without_group`.
    pub has_group: bool,
}

impl Default for ConsumerConfig {
    /// The Java consumer's defaults (`retry.backoff.ms` left to the client; `group.id` empty,
    /// which [`validate`](Self::validate) refuses).
    fn default() -> Self {
        ConsumerConfig {
            member: MemberConfig::default(),
            auto_offset_reset: OffsetReset::Latest,
            enable_auto_commit: true,
            auto_commit_interval: Duration::from_millis(5_000),
            max_poll_records: 500,
            fetch_min_bytes: 1,
            fetch_max_bytes: 50 * 1024 * 1024,
            fetch_max_wait: Duration::from_millis(500),
            max_partition_fetch_bytes: 1024 * 1024,
            isolation_level: IsolationLevel::ReadUncommitted,
            queued_max_messages_kbytes: DEFAULT_QUEUED_MAX_KBYTES,
            manual: None,
            has_group: true,
        }
    }
}

impl ConsumerConfig {
    /// The fetch-ahead buffer's bound in bytes.
    pub fn queued_max_bytes(&self) -> usize {
        self.queued_max_messages_kbytes * 1024
    }

    /// Checks every setting against the ranges Kafka's client accepts, the member's included.
    pub fn validate(&self) -> Result<()> {
        let err = |property: &'static str, problem: String| Err(Error::Config { property, problem });
        if self.max_poll_records == 0 {
            return err("max.poll.records", "must be at least 1".into());
        }
        // Sent as INT32 fields of the Fetch request.
        let int32 = i32::MAX as usize;
        if self.fetch_min_bytes > int32 {
            return err(
                "fetch.min.bytes",
                format!("{} is above {int32}", self.fetch_min_bytes),
            );
        }
        if !(1..=int32).contains(&self.fetch_max_bytes) {
            return err(
                "fetch.max.bytes",
                format!("{} is outside 1..={int32}", self.fetch_max_bytes),
            );
        }
        if !(1..=int32).contains(&self.max_partition_fetch_bytes) {
            return err(
                "max.partition.fetch.bytes",
                format!("{} is outside 1..={int32}", self.max_partition_fetch_bytes),
            );
        }
        if !(1..=MAX_QUEUED_MAX_KBYTES).contains(&self.queued_max_messages_kbytes) {
            return err(
                "queued.max.messages.kbytes",
                format!(
                    "{} is outside 1..={MAX_QUEUED_MAX_KBYTES}",
                    self.queued_max_messages_kbytes
                ),
            );
        }
        crate::deadline::check_int_ms("fetch.max.wait.ms", self.fetch_max_wait)?;
        crate::deadline::check_int_ms("auto.commit.interval.ms", self.auto_commit_interval)?;
        if self.enable_auto_commit && self.auto_commit_interval.is_zero() {
            return err(
                "auto.commit.interval.ms",
                "must be greater than zero when enable.auto.commit is on".into(),
            );
        }
        if let Some(partitions) = &self.manual {
            if !self.member.topics.is_empty() {
                return err(
                    "assign",
                    "a consumer either subscribes to topics or is assigned partitions, not both".into(),
                );
            }
            check_partitions("assign", partitions)?;
            if self.member.group_instance_id.is_some() {
                return err(
                    "group.instance.id",
                    "static membership needs a subscription; a consumer with assigned partitions \
                     is no member of the group"
                        .into(),
                );
            }
            return if self.has_group {
                self.member.validate()
            } else {
                Ok(())
            };
        }
        if !self.has_group {
            return err(
                "subscribe",
                "subscribing needs a group (group.id): use Client::consumer, or assign partitions".into(),
            );
        }
        // A member may wait without topics; a consumer would only ever poll nothing.
        if self.member.topics.is_empty() {
            return err("subscribe", "at least one topic is needed".into());
        }
        self.member.validate()
    }
}

/// Checks topic names (as Kafka does) and partition numbers before any request.
pub(crate) fn check_partitions(call: &'static str, partitions: &[TopicPartition]) -> Result<()> {
    for tp in partitions {
        crate::names::check_topic(call, &tp.topic)?;
        if tp.partition < 0 {
            return Err(Error::Config {
                property: call,
                problem: format!("partition {} of {} is negative", tp.partition, tp.topic),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn property(e: Error) -> &'static str {
        match e {
            Error::Config { property, .. } => property,
            other => panic!("not a config error: {other}"),
        }
    }

    /// The defaults, in group `g` subscribed to `t` (the two settings without a default).
    fn valid() -> ConsumerConfig {
        ConsumerConfig {
            member: MemberConfig {
                topics: vec!["t".into()],
                ..MemberConfig::new("g")
            },
            ..Default::default()
        }
    }

    #[test]
    fn defaults_are_javas_and_valid() {
        let c = valid();
        c.validate().unwrap();
        assert_eq!(c.auto_offset_reset, OffsetReset::Latest);
        assert!(c.enable_auto_commit);
        assert_eq!(c.auto_commit_interval, Duration::from_secs(5));
        assert_eq!(c.max_poll_records, 500);
        assert_eq!(c.fetch_max_bytes, 52_428_800);
        assert_eq!(c.max_partition_fetch_bytes, 1_048_576);
        assert_eq!(c.fetch_max_wait, Duration::from_millis(500));
        assert_eq!(c.queued_max_bytes(), 64 << 20, "librdkafka's");
        assert_eq!(c.member.retry_backoff, None, "inherits the client's");
    }

    #[test]
    fn the_subscription_and_the_members_settings_are_checked_too() {
        let mut c = valid();
        c.member.topics.clear();
        assert_eq!(property(c.validate().unwrap_err()), "subscribe");
        c = valid();
        c.member.topics.push("bad topic!".into());
        assert_eq!(property(c.validate().unwrap_err()), "subscribe");
        c = valid();
        c.member.max_poll_interval = Duration::ZERO;
        assert_eq!(property(c.validate().unwrap_err()), "max.poll.interval.ms");
        c = valid();
        c.member.group_id.clear();
        assert_eq!(property(c.validate().unwrap_err()), "group.id");
    }

    #[test]
    fn bad_values_name_their_property() {
        let mut c = ConsumerConfig {
            max_poll_records: 0,
            ..valid()
        };
        assert_eq!(property(c.validate().unwrap_err()), "max.poll.records");
        c = ConsumerConfig {
            fetch_max_bytes: 0,
            ..valid()
        };
        assert_eq!(property(c.validate().unwrap_err()), "fetch.max.bytes");
        c = ConsumerConfig {
            fetch_min_bytes: i32::MAX as usize + 1,
            ..valid()
        };
        assert_eq!(property(c.validate().unwrap_err()), "fetch.min.bytes");
        c = ConsumerConfig {
            max_partition_fetch_bytes: 0,
            ..valid()
        };
        assert_eq!(property(c.validate().unwrap_err()), "max.partition.fetch.bytes");
        c = ConsumerConfig {
            max_partition_fetch_bytes: i32::MAX as usize + 1,
            ..valid()
        };
        assert_eq!(property(c.validate().unwrap_err()), "max.partition.fetch.bytes");
        c = ConsumerConfig {
            fetch_max_wait: Duration::from_secs(u64::MAX / 4),
            ..valid()
        };
        assert_eq!(property(c.validate().unwrap_err()), "fetch.max.wait.ms");
        for kbytes in [0, 2_097_152] {
            c = ConsumerConfig {
                queued_max_messages_kbytes: kbytes,
                ..valid()
            };
            assert_eq!(property(c.validate().unwrap_err()), "queued.max.messages.kbytes");
        }
        c = ConsumerConfig {
            queued_max_messages_kbytes: 2_097_151,
            ..valid()
        };
        c.validate().unwrap();
        c = ConsumerConfig {
            auto_commit_interval: Duration::ZERO,
            ..valid()
        };
        assert_eq!(property(c.validate().unwrap_err()), "auto.commit.interval.ms");
        c.enable_auto_commit = false;
        c.validate().unwrap();
    }

    #[test]
    fn reset_timestamps() {
        assert_eq!(OffsetReset::Earliest.timestamp(), Some(-2));
        assert_eq!(OffsetReset::Latest.timestamp(), Some(-1));
        assert_eq!(OffsetReset::Error.timestamp(), None);
        assert_eq!(IsolationLevel::ReadCommitted.code(), 1);
    }
}
