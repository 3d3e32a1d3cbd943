//! Producer settings, with Kafka's defaults, validated before any network call.

use super::record::Acks;
use super::request::{PARTITION_OVERHEAD, REQUEST_OVERHEAD};
use crate::error::{Error, Result};
use crate::records::{self, Compression};
use std::time::Duration;

/// A request carrying a single batch, records aside: what `max.request.size` leaves for them.
pub(super) const SINGLE_BATCH_OVERHEAD: usize = REQUEST_OVERHEAD + PARTITION_OVERHEAD + records::BATCH_HEADER;

/// A producer's settings; see [`ProducerBuilder`](super::ProducerBuilder) for each one's Kafka
/// property and default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProducerConfig {
    pub acks: Acks,
    pub compression: Compression,
    pub linger: Duration,
    pub batch_size: usize,
    pub retries: u32,
    pub delivery_timeout: Duration,
    /// Whether `delivery.timeout.ms` was set, rather than left at its default.
    pub delivery_timeout_set: bool,
    /// `None`: the client's `retry.backoff.ms`, so that one setting serves every part of the
    /// client unless the producer is told otherwise.
    pub retry_backoff: Option<Duration>,
    pub max_request_size: usize,
    pub max_block: Duration,
    pub metadata_max_age: Duration,
    /// `buffer.memory`: bytes of records (estimated) sent and not yet settled.
    pub buffer_memory: usize,
    /// `max.in.flight.requests.per.connection`.
    pub max_in_flight: usize,
    /// `enable.idempotence`; `None`: left at its default (on, unless another setting
    /// excludes it).
    pub enable_idempotence: Option<bool>,
    /// How long `close()` and a drop flush before failing what is left.
    pub close_timeout: Duration,
    /// `transactional.id`; `None` for a producer without transactions.
    pub transactional_id: Option<String>,
    /// `transaction.timeout.ms`.
    pub transaction_timeout: Duration,
}

impl Default for ProducerConfig {
    /// The Java producer's defaults, except `batch.size` (larger, by measurement) and
    /// `retry.backoff.ms` (left to the client).
    fn default() -> Self {
        ProducerConfig {
            acks: Acks::All,
            compression: Compression::None,
            // Kafka 4.0's default (KIP-1030), which measurement here agrees with: see
            // BENCHMARKS.md.
            linger: Duration::from_millis(5),
            // Above Java's 16 KiB, by measurement: see ProducerBuilder::batch_size.
            batch_size: 256 * 1024,
            retries: i32::MAX as u32,
            delivery_timeout: Duration::from_secs(120),
            delivery_timeout_set: false,
            retry_backoff: None,
            max_request_size: 1024 * 1024,
            max_block: Duration::from_secs(60),
            metadata_max_age: Duration::from_secs(300),
            buffer_memory: 32 * 1024 * 1024,
            max_in_flight: 5,
            enable_idempotence: None,
            // The Java consumer's close bound; Java's producer waits without one, which a
            // drop (it cannot report anything) should not.
            close_timeout: Duration::from_secs(30),
            transactional_id: None,
            transaction_timeout: Duration::from_secs(60),
        }
    }
}

impl ProducerConfig {
    /// Raises a default `delivery.timeout.ms` that leaves no room for one attempt (a
    /// `request.timeout.ms` of 120 s or more) to `linger.ms` + `request.timeout.ms`, as Java's
    /// producer does; one that was set is left for [`validate`](Self::validate) to refuse.
    pub fn resolve(&mut self, request_timeout: Duration) {
        let least = self.linger.saturating_add(request_timeout);
        if !self.delivery_timeout_set && self.delivery_timeout < least {
            log::info!(
                "producer: delivery.timeout.ms raised from its default {} ms to linger.ms + \
                 request.timeout.ms = {} ms",
                self.delivery_timeout.as_millis(),
                least.as_millis()
            );
            self.delivery_timeout = least;
        }
    }

    /// Checks every setting against Kafka's rules; `request_timeout` is the client's
    /// `request.timeout.ms`, which `delivery.timeout.ms` must leave room for.
    pub fn validate(&self, request_timeout: Duration) -> Result<()> {
        if self.max_request_size == 0 || self.max_request_size > i32::MAX as usize {
            return Err(Error::Config {
                property: "max.request.size",
                problem: format!("must be in 1..={}", i32::MAX),
            });
        }
        if self.batch_size > i32::MAX as usize {
            return Err(Error::Config {
                property: "batch.size",
                problem: format!("must be at most {}", i32::MAX),
            });
        }
        crate::deadline::check_int_ms("delivery.timeout.ms", self.delivery_timeout)?;
        if self.delivery_timeout < self.linger.saturating_add(request_timeout) {
            return Err(Error::Config {
                property: "delivery.timeout.ms",
                problem: format!(
                    "must be at least linger.ms + request.timeout.ms ({} ms), so that one attempt fits",
                    self.linger.saturating_add(request_timeout).as_millis()
                ),
            });
        }
        if self.max_in_flight == 0 {
            return Err(Error::Config {
                property: "max.in.flight.requests.per.connection",
                problem: "must be at least 1".into(),
            });
        }
        if self.buffer_memory < self.batch_limit().max(1) {
            return Err(Error::Config {
                property: "buffer.memory",
                problem: format!(
                    "must hold at least one batch (batch.size {} bytes)",
                    self.batch_limit()
                ),
            });
        }
        if let Some(id) = &self.transactional_id {
            if id.is_empty() {
                return Err(Error::Config {
                    property: "transactional.id",
                    problem: "must not be empty (leave it unset for a producer without transactions)".into(),
                });
            }
            if self.enable_idempotence == Some(false) {
                return Err(Error::Config {
                    property: "enable.idempotence",
                    problem:
                        "must not be false with transactional.id: transactions need the idempotent producer"
                            .into(),
                });
            }
            crate::deadline::check_int_ms("transaction.timeout.ms", self.transaction_timeout)?;
            if self.transaction_timeout < Duration::from_millis(1) {
                return Err(Error::Config {
                    property: "transaction.timeout.ms",
                    problem: "must be at least 1 ms".into(),
                });
            }
        }
        if self.metadata_max_age.is_zero() {
            return Err(Error::Config {
                property: "metadata.max.age.ms",
                problem: "must be greater than zero".into(),
            });
        }
        Ok(())
    }

    /// The most a batch holds: `batch.size`, but never so much that one batch alone would break
    /// `max.request.size`.
    pub fn batch_limit(&self) -> usize {
        self.batch_size
            .min(self.max_request_size.saturating_sub(SINGLE_BATCH_OVERHEAD))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn property(c: ProducerConfig) -> &'static str {
        property_at(c, Duration::from_secs(30))
    }

    fn property_at(c: ProducerConfig, request_timeout: Duration) -> &'static str {
        match c.validate(request_timeout) {
            Err(Error::Config { property, .. }) => property,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_are_kafkas_and_valid() {
        let c = ProducerConfig::default();
        c.validate(Duration::from_secs(30)).unwrap();
        assert_eq!(c.retry_backoff, None, "inherits the client's");
        assert_eq!(c.batch_limit(), 256 * 1024);
    }

    #[test]
    fn a_default_delivery_timeout_makes_room_for_a_long_request_timeout_a_set_one_does_not() {
        let long = Duration::from_secs(120);
        let mut c = ProducerConfig::default();
        c.resolve(long);
        assert_eq!(c.delivery_timeout, Duration::from_millis(120_005));
        c.validate(long).unwrap();
        let mut set = ProducerConfig {
            delivery_timeout_set: true,
            ..Default::default()
        };
        set.resolve(long);
        assert_eq!(set.delivery_timeout, Duration::from_secs(120));
        assert_eq!(property_at(set, long), "delivery.timeout.ms");
    }

    #[test]
    fn each_rule_names_its_property() {
        let c = || ProducerConfig::default();
        assert_eq!(
            property(ProducerConfig {
                max_request_size: i32::MAX as usize + 1,
                ..c()
            }),
            "max.request.size"
        );
        assert_eq!(
            property(ProducerConfig {
                delivery_timeout: Duration::from_secs(29),
                ..c()
            }),
            "delivery.timeout.ms"
        );
        // Exactly linger.ms + request.timeout.ms is enough.
        ProducerConfig {
            linger: Duration::from_secs(1),
            delivery_timeout: Duration::from_secs(31),
            ..c()
        }
        .validate(Duration::from_secs(30))
        .unwrap();
    }

    #[test]
    fn the_batch_limit_leaves_room_for_the_request() {
        let c = ProducerConfig {
            max_request_size: 100,
            ..Default::default()
        };
        assert_eq!(c.batch_limit(), 0);
        let c = ProducerConfig {
            batch_size: 0,
            ..Default::default()
        };
        assert_eq!(c.batch_limit(), 0);
    }
}
