//! The version-capping proxy against a real broker: it must look exactly like the release it
//! emulates (ApiVersions table, KIP-511 answer, connection closed on a too-new request), keep
//! clients behind it when they follow Metadata and FindCoordinator, and its fault hooks must do
//! what they say.

use crate::support::proxy::{self, Proxy};
use crate::support::wire::{self, WireClient};
use crate::support::{thread_names, wait_for, LOAD_MARGIN};
use kafka_group::unstable::protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, FindCoordinatorRequest, MetadataRequest, MetadataResponse,
};
use kafka_group::ApiKey;
use kafka_group::KafkaCode;
use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const UNSUPPORTED_VERSION: i16 = KafkaCode::UnsupportedVersion.code();
const COORDINATOR_NOT_AVAILABLE: i16 = KafkaCode::CoordinatorNotAvailable.code();

/// The highest ApiVersions version a client would send to `release` after negotiation.
fn api_versions_version(release: &str) -> i16 {
    proxy::table(release)[&ApiKey::ApiVersions.key()].1
}

fn api_versions_request() -> ApiVersionsRequest {
    ApiVersionsRequest {
        client_software_name: "kafka-group-it".into(),
        client_software_version: "0.1.0".into(),
        ..Default::default()
    }
}

fn as_table(resp: &ApiVersionsResponse) -> BTreeMap<i16, (i16, i16)> {
    let table: BTreeMap<_, _> = resp
        .api_keys
        .iter()
        .map(|k| (k.api_key, (k.min_version, k.max_version)))
        .collect();
    assert_eq!(table.len(), resp.api_keys.len(), "duplicate API keys in {resp:?}");
    table
}

fn assert_eof(client: &mut WireClient, what: &str) {
    match client.recv_frame() {
        Ok(frame) => panic!(
            "{what}: expected the connection to close, got a {}-byte frame",
            frame.len()
        ),
        Err(e) if wire::is_timeout(&e) => panic!("{what}: expected the connection to close, it stayed open"),
        Err(e) => assert!(
            matches!(
                e.kind(),
                io::ErrorKind::UnexpectedEof
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
            ),
            "{what}: unexpected error {e}"
        ),
    }
}

fn metadata(client: &mut WireClient, version: i16) -> io::Result<MetadataResponse> {
    // Null asks for every topic; v0 has no null and uses an empty list for that.
    let topics = if version == 0 { Some(Vec::new()) } else { None };
    client.call(
        &MetadataRequest {
            topics,
            ..Default::default()
        },
        version,
    )
}

#[test]
fn tsv_has_the_releases_the_tests_use() {
    let releases = proxy::releases();
    for r in ["zk-0.10.0", "zk-2.2", "zk-2.3", "kraft-4.0"] {
        assert!(releases.contains(&r), "{r} missing from {releases:?}");
    }
    assert_eq!(releases[0], "zk-0.10.0", "file order");
    let t = proxy::table("zk-0.10.0");
    assert_eq!(t.len(), 15);
    assert_eq!(t[&ApiKey::ApiVersions.key()], (0, 0));
    assert_eq!(t[&ApiKey::Metadata.key()], (0, 1));
    assert_eq!(proxy::table("kraft-4.0")[&ApiKey::Fetch.key()], (4, 17));
}

fn check_api_versions(release: &str) {
    let proxy = Proxy::start(proxy::upstream_for(release), release);
    assert_eq!(proxy.release(), release);
    let mut client = WireClient::connect(proxy.bootstrap()).unwrap();
    let version = api_versions_version(release);
    let resp = client.call(&api_versions_request(), version).unwrap();
    assert_eq!(resp.error_code, 0, "{release} ApiVersions v{version}");
    assert_eq!(
        as_table(&resp),
        proxy::table(release),
        "{release} ApiVersions v{version}"
    );
}

#[test]
fn api_versions_zk_0_10_0() {
    assert_eq!(api_versions_version("zk-0.10.0"), 0);
    check_api_versions("zk-0.10.0");
}

#[test]
fn api_versions_zk_2_2() {
    check_api_versions("zk-2.2");
}

#[test]
fn api_versions_zk_2_3() {
    check_api_versions("zk-2.3");
}

#[test]
fn api_versions_kraft_4_0() {
    check_api_versions("kraft-4.0");
}

#[test]
fn api_versions_above_release_max_gets_kip_511_answer() {
    let proxy = Proxy::start(proxy::upstream_for("zk-0.10.0"), "zk-0.10.0");
    let mut client = WireClient::connect(proxy.addr()).unwrap();
    let correlation_id = client.send(&api_versions_request(), 3).unwrap();
    let frame = client.recv_frame().unwrap();
    // The answer is a v0 body whatever was asked, so the client can read it without knowing the
    // broker's versions; decoding it as v0 must consume it exactly.
    let resp = wire::decode_response::<ApiVersionsRequest>(frame, 0, correlation_id).unwrap();
    assert_eq!(resp.error_code, UNSUPPORTED_VERSION);
    assert_eq!(
        as_table(&resp),
        BTreeMap::from([(ApiKey::ApiVersions.key(), (0, 0))])
    );

    // Like a real broker, the proxy keeps the connection for the retry at a version it has.
    let resp = client.call(&api_versions_request(), 0).unwrap();
    assert_eq!(resp.error_code, 0);
    assert_eq!(as_table(&resp), proxy::table("zk-0.10.0"));
}

#[test]
fn request_above_release_max_closes_the_connection() {
    let proxy = Proxy::start(proxy::upstream_for("zk-0.10.0"), "zk-0.10.0");
    let mut client = WireClient::connect(proxy.addr()).unwrap();
    metadata(&mut client, 1).unwrap();
    // Metadata v4 is what 0.11 brought; 0.10.0 drops the connection.
    client.send(&MetadataRequest::default(), 4).unwrap();
    assert_eof(&mut client, "Metadata v4 to zk-0.10.0");
    wait_for(
        "the proxy to forget the connection",
        Duration::from_secs(5),
        || proxy.connections() == 0,
    );

    // An API the release does not have at all (CreateTopics came in 0.10.1) is treated the same.
    let mut client = WireClient::connect(proxy.addr()).unwrap();
    client
        .send(
            &kafka_group::unstable::protocol::messages::CreateTopicsRequest::default(),
            0,
        )
        .unwrap();
    assert_eof(&mut client, "CreateTopics v0 to zk-0.10.0");
}

/// Metadata at `version` through a proxy for `release`: every broker address must be a proxy
/// listener that leads to the same broker and caps the same release.
fn check_metadata_rewrite(release: &str, version: i16) {
    let proxy = Proxy::start(proxy::upstream_for(release), release);
    let mut client = WireClient::connect(proxy.addr()).unwrap();
    let resp = metadata(&mut client, version).unwrap();
    assert!(
        !resp.brokers.is_empty(),
        "{release} Metadata v{version}: no brokers"
    );
    let listeners = proxy.listener_addrs();
    let distinct: std::collections::BTreeSet<_> = resp.brokers.iter().map(|b| (&b.host, b.port)).collect();
    assert_eq!(
        distinct.len(),
        resp.brokers.len(),
        "one listener per broker: {:?}",
        resp.brokers
    );
    for b in &resp.brokers {
        let addr: SocketAddr = format!("{}:{}", b.host, b.port).parse().unwrap();
        assert!(
            listeners.contains(&addr),
            "broker {} at {addr} is not a proxy listener {listeners:?}",
            b.node_id
        );

        let mut via_broker = WireClient::connect(addr).unwrap();
        let again = metadata(&mut via_broker, version).unwrap();
        let ids = |r: &MetadataResponse| {
            r.brokers
                .iter()
                .map(|b| (b.node_id, b.host.clone(), b.port))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ids(&again),
            ids(&resp),
            "the same brokers, behind the same listeners"
        );
        let versions = via_broker
            .call(&api_versions_request(), api_versions_version(release))
            .unwrap();
        assert_eq!(
            as_table(&versions),
            proxy::table(release),
            "listener for broker {} caps {release}",
            b.node_id
        );
    }
}

#[test]
fn metadata_v1_through_zk_0_10_0_points_at_proxies() {
    check_metadata_rewrite("zk-0.10.0", 1);
}

#[test]
fn metadata_v12_through_kraft_4_0_points_at_proxies() {
    check_metadata_rewrite("kraft-4.0", 12);
}

/// FindCoordinator at `version` through a proxy for `release`: the coordinator must be a proxy
/// listener. The first lookups on a fresh cluster can fail while __consumer_offsets is created.
fn check_find_coordinator_rewrite(release: &str, version: i16) {
    let proxy = Proxy::start(proxy::upstream_for(release), release);
    let mut client = WireClient::connect(proxy.addr()).unwrap();
    let group = crate::support::unique_name("proxy-group");
    let req = if version <= 3 {
        FindCoordinatorRequest {
            key: group.as_str().into(),
            ..Default::default()
        }
    } else {
        FindCoordinatorRequest {
            coordinator_keys: vec![group.as_str().into()],
            ..Default::default()
        }
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let (host, port) = loop {
        let resp = client.call(&req, version).unwrap();
        let (error, host, port) = match resp.coordinators.first() {
            Some(c) if version >= 4 => (c.error_code, c.host.clone(), c.port),
            _ => (resp.error_code, resp.host.clone(), resp.port),
        };
        match error {
            0 => break (host, port),
            COORDINATOR_NOT_AVAILABLE if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200))
            }
            e => panic!("FindCoordinator v{version} for {group}: error {e}"),
        }
    };
    let addr: SocketAddr = format!("{host}:{port}").parse().unwrap();
    assert!(
        proxy.listener_addrs().contains(&addr),
        "coordinator {addr} is not a proxy listener"
    );
    let mut coordinator = WireClient::connect(addr).unwrap();
    let versions = coordinator
        .call(&api_versions_request(), api_versions_version(release))
        .unwrap();
    assert_eq!(as_table(&versions), proxy::table(release));
}

#[test]
fn find_coordinator_v0_through_zk_0_10_0_points_at_a_proxy() {
    check_find_coordinator_rewrite("zk-0.10.0", 0);
}

#[test]
fn find_coordinator_v4_through_kraft_4_0_points_at_a_proxy() {
    check_find_coordinator_rewrite("kraft-4.0", 4);
}

// --- fault hooks ---------------------------------------------------------------------------------

/// Any release does for the fault hooks; this one is served by the shared broker whether it runs
/// Kafka 4.x or 3.9, so these tests need no second broker.
const FAULT_RELEASE: &str = "kraft-4.0";
const METADATA_VERSION: i16 = 12;

#[test]
fn drop_connections_closes_every_client() {
    let proxy = Proxy::start(proxy::upstream_for(FAULT_RELEASE), FAULT_RELEASE);
    let mut a = WireClient::connect(proxy.addr()).unwrap();
    let mut b = WireClient::connect(proxy.addr()).unwrap();
    metadata(&mut a, METADATA_VERSION).unwrap();
    metadata(&mut b, METADATA_VERSION).unwrap();
    assert_eq!(proxy.connections(), 2);

    proxy.drop_connections();
    assert_eq!(proxy.connections(), 0);
    assert_eof(&mut a, "a after drop_connections");
    assert_eof(&mut b, "b after drop_connections");

    // The listener is untouched: a new connection works.
    let mut c = WireClient::connect(proxy.addr()).unwrap();
    metadata(&mut c, METADATA_VERSION).unwrap();
    assert_eq!(proxy.connections(), 1);
}

#[test]
fn connections_counts_open_clients() {
    let proxy = Proxy::start(proxy::upstream_for(FAULT_RELEASE), FAULT_RELEASE);
    assert_eq!(proxy.connections(), 0);
    let mut a = WireClient::connect(proxy.addr()).unwrap();
    let mut b = WireClient::connect(proxy.addr()).unwrap();
    metadata(&mut a, METADATA_VERSION).unwrap();
    metadata(&mut b, METADATA_VERSION).unwrap();
    assert_eq!(proxy.connections(), 2);
    drop(a);
    wait_for(
        "the closed client to be forgotten",
        Duration::from_secs(5),
        || proxy.connections() == 1,
    );
    drop(b);
    wait_for("both clients to be forgotten", Duration::from_secs(5), || {
        proxy.connections() == 0
    });
}

#[test]
fn delay_api_holds_only_that_apis_responses() {
    // Twice the margin: what is not held answers within the margin, well before the delay.
    let delay = 2 * LOAD_MARGIN;
    let proxy = Proxy::start(proxy::upstream_for(FAULT_RELEASE), FAULT_RELEASE);
    let mut slow = WireClient::connect(proxy.addr()).unwrap();
    let mut other = WireClient::connect(proxy.addr()).unwrap();
    let seen = proxy.requests_seen(ApiKey::Metadata);
    proxy.delay_api(ApiKey::Metadata, delay);
    let start = Instant::now();
    let id = slow.send(&MetadataRequest::default(), METADATA_VERSION).unwrap();
    // Another forwarded API, on another connection, passes while the Metadata answer is held.
    let lookup = FindCoordinatorRequest {
        coordinator_keys: vec!["delay-api".into()],
        ..Default::default()
    };
    other.call(&lookup, 4).unwrap();
    let held = start.elapsed();
    slow.recv::<MetadataRequest>(METADATA_VERSION, id).unwrap();
    let answered = start.elapsed();
    assert!(answered >= delay, "Metadata answered after {answered:?}");
    assert!(
        held < LOAD_MARGIN,
        "FindCoordinator waited {held:?} behind a held Metadata"
    );
    assert_eq!(proxy.requests_seen(ApiKey::Metadata), seen + 1);
    proxy.delay_api(ApiKey::Metadata, Duration::ZERO);
    let start = Instant::now();
    metadata(&mut slow, METADATA_VERSION).unwrap();
    assert!(start.elapsed() < LOAD_MARGIN, "still held: {:?}", start.elapsed());
}

#[test]
fn set_delay_holds_every_response() {
    // As long as the margin: three pipelined responses held one after the other (3 delays)
    // stand clear of one delay plus the margin, and an undelayed answer of the bound.
    let delay = LOAD_MARGIN;
    let proxy = Proxy::start(proxy::upstream_for(FAULT_RELEASE), FAULT_RELEASE);
    let mut client = WireClient::connect(proxy.addr()).unwrap();
    metadata(&mut client, METADATA_VERSION).unwrap();

    proxy.set_delay(delay);
    let start = Instant::now();
    metadata(&mut client, METADATA_VERSION).unwrap();
    assert!(
        start.elapsed() >= delay,
        "forwarded response after {:?}",
        start.elapsed()
    );
    let start = Instant::now();
    client.call(&api_versions_request(), 2).unwrap();
    assert!(
        start.elapsed() >= delay,
        "ApiVersions answered after {:?}",
        start.elapsed()
    );

    // Pipelined requests are each held for the delay, not for the sum of the delays.
    let start = Instant::now();
    let ids: Vec<i32> = (0..3)
        .map(|_| {
            client
                .send(&MetadataRequest::default(), METADATA_VERSION)
                .unwrap()
        })
        .collect();
    for id in ids {
        client.recv::<MetadataRequest>(METADATA_VERSION, id).unwrap();
    }
    let elapsed = start.elapsed();
    assert!(
        elapsed >= delay && elapsed < delay + LOAD_MARGIN,
        "three pipelined responses after {elapsed:?}"
    );

    proxy.set_delay(Duration::ZERO);
    let start = Instant::now();
    metadata(&mut client, METADATA_VERSION).unwrap();
    assert!(
        start.elapsed() < LOAD_MARGIN,
        "delay off, yet the response took {:?}",
        start.elapsed()
    );
}

#[test]
fn blackhole_holds_traffic_until_lifted() {
    let proxy = Proxy::start(proxy::upstream_for(FAULT_RELEASE), FAULT_RELEASE);
    let mut client = WireClient::connect(proxy.addr()).unwrap();
    metadata(&mut client, METADATA_VERSION).unwrap();

    proxy.blackhole(true);
    let forwarded = client
        .send(&MetadataRequest::default(), METADATA_VERSION)
        .unwrap();
    let local = client.send(&api_versions_request(), 2).unwrap();
    client.set_timeout(Some(Duration::from_millis(500)));
    let err = client
        .recv_frame()
        .expect_err("a response came through the blackhole");
    assert!(wire::is_timeout(&err), "expected a timeout, got {err}");
    assert_eq!(proxy.connections(), 1, "the blackhole keeps the connection open");

    proxy.blackhole(false);
    client.set_timeout(Some(wire::DEFAULT_TIMEOUT));
    client
        .recv::<MetadataRequest>(METADATA_VERSION, forwarded)
        .unwrap();
    let versions = client.recv::<ApiVersionsRequest>(2, local).unwrap();
    assert_eq!(as_table(&versions), proxy::table(FAULT_RELEASE));
    metadata(&mut client, METADATA_VERSION).unwrap();
}

/// The connection killer closes every connection, open before it started or after, no sooner
/// than the shortest lifetime after it saw it, counts each, and leaves connections alone once
/// stopped.
#[test]
fn kill_connections_resets_every_connection_and_counts_it() {
    let proxy = Proxy::start(proxy::upstream_for(FAULT_RELEASE), FAULT_RELEASE);
    let (lo, hi) = (Duration::from_millis(300), Duration::from_millis(600));
    let mut before = WireClient::connect(proxy.addr()).unwrap();
    metadata(&mut before, METADATA_VERSION).unwrap();
    let started = Instant::now();
    proxy.kill_connections(42, lo..=hi);
    let mut after = WireClient::connect(proxy.addr()).unwrap();
    metadata(&mut after, METADATA_VERSION).unwrap();
    assert_eof(&mut before, "the connection open before the killer started");
    assert!(
        started.elapsed() >= lo,
        "reset after {:?}, before {lo:?}",
        started.elapsed()
    );
    assert_eof(&mut after, "the connection opened under the killer");
    wait_for("two resets counted", Duration::from_secs(5), || {
        proxy.resets() == 2
    });

    proxy.stop_killing();
    let mut spared = WireClient::connect(proxy.addr()).unwrap();
    metadata(&mut spared, METADATA_VERSION).unwrap();
    std::thread::sleep(hi * 2);
    metadata(&mut spared, METADATA_VERSION).expect("a connection made after stop_killing lives on");
    assert_eq!(proxy.resets(), 2);
}

#[test]
fn drop_stops_listeners_and_closes_clients() {
    let proxy = Proxy::start(proxy::upstream_for(FAULT_RELEASE), FAULT_RELEASE);
    let addr = proxy.addr();
    let mut client = WireClient::connect(addr).unwrap();
    let resp = metadata(&mut client, METADATA_VERSION).unwrap();
    let broker_listeners = proxy.listener_addrs();
    assert!(broker_listeners.len() >= resp.brokers.len());
    // A client stuck in a blackhole must not keep Drop waiting.
    proxy.blackhole(true);
    client
        .send(&MetadataRequest::default(), METADATA_VERSION)
        .unwrap();

    let threads = proxy.thread_name_prefix();
    assert!(
        thread_count(&threads) >= 4,
        "listener, connection and two relay threads"
    );

    let start = Instant::now();
    drop(proxy);
    assert!(start.elapsed() < LOAD_MARGIN, "Drop took {:?}", start.elapsed());
    // Drop has joined every thread, but a join returns when the kernel clears the thread's id,
    // a moment before the thread leaves /proc/self/task; so the count is read until it
    // settles, briefly. A thread still running (not joined) keeps it above zero.
    let settled = Instant::now() + Duration::from_secs(2);
    while thread_count(&threads) > 0 && Instant::now() < settled {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(thread_count(&threads), 0, "threads {threads}* outlived the proxy");
    assert_eof(&mut client, "client after the proxy was dropped");
    for a in broker_listeners {
        assert!(
            std::net::TcpStream::connect(a).is_err(),
            "listener {a} still accepts"
        );
    }
}

/// Threads of this process whose name starts with `prefix`.
fn thread_count(prefix: &str) -> usize {
    thread_names()
        .iter()
        .filter(|name| name.starts_with(prefix))
        .count()
}
