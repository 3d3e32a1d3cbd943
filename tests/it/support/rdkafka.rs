//! librdkafka 2.16 for the secure interop tests: `rdkafka_client.py` beside this file, run with
//! the Python that has PyPI's `confluent-kafka` wheel (which bundles librdkafka). Debian's kcat
//! (`support::kcat`) is on librdkafka 2.0.2, whose SCRAM a Kafka 4.4 broker refuses.
//!
//! The interpreter is `$PYTHON`, else `python3`. Each command prints one JSON object.

use super::process::{Process, Record};
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

/// The program, run from the source tree.
pub const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/support/rdkafka_client.py");

/// The oldest librdkafka the secure tests accept: 2.0.2 fails SCRAM against Kafka 4.4.
const MIN_LIBRDKAFKA: (u32, u32) = (2, 16);

const INSTALL: &str = "python3 -m pip install confluent-kafka";

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

/// `librdkafka 2.16.0 (confluent-kafka 2.16.1)`; panics saying how to install the wheel if it is
/// missing or bundles a librdkafka older than 2.16.
pub fn version() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| {
        let out = std::process::Command::new(python())
            .args([SCRIPT, "version"])
            .output()
            .unwrap_or_else(|e| panic!("cannot run {} for the librdkafka tests: {e}", python()));
        let json: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let lib = json["librdkafka"].as_str().unwrap_or_else(|| {
            panic!(
                "librdkafka {}.{} for the secure interop tests comes from PyPI's confluent-kafka \
                 wheel, which {} cannot import: {INSTALL} ({}{})",
                MIN_LIBRDKAFKA.0,
                MIN_LIBRDKAFKA.1,
                python(),
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            )
        });
        let mut parts = lib.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        assert!(
            found >= MIN_LIBRDKAFKA,
            "confluent-kafka bundles librdkafka {lib}; the secure interop tests need {}.{}+: {INSTALL} --upgrade",
            MIN_LIBRDKAFKA.0,
            MIN_LIBRDKAFKA.1
        );
        format!("librdkafka {lib} (confluent-kafka {})", json["confluent_kafka"].as_str().unwrap_or("?"))
    })
}

/// Runs `rdkafka_client.py COMMAND ARGS -X k=v…` to completion (the script bounds its own wait
/// by `--timeout`; `timeout` here is a backstop). The JSON it printed, or its `error` with the
/// tail of librdkafka's log.
pub fn run(
    command: &str,
    args: &[String],
    props: &[(&str, String)],
    timeout: Duration,
) -> Result<Value, String> {
    version();
    let mut argv = vec![SCRIPT.to_string(), command.to_string()];
    argv.extend(args.iter().cloned());
    for (k, v) in props {
        argv.push("-X".into());
        argv.push(format!("{k}={v}"));
    }
    argv.push("--timeout".into());
    argv.push(timeout.as_secs_f64().to_string());
    let mut p = Process::spawn(&format!("librdkafka {command}"), &python(), &argv);
    let Some(status) = p.finish(timeout + Duration::from_secs(30)) else {
        return Err(format!("still running:\n{}", p.report()));
    };
    let last = p.stdout().last().cloned().unwrap_or_default();
    let json: Value = serde_json::from_str(&last).map_err(|e| format!("{e} in {last:?}:\n{}", p.report()))?;
    if status.success() {
        Ok(json)
    } else {
        Err(format!(
            "{} ({status})\n{}",
            json["error"].as_str().unwrap_or(&last),
            p.report()
        ))
    }
}

/// Connects to `addr` and fetches metadata: `Ok` once it has, `Err` with librdkafka's reason
/// (an authentication failure ends it at once).
pub fn metadata(addr: SocketAddr, props: &[(&str, String)]) -> Result<Value, String> {
    run("metadata", &[addr.to_string()], props, Duration::from_secs(20))
}

/// Writes `per_partition` records with values `p<partition>-<i>` to each of the first
/// `partitions` partitions of `topic` (acks=all); panics if any is not delivered.
pub fn produce(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    per_partition: usize,
    props: &[(&str, String)],
) {
    let args = [
        bootstrap.to_string(),
        topic.into(),
        partitions.to_string(),
        per_partition.to_string(),
    ];
    let json = run("produce", &args, props, Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("librdkafka produce to {topic}: {e}"));
    assert_eq!(json["produced"], partitions as usize * per_partition, "{json}");
}

/// Joins `group` (subscribe), reads `count` records of `topic` from the earliest offset, commits
/// them and closes; the records, sorted. Panics if they do not come within a minute.
pub fn consume(
    bootstrap: &str,
    topic: &str,
    group: &str,
    count: usize,
    props: &[(&str, String)],
) -> Vec<Record> {
    let args = [
        bootstrap.to_string(),
        topic.into(),
        group.into(),
        count.to_string(),
    ];
    let json = run("consume", &args, props, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("librdkafka consume of {topic} in {group}: {e}"));
    let mut records: Vec<Record> = json["records"]
        .as_array()
        .unwrap_or_else(|| panic!("no records in {json}"))
        .iter()
        .map(|r| Record {
            partition: r[0].as_i64().unwrap() as i32,
            offset: r[1].as_i64().unwrap(),
            value: r[2].as_str().unwrap().to_string(),
        })
        .collect();
    records.sort();
    records
}
