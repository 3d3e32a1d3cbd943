//! `Admin` against a real broker: topic creation waits for leaders, duplicate creation and
//! deletion report the topic, unknown groups describe as `Dead`, group listing works.

use crate::support;
use kafka_group::protocol::ApiKey;
use kafka_group::{Admin, Client, Error, KafkaCode, NewTopic};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(60);

fn client() -> Client {
    Client::builder()
        .bootstrap_servers(support::broker::shared().bootstrap())
        .build()
        .unwrap()
}

#[test]
fn create_topic_waits_for_leaders_then_delete_removes_it() {
    let client = client();
    let admin = Admin::new(&client);
    let name = support::unique_name("admin-topic");
    let topic = NewTopic::new(&name, 6, 1).config("retention.ms", "600000");

    admin
        .create_topics(std::slice::from_ref(&topic), TIMEOUT)
        .unwrap();
    // No polling here: create_topics returns only once the metadata has settled, and leaves
    // the client's cache showing it.
    let cached = client.cached_metadata();
    let t = &cached.topics[&name];
    assert_eq!(t.error, KafkaCode::None);
    assert_eq!(t.partitions.len(), 6);
    assert!(t.partitions.iter().all(|p| p.leader >= 0), "{t:?}");
    // A client that never saw the creation agrees.
    let fresh = self::client().refresh_metadata(Some(&[name.as_str()])).unwrap();
    assert_eq!(fresh.topics[&name].partitions.len(), 6);
    assert!(fresh.topics[&name].partitions.iter().all(|p| p.leader >= 0));

    let e = admin
        .create_topics(std::slice::from_ref(&topic), TIMEOUT)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Kafka {
                api: ApiKey::CreateTopics,
                code: KafkaCode::TopicAlreadyExists,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains(&name), "{e}");
    admin.create_topics_if_missing(&[topic], TIMEOUT).unwrap();

    admin.delete_topics(&[&name], TIMEOUT).unwrap();
    let after = client.refresh_metadata(Some(&[name.as_str()])).unwrap();
    assert!(
        after
            .topics
            .get(&name)
            .map_or(true, |t| t.error == KafkaCode::UnknownTopicOrPartition),
        "{:?}",
        after.topics.get(&name)
    );
    let e = admin.delete_topics(&[&name], TIMEOUT).unwrap_err();
    assert_eq!(e.kafka_code(), Some(KafkaCode::UnknownTopicOrPartition), "{e}");
    assert!(e.to_string().contains(&name), "{e}");
}

#[test]
fn create_topics_if_missing_creates_what_is_missing() {
    let admin = Admin::new(&client());
    let existing = support::unique_name("admin-existing");
    let missing = support::unique_name("admin-missing");
    admin
        .create_topics(&[NewTopic::new(&existing, 1, 1)], TIMEOUT)
        .unwrap();
    admin
        .create_topics_if_missing(
            &[NewTopic::new(&existing, 1, 1), NewTopic::new(&missing, 3, 1)],
            TIMEOUT,
        )
        .unwrap();
    let meta = client().refresh_metadata(Some(&[missing.as_str()])).unwrap();
    assert_eq!(meta.topics[&missing].partitions.len(), 3);
    admin.delete_topics(&[&existing, &missing], TIMEOUT).unwrap();
}

#[test]
fn an_unknown_group_is_dead_and_empty() {
    let admin = Admin::new(&client());
    let group = support::unique_name("admin-no-such-group");
    let d = admin.describe_group(&group).unwrap();
    assert_eq!(d.group_id, group);
    assert_eq!(d.state, "Dead");
    assert!(d.members.is_empty(), "{d:?}");
}

#[test]
fn list_groups_answers_from_every_broker() {
    let groups = Admin::new(&client()).list_groups().unwrap();
    // Merged and sorted by id, so no group appears twice.
    assert!(
        groups.windows(2).all(|w| w[0].group_id < w[1].group_id),
        "{groups:?}"
    );
}

#[test]
fn removing_an_unknown_instance_reports_it_per_member() {
    let admin = Admin::new(&client());
    let group = support::unique_name("admin-remove");
    assert!(admin.remove_members(&group, &[]).unwrap().is_empty());
    // Both the classic and the KIP-848 coordinator (3.9, 4.x) answer per member.
    let out = admin.remove_members(&group, &["nobody"]).unwrap();
    assert_eq!(out, vec![("nobody".to_string(), Err(KafkaCode::UnknownMemberId))]);
}
