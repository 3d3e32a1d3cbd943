//! The exactly-once checker: the consume → transform → produce pipeline of
//! examples/exactly_once, three static members in child processes (this test binary re-run
//! for [`member_child`]) SIGKILLed in the middle of transactions and restarted within or beyond
//! the session timeout. A `read_committed` reader of the output finds every input value exactly
//! once; a `read_uncommitted` reader finds the aborted transactions' records too, so the check
//! can fail. And zombie fencing: a member killed mid-transaction and restarted at once with the
//! same instance id (so the same `transactional.id`) aborts the open transaction without a
//! rebalance.

#[path = "../../examples/exactly_once/pipeline.rs"]
mod pipeline;

use crate::support::process::Process;
use crate::support::rng::{seed_from_env, Rng};
use crate::support::{broker, create_topic, unique_name, LOAD_MARGIN};
use kafka_group::{Client, IsolationLevel, ProducerRecord};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The members' `session.timeout.ms`.
const SESSION: Duration = Duration::from_secs(6);
/// How the test passes a member's settings to its child process.
pub const CHILD_ENV: &str = "KAFKA_GROUP_EOS_CHILD";

fn client(bootstrap: &str) -> Client {
    Client::builder()
        .bootstrap_servers(bootstrap)
        .client_id("exactly-once-tests")
        .build()
        .unwrap()
}

/// One member of the pipeline, run by the test binary in a child process.
#[test]
#[ignore = "a child process of the exactly-once tests"]
fn member_child() {
    let spec = std::env::var(CHILD_ENV).unwrap_or_else(|_| panic!("{CHILD_ENV} is unset"));
    let f: Vec<&str> = spec.split(' ').collect();
    let [bootstrap, app, instance, input, output, hold_ms] = f[..] else {
        panic!("{CHILD_ENV}={spec:?}")
    };
    let settings = pipeline::Settings {
        bootstrap: bootstrap.into(),
        app: app.into(),
        instance: instance.into(),
        input: input.into(),
        output: output.into(),
        session_timeout: SESSION,
        hold_open: Duration::from_millis(hold_ms.parse().unwrap()),
    };
    if let Err(e) = pipeline::run(&settings, || false) {
        println!("{instance}: failed: {e}");
        panic!("{e}");
    }
}

struct Ctx {
    bootstrap: String,
    app: String,
    input: String,
    output: String,
}

/// Starts the member `instance`, holding each transaction open `hold` after its records are
/// written. Dropping the process SIGKILLs it.
fn start(ctx: &Ctx, instance: &str, hold: Duration) -> Process {
    let spec = format!(
        "{CHILD_ENV}={} {} {instance} {} {} {}",
        ctx.bootstrap,
        ctx.app,
        ctx.input,
        ctx.output,
        hold.as_millis()
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

#[test]
fn exactly_once_pipeline_of_static_members_killed_mid_transaction_loses_and_duplicates_nothing() {
    let started = Instant::now();
    let long = std::env::var("KAFKA_GROUP_EOS").is_ok_and(|v| v == "long");
    // Input is written in `chunks`, one every 250 ms: long enough for every kill to find
    // transactions to interrupt.
    let (records, kills, chunks) = if long { (30_000, 12, 400) } else { (3_000, 3, 40) };
    let seed = seed_from_env("KAFKA_GROUP_EOS_SEED");
    println!("exactly-once checker: seed {seed} (KAFKA_GROUP_EOS_SEED replays it)");
    let mut rng = Rng::new(seed);
    let b = broker::shared();
    let client = client(b.bootstrap());
    let ctx = Ctx {
        bootstrap: b.bootstrap().to_string(),
        app: unique_name("eos"),
        input: create_topic(&client, "eos-in", 6, 1),
        output: create_topic(&client, "eos-out", 3, 1),
    };
    let inputs: Vec<String> = (0..records).map(|i| format!("r{i:06}")).collect();
    // Input arrives while the members run, so that every kill lands mid-stream.
    let writer = {
        let (bootstrap, topic, inputs) = (ctx.bootstrap.clone(), ctx.input.clone(), inputs.clone());
        std::thread::spawn(move || {
            let c = self::client(&bootstrap);
            for chunk in inputs.chunks(records / chunks) {
                produce(&c, &topic, chunk);
                std::thread::sleep(Duration::from_millis(250));
            }
        })
    };
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
    for k in 0..kills {
        std::thread::sleep(rng.duration(Duration::from_millis(200), Duration::from_millis(1500)));
        let i = rng.below(3) as usize;
        let victim = members[i].take().unwrap();
        let before = *generations(&victim).last().unwrap();
        kill_mid_transaction(victim);
        // The last kill of a compact run is always beyond the session timeout, the others
        // within it.
        let beyond = if long { rng.below(3) == 0 } else { k == kills - 1 };
        if beyond {
            std::thread::sleep(SESSION + Duration::from_secs(2));
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
        if !beyond {
            assert_eq!(
                now, before,
                "a restart within the session timeout rebalanced the group"
            );
        }
        members[i] = Some(again);
    }
    writer.join().unwrap();
    let read = read_output(&client, &ctx.output, IsolationLevel::ReadCommitted, records);
    let failures: Vec<String> = members
        .iter_mut()
        .flatten()
        .filter(|p| count(p, "failed") > 0)
        .map(|p| p.report())
        .collect();
    drop(members);
    let (lost, duplicated) = lost_and_duplicated(&inputs, &read);
    let all = read_output(&client, &ctx.output, IsolationLevel::ReadUncommitted, records);
    let aborted = all.len().saturating_sub(read.len());
    println!(
        "exactly-once checker: {records} records, {kills} kills mid-transaction ({quick} restarted \
         within the session timeout, {slow} beyond), {aborted} aborted records seen by \
         read_uncommitted, lost {lost}, duplicated {duplicated}, {:?}",
        started.elapsed()
    );
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!((lost, duplicated, read.len()), (0, 0, records), "read_committed");
    assert!(
        aborted > 0,
        "every kill hit an open transaction, so read_uncommitted must see aborted records"
    );
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
    assert_eq!(count(&new, "failed"), 0, "{}", new.report());
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
