//! The [`Client`]: bootstrap, a metadata cache, connections per broker and purpose,
//! coordinator lookup.
//!
//! A `Client` is a cheap handle (`Arc` inside) that many threads can share. Its own
//! connections (each a `Link`) are one per broker for metadata and admin requests and one per
//! broker for coordinator lookups (and the few group requests a member sends outside its own
//! connection), each behind its own lock: requests to different brokers, or of the two
//! purposes to one broker, run in parallel, while requests of one purpose to the same broker
//! queue (one in flight per connection; a waiting caller gives up at its own deadline).
//! Everything long-lived owns its link instead, built by [`Client::link`]: a member's
//! coordinator connection, each heartbeat thread's, each fetch thread's and each producer
//! broker thread's. So a Produce waiting on a slow ISR never holds up a heartbeat or a
//! coordinator lookup on that broker. ARCHITECTURE.md lists every connection and its owner.
//!
//! Small modules, one job each: [`config`] (settings, `bootstrap.servers` and
//! `sasl.jaas.config` parsing, validation) and [`builder`] (one setter per property),
//! [`metadata`] (the cache's types, Metadata requests, and the frame read straight into the
//! cache's form, pure). This file keeps the connections and sends requests over them, and
//! looks up group coordinators.

mod builder;
mod config;
mod metadata;
mod shared_link;

pub use builder::ClientBuilder;
pub(crate) use config::jaas_credentials;
pub(crate) use metadata::{metadata_request, topic_denied};
pub use metadata::{Broker, Metadata, PartitionMetadata, TopicMetadata};

use crate::authorization::Scope;
use crate::error::{Error, Result, Timeout};
use crate::net::link::{Backoff, Link, Purpose};
use crate::net::wire::Dialer;
use crate::net::{BrokerVersions, Connection, ConnectionConfig};
use crate::protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse};
use crate::protocol::{ApiKey, Request};
use crate::retry::{self, retry, Step};
use crate::KafkaCode;
use config::{ClientConfig, Resolved};
use metadata::decode_metadata;
use shared_link::Shared;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Where a connection goes: a bootstrap address (before metadata names brokers) or a broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Target {
    Bootstrap(usize),
    Broker(i32),
}

/// The client's shared connections, one per purpose and target, each lent to one caller at a
/// time.
type Links = HashMap<(Purpose, Target), Arc<Shared<Link>>>;

#[derive(Debug)]
struct Inner {
    bootstrap: Vec<String>,
    conn: Arc<ConnectionConfig>,
    dialer: Arc<dyn Dialer>,
    retry_backoff: Duration,
    reconnect_backoff: Duration,
    reconnect_backoff_max: Duration,
    api_timeout: Duration,
    metadata: Mutex<Arc<Metadata>>,
    links: Mutex<Links>,
}

/// A thread-safe, cheaply cloned handle on a Kafka cluster.
///
/// ```no_run
/// use kafka_group::Client;
/// use std::time::Duration;
///
/// # fn main() -> kafka_group::Result<()> {
/// let client = Client::builder()
///     .bootstrap_servers("127.0.0.1:9092")
///     .client_id("billing")
///     .request_timeout(Duration::from_secs(10))
///     .build()?; // validated here; nothing is sent until the first request
/// let metadata = client.refresh_metadata(Some(&["invoices"]))?;
/// println!("{} brokers", metadata.brokers.len());
/// let coordinator = client.find_coordinator("billing")?;
/// println!("group coordinator: broker {} at {}", coordinator.id, coordinator.addr());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// Locks `m`, ignoring poison: a panic while holding one of these locks cannot leave the data
/// half-updated (each critical section is a single assignment, map operation or set of counter
/// updates), so the poison flag is noise.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Client {
    /// Starts building a client.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// The client `config` describes, with the settings it resolved to, every connection opened
    /// by `dialer`.
    fn new(config: &ClientConfig, resolved: Resolved, dialer: Arc<dyn Dialer>) -> Self {
        Client {
            inner: Arc::new(Inner {
                bootstrap: resolved.bootstrap,
                conn: Arc::new(resolved.conn),
                dialer,
                retry_backoff: config.retry_backoff,
                reconnect_backoff: config.reconnect_backoff,
                reconnect_backoff_max: config.reconnect_backoff_max,
                api_timeout: config.api_timeout,
                metadata: Mutex::new(Arc::new(Metadata::default())),
                links: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The last metadata fetched (empty before the first fetch).
    pub fn cached_metadata(&self) -> Arc<Metadata> {
        lock(&self.inner.metadata).clone()
    }

    /// `default.api.timeout.ms` as configured.
    pub fn api_timeout(&self) -> Duration {
        self.inner.api_timeout
    }

    /// `retry.backoff.ms` as configured.
    pub fn retry_backoff(&self) -> Duration {
        self.inner.retry_backoff
    }

    /// The connection settings every connection of this client uses.
    pub(crate) fn connection_config(&self) -> &ConnectionConfig {
        &self.inner.conn
    }

    /// A broker from the cached metadata (or a coordinator seen since).
    pub fn broker(&self, id: i32) -> Option<Broker> {
        self.cached_metadata().brokers.get(&id).cloned()
    }

    /// Opens a new connection of its own to `broker`, outside the client's links (for tools
    /// and tests that speak the protocol directly).
    pub(crate) fn connect(&self, broker: &Broker) -> Result<Connection> {
        Connection::connect(&broker.addr(), &self.inner.conn)
    }

    /// Sends a request to broker `id`, building it for the version negotiated with that broker.
    pub(crate) fn send_to<R: Request>(&self, id: i32, build: impl FnOnce(i16) -> R) -> Result<R::Response> {
        self.send_target(Purpose::Metadata, Target::Broker(id), None, build)
    }

    /// A link of its own to `addr` for `purpose`, with this client's connection settings and
    /// reconnect backoff (a member's and its heartbeat thread's coordinator connections, a
    /// consumer's fetch connections).
    pub(crate) fn link(&self, purpose: Purpose, addr: impl Into<String>) -> Link {
        Link::new(
            purpose,
            addr,
            self.inner.dialer.clone(),
            self.inner.conn.clone(),
            self.backoff(),
        )
    }

    fn backoff(&self) -> Backoff {
        Backoff::new(self.inner.reconnect_backoff, self.inner.reconnect_backoff_max)
    }

    /// [`send_to`](Self::send_to) over the client's connection to broker `id` for `purpose`,
    /// within `deadline` if one is given (see [`send_to_by`](Self::send_to_by)).
    #[cfg(test)]
    pub(crate) fn send_for<R: Request>(
        &self,
        purpose: Purpose,
        id: i32,
        deadline: Option<Instant>,
        build: impl FnOnce(i16) -> R,
    ) -> Result<R::Response> {
        self.send_target(purpose, Target::Broker(id), deadline, build)
    }

    /// [`send_to_no_response`](Self::send_to_no_response) over the connection for `purpose`.
    pub(crate) fn send_no_response_for<R: Request>(
        &self,
        purpose: Purpose,
        id: i32,
        build: impl FnOnce(i16) -> R,
    ) -> Result<()> {
        self.with_link(purpose, Target::Broker(id), None, |link| {
            link.send_no_response(None, build)
        })
    }

    /// [`broker_versions`](Self::broker_versions) as the connection for `purpose` has them.
    pub(crate) fn broker_versions_for(&self, purpose: Purpose, id: i32) -> Result<BrokerVersions> {
        self.with_link(purpose, Target::Broker(id), None, |link| {
            link.broker_versions(None)
        })
    }

    /// [`send_to`](Self::send_to) within an operation that must end by `deadline`: connecting
    /// and waiting for the answer take no longer than what is left (nor than
    /// `request.timeout.ms`), so a retrying call does not overshoot its limit.
    pub(crate) fn send_to_by<R: Request>(
        &self,
        id: i32,
        deadline: Instant,
        build: impl FnOnce(i16) -> R,
    ) -> Result<R::Response> {
        self.send_target(Purpose::Metadata, Target::Broker(id), Some(deadline), build)
    }

    /// [`send_to_by`](Self::send_to_by) for a lookup repeated until answered: left in flight at
    /// `deadline` and taken up again by the same request (see `Link::request_resumable`).
    pub(crate) fn send_to_resumable_by<R: Request>(
        &self,
        id: i32,
        deadline: Instant,
        build: impl FnOnce(i16) -> R,
    ) -> Result<R::Response> {
        self.with_link(Purpose::Metadata, Target::Broker(id), Some(deadline), |link| {
            link.request_resumable(deadline, build)
        })
    }

    /// Sends a request the broker does not answer (Produce with `acks=0`) to broker `id`,
    /// building it for the negotiated version; returns once it is written.
    pub(crate) fn send_to_no_response<R: Request>(
        &self,
        id: i32,
        build: impl FnOnce(i16) -> R,
    ) -> Result<()> {
        self.send_no_response_for(Purpose::Metadata, id, build)
    }

    /// Sends a request to any reachable broker (known brokers first, then bootstrap
    /// addresses), moving on to the next one when a broker cannot be reached.
    pub(crate) fn send_any<R: Request>(&self, build: impl Fn(i16) -> R) -> Result<R::Response> {
        self.send_any_within(Purpose::Metadata, None, build)
    }

    /// [`send_any`](Self::send_any) within an operation that must end by `deadline` (see
    /// [`send_to_by`](Self::send_to_by)).
    pub(crate) fn send_any_by<R: Request>(
        &self,
        deadline: Instant,
        build: impl Fn(i16) -> R,
    ) -> Result<R::Response> {
        self.send_any_within(Purpose::Metadata, Some(deadline), build)
    }

    fn send_any_within<R: Request>(
        &self,
        purpose: Purpose,
        deadline: Option<Instant>,
        build: impl Fn(i16) -> R,
    ) -> Result<R::Response> {
        self.first_answer(Error::is_unreachable, |t| {
            self.send_target(purpose, t, deadline, &build)
        })
    }

    /// The ApiVersions table of broker `id` (connecting if needed).
    pub(crate) fn broker_versions(&self, id: i32) -> Result<BrokerVersions> {
        self.broker_versions_for(Purpose::Metadata, id)
    }

    /// [`any_broker_versions`](Self::any_broker_versions), connecting no later than `deadline`.
    pub(crate) fn any_broker_versions_by(&self, deadline: Instant) -> Result<BrokerVersions> {
        self.first_answer(
            |_| true,
            |t| {
                self.with_link(Purpose::Metadata, t, Some(deadline), |link| {
                    link.broker_versions(Some(deadline))
                })
            },
        )
    }

    /// The ApiVersions table of whichever broker answers first.
    pub(crate) fn any_broker_versions(&self) -> Result<BrokerVersions> {
        self.first_answer(
            |_| true,
            |t| self.with_link(Purpose::Metadata, t, None, |link| link.broker_versions(None)),
        )
    }

    /// Runs `call` on each of [`targets`](Self::targets) in turn until one answers, moving on
    /// past the errors for which `move_on` holds; returns the last of those if none answers.
    fn first_answer<T>(
        &self,
        move_on: impl Fn(&Error) -> bool,
        mut call: impl FnMut(Target) -> Result<T>,
    ) -> Result<T> {
        let mut last = Error::NoBrokers;
        for t in self.targets() {
            match call(t) {
                Ok(r) => return Ok(r),
                Err(e) if move_on(&e) => {
                    log::debug!("{t:?} unusable ({e}); trying the next broker");
                    last = e;
                }
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// Known brokers first (their connections are likely open), then the bootstrap addresses.
    fn targets(&self) -> Vec<Target> {
        let mut targets: Vec<Target> = self
            .cached_metadata()
            .brokers
            .keys()
            .map(|id| Target::Broker(*id))
            .collect();
        targets.extend((0..self.inner.bootstrap.len()).map(Target::Bootstrap));
        targets
    }

    fn send_target<R: Request>(
        &self,
        purpose: Purpose,
        t: Target,
        deadline: Option<Instant>,
        build: impl FnOnce(i16) -> R,
    ) -> Result<R::Response> {
        self.with_link(purpose, t, deadline, |link| link.request(deadline, build))
    }

    fn addr_of(&self, t: Target) -> Result<String> {
        match t {
            Target::Bootstrap(i) => Ok(self.inner.bootstrap[i].clone()),
            Target::Broker(id) => self
                .broker(id)
                .map(|b| b.addr())
                .ok_or(Error::UnknownBroker { id }),
        }
    }

    /// Runs `f` on the client's link to `t` for `purpose`, holding that link (and only it)
    /// for the call. An unconnected link is first pointed at `t`'s current address; the link
    /// itself connects, backs off after failures and drops a broken connection.
    ///
    /// While another caller holds the link, this waits for it no later than `deadline` (none:
    /// `request.timeout.ms`, the bound of the request this caller would send), then fails with
    /// [`Timeout::Queued`]: a request of its own could not start in time, whatever the one in
    /// flight is waiting for.
    fn with_link<T>(
        &self,
        purpose: Purpose,
        t: Target,
        deadline: Option<Instant>,
        f: impl FnOnce(&mut Link) -> Result<T>,
    ) -> Result<T> {
        let shared = lock(&self.inner.links)
            .entry((purpose, t))
            .or_insert_with(|| Arc::new(Shared::new(self.link(purpose, String::new()))))
            .clone();
        let started = Instant::now();
        let request_timeout = self.inner.conn.request_timeout;
        let by = deadline.unwrap_or_else(|| crate::deadline::at(started, request_timeout));
        let Some(mut link) = shared.take_by(by) else {
            let bound = match deadline {
                Some(_) => "the call's timeout".to_string(),
                None => format!("request.timeout.ms ({request_timeout:?})"),
            };
            let addr = self.addr_of(t).unwrap_or_else(|_| format!("{t:?}"));
            return Err(Error::Timeout {
                which: Timeout::Queued,
                operation: format!(
                    "the {purpose:?} connection to {addr} stayed busy with another request for {:?}, until {bound} ran out",
                    started.elapsed()
                ),
                last: None,
            });
        };
        if !link.is_connected() {
            let addr = self.addr_of(t)?;
            link.retarget(&addr);
        }
        f(&mut link)
    }

    /// Fetches metadata for `topics` (all topics for `None`) and updates the cache. Brokers are
    /// always replaced; topics are merged so that callers interested in different topics do
    /// not evict each other's entries.
    ///
    /// While no broker can be connected to, retries every `retry.backoff.ms` until
    /// `default.api.timeout.ms`, then fails with [`Timeout::Retries`] naming it, the last
    /// connection error as its cause. An error once connected (credentials, TLS, a listener
    /// of another protocol) is returned at once.
    pub fn refresh_metadata(&self, topics: Option<&[&str]>) -> Result<Arc<Metadata>> {
        for t in topics.unwrap_or_default() {
            crate::names::check_topic("refresh_metadata", t)?;
        }
        let bound = self.inner.api_timeout;
        let deadline = crate::deadline::after(bound);
        retry(
            deadline,
            retry::Backoff::fixed(self.inner.retry_backoff),
            || format!("refreshing metadata within default.api.timeout.ms ({bound:?})"),
            || match self.refresh_metadata_within(topics, Some(deadline)) {
                Err(e) if e.is_not_connected() => Ok(Step::Retry(e)),
                other => other.map(Step::Done),
            },
        )
    }

    /// One [`refresh_metadata`](Self::refresh_metadata) attempt, each request bounded by
    /// `request.timeout.ms` alone (for a caller with a retry loop of its own, such as the
    /// producer's sender thread, which must get back to its batches).
    pub(crate) fn refresh_metadata_once(&self, topics: Option<&[&str]>) -> Result<Arc<Metadata>> {
        self.refresh_metadata_within(topics, None)
    }

    /// [`refresh_metadata`](Self::refresh_metadata) within an operation that must end by
    /// `deadline` (see [`send_to_by`](Self::send_to_by)).
    pub(crate) fn refresh_metadata_by(
        &self,
        topics: Option<&[&str]>,
        deadline: Instant,
    ) -> Result<Arc<Metadata>> {
        self.refresh_metadata_within(topics, Some(deadline))
    }

    fn refresh_metadata_within(
        &self,
        topics: Option<&[&str]>,
        deadline: Option<Instant>,
    ) -> Result<Arc<Metadata>> {
        // Decoded straight into the cache's form: the frame is gone by the time it returns.
        // Topics that have not changed are the cached ones, shared.
        let cached = self.cached_metadata();
        let mut fresh = self.first_answer(Error::is_unreachable, |t| {
            self.with_link(Purpose::Metadata, t, deadline, |link| {
                link.request_with(
                    deadline,
                    |version| metadata_request(topics, version),
                    |d, version| decode_metadata(d, version, &cached),
                )
            })
        })?;
        drop(cached);
        // The broker list is always whole in a Metadata answer, so it replaces the cached one:
        // dead brokers drop out. A coordinator learnt from FindCoordinator is re-added by the
        // next lookup if it is missing. Only the topics the answer did not cover are kept, and
        // shared rather than copied.
        let mut cache = lock(&self.inner.metadata);
        if topics.is_some() {
            for (name, t) in &cache.topics {
                if !fresh.topics.contains_key(name) {
                    fresh.topics.insert(name.clone(), t.clone());
                }
            }
        }
        *cache = Arc::new(fresh);
        Ok(cache.clone())
    }

    /// Forgets a broker's connections (e.g. after `NOT_COORDINATOR`), so the next request
    /// reconnects. A connection with a request in flight is left to it (and dropped by its
    /// link if it breaks): waiting for a slow Produce here would stall the caller, the very
    /// thing connections by purpose are there to avoid.
    pub fn disconnect(&self, id: i32) {
        let links: Vec<_> = Purpose::ALL
            .iter()
            .filter_map(|p| lock(&self.inner.links).get(&(*p, Target::Broker(id))).cloned())
            .collect();
        for link in links {
            if let Some(mut link) = link.try_take() {
                link.disconnect();
            }
        }
    }

    /// Finds the coordinator of consumer group `group`, retrying while the broker says the
    /// coordinator is not available or still loading, until `default.api.timeout.ms`.
    pub fn find_coordinator(&self, group: &str) -> Result<Broker> {
        self.find_coordinator_by(group, crate::deadline::after(self.inner.api_timeout))
    }

    /// [`find_coordinator`](Self::find_coordinator), retrying until `deadline` instead, each
    /// request bounded by what is left.
    pub(crate) fn find_coordinator_by(&self, group: &str, deadline: Instant) -> Result<Broker> {
        self.retry_coordinator_errors(deadline, &format!("FindCoordinator({group})"), || {
            self.lookup_coordinator_within(group, Some(deadline))
        })
    }

    /// Runs `call` until it succeeds or fails for a reason other than the coordinator moving,
    /// loading or being unreachable, pausing `retry.backoff.ms` between tries; past `deadline`
    /// the last error becomes the retries timeout naming `what`.
    pub(crate) fn retry_coordinator_errors<T>(
        &self,
        deadline: Instant,
        what: &str,
        mut call: impl FnMut() -> Result<T>,
    ) -> Result<T> {
        let backoff = retry::Backoff::fixed(self.inner.retry_backoff);
        retry(
            deadline,
            backoff,
            || what.to_string(),
            || match call() {
                Err(e) if e.is_coordinator_transient() => {
                    log::debug!("{what}: {e}; retrying");
                    Ok(Step::Retry(e))
                }
                other => other.map(Step::Done),
            },
        )
    }

    /// One FindCoordinator attempt, without retries (for callers with their own loop, such as
    /// a heartbeat thread that must keep listening to its commands).
    pub fn lookup_coordinator(&self, group: &str) -> Result<Broker> {
        self.lookup_coordinator_within(group, None)
    }

    /// [`lookup_coordinator`](Self::lookup_coordinator), connecting and waiting no longer than
    /// until `deadline`.
    pub(crate) fn lookup_coordinator_by(&self, group: &str, deadline: Instant) -> Result<Broker> {
        self.lookup_coordinator_within(group, Some(deadline))
    }

    fn lookup_coordinator_within(&self, group: &str, deadline: Option<Instant>) -> Result<Broker> {
        let resp: FindCoordinatorResponse =
            self.send_any_within(Purpose::Coordinator, deadline, |version| {
                find_coordinator_request(group, version)
            })?;
        let b = coordinator_from(group, resp)?;
        self.remember_broker(&b);
        Ok(b)
    }

    /// The transaction coordinator of `transactional_id` (FindCoordinator with key type 1,
    /// v1+), one attempt bounded by `deadline`.
    pub(crate) fn lookup_transaction_coordinator_by(
        &self,
        transactional_id: &str,
        deadline: Instant,
    ) -> Result<Broker> {
        let resp: FindCoordinatorResponse =
            self.send_any_within(Purpose::Coordinator, Some(deadline), |version| {
                transaction_coordinator_request(transactional_id, version)
            })?;
        let b = coordinator_of(transactional_id, Scope::transaction(transactional_id, None), resp)?;
        self.remember_broker(&b);
        Ok(b)
    }

    /// Sends a request to broker `id` over the client's coordinator connection to it (not the
    /// metadata one, which lookups share), within `deadline`.
    pub(crate) fn send_to_coordinator_by<R: Request>(
        &self,
        id: i32,
        deadline: Instant,
        build: impl FnOnce(i16) -> R,
    ) -> Result<R::Response> {
        self.send_target(Purpose::Coordinator, Target::Broker(id), Some(deadline), build)
    }

    /// [`send_to_coordinator_by`](Self::send_to_coordinator_by) at no higher version than
    /// `max` (see `Link::request_capped`).
    pub(crate) fn send_to_coordinator_capped_by<R: Request>(
        &self,
        id: i32,
        deadline: Instant,
        max: i16,
        build: impl FnOnce(i16) -> R,
    ) -> Result<R::Response> {
        self.with_link(Purpose::Coordinator, Target::Broker(id), Some(deadline), |link| {
            link.request_capped(Some(deadline), max, build)
        })
    }

    /// The finalized level of feature `name` as broker `id` announces it (ApiVersions v3+).
    pub(crate) fn finalized_feature_of(&self, id: i32, name: &str, deadline: Instant) -> Result<Option<i16>> {
        self.with_link(Purpose::Coordinator, Target::Broker(id), Some(deadline), |link| {
            link.finalized_feature(name, Some(deadline))
        })
    }

    fn remember_broker(&self, b: &Broker) {
        let mut cache = lock(&self.inner.metadata);
        if cache.brokers.get(&b.id) != Some(b) {
            // Topics are `Arc`s: this copies the broker list and the topic names, not the
            // partitions.
            let mut m = (**cache).clone();
            m.brokers.insert(b.id, b.clone());
            *cache = Arc::new(m);
        }
    }
}

/// FindCoordinator for a group: v4+ batches keys (KIP-699), below one key per request.
pub(crate) fn find_coordinator_request(group: &str, version: i16) -> FindCoordinatorRequest {
    if version >= 4 {
        FindCoordinatorRequest {
            coordinator_keys: vec![group.into()],
            ..Default::default()
        }
    } else {
        FindCoordinatorRequest {
            key: group.into(),
            ..Default::default()
        }
    }
}

/// FindCoordinator for a transactional id (key type 1, which needs v1+).
pub(crate) fn transaction_coordinator_request(
    transactional_id: &str,
    version: i16,
) -> FindCoordinatorRequest {
    FindCoordinatorRequest {
        key_type: 1,
        ..find_coordinator_request(transactional_id, version)
    }
}

fn coordinator_from(group: &str, r: FindCoordinatorResponse) -> Result<Broker> {
    coordinator_of(group, Scope::group(group), r)
}

fn coordinator_of(key: &str, scope: Scope<'_>, r: FindCoordinatorResponse) -> Result<Broker> {
    let (code, message, id, host, port) = match r.coordinators.into_iter().find(|c| c.key == key) {
        Some(c) => (c.error_code, c.error_message, c.node_id, c.host, c.port),
        None => (r.error_code, r.error_message, r.node_id, r.host, r.port),
    };
    let code = KafkaCode::from_code(code);
    if code.is_error() {
        let message = message.map(String::from).filter(|m| !m.is_empty());
        return Err(Error::from_code(ApiKey::FindCoordinator, code, scope, message));
    }
    let port = u16::try_from(port)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| Error::InvalidBrokerAddress {
            id,
            host: host.to_string(),
            port,
        })?;
    Ok(Broker {
        id,
        host: host.into(),
        port,
        rack: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_is_send_sync_and_clone() {
        fn check<T: Send + Sync + Clone>() {}
        check::<Client>();
    }

    #[test]
    fn coordinators_with_ports_outside_tcp_are_refused() {
        let coordinator = |port: i32| {
            coordinator_from(
                "g",
                FindCoordinatorResponse {
                    node_id: 1,
                    host: "h".into(),
                    port,
                    ..Default::default()
                },
            )
        };
        assert_eq!(coordinator(9092).unwrap().port, 9092);
        for port in [0, -1, 65536 + 9092] {
            assert!(
                matches!(coordinator(port), Err(Error::InvalidBrokerAddress { .. })),
                "{port}"
            );
        }
    }

    #[test]
    fn a_denied_group_is_an_authorization_error_naming_it() {
        use crate::protocol::messages::find_coordinator_response::Coordinator;
        use crate::Resource;
        // FindCoordinator v4+ answers per key; before, at the top level.
        let denied = KafkaCode::GroupAuthorizationFailed.code();
        let batched = FindCoordinatorResponse {
            coordinators: vec![Coordinator {
                key: "g".into(),
                node_id: -1,
                port: -1,
                error_code: denied,
                error_message: Some("".into()),
                ..Default::default()
            }],
            ..Default::default()
        };
        let old = FindCoordinatorResponse {
            error_code: denied,
            error_message: Some("Group authorization failed.".into()),
            ..Default::default()
        };
        for (r, message) in [(batched, None), (old, Some("Group authorization failed."))] {
            match coordinator_from("g", r) {
                Err(Error::Authorization {
                    api: ApiKey::FindCoordinator,
                    code: KafkaCode::GroupAuthorizationFailed,
                    resource: Resource::Group(g),
                    message: m,
                }) => assert_eq!((g.as_str(), m.as_deref()), ("g", message)),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn transaction_coordinator_lookups_ask_for_the_transaction_key_type_from_v1_only() {
        use crate::protocol::Message;
        for v in 1..=ApiKey::FindCoordinator.versions().max {
            let r = transaction_coordinator_request("tx", v);
            assert_eq!(r.key_type, 1);
            r.to_bytes(v).unwrap();
        }
        // v0 has no key type: it would ask for a group's coordinator, so it must not encode.
        assert!(transaction_coordinator_request("tx", 0).to_bytes(0).is_err());
    }

    #[test]
    fn find_coordinator_requests_encode_at_every_version() {
        // Every version encodes: no field is set that the version lacks.
        for v in 0..=ApiKey::Metadata.versions().max {
            use crate::protocol::Message;
            find_coordinator_request("g", v.min(ApiKey::FindCoordinator.versions().max))
                .to_bytes(v.min(ApiKey::FindCoordinator.versions().max))
                .unwrap();
        }
    }
}
