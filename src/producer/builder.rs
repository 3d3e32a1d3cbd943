//! [`ProducerBuilder`]: one setter per Kafka property over a [`ProducerConfig`], checked in
//! [`build`](ProducerBuilder::build) before any network call.

use super::broker::Settings;
use super::config::ProducerConfig;
use super::idempotence;
use super::record::Acks;
use super::Producer;
use crate::client::Client;
use crate::error::Result;
use crate::records::Compression;
use std::time::Duration;

/// Builds a [`Producer`]; every setter names the Kafka property it mirrors and its default.
/// Start with [`Client::producer`].
#[derive(Debug, Clone)]
pub struct ProducerBuilder {
    client: Client,
    config: ProducerConfig,
}

impl ProducerBuilder {
    pub(super) fn new(client: &Client) -> Self {
        ProducerBuilder {
            client: client.clone(),
            config: ProducerConfig::default(),
        }
    }

    /// Sets a setting by its Kafka property name, as found in a `client.properties` file (see
    /// [`ClientBuilder::property`](crate::ClientBuilder::property) for one file given to every
    /// builder). This builder's: `acks`, `compression.type`, `linger.ms`, `batch.size`,
    /// `retries`, `delivery.timeout.ms`, `retry.backoff.ms`, `max.request.size`,
    /// `max.block.ms`, `metadata.max.age.ms`, `buffer.memory`,
    /// `max.in.flight.requests.per.connection`, `enable.idempotence`, `transactional.id`,
    /// `transaction.timeout.ms`; the client's and a consumer's are skipped here. An unknown
    /// name or a value that does not parse is an error naming it, and leaves the builder as it
    /// was.
    pub fn property(&mut self, key: &str, value: &str) -> Result<&mut Self> {
        use crate::properties::Setting as S;
        let setting = crate::properties::parse(key, value)?;
        let builder = self.clone();
        *self = match setting {
            S::Acks(a) => builder.acks(a),
            S::Compression(c) => builder.compression(c),
            S::Linger(t) => builder.linger(t),
            S::BatchSize(n) => builder.batch_size(n),
            S::Retries(n) => builder.retries(n),
            S::DeliveryTimeout(t) => builder.delivery_timeout(t),
            S::RetryBackoff(t) => builder.retry_backoff(t),
            S::MaxRequestSize(n) => builder.max_request_size(n),
            S::MaxBlock(t) => builder.max_block(t),
            S::MetadataMaxAge(t) => builder.metadata_max_age(t),
            S::BufferMemory(n) => builder.buffer_memory(n),
            S::MaxInFlight(n) => builder.max_in_flight_requests_per_connection(n),
            S::EnableIdempotence(on) => builder.enable_idempotence(on),
            S::TransactionalId(id) => builder.transactional_id(id),
            S::TransactionTimeout(t) => builder.transaction_timeout(t),
            _ => {
                log::debug!("{key}: not a producer setting; skipped by the producer builder");
                builder
            }
        };
        Ok(self)
    }

    /// `acks`: how many replicas must have a batch before the broker acknowledges it.
    /// Default: [`Acks::All`].
    pub fn acks(mut self, acks: Acks) -> Self {
        self.config.acks = acks;
        self
    }

    /// `compression.type`. Default: [`Compression::None`].
    pub fn compression(mut self, compression: Compression) -> Self {
        self.config.compression = compression;
        self
    }

    /// `linger.ms`: how long a partition's batch waits, from its first record, for more before
    /// the sender thread sends it (a full batch goes at once, whatever this says). 0 sends as
    /// soon as the thread gets to it. At most `delivery.timeout.ms` - `request.timeout.ms`.
    /// Default: 5 ms, Kafka 4.0's (KIP-1030).
    pub fn linger(mut self, t: Duration) -> Self {
        self.config.linger = t;
        self
    }

    /// `batch.size`: bytes (uncompressed, estimated) per partition batch; a full batch is sent
    /// at once. 0 sends every record on its own. Default: 262144 (256 KiB; Java's is 16 KiB,
    /// librdkafka's and franz-go's about 1 MB): measured against those clients (BENCHMARKS.md,
    /// "Comparing with librdkafka, franz-go and Java"), 16 KiB batches cost about half the
    /// throughput of 256 KiB ones at 100-byte records, and a batch takes memory only as
    /// records fill it, so a partition written slowly costs no more. `linger.ms`, not this,
    /// bounds how long a record waits.
    pub fn batch_size(mut self, bytes: usize) -> Self {
        self.config.batch_size = bytes;
        self
    }

    /// `retries`: how often a batch is retried after a retriable error, within
    /// `delivery.timeout.ms`. Default: 2147483647 (only the timeout limits retries).
    pub fn retries(mut self, n: u32) -> Self {
        self.config.retries = n;
        self
    }

    /// `delivery.timeout.ms`: the longest a record may take from `send` to its
    /// acknowledgement, retries included; must be at least `linger.ms` + `request.timeout.ms`
    /// and at most `i32::MAX` ms (about 24.8 days), as in Kafka. Default: 120 s, or
    /// `linger.ms` + `request.timeout.ms` when that is more (as Java raises it).
    pub fn delivery_timeout(mut self, t: Duration) -> Self {
        self.config.delivery_timeout = t;
        self.config.delivery_timeout_set = true;
        self
    }

    /// `retry.backoff.ms`: pause before retrying a batch; a pause never outlasts the batch's
    /// `delivery.timeout.ms`. Default: the client's
    /// ([`ClientBuilder::retry_backoff`](crate::ClientBuilder::retry_backoff), 100 ms unless set
    /// there).
    pub fn retry_backoff(mut self, t: Duration) -> Self {
        self.config.retry_backoff = Some(t);
        self
    }

    /// `max.request.size`: the largest request (and so record) sent. Default: 1048576.
    pub fn max_request_size(mut self, bytes: usize) -> Self {
        self.config.max_request_size = bytes;
        self
    }

    /// `max.block.ms`: how long `send` waits for a topic's metadata (e.g. a topic just
    /// created), and for room in `buffer.memory`, before failing; `Duration::MAX` waits
    /// without a limit. Default: 60 s.
    pub fn max_block(mut self, t: Duration) -> Self {
        self.config.max_block = t;
        self
    }

    /// `metadata.max.age.ms`: metadata older than this is refreshed before sending, so new
    /// partitions and moved leaders are picked up without an error; above zero
    /// (`Duration::MAX`: never by age). Default: 5 min.
    pub fn metadata_max_age(mut self, t: Duration) -> Self {
        self.config.metadata_max_age = t;
        self
    }

    /// `buffer.memory`: the most bytes of records (estimated, as `batch.size` counts them) the
    /// producer holds that are not yet acknowledged or failed. A `send` that would go above it
    /// waits up to `max.block.ms` for earlier records to settle, then fails with
    /// [`Error::BufferFull`](crate::Error::BufferFull); a record larger than all of it is
    /// refused at once. Must hold one batch. Default: 33554432 (32 MiB), Java's.
    pub fn buffer_memory(mut self, bytes: usize) -> Self {
        self.config.buffer_memory = bytes;
        self
    }

    /// `max.in.flight.requests.per.connection`: Produce requests the producer keeps
    /// outstanding on each broker's connection, so that encoding, the network and the broker
    /// overlap. At least 1. Without idempotence a partition still has one batch in flight at
    /// a time, so its records keep their order across retries; more requests in flight carry
    /// other partitions' batches. Default: 5, Java's.
    pub fn max_in_flight_requests_per_connection(mut self, n: usize) -> Self {
        self.config.max_in_flight = n;
        self
    }

    /// `enable.idempotence`: the idempotent producer (KIP-98). The producer gets a producer id
    /// (InitProducerId) and numbers each partition's batches, so the broker writes a retried
    /// batch once and never out of order: no duplicates, and order kept with up to 5 batches
    /// of a partition in flight. Needs `acks=all`, `retries` above 0 and
    /// `max.in.flight.requests.per.connection` at most 5; set to `true` with a setting that
    /// excludes it, `build` fails; left at its default, such a setting turns it off (as Java
    /// does since 3.2). Brokers before 0.11 cannot have it: the producer falls back to plain
    /// acks with one batch per partition in flight, and logs that once. On Kafka before 2.8
    /// the principal needs the `IDEMPOTENT_WRITE` ACL on the cluster. Nothing is sent before
    /// the producer id comes; a record that expires (`delivery.timeout.ms`) while InitProducerId
    /// keeps failing says what it answered. Default: on.
    pub fn enable_idempotence(mut self, on: bool) -> Self {
        self.config.enable_idempotence = Some(on);
        self
    }

    /// How long [`Producer::close`] and dropping the producer flush the records sent and not
    /// yet acknowledged before failing the rest with [`Error::Closed`](crate::Error::Closed)
    /// (logged at warn on a drop, which cannot return it). Like Java's `close(Duration)` (no
    /// property); [`Producer::close_timeout`] takes its own bound. Default: 30 s.
    pub fn close_timeout(mut self, t: Duration) -> Self {
        self.config.close_timeout = t;
        self
    }

    /// `transactional.id`: makes this a transactional producer (KIP-98), whose records and
    /// consumer offsets are written all or nothing by
    /// [`commit_transaction`](Producer::commit_transaction). Call
    /// [`init_transactions`](Producer::init_transactions) once before the first transaction:
    /// it fences any earlier producer with the same id (its open transaction is aborted, its
    /// later writes refused), which is what makes a restarted process safe. Use an id that
    /// stays the same across restarts of the same piece of work, e.g. derived from the
    /// consumer's `group.instance.id`. Needs idempotence (on by default; `build` fails if
    /// `enable.idempotence` is false or another setting excludes it) and Kafka 0.11+. Default:
    /// none.
    pub fn transactional_id(mut self, id: impl Into<String>) -> Self {
        self.config.transactional_id = Some(id.into());
        self
    }

    /// `transaction.timeout.ms`: how long the transaction coordinator lets a transaction stay
    /// open before it aborts it (and fences this producer's epoch): the bound on how long a
    /// crashed producer's open transaction blocks `read_committed` consumers. The broker
    /// refuses a value above its `transaction.max.timeout.ms` (15 min by default) at
    /// [`init_transactions`](Producer::init_transactions). Default: 60 s.
    pub fn transaction_timeout(mut self, t: Duration) -> Self {
        self.config.transaction_timeout = t;
        self
    }

    /// Validates the configuration (without touching the network) and builds the producer.
    /// `request.timeout.ms` is the client's.
    pub fn build(mut self) -> Result<Producer> {
        let request_timeout = self.client.connection_config().request_timeout;
        self.config.resolve(request_timeout);
        self.config.validate(request_timeout)?;
        // The broker's own wait for replicas is kept below ours, so that its REQUEST_TIMED_OUT
        // answer (retriable, connection kept) arrives before our response timeout fires (which
        // closes the connection).
        let broker_timeout = request_timeout.saturating_sub(request_timeout / 10);
        let retry_backoff = self
            .config
            .retry_backoff
            .unwrap_or_else(|| self.client.retry_backoff());
        // A transactional producer is idempotent, and says so loudly when a setting excludes it.
        let idempotence = match self.config.transactional_id {
            Some(_) => Some(true),
            None => self.config.enable_idempotence,
        };
        let requested = idempotence::check_config(
            idempotence,
            self.config.max_in_flight,
            self.config.acks,
            self.config.retries,
        )?;
        let settings = Settings {
            requested,
            retry_backoff,
            broker_timeout_ms: broker_timeout.as_millis().min(i32::MAX as u128) as i32,
            config: self.config,
        };
        Producer::start(self.client, settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::properties::JAVA_FILE;

    fn client() -> Client {
        Client::builder()
            .bootstrap_servers("localhost:1")
            .build()
            .unwrap()
    }

    #[test]
    fn a_properties_file_configures_a_producer() {
        let c = client();
        let mut b = c.producer();
        for (k, v) in JAVA_FILE {
            b.property(k, v).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
        }
        assert_eq!(b.config.acks, Acks::All);
        assert_eq!(b.config.linger, Duration::from_millis(20));
        assert_eq!(b.config.compression, Compression::Lz4);
        assert_eq!(b.config.enable_idempotence, Some(true));
        let mut b2 = b.clone();
        b2.property("transactional.id", "billing-1").unwrap();
        assert_eq!(b2.config.transactional_id.as_deref(), Some("billing-1"));
        let e = b2.property("acks", "2").unwrap_err();
        assert!(e.to_string().contains("acks"), "{e}");
        assert_eq!(b2.config.acks, Acks::All, "left as it was");
        b.build().unwrap().close().unwrap();
    }
}
