//! What the caller's [`Producer`](super::Producer) and the background threads share: the
//! accumulator and the producer's progress, behind one lock, and the two conditions they wait
//! on. Settling a batch (acknowledged, to retry, failed for good) happens here, so that every
//! thread applies an answer the same way.

use super::accumulator::{Accumulator, Batch, Ready};
use super::config::ProducerConfig;
use super::request::{produce_error, LastError, Outcome};
use crate::error::Error;
use crate::group::TopicPartition;
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
            }),
            work: Condvar::new(),
            settled: Condvar::new(),
        })
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
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
}

impl State {
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
        b.delivery.failed(Arc::clone(e));
        self.failed += b.records.len();
        if self.first_failure.is_none() {
            self.first_failure = Some(Arc::clone(e));
        }
    }

    /// Removes batch `id` of `tp` and fails it with `e`.
    pub(super) fn fail_batch(&mut self, tp: &TopicPartition, id: u64, e: &Arc<Error>) {
        if let Some(b) = self.acc.remove(tp, id) {
            self.fail(&b, e);
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

    /// Fails the batches past `delivery.timeout.ms` that are not in flight.
    pub(super) fn expire(&mut self, timeout: Duration, now: Instant) {
        for (tp, mut b) in self.acc.expire(timeout, now) {
            let what = format!(
                "Produce of {} record(s) to {tp}: delivery.timeout.ms ({} ms) passed after {} attempt(s)",
                b.records.len(),
                timeout.as_millis(),
                b.attempts
            );
            let last = b
                .last_error
                .take()
                .unwrap_or_else(|| LastError::Other("never acknowledged".into()));
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
