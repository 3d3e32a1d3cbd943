//! librdkafka 2.16 for the interop tests: `rdkafka_client.py` beside this file, run with the
//! Python that has PyPI's `confluent-kafka` wheel (which bundles librdkafka).
//!
//! The interpreter is `$PYTHON`, else the one `scripts/rdkafka python` names, which installs the
//! pinned wheel into a cached environment of its own on first use, as `scripts/kafka` fetches
//! the brokers: no test depends on what the machine happens to have installed. Each command but
//! `group` prints one JSON object.

use super::process::{Process, Record};
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

/// The program, run from the source tree.
pub const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/support/rdkafka_client.py");

/// The oldest librdkafka the secure tests accept: 2.0.2 fails SCRAM against Kafka 4.4.
const MIN_LIBRDKAFKA: (u32, u32) = (2, 16);

const INSTALL: &str = "scripts/rdkafka python";

/// `$PYTHON`, else the interpreter of the environment `scripts/rdkafka` keeps (installing it
/// the first time); panics with that script's error.
fn python() -> String {
    static PYTHON: OnceLock<String> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            if let Ok(p) = std::env::var("PYTHON") {
                return p;
            }
            let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/rdkafka");
            let out = std::process::Command::new(script)
                .arg("python")
                .output()
                .unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
            let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
            assert!(
                out.status.success() && !path.is_empty(),
                "{script} python failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
            path
        })
        .clone()
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

/// As [`metadata`], for `topic` alone: the answer's `topic` has its partition count and the
/// error librdkafka reported for it (`null` if none).
pub fn topic_metadata(addr: SocketAddr, topic: &str, props: &[(&str, String)]) -> Result<Value, String> {
    let args = [addr.to_string(), "--topic".into(), topic.into()];
    run("metadata", &args, props, Duration::from_secs(20))
}

/// Starts librdkafka's balanced consumer in `group` with the range assignor, static if
/// `instance` is given, reading `topic` from the earliest offset until dropped. Stdout has
/// `partition offset value` per record and `# assigned partitions=…` per assignment; stderr has
/// librdkafka's `cgrp` debug log, which tells who led each generation (see [`led`]).
pub fn group_consumer(
    bootstrap: &str,
    topic: &str,
    group: &str,
    client_id: &str,
    instance: Option<&str>,
) -> Process {
    version();
    let mut props = vec![
        format!("client.id={client_id}"),
        "partition.assignment.strategy=range".into(),
        "session.timeout.ms=6000".into(),
        "heartbeat.interval.ms=300".into(),
        "debug=cgrp".into(),
    ];
    props.extend(instance.map(|i| format!("group.instance.id={i}")));
    let mut argv = vec![
        SCRIPT.to_string(),
        "group".into(),
        bootstrap.into(),
        topic.into(),
        group.into(),
    ];
    for p in props {
        argv.push("-X".into());
        argv.push(p);
    }
    Process::spawn(&format!("librdkafka consumer {client_id}"), &python(), &argv)
}

/// From librdkafka's debug log: the generations this consumer joined and whether it was the
/// leader of each (`JoinGroup response: GenerationId N, …, LeaderId X (me), …`).
pub fn led(stderr: &[String]) -> Vec<(i32, bool)> {
    stderr
        .iter()
        .filter_map(|l| {
            let rest = l.split("JoinGroup response: GenerationId ").nth(1)?;
            let generation = rest.split(',').next()?.trim().parse().ok()?;
            let leader = rest.split(", my MemberId").next()?.ends_with("(me)");
            Some((generation, leader))
        })
        .collect()
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
