//! KIP-227 fetch sessions against a real broker, seen through a proxy that records each Fetch
//! request's session id, epoch and partition counts: a session is made and used
//! incrementally, pause/resume and seek keep it exact, and connection resets restart it;
//! every record is read exactly once, in order per partition, throughout.

use crate::group_tests::client;
use crate::support::proxy::{self, FetchSeen, Proxy};
use crate::support::{broker, create_topic};
use bytes::Bytes;
use kafka_group::{ApiKey, Client, Consumer, ConsumerRecord, OffsetReset, ProducerRecord, TopicPartition};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The proxy's release for the shared broker (its own line if the table has it, else the
/// newest KRaft release).
fn release() -> &'static str {
    proxy::release_for(broker::shared().version())
}

/// A proxy in front of the shared broker (or, for an old `release`, the broker that serves it),
/// recording Fetch requests.
fn recording_proxy_for(release: &str) -> Proxy {
    let proxy = Proxy::start(proxy::upstream_for(release), release);
    proxy.record_fetches(true);
    proxy
}

/// [`recording_proxy_for`] the shared broker's own release.
fn recording_proxy() -> Proxy {
    recording_proxy_for(release())
}

/// Writes `n` records to each of `partitions`, valued `p-i` with `i` counting from `first`.
fn produce(client: &Client, topic: &str, partitions: impl IntoIterator<Item = i32>, first: usize, n: usize) {
    let mut p = client.producer().build().unwrap();
    for partition in partitions {
        for i in first..first + n {
            let value = Bytes::from(format!("{partition}-{i}"));
            p.send(ProducerRecord::new(topic, value).partition(partition))
                .unwrap();
        }
    }
    p.flush().unwrap();
}

fn consumer(bootstrap: &str, topic: &str, partitions: i32) -> Consumer {
    client(bootstrap)
        .consumer_without_group()
        .assign((0..partitions).map(|p| TopicPartition::new(topic, p)))
        .auto_offset_reset(OffsetReset::Earliest)
        .max_poll_records(50)
        .build()
        .unwrap()
}

/// Polls until `got` holds `want` records (or fails after `limit`).
fn poll_into(c: &mut Consumer, got: &mut Vec<ConsumerRecord>, want: usize, limit: Duration) {
    let deadline = Instant::now() + limit;
    while got.len() < want {
        assert!(Instant::now() < deadline, "got {} of {want} records", got.len());
        got.extend(c.poll(Duration::from_millis(200)).unwrap().records);
    }
}

/// Each partition's offsets and values must be `0..n` and `p-0..p-(n-1)`, in that order.
fn assert_exactly_once(got: &[ConsumerRecord], per_partition: &BTreeMap<i32, usize>) {
    let mut seen: BTreeMap<i32, Vec<(i64, String)>> = BTreeMap::new();
    for r in got {
        let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
        seen.entry(r.partition).or_default().push((r.offset, value));
    }
    for (&p, &n) in per_partition {
        let want: Vec<(i64, String)> = (0..n).map(|i| (i as i64, format!("{p}-{i}"))).collect();
        assert_eq!(seen.remove(&p).unwrap_or_default(), want, "partition {p}");
    }
    assert!(seen.is_empty(), "records of partitions not produced to: {seen:?}");
}

/// Asserts that `fetches` is one session after another: each starts with a full request at
/// epoch 0 (id 0, or the old id to close and recreate it), then counts 1, 2, 3… under the id
/// the broker gave. Returns how many sessions there were.
fn assert_session_sequence(fetches: &[FetchSeen]) -> usize {
    let mut sessions = 0;
    let mut current: Option<(i32, i32)> = None;
    for (i, f) in fetches.iter().enumerate() {
        if f.session_epoch == 0 {
            assert_eq!(f.forgotten, 0, "#{i}: a full request forgets nothing: {f:?}");
            sessions += 1;
            current = None;
            continue;
        }
        assert_ne!(f.session_id, 0, "#{i}: {f:?}");
        match current {
            None => assert_eq!(f.session_epoch, 1, "#{i}: first after a full one: {f:?}"),
            Some((id, epoch)) => {
                assert_eq!(f.session_id, id, "#{i}: {f:?}");
                assert_eq!(f.session_epoch, epoch + 1, "#{i}: {f:?}");
            }
        }
        current = Some((f.session_id, f.session_epoch));
    }
    sessions
}

/// Consumes `partitions` partitions, first all of them, then a trickle to three of them (the
/// others idle): the session is made by the first request, every later one is incremental
/// and, once steady, lists fewer partitions than the whole set. Returns the recorded requests.
fn consume_many(partitions: i32, per_partition: usize) -> Vec<FetchSeen> {
    let direct = client(broker::shared().bootstrap());
    let topic = create_topic(&direct, "fetch-session", partitions, 1);
    produce(&direct, &topic, 0..partitions, 0, per_partition);
    let proxy = recording_proxy();
    let mut c = consumer(&proxy.bootstrap(), &topic, partitions);
    let mut got = Vec::new();
    let all = partitions as usize * per_partition;
    poll_into(&mut c, &mut got, all, Duration::from_secs(120));
    let mut counts: BTreeMap<i32, usize> = (0..partitions).map(|p| (p, per_partition)).collect();
    for round in 0..3 {
        produce(&direct, &topic, 0..3, per_partition + round * 5, 5);
        for p in 0..3 {
            *counts.entry(p).or_default() += 5;
        }
        poll_into(&mut c, &mut got, all + (round + 1) * 15, Duration::from_secs(60));
    }
    // A little longer: nothing more may come.
    let end = Instant::now() + Duration::from_secs(1);
    while Instant::now() < end {
        got.extend(c.poll(Duration::from_millis(200)).unwrap().records);
    }
    assert_exactly_once(&got, &counts);
    c.close().unwrap();
    let fetches = proxy.fetches();
    assert!(fetches.len() > 3, "{fetches:?}");
    assert_eq!(
        (
            fetches[0].session_id,
            fetches[0].session_epoch,
            fetches[0].partitions
        ),
        (0, 0, partitions as usize),
        "the first fetch is full and asks for a session"
    );
    assert_eq!(
        assert_session_sequence(&fetches),
        1,
        "one session throughout: {fetches:?}"
    );
    // Without this the broker would go on fetching from the offsets of the first request: the
    // consumer would drop what it already has (and stall after a seek back) at a cost in bytes.
    assert!(
        fetches
            .iter()
            .any(|f| f.session_epoch > 0 && f.partitions > 0 && f.partitions < partitions as usize),
        "incremental requests send the partitions whose offsets moved: {fetches:?}"
    );
    let fewer = fetches
        .iter()
        .filter(|f| f.session_epoch > 0 && f.partitions < partitions as usize)
        .count();
    assert!(
        fewer >= 3 && fetches.last().is_some_and(|f| f.partitions < partitions as usize),
        "steady incremental requests list fewer than {partitions} partitions: {fetches:?}"
    );
    fetches
}

/// Sizes of the full request and the median incremental one.
fn sizes(fetches: &[FetchSeen]) -> (usize, usize) {
    let mut incremental: Vec<usize> = fetches
        .iter()
        .filter(|f| f.session_epoch > 0)
        .map(|f| f.bytes)
        .collect();
    incremental.sort_unstable();
    (fetches[0].bytes, incremental[incremental.len() / 2])
}

#[test]
fn a_session_is_made_and_fetched_incrementally_24_partitions() {
    let fetches = consume_many(24, 40);
    let (full, incremental) = sizes(&fetches);
    eprintln!(
        "fetch sessions, 24 partitions: {} Fetch requests, full {full} bytes, median incremental {incremental} bytes",
        fetches.len()
    );
}

#[test]
fn a_session_is_made_and_fetched_incrementally_500_partitions() {
    let fetches = consume_many(500, 2);
    let (full, incremental) = sizes(&fetches);
    eprintln!(
        "fetch sessions, 500 partitions: {} Fetch requests, full {full} bytes, median incremental {incremental} bytes",
        fetches.len()
    );
}

/// While a session is live, a paused partition's records never come (its new records are
/// produced during the pause), it is forgotten by the session and read on from where it was
/// after resume; a seek re-reads from the offset seeked to.
#[test]
fn pause_resume_and_seek_within_a_session() {
    pause_resume_and_seek(release());
}

/// As [`pause_resume_and_seek_within_a_session`] with Fetch v12 (Kafka 3.0's highest): the
/// session names topics, and forgets by name.
#[test]
fn pause_resume_and_seek_within_a_session_by_topic_name() {
    pause_resume_and_seek("kraft-3.0");
}

fn pause_resume_and_seek(release: &str) {
    const PARTITIONS: i32 = 6;
    // The broker behind the proxy: for an old release not necessarily the shared one.
    let direct = client(&proxy::upstream_for(release).to_string());
    let topic = create_topic(&direct, "fetch-session-pause", PARTITIONS, 1);
    produce(&direct, &topic, 0..PARTITIONS, 0, 20);
    let proxy = recording_proxy_for(release);
    let mut c = consumer(&proxy.bootstrap(), &topic, PARTITIONS);
    let mut got = Vec::new();
    poll_into(&mut c, &mut got, 120, Duration::from_secs(60));
    let p0 = TopicPartition::new(&topic, 0);
    let p1 = TopicPartition::new(&topic, 1);
    c.pause(std::slice::from_ref(&p0)).unwrap();
    let paused_at = proxy.fetches().len();
    produce(&direct, &topic, [0, 1], 20, 10);
    poll_into(&mut c, &mut got, 130, Duration::from_secs(30));
    let end = Instant::now() + Duration::from_secs(2);
    while Instant::now() < end {
        got.extend(c.poll(Duration::from_millis(200)).unwrap().records);
    }
    assert!(
        !got.iter().any(|r| r.partition == 0 && r.offset >= 20),
        "records of the paused partition came: {:?}",
        got.iter().filter(|r| r.partition == 0 && r.offset >= 20).count()
    );
    let during = proxy.fetches()[paused_at..].to_vec();
    assert!(
        during.iter().any(|f| f.session_epoch > 0 && f.forgotten > 0),
        "the paused partition was forgotten: {during:?}"
    );
    c.resume(&[p0]);
    poll_into(&mut c, &mut got, 140, Duration::from_secs(30));
    let counts: BTreeMap<i32, usize> = (0..PARTITIONS)
        .map(|p| (p, if p < 2 { 30 } else { 20 }))
        .collect();
    assert_exactly_once(&got, &counts);
    // Seek p1 back to 5: 5..30 again, in order, once.
    let seek_at = proxy.fetches().len();
    c.seek(&p1, 5).unwrap();
    let mut again = Vec::new();
    poll_into(&mut c, &mut again, 25, Duration::from_secs(30));
    let end = Instant::now() + Duration::from_secs(1);
    while Instant::now() < end {
        again.extend(c.poll(Duration::from_millis(200)).unwrap().records);
    }
    let after_seek = proxy.fetches()[seek_at..].to_vec();
    assert!(
        after_seek
            .iter()
            .any(|f| f.session_epoch > 0 && f.partitions == 1),
        "the seeked partition is sent with its new offset: {after_seek:?}"
    );
    let offsets: Vec<i64> = again.iter().map(|r| r.offset).collect();
    assert!(again.iter().all(|r| r.partition == 1), "{again:?}");
    assert_eq!(offsets, (5..30).collect::<Vec<i64>>());
    c.close().unwrap();
    let fetches = proxy.fetches();
    assert_eq!(
        assert_session_sequence(&fetches),
        1,
        "one session throughout: {fetches:?}"
    );
}

/// Connections reset under the consumer (two Fetch requests cut off, then every connection at
/// random after 0.3–1 s, for at least three such resets): each loss starts the session over,
/// and still every record comes exactly once.
#[test]
fn connection_resets_start_new_sessions_and_lose_nothing() {
    const PARTITIONS: i32 = 12;
    const PER_ROUND: usize = 25;
    let direct = client(broker::shared().bootstrap());
    let topic = create_topic(&direct, "fetch-session-resets", PARTITIONS, 1);
    let proxy = recording_proxy();
    let mut c = consumer(&proxy.bootstrap(), &topic, PARTITIONS);
    let mut got = Vec::new();
    produce(&direct, &topic, 0..PARTITIONS, 0, PER_ROUND);
    poll_into(
        &mut c,
        &mut got,
        PARTITIONS as usize * PER_ROUND,
        Duration::from_secs(60),
    );
    proxy.reset_next(ApiKey::Fetch, 2);
    proxy.kill_connections(7, Duration::from_millis(300)..=Duration::from_millis(1000));
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut rounds = 1;
    while rounds < 4 || proxy.resets() < 3 {
        assert!(Instant::now() < deadline, "{} resets", proxy.resets());
        produce(&direct, &topic, 0..PARTITIONS, rounds * PER_ROUND, PER_ROUND);
        rounds += 1;
        let want = PARTITIONS as usize * PER_ROUND * rounds;
        poll_into(&mut c, &mut got, want, Duration::from_secs(60));
    }
    proxy.stop_killing();
    let end = Instant::now() + Duration::from_secs(1);
    while Instant::now() < end {
        got.extend(c.poll(Duration::from_millis(200)).unwrap().records);
    }
    let counts: BTreeMap<i32, usize> = (0..PARTITIONS).map(|p| (p, rounds * PER_ROUND)).collect();
    assert_exactly_once(&got, &counts);
    c.close().unwrap();
    let fetches = proxy.fetches();
    let sessions = assert_session_sequence(&fetches);
    let recreated = fetches
        .iter()
        .filter(|f| f.session_epoch == 0 && f.session_id != 0)
        .count();
    eprintln!(
        "fetch sessions under resets: {rounds} rounds, {} Fetch requests, {sessions} sessions \
         ({recreated} recreated by id), {} resets by the killer",
        fetches.len(),
        proxy.resets()
    );
    assert!(sessions >= 3, "resets started new sessions: {fetches:?}");
    assert!(
        recreated >= 2,
        "a lost session is closed and recreated by id: {fetches:?}"
    );
}
