//! Timed benchmark of the consumer against a real broker (not a test: it prints figures).
//! Produces RECORDS keyless records of VALUE_SIZE bytes (defaults 1,000,000 × 100) with the
//! producer (`acks=all`, `batch.size` 256 KiB) into a 3-partition topic, once uncompressed and
//! once with lz4, then consumes each topic with one consumer (fresh group,
//! `auto.offset.reset=earliest`, default fetch settings) and reports MB/s (of values) and
//! records/s for consuming, and for context for producing.
//!
//! ```text
//! cargo run --release --example consume_bench [-- RECORDS VALUE_SIZE]
//! ```
//! Uses `KAFKA_BOOTSTRAP` if set, else starts a broker with `scripts/kafka` and stops it after.

#[path = "../examples/support/mod.rs"]
mod support;

use bytes::Bytes;
use kafka_group::Client;
use kafka_group::Compression;
use kafka_group::{Acks, ProducerRecord};
use std::time::{Duration, Instant};
use support::BoxError;

const PARTITIONS: i32 = 3;
const BATCH_SIZE: usize = 256 * 1024;

fn main() -> Result<(), BoxError> {
    let [records, value_size] = support::numeric_args([1_000_000, 100]);
    let kafka = support::LocalKafka::get("consume-bench")?;
    let client = support::client(&kafka.bootstrap, "consume-bench")?;
    let values = support::sample_values(records, value_size);
    let bytes: usize = values.iter().map(Bytes::len).sum();
    println!(
        "{records} records of {value_size} bytes, {PARTITIONS} partitions, keyless; produced with \
         acks=all, batch.size={BATCH_SIZE}; consumed by one consumer with default fetch settings"
    );
    for compression in [Compression::None, Compression::Lz4] {
        let name = format!("{compression:?}").to_lowercase();
        let topic = support::create_topic(&client, &format!("consume-bench-{name}"), PARTITIONS)?;
        let produced = produce(&client, &topic, &values, compression)?;
        report(&format!("{name:<5} produce"), produced, records, bytes);
        let (consumed, polls) = support::consume_all(&client, &topic, records)?;
        report(&format!("{name:<5} consume"), consumed, records, bytes);
        println!("      ({polls} polls)");
    }
    Ok(())
}

fn report(label: &str, elapsed: Duration, records: usize, bytes: usize) {
    let secs = elapsed.as_secs_f64();
    println!(
        "{label}: {:>8.2?}  {:>7.1} MB/s  {:>9.0} records/s",
        elapsed,
        bytes as f64 / secs / 1e6,
        records as f64 / secs,
    );
}

/// Sends every value and flushes; the time from the first `send` to the return of `flush`.
fn produce(
    client: &Client,
    topic: &str,
    values: &[Bytes],
    compression: Compression,
) -> Result<Duration, BoxError> {
    let mut producer = client
        .producer()
        .acks(Acks::All)
        .compression(compression)
        .batch_size(BATCH_SIZE)
        .build()?;
    let started = Instant::now();
    for v in values {
        producer.send(ProducerRecord::new(topic, v.clone()))?;
    }
    producer.flush()?;
    let elapsed = started.elapsed();
    producer.close()?;
    Ok(elapsed)
}
