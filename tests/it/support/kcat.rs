//! librdkafka, through `kcat` (Debian package `kcat`), for the interoperability tests.

use super::process::Process;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

/// `kcat -V`'s first lines (kcat and librdkafka versions); panics with what to install if kcat
/// is missing.
pub fn version() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| match Command::new("kcat").arg("-V").output() {
        Ok(out) => String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| l.contains("librdkafka"))
            .unwrap_or("kcat (version unknown)")
            .trim()
            .to_string(),
        Err(e) => panic!("kcat is needed for the librdkafka interop tests (apt-get install kcat): {e}"),
    })
}

/// Writes `per_partition` records with values `p<partition>-<i>` to each of the first
/// `partitions` partitions of `topic` (one `kcat -P -p N` per partition).
pub fn produce(bootstrap: &str, topic: &str, partitions: i32, per_partition: usize) {
    version();
    for p in 0..partitions {
        let values: Vec<String> = (0..per_partition).map(|i| format!("p{p}-{i}")).collect();
        // kcat reads the records from stdin; the watcher gives it /dev/null, so they go through
        // a here-string in bash instead.
        let script = r#"kcat -P -b "$1" -t "$2" -p "$3" -X acks=all <<<"$4""#;
        let args: Vec<String> = [
            "-c",
            script,
            "kcat",
            bootstrap,
            topic,
            &p.to_string(),
            &values.join("\n"),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        Process::run("kcat producer", "bash", &args, Duration::from_secs(30));
    }
}

/// Starts `kcat -G` (librdkafka's balanced consumer) in `group` with the range assignor, static
/// if `instance` is given, reading `topic` from the earliest offset. Stdout has
/// `partition offset value` per record; stderr has kcat's rebalance lines and librdkafka's
/// `cgrp` debug log, which tells who led each generation (see [`led`]).
pub fn consumer(
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
        "auto.offset.reset=earliest".into(),
        "enable.auto.commit=false".into(),
        "debug=cgrp".into(),
    ];
    props.extend(instance.map(|i| format!("group.instance.id={i}")));
    let mut args = vec!["-b".to_string(), bootstrap.into(), "-G".into(), group.into()];
    for p in props {
        args.push("-X".into());
        args.push(p);
    }
    // -u: unbuffered, so each record reaches the pipe as it is consumed.
    args.extend(["-u", "-f", "%p %o %s\\n", topic].map(String::from));
    Process::spawn(&format!("kcat consumer {client_id}"), "kcat", &args)
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
