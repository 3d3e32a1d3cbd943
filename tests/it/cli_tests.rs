//! The `kafka-group` binary against real brokers: output, effects and exit codes as scripts
//! see them.

use crate::group_tests::{client, converged, static_member, topic_with_partitions, Running};
use crate::support::proxy::Proxy;
use crate::support::{broker, unique_name, wait_for};
use kafka_group::ProducerRecord;
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// The `kafka-group` binary. It belongs to the CLI crate, whose binaries this package's tests
/// cannot name (`CARGO_BIN_EXE_*` covers a package's own), so it is built here once per run,
/// into the target directory and profile of this test binary (`scripts/test` builds it first,
/// which makes this a no-op there; `cargo test --test it -- cli_tests` alone works too).
pub(crate) fn binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        // target/<profile>/deps/it-<hash>
        let exe = std::env::current_exe().expect("the test binary's path");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("the test binary lives in target/<profile>/deps");
        let target_dir = profile_dir.parent().expect("target/<profile>");
        let mut build = Command::new(env!("CARGO"));
        build
            .args([
                "build",
                "--quiet",
                "-p",
                "kafka-group-cli",
                "--bin",
                "kafka-group",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("CARGO_TARGET_DIR", target_dir);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        let status = build
            .status()
            .expect("running cargo to build the kafka-group binary");
        assert!(
            status.success(),
            "cargo build -p kafka-group-cli failed: {status}"
        );
        profile_dir.join(format!("kafka-group{}", std::env::consts::EXE_SUFFIX))
    })
}

pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs the binary with `--bootstrap-server bootstrap` and `args`. Standard input stays open
/// until it exits.
pub(crate) fn cli(bootstrap: &str, args: &[&str]) -> Run {
    cli_with_stdin(bootstrap, args, Stdio::piped())
}

/// [`cli`] with standard input closed from the start, as under cron or nohup (`</dev/null`).
fn cli_stdin_closed(bootstrap: &str, args: &[&str]) -> Run {
    cli_with_stdin(bootstrap, args, Stdio::null())
}

fn cli_with_stdin(bootstrap: &str, args: &[&str], stdin: Stdio) -> Run {
    let mut child = Command::new(binary())
        .arg("--bootstrap-server")
        .arg(bootstrap)
        .args(["--timeout", "20"])
        .args(args)
        .env_remove("KAFKA_BOOTSTRAP")
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take();
    let mut stdout = String::new();
    let mut err_pipe = child.stderr.take().unwrap();
    // Drain stderr on a thread so that neither pipe can fill up and block the child.
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err_pipe.read_to_string(&mut s);
        s
    });
    child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    let status = child.wait().unwrap();
    let stderr = err_reader.join().unwrap();
    drop(stdin);
    Run {
        code: status.code().unwrap_or(-1),
        stdout,
        stderr,
    }
}

pub(crate) fn json(run: &Run) -> Value {
    serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON document ({e}): {}", run.stdout))
}

fn member_count(bootstrap: &str, group: &str) -> usize {
    let run = cli(bootstrap, &["--json", "describe", group]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    json(&run)["members"].as_array().unwrap().len()
}

#[test]
fn describe_shows_static_members_and_remove_member_takes_effect() {
    let bootstrap = broker::shared().bootstrap();
    let client = client(bootstrap);
    let topic = topic_with_partitions(&client, 2);
    let group = unique_name("cli-group");
    let a = Running::start(static_member(&client, &group, &topic, "cli-a"));
    let b = Running::start(static_member(&client, &group, &topic, "cli-b"));
    wait_for("two static members", Duration::from_secs(30), || {
        converged([&a, &b], 2)
    });

    let run = cli(bootstrap, &["describe", &group]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for part in [
        "State:          Stable",
        "cli-a",
        "cli-b",
        "INSTANCE-ID",
        "LAG",
        &format!("{topic}-0"),
    ] {
        assert!(
            run.stdout.contains(part),
            "{part:?} missing from:\n{}",
            run.stdout
        );
    }
    let doc = json(&cli(bootstrap, &["--json", "describe", &group]));
    assert_eq!(doc["state"], "Stable");
    assert!(doc["generation"].is_null());
    let mut ids: Vec<&str> = doc["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["group_instance_id"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, ["cli-a", "cli-b"]);
    let assigned: usize = doc["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["assignment"].as_array().unwrap().len())
        .sum();
    assert_eq!(assigned, 2);
    assert_eq!(doc["offsets"].as_array().unwrap().len(), 2, "{doc}");

    // A stopped static member stays in the group until its session times out; removing it by
    // instance id ends that at once.
    drop(a.stop());
    assert_eq!(member_count(bootstrap, &group), 2);
    let run = cli(bootstrap, &["remove-member", &group, "--instance-id", "cli-a"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("cli-a") && run.stdout.contains("removed"),
        "{}",
        run.stdout
    );
    wait_for("one member left", Duration::from_secs(20), || {
        member_count(bootstrap, &group) == 1
    });

    let run = cli(bootstrap, &["remove-member", &group, "--instance-id", "nobody"]);
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("UNKNOWN_MEMBER_ID"), "{}", run.stdout);
    assert!(run.stderr.contains("nobody"), "{}", run.stderr);

    // Removing a member whose process still runs: it rejoins with a new member id, which
    // --wait sees (exit 5).
    let run = cli(
        bootstrap,
        &["remove-member", &group, "--instance-id", "cli-b", "--wait", "30"],
    );
    assert_eq!(run.code, 5, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("cli-b"), "{}", run.stderr);
    drop(b);
}

#[test]
fn describe_of_an_unknown_group_exits_3() {
    let run = cli(
        broker::shared().bootstrap(),
        &["describe", &unique_name("cli-nobody")],
    );
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("does not exist"), "{}", run.stderr);
}

#[test]
fn usage_errors_exit_1() {
    let run = cli("localhost:1", &["remove-member", "g"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let help = cli("localhost:1", &["--help"]);
    assert_eq!(help.code, 0);
    assert!(help.stdout.contains("Exit codes:"), "{}", help.stdout);
}

#[test]
fn broker_versions_names_the_emulated_release() {
    let proxy = Proxy::start(broker::shared_legacy(), "zk-2.2");
    let run = cli(&proxy.bootstrap(), &["broker-versions"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("Newest matching release: Kafka 2.2 (zk-2.2)"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("JoinGroup"), "{}", run.stdout);

    let doc = json(&cli(&proxy.bootstrap(), &["--json", "broker-versions"]));
    let brokers = doc["brokers"].as_array().unwrap();
    assert!(!brokers.is_empty(), "{doc}");
    for b in brokers {
        assert_eq!(b["release_version"], "2.2", "{b}");
        let join = b["apis"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["api"] == "JoinGroup")
            .unwrap();
        // zk-2.2 advertises JoinGroup 0..=4, so 4 is chosen.
        assert_eq!(join["broker"]["max"], 4, "{join}");
        assert_eq!(join["chosen"], 4, "{join}");
    }
}

/// A real broker is named by its own release line, whether or not it advertises the optional
/// client-telemetry APIs.
#[test]
fn broker_versions_names_the_real_broker_line() {
    let b = broker::shared();
    let doc = json(&cli(b.bootstrap(), &["--json", "broker-versions"]));
    let major = b.version().split('.').next().unwrap().to_string();
    for broker in doc["brokers"].as_array().unwrap() {
        let release = broker["release_version"].as_str().unwrap_or_default();
        assert!(
            release.starts_with(&format!("{major}.")),
            "Kafka {} named as {release}",
            b.version()
        );
    }
}

#[test]
fn remove_member_on_kafka_2_3_exits_4() {
    let proxy = Proxy::start(broker::shared_legacy(), "zk-2.3");
    let run = cli(&proxy.bootstrap(), &["remove-member", "g", "--instance-id", "a"]);
    assert_eq!(run.code, 4, "{}\n{}", run.stdout, run.stderr);
    for part in ["removing members by group.instance.id", "Kafka 2.4 or newer"] {
        assert!(run.stderr.contains(part), "{part:?} missing from: {}", run.stderr);
    }
}

#[test]
fn join_prints_assignments_and_records_and_commits() {
    let bootstrap = broker::shared().bootstrap();
    let client = client(bootstrap);
    let topic = topic_with_partitions(&client, 1);
    let mut producer = client.producer().build().unwrap();
    for i in 0..5 {
        producer
            .send(ProducerRecord::new(&topic, format!("v{i}")).key(format!("k{i}")))
            .unwrap();
    }
    producer.close().unwrap();
    let group = unique_name("cli-join");
    let run = cli(
        bootstrap,
        &[
            "join",
            &group,
            "--instance-id",
            "cli-j",
            "--topic",
            &topic,
            "--from-beginning",
            "--session-timeout",
            "6000",
            "--max-records",
            "3",
            "--duration",
            "40",
        ],
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(lines[0].starts_with("Assigned generation="), "{}", run.stdout);
    assert!(
        lines[0].ends_with(&format!(" partitions={topic}-0")),
        "{}",
        run.stdout
    );
    assert_eq!(
        &lines[1..],
        [0, 1, 2].map(|i| format!("{topic}-0\t{i}\tk{i}\tv{i}")),
        "{}",
        run.stdout
    );
    // Exactly the printed records were committed: two of five left.
    let doc = json(&cli(bootstrap, &["--json", "describe", &group]));
    let offsets = doc["offsets"].as_array().unwrap();
    assert_eq!(offsets.len(), 1, "{doc}");
    assert_eq!(offsets[0]["committed"], 3, "{doc}");
    assert_eq!(offsets[0]["lag"], 2, "{doc}");

    // A static restart of the same instance resumes from the commit; --duration ends it.
    let run = cli(
        bootstrap,
        &[
            "--json",
            "join",
            &group,
            "--instance-id",
            "cli-j",
            "--topic",
            &topic,
            "--duration",
            "4",
        ],
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let events: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events[0]["event"], "Assigned", "{}", run.stdout);
    let offsets: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "Record")
        .map(|e| &e["offset"])
        .collect();
    assert_eq!(offsets, [3, 4], "{}", run.stdout);
}

/// With standard input closed (cron, nohup), `join` once stopped after its first poll (500 of
/// `--max-records 1000`): input that is not a terminal must not stop it.
#[test]
fn join_with_stdin_closed_honours_max_records_and_duration() {
    let bootstrap = broker::shared().bootstrap();
    let client = client(bootstrap);
    let topic = topic_with_partitions(&client, 1);
    let mut producer = client.producer().build().unwrap();
    for i in 0..1200 {
        producer
            .send(ProducerRecord::new(&topic, format!("v{i}")))
            .unwrap();
    }
    producer.close().unwrap();
    let group = unique_name("cli-closed");
    let join = |extra: &[&str]| {
        let mut args = vec![
            "join",
            &group,
            "--instance-id",
            "cli-closed",
            "--topic",
            &topic,
            "--from-beginning",
            "--session-timeout",
            "6000",
        ];
        args.extend_from_slice(extra);
        cli_stdin_closed(bootstrap, &args)
    };
    let run = join(&["--max-records", "1000", "--duration", "60"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let records = run
        .stdout
        .lines()
        .filter(|l| l.starts_with(&format!("{topic}-0\t")))
        .count();
    assert_eq!(records, 1000, "{}", run.stderr);

    // --duration alone: runs its time (more than one poll), prints the rest, exits 0.
    let start = std::time::Instant::now();
    let run = join(&["--duration", "4"]);
    let took = start.elapsed();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let records = run
        .stdout
        .lines()
        .filter(|l| l.starts_with(&format!("{topic}-0\t")))
        .count();
    assert_eq!(records, 200, "{}", run.stdout);
    assert!(took >= Duration::from_secs(4), "stopped after {took:?}");
}

/// `join --duration 15` once ran 323 s after the broker went away: the duration, then at most
/// --timeout for the final commit and another for the close, bound it.
#[test]
fn join_duration_bounds_the_command_when_the_broker_goes_away() {
    use std::io::BufRead;
    let proxy = Proxy::start(broker::shared_legacy(), "kraft-3.9");
    let client = client(&proxy.bootstrap());
    let topic = topic_with_partitions(&client, 1);
    let group = unique_name("cli-gone");
    let (duration, timeout) = (8, 5);
    let mut child = Command::new(binary())
        .args(["--bootstrap-server", &proxy.bootstrap()])
        .args(["--timeout", &timeout.to_string()])
        .args(["join", &group, "--instance-id", "gone", "--topic", &topic])
        .args(["--session-timeout", "6000", "--duration", &duration.to_string()])
        .env_remove("KAFKA_BOOTSTRAP")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("Assigned"), "{first}");
    // The broker stops answering (connections stay open: the worst case for a client).
    proxy.blackhole(true);
    let start = std::time::Instant::now();
    let status = child.wait().unwrap();
    let took = start.elapsed();
    let bound = Duration::from_secs(duration + 2 * timeout) + crate::support::LOAD_MARGIN;
    assert!(
        took < bound,
        "ran {took:?} after the broker went away (bound {bound:?})"
    );
    eprintln!("join exited {status} {took:?} after the broker went away");
    proxy.blackhole(false);
}

/// A topic name Kafka would refuse is a usage error (exit 1) naming it, before any network call
/// (the broker address is a closed port).
#[test]
fn join_refuses_a_bad_topic_name_before_connecting() {
    let run = cli_stdin_closed(
        "127.0.0.1:1",
        &[
            "join",
            "g",
            "--instance-id",
            "i",
            "--topic",
            "bad topic!",
            "--duration",
            "30",
        ],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("bad topic!"), "{}", run.stderr);
}

/// A KIP-848 `consumer`-protocol group (two of Kafka's Java consumers with
/// `group.protocol=consumer`, static) as `Admin::describe_group` and the CLI show it:
/// ConsumerGroupDescribe's epochs and per-member target assignment, where DescribeGroups would
/// have called the group `Dead`; and `remove-member` of one of them.
#[test]
fn a_consumer_protocol_group_is_described_with_its_epochs_and_members() {
    use crate::support::java::Java;
    use kafka_group::GroupProtocol;
    let b = broker::consumer_protocol();
    let bootstrap = b.bootstrap();
    let client = client(bootstrap);
    let topic = topic_with_partitions(&client, 4);
    let group = unique_name("cli-kip848");
    let java = Java::new(b.version()).with_config(&[("group.protocol", "consumer".into())]);
    let j1 = java.consumer(bootstrap, &topic, &group, "kip848-1", Some("j1"));
    let j2 = java.consumer(bootstrap, &topic, &group, "kip848-2", Some("j2"));
    let admin = client.admin();
    let mut d = None;
    wait_for(
        "both Java members stable with 2 partitions each",
        Duration::from_secs(60),
        || {
            let got = admin.describe_group(&group).unwrap();
            let settled = got.state == "Stable"
                && got.members.len() == 2
                && got.members.iter().all(|m| {
                    m.decoded_assignment.as_ref().map(|a| a.topic_partitions().len()) == Some(2)
                        && m.decoded_assignment == m.target_assignment
                });
            d = Some(got);
            settled
        },
    );
    let d = d.unwrap();
    assert_eq!(d.group_protocol, GroupProtocol::Consumer);
    assert_eq!(d.protocol_type, "consumer");
    assert_eq!(d.protocol, "uniform", "Kafka 4's default server-side assignor");
    let epoch = d.group_epoch.unwrap();
    assert!(epoch >= 2 && d.assignment_epoch == Some(epoch), "{d:?}");
    let mut ids: Vec<&str> = d
        .members
        .iter()
        .filter_map(|m| m.group_instance_id.as_deref())
        .collect();
    ids.sort();
    assert_eq!(ids, ["j1", "j2"]);
    for m in &d.members {
        assert!(m.member_epoch.unwrap() > 0, "{m:?}");
        assert_eq!(m.member_protocol, Some(GroupProtocol::Consumer));
    }

    let run = cli(bootstrap, &["describe", &group]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for part in [
        "Group protocol: consumer",
        "Assignor:       uniform",
        "EPOCH",
        "TARGET",
        "j1",
        "j2",
    ] {
        assert!(
            run.stdout.contains(part),
            "{part:?} missing from:\n{}",
            run.stdout
        );
    }
    let doc = json(&cli(bootstrap, &["--json", "describe", &group]));
    assert_eq!(doc["group_protocol"], "consumer");
    assert_eq!(doc["group_epoch"], epoch);
    assert!(doc["members"]
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m["member_epoch"].as_i64() > Some(0)));

    let listed = admin.list_groups().unwrap();
    let mine = listed.iter().find(|g| g.group_id == group).expect("listed");
    assert_eq!(mine.group_type.as_deref(), Some("consumer"), "{mine:?}");

    // A classic group on the same broker is still described by DescribeGroups.
    let classic = unique_name("cli-classic");
    let a = Running::start(static_member(&client, &classic, &topic, "c-a"));
    wait_for("a classic member", Duration::from_secs(30), || converged([&a], 4));
    let c = admin.describe_group(&classic).unwrap();
    assert_eq!(
        (c.group_protocol, c.group_epoch, c.members.len()),
        (GroupProtocol::Classic, None, 1)
    );
    let listed = admin.list_groups().unwrap();
    let theirs = listed.iter().find(|g| g.group_id == classic).expect("listed");
    assert_eq!(theirs.group_type.as_deref(), Some("classic"), "{theirs:?}");
    drop(a);

    // remove-member of a static consumer-protocol member: its partitions go to the other.
    drop(j1);
    let run = cli(bootstrap, &["remove-member", &group, "--instance-id", "j1"]);
    eprintln!("remove-member: {}\n{}", run.stdout, run.stderr);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    wait_for("j2 alone with every partition", Duration::from_secs(30), || {
        let d = admin.describe_group(&group).unwrap();
        d.members.len() == 1
            && d.members[0]
                .decoded_assignment
                .as_ref()
                .map(|a| a.topic_partitions().len())
                == Some(4)
    });
    drop(j2);
}

/// Runs the binary with exactly `args` (no added `--timeout`), standard input closed.
fn cli_raw(args: &[&str]) -> Run {
    let out = Command::new(binary())
        .args(args)
        .env_remove("KAFKA_BOOTSTRAP")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Every exit code is listed in `--help`, with what it means.
#[test]
fn help_lists_every_exit_code() {
    let help = cli_raw(&["--help"]);
    assert_eq!(help.code, 0, "{}", help.stderr);
    let codes = help
        .stdout
        .split_once("Exit codes:")
        .unwrap_or_else(|| panic!("no exit codes in:\n{}", help.stdout))
        .1;
    for code in 0..=6 {
        assert!(
            codes
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{code} "))),
            "exit code {code} missing from:\n{codes}"
        );
    }
}

/// A broker that cannot be reached is exit 2, with the cause (the address and what the
/// connection met) on standard error.
#[test]
fn an_unreachable_broker_exits_2_naming_the_cause() {
    let run = cli_raw(&[
        "--bootstrap-server",
        "127.0.0.1:1",
        "--timeout",
        "2",
        "broker-versions",
    ]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("127.0.0.1:1"), "{}", run.stderr);
}

/// `join` that never reached its group in `--duration` (no broker at the address) exits 6, not
/// 0, and says why: the last error its join retried past.
#[test]
fn join_that_never_joined_exits_6_with_the_last_cause() {
    let run = cli_raw(&[
        "--bootstrap-server",
        "127.0.0.1:1",
        "join",
        "g",
        "--instance-id",
        "w1",
        "--topic",
        "t",
        "--duration",
        "5",
    ]);
    assert_eq!(run.code, 6, "{}\n{}", run.stdout, run.stderr);
    let last = run.stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains("never joined") && last.contains("127.0.0.1:1") && last.contains("refused"),
        "{}",
        run.stderr
    );
}
