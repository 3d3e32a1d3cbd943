//! SASL authentication: the mechanisms and the SaslHandshake / SaslAuthenticate
//! exchange, as pure logic the connection drives.
//!
//! Nothing here touches a socket. A mechanism is an `Authenticator`
//! that turns server challenges into client responses; `exchange` frames those as Kafka
//! requests (KIP-152) or as raw length-prefixed tokens (brokers with SaslHandshake v0 only), over
//! closures the connection supplies, so every rule is unit-tested without a broker.
//!
//! Secrets (passwords, tokens) live in [`Secret`], whose `Debug` and `Display` print `***`, and
//! no error built here contains one.

// Only the types an application configures are public; the state machines and the exchange
// are the connection's business.
mod authenticator;
mod config;
pub(crate) mod exchange;
mod oauthbearer;
mod plain;
mod salted;
mod scram;
mod secret;
mod token;

pub use config::Mechanism;
pub use secret::Secret;
pub use token::{Token, TokenCache, TokenProvider, UnsecuredJwsProvider};
