//! An exactly-once job: one static member reading `<input>`, writing each value uppercased to
//! `<output>` and committing its offsets in the same transaction. Start one per instance id;
//! kill one and restart it within the session timeout (10 s) and it carries on without a
//! rebalance, its open transaction aborted and redone.
//!
//! ```text
//! cargo run --example exactly_once -- <input> <output> <instance> [app]   # KAFKA_BOOTSTRAP=host:port, default localhost:9092
//! ```
//!
//! The loop is in `pipeline.rs`, which the integration tests run too.

mod pipeline;

use std::time::Duration;

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output, instance, rest @ ..] = &args[..] else {
        eprintln!("usage: exactly_once <input> <output> <instance> [app]");
        std::process::exit(2);
    };
    let settings = pipeline::Settings {
        bootstrap: std::env::var("KAFKA_BOOTSTRAP").unwrap_or_else(|_| "localhost:9092".into()),
        app: rest.first().cloned().unwrap_or_else(|| "exactly-once".into()),
        instance: instance.clone(),
        input: input.clone(),
        output: output.clone(),
        group_protocol: kafka_group::GroupProtocol::Classic,
        session_timeout: Duration::from_secs(10),
        hold_open: Duration::ZERO,
    };
    if let Err(e) = pipeline::run(&settings, || false) {
        eprintln!("exactly_once: {e}");
        std::process::exit(1);
    }
}
