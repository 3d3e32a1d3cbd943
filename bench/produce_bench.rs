//! Timed benchmark of the producer against a real broker (not a test: it prints figures).
//! Sends RECORDS keyless records of VALUE_SIZE bytes (defaults 1,000,000 × 100) to a
//! 3-partition topic with `acks=all`, uncompressed and with lz4, at Java's default `batch.size`
//! (16 KiB) and this crate's (256 KiB), and reports MB/s (of values) and records/s from the first `send`
//! to the return of `flush`.
//!
//! ```text
//! cargo run --release --example produce_bench [-- RECORDS VALUE_SIZE]
//! ```
//! Uses `KAFKA_BOOTSTRAP` if set, else starts a broker with `scripts/kafka` and stops it after.

#[path = "../examples/support/mod.rs"]
mod support;

use bytes::Bytes;
use kafka_group::Client;
use kafka_group::Compression;
use kafka_group::{Acks, ProducerRecord};
use std::time::Instant;
use support::BoxError;

fn main() -> Result<(), BoxError> {
    let [records, value_size] = support::numeric_args([1_000_000, 100]);
    let kafka = support::LocalKafka::get("produce-bench")?;
    let client = support::client(&kafka.bootstrap, "produce-bench")?;
    let values = support::sample_values(records, value_size);
    println!("{records} records of {value_size} bytes, acks=all, 3 partitions, keyless (sticky)");
    for (compression, batch_size) in [
        (Compression::None, 16 * 1024),
        (Compression::Lz4, 16 * 1024),
        (Compression::None, 256 * 1024),
        (Compression::Lz4, 256 * 1024),
    ] {
        run(&client, &values, compression, batch_size)?;
    }
    Ok(())
}

fn run(
    client: &Client,
    values: &[Bytes],
    compression: Compression,
    batch_size: usize,
) -> Result<(), BoxError> {
    let name = format!("{compression:?}").to_lowercase();
    let topic = support::create_topic(client, &format!("produce-bench-{name}-{batch_size}"), 3)?;
    let mut producer = client
        .producer()
        .acks(Acks::All)
        .compression(compression)
        .batch_size(batch_size)
        .build()?;
    // Metadata first, so the figure is about sending.
    producer.send(ProducerRecord::new(&topic, "warm-up"))?;
    producer.flush()?;
    let started = Instant::now();
    for v in values {
        producer.send(ProducerRecord::new(&topic, v.clone()))?;
    }
    producer.flush()?;
    let elapsed = started.elapsed();
    producer.close()?;
    let bytes: usize = values.iter().map(Bytes::len).sum();
    let secs = elapsed.as_secs_f64();
    println!(
        "{name:<5} batch.size={batch_size:>6}: {:>8.2?}  {:>7.1} MB/s  {:>9.0} records/s",
        elapsed,
        bytes as f64 / secs / 1e6,
        values.len() as f64 / secs,
    );
    Ok(())
}
