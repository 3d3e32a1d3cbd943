//! `PLAIN` (RFC 4616): one message, `\0username\0password`.

use super::authenticator::Step;
use super::secret::Secret;
use crate::error::{Error, Result};

/// The client side of PLAIN.
pub struct Plain {
    username: String,
    password: Secret,
}

impl Plain {
    /// For `username` and `password` (checked by `Mechanism::validate`).
    pub fn new(username: &str, password: &Secret) -> Plain {
        Plain {
            username: username.to_owned(),
            password: password.clone(),
        }
    }

    /// `\0username\0password` (no authorization identity: the broker uses the username).
    pub fn initial_response(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(2 + self.username.len() + self.password.expose().len());
        out.push(0);
        out.extend_from_slice(self.username.as_bytes());
        out.push(0);
        out.extend_from_slice(self.password.expose().as_bytes());
        out
    }

    pub(super) fn secret(&self) -> &str {
        self.password.expose()
    }

    /// PLAIN has no server challenge; the broker answers success with no bytes.
    pub fn on_challenge(&mut self, challenge: &[u8]) -> Result<Step> {
        if challenge.is_empty() {
            Ok(Step::Done)
        } else {
            Err(Error::Authentication {
                mechanism: "PLAIN",
                message: format!(
                    "the broker sent a {}-byte challenge; PLAIN has none",
                    challenge.len()
                ),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes() {
        let mut p = Plain::new("alice", &"pencil".into());
        assert_eq!(p.initial_response(), b"\0alice\0pencil");
        assert!(matches!(p.on_challenge(b""), Ok(Step::Done)));
        assert!(p.on_challenge(b"x").is_err());
    }
}
