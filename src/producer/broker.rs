//! One leader broker's sender thread: takes the batches due for the partitions that broker
//! leads, encodes them for its Produce version, and keeps up to
//! `max.in.flight.requests.per.connection` requests in flight on one connection of its own
//! (Kafka answers a connection's requests in order, so the oldest is always read first).
//!
//! The thread owns its connection: nothing else writes on it, which is what lets several
//! requests be outstanding at once. It waits for an answer in short slices while it could send
//! more, so that a batch that becomes due meanwhile goes out without waiting for the answer.

use super::accumulator::{encode_stamped, Taken};
use super::config::ProducerConfig;
use super::idempotence::{Action, Bump, PartitionAnswer, Requested, Resend};
use super::record::Acks;
use super::request::{answers, left_out, magic_for, pack, produce_error, Answer, LastError, Outcome};
use super::state::{failure, Shared, State};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::group::TopicPartition;
use crate::net::connection::Pending;
use crate::net::link::{Link, Purpose};
use crate::protocol::messages::ProduceRequest;
use crate::protocol::ApiKey;
use crate::records::{self, BatchProducer};
use crate::worker::Stop;
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the thread waits for an answer before looking for more to send, while it has room
/// for more requests in flight.
const SLICE: Duration = Duration::from_millis(1);

/// How long it waits for an answer when it has no room for more (or for work, with none):
/// only bounds how soon it notices that the producer is stopping.
const LONG_SLICE: Duration = Duration::from_millis(50);

/// The highest Produce version a transaction on protocol v1 may use.
const V1_PRODUCE: i16 = 11;

/// What a broker thread needs of the producer, shared by all of them.
#[derive(Debug)]
pub(super) struct Settings {
    pub(super) config: ProducerConfig,
    pub(super) retry_backoff: Duration,
    /// The `timeout_ms` sent in each ProduceRequest.
    pub(super) broker_timeout_ms: i32,
    /// Whether the configuration asks for idempotence.
    pub(super) requested: Requested,
}

/// One request in flight and the batches it carries, with the bytes sent for each (kept for a
/// retry, which must send exactly the same).
struct InFlight {
    pending: Pending<ProduceRequest>,
    batches: Vec<Sent>,
}

/// A batch as sent.
struct Sent {
    tp: TopicPartition,
    id: u64,
    magic: i8,
    /// The producer header the bytes carry (idempotence).
    stamp: Option<BatchProducer>,
    bytes: Bytes,
}

/// The thread of broker `id`; returns when the producer stops.
pub(super) fn run(id: i32, client: Client, shared: Arc<Shared>, settings: Arc<Settings>, stop: Arc<Stop>) {
    let mut broker = Broker {
        id,
        client,
        shared,
        settings,
        stop,
        link: None,
        in_flight: VecDeque::new(),
    };
    broker.run();
}

struct Broker {
    id: i32,
    client: Client,
    /// Its thread's stop: marks a connect as a step a stop does not wait for.
    stop: Arc<Stop>,
    shared: Arc<Shared>,
    settings: Arc<Settings>,
    link: Option<Link>,
    in_flight: VecDeque<InFlight>,
}

impl Broker {
    fn run(&mut self) {
        loop {
            let Some(rounds) = self.take() else {
                break;
            };
            if !rounds.is_empty() {
                self.send(rounds);
            }
            if !self.in_flight.is_empty() {
                self.receive();
            }
        }
        // Stopping: what is still in flight will never be read.
        let mut st = self.shared.lock();
        for f in self.in_flight.drain(..) {
            for b in f.batches {
                st.fail_batch(&b.tp, b.id, &Arc::new(Error::Closed));
            }
        }
        drop(st);
        self.shared.settled.notify_all();
    }

    /// The batches to send now, one round (at most one batch per partition) per request
    /// slot free; waits for work while there is none and nothing is in flight. `None` once
    /// the producer stops.
    fn take(&mut self) -> Option<Vec<Vec<Taken>>> {
        let max = self.settings.config.max_in_flight;
        let mut st = self.shared.lock();
        loop {
            if st.stop {
                return None;
            }
            let now = Instant::now();
            let mut rounds = Vec::new();
            let mut wake: Option<Instant> = None;
            // A re-authentication due on the connection waits for the answers in flight.
            let quiet =
                self.link.as_ref().is_some_and(Link::reauthentication_due) && !self.in_flight.is_empty();
            let ready = st.ready(self.settings.config.linger);
            let room = match (quiet, st.can_send()) {
                (false, true) => max.saturating_sub(self.in_flight.len()),
                _ => 0,
            };
            let per_partition = st.per_partition;
            for _ in 0..room {
                let State { acc, txn, .. } = &mut *st;
                let may_send = |topic: &str, p: i32| txn.as_ref().map_or(true, |t| t.may_send(topic, p));
                let (taken, w) = acc.take_ready(self.id, now, ready, per_partition, &may_send);
                if let Some(w) = w {
                    wake = Some(wake.map_or(w, |x: Instant| x.min(w)));
                }
                let taken = number(&mut st, taken);
                if taken.is_empty() {
                    break;
                }
                rounds.push(taken);
            }
            if !rounds.is_empty() || !self.in_flight.is_empty() {
                return Some(rounds);
            }
            let wait = wake.map_or(LONG_SLICE * 20, |w| {
                w.saturating_duration_since(now).max(Duration::from_micros(100))
            });
            st = self.shared.wait(&self.shared.work, st, wait);
        }
    }

    /// Encodes and writes each round as requests (packed below `max.request.size`).
    fn send(&mut self, rounds: Vec<Vec<Taken>>) {
        let all = || rounds.iter().flatten();
        // A transaction on protocol v1 must not use Produce v12, which would have the broker add
        // the partition itself (protocol v2).
        // Only a transactional producer has anything to look up (under the shared lock): the
        // others keep the Produce path free of it.
        let transactional = self.settings.config.transactional_id.is_some();
        let v1 = transactional && self.shared.lock().txn.as_ref().is_some_and(|t| !t.v2);
        let cap = if v1 { V1_PRODUCE } else { i16::MAX };
        let link = match self.connect() {
            Ok(link) => link,
            Err(e) => {
                let why = LastError::of(&e);
                let unreachable = e.is_unreachable();
                let e = (!unreachable).then(|| failure(e));
                let mut st = self.shared.lock();
                for t in all() {
                    match &e {
                        // No Produce version in common: nothing will change that.
                        Some(e) => st.fail_batch(&t.tp, t.id, e),
                        None => {
                            self.retry(&mut st, &t.tp, t.id, why.clone());
                        }
                    }
                }
                st.refresh |= unreachable;
                drop(st);
                self.notify();
                return;
            }
        };
        let (version, bv) = match link
            .version(ApiKey::Produce)
            .and_then(|v| link.versions().map(|bv| (v.min(cap), bv.clone())))
        {
            Ok(v) => v,
            Err(e) => {
                let e = failure(e);
                let mut st = self.shared.lock();
                for t in all() {
                    st.fail_batch(&t.tp, t.id, &e);
                }
                drop(st);
                self.notify();
                return;
            }
        };
        let magic = magic_for(version);
        let config = &self.settings.config;
        let mut refused = Vec::new();
        let mut requests: Vec<(ProduceRequest, Vec<Sent>)> = Vec::new();
        for round in &rounds {
            let mut encoded = Vec::with_capacity(round.len());
            let mut ids = HashMap::with_capacity(round.len());
            for t in round {
                let stamp = t.stamp.unwrap_or(BatchProducer::NONE);
                let bytes = match &t.encoded {
                    Some((m, bytes)) if *m == magic && t.encoded_stamp == t.stamp => Ok(bytes.clone()),
                    // Renumbered by an epoch bump: the same records under the new header.
                    Some((2, bytes)) if magic == 2 => {
                        records::restamp(bytes, &stamp).map_err(|source| Error::NotEncodable {
                            partition: t.tp.clone(),
                            magic,
                            source,
                        })
                    }
                    _ => encode_stamped(&t.records, &t.tp, config.compression, magic, &bv, &stamp),
                };
                match bytes {
                    Ok(bytes) => {
                        ids.insert(t.tp.clone(), (t.id, t.stamp, bytes.clone()));
                        encoded.push((t.tp.clone(), bytes));
                    }
                    Err(e) => refused.push((t.tp.clone(), t.id, e)),
                }
            }
            let packed = pack(
                encoded,
                config.max_request_size,
                config.acks,
                self.settings.broker_timeout_ms,
            );
            for (mut req, tps) in packed {
                // Authorizes the transactional batches (WRITE on the transactional id).
                req.transactional_id = config.transactional_id.as_deref().map(Into::into);
                let batches = tps
                    .into_iter()
                    .filter_map(|tp| {
                        let (id, stamp, bytes) = ids.remove(&tp)?;
                        Some(Sent {
                            tp,
                            id,
                            magic,
                            stamp,
                            bytes,
                        })
                    })
                    .collect();
                requests.push((req, batches));
            }
        }
        if !refused.is_empty() {
            let mut st = self.shared.lock();
            for (tp, id, e) in refused {
                st.fail_batch(&tp, id, &failure(e));
            }
        }
        let mut broken: Option<LastError> = None;
        let mut acked_blind = Vec::new();
        for (req, batches) in requests {
            if let Some(why) = &broken {
                self.requeue(batches, why.clone());
                continue;
            }
            let Some(link) = self.link.as_mut() else {
                self.requeue(batches, LastError::Other("connection closed".into()));
                continue;
            };
            let written = if config.acks == Acks::None {
                link.send_no_response(None, |_| req).map(|()| None)
            } else {
                link.send_pending(&req, version, None).map(Some)
            };
            match written {
                Ok(None) => acked_blind.extend(batches),
                Ok(Some(pending)) => self.in_flight.push_back(InFlight { pending, batches }),
                Err(e) => {
                    log::debug!("producer: writing to broker {} failed: {e}", self.id);
                    let why = LastError::of(&e);
                    self.requeue(batches, why.clone());
                    broken = Some(why);
                }
            }
        }
        if !acked_blind.is_empty() {
            // acks=0: written, as far as anyone will know, at no known offset.
            let mut st = self.shared.lock();
            for b in acked_blind {
                let acked = Outcome::Acked {
                    base_offset: -1,
                    log_append_time: -1,
                };
                st.settle(
                    &self.settings.config,
                    self.settings.retry_backoff,
                    &b.tp,
                    b.id,
                    acked,
                );
            }
            drop(st);
            self.notify();
        }
        if let Some(why) = broken {
            // The connection is gone, and with it the answers to what was in flight.
            let flying: Vec<InFlight> = self.in_flight.drain(..).collect();
            for f in flying {
                self.requeue(f.batches, why.clone());
            }
            self.link = None;
        }
    }

    /// Waits a slice for the oldest request's answer and applies it.
    fn receive(&mut self) {
        let room = self.in_flight.len() < self.settings.config.max_in_flight;
        let slice = if room { SLICE } else { LONG_SLICE };
        let (Some(link), Some(front)) = (self.link.as_mut(), self.in_flight.front()) else {
            return;
        };
        let answer = link.receive(&front.pending, slice);
        match answer {
            Ok(None) => {}
            Ok(Some(resp)) => {
                let Some(f) = self.in_flight.pop_front() else {
                    return;
                };
                if resp.throttle_time_ms > 0 {
                    log::debug!("producer: throttled for {} ms", resp.throttle_time_ms);
                }
                let tps: Vec<TopicPartition> = f.batches.iter().map(|b| b.tp.clone()).collect();
                let mut st = self.shared.lock();
                for (b, answer) in f.batches.iter().zip(answers(&resp, &tps)) {
                    let o = match answer {
                        None => left_out(),
                        Some(a) => outcome(&mut st, b, a),
                    };
                    if matches!(o, Outcome::Retry { .. }) {
                        keep_encoded(&mut st, b);
                    }
                    st.settle(&self.settings.config, self.settings.retry_backoff, &b.tp, b.id, o);
                }
                bump_if_asked(&mut st);
                drop(st);
                self.notify();
            }
            Err(e) => {
                let why = LastError::of(&e);
                let mut flying = self.in_flight.drain(..).collect::<VecDeque<_>>();
                if !e.is_unreachable() {
                    // Not about one partition (an answer that does not decode): every batch
                    // of the request fails with it; the others lost their answers.
                    if let Some(f) = flying.pop_front() {
                        let e = failure(e);
                        let mut st = self.shared.lock();
                        for b in &f.batches {
                            st.fail_batch(&b.tp, b.id, &e);
                        }
                    }
                }
                for f in flying {
                    self.requeue(f.batches, why.clone());
                }
                if !self.link.as_ref().is_some_and(Link::is_connected) {
                    self.link = None;
                }
                self.notify();
            }
        }
    }

    /// The broker's connection, opened if needed.
    fn connect(&mut self) -> Result<&mut Link> {
        if self.link.is_none() {
            // Unknown until the metadata names it again: retried after a refresh.
            let broker = self
                .client
                .broker(self.id)
                .ok_or(Error::UnknownBroker { id: self.id })?;
            self.link = Some(self.client.link(Purpose::Produce, broker.addr()));
        }
        let timeout = self.client.connection_config().request_timeout;
        let link = self.link.as_mut().ok_or(Error::Closed)?;
        self.stop
            .uninterruptible(|| link.connect(Some(crate::deadline::after(timeout))))
            .unwrap_or(Err(Error::Closed))?;
        Ok(link)
    }

    /// Puts batches back to be retried after the connection failed (`why`).
    fn requeue(&self, batches: Vec<Sent>, why: LastError) {
        let mut st = self.shared.lock();
        for b in &batches {
            keep_encoded(&mut st, b);
            self.retry(&mut st, &b.tp, b.id, why.clone());
        }
        st.refresh = true;
        drop(st);
        self.notify();
    }

    fn retry(&self, st: &mut State, tp: &TopicPartition, id: u64, error: LastError) {
        let retry = Outcome::Retry { refresh: true, error };
        st.settle(&self.settings.config, self.settings.retry_backoff, tp, id, retry);
    }

    /// Wakes the callers waiting for results and the other threads (a refresh may be due).
    fn notify(&self) {
        self.shared.settled.notify_all();
        self.shared.work.notify_all();
    }
}

/// Keeps the bytes a batch was sent with (and the header they carry), so that its retry
/// sends them unchanged.
fn keep_encoded(st: &mut State, b: &Sent) {
    if let Some(batch) = st.acc.batch_mut(&b.tp, b.id) {
        batch.encoded = Some((b.magic, b.bytes.clone()));
        batch.encoded_stamp = b.stamp;
    }
}

/// With idempotence, gives each taken batch its producer header: a new batch the next
/// sequence of its partition, a retry the header the sequence state says (renumbered after an
/// epoch bump). A batch that must wait (an earlier batch of its partition goes first, a bump
/// is pending, five are in flight) goes back to its queue, untaken.
fn number(st: &mut State, taken: Vec<Taken>) -> Vec<Taken> {
    let Some(seq) = st.seq.as_mut() else {
        return taken;
    };
    let mut kept = Vec::with_capacity(taken.len());
    let mut back = Vec::new();
    for mut t in taken {
        let count = i32::try_from(t.records.len()).unwrap_or(i32::MAX);
        let stamp = match t.numbered.then(|| seq.resend(&t.tp, t.id)) {
            Some(Resend::Now(stamp)) => Some(stamp),
            Some(Resend::Wait) => None,
            // First sent, or no longer known to the sequence state (given up, a new producer
            // id): numbered afresh.
            None | Some(Resend::Unknown) if seq.in_flight(&t.tp) > 0 && !seq.may_pipeline(&t.tp) => None,
            None | Some(Resend::Unknown) => seq.next_batch(&t.tp, t.id, count).ok(),
        };
        match stamp {
            Some(stamp) => {
                if !t.numbered {
                    if let Some(b) = st.acc.batch_mut(&t.tp, t.id) {
                        b.stamp = Some(stamp);
                    }
                }
                t.stamp = Some(stamp);
                kept.push(t);
            }
            None => back.push(t),
        }
    }
    for t in back {
        if let Some(b) = st.acc.batch_mut(&t.tp, t.id) {
            b.in_flight = false;
        }
    }
    kept
}

/// What one partition's answer means for batch `b`: read by the sequence state with
/// idempotence, else by the error table alone.
fn outcome(st: &mut State, b: &Sent, a: Answer) -> Outcome {
    let records = st
        .acc
        .batch_mut(&b.tp, b.id)
        .map_or(0, |batch| batch.records.len());
    let (Some(seq), Some(stamp)) = (st.seq.as_mut(), b.stamp) else {
        return a.outcome(&b.tp, records);
    };
    let answer = PartitionAnswer {
        code: a.code,
        base_offset: a.base_offset,
        log_start_offset: a.log_start_offset,
    };
    match seq.on_answer(&b.tp, b.id, stamp, &answer) {
        Action::Complete { base_offset } => Outcome::Acked {
            base_offset: base_offset.unwrap_or(-1),
            log_append_time: a.log_append_time,
        },
        Action::Retry | Action::RetryAfterBump => Outcome::Retry {
            refresh: a.code.needs_metadata_refresh(),
            error: LastError::Code(a.code, a.message),
        },
        Action::Split => Outcome::Split(produce_error(&b.tp, a.code, a.message)),
        Action::Fail { .. } | Action::Fatal => Outcome::Failed(produce_error(&b.tp, a.code, a.message)),
        // Not tracked any more (given up on): the table alone decides.
        Action::Stale => a.outcome(&b.tp, records),
    }
}

/// Bumps the epoch when an answer asked for it; an exhausted epoch needs a new producer id,
/// which the sender thread gets.
fn bump_if_asked(st: &mut State) {
    let Some(seq) = st.seq.as_mut() else {
        return;
    };
    if !seq.bump_required() {
        return;
    }
    match seq.bump_epoch() {
        Bump::Bumped { producer, restamp } => log::info!(
            "producer: epoch bumped to {} (producer id {}); {} partition(s) renumbered",
            producer.epoch,
            producer.id,
            restamp.len()
        ),
        Bump::NeedProducerId => st.need_producer_id = true,
        Bump::NotNeeded => {}
    }
}
