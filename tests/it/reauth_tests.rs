//! KIP-368 re-authentication against a real broker whose SASL listeners have
//! `connections.max.reauth.ms` of a few seconds (`support::secure::reauth_of`): a static member
//! runs for ten times that, heartbeating, consuming and committing, and keeps its session and
//! generation while its connections re-authenticate, counted in its metrics.

use crate::support::secure::{self, SecureBroker, ADMIN};
use crate::support::unique_name;
use kafka_group::sasl::{Mechanism, Secret, Token, TokenProvider, UnsecuredJwsProvider};
use kafka_group::{Client, ClientBuilder, NewTopic, OffsetReset, ProducerRecord, SecurityProtocol};
use kafka_group::{GroupEvent, MemberMetrics};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// `connections.max.reauth.ms` of the test broker.
pub(crate) const REAUTH: Duration = Duration::from_secs(3);
/// How long each member runs: ten session lifetimes.
const RUN: Duration = Duration::from_secs(30);
pub(crate) const HEARTBEAT: Duration = Duration::from_millis(500);
/// The OAUTHBEARER tokens' lifetime, shorter than [`REAUTH`]: the token's own expiry, not the
/// listener's setting, bounds those sessions (the broker takes the smaller of the two). The
/// unsecured JWS carries whole seconds, so a session lasts between 1 and 2 s.
const TOKEN_LIFETIME: Duration = Duration::from_secs(2);

pub(crate) fn builder(addr: SocketAddr, protocol: SecurityProtocol, b: &SecureBroker) -> ClientBuilder {
    Client::builder()
        .bootstrap_servers(format!("localhost:{}", addr.port()))
        .security_protocol(protocol)
        .ssl_ca_location(&b.tls.ca)
        .request_timeout(Duration::from_secs(10))
        .api_timeout(Duration::from_secs(30))
}

pub(crate) fn scram512() -> Mechanism {
    Mechanism::ScramSha512 {
        username: ADMIN.name.into(),
        password: Secret::new(ADMIN.password),
    }
}

/// A token provider that counts how often it is asked.
struct Counting {
    inner: UnsecuredJwsProvider,
    calls: AtomicU64,
}

impl TokenProvider for Counting {
    fn token(&self) -> Result<Token, Box<dyn std::error::Error + Send + Sync>> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.token()
    }
}

/// What one member's run showed.
pub(crate) struct Outcome {
    pub(crate) metrics: MemberMetrics,
    pub(crate) elapsed: Duration,
}

/// A static member over `client`'s listener for [`RUN`]: see [`member_runs`].
fn static_member_runs(what: &str, client: &Client) -> Outcome {
    member_runs(what, client, Some("reauth-1"), RUN)
}

/// A member (static with `instance`, else dynamic) over `client`'s listener for `run`: produces
/// a few records a second, polls, commits every other second, and checks as it goes that
/// nothing failed and the group never moved; at the end, that every record came exactly once.
pub(crate) fn member_runs(what: &str, client: &Client, instance: Option<&str>, run: Duration) -> Outcome {
    let topic = unique_name("reauth");
    client
        .admin()
        .create_topics(&[NewTopic::new(&topic, 2, 1)], Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{what}: create_topics: {e}"));
    let mut producer = client.producer().build().unwrap();
    let mut consumer = client.consumer(&unique_name("reauth-grp"));
    if let Some(instance) = instance {
        consumer = consumer.group_instance_id(instance);
    }
    let mut consumer = consumer
        .subscribe([topic.as_str()])
        .session_timeout(Duration::from_secs(6))
        .heartbeat_interval(HEARTBEAT)
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false)
        .build()
        .unwrap();
    let (mut sent, mut got) = (BTreeSet::new(), Vec::new());
    let mut generation = None;
    let mut commits = 0;
    let start = Instant::now();
    let (mut next_send, mut next_commit) = (start, start + Duration::from_secs(2));
    let poll = |consumer: &mut kafka_group::Consumer, got: &mut Vec<String>| {
        let polled = consumer
            .poll(Duration::from_millis(200))
            .unwrap_or_else(|e| panic!("{what}: poll: {e}"));
        for e in &polled.events {
            assert!(
                !matches!(e, GroupEvent::Lost { .. } | GroupEvent::Revoked { .. }),
                "{what}: {e:?}"
            );
        }
        got.extend(
            polled
                .records
                .iter()
                .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned()),
        );
    };
    while start.elapsed() < run {
        let now = Instant::now();
        if now >= next_send {
            next_send = now + Duration::from_millis(500);
            for _ in 0..3 {
                let v = format!("r{}", sent.len());
                producer
                    .send(ProducerRecord::new(topic.as_str(), v.clone()))
                    .unwrap_or_else(|e| panic!("{what}: send: {e}"));
                sent.insert(v);
            }
            producer.flush().unwrap_or_else(|e| panic!("{what}: flush: {e}"));
        }
        poll(&mut consumer, &mut got);
        if let Some(g) = consumer.member().unwrap().generation() {
            let id = *generation.get_or_insert(g.id);
            assert_eq!(g.id, id, "{what}: the generation changed");
        }
        if Instant::now() >= next_commit && generation.is_some() {
            next_commit = Instant::now() + Duration::from_secs(2);
            consumer
                .commit()
                .unwrap_or_else(|e| panic!("{what}: commit: {e}"));
            commits += 1;
        }
    }
    let drain = Instant::now() + Duration::from_secs(30);
    while got.len() < sent.len() && Instant::now() < drain {
        poll(&mut consumer, &mut got);
    }
    consumer
        .commit()
        .unwrap_or_else(|e| panic!("{what}: last commit: {e}"));
    let elapsed = start.elapsed();
    let consumed: BTreeSet<String> = got.iter().cloned().collect();
    assert_eq!(consumed, sent, "{what}: every record consumed");
    assert_eq!(got.len(), sent.len(), "{what}: no record twice (no rebalance)");
    // Periodic commits on the member's own connection, whose sessions ended many times over
    // (how many fit in the run depends on the machine's pace, so only "more than one"); the
    // last commit above comes after the whole run.
    assert!(commits > 1, "{what}: {commits} commits");
    let metrics = consumer.member().unwrap().metrics();
    assert_eq!(metrics.joins, 1, "{what}: one join, no rebalance: {metrics:?}");
    assert_eq!(metrics.rebalances, 0, "{what}: {metrics:?}");
    assert_eq!(
        metrics.heartbeat_failures, 0,
        "{what}: no heartbeat failed (no connection closed by the broker): {metrics:?}"
    );
    assert_eq!(
        consumer.member().unwrap().generation().map(|g| g.id),
        generation,
        "{what}: the generation the member started with"
    );
    consumer.close().unwrap_or_else(|e| panic!("{what}: close: {e}"));
    Outcome { metrics, elapsed }
}

/// The re-authentications a run of `elapsed` must have had at least: the heartbeat connection
/// alone, used every [`HEARTBEAT`], re-authenticates at most a heartbeat after each session of
/// at most `session` ends.
pub(crate) fn at_least(elapsed: Duration, session: Duration) -> u64 {
    ((elapsed.as_secs_f64() / (session + HEARTBEAT).as_secs_f64()) as u64).saturating_sub(1)
}

/// The re-authentications a run of `elapsed` may have had at most: each of the member's two
/// connections (its own and the heartbeat thread's) re-authenticates no earlier than 85 % into
/// a session of at least `session`, or 250 ms before its end if that is sooner (never before
/// half of it). More would be a connection re-authenticating for nothing.
pub(crate) fn at_most(elapsed: Duration, session: Duration) -> u64 {
    let s = session.as_secs_f64();
    let interval = (s * 0.85).min(s - 0.25).max(s / 2.0);
    2 * (elapsed.as_secs_f64() / interval).ceil() as u64
}

fn static_members_keep_their_session_across_reauthentication(version: &str) {
    let b = secure::reauth_of(version, REAUTH.as_millis() as u64);
    let b: &SecureBroker = &b;
    let provider = Arc::new(Counting {
        inner: UnsecuredJwsProvider {
            principal: ADMIN.name.into(),
            lifetime: TOKEN_LIFETIME,
        },
        calls: AtomicU64::new(0),
    });
    let cases: Vec<(&str, ClientBuilder)> = vec![
        (
            "SASL_SSL SCRAM-SHA-512",
            builder(b.sasl_ssl, SecurityProtocol::SaslSsl, b).sasl(scram512()),
        ),
        (
            "SASL_SSL OAUTHBEARER",
            builder(b.sasl_ssl, SecurityProtocol::SaslSsl, b).sasl(Mechanism::OAuthBearer {
                provider: provider.clone(),
            }),
        ),
        (
            "SASL_PLAINTEXT SCRAM-SHA-512",
            builder(b.sasl_plaintext, SecurityProtocol::SaslPlaintext, b).sasl(scram512()),
        ),
    ];
    // Side by side: each member has its own group, topic and connections.
    let outcomes: Vec<(&str, Outcome)> = thread::scope(|s| {
        let runs: Vec<_> = cases
            .into_iter()
            .map(|(what, builder)| {
                let client = builder.build().unwrap_or_else(|e| panic!("{what}: build: {e}"));
                (what, s.spawn(move || static_member_runs(what, &client)))
            })
            .collect();
        runs.into_iter()
            .map(|(what, h)| (what, h.join().unwrap_or_else(|_| panic!("{what} failed"))))
            .collect()
    });
    for (what, o) in &outcomes {
        let n = o.metrics.reauthentications;
        eprintln!(
            "Kafka {}: {what}: {n} re-authentications in {:.1} s ({} heartbeats)",
            b.version,
            o.elapsed.as_secs_f64(),
            o.metrics.heartbeats
        );
        // OAUTHBEARER sessions end with the token (at most TOKEN_LIFETIME, at least a second
        // less: `exp` is in whole seconds); SCRAM's with the listener's setting.
        let (longest, shortest) = if what.contains("OAUTHBEARER") {
            (TOKEN_LIFETIME, TOKEN_LIFETIME - Duration::from_secs(1))
        } else {
            (REAUTH, REAUTH)
        };
        let (low, high) = (at_least(o.elapsed, longest), at_most(o.elapsed, shortest));
        assert!(
            (low..=high).contains(&n),
            "{what}: {n} re-authentications in {:?}, expected {low}..={high}",
            o.elapsed
        );
    }
    // No connection of any kind (the members', fetch, produce, metadata) was closed by the
    // broker for a request after its session ended. The broker logs that at debug, which
    // `scripts/kafka --reauth-ms` turns on for its network processors.
    assert_no_expired_channel(b.dir());
    // Every OAUTHBEARER authentication asked the provider: each re-authentication and the
    // first authentication of each connection (the member's two, the client's, fetch, produce).
    let oauth = &outcomes[1].1.metrics;
    let calls = provider.calls.load(Ordering::Relaxed);
    eprintln!("Kafka {}: OAUTHBEARER provider asked {calls} times", b.version);
    assert!(
        calls >= oauth.reauthentications + 2,
        "{calls} tokens for {} re-authentications",
        oauth.reauthentications
    );
}

#[test]
fn static_members_keep_their_session_across_reauthentication_on_the_version_under_test() {
    static_members_keep_their_session_across_reauthentication(crate::support::broker::version_under_test());
}

#[test]
fn static_members_keep_their_session_across_reauthentication_on_3_9() {
    static_members_keep_their_session_across_reauthentication("3.9");
}

/// Asserts that the broker whose run directory is `dir` closed no connection for a request
/// after its session ended ("Disconnecting expired channel", logged at debug, which
/// `scripts/kafka --reauth-ms` turns on for its network processors).
pub(crate) fn assert_no_expired_channel(dir: &std::path::Path) {
    let log_path = dir.join("node-1/broker.log");
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("DEBUG") && l.contains("kafka.network.Processor")),
        "{}: no debug line of kafka.network.Processor; the check below would prove nothing",
        log_path.display()
    );
    let expired: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Disconnecting expired channel"))
        .collect();
    assert!(expired.is_empty(), "closed by the broker: {expired:#?}");
}
