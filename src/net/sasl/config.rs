//! Which SASL mechanism a client uses (`sasl.mechanism`) and its credentials.

use super::secret::Secret;
use super::token::TokenProvider;
use crate::error::{Error, Result};
use std::fmt;
use std::sync::Arc;

/// The SASL mechanism (`sasl.mechanism`) with what it needs to authenticate.
#[derive(Clone)]
#[non_exhaustive]
pub enum Mechanism {
    /// `PLAIN`: username and password sent as they are (use it over TLS only).
    Plain {
        /// `sasl.username`.
        username: String,
        /// `sasl.password`.
        password: Secret,
    },
    /// `SCRAM-SHA-256` (RFC 5802, RFC 7677).
    ScramSha256 {
        /// `sasl.username`.
        username: String,
        /// `sasl.password`.
        password: Secret,
    },
    /// `SCRAM-SHA-512` (RFC 5802 with SHA-512).
    ScramSha512 {
        /// `sasl.username`.
        username: String,
        /// `sasl.password`.
        password: Secret,
    },
    /// `OAUTHBEARER` (RFC 7628, KIP-255): a token from the application's provider, asked for
    /// before each authentication.
    OAuthBearer {
        /// Where tokens come from (an OIDC client, an AWS MSK IAM signer, …).
        provider: Arc<dyn TokenProvider>,
    },
}

impl Mechanism {
    /// The mechanism's SASL name, as SaslHandshake sends it.
    pub fn name(&self) -> &'static str {
        match self {
            Mechanism::Plain { .. } => "PLAIN",
            Mechanism::ScramSha256 { .. } => "SCRAM-SHA-256",
            Mechanism::ScramSha512 { .. } => "SCRAM-SHA-512",
            Mechanism::OAuthBearer { .. } => "OAUTHBEARER",
        }
    }

    /// Checks the credentials before any network call.
    pub fn validate(&self) -> Result<()> {
        let (username, password) = match self {
            Mechanism::Plain { username, password }
            | Mechanism::ScramSha256 { username, password }
            | Mechanism::ScramSha512 { username, password } => (username, password),
            Mechanism::OAuthBearer { .. } => return Ok(()),
        };
        let config = |property, problem: String| Err(Error::Config { property, problem });
        if username.is_empty() {
            return config("sasl.username", format!("{} needs a username", self.name()));
        }
        if password.is_empty() {
            return config("sasl.password", format!("{} needs a password", self.name()));
        }
        // PLAIN separates its fields with NUL bytes, so a NUL inside one would shift them.
        if let Mechanism::Plain { .. } = self {
            if username.contains('\0') {
                return config(
                    "sasl.username",
                    "PLAIN usernames cannot contain a NUL character".into(),
                );
            }
            if password.expose().contains('\0') {
                return config(
                    "sasl.password",
                    "PLAIN passwords cannot contain a NUL character".into(),
                );
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mechanism::Plain { username, password }
            | Mechanism::ScramSha256 { username, password }
            | Mechanism::ScramSha512 { username, password } => f
                .debug_struct(self.name())
                .field("username", username)
                .field("password", password)
                .finish(),
            Mechanism::OAuthBearer { .. } => f.debug_struct(self.name()).finish_non_exhaustive(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::sasl::token::tests::Fixed;

    fn scram(username: &str, password: &str) -> Mechanism {
        Mechanism::ScramSha512 {
            username: username.into(),
            password: password.into(),
        }
    }

    #[test]
    fn names() {
        let p = |u: &str| Mechanism::Plain {
            username: u.into(),
            password: "p".into(),
        };
        assert_eq!(p("u").name(), "PLAIN");
        assert_eq!(
            Mechanism::ScramSha256 {
                username: "u".into(),
                password: "p".into()
            }
            .name(),
            "SCRAM-SHA-256"
        );
        assert_eq!(scram("u", "p").name(), "SCRAM-SHA-512");
        let o = Mechanism::OAuthBearer {
            provider: Arc::new(Fixed::new("tok")),
        };
        assert_eq!(o.name(), "OAUTHBEARER");
        assert!(o.validate().is_ok());
    }

    #[test]
    fn validate_names_the_property() {
        let property = |m: Mechanism| match m.validate() {
            Err(Error::Config { property, .. }) => property,
            other => panic!("{other:?}"),
        };
        assert_eq!(property(scram("", "pencil")), "sasl.username");
        assert_eq!(property(scram("user", "")), "sasl.password");
        assert_eq!(
            property(Mechanism::Plain {
                username: "a\0b".into(),
                password: "p".into()
            }),
            "sasl.username"
        );
        let e = Mechanism::Plain {
            username: "a".into(),
            password: "pen\0cil".into(),
        }
        .validate()
        .unwrap_err();
        assert!(!e.to_string().contains("pen"), "{e}");
        assert!(scram("user", "pencil").validate().is_ok());
    }

    #[test]
    fn debug_hides_secrets() {
        for m in [
            Mechanism::Plain {
                username: "user".into(),
                password: "pencil".into(),
            },
            Mechanism::ScramSha256 {
                username: "user".into(),
                password: "pencil".into(),
            },
            scram("user", "pencil"),
            Mechanism::OAuthBearer {
                provider: Arc::new(Fixed::new("pencil")),
            },
        ] {
            let d = format!("{m:?} {m:#?}");
            assert!(!d.contains("pencil"), "{d}");
            assert!(d.contains(m.name()), "{d}");
        }
    }
}
