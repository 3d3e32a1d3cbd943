//! One SASL authentication as a state machine: the client's first message, then an answer to
//! each server challenge until the mechanism is satisfied.

use super::config::Mechanism;
use super::oauthbearer::OAuthBearer;
use super::plain::Plain;
use super::scram::{random_nonce, Scram, ScramHash};
use crate::error::{Error, Result};

/// What to do after a server challenge.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Send these bytes and wait for the next challenge.
    Respond(Vec<u8>),
    /// The mechanism is satisfied: authentication succeeded on the client's side.
    Done,
}

/// The client side of one authentication with any mechanism. Made fresh for each
/// (re-)authentication, so OAUTHBEARER asks its provider for a token each time.
pub enum Authenticator {
    /// PLAIN.
    Plain(Plain),
    /// SCRAM-SHA-256 or SCRAM-SHA-512.
    Scram(Scram),
    /// OAUTHBEARER.
    OAuthBearer(OAuthBearer),
}

impl Authenticator {
    /// Starts an authentication for `mechanism` (validated first); for OAUTHBEARER this calls
    /// the token provider.
    pub fn new(mechanism: &Mechanism) -> Result<Authenticator> {
        mechanism.validate()?;
        Ok(match mechanism {
            Mechanism::Plain { username, password } => Authenticator::Plain(Plain::new(username, password)),
            Mechanism::ScramSha256 { username, password } => {
                Authenticator::Scram(Scram::new(ScramHash::Sha256, username, password, random_nonce()?))
            }
            Mechanism::ScramSha512 { username, password } => {
                Authenticator::Scram(Scram::new(ScramHash::Sha512, username, password, random_nonce()?))
            }
            Mechanism::OAuthBearer { provider } => {
                let token = provider
                    .token()
                    .map_err(|source| Error::TokenProvider { source })?;
                log::debug!(
                    "OAUTHBEARER: authenticating as {} with a token valid {:?}",
                    token.principal,
                    token.lifetime
                );
                Authenticator::OAuthBearer(OAuthBearer::new(&token)?)
            }
        })
    }

    /// The first message to send.
    pub fn initial_response(&mut self) -> Result<Vec<u8>> {
        Ok(match self {
            Authenticator::Plain(p) => p.initial_response(),
            Authenticator::Scram(s) => s.initial_response(),
            Authenticator::OAuthBearer(o) => o.initial_response(),
        })
    }

    /// The answer to a server challenge (the `auth_bytes` of a successful SaslAuthenticate
    /// response, or a raw token under the pre-KIP-152 framing).
    /// Errors quote what the server sent, masked like [`redact`](Self::redact).
    pub fn on_challenge(&mut self, challenge: &[u8]) -> Result<Step> {
        let step = match self {
            Authenticator::Plain(p) => p.on_challenge(challenge),
            Authenticator::Scram(s) => s.on_challenge(challenge),
            Authenticator::OAuthBearer(o) => o.on_challenge(challenge),
        };
        step.map_err(|e| match e {
            Error::Authentication { mechanism, message } => Error::Authentication {
                mechanism,
                message: self.redact(&message),
            },
            e => e,
        })
    }

    /// The mechanism's SASL name, for errors.
    pub fn mechanism(&self) -> &'static str {
        match self {
            Authenticator::Plain(_) => "PLAIN",
            Authenticator::Scram(s) => s.mechanism(),
            Authenticator::OAuthBearer(_) => "OAUTHBEARER",
        }
    }

    /// `text` (a broker's message) with any occurrence of this authentication's password or
    /// token replaced by `***`, so that a broker echoing it cannot leak it into an error.
    pub fn redact(&self, text: &str) -> String {
        let secret = match self {
            Authenticator::Plain(p) => p.secret(),
            Authenticator::Scram(s) => s.secret(),
            Authenticator::OAuthBearer(o) => o.secret(),
        };
        if secret.is_empty() {
            text.to_owned()
        } else {
            text.replace(secret, "***")
        }
    }

    /// What the server said about a rejected credential, when the mechanism carries it (the
    /// OAUTHBEARER JSON error), to add to the broker's failure message.
    pub fn rejection(&self) -> Option<&str> {
        match self {
            Authenticator::OAuthBearer(o) => o.rejection(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::sasl::token::tests::Fixed;
    use crate::net::sasl::token::{Token, TokenProvider};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn each_mechanism_starts() {
        let mut a = Authenticator::new(&Mechanism::Plain {
            username: "u".into(),
            password: "p".into(),
        })
        .unwrap();
        assert_eq!(a.initial_response().unwrap(), b"\0u\0p");
        let mut a = Authenticator::new(&Mechanism::ScramSha256 {
            username: "u".into(),
            password: "p".into(),
        })
        .unwrap();
        assert!(a.initial_response().unwrap().starts_with(b"n,,n=u,r="));
        let mut a = Authenticator::new(&Mechanism::OAuthBearer {
            provider: Arc::new(Fixed::new("t")),
        })
        .unwrap();
        assert_eq!(a.initial_response().unwrap(), b"n,,\x01auth=Bearer t\x01\x01");
        assert!(Authenticator::new(&Mechanism::Plain {
            username: "".into(),
            password: "p".into()
        })
        .is_err());
    }

    struct Counting(AtomicUsize);

    impl TokenProvider for Counting {
        fn token(&self) -> Result<Token, Box<dyn std::error::Error + Send + Sync>> {
            match self.0.fetch_add(1, Ordering::SeqCst) {
                0 => Ok(Fixed::new("first").0),
                _ => Err("the identity provider is down".into()),
            }
        }
    }

    #[test]
    fn provider_is_asked_for_each_authentication() {
        let provider = Arc::new(Counting(AtomicUsize::new(0)));
        let m = Mechanism::OAuthBearer {
            provider: provider.clone(),
        };
        assert!(Authenticator::new(&m).is_ok());
        let e = Authenticator::new(&m).err().expect("second token fails");
        assert!(matches!(e, Error::TokenProvider { .. }));
        assert!(e.to_string().contains("the identity provider is down"), "{e}");
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!(provider.0.load(Ordering::SeqCst), 2);
    }
}
