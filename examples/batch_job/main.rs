//! A batch job on kafka-group: catch a topic up to its end offsets at start, commit, exit.
//!
//! ```text
//! cargo run --example batch_job -- <topic> [group]     # KAFKA_BOOTSTRAP=host:port, default localhost:9092
//! ```
//!
//! The work itself is in `job.rs`, which the integration tests run too.

mod job;

use std::time::Duration;

fn main() -> Result<(), job::BoxError> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let mut args = std::env::args().skip(1);
    let topic = args.next().ok_or("usage: batch_job <topic> [group]")?;
    let group = args.next().unwrap_or_else(|| "batch-job".into());
    let bootstrap = std::env::var("KAFKA_BOOTSTRAP").unwrap_or_else(|_| "localhost:9092".into());
    let mut bytes = 0usize;
    let summary = job::run(&bootstrap, &group, &topic, Duration::from_secs(600), |r| {
        bytes += r.value.as_ref().map_or(0, |v| v.len());
    })?;
    for (tp, end) in &summary.snapshot {
        let (first, n) = summary.processed.get(tp).copied().unwrap_or((*end, 0));
        println!("{tp}: processed {n} records from {first}, stopped at {end}");
    }
    println!("{bytes} bytes of values; committed, exiting");
    Ok(())
}
