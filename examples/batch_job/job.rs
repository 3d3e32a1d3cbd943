//! The batch job's work, against any broker: `main.rs` runs it once, and the integration test
//! (tests/it/examples_tests.rs, which includes this file) runs the same code and checks it.
//!
//! A nightly job catches a topic up to where it stood when the job started and exits: it joins
//! its group, takes a snapshot of the end offsets of its partitions, processes every record
//! below them (not one more, though producers go on writing), commits exactly those, and
//! closes. The next run starts where this one stopped.

use kafka_group::{Client, ConsumerRecord, OffsetReset, TopicPartition};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Any error the job reports.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What one run did.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// The end offsets at start: where this run stops.
    pub snapshot: BTreeMap<TopicPartition, i64>,
    /// Records processed, per partition: `(first offset, count)`.
    pub processed: BTreeMap<TopicPartition, (i64, usize)>,
}

/// Catches `topic` up to its end offsets at start, for group `group`; `process` sees each
/// record below the snapshot exactly once per successful run. Gives up after `limit`.
pub fn run(
    bootstrap: &str,
    group: &str,
    topic: &str,
    limit: Duration,
    mut process: impl FnMut(&ConsumerRecord),
) -> Result<Summary, BoxError> {
    let started = Instant::now();
    let client = Client::builder().bootstrap_servers(bootstrap).build()?;
    let mut consumer = client
        .consumer(group)
        .subscribe([topic])
        // A first run reads the topic from its beginning; later runs from their commits.
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false)
        .build()?;
    // Join, then take the snapshot: the records below it are this run's work. Records the join
    // poll already brought are below it too (they existed before the snapshot was taken).
    let mut batch = Vec::new();
    while consumer.assignment().is_empty() {
        if started.elapsed() > limit {
            return Err("no partitions assigned in time".into());
        }
        batch.extend(consumer.poll(Duration::from_secs(1))?.records);
    }
    let snapshot = consumer.end_offsets(&consumer.assignment())?;
    let mut summary = Summary {
        snapshot: snapshot.clone(),
        ..Summary::default()
    };
    loop {
        let mine: Vec<ConsumerRecord> = batch
            .drain(..)
            .filter(|r| {
                snapshot
                    .get(&r.topic_partition())
                    .is_some_and(|&end| r.offset < end)
            })
            .collect();
        for r in &mine {
            process(r);
            let e = summary
                .processed
                .entry(r.topic_partition())
                .or_insert((r.offset, 0));
            e.1 += 1;
        }
        // Exactly what was processed, not everything poll returned.
        consumer.commit_records(&mine)?;
        let caught_up = snapshot
            .iter()
            .all(|(tp, &end)| consumer.position(tp).is_some_and(|p| p >= end));
        if caught_up {
            break;
        }
        if started.elapsed() > limit {
            return Err(format!("not caught up after {limit:?}").into());
        }
        batch = consumer.poll(Duration::from_secs(1))?.records;
    }
    consumer.close()?;
    Ok(summary)
}
