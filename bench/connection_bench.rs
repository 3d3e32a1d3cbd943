//! Timed benchmark of the connection layer against a real broker (not a test: it prints
//! figures). Measures connect + ApiVersions handshake, and the Heartbeat round trip of a real
//! group member over many requests.
//!
//! ```text
//! KAFKA_BOOTSTRAP=127.0.0.1:9092 cargo run --release --example connection_bench [-- HEARTBEATS CONNECTS]
//! ```
//! Without `KAFKA_BOOTSTRAP` it starts a broker with `scripts/kafka` and stops it at the end.

#[path = "../examples/support/mod.rs"]
mod support;

use kafka_group::unstable::protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_group::unstable::protocol::messages::{HeartbeatRequest, JoinGroupRequest, SyncGroupRequest};
use kafka_group::unstable::Connection;
use kafka_group::unstable::RawClient;
use kafka_group::ApiKey;
use kafka_group::KafkaCode;
use std::time::{Duration, Instant};
use support::BoxError;

fn main() -> Result<(), BoxError> {
    let [heartbeats, connects] = support::numeric_args([10_000, 200]);
    let kafka = support::LocalKafka::get("connection-bench")?;
    run(&kafka.bootstrap, heartbeats, connects)
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{name:<28} n={:<6} p50={:>9.1?} p99={:>9.1?} mean={:>9.1?} max={:>9.1?}",
        samples.len(),
        support::percentile(&samples, 0.50),
        support::percentile(&samples, 0.99),
        mean,
        samples[samples.len() - 1]
    );
}

fn run(bootstrap: &str, heartbeats: usize, connects: usize) -> Result<(), BoxError> {
    let client = support::client(bootstrap, "connection-bench")?;
    let meta = client.refresh_metadata(Some(&[]))?;
    let broker = meta
        .brokers
        .values()
        .next()
        .ok_or("no broker in metadata")?
        .clone();
    println!("broker {} at {}", broker.id, broker.addr());

    let mut samples = Vec::with_capacity(connects);
    for _ in 0..connects {
        let t = Instant::now();
        let c = client.connect(&broker)?;
        samples.push(t.elapsed());
        drop(c);
    }
    report("connect + ApiVersions", samples);

    let group = format!("connection-bench-{}", std::process::id());
    let coordinator = client.find_coordinator(&group)?;
    let mut conn: Connection = client.connect(&coordinator)?;
    let (generation, member_id) = join(&mut conn, &group)?;
    println!(
        "joined {group} generation {generation} as {member_id} (Heartbeat v{})",
        conn.version(ApiKey::Heartbeat)?
    );
    let hb = HeartbeatRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member_id.into(),
        ..Default::default()
    };
    let mut samples = Vec::with_capacity(heartbeats);
    for _ in 0..heartbeats {
        let t = Instant::now();
        let r = conn.send(&hb)?;
        samples.push(t.elapsed());
        if r.error_code != 0 {
            return Err(format!("heartbeat error {}", KafkaCode::from_code(r.error_code)).into());
        }
    }
    report("Heartbeat round trip", samples);
    Ok(())
}

/// A one-member dynamic join (with the KIP-394 member-id round trip) and an empty sync, so
/// heartbeats are answered for a real member.
fn join(conn: &mut Connection, group: &str) -> Result<(i32, String), BoxError> {
    let mut member_id = String::new();
    loop {
        let req = JoinGroupRequest {
            group_id: group.into(),
            session_timeout_ms: 30_000,
            rebalance_timeout_ms: 30_000,
            member_id: member_id.as_str().into(),
            protocol_type: "consumer".into(),
            protocols: vec![JoinGroupRequestProtocol {
                name: "range".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let r = conn.send(&req)?;
        match KafkaCode::from_code(r.error_code) {
            KafkaCode::MemberIdRequired => member_id = r.member_id.into(),
            KafkaCode::None => {
                let sync = SyncGroupRequest {
                    group_id: group.into(),
                    generation_id: r.generation_id,
                    member_id: r.member_id.clone(),
                    protocol_type: Some("consumer".into()),
                    protocol_name: r.protocol_name.clone(),
                    ..Default::default()
                };
                let v = conn.version(ApiKey::SyncGroup)?;
                let sync = if v < 5 {
                    SyncGroupRequest {
                        protocol_type: None,
                        protocol_name: None,
                        ..sync
                    }
                } else {
                    sync
                };
                let s = conn.send(&sync)?;
                if s.error_code != 0 {
                    return Err(format!("sync error {}", KafkaCode::from_code(s.error_code)).into());
                }
                return Ok((r.generation_id, r.member_id.into()));
            }
            // A fresh broker is still creating __consumer_offsets: wait, as a member would.
            KafkaCode::CoordinatorLoadInProgress
            | KafkaCode::CoordinatorNotAvailable
            | KafkaCode::NotCoordinator => std::thread::sleep(Duration::from_millis(100)),
            other => return Err(format!("join error {other}").into()),
        }
    }
}
