//! A threaded server of N static members with graceful shutdown and restart without
//! rebalance.
//!
//! ```text
//! cargo run --example static_server -- <topic> [members] [group]   # KAFKA_BOOTSTRAP, default localhost:9092
//! ```
//!
//! Runs until its standard input ends (Ctrl-D), then wakes every member, which commits and
//! closes. Start it again within the session timeout (30 s here) and every member gets its
//! partitions back without a rebalance. The members are in `server.rs`, which the integration
//! tests run too.

mod server;

use std::io::Read;
use std::time::Duration;

fn main() -> Result<(), server::BoxError> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let mut args = std::env::args().skip(1);
    let topic = args
        .next()
        .ok_or("usage: static_server <topic> [members] [group]")?;
    let members = args.next().map_or(Ok(4), |n| n.parse())?;
    let group = args.next().unwrap_or_else(|| "static-server".into());
    let settings = server::Settings {
        bootstrap: std::env::var("KAFKA_BOOTSTRAP").unwrap_or_else(|_| "localhost:9092".into()),
        group,
        topic,
        members,
        prefix: "server".into(),
        session_timeout: Duration::from_secs(30),
    };
    let server = server::Server::start(&settings)?;
    if server.wait_settled(Duration::from_secs(2), Duration::from_secs(60)) {
        for v in server.views() {
            let (generation, partitions) = v.assigned.unwrap_or_default();
            println!(
                "{}: generation {generation}, {} partitions, rebalanced: {:?}",
                v.instance_id,
                partitions.len(),
                v.rebalanced
            );
        }
    }
    println!("serving; end standard input (Ctrl-D) to stop");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    let processed = server.processed();
    for v in server.stop() {
        if let Some(e) = v.failed {
            eprintln!("{}: {e}", v.instance_id);
        }
    }
    println!("stopped after {processed} records; restart within 30 s to keep the assignment");
    Ok(())
}
