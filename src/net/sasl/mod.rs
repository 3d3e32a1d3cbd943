//! SASL authentication (issue 13): the mechanisms and the SaslHandshake / SaslAuthenticate
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
// are the connection's business. Until the connection drives them (issue 13's wiring), outside
// tests nothing calls them yet.
#[cfg_attr(not(test), allow(dead_code))]
mod authenticator;
mod config;
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) mod exchange;
#[cfg_attr(not(test), allow(dead_code))]
mod oauthbearer;
#[cfg_attr(not(test), allow(dead_code))]
mod plain;
#[cfg_attr(not(test), allow(dead_code))]
mod scram;
mod secret;
mod token;

pub use config::Mechanism;
pub use secret::Secret;
pub use token::{Token, TokenCache, TokenProvider, UnsecuredJwsProvider};
