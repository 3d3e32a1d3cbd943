//! Every message of every API the client speaks, generated at build time from the Kafka 3.9
//! JSON schemas in `schemas/` (see `build.rs` and the `kafka-group-codegen` crate).
//!
//! Each message lives in a module of its own because nested struct names (`TopicPartition`,
//! `PartitionData`…) repeat across messages; the top-level struct is re-exported here.

// Generated functions take `version` even where a struct is the same in every version.
#![allow(clippy::all, clippy::pedantic, unused_variables, unused_mut)]

#[allow(unused_imports)]
use super::wire::*;
#[allow(unused_imports)]
use super::{
    DecodeError, EncodeError, Int32List, KafkaStr, Message, Request, UnknownTaggedFields, Uuid, VersionRange,
};
#[cfg(any(test, feature = "sample"))]
#[allow(unused_imports)]
use super::{Sample, SampleGen};
#[allow(unused_imports)]
use bytes::Bytes;

include!(concat!(env!("OUT_DIR"), "/messages.rs"));
