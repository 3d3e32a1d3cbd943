//! The producer's background thread: what Java's `Sender` and librdkafka's main thread do
//! beside the network. It keeps the metadata of the topics written to fresh (when a broker
//! thread found it stale, when a partition has no leader, and every `metadata.max.age.ms`),
//! fails batches past `delivery.timeout.ms`, and starts one [`broker`](super::broker) thread
//! per leader as soon as a batch waits for it. On stop it stops them and waits for them.

use super::broker::{self, Settings};
use super::state::Shared;
use crate::client::Client;
use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest the thread sleeps when nothing is due: only bounds how soon it notices a stop
/// that nobody announced (every change notifies it).
const IDLE: Duration = Duration::from_secs(1);

/// Runs until the producer stops.
pub(super) fn run(client: Client, shared: Arc<Shared>, settings: Arc<Settings>) {
    let mut brokers: HashMap<i32, JoinHandle<()>> = HashMap::new();
    // When a refresh found a partition still without a leader: the next waits a backoff.
    let mut leaderless_since: Option<Instant> = None;
    let config = &settings.config;
    let mut st = shared.lock();
    while !st.stop {
        let now = Instant::now();
        st.expire(config.delivery_timeout, now);
        let (leaders, leaderless) = st.acc.leaders_with_work();
        for id in leaders {
            if brokers.contains_key(&id) {
                continue;
            }
            let (client, shared, settings) = (client.clone(), Arc::clone(&shared), Arc::clone(&settings));
            let spawned = std::thread::Builder::new()
                .name(format!("kafka-producer-broker-{id}"))
                .spawn(move || broker::run(id, client, shared, settings));
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
            let meta = client.refresh_metadata(Some(&names));
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
        let wait = until.saturating_duration_since(now).max(Duration::from_millis(1));
        st = shared.wait(&shared.work, st, wait);
    }
    drop(st);
    shared.work.notify_all();
    for (_, h) in brokers {
        let _ = h.join();
    }
}
