//! What became of each record: the [`DeliveryHandle`] that [`Producer::send`] returns and the
//! [`RecordMetadata`] it gives once the record's batch is acknowledged.
//!
//! The cost per record is kept to a reference count: a batch owns one shared
//! [`BatchDelivery`], settled once for all its records when the batch is acknowledged or fails
//! for good, and a handle is that batch plus the record's index in it (its offset is the
//! batch's base offset plus the index).
//!
//! A batch the broker refused as too large is split into pieces (`Accumulator::split`): its
//! shared result is then settled once as `Settled::Split`, naming the pieces, and a handle
//! follows it to the piece that holds its record and to its index there, so each record still
//! gets the offset it was written at, and a handle still costs no more than before.
//!
//! [`Producer::send`]: super::Producer::send

use crate::error::Error;
use crate::group::TopicPartition;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Where a record was written: Java's `RecordMetadata`, librdkafka's delivery report
/// (`rd_kafka_message_t` with `err == 0`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordMetadata {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The record's offset in its partition; `None` with `acks=0`, where the broker sends no
    /// answer (Java reports -1 and `hasOffset() == false`).
    pub offset: Option<i64>,
    /// The record's timestamp in the log (ms since the epoch): the broker's log-append time
    /// when the topic uses `message.timestamp.type=LogAppendTime`, else the create time the
    /// record was sent with (the time of `send` if it had none).
    pub timestamp: i64,
    /// Whether [`timestamp`](Self::timestamp) is the broker's log-append time.
    pub log_append_time: bool,
}

/// The result of one record, available once its batch is acknowledged or has failed for good:
/// Java's `Future<RecordMetadata>` (with `isDone()`), rust-rdkafka's `DeliveryFuture`.
///
/// The producer's sender thread settles it in the background, so
/// [`wait`](Self::wait) (Java's `Future::get`) and [`wait_timeout`](Self::wait_timeout)
/// block until it is there, and [`try_result`](Self::try_result) answers at once. **Once
/// [`flush`](super::Producer::flush) returns (with `Ok` or `Err`), every record sent before it
/// has its result.** If the producer is dropped (or closed past its timeout) with the record
/// still pending, the result is [`Error::Closed`].
///
/// A handle costs a reference count on its batch's shared result and an index; dropping it
/// does not cancel anything.
#[derive(Debug, Clone)]
pub struct DeliveryHandle {
    batch: Arc<BatchDelivery>,
    index: u32,
    /// Create time the record went out with.
    timestamp: i64,
}

impl DeliveryHandle {
    /// The partition the record was put in (known at `send`, before any acknowledgement).
    pub fn topic_partition(&self) -> &TopicPartition {
        &self.batch.partition
    }

    /// Whether this is its batch's first record (the batch was created for it).
    pub(super) fn is_first(&self) -> bool {
        self.index == 0
    }

    /// Whether the record has its result (Java's `Future::isDone`).
    pub fn is_done(&self) -> bool {
        self.leaf().0.settled.get().is_some()
    }

    /// The batch that holds the record now, and its index there: its own batch, or the piece
    /// of it that the record went to when the batch was split (pieces split again included).
    fn leaf(&self) -> (&Arc<BatchDelivery>, u32) {
        let (mut batch, mut index) = (&self.batch, self.index);
        while let Some(Settled::Split(pieces)) = batch.settled.get() {
            // Pieces start at increasing indices, the first at 0.
            let Some((start, piece)) = pieces.iter().rev().find(|(start, _)| *start <= index) else {
                break;
            };
            index -= start;
            batch = piece;
        }
        (batch, index)
    }

    /// Waits for the record's result (Java's `Future::get`): see
    /// [`try_result`](Self::try_result) for what it can be. It always comes, within
    /// `delivery.timeout.ms` (plus one `request.timeout.ms` for a request in flight), or as
    /// [`Error::Closed`] when the producer goes away first.
    pub fn wait(&self) -> Result<RecordMetadata, Arc<Error>> {
        loop {
            if let Some(r) = self.wait_timeout(Duration::from_secs(3600)) {
                return r;
            }
        }
    }

    /// [`wait`](Self::wait) for at most `timeout` (`Duration::MAX` for no limit): `None` if the
    /// result is not there by then (Java's `Future::get(timeout)` throwing `TimeoutException`).
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Result<RecordMetadata, Arc<Error>>> {
        let deadline = crate::deadline::after(timeout);
        loop {
            let (batch, _) = self.leaf();
            let mut settled = crate::client::lock(&batch.wait_lock);
            while !*settled {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return self.try_result();
                }
                settled = match batch.wait_cv.wait_timeout(settled, left) {
                    Ok((g, _)) => g,
                    Err(p) => p.into_inner().0,
                };
            }
            drop(settled);
            // Split: the record's result is its piece's, to wait for in turn.
            if !matches!(batch.settled.get(), Some(Settled::Split(_))) {
                return self.try_result();
            }
        }
    }

    /// The record's result: `None` while its batch is pending; else the record's metadata, or
    /// the error its batch failed with for good (shared by every record of the batch, hence
    /// the `Arc`; a batch the broker refused as too large is split first, so
    /// `MESSAGE_TOO_LARGE` is only ever a record's own): the broker's refusal
    /// (`MESSAGE_TOO_LARGE`, `TOPIC_AUTHORIZATION_FAILED` as
    /// [`Error::Authorization`] …), retries exhausted or `delivery.timeout.ms` passed
    /// ([`Error::Timeout`] keeping the last error), or [`Error::Closed`] when the producer was
    /// dropped first. Java's `Future::get` after `isDone`; rdkafka's delivery report.
    pub fn try_result(&self) -> Option<Result<RecordMetadata, Arc<Error>>> {
        let (batch, index) = self.leaf();
        Some(match batch.settled.get()? {
            // Not a leaf only if a split named no piece for the record, which `split` prevents.
            Settled::Split(_) => return None,
            Settled::Acked {
                base_offset,
                log_append_time,
            } => {
                let tp = &batch.partition;
                Ok(RecordMetadata {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    offset: (*base_offset >= 0).then(|| base_offset + i64::from(index)),
                    timestamp: if *log_append_time >= 0 {
                        *log_append_time
                    } else {
                        self.timestamp
                    },
                    log_append_time: *log_append_time >= 0,
                })
            }
            Settled::Failed(e) => Err(Arc::clone(e)),
        })
    }
}

/// What became of a batch, set once.
#[derive(Debug)]
enum Settled {
    /// Written from `base_offset` (-1 when unknown: `acks=0`); `log_append_time` is -1 unless
    /// the topic uses LogAppendTime.
    Acked {
        base_offset: i64,
        log_append_time: i64,
    },
    Failed(Arc<Error>),
    /// Split into pieces, each with its own result: the index of its first record here, and
    /// the piece, in record order; the first starts at 0.
    Split(Vec<(u32, Arc<BatchDelivery>)>),
}

/// The result every record of one batch shares.
#[derive(Debug)]
pub(super) struct BatchDelivery {
    partition: TopicPartition,
    settled: OnceLock<Settled>,
    /// Set (and `wait_cv` notified) once `settled` is: what [`DeliveryHandle::wait`] waits on.
    wait_lock: Mutex<bool>,
    wait_cv: Condvar,
}

impl BatchDelivery {
    pub(super) fn new(partition: TopicPartition) -> Arc<Self> {
        Arc::new(BatchDelivery {
            partition,
            settled: OnceLock::new(),
            wait_lock: Mutex::new(false),
            wait_cv: Condvar::new(),
        })
    }

    /// The handle of the batch's record number `index`, sent with create time `timestamp`.
    pub(super) fn handle(self: &Arc<Self>, index: u32, timestamp: i64) -> DeliveryHandle {
        DeliveryHandle {
            batch: Arc::clone(self),
            index,
            timestamp,
        }
    }

    /// The batch was written at `base_offset` (-1 for `acks=0`); the first result set wins.
    pub(super) fn acked(&self, base_offset: i64, log_append_time: i64) {
        let _ = self.settled.set(Settled::Acked {
            base_offset,
            log_append_time,
        });
        self.wake();
    }

    /// Wakes the handles waiting for the result.
    fn wake(&self) {
        *crate::client::lock(&self.wait_lock) = true;
        self.wait_cv.notify_all();
    }

    /// The batch failed for good with `e`; the first result set wins.
    pub(super) fn failed(&self, e: Arc<Error>) {
        let _ = self.settled.set(Settled::Failed(e));
        self.wake();
    }

    /// The batch was split: its records `start..` (up to the next piece's start) went to
    /// each piece, in order, the first piece starting at 0. Wakes the handles, which then wait
    /// for their piece. Does nothing to a batch already settled.
    pub(super) fn split(&self, pieces: Vec<(u32, Arc<BatchDelivery>)>) {
        // Every index must have a piece, or a handle would have nothing to wait for.
        if pieces.first().map(|(start, _)| *start) != Some(0) {
            return;
        }
        let _ = self.settled.set(Settled::Split(pieces));
        self.wake();
    }

    pub(super) fn is_settled(&self) -> bool {
        self.settled.get().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KafkaCode;

    #[test]
    fn each_handle_gets_its_offset_from_the_batch_base_offset() {
        let b = BatchDelivery::new(TopicPartition::new("t", 3));
        let handles: Vec<_> = (0..3).map(|i| b.handle(i, 1000 + i64::from(i))).collect();
        assert!(handles.iter().all(|h| !h.is_done() && h.try_result().is_none()));
        assert_eq!(handles[2].topic_partition(), &TopicPartition::new("t", 3));
        b.acked(40, -1);
        let got: Vec<RecordMetadata> = handles.iter().map(|h| h.try_result().unwrap().unwrap()).collect();
        for (i, m) in got.iter().enumerate() {
            assert_eq!(m.topic, "t");
            assert_eq!(m.partition, 3);
            assert_eq!(m.offset, Some(40 + i as i64));
            // CreateTime topic: the record's own timestamp.
            assert_eq!(m.timestamp, 1000 + i as i64);
            assert!(!m.log_append_time);
        }
        // Settled once: a later result does not overwrite it.
        b.failed(Arc::new(Error::Closed));
        assert_eq!(handles[0].try_result().unwrap().unwrap().offset, Some(40));
    }

    #[test]
    fn wait_blocks_until_the_batch_is_settled_and_wait_timeout_gives_up() {
        let b = BatchDelivery::new(TopicPartition::new("t", 0));
        let h = b.handle(2, 0);
        assert!(h.wait_timeout(Duration::from_millis(20)).is_none());
        let settler = {
            let b = Arc::clone(&b);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                b.acked(10, -1);
            })
        };
        assert_eq!(h.wait().unwrap().offset, Some(12));
        settler.join().unwrap();
        assert_eq!(h.wait_timeout(Duration::ZERO).unwrap().unwrap().offset, Some(12));
    }

    #[test]
    fn log_append_time_and_acks_0_show_in_the_metadata() {
        let b = BatchDelivery::new(TopicPartition::new("t", 0));
        let h = b.handle(5, 7);
        b.acked(-1, 123_456);
        let m = h.try_result().unwrap().unwrap();
        assert_eq!(m.offset, None, "acks=0: no offset");
        assert_eq!((m.timestamp, m.log_append_time), (123_456, true));
    }

    /// A split batch's handles find their records in its pieces (split again too), each with
    /// its own result, and a handle waiting across the split gets its piece's.
    #[test]
    fn handles_of_a_split_batch_follow_their_records_to_the_pieces() {
        let tp = TopicPartition::new("t", 0);
        let whole = BatchDelivery::new(tp.clone());
        let handles: Vec<_> = (0..5).map(|i| whole.handle(i, i64::from(i))).collect();
        let (first, second) = (BatchDelivery::new(tp.clone()), BatchDelivery::new(tp.clone()));
        let waiter = {
            let h = handles[4].clone();
            std::thread::spawn(move || h.wait())
        };
        whole.split(vec![(0, Arc::clone(&first)), (2, Arc::clone(&second))]);
        assert!(whole.is_settled(), "a split batch is not failed when dropped");
        assert!(handles.iter().all(|h| !h.is_done() && h.try_result().is_none()));
        // The second piece (records 2, 3, 4) splits again at its record 1.
        let (left, right) = (BatchDelivery::new(tp.clone()), BatchDelivery::new(tp.clone()));
        second.split(vec![(0, Arc::clone(&left)), (1, Arc::clone(&right))]);
        first.acked(100, -1);
        right.acked(300, -1);
        assert!(handles[0].is_done() && handles[1].is_done() && !handles[2].is_done());
        let too_large = Arc::new(Error::Kafka {
            api: crate::ApiKey::Produce,
            code: KafkaCode::MessageTooLarge,
            message: None,
        });
        left.failed(Arc::clone(&too_large));
        let offsets: Vec<_> = handles
            .iter()
            .map(|h| h.try_result().unwrap().ok().map(|m| (m.offset, m.timestamp)))
            .collect();
        assert_eq!(
            offsets,
            [
                Some((Some(100), 0)),
                Some((Some(101), 1)),
                None,
                Some((Some(300), 3)),
                Some((Some(301), 4))
            ]
        );
        assert!(Arc::ptr_eq(
            &handles[2].try_result().unwrap().unwrap_err(),
            &too_large
        ));
        assert_eq!(waiter.join().unwrap().unwrap().offset, Some(301));
        // A split naming no piece for the first records is ignored: they would wait for ever.
        let odd = BatchDelivery::new(tp.clone());
        odd.split(vec![(1, BatchDelivery::new(tp))]);
        assert!(!odd.is_settled());
    }

    #[test]
    fn a_failed_batch_gives_every_record_the_same_error() {
        let b = BatchDelivery::new(TopicPartition::new("t", 0));
        let (h1, h2) = (b.handle(0, 0), b.clone().handle(1, 0));
        b.failed(Arc::new(Error::Kafka {
            api: crate::ApiKey::Produce,
            code: KafkaCode::MessageTooLarge,
            message: None,
        }));
        let (e1, e2) = (
            h1.try_result().unwrap().unwrap_err(),
            h2.try_result().unwrap().unwrap_err(),
        );
        assert!(Arc::ptr_eq(&e1, &e2));
        assert_eq!(e1.kafka_code(), Some(KafkaCode::MessageTooLarge));
        assert!(b.is_settled());
    }
}
