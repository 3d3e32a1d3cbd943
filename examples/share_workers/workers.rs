//! One share consumer feeding a pool of worker threads, each of which acknowledges the records
//! it worked on itself: the poll thread only fetches, and at most `in_flight` records are out
//! with the workers at a time (the poll waits for room before it fetches more).

use crossbeam_channel::bounded;
use kafka_group::{AcknowledgeType, AcknowledgementMode, Client, ShareRecord};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A boxed error for the example's plumbing.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the workers did, by record value: each acknowledgement, in order.
pub type Outcomes = BTreeMap<String, Vec<(u16, AcknowledgeType)>>;

/// Runs `workers` threads on the records of share group `group` on `topic` until `stop`,
/// `work` deciding each record's fate; returns what was decided for each value.
pub fn run(
    bootstrap: &str,
    group: &str,
    topic: &str,
    workers: usize,
    in_flight: usize,
    stop: Arc<AtomicBool>,
    work: impl Fn(&ShareRecord) -> AcknowledgeType + Send + Sync,
) -> Result<Outcomes, BoxError> {
    let client = Client::builder().bootstrap_servers(bootstrap).build()?;
    let mut consumer = client
        .share_consumer(group)
        .subscribe([topic])
        .acknowledgement_mode(AcknowledgementMode::Explicit)
        .max_poll_records(in_flight.max(1))
        .build()?;
    let outcomes = Mutex::new(Outcomes::new());
    let (tx, rx) = bounded::<ShareRecord>(in_flight.max(1));
    std::thread::scope(|scope| -> Result<(), BoxError> {
        for _ in 0..workers {
            let (rx, work, outcomes) = (rx.clone(), &work, &outcomes);
            scope.spawn(move || {
                for record in rx {
                    let kind = work(&record);
                    let value =
                        String::from_utf8_lossy(record.value.as_deref().unwrap_or_default()).into_owned();
                    // The acknowledgement rides on the consumer's next request.
                    if record.acknowledge(kind).is_ok() {
                        let mut o = outcomes.lock().unwrap_or_else(|e| e.into_inner());
                        o.entry(value).or_default().push((record.delivery_count, kind));
                    }
                }
            });
        }
        drop(rx);
        let fed = (|| -> Result<(), BoxError> {
            while !stop.load(Ordering::Relaxed) {
                for record in consumer.poll(Duration::from_millis(200))? {
                    // Blocks while `in_flight` records are with the workers.
                    tx.send(record)?;
                }
            }
            Ok(())
        })();
        drop(tx);
        fed
    })?;
    consumer.commit(Duration::from_secs(30))?;
    consumer.close()?;
    Ok(outcomes.into_inner().unwrap_or_else(|e| e.into_inner()))
}
