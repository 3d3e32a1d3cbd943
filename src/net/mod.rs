//! Talking to brokers: connections and their one owner (`Link`), version negotiation, the
//! per-release version table.

pub mod connection;
pub(crate) mod link;
pub mod releases;
pub mod sasl;
#[cfg(test)]
pub(crate) mod script;
mod stream;
mod tls;
pub mod versions;
pub(crate) mod wire;

pub use connection::{Connection, ConnectionConfig, Interrupter, Pending};
pub(crate) use tls::TlsSettings;
pub use tls::{EndpointIdentification, SecurityProtocol, Tls};
pub use versions::{
    BrokerVersions, Capability, CONSUMER_GROUP_PROTOCOL, REMOVE_MEMBERS_BY_INSTANCE_ID, SHARE_GROUPS,
    STATIC_MEMBERSHIP,
};
