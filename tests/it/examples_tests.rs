//! The guide's two application examples, run against the shared broker with the same code
//! their `cargo run --example` programs run: the batch job (examples/batch_job, on the
//! consuming page) and the threaded server of static members (examples/static_server, on the
//! static membership page), and the share group worked by a pool of threads
//! (examples/share_workers).

#[path = "../../examples/batch_job/job.rs"]
mod job;
#[path = "../../examples/static_server/server.rs"]
mod server;
#[path = "../../examples/share_workers/workers.rs"]
mod share_workers;

use crate::group_tests::{client, topic_with_partitions};
use crate::support::{broker, unique_name};
use kafka_group::{ProducerRecord, TopicPartition};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn produce(client: &kafka_group::Client, topic: &str, partitions: i32, per_partition: usize) {
    let mut p = client.producer().build().unwrap();
    for part in 0..partitions {
        for i in 0..per_partition {
            p.send(ProducerRecord::new(topic, format!("r{i}")).partition(part))
                .unwrap();
        }
    }
    p.flush().unwrap();
}

#[test]
fn the_batch_job_reads_exactly_up_to_its_start_snapshot_commits_and_the_next_run_goes_on() {
    let b = broker::shared();
    let client = client(b.bootstrap());
    let topic = topic_with_partitions(&client, 3);
    let group = unique_name("batch-job");
    produce(&client, &topic, 3, 40);
    // Producers go on writing while the job runs: the job must stop at its snapshot anyway.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (client, topic, stop) = (client.clone(), topic.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                produce(&client, &topic, 3, 5);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let mut seen: BTreeMap<TopicPartition, Vec<i64>> = BTreeMap::new();
    let first = job::run(b.bootstrap(), &group, &topic, Duration::from_secs(90), |r| {
        seen.entry(r.topic_partition()).or_default().push(r.offset)
    })
    .unwrap();
    assert_eq!(first.snapshot.len(), 3);
    for (tp, &end) in &first.snapshot {
        assert!(end >= 40, "{tp}: snapshot {end}");
        assert_eq!(
            seen[tp],
            (0..end).collect::<Vec<_>>(),
            "{tp}: every record below the snapshot once"
        );
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    // What the job committed is its snapshot, not what poll returned past it.
    let committed = client.admin().group_offsets(&group).unwrap();
    assert_eq!(committed, first.snapshot);
    // The next run starts there and stops at its own snapshot.
    produce(&client, &topic, 3, 10);
    let mut again: BTreeMap<TopicPartition, Vec<i64>> = BTreeMap::new();
    let second = job::run(b.bootstrap(), &group, &topic, Duration::from_secs(90), |r| {
        again.entry(r.topic_partition()).or_default().push(r.offset)
    })
    .unwrap();
    for (tp, &end) in &second.snapshot {
        let from = first.snapshot[tp];
        assert_eq!(again[tp], (from..end).collect::<Vec<_>>(), "{tp}");
    }
}

#[test]
fn the_static_server_restarted_within_the_session_timeout_gets_every_partition_back_without_rebalance() {
    let b = broker::shared();
    let client = client(b.bootstrap());
    let topic = topic_with_partitions(&client, 6);
    produce(&client, &topic, 6, 10);
    let settings = server::Settings {
        bootstrap: b.bootstrap().to_string(),
        group: unique_name("static-server"),
        topic: topic.clone(),
        members: 3,
        prefix: unique_name("srv"),
        session_timeout: Duration::from_secs(30),
    };
    let first = server::Server::start(&settings).unwrap();
    assert!(
        first.wait_settled(Duration::from_secs(2), Duration::from_secs(90)),
        "{:?}",
        first.views()
    );
    let processed = first.processed();
    let before = first.stop();
    assert_eq!(processed, before.iter().map(|v| v.records).sum::<usize>());
    let owned: usize = before.iter().map(|v| v.assigned.as_ref().unwrap().1.len()).sum();
    assert_eq!(owned, 6, "{before:?}");
    assert!(before.iter().all(|v| v.failed.is_none()), "{before:?}");
    let generation = before[0].assigned.as_ref().unwrap().0;
    assert!(
        before
            .iter()
            .all(|v| v.assigned.as_ref().unwrap().0 == generation),
        "{before:?}"
    );
    // Restarted at once, well within the session timeout.
    let second = server::Server::start(&settings).unwrap();
    assert!(
        second.wait_settled(Duration::from_secs(3), Duration::from_secs(60)),
        "{:?}",
        second.views()
    );
    let after = second.stop();
    for (was, now) in before.iter().zip(&after) {
        assert_eq!(was.instance_id, now.instance_id);
        let (g, partitions) = now.assigned.clone().unwrap();
        assert_eq!(
            g, generation,
            "{}: the group rebalanced ({was:?} -> {now:?})",
            now.instance_id
        );
        assert_eq!(
            &partitions,
            &was.assigned.as_ref().unwrap().1,
            "{}",
            now.instance_id
        );
        assert_eq!(now.revocations, 0, "{now:?}");
        assert_ne!(now.rebalanced, Some(true), "{now:?}");
        assert!(now.failed.is_none(), "{now:?}");
    }
    let records: usize = before.iter().chain(&after).map(|v| v.records).sum();
    assert_eq!(
        records, 60,
        "every record once across both runs: {before:?} {after:?}"
    );
}

#[test]
fn share_workers_accept_reject_and_retry_each_record_from_their_own_threads() {
    use kafka_group::AcknowledgeType::{Accept, Reject, Release};
    use std::sync::Mutex;
    let b = broker::consumer_protocol();
    let client = client(b.bootstrap());
    let topic = topic_with_partitions(&client, 2);
    let group = unique_name("share-workers");
    let stop = Arc::new(AtomicBool::new(false));
    let seen: Arc<Mutex<BTreeMap<String, u16>>> = Arc::default();
    let runner = {
        let (bootstrap, topic, group, stop, seen) = (
            b.bootstrap().to_string(),
            topic.clone(),
            group.clone(),
            stop.clone(),
            seen.clone(),
        );
        std::thread::spawn(move || {
            share_workers::run(&bootstrap, &group, &topic, 4, 8, stop, move |r| {
                let v = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
                seen.lock().unwrap().insert(v.clone(), r.delivery_count);
                if v.starts_with("bad") {
                    Reject
                } else if v.starts_with("retry") && r.delivery_count == 1 {
                    Release
                } else {
                    Accept
                }
            })
        })
    };
    // The group starts at the end of the log (share.auto.offset.reset=latest): warm up first.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut n = 0;
    while !seen.lock().unwrap().keys().any(|v| v.starts_with("warm")) {
        assert!(
            std::time::Instant::now() < deadline,
            "no warm-up record reached the workers"
        );
        let mut p = client.producer().build().unwrap();
        p.send(ProducerRecord::new(topic.as_str(), format!("warm-{n}")).partition(0))
            .unwrap();
        p.flush().unwrap();
        n += 1;
        std::thread::sleep(Duration::from_millis(300));
    }
    let mut p = client.producer().build().unwrap();
    let values: Vec<String> = (0..20)
        .map(|i| format!("ok-{i}"))
        .chain((0..4).map(|i| format!("bad-{i}")))
        .chain((0..4).map(|i| format!("retry-{i}")))
        .collect();
    for (i, v) in values.iter().enumerate() {
        p.send(ProducerRecord::new(topic.as_str(), v.clone()).partition(i as i32 % 2))
            .unwrap();
    }
    p.flush().unwrap();
    let done = || {
        let s = seen.lock().unwrap();
        values.iter().all(|v| match s.get(v) {
            Some(n) if v.starts_with("retry") => *n == 2,
            Some(_) => true,
            None => false,
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !done() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    let outcomes = runner.join().unwrap().unwrap();
    for v in &values {
        let want = if v.starts_with("bad") {
            vec![(1, Reject)]
        } else if v.starts_with("retry") {
            vec![(1, Release), (2, Accept)]
        } else {
            vec![(1, Accept)]
        };
        assert_eq!(outcomes.get(v), Some(&want), "{v}: {outcomes:?}");
    }
}
