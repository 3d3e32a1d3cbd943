//! Timed benchmarks of group membership against a real broker (figures, not a test).
//!
//! ```text
//! cargo run --release --example group_bench -- restart [RESTARTS]   # static restart -> assignment back, classic and consumer protocol
//! cargo run --release --example group_bench -- restart-peers [ROUNDS] [RESTARTS]  # ours and Java 4.4's, interleaved
//! cargo run --release --example group_bench -- dynamic [GROUPS]     # first join of a new dynamic group
//! cargo run --release --example group_bench -- many [MEMBERS]       # N static members in one process
//! cargo run --release --example group_bench -- absorb [ROUNDS] [WORK_MS] [SLOW_MS]  # a 4th member joins: range vs cooperative-sticky
//! ```
//! Uses `KAFKA_BOOTSTRAP` if set, else starts a broker with `scripts/kafka` and stops it after.

#[path = "../examples/support/mod.rs"]
mod support;

use kafka_group::{Assignor, Client, CooperativeStickyAssignor, OffsetReset, ProducerRecord, RangeAssignor};
use kafka_group::{GroupEvent, GroupMember, GroupProtocol, TopicPartition};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
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
        "restart-peers" => restart_peers(
            &bootstrap,
            n.unwrap_or(3),
            args.get(2).and_then(|a| a.parse().ok()).unwrap_or(40),
        ),
        "dynamic" => dynamic(&bootstrap, n.unwrap_or(50)),
        "many" => many(&bootstrap, n.unwrap_or(1000)),
        "threads" => thread_counts(&bootstrap, n.unwrap_or(100)),
        "absorb" => absorb(
            &bootstrap,
            n.unwrap_or(3),
            Duration::from_millis(args.get(2).and_then(|a| a.parse().ok()).unwrap_or(200)),
            args.get(3)
                .and_then(|a| a.parse().ok())
                .map(Duration::from_millis),
        ),
        other => Err(format!(
            "unknown benchmark {other:?} (restart, restart-peers, dynamic, many, threads, absorb)"
        )
        .into()),
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

/// Three static members; one of them restarts `restarts` times within the session timeout,
/// on each group protocol in turn (a classic group and a consumer-protocol group side by side,
/// interleaved, so that both see the same machine). Measures the restart from "new process
/// builds its client" to "it has its assignment", and checks every time that the partitions
/// came back (and, on classic, that the generation did not change).
fn restart(bootstrap: &str, restarts: usize) -> Result<(), BoxError> {
    let setup = client(bootstrap)?;
    let topic = topic(&setup, 6)?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut others = Vec::new();
    let mut groups = Vec::new();
    for protocol in [GroupProtocol::Classic, GroupProtocol::Consumer] {
        let group = format!("restart-bench-{protocol}-{}", std::process::id());
        for id in ["a", "c"] {
            let mut m = member_on(protocol, &setup, &group, &topic, id)?;
            m.join(Duration::from_secs(60))?;
            others.push(run(m, stop.clone()));
        }
        let mut b = member_on(protocol, &setup, &group, &topic, "b")?;
        b.join(Duration::from_secs(60))?;
        groups.push((protocol, group, Some(b)));
    }
    // Let each group settle (the consumer protocol hands partitions over incrementally).
    std::thread::sleep(Duration::from_secs(5));
    let mut expected = Vec::new();
    for (protocol, group, b) in &mut groups {
        let b = b.as_mut().ok_or("no member")?;
        b.poll(Duration::from_millis(10))?;
        let generation = b.generation().map(|g| g.id).ok_or("no generation")?;
        println!(
            "group {group} ({protocol}): generation {generation}, b owns {}",
            b.assignment()
        );
        expected.push((generation, b.assignment().clone()));
    }
    let mut samples: Vec<(Vec<Duration>, Vec<Duration>)> = vec![Default::default(); groups.len()];
    for i in 0..restarts {
        for (k, (protocol, group, b)) in groups.iter_mut().enumerate() {
            b.take().ok_or("no member")?.close()?;
            // Alternate: a restarted process (new Client: bootstrap connection, ApiVersions,
            // FindCoordinator, coordinator connection, the join) and a member rebuilt on a
            // live Client (connections to the bootstrap broker already open).
            let t = Instant::now();
            let c = if i % 2 == 0 {
                client(bootstrap)?
            } else {
                setup.clone()
            };
            let b = b.insert(member_on(*protocol, &c, group, &topic, "b")?);
            let events = b.join(Duration::from_secs(60))?;
            let took = t.elapsed();
            let (generation, partitions) = &expected[k];
            let same_generation = *protocol == GroupProtocol::Consumer
                || matches!(events.last(), Some(GroupEvent::Assigned { generation: g, .. }) if g == generation);
            if !same_generation || b.assignment() != partitions {
                return Err(
                    format!("{protocol} restart {i}: generation or assignment changed: {events:?}").into(),
                );
            }
            let (fresh, reused) = &mut samples[k];
            if i % 2 == 0 { fresh } else { reused }.push(took);
        }
    }
    for ((protocol, _, _), (fresh, reused)) in groups.iter().zip(samples) {
        report(&format!("{protocol}: static restart, new Client"), fresh);
        report(&format!("{protocol}: static restart, live Client"), reused);
    }
    stop.store(true, Ordering::Relaxed);
    for h in others {
        let _ = h.join().map(|m| m.close());
    }
    for (_, _, b) in groups {
        if let Some(b) = b {
            b.close()?;
        }
    }
    Ok(())
}

/// Rounds of [`restart`] and of the same with Kafka's Java consumer (`JavaRestartBench.java`,
/// kafka-clients of `JAVA_KAFKA_VERSION`, default 4.4.0, from scripts/kafka's cache), one after
/// the other, so that each round compares the two on the same machine load.
fn restart_peers(bootstrap: &str, rounds: usize, restarts: usize) -> Result<(), BoxError> {
    let version = std::env::var("JAVA_KAFKA_VERSION").unwrap_or_else(|_| "4.4.0".into());
    let home = std::env::var("HOME")?;
    let cache = std::env::var("KAFKA_CACHE").unwrap_or_else(|_| format!("{home}/.cache/kafka-group/kafka"));
    let libs = format!("{cache}/{version}/libs/*");
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/JavaRestartBench.java");
    let setup = client(bootstrap)?;
    let topic = topic(&setup, 6)?;
    for round in 1..=rounds {
        println!("round {round}: kafka-group");
        restart(bootstrap, restarts)?;
        println!("round {round}: Java {version}");
        let out = std::process::Command::new("java")
            .args([
                "-Xmx512m",
                "-cp",
                &libs,
                source,
                bootstrap,
                &topic,
                &restarts.to_string(),
                "classic",
                "consumer",
            ])
            .output()?;
        print!("{}", String::from_utf8_lossy(&out.stdout));
        if !out.status.success() {
            return Err(format!("java: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
    }
    Ok(())
}

/// A static member on `protocol` (the consumer protocol's session and heartbeat are the
/// broker's).
fn member_on(
    protocol: GroupProtocol,
    client: &Client,
    group: &str,
    topic: &str,
    id: &str,
) -> Result<GroupMember, BoxError> {
    match protocol {
        GroupProtocol::Classic => static_member(client, group, topic, id),
        GroupProtocol::Consumer => Ok(client
            .member(group)
            .group_instance_id(id)
            .subscribe([topic])
            .group_protocol(GroupProtocol::Consumer)
            .max_poll_interval(Duration::from_secs(60))
            .build()?),
    }
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

/// Open sockets of this process: its file descriptors that are sockets.
fn sockets() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| {
        d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|l| l.to_string_lossy().starts_with("socket:"))
            .count()
    })
}

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// The threads the library starts, counted as the process's threads beyond those before it
/// (this program's own work all runs on its main thread): for a consumer that has fetched
/// from the topic's one leader, a producer that has written to it, and `n` static members of
/// one group, all polled from this one thread, on each group protocol.
fn thread_counts(bootstrap: &str, n: usize) -> Result<(), BoxError> {
    let c = client(bootstrap)?;
    let topic = topic(&c, 6)?;
    let before = threads();
    {
        let mut producer = c.producer().build()?;
        for p in 0..6 {
            producer.send(ProducerRecord::new(&topic, b"v".to_vec()).partition(p))?;
        }
        producer.flush()?;
        println!(
            "a producer (one leader written to): {} threads",
            threads() - before
        );
        producer.close()?;
    }
    settle(before);
    for protocol in [GroupProtocol::Classic, GroupProtocol::Consumer] {
        {
            let mut consumer = c
                .consumer(&format!("threads-consumer-{protocol}-{}", std::process::id()))
                .group_protocol(protocol)
                .subscribe([topic.as_str()])
                .auto_offset_reset(OffsetReset::Earliest)
                .build()?;
            let mut got = 0;
            let deadline = Instant::now() + Duration::from_secs(60);
            while got < 6 && Instant::now() < deadline {
                got += consumer.poll(Duration::from_millis(100))?.records.len();
            }
            println!(
                "a consumer, {protocol} protocol ({got} records from one leader): {} threads",
                threads() - before
            );
            consumer.close()?;
        }
        settle(before);
        {
            let group = format!("threads-members-{protocol}-{}", std::process::id());
            let mut members = (0..n)
                .map(|i| member_on(protocol, &c, &group, &topic, &format!("m{i}")))
                .collect::<Result<Vec<_>, _>>()?;
            let built = threads() - before;
            let deadline = Instant::now() + Duration::from_secs(300);
            loop {
                for m in &mut members {
                    m.poll(Duration::from_millis(1))?;
                }
                let stable = members.iter().all(|m| !m.rejoin_pending());
                if stable || Instant::now() > deadline {
                    println!(
                        "{n} static members of one group, {protocol} protocol, polled from one thread: \
                         {built} threads built, {} once {}",
                        threads() - before,
                        if stable {
                            "all stable"
                        } else {
                            "the deadline passed (not all stable)"
                        }
                    );
                    break;
                }
            }
        }
        settle(before);
    }
    Ok(())
}

/// Waits (up to 10 s) for the threads of what was just closed to end.
fn settle(before: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while threads() > before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `n` static members of one group in this process, each joined from a thread of its own.
fn many(bootstrap: &str, n: usize) -> Result<(), BoxError> {
    let c = client(bootstrap)?;
    let topic = topic(&c, 64)?;
    let group = format!("many-bench-{}", std::process::id());
    let (rss0, threads0, sockets0) = (rss_kib(), threads(), sockets());
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
    let (rss1, threads1, sockets1) = (rss_kib(), threads(), sockets());
    if !all_stable() {
        println!("not all members stable after {to_stable:.2?}");
    }
    println!(
        "{n} static members: all stable after {to_stable:.2?}; threads +{} ({} per member); sockets +{} ({} per member); RSS +{} KiB ({} KiB per member)",
        threads1 - threads0,
        (threads1 - threads0) as f64 / n as f64,
        sockets1.saturating_sub(sockets0),
        sockets1.saturating_sub(sockets0) as f64 / n as f64,
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

/// What one consumer of [`absorb`] saw: its partitions, and when each record arrived.
#[derive(Default)]
struct Seen {
    owned: BTreeSet<TopicPartition>,
    arrivals: Vec<(Instant, TopicPartition)>,
    /// Per record: its create time and when poll returned it (ms since the epoch).
    delays: Vec<(i64, i64)>,
}

/// One round of [`absorb`] for one assignor.
struct AbsorbRound {
    absorbed: Duration,
    /// Records consumed by the three during it, against their steady rate.
    rate: f64,
    /// Longest stall of a kept partition.
    stall: Duration,
    /// How long the records produced during it waited (median, 99th percentile, longest).
    p50: Duration,
    p99: Duration,
    max: Duration,
}

fn epoch_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Three consumers share a 12-partition topic that a producer writes to steadily (a record to
/// every partition every 10 ms), each spending `work` on what every poll returns (the
/// application's processing, which an eager rebalance waits for: a member rejoins only from
/// its next poll); a fourth joins. Per round and assignor (interleaved: range, then
/// cooperative-sticky): how long until every partition is owned by exactly one of the four;
/// how many records the three consumed in that time (against their steady rate); and the
/// longest stall of a partition that did not move (no record from it between two arrivals);
/// and how long the records produced while the group absorbed the fourth member waited to be
/// consumed (create time to poll), by any of the four. With `slow`, the third member spends
/// that much on each poll instead (a batch step, say): an eager rebalance waits for it, and
/// the stall is measured on the two others' partitions.
fn absorb(bootstrap: &str, rounds: usize, work: Duration, slow: Option<Duration>) -> Result<(), BoxError> {
    match slow {
        Some(s) => println!("absorb: {rounds} rounds, {work:?} of work per poll, {s:?} for member c"),
        None => println!("absorb: {rounds} rounds, {work:?} of work per poll"),
    }
    const PARTITIONS: i32 = 12;
    let c = client(bootstrap)?;
    let mut rows: BTreeMap<&str, Vec<AbsorbRound>> = BTreeMap::new();
    for round in 0..rounds {
        for (name, assignor) in [
            ("range (eager)", Arc::new(RangeAssignor) as Arc<dyn Assignor>),
            ("cooperative-sticky", Arc::new(CooperativeStickyAssignor)),
        ] {
            let topic = topic(&c, PARTITIONS)?;
            let group = support::unique_name("absorb-bench");
            let stop = Arc::new(AtomicBool::new(false));
            let producer = {
                let (c, topic, stop) = (c.clone(), topic.clone(), stop.clone());
                std::thread::spawn(move || -> Result<(), String> {
                    let mut p = c.producer().build().map_err(|e| e.to_string())?;
                    while !stop.load(Ordering::Relaxed) {
                        for part in 0..PARTITIONS {
                            p.send(ProducerRecord::new(topic.as_str(), "x").partition(part))
                                .map_err(|e| e.to_string())?;
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    p.close().map_err(|e| e.to_string())
                })
            };
            let start = |id: &str| -> Result<(Arc<Mutex<Seen>>, std::thread::JoinHandle<()>), BoxError> {
                let mut consumer = c
                    .consumer(&group)
                    .group_instance_id(id)
                    .subscribe([topic.as_str()])
                    .assignors(vec![assignor.clone()])
                    .session_timeout(Duration::from_secs(10))
                    .heartbeat_interval(Duration::from_millis(500))
                    .auto_offset_reset(OffsetReset::Latest)
                    .fetch_max_wait(Duration::from_millis(50))
                    .build()?;
                let seen = Arc::new(Mutex::new(Seen::default()));
                let (seen2, stop) = (seen.clone(), stop.clone());
                let work = match slow {
                    Some(s) if id == "c" => s,
                    _ => work,
                };
                let h = std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let polled = match consumer.poll(Duration::from_millis(100)) {
                            Ok(p) => p,
                            Err(e) => return eprintln!("consumer: {e}"),
                        };
                        let (now, wall) = (Instant::now(), epoch_ms());
                        {
                            let mut s = seen2.lock().unwrap();
                            s.owned = consumer.assignment().into_iter().collect();
                            s.arrivals
                                .extend(polled.records.iter().map(|r| (now, r.topic_partition())));
                            s.delays
                                .extend(polled.records.iter().map(|r| (r.timestamp, wall)));
                        }
                        if !polled.records.is_empty() {
                            std::thread::sleep(work);
                        }
                    }
                    let _ = consumer.close();
                });
                Ok((seen, h))
            };
            let mut members = Vec::new();
            for id in ["a", "b", "c"] {
                members.push(start(id)?);
            }
            let owned = |members: &[(Arc<Mutex<Seen>>, std::thread::JoinHandle<()>)]| -> Vec<BTreeSet<TopicPartition>> {
                members.iter().map(|(s, _)| s.lock().unwrap().owned.clone()).collect()
            };
            let converged = |o: &[BTreeSet<TopicPartition>], n: usize| {
                let all: Vec<&TopicPartition> = o.iter().flatten().collect();
                let distinct: BTreeSet<&TopicPartition> = all.iter().copied().collect();
                o.len() == n
                    && o.iter().all(|x| !x.is_empty())
                    && all.len() == PARTITIONS as usize
                    && distinct.len() == all.len()
            };
            let wait = |members: &[(Arc<Mutex<Seen>>, std::thread::JoinHandle<()>)],
                        n: usize|
             -> Result<Vec<BTreeSet<TopicPartition>>, BoxError> {
                let deadline = Instant::now() + Duration::from_secs(60);
                loop {
                    let o = owned(members);
                    if converged(&o, n) {
                        return Ok(o);
                    }
                    if Instant::now() > deadline {
                        return Err(format!("{name}: no convergence: {o:?}").into());
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            };
            let before = wait(&members, 3)?;
            // Settle, so that the rate before is steady.
            std::thread::sleep(Duration::from_secs(2));
            let (t0, wall0) = (Instant::now(), epoch_ms());
            members.push(start("d")?);
            let after = wait(&members, 4)?;
            let absorbed = t0.elapsed();
            let (t1, wall1) = (Instant::now(), epoch_ms());
            // Long enough for the records produced until t1 to be consumed, the slow member's
            // included.
            std::thread::sleep(Duration::from_millis(500) + slow.unwrap_or(work) * 2);
            let mut waited: Vec<Duration> = members
                .iter()
                .flat_map(|(s, _)| {
                    let s = s.lock().unwrap();
                    s.delays
                        .iter()
                        .filter(|(created, _)| (wall0..=wall1).contains(created))
                        .map(|(created, polled)| Duration::from_millis((polled - created).max(0) as u64))
                        .collect::<Vec<_>>()
                })
                .collect();
            waited.sort_unstable();
            let quantile = |p| match waited.is_empty() {
                true => Duration::ZERO,
                false => support::percentile(&waited, p),
            };
            let (p50, p99, max) = (quantile(0.5), quantile(0.99), quantile(1.0));
            let (mut in_window, mut steady) = (0usize, 0usize);
            let mut stall = Duration::ZERO;
            for (i, (seen, _)) in members.iter().enumerate().take(3) {
                let s = seen.lock().unwrap();
                in_window += s.arrivals.iter().filter(|(t, _)| *t >= t0 && *t <= t1).count();
                steady += s
                    .arrivals
                    .iter()
                    .filter(|(t, _)| *t < t0 && *t >= t0 - Duration::from_secs(1))
                    .count();
                // Longest gap between arrivals of a partition it kept, across the rebalance; the
                // slow member's own gaps are its work, not the rebalance's doing.
                if slow.is_some() && i == 2 {
                    continue;
                }
                for tp in before[i].intersection(&after[i]) {
                    // From its last record before the fourth member started to its first
                    // after the group converged, every gap between two arrivals.
                    let last_before = s
                        .arrivals
                        .iter()
                        .rev()
                        .find(|(t, p)| p == tp && *t < t0)
                        .map(|(t, _)| *t);
                    let mut times: Vec<Instant> = last_before.into_iter().collect();
                    times.extend(
                        s.arrivals
                            .iter()
                            .filter(|(t, p)| p == tp && *t >= t0)
                            .map(|(t, _)| *t),
                    );
                    for w in times.windows(2) {
                        stall = stall.max(w[1].duration_since(w[0]));
                    }
                    if times.last().map_or(true, |t| *t < t1) {
                        // Nothing arrived after the rebalance: stalled at least until t1.
                        stall = stall.max(t1.duration_since(times.last().copied().unwrap_or(t0)));
                    }
                }
            }
            let rate = in_window as f64 / absorbed.as_secs_f64().max(1e-3);
            println!(
                "round {round} {name:<20} absorbed in {absorbed:>9.2?}; kept partitions' longest stall {stall:>9.2?}; \
                 consumed {rate:>7.0} rec/s during it by the three (steady {steady} rec/s); \
                 records produced during it waited p50 {p50:.2?}, p99 {p99:.2?}, max {max:.2?} ({} records)",
                waited.len()
            );
            rows.entry(name).or_default().push(AbsorbRound {
                absorbed,
                rate: rate / steady.max(1) as f64,
                stall,
                p50,
                p99,
                max,
            });
            stop.store(true, Ordering::Relaxed);
            for (_, h) in members {
                let _ = h.join();
            }
            producer.join().map_err(|_| "producer panicked")??;
        }
    }
    for (name, r) in rows {
        let median = |f: fn(&AbsorbRound) -> Duration| {
            let mut v: Vec<Duration> = r.iter().map(f).collect();
            v.sort_unstable();
            v[v.len() / 2]
        };
        let mut rate: Vec<f64> = r.iter().map(|x| x.rate).collect();
        rate.sort_by(f64::total_cmp);
        println!(
            "{name:<20} median of {}: absorbed {:.2?}, rate during it {:.0} % of steady, longest stall of a kept partition {:.2?}, \
             records produced during it waited p50 {:.2?}, p99 {:.2?}, max {:.2?}",
            r.len(),
            median(|x| x.absorbed),
            rate[rate.len() / 2] * 100.0,
            median(|x| x.stall),
            median(|x| x.p50),
            median(|x| x.p99),
            median(|x| x.max),
        );
    }
    Ok(())
}
