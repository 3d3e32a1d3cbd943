//! `Consumer::group_metadata` is what a transactional producer sends with TxnOffsetCommit
//! (KIP-447): it must be the member's generation as of now, not the one it first joined. A
//! second member joining makes the first rejoin (classic) or bumps its member epoch (consumer
//! protocol); the metadata must follow, and under the consumer protocol it must be the epoch
//! the coordinator itself reports for the member.

use crate::group_tests::{client, topic_with_partitions, HEARTBEAT, SESSION};
use crate::support::{broker, unique_name};
use kafka_group::{Client, Consumer, ConsumerGroupMetadata, GroupProtocol};
use std::time::{Duration, Instant};

fn member(client: &Client, group: &str, topic: &str, protocol: GroupProtocol, instance: &str) -> Consumer {
    let builder = client
        .consumer(group)
        .subscribe([topic])
        .group_protocol(protocol)
        .group_instance_id(instance)
        .enable_auto_commit(false);
    // Under the consumer protocol the broker decides both.
    match protocol {
        GroupProtocol::Classic => builder.session_timeout(SESSION).heartbeat_interval(HEARTBEAT),
        _ => builder,
    }
    .build()
    .unwrap()
}

/// Polls every consumer until `done` holds, failing after a minute with `what`.
fn poll_until(cs: &mut [&mut Consumer], what: &str, mut done: impl FnMut(&[&mut Consumer]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done(cs) {
        assert!(Instant::now() < deadline, "no {what} within a minute");
        for c in cs.iter_mut() {
            c.poll(Duration::from_millis(100)).unwrap();
        }
    }
}

fn meta(c: &Consumer) -> ConsumerGroupMetadata {
    c.group_metadata()
        .expect("a consumer of a group has group metadata")
}

/// One member alone holds both partitions; then a second joins and they split them. Returns
/// the first member's metadata before and after, and both consumers.
fn join_then_split(
    client: &Client,
    protocol: GroupProtocol,
    group: &str,
) -> (ConsumerGroupMetadata, Consumer, Consumer) {
    let topic = topic_with_partitions(client, 2);
    let mut a = member(client, group, &topic, protocol, "a");
    poll_until(&mut [&mut a], "assignment of both partitions", |cs| {
        cs[0].assignment().len() == 2
    });
    let first = meta(&a);
    assert_eq!(first.group_id, group);
    assert_eq!(first.group_instance_id.as_deref(), Some("a"));
    assert!(
        first.generation_id >= 1 && !first.member_id.is_empty(),
        "{first:?}"
    );
    let mut b = member(client, group, &topic, protocol, "b");
    poll_until(&mut [&mut a, &mut b], "split of the partitions", |cs| {
        cs[0].assignment().len() == 1 && cs[1].assignment().len() == 1
    });
    (first, a, b)
}

#[test]
fn group_metadata_follows_a_classic_rebalance() {
    let client = client(broker::shared().bootstrap());
    let group = unique_name("meta-classic");
    let (first, a, b) = join_then_split(&client, GroupProtocol::Classic, &group);
    let (now_a, now_b) = (meta(&a), meta(&b));
    assert!(
        now_a.generation_id > first.generation_id,
        "a rejoined when b came, yet hands out generation {} (before: {})",
        now_a.generation_id,
        first.generation_id
    );
    // A classic generation is the group's: both members are in the same one.
    assert_eq!(now_a.generation_id, now_b.generation_id, "{now_a:?} {now_b:?}");
    assert_eq!(
        now_a.member_id, first.member_id,
        "a kept its member id through the rebalance"
    );
    assert_ne!(now_a.member_id, now_b.member_id);
    assert_eq!(now_b.group_instance_id.as_deref(), Some("b"));
    a.close().unwrap();
    b.close().unwrap();
}

#[test]
fn group_metadata_is_the_member_epoch_under_the_consumer_protocol() {
    let client = client(broker::consumer_protocol().bootstrap());
    let admin = client.admin();
    let group = unique_name("meta-kip848");
    let (first, mut a, mut b) = join_then_split(&client, GroupProtocol::Consumer, &group);
    // The coordinator's view of each member's epoch; the consumers' metadata must come to
    // match it (the epoch a consumer holds is the one its last heartbeat answer gave).
    let described = |id: &str| {
        let d = admin.describe_group(&group).unwrap();
        d.members
            .iter()
            .find(|m| m.member_id == id)
            .and_then(|m| m.member_epoch)
            .unwrap_or_else(|| panic!("member {id} with an epoch in {d:?}"))
    };
    poll_until(
        &mut [&mut a, &mut b],
        "metadata matching the coordinator's epochs",
        |cs| {
            let (ma, mb) = (meta(cs[0]), meta(cs[1]));
            ma.generation_id == described(&ma.member_id) && mb.generation_id == described(&mb.member_id)
        },
    );
    let now_a = meta(&a);
    assert!(
        now_a.generation_id > first.generation_id,
        "a's epoch moved when it gave a partition up, yet it hands out {} (before: {})",
        now_a.generation_id,
        first.generation_id
    );
    assert_eq!(now_a.member_id, first.member_id);
    a.close().unwrap();
    b.close().unwrap();
}

/// A static member an admin removes from the group is fenced at its next heartbeat and joins
/// again as a new member: from then on its metadata must carry what it rejoined with, the
/// old member id and generation being exactly what the coordinator now refuses.
fn removed_member_rejoins(protocol: GroupProtocol, bootstrap: &str, prefix: &str) {
    let client = client(bootstrap);
    let group = unique_name(prefix);
    let topic = topic_with_partitions(&client, 1);
    let mut a = member(&client, &group, &topic, protocol, "a");
    poll_until(&mut [&mut a], "an assignment", |cs| {
        !cs[0].assignment().is_empty()
    });
    let first = meta(&a);
    let removed = client.admin().remove_members(&group, &["a"]).unwrap();
    assert_eq!(removed, vec![("a".to_string(), Ok(()))]);
    poll_until(&mut [&mut a], "a rejoin after the removal", |cs| {
        let now = meta(cs[0]);
        now.member_id != first.member_id || now.generation_id != first.generation_id
    });
    poll_until(&mut [&mut a], "an assignment after the rejoin", |cs| {
        !cs[0].assignment().is_empty() && meta(cs[0]).generation_id > 0
    });
    let now = meta(&a);
    assert_eq!(now.group_instance_id.as_deref(), Some("a"));
    assert!(now.generation_id > first.generation_id, "{now:?} {first:?}");
    if protocol == GroupProtocol::Classic {
        // The coordinator gave the rejoining member a new id.
        assert_ne!(now.member_id, first.member_id, "{now:?} {first:?}");
    } else {
        // The member keeps its id and rejoins at epoch 0; the epoch it is given then is the
        // coordinator's.
        let d = client.admin().describe_group(&group).unwrap();
        let epoch = d
            .members
            .iter()
            .find(|m| m.member_id == now.member_id)
            .and_then(|m| m.member_epoch);
        assert_eq!(Some(now.generation_id), epoch, "{now:?} {d:?}");
    }
    a.close().unwrap();
}

#[test]
fn group_metadata_of_a_removed_and_rejoined_classic_member_is_the_new_one() {
    removed_member_rejoins(
        GroupProtocol::Classic,
        broker::shared().bootstrap(),
        "meta-removed",
    );
}

#[test]
fn group_metadata_of_a_removed_and_rejoined_consumer_protocol_member_is_the_new_one() {
    removed_member_rejoins(
        GroupProtocol::Consumer,
        broker::consumer_protocol().bootstrap(),
        "meta-removed-848",
    );
}
