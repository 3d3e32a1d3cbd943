//! The secure broker of `support::secure` really secures: each listener accepts a foreign client
//! with the right credentials and rejects wrong ones, and the authorizer denies bob outside his
//! ACLs. This proves the broker side without our client: librdkafka 2.16 (`support::rdkafka`).

use crate::support::{self, rdkafka, secure};
use kafka_group::Client;
use serde_json::Value;
use std::net::SocketAddr;

/// librdkafka's metadata request against `addr` with properties `props`, for `topic` if given:
/// whether it connected, and what it answered or why it failed.
fn metadata(addr: SocketAddr, props: &[(&str, String)], topic: Option<&str>) -> (bool, String) {
    let answer = match topic {
        Some(topic) => rdkafka::topic_metadata(addr, topic, props),
        None => rdkafka::metadata(addr, props),
    };
    match answer {
        Ok(json) => (json["brokers"] == 1, json.to_string()),
        Err(e) => (false, e),
    }
}

/// From a [`metadata`] answer for a topic: its partition count and librdkafka's error for it.
fn topic_answer(out: &str) -> (u64, String) {
    let json: Value = serde_json::from_str(out).unwrap_or(Value::Null);
    let topic = &json["topic"];
    (
        topic["partitions"].as_u64().unwrap_or(0),
        topic["error"].as_str().unwrap_or("").to_string(),
    )
}

fn ca() -> (&'static str, String) {
    ("ssl.ca.location", secure::shared().tls.ca.display().to_string())
}

fn sasl(protocol: &str, mechanism: &str, user: &str, password: &str) -> Vec<(&'static str, String)> {
    let mut props = vec![
        ("security.protocol", protocol.to_owned()),
        ("sasl.mechanism", mechanism.to_owned()),
        ("sasl.username", user.to_owned()),
        ("sasl.password", password.to_owned()),
    ];
    if protocol == "sasl_ssl" {
        props.push(ca());
    }
    props
}

fn topic(prefix: &str) -> String {
    let b = secure::shared();
    let client = Client::builder()
        .bootstrap_servers(b.plaintext.to_string())
        .build()
        .unwrap();
    support::create_topic(&client, prefix, 1, 1)
}

#[test]
fn ssl_accepts_the_test_ca_and_rejects_an_untrusted_broker() {
    let b = secure::shared();
    let ssl = ("security.protocol", "ssl".to_owned());
    let (ok, out) = metadata(b.ssl, &[ssl.clone(), ca()], None);
    assert!(ok, "SSL with the test CA: {out}");
    // Without the test CA the system trust store does not know the broker.
    let (ok, out) = metadata(
        b.ssl,
        &[ssl.clone(), ("ssl.ca.location", "/dev/null".into())],
        None,
    );
    assert!(!ok, "SSL without the CA connected: {out}");
    let (ok, out) = metadata(b.expired(), &[ssl.clone(), ca()], None);
    assert!(!ok, "expired certificate accepted: {out}");
    let (ok, out) = metadata(b.wrong_host(), &[ssl, ca()], None);
    assert!(!ok, "wrong-host certificate accepted: {out}");
}

#[test]
fn mtls_requires_the_client_certificate() {
    let b = secure::shared();
    let ssl = ("security.protocol", "ssl".to_owned());
    let (ok, out) = metadata(b.mtls(), &[ssl.clone(), ca()], None);
    assert!(!ok, "MTLS without a client certificate connected: {out}");
    let cert = (
        "ssl.certificate.location",
        b.tls.client_cert.display().to_string(),
    );
    let (ok, out) = metadata(
        b.mtls(),
        &[
            ssl.clone(),
            ca(),
            cert.clone(),
            ("ssl.key.location", b.tls.client_key.display().to_string()),
        ],
        None,
    );
    assert!(ok, "MTLS with the client certificate: {out}");
    let encrypted = [
        ssl,
        ca(),
        cert,
        (
            "ssl.key.location",
            b.tls.client_key_encrypted.display().to_string(),
        ),
        ("ssl.key.password", secure::Tls::CLIENT_KEY_PASSWORD.to_owned()),
    ];
    let (ok, out) = metadata(b.mtls(), &encrypted, None);
    assert!(ok, "MTLS with the encrypted client key: {out}");
}

#[test]
fn sasl_ssl_plain_checks_the_password() {
    let b = secure::shared();
    let (ok, out) = metadata(
        b.sasl_ssl,
        &sasl("sasl_ssl", "PLAIN", "admin", secure::ADMIN.password),
        None,
    );
    assert!(ok, "PLAIN admin: {out}");
    let (ok, out) = metadata(b.sasl_ssl, &sasl("sasl_ssl", "PLAIN", "admin", "wrong"), None);
    assert!(!ok, "PLAIN with a wrong password connected: {out}");
}

/// SCRAM on both SASL listeners (librdkafka 2.0.2 was refused by Kafka 4.4.0 with "invalid
/// credentials" for the right password; 2.16 is not). alice has no ACLs, but fetching metadata
/// needs none.
#[test]
fn scram_checks_the_password_on_both_sasl_listeners() {
    let b = secure::shared();
    for mech in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        for (addr, proto) in [(b.sasl_ssl, "sasl_ssl"), (b.sasl_plaintext, "sasl_plaintext")] {
            let ok = rdkafka::metadata(addr, &sasl(proto, mech, "alice", secure::ALICE.password));
            assert!(ok.is_ok(), "{proto} {mech} alice: {ok:?}");
            let wrong = rdkafka::metadata(addr, &sasl(proto, mech, "alice", "wrong"));
            let e = wrong.expect_err(&format!("{proto} {mech} with a wrong password connected"));
            assert!(e.contains("invalid credentials"), "{proto} {mech}: {e}");
        }
    }
}

#[test]
fn oauthbearer_takes_an_unsecured_token() {
    let b = secure::shared();
    let props = [
        ("security.protocol", "sasl_ssl".to_owned()),
        ca(),
        ("sasl.mechanism", "OAUTHBEARER".to_owned()),
        ("enable.sasl.oauthbearer.unsecure.jwt", "true".to_owned()),
        ("sasl.oauthbearer.config", "principal=admin".to_owned()),
    ];
    let (ok, out) = metadata(b.sasl_ssl, &props, None);
    assert!(ok, "OAUTHBEARER: {out}");
}

#[test]
fn bob_is_denied_topics_outside_his_prefix() {
    let b = secure::shared();
    let mine = topic(&format!("{}own", secure::BOB_PREFIX));
    let other = topic("not-bob");
    let bob = sasl("sasl_ssl", "PLAIN", "bob", secure::BOB.password);
    let (ok, out) = metadata(b.sasl_ssl, &bob, Some(&mine));
    let (partitions, error) = topic_answer(&out);
    assert!(ok && partitions == 1 && error.is_empty(), "bob on {mine}: {out}");
    let (ok, out) = metadata(b.sasl_ssl, &bob, Some(&other));
    let (partitions, error) = topic_answer(&out);
    assert!(
        ok && partitions == 0 && error.contains("uthorization failed"),
        "bob on {other}: {out}"
    );
}
