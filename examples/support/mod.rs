//! What the examples share: a broker to talk to, argument parsing, names, figures.

// Each example uses the helpers it needs; the ones it does not are not dead code.
#![allow(dead_code)]

use kafka_group::{Client, NewTopic, OffsetReset};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Any error an example reports.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kafka");

/// A broker for an example: the one `KAFKA_BOOTSTRAP` names, or a single node started with
/// `scripts/kafka` (downloading Kafka on first use) and stopped when this is dropped.
pub struct LocalKafka {
    /// `host:port` list to bootstrap from.
    pub bootstrap: String,
    started: Option<String>,
}

impl LocalKafka {
    /// Uses `KAFKA_BOOTSTRAP` or starts a broker in `target/kafka-run/<name>`.
    pub fn get(name: &str) -> Result<LocalKafka, BoxError> {
        if let Ok(bootstrap) = std::env::var("KAFKA_BOOTSTRAP") {
            return Ok(LocalKafka {
                bootstrap,
                started: None,
            });
        }
        let dir = format!("{}/target/kafka-run/{name}", env!("CARGO_MANIFEST_DIR"));
        // --owner-pid: the script's watchdog stops the broker even if this process dies.
        let out = Command::new(SCRIPT)
            .args([
                "start",
                "--nodes",
                "1",
                "--dir",
                &dir,
                "--owner-pid",
                &std::process::id().to_string(),
            ])
            .stderr(std::process::Stdio::inherit())
            .output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let bootstrap = text.lines().last().unwrap_or_default().trim().to_string();
        if !out.status.success() || bootstrap.is_empty() {
            return Err("scripts/kafka start failed (see above)".into());
        }
        Ok(LocalKafka {
            bootstrap,
            started: Some(dir),
        })
    }
}

impl Drop for LocalKafka {
    fn drop(&mut self) {
        if let Some(dir) = &self.started {
            let _ = Command::new(SCRIPT).args(["stop", "--dir", dir]).status();
        }
    }
}

/// A broker with secure listeners (`scripts/kafka start --security`): the one whose run directory
/// `KAFKA_SECURE_DIR` names, or a single node started in `target/kafka-run/<name>` (with the
/// JVM's full JIT unless `KAFKA_JVM_OPTS` says otherwise) and stopped when this is dropped. Its users are `admin`, `alice` and `bob`, each with password
/// `<name>-secret`, for PLAIN and both SCRAM mechanisms.
pub struct SecureKafka {
    /// Listener name (`PLAINTEXT`, `SSL`, `SASL_SSL`, `SASL_PLAINTEXT`, …) to `host:port`.
    pub listeners: HashMap<String, String>,
    /// The test CA's certificate (PEM), for `ssl.ca.location`.
    pub ca: PathBuf,
    started: Option<String>,
}

impl SecureKafka {
    /// Uses `KAFKA_SECURE_DIR` or starts a broker in `target/kafka-run/<name>`.
    pub fn get(name: &str) -> Result<SecureKafka, BoxError> {
        let (dir, started) = match std::env::var("KAFKA_SECURE_DIR") {
            Ok(dir) => (dir, None),
            Err(_) => {
                let dir = format!("{}/target/kafka-run/{name}", env!("CARGO_MANIFEST_DIR"));
                // scripts/kafka's brokers stop at C1 (-XX:TieredStopAtLevel=1) to start quickly
                // in tests; that leaves the JDK's TLS crypto without C2's intrinsics, which
                // slowed a TLS handshake and consuming over TLS about 1.5-3× on this machine.
                // A benchmark of TLS wants the broker as it runs in production: the full JIT.
                let jvm =
                    std::env::var("KAFKA_JVM_OPTS").unwrap_or_else(|_| "-XX:TieredStopAtLevel=4".into());
                let status = Command::new(SCRIPT)
                    .env("KAFKA_JVM_OPTS", jvm)
                    .args(["start", "--security", "--dir", &dir])
                    .args(["--owner-pid", &std::process::id().to_string()])
                    .stdout(std::process::Stdio::null())
                    .status()?;
                if !status.success() {
                    return Err("scripts/kafka start --security failed (see above)".into());
                }
                (dir.clone(), Some(dir))
            }
        };
        let file = format!("{dir}/listeners");
        let text = std::fs::read_to_string(&file).map_err(|e| format!("{file}: {e}"))?;
        let listeners = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Ok(SecureKafka {
            listeners,
            ca: PathBuf::from(format!("{dir}/tls/ca.pem")),
            started,
        })
    }

    /// The address of listener `name`.
    pub fn listener(&self, name: &str) -> Result<&str, BoxError> {
        Ok(self
            .listeners
            .get(name)
            .ok_or_else(|| format!("no {name} listener"))?)
    }
}

impl Drop for SecureKafka {
    fn drop(&mut self) {
        if let Some(dir) = &self.started {
            let _ = Command::new(SCRIPT).args(["stop", "--dir", dir]).status();
        }
    }
}

/// A client of the broker at `bootstrap`, named `client_id`.
pub fn client(bootstrap: &str, client_id: &str) -> Result<Client, BoxError> {
    Ok(Client::builder()
        .bootstrap_servers(bootstrap)
        .client_id(client_id)
        .build()?)
}

/// Creates a topic of `partitions` partitions (replication factor 1) named after `prefix` (see
/// [`unique_name`]) and returns its name.
pub fn create_topic(client: &Client, prefix: &str, partitions: i32) -> Result<String, BoxError> {
    let name = unique_name(prefix);
    client
        .admin()
        .create_topics(&[NewTopic::new(&name, partitions, 1)], Duration::from_secs(30))?;
    Ok(name)
}

/// The numeric command-line arguments, each defaulting to its entry in `defaults`; arguments that
/// are not numbers are skipped.
pub fn numeric_args<const N: usize>(defaults: [usize; N]) -> [usize; N] {
    let given: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    std::array::from_fn(|i| given.get(i).copied().unwrap_or(defaults[i]))
}

/// A topic or group name no earlier run used, even against a long-lived `KAFKA_BOOTSTRAP`
/// cluster: `<prefix>-<pid>-<nanoseconds since the epoch>`.
pub fn unique_name(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// Consumes `records` records of `topic` with a new consumer in a fresh group
/// (`auto.offset.reset=earliest`, default fetch settings); the time from the poll after the join
/// to the last record, and the number of polls. Records the joining poll already returned are
/// not in the figure, so the time is scaled to all of them from the rest.
pub fn consume_all(client: &Client, topic: &str, records: usize) -> Result<(Duration, usize), BoxError> {
    let mut consumer = client
        .consumer(&unique_name("consume-bench"))
        .subscribe([topic])
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false)
        .build()?;
    // Join first, so that the figure is the fetch path alone.
    let mut joined = 0;
    while consumer.assignment().is_empty() {
        joined += consumer.poll(Duration::from_millis(10))?.len();
    }
    let started = Instant::now();
    let mut got = joined;
    let mut polls = 0;
    while got < records {
        got += consumer.poll(Duration::from_secs(1))?.len();
        polls += 1;
    }
    let elapsed = started.elapsed();
    consumer.close()?;
    let timed = (records - joined).max(1);
    Ok((elapsed.mul_f64(records as f64 / timed as f64), polls))
}

/// The `p` quantile (0..=1) of `sorted`, which must not be empty.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// Values that compress about as well as typical text-ish payloads: letters from a
/// 16-character alphabet chosen by a xorshift generator, so lz4 has work to do but no long
/// repeats to exploit. Built before timing, as an application would have them ready.
pub fn sample_values(n: usize, size: usize) -> Vec<bytes::Bytes> {
    const ALPHABET: &[u8; 16] = b"abcdefghijklmnop";
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            (0..size)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    ALPHABET[(x & 15) as usize]
                })
                .collect::<Vec<u8>>()
                .into()
        })
        .collect()
}
