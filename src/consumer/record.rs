//! What [`Consumer::poll`](super::Consumer::poll) returns.

use crate::group::{GroupEvent, TopicPartition};
use bytes::Bytes;

/// One record as [`Consumer::poll`](super::Consumer::poll) returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Offset in the partition.
    pub offset: i64,
    /// Timestamp in milliseconds (create or log-append time; -1 when unknown).
    pub timestamp: i64,
    /// Key, if any.
    pub key: Option<Bytes>,
    /// Value (`None` for a tombstone).
    pub value: Option<Bytes>,
    /// Headers, in order.
    pub headers: Vec<(String, Option<Bytes>)>,
    /// Leader epoch of the batch the record came in (record batches only).
    pub leader_epoch: Option<i32>,
}

impl ConsumerRecord {
    /// The record's partition.
    pub fn topic_partition(&self) -> TopicPartition {
        TopicPartition::new(self.topic.clone(), self.partition)
    }
}

/// What one [`Consumer::poll`](super::Consumer::poll) brought: records, and what changed in the group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Polled {
    /// Records, at most `max.poll.records`, in offset order within each partition.
    pub records: Vec<ConsumerRecord>,
    /// Group events handled during the poll, in order. A poll that returns a
    /// [`GroupEvent::Revoked`] returns no records; commit before polling again.
    pub events: Vec<GroupEvent>,
}

impl Polled {
    /// Whether no record came.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// The partitions lost by this poll (the session expired; nothing can be committed for
    /// them), if any.
    pub fn lost(&self) -> Option<&[TopicPartition]> {
        self.events.iter().rev().find_map(|e| match e {
            GroupEvent::Lost { partitions, .. } => Some(partitions.as_slice()),
            _ => None,
        })
    }

    /// The partitions revoked by this poll, if a rebalance started.
    pub fn revoked(&self) -> Option<&[TopicPartition]> {
        self.events.iter().rev().find_map(|e| match e {
            GroupEvent::Revoked { partitions, .. } => Some(partitions.as_slice()),
            _ => None,
        })
    }

    /// The partitions assigned by this poll, if the member (re)joined.
    pub fn assigned(&self) -> Option<&[TopicPartition]> {
        self.events.iter().rev().find_map(|e| match e {
            GroupEvent::Assigned { partitions, .. } => Some(partitions.as_slice()),
            _ => None,
        })
    }
}

impl IntoIterator for Polled {
    type Item = ConsumerRecord;
    type IntoIter = std::vec::IntoIter<ConsumerRecord>;

    fn into_iter(self) -> Self::IntoIter {
        self.records.into_iter()
    }
}
