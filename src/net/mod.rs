//! Talking to brokers: connections, version negotiation, the per-release version table.

pub mod connection;
pub mod releases;
pub mod sasl;
mod stream;
mod tls;
pub mod versions;

pub use connection::{Connection, ConnectionConfig, Interrupter, Pending};
pub(crate) use tls::TlsSettings;
pub use tls::{EndpointIdentification, SecurityProtocol, Tls};
pub use versions::{BrokerVersions, Capability, REMOVE_MEMBERS_BY_INSTANCE_ID, STATIC_MEMBERSHIP};
