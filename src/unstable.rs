//! Advanced use: **not covered by semver**. For tools, tests and benchmarks; anything here may
//! change in any release, minor and patch ones included.
//!
//! An application never needs this module: the crate root has the client, consumer, producer,
//! admin and group API. What is here speaks the protocol directly:
//!
//! - [`protocol`]: the generated messages of every API the client speaks (plain structs with
//!   public fields, *not* `#[non_exhaustive]`: a new Kafka schema adds fields to them), the
//!   [`protocol::Message`] and [`protocol::Request`] codecs, the wire primitives;
//! - [`records`]: record batches and legacy message sets, encoded and decoded;
//! - [`Connection`] and its [`ConnectionConfig`], [`BrokerVersions`] and the [`versions`]
//!   (capabilities) and [`releases`] (which Kafka release speaks which versions) tables;
//! - [`RawClient`]: a [`Client`]'s own requests to a broker, negotiated and over its
//!   connections;
//! - [`classify`]: what a group error code means for a member;
//! - [`key_partition`]: the partition Java's default partitioner picks for a key;
//! - [`TestHooks`]: faults a test injects into a member or consumer (a crash, hung heartbeats).

use crate::error::Result;
use crate::protocol::Request;
use crate::Broker;
use crate::Client;

pub use crate::group::action::{classify, GroupAction};
pub use crate::net::{releases, versions};
pub use crate::net::{
    BrokerVersions, Capability, Connection, ConnectionConfig, Interrupter, Pending, Tls,
    REMOVE_MEMBERS_BY_INSTANCE_ID, STATIC_MEMBERSHIP,
};
pub use crate::producer::key_partition;

pub mod protocol {
    //! The Kafka wire protocol: the generated messages ([`messages`], one module per message),
    //! the [`Message`] and [`Request`] traits that tie a request to its response and header
    //! versions, the wire primitives ([`wire`]).
    //!
    //! Not covered by semver: a new Kafka schema adds fields and messages.
    pub use crate::protocol::*;
}

pub mod records {
    //! Record batches (magic 2) and legacy message sets (magic 0 and 1): [`encode`] and
    //! [`decode`], which checks every checksum and bounds decompression by [`DecodeLimits`].
    pub use crate::records::*;
}

/// A [`Client`]'s raw requests: built for the version negotiated with the broker and sent over
/// the client's own connections (reconnect backoff, version caps, TLS and SASL as configured).
///
/// Implemented for [`Client`] only.
pub trait RawClient: sealed::Sealed {
    /// The connection settings every connection of this client uses.
    fn connection_config(&self) -> &ConnectionConfig;

    /// Opens a new connection of its own to `broker`, outside the client's connections.
    fn connect(&self, broker: &Broker) -> Result<Connection>;

    /// Sends a request to broker `id`, building it for the version negotiated with that broker.
    fn send_to<R: Request>(&self, id: i32, build: impl FnOnce(i16) -> R) -> Result<R::Response>;

    /// Sends a request the broker does not answer (Produce with `acks=0`) to broker `id`,
    /// building it for the negotiated version; returns once it is written.
    fn send_to_no_response<R: Request>(&self, id: i32, build: impl FnOnce(i16) -> R) -> Result<()>;

    /// Sends a request to any reachable broker (known brokers first, then bootstrap
    /// addresses), moving on to the next one when a broker cannot be reached.
    fn send_any<R: Request>(&self, build: impl Fn(i16) -> R) -> Result<R::Response>;

    /// The ApiVersions table of broker `id` (connecting if needed).
    fn broker_versions(&self, id: i32) -> Result<BrokerVersions>;

    /// The ApiVersions table of whichever broker answers first.
    fn any_broker_versions(&self) -> Result<BrokerVersions>;
}

// Inherent (crate-private) methods come first in path resolution, so each of these calls the
// client's own method, not itself.
impl RawClient for Client {
    fn connection_config(&self) -> &ConnectionConfig {
        Client::connection_config(self)
    }

    fn connect(&self, broker: &Broker) -> Result<Connection> {
        Client::connect(self, broker)
    }

    fn send_to<R: Request>(&self, id: i32, build: impl FnOnce(i16) -> R) -> Result<R::Response> {
        Client::send_to(self, id, build)
    }

    fn send_to_no_response<R: Request>(&self, id: i32, build: impl FnOnce(i16) -> R) -> Result<()> {
        Client::send_to_no_response(self, id, build)
    }

    fn send_any<R: Request>(&self, build: impl Fn(i16) -> R) -> Result<R::Response> {
        Client::send_any(self, build)
    }

    fn broker_versions(&self, id: i32) -> Result<BrokerVersions> {
        Client::broker_versions(self, id)
    }

    fn any_broker_versions(&self) -> Result<BrokerVersions> {
        Client::any_broker_versions(self)
    }
}

/// Faults a test injects, in this crate's tests and in an application's: a process killed
/// without a word to the coordinator, or one whose heartbeats stop while it still runs.
///
/// Implemented for [`GroupMember`](crate::GroupMember) and [`Consumer`](crate::Consumer) (whose
/// calls reach its group member; without a group, freezing and thawing do nothing).
pub trait TestHooks: sealed::Sealed + Sized {
    /// Stops like a killed process: no final commit, no leave of any kind (under the consumer
    /// protocol, not even the static leave heartbeat that `close` sends).
    fn crash_for_tests(self);

    /// The heartbeats stop without the member knowing, as if the process hung: the coordinator
    /// fences it once its session times out.
    fn freeze_heartbeats_for_tests(&self);

    /// A consumer-protocol member's heartbeats resume after
    /// [`freeze_heartbeats_for_tests`](Self::freeze_heartbeats_for_tests), as when a hung
    /// process wakes up.
    fn thaw_heartbeats_for_tests(&self);
}

impl TestHooks for crate::GroupMember {
    fn crash_for_tests(self) {
        self.crash()
    }

    fn freeze_heartbeats_for_tests(&self) {
        self.freeze_heartbeats()
    }

    fn thaw_heartbeats_for_tests(&self) {
        self.thaw_heartbeats()
    }
}

impl TestHooks for crate::Consumer {
    fn crash_for_tests(self) {
        self.crash()
    }

    fn freeze_heartbeats_for_tests(&self) {
        if let Some(m) = self.group_member() {
            m.freeze_heartbeats()
        }
    }

    fn thaw_heartbeats_for_tests(&self) {
        if let Some(m) = self.group_member() {
            m.thaw_heartbeats()
        }
    }
}

impl TestHooks for crate::ShareConsumer {
    fn crash_for_tests(self) {
        self.crash()
    }

    fn freeze_heartbeats_for_tests(&self) {
        if let Some(m) = self.group_member() {
            m.freeze_heartbeats()
        }
    }

    fn thaw_heartbeats_for_tests(&self) {
        if let Some(m) = self.group_member() {
            m.thaw_heartbeats()
        }
    }
}

/// Keeps [`RawClient`] and [`TestHooks`] implemented by this crate's types alone, so methods
/// can be added to them.
mod sealed {
    #[allow(unnameable_types)]
    pub trait Sealed {}
    impl Sealed for crate::Client {}
    impl Sealed for crate::GroupMember {}
    impl Sealed for crate::Consumer {}
    impl Sealed for crate::ShareConsumer {}
}
