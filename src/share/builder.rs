//! [`ShareConsumerBuilder`]: a share consumer's settings, each named by its Kafka property,
//! checked before any network call.

use super::record::AcknowledgementMode;
use super::ShareConsumer;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::group::{MemberBuilder, MemberConfig};
use std::time::Duration;

/// A share consumer's own settings (the membership's are a `MemberConfig`).
#[derive(Debug, Clone)]
pub(crate) struct ShareConfig {
    pub(crate) member: MemberConfig,
    pub(crate) mode: AcknowledgementMode,
    pub(crate) max_poll_records: usize,
    pub(crate) fetch_max_wait: Duration,
    pub(crate) fetch_min_bytes: usize,
    pub(crate) fetch_max_bytes: usize,
}

/// Builds a [`ShareConsumer`] (Java's `KafkaShareConsumer`): `client.share_consumer(group)`.
#[derive(Debug, Clone)]
pub struct ShareConsumerBuilder {
    client: Client,
    config: ShareConfig,
}

impl ShareConsumerBuilder {
    fn new(client: Client, group_id: &str) -> Self {
        let mut member = MemberConfig::new(group_id);
        member.share = true;
        ShareConsumerBuilder {
            client,
            config: ShareConfig {
                member,
                mode: AcknowledgementMode::Implicit,
                max_poll_records: 500,
                fetch_max_wait: Duration::from_millis(500),
                fetch_min_bytes: 1,
                fetch_max_bytes: 52_428_800,
            },
        }
    }

    /// The topics to consume (Java's `subscribe`): at least one, each a valid topic name.
    pub fn subscribe<I, S>(mut self, topics: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.config.member.topics = topics.into_iter().map(Into::into).collect();
        self
    }

    /// `share.acknowledgement.mode`: [`AcknowledgementMode::Implicit`] (the default) or
    /// [`Explicit`](AcknowledgementMode::Explicit).
    pub fn acknowledgement_mode(mut self, mode: AcknowledgementMode) -> Self {
        self.config.mode = mode;
        self
    }

    /// `max.poll.records`: at most this many records a poll returns, and how many the broker
    /// acquires for this consumer at a time. Defaults to 500.
    pub fn max_poll_records(mut self, n: usize) -> Self {
        self.config.max_poll_records = n;
        self
    }

    /// `fetch.max.wait.ms`: how long a broker holds a ShareFetch that has nothing yet (never
    /// past the poll's own timeout). Defaults to 500 ms.
    pub fn fetch_max_wait(mut self, d: Duration) -> Self {
        self.config.fetch_max_wait = d;
        self
    }

    /// `fetch.min.bytes`: how much a broker gathers before it answers a ShareFetch early.
    /// Defaults to 1.
    pub fn fetch_min_bytes(mut self, n: usize) -> Self {
        self.config.fetch_min_bytes = n;
        self
    }

    /// `fetch.max.bytes`: the most one ShareFetch answer carries. Defaults to 52428800 (50 MiB).
    pub fn fetch_max_bytes(mut self, n: usize) -> Self {
        self.config.fetch_max_bytes = n;
        self
    }

    /// `client.rack`, sent to the group coordinator. Defaults to none.
    pub fn client_rack(mut self, rack: impl Into<String>) -> Self {
        self.config.member.client_rack = Some(rack.into());
        self
    }

    /// How long [`ShareConsumer::close`] (and a drop) may take: the last acknowledgements and
    /// the leave heartbeat. Defaults to 30 s.
    pub fn close_timeout(mut self, d: Duration) -> Self {
        self.config.member.close_timeout = d;
        self
    }

    /// Checks the settings and builds the consumer; no network call (the first `poll` joins).
    pub fn build(self) -> Result<ShareConsumer> {
        let c = &self.config;
        if c.member.topics.is_empty() {
            return Err(Error::Config {
                property: "subscribe",
                problem: "a share consumer needs at least one topic".into(),
            });
        }
        let int = |property: &'static str, n: usize, min: usize| -> Result<i32> {
            match i32::try_from(n) {
                Ok(v) if n >= min => Ok(v),
                _ => Err(Error::Config {
                    property,
                    problem: format!("{n} is not between {min} and {}", i32::MAX),
                }),
            }
        };
        int("max.poll.records", c.max_poll_records, 1)?;
        int("fetch.min.bytes", c.fetch_min_bytes, 0)?;
        int("fetch.max.bytes", c.fetch_max_bytes, 1)?;
        if c.fetch_max_wait.as_millis() > i32::MAX as u128 {
            return Err(Error::Config {
                property: "fetch.max.wait.ms",
                problem: format!("{:?} is too long", c.fetch_max_wait),
            });
        }
        let member = MemberBuilder::with_config(self.client.clone(), c.member.clone()).build()?;
        Ok(ShareConsumer::new(self.client, self.config, member))
    }
}

impl Client {
    /// Starts building a consumer of share group `group_id` (KIP-932, Kafka 4.2+): the
    /// consumers of a share group take records from the same partitions, each record acquired
    /// by one of them at a time and acknowledged on its own.
    pub fn share_consumer(&self, group_id: &str) -> ShareConsumerBuilder {
        ShareConsumerBuilder::new(self.clone(), group_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> Client {
        Client::builder()
            .bootstrap_servers("localhost:1")
            .build()
            .unwrap()
    }

    #[test]
    fn bad_settings_are_refused_before_any_network_call() {
        let e = client().share_consumer("g").build().unwrap_err();
        assert!(e.to_string().contains("at least one topic"), "{e}");
        let e = client()
            .share_consumer("g")
            .subscribe(["t"])
            .max_poll_records(0)
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("max.poll.records"), "{e}");
        let e = client().share_consumer("").subscribe(["t"]).build().unwrap_err();
        assert!(e.to_string().contains("group.id"), "{e}");
        let e = client()
            .share_consumer("g")
            .subscribe(["bad topic!"])
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("bad topic!"), "{e}");
        assert!(client().share_consumer("g").subscribe(["t"]).build().is_ok());
    }
}
