//! What the examples share: a broker to talk to, argument parsing, names, figures.

// Each example uses the helpers it needs; the ones it does not are not dead code.
#![allow(dead_code)]

use kafka_group::{Admin, Client, NewTopic};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
    Admin::new(client).create_topics(&[NewTopic::new(&name, partitions, 1)], Duration::from_secs(30))?;
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
