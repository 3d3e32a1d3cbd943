//! The exactly-once checker: the consume → transform → produce pipeline of
//! examples/exactly_once, three static members in child processes (this test binary re-run
//! for [`member_child`]) SIGKILLed in the middle of transactions and restarted within or beyond
//! the session timeout, while input keeps arriving. A `read_committed` reader of the output
//! finds every input value exactly once; a `read_uncommitted` reader finds the aborted
//! transactions' records too, so the check can fail.
//!
//! One checker ([`check`]), run per [`Fault`] and group protocol:
//! - the members' kills alone, classic and KIP-848 (consumer protocol) members;
//! - the members behind the test proxy, whose connection killer resets each of their
//!   connections 0.5–1.5 s after it opens;
//! - on a 3-node cluster, `kill -9` of the group coordinator's node and of the transaction
//!   coordinator's node of the member about to be killed, each restarted after the member.
//!
//! Every run counts its faults and fails if one kind never happened. Compact by default (for
//! CI); `KAFKA_GROUP_EOS=long` makes each run 12 kills; `KAFKA_GROUP_EOS_SEED` replays the
//! seed a run printed; `KAFKA_GROUP_EOS_PROTOCOL=consumer` runs the faults with KIP-848
//! members instead of classic ones.
//!
//! And zombie fencing: a member killed mid-transaction and restarted at once with the same
//! instance id (so the same `transactional.id`) aborts the open transaction without a
//! rebalance.

#[path = "../../examples/exactly_once/pipeline.rs"]
mod pipeline;

use crate::support::process::Process;
use crate::support::proxy::{self, Proxy};
use crate::support::rng::{seed_from_env, Rng};
use crate::support::{broker, create_topic, unique_name, LOAD_MARGIN};
use kafka_group::{Client, GroupProtocol, IsolationLevel, ProducerRecord};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The members' session timeout: their `session.timeout.ms` under the classic protocol, and
/// the test brokers' `group.consumer.session.timeout.ms` (scripts/kafka) under KIP-848's.
const SESSION: Duration = Duration::from_secs(6);
/// A classic member's `session.timeout.ms` where coordinators are killed: longer than a
/// failover (the dead node fenced after scripts/kafka's 6 s `broker.session.timeout.ms`, then
/// the group loaded elsewhere), which a member whose heartbeats went nowhere for a whole
/// session would otherwise end by rejoining, and the group by rebalancing.
const FAILOVER_SESSION: Duration = Duration::from_secs(15);
/// How the test passes a member's settings to its child process.
pub const CHILD_ENV: &str = "KAFKA_GROUP_EOS_CHILD";
/// Partitions of the input topic: two a member.
const INPUT_PARTITIONS: i32 = 6;
/// Values the input writer adds every 250 ms.
const CHUNK: usize = 75;

fn client(bootstrap: &str) -> Client {
    Client::builder()
        .bootstrap_servers(bootstrap)
        .client_id("exactly-once-tests")
        .build()
        .unwrap()
}

/// `classic` or `consumer`, as [`CHILD_ENV`] carries it.
fn parse_protocol(name: &str) -> GroupProtocol {
    match name {
        "classic" => GroupProtocol::Classic,
        "consumer" => GroupProtocol::Consumer,
        _ => panic!("group protocol {name:?}: expected classic or consumer"),
    }
}

/// One member of the pipeline, run by the test binary in a child process.
#[test]
#[ignore = "a child process of the exactly-once tests"]
fn member_child() {
    crate::support::init_logs();
    let spec = std::env::var(CHILD_ENV).unwrap_or_else(|_| panic!("{CHILD_ENV} is unset"));
    let f: Vec<&str> = spec.split(' ').collect();
    let [bootstrap, app, instance, input, output, hold_ms, protocol, session_ms] = f[..] else {
        panic!("{CHILD_ENV}={spec:?}")
    };
    let settings = pipeline::Settings {
        bootstrap: bootstrap.into(),
        app: app.into(),
        instance: instance.into(),
        input: input.into(),
        output: output.into(),
        group_protocol: parse_protocol(protocol),
        session_timeout: Duration::from_millis(session_ms.parse().unwrap()),
        hold_open: Duration::from_millis(hold_ms.parse().unwrap()),
    };
    if let Err(e) = pipeline::run(&settings, || false) {
        println!("{instance}: failed: {e}");
        panic!("{e}");
    }
}

struct Ctx {
    /// What the members use: the brokers, or a proxy in front of them.
    bootstrap: String,
    app: String,
    input: String,
    output: String,
    protocol: GroupProtocol,
    /// The members' session timeout (see [`SESSION`]).
    session: Duration,
}

/// Starts the member `instance`, holding each transaction open `hold` after its records are
/// written. Dropping the process SIGKILLs it.
fn start(ctx: &Ctx, instance: &str, hold: Duration) -> Process {
    let spec = format!(
        "{CHILD_ENV}={} {} {instance} {} {} {} {} {}",
        ctx.bootstrap,
        ctx.app,
        ctx.input,
        ctx.output,
        hold.as_millis(),
        ctx.protocol,
        ctx.session.as_millis(),
    );
    let exe = std::env::current_exe().unwrap().to_string_lossy().into_owned();
    let args = [
        spec,
        exe,
        "--exact".into(),
        "exactly_once_tests::member_child".into(),
        "--ignored".into(),
        "--nocapture".into(),
        "--test-threads=1".into(),
    ];
    Process::spawn(instance, "env", &args)
}
/// The generations of the `Assigned` events `p` printed, in order.
fn generations(p: &Process) -> Vec<i32> {
    p.stdout()
        .iter()
        .filter_map(|l| {
            let rest = l.split_once("Assigned { generation: ")?.1;
            rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
        })
        .collect()
}

/// Whether member `p` said its pipeline stopped on an error (the exact line, so that a log line
/// mentioning a failure under `RUST_LOG` does not count).
fn failed(p: &Process) -> bool {
    count(p, &format!("{}: failed: ", p.name())) > 0
}

fn count(p: &Process, what: &str) -> usize {
    p.stdout().iter().filter(|l| l.contains(what)).count()
}

/// Waits until `cond` holds on `p`, or panics with its output after `timeout`.
fn wait_on(p: &mut Process, what: &str, timeout: Duration, cond: impl Fn(&Process) -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond(p) {
        if Instant::now() >= deadline || p.exit_status().is_some() {
            panic!("{what}:\n{}", p.report());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// SIGKILLs `p` while it holds a transaction open: right after it next says its batch's
/// records are written (it then sleeps before committing).
fn kill_mid_transaction(mut p: Process) {
    let opened = count(&p, "transaction open");
    wait_on(
        &mut p,
        "no transaction opened",
        Duration::from_secs(30) + LOAD_MARGIN,
        |p| count(p, "transaction open") > opened,
    );
    drop(p);
}

/// Every value of the output a reader with `isolation` finds, once it has `expect` values
/// and a poll brings nothing more (or the bound passed).
fn read_output(client: &Client, topic: &str, isolation: IsolationLevel, expect: usize) -> Vec<String> {
    crate::transaction_tests::read_all(client, topic, isolation, expect)
}

/// Lost and duplicated input values in `read`.
fn lost_and_duplicated(inputs: &[String], read: &[String]) -> (usize, usize) {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for v in read {
        *seen.entry(v.as_str()).or_default() += 1;
    }
    let wanted: Vec<String> = inputs.iter().map(|v| pipeline::transform(v.as_bytes())).collect();
    let lost = wanted.iter().filter(|w| !seen.contains_key(w.as_str())).count();
    let duplicated = seen.values().map(|n| n - 1).sum();
    (lost, duplicated)
}

fn produce(client: &Client, topic: &str, values: &[String]) {
    let mut p = client.producer().build().unwrap();
    for v in values {
        p.send(ProducerRecord::new(topic, v.clone())).unwrap();
    }
    p.flush().unwrap();
}

/// What breaks while the pipeline runs, besides the SIGKILLs of its members that every run has
/// (they leave the aborted transactions the `read_uncommitted` reader must find).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// The members' kills alone.
    MemberKills,
    /// The members reach the broker through the test proxy, whose connection killer resets
    /// every connection of theirs 0.5–1.5 s after it opens (seeded), for the whole run.
    ConnectionKiller,
    /// A 3-node cluster: before each member kill, `kill -9` of a node — the group coordinator's
    /// on even kills, the transaction coordinator's of the member about to be killed on odd
    /// ones — restarted once the member is back.
    CoordinatorKills,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::MemberKills => "member kills",
            Fault::ConnectionKiller => "connection killer",
            Fault::CoordinatorKills => "coordinator kill -9",
        }
    }
}

/// Where a run's pipeline runs: the brokers, and what stands between them and the members.
struct Site {
    /// The brokers themselves, for the writer, the readers and coordinator lookups.
    direct: String,
    /// What the members bootstrap from.
    members: String,
    replication: i16,
    proxy: Option<Proxy>,
    cluster: Option<broker::Cluster>,
}

impl Site {
    fn new(fault: Fault, protocol: GroupProtocol, seed: u64) -> Site {
        let broker = || match protocol {
            GroupProtocol::Classic => broker::shared(),
            GroupProtocol::Consumer => broker::consumer_protocol(),
        };
        match fault {
            Fault::MemberKills => {
                let b = broker().bootstrap().to_string();
                Site {
                    direct: b.clone(),
                    members: b,
                    replication: 1,
                    proxy: None,
                    cluster: None,
                }
            }
            Fault::ConnectionKiller => {
                let b = broker();
                let proxy = Proxy::start(b.addrs()[0], proxy::release_for(b.version()));
                // The broker's own release: the transaction protocol it finalized too.
                proxy.relay_finalized_features(b.addrs()[0]);
                proxy.kill_connections(seed, Duration::from_millis(500)..=Duration::from_millis(1500));
                Site {
                    direct: b.bootstrap().to_string(),
                    members: proxy.bootstrap(),
                    replication: 1,
                    proxy: Some(proxy),
                    cluster: None,
                }
            }
            Fault::CoordinatorKills => {
                let version = match protocol {
                    GroupProtocol::Classic => broker::version_under_test().to_owned(),
                    GroupProtocol::Consumer => broker::consumer_protocol_version(),
                };
                let cluster = broker::Cluster::start(3, &version);
                Site {
                    direct: cluster.bootstrap().to_string(),
                    members: cluster.bootstrap().to_string(),
                    replication: 3,
                    proxy: None,
                    cluster: Some(cluster),
                }
            }
        }
    }
}

/// Writes input values (`r000000`, `r000001` …), [`CHUNK`] every 250 ms, until `stop`, so that
/// every kill lands mid-stream and finds transactions to interrupt; returns every value
/// written. A write that fails panics the thread: an input the test cannot vouch for would
/// make the count meaningless.
fn write_input(bootstrap: String, topic: String, stop: Arc<AtomicBool>) -> JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let c = client(&bootstrap);
        let mut p = c.producer().build().unwrap();
        let mut written: Vec<String> = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            let from = written.len();
            for i in from..from + CHUNK {
                let v = format!("r{i:06}");
                // Spread by hand, so that every member gets input from every chunk (keyless,
                // they would go to one partition for each batch.size bytes).
                let partition = (i % INPUT_PARTITIONS as usize) as i32;
                p.send(ProducerRecord::new(&topic, v.clone()).partition(partition))
                    .unwrap();
                written.push(v);
            }
            p.flush().unwrap();
            std::thread::sleep(Duration::from_millis(250));
        }
        p.close().unwrap();
        written
    })
}

/// The exactly-once checker for one fault kind and group protocol: see the module docs.
fn check(fault: Fault, protocol: GroupProtocol) {
    let started = Instant::now();
    let long = std::env::var("KAFKA_GROUP_EOS").is_ok_and(|v| v == "long");
    let kills = match (long, fault) {
        (true, _) => 12,
        // One of each coordinator: a node restart costs seconds.
        (false, Fault::CoordinatorKills) => 2,
        (false, _) => 3,
    };
    let seed = seed_from_env("KAFKA_GROUP_EOS_SEED");
    let label = format!("{protocol}, {}", fault.name());
    println!("exactly-once [{label}]: seed {seed:#x} (KAFKA_GROUP_EOS_SEED replays it)");
    let mut rng = Rng::new(seed);
    let site = Site::new(fault, protocol, seed);
    let client = client(&site.direct);
    let ctx = Ctx {
        bootstrap: site.members.clone(),
        app: unique_name("eos"),
        input: create_topic(&client, "eos-in", INPUT_PARTITIONS, site.replication),
        output: create_topic(&client, "eos-out", 3, site.replication),
        protocol,
        session: match (fault, protocol) {
            (Fault::CoordinatorKills, GroupProtocol::Classic) => FAILOVER_SESSION,
            _ => SESSION,
        },
    };
    // Input arrives while the members run, so that every kill lands mid-stream.
    let stop_writing = Arc::new(AtomicBool::new(false));
    let writer = write_input(site.direct.clone(), ctx.input.clone(), stop_writing.clone());
    // Each transaction is held open 100 ms after its records are written: the window the
    // kills aim at.
    let hold = Duration::from_millis(100);
    let names = ["m0", "m1", "m2"];
    let mut members: Vec<Option<Process>> = names.iter().map(|n| Some(start(&ctx, n, hold))).collect();
    for m in members.iter_mut().flatten() {
        wait_on(m, "never assigned", Duration::from_secs(60) + LOAD_MARGIN, |p| {
            !generations(p).is_empty()
        });
    }
    let (mut quick, mut slow) = (0, 0);
    let mut node_kills: Vec<String> = Vec::new();
    for k in 0..kills {
        std::thread::sleep(rng.duration(Duration::from_millis(200), Duration::from_millis(1500)));
        let i = rng.below(3) as usize;
        let killed_node = site
            .cluster
            .as_ref()
            .map(|cluster| kill_coordinator(cluster, &client, &ctx, names[i], k, &mut node_kills));
        let victim = members[i].take().unwrap();
        let before = *generations(&victim).last().unwrap();
        kill_mid_transaction(victim);
        // The last kill of a compact run is beyond the session timeout, the others within it;
        // with coordinators killed, all within (its longer session would cost the time).
        let beyond = if long {
            rng.below(3) == 0
        } else {
            k == kills - 1 && fault != Fault::CoordinatorKills
        };
        if beyond {
            std::thread::sleep(ctx.session + Duration::from_secs(2));
            slow += 1;
        } else {
            std::thread::sleep(rng.duration(Duration::ZERO, Duration::from_secs(1)));
            quick += 1;
        }
        let mut again = start(&ctx, names[i], hold);
        wait_on(
            &mut again,
            "never assigned",
            Duration::from_secs(60) + LOAD_MARGIN,
            |p| !generations(p).is_empty(),
        );
        let now = generations(&again)[0];
        println!(
            "kill {k}: {} restarted {}: generation {before} -> {now}",
            names[i],
            if beyond {
                "beyond the session timeout"
            } else {
                "within the session timeout"
            }
        );
        // Under KIP-848 a member that sent no leave heartbeat (killed) holds its instance id
        // until its session expires, so every restart of a killed member gets a new member
        // epoch: only a classic static member comes back into its old generation.
        if !beyond && protocol == GroupProtocol::Classic {
            assert_eq!(
                now, before,
                "a restart within the session timeout rebalanced the group"
            );
        }
        members[i] = Some(again);
        if let (Some(cluster), Some(node)) = (&site.cluster, killed_node) {
            cluster.restart(node);
            println!("node {node} restarted");
        }
    }
    stop_writing.store(true, Ordering::SeqCst);
    let inputs = writer.join().expect("the input writer failed");
    let records = inputs.len();
    let read = read_output(&client, &ctx.output, IsolationLevel::ReadCommitted, records);
    let failures: Vec<String> = members
        .iter_mut()
        .flatten()
        .filter(|p| failed(p))
        .map(|p| p.report())
        .collect();
    drop(members);
    let resets = site.proxy.as_ref().map_or(0, Proxy::resets);
    if let Some(p) = &site.proxy {
        p.stop_killing();
    }
    let (lost, duplicated) = lost_and_duplicated(&inputs, &read);
    let all = read_output(&client, &ctx.output, IsolationLevel::ReadUncommitted, records);
    let aborted = all.len().saturating_sub(read.len());
    println!(
        "exactly-once [{label}, seed {seed:#x}, {:.1?}]: records {records}, member kills {kills} \
         mid-transaction ({quick} restarted within the session timeout, {slow} beyond), resets \
         {resets}, node kills {} {node_kills:?}, aborted {aborted} (seen by read_uncommitted), \
         lost {lost}, duplicated {duplicated}",
        started.elapsed(),
        node_kills.len(),
    );
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!((lost, duplicated, read.len()), (0, 0, records), "read_committed");
    assert!(
        aborted > 0,
        "every kill hit an open transaction, so read_uncommitted must see aborted records"
    );
    match fault {
        Fault::MemberKills => {}
        Fault::ConnectionKiller => assert!(resets > 0, "the connection killer reset nothing"),
        Fault::CoordinatorKills => {
            for what in ["group coordinator", "transaction coordinator"] {
                assert!(
                    node_kills.iter().any(|k| k.contains(what)),
                    "no {what} was killed: {node_kills:?}"
                );
            }
        }
    }
}

/// `kill -9` of the node that coordinates the group (even `k`) or the transactions of the
/// member `instance` (odd `k`), which is about to be killed; noted in `kills`. Returns the
/// node, for its restart.
fn kill_coordinator(
    cluster: &broker::Cluster,
    client: &Client,
    ctx: &Ctx,
    instance: &str,
    k: usize,
    kills: &mut Vec<String>,
) -> usize {
    let (node, what) = if k % 2 == 0 {
        let node = client.find_coordinator(&ctx.app).unwrap().id;
        (node, "group coordinator".to_string())
    } else {
        let id = format!("{}-{instance}", ctx.app);
        let (_, described) = client.admin().describe_transactions(&[&id]).unwrap().remove(0);
        let node = described.unwrap().coordinator;
        (node, format!("transaction coordinator of {instance}"))
    };
    println!("kill {k}: kill -9 of node {node}, the {what}");
    cluster.kill(node as usize);
    kills.push(format!("node {node}: {what}"));
    node as usize
}

#[test]
fn exactly_once_pipeline_of_static_members_killed_mid_transaction_loses_and_duplicates_nothing() {
    check(Fault::MemberKills, GroupProtocol::Classic);
}

#[test]
fn exactly_once_pipeline_of_kip848_static_members_killed_mid_transaction() {
    check(Fault::MemberKills, GroupProtocol::Consumer);
}

/// The members' group protocol in the runs under a fault: classic, or KIP-848's with
/// `KAFKA_GROUP_EOS_PROTOCOL=consumer`.
fn fault_run_protocol() -> GroupProtocol {
    match std::env::var("KAFKA_GROUP_EOS_PROTOCOL") {
        Ok(name) => parse_protocol(name.trim()),
        Err(_) => GroupProtocol::Classic,
    }
}

#[test]
fn exactly_once_pipeline_under_the_connection_killer() {
    check(Fault::ConnectionKiller, fault_run_protocol());
}

#[test]
fn exactly_once_pipeline_with_coordinators_killed_on_a_3_node_cluster() {
    check(Fault::CoordinatorKills, fault_run_protocol());
}

#[test]
fn a_static_member_restarted_mid_transaction_fences_its_zombie_without_a_rebalance() {
    let b = broker::shared();
    let client = client(b.bootstrap());
    let ctx = Ctx {
        bootstrap: b.bootstrap().to_string(),
        app: unique_name("eos-zombie"),
        input: create_topic(&client, "eos-zin", 2, 1),
        output: create_topic(&client, "eos-zout", 1, 1),
        protocol: GroupProtocol::Classic,
        session: SESSION,
    };
    let inputs: Vec<String> = (0..200).map(|i| format!("z{i:03}")).collect();
    produce(&client, &ctx.input, &inputs);
    // The first incarnation never commits: it holds its first transaction open far longer
    // than the test.
    let mut old = start(&ctx, "m0", Duration::from_secs(600));
    wait_on(
        &mut old,
        "no transaction opened",
        Duration::from_secs(60) + LOAD_MARGIN,
        |p| count(p, "transaction open") > 0,
    );
    let generation = generations(&old)[0];
    drop(old); // SIGKILL
    let mut new = start(&ctx, "m0", Duration::ZERO);
    wait_on(
        &mut new,
        "never assigned",
        Duration::from_secs(60) + LOAD_MARGIN,
        |p| !generations(p).is_empty(),
    );
    assert_eq!(
        generations(&new)[0],
        generation,
        "the group rebalanced:\n{}",
        new.report()
    );
    // Until the new incarnation's init_transactions aborted the zombie's transaction, no
    // read_committed reader gets past it (transaction.timeout.ms is 60 s, the bound below 20 s).
    let deadline = Instant::now() + Duration::from_secs(20);
    let read = loop {
        let read = read_output(&client, &ctx.output, IsolationLevel::ReadCommitted, 0);
        if read.len() >= inputs.len() || Instant::now() >= deadline {
            break read;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(!failed(&new), "{}", new.report());
    drop(new);
    assert_eq!(lost_and_duplicated(&inputs, &read), (0, 0));
    assert_eq!(read.len(), inputs.len());
    let all = read_output(
        &client,
        &ctx.output,
        IsolationLevel::ReadUncommitted,
        inputs.len(),
    );
    assert!(
        all.len() > inputs.len(),
        "the zombie's aborted batch is in the log: {} records",
        all.len()
    );
}
