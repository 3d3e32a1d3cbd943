//! SASL authentication (issue 13): the mechanisms and the SaslHandshake / SaslAuthenticate
//! exchange, as pure logic the connection drives.
//!
//! Nothing here touches a socket. A mechanism is an [`Authenticator`](authenticator::Authenticator)
//! that turns server challenges into client responses; [`exchange`] frames those as Kafka
//! requests (KIP-152) or as raw length-prefixed tokens (brokers with SaslHandshake v0 only), over
//! closures the connection supplies, so every rule is unit-tested without a broker.
//!
//! Secrets (passwords, tokens) live in [`Secret`], whose `Debug` and `Display` print `***`, and
//! no error built here contains one.

pub mod authenticator;
pub mod config;
pub mod exchange;
pub mod oauthbearer;
pub mod plain;
pub mod scram;
pub mod secret;
pub mod token;

pub use config::Mechanism;
pub use secret::Secret;
pub use token::{Token, TokenCache, TokenProvider, UnsecuredJwsProvider};
