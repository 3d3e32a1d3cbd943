//! # kafka-group
//!
//! A blocking, synchronous client for Apache Kafka consumer groups, built around static
//! membership (KIP-345, `group.instance.id`).
//!
//! Where things are, following the data path:
//!
//! - [`Client`]: bootstrap, per-broker connections with version negotiation ([`net`]), the
//!   metadata cache, coordinator lookup.
//! - [`group`]: membership — [`group::GroupMember`] with its heartbeat thread, the state
//!   machine, assignors. A static member restarting within its session timeout gets its
//!   partitions back without a rebalance.
//! - [`Consumer`]: a member that fetches, tracks positions and commits; [`Producer`]; [`Admin`].
//! - [`records`]: record batches and legacy message sets; [`protocol`]: the wire codecs,
//!   generated from Kafka's JSON schemas at build time; [`KafkaCode`]: the error codes.
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
//! use kafka_group::protocol::messages::JoinGroupRequest;
//! use kafka_group::protocol::{EncodeError, Message};
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
pub mod group;
mod names;
pub mod net;
pub mod producer;
pub mod protocol;
pub mod records;
mod retry;

pub use admin::{
    Admin, GroupDescription, ListedGroup, MemberDescription, NewTopic, OffsetSpec, PartitionLag,
};
pub use authorization::Resource;
pub use client::{Broker, Client, ClientBuilder, Metadata, PartitionMetadata, TopicMetadata};
pub use code::KafkaCode;
pub use consumer::{Consumer, ConsumerBuilder, ConsumerRecord, IsolationLevel, OffsetReset, Polled};
pub use error::{Error, MissingApi, ProtocolViolation, Result, Timeout};
pub use net::{EndpointIdentification, SecurityProtocol};
pub use producer::{Acks, Producer, ProducerBuilder, ProducerRecord};
