//! What the caller's [`Producer`](super::Producer) and the background threads share: the
//! accumulator and the producer's progress, behind one lock, and the two conditions they wait
//! on. Settling a batch (acknowledged, to retry, failed for good) happens here, so that every
//! thread applies an answer the same way.

use super::accumulator::{Accumulator, Batch, Ready};
use super::config::ProducerConfig;
use super::idempotence::Sequences;
use super::request::{produce_error, LastError, Outcome};
use super::transaction::{react, Reaction, Transaction};
use crate::error::Error;
use crate::group::TopicPartition;
use crate::protocol::ApiKey;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The producer's shared state and its two conditions.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    /// The sender threads wait here for batches to send: a batch full or created, a flush, a
    /// metadata refresh asked for, the producer closing.
    pub(super) work: Condvar,
    /// Callers wait here for batches to be settled: `flush`, and a `send` waiting for room in
    /// `buffer.memory`.
    pub(super) settled: Condvar,
}

impl Shared {
    pub(super) fn new(acc: Accumulator) -> Arc<Self> {
        Arc::new(Shared {
            state: Mutex::new(State {
                acc,
                flushing: 0,
                stop: false,
                failed: 0,
                first_failure: None,
                refresh: false,
                metadata_at: None,
                seq: None,
                idempotence_decided: false,
                idempotence_failed: None,
                per_partition: 1,
                need_producer_id: false,
                no_producer_id: None,
                txn: None,
            }),
            work: Condvar::new(),
            settled: Condvar::new(),
        })
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        #[cfg(test)]
        LOCKS_TAKEN.with(|n| n.set(n.get() + 1));
        crate::client::lock(&self.state)
    }

    /// Waits on `cond` for at most `timeout`.
    pub(super) fn wait<'a>(
        &self,
        cond: &Condvar,
        guard: MutexGuard<'a, State>,
        timeout: Duration,
    ) -> MutexGuard<'a, State> {
        match cond.wait_timeout(guard, timeout) {
            Ok((g, _)) => g,
            Err(p) => p.into_inner().0,
        }
    }
}

#[cfg(test)]
thread_local! {
    /// How many times this thread took [`Shared::lock`]: the lock is on every record's path,
    /// so tests pin how often a call takes it.
    static LOCKS_TAKEN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many times the calling thread took a producer's shared lock (tests only).
#[cfg(test)]
pub(super) fn locks_taken() -> usize {
    LOCKS_TAKEN.with(std::cell::Cell::get)
}

/// The producer's progress, under [`Shared::state`].
#[derive(Debug)]
pub(super) struct State {
    pub(super) acc: Accumulator,
    /// Callers waiting in `flush` or `close`: while any is, every batch is due at once.
    pub(super) flushing: usize,
    /// The threads are to stop; batches still pending fail with [`Error::Closed`].
    pub(super) stop: bool,
    /// Records that failed for good since the last `flush` reported them, and the first
    /// error among them.
    pub(super) failed: usize,
    pub(super) first_failure: Option<Arc<Error>>,
    /// A broker thread found the metadata stale (a moved leader, a lost connection).
    pub(super) refresh: bool,
    pub(super) metadata_at: Option<Instant>,
    /// The idempotent producer's sequences; `None` without idempotence.
    pub(super) seq: Option<Sequences<TopicPartition>>,
    /// Whether the sender thread has decided on idempotence (and got a producer id): until
    /// then nothing is sent, as each batch's header depends on it.
    pub(super) idempotence_decided: bool,
    /// InitProducerId failed for good (no `IDEMPOTENT_WRITE` ACL, …): every batch fails with
    /// this.
    pub(super) idempotence_failed: Option<Arc<Error>>,
    /// Batches of one partition in flight at once: 1 without idempotence, which keeps the
    /// order of a partition's records across retries; up to 5 with it.
    pub(super) per_partition: usize,
    /// The epoch is exhausted: the sender thread gets a new producer id before more is sent.
    pub(super) need_producer_id: bool,
    /// Why the last attempt to get a producer id (or decide on idempotence) failed, while the
    /// producer still waits for one: what a batch that expires unsent reports, since nothing
    /// of its own went wrong. A Kafka 3.0.2 broker (ZooKeeper mode) once failed InitProducerId
    /// for minutes, its controller not handing out id blocks (KIP-730's AllocateProducerIds).
    pub(super) no_producer_id: Option<LastError>,
    /// A transactional producer's transaction; `None` without `transactional.id`.
    pub(super) txn: Option<Transaction>,
}

impl State {
    /// Whether batches may be taken for sending: idempotence decided, and a producer id in
    /// hand if idempotent.
    pub(super) fn can_send(&self) -> bool {
        self.idempotence_decided
            && self.idempotence_failed.is_none()
            && !self.need_producer_id
            && self.seq.as_ref().map_or(true, |s| s.producer().is_valid())
    }

    /// When batches are due, given `linger.ms`.
    pub(super) fn ready(&self, linger: Duration) -> Ready {
        Ready {
            linger,
            all: self.flushing > 0 || self.stop,
        }
    }

    /// Settles a batch that failed for good: its records' handles get `e`, and `flush` will
    /// report it.
    pub(super) fn fail(&mut self, b: &Batch, e: &Arc<Error>) {
        if let Some(txn) = self.txn.as_mut() {
            // A record of the transaction is lost: it cannot commit, and a fenced or
            // unauthorized producer cannot go on at all.
            txn.failed_batches = true;
            let code = e.kafka_code().unwrap_or(crate::KafkaCode::UnknownServerError);
            match react(ApiKey::Produce, code) {
                Reaction::Fatal => txn.fatal(Arc::clone(e)),
                _ => txn.abortable(Arc::clone(e)),
            }
        }
        b.delivery.failed(Arc::clone(e));
        self.failed += b.records.len();
        if self.first_failure.is_none() {
            self.first_failure = Some(Arc::clone(e));
        }
    }

    /// Removes batch `id` of `tp` and fails it with `e`.
    pub(super) fn fail_batch(&mut self, tp: &TopicPartition, id: u64, e: &Arc<Error>) {
        if let Some(b) = self.acc.remove(tp, id) {
            self.give_up(tp, &b);
            self.fail(&b, e);
        }
    }

    /// Tells the sequence state that a numbered batch will not be sent again: whether it was
    /// written is unknown until later batches are answered (a no-op for a batch the state
    /// already settled).
    fn give_up(&mut self, tp: &TopicPartition, b: &Batch) {
        if let (Some(seq), Some(_)) = (self.seq.as_mut(), b.stamp) {
            seq.give_up(tp, b.id);
        }
    }

    /// Applies one batch's outcome; returns whether the metadata should be refreshed.
    pub(super) fn settle(
        &mut self,
        config: &ProducerConfig,
        retry_backoff: Duration,
        tp: &TopicPartition,
        id: u64,
        outcome: Outcome,
    ) -> bool {
        match outcome {
            Outcome::Acked {
                base_offset,
                log_append_time,
            } => {
                if let Some(b) = self.acc.remove(tp, id) {
                    b.delivery.acked(base_offset, log_append_time);
                }
                false
            }
            Outcome::Failed(e) => {
                self.fail_batch(tp, id, &failure(e));
                false
            }
            Outcome::Split(e) => {
                if !self.split(tp, id) {
                    self.fail_batch(tp, id, &failure(e));
                }
                false
            }
            Outcome::Retry { refresh, error } => {
                let retries = config.retries;
                let Some(b) = self.acc.batch_mut(tp, id) else {
                    return refresh;
                };
                b.in_flight = false;
                b.attempts += 1;
                log::debug!("producer: {tp} attempt {} failed: {error}; retrying", b.attempts);
                if b.attempts > retries {
                    let attempts = b.attempts;
                    let e = match error {
                        LastError::Code(code, message) => produce_error(tp, code, message),
                        other => other.into_timeout(format!(
                            "Produce to {tp}: {attempts} attempt(s) failed ({retries} retries allowed)"
                        )),
                    };
                    self.fail_batch(tp, id, &failure(e));
                    return false;
                }
                b.retry_at = Some(crate::deadline::after(retry_backoff));
                b.last_error = Some(error);
                self.refresh |= refresh;
                refresh
            }
        }
    }

    /// Splits batch `id` of `tp`, refused as too large, into two pieces in its place
    /// ([`Accumulator::split`]), which with idempotence take its sequences
    /// ([`Sequences::split`]); whether it was split (it has more than one record).
    fn split(&mut self, tp: &TopicPartition, id: u64) -> bool {
        let Some(pieces) = self.acc.split(tp, id) else {
            return false;
        };
        log::debug!(
            "producer: {tp}: a batch of {} records was refused as MESSAGE_TOO_LARGE; \
             sending it again as {} and {}",
            pieces[0].1 + pieces[1].1,
            pieces[0].1,
            pieces[1].1
        );
        let Some(seq) = self.seq.as_mut() else {
            return true;
        };
        let counts = pieces.map(|(id, n)| (id, i32::try_from(n).unwrap_or(i32::MAX)));
        match seq.split(tp, id, &counts) {
            Some(stamps) => {
                for ((piece, _), stamp) in counts.iter().zip(stamps) {
                    if let Some(b) = self.acc.batch_mut(tp, *piece) {
                        b.stamp = Some(stamp);
                    }
                }
            }
            // Not numbered (given up on before its answer came): the pieces are numbered
            // afresh like any new batch, and the whole's entry, if any, must not hold the
            // partition for ever.
            None => {
                seq.give_up(tp, id);
            }
        }
        true
    }

    /// Fails the batches past `delivery.timeout.ms` that are not in flight.
    pub(super) fn expire(&mut self, timeout: Duration, now: Instant) {
        for (tp, mut b) in self.acc.expire(timeout, now) {
            let what = format!(
                "Produce of {} record(s) to {tp}: delivery.timeout.ms ({} ms) passed after {} attempt(s)",
                b.records.len(),
                timeout.as_millis(),
                b.attempts
            );
            let last = b.last_error.take().unwrap_or_else(|| match &self.no_producer_id {
                Some(why) if b.attempts == 0 => why.clone(),
                _ => LastError::Other("never acknowledged".into()),
            });
            self.give_up(&tp, &b);
            self.fail(&b, &failure(last.into_timeout(what)));
        }
    }
}

/// Logs a final failure (once, whatever the number of batches it fails) and makes it
/// shareable by their handles.
pub(super) fn failure(e: Error) -> Arc<Error> {
    log::warn!("producer: {e}");
    Arc::new(e)
}
