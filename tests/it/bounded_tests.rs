//! Calls return within the bound the caller gave, and retriable failures are retried rather
//! than returned. Each test failed
//! before the fix: `poll(1 s)` blocked for minutes on a closed port and lost the cause, `close()`
//! took about three request timeouts under a blackhole, a reset during the leader's metadata
//! lookup came out of `poll`, and a blackholed member noticed its session had expired only after
//! its request timeouts ran out.
//!
//! The bounds asserted here are generous multiples of the timeouts given: they check that a call
//! is bounded by what the caller asked for, not how fast it is.

use crate::group_tests::{client, member_builder, static_member, topic_with_partitions, SESSION};
use crate::support::proxy::Proxy;
use crate::support::{broker, unique_name};
use kafka_group::ApiKey;
use kafka_group::{Client, Error, Timeout};
use kafka_group::{GroupEvent, MemberState};
use std::net::TcpListener;
use std::time::{Duration, Instant};

/// A loopback port with nothing listening on it (bound once, then released).
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn assigned(events: &[GroupEvent]) -> bool {
    events.iter().any(|e| matches!(e, GroupEvent::Assigned { .. }))
}

#[test]
fn poll_against_a_closed_port_returns_within_its_timeout_and_keeps_the_cause() {
    let port = closed_port();
    let client = Client::builder()
        .bootstrap_servers(format!("127.0.0.1:{port}"))
        .api_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let mut consumer = client
        .consumer(&unique_name("closed-port"))
        .subscribe(["nowhere"])
        .build()
        .unwrap();
    let started = Instant::now();
    let mut polls = 0;
    let err = loop {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no error within 30 s of a 3 s default.api.timeout.ms"
        );
        let t = Instant::now();
        let r = consumer.poll(Duration::from_secs(1));
        let took = t.elapsed();
        polls += 1;
        assert!(
            took < Duration::from_secs(1) + crate::support::LOAD_MARGIN,
            "poll(1 s) took {took:?}"
        );
        match r {
            Ok(p) => assert!(p.is_empty() && p.events.is_empty(), "{p:?}"),
            Err(e) => break e,
        }
    };
    assert!(
        polls >= 2,
        "the first polls return empty while the lookup is retried"
    );
    assert!(
        matches!(
            err,
            Error::Timeout {
                which: Timeout::Retries,
                ..
            }
        ),
        "{err}"
    );
    // The error names the cause: the address and the OS's word for it.
    let text = err.to_string();
    assert!(
        text.contains(&format!("127.0.0.1:{port}")) && text.to_lowercase().contains("refused"),
        "{text}"
    );
    let source = std::error::Error::source(&err).expect("the last error is the source");
    assert!(
        matches!(source.downcast_ref::<Error>(), Some(Error::Io { .. })),
        "{source}"
    );
    // The consumer is still usable: the next poll tries again.
    assert!(consumer.poll(Duration::from_millis(100)).is_ok());

    // `join` with a timeout ends at its timeout with the same cause.
    let mut member = client
        .member(&unique_name("closed-port"))
        .subscribe(["nowhere"])
        .build()
        .unwrap();
    let t = Instant::now();
    let err = member.join(Duration::from_secs(1)).unwrap_err();
    assert!(
        t.elapsed() < Duration::from_secs(1) + crate::support::LOAD_MARGIN,
        "join(1 s) took {:?}",
        t.elapsed()
    );
    assert!(err.to_string().to_lowercase().contains("refused"), "{err}");
}

#[test]
fn poll_returns_within_its_timeout_while_the_coordinator_holds_the_join() {
    let c = client(broker::shared().bootstrap());
    let topic = topic_with_partitions(&c, 2);
    let group = unique_name("held-join");
    let mut a = static_member(&c, &group, &topic, "a");
    assert!(assigned(&a.join(Duration::from_secs(60)).unwrap()));
    let mut b = static_member(&c, &group, &topic, "b");
    // b's JoinGroup starts a rebalance that the coordinator holds until `a` rejoins, and `a`
    // does not poll yet: each of b's polls returns at its timeout, the JoinGroup still in flight.
    for _ in 0..3 {
        let t = Instant::now();
        let events = b.poll(Duration::from_secs(1)).unwrap();
        // Held until `a` rejoins or its max.poll.interval.ms (20 s) runs out: far longer.
        assert!(
            t.elapsed() < Duration::from_secs(1) + crate::support::LOAD_MARGIN,
            "poll(1 s) took {:?}",
            t.elapsed()
        );
        assert!(!assigned(&events), "{events:?}");
        assert!(b.rejoin_pending());
    }
    // Once `a` polls too, the join b started completes on one of its later polls.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut a_done, mut b_done) = (false, false);
    while !(a_done && b_done) {
        assert!(
            Instant::now() < deadline,
            "no convergence: a {a_done}, b {b_done}"
        );
        a_done |= assigned(&a.poll(Duration::from_millis(100)).unwrap());
        b_done |= assigned(&b.poll(Duration::from_millis(100)).unwrap());
    }
    assert_eq!(a.generation().map(|g| g.id), b.generation().map(|g| g.id));
    assert_eq!(
        a.assignment().topic_partitions().len() + b.assignment().topic_partitions().len(),
        2
    );
    a.close().unwrap();
    b.close().unwrap();
}

#[test]
fn a_reset_while_the_leader_looks_up_metadata_is_retried_inside_poll() {
    let direct = client(&broker::shared_legacy().to_string());
    let topic = topic_with_partitions(&direct, 3);
    let p = Proxy::start(broker::shared_legacy(), "kraft-3.9");
    let via_proxy = client(&p.bootstrap());
    let mut leader = static_member(&via_proxy, &unique_name("leader-reset"), &topic, "leader");
    // The only Metadata requests of this client are the leader's partition lookups: the first
    // two connections that carry one are reset.
    p.reset_next(ApiKey::Metadata, 2);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "never assigned");
        let events = leader
            .poll(Duration::from_secs(1))
            .expect("a brief reset is retried, not returned");
        if assigned(&events) {
            break;
        }
    }
    assert_eq!(p.resets_pending(ApiKey::Metadata), 0, "both resets happened");
    assert_eq!(leader.assignment().topic_partitions().len(), 3);
    leader.close().unwrap();
}

#[test]
fn close_under_a_blackhole_is_bounded() {
    let direct = client(&broker::shared_legacy().to_string());
    let topic = topic_with_partitions(&direct, 2);
    let p = Proxy::start(broker::shared_legacy(), "kraft-3.9");
    // The default request timeout (30 s): the member used to sit out about three of them.
    let via_proxy = client(&p.bootstrap());

    let group = unique_name("close-bh");
    let mut in_request = static_member(&via_proxy, &group, &topic, "in-request");
    in_request.join(Duration::from_secs(60)).unwrap();
    let mut dynamic = member_builder(&via_proxy, &unique_name("close-bh"), &topic)
        .close_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    dynamic.join(Duration::from_secs(60)).unwrap();
    // These two have their heartbeat connections up: under the blackhole their heartbeat
    // threads get stuck waiting for an answer.
    let deadline = Instant::now() + Duration::from_secs(10);
    while in_request.metrics().heartbeats == 0 || dynamic.metrics().heartbeats == 0 {
        assert!(Instant::now() < deadline, "no heartbeat answered");
        in_request.poll(Duration::from_millis(20)).unwrap();
        dynamic.poll(Duration::from_millis(20)).unwrap();
    }
    // This one's heartbeat thread has yet to connect: it gets stuck in the ApiVersions
    // handshake of its first heartbeat connection.
    let mut in_handshake = static_member(&via_proxy, &group, &topic, "in-handshake");
    in_handshake.join(Duration::from_secs(60)).unwrap();
    p.blackhole(true);
    std::thread::sleep(Duration::from_millis(800));

    // A static member's close sends nothing: it only stops its heartbeat thread.
    for (what, m) in [("in a heartbeat", in_request), ("in a handshake", in_handshake)] {
        let t = Instant::now();
        m.close().unwrap();
        // At once, with room for a loaded machine; the stuck request alone would hold it for
        // its request timeout (30 s).
        assert!(
            t.elapsed() < crate::support::LOAD_MARGIN,
            "static close {what} took {:?}",
            t.elapsed()
        );
    }

    // A dynamic member's LeaveGroup cannot get through; close gives up at its close_timeout.
    let t = Instant::now();
    let r = dynamic.close();
    let took = t.elapsed();
    assert!(
        took < Duration::from_secs(2) + crate::support::LOAD_MARGIN,
        "close with a 2 s close_timeout took {took:?}: {r:?}"
    );
    assert!(r.is_err(), "the LeaveGroup cannot have been answered");
    p.blackhole(false);
}

#[test]
fn a_static_members_close_does_not_wait_for_its_heartbeat_threads_connect() {
    let direct = client(&broker::shared_legacy().to_string());
    let topic = topic_with_partitions(&direct, 2);
    let p = Proxy::start(broker::shared_legacy(), "kraft-3.9");
    // A connect may take up to 40 s, and the session lets the heartbeat thread sit that out.
    let connect_timeout = Duration::from_secs(40);
    let via_proxy = Client::builder()
        .bootstrap_servers(p.bootstrap())
        .connect_timeout(connect_timeout)
        .build()
        .unwrap();
    let mut m = member_builder(&via_proxy, &unique_name("held-connect"), &topic)
        .session_timeout(Duration::from_secs(45))
        .group_instance_id("m")
        .build()
        .unwrap();
    m.join(Duration::from_secs(60)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while m.metrics().heartbeats == 0 {
        assert!(Instant::now() < deadline, "no heartbeat answered");
        m.poll(Duration::from_millis(20)).unwrap();
    }
    // Every new connection now hangs in its TCP connect, which nothing can cut short; the
    // heartbeat thread loses its connection and reconnects into one.
    p.hold_connects(true);
    let failures = m.metrics().heartbeat_failures;
    p.drop_connections();
    let deadline = Instant::now() + Duration::from_secs(10);
    while m.metrics().heartbeat_failures == failures {
        assert!(
            Instant::now() < deadline,
            "the heartbeat never noticed the dropped connection"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The coordinator lookup that follows gives up within a second; the next heartbeat's
    // connect is then the one held.
    std::thread::sleep(Duration::from_secs(3));

    // A static member's close sends nothing: it returns without waiting for the connect.
    let t = Instant::now();
    m.close().unwrap();
    let took = t.elapsed();
    assert!(
        took < crate::support::LOAD_MARGIN,
        "static close took {took:?} with its heartbeat thread in a connect held for up to {connect_timeout:?}"
    );
    p.hold_connects(false);
}

#[test]
fn a_blackholed_member_gives_its_partitions_up_at_the_session_timeout() {
    let direct = client(&broker::shared_legacy().to_string());
    let topic = topic_with_partitions(&direct, 2);
    let p = Proxy::start(broker::shared_legacy(), "kraft-3.9");
    let via_proxy = client(&p.bootstrap());
    let mut m = static_member(&via_proxy, &unique_name("lost"), &topic, "m");
    m.join(Duration::from_secs(60)).unwrap();
    // Wait for a heartbeat to be answered, then cut everything off.
    let beats = m.metrics().heartbeats;
    let deadline = Instant::now() + Duration::from_secs(10);
    while m.metrics().heartbeats == beats {
        assert!(Instant::now() < deadline, "no heartbeat answered");
        m.poll(Duration::from_millis(50)).unwrap();
    }
    p.blackhole(true);
    let cut = Instant::now();
    let lost = loop {
        // The broker expires the session one session timeout after the last heartbeat it saw;
        // the member must stop before the partitions can have moved much further.
        assert!(
            cut.elapsed() < SESSION + crate::support::LOAD_MARGIN,
            "no Lost event {:?} into a {SESSION:?} session",
            cut.elapsed()
        );
        let events = m.poll(Duration::from_millis(100)).unwrap();
        if let Some(GroupEvent::Lost { partitions, .. }) =
            events.into_iter().find(|e| matches!(e, GroupEvent::Lost { .. }))
        {
            break partitions;
        }
    };
    assert!(
        cut.elapsed() >= SESSION / 2,
        "lost after only {:?}",
        cut.elapsed()
    );
    assert_eq!(lost.len(), 2, "{lost:?}");
    assert!(m.assignment().is_empty());
    assert_ne!(m.state(), MemberState::Stable);
    p.blackhole(false);
    // Back on the network, the member rejoins by itself.
    let deadline = Instant::now() + Duration::from_secs(30);
    while m.assignment().is_empty() {
        assert!(Instant::now() < deadline, "no rejoin after the blackhole");
        m.poll(Duration::from_millis(100)).unwrap();
    }
    m.close().unwrap();
}
