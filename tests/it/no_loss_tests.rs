//! No record lost, none re-delivered below a committed offset: 100,000 records consumed by
//! three static members that commit after every poll while the test restarts them at random
//! (seeded, so a failure replays): within the session timeout, beyond it, and by starting a
//! duplicate of a running instance id, which must fence the older process.

use crate::consumer_tests::builder;
use crate::group_tests::{client, topic_with_partitions};
use crate::support::{broker, unique_name, wait_for};
use kafka_group::producer::{key_partition, ProducerRecord};
use kafka_group::protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_group::protocol::messages::OffsetFetchRequest;
use kafka_group::protocol::ApiKey;
use kafka_group::{Client, Consumer, Error, KafkaCode};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const RECORDS: usize = 100_000;
const PARTITIONS: i32 = 6;
const SESSION: Duration = Duration::from_secs(4);
const MAX_POLL_RECORDS: usize = 500;
/// While the restarts run, each poll's "processing" takes this long, so that consuming lasts
/// longer than the restart plan and every restart lands mid-stream.
const PROCESSING: Duration = Duration::from_millis(500);
const SEED: u64 = 0x6e6f_6c6f_7373;

/// One delivery of a record to the application.
#[derive(Debug, Clone)]
struct Delivery {
    partition: i32,
    offset: i64,
    seq: u64,
    incarnation: usize,
    /// The partition's committed offset when this incarnation was assigned it.
    floor: Option<i64>,
    /// Whether the commit after the poll that returned it succeeded.
    committed: bool,
}

#[derive(Debug, Default)]
struct Log {
    deliveries: Vec<Delivery>,
    distinct: BTreeSet<(i32, i64)>,
    commits: usize,
    rejected_commits: usize,
}

#[derive(Debug, PartialEq, Eq)]
enum End {
    Closed,
    Crashed,
    Fenced,
    Failed(String),
}

const RUN: u8 = 0;
const CLOSE: u8 = 1;
/// Stop after processing a poll's records without committing them and without closing, as
/// a crashed process would.
const CRASH: u8 = 2;

struct Ctx {
    client: Client,
    group: String,
    topic: String,
    log: Arc<Mutex<Log>>,
    throttle: Arc<AtomicBool>,
    incarnations: AtomicUsize,
}

struct Slot {
    instance: String,
    incarnation: usize,
    stop: Arc<AtomicU8>,
    handle: JoinHandle<End>,
}

impl Slot {
    fn start(ctx: &Ctx, instance: &str) -> Slot {
        let incarnation = ctx.incarnations.fetch_add(1, Ordering::SeqCst);
        let consumer = builder(&ctx.client, &ctx.group, &ctx.topic)
            .group_instance_id(instance)
            .session_timeout(SESSION)
            .max_poll_records(MAX_POLL_RECORDS)
            .build()
            .unwrap();
        let stop = Arc::new(AtomicU8::new(RUN));
        let (log, throttle, stop2) = (ctx.log.clone(), ctx.throttle.clone(), stop.clone());
        let handle = std::thread::spawn(move || run(consumer, incarnation, &log, &throttle, &stop2));
        Slot {
            instance: instance.to_string(),
            incarnation,
            stop,
            handle,
        }
    }

    fn stop(self, how: u8) -> End {
        self.stop.store(how, Ordering::SeqCst);
        self.handle.join().unwrap()
    }
}

/// The application loop of one consumer process: poll, process, commit.
fn run(mut c: Consumer, incarnation: usize, log: &Mutex<Log>, throttle: &AtomicBool, stop: &AtomicU8) -> End {
    let mut floors: HashMap<i32, Option<i64>> = HashMap::new();
    loop {
        if stop.load(Ordering::SeqCst) == CLOSE {
            return match c.close() {
                Ok(()) => End::Closed,
                Err(e) => End::Failed(format!("close: {e}")),
            };
        }
        let polled = match c.poll(Duration::from_millis(200)) {
            Ok(p) => p,
            Err(Error::Fenced { .. }) => return End::Fenced,
            Err(e) => return End::Failed(format!("poll: {e}")),
        };
        if polled.revoked().is_some() {
            // Each poll's records were committed (or the commit rejected) right after they were
            // processed, so there is nothing left to commit before the rejoin.
            floors.clear();
            continue;
        }
        // The committed offsets this incarnation starts from: no delivery may go below them.
        if let Some(assigned) = polled.assigned() {
            let assigned = assigned.to_vec();
            match c.committed(&assigned) {
                Ok(map) => floors = map.into_iter().map(|(tp, o)| (tp.partition, o)).collect(),
                Err(Error::Fenced { .. }) => return End::Fenced,
                Err(e) => return End::Failed(format!("committed: {e}")),
            }
        }
        if polled.records.is_empty() {
            continue;
        }
        let first = {
            let mut log = log.lock().unwrap();
            let first = log.deliveries.len();
            for r in &polled.records {
                let seq = std::str::from_utf8(r.value.as_deref().unwrap_or_default())
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(u64::MAX);
                log.distinct.insert((r.partition, r.offset));
                log.deliveries.push(Delivery {
                    partition: r.partition,
                    offset: r.offset,
                    seq,
                    incarnation,
                    // Nothing committed: the consumer starts at the log start (earliest), 0 here.
                    floor: floors.get(&r.partition).map(|o| o.unwrap_or(0)),
                    committed: false,
                });
            }
            first
        };
        if throttle.load(Ordering::SeqCst) {
            std::thread::sleep(PROCESSING);
        }
        if stop.load(Ordering::SeqCst) == CRASH {
            drop(c);
            return End::Crashed;
        }
        match c.commit() {
            Ok(()) => {
                let mut log = log.lock().unwrap();
                log.commits += 1;
                for d in &mut log.deliveries[first..first + polled.records.len()] {
                    d.committed = true;
                }
            }
            // The generation ended (rebalance) or a newer process took the instance id: the
            // records since the last commit go to whoever owns the partitions next.
            Err(Error::Kafka {
                api: ApiKey::OffsetCommit,
                code:
                    KafkaCode::RebalanceInProgress
                    | KafkaCode::IllegalGeneration
                    | KafkaCode::UnknownMemberId
                    | KafkaCode::FencedInstanceId,
                ..
            }) => log.lock().unwrap().rejected_commits += 1,
            Err(Error::Fenced { .. }) => return End::Fenced,
            Err(e) => return End::Failed(format!("commit: {e}")),
        }
    }
}

/// Reads the group's committed offsets every 100 ms straight from the coordinator into
/// `latest` and notes any partition whose committed offset went down.
fn sample_committed(
    bootstrap: String,
    group: String,
    topic: String,
    stop: Arc<AtomicBool>,
    latest: Arc<Mutex<BTreeMap<i32, i64>>>,
) -> JoinHandle<(usize, Vec<String>)> {
    std::thread::spawn(move || {
        // v7 names the group and topics directly (v8+ batches groups).
        let client = Client::builder()
            .bootstrap_servers(&bootstrap)
            .client_id("no-loss-sampler")
            .max_api_version(ApiKey::OffsetFetch, 7)
            .build()
            .unwrap();
        let mut violations = Vec::new();
        let mut samples = 0;
        while !stop.load(Ordering::SeqCst) {
            let resp = client.find_coordinator(&group).and_then(|coordinator| {
                client.send_to(coordinator.id, |_| OffsetFetchRequest {
                    group_id: group.as_str().into(),
                    topics: Some(vec![OffsetFetchRequestTopic {
                        name: topic.as_str().into(),
                        partition_indexes: (0..PARTITIONS).collect(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                })
            });
            if let Ok(resp) = resp {
                if resp.error_code == 0 {
                    samples += 1;
                    for p in resp.topics.iter().flat_map(|t| &t.partitions) {
                        if p.error_code != 0 || p.committed_offset < 0 {
                            continue;
                        }
                        let before = latest
                            .lock()
                            .unwrap()
                            .insert(p.partition_index, p.committed_offset);
                        if let Some(before) = before.filter(|b| *b > p.committed_offset) {
                            violations.push(format!(
                                "partition {}: committed {before} then {}",
                                p.partition_index, p.committed_offset
                            ));
                        }
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        (samples, violations)
    })
}

/// splitmix64: a reproducible stream without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Restart {
    WithinSession,
    BeyondSession,
    Duplicate,
}

fn processed(ctx: &Ctx) -> usize {
    ctx.log.lock().unwrap().distinct.len()
}

#[test]
fn static_members_restarted_at_random_lose_nothing() {
    let started = Instant::now();
    let b = broker::shared();
    let client = client(b.bootstrap());
    let topic = topic_with_partitions(&client, PARTITIONS);
    let group = unique_name("no-loss");

    // Produce: values carry a sequence number, keys spread the records over the partitions.
    let key = |seq: usize| format!("key-{}", seq % 1009);
    let mut producer = client.producer().batch_size(256 * 1024).build().unwrap();
    for seq in 0..RECORDS {
        producer
            .send(ProducerRecord::new(&topic, format!("{seq}")).key(key(seq)))
            .unwrap();
    }
    producer.close().unwrap();
    let mut expected: BTreeMap<i32, i64> = BTreeMap::new();
    for seq in 0..RECORDS {
        *expected
            .entry(key_partition(key(seq).as_bytes(), PARTITIONS))
            .or_default() += 1;
    }
    let produced_in = started.elapsed();

    let ctx = Ctx {
        client: client.clone(),
        group: group.clone(),
        topic: topic.clone(),
        log: Arc::new(Mutex::new(Log::default())),
        throttle: Arc::new(AtomicBool::new(true)),
        incarnations: AtomicUsize::new(0),
    };
    let sampler_stop = Arc::new(AtomicBool::new(false));
    let latest = Arc::new(Mutex::new(BTreeMap::new()));
    let sampler = sample_committed(
        b.bootstrap().to_string(),
        group.clone(),
        topic.clone(),
        sampler_stop.clone(),
        latest.clone(),
    );
    let mut slots: Vec<Slot> = ["m0", "m1", "m2"].iter().map(|i| Slot::start(&ctx, i)).collect();

    // The plan: every kind of restart at least once, in a seeded random order, on random
    // members, after random pauses.
    let mut rng = Rng(SEED);
    let mut plan = vec![
        Restart::WithinSession,
        Restart::WithinSession,
        Restart::WithinSession,
        Restart::WithinSession,
        Restart::BeyondSession,
        Restart::BeyondSession,
        Restart::Duplicate,
        Restart::Duplicate,
        Restart::Duplicate,
    ];
    for i in (1..plan.len()).rev() {
        plan.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut crashes = 0;
    let mut fenced = 0;
    for kind in plan {
        std::thread::sleep(Duration::from_millis(1000 + rng.below(1500)));
        let i = rng.below(slots.len() as u64) as usize;
        let how = if rng.below(2) == 0 { CLOSE } else { CRASH };
        let at = processed(&ctx);
        match kind {
            Restart::WithinSession | Restart::BeyondSession => {
                let slot = slots.remove(i);
                let instance = slot.instance.clone();
                let end = slot.stop(how);
                let expected_end = if how == CLOSE { End::Closed } else { End::Crashed };
                assert_eq!(end, expected_end, "{instance} stopping");
                crashes += usize::from(how == CRASH);
                if kind == Restart::BeyondSession {
                    std::thread::sleep(SESSION + Duration::from_secs(1));
                }
                slots.insert(i, Slot::start(&ctx, &instance));
            }
            Restart::Duplicate => {
                let newer = Slot::start(&ctx, &slots[i].instance);
                let older = std::mem::replace(&mut slots[i], newer);
                wait_for("the older process to be fenced", Duration::from_secs(30), || {
                    older.handle.is_finished()
                });
                let (instance, incarnation) = (older.instance.clone(), older.incarnation);
                assert_eq!(
                    older.stop(CLOSE),
                    End::Fenced,
                    "{instance} (incarnation {incarnation})"
                );
                fenced += 1;
            }
        }
        *counts.entry(format!("{kind:?}")).or_default() += 1;
        eprintln!(
            "{:>6.1?}: {kind:?} of {} ({}) with {at} of {RECORDS} records processed",
            started.elapsed(),
            slots[i].instance,
            if kind == Restart::Duplicate {
                "duplicate"
            } else if how == CLOSE {
                "close"
            } else {
                "crash"
            }
        );
        assert!(
            slots.iter().all(|s| !s.handle.is_finished()),
            "a consumer stopped on its own"
        );
    }
    let at_plan_end = processed(&ctx);
    ctx.throttle.store(false, Ordering::SeqCst);

    wait_for("every record processed", Duration::from_secs(60), || {
        assert!(
            slots.iter().all(|s| !s.handle.is_finished()),
            "a consumer stopped on its own"
        );
        processed(&ctx) >= RECORDS
    });
    let consumed_in = started.elapsed();
    // The last polls' commits land shortly after their records were processed.
    wait_for("every offset committed", Duration::from_secs(30), || {
        *latest.lock().unwrap() == expected
    });
    for slot in slots {
        let instance = slot.instance.clone();
        assert_eq!(slot.stop(CLOSE), End::Closed, "{instance}");
    }
    sampler_stop.store(true, Ordering::SeqCst);
    let (samples, violations) = sampler.join().unwrap();

    let log = ctx.log.lock().unwrap();
    // Every record, by offset and by the sequence number it carries.
    let by_partition: BTreeMap<i32, i64> = log.distinct.iter().fold(BTreeMap::new(), |mut m, (p, _)| {
        *m.entry(*p).or_default() += 1;
        m
    });
    assert_eq!(by_partition, expected, "records per partition");
    for (p, n) in &expected {
        let offsets: Vec<i64> = log.distinct.range((*p, 0)..(*p, i64::MAX)).map(|x| x.1).collect();
        assert_eq!(offsets, (0..*n).collect::<Vec<_>>(), "offsets of partition {p}");
    }
    let seqs: BTreeSet<u64> = log.deliveries.iter().map(|d| d.seq).collect();
    assert_eq!(seqs, (0..RECORDS as u64).collect(), "sequence numbers");
    // No delivery below the committed offset its consumer started from: re-deliveries are
    // confined to the uncommitted windows.
    for d in &log.deliveries {
        let floor = d.floor.unwrap_or_else(|| panic!("{d:?}: partition not assigned"));
        assert!(
            d.offset >= floor,
            "{d:?} delivered below the committed offset {floor}"
        );
    }
    // A record whose commit succeeded is never delivered again, so at most one delivery of a
    // record can have been committed.
    let mut committed_deliveries: BTreeMap<(i32, i64), usize> = BTreeMap::new();
    for d in log.deliveries.iter().filter(|d| d.committed) {
        *committed_deliveries.entry((d.partition, d.offset)).or_default() += 1;
    }
    let committed_once = committed_deliveries.len();
    let twice: Vec<_> = committed_deliveries.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "committed more than once: {:?}",
        &twice[..twice.len().min(10)]
    );
    assert!(
        violations.is_empty(),
        "committed offsets went down: {violations:?}"
    );
    assert!(samples > 10, "only {samples} committed-offset samples");

    let duplicates = log.deliveries.len() - log.distinct.len();
    let uncommitted = log.deliveries.iter().filter(|d| !d.committed).count();
    let delivering: BTreeSet<usize> = log.deliveries.iter().map(|d| d.incarnation).collect();
    eprintln!(
        "no-loss: {RECORDS} records over {PARTITIONS} partitions (per partition {:?}), produced in \
         {produced_in:.1?}",
        expected.values().collect::<Vec<_>>()
    );
    eprintln!(
        "no-loss: {} deliveries, {duplicates} duplicates, {uncommitted} deliveries whose commit \
         did not happen or was rejected, {committed_once} records with a committed delivery; \
         {} commits, {} rejected; restarts {counts:?} ({crashes} as crashes); {fenced} fenced; \
         {} incarnations ({} got records); {at_plan_end} records processed when the restarts \
         ended; {samples} committed-offset samples, none decreasing; all consumed after \
         {consumed_in:.1?}, test {:.1?}",
        log.deliveries.len(),
        log.commits,
        log.rejected_commits,
        ctx.incarnations.load(Ordering::SeqCst),
        delivering.len(),
        started.elapsed()
    );
}
