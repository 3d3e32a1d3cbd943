//! Connections by purpose against a real broker: a Produce the broker (here, the proxy in front
//! of it) is slow to answer must not hold up, on the same broker and the same `Client`, a
//! member's heartbeats or a coordinator lookup. Before connections by purpose, the lookup
//! queued behind the Produce on the client's one connection to that broker.
//!
//! The delay is large and the bound checked against it wide: this checks that the two do not
//! wait for each other, not how fast either is.

use crate::support::proxy::{self, Proxy};
use crate::support::{create_topic, unique_name, wait_for};
use kafka_group::ApiKey;
use kafka_group::Client;
use kafka_group::GroupEvent;
use kafka_group::{Acks, ProducerRecord};
use std::time::{Duration, Instant};

const RELEASE: &str = "kraft-4.0";
/// How long the proxy holds every Produce answer.
const PRODUCE_DELAY: Duration = Duration::from_secs(8);

#[test]
fn a_slow_produce_does_not_delay_heartbeats_or_a_coordinator_lookup_on_the_same_broker() {
    let upstream = proxy::upstream_for(RELEASE);
    let direct = Client::builder()
        .bootstrap_servers(upstream.to_string())
        .build()
        .unwrap();
    let topic = create_topic(&direct, "slow-produce", 1, 1);
    let group = unique_name("slow-produce");
    // One broker: the partition's leader is the group's coordinator.
    let proxy = Proxy::start(upstream, RELEASE);
    let client = Client::builder()
        .bootstrap_servers(proxy.bootstrap())
        .client_id("isolation-tests")
        .build()
        .unwrap();
    let coordinator = client.find_coordinator(&group).unwrap();
    let meta = client.refresh_metadata(Some(&[&topic])).unwrap();
    assert_eq!(meta.topics[&topic].partitions[0].leader, coordinator.id);

    let mut member = client
        .member(&group)
        .subscribe([topic.as_str()])
        .session_timeout(Duration::from_secs(10))
        .heartbeat_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let events = member.join(Duration::from_secs(60)).unwrap();
    assert!(
        events.iter().any(|e| matches!(e, GroupEvent::Assigned { .. })),
        "{events:?}"
    );

    proxy.delay_api(ApiKey::Produce, PRODUCE_DELAY);
    let produced_before = proxy.requests_seen(ApiKey::Produce);
    let producing = {
        let client = client.clone();
        let topic = topic.clone();
        std::thread::spawn(move || {
            let mut producer = client.producer().acks(Acks::All).build().unwrap();
            let handle = producer.send(ProducerRecord::new(&topic, "slow")).unwrap();
            let started = Instant::now();
            let acked = producer.flush().map(|()| handle.try_result());
            (acked, started.elapsed())
        })
    };
    wait_for("the Produce to reach the proxy", Duration::from_secs(10), || {
        proxy.requests_seen(ApiKey::Produce) > produced_before
    });
    let stuck_since = Instant::now();

    // While the Produce waits for its answer: a coordinator lookup on that broker, through the
    // same client, and the member's heartbeats.
    let heartbeats = member.metrics().heartbeats;
    let failures = member.metrics().heartbeat_failures;
    let asked = Instant::now();
    let found = client.lookup_coordinator(&group).unwrap();
    let lookup = asked.elapsed();
    assert_eq!(found.id, coordinator.id);
    assert!(
        lookup < PRODUCE_DELAY / 2,
        "FindCoordinator took {lookup:?} behind a Produce held {PRODUCE_DELAY:?}"
    );
    assert!(
        !producing.is_finished(),
        "the Produce was answered before the lookup did: the proxy did not delay it"
    );
    let window = PRODUCE_DELAY / 2;
    while stuck_since.elapsed() < window {
        let events = member.poll(Duration::from_millis(100)).unwrap();
        assert!(events.is_empty(), "the group moved: {events:?}");
    }
    let m = member.metrics();
    assert!(
        !producing.is_finished(),
        "the Produce was answered within {window:?}: the proxy did not delay it"
    );
    // Every 200 ms over four seconds: about twenty; a handful proves they were not held up.
    assert!(
        m.heartbeats >= heartbeats + 5,
        "{} heartbeats in {window:?} while the Produce was stuck",
        m.heartbeats - heartbeats
    );
    assert_eq!(m.heartbeat_failures, failures);

    let (acked, took) = producing.join().unwrap();
    assert!(matches!(acked.unwrap(), Some(Ok(_))));
    // The Produce really was the slow one.
    assert!(took >= PRODUCE_DELAY - Duration::from_millis(500), "{took:?}");
    member.close().unwrap();
}
