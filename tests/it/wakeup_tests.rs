//! `wakeup()` from another thread ends a blocked call at once: a consumer waiting in a
//! Fetch the broker holds for `fetch.max.wait.ms`, a consumer whose JoinGroup the coordinator
//! holds for the rebalance timeout, a member waiting on its heartbeat events. Each bound
//! asserted is a small part of how long the call would otherwise have waited.

use crate::consumer_tests::{builder, consume, produce};
use crate::group_tests::{client, member_builder, topic_with_partitions};
use crate::support::{broker, unique_name};
use kafka_group::{Consumer, Error, GroupEvent, Polled, WakeupHandle};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a blocked call would wait without a wakeup.
const LONG: Duration = Duration::from_secs(30);
/// The bound asserted for a woken call: generous next to [`LONG`].
const AT_ONCE: Duration = crate::support::LOAD_MARGIN;

/// Calls `wakeup` after `after`, from another thread; the join handle gives the instant it did.
fn wake_after(h: WakeupHandle, after: Duration) -> JoinHandle<Instant> {
    std::thread::spawn(move || {
        std::thread::sleep(after);
        h.wakeup();
        Instant::now()
    })
}

/// Polls until the consumer has an assignment, panicking after `timeout`.
fn poll_until_assigned(c: &mut Consumer, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while c.assignment().is_empty() {
        assert!(Instant::now() < deadline, "no assignment in {timeout:?}");
        c.poll(Duration::from_millis(100)).unwrap();
    }
}

/// Runs the woken `poll`; asserts it returned `Error::Wakeup` within [`AT_ONCE`] of the wakeup.
fn assert_woken(what: &str, waker: JoinHandle<Instant>, poll: impl FnOnce() -> kafka_group::Result<Polled>) {
    let result = poll();
    let returned = Instant::now();
    let woke = waker.join().unwrap();
    assert!(matches!(result, Err(Error::Wakeup)), "{what}: {result:?}");
    let late = returned.saturating_duration_since(woke);
    assert!(late < AT_ONCE, "{what}: returned {late:?} after the wakeup");
}

#[test]
fn wakeup_ends_a_poll_waiting_in_a_fetch_and_the_consumer_goes_on() {
    let c = client(broker::shared().bootstrap());
    let topic = topic_with_partitions(&c, 1);
    let group = unique_name("wake-fetch");
    let mut consumer = builder(&c, &group, &topic)
        .group_instance_id("w1")
        .fetch_max_wait(LONG)
        .build()
        .unwrap();
    poll_until_assigned(&mut consumer, Duration::from_secs(30));
    // The topic is idle: the broker holds the fetch for LONG.
    let waker = wake_after(consumer.wakeup_handle(), Duration::from_secs(1));
    assert_woken("idle fetch", waker, || consumer.poll(LONG * 2));

    // Reported once; nothing is lost: what is produced now is read from where the consumer was.
    produce(&c, &topic, 0, &["after".to_string()]);
    let got = consume(&mut consumer, 1, Duration::from_secs(30), true);
    assert_eq!(got[0].value.as_deref(), Some(&b"after"[..]));
    assert_eq!(got[0].offset, 0);

    // A wakeup with no call blocked makes the next poll return at once, and only that one.
    consumer.wakeup_handle().wakeup();
    let start = Instant::now();
    assert!(matches!(consumer.poll(LONG), Err(Error::Wakeup)));
    assert!(start.elapsed() < AT_ONCE, "{:?}", start.elapsed());
    assert!(consumer.poll(Duration::from_millis(200)).is_ok());
    consumer.close().unwrap();
}

#[test]
fn wakeup_ends_a_poll_whose_join_the_coordinator_holds() {
    let c = client(broker::shared().bootstrap());
    let topic = topic_with_partitions(&c, 2);
    let group = unique_name("wake-join");
    // The rebalance timeout (max.poll.interval.ms) is how long the coordinator holds a join
    // for a member that does not rejoin.
    let build = |instance: &str| {
        builder(&c, &group, &topic)
            .group_instance_id(instance)
            .max_poll_interval(Duration::from_secs(60))
            .build()
            .unwrap()
    };
    let mut first = build("first");
    poll_until_assigned(&mut first, Duration::from_secs(30));
    // `first` stops polling: `second`'s JoinGroup waits for it.
    let mut second = build("second");
    let waker = wake_after(second.wakeup_handle(), Duration::from_secs(2));
    assert_woken("held join", waker, || second.poll(LONG * 2));

    // Both go on: `first` rejoins, `second` joins again, and they split the partitions.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            Instant::now() < deadline,
            "the group did not settle after the wakeup"
        );
        let a = first.poll(Duration::from_millis(100)).unwrap();
        let b = second.poll(Duration::from_millis(100)).unwrap();
        for e in a.events.iter().chain(&b.events) {
            assert!(!matches!(e, GroupEvent::Lost { .. }), "{e:?}");
        }
        if first.assignment().len() == 1 && second.assignment().len() == 1 {
            break;
        }
    }
    first.close().unwrap();
    second.close().unwrap();
}

#[test]
fn wakeup_ends_a_member_poll_waiting_for_group_events() {
    let c = client(broker::shared().bootstrap());
    let topic = topic_with_partitions(&c, 1);
    let mut member = member_builder(&c, &unique_name("wake-member"), &topic)
        .group_instance_id("m1")
        .build()
        .unwrap();
    member.join(Duration::from_secs(30)).unwrap();
    // Stable and nothing happening: poll waits on the heartbeat thread's events.
    let waker = wake_after(member.wakeup_handle(), Duration::from_secs(1));
    let result = member.poll(LONG);
    let returned = Instant::now();
    let woke = waker.join().unwrap();
    assert!(matches!(result, Err(Error::Wakeup)), "{result:?}");
    assert!(returned.saturating_duration_since(woke) < AT_ONCE);
    // Once only, and the member is still in its generation.
    let generation = member.generation().unwrap().id;
    assert!(member.poll(Duration::from_millis(200)).unwrap().is_empty());
    assert_eq!(member.generation().unwrap().id, generation);
    member.close().unwrap();
}
