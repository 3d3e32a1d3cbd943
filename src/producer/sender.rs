//! The producer's background thread: what Java's `Sender` and librdkafka's main thread do
//! beside the network. It keeps the metadata of the topics written to fresh (when a broker
//! thread found it stale, when a partition has no leader, and every `metadata.max.age.ms`),
//! fails batches past `delivery.timeout.ms`, and starts one [`broker`](super::broker) thread
//! per leader as soon as a batch waits for it. On stop it stops them and waits for them.

use super::broker::{self, Settings};
use super::idempotence::{self, ProducerIdEpoch, Requested, Sequences, Support};
use super::request::LastError;
use super::state::{failure, Shared, State};
use super::transaction::Phase;
use super::transactional::{self, Added};
use crate::client::Client;
use crate::error::Error;
use crate::protocol::messages::InitProducerIdRequest;
use crate::worker::{Stop, Worker};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest the thread sleeps when nothing is due: only bounds how soon it notices a stop
/// that nobody announced (every change notifies it).
const IDLE: Duration = Duration::from_secs(1);

/// Runs until the producer stops.
pub(super) fn run(client: Client, shared: Arc<Shared>, settings: Arc<Settings>) {
    let mut brokers: HashMap<i32, Worker> = HashMap::new();
    // When a refresh found a partition still without a leader: the next waits a backoff.
    let mut leaderless_since: Option<Instant> = None;
    let config = &settings.config;
    let mut st = shared.lock();
    // When the last attempt to decide on idempotence (or get a producer id) failed.
    let mut init_failed_at: Option<Instant> = None;
    // When the next AddPartitionsToTxn may go (after a retriable failure).
    let mut add_at: Option<Instant> = None;
    while !st.stop {
        let now = Instant::now();
        st.expire(config.delivery_timeout, now);
        if let Some(e) = st.idempotence_failed.clone() {
            for b in st.acc.drain_waiting() {
                st.fail(&b, &e);
            }
            shared.settled.notify_all();
        }
        let init_due = init_failed_at.map_or(true, |at| {
            now.saturating_duration_since(at) >= settings.retry_backoff
        });
        // A transactional producer's id comes from init_transactions, in the caller's thread.
        let transactional = st.txn.is_some();
        if (!st.idempotence_decided || st.need_producer_id)
            && !transactional
            && !st.acc.topics.is_empty()
            && init_due
        {
            drop(st);
            let decided = decide(&client, settings.requested);
            st = shared.lock();
            match decided {
                Ok(d) => {
                    init_failed_at = None;
                    st.no_producer_id = None;
                    apply(&mut st, d, config.max_in_flight);
                }
                Err(InitFailure::Retry(why)) => {
                    log::debug!("producer: no producer id yet: {why}");
                    init_failed_at = Some(Instant::now());
                    st.no_producer_id = Some(why);
                }
                Err(InitFailure::Fatal(e)) => {
                    st.idempotence_failed = Some(failure(e));
                    st.idempotence_decided = true;
                }
            }
            shared.work.notify_all();
            continue;
        }
        let add_due = add_at.map_or(true, |at| now >= at);
        let adding = st
            .txn
            .as_ref()
            .is_some_and(|t| t.has_to_add() && matches!(t.phase(), Phase::InTransaction | Phase::Committing));
        if adding && add_due {
            let producer = st.seq.as_ref().map_or(ProducerIdEpoch::NONE, Sequences::producer);
            let (id, tps) = match st.txn.as_mut() {
                Some(t) => (t.id.clone(), t.take_to_add()),
                None => continue,
            };
            drop(st);
            let deadline = crate::deadline::after(client.connection_config().request_timeout);
            let added = transactional::add_partitions(
                &client,
                &shared,
                &id,
                producer,
                &tps,
                settings.retry_backoff,
                deadline,
            );
            st = shared.lock();
            if let Some(t) = st.txn.as_mut() {
                match added {
                    Added::Yes => {
                        add_at = None;
                        t.added(&tps, true);
                    }
                    Added::Retry(pause) => {
                        add_at = Some(crate::deadline::after(pause));
                        t.added(&tps, false);
                    }
                    Added::Abortable(e) => {
                        t.added(&tps, false);
                        t.abortable(failure(e));
                    }
                    Added::Fatal(e) => {
                        t.added(&tps, false);
                        let e = failure(e);
                        t.fatal(Arc::clone(&e));
                        for b in st.acc.drain_waiting() {
                            st.fail(&b, &e);
                        }
                    }
                }
            }
            shared.work.notify_all();
            shared.settled.notify_all();
            continue;
        }
        let (leaders, leaderless) = st.acc.leaders_with_work();
        for id in leaders {
            if brokers.contains_key(&id) {
                continue;
            }
            let (client, shared, settings) = (client.clone(), Arc::clone(&shared), Arc::clone(&settings));
            let stop = producer_stop(&shared);
            let seen = stop.clone();
            let spawned = Worker::spawn(format!("kafka-producer-broker-{id}"), None, stop, move || {
                broker::run(id, client, shared, settings, seen)
            });
            match spawned {
                Ok(h) => {
                    brokers.insert(id, h);
                }
                Err(e) => log::warn!("producer: cannot start the thread for broker {id}: {e}"),
            }
        }
        let stale = st.metadata_at.map_or(true, |at| {
            now.saturating_duration_since(at) >= config.metadata_max_age
        });
        let leaderless_due = leaderless
            && leaderless_since.map_or(true, |at| {
                now.saturating_duration_since(at) >= settings.retry_backoff
            });
        if (st.refresh || leaderless_due || stale) && !st.acc.topics.is_empty() {
            st.refresh = false;
            let names: Vec<String> = st.acc.topics.keys().cloned().collect();
            drop(st);
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let meta = client.refresh_metadata_once(Some(&names));
            st = shared.lock();
            match meta {
                Ok(meta) => {
                    st.metadata_at = Some(Instant::now());
                    st.acc.update(&meta);
                }
                // Kept as it was; the next round retries.
                Err(e) => log::debug!("producer: metadata refresh failed: {e}"),
            }
            leaderless_since = st.acc.leaders_with_work().1.then(Instant::now);
            shared.work.notify_all();
            continue;
        }
        let mut until = now + IDLE;
        if let Some(e) = st.acc.next_expiry(config.delivery_timeout) {
            until = until.min(e);
        }
        if let Some(at) = st.metadata_at {
            until = until.min(crate::deadline::at(at, config.metadata_max_age));
        }
        if let Some(at) = leaderless_since.filter(|_| leaderless) {
            until = until.min(crate::deadline::at(at, settings.retry_backoff));
        }
        if let Some(at) = init_failed_at {
            until = until.min(crate::deadline::at(at, settings.retry_backoff));
        }
        if let Some(at) = add_at.filter(|_| adding) {
            until = until.min(at);
        }
        let wait = until.saturating_duration_since(now).max(Duration::from_millis(1));
        st = shared.wait(&shared.work, st, wait);
    }
    drop(st);
    shared.work.notify_all();
    // Each ends within a receive slice of the stop (a connect in progress is not waited for).
    for (_, mut w) in brokers {
        w.shutdown(STOP_BOUND);
    }
}

/// How long a stop waits for one of the producer's threads: they check the stop at least every
/// receive slice or wait, so this is only reached by a thread stuck outside the network.
pub(super) const STOP_BOUND: Duration = Duration::from_secs(5);

/// A stop for one of the producer's threads: it sets the producer-wide stop flag, which every
/// thread checks under the state's lock, and wakes the threads waiting for work.
pub(super) fn producer_stop(shared: &Arc<Shared>) -> Arc<Stop> {
    let shared = Arc::clone(shared);
    Arc::new(Stop::with_waker(move || {
        shared.lock().stop = true;
        shared.work.notify_all();
    }))
}

/// What [`decide`] found: idempotent with this producer id, or not (and why).
enum Decided {
    Idempotent(ProducerIdEpoch),
    Not(idempotence::WhyNot),
}

/// Why [`decide`] did not decide.
enum InitFailure {
    /// Try again after the retry backoff: a broker not reachable, a retriable code.
    Retry(LastError),
    /// Idempotence cannot be had (authorization): every batch fails with this.
    Fatal(Error),
}

/// Decides on idempotence from a broker's ApiVersions and, if idempotent, gets a producer id
/// with InitProducerId (from any broker: without a transactional id there is no coordinator).
fn decide(client: &Client, requested: Requested) -> Result<Decided, InitFailure> {
    let bv = client
        .any_broker_versions()
        .map_err(|e| InitFailure::Retry(LastError::of(&e)))?;
    match idempotence::support(requested, &bv) {
        Support::NotIdempotent(why) => Ok(Decided::Not(why)),
        Support::Idempotent { .. } => {
            let answer = client
                .send_any(|v| -> InitProducerIdRequest {
                    idempotence::init_request(v, idempotence::InitPurpose::Fresh)
                })
                .map_err(|e| match e.is_unreachable() {
                    true => InitFailure::Retry(LastError::of(&e)),
                    false => InitFailure::Fatal(e),
                })?;
            match idempotence::read_init_answer(&answer) {
                Ok(pe) => Ok(Decided::Idempotent(pe)),
                Err(idempotence::InitFailure::Retry(code)) => Err(InitFailure::Retry(LastError::Other(
                    format!("InitProducerId answered {code}: no producer id, so nothing was sent"),
                ))),
                Err(idempotence::InitFailure::Fatal(e)) => Err(InitFailure::Fatal(e)),
            }
        }
    }
}

/// Installs what [`decide`] found.
fn apply(st: &mut State, decided: Decided, max_in_flight: usize) {
    match decided {
        Decided::Idempotent(pe) => {
            let seq = st.seq.get_or_insert_with(Sequences::new);
            seq.set_producer(pe);
            st.per_partition = max_in_flight.min(idempotence::MAX_IN_FLIGHT);
            log::info!("producer: idempotent, producer id {} epoch {}", pe.id, pe.epoch);
        }
        Decided::Not(why) => {
            st.seq = None;
            st.per_partition = 1;
            log::info!("producer: not idempotent ({why}): at least once, one batch per partition in flight");
        }
    }
    st.idempotence_decided = true;
    st.need_producer_id = false;
}
