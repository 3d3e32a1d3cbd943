//! SaslHandshake and SaslAuthenticate (KIP-152), the pre-KIP-152 raw framing, and KIP-368
//! re-authentication timing — requests built and responses read without a socket.
//!
//! The connection calls [`framing`] with the broker's ApiVersions, sends [`handshake`], then
//! [`authenticate`] (SaslHandshake v1: tokens inside SaslAuthenticate requests) or
//! [`authenticate_raw`] (SaslHandshake v0 only: each token written with a 4-byte length and no
//! Kafka header, the server's token read back the same way). Re-authentication (KIP-368) runs
//! the same two steps again on the open connection.

use super::authenticator::{Authenticator, Step};
use super::config::Mechanism;
use crate::error::{Error, Result};
use crate::net::{BrokerVersions, ConnectionConfig};
use crate::protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use crate::protocol::ApiKey;
use crate::KafkaCode;
use bytes::Bytes;
use std::time::Duration;

/// More challenges than any mechanism here needs (SCRAM has two); a server that keeps sending
/// them is stopped rather than followed forever.
const MAX_ROUNDS: usize = 8;

/// How SASL tokens travel on a connection, from the broker's ApiVersions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// KIP-152 (Kafka 1.0+): SaslHandshake v1, then each token in a SaslAuthenticate request.
    Kip152 {
        /// SaslHandshake version (1).
        handshake: i16,
        /// SaslAuthenticate version (0–2; 1+ reports the session lifetime).
        authenticate: i16,
    },
    /// Before KIP-152: SaslHandshake v0, then raw length-prefixed tokens.
    Raw,
}

impl Framing {
    /// The SaslHandshake version to send.
    pub fn handshake_version(&self) -> i16 {
        match self {
            Framing::Kip152 { handshake, .. } => *handshake,
            Framing::Raw => 0,
        }
    }
}

/// Picks the framing like every other version: the highest SaslHandshake both sides (and any
/// configured cap) allow; v1 means SaslAuthenticate, whose version is picked the same way.
pub fn framing(config: &ConnectionConfig, broker: &BrokerVersions) -> Result<Framing> {
    let handshake = config.pick_version(ApiKey::SaslHandshake, broker)?;
    if handshake == 0 {
        return Ok(Framing::Raw);
    }
    let authenticate = config.pick_version(ApiKey::SaslAuthenticate, broker)?;
    Ok(Framing::Kip152 {
        handshake,
        authenticate,
    })
}

/// The SaslHandshake request naming `mechanism`.
pub fn handshake_request(mechanism: &Mechanism) -> SaslHandshakeRequest {
    SaslHandshakeRequest {
        mechanism: mechanism.name().into(),
        ..Default::default()
    }
}

/// Reads a SaslHandshake response: success, or the broker's enabled mechanisms when it lacks
/// ours.
pub fn check_handshake(mechanism: &Mechanism, response: &SaslHandshakeResponse) -> Result<()> {
    match KafkaCode::from(response.error_code) {
        KafkaCode::None => Ok(()),
        KafkaCode::UnsupportedSaslMechanism => Err(Error::UnsupportedMechanism {
            wanted: mechanism.name(),
            enabled: response
                .mechanisms
                .iter()
                .map(|m| m.as_str().to_owned())
                .collect(),
        }),
        code => Err(Error::Kafka {
            api: ApiKey::SaslHandshake,
            code,
            message: None,
        }),
    }
}

/// The SaslAuthenticate request carrying `token`.
pub fn authenticate_request(token: Vec<u8>) -> SaslAuthenticateRequest {
    SaslAuthenticateRequest {
        auth_bytes: Bytes::from(token),
        ..Default::default()
    }
}

/// Reads a SaslAuthenticate response: the server's challenge and the session lifetime in ms
/// (0 when the broker has none or the version predates it), or the failure. The broker's
/// message is kept; anything of our secret in it is masked.
pub fn check_authenticate(auth: &Authenticator, response: SaslAuthenticateResponse) -> Result<(Bytes, i64)> {
    let code = KafkaCode::from(response.error_code);
    if code == KafkaCode::None {
        return Ok((response.auth_bytes, response.session_lifetime_ms));
    }
    let message = response
        .error_message
        .map(|m| auth.redact(m.as_str()))
        .filter(|m| !m.is_empty());
    match code {
        KafkaCode::SaslAuthenticationFailed => {
            let mut message = message.unwrap_or_else(|| "the broker gave no reason".into());
            if let Some(detail) = auth.rejection() {
                message.push_str(&format!(" (server said {})", auth.redact(detail)));
            }
            Err(Error::Authentication {
                mechanism: auth.mechanism(),
                message,
            })
        }
        code => Err(Error::Kafka {
            api: ApiKey::SaslAuthenticate,
            code,
            message,
        }),
    }
}

/// A finished authentication.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Session {
    /// The session lifetime the broker reported (SaslAuthenticate v1+,
    /// `connections.max.reauth.ms` capped by the credential's own expiry), if any.
    pub lifetime: Option<Duration>,
    /// When to re-authenticate (KIP-368), counted from the final response's arrival.
    pub reauthenticate_after: Option<Duration>,
}

/// KIP-368: re-authenticate at 85–95 % of the session lifetime, as the Java client does — early
/// enough for network latency and clock drift, spread by `fraction` (in 0..1, random per
/// connection) so that connections made together do not re-authenticate together — and at
/// least [`LATENCY_ALLOWANCE_MS`] before the end of a short session, where 5 % is only a few
/// dozen milliseconds. `None` when the broker set no lifetime (zero or negative).
pub fn reauthenticate_after(session_lifetime_ms: i64, fraction: f64) -> Option<Duration> {
    if session_lifetime_ms <= 0 {
        return None;
    }
    let fraction = if fraction.is_finite() {
        fraction.clamp(0.0, 1.0)
    } else {
        0.5
    };
    let lifetime = session_lifetime_ms as f64;
    let mut ms = lifetime * (0.85 + 0.10 * fraction);
    // Not past half the session, however short: a session of 300 ms is renewed at 150 ms.
    ms = ms.min((lifetime - LATENCY_ALLOWANCE_MS as f64).max(lifetime / 2.0));
    Some(Duration::from_millis(ms as u64))
}

/// What a request may take to reach the broker on a loaded machine (a thread scheduled late, a
/// broker's network thread behind): the broker closes a connection whose request arrives after
/// the session ended.
pub const LATENCY_ALLOWANCE_MS: i64 = 250;

/// A random fraction in 0..1 for [`reauthenticate_after`]; 0.5 if the OS has no randomness
/// (only the spread is lost).
pub fn random_fraction() -> f64 {
    let mut bytes = [0u8; 8];
    match getrandom::fill(&mut bytes) {
        Ok(()) => (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64,
        Err(_) => 0.5,
    }
}

/// Sends the SaslHandshake for `mechanism` at `framing`'s version through `send` and checks
/// the answer.
pub fn handshake(
    mechanism: &Mechanism,
    framing: Framing,
    send: impl FnOnce(&SaslHandshakeRequest, i16) -> Result<SaslHandshakeResponse>,
) -> Result<()> {
    let response = send(&handshake_request(mechanism), framing.handshake_version())?;
    check_handshake(mechanism, &response)
}

/// Runs one authentication over SaslAuthenticate requests at `version` (after [`handshake`]
/// with [`Framing::Kip152`]). `send` sends a request and returns the broker's response;
/// `fraction` spreads the re-authentication time ([`random_fraction`]).
pub fn authenticate(
    mechanism: &Mechanism,
    version: i16,
    mut send: impl FnMut(&SaslAuthenticateRequest, i16) -> Result<SaslAuthenticateResponse>,
    fraction: f64,
) -> Result<Session> {
    let mut auth = Authenticator::new(mechanism)?;
    let mut token = auth.initial_response()?;
    for _ in 0..MAX_ROUNDS {
        let response = send(&authenticate_request(token), version)?;
        let (challenge, lifetime_ms) = check_authenticate(&auth, response)?;
        match auth.on_challenge(&challenge)? {
            Step::Respond(next) => token = next,
            Step::Done => {
                let lifetime = (lifetime_ms > 0).then(|| Duration::from_millis(lifetime_ms as u64));
                return Ok(Session {
                    lifetime,
                    reauthenticate_after: reauthenticate_after(lifetime_ms, fraction),
                });
            }
        }
    }
    Err(too_many_rounds(&auth))
}

/// Runs one authentication with raw tokens (after [`handshake`] with [`Framing::Raw`]).
/// `exchange` writes a token (4-byte length, no Kafka header) and returns the server's next
/// token. Under this framing a broker reports a failed authentication only by closing the
/// connection, so the caller should read an I/O error from `exchange` as that.
pub fn authenticate_raw(
    mechanism: &Mechanism,
    mut exchange: impl FnMut(&[u8]) -> Result<Vec<u8>>,
) -> Result<()> {
    let mut auth = Authenticator::new(mechanism)?;
    let mut token = auth.initial_response()?;
    for _ in 0..MAX_ROUNDS {
        let challenge = exchange(&token)?;
        match auth.on_challenge(&challenge)? {
            Step::Respond(next) => token = next,
            Step::Done => return Ok(()),
        }
    }
    Err(too_many_rounds(&auth))
}

fn too_many_rounds(auth: &Authenticator) -> Error {
    Error::Authentication {
        mechanism: auth.mechanism(),
        message: format!("the broker sent more than {MAX_ROUNDS} challenges"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::sasl::token::tests::Fixed;
    use crate::protocol::{Message, VersionRange};
    use std::sync::Arc;

    fn plain() -> Mechanism {
        Mechanism::Plain {
            username: "alice".into(),
            password: "pencil".into(),
        }
    }

    fn broker(handshake: i16, authenticate: Option<i16>) -> BrokerVersions {
        let mut b = BrokerVersions::new();
        b.insert(
            ApiKey::SaslHandshake.key(),
            VersionRange {
                min: 0,
                max: handshake,
            },
        );
        if let Some(a) = authenticate {
            b.insert(ApiKey::SaslAuthenticate.key(), VersionRange { min: 0, max: a });
        }
        b
    }

    #[test]
    fn framing_follows_api_versions() {
        let c = ConnectionConfig::default();
        assert_eq!(
            framing(&c, &broker(1, Some(2))).unwrap(),
            Framing::Kip152 {
                handshake: 1,
                authenticate: 2
            }
        );
        assert_eq!(
            framing(&c, &broker(1, Some(0))).unwrap(),
            Framing::Kip152 {
                handshake: 1,
                authenticate: 0
            }
        );
        assert_eq!(framing(&c, &broker(0, None)).unwrap(), Framing::Raw);
        assert!(matches!(
            framing(&c, &broker(1, None)),
            Err(Error::UnsupportedVersion { .. })
        ));
        assert!(matches!(
            framing(&c, &BrokerVersions::new()),
            Err(Error::UnsupportedVersion { .. })
        ));
        let mut capped = ConnectionConfig::default();
        capped.version_caps.insert(ApiKey::SaslHandshake.key(), 0);
        assert_eq!(framing(&capped, &broker(1, Some(2))).unwrap(), Framing::Raw);
        capped.version_caps.insert(ApiKey::SaslHandshake.key(), 1);
        capped.version_caps.insert(ApiKey::SaslAuthenticate.key(), 1);
        assert_eq!(
            framing(&capped, &broker(1, Some(2))).unwrap(),
            Framing::Kip152 {
                handshake: 1,
                authenticate: 1
            }
        );
    }

    #[test]
    fn requests_encode_at_every_version() {
        let hs = handshake_request(&Mechanism::ScramSha512 {
            username: "u".into(),
            password: "p".into(),
        });
        for v in 0..=1 {
            // int16 length + "SCRAM-SHA-512"
            assert_eq!(hs.to_bytes(v).unwrap(), b"\x00\x0dSCRAM-SHA-512", "v{v}");
        }
        let auth = authenticate_request(b"\0u\0p".to_vec());
        for v in 0..=1 {
            assert_eq!(auth.to_bytes(v).unwrap(), b"\x00\x00\x00\x04\0u\0p", "v{v}");
        }
        // v2 is flexible: compact bytes (length + 1 as a varint) and an empty tag buffer.
        assert_eq!(auth.to_bytes(2).unwrap(), b"\x05\0u\0p\x00");
        assert!(hs.to_bytes(2).is_err());
        assert!(auth.to_bytes(3).is_err());
    }

    fn hs_response(code: KafkaCode, mechanisms: &[&str]) -> SaslHandshakeResponse {
        SaslHandshakeResponse {
            error_code: code.code(),
            mechanisms: mechanisms.iter().map(|&m| m.into()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn handshake_answers() {
        assert!(check_handshake(&plain(), &hs_response(KafkaCode::None, &["PLAIN"])).is_ok());
        let e = check_handshake(
            &plain(),
            &hs_response(KafkaCode::UnsupportedSaslMechanism, &["SCRAM-SHA-512", "GSSAPI"]),
        )
        .unwrap_err();
        match &e {
            Error::UnsupportedMechanism { wanted, enabled } => {
                assert_eq!(*wanted, "PLAIN");
                assert_eq!(enabled, &["SCRAM-SHA-512", "GSSAPI"]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            e.to_string(),
            "SASL mechanism PLAIN is not enabled on the broker; it enables SCRAM-SHA-512, GSSAPI"
        );
        let e =
            check_handshake(&plain(), &hs_response(KafkaCode::UnsupportedSaslMechanism, &[])).unwrap_err();
        assert!(e.to_string().contains("enables none"), "{e}");
        let e = check_handshake(&plain(), &hs_response(KafkaCode::IllegalSaslState, &[])).unwrap_err();
        assert_eq!(e.kafka_code(), Some(KafkaCode::IllegalSaslState));
        // Through the driver, at the picked version.
        let mut seen = None;
        handshake(&plain(), Framing::Raw, |req, v| {
            seen = Some((req.mechanism.as_str().to_owned(), v));
            Ok(hs_response(KafkaCode::None, &["PLAIN"]))
        })
        .unwrap();
        assert_eq!(seen, Some(("PLAIN".into(), 0)));
    }

    fn auth_response(
        code: KafkaCode,
        message: Option<&str>,
        bytes: &[u8],
        lifetime_ms: i64,
    ) -> SaslAuthenticateResponse {
        SaslAuthenticateResponse {
            error_code: code.code(),
            error_message: message.map(Into::into),
            auth_bytes: Bytes::copy_from_slice(bytes),
            session_lifetime_ms: lifetime_ms,
            ..Default::default()
        }
    }

    #[test]
    fn plain_success_with_session_lifetime() {
        let mut sent = Vec::new();
        let session = authenticate(
            &plain(),
            2,
            |req, v| {
                sent.push((req.auth_bytes.to_vec(), v));
                Ok(auth_response(KafkaCode::None, None, b"", 600_000))
            },
            0.5,
        )
        .unwrap();
        assert_eq!(sent, [(b"\0alice\0pencil".to_vec(), 2)]);
        assert_eq!(session.lifetime, Some(Duration::from_secs(600)));
        assert_eq!(session.reauthenticate_after, Some(Duration::from_secs(540)));
        let session = authenticate(
            &plain(),
            0,
            |_, _| Ok(auth_response(KafkaCode::None, None, b"", 0)),
            0.5,
        )
        .unwrap();
        assert_eq!(
            session,
            Session {
                lifetime: None,
                reauthenticate_after: None
            }
        );
    }

    #[test]
    fn authentication_failed_keeps_the_message_not_the_secret() {
        let e = authenticate(
            &plain(),
            1,
            |_, _| {
                Ok(auth_response(
                    KafkaCode::SaslAuthenticationFailed,
                    Some("Authentication failed: Invalid username or password pencil"),
                    b"",
                    0,
                ))
            },
            0.5,
        )
        .unwrap_err();
        assert!(matches!(
            e,
            Error::Authentication {
                mechanism: "PLAIN",
                ..
            }
        ));
        let text = format!("{e} {e:?}");
        assert!(text.contains("Invalid username or password"), "{text}");
        assert!(!text.contains("pencil"), "{text}");
        let e = authenticate(
            &plain(),
            1,
            |_, _| Ok(auth_response(KafkaCode::SaslAuthenticationFailed, None, b"", 0)),
            0.5,
        )
        .unwrap_err();
        assert!(e.to_string().contains("no reason"), "{e}");
        let e = authenticate(
            &plain(),
            1,
            |_, _| Ok(auth_response(KafkaCode::IllegalSaslState, Some("x"), b"", 0)),
            0.5,
        )
        .unwrap_err();
        assert_eq!(e.kafka_code(), Some(KafkaCode::IllegalSaslState));
        // A transport error is passed through unchanged.
        let e = authenticate(&plain(), 1, |_, _| Err(Error::Closed), 0.5).unwrap_err();
        assert!(matches!(e, Error::Closed));
    }

    #[test]
    fn oauthbearer_rejection_reports_the_server_json() {
        let m = Mechanism::OAuthBearer {
            provider: Arc::new(Fixed::new("s3cr3t-token")),
        };
        let mut round = 0;
        let e = authenticate(
            &m,
            1,
            |req, _| {
                round += 1;
                Ok(match round {
                    1 => {
                        assert_eq!(&req.auth_bytes[..], b"n,,\x01auth=Bearer s3cr3t-token\x01\x01");
                        auth_response(KafkaCode::None, None, br#"{"status":"invalid_token"}"#, 0)
                    }
                    _ => {
                        assert_eq!(&req.auth_bytes[..], b"\x01");
                        auth_response(
                            KafkaCode::SaslAuthenticationFailed,
                            Some("token s3cr3t-token expired"),
                            b"",
                            0,
                        )
                    }
                })
            },
            0.5,
        )
        .unwrap_err();
        let text = format!("{e} {e:?}");
        assert!(
            text.contains("invalid_token") && text.contains("expired"),
            "{text}"
        );
        assert!(!text.contains("s3cr3t"), "{text}");
    }

    #[test]
    fn endless_challenges_are_cut_off() {
        let m = Mechanism::OAuthBearer {
            provider: Arc::new(Fixed::new("t")),
        };
        // OAUTHBEARER answers one error challenge; a second one ends the exchange.
        let e = authenticate(
            &m,
            1,
            |_, _| Ok(auth_response(KafkaCode::None, None, b"{}", 0)),
            0.5,
        )
        .unwrap_err();
        assert!(matches!(e, Error::Authentication { .. }));
        let mut rounds = 0;
        let e = authenticate_raw(&plain(), |_| {
            rounds += 1;
            Ok(b"x".to_vec())
        })
        .unwrap_err();
        assert!(matches!(e, Error::Authentication { .. }));
        assert_eq!(rounds, 1);
    }

    #[test]
    fn raw_framing_plain_and_oauthbearer() {
        let mut sent = Vec::new();
        authenticate_raw(&plain(), |t| {
            sent.push(t.to_vec());
            Ok(Vec::new())
        })
        .unwrap();
        assert_eq!(sent, [b"\0alice\0pencil".to_vec()]);
        let m = Mechanism::OAuthBearer {
            provider: Arc::new(Fixed::new("t")),
        };
        authenticate_raw(&m, |_| Ok(Vec::new())).unwrap();
        assert!(matches!(
            authenticate_raw(&plain(), |_| Err(Error::Closed)),
            Err(Error::Closed)
        ));
    }

    #[test]
    fn scram_through_the_driver_checks_the_server() {
        // Without the password a server cannot answer server-first correctly and sign; the
        // client must not report success whatever the broker's error code says.
        let m = Mechanism::ScramSha256 {
            username: "user".into(),
            password: "pencil".into(),
        };
        let mut round = 0;
        let e = authenticate(
            &m,
            1,
            |req, _| {
                round += 1;
                let nonce = std::str::from_utf8(&req.auth_bytes)
                    .unwrap_or("")
                    .rsplit("r=")
                    .next()
                    .unwrap_or("")
                    .to_owned();
                Ok(match round {
                    1 => auth_response(
                        KafkaCode::None,
                        None,
                        format!("r={nonce}srv,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096").as_bytes(),
                        0,
                    ),
                    _ => auth_response(
                        KafkaCode::None,
                        None,
                        b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
                        0,
                    ),
                })
            },
            0.5,
        )
        .unwrap_err();
        assert!(e.to_string().contains("signature is wrong"), "{e}");
        assert_eq!(round, 2);
    }

    #[test]
    fn reauthentication_timing() {
        assert_eq!(reauthenticate_after(0, 0.5), None);
        assert_eq!(reauthenticate_after(-1, 0.5), None);
        assert_eq!(
            reauthenticate_after(100_000, 0.0),
            Some(Duration::from_millis(85_000))
        );
        assert_eq!(
            reauthenticate_after(100_000, 1.0),
            Some(Duration::from_millis(95_000))
        );
        assert_eq!(
            reauthenticate_after(100_000, 0.5),
            Some(Duration::from_millis(90_000))
        );
        assert_eq!(
            reauthenticate_after(100_000, 7.0),
            Some(Duration::from_millis(95_000))
        );
        assert_eq!(
            reauthenticate_after(100_000, f64::NAN),
            Some(Duration::from_millis(90_000))
        );
        assert!(reauthenticate_after(i64::MAX, 1.0).is_some());
        // Short sessions: at least the latency allowance before the end, never past half.
        assert_eq!(
            reauthenticate_after(2_000, 1.0),
            Some(Duration::from_millis(1_750))
        );
        assert_eq!(
            reauthenticate_after(2_000, 0.0),
            Some(Duration::from_millis(1_700))
        );
        assert_eq!(reauthenticate_after(400, 1.0), Some(Duration::from_millis(200)));
        for _ in 0..100 {
            let f = random_fraction();
            assert!((0.0..1.0).contains(&f), "{f}");
        }
        assert_ne!(random_fraction(), random_fraction());
    }

    #[test]
    fn no_error_shows_a_secret() {
        const SECRET: &str = "pencil-SECRET";
        let mechanisms = [
            Mechanism::Plain {
                username: "alice".into(),
                password: SECRET.into(),
            },
            Mechanism::ScramSha256 {
                username: "alice".into(),
                password: SECRET.into(),
            },
            Mechanism::ScramSha512 {
                username: "alice".into(),
                password: SECRET.into(),
            },
            Mechanism::OAuthBearer {
                provider: Arc::new(Fixed::new(SECRET)),
            },
        ];
        let mut errors = Vec::new();
        for m in &mechanisms {
            // Refused, with a broker message that echoes the secret.
            errors.push(
                authenticate(
                    m,
                    2,
                    |_, _| {
                        Ok(auth_response(
                            KafkaCode::SaslAuthenticationFailed,
                            Some(&format!("bad {SECRET}")),
                            b"",
                            0,
                        ))
                    },
                    0.5,
                )
                .unwrap_err(),
            );
            // A challenge each mechanism rejects: garbage, then a forged SCRAM server.
            errors.push(
                authenticate_raw(m, |_| Ok(format!("e={SECRET}").into_bytes()))
                    .err()
                    .unwrap_or(Error::Closed),
            );
            let mut round = 0;
            errors.push(
                authenticate_raw(m, |t| {
                    round += 1;
                    let nonce = std::str::from_utf8(t)
                        .unwrap_or("")
                        .rsplit("r=")
                        .next()
                        .unwrap_or("")
                        .to_owned();
                    Ok(match round {
                        1 => format!("r={nonce}x,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096").into_bytes(),
                        _ => b"v=AAAA".to_vec(),
                    })
                })
                .err()
                .unwrap_or(Error::Closed),
            );
            errors.push(
                check_handshake(m, &hs_response(KafkaCode::UnsupportedSaslMechanism, &["GSSAPI"]))
                    .unwrap_err(),
            );
        }
        errors.push(
            Mechanism::Plain {
                username: "a".into(),
                password: format!("{SECRET}\0").into(),
            }
            .validate()
            .unwrap_err(),
        );
        for e in &errors {
            let text = format!("{e} | {e:?} | {e:#?}");
            assert!(!text.contains(SECRET), "{text}");
        }
        assert!(
            errors
                .iter()
                .filter(|e| matches!(e, Error::Authentication { .. }))
                .count()
                >= 8
        );
    }
}
