//! The demo's story, told against any broker and printed to any `Write`: `main.rs` runs it on
//! stdout with a 10 s session timeout, and the integration test (tests/it/demo_tests.rs, which
//! includes this file) runs the same code with a 3 s one and checks what it printed.
//!
//! Three static members (group.instance.id demo-a, demo-b, demo-c) share a 6-partition topic.
//! demo-b restarts twice: quickly (static membership keeps the group as it is) and after longer
//! than the session timeout (the coordinator expires it and the group rebalances twice).
//! It runs on either group protocol ([`Settings::protocol`]): classic, where the members'
//! `session.timeout.ms` applies and a rebalance revokes everything (range assignor), or KIP-848's
//! consumer protocol, where the broker's `group.consumer.session.timeout.ms` applies and the
//! coordinator moves only the partitions that must move, without revoking the others'.
//! Lines start with the phase (`quick restart:`, `slow restart:`, `summary:`) and carry plain
//! numbers, so the output can be grepped.

use kafka_group::{Client, Consumer, GroupProtocol, NewTopic, OffsetReset, ProducerRecord};
use kafka_group::{GroupEvent, TopicPartition};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Any error the demo reports.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the demo runs against and with which timings.
pub struct Settings {
    /// `host:port` list to bootstrap from.
    pub bootstrap: String,
    /// Partitions of the demo topic.
    pub partitions: i32,
    /// Records produced before the members start.
    pub records: usize,
    /// `session.timeout.ms` of every member (classic), or the broker's
    /// `group.consumer.session.timeout.ms` (consumer protocol: the members cannot set it).
    pub session_timeout: Duration,
    /// `heartbeat.interval.ms` of every member (classic; the broker's under the consumer
    /// protocol, used here only to pace the story).
    pub heartbeat_interval: Duration,
    /// `group.protocol` of every member.
    pub protocol: GroupProtocol,
}

impl Settings {
    /// 6 partitions, 6,000 records, heartbeats at a tenth of the session timeout.
    pub fn new(bootstrap: &str, session_timeout: Duration) -> Settings {
        Settings {
            bootstrap: bootstrap.to_string(),
            partitions: 6,
            records: 6000,
            session_timeout,
            heartbeat_interval: session_timeout / 10,
            protocol: GroupProtocol::Classic,
        }
    }

    /// The same story on `protocol`.
    pub fn protocol(mut self, protocol: GroupProtocol) -> Settings {
        self.protocol = protocol;
        self
    }

    fn incremental(&self) -> bool {
        self.protocol == GroupProtocol::Consumer
    }
}

const MEMBERS: [&str; 3] = ["demo-a", "demo-b", "demo-c"];
/// Records produced while demo-b is away in the slow restart, per partition.
const WHILE_AWAY: usize = 100;
/// Longest wait for any step; generous, since a slow machine only makes the figures worse.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// A change a member saw in the group, as `poll` reported it.
#[derive(Debug, Clone)]
enum Change {
    Revoked,
    Assigned { generation: i32 },
}

/// What a member's thread reports to the story teller.
#[derive(Debug, Clone, Default)]
struct View {
    /// Generation and partitions owned now; `None` before the first assignment and between a
    /// revocation and the next assignment.
    owned: Option<(i32, Vec<i32>)>,
    changes: Vec<(Instant, Change)>,
    commit_failures: usize,
    failed: Option<String>,
}

impl View {
    fn revocations_since(&self, t: Instant) -> usize {
        self.changes
            .iter()
            .filter(|(at, c)| *at >= t && matches!(c, Change::Revoked))
            .count()
    }

    fn first_revocation_since(&self, t: Instant) -> Option<Instant> {
        self.changes
            .iter()
            .find(|(at, c)| *at >= t && matches!(c, Change::Revoked))
            .map(|(at, _)| *at)
    }

    fn first_assignment_since(&self, t: Instant) -> Option<(Instant, i32)> {
        self.changes.iter().find_map(|(at, c)| match c {
            Change::Assigned { generation } if *at >= t => Some((*at, *generation)),
            _ => None,
        })
    }

    fn generations_since(&self, t: Instant) -> Vec<i32> {
        let mut gens: Vec<i32> = Vec::new();
        for (at, c) in &self.changes {
            if let Change::Assigned { generation } = c {
                if *at >= t && gens.last() != Some(generation) {
                    gens.push(*generation);
                }
            }
        }
        gens
    }
}

/// Records consumed, by every incarnation of every member.
#[derive(Debug, Default)]
struct Tally {
    by_member: BTreeMap<String, usize>,
    seen: HashSet<(i32, i64)>,
    duplicates: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A member thread that panicked holding the lock has still left consistent counters.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A consumer polled by its own thread, as a separate application process would run it.
struct Member {
    id: &'static str,
    /// Under the consumer protocol (events list changes; epochs are per member).
    incremental: bool,
    view: Arc<Mutex<View>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Member {
    fn start(
        s: &Settings,
        group: &str,
        topic: &str,
        id: &'static str,
        tally: &Arc<Mutex<Tally>>,
    ) -> Result<Member, BoxError> {
        // A client of its own: a restarted process starts from nothing but its configuration.
        let client = Client::builder()
            .bootstrap_servers(&s.bootstrap)
            .client_id(id)
            .build()?;
        let builder = client.consumer(group).subscribe([topic]).group_instance_id(id);
        let builder = match s.protocol {
            GroupProtocol::Classic => builder
                .session_timeout(s.session_timeout)
                .heartbeat_interval(s.heartbeat_interval),
            // The broker owns the session timeout and the heartbeat interval.
            GroupProtocol::Consumer => builder.group_protocol(GroupProtocol::Consumer),
        };
        let consumer = builder
            .max_poll_interval(Duration::from_secs(30))
            .auto_offset_reset(OffsetReset::Earliest)
            .enable_auto_commit(false)
            // Short broker-side waits, so that a stop request is seen within ~100 ms.
            .fetch_max_wait(Duration::from_millis(100))
            .build()?;
        let view = Arc::new(Mutex::new(View::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (v, st, t) = (view.clone(), stop.clone(), tally.clone());
        let handle = std::thread::Builder::new()
            .name(id.to_string())
            .spawn(move || consume(consumer, id, &v, &st, &t))?;
        Ok(Member {
            id,
            incremental: s.incremental(),
            view,
            stop,
            handle: Some(handle),
        })
    }

    fn view(&self) -> View {
        lock(&self.view).clone()
    }

    /// Stops the thread, which commits and closes the consumer (a static member does not leave
    /// for good — classic: no LeaveGroup; consumer protocol: the leave heartbeat with epoch
    /// -2 — so the coordinator keeps its partitions until the session times out).
    fn halt(&mut self) -> Result<(), BoxError> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            if h.join().is_err() {
                return Err(format!("{}: consumer thread panicked", self.id).into());
            }
        }
        match self.view().failed {
            Some(e) => Err(format!("{}: {e}", self.id).into()),
            None => Ok(()),
        }
    }

    fn owned(&self) -> Option<(i32, Vec<i32>)> {
        self.view().owned
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}

/// The member's loop: poll, count, commit after every batch and before giving partitions up.
fn consume(mut c: Consumer, id: &str, view: &Mutex<View>, stop: &AtomicBool, tally: &Mutex<Tally>) {
    // Incremental rebalancing (the consumer protocol): each event lists only what changed.
    let incremental =
        c.member().map(|m| m.rebalance_protocol()) == Some(kafka_group::RebalanceProtocol::Cooperative);
    while !stop.load(Ordering::SeqCst) {
        let polled = match c.poll(Duration::from_millis(100)) {
            Ok(p) => p,
            Err(e) => {
                lock(view).failed = Some(format!("poll: {e}"));
                return;
            }
        };
        let now = Instant::now();
        {
            let mut v = lock(view);
            for e in &polled.events {
                match e {
                    GroupEvent::Revoked {
                        generation,
                        partitions,
                    } if incremental => {
                        let left: Vec<i32> = v.owned.take().map_or_else(Vec::new, |(_, ps)| {
                            ps.into_iter()
                                .filter(|p| !partitions.iter().any(|tp| tp.partition == *p))
                                .collect()
                        });
                        v.owned = (!left.is_empty()).then_some((*generation, left));
                        v.changes.push((now, Change::Revoked));
                    }
                    GroupEvent::Revoked { .. } | GroupEvent::Lost { .. } => {
                        v.owned = None;
                        v.changes.push((now, Change::Revoked));
                    }
                    GroupEvent::Assigned {
                        generation,
                        partitions,
                        ..
                    } => {
                        let mut ps: Vec<i32> = partitions.iter().map(|tp| tp.partition).collect();
                        if incremental {
                            ps.extend(v.owned.take().map_or_else(Vec::new, |(_, kept)| kept));
                        }
                        ps.sort_unstable();
                        ps.dedup();
                        if ps.is_empty() && incremental {
                            // Joined with nothing yet: the partitions come when freed.
                            continue;
                        }
                        v.owned = Some((*generation, ps));
                        v.changes.push((
                            now,
                            Change::Assigned {
                                generation: *generation,
                            },
                        ));
                    }
                    _ => {}
                }
            }
        }
        if !polled.records.is_empty() {
            let mut t = lock(tally);
            *t.by_member.entry(id.to_string()).or_default() += polled.records.len();
            for r in &polled.records {
                if !t.seen.insert((r.partition, r.offset)) {
                    t.duplicates += 1;
                }
            }
        }
        // After a revocation this is the last commit with the generation that owned them.
        if polled.revoked().is_some() || !polled.records.is_empty() {
            if let Err(e) = c.commit() {
                log::warn!("{id}: commit failed: {e}");
                lock(view).commit_failures += 1;
            }
        }
    }
    if let Err(e) = c.commit() {
        log::warn!("{id}: final commit failed: {e}");
        lock(view).commit_failures += 1;
    }
    if let Err(e) = c.close() {
        lock(view).failed = Some(format!("close: {e}"));
    }
}

/// Waits until `cond` holds, failing early if a member failed.
fn wait_until(
    what: &str,
    timeout: Duration,
    members: &[&Member],
    mut cond: impl FnMut() -> bool,
) -> Result<(), BoxError> {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return Ok(());
        }
        for m in members {
            if let Some(e) = m.view().failed {
                return Err(format!("{} failed while waiting for {what}: {e}", m.id).into());
            }
        }
        if Instant::now() >= deadline {
            return Err(format!("timed out after {} ms waiting for {what}", timeout.as_millis()).into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The generation all `members` own partitions in, if they cover the topic exactly once. Under
/// the consumer protocol each member has its own epoch: the highest stands for them.
fn converged(members: &[&Member], partitions: i32) -> Option<i32> {
    let mut generation = None;
    let mut all = BTreeSet::new();
    let mut total = 0;
    let per_member = members.iter().any(|m| m.incremental);
    for m in members {
        let (g, ps) = m.owned()?;
        if !per_member && generation.is_some_and(|x| x != g) {
            return None;
        }
        generation = Some(generation.map_or(g, |x: i32| x.max(g)));
        total += ps.len();
        all.extend(ps);
    }
    (total == all.len() && all.len() == partitions as usize).then_some(generation?)
}

/// Waits until `members` converge (see [`converged`]) in a generation other than `old`, failing
/// early if one of them failed; returns that generation.
fn wait_converged(
    what: &str,
    members: &[&Member],
    partitions: i32,
    old: Option<i32>,
) -> Result<i32, BoxError> {
    let mut generation = None;
    wait_until(what, STEP_TIMEOUT, members, || {
        generation = converged(members, partitions).filter(|g| Some(*g) != old);
        generation.is_some()
    })?;
    Ok(generation.unwrap_or(-1))
}

fn owners(members: &[&Member]) -> String {
    members
        .iter()
        .map(|m| match m.owned() {
            Some((_, ps)) => format!("{} owns {ps:?}", m.id),
            None => format!("{} owns nothing", m.id),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

fn consumed(tally: &Mutex<Tally>) -> usize {
    lock(tally).seen.len()
}

fn produce(client: &Client, topic: &str, partitions: i32, n: usize, first: usize) -> Result<(), BoxError> {
    let mut producer = client.producer().build()?;
    for i in first..first + n {
        producer.send(
            ProducerRecord::new(topic, format!("record {i}"))
                .key(format!("key-{i}"))
                .partition((i % partitions as usize) as i32),
        )?;
    }
    producer.flush()?;
    Ok(())
}

/// Runs the whole story; every member is closed before this returns, error or not.
pub fn run(s: &Settings, out: &mut dyn Write) -> Result<(), BoxError> {
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let topic = format!("demo-{}-{}-{stamp}", s.protocol, std::process::id());
    let group = format!("demo-group-{}-{}-{stamp}", s.protocol, std::process::id());
    let setup = Client::builder()
        .bootstrap_servers(&s.bootstrap)
        .client_id("demo-setup")
        .build()?;

    // 1. A topic and records.
    let t = Instant::now();
    setup
        .admin()
        .create_topics(&[NewTopic::new(&topic, s.partitions, 1)], STEP_TIMEOUT)?;
    writeln!(
        out,
        "topic {topic}: {} partitions, created in {} ms",
        s.partitions,
        ms(t.elapsed())
    )?;
    let t = Instant::now();
    produce(&setup, &topic, s.partitions, s.records, 0)?;
    let mut produced = s.records;
    writeln!(
        out,
        "produced {produced} records with our Producer in {} ms",
        ms(t.elapsed())
    )?;

    // 2. Three static members.
    let tally = Arc::new(Mutex::new(Tally::default()));
    writeln!(
        out,
        "group {group}: starting 3 static members ({}) on the {} protocol, session timeout {} ms{}",
        MEMBERS.join(", "),
        s.protocol,
        ms(s.session_timeout),
        match s.protocol {
            GroupProtocol::Classic => format!(", heartbeat {} ms", ms(s.heartbeat_interval)),
            GroupProtocol::Consumer => " (the broker's group.consumer.session.timeout.ms)".into(),
        }
    )?;
    let t = Instant::now();
    let a = Member::start(s, &group, &topic, MEMBERS[0], &tally)?;
    let mut b = Member::start(s, &group, &topic, MEMBERS[1], &tally)?;
    let c = Member::start(s, &group, &topic, MEMBERS[2], &tally)?;
    let gen = wait_converged(
        "the three members to share the partitions",
        &[&a, &b, &c],
        s.partitions,
        None,
    )?;
    writeln!(out, "joined in {} ms", ms(t.elapsed()))?;
    writeln!(out, "generation {gen}: {}", owners(&[&a, &b, &c]))?;
    wait_until(
        "the first records to be consumed",
        STEP_TIMEOUT,
        &[&a, &b, &c],
        || consumed(&tally) >= produced,
    )?;
    writeln!(
        out,
        "consumed and committed all {produced} records {} ms after the members started",
        ms(t.elapsed())
    )?;

    // 3. Quick restart: within the session timeout the coordinator just swaps member ids.
    let before = [a.owned(), b.owned(), c.owned()];
    let t_close = Instant::now();
    b.halt()?;
    let closed = t_close.elapsed();
    let t_start = Instant::now();
    b = Member::start(s, &group, &topic, MEMBERS[1], &tally)?;
    writeln!(
        out,
        "quick restart: closed demo-b in {} ms and started it again at once",
        ms(closed)
    )?;
    wait_until(
        "demo-b to get partitions back",
        s.session_timeout + STEP_TIMEOUT,
        &[&a, &b, &c],
        || b.owned().is_some(),
    )?;
    let (b_at, b_gen) = b.view().first_assignment_since(t_start).ok_or("no assignment")?;
    let back = b_at.saturating_duration_since(t_start);
    let b_now = b.owned().ok_or("demo-b lost its partitions")?;
    writeln!(
        out,
        "quick restart: demo-b assigned {:?} in generation {b_gen}, {} ms after starting again",
        b_now.1,
        ms(back)
    )?;
    // A rebalance would reach the others with their next heartbeat: watch a few.
    std::thread::sleep(s.heartbeat_interval * 3);
    let (va, vc) = (a.view(), c.view());
    let kept = |v: &View, was: &Option<(i32, Vec<i32>)>| v.owned == *was && v.revocations_since(t_close) == 0;
    let others_kept = kept(&va, &before[0]) && kept(&vc, &before[2]);
    for (m, v, was) in [(&a, &va, &before[0]), (&c, &vc, &before[2])] {
        let now = v.owned.as_ref().map(|o| o.1.clone()).unwrap_or_default();
        let same = was.as_ref().is_some_and(|w| w.1 == now);
        writeln!(
            out,
            "quick restart: {} {} {now:?} (revocations: {}, generation {})",
            m.id,
            if same { "kept" } else { "now owns" },
            v.revocations_since(t_close),
            v.owned.as_ref().map_or(-1, |o| o.0)
        )?;
    }
    let b_after = b.owned();
    // Under the consumer protocol epochs are per member: the partitions say it all.
    let same_partitions = b_after.as_ref().map(|o| &o.1) == before[1].as_ref().map(|o| &o.1);
    let rebalanced = !(others_kept && same_partitions && (s.incremental() || b_gen == gen));
    writeln!(
        out,
        "quick restart: rebalanced: {} (generation {gen} -> {}), demo-b had its partitions back in {} ms",
        if rebalanced { "yes" } else { "no" },
        b_after.as_ref().map_or(-1, |o| o.0),
        ms(back)
    )?;

    // 4. Slow restart: past the session timeout the coordinator drops demo-b and rebalances.
    let gen = b_after.as_ref().map_or(gen, |o| o.0);
    writeln!(
        out,
        "slow restart: closing demo-b; it stays away longer than the session timeout ({} ms)",
        ms(s.session_timeout)
    )?;
    let t_close = Instant::now();
    b.halt()?;
    let away = WHILE_AWAY * s.partitions as usize;
    produce(&setup, &topic, s.partitions, away, produced)?;
    produced += away;
    writeln!(
        out,
        "slow restart: produced {away} more records while demo-b is away"
    )?;
    // Classic: the expiry starts a rebalance that revokes everything from demo-a and demo-c.
    // Consumer protocol: the coordinator hands them demo-b's partitions, nothing is revoked.
    let changed = |v: &View| match s.incremental() {
        false => v.first_revocation_since(t_close),
        true => v.first_assignment_since(t_close).map(|(at, _)| at),
    };
    wait_until(
        "the coordinator to expire demo-b",
        s.session_timeout + STEP_TIMEOUT,
        &[&a, &c],
        || changed(&a.view()).is_some() && changed(&c.view()).is_some(),
    )?;
    let expired = [a.view(), c.view()]
        .iter()
        .filter_map(changed)
        .min()
        .map_or(Duration::ZERO, |at| at.saturating_duration_since(t_close));
    writeln!(
        out,
        "slow restart: {} ms after the close the coordinator expired demo-b's session: {}",
        ms(expired),
        match s.incremental() {
            false => format!("demo-a and demo-c had their partitions revoked (generation {gen})"),
            true => format!(
                "demo-a and demo-c were given demo-b's partitions and kept their own (revocations: {}, {})",
                a.view().revocations_since(t_close),
                c.view().revocations_since(t_close)
            ),
        }
    )?;
    let gen_without_b = wait_converged(
        "demo-a and demo-c to take over",
        &[&a, &c],
        s.partitions,
        Some(gen).filter(|_| !s.incremental()),
    )?;
    // demo-b's partitions were read by nobody from the close until now.
    let unread = t_close.elapsed();
    writeln!(
        out,
        "slow restart: generation {gen_without_b}: {} ({} ms after the close)",
        owners(&[&a, &c]),
        ms(unread)
    )?;
    let stay_away = s.session_timeout + s.heartbeat_interval;
    if let Some(left) = stay_away.checked_sub(t_close.elapsed()) {
        std::thread::sleep(left);
    }
    let t_start = Instant::now();
    b = Member::start(s, &group, &topic, MEMBERS[1], &tally)?;
    writeln!(
        out,
        "slow restart: demo-b starts again after {} ms away",
        ms(t_start.saturating_duration_since(t_close))
    )?;
    let gen_final = wait_converged(
        "the three members to converge again",
        &[&a, &b, &c],
        s.partitions,
        Some(gen_without_b).filter(|_| !s.incremental()),
    )?;
    let converged_in = t_start.elapsed();
    let b_back = b
        .view()
        .first_assignment_since(t_start)
        .map_or(Duration::ZERO, |(at, _)| at.saturating_duration_since(t_start));
    writeln!(
        out,
        "slow restart: generation {gen_final}: {} (demo-b assigned {} ms after starting again, all \
         converged in {} ms)",
        owners(&[&a, &b, &c]),
        ms(b_back),
        ms(converged_in)
    )?;
    let (va, vc) = (a.view(), c.view());
    let mut gens = vec![gen];
    gens.extend(va.generations_since(t_close));
    let rebalanced = gen_final != gen
        || va.revocations_since(t_close) > 0
        || vc.revocations_since(t_close) > 0
        || (s.incremental() && va.first_assignment_since(t_close).is_some());
    writeln!(
        out,
        "slow restart: rebalanced: {} (generation {}), demo-a revoked {} times, demo-c revoked {} \
         times, demo-b's partitions unread for {} ms, {} ms from the close until all converged",
        if rebalanced { "yes" } else { "no" },
        gens.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" -> "),
        va.revocations_since(t_close),
        vc.revocations_since(t_close),
        ms(unread),
        ms(t_close.elapsed())
    )?;

    // 5. Everything consumed, committed, closed.
    wait_until("every record to be consumed", STEP_TIMEOUT, &[&a, &b, &c], || {
        consumed(&tally) >= produced
    })?;
    let mut failures = 0;
    let mut members = [a, b, c];
    for m in &mut members {
        m.halt()?;
    }
    for m in &members {
        failures += m.view().commit_failures;
    }
    let t = lock(&tally);
    let per_member: Vec<String> = MEMBERS
        .iter()
        .map(|id| format!("{id} {}", t.by_member.get(*id).copied().unwrap_or(0)))
        .collect();
    writeln!(
        out,
        "summary: records consumed: {}; total {} of {produced} produced, duplicates {}, failed commits {failures}",
        per_member.join(", "),
        t.seen.len(),
        t.duplicates
    )?;
    drop(t);
    // A member that never joins can still read the group's offsets.
    let mut check = setup
        .consumer(&group)
        .subscribe([topic.as_str()])
        .enable_auto_commit(false)
        .build()?;
    let tps: Vec<TopicPartition> = (0..s.partitions)
        .map(|p| TopicPartition::new(&topic, p))
        .collect();
    let committed = check.committed(&tps);
    check.close()?;
    let committed = committed?;
    let mut lag = 0;
    let mut shown = Vec::new();
    for tp in &tps {
        // Records go round-robin over the partitions: the log end offset is their count.
        let end = (0..produced)
            .filter(|i| (*i % s.partitions as usize) as i32 == tp.partition)
            .count() as i64;
        let at = committed.get(tp).copied().flatten();
        lag += end - at.unwrap_or(0);
        shown.push(format!(
            "p{}={}",
            tp.partition,
            at.map_or("none".to_string(), |o| o.to_string())
        ));
    }
    writeln!(out, "summary: committed offsets: {}; lag {lag}", shown.join(" "))?;
    writeln!(out, "summary: closed all 3 members")?;
    Ok(())
}
