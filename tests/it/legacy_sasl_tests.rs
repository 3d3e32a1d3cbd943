//! The pre-KIP-152 SASL framing (SaslHandshake v0, then raw length-prefixed tokens, as Kafka
//! before 1.0 has only), against a real broker: Kafka still accepts SaslHandshake v0 and answers
//! it with that framing, so capping the handshake at v0 exercises the very bytes an old broker
//! would see.

use crate::support::secure::{self, ADMIN};
use kafka_group::sasl::{Mechanism, Secret};
use kafka_group::unstable::protocol::messages::MetadataRequest;
use kafka_group::unstable::Connection;
use kafka_group::unstable::RawClient;
use kafka_group::ApiKey;
use kafka_group::{Client, ClientBuilder, Error, SecurityProtocol};
use std::time::Instant;

fn v0(mechanism: Mechanism) -> ClientBuilder {
    let b = secure::shared();
    Client::builder()
        .bootstrap_servers(format!("localhost:{}", b.sasl_ssl.port()))
        .security_protocol(SecurityProtocol::SaslSsl)
        .ssl_ca_location(&b.tls.ca)
        .sasl(mechanism)
        .max_api_version(ApiKey::SaslHandshake, 0)
        // Well past the bound a refused login is held to, so a client that waited for a
        // request to time out fails it.
        .request_timeout(3 * crate::support::LOAD_MARGIN)
}

fn connect(builder: ClientBuilder) -> Result<Connection, Error> {
    let client = builder.build().unwrap();
    let b = secure::shared();
    Connection::connect(
        &format!("localhost:{}", b.sasl_ssl.port()),
        client.connection_config(),
    )
}

fn mechanisms(password: &str) -> Vec<Mechanism> {
    vec![
        Mechanism::Plain {
            username: ADMIN.name.into(),
            password: Secret::new(password),
        },
        Mechanism::ScramSha256 {
            username: ADMIN.name.into(),
            password: Secret::new(password),
        },
        Mechanism::ScramSha512 {
            username: ADMIN.name.into(),
            password: Secret::new(password),
        },
    ]
}

#[test]
fn raw_tokens_authenticate_with_each_password_mechanism() {
    for mechanism in mechanisms(ADMIN.password) {
        let name = mechanism.name();
        let mut conn = connect(v0(mechanism)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(conn.version(ApiKey::SaslHandshake).unwrap(), 0, "{name}");
        // The broker offers v1 (and SaslAuthenticate): only the cap made this connection raw.
        assert!(conn
            .broker_versions()
            .get(&ApiKey::SaslAuthenticate.key())
            .is_some());
        // Requests flow afterwards: the raw tokens left the stream aligned on frames.
        for _ in 0..3 {
            let metadata = conn
                .send(&MetadataRequest::default())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!metadata.brokers.is_empty(), "{name}");
        }
        // No SaslAuthenticate, so no session lifetime and nothing to re-authenticate.
        assert_eq!(conn.reauthentications(), 0, "{name}");
    }
    // And through the whole client, not just one connection.
    let client = v0(mechanisms(ADMIN.password).remove(2)).build().unwrap();
    let metadata = client.refresh_metadata(None).unwrap();
    assert!(!metadata.brokers.is_empty());
}

#[test]
fn a_wrong_password_under_raw_framing_is_an_authentication_error() {
    for mechanism in mechanisms("not-the-password") {
        let name = mechanism.name();
        // Built before the clock starts: the first use starts the broker.
        let builder = v0(mechanism);
        let started = Instant::now();
        let e = connect(builder).unwrap_err();
        assert!(
            started.elapsed() < crate::support::LOAD_MARGIN,
            "{name}: waited {:?}",
            started.elapsed()
        );
        let text = format!("{e} {e:?}");
        assert!(matches!(e, Error::Authentication { .. }), "{name}: {e:?}");
        assert!(text.contains("SaslHandshake v0"), "{name}: {text}");
        assert!(!text.contains("not-the-password"), "{name}: {text}");
    }
}
