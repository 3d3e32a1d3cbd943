//! What a share consumer hands the application: records with their delivery count, and an
//! [`Acknowledger`] for each that any thread can use.

use super::acks::AcknowledgeType;
use super::session::IdPartition;
use crate::client::lock;
use crate::consumer::ConsumerRecord;
use crate::error::{Error, Result};
use std::sync::{Arc, Mutex};

/// How records a share consumer delivered are acknowledged (`share.acknowledgement.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum AcknowledgementMode {
    /// Every record a poll returned that the application did not acknowledge itself is
    /// accepted by the next `poll`, `commit` or `close` (Java's `implicit`, the default).
    #[default]
    Implicit,
    /// Only what the application acknowledges is: a record left unacknowledged stays acquired
    /// by this consumer until its lock expires (`group.share.record.lock.duration.ms`, 30 s by
    /// default), then goes to another delivery (Java's `explicit`).
    Explicit,
}

impl std::str::FromStr for AcknowledgementMode {
    type Err = String;

    /// `implicit` or `explicit`, in any case.
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "implicit" => Ok(AcknowledgementMode::Implicit),
            "explicit" => Ok(AcknowledgementMode::Explicit),
            _ => Err(format!(
                "{s:?} is not an acknowledgement mode (implicit, explicit)"
            )),
        }
    }
}

/// Acknowledgements made on any thread, waiting for the share consumer's next request.
#[derive(Debug, Default)]
pub(crate) struct AckQueue {
    inner: Mutex<Queued>,
}

#[derive(Debug, Default)]
struct Queued {
    acks: Vec<(IdPartition, i64, AcknowledgeType)>,
    closed: bool,
}

impl AckQueue {
    /// Everything queued since the last call.
    pub(crate) fn take(&self) -> Vec<(IdPartition, i64, AcknowledgeType)> {
        std::mem::take(&mut lock(&self.inner).acks)
    }

    /// Refuses every later acknowledgement: the consumer has closed.
    pub(crate) fn close(&self) {
        lock(&self.inner).closed = true;
    }
}

/// Acknowledges one record, from any thread (it is `Send`, `Sync` and `Clone`): what it says
/// rides on the share consumer's next ShareFetch (its `poll`) or ShareAcknowledge (its
/// `commit` or `close`). A later acknowledgement of the same record replaces one not sent yet.
#[derive(Debug, Clone)]
pub struct Acknowledger {
    queue: Arc<AckQueue>,
    partition: IdPartition,
    offset: i64,
}

impl Acknowledger {
    pub(crate) fn new(queue: Arc<AckQueue>, partition: IdPartition, offset: i64) -> Acknowledger {
        Acknowledger {
            queue,
            partition,
            offset,
        }
    }

    /// Acknowledges the record as `kind`; [`Error::Closed`] once its consumer has closed (the
    /// broker then releases the record when the lock expires).
    pub fn acknowledge(&self, kind: AcknowledgeType) -> Result<()> {
        let mut q = lock(&self.queue.inner);
        if q.closed {
            return Err(Error::Closed);
        }
        q.acks.push((self.partition, self.offset, kind));
        Ok(())
    }

    /// The record's offset.
    pub fn offset(&self) -> i64 {
        self.offset
    }

    /// The record's partition, by topic id.
    pub(crate) fn id_partition(&self) -> IdPartition {
        self.partition
    }
}

/// A record a share consumer acquired: the record, how many times it has been delivered
/// (1 the first time), and its [`Acknowledger`]. Dereferences to the [`ConsumerRecord`].
#[derive(Debug, Clone)]
pub struct ShareRecord {
    /// The record.
    pub record: ConsumerRecord,
    /// How many times the record has been delivered, this time included (Java's
    /// `ConsumerRecord.deliveryCount()`).
    pub delivery_count: u16,
    acknowledger: Acknowledger,
    lock_expires: Option<std::time::Instant>,
}

impl ShareRecord {
    pub(crate) fn new(
        record: ConsumerRecord,
        delivery_count: i16,
        acknowledger: Acknowledger,
        lock_expires: Option<std::time::Instant>,
    ) -> ShareRecord {
        ShareRecord {
            record,
            delivery_count: u16::try_from(delivery_count).unwrap_or(0),
            acknowledger,
            lock_expires,
        }
    }

    /// When this consumer's lock on the record runs out at the latest: the broker's
    /// acquisition lock duration (`group.share.record.lock.duration.ms`) counted from when the
    /// ShareFetch that acquired it was sent. An acknowledgement must reach the broker before
    /// then; after it, the record may already be another consumer's, and acknowledging it
    /// fails with `INVALID_RECORD_STATE`. `None` if the broker did not say (before Kafka 4.1).
    pub fn lock_expires_at(&self) -> Option<std::time::Instant> {
        self.lock_expires
    }

    /// The handle that acknowledges this record, to give to another thread.
    pub fn acknowledger(&self) -> Acknowledger {
        self.acknowledger.clone()
    }

    /// Acknowledges this record as `kind` ([`Acknowledger::acknowledge`]).
    pub fn acknowledge(&self, kind: AcknowledgeType) -> Result<()> {
        self.acknowledger.acknowledge(kind)
    }
}

impl std::ops::Deref for ShareRecord {
    type Target = ConsumerRecord;

    fn deref(&self) -> &ConsumerRecord {
        &self.record
    }
}
