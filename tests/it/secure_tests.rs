//! Our client against a real Kafka with SSL, mTLS, SASL_SSL and SASL_PLAINTEXT listeners
//! (`support::secure`): every connection kind (metadata, produce, a static member's join and
//! heartbeats, fetch, commit) over each, and the errors a user meets, produced for real.

use crate::support::secure::{self, SecureBroker, ALICE};
use crate::support::unique_name;
use kafka_group::net::sasl::{Mechanism, Secret, UnsecuredJwsProvider};
use kafka_group::{
    Admin, Client, ClientBuilder, Error, NewTopic, OffsetReset, ProducerRecord, SecurityProtocol,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn builder(addr: SocketAddr, protocol: SecurityProtocol, b: &SecureBroker) -> ClientBuilder {
    Client::builder()
        .bootstrap_servers(format!("localhost:{}", addr.port()))
        .security_protocol(protocol)
        .ssl_ca_location(&b.tls.ca)
        .request_timeout(Duration::from_secs(10))
        .api_timeout(Duration::from_secs(30))
}

fn scram512(user: &secure::User) -> Mechanism {
    Mechanism::ScramSha512 {
        username: user.name.into(),
        password: Secret::new(user.password),
    }
}

/// Creates a topic, produces, joins a group as a static member, consumes and commits: every
/// connection kind the client opens, over `client`'s listener.
fn round_trip(what: &str, client: &Client) {
    let topic = unique_name("secure");
    Admin::new(client)
        .create_topics(&[NewTopic::new(&topic, 2, 1)], Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{what}: create_topics: {e}"));
    let mut p = client.producer().build().unwrap();
    for i in 0..10 {
        p.send(ProducerRecord::new(topic.as_str(), format!("v{i}")))
            .unwrap_or_else(|e| panic!("{what}: send: {e}"));
    }
    p.flush().unwrap_or_else(|e| panic!("{what}: flush: {e}"));
    let mut c = client
        .consumer(&unique_name("secure-grp"))
        .group_instance_id("s1")
        .subscribe([topic.as_str()])
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false)
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = 0;
    while got < 10 {
        assert!(Instant::now() < deadline, "{what}: {got} of 10 records");
        got += c
            .poll(Duration::from_millis(500))
            .unwrap_or_else(|e| panic!("{what}: poll: {e}"))
            .len();
    }
    c.commit().unwrap_or_else(|e| panic!("{what}: commit: {e}"));
    assert!(
        c.member().metrics().heartbeats > 0 || c.member().metrics().joins > 0,
        "{what}"
    );
    c.close().unwrap();
}

#[test]
fn every_connection_kind_works_over_each_secure_listener() {
    let b = secure::shared();
    let cases: Vec<(&str, ClientBuilder)> = vec![
        ("SSL", builder(b.ssl, SecurityProtocol::Ssl, b)),
        (
            "mTLS",
            builder(b.mtls, SecurityProtocol::Ssl, b)
                .ssl_certificate_location(&b.tls.client_cert)
                .ssl_key_location(&b.tls.client_key),
        ),
        (
            "SASL_SSL PLAIN",
            builder(b.sasl_ssl, SecurityProtocol::SaslSsl, b)
                .sasl_mechanism("PLAIN")
                .sasl_username(secure::ADMIN.name)
                .sasl_password(secure::ADMIN.password),
        ),
        (
            "SASL_SSL SCRAM-SHA-512",
            builder(b.sasl_ssl, SecurityProtocol::SaslSsl, b).sasl(scram512(&secure::ADMIN)),
        ),
        (
            "SASL_SSL SCRAM-SHA-256",
            builder(b.sasl_ssl, SecurityProtocol::SaslSsl, b).sasl(Mechanism::ScramSha256 {
                username: secure::ADMIN.name.into(),
                password: Secret::new(secure::ADMIN.password),
            }),
        ),
        (
            "SASL_SSL OAUTHBEARER",
            builder(b.sasl_ssl, SecurityProtocol::SaslSsl, b).sasl(Mechanism::OAuthBearer {
                provider: Arc::new(UnsecuredJwsProvider {
                    principal: secure::ADMIN.name.into(),
                    lifetime: Duration::from_secs(3600),
                }),
            }),
        ),
        (
            "SASL_PLAINTEXT SCRAM-SHA-512",
            builder(b.sasl_plaintext, SecurityProtocol::SaslPlaintext, b).sasl(scram512(&secure::ADMIN)),
        ),
    ];
    for (what, builder) in cases {
        let client = builder.build().unwrap_or_else(|e| panic!("{what}: build: {e}"));
        round_trip(what, &client);
    }
}

#[test]
fn the_errors_a_user_meets_are_produced_for_real() {
    let b = secure::shared();
    let quick = |builder: ClientBuilder| -> Error {
        let client = builder.build().unwrap();
        let t = Instant::now();
        let e = client.refresh_metadata(None).unwrap_err();
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "retried for {:?}: {e}",
            t.elapsed()
        );
        e
    };
    // Wrong password, unknown user: one clear error, not retried, no secret in it.
    let e = quick(
        builder(b.sasl_ssl, SecurityProtocol::SaslSsl, b).sasl(Mechanism::ScramSha512 {
            username: ALICE.name.into(),
            password: Secret::new("not-alices-password"),
        }),
    );
    assert!(matches!(e, Error::Authentication { .. }), "{e:?}");
    assert!(!format!("{e} {e:?}").contains("not-alices-password"), "{e}");
    let e = quick(
        builder(b.sasl_ssl, SecurityProtocol::SaslSsl, b).sasl(Mechanism::Plain {
            username: "nobody".into(),
            password: Secret::new("nobody-secret"),
        }),
    );
    assert!(matches!(e, Error::Authentication { .. }), "{e:?}");
    // A mechanism the listener does not enable (SASL_PLAINTEXT has SCRAM only).
    let e = quick(
        builder(b.sasl_plaintext, SecurityProtocol::SaslPlaintext, b)
            .sasl_mechanism("PLAIN")
            .sasl_username(ALICE.name)
            .sasl_password(ALICE.password),
    );
    assert!(matches!(e, Error::UnsupportedMechanism { .. }), "{e:?}");
    assert!(e.to_string().contains("SCRAM-SHA-512"), "{e}");
    // Certificates: untrusted (no CA given: the system store does not know the test CA),
    // expired, wrong host; and an mTLS listener without a client certificate.
    let e = quick(
        Client::builder()
            .bootstrap_servers(format!("localhost:{}", b.ssl.port()))
            .security_protocol(SecurityProtocol::Ssl),
    );
    assert!(
        matches!(e, Error::Tls { .. } | Error::Config { .. }),
        "untrusted CA: {e:?}"
    );
    let e = quick(builder(b.expired, SecurityProtocol::Ssl, b));
    assert!(e.to_string().contains("expired"), "{e}");
    let e = quick(builder(b.wrong_host, SecurityProtocol::Ssl, b));
    assert!(e.to_string().contains("not valid for"), "{e}");
    let e = quick(builder(b.mtls, SecurityProtocol::Ssl, b));
    assert!(
        matches!(e, Error::Tls { .. } | Error::Io { .. }),
        "mTLS without a certificate: {e:?}"
    );
    // TLS to a PLAINTEXT port, plaintext to a TLS port.
    let e = quick(builder(b.plaintext, SecurityProtocol::Ssl, b));
    assert!(e.to_string().contains("TLS"), "{e}");
    let e = quick(builder(b.ssl, SecurityProtocol::Plaintext, b));
    assert!(e.to_string().contains("PLAINTEXT listener"), "{e}");
}
