//! Real Kafka brokers for the integration tests, run by `scripts/kafka` (KRaft mode on loopback
//! ports, jars fetched once from Maven Central into `~/.cache/kafka-group/kafka`; releases before
//! 3.3 in ZooKeeper mode, for the compatibility suite).
//!
//! - [`shared()`]: one single-node broker for the whole test binary, or the cluster
//!   `KAFKA_BOOTSTRAP` names. Tests share it and keep apart through [`super::unique_name`].
//! - [`consumer_protocol()`]: a broker with KIP-848's consumer protocol whatever `KAFKA_VERSION`
//!   says ([`shared_legacy()`] is its counterpart for 3.9).
//! - [`Cluster`]: a private cluster for a test that kills and restarts nodes.
//!
//! `KAFKA_VERSION` (an alias such as `4.x` or `3.9`, or an exact release such as `3.9.1`)
//! selects the version of the shared broker; see `scripts/kafka-versions`.
//!
//! Teardown: the test harness has no hook that runs after the last test, and statics are never
//! dropped. So every cluster is started with `--owner-pid` set to this process: a watchdog the
//! script detaches stops it within a second or two of the test binary exiting, however it
//! exits (success, panic, abort, SIGKILL). That is the shared broker's only teardown; a
//! [`Cluster`] is also stopped by `Drop`, so it does not outlive its test.

use std::env;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{self, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// A broker that serves every protocol version our codecs have (Kafka 3.9: 4.x removed the
/// oldest ones, KIP-896), for tests that emulate old releases through the proxy. The shared
/// broker when it runs 3.9, otherwise a single 3.9 node started on first use and shared by every
/// test that needs one; like the shared broker it is stopped by the watchdog when the test
/// binary exits.
pub fn shared_legacy() -> SocketAddr {
    if shared().version().starts_with("3.9") {
        return shared().addrs()[0];
    }
    static LEGACY: OnceLock<Cluster> = OnceLock::new();
    LEGACY.get_or_init(|| Cluster::start(1, "3.9")).addr(1)
}

/// A broker with KIP-848's consumer group protocol (Kafka 4.0+), for the tests of it: the shared
/// broker when it runs 4.x, otherwise a single node of [`DEFAULT_VERSION`] started on first use
/// and shared by every such test, so that they check the protocol under any `KAFKA_VERSION`
/// instead of passing without a broker that has it. Stopped by the watchdog like the shared
/// broker.
pub fn consumer_protocol() -> &'static Broker {
    let shared = shared();
    if has_consumer_protocol(shared.version()) {
        return shared;
    }
    static KIP848: OnceLock<Result<Broker, String>> = OnceLock::new();
    let started = KIP848.get_or_init(|| {
        let version = resolve_version(DEFAULT_VERSION);
        let dir = run_dir(&format!("it-{}-kip848", process::id()));
        let bootstrap = start(&dir, 1, &version)?;
        // Said once, on stderr, so a run under KAFKA_VERSION=3.9 shows where these tests went.
        eprintln!(
            "consumer-protocol tests: the shared broker runs Kafka {} (no KIP-848), so they run \
             on Kafka {version} at {bootstrap}",
            shared.version()
        );
        Ok(Broker {
            bootstrap,
            version,
            dir: Some(dir),
        })
    });
    match started {
        Ok(broker) => broker,
        Err(e) => panic!("{e}"),
    }
}

/// The release a private cluster for a consumer-protocol test runs: the one under test when it
/// has KIP-848, else [`DEFAULT_VERSION`] (see [`consumer_protocol`]).
pub fn consumer_protocol_version() -> String {
    if has_consumer_protocol(version_under_test()) {
        version_under_test().to_owned()
    } else {
        resolve_version(DEFAULT_VERSION)
    }
}

/// Whether an exact release (`4.4.0`, `3.9.2`) serves the consumer group protocol by default:
/// 4.0 and later (3.7 to 3.9 have it only behind an early-access setting the test brokers leave
/// off).
pub fn has_consumer_protocol(version: &str) -> bool {
    version
        .split('.')
        .next()
        .and_then(|major| major.parse::<u32>().ok())
        .is_some_and(|major| major >= 4)
}

/// What `KAFKA_VERSION` means when unset: the newest pinned 4.x release.
pub const DEFAULT_VERSION: &str = "4.x";

/// The Kafka lines the suite must pass against, newest first. Tests that need a private cluster
/// anyway run once per entry, so every line is exercised on every run.
pub const VERSIONS: [&str; 2] = ["4.x", "3.9"];

/// A running cluster the tests did not start themselves, or the shared one they did.
#[derive(Debug)]
pub struct Broker {
    bootstrap: String,
    version: String,
    /// The run directory, for a broker this binary started.
    dir: Option<PathBuf>,
}

impl Broker {
    /// `host:port,host:port…`, as a client's `bootstrap.servers` takes it.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// Every bootstrap address, resolved.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        resolve_addrs(&self.bootstrap)
    }

    /// The exact Kafka release, e.g. `4.4.0`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Creates a topic with the release's own `kafka.admin.TopicCommand --zookeeper` (ZooKeeper
    /// mode only): Kafka 0.10.0 has no CreateTopics API. Returns once every partition has a
    /// leader.
    pub fn create_topic_with_zookeeper(&self, topic: &str, partitions: i32) {
        let dir = self
            .dir
            .as_ref()
            .expect("a broker this test binary started (not KAFKA_BOOTSTRAP)");
        create_topic_with_zookeeper(dir, topic, partitions);
    }
}

/// The broker every test may use; started on first use.
///
/// With `KAFKA_BOOTSTRAP` set, that cluster is used as is (nothing is started or stopped) and
/// `KAFKA_VERSION` should name what it runs.
pub fn shared() -> &'static Broker {
    super::init_logs();
    // A failed start is remembered: every later test fails at once with the same message
    // instead of waiting for another start-up timeout.
    static SHARED: OnceLock<Result<Broker, String>> = OnceLock::new();
    match SHARED.get_or_init(start_shared) {
        Ok(broker) => broker,
        Err(e) => panic!("{e}"),
    }
}

fn start_shared() -> Result<Broker, String> {
    let version = version_under_test().to_owned();
    if let Ok(bootstrap) = env::var("KAFKA_BOOTSTRAP") {
        return Ok(Broker {
            bootstrap,
            version,
            dir: None,
        });
    }
    let dir = run_dir(&format!("it-{}", process::id()));
    let bootstrap = start(&dir, 1, &version)?;
    Ok(Broker {
        bootstrap,
        version,
        dir: Some(dir),
    })
}

/// The exact release `KAFKA_VERSION` selects (default [`DEFAULT_VERSION`]), e.g. `4.4.0`.
pub fn version_under_test() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| {
        let wanted = env::var("KAFKA_VERSION").unwrap_or_else(|_| DEFAULT_VERSION.to_owned());
        resolve_version(&wanted)
    })
}

/// Downloads `version` (an alias or exact release) into the jar cache unless it is there.
pub fn fetch(version: &str) {
    scripts_kafka(&["fetch", version]).unwrap_or_else(|e| panic!("{e}"));
}

/// The exact release an alias (`4.x`, `3.9`) stands for, from `scripts/kafka-versions`.
pub fn resolve_version(version: &str) -> String {
    scripts_kafka(&["resolve", version]).unwrap_or_else(|e| panic!("{e}"))
}

/// A cluster of its own for one test, stopped when dropped. Nodes are numbered from 1, as their
/// Kafka `node.id`; every node is both broker and controller.
#[derive(Debug)]
pub struct Cluster {
    dir: PathBuf,
    version: String,
    bootstrap: String,
}

impl Cluster {
    /// Starts `nodes` nodes of `version` (an alias or exact release) and waits until each is
    /// ready. Panics if the cluster does not come up; its logs stay in the run directory.
    pub fn start(nodes: usize, version: &str) -> Cluster {
        super::init_logs();
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let dir = run_dir(&format!("it-{}-{n}", process::id()));
        let version = resolve_version(version);
        let bootstrap = start(&dir, nodes, &version).unwrap_or_else(|e| panic!("{e}"));
        Cluster {
            dir,
            version,
            bootstrap,
        }
    }

    /// `host:port,…` of every node, node 1 first.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// The client address of `node` (1-based).
    pub fn addr(&self, node: usize) -> SocketAddr {
        let addrs = resolve_addrs(&self.bootstrap);
        assert!(
            (1..=addrs.len()).contains(&node),
            "no node {node} in a {}-node cluster",
            addrs.len()
        );
        addrs[node - 1]
    }

    /// Node ids, `1..=nodes`.
    pub fn nodes(&self) -> std::ops::RangeInclusive<usize> {
        1..=resolve_addrs(&self.bootstrap).len()
    }

    /// The exact Kafka release, e.g. `3.9.2`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Creates a topic replicated to every node with the release's own TopicCommand (ZooKeeper
    /// mode only; for Kafka 0.10.0, which has no CreateTopics).
    pub fn create_topic_with_zookeeper(&self, topic: &str, partitions: i32) {
        create_topic_with_zookeeper(&self.dir, topic, partitions);
    }

    /// SIGKILLs `node`: no controlled shutdown, as in a crash. Returns once the process is gone.
    pub fn kill(&self, node: usize) {
        self.node_command("kill", node);
    }

    /// Starts `node` again with its old configuration, ports and data (stopping it first if it
    /// runs); returns once it is ready.
    pub fn restart(&self, node: usize) {
        self.node_command("restart", node);
    }

    fn node_command(&self, command: &str, node: usize) {
        let dir = self.dir.to_string_lossy();
        let node = node.to_string();
        scripts_kafka(&[command, "--dir", &dir, "--node", &node]).unwrap_or_else(|e| panic!("{e}"));
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // No panic here: this may run while a failed test unwinds, and the watchdog stops the
        // cluster anyway once the test binary exits.
        let dir = self.dir.to_string_lossy();
        if let Err(e) = scripts_kafka(&["stop", "--dir", &dir]) {
            eprintln!("{e}");
        }
    }
}

/// `scripts/kafka create-topic`: replication factor = the cluster's node count.
pub fn create_topic_with_zookeeper(dir: &Path, topic: &str, partitions: i32) {
    let dir = dir.to_string_lossy();
    let partitions = partitions.to_string();
    #[rustfmt::skip]
    let args = ["create-topic", "--dir", &dir, "--topic", topic, "--partitions", &partitions];
    scripts_kafka(&args).unwrap_or_else(|e| panic!("{e}"));
}

fn start(dir: &Path, nodes: usize, version: &str) -> Result<String, String> {
    let dir = dir.to_string_lossy();
    let nodes = nodes.to_string();
    let owner = process::id().to_string();
    #[rustfmt::skip]
    let args = [
        "start", "--nodes", &nodes, "--version", version, "--dir", &dir, "--owner-pid", &owner,
    ];
    scripts_kafka(&args)
}

pub(super) fn run_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/kafka-run")
        .join(name)
}

/// Runs `scripts/kafka` and returns the last line of its stdout. Its stderr goes straight to
/// ours, so the first run's download progress is visible even under the capturing harness.
pub(super) fn scripts_kafka(args: &[&str]) -> Result<String, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kafka");
    // Through bash rather than by path, so a checkout that lost the executable bit still works.
    let output = Command::new("bash")
        .arg(&script)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let command = format!("scripts/kafka {}", args.join(" "));
    if !output.status.success() {
        return Err(format!(
            "`{command}` failed ({}); its output is above",
            output.status
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    match stdout.lines().rev().find(|line| !line.trim().is_empty()) {
        Some(line) => Ok(line.trim().to_owned()),
        // These print nothing on stdout when they succeed.
        None if matches!(args[0], "fetch" | "kill" | "stop" | "create-topic") => Ok(String::new()),
        None => Err(format!("`{command}` printed nothing on stdout")),
    }
}

fn resolve_addrs(bootstrap: &str) -> Vec<SocketAddr> {
    bootstrap
        .split(',')
        .map(str::trim)
        .filter(|server| !server.is_empty())
        .map(|server| {
            server
                .to_socket_addrs()
                .ok()
                .and_then(|mut addrs| addrs.next())
                .unwrap_or_else(|| panic!("cannot resolve bootstrap server `{server}`"))
        })
        .collect()
}
