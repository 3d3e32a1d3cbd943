//! The Client and version negotiation against real brokers, directly and through the
//! version-capping proxy for every release in the per-release table.

use crate::group_tests::failover_client;
use crate::support::broker;
use crate::support::proxy::{self, Proxy};
use crate::support::unique_name;
use kafka_group::unstable::RawClient;
use kafka_group::unstable::{Connection, ConnectionConfig, STATIC_MEMBERSHIP};
use kafka_group::ApiKey;
use kafka_group::{Client, Error};
use std::time::{Duration, Instant};

fn check_cluster(bootstrap: &str) {
    let client = Client::builder().bootstrap_servers(bootstrap).build().unwrap();
    let versions = client.any_broker_versions().unwrap();
    assert!(versions.contains_key(&ApiKey::JoinGroup.key()));
    let meta = client.refresh_metadata(None).unwrap();
    assert!(!meta.brokers.is_empty());
    assert!(meta.cluster_id.is_some());
    let coordinator = client.find_coordinator(&unique_name("coord")).unwrap();
    assert!(client.cached_metadata().brokers.contains_key(&coordinator.id));
    // The connection to the coordinator negotiates the same way.
    let conn = client.connect(&coordinator).unwrap();
    let ours = kafka_group::unstable::versions::ours(ApiKey::Heartbeat, None);
    let theirs = conn.broker_versions()[&ApiKey::Heartbeat.key()];
    assert_eq!(conn.version(ApiKey::Heartbeat).unwrap(), ours.max.min(theirs.max));
}

#[test]
fn handshake_metadata_and_coordinator_on_the_default_broker() {
    check_cluster(broker::shared().bootstrap());
}

#[test]
fn handshake_metadata_and_coordinator_on_kafka_3_9() {
    check_cluster(&broker::shared_legacy().to_string());
}

/// For every release in the table: the handshake through a proxy that answers with that
/// release's versions succeeds, and the version picked for every API the client has is the
/// highest both sides support (or a clear error where none is shared).
#[test]
fn version_pick_for_every_release() {
    let upstream = broker::shared_legacy();
    let mut checked = 0;
    for release in proxy::releases() {
        let p = Proxy::start(upstream, release);
        let conn = Connection::connect(&p.bootstrap(), &ConnectionConfig::default())
            .unwrap_or_else(|e| panic!("{release}: handshake failed: {e}"));
        let table = proxy::table(release);
        for api in ApiKey::ALL {
            let ours = kafka_group::unstable::versions::ours(*api, None);
            let picked = conn.version(*api);
            match table.get(&api.key()) {
                Some(&(min, max)) if min.max(ours.min) <= max.min(ours.max) => {
                    assert_eq!(picked.unwrap(), ours.max.min(max), "{release} {}", api.name());
                }
                _ => assert!(
                    matches!(picked, Err(Error::UnsupportedVersion { .. })),
                    "{release} {}: {picked:?}",
                    api.name()
                ),
            }
            checked += 1;
        }
        // A real request at the picked version goes through the proxy to the broker.
        let client = Client::builder()
            .bootstrap_servers(p.bootstrap())
            .build()
            .unwrap();
        let meta = client
            .refresh_metadata(Some(&[]))
            .unwrap_or_else(|e| panic!("{release}: metadata: {e}"));
        assert!(!meta.brokers.is_empty(), "{release}");
    }
    assert!(checked > 39 * 10);
}

#[test]
fn static_membership_capability_by_release() {
    let upstream = broker::shared_legacy();
    let old = Proxy::start(upstream, "zk-2.2");
    let conn = Connection::connect(&old.bootstrap(), &ConnectionConfig::default()).unwrap();
    let err = conn.check(&STATIC_MEMBERSHIP).unwrap_err();
    let text = err.to_string();
    for part in [
        "static membership",
        "JoinGroup needs v5+",
        "Heartbeat needs v3+",
        "Kafka 2.3 or newer",
        "match Kafka 2.2",
    ] {
        assert!(text.contains(part), "{part:?} missing from: {text}");
    }
    let new = Proxy::start(upstream, "zk-2.3");
    let conn = Connection::connect(&new.bootstrap(), &ConnectionConfig::default()).unwrap();
    conn.check(&STATIC_MEMBERSHIP).unwrap();
}

#[test]
fn reconnects_elsewhere_when_a_broker_dies() {
    let cluster = broker::Cluster::start(3, broker::version_under_test());
    let client = failover_client(cluster.bootstrap())
        .api_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    client.refresh_metadata(None).unwrap();
    let group = unique_name("failover");
    let before = client.find_coordinator(&group).unwrap();
    // Hold a connection to the coordinator, then kill it.
    client.broker_versions(before.id).unwrap();
    cluster.kill(before.id as usize);
    let started = Instant::now();
    let meta = client.refresh_metadata(None).unwrap();
    assert!(!meta.brokers.is_empty());
    // Until the controller notices the death, brokers may still name the dead one; a member
    // would fail to connect and ask again, which is what this loop does.
    let mut after = client.find_coordinator(&group).unwrap();
    while after.id == before.id && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(200));
        after = client.find_coordinator(&group).unwrap();
    }
    assert_ne!(after.id, before.id, "the coordinator moved off the dead broker");
    client.broker_versions(after.id).unwrap();
    eprintln!(
        "coordinator moved from {} to {} in {:?}",
        before.id,
        after.id,
        started.elapsed()
    );
}
