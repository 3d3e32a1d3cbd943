//! What the examples share: a broker to talk to.

use std::process::Command;

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
    pub fn get(name: &str) -> Result<LocalKafka, Box<dyn std::error::Error + Send + Sync>> {
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

/// Values that compress about as well as typical text-ish payloads: letters from a
/// 16-character alphabet chosen by a xorshift generator, so lz4 has work to do but no long
/// repeats to exploit. Built before timing, as an application would have them ready.
// Not every example that includes this module produces records.
#[allow(dead_code)]
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
