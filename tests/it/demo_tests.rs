//! The one-command demo (`cargo run --example demo`) end to end against the shared broker: the
//! same scenario code, with a 3 s session timeout instead of 10 s.

#[path = "../../examples/demo/scenario.rs"]
mod scenario;

use crate::support::broker;
use std::time::{Duration, Instant};

#[test]
fn demo_quick_restart_keeps_the_group_and_slow_restart_rebalances() {
    let b = broker::shared();
    demo(scenario::Settings::new(b.bootstrap(), Duration::from_secs(3)));
}

/// `--protocol consumer`: the broker's session timeout (6 s in scripts/kafka), on a broker that
/// has the protocol whatever `KAFKA_VERSION` says.
#[test]
fn demo_on_the_consumer_protocol() {
    let b = broker::consumer_protocol();
    let text = demo(
        scenario::Settings::new(b.bootstrap(), Duration::from_secs(6))
            .protocol(kafka_group::GroupProtocol::Consumer),
    );
    assert!(
        text.contains("were given demo-b's partitions and kept their own (revocations: 0, 0)"),
        "{text}"
    );
}

/// Runs the story and checks what both protocols share; returns what it printed.
fn demo(settings: scenario::Settings) -> String {
    let mut out = Vec::new();
    let t = Instant::now();
    let result = scenario::run(&settings, &mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    println!("{text}(demo ran in {:?})", t.elapsed());
    if let Err(e) = result {
        panic!("demo failed: {e}\n{text}");
    }
    let line = |prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{text}"))
            .to_string()
    };
    let quick = line("quick restart: rebalanced:");
    assert!(quick.starts_with("quick restart: rebalanced: no"), "{quick}");
    let slow = line("slow restart: rebalanced:");
    assert!(slow.starts_with("slow restart: rebalanced: yes"), "{slow}");
    let summary = line("summary: records consumed:");
    assert!(
        summary.contains("total 6600 of 6600 produced, duplicates 0"),
        "{summary}"
    );
    let committed = line("summary: committed offsets:");
    assert!(committed.ends_with("lag 0"), "{committed}");
    text
}

#[path = "../../examples/demo/exactly_once.rs"]
mod exactly_once;

/// `--exactly-once`: members are this test binary re-run as exactly_once_tests' member child.
#[test]
fn demo_exactly_once_kills_a_member_mid_transaction_and_the_output_holds_each_input_once() {
    let b = broker::shared();
    let command = |a: &exactly_once::MemberArgs| {
        let mut c = std::process::Command::new(std::env::current_exe().unwrap());
        c.args([
            "--exact",
            "exactly_once_tests::member_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            crate::exactly_once_tests::CHILD_ENV,
            format!(
                "{} {} {} {} {} 200 classic 6000",
                a.bootstrap, a.app, a.instance, a.input, a.output
            ),
        );
        c
    };
    let mut out = Vec::new();
    let t = Instant::now();
    let result = exactly_once::run(b.bootstrap(), &command, &mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    println!("{text}(demo ran in {:?})", t.elapsed());
    if let Err(e) = result {
        panic!("demo failed: {e}\n{text}");
    }
    assert!(text.contains("rebalanced: no"), "{text}");
    assert!(
        text.contains("input 3000, output 3000 (read_committed), duplicates 0"),
        "{text}"
    );
    let aborted: usize = text
        .rsplit_once("(read_uncommitted): ")
        .and_then(|(_, n)| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(aborted > 0, "the kill landed mid-transaction: {text}");
}
