//! A call that cannot reach any broker retries within its own bound and then fails with an
//! error naming that bound, the connection's error kept as its cause: `Producer::send` within
//! `max.block.ms`, an admin call within its timeout, `Client::refresh_metadata` within
//! `default.api.timeout.ms`. No broker is needed: the bootstrap port has nothing listening.
//!
//! Each call must last about its bound (it retried, rather than failing on the first refusal)
//! and not much longer (with a wide margin for a loaded machine).

use kafka_group::{Client, Error, NewTopic, ProducerRecord, Timeout};
use std::net::TcpListener;
use std::time::{Duration, Instant};

/// The bound each call is given.
const BOUND: Duration = Duration::from_secs(3);

/// A client whose only bootstrap address refuses connections.
fn unreachable_client() -> (Client, String) {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    let client = Client::builder()
        .bootstrap_servers(&addr)
        .api_timeout(BOUND)
        .build()
        .unwrap();
    (client, addr)
}

/// The call took about `BOUND`, failed with the retries timeout naming `bound_name`, and kept
/// the refused connection as the cause.
fn check(what: &str, took: Duration, r: Result<(), Error>, bound_name: &str, addr: &str) {
    let e = r.expect_err("nothing listens on the port");
    let text = e.to_string();
    assert!(
        took >= BOUND - Duration::from_millis(100) && took < BOUND + crate::support::LOAD_MARGIN,
        "{what}: failed after {took:?}, its bound {BOUND:?}: {text}"
    );
    assert!(
        matches!(
            e,
            Error::Timeout {
                which: Timeout::Retries,
                ..
            }
        ),
        "{what}: {text}"
    );
    assert!(
        text.contains(bound_name),
        "{what}: the bound is not named: {text}"
    );
    assert!(
        text.contains(addr) && text.to_lowercase().contains("refused"),
        "{what}: the cause is lost: {text}"
    );
}

#[test]
fn send_to_an_unreachable_cluster_retries_for_max_block_ms_and_says_so() {
    let (client, addr) = unreachable_client();
    let mut producer = client.producer().max_block(BOUND).build().unwrap();
    let t = Instant::now();
    let r = producer.send(ProducerRecord::new("t", "v")).map(drop);
    check("send", t.elapsed(), r, "max.block.ms", &addr);
}

#[test]
fn create_topics_on_an_unreachable_cluster_retries_for_its_timeout_and_says_so() {
    let (client, addr) = unreachable_client();
    let t = Instant::now();
    let r = client.admin().create_topics(&[NewTopic::new("t", 1, 1)], BOUND);
    check("create_topics", t.elapsed(), r, &format!("{BOUND:?}"), &addr);
}

#[test]
fn refresh_metadata_on_an_unreachable_cluster_retries_for_the_api_timeout_and_says_so() {
    let (client, addr) = unreachable_client();
    let t = Instant::now();
    let r = client.refresh_metadata(None).map(drop);
    check(
        "refresh_metadata",
        t.elapsed(),
        r,
        "default.api.timeout.ms",
        &addr,
    );
}
