//! What [`Consumer::poll`](super::Consumer::poll) returns, and the offsets the consumer's
//! lookups return and its commits take.

use crate::group::{GroupEvent, TopicPartition};
use bytes::Bytes;
use std::sync::Arc;

/// One record as [`Consumer::poll`](super::Consumer::poll) returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    /// Topic. Shared by every record of a partition's fetch rather than copied into each:
    /// `&*record.topic` or `record.topic.as_ref()` is a `&str`.
    pub topic: Arc<str>,
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
        TopicPartition::new(&*self.topic, self.partition)
    }
}

/// What one [`Consumer::poll`](super::Consumer::poll) brought: records, and what changed in the group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Polled {
    /// Records, at most `max.poll.records`, in offset order within each partition.
    pub records: Vec<ConsumerRecord>,
    /// Group events handled during the poll, in order. They come from one turn of the group
    /// (what changed since the last poll): at most one `Assigned`, after any `Lost` or
    /// `Revoked` it goes with, so [`lost`](Self::lost), [`revoked`](Self::revoked) and
    /// [`assigned`](Self::assigned), applied in that order, say how the assignment changed;
    /// further changes wait for the next poll. A poll that returns a
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

/// Whether `events` change the assignment (an `Assigned`, `Revoked` or `Lost`). A poll that
/// has such an event takes no more events from the group: [`Polled`]'s helpers report one
/// event of each kind, so a second `Assigned` in the same poll (a consumer-protocol member
/// whose reconciliation goes on while the poll looks offsets up and fetches) would hide the
/// first one's partitions from the application while their records are handed out, and a
/// `Revoked` or `Lost` after an `Assigned` would read as coming before it. What the group
/// does meanwhile waits for the next poll.
pub(crate) fn changes_assignment(events: &[GroupEvent]) -> bool {
    events.iter().any(|e| {
        matches!(
            e,
            GroupEvent::Assigned { .. } | GroupEvent::Revoked { .. } | GroupEvent::Lost { .. }
        )
    })
}

impl IntoIterator for Polled {
    type Item = ConsumerRecord;
    type IntoIter = std::vec::IntoIter<ConsumerRecord>;

    fn into_iter(self) -> Self::IntoIter {
        self.records.into_iter()
    }
}

/// An offset found by time, from [`Consumer::offsets_for_times`](super::Consumer::offsets_for_times)
/// (Java's `OffsetAndTimestamp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetAndTimestamp {
    /// The offset of the first record whose timestamp is at or after the time asked for.
    pub offset: i64,
    /// That record's timestamp (ms since the epoch); -1 when the broker does not say
    /// (ListOffsets v0).
    pub timestamp: i64,
}

/// An offset to commit with its metadata string, or a committed one
/// ([`Consumer::commit_offsets_with_metadata`](super::Consumer::commit_offsets_with_metadata),
/// [`Consumer::committed_with_metadata`](super::Consumer::committed_with_metadata); Java's
/// `OffsetAndMetadata`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetAndMetadata {
    /// The offset of the next record to read, as Kafka counts.
    pub offset: i64,
    /// Free text stored with the offset (e.g. where the application's own output stands);
    /// empty for none. Brokers cap its length (`offset.metadata.max.bytes`, 4096 by default).
    pub metadata: String,
    /// The leader epoch of the last record read (OffsetCommit v6+), so that a later reader can
    /// detect log truncation; `None` when not known.
    pub leader_epoch: Option<i32>,
}

impl OffsetAndMetadata {
    /// `offset` with no metadata and no leader epoch.
    pub fn new(offset: i64) -> Self {
        OffsetAndMetadata {
            offset,
            ..Default::default()
        }
    }

    /// With `metadata` stored beside the offset.
    pub fn with_metadata(mut self, metadata: impl Into<String>) -> Self {
        self.metadata = metadata.into();
        self
    }
}
