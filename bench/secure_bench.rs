//! Timed benchmark of secure connections against a real broker (not a test: it prints figures).
//! Every figure is a ratio to PLAINTEXT measured in the same run, the contenders interleaved
//! over ROUNDS rounds (the machine is shared and noisy):
//!
//! - (a) a new connection: TCP + ApiVersions (PLAINTEXT), + TLS (SSL), + SASL SCRAM-SHA-512
//!   (SASL_PLAINTEXT, SASL_SSL), CONNECTS of each a round, one of each in turn; p50 and p99;
//! - (b) consuming RECORDS × VALUE_SIZE (defaults 1,000,000 × 100 B, produced once over
//!   PLAINTEXT into 3 partitions) with one consumer in a fresh group, over SASL_SSL SCRAM-SHA-512
//!   and over PLAINTEXT, as `consume_bench` times it (join excluded);
//! - (c) a static restart: one of three static members closes without leaving and a new one
//!   with the same `group.instance.id` and a new `Client` starts; the time from building that
//!   client to having the assignment back (same generation, same partitions), RESTARTS a round
//!   over each listener;
//! - (d) librdkafka 2.16 (PyPI's confluent-kafka wheel, batch `consume(num_messages=10000)`,
//!   through `tests/it/support/rdkafka_client.py`) consuming the same records over the same two
//!   listeners in the same rounds, so that ours / librdkafka is reported for each; once with
//!   librdkafka's defaults and once with the fetch queue tuned (see `TUNING`);
//! - (e) librdkafka in C, without Python: Debian's `kcat` (librdkafka 2.0.2) reading the same
//!   records (`-C -o beginning -e`, no group) over the same listeners, if it is installed. Its
//!   SASL is PLAIN: librdkafka 2.0.2's SCRAM fails against Kafka 4.4 (see `secure_broker_tests`);
//!   the mechanism changes the handshake, not the records' path. Its fixed cost (start-up,
//!   metadata, the end-of-partition wait) is measured each round with `-o end` and subtracted.
//!
//! ```text
//! cargo run --release --example secure_bench [-- RECORDS VALUE_SIZE ROUNDS CONNECTS RESTARTS]
//! ```
//! Defaults 1000000 100 3 100 10. Uses the broker whose `scripts/kafka start --security` run
//! directory `KAFKA_SECURE_DIR` names, else starts one (full JIT, see `support::SecureKafka`)
//! and stops it at the end.

#[path = "../examples/support/mod.rs"]
mod support;

use bytes::Bytes;
use kafka_group::sasl::{Mechanism, Secret};
use kafka_group::unstable::RawClient;
use kafka_group::{Acks, ProducerRecord};
use kafka_group::{Broker, Client, SecurityProtocol};
use kafka_group::{GroupEvent, GroupMember};
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{BoxError, SecureKafka};

const PARTITIONS: i32 = 3;
const RDKAFKA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/support/rdkafka_client.py");
const RDKAFKA_BATCH: usize = 10_000;
/// librdkafka with its defaults, like our consumer.
const LIBRDKAFKA: &str = "librdkafka";
/// librdkafka with [`TUNING`].
const LIBRDKAFKA_TUNED: &str = "librdkafka tuned";
/// kcat (librdkafka in C).
const KCAT: &str = "kcat (C)";
/// With its defaults librdkafka stops fetching a partition for `fetch.queue.backoff.ms` (1 s)
/// whenever its queue holds `queued.min.messages` (100,000) records, which an application
/// reading slower than the broker sends (Python here) hits again and again; its debug log says
/// "Fetch backoff for 1000ms: Local: Queue full". These two keep it fetching.
const TUNING: &[&str] = &["fetch.queue.backoff.ms=0", "queued.min.messages=1000000"];

/// A listener and how our client and librdkafka reach it.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Kind {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Plaintext => "PLAINTEXT",
            Kind::Ssl => "SSL",
            Kind::SaslPlaintext => "SASL_PLAINTEXT",
            Kind::SaslSsl => "SASL_SSL",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Kind::Plaintext => "TCP + ApiVersions",
            Kind::Ssl => "TCP + TLS + ApiVersions",
            Kind::SaslPlaintext => "TCP + ApiVersions + SCRAM-SHA-512",
            Kind::SaslSsl => "TCP + TLS + ApiVersions + SCRAM-SHA-512",
        }
    }

    fn client(self, k: &SecureKafka, id: &str) -> Result<Client, BoxError> {
        let mut b = Client::builder()
            .bootstrap_servers(k.listener(self.name())?)
            .client_id(id);
        b = match self {
            Kind::Plaintext => b,
            Kind::Ssl => b.security_protocol(SecurityProtocol::Ssl),
            Kind::SaslPlaintext => b.security_protocol(SecurityProtocol::SaslPlaintext),
            Kind::SaslSsl => b.security_protocol(SecurityProtocol::SaslSsl),
        };
        if matches!(self, Kind::Ssl | Kind::SaslSsl) {
            b = b.ssl_ca_location(&k.ca);
        }
        if matches!(self, Kind::SaslPlaintext | Kind::SaslSsl) {
            b = b.sasl(Mechanism::ScramSha512 {
                username: "admin".into(),
                password: Secret::new("admin-secret"),
            });
        }
        Ok(b.build()?)
    }

    /// librdkafka's properties for the same listener and credentials.
    fn librdkafka(self, k: &SecureKafka) -> Vec<String> {
        let ca = k.ca.display();
        match self {
            Kind::Plaintext => vec![],
            Kind::Ssl => vec!["security.protocol=ssl".into(), format!("ssl.ca.location={ca}")],
            Kind::SaslPlaintext | Kind::SaslSsl => {
                let mut props = vec![
                    format!("security.protocol={}", self.name().to_lowercase()),
                    "sasl.mechanism=SCRAM-SHA-512".into(),
                    "sasl.username=admin".into(),
                    "sasl.password=admin-secret".into(),
                ];
                if self == Kind::SaslSsl {
                    props.push(format!("ssl.ca.location={ca}"));
                }
                props
            }
        }
    }
}

fn main() -> Result<(), BoxError> {
    let [records, value_size, rounds, connects, restarts] =
        support::numeric_args([1_000_000, 100, 3, 100, 10]);
    let kafka = SecureKafka::get("secure-bench")?;
    let rdkafka = rdkafka_version();
    println!(
        "{rounds} rounds; SASL is SCRAM-SHA-512 as admin, to a local broker ({})",
        match &rdkafka {
            Ok(v) => v.clone(),
            Err(e) => format!("librdkafka part skipped: {e}"),
        }
    );
    connections(&kafka, rounds, connects)?;
    consume(&kafka, rounds, records, value_size, rdkafka.is_ok())?;
    restart(&kafka, rounds, restarts)?;
    Ok(())
}

/// `p50 ratio` of `x` to `base`, each sorted.
fn ratio(x: &[Duration], base: &[Duration], p: f64) -> f64 {
    support::percentile(x, p).as_secs_f64() / support::percentile(base, p).as_secs_f64()
}

/// The smallest and largest of the rounds' ratios, to show how much the noise moved them.
fn spread(ratios: &[f64]) -> String {
    let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let max = ratios.iter().copied().fold(0.0, f64::max);
    format!("rounds {min:.2}–{max:.2}")
}

fn sorted(mut v: Vec<Duration>) -> Vec<Duration> {
    v.sort();
    v
}

/// (a) New connections, one of each kind in turn.
fn connections(k: &SecureKafka, rounds: usize, connects: usize) -> Result<(), BoxError> {
    let kinds = [Kind::Plaintext, Kind::Ssl, Kind::SaslPlaintext, Kind::SaslSsl];
    let mut targets: Vec<(Kind, Client, Broker)> = Vec::new();
    for kind in kinds {
        let client = kind.client(k, "secure-bench-connect")?;
        let meta = client.refresh_metadata(Some(&[]))?;
        let broker = meta
            .brokers
            .values()
            .next()
            .ok_or("no broker in metadata")?
            .clone();
        targets.push((kind, client, broker));
    }
    // samples[round][kind]
    let mut samples: Vec<BTreeMap<Kind, Vec<Duration>>> = Vec::new();
    for round in 0..rounds {
        let mut this: BTreeMap<Kind, Vec<Duration>> = BTreeMap::new();
        for i in 0..connects {
            // Rotate the order so that no kind always follows the same one.
            for j in 0..targets.len() {
                let (kind, client, broker) = &targets[(i + j + round) % targets.len()];
                let t = Instant::now();
                let c = client.connect(broker)?;
                this.entry(*kind).or_default().push(t.elapsed());
                drop(c);
            }
        }
        samples.push(this.into_iter().map(|(k, v)| (k, sorted(v))).collect());
    }
    println!("\n(a) new connection, {connects} per kind per round, interleaved");
    println!(
        "{:<16} {:<40} {:>9} {:>9}  {:>6} {:>6}  p50 ratio",
        "listener", "steps", "p50", "p99", "×p50", "×p99"
    );
    let all = |kind: Kind| sorted(samples.iter().flat_map(|r| r[&kind].clone()).collect());
    let base = all(Kind::Plaintext);
    for kind in kinds {
        let s = all(kind);
        let per_round: Vec<f64> = samples
            .iter()
            .map(|r| ratio(&r[&kind], &r[&Kind::Plaintext], 0.5))
            .collect();
        println!(
            "{:<16} {:<40} {:>9.2?} {:>9.2?}  {:>6.2} {:>6.2}  {}",
            kind.name(),
            kind.what(),
            support::percentile(&s, 0.5),
            support::percentile(&s, 0.99),
            ratio(&s, &base, 0.5),
            ratio(&s, &base, 0.99),
            spread(&per_round)
        );
    }
    Ok(())
}

/// Records/s of one consume.
type Rate = f64;

/// (b) and (d): the same records consumed by us and by librdkafka over PLAINTEXT and SASL_SSL.
fn consume(
    k: &SecureKafka,
    rounds: usize,
    records: usize,
    value_size: usize,
    rdkafka: bool,
) -> Result<(), BoxError> {
    let plain = Kind::Plaintext.client(k, "secure-bench-consume")?;
    let sasl = Kind::SaslSsl.client(k, "secure-bench-consume")?;
    let topic = support::create_topic(&plain, "secure-bench", PARTITIONS)?;
    let values = support::sample_values(records, value_size);
    let mut producer = plain.producer().acks(Acks::All).batch_size(256 * 1024).build()?;
    for v in &values {
        producer.send(ProducerRecord::new(topic.as_str(), Bytes::clone(v)))?;
    }
    producer.close()?;
    drop(values);
    // (who, listener) -> records/s of each round
    let mut rates: BTreeMap<(&str, Kind), Vec<Rate>> = BTreeMap::new();
    let mut contenders: Vec<(&str, Kind)> = vec![("ours", Kind::Plaintext), ("ours", Kind::SaslSsl)];
    if rdkafka {
        for who in [LIBRDKAFKA, LIBRDKAFKA_TUNED] {
            contenders.extend([(who, Kind::Plaintext), (who, Kind::SaslSsl)]);
        }
    }
    let kcat = Command::new("kcat")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if kcat {
        contenders.extend([(KCAT, Kind::Plaintext), (KCAT, Kind::SaslSsl)]);
    } else {
        println!("kcat not installed: its rows are skipped (apt-get install kcat)");
    }
    for round in 0..rounds {
        for j in 0..contenders.len() {
            let (who, kind) = contenders[(j + round) % contenders.len()];
            let secs = if who == "ours" {
                let client = if kind == Kind::Plaintext { &plain } else { &sasl };
                support::consume_all(client, &topic, records)?.0.as_secs_f64()
            } else if who == KCAT {
                kcat_consume(k, kind, &topic, records)?
            } else {
                let tuning = if who == LIBRDKAFKA_TUNED { TUNING } else { &[] };
                rdkafka_consume(k, kind, &topic, records, tuning)?
            };
            rates.entry((who, kind)).or_default().push(records as f64 / secs);
        }
    }
    let median = |v: &[Rate]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "\n(b, d) consume {records} × {value_size} B, {PARTITIONS} partitions, one consumer, median of {rounds} rounds"
    );
    println!(
        "{:<18} {:<10} {:>12} {:>9}  every round",
        "client", "listener", "records/s", "MB/s"
    );
    for ((who, kind), r) in &rates {
        let m = median(r);
        let each: Vec<String> = r.iter().map(|x| format!("{:.2}M", x / 1e6)).collect();
        println!(
            "{who:<18} {:<10} {:>11.2}M {:>9.1}  {}",
            kind.name(),
            m / 1e6,
            m * value_size as f64 / 1e6,
            each.join(" ")
        );
    }
    // Ratios per round (same round, same machine state), then their median.
    let per_round = |a: (&str, Kind), b: (&str, Kind)| -> Option<Vec<f64>> {
        let (a, b) = (rates.get(&a)?, rates.get(&b)?);
        Some(a.iter().zip(b).map(|(x, y)| x / y).collect())
    };
    let show = |label: &str, a, b| {
        if let Some(r) = per_round(a, b) {
            println!("{label:<50} {:>5.2}  ({})", median(&r), spread(&r));
        }
    };
    show(
        "ours SASL_SSL / ours PLAINTEXT throughput",
        ("ours", Kind::SaslSsl),
        ("ours", Kind::Plaintext),
    );
    for who in [LIBRDKAFKA, LIBRDKAFKA_TUNED, KCAT] {
        show(
            &format!("{who} SASL_SSL / PLAINTEXT"),
            (who, Kind::SaslSsl),
            (who, Kind::Plaintext),
        );
    }
    for who in [LIBRDKAFKA, LIBRDKAFKA_TUNED, KCAT] {
        for kind in [Kind::Plaintext, Kind::SaslSsl] {
            show(
                &format!("ours / {who}, {}", kind.name()),
                ("ours", kind),
                (who, kind),
            );
        }
    }
    if rdkafka {
        println!("(librdkafka tuned: {})", TUNING.join(" "));
    }
    Ok(())
}

/// kcat's time to read `records` from the beginning, less its fixed cost (the same command
/// from the end, which reads nothing), in seconds.
fn kcat_consume(k: &SecureKafka, kind: Kind, topic: &str, records: usize) -> Result<f64, BoxError> {
    let run = |offset: &str| -> Result<(f64, usize), BoxError> {
        let mut cmd = Command::new("kcat");
        cmd.args(["-C", "-q", "-e", "-o", offset, "-f", "x", "-t", topic]);
        cmd.arg("-b").arg(k.listener(kind.name())?);
        if kind == Kind::SaslSsl {
            let ca = format!("ssl.ca.location={}", k.ca.display());
            for p in [
                "security.protocol=sasl_ssl",
                "sasl.mechanism=PLAIN",
                "sasl.username=admin",
                "sasl.password=admin-secret",
                &ca,
            ] {
                cmd.arg("-X").arg(p);
            }
        }
        let started = Instant::now();
        let out = cmd.output()?;
        let secs = started.elapsed().as_secs_f64();
        if !out.status.success() {
            return Err(format!(
                "kcat over {}: {}",
                kind.name(),
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        Ok((secs, out.stdout.len()))
    };
    let (fixed, none) = run("end")?;
    let (secs, got) = run("beginning")?;
    if got != records || none != 0 {
        return Err(format!(
            "kcat over {} read {got} records (and {none} from the end)",
            kind.name()
        )
        .into());
    }
    Ok((secs - fixed).max(1e-3))
}

/// `$PYTHON`, else the environment `scripts/rdkafka` keeps with the pinned wheel (installing it
/// the first time), else `python3`.
fn python() -> String {
    if let Ok(p) = std::env::var("PYTHON") {
        return p;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/rdkafka");
    match Command::new(script).arg("python").output() {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_string(),
        _ => "python3".into(),
    }
}

/// `librdkafka 2.16.0 (confluent-kafka 2.16.1)`, or why it cannot be used.
fn rdkafka_version() -> Result<String, BoxError> {
    let out = Command::new(python()).args([RDKAFKA, "version"]).output()?;
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("{RDKAFKA} version: {e}: {}", String::from_utf8_lossy(&out.stderr)))?;
    match json["librdkafka"].as_str() {
        Some(lib) => Ok(format!(
            "librdkafka {lib} from confluent-kafka {}",
            json["confluent_kafka"].as_str().unwrap_or("?")
        )),
        None => Err(format!("{} (scripts/rdkafka python installs it)", json["error"]).into()),
    }
}

/// librdkafka's consume time (join excluded, scaled as ours is) in seconds.
fn rdkafka_consume(
    k: &SecureKafka,
    kind: Kind,
    topic: &str,
    records: usize,
    tuning: &[&str],
) -> Result<f64, BoxError> {
    let mut cmd = Command::new(python());
    cmd.args([RDKAFKA, "bench-consume", k.listener(kind.name())?, topic])
        .arg(support::unique_name("secure-bench-rdkafka"))
        .arg(records.to_string())
        .args(["--batch", &RDKAFKA_BATCH.to_string()]);
    for p in kind
        .librdkafka(k)
        .into_iter()
        .chain(tuning.iter().map(|s| s.to_string()))
    {
        cmd.arg("-X").arg(p);
    }
    let out = cmd.stderr(std::process::Stdio::inherit()).output()?;
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "librdkafka bench-consume: {e}: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })?;
    if !out.status.success() || json["records"].as_u64() != Some(records as u64) {
        return Err(format!("librdkafka bench-consume over {}: {json}", kind.name()).into());
    }
    json["seconds"]
        .as_f64()
        .ok_or_else(|| format!("no seconds in {json}").into())
}

fn static_member(client: &Client, group: &str, topic: &str, id: &str) -> Result<GroupMember, BoxError> {
    Ok(client
        .member(group)
        .group_instance_id(id)
        .subscribe([topic])
        .session_timeout(Duration::from_secs(30))
        .heartbeat_interval(Duration::from_secs(3))
        .max_poll_interval(Duration::from_secs(60))
        .build()?)
}

/// One listener's group for (c): members a and c polled by threads, b restarted by the caller.
struct Group {
    kind: Kind,
    name: String,
    topic: String,
    generation: i32,
    partitions: String,
    b: Option<GroupMember>,
    others: Vec<std::thread::JoinHandle<GroupMember>>,
}

/// (c) Static restart → assignment back, one restart over each listener in turn.
fn restart(k: &SecureKafka, rounds: usize, restarts: usize) -> Result<(), BoxError> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut groups = Vec::new();
    for kind in [Kind::Plaintext, Kind::SaslSsl] {
        let setup = kind.client(k, "secure-bench-restart")?;
        let topic = support::create_topic(&setup, "secure-bench-restart", 6)?;
        let name = support::unique_name("secure-bench-restart");
        let mut others = Vec::new();
        for id in ["a", "c"] {
            let mut m = static_member(&setup, &name, &topic, id)?;
            m.join(Duration::from_secs(60))?;
            let stop = stop.clone();
            others.push(std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Err(e) = m.poll(Duration::from_millis(100)) {
                        eprintln!("member {:?}: {e}", m.group_instance_id());
                        break;
                    }
                }
                m
            }));
        }
        let mut b = static_member(&setup, &name, &topic, "b")?;
        b.join(Duration::from_secs(60))?;
        groups.push(Group {
            kind,
            name,
            topic,
            generation: 0,
            partitions: String::new(),
            b: Some(b),
            others,
        });
    }
    // Let each group settle into one generation with all three members.
    std::thread::sleep(Duration::from_secs(5));
    for g in &mut groups {
        let b = g.b.as_mut().ok_or("no member b")?;
        b.poll(Duration::from_millis(10))?;
        g.generation = b.generation().map(|g| g.id).ok_or("no generation")?;
        g.partitions = b.assignment().to_string();
    }
    let mut samples: Vec<BTreeMap<Kind, Vec<Duration>>> = Vec::new();
    for round in 0..rounds {
        let mut this: BTreeMap<Kind, Vec<Duration>> = BTreeMap::new();
        for i in 0..restarts {
            for j in 0..groups.len() {
                let g = &mut groups[(i + j + round) % 2];
                g.b.take().ok_or("no member b")?.close()?;
                let t = Instant::now();
                // A restarted process: new Client (bootstrap connection with TLS and SASL),
                // FindCoordinator, coordinator connection, JoinGroup, SyncGroup.
                let client = g.kind.client(k, "secure-bench-restart")?;
                let mut b = static_member(&client, &g.name, &g.topic, "b")?;
                let events = b.join(Duration::from_secs(60))?;
                let took = t.elapsed();
                let same = matches!(events.last(), Some(GroupEvent::Assigned { generation, .. }) if *generation == g.generation);
                if !same || b.assignment().to_string() != g.partitions {
                    return Err(format!(
                        "{} restart: generation or assignment changed: {events:?}",
                        g.kind.name()
                    )
                    .into());
                }
                this.entry(g.kind).or_default().push(took);
                g.b = Some(b);
            }
        }
        samples.push(this.into_iter().map(|(k, v)| (k, sorted(v))).collect());
    }
    stop.store(true, Ordering::Relaxed);
    for g in groups {
        for h in g.others {
            let _ = h.join().map(|m| m.close());
        }
        if let Some(b) = g.b {
            b.close()?;
        }
    }
    println!(
        "\n(c) static restart → assignment back (new Client), {restarts} per listener per round, interleaved"
    );
    println!(
        "{:<16} {:>9} {:>9}  {:>6}  p50 ratio",
        "listener", "p50", "p99", "×p50"
    );
    let all = |kind: Kind| sorted(samples.iter().flat_map(|r| r[&kind].clone()).collect());
    let base = all(Kind::Plaintext);
    for kind in [Kind::Plaintext, Kind::SaslSsl] {
        let s = all(kind);
        let per_round: Vec<f64> = samples
            .iter()
            .map(|r| ratio(&r[&kind], &r[&Kind::Plaintext], 0.5))
            .collect();
        println!(
            "{:<16} {:>9.2?} {:>9.2?}  {:>6.2}  {}",
            kind.name(),
            support::percentile(&s, 0.5),
            support::percentile(&s, 0.99),
            ratio(&s, &base, 0.5),
            spread(&per_round)
        );
    }
    Ok(())
}
