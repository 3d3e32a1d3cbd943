//! Static membership (KIP-345) in one command: three consumers share a topic, one restarts
//! quickly (no rebalance) and then slowly (the rebalance static membership cannot prevent).
//!
//! ```text
//! cargo run --example demo                     # starts a local Kafka (downloads it on first run)
//! KAFKA_BOOTSTRAP=host:9092 cargo run --example demo   # uses that cluster instead
//! RUST_LOG=kafka_group::group=debug cargo run --example demo   # with the heartbeat log
//! cargo run --example demo -- --protocol consumer   # the same story on KIP-848's protocol
//! ```
//!
//! The story itself is in `scenario.rs`, which the integration tests run too.

#[path = "../support/mod.rs"]
mod support;

mod scenario;

use kafka_group::GroupProtocol;
use std::time::Duration;

fn main() -> Result<(), scenario::BoxError> {
    // Warnings only by default, so the story stays readable; RUST_LOG=debug shows heartbeats.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let protocol = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] | ["--protocol", "classic"] => GroupProtocol::Classic,
        ["--protocol", "consumer"] => GroupProtocol::Consumer,
        _ => return Err("usage: demo [--protocol classic|consumer]".into()),
    };
    let ours = std::env::var_os("KAFKA_BOOTSTRAP").is_none();
    if ours {
        println!("broker: starting a local Kafka with scripts/kafka (the first run downloads it)");
    }
    let kafka = support::LocalKafka::get("demo")?;
    println!(
        "broker: {} ({})",
        kafka.bootstrap,
        if ours {
            "started by the demo"
        } else {
            "from KAFKA_BOOTSTRAP"
        }
    );
    // Classic: the members' session timeout. Consumer protocol: the broker's, which members
    // cannot set: 6 s on the Kafka scripts/kafka starts, Kafka's default 45 s elsewhere
    // (DEMO_BROKER_SESSION_MS says otherwise).
    let session = match protocol {
        GroupProtocol::Classic => Duration::from_secs(10),
        GroupProtocol::Consumer => std::env::var("DEMO_BROKER_SESSION_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map(Duration::from_millis)
            .unwrap_or(Duration::from_secs(if ours { 6 } else { 45 })),
    };
    let settings = scenario::Settings::new(&kafka.bootstrap, session).protocol(protocol);
    // Every member is closed when `run` returns, whatever happened; then the broker stops.
    let result = scenario::run(&settings, &mut std::io::stdout());
    drop(kafka);
    if ours {
        println!("broker: stopped");
    }
    result
}
