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
