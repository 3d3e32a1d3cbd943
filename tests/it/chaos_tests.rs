//! The chaos suite: static members that produce, consume and commit while the path
//! to the brokers misbehaves, each scenario judged by the shared [`Checker`] (nothing lost,
//! nothing consumed twice outside a failed commit's window, offsets in order, committed offsets
//! never going down) and its figures printed even when it passes.
//!
//! - the connection killer of the test proxy resets every connection after 0.5–1.5 s (seeded:
//!   `KAFKA_GROUP_CHAOS_SEED` replays a schedule, the seed in use is printed), while a fourth
//!   member keeps joining and expiring, so that the group also rebalances under it;
//! - a rolling restart of every static member, leader included, right after partitions were
//!   added to the subscribed topic;
//! - `kill -9` of the group coordinator's broker and of a partition leader's on a 3-node cluster,
//!   under the connection killer;
//! - a blackhole between one member and the brokers shorter than the session timeout (no
//!   rebalance) and longer (the member is evicted and rejoins cleanly);
//! - `close()` under a blackhole returns within a request timeout.
//!
//! Compact by default, for CI; `KAFKA_GROUP_CHAOS=long` (two minutes of chaos per scenario) or
//! a duration (`300s`, `5m`, `90` for seconds) makes the chaos phases that long.
//! `KAFKA_GROUP_CHAOS_VERBOSE=1` prints every injected reset.
//!
//! Everything goes through the public API, as an application would use it; any error `poll`
//! returns is a failure (the library retries what is retriable), counted and reported.

use crate::group_tests::client;
use crate::support::checker::{self, Checker, MemberLog, Sampler};
use crate::support::proxy::{self, Proxy};
use crate::support::rng::seed_from_env;
use crate::support::{broker, create_topic, unique_name};
use kafka_group::{Assignment, Assignor, MemberSubscription, RangeAssignor, TopicPartition};
use kafka_group::{Client, Consumer, Error, OffsetReset, OffsetSpec, ProducerRecord};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const SESSION: Duration = Duration::from_secs(8);
const HEARTBEAT: Duration = Duration::from_secs(1);
/// Short, so that a request lost in a blackhole or to a dead broker costs seconds.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a connection lives under the killer, as in franz-go's chaos dialer.
const LIFETIME_MIN: Duration = Duration::from_millis(500);
const LIFETIME_MAX: Duration = Duration::from_millis(1500);
/// Time for the consumers to catch up once producing stopped.
const DRAIN: Duration = Duration::from_secs(60);

/// How long a chaos phase lasts: `compact` unless `KAFKA_GROUP_CHAOS` asks for longer.
fn chaos_phase(compact: Duration) -> Duration {
    let Ok(v) = std::env::var("KAFKA_GROUP_CHAOS") else {
        return compact;
    };
    let v = v.trim();
    let parsed = match v {
        "" | "compact" => return compact,
        "long" => Some(Duration::from_secs(120)),
        _ => {
            let (number, unit) = v.split_at(v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len()));
            number.parse::<u64>().ok().and_then(|n| match unit {
                "" | "s" => Some(Duration::from_secs(n)),
                "ms" => Some(Duration::from_millis(n)),
                "m" => Some(Duration::from_secs(60 * n)),
                _ => None,
            })
        }
    };
    let phase = parsed.unwrap_or_else(|| {
        panic!("KAFKA_GROUP_CHAOS={v:?}: expected `compact`, `long` or a duration such as 300s or 5m")
    });
    phase.max(compact)
}

/// Records which member ran the assignor: the group's leader.
#[derive(Debug)]
struct LeaderProbe {
    instance: String,
    leader: Arc<Mutex<Option<String>>>,
}

impl Assignor for LeaderProbe {
    fn name(&self) -> &'static str {
        "range"
    }

    fn assign(
        &self,
        members: &[MemberSubscription],
        partitions: &BTreeMap<String, i32>,
    ) -> BTreeMap<String, Assignment> {
        *self.leader.lock().unwrap() = Some(self.instance.clone());
        RangeAssignor.assign(members, partitions)
    }
}

/// One scenario's group, topic and bookkeeping.
struct Scenario {
    name: &'static str,
    checker: Checker,
    group: String,
    topic: String,
    leader: Arc<Mutex<Option<String>>>,
    seed: u64,
    started: Instant,
}

impl Scenario {
    fn new(name: &'static str, topic: String) -> Scenario {
        let seed = seed_from_env("KAFKA_GROUP_CHAOS_SEED");
        eprintln!("chaos [{name}]: seed {seed:#x} (KAFKA_GROUP_CHAOS_SEED replays it)");
        Scenario {
            name,
            checker: Checker::new(),
            group: unique_name(&format!("chaos-{name}")),
            topic,
            leader: Arc::new(Mutex::new(None)),
            seed,
            started: Instant::now(),
        }
    }

    fn say(&self, what: &str) {
        eprintln!("{:>7.1?} [{}] {what}", self.started.elapsed(), self.name);
    }

    fn leader(&self) -> Option<String> {
        self.leader.lock().unwrap().clone()
    }

    /// A static member `instance` polling in its own thread through `bootstrap`.
    fn member(&self, bootstrap: &str, instance: &str) -> Member {
        self.member_with(bootstrap, instance, true)
    }

    fn member_with(&self, bootstrap: &str, instance: &str, static_member: bool) -> Member {
        let client = proxied_client(bootstrap);
        let probe = LeaderProbe {
            instance: instance.to_string(),
            leader: self.leader.clone(),
        };
        let mut b = client
            .consumer(&self.group)
            .subscribe([self.topic.as_str()])
            .session_timeout(SESSION)
            .heartbeat_interval(HEARTBEAT)
            .max_poll_interval(Duration::from_secs(30))
            .auto_offset_reset(OffsetReset::Earliest)
            .enable_auto_commit(false)
            .fetch_max_wait(Duration::from_millis(100))
            .max_poll_records(200)
            // What `close_under_blackhole_is_bounded` holds a close to.
            .close_timeout(REQUEST_TIMEOUT)
            .assignors(vec![Arc::new(probe)])
            // The leader re-checks the topic's partition count this often.
            .metadata_max_age(Duration::from_secs(5));
        if static_member {
            b = b.group_instance_id(instance);
        }
        let consumer = b.build().unwrap_or_else(|e| panic!("{instance}: build: {e}"));
        let log = self.checker.member(instance);
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (stop2, seen2) = (stop.clone(), seen.clone());
        let handle = std::thread::Builder::new()
            .name(format!("chaos-{instance}"))
            .spawn(move || run(consumer, log, &stop2, &seen2))
            .unwrap();
        Member {
            instance: instance.to_string(),
            stop,
            seen,
            handle: Some(handle),
        }
    }

    /// Produces through `bootstrap` until stopped: chunks of 50 records spread over the topic's
    /// `partitions` (read anew before each chunk; a change builds a new producer, which learns
    /// the new partitions), each chunk flushed; ids acknowledged only by a flush that succeeded.
    fn producer(&self, bootstrap: &str, partitions: Arc<AtomicI32>) -> Producing {
        let client = proxied_client(bootstrap);
        let (checker, topic) = (self.checker.clone(), self.topic.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let handle = std::thread::Builder::new()
            .name("chaos-producer".into())
            .spawn(move || {
                let mut next: u64 = 0;
                let mut producer = None;
                let mut built_for = 0;
                while !stop2.load(Ordering::SeqCst) {
                    let count = partitions.load(Ordering::SeqCst);
                    if producer.is_none() || built_for != count {
                        match client.producer().build() {
                            Ok(p) => producer = Some(p),
                            Err(e) => {
                                checker.error(format!("producer: build: {e}"));
                                return;
                            }
                        }
                        built_for = count;
                    }
                    let p = producer.as_mut().unwrap();
                    let ids: Vec<u64> = (next..next + 50).collect();
                    next += 50;
                    checker.produced(ids.iter().copied());
                    let sent = ids.iter().try_for_each(|id| {
                        p.send(
                            ProducerRecord::new(&topic, Checker::value(*id))
                                .partition((*id % count as u64) as i32),
                        )
                        .map(drop)
                    });
                    match sent.and_then(|()| p.flush()) {
                        Ok(_) => checker.acked(ids),
                        Err(e) => {
                            checker.produce_failed(ids.len());
                            checker.error(format!("producer: {e}"));
                            producer = None;
                        }
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                if let Some(p) = producer {
                    if let Err(e) = p.close() {
                        checker.error(format!("producer: close: {e}"));
                    }
                }
            })
            .unwrap();
        Producing {
            stop,
            handle: Some(handle),
        }
    }

    /// Waits until every acknowledged record was consumed and `direct` (a client that reaches
    /// the brokers without a proxy) reads committed offsets at the log end of every partition.
    /// Returns what did not happen in time.
    fn drain(&self, direct: &Client, partitions: i32) -> Vec<String> {
        let mut failures = Vec::new();
        if !wait_until(DRAIN, || self.checker.consumed_all()) {
            failures.push(format!(
                "only {} of {} acknowledged records consumed {DRAIN:?} after producing stopped",
                self.checker.consumed(),
                self.checker.acked_count()
            ));
            return failures;
        }
        let admin = direct.admin();
        let tps: Vec<TopicPartition> = (0..partitions)
            .map(|p| TopicPartition::new(self.topic.clone(), p))
            .collect();
        let mut last = (BTreeMap::new(), BTreeMap::new());
        let committed = wait_until(Duration::from_secs(30), || {
            let (Ok(end), Ok(committed)) = (
                admin.list_offsets(&tps, OffsetSpec::Latest),
                admin.group_offsets(&self.group),
            ) else {
                return false;
            };
            let done = end.iter().all(|(tp, e)| *e == 0 || committed.get(tp) == Some(e));
            last = (end, committed);
            done
        });
        if !committed {
            failures.push(format!(
                "committed offsets {:?} short of the log end {:?}",
                last.1, last.0
            ));
        }
        failures
    }

    /// Prints the figures and fails the test on any count that must be zero, on any
    /// scenario-specific `failures`, or when chaos was asked for and no reset happened.
    fn finish(&self, proxies: &[&Proxy], chaos: bool, failures: Vec<String>) {
        if let Err(e) = self.verdict(proxies, chaos, failures) {
            panic!("{e}");
        }
    }

    /// [`Scenario::finish`] without the panic: the failure message, if any.
    fn verdict(&self, proxies: &[&Proxy], chaos: bool, mut failures: Vec<String>) -> Result<(), String> {
        let mut report = self.checker.report();
        report.resets = proxies.iter().map(|p| p.resets()).sum();
        report.print(&format!(
            "{}, seed {:#x}, {:.1?}",
            self.name,
            self.seed,
            self.started.elapsed()
        ));
        if !report.is_clean() {
            failures.push("the checker's counts are not all zero".into());
        }
        if report.records == 0 {
            failures.push("nothing was produced".into());
        }
        if chaos && report.resets == 0 {
            failures.push("the killer reset nothing".into());
        }
        if failures.is_empty() {
            return Ok(());
        }
        Err(format!(
            "{}: {}\nseed {:#x}; {report}",
            self.name,
            failures.join("; "),
            self.seed
        ))
    }
}

/// A client as a member or producer gets it: through `bootstrap` (a proxy), with timeouts short
/// enough that a lost request or dead broker costs seconds.
fn proxied_client(bootstrap: &str) -> Client {
    Client::builder()
        .bootstrap_servers(bootstrap)
        .client_id("chaos")
        .request_timeout(REQUEST_TIMEOUT)
        .connect_timeout(Duration::from_secs(2))
        .api_timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// Polls `cond` every 20 ms for up to `timeout`; whether it came true.
fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What a member's thread saw, for the scenarios' own checks.
#[derive(Debug, Default, Clone)]
struct Seen {
    /// Generation after the last poll (-1 before the first join).
    generation: i32,
    /// Every generation this incarnation was assigned partitions in.
    generations: BTreeSet<i32>,
    assignment: BTreeSet<TopicPartition>,
    assignments: usize,
    revocations: usize,
    poll_errors: usize,
    records: usize,
    /// How long `close()` took, once it returned.
    close_took: Option<Duration>,
    /// What `close()` returned, if an error.
    close_error: Option<String>,
    /// Whether that error was a timeout (a dynamic member's LeaveGroup lost in a blackhole).
    close_timed_out: bool,
}

struct Member {
    instance: String,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
    handle: Option<JoinHandle<()>>,
}

impl Member {
    fn seen(&self) -> Seen {
        self.seen.lock().unwrap().clone()
    }

    fn is_assigned(&self) -> bool {
        self.seen().assignments > 0
    }

    /// Closes the consumer (in its thread) and waits for it; what it saw.
    fn close(mut self) -> Seen {
        self.halt();
        self.seen()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            if h.join().is_err() {
                eprintln!("{}: consumer thread panicked", self.instance);
            }
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.halt();
    }
}

/// A member's application loop: poll, record, commit after every poll (and after a revocation,
/// as the `Consumer` docs ask), until stopped; then `close()`.
fn run(mut c: Consumer, mut log: MemberLog, stop: &AtomicBool, seen: &Mutex<Seen>) {
    while !stop.load(Ordering::SeqCst) {
        let polled = match c.poll(Duration::from_millis(200)) {
            Ok(p) => p,
            Err(e) => {
                // A failure: the library retries what is retriable. Counted, and the loop goes
                // on so that the test still reports everything else.
                log.error(format!("poll: {e}"));
                seen.lock().unwrap().poll_errors += 1;
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let generation = c.member().unwrap().generation().map_or(-1, |g| g.id);
        seen.lock().unwrap().generation = generation;
        if polled.revoked().is_some() {
            commit(&mut c, &mut log);
            log.revoked();
            let mut s = seen.lock().unwrap();
            s.revocations += 1;
            s.assignment.clear();
            continue;
        }
        if let Some(assigned) = polled.assigned() {
            let assigned = assigned.to_vec();
            match c.committed(&assigned) {
                Ok(map) => log.assigned(&assigned, &map),
                Err(e) => {
                    log.error(format!("committed: {e}"));
                    // Without its floor the run cannot be checked; its deliveries count as
                    // unassigned.
                    log.revoked();
                }
            }
            let mut s = seen.lock().unwrap();
            s.assignment = assigned.into_iter().collect();
            s.assignments += 1;
            s.generations.insert(generation);
        }
        if polled.records.is_empty() {
            continue;
        }
        log.delivered(&polled.records);
        seen.lock().unwrap().records += polled.records.len();
        commit(&mut c, &mut log);
    }
    let started = Instant::now();
    let closed = c.close();
    let mut s = seen.lock().unwrap();
    s.close_took = Some(started.elapsed());
    if let Err(e) = closed {
        s.close_timed_out = matches!(e, Error::Timeout { .. });
        s.close_error = Some(e.to_string());
    }
}

/// Commits; a rejection because the generation ended is the normal failed commit, anything else
/// after the consumer's own retries is also a failure of the test.
fn commit(c: &mut Consumer, log: &mut MemberLog) {
    match c.commit() {
        Ok(()) => log.commit_ok(),
        Err(e) if checker::generation_ended(&e) => log.commit_failed(),
        Err(e) => {
            log.commit_failed();
            log.error(format!("commit: {e}"));
        }
    }
}

struct Producing {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Producing {
    fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Producing {
    fn drop(&mut self) {
        self.halt();
    }
}

const INSTANCES: [&str; 3] = ["m0", "m1", "m2"];

/// Waits until every member holds an assignment; a failure message otherwise.
fn all_assigned(members: &[Member], timeout: Duration) -> Result<(), String> {
    if wait_until(timeout, || members.iter().all(Member::is_assigned)) {
        Ok(())
    } else {
        let seen: Vec<(String, Seen)> = members.iter().map(|m| (m.instance.clone(), m.seen())).collect();
        Err(format!(
            "not every member was assigned within {timeout:?}: {seen:?}"
        ))
    }
}

/// Closes every member; the failures of those whose `close()` returned an error.
fn close_all(members: Vec<Member>) -> Vec<String> {
    members
        .into_iter()
        .filter_map(|m| {
            let instance = m.instance.clone();
            let seen = m.close();
            eprintln!(
                "{instance}: {} records, generations {:?}, {} revocations, {} poll errors, close \
                 took {:?}",
                seen.records, seen.generations, seen.revocations, seen.poll_errors, seen.close_took
            );
            seen.close_error.map(|e| format!("{instance}: close: {e}"))
        })
        .collect()
}

/// The partitions the members hold together.
fn held(members: &[Member]) -> BTreeSet<TopicPartition> {
    members.iter().flat_map(|m| m.seen().assignment).collect()
}

/// Three static members and a producer, all through a proxy whose killer resets every
/// connection after 0.5–1.5 s, for the whole run: produce, consume, commit, close. The group
/// rebalances under the killer too: a fourth static member joins, closes 3 s later, and the
/// coordinator expires it a session timeout after that; then again while the phase lasts.
#[test]
fn chaos_during_produce_consume_commit() {
    const PARTITIONS: i32 = 6;
    let release = proxy::release_for(broker::shared().version());
    let upstream = proxy::upstream_for(release);
    let direct = client(&upstream.to_string());
    let s = Scenario::new(
        "produce-consume-commit",
        create_topic(&direct, "chaos", PARTITIONS, 1),
    );
    let sampler = s.checker.sample_committed(direct.clone(), &s.group);
    let proxy = Proxy::start(upstream, release);
    proxy.kill_connections(s.seed, LIFETIME_MIN..=LIFETIME_MAX);

    let members: Vec<Member> = INSTANCES
        .iter()
        .map(|i| s.member(&proxy.bootstrap(), i))
        .collect();
    let producing = s.producer(&proxy.bootstrap(), Arc::new(AtomicI32::new(PARTITIONS)));
    let mut failures: Vec<String> = all_assigned(&members, Duration::from_secs(60))
        .err()
        .into_iter()
        .collect();
    let phase = chaos_phase(Duration::from_secs(15));
    s.say(&format!("members assigned; {phase:?} of chaos"));
    let end = Instant::now() + phase;
    let mut cycles = 0;
    std::thread::sleep(Duration::from_secs(2));
    while Instant::now() + Duration::from_secs(3) < end {
        let fourth = s.member(&proxy.bootstrap(), "m3");
        std::thread::sleep(Duration::from_secs(3));
        failures.extend(close_all(vec![fourth]));
        cycles += 1;
        // Its session expires (a rebalance) before the next one joins (another).
        std::thread::sleep(
            (SESSION + Duration::from_secs(2)).min(end.saturating_duration_since(Instant::now())),
        );
    }
    s.say(&format!("{cycles} join/expire cycles of a fourth member"));
    producing.stop();
    s.say(&format!(
        "producing stopped: {} records acknowledged, {} resets so far",
        s.checker.acked_count(),
        proxy.resets()
    ));
    failures.extend(s.drain(&direct, PARTITIONS));
    failures.extend(close_all(members));
    sampler.stop();
    proxy.stop_killing();
    s.finish(&[&proxy], true, failures);
}

/// Partitions are added to the subscribed topic, then every static member restarts in turn
/// within the session timeout, the leader first. The records produced to the new partitions
/// must be consumed: someone has to notice the new partitions and assign them.
///
/// The leader is stopped before the partitions are added and started again right after: the
/// old leader process never sees them, so only the restarted one can (KIP-814: a static leader
/// that rejoins is told to skip the assignment and keep the current one).
#[test]
fn rolling_restart_with_added_partitions() {
    const BEFORE: i32 = 3;
    const AFTER: i32 = 6;
    let release = proxy::release_for(broker::shared().version());
    let upstream = proxy::upstream_for(release);
    let direct = client(&upstream.to_string());
    let s = Scenario::new("rolling-restart", create_topic(&direct, "chaos-roll", BEFORE, 1));
    let sampler = s.checker.sample_committed(direct.clone(), &s.group);
    // No killer here: the path is clean, so what fails is the restart logic alone.
    let proxy = Proxy::start(upstream, release);
    let bootstrap = proxy.bootstrap();
    let partitions = Arc::new(AtomicI32::new(BEFORE));
    let mut members: Vec<Member> = INSTANCES.iter().map(|i| s.member(&bootstrap, i)).collect();
    let producing = s.producer(&bootstrap, partitions.clone());
    let mut failures = Vec::new();
    if let Err(e) = all_assigned(&members, Duration::from_secs(60)) {
        failures.push(e);
    }
    let leader = s.leader().expect("a member ran the assignor");
    s.say(&format!("group formed, leader {leader}"));

    // The leader first, the others after it.
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by_key(|i| members[*i].instance != leader);
    for (n, i) in order.into_iter().enumerate() {
        let instance = members[i].instance.clone();
        let old = std::mem::replace(&mut members[i], placeholder());
        let stopped = Instant::now();
        if let Some(e) = old.close().close_error {
            failures.push(format!("{instance}: close: {e}"));
        }
        if n == 0 {
            direct
                .admin()
                .create_partitions(&[(s.topic.as_str(), AFTER)], Duration::from_secs(30))
                .unwrap();
            partitions.store(AFTER, Ordering::SeqCst);
            s.say(&format!("{instance} stopped; {BEFORE} -> {AFTER} partitions"));
        }
        members[i] = s.member(&bootstrap, &instance);
        let back = wait_until(Duration::from_secs(30), || members[i].is_assigned());
        s.say(&format!(
            "{instance} restarted, assigned again: {back}, {:?} after it stopped",
            stopped.elapsed()
        ));
        if stopped.elapsed() >= SESSION {
            failures.push(format!(
                "{instance}'s restart took {:?}, beyond the session",
                stopped.elapsed()
            ));
        }
        if !back {
            failures.push(format!("{instance} got no assignment after its restart"));
        }
    }
    let all: BTreeSet<TopicPartition> = (0..AFTER)
        .map(|p| TopicPartition::new(s.topic.clone(), p))
        .collect();
    // Four leader metadata checks (metadata.max.age.ms 5 s) after the last restart.
    let all_held = wait_until(Duration::from_secs(20), || held(&members) == all);
    producing.stop();
    if all_held {
        failures.extend(s.drain(&direct, AFTER));
    } else {
        // The records of the partitions nobody holds cannot drain; the report counts them lost.
        failures.push(format!(
            "20 s after the restarts the members hold partitions {:?} of {AFTER}",
            held(&members).iter().map(|tp| tp.partition).collect::<Vec<_>>()
        ));
    }
    failures.extend(close_all(members));
    sampler.stop();
    s.finish(&[&proxy], false, failures);
}

/// A member slot between a close and the restart that replaces it.
fn placeholder() -> Member {
    Member {
        instance: String::new(),
        stop: Arc::new(AtomicBool::new(true)),
        seen: Arc::new(Mutex::new(Seen::default())),
        handle: None,
    }
}

/// On a 3-node cluster, under the connection killer: `kill -9` of the broker that coordinates
/// the group, its restart, then `kill -9` of a partition leader's broker and its restart, while
/// three static members consume and commit and a producer produces (acks=all, replication 3).
#[test]
fn coordinator_and_leader_kill9_under_chaos() {
    const PARTITIONS: i32 = 6;
    let cluster = broker::Cluster::start(3, broker::version_under_test());
    let release = proxy::release_for(cluster.version());
    let direct = Client::builder()
        .bootstrap_servers(cluster.bootstrap())
        .client_id("chaos-direct")
        .request_timeout(REQUEST_TIMEOUT)
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let s = Scenario::new("kill9", create_topic(&direct, "chaos-kill", PARTITIONS, 3));
    let sampler = s.checker.sample_committed(direct.clone(), &s.group);
    // One proxy for the cluster: a listener per node, so the client can bootstrap through any.
    let proxy = Proxy::start(cluster.addr(1), release);
    for node in cluster.nodes().skip(1) {
        proxy.listen_for(cluster.addr(node));
    }
    let bootstrap: Vec<String> = proxy.listener_addrs().iter().map(ToString::to_string).collect();
    let bootstrap = bootstrap.join(",");
    proxy.kill_connections(s.seed, LIFETIME_MIN..=LIFETIME_MAX);

    let members: Vec<Member> = INSTANCES.iter().map(|i| s.member(&bootstrap, i)).collect();
    let producing = s.producer(&bootstrap, Arc::new(AtomicI32::new(PARTITIONS)));
    let mut failures: Vec<String> = all_assigned(&members, Duration::from_secs(60))
        .err()
        .into_iter()
        .collect();
    let phase = chaos_phase(Duration::from_secs(8));

    let coordinator = direct.find_coordinator(&s.group).unwrap().id as usize;
    s.say(&format!("kill -9 of node {coordinator}, the coordinator"));
    cluster.kill(coordinator);
    std::thread::sleep(phase);
    cluster.restart(coordinator);
    s.say(&format!("node {coordinator} restarted"));

    let meta = direct.refresh_metadata(Some(&[s.topic.as_str()])).unwrap();
    let now_coordinator = direct.find_coordinator(&s.group).map(|b| b.id).unwrap_or(-1);
    let leaders: Vec<i32> = meta.topics[&s.topic]
        .partitions
        .iter()
        .map(|p| p.leader)
        .collect();
    let leader = leaders
        .iter()
        .copied()
        .find(|l| *l >= 0 && *l != now_coordinator)
        .unwrap_or(leaders[0]) as usize;
    s.say(&format!(
        "kill -9 of node {leader}, a partition leader (leaders {leaders:?})"
    ));
    cluster.kill(leader);
    std::thread::sleep(phase);
    cluster.restart(leader);
    s.say(&format!("node {leader} restarted"));
    std::thread::sleep(phase.min(Duration::from_secs(5)));
    producing.stop();
    failures.extend(s.drain(&direct, PARTITIONS));
    failures.extend(close_all(members));
    sampler.stop();
    proxy.stop_killing();
    s.finish(&[&proxy], true, failures);
}

/// Three static members, each through a proxy of its own, and a producer straight to the
/// broker (so that only the member's path is broken) running from before the blackhole until
/// the test stops it; one member's proxy becomes a blackhole for `blackhole`, then lifts it.
/// Holds what every member saw before, and the failures so far.
struct Blackholed {
    scenario: Scenario,
    direct: Client,
    proxies: Vec<Proxy>,
    members: Vec<Member>,
    producing: Producing,
    sampler: Sampler,
    before: Vec<Seen>,
    failures: Vec<String>,
}

const BLACKHOLE_PARTITIONS: i32 = 6;

fn blackhole_one(name: &'static str, blackhole: Duration) -> Blackholed {
    let release = proxy::release_for(broker::shared().version());
    let upstream = proxy::upstream_for(release);
    let direct = client(&upstream.to_string());
    let s = Scenario::new(name, create_topic(&direct, "chaos-bh", BLACKHOLE_PARTITIONS, 1));
    let sampler = s.checker.sample_committed(direct.clone(), &s.group);
    let proxies: Vec<Proxy> = INSTANCES
        .iter()
        .map(|_| Proxy::start(upstream, release))
        .collect();
    let members: Vec<Member> = INSTANCES
        .iter()
        .zip(&proxies)
        .map(|(i, p)| s.member(&p.bootstrap(), i))
        .collect();
    let mut failures: Vec<String> = all_assigned(&members, Duration::from_secs(60))
        .err()
        .into_iter()
        .collect();
    // Settled: the same generation everywhere.
    if !wait_until(Duration::from_secs(30), || {
        let g: BTreeSet<i32> = members.iter().map(|m| m.seen().generation).collect();
        g.len() == 1 && held(&members).len() == BLACKHOLE_PARTITIONS as usize
    }) {
        failures.push("the group did not settle".into());
    }
    let producing = s.producer(
        &upstream.to_string(),
        Arc::new(AtomicI32::new(BLACKHOLE_PARTITIONS)),
    );
    if !wait_until(Duration::from_secs(30), || {
        members.iter().all(|m| m.seen().records > 0)
    }) {
        failures.push("not every member got records before the blackhole".into());
    }
    let before: Vec<Seen> = members.iter().map(Member::seen).collect();
    s.say(&format!(
        "settled in generation {}; blackhole on m1 for {blackhole:?}",
        before[1].generation
    ));
    proxies[1].blackhole(true);
    std::thread::sleep(blackhole);
    proxies[1].blackhole(false);
    s.say("blackhole lifted");
    Blackholed {
        scenario: s,
        direct,
        proxies,
        members,
        producing,
        sampler,
        before,
        failures,
    }
}

/// Produces `n` records straight to the broker (through `direct`), spread over `partitions`,
/// so that only the members' paths are broken.
fn produce_direct(s: &Scenario, direct: &Client, partitions: i32, n: u64) {
    let mut p = direct.producer().build().unwrap();
    let ids: Vec<u64> = (0..n).collect();
    s.checker.produced(ids.iter().copied());
    for id in &ids {
        let partition = (*id % partitions as u64) as i32;
        p.send(ProducerRecord::new(&s.topic, Checker::value(*id)).partition(partition))
            .unwrap();
    }
    p.close().unwrap();
    s.checker.acked(ids);
}

/// A blackhole of 3 s between one static member and the broker, within its 8 s session: the
/// group must not rebalance, and the member must carry on without returning an error.
#[test]
fn blackhole_shorter_than_session_does_not_rebalance() {
    let mut b = blackhole_one("blackhole-short", Duration::from_secs(3));
    let s = &b.scenario;
    // Long enough for a late eviction to show.
    std::thread::sleep(SESSION);
    b.producing.stop();
    b.failures.extend(s.drain(&b.direct, BLACKHOLE_PARTITIONS));
    for (m, before) in b.members.iter().zip(&b.before) {
        let after = m.seen();
        if after.generation != before.generation || after.revocations != before.revocations {
            b.failures.push(format!(
                "{}: rebalanced (generation {} -> {}, revocations {} -> {})",
                m.instance, before.generation, after.generation, before.revocations, after.revocations
            ));
        }
    }
    b.failures.extend(close_all(std::mem::take(&mut b.members)));
    b.sampler.stop();
    let proxies: Vec<&Proxy> = b.proxies.iter().collect();
    s.finish(&proxies, false, std::mem::take(&mut b.failures));
}

/// A blackhole of session + 4 s: the coordinator evicts the member, the others take its
/// partitions; once the path is back the member learns it was evicted and rejoins cleanly (no
/// error from `poll`), and the group ends with all three members in a later generation.
#[test]
fn blackhole_longer_than_session_rejoins_cleanly() {
    let mut b = blackhole_one("blackhole-long", SESSION + Duration::from_secs(4));
    let s = &b.scenario;
    let before = b.before[1].generation;
    let lifted = Instant::now();
    let rejoined = wait_until(Duration::from_secs(30), || {
        let gens: BTreeSet<i32> = b.members.iter().map(|m| m.seen().generation).collect();
        gens.len() == 1
            && gens.iter().all(|g| *g > before)
            && held(&b.members).len() == BLACKHOLE_PARTITIONS as usize
            && b.members.iter().all(|m| !m.seen().assignment.is_empty())
    });
    if rejoined {
        s.say(&format!(
            "all three in one later generation {:?} after the lift",
            lifted.elapsed()
        ));
    } else {
        let seen: Vec<Seen> = b.members.iter().map(Member::seen).collect();
        b.failures.push(format!(
            "the evicted member did not rejoin into a common later generation: {seen:?}"
        ));
    }
    b.producing.stop();
    b.failures.extend(s.drain(&b.direct, BLACKHOLE_PARTITIONS));
    b.failures.extend(close_all(std::mem::take(&mut b.members)));
    b.sampler.stop();
    let proxies: Vec<&Proxy> = b.proxies.iter().collect();
    s.finish(&proxies, false, std::mem::take(&mut b.failures));
}

/// `close()` while the path to the broker is a blackhole: a static member has nothing to send
/// (it keeps its partitions until the session times out) and a dynamic one one LeaveGroup, so
/// each close must return within its `close_timeout` (set to one request timeout here),
/// whatever is in flight.
#[test]
fn close_under_blackhole_is_bounded() {
    let release = proxy::release_for(broker::shared().version());
    let upstream = proxy::upstream_for(release);
    let direct = client(&upstream.to_string());
    let mut verdicts = Vec::new();
    for (name, static_member) in [
        ("close-blackhole-static", true),
        ("close-blackhole-dynamic", false),
    ] {
        let s = Scenario::new(name, create_topic(&direct, "chaos-close", 2, 1));
        produce_direct(&s, &direct, 2, 200);
        let mut failures = Vec::new();
        let proxy = Proxy::start(upstream, release);
        let m = s.member_with(&proxy.bootstrap(), "m0", static_member);
        // Consumed and committed: a commit still in flight when the blackhole starts would
        // time out, which is the blackhole working, not what this scenario checks (close).
        if !wait_until(DRAIN, || s.checker.consumed_all() && s.checker.all_committed()) {
            failures.push("not every record was consumed and committed before the blackhole".to_string());
        }
        proxy.blackhole(true);
        // Let heartbeats and fetches get caught in it.
        std::thread::sleep(HEARTBEAT * 2);
        let seen = m.close();
        proxy.blackhole(false);
        let took = seen.close_took.unwrap_or(Duration::MAX);
        s.say(&format!(
            "close took {took:?} under the blackhole: {:?}",
            seen.close_error
        ));
        // A dynamic member's LeaveGroup cannot get through: saying so is fine, hanging is not.
        if let Some(e) = seen
            .close_error
            .filter(|_| static_member || !seen.close_timed_out)
        {
            failures.push(format!("close: {e}"));
        }
        // The bound, with room for scheduling on a loaded machine.
        if took > REQUEST_TIMEOUT + crate::support::LOAD_MARGIN {
            failures.push(format!(
                "close() took {took:?} under a blackhole, more than a request timeout \
                 ({REQUEST_TIMEOUT:?})"
            ));
        }
        verdicts.push(s.verdict(&[&proxy], false, failures));
    }
    let failed: Vec<String> = verdicts.into_iter().filter_map(Result::err).collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
