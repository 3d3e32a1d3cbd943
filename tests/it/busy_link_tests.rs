//! A caller queued behind another caller's request on one of the client's shared connections
//! (one request in flight per connection) gives up at its own deadline, with an error saying
//! so, instead of waiting for however long the other request takes. The proxy holds the answer
//! to the first request far past the second caller's bound: the second returns near that bound
//! (with a wide margin for a loaded machine), long before the first's answer or timeout.

use crate::group_tests::member_builder;
use crate::support::proxy::Proxy;
use crate::support::LOAD_MARGIN;
use crate::support::{broker, create_topic, unique_name, wait_for};
use kafka_group::unstable::protocol::messages::ProduceRequest;
use kafka_group::unstable::RawClient;
use kafka_group::{ApiKey, Client, Error, NewTopic, Timeout};
use std::time::{Duration, Instant};

/// How long the proxy holds the first caller's answer: past every bound below.
const HELD: Duration = Duration::from_secs(60);
/// The first caller's own bound: how long it holds the connection.
const FIRST: Duration = Duration::from_secs(30);
/// The second caller's bound.
const SECOND: Duration = Duration::from_secs(2);

fn proxied() -> (Proxy, Client, String) {
    let direct = Client::builder()
        .bootstrap_servers(broker::shared_legacy().to_string())
        .build()
        .unwrap();
    let topic = create_topic(&direct, "busy-link", 1, 1);
    let p = Proxy::start(broker::shared_legacy(), "kraft-3.9");
    let client = Client::builder()
        .bootstrap_servers(p.bootstrap())
        .request_timeout(HELD + Duration::from_secs(10))
        .build()
        .unwrap();
    // The broker is known: both callers go to the same connection, the one to it.
    client.refresh_metadata(Some(&[topic.as_str()])).unwrap();
    (p, client, topic)
}

/// Whether `e`, or an error in its chain of causes, is the wait for a busy connection.
fn queued(e: &Error) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        if matches!(
            c.downcast_ref::<Error>(),
            Some(Error::Timeout {
                which: Timeout::Queued,
                ..
            })
        ) {
            return true;
        }
        cur = c.source();
    }
    false
}

fn assert_second_bounded(
    what: &str,
    took: Duration,
    bound: Duration,
    r: &Result<impl std::fmt::Debug, Error>,
) {
    assert!(
        took < bound + LOAD_MARGIN,
        "{what}: took {took:?} behind a held request, its own bound {bound:?}: {r:?}"
    );
    let e = r.as_ref().expect_err("the answer cannot have come");
    assert!(queued(e), "{what}: {e}");
}

/// Starts a member's join whose coordinator lookup (the same one a heartbeat thread's
/// rediscovery makes) the proxy holds, so that it holds the client's coordinator connection to
/// the broker; returns once the lookup has reached the proxy, with the join's thread.
fn hold_the_coordinator_lookup(
    p: &Proxy,
    client: &Client,
    topic: &str,
) -> std::thread::JoinHandle<Result<(), Error>> {
    p.delay_api(ApiKey::FindCoordinator, HELD);
    let seen = p.requests_seen(ApiKey::FindCoordinator);
    let mut m = member_builder(client, &unique_name("busy-first"), topic)
        .build()
        .unwrap();
    let first = std::thread::spawn(move || m.join(FIRST).map(|_| ()));
    wait_for(
        "the first lookup to reach the proxy",
        Duration::from_secs(10),
        || p.requests_seen(ApiKey::FindCoordinator) > seen,
    );
    first
}

#[test]
fn a_coordinator_lookup_behind_another_returns_at_its_own_deadline() {
    let (p, client, topic) = proxied();
    let first = hold_the_coordinator_lookup(&p, &client, &topic);
    let mut second = member_builder(&client, &unique_name("busy-second"), &topic)
        .build()
        .unwrap();
    let t = Instant::now();
    let r = second.join(SECOND);
    assert_second_bounded("join behind a lookup", t.elapsed(), SECOND, &r);
    assert!(
        first.join().unwrap().is_err(),
        "the first lookup cannot have been answered"
    );
}

#[test]
fn a_poll_whose_coordinator_lookup_waits_behind_another_returns_no_error() {
    // A poll that finds the client's connection held by a neighbour's lookup until its own
    // deadline has nothing to report: the lookup never went out, and the next poll tries
    // again. An error here would make an application treat a busy neighbour as a failure
    // (and a member that has just lost its session would hand its `Lost` event out late).
    let (p, client, topic) = proxied();
    let first = hold_the_coordinator_lookup(&p, &client, &topic);
    let mut second = member_builder(&client, &unique_name("busy-second"), &topic)
        .build()
        .unwrap();
    for _ in 0..3 {
        let t = Instant::now();
        let r = second.poll(SECOND);
        assert!(
            t.elapsed() < SECOND + LOAD_MARGIN,
            "poll behind a lookup took {:?}, its bound {SECOND:?}: {r:?}",
            t.elapsed()
        );
        assert!(r.unwrap().is_empty(), "nothing can have happened");
    }
    assert_eq!(second.state(), kafka_group::MemberState::Unjoined);
    assert!(
        first.join().unwrap().is_err(),
        "the first lookup cannot have been answered"
    );
}

#[test]
fn a_metadata_request_behind_a_create_topics_returns_at_its_own_deadline() {
    let (p, client, _) = proxied();
    p.delay_api(ApiKey::CreateTopics, HELD);
    let first = {
        let admin = client.admin();
        let name = unique_name("busy-create");
        std::thread::spawn(move || admin.create_topics(&[NewTopic::new(&name, 1, 1)], FIRST))
    };
    wait_for(
        "the CreateTopics to reach the proxy",
        Duration::from_secs(10),
        || p.requests_seen(ApiKey::CreateTopics) > 0,
    );
    // Its Metadata request goes to the same broker, on the same connection.
    let admin = client.admin().api_timeout(SECOND);
    let t = Instant::now();
    let r = admin.list_groups();
    assert_second_bounded("list_groups behind a CreateTopics", t.elapsed(), SECOND, &r);
    assert!(
        first.join().unwrap().is_err(),
        "the CreateTopics cannot have been answered"
    );
}

#[test]
fn a_produce_behind_another_acks_all_produce_returns_at_its_request_timeout() {
    // Raw requests have no deadline of their own: `request.timeout.ms` bounds each, the wait
    // for the connection included.
    let (p, _, topic) = proxied();
    let request_timeout = Duration::from_secs(20);
    let client = Client::builder()
        .bootstrap_servers(p.bootstrap())
        .request_timeout(request_timeout)
        .build()
        .unwrap();
    let meta = client.refresh_metadata(Some(&[topic.as_str()])).unwrap();
    let leader = meta.topics[&topic].partitions[0].leader;
    p.delay_api(ApiKey::Produce, HELD);
    let produce = move |client: &Client| {
        client.send_to(leader, |_| ProduceRequest {
            acks: -1,
            timeout_ms: 30_000,
            ..Default::default()
        })
    };
    let first = {
        let client = client.clone();
        std::thread::spawn(move || produce(&client))
    };
    wait_for(
        "the first Produce to reach the proxy",
        Duration::from_secs(10),
        || p.requests_seen(ApiKey::Produce) > 0,
    );
    let t = Instant::now();
    let r = produce(&client);
    assert_second_bounded("Produce behind a Produce", t.elapsed(), request_timeout, &r);
    let text = r.unwrap_err().to_string();
    assert!(text.contains("request.timeout.ms"), "{text}");
    assert!(
        first.join().unwrap().is_err(),
        "the first Produce cannot have been answered"
    );
}
