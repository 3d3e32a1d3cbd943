//! Interop sanity over the secure listeners: librdkafka 2.16 (`support::rdkafka`) and Kafka's
//! Java client (`support::java`) produce and consume in a group over the same listeners, with
//! the same credentials, as `secure_tests` uses for our client, so that a failure there is ours
//! and not the broker set-up's. And records cross between our client and librdkafka over
//! SASL_SSL, both ways.

use crate::support::broker::version_under_test;
use crate::support::java::Java;
use crate::support::process::Record;
use crate::support::secure::{self, SecureBroker, ADMIN};
use crate::support::{create_topic, rdkafka, unique_name};
use kafka_group::sasl::{Mechanism, Secret};
use kafka_group::{Client, OffsetReset, ProducerRecord, SecurityProtocol};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const PARTITIONS: i32 = 2;
const PER_PARTITION: usize = 5;

/// Client properties, name and value.
type Props = Vec<(&'static str, String)>;

/// One secure listener and how each foreign client is configured for it.
struct Case {
    name: &'static str,
    addr: SocketAddr,
    librdkafka: Props,
    java: Props,
}

fn path(p: &std::path::Path) -> String {
    p.display().to_string()
}

/// SSL, mTLS, SASL_SSL × {PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER}, SASL_PLAINTEXT
/// SCRAM-SHA-512; SASL as admin, the user `secure_tests` authenticates as.
fn cases(b: &SecureBroker) -> Vec<Case> {
    let ca = path(&b.tls.ca);
    let rd_tls = |proto: &str| {
        vec![
            ("security.protocol", proto.to_string()),
            ("ssl.ca.location", ca.clone()),
        ]
    };
    let java_tls = |proto: &str| {
        vec![
            ("security.protocol", proto.to_string()),
            ("ssl.truststore.type", "PEM".to_string()),
            ("ssl.truststore.location", ca.clone()),
        ]
    };
    // Java reads a PEM key store as one file holding the (PKCS#8) key and the certificate.
    let keystore = b
        .dir()
        .join(format!("{}.pem", unique_name("java-client-keystore")));
    let pem = [&b.tls.client_key, &b.tls.client_cert]
        .map(|f| std::fs::read_to_string(f).unwrap())
        .concat();
    std::fs::write(&keystore, pem).unwrap();
    let sasl = |mechanism: &str, module: &str| {
        let jaas = format!(
            "org.apache.kafka.common.security.{module} required username=\"{}\" password=\"{}\";",
            ADMIN.name, ADMIN.password
        );
        let rd = vec![
            ("sasl.mechanism", mechanism.to_string()),
            ("sasl.username", ADMIN.name.to_string()),
            ("sasl.password", ADMIN.password.to_string()),
        ];
        let java = vec![
            ("sasl.mechanism", mechanism.to_string()),
            ("sasl.jaas.config", jaas),
        ];
        (rd, java)
    };
    let sasl_ssl = |(rd, java): (Props, Props)| {
        (
            [rd_tls("sasl_ssl"), rd].concat(),
            [java_tls("SASL_SSL"), java].concat(),
        )
    };
    let mut cases = vec![
        Case {
            name: "SSL",
            addr: b.ssl,
            librdkafka: rd_tls("ssl"),
            java: java_tls("SSL"),
        },
        Case {
            name: "mTLS",
            addr: b.mtls(),
            librdkafka: [
                rd_tls("ssl"),
                vec![
                    ("ssl.certificate.location", path(&b.tls.client_cert)),
                    ("ssl.key.location", path(&b.tls.client_key)),
                ],
            ]
            .concat(),
            java: [
                java_tls("SSL"),
                vec![
                    ("ssl.keystore.type", "PEM".to_string()),
                    ("ssl.keystore.location", path(&keystore)),
                ],
            ]
            .concat(),
        },
    ];
    for (name, mechanism, module) in [
        ("SASL_SSL PLAIN", "PLAIN", "plain.PlainLoginModule"),
        (
            "SASL_SSL SCRAM-SHA-256",
            "SCRAM-SHA-256",
            "scram.ScramLoginModule",
        ),
        (
            "SASL_SSL SCRAM-SHA-512",
            "SCRAM-SHA-512",
            "scram.ScramLoginModule",
        ),
    ] {
        let (librdkafka, java) = sasl_ssl(sasl(mechanism, module));
        cases.push(Case {
            name,
            addr: b.sasl_ssl,
            librdkafka,
            java,
        });
    }
    // Unsecured JWS tokens with sub=admin: librdkafka's built-in token, Java's unsecured login
    // callback handler. The listener validates them with Kafka's unsecured validator.
    let (librdkafka, java) = sasl_ssl((
        vec![
            ("sasl.mechanism", "OAUTHBEARER".to_string()),
            ("enable.sasl.oauthbearer.unsecure.jwt", "true".to_string()),
            ("sasl.oauthbearer.config", format!("principal={}", ADMIN.name)),
        ],
        vec![
            ("sasl.mechanism", "OAUTHBEARER".to_string()),
            (
                "sasl.jaas.config",
                format!(
                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
                     unsecuredLoginStringClaim_sub=\"{}\";",
                    ADMIN.name
                ),
            ),
            (
                "sasl.login.callback.handler.class",
                "org.apache.kafka.common.security.oauthbearer.internals.unsecured.\
                 OAuthBearerUnsecuredLoginCallbackHandler"
                    .to_string(),
            ),
        ],
    ));
    cases.push(Case {
        name: "SASL_SSL OAUTHBEARER",
        addr: b.sasl_ssl,
        librdkafka,
        java,
    });
    let (rd, java) = sasl("SCRAM-SHA-512", "scram.ScramLoginModule");
    cases.push(Case {
        name: "SASL_PLAINTEXT SCRAM-SHA-512",
        addr: b.sasl_plaintext,
        librdkafka: [vec![("security.protocol", "sasl_plaintext".to_string())], rd].concat(),
        java: [vec![("security.protocol", "SASL_PLAINTEXT".to_string())], java].concat(),
    });
    cases
}

/// A fresh topic of [`PARTITIONS`] partitions, made over PLAINTEXT so that only the foreign
/// client goes through the secure listener.
fn topic(b: &SecureBroker, prefix: &str) -> String {
    let client = Client::builder()
        .bootstrap_servers(b.plaintext.to_string())
        .build()
        .unwrap();
    create_topic(&client, prefix, PARTITIONS, 1)
}

/// What `produce(…, PARTITIONS, PER_PARTITION)` of either foreign client writes to a new topic.
fn expected() -> Vec<Record> {
    (0..PARTITIONS)
        .flat_map(|p| {
            (0..PER_PARTITION).map(move |i| Record {
                partition: p,
                offset: i as i64,
                value: format!("p{p}-{i}"),
            })
        })
        .collect()
}

#[test]
fn librdkafka_2_16_produces_and_consumes_in_a_group_over_each_secure_listener() {
    let b = secure::shared();
    eprintln!("{}", rdkafka::version());
    let n = PARTITIONS as usize * PER_PARTITION;
    for case in cases(b) {
        let topic = topic(b, "rdkafka-secure");
        let addr = case.addr.to_string();
        rdkafka::produce(&addr, &topic, PARTITIONS, PER_PARTITION, &case.librdkafka);
        let got = rdkafka::consume(&addr, &topic, &unique_name("rdkafka-grp"), n, &case.librdkafka);
        assert_eq!(got, expected(), "{}", case.name);
    }
}

#[test]
fn java_client_produces_and_consumes_in_a_group_over_each_secure_listener() {
    let b = secure::shared();
    let java = Java::new(version_under_test());
    let n = PARTITIONS as usize * PER_PARTITION;
    for case in cases(b) {
        let topic = topic(b, "java-secure");
        let addr = case.addr.to_string();
        let client = java.with_config(&case.java);
        client.produce(&addr, &topic, PARTITIONS, PER_PARTITION);
        let mut consumer = client.consumer(&addr, &topic, &unique_name("java-grp"), "java-secure", None);
        let got = consumer.wait_for_records(n, Duration::from_secs(60));
        assert_eq!(
            got,
            expected(),
            "{} (Java {}):\n{}",
            case.name,
            java.version(),
            consumer.report()
        );
        assert!(
            consumer
                .stdout()
                .iter()
                .any(|l| l.starts_with("# assigned generation=")),
            "{}: no assignment line:\n{}",
            case.name,
            consumer.report()
        );
    }
}

/// Our client over SASL_SSL SCRAM-SHA-512 as admin, as `secure_tests` builds it.
fn ours(b: &SecureBroker) -> Client {
    Client::builder()
        .bootstrap_servers(format!("localhost:{}", b.sasl_ssl.port()))
        .security_protocol(SecurityProtocol::SaslSsl)
        .ssl_ca_location(&b.tls.ca)
        .sasl(Mechanism::ScramSha512 {
            username: ADMIN.name.into(),
            password: Secret::new(ADMIN.password),
        })
        .request_timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

#[test]
fn records_cross_between_our_client_and_librdkafka_over_sasl_ssl() {
    let b = secure::shared();
    let scram = cases(b)
        .into_iter()
        .find(|c| c.name == "SASL_SSL SCRAM-SHA-512")
        .unwrap()
        .librdkafka;
    let client = ours(b);
    let addr = b.sasl_ssl.to_string();

    // Ours → librdkafka.
    let topic_a = topic(b, "ours-to-rdkafka");
    let mut producer = client.producer().build().unwrap();
    let sent: Vec<String> = (0..20).map(|i| format!("ours-{i}")).collect();
    for v in &sent {
        producer
            .send(ProducerRecord::new(topic_a.as_str(), v.clone()))
            .unwrap();
    }
    producer.flush().unwrap();
    let got = rdkafka::consume(
        &addr,
        &topic_a,
        &unique_name("rdkafka-reads-ours"),
        sent.len(),
        &scram,
    );
    let mut values: Vec<String> = got.into_iter().map(|r| r.value).collect();
    values.sort();
    let mut want = sent.clone();
    want.sort();
    assert_eq!(values, want);

    // librdkafka → ours.
    let topic_b = topic(b, "rdkafka-to-ours");
    rdkafka::produce(&addr, &topic_b, PARTITIONS, PER_PARTITION, &scram);
    let mut consumer = client
        .consumer(&unique_name("ours-reads-rdkafka"))
        .subscribe([topic_b.as_str()])
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false)
        .build()
        .unwrap();
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.len() < expected().len() {
        assert!(
            Instant::now() < deadline,
            "{} of {} records",
            got.len(),
            expected().len()
        );
        for r in consumer.poll(Duration::from_millis(500)).unwrap() {
            got.push(Record {
                partition: r.partition,
                offset: r.offset,
                value: String::from_utf8(r.value.expect("a value").to_vec()).unwrap(),
            });
        }
    }
    got.sort();
    assert_eq!(got, expected());
    consumer.commit().unwrap();
    consumer.close().unwrap();
}
