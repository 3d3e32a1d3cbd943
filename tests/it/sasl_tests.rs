//! The connection's SASL steps against a scripted broker: the exact error paths (mechanism not
//! enabled, authentication failed) and KIP-368 re-authentication timing. The mechanisms' own
//! rules are unit-tested in `src/net/sasl`.

use crate::support::scripted::{api_versions_frame, full_table, Reply, Scripted, Seen};
use kafka_group::sasl::{Mechanism, Secret};
use kafka_group::unstable::protocol::messages::{
    MetadataRequest, MetadataResponse, ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_group::unstable::protocol::{ApiKey, Message, Request};
use kafka_group::unstable::Connection;
use kafka_group::unstable::RawClient;
use kafka_group::{Client, Error, SecurityProtocol};
use std::time::Duration;

/// A response frame body (header, then `resp` at `version`) for request `seen` of type `R`.
fn frame<R: Request>(seen: &Seen, resp: &R::Response) -> Vec<u8> {
    let mut out = Vec::new();
    ResponseHeader {
        correlation_id: seen.correlation_id,
        ..Default::default()
    }
    .encode(R::response_header_version(seen.api_version), &mut out)
    .unwrap();
    resp.encode(seen.api_version, &mut out).unwrap();
    out
}

/// A broker enabling PLAIN that answers each SaslAuthenticate with `auth`.
fn plain_broker(auth: impl Fn() -> SaslAuthenticateResponse + Send + 'static) -> Scripted {
    Scripted::start(move |seen| {
        let key = seen.api_key;
        if key == ApiKey::ApiVersions.key() {
            Reply::Frame(api_versions_frame(
                seen.correlation_id,
                seen.api_version,
                0,
                &full_table(),
            ))
        } else if key == ApiKey::SaslHandshake.key() {
            Reply::Frame(frame::<SaslHandshakeRequest>(
                seen,
                &SaslHandshakeResponse {
                    mechanisms: vec!["PLAIN".into(), "SCRAM-SHA-512".into()],
                    ..Default::default()
                },
            ))
        } else if key == ApiKey::SaslAuthenticate.key() {
            Reply::Frame(frame::<SaslAuthenticateRequest>(seen, &auth()))
        } else if key == ApiKey::Metadata.key() {
            Reply::Frame(frame::<MetadataRequest>(seen, &MetadataResponse::default()))
        } else {
            Reply::Close
        }
    })
}

fn connect(broker: &Scripted, mechanism: Mechanism) -> Result<Connection, Error> {
    let client = Client::builder()
        .bootstrap_servers(broker.addr.to_string())
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl(mechanism)
        .request_timeout(Duration::from_secs(5))
        .build()?;
    Connection::connect(&broker.addr.to_string(), client.connection_config())
}

fn plain(password: &str) -> Mechanism {
    Mechanism::Plain {
        username: "alice".into(),
        password: Secret::new(password),
    }
}

#[test]
fn plain_authenticates_and_then_requests_flow() {
    let broker = plain_broker(SaslAuthenticateResponse::default);
    let mut conn = connect(&broker, plain("alice-secret")).unwrap();
    conn.send(&MetadataRequest::default()).unwrap();
    let keys: Vec<i16> = broker.seen.lock().unwrap().iter().map(|s| s.api_key).collect();
    assert_eq!(
        keys,
        [
            ApiKey::ApiVersions.key(),
            ApiKey::SaslHandshake.key(),
            ApiKey::SaslAuthenticate.key(),
            ApiKey::Metadata.key()
        ]
    );
}

#[test]
fn a_mechanism_the_broker_lacks_names_what_it_has() {
    let broker = plain_broker(SaslAuthenticateResponse::default);
    let e = connect(
        &broker,
        Mechanism::ScramSha256 {
            username: "alice".into(),
            password: Secret::new("alice-secret"),
        },
    )
    .unwrap_err();
    // The scripted broker's handshake answer carries no error: it is the client that finds
    // its mechanism missing from the list, or the broker's UNSUPPORTED_SASL_MECHANISM.
    let text = e.to_string();
    assert!(
        matches!(
            e,
            Error::UnsupportedMechanism { .. } | Error::Authentication { .. }
        ),
        "{e:?}"
    );
    assert!(text.contains("SCRAM-SHA-256"), "{text}");
    assert!(!text.contains("alice-secret"), "{text}");
}

#[test]
fn a_failed_authentication_is_one_clear_error_without_the_secret() {
    let broker = plain_broker(|| SaslAuthenticateResponse {
        error_code: 58, // SASL_AUTHENTICATION_FAILED
        error_message: Some("Authentication failed: Invalid username or password".into()),
        ..Default::default()
    });
    let e = connect(&broker, plain("wrong-secret")).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, Error::Authentication { .. }), "{e:?}");
    assert!(
        text.contains("Invalid username or password") && text.contains("PLAIN"),
        "{text}"
    );
    assert!(!text.contains("wrong-secret") && !format!("{e:?}").contains("wrong-secret"));
}

#[test]
fn a_session_lifetime_makes_the_connection_reauthenticate_before_it_ends() {
    let broker = plain_broker(|| SaslAuthenticateResponse {
        session_lifetime_ms: 400,
        ..Default::default()
    });
    let mut conn = connect(&broker, plain("alice-secret")).unwrap();
    conn.send(&MetadataRequest::default()).unwrap();
    assert_eq!(conn.reauthentications(), 0);
    // Past 95 % of the lifetime the next request re-authenticates first.
    std::thread::sleep(Duration::from_millis(400));
    conn.send(&MetadataRequest::default()).unwrap();
    assert_eq!(conn.reauthentications(), 1);
    let handshakes = broker
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.api_key == ApiKey::SaslHandshake.key())
        .count();
    assert_eq!(handshakes, 2);
}

/// A broker refuses a re-authentication that begins less than a second after the previous one
/// (`ILLEGAL_SASL_STATE`, seen on Kafka 4.4 with 2 s OAUTHBEARER tokens); a session shorter
/// than that is renewed once the second is up, before the next request goes out.
#[test]
fn re_authentications_of_a_short_session_are_a_second_apart() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let at = seen.clone();
    let broker = plain_broker(move || {
        at.lock().unwrap().push(std::time::Instant::now());
        SaslAuthenticateResponse {
            session_lifetime_ms: 300,
            ..Default::default()
        }
    });
    let mut conn = connect(&broker, plain("alice-secret")).unwrap();
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(300));
        conn.send(&MetadataRequest::default()).unwrap();
    }
    assert_eq!(conn.reauthentications(), 3);
    let auths = seen.lock().unwrap().clone();
    assert_eq!(auths.len(), 4, "the first authentication and three more");
    // The first re-authentication follows the first authentication as soon as it is due; each
    // later one waits for the second since the previous one.
    for pair in auths[1..].windows(2) {
        let gap = pair[1] - pair[0];
        assert!(gap >= Duration::from_secs(1), "re-authentications {gap:?} apart");
    }
}

/// A re-authentication comes out of the request's own time: when the second a broker wants
/// between two of them would outlast what the caller gave, the request fails with a timeout at
/// once, rather than sleeping past it (a new connection authenticates afresh, with no wait).
#[test]
fn a_due_re_authentication_never_outlasts_the_callers_timeout() {
    let broker = plain_broker(|| SaslAuthenticateResponse {
        session_lifetime_ms: 300,
        ..Default::default()
    });
    let mut conn = connect(&broker, plain("alice-secret")).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    conn.send(&MetadataRequest::default()).unwrap();
    assert_eq!(conn.reauthentications(), 1);
    // Due again in about 0.3 s, but not allowed before a second after the first one.
    std::thread::sleep(Duration::from_millis(300));
    let timeout = Duration::from_millis(200);
    let started = std::time::Instant::now();
    let e = conn
        .send_at(&MetadataRequest::default(), 0, Some(timeout))
        .unwrap_err();
    // What the call promises is its timeout; "at once" is not timed (a loaded machine may take
    // longer than 200 ms to run any of this). Sleeping for the second and re-authenticating
    // would show as a second re-authentication, or as no error.
    assert!(
        started.elapsed() < timeout + crate::support::LOAD_MARGIN,
        "waited {:?}",
        started.elapsed()
    );
    assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
    assert_eq!(conn.reauthentications(), 1);
}
