//! Share groups (KIP-932, Kafka's queues): the consumers of a share group take records from
//! the same partitions, each record acquired by one consumer at a time and acknowledged on its
//! own.
//!
//! The parts that need no broker are here and unit-tested: acknowledgements packed into the
//! protocol's batches ([`acks`]) and the share session each broker keeps for the member
//! ([`session`]).

pub(crate) mod acks;
pub(crate) mod session;

pub use acks::AcknowledgeType;
