//! The bookkeeping of every no-loss test: what was produced and acknowledged, what each consumer
//! got and committed, and what the group's committed offsets did. [`Checker::report`] reduces
//! it to counts that a correct client keeps at zero.
//!
//! Each produced record carries an id: its value is the id in decimal ([`Checker::value`]).
//! Consumers are recorded per incarnation ([`Checker::member`]): its assignments, the records
//! each poll returned, and whether the commit after them succeeded.
//!
//! # What is counted, precisely
//!
//! A *run* is one consumer incarnation's hold on one partition, from the poll that returned its
//! [`GroupEvent::Assigned`](kafka_group::GroupEvent) to the next assignment or
//! revocation. Its *floor* is the partition's committed offset when it started: the highest of
//! what the broker said at the assignment ([`MemberLog::assigned`] takes the consumer's
//! `committed()` answer) and what the checker saw committed successfully so far (no commit: 0,
//! the log start of the fresh topics these tests use with `auto.offset.reset=earliest`).
//!
//! A delivery is *committed* once its consumer's [`MemberLog::commit_ok`] follows it in the same
//! run (a commit sends every position, so it covers earlier deliveries whose commit failed).
//! A failed commit, a crash, a revocation or an eviction leaves the deliveries since the last
//! successful commit uncommitted: that is the *window* of a failed commit, the records in
//! `[last successful commit, position)` of the partition, which Kafka's at-least-once contract
//! delivers again.
//!
//! - **lost**: acknowledged ids ([`Checker::acked`]) never delivered.
//! - **duplicated**: deliveries outside a failed commit's window: below their run's floor (a
//!   record delivered again although a commit past it had succeeded), or a second *committed*
//!   delivery of a record (two consumers both processed and committed it). A redelivery of an
//!   uncommitted record at or above the floor is allowed and counted as `redelivered`.
//! - **reordered**: within one run, a delivery whose offset is not above the run's previous one
//!   (a run never rewinds: the consumer rewinds only at an assignment, which starts a new run).
//! - **commit regressions**: a successful commit of a position below an earlier successful
//!   commit for the partition (positions the consumer already had committed are not sent, so
//!   they do not count); a broker-reported committed offset at an assignment below one the checker saw
//!   succeed; a committed offset going down between two samples of [`Checker::sample_committed`].
//! - **corrupt**: a value that is no id, an id that was never produced, or one offset of a
//!   partition delivered with two different ids.
//! - **unassigned**: a delivery of a partition the consumer held no run for; and, where the
//!   test checks it after each poll ([`MemberLog::holds`]), a poll after which the partitions
//!   its events said the consumer holds differ from those it fetches (a partition it starts
//!   fetching without an `Assigned` saying so, or one it goes on with after a `Revoked` or
//!   `Lost`), even before any record of it comes.
//! - **errors**: anything a consumer reported through [`MemberLog::error`] (a failed poll, a
//!   close that failed): the tests treat every one as a failure.
//!
//! A producer that is not idempotent may write a record twice when an acknowledgement is lost;
//! those are two offsets with one id. They are reported (`log duplicates`), not failures: the
//! consumer-side counts work per offset.

use kafka_group::ApiKey;
use kafka_group::TopicPartition;
use kafka_group::{Client, ConsumerRecord, Error, KafkaCode};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Whether a commit failed the normal way: the generation ended (a rebalance) or a newer process
/// took the instance id, so the records since the last commit go to whoever owns the partitions
/// next — the failed-commit window the checker allows redeliveries in.
pub fn generation_ended(e: &Error) -> bool {
    matches!(
        e,
        Error::Kafka {
            api: ApiKey::OffsetCommit,
            code: KafkaCode::RebalanceInProgress
                | KafkaCode::IllegalGeneration
                | KafkaCode::UnknownMemberId
                | KafkaCode::FencedInstanceId,
            ..
        }
    )
}

/// The shared record of one test; cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct Checker {
    state: Arc<Mutex<State>>,
    started: Instant,
}

impl Default for Checker {
    fn default() -> Checker {
        Checker {
            state: Arc::default(),
            started: Instant::now(),
        }
    }
}

#[derive(Default)]
struct State {
    produced: BTreeSet<u64>,
    acked: BTreeSet<u64>,
    produce_failures: usize,
    deliveries: Vec<Delivery>,
    /// The id first seen at each offset.
    ids: HashMap<(TopicPartition, i64), u64>,
    delivered_ids: BTreeSet<u64>,
    /// Highest successful commit per partition, as consumers reported it.
    committed: BTreeMap<TopicPartition, i64>,
    commits: usize,
    failed_commits: usize,
    regressions: Vec<String>,
    corrupt: Vec<String>,
    unassigned: usize,
    /// What [`MemberLog::holds`] found, for the examples.
    mismatches: Vec<String>,
    reordered: Vec<String>,
    errors: Vec<String>,
    samples: usize,
    next_run: u64,
    incarnations: usize,
}

#[derive(Debug, Clone)]
struct Delivery {
    tp: TopicPartition,
    offset: i64,
    member: String,
    run: u64,
    floor: i64,
    committed: bool,
}

/// What [`Checker::report`] found; see the module docs for each count.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Acknowledged records.
    pub records: usize,
    /// Records whose send or flush failed (they may or may not be in the log).
    pub produce_failures: usize,
    /// Connection resets injected (set by the test from its proxies).
    pub resets: u64,
    pub deliveries: usize,
    pub distinct: usize,
    pub redelivered: usize,
    pub log_duplicates: usize,
    pub lost: usize,
    pub duplicated: usize,
    pub reordered: usize,
    pub commit_regressions: usize,
    pub corrupt: usize,
    pub unassigned: usize,
    pub commits: usize,
    pub failed_commits: usize,
    pub samples: usize,
    pub incarnations: usize,
    pub errors: Vec<String>,
    /// Up to ten examples of what went wrong, for the failure message.
    pub examples: Vec<String>,
}

impl Report {
    /// Whether every count that must be zero is.
    pub fn is_clean(&self) -> bool {
        self.lost == 0
            && self.duplicated == 0
            && self.reordered == 0
            && self.commit_regressions == 0
            && self.corrupt == 0
            && self.unassigned == 0
            && self.errors.is_empty()
    }

    /// Writes the figures to stderr directly, not through `eprintln!`, so that they show in the
    /// output of a passing test too (the test harness captures only the print macros).
    pub fn print(&self, scenario: &str) {
        let _ = writeln!(std::io::stderr(), "chaos [{scenario}]: {self}");
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "records {}, resets {}, lost {}, duplicated {}, reordered {}, commit regressions {}; \
             corrupt {}, unassigned {}, errors {}; deliveries {} ({} distinct, {} redelivered in \
             failed-commit windows), {} log duplicates, {} produce failures, commits {} ok / {} \
             failed, {} committed-offset samples, {} incarnations",
            self.records,
            self.resets,
            self.lost,
            self.duplicated,
            self.reordered,
            self.commit_regressions,
            self.corrupt,
            self.unassigned,
            self.errors.len(),
            self.deliveries,
            self.distinct,
            self.redelivered,
            self.log_duplicates,
            self.produce_failures,
            self.commits,
            self.failed_commits,
            self.samples,
            self.incarnations
        )?;
        for e in &self.errors {
            write!(f, "\n  error: {e}")?;
        }
        for e in &self.examples {
            write!(f, "\n  {e}")?;
        }
        Ok(())
    }
}

/// A poisoned lock means a consumer thread panicked; its record is still worth reporting.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Checker {
    pub fn new() -> Checker {
        Checker::default()
    }

    /// The value of the record with `id`.
    pub fn value(id: u64) -> String {
        id.to_string()
    }

    /// The id a record carries, if its value is one.
    pub fn id_of(record: &ConsumerRecord) -> Option<u64> {
        std::str::from_utf8(record.value.as_deref()?).ok()?.parse().ok()
    }

    /// `ids` are about to be sent: an id delivered but never produced is corrupt.
    pub fn produced(&self, ids: impl IntoIterator<Item = u64>) {
        lock(&self.state).produced.extend(ids);
    }

    /// `ids` were acknowledged (a `flush` after their `send`s returned `Ok`).
    pub fn acked(&self, ids: impl IntoIterator<Item = u64>) {
        let mut s = lock(&self.state);
        for id in ids {
            s.produced.insert(id);
            s.acked.insert(id);
        }
    }

    /// `n` records were sent but their send or flush failed: not acknowledged.
    pub fn produce_failed(&self, n: usize) {
        lock(&self.state).produce_failures += n;
    }

    /// Records an error a test treats as a failure (and reports with the figures).
    pub fn error(&self, what: impl fmt::Display) {
        let at = self.started.elapsed();
        lock(&self.state).errors.push(format!("at {at:.1?}: {what}"));
    }

    /// The log of a new consumer incarnation named `name` (its instance id, say).
    pub fn member(&self, name: &str) -> MemberLog {
        lock(&self.state).incarnations += 1;
        MemberLog {
            checker: self.clone(),
            name: name.to_string(),
            runs: BTreeMap::new(),
            uncommitted: Vec::new(),
        }
    }

    /// Acknowledged records.
    pub fn acked_count(&self) -> usize {
        lock(&self.state).acked.len()
    }

    /// Whether every acknowledged record has been delivered at least once.
    pub fn consumed_all(&self) -> bool {
        let s = lock(&self.state);
        s.acked.is_subset(&s.delivered_ids)
    }

    /// Whether every delivery so far has been committed (a test that means to start a fault
    /// only after the consumer's commits went through waits for this).
    pub fn all_committed(&self) -> bool {
        lock(&self.state).deliveries.iter().all(|d| d.committed)
    }

    /// Distinct acknowledged ids delivered so far.
    pub fn consumed(&self) -> usize {
        let s = lock(&self.state);
        s.acked.intersection(&s.delivered_ids).count()
    }

    /// Distinct offsets delivered, per partition.
    pub fn delivered_offsets(&self) -> BTreeMap<TopicPartition, BTreeSet<i64>> {
        let s = lock(&self.state);
        let mut out: BTreeMap<TopicPartition, BTreeSet<i64>> = BTreeMap::new();
        for (tp, o) in s.ids.keys() {
            out.entry(tp.clone()).or_default().insert(*o);
        }
        out
    }

    /// Every id delivered at least once.
    pub fn delivered_ids(&self) -> BTreeSet<u64> {
        lock(&self.state).delivered_ids.clone()
    }

    /// Deliveries so far (with redeliveries).
    pub fn deliveries(&self) -> usize {
        lock(&self.state).deliveries.len()
    }

    /// Reads `group`'s committed offsets every 100 ms (through `client`, which should reach the
    /// brokers directly, not through a faulty proxy) until the returned sampler is stopped; a
    /// committed offset that goes down is a commit regression. Failed reads (a broker being
    /// killed) are skipped.
    pub fn sample_committed(&self, client: Client, group: &str) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let latest = Arc::new(Mutex::new(BTreeMap::new()));
        let (checker, group, stop2, latest2) =
            (self.clone(), group.to_string(), stop.clone(), latest.clone());
        let handle = std::thread::Builder::new()
            .name("chaos-sampler".into())
            .spawn(move || {
                let admin = client.admin();
                while !stop2.load(Ordering::SeqCst) {
                    if let Ok(offsets) = admin.group_offsets(&group) {
                        let mut s = lock(&checker.state);
                        s.samples += 1;
                        let mut latest = lock(&latest2);
                        for (tp, offset) in offsets {
                            if let Some(before) = latest.insert(tp.clone(), offset).filter(|b| *b > offset) {
                                s.regressions
                                    .push(format!("{tp}: sampled committed offset {before}, then {offset}"));
                            }
                        }
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
            .expect("spawn the committed-offset sampler");
        Sampler {
            stop,
            latest,
            handle: Some(handle),
        }
    }

    /// The counts; see the module docs.
    pub fn report(&self) -> Report {
        let s = lock(&self.state);
        let mut examples: Vec<String> = Vec::new();
        let mut by_record: BTreeMap<(&TopicPartition, i64), Vec<&Delivery>> = BTreeMap::new();
        for d in &s.deliveries {
            by_record.entry((&d.tp, d.offset)).or_default().push(d);
        }
        let mut duplicated = 0;
        for ((tp, offset), ds) in &by_record {
            let mut committed_before = false;
            for d in ds {
                let below_floor = d.offset < d.floor;
                let second_commit = d.committed && committed_before;
                if below_floor || second_commit {
                    duplicated += 1;
                    if examples.len() < 10 {
                        let why = if below_floor {
                            format!("below its run's floor {}", d.floor)
                        } else {
                            "committed a second time".to_string()
                        };
                        examples.push(format!(
                            "duplicated: {tp}@{offset} by {} (run {}): {why}; deliveries: {:?}",
                            d.member,
                            d.run,
                            ds.iter()
                                .map(|d| (d.member.as_str(), d.run, d.committed))
                                .collect::<Vec<_>>()
                        ));
                    }
                }
                committed_before |= d.committed;
            }
        }
        let lost: Vec<u64> = s.acked.difference(&s.delivered_ids).copied().collect();
        if !lost.is_empty() {
            examples.push(format!(
                "lost: {} ids, the first {:?}",
                lost.len(),
                &lost[..lost.len().min(10)]
            ));
        }
        let mut offsets_per_id: HashMap<u64, usize> = HashMap::new();
        for id in s.ids.values() {
            *offsets_per_id.entry(*id).or_default() += 1;
        }
        for list in [&s.reordered, &s.regressions, &s.corrupt, &s.mismatches] {
            examples.extend(list.iter().take(3).cloned());
        }
        Report {
            records: s.acked.len(),
            produce_failures: s.produce_failures,
            resets: 0,
            deliveries: s.deliveries.len(),
            distinct: by_record.len(),
            redelivered: s.deliveries.len() - by_record.len() - duplicated,
            log_duplicates: offsets_per_id.values().map(|n| n - 1).sum(),
            lost: lost.len(),
            duplicated,
            reordered: s.reordered.len(),
            commit_regressions: s.regressions.len(),
            corrupt: s.corrupt.len(),
            unassigned: s.unassigned,
            commits: s.commits,
            failed_commits: s.failed_commits,
            samples: s.samples,
            incarnations: s.incarnations,
            errors: s.errors.clone(),
            examples,
        }
    }
}

/// The committed-offset sampler of [`Checker::sample_committed`]; stopped by [`Sampler::stop`]
/// or when dropped.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    latest: Arc<Mutex<BTreeMap<TopicPartition, i64>>>,
    handle: Option<JoinHandle<()>>,
}

impl Sampler {
    /// The latest sampled committed offset of every partition that has one.
    pub fn latest(&self) -> BTreeMap<TopicPartition, i64> {
        lock(&self.latest).clone()
    }

    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.halt();
    }
}

/// One run: see the module docs.
#[derive(Debug)]
struct Run {
    id: u64,
    floor: i64,
    last: Option<i64>,
    /// What the consumer takes to be committed: the broker's answer at the assignment, then its
    /// own successful commits. A commit sends only positions that differ from it.
    known_committed: Option<i64>,
}

/// What one consumer incarnation did, as its application loop reports it.
pub struct MemberLog {
    checker: Checker,
    name: String,
    runs: BTreeMap<TopicPartition, Run>,
    /// Indices (in `State::deliveries`) of this incarnation's deliveries not yet committed in
    /// their run.
    uncommitted: Vec<usize>,
}

impl MemberLog {
    /// The poll returned an assignment of `partitions`; `committed` is what the consumer's
    /// `committed()` said for them right after. Starts a new run on each.
    pub fn assigned(
        &mut self,
        partitions: &[TopicPartition],
        committed: &BTreeMap<TopicPartition, Option<i64>>,
    ) {
        self.runs.clear();
        self.uncommitted.clear();
        self.assigned_more(partitions, committed);
    }

    /// [`assigned`](Self::assigned) for partitions added to those kept (cooperative
    /// rebalancing): the kept ones' runs go on.
    pub fn assigned_more(
        &mut self,
        partitions: &[TopicPartition],
        committed: &BTreeMap<TopicPartition, Option<i64>>,
    ) {
        let mut s = lock(&self.checker.state);
        for tp in partitions {
            let seen = s.committed.get(tp).copied();
            let broker = committed.get(tp).copied().flatten();
            if let Some(seen) = seen.filter(|seen| broker.map_or(true, |b| b < *seen)) {
                s.regressions.push(format!(
                    "{tp}: {} was assigned it with committed offset {broker:?}, after a commit of \
                     {seen} had succeeded",
                    self.name
                ));
            }
            let floor = broker.unwrap_or(0).max(seen.unwrap_or(0));
            s.next_run += 1;
            let id = s.next_run;
            self.runs.insert(
                tp.clone(),
                Run {
                    id,
                    floor,
                    last: None,
                    known_committed: broker,
                },
            );
        }
    }

    /// The poll revoked every partition (eager rebalance): the runs end.
    pub fn revoked(&mut self) {
        self.runs.clear();
        self.uncommitted.clear();
    }

    /// A cooperative rebalance revoked `partitions` and only them: their runs end, and their
    /// deliveries not committed yet stay so (no later commit of this consumer covers them).
    pub fn revoked_some(&mut self, partitions: &[TopicPartition]) {
        let s = lock(&self.checker.state);
        for tp in partitions {
            self.runs.remove(tp);
        }
        self.uncommitted
            .retain(|&i| !partitions.contains(&s.deliveries[i].tp));
    }

    /// After a poll's events were logged: `fetching` is what the consumer says it is assigned
    /// now ([`Consumer::assignment`](kafka_group::Consumer::assignment)). A partition in one
    /// and not the other is counted as unassigned, with an example.
    pub fn holds(&mut self, fetching: &[TopicPartition]) {
        let fetching: BTreeSet<&TopicPartition> = fetching.iter().collect();
        let held: BTreeSet<&TopicPartition> = self.runs.keys().collect();
        if fetching == held {
            return;
        }
        let mut s = lock(&self.checker.state);
        s.unassigned += fetching.symmetric_difference(&held).count();
        let at = self.checker.started.elapsed();
        let only_fetched: Vec<String> = fetching.difference(&held).map(|tp| tp.to_string()).collect();
        let only_held: Vec<String> = held.difference(&fetching).map(|tp| tp.to_string()).collect();
        let mut why = Vec::new();
        if !only_fetched.is_empty() {
            why.push(format!("fetches {only_fetched:?} that no Assigned reported"));
        }
        if !only_held.is_empty() {
            why.push(format!(
                "its events say it holds {only_held:?}, which it does not fetch"
            ));
        }
        s.mismatches
            .push(format!("at {at:.1?}: {} {}", self.name, why.join("; ")));
    }

    /// The poll returned `records`.
    pub fn delivered(&mut self, records: &[ConsumerRecord]) {
        let mut s = lock(&self.checker.state);
        for r in records {
            let tp = r.topic_partition();
            let id = Checker::id_of(r);
            match id {
                Some(id) if s.produced.contains(&id) => {
                    s.delivered_ids.insert(id);
                    if let Some(first) = s.ids.insert((tp.clone(), r.offset), id).filter(|f| *f != id) {
                        s.corrupt
                            .push(format!("{tp}@{}: id {first}, later id {id}", r.offset));
                    }
                }
                Some(id) => s
                    .corrupt
                    .push(format!("{tp}@{}: id {id} was never produced", r.offset)),
                None => s
                    .corrupt
                    .push(format!("{tp}@{}: value {:?} is no id", r.offset, r.value)),
            }
            let Some(run) = self.runs.get_mut(&tp) else {
                s.unassigned += 1;
                continue;
            };
            if let Some(last) = run.last.filter(|l| *l >= r.offset) {
                s.reordered.push(format!(
                    "{tp}: {} delivered offset {} after {last} in run {}",
                    self.name, r.offset, run.id
                ));
            }
            run.last = Some(r.offset);
            self.uncommitted.push(s.deliveries.len());
            s.deliveries.push(Delivery {
                tp,
                offset: r.offset,
                member: self.name.clone(),
                run: run.id,
                floor: run.floor,
                committed: false,
            });
        }
    }

    /// `commit()` returned `Ok`: every position was committed. Positions equal to what the
    /// consumer knew to be committed were not sent (a commit after an eviction sends nothing
    /// when everything was committed before it), so they are no new commit.
    pub fn commit_ok(&mut self) {
        let mut s = lock(&self.checker.state);
        s.commits += 1;
        for i in self.uncommitted.drain(..) {
            s.deliveries[i].committed = true;
        }
        for (tp, run) in &mut self.runs {
            let Some(last) = run.last else { continue };
            let offset = last + 1;
            if run.known_committed == Some(offset) {
                continue;
            }
            run.known_committed = Some(offset);
            let before = s.committed.insert(tp.clone(), offset);
            if let Some(before) = before.filter(|b| *b > offset) {
                s.regressions.push(format!(
                    "{tp}: {} committed {offset} after a commit of {before} had succeeded",
                    self.name
                ));
                s.committed.insert(tp.clone(), before);
            }
        }
    }

    /// `commit()` failed: the deliveries since the last successful commit stay uncommitted.
    pub fn commit_failed(&mut self) {
        lock(&self.checker.state).failed_commits += 1;
    }

    /// Records an error of this consumer that the test treats as a failure.
    pub fn error(&self, what: impl fmt::Display) {
        self.checker.error(format!("{}: {what}", self.name));
    }
}

/// The checker's own rules, without a broker: each count moves on what it is meant to catch and
/// stays at zero on what is allowed.
#[cfg(test)]
mod tests {
    use super::*;

    const TOPIC: &str = "t";

    fn tp() -> TopicPartition {
        TopicPartition::new(TOPIC, 0)
    }

    /// Records at `offsets` of partition 0 whose values are the ids `offset + 100`.
    fn records(offsets: &[i64]) -> Vec<ConsumerRecord> {
        offsets
            .iter()
            .map(|&offset| ConsumerRecord {
                topic: TOPIC.into(),
                partition: 0,
                offset,
                timestamp: -1,
                key: None,
                value: Some(Checker::value(offset as u64 + 100).into()),
                headers: Vec::new(),
                leader_epoch: None,
            })
            .collect()
    }

    fn checker(n: u64) -> Checker {
        let c = Checker::new();
        c.acked(100..100 + n);
        c
    }

    fn assigned(log: &mut MemberLog, committed: Option<i64>) {
        log.assigned(&[tp()], &BTreeMap::from([(tp(), committed)]));
    }

    #[test]
    fn a_clean_run_is_clean() {
        let c = checker(4);
        let mut m = c.member("a");
        assigned(&mut m, None);
        m.delivered(&records(&[0, 1]));
        m.commit_ok();
        m.delivered(&records(&[2, 3]));
        m.commit_ok();
        let r = c.report();
        assert!(r.is_clean(), "{r}");
        assert_eq!((r.records, r.deliveries, r.distinct, r.redelivered), (4, 4, 4, 0));
        assert!(c.consumed_all());
    }

    #[test]
    fn an_acknowledged_record_never_delivered_is_lost() {
        let c = checker(3);
        let mut m = c.member("a");
        assigned(&mut m, None);
        m.delivered(&records(&[0, 2]));
        m.commit_ok();
        assert_eq!(c.report().lost, 1);
        assert!(!c.consumed_all());
    }

    #[test]
    fn redelivery_in_a_failed_commits_window_is_allowed() {
        let c = checker(2);
        let mut a = c.member("a");
        assigned(&mut a, None);
        a.delivered(&records(&[0, 1]));
        a.commit_failed();
        let mut b = c.member("b");
        assigned(&mut b, None);
        b.delivered(&records(&[0, 1]));
        b.commit_ok();
        let r = c.report();
        assert!(r.is_clean(), "{r}");
        assert_eq!((r.redelivered, r.failed_commits), (2, 1));
    }

    #[test]
    fn a_later_successful_commit_covers_earlier_failed_ones() {
        let c = checker(2);
        let mut a = c.member("a");
        assigned(&mut a, None);
        a.delivered(&records(&[0]));
        a.commit_failed();
        a.delivered(&records(&[1]));
        a.commit_ok();
        // Offset 0 was committed by the second commit: delivering it again is a duplicate.
        let mut b = c.member("b");
        assigned(&mut b, Some(0));
        b.delivered(&records(&[0]));
        let r = c.report();
        assert_eq!(r.duplicated, 1, "{r}");
        // The broker said 0 after a commit of 2 had succeeded.
        assert_eq!(r.commit_regressions, 1, "{r}");
    }

    #[test]
    fn redelivery_below_a_successful_commit_is_duplicated() {
        let c = checker(2);
        let mut a = c.member("a");
        assigned(&mut a, None);
        a.delivered(&records(&[0, 1]));
        a.commit_ok();
        let mut b = c.member("b");
        assigned(&mut b, Some(2));
        b.delivered(&records(&[1]));
        let r = c.report();
        assert_eq!((r.duplicated, r.commit_regressions), (1, 0), "{r}");
    }

    #[test]
    fn two_committed_deliveries_of_one_record_are_duplicated() {
        let c = checker(1);
        let (mut a, mut b) = (c.member("a"), c.member("b"));
        assigned(&mut a, None);
        assigned(&mut b, None);
        a.delivered(&records(&[0]));
        a.commit_ok();
        b.delivered(&records(&[0]));
        b.commit_ok();
        assert_eq!(c.report().duplicated, 1);
    }

    #[test]
    fn a_run_that_goes_back_is_reordered() {
        let c = checker(3);
        let mut a = c.member("a");
        assigned(&mut a, None);
        a.delivered(&records(&[0, 2, 1]));
        assert_eq!(c.report().reordered, 1);
        // A new assignment may start lower (from the committed offset): a new run.
        let c = checker(3);
        let mut a = c.member("a");
        assigned(&mut a, None);
        a.delivered(&records(&[0, 1]));
        assigned(&mut a, None);
        a.delivered(&records(&[0, 1, 2]));
        let r = c.report();
        assert!(r.is_clean(), "{r}");
    }

    #[test]
    fn a_commit_with_nothing_new_commits_nothing() {
        let c = checker(4);
        let mut a = c.member("a");
        assigned(&mut a, None);
        a.delivered(&records(&[0, 1]));
        a.commit_ok();
        // Another member takes the partition over and commits further...
        let mut b = c.member("b");
        assigned(&mut b, Some(2));
        b.delivered(&records(&[2, 3]));
        b.commit_ok();
        // ... and the first, evicted, commits after its revocation: nothing to send.
        a.commit_ok();
        let r = c.report();
        assert!(r.is_clean(), "{r}");
        // A zombie that delivered one more and had its commit of 3 accepted: a regression.
        a.delivered(&records(&[2]));
        a.commit_ok();
        assert_eq!(c.report().commit_regressions, 1);
    }

    #[test]
    fn commit_regressions_are_counted() {
        let c = checker(3);
        let mut a = c.member("a");
        assigned(&mut a, None);
        a.delivered(&records(&[0, 1, 2]));
        a.commit_ok();
        let mut b = c.member("b");
        // The broker forgot the commit of 3.
        assigned(&mut b, None);
        let r = c.report();
        assert_eq!(r.commit_regressions, 1, "{r}");
    }

    #[test]
    fn corrupt_and_unassigned_deliveries_are_counted() {
        let c = checker(1);
        let mut a = c.member("a");
        a.delivered(&records(&[0]));
        assert_eq!(c.report().unassigned, 1);
        assigned(&mut a, None);
        // An id nobody produced, and a value that is no id.
        a.delivered(&records(&[5]));
        let mut bad = records(&[6]);
        bad[0].value = Some("x".into());
        a.delivered(&bad);
        assert_eq!(c.report().corrupt, 2);
    }

    #[test]
    fn a_poll_that_leaves_the_events_and_the_fetched_partitions_apart_is_unassigned() {
        let c = checker(1);
        let mut a = c.member("a");
        assigned(&mut a, None);
        a.holds(&[tp()]);
        assert_eq!(c.report().unassigned, 0);
        // Fetched, never reported as assigned.
        a.holds(&[tp(), TopicPartition::new(TOPIC, 1)]);
        // Reported as revoked, still fetched.
        a.revoked();
        a.holds(&[tp()]);
        let r = c.report();
        assert_eq!(r.unassigned, 2, "{r}");
        assert!(r.to_string().contains("no Assigned reported"), "{r}");
    }

    #[test]
    fn errors_make_a_report_unclean() {
        let c = checker(0);
        c.member("a").error("poll: connection reset");
        let r = c.report();
        assert!(!r.is_clean());
        assert!(r.to_string().contains("poll: connection reset"), "{r}");
    }
}
