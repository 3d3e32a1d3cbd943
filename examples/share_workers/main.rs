//! A share group (KIP-932) worked by a pool of threads: one share consumer fetches, N workers
//! process and acknowledge each record themselves — accept what they handled, release what they
//! could not handle now (it comes back, counted), reject what can never be handled.
//!
//! ```text
//! cargo run --example share_workers -- <topic> [group] [workers]   # KAFKA_BOOTSTRAP=host:port, default localhost:9092
//! ```
//!
//! Runs until Ctrl-C... or, here, for a minute. The work itself is in `workers.rs`, which the
//! integration tests run too.

mod workers;

use kafka_group::AcknowledgeType;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn main() -> Result<(), workers::BoxError> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let mut args = std::env::args().skip(1);
    let topic = args
        .next()
        .ok_or("usage: share_workers <topic> [group] [workers]")?;
    let group = args.next().unwrap_or_else(|| "share-workers".into());
    let n: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(4);
    let bootstrap = std::env::var("KAFKA_BOOTSTRAP").unwrap_or_else(|_| "localhost:9092".into());
    let stop = Arc::new(AtomicBool::new(false));
    let timer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(60));
            stop.store(true, Ordering::Relaxed);
        })
    };
    let outcomes = workers::run(&bootstrap, &group, &topic, n, 64, stop, |record| {
        match record.value.as_deref() {
            None | Some(b"") => AcknowledgeType::Reject,
            // A first attempt that fails is handed back for another try.
            Some(v) if v.ends_with(b"!") && record.delivery_count == 1 => AcknowledgeType::Release,
            Some(_) => AcknowledgeType::Accept,
        }
    })?;
    timer.join().ok();
    let accepted = outcomes
        .values()
        .filter(|v| v.iter().any(|(_, k)| *k == AcknowledgeType::Accept))
        .count();
    println!("{} records seen, {accepted} accepted", outcomes.len());
    Ok(())
}
