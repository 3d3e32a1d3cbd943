//! Static membership (KIP-345) in one command: three consumers share a topic, one restarts
//! quickly (no rebalance) and then slowly (the rebalance static membership cannot prevent).
//!
//! ```text
//! cargo run --example demo                     # starts a local Kafka (downloads it on first run)
//! KAFKA_BOOTSTRAP=host:9092 cargo run --example demo   # uses that cluster instead
//! RUST_LOG=kafka_group::group=debug cargo run --example demo   # with the heartbeat log
//! cargo run --example demo -- --protocol consumer   # the same story on KIP-848's protocol
//! cargo run --example demo -- --exactly-once   # a transactional pipeline, a member killed mid-transaction
//! ```
//!
//! The story itself is in `scenario.rs`, which the integration tests run too.

#[path = "../support/mod.rs"]
mod support;

mod exactly_once;
#[path = "../exactly_once/pipeline.rs"]
mod pipeline;
mod scenario;

use kafka_group::GroupProtocol;
use std::time::Duration;

fn main() -> Result<(), scenario::BoxError> {
    // Warnings only by default, so the story stays readable; RUST_LOG=debug shows heartbeats.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, bootstrap, app, instance, input, output] = &args[..] {
        if flag == MEMBER_FLAG {
            return member(bootstrap, app, instance, input, output);
        }
    }
    // The exactly-once story runs its members on the classic protocol only.
    let (exactly_once, protocol) = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["--exactly-once"] => (true, GroupProtocol::Classic),
        [] | ["--protocol", "classic"] => (false, GroupProtocol::Classic),
        ["--protocol", "consumer"] => (false, GroupProtocol::Consumer),
        _ => return Err("usage: demo [--protocol classic|consumer | --exactly-once]".into()),
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
    if exactly_once {
        let result = exactly_once::run(&kafka.bootstrap, &member_command, &mut std::io::stdout());
        drop(kafka);
        if ours {
            println!("broker: stopped");
        }
        return result;
    }
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

/// How the exactly-once story starts a member: this program again, with [`MEMBER_FLAG`].
const MEMBER_FLAG: &str = "--exactly-once-member";

fn member_command(a: &exactly_once::MemberArgs) -> std::process::Command {
    let mut c = std::process::Command::new(std::env::current_exe().expect("the demo's own path"));
    c.args([
        MEMBER_FLAG,
        &a.bootstrap,
        &a.app,
        &a.instance,
        &a.input,
        &a.output,
    ]);
    c
}

/// One member of the exactly-once pipeline, until it is killed.
fn member(
    bootstrap: &str,
    app: &str,
    instance: &str,
    input: &str,
    output: &str,
) -> Result<(), scenario::BoxError> {
    let settings = pipeline::Settings {
        bootstrap: bootstrap.into(),
        app: app.into(),
        instance: instance.into(),
        input: input.into(),
        output: output.into(),
        group_protocol: kafka_group::GroupProtocol::Classic,
        session_timeout: Duration::from_secs(10),
        // Each transaction stays open a moment after its records are written, so that the
        // story's kill lands inside one.
        hold_open: Duration::from_millis(200),
    };
    pipeline::run(&settings, || false)
}
