//! Topics: create, grow, delete, each followed by a wait until every broker's metadata shows
//! the change (CreateTopics, CreatePartitions, DeleteTopics, Metadata).

use super::Admin;
use crate::error::Result;
use crate::protocol::messages::create_partitions_request::CreatePartitionsTopic;
use crate::protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use crate::protocol::messages::delete_topics_request::DeleteTopicState;
use crate::protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, MetadataResponse,
};
use crate::protocol::ApiKey;
use crate::KafkaCode;
use std::time::Duration;

/// A topic to create with [`Admin::create_topics`] (one `CreatableTopic` of CreateTopics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// Topic name.
    pub name: String,
    /// Number of partitions; -1 for the broker's `num.partitions` (CreateTopics v4+).
    pub partitions: i32,
    /// Replication factor; -1 for the broker's `default.replication.factor` (CreateTopics v4+).
    pub replication_factor: i16,
    /// Topic configuration overrides, e.g. `("retention.ms", "60000")`.
    pub configs: Vec<(String, String)>,
}

impl NewTopic {
    /// A topic with `partitions` partitions of `replication_factor` replicas and no config
    /// overrides.
    pub fn new(name: impl Into<String>, partitions: i32, replication_factor: i16) -> Self {
        NewTopic {
            name: name.into(),
            partitions,
            replication_factor,
            configs: Vec::new(),
        }
    }

    /// Adds a topic configuration override (e.g. `cleanup.policy`).
    pub fn config(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.configs.push((name.into(), value.into()));
        self
    }
}

impl Admin {
    /// Creates `topics` (CreateTopics), then waits until every broker's metadata (Metadata)
    /// shows each of them with all partitions led, so that producers and consumers started
    /// right after see a settled topic. Everything, including the wait, is bounded by
    /// `timeout`.
    ///
    /// A topic that already exists is an error (`TOPIC_ALREADY_EXISTS`); see
    /// [`Admin::create_topics_if_missing`]. Errors name the first topic that failed.
    pub fn create_topics(&self, topics: &[NewTopic], timeout: Duration) -> Result<()> {
        self.create(topics, timeout, false)
    }

    /// As [`Admin::create_topics`] (CreateTopics), but a topic that already exists counts as
    /// created (its partition count is not checked); the call still waits for its leaders.
    pub fn create_topics_if_missing(&self, topics: &[NewTopic], timeout: Duration) -> Result<()> {
        self.create(topics, timeout, true)
    }

    fn create(&self, topics: &[NewTopic], timeout: Duration, tolerate_existing: bool) -> Result<()> {
        if topics.is_empty() {
            return Ok(());
        }
        for t in topics {
            crate::names::check_topic("NewTopic::name", &t.name)?;
        }
        let deadline = crate::deadline::after(timeout);
        let names: Vec<&str> = topics.iter().map(|t| t.name.as_str()).collect();
        let accept = |code: KafkaCode| tolerate_existing && code == KafkaCode::TopicAlreadyExists;
        self.per_topic_to_controller(
            ApiKey::CreateTopics,
            &names,
            deadline,
            timeout,
            accept,
            |pending, timeout_ms| {
                let batch: Vec<&NewTopic> = topics
                    .iter()
                    .filter(|t| pending.contains(&t.name.as_str()))
                    .collect();
                let resp =
                    self.send_to_controller(deadline, |_| create_topics_request(&batch, timeout_ms))?;
                Ok(resp
                    .topics
                    .into_iter()
                    .map(|t| (Some(t.name), t.error_code, t.error_message))
                    .collect())
            },
        )?;
        self.wait_for_metadata(
            &names,
            deadline,
            "waiting for the new topics' partition leaders",
            |resp| topics.iter().all(|t| topic_ready(resp, &t.name, t.partitions)),
        )
    }

    /// Grows each `(topic, total)` to `total` partitions (CreatePartitions), then waits until
    /// every broker's metadata shows them all led. Bounded by `timeout`. A total at or below the
    /// current count is an error (`INVALID_PARTITIONS`): Kafka cannot shrink a topic.
    pub fn create_partitions(&self, topics: &[(&str, i32)], timeout: Duration) -> Result<()> {
        for (name, _) in topics {
            crate::names::check_topic("create_partitions", name)?;
        }
        if topics.is_empty() {
            return Ok(());
        }
        let deadline = crate::deadline::after(timeout);
        let names: Vec<&str> = topics.iter().map(|t| t.0).collect();
        self.per_topic_to_controller(
            ApiKey::CreatePartitions,
            &names,
            deadline,
            timeout,
            |_| false,
            |pending, timeout_ms| {
                let batch: Vec<(&str, i32)> = topics
                    .iter()
                    .copied()
                    .filter(|(n, _)| pending.contains(n))
                    .collect();
                let resp =
                    self.send_to_controller(deadline, |_| create_partitions_request(&batch, timeout_ms))?;
                Ok(resp
                    .results
                    .into_iter()
                    .map(|r| (Some(r.name), r.error_code, r.error_message))
                    .collect())
            },
        )?;
        self.wait_for_metadata(
            &names,
            deadline,
            "waiting for the new partitions' leaders",
            |resp| {
                topics
                    .iter()
                    .all(|&(name, partitions)| topic_ready(resp, name, partitions))
            },
        )
    }

    /// Deletes `topics` (DeleteTopics), then waits until no broker's metadata (Metadata) shows
    /// them any more. Everything, including the wait, is bounded by `timeout`. A topic that
    /// does not exist is an error (`UNKNOWN_TOPIC_OR_PARTITION`).
    pub fn delete_topics(&self, topics: &[&str], timeout: Duration) -> Result<()> {
        for name in topics {
            crate::names::check_topic("delete_topics", name)?;
        }
        if topics.is_empty() {
            return Ok(());
        }
        let deadline = crate::deadline::after(timeout);
        self.per_topic_to_controller(
            ApiKey::DeleteTopics,
            topics,
            deadline,
            timeout,
            |_| false,
            |pending, timeout_ms| {
                let resp =
                    self.send_to_controller(deadline, |v| delete_topics_request(pending, timeout_ms, v))?;
                Ok(resp
                    .responses
                    .into_iter()
                    .map(|t| (t.name, t.error_code, t.error_message))
                    .collect())
            },
        )?;
        self.wait_for_metadata(topics, deadline, "waiting for the topics to disappear", |resp| {
            topics.iter().all(|name| topic_gone(resp, name))
        })
    }
}

/// CreateTopics: every field the client sets exists in every version (v0+).
pub(super) fn create_topics_request(topics: &[&NewTopic], timeout_ms: i32) -> CreateTopicsRequest {
    CreateTopicsRequest {
        topics: topics
            .iter()
            .map(|t| CreatableTopic {
                name: t.name.clone().into(),
                num_partitions: t.partitions,
                replication_factor: t.replication_factor,
                configs: t
                    .configs
                    .iter()
                    .map(|(name, value)| CreatableTopicConfig {
                        name: name.clone().into(),
                        value: Some(value.into()),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        timeout_ms,
        ..Default::default()
    }
}

pub(super) fn create_partitions_request(topics: &[(&str, i32)], timeout_ms: i32) -> CreatePartitionsRequest {
    CreatePartitionsRequest {
        topics: topics
            .iter()
            .map(|&(name, count)| CreatePartitionsTopic {
                name: name.to_string().into(),
                count,
                // Null: let the controller place the new replicas.
                assignments: None,
                ..Default::default()
            })
            .collect(),
        timeout_ms,
        ..Default::default()
    }
}

/// DeleteTopics: names as plain strings up to v5; v6 (KIP-516) lists `{name, topic id}`
/// pairs, where a nil id means "by name".
pub(super) fn delete_topics_request(names: &[&str], timeout_ms: i32, version: i16) -> DeleteTopicsRequest {
    if version >= 6 {
        DeleteTopicsRequest {
            topics: names
                .iter()
                .map(|n| DeleteTopicState {
                    name: Some((*n).into()),
                    ..Default::default()
                })
                .collect(),
            timeout_ms,
            ..Default::default()
        }
    } else {
        DeleteTopicsRequest {
            topic_names: names.iter().map(|n| (*n).into()).collect(),
            timeout_ms,
            ..Default::default()
        }
    }
}

/// Whether `resp` shows `name` with all partitions led (and `partitions` of them, if positive).
fn topic_ready(resp: &MetadataResponse, name: &str, partitions: i32) -> bool {
    let Some(t) = resp.topics.iter().find(|t| t.name.as_deref() == Some(name)) else {
        return false;
    };
    KafkaCode::from_code(t.error_code) == KafkaCode::None
        && !t.partitions.is_empty()
        && (partitions <= 0 || t.partitions.len() == partitions as usize)
        && t.partitions.iter().all(|p| p.leader_id >= 0)
}

/// Whether `resp` no longer knows `name`.
fn topic_gone(resp: &MetadataResponse, name: &str) -> bool {
    match resp.topics.iter().find(|t| t.name.as_deref() == Some(name)) {
        None => true,
        Some(t) => KafkaCode::from_code(t.error_code) == KafkaCode::UnknownTopicOrPartition,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Client;
    use crate::error::Error;
    use crate::protocol::messages::metadata_response::{MetadataResponsePartition, MetadataResponseTopic};

    #[test]
    fn bad_topic_names_are_refused_before_any_request() {
        let client = Client::builder()
            .bootstrap_servers("localhost:1")
            .build()
            .unwrap();
        let admin = client.admin();
        for name in ["bad topic!", ".", &"t".repeat(250)] {
            let e = admin
                .create_topics(
                    &[NewTopic::new("ok", 1, 1), NewTopic::new(name, 1, 1)],
                    Duration::MAX,
                )
                .unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::Config {
                        property: "NewTopic::name",
                        ..
                    }
                ),
                "{e}"
            );
        }
    }

    #[test]
    fn delete_topics_puts_names_where_the_version_has_them() {
        let old = delete_topics_request(&["a"], 5, 5);
        assert_eq!(old.topic_names, vec!["a".to_string()]);
        assert!(old.topics.is_empty());
        let new = delete_topics_request(&["a"], 5, 6);
        assert!(new.topic_names.is_empty());
        assert_eq!(new.topics[0].name.as_deref(), Some("a"));
        assert_eq!(new.topics[0].topic_id, crate::protocol::Uuid::NIL);
    }

    #[test]
    fn create_topics_carries_partitions_and_configs() {
        let topic = NewTopic::new("t", 6, 3).config("cleanup.policy", "compact");
        let r = create_topics_request(&[&topic], 42);
        assert_eq!(r.timeout_ms, 42);
        assert_eq!(
            (r.topics[0].num_partitions, r.topics[0].replication_factor),
            (6, 3)
        );
        assert_eq!(r.topics[0].configs[0].name, "cleanup.policy");
        assert_eq!(r.topics[0].configs[0].value.as_deref(), Some("compact"));
    }

    #[test]
    fn topic_readiness_needs_every_partition_led() {
        let topic = |name: &str, code: KafkaCode, leaders: &[i32]| MetadataResponseTopic {
            name: Some(name.into()),
            error_code: code.code(),
            partitions: leaders
                .iter()
                .enumerate()
                .map(|(i, &l)| MetadataResponsePartition {
                    partition_index: i as i32,
                    leader_id: l,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let resp = |t: MetadataResponseTopic| MetadataResponse {
            topics: vec![t],
            ..Default::default()
        };
        assert!(topic_ready(&resp(topic("t", KafkaCode::None, &[1, 2])), "t", 2));
        assert!(topic_ready(&resp(topic("t", KafkaCode::None, &[1, 2])), "t", -1));
        assert!(!topic_ready(&resp(topic("t", KafkaCode::None, &[1, -1])), "t", 2));
        assert!(!topic_ready(&resp(topic("t", KafkaCode::None, &[1])), "t", 2));
        assert!(!topic_ready(
            &resp(topic("t", KafkaCode::LeaderNotAvailable, &[])),
            "t",
            -1
        ));
        assert!(!topic_ready(&resp(topic("u", KafkaCode::None, &[1])), "t", 1));
        assert!(topic_gone(
            &resp(topic("t", KafkaCode::UnknownTopicOrPartition, &[])),
            "t"
        ));
        assert!(topic_gone(&resp(topic("u", KafkaCode::None, &[1])), "t"));
        assert!(!topic_gone(&resp(topic("t", KafkaCode::None, &[1])), "t"));
    }
}
