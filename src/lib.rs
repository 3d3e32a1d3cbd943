//! # kafka-group
//!
//! A blocking, synchronous client for Apache Kafka consumer groups, built around static
//! membership (KIP-345, `group.instance.id`).
//!
//! Where things are, following the data path (everything is at the crate root):
//!
//! - [`Client`] ([`ClientBuilder`]): bootstrap, per-broker connections by purpose with version
//!   negotiation, TLS ([`SecurityProtocol`]) and SASL ([`sasl`]), the [`Metadata`] cache,
//!   coordinator lookup.
//! - [`Consumer`] ([`ConsumerBuilder`]): a member that fetches, tracks positions and commits;
//!   [`Producer`] ([`ProducerBuilder`]), idempotent by default and transactional with a
//!   `transactional.id`: records and consumer offsets committed together, so a
//!   consume-transform-produce job processes each record exactly once (see
//!   [`Producer`]'s "Transactions" section and `examples/exactly_once.rs`); [`Admin`]: topics,
//!   groups, offsets, transactions.
//! - [`GroupMember`] ([`MemberBuilder`]): membership alone, with its heartbeat thread and
//!   [`GroupEvent`]s; [`Assignor`]s (range, round-robin, sticky, and cooperative-sticky for
//!   incremental rebalancing, [`RebalanceProtocol`]). A static member restarting within its
//!   session timeout gets its partitions back without a rebalance.
//! - [`Error`]: what failed, keeping its cause ([`Timeout`], [`KafkaCode`]: the broker's error
//!   codes).
//!
//! The root is the API this crate keeps stable. [`unstable`] is for tools, tests and
//! benchmarks and is not covered by semver: the generated protocol messages and their codecs,
//! record batches, raw connections and requests.
//!
//! ## The guide
//!
//! [`guide`] has a page per topic: [consuming](guide::consuming),
//! [static membership](guide::static_membership), [rebalancing](guide::rebalancing),
//! [the consumer group protocol (KIP-848)](guide::kip848), [producing](guide::producing),
//! [exactly once](guide::exactly_once), [security](guide::security),
//! [configuration](guide::configuration), [errors](guide::errors) and
//! [compatibility](guide::compatibility).
//!
//! The crate logs through the `log` crate and prints nothing itself; install a logger (e.g.
//! `env_logger` at `warn`) to see what no call can return, such as a wrong port retried in the
//! background.
//!
//! ```no_run
//! use kafka_group::Client;
//! use std::time::Duration;
//!
//! # fn main() -> kafka_group::Result<()> {
//! let client = Client::builder().bootstrap_servers("127.0.0.1:9092").build()?;
//! let mut consumer = client
//!     .consumer("billing")
//!     .group_instance_id("billing-worker-1")
//!     .subscribe(["invoices"])
//!     .enable_auto_commit(false)
//!     .build()?;
//! loop {
//!     let polled = consumer.poll(Duration::from_secs(1))?;
//!     for record in &polled.records {
//!         println!("{}-{}@{}", record.topic, record.partition, record.offset);
//!     }
//!     consumer.commit()?;
//! }
//! # }
//! ```
//!
//! The codecs refuse to drop what a version cannot carry:
//!
//! ```
//! use kafka_group::unstable::protocol::messages::JoinGroupRequest;
//! use kafka_group::unstable::protocol::Message;
//! use kafka_group::EncodeError;
//!
//! let join = JoinGroupRequest {
//!     group_id: "batch-jobs".into(),
//!     group_instance_id: Some("worker-1".into()),
//!     ..Default::default()
//! };
//! // v5 has group.instance.id ...
//! assert!(join.to_bytes(5).is_ok());
//! // ... v4 does not, and the codec refuses to drop it silently.
//! assert!(matches!(join.to_bytes(4), Err(EncodeError::UnsupportedField { field: "group_instance_id", .. })));
//! ```

#![cfg_attr(not(test), forbid(unsafe_code))]
// The hostile-input tests meter allocations with a counting global allocator, which needs one
// `unsafe impl`; everything else stays free of unsafe code in tests too.
#![cfg_attr(test, deny(unsafe_code))]
#![deny(missing_docs)]
// Every type a public signature mentions can be named from the root or `unstable`.
#![warn(unnameable_types)]

// The README's Rust examples are compiled (and run unless marked no_run) as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod admin;
mod authorization;
mod client;
mod code;
mod consumer;
mod deadline;
mod error;
mod group;
pub mod guide;
mod names;
mod net;
mod producer;
mod properties;
mod protocol;
mod records;
mod retry;
mod share;
pub mod unstable;
mod wakeup;
mod worker;

pub use admin::{
    Admin, GroupDescription, HangingSearch, HangingTransaction, ListedGroup, MemberDescription, NewTopic,
    OffsetSpec, PartitionLag, ProducerDescription, TransactionDescription, TransactionFilter,
    TransactionListing, TransactionState, DEFAULT_MAX_TRANSACTION_TIMEOUT,
};
pub use authorization::Resource;
pub use client::{Broker, Client, ClientBuilder, Metadata, PartitionMetadata, TopicMetadata};
pub use code::KafkaCode;
pub use consumer::{
    Consumer, ConsumerBuilder, ConsumerGroupMetadata, ConsumerRebalanceListener, ConsumerRecord,
    IsolationLevel, OffsetAndMetadata, OffsetAndTimestamp, OffsetReset, Polled,
};
pub use error::{Error, MissingApi, ProtocolViolation, Result, Timeout, TransactionAction};
pub use group::{
    Assignment, Assignor, CooperativeStickyAssignor, Generation, GroupEvent, GroupMember, GroupProtocol,
    GroupProtocolPolicy, MemberBuilder, MemberMetrics, MemberState, MemberSubscription, MissingTopicPolicy,
    OldBrokerPolicy, RangeAssignor, RebalanceProtocol, RoundRobinAssignor, StickyAssignor, Subscription,
    TopicPartition,
};
pub use net::sasl;
pub use net::{EndpointIdentification, SecurityProtocol};
pub use producer::{Acks, DeliveryHandle, Producer, ProducerBuilder, ProducerRecord, RecordMetadata};
pub use share::{
    AcknowledgeType, AcknowledgementMode, AcknowledgementResults, Acknowledger, ShareConsumer,
    ShareConsumerBuilder, ShareRecord,
};
// Protocol and record types that public signatures and `Error` variants carry.
pub use protocol::{ApiKey, DecodeError, EncodeError, Uuid, VersionRange};
pub use records::{Compression, RecordsError};
pub use wakeup::WakeupHandle;
