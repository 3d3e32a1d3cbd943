//! Our client against a real Kafka with SSL, mTLS, SASL_SSL and SASL_PLAINTEXT listeners
//! (`support::secure`), on the version under test and on 3.9: over each listener and
//! mechanism a static group's whole life (admin, join, produce, fetch, commit, a static
//! restart without a rebalance, the CLI's describe through `--command-config`), and the errors
//! a user meets, produced for real.

use crate::support::secure::{self, SecureBroker, ALICE};
use crate::support::{unique_name, wait_for};
use kafka_group::sasl::{Mechanism, Secret, UnsecuredJwsProvider};
use kafka_group::{
    Client, ClientBuilder, Consumer, Error, NewTopic, OffsetReset, ProducerRecord, SecurityProtocol,
};
use kafka_group::{GroupEvent, MemberState, TopicPartition};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// SASL set by property name (`sasl.mechanism`, `sasl.username`, `sasl.password`), as a
/// properties file sets it.
fn by_name(mut b: ClientBuilder, mechanism: &str, username: &str, password: &str) -> ClientBuilder {
    b.property("sasl.mechanism", mechanism)
        .unwrap()
        .property("sasl.username", username)
        .unwrap()
        .property("sasl.password", password)
        .unwrap();
    b
}

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

/// What the test sees of a consumer polled in its own thread.
#[derive(Debug, Default, Clone)]
struct Seen {
    stable: bool,
    generation: Option<i32>,
    partitions: BTreeSet<TopicPartition>,
    revocations: usize,
    lost: usize,
    values: Vec<String>,
    commits: usize,
    error: Option<String>,
}

/// A static consumer polled in a background thread as an application would run it:
/// commits after each poll that brought records, before polling again.
struct Consuming {
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Consumer>>,
}

impl Consuming {
    fn start(mut c: Consumer) -> Consuming {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        let handle = std::thread::spawn(move || {
            while !stop2.load(Ordering::SeqCst) {
                let result = c.poll(Duration::from_millis(100)).and_then(|p| {
                    let committed = !p.records.is_empty();
                    if committed {
                        c.commit()?;
                    }
                    Ok((p, committed))
                });
                let mut s = seen2.lock().unwrap();
                match result {
                    Ok((p, committed)) => {
                        for e in &p.events {
                            s.revocations += usize::from(matches!(e, GroupEvent::Revoked { .. }));
                            s.lost += usize::from(matches!(e, GroupEvent::Lost { .. }));
                        }
                        s.values.extend(p.records.iter().map(|r| {
                            String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned()
                        }));
                        s.commits += usize::from(committed);
                    }
                    Err(e) => {
                        s.error = Some(e.to_string());
                        break;
                    }
                }
                s.stable = c.member().unwrap().state() == MemberState::Stable;
                s.generation = c.member().unwrap().generation().map(|g| g.id);
                s.partitions = c.assignment().into_iter().collect();
            }
            c
        });
        Consuming {
            seen,
            stop,
            handle: Some(handle),
        }
    }

    fn seen(&self) -> Seen {
        self.seen.lock().unwrap().clone()
    }

    /// Stops polling and closes the consumer (a static member: no LeaveGroup).
    fn close(mut self, what: &str) {
        self.stop.store(true, Ordering::SeqCst);
        let c = self.handle.take().unwrap().join().unwrap();
        c.close().unwrap_or_else(|e| panic!("{what}: close: {e}"));
    }
}

impl Drop for Consuming {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

const SESSION: Duration = Duration::from_secs(6);
const PARTITIONS: usize = 6;

fn static_consumer(client: &Client, group: &str, topic: &str, instance: &str) -> Consumer {
    client
        .consumer(group)
        .group_instance_id(instance)
        .subscribe([topic])
        .session_timeout(SESSION)
        .heartbeat_interval(Duration::from_millis(300))
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false)
        .build()
        .unwrap()
}

/// All running members stable in one generation, owning every partition once, no one failed.
fn converged(what: &str, ms: &[&Consuming]) -> bool {
    let seen: Vec<Seen> = ms.iter().map(|m| m.seen()).collect();
    for s in &seen {
        assert!(s.error.is_none(), "{what}: {:?}", s.error);
    }
    let union: BTreeSet<&TopicPartition> = seen.iter().flat_map(|s| &s.partitions).collect();
    let total: usize = seen.iter().map(|s| s.partitions.len()).sum();
    seen.iter()
        .all(|s| s.stable && s.generation.is_some() && s.generation == seen[0].generation)
        && union.len() == PARTITIONS
        && total == PARTITIONS
}

fn produce(what: &str, client: &Client, topic: &str, from: usize, n: usize) -> BTreeSet<String> {
    let mut p = client.producer().build().unwrap();
    let values: BTreeSet<String> = (from..from + n).map(|i| format!("v{i}")).collect();
    for (i, v) in values.iter().enumerate() {
        p.send(ProducerRecord::new(topic, v.clone()).key(format!("k{i}")))
            .unwrap_or_else(|e| panic!("{what}: send: {e}"));
    }
    p.flush().unwrap_or_else(|e| panic!("{what}: flush: {e}"));
    values
}

/// Every value consumed, by the running members and those closed before (`done`).
fn consumed(ms: &[&Consuming], done: &[String]) -> BTreeSet<String> {
    let mut all: BTreeSet<String> = done.iter().cloned().collect();
    for m in ms {
        all.extend(m.seen().values);
    }
    all
}

/// A group as a describe shows it: state, instance ids (sorted), the lag of each partition.
#[derive(Debug, PartialEq)]
struct Described {
    state: String,
    instances: Vec<String>,
    lags: Vec<Option<i64>>,
}

/// How a case's group is described: by the CLI through `--command-config` with these
/// properties, or (OAUTHBEARER: a properties file has no way to name a token provider) by the
/// library's admin.
enum Describe {
    Cli(Vec<(&'static str, String)>),
    Admin,
}

fn describe(
    what: &str,
    how: &Describe,
    client: &Client,
    bootstrap: &str,
    group: &str,
    dir: &Path,
) -> Described {
    match how {
        Describe::Admin => {
            let (g, lag) = client
                .admin()
                .describe_group_lag(group)
                .unwrap_or_else(|e| panic!("{what}: describe: {e}"));
            let mut instances: Vec<String> = g
                .members
                .iter()
                .filter_map(|m| m.group_instance_id.clone())
                .collect();
            instances.sort();
            Described {
                state: g.state,
                instances,
                lags: lag.iter().map(|l| l.lag).collect(),
            }
        }
        Describe::Cli(props) => cli_describe(what, props, bootstrap, group, dir),
    }
}

fn cli_describe(what: &str, props: &[(&str, String)], bootstrap: &str, group: &str, dir: &Path) -> Described {
    use crate::cli_tests::{cli, json};
    let file = dir.join(format!("{}.properties", unique_name("client")));
    let text: String = props.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    std::fs::write(&file, text).unwrap();
    let run = cli(
        bootstrap,
        &[
            "--json",
            "--command-config",
            &file.to_string_lossy(),
            "describe",
            group,
        ],
    );
    assert_eq!(run.code, 0, "{what}: kafka-group describe: {}", run.stderr);
    let doc = json(&run);
    let mut instances: Vec<String> = doc["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["group_instance_id"].as_str().unwrap().to_string())
        .collect();
    instances.sort();
    Described {
        state: doc["state"].as_str().unwrap().to_string(),
        instances,
        lags: doc["offsets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["lag"].as_i64())
            .collect(),
    }
}

/// Over one listener and mechanism: admin creates a topic; three static members join; records
/// are produced and consumed with commits; one member restarts within the session timeout and
/// nothing rebalances (the others keep generation and partitions, it gets its own back); more
/// records; the group described, all committed.
fn static_group_round_trip(what: &str, client: &Client, bootstrap: &str, how: &Describe, dir: &Path) {
    let topic = unique_name("secure");
    client
        .admin()
        .create_topics(
            &[NewTopic::new(&topic, PARTITIONS as i32, 1)],
            Duration::from_secs(30),
        )
        .unwrap_or_else(|e| panic!("{what}: create_topics: {e}"));
    let group = unique_name("secure-grp");
    let mut ms: Vec<Consuming> = ["a", "b", "c"]
        .iter()
        .map(|i| Consuming::start(static_consumer(client, &group, &topic, i)))
        .collect();
    wait_for(
        &format!("{what}: three members to converge"),
        Duration::from_secs(60),
        || converged(what, &ms.iter().collect::<Vec<_>>()),
    );
    let mut sent = produce(what, client, &topic, 0, 30);
    let mut done = Vec::new();
    wait_for(
        &format!("{what}: 30 records consumed"),
        Duration::from_secs(30),
        || consumed(&ms.iter().collect::<Vec<_>>(), &done) == sent,
    );

    // Restart "b" well within the session timeout.
    let before: Vec<Seen> = ms.iter().map(Consuming::seen).collect();
    let old = ms.remove(1);
    done.extend(old.seen().values);
    old.close(what);
    let restarted = Consuming::start(static_consumer(client, &group, &topic, "b"));
    wait_for(
        &format!("{what}: the restarted member to be stable"),
        Duration::from_secs(30),
        || restarted.seen().stable,
    );
    let r = restarted.seen();
    assert_eq!(
        r.partitions, before[1].partitions,
        "{what}: b got its own partitions back"
    );
    assert_eq!(r.generation, before[1].generation, "{what}: no new generation");
    ms.insert(1, restarted);
    sent.extend(produce(what, client, &topic, 30, 30));
    wait_for(
        &format!("{what}: 60 records consumed"),
        Duration::from_secs(30),
        || consumed(&ms.iter().collect::<Vec<_>>(), &done) == sent,
    );
    for (m, b) in [(&ms[0], &before[0]), (&ms[2], &before[2])] {
        let s = m.seen();
        assert_eq!(
            s.revocations, b.revocations,
            "{what}: a revocation at the restart"
        );
        assert_eq!(
            (s.generation, &s.partitions),
            (b.generation, &b.partitions),
            "{what}"
        );
    }
    for m in &ms {
        let s = m.seen();
        assert_eq!((s.lost, &s.error), (0, &None), "{what}");
    }
    assert!(
        ms.iter().map(|m| m.seen().commits).sum::<usize>() > 0,
        "{what}: no commit"
    );

    // Everything consumed is committed: lag 0 on every partition, members as they are.
    let want = Described {
        state: "Stable".into(),
        instances: vec!["a".into(), "b".into(), "c".into()],
        lags: vec![Some(0); PARTITIONS],
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = describe(what, how, client, bootstrap, &group, dir);
        if got == want {
            break;
        }
        assert!(Instant::now() < deadline, "{what}: described {got:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    for m in ms {
        m.close(what);
    }
}

fn each_secure_listener_carries_a_static_group(b: &SecureBroker) {
    let ca = b.tls.ca.display().to_string();
    let localhost = |addr: SocketAddr| format!("localhost:{}", addr.port());
    let tls = |protocol: &str| {
        vec![
            ("security.protocol", protocol.to_string()),
            ("ssl.ca.location", ca.clone()),
        ]
    };
    let with = |mut base: Vec<(&'static str, String)>, more: &[(&'static str, String)]| {
        base.extend_from_slice(more);
        base
    };
    let user = |mechanism: &str| {
        [
            ("sasl.mechanism", mechanism.to_string()),
            ("sasl.username", secure::ADMIN.name.to_string()),
            ("sasl.password", secure::ADMIN.password.to_string()),
        ]
    };
    let cases: Vec<(&str, SocketAddr, ClientBuilder, Describe)> = vec![
        (
            "SSL",
            b.ssl,
            builder(b.ssl, SecurityProtocol::Ssl, b),
            Describe::Cli(tls("SSL")),
        ),
        (
            "mTLS",
            b.mtls(),
            builder(b.mtls(), SecurityProtocol::Ssl, b)
                .ssl_certificate_location(&b.tls.client_cert)
                .ssl_key_location(&b.tls.client_key),
            Describe::Cli(with(
                tls("SSL"),
                &[
                    (
                        "ssl.certificate.location",
                        b.tls.client_cert.display().to_string(),
                    ),
                    ("ssl.key.location", b.tls.client_key.display().to_string()),
                ],
            )),
        ),
        (
            "SASL_SSL PLAIN",
            b.sasl_ssl,
            by_name(
                builder(b.sasl_ssl, SecurityProtocol::SaslSsl, b),
                "PLAIN",
                secure::ADMIN.name,
                secure::ADMIN.password,
            ),
            Describe::Cli(with(tls("SASL_SSL"), &user("PLAIN"))),
        ),
        (
            "SASL_SSL SCRAM-SHA-512",
            b.sasl_ssl,
            builder(b.sasl_ssl, SecurityProtocol::SaslSsl, b).sasl(scram512(&secure::ADMIN)),
            // Java's form, as an operator's client.properties has it.
            Describe::Cli(with(
                tls("SASL_SSL"),
                &[
                    ("sasl.mechanism", "SCRAM-SHA-512".into()),
                    (
                        "sasl.jaas.config",
                        format!(
                            "org.apache.kafka.common.security.scram.ScramLoginModule required \
                             username=\"{}\" password=\"{}\";",
                            secure::ADMIN.name,
                            secure::ADMIN.password
                        ),
                    ),
                ],
            )),
        ),
        (
            "SASL_SSL SCRAM-SHA-256",
            b.sasl_ssl,
            builder(b.sasl_ssl, SecurityProtocol::SaslSsl, b).sasl(Mechanism::ScramSha256 {
                username: secure::ADMIN.name.into(),
                password: Secret::new(secure::ADMIN.password),
            }),
            Describe::Cli(with(tls("SASL_SSL"), &user("SCRAM-SHA-256"))),
        ),
        (
            "SASL_SSL OAUTHBEARER",
            b.sasl_ssl,
            builder(b.sasl_ssl, SecurityProtocol::SaslSsl, b).sasl(Mechanism::OAuthBearer {
                provider: Arc::new(UnsecuredJwsProvider {
                    principal: secure::ADMIN.name.into(),
                    lifetime: Duration::from_secs(3600),
                }),
            }),
            Describe::Admin,
        ),
        (
            "SASL_PLAINTEXT SCRAM-SHA-512",
            b.sasl_plaintext,
            builder(b.sasl_plaintext, SecurityProtocol::SaslPlaintext, b).sasl(scram512(&secure::ADMIN)),
            Describe::Cli(
                [
                    vec![("security.protocol", "SASL_PLAINTEXT".to_string())],
                    user("SCRAM-SHA-512").to_vec(),
                ]
                .concat(),
            ),
        ),
    ];
    for (what, addr, builder, how) in cases {
        let what = format!("Kafka {} {what}", b.version);
        let t = Instant::now();
        let client = builder.build().unwrap_or_else(|e| panic!("{what}: build: {e}"));
        static_group_round_trip(&what, &client, &localhost(addr), &how, b.dir());
        eprintln!("{what}: {:.1} s", t.elapsed().as_secs_f64());
    }
}

#[test]
fn each_secure_listener_carries_a_static_group_on_the_version_under_test() {
    each_secure_listener_carries_a_static_group(secure::shared());
}

#[test]
fn each_secure_listener_carries_a_static_group_on_3_9() {
    each_secure_listener_carries_a_static_group(secure::shared_of("3.9"));
}

#[test]
fn the_errors_a_user_meets_are_produced_for_real() {
    let b = secure::shared();
    let quick = |builder: ClientBuilder| -> Error {
        let client = builder.build().unwrap();
        let t = Instant::now();
        let e = client.refresh_metadata(None).unwrap_err();
        assert!(
            t.elapsed() < crate::support::LOAD_MARGIN,
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
    let e = quick(by_name(
        builder(b.sasl_plaintext, SecurityProtocol::SaslPlaintext, b),
        "PLAIN",
        ALICE.name,
        ALICE.password,
    ));
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
    let e = quick(builder(b.expired(), SecurityProtocol::Ssl, b));
    assert!(e.to_string().contains("expired"), "{e}");
    let e = quick(builder(b.wrong_host(), SecurityProtocol::Ssl, b));
    assert!(e.to_string().contains("not valid for"), "{e}");
    let e = quick(builder(b.mtls(), SecurityProtocol::Ssl, b));
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
