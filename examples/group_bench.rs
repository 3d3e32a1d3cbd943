//! Timed benchmarks of group membership against a real broker (figures, not a test).
//!
//! ```text
//! cargo run --release --example group_bench -- restart [RESTARTS]   # static restart -> assignment back
//! cargo run --release --example group_bench -- dynamic [GROUPS]     # first join of a new dynamic group
//! cargo run --release --example group_bench -- many [MEMBERS]       # N static members in one process
//! ```
//! Uses `KAFKA_BOOTSTRAP` if set, else starts a broker with `scripts/kafka` and stops it after.

#[path = "support/mod.rs"]
mod support;

use kafka_group::Client;
use kafka_group::{GroupEvent, GroupMember};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::BoxError;

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let what = args.first().map(String::as_str).unwrap_or("restart").to_string();
    let n: Option<usize> = args.get(1).and_then(|a| a.parse().ok());
    let kafka = support::LocalKafka::get("group-bench")?;
    let bootstrap = kafka.bootstrap.clone();
    let result = match what.as_str() {
        "restart" => restart(&bootstrap, n.unwrap_or(100)),
        "dynamic" => dynamic(&bootstrap, n.unwrap_or(50)),
        "many" => many(&bootstrap, n.unwrap_or(1000)),
        other => Err(format!("unknown benchmark {other:?} (restart, dynamic, many)").into()),
    };
    result
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{name:<44} n={:<5} p50={:>8.2?} p99={:>8.2?} min={:>8.2?} max={:>8.2?}",
        samples.len(),
        support::percentile(&samples, 0.5),
        support::percentile(&samples, 0.99),
        samples[0],
        samples[samples.len() - 1]
    );
}

fn client(bootstrap: &str) -> Result<Client, BoxError> {
    support::client(bootstrap, "group-bench")
}

fn topic(client: &Client, partitions: i32) -> Result<String, BoxError> {
    support::create_topic(client, "group-bench", partitions)
}

fn static_member(client: &Client, group: &str, topic: &str, id: &str) -> Result<GroupMember, BoxError> {
    Ok(client
        .member(group)
        .group_instance_id(id)
        .subscribe([topic])
        .session_timeout(Duration::from_secs(30))
        .heartbeat_interval(Duration::from_secs(3))
        .max_poll_interval(Duration::from_secs(60))
        .build()?)
}

/// A member polled by its own thread until `stop`.
fn run(mut m: GroupMember, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<GroupMember> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            if let Err(e) = m.poll(Duration::from_millis(100)) {
                eprintln!("member {:?}: {e}", m.group_instance_id());
                break;
            }
        }
        m
    })
}

/// Three static members; one of them restarts `restarts` times within the session timeout.
/// Measures the restart from "new process builds its client" to "it has its assignment", and
/// checks every time that the generation did not change and the partitions came back.
fn restart(bootstrap: &str, restarts: usize) -> Result<(), BoxError> {
    let setup = client(bootstrap)?;
    let topic = topic(&setup, 6)?;
    let group = format!("restart-bench-{}", std::process::id());
    let stop = Arc::new(AtomicBool::new(false));
    let mut others = Vec::new();
    for id in ["a", "c"] {
        let mut m = static_member(&setup, &group, &topic, id)?;
        m.join(Duration::from_secs(60))?;
        others.push(run(m, stop.clone()));
    }
    let mut b = static_member(&setup, &group, &topic, "b")?;
    b.join(Duration::from_secs(60))?;
    // Let the three settle into one generation.
    std::thread::sleep(Duration::from_secs(5));
    b.poll(Duration::from_millis(10))?;
    let generation = b.generation().map(|g| g.id).ok_or("no generation")?;
    let partitions = b.assignment().clone();
    println!("group {group}: generation {generation}, b owns {partitions}");
    let (mut fresh, mut reused) = (Vec::new(), Vec::new());
    for i in 0..restarts {
        b.close()?;
        // Alternate: a restarted process (new Client: bootstrap connection, ApiVersions,
        // FindCoordinator, coordinator connection, JoinGroup, SyncGroup) and a member rebuilt
        // on a live Client (connections to the bootstrap broker already open).
        let t = Instant::now();
        let c = if i % 2 == 0 {
            client(bootstrap)?
        } else {
            setup.clone()
        };
        b = static_member(&c, &group, &topic, "b")?;
        let events = b.join(Duration::from_secs(60))?;
        let took = t.elapsed();
        let same =
            matches!(events.last(), Some(GroupEvent::Assigned { generation: g, .. }) if *g == generation);
        if !same || *b.assignment() != partitions {
            return Err(format!("restart {i}: generation or assignment changed: {events:?}").into());
        }
        if i % 2 == 0 { &mut fresh } else { &mut reused }.push(took);
    }
    report("static restart, new Client (process restart)", fresh);
    report("static restart, live Client", reused);
    stop.store(true, Ordering::Relaxed);
    for h in others {
        let _ = h.join().map(|m| m.close());
    }
    b.close()?;
    Ok(())
}

/// First join of a brand-new group by one dynamic member (KIP-394 round trip included).
fn dynamic(bootstrap: &str, groups: usize) -> Result<(), BoxError> {
    let c = client(bootstrap)?;
    let topic = topic(&c, 6)?;
    let mut samples = Vec::new();
    for i in 0..groups {
        let t = Instant::now();
        let mut m = c
            .member(&format!("dyn-bench-{}-{i}", std::process::id()))
            .subscribe([topic.as_str()])
            .build()?;
        m.join(Duration::from_secs(60))?;
        samples.push(t.elapsed());
        m.close()?;
    }
    report("first dynamic join of a new group", samples);
    Ok(())
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).map(String::from))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// `n` static members of one group in this process, each joined from a thread of its own.
fn many(bootstrap: &str, n: usize) -> Result<(), BoxError> {
    let c = client(bootstrap)?;
    let topic = topic(&c, 64)?;
    let group = format!("many-bench-{}", std::process::id());
    let (rss0, threads0) = (rss_kib(), threads());
    // Each member publishes the generation it is stable in (-1 while joining); the group is
    // stable when all publish the same one.
    let gens: Arc<Vec<AtomicI32>> = Arc::new((0..n).map(|_| AtomicI32::new(-1)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let t = Instant::now();
    let mut handles = Vec::new();
    for i in 0..n {
        let (c, topic, group) = (c.clone(), topic.clone(), group.clone());
        let (gens, stop) = (gens.clone(), stop.clone());
        handles.push(std::thread::Builder::new().stack_size(256 * 1024).spawn(
            move || -> Result<(), String> {
                let mut m = static_member(&c, &group, &topic, &format!("m{i}")).map_err(|e| e.to_string())?;
                m.join(Duration::from_secs(300)).map_err(|e| e.to_string())?;
                while !stop.load(Ordering::Relaxed) {
                    let g = if m.rejoin_pending() {
                        -1
                    } else {
                        m.generation().map_or(-1, |g| g.id)
                    };
                    gens[i].store(g, Ordering::SeqCst);
                    m.poll(Duration::from_millis(100)).map_err(|e| e.to_string())?;
                }
                drop(m);
                Ok(())
            },
        )?);
    }
    let all_stable = || {
        let first = gens[0].load(Ordering::SeqCst);
        first >= 0 && gens.iter().all(|g| g.load(Ordering::SeqCst) == first)
    };
    let deadline = Instant::now() + Duration::from_secs(600);
    while !all_stable() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let to_stable = t.elapsed();
    let (rss1, threads1) = (rss_kib(), threads());
    if !all_stable() {
        println!("not all members stable after {to_stable:.2?}");
    }
    println!(
        "{n} static members: all stable after {to_stable:.2?}; threads +{} ({} per member); RSS +{} KiB ({} KiB per member)",
        threads1 - threads0,
        (threads1 - threads0) as f64 / n as f64,
        rss1.saturating_sub(rss0),
        rss1.saturating_sub(rss0) / n as u64
    );
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        if let Ok(Err(e)) = h.join() {
            eprintln!("member failed: {e}");
        }
    }
    Ok(())
}
