//! `OAUTHBEARER` client (RFC 7628, Kafka's KIP-255 and KIP-342 extensions).

use super::authenticator::Step;
use super::secret::Secret;
use super::token::Token;
use crate::error::{Error, Result};
use zeroize::Zeroize;

enum State {
    Sent,
    /// The server rejected the token with this JSON error challenge (RFC 7628 §3.2.2); the
    /// client answered `\x01` and waits for the broker's failure.
    Rejected(String),
    Done,
}

/// The client side of one OAUTHBEARER exchange, for one token.
pub struct OAuthBearer {
    token: Secret,
    initial: Vec<u8>,
    state: State,
}

impl OAuthBearer {
    /// Checks `token` and builds the initial response
    /// `n,,\x01auth=Bearer <token>\x01[key=value\x01…]\x01`.
    pub fn new(token: &Token) -> Result<OAuthBearer> {
        let fail = |message: String| {
            Err(Error::Authentication {
                mechanism: "OAUTHBEARER",
                message,
            })
        };
        let value = token.value.expose();
        // RFC 6750 b64token: the token goes between `Bearer ` and `\x01` unquoted.
        if value.is_empty()
            || !value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~+/=".contains(&b))
        {
            return fail("the token provider's token is empty or not an RFC 6750 b64token".into());
        }
        for (key, v) in &token.extensions {
            if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphabetic()) || key == "auth" {
                return fail(format!(
                    "SASL extension name {key:?} is not letters only, or is the reserved `auth`"
                ));
            }
            if !v
                .bytes()
                .all(|b| (0x21..=0x7e).contains(&b) || b" \t\r\n".contains(&b))
            {
                return fail(format!(
                    "SASL extension {key:?} has a value with characters RFC 7628 forbids"
                ));
            }
        }
        let mut initial = format!("n,,\x01auth=Bearer {value}\x01");
        for (key, v) in &token.extensions {
            initial.push_str(&format!("{key}={v}\x01"));
        }
        initial.push('\x01');
        Ok(OAuthBearer {
            token: token.value.clone(),
            initial: initial.into_bytes(),
            state: State::Sent,
        })
    }

    pub(super) fn secret(&self) -> &str {
        self.token.expose()
    }

    /// The client's only message.
    pub fn initial_response(&self) -> Vec<u8> {
        self.initial.clone()
    }

    /// An empty answer is success; anything else is the server's JSON error, answered with
    /// `\x01` as RFC 7628 requires so the server can end the exchange.
    pub fn on_challenge(&mut self, challenge: &[u8]) -> Result<Step> {
        match &self.state {
            State::Sent if challenge.is_empty() => {
                self.state = State::Done;
                Ok(Step::Done)
            }
            State::Sent => {
                self.state = State::Rejected(String::from_utf8_lossy(challenge).into_owned());
                Ok(Step::Respond(vec![0x01]))
            }
            State::Rejected(json) => Err(Error::Authentication {
                mechanism: "OAUTHBEARER",
                message: format!("the broker rejected the token: {json}"),
            }),
            State::Done => Err(Error::Authentication {
                mechanism: "OAUTHBEARER",
                message: "the broker sent a challenge after success".into(),
            }),
        }
    }

    /// The server's JSON error, once it rejected the token.
    pub fn rejection(&self) -> Option<&str> {
        match &self.state {
            State::Rejected(json) => Some(json),
            _ => None,
        }
    }
}

impl Drop for OAuthBearer {
    fn drop(&mut self) {
        self.initial.zeroize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::sasl::token::tests::Fixed;

    #[test]
    fn bytes() {
        let mut token = Fixed::new("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.").0;
        let mut o = OAuthBearer::new(&token).unwrap();
        assert_eq!(
            o.initial_response(),
            b"n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.\x01\x01"
        );
        assert!(matches!(o.on_challenge(b""), Ok(Step::Done)));
        token.extensions.insert("logicalCluster".into(), "lkc-1".into());
        token.extensions.insert("abc".into(), "x y".into());
        let o = OAuthBearer::new(&token).unwrap();
        assert_eq!(
            o.initial_response(),
            b"n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.\x01abc=x y\x01logicalCluster=lkc-1\x01\x01"
        );
    }

    #[test]
    fn error_challenge_is_answered_and_reported() {
        let mut o = OAuthBearer::new(&Fixed::new("tok").0).unwrap();
        let json = br#"{"status":"invalid_token"}"#;
        assert!(matches!(o.on_challenge(json), Ok(Step::Respond(b)) if b == [1]));
        assert_eq!(o.rejection(), Some(r#"{"status":"invalid_token"}"#));
        let e = o.on_challenge(b"").unwrap_err().to_string();
        assert!(e.contains("invalid_token") && !e.contains("tok\x01"), "{e}");
    }

    #[test]
    fn bad_tokens_and_extensions() {
        let bad = |f: &dyn Fn(&mut Token)| {
            let mut t = Fixed::new("pencil").0;
            f(&mut t);
            let e = OAuthBearer::new(&t).err().expect("rejected").to_string();
            assert!(!e.contains("pencil"), "{e}");
        };
        bad(&|t| t.value = "".into());
        bad(&|t| t.value = "pen\x01cil".into());
        bad(&|t| t.value = "pen cil".into());
        bad(&|t| drop(t.extensions.insert("auth".into(), "x".into())));
        bad(&|t| drop(t.extensions.insert("a1".into(), "x".into())));
        bad(&|t| drop(t.extensions.insert("".into(), "x".into())));
        bad(&|t| drop(t.extensions.insert("k".into(), "x\x01".into())));
    }
}
