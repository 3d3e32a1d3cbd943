//! A TCP proxy that makes a modern Kafka broker look like an older release.
//!
//! The client under test has to negotiate versions with brokers from 0.10 to 4.x, but CI can only
//! run a handful of real releases. The proxy sits between the client and one real broker and
//! answers ApiVersions itself with the table of the emulated release (from
//! the crate's own `data/broker-api-versions.tsv`); any request above that table is treated the way an old
//! broker treats it, by closing the connection. Everything else is relayed frame by frame, except
//! that Metadata and FindCoordinator responses have their broker addresses rewritten to further
//! proxy listeners, so a client that follows the metadata keeps talking to the same emulated
//! release on every broker.
//!
//! The real broker must still serve the old versions the emulated release advertises: Kafka 4.x
//! removed many of them (KIP-896), so releases older than 2.1 need a Kafka 3.9 upstream.
//!
//! Fault hooks ([`Proxy::drop_connections`], [`Proxy::set_delay`], [`Proxy::delay_api`], [`Proxy::blackhole`],
//! [`Proxy::fail_describe_groups`], [`Proxy::reset_next`], [`Proxy::kill_connections`]) let tests
//! break the path between client and broker without
//! touching the broker.

use super::broker;
use super::rng::Rng;
use super::wire::WireClient;
use kafka_group::unstable::protocol::messages::api_versions_response::{ApiVersion, FinalizedFeatureKey};
use kafka_group::unstable::protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, DescribeGroupsRequest, DescribeGroupsResponse, FetchRequest,
    FindCoordinatorRequest, FindCoordinatorResponse, MetadataRequest, MetadataResponse, ProduceRequest,
    RequestHeader, ResponseHeader,
};
use kafka_group::unstable::protocol::{ApiKey, Decoder, KafkaStr, Message, Request};
use kafka_group::KafkaCode;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Per-release API version tables, as published by Kafka brokers in ApiVersions: the crate's
/// own table, not a copy, so the releases the proxy emulates are exactly those the client
/// names (`compat_tests` checks the table itself against real brokers).
const TSV: &str = include_str!("../../../data/broker-api-versions.tsv");

/// Larger than any frame a test exchanges; a corrupt size prefix must not allocate gigabytes.
const MAX_FRAME: usize = 64 << 20;

/// A release's table: API key → (min version, max version).
pub type VersionTable = BTreeMap<i16, (i16, i16)>;

/// The TSV's data rows with their line numbers: no blank lines, comments or header.
fn rows() -> impl Iterator<Item = (usize, &'static str)> {
    TSV.lines()
        .enumerate()
        .map(|(n, line)| (n + 1, line.trim_end()))
        .filter(|(_, line)| !(line.is_empty() || line.starts_with('#') || line.starts_with("release\t")))
}

fn tables() -> &'static BTreeMap<String, VersionTable> {
    static TABLES: OnceLock<BTreeMap<String, VersionTable>> = OnceLock::new();
    TABLES.get_or_init(|| {
        let mut tables: BTreeMap<String, VersionTable> = BTreeMap::new();
        for (n, line) in rows() {
            let cols: Vec<&str> = line.split('\t').collect();
            let bad = || panic!("broker-api-versions.tsv line {n}: malformed row {line:?}");
            if cols.len() != 5 {
                bad();
            }
            let (key, min, max) = match (cols[1].parse(), cols[3].parse(), cols[4].parse()) {
                (Ok(k), Ok(lo), Ok(hi)) => (k, lo, hi),
                _ => bad(),
            };
            let previous = tables
                .entry(cols[0].to_string())
                .or_default()
                .insert(key, (min, max));
            assert!(
                previous.is_none(),
                "broker-api-versions.tsv line {n}: duplicate key {key}"
            );
        }
        tables
    })
}

/// Every release name in `data/broker-api-versions.tsv`, in file order.
pub fn releases() -> Vec<&'static str> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (_, line) in rows() {
        let name = line.split('\t').next().unwrap_or_default();
        if seen.insert(name) {
            out.push(name);
        }
    }
    out
}

/// The newest emulated release a broker of `version` serves: its own line if the table has it,
/// else the newest KRaft release.
pub fn release_for(version: &str) -> &'static str {
    let line: Vec<&str> = version.split('.').take(2).collect();
    let own = format!("kraft-{}", line.join("."));
    let releases = releases();
    releases
        .iter()
        .copied()
        .find(|r| *r == own)
        .or_else(|| releases.iter().copied().rev().find(|r| r.starts_with("kraft-")))
        .expect("the version table has KRaft releases")
}

/// The API version table of `release`; panics on a release the TSV does not have.
pub fn table(release: &str) -> VersionTable {
    match tables().get(release) {
        Some(t) => t.clone(),
        None => panic!("unknown release {release:?}; known: {:?}", releases()),
    }
}

/// A real broker to put behind a proxy for `release`: the shared broker if it serves every
/// version of `release` the client could send (APIs the client has, versions both have),
/// otherwise a Kafka 3.9 broker, which serves all of them because the codecs come from 3.9's
/// schemas. That one is started on first need and shared by every test that needs it; like the
/// shared broker it is stopped by the `scripts/kafka` watchdog when the test binary exits.
pub fn upstream_for(release: &str) -> SocketAddr {
    let shared = broker::shared().addrs()[0];
    let wanted = table(release);
    if serves(&broker_table(shared), &wanted) {
        return shared;
    }
    let legacy = broker::shared_legacy();
    let theirs = broker_table(legacy);
    assert!(
        serves(&theirs, &wanted),
        "Kafka 3.9 does not serve {release}: {theirs:?}"
    );
    legacy
}

/// Whether a broker with table `broker` answers every request a client with our codecs may send
/// to a broker advertising `release`.
fn serves(broker: &VersionTable, release: &VersionTable) -> bool {
    ApiKey::ALL.iter().all(|api| {
        let ours = kafka_group::unstable::versions::ours(*api, None);
        let Some(&(min, max)) = release.get(&api.key()) else {
            return true;
        };
        let (lo, hi) = (min.max(ours.min), max.min(ours.max));
        lo > hi
            || broker
                .get(&api.key())
                .is_some_and(|&(bmin, bmax)| bmin <= lo && hi <= bmax)
    })
}

/// What a real broker answers to ApiVersions v0, once per address.
fn broker_table(addr: SocketAddr) -> VersionTable {
    static SEEN: Mutex<BTreeMap<SocketAddr, VersionTable>> = Mutex::new(BTreeMap::new());
    if let Some(t) = lock(&SEEN).get(&addr) {
        return t.clone();
    }
    let resp = WireClient::connect(addr)
        .and_then(|mut c| c.call(&ApiVersionsRequest::default(), 0))
        .unwrap_or_else(|e| panic!("ApiVersions to broker {addr}: {e}"));
    assert_eq!(resp.error_code, 0, "ApiVersions v0 to broker {addr}");
    let t: VersionTable = resp
        .api_keys
        .iter()
        .map(|k| (k.api_key, (k.min_version, k.max_version)))
        .collect();
    lock(&SEEN).insert(addr, t.clone());
    t
}

/// The session part of one Fetch request, as [`Proxy::record_fetches`] saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchSeen {
    pub session_id: i32,
    pub session_epoch: i32,
    /// Partitions listed in `topics`.
    pub partitions: usize,
    /// Partitions listed in `forgotten_topics_data`.
    pub forgotten: usize,
    /// The request's size on the wire (header included, size prefix not).
    pub bytes: usize,
}

/// A running proxy. Dropping it stops every listener and closes every connection.
pub struct Proxy {
    inner: Arc<Inner>,
    addr: SocketAddr,
}

/// Numbers proxies so that their threads can be told apart (`px<id>-…`).
static NEXT_PROXY: AtomicU64 = AtomicU64::new(0);

impl Proxy {
    /// Starts a proxy on 127.0.0.1 (ephemeral port) in front of `upstream`, emulating `release`
    /// (a name from [`releases`]). Panics if the release is unknown or no port can be bound.
    pub fn start(upstream: SocketAddr, release: &str) -> Proxy {
        let inner = Arc::new(Inner {
            id: NEXT_PROXY.fetch_add(1, Ordering::Relaxed),
            release: release.to_string(),
            table: table(release),
            shutdown: AtomicBool::new(false),
            faults: Mutex::new(Faults::default()),
            faults_changed: Condvar::new(),
            conns: Mutex::new(HashMap::new()),
            conn_threads: Mutex::new(Vec::new()),
            listeners: Mutex::new(Listeners::default()),
            fillers: Mutex::new(Vec::new()),
            next_conn: AtomicU64::new(0),
            resets: AtomicU64::new(0),
            killer: Mutex::new(None),
            finalized: Mutex::new(None),
        });
        // Metadata names the bootstrap broker by the address the client already used; mapping it
        // to the first listener keeps one local port per broker.
        let key = (upstream.ip().to_string(), i32::from(upstream.port()));
        let addr = inner
            .listener_for(key, upstream.to_string())
            .unwrap_or_else(|e| panic!("proxy for {upstream} ({release}): cannot listen: {e}"));
        log::info!("proxy {addr} -> {upstream} emulating {release}");
        Proxy { inner, addr }
    }

    /// The address clients connect to (the listener for the upstream given to [`Proxy::start`]).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// [`Proxy::addr`] as a bootstrap string.
    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }

    /// The emulated release.
    pub fn release(&self) -> &str {
        &self.inner.release
    }

    /// The prefix of the names of this proxy's threads, so tests can check none outlive it.
    pub fn thread_name_prefix(&self) -> String {
        self.inner.thread_name("")
    }

    /// Every local listener address: the bootstrap one and one per broker seen in responses.
    pub fn listener_addrs(&self) -> Vec<SocketAddr> {
        self.inner
            .lock_listeners()
            .threads
            .iter()
            .map(|(a, _)| *a)
            .collect()
    }

    /// Closes every client connection open now (and its upstream connection); the clients see
    /// EOF. New connections are accepted as before.
    pub fn drop_connections(&self) {
        self.inner.drop_connections();
    }

    /// Holds every response for `delay` after it arrives from the broker (or, for ApiVersions,
    /// after the request arrived) before passing it on. Zero turns the delay off.
    pub fn set_delay(&self, delay: Duration) {
        self.inner.lock_faults().delay = delay;
        self.inner.faults_changed.notify_all();
    }

    /// Holds each response to a request of `api` for `delay` after it arrives from the broker
    /// (on top of any [`Proxy::set_delay`]); other APIs pass as before, except that responses
    /// on one connection keep their order, as a broker's do. Zero turns it off.
    pub fn delay_api(&self, api: ApiKey, delay: Duration) {
        self.inner.lock_faults().api_delay.insert(api.key(), delay);
        self.inner.faults_changed.notify_all();
    }

    /// Starts (or, `false`, stops and clears) recording every Fetch request's session id, epoch
    /// and partition counts ([`Proxy::fetches`]).
    pub fn record_fetches(&self, on: bool) {
        self.inner.lock_faults().fetch_log = on.then(Vec::new);
    }

    /// The Fetch requests recorded since [`Proxy::record_fetches`], in arrival order.
    pub fn fetches(&self) -> Vec<FetchSeen> {
        self.inner.lock_faults().fetch_log.clone().unwrap_or_default()
    }

    /// How many requests of `api` clients have sent through the proxy so far.
    pub fn requests_seen(&self, api: ApiKey) -> u64 {
        self.inner
            .lock_faults()
            .seen
            .get(&api.key())
            .copied()
            .unwrap_or(0)
    }

    /// While on, nothing passes in either direction but sockets stay open, like a network
    /// partition under TCP: bytes are held, not lost, and flow again once it is turned off.
    pub fn blackhole(&self, on: bool) {
        self.inner.lock_faults().blackhole = on;
        self.inner.faults_changed.notify_all();
    }

    /// While on, a new TCP connect to any of the proxy's listeners hangs, as one to a host that
    /// drops SYNs does, until the client's own connect timeout (connections open now carry on):
    /// the proxy stops accepting and fills each listener's accept queue with connections of its
    /// own, after which the kernel drops further SYNs. Off, the held-back connects complete.
    pub fn hold_connects(&self, on: bool) {
        self.inner.lock_faults().hold_connects = on;
        self.inner.faults_changed.notify_all();
        if !on {
            lock(&self.inner.fillers).clear();
            return;
        }
        for addr in self.listener_addrs() {
            // The first filler wakes the accept loop, which takes it and stops there; the
            // others queue until the kernel's queue is full and a connect times out.
            for _ in 0..100_000 {
                match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                    Ok(s) => lock(&self.inner.fillers).push(s),
                    Err(e) if e.kind() == io::ErrorKind::TimedOut => break,
                    Err(e) => panic!("proxy {addr}: filling the accept queue: {e}"),
                }
            }
        }
    }

    /// Resets the next `n` connections that carry a request of `api`, as the request arrives
    /// (the request is not passed on): a deterministic brief failure of exactly that step.
    pub fn reset_next(&self, api: ApiKey, n: usize) {
        self.inner.lock_faults().reset_on.insert(api.key(), n);
    }

    /// How many of the resets asked for with [`Proxy::reset_next`] are still to come.
    pub fn resets_pending(&self, api: ApiKey) -> usize {
        self.inner
            .lock_faults()
            .reset_on
            .get(&api.key())
            .copied()
            .unwrap_or(0)
    }

    /// Answers the next `times` DescribeGroups requests with `code` as every group's error (and
    /// no members) in place of the broker's answer, as a coordinator that is loading or denies
    /// access would.
    pub fn fail_describe_groups(&self, code: KafkaCode, times: usize) {
        let mut faults = self.inner.lock_faults();
        faults.describe_groups_error = code.code();
        faults.describe_groups_failures = times;
    }

    /// How many of the failures asked for with [`Proxy::fail_describe_groups`] are still to come.
    pub fn describe_groups_failures_left(&self) -> usize {
        self.inner.lock_faults().describe_groups_failures
    }

    /// Client connections currently open, over all listeners.
    pub fn connections(&self) -> usize {
        self.inner.lock_conns().len()
    }

    /// A listener for another broker of the same cluster, as [`Proxy::start`] made for the first
    /// (the one Metadata would create on first sight): so that a client can bootstrap through
    /// every node of a cluster and still find one when the first is down.
    pub fn listen_for(&self, upstream: SocketAddr) -> SocketAddr {
        let key = (upstream.ip().to_string(), i32::from(upstream.port()));
        self.inner
            .listener_for(key, upstream.to_string())
            .unwrap_or_else(|e| panic!("proxy for {upstream}: cannot listen: {e}"))
    }

    /// Chaos, as franz-go's chaos dialer does it: from now on every connection (open now or
    /// later) is closed on both sides after a random time in `lifetime` from when the killer
    /// first saw it, drawn from a stream seeded with `seed`. Each reset is counted
    /// ([`Proxy::resets`]) and logged at debug, and printed when `KAFKA_GROUP_CHAOS_VERBOSE` is
    /// set. Calling it again restarts the stream with the new seed; [`Proxy::stop_killing`] ends it.
    ///
    /// The close is a `shutdown` of both sockets, so the client sees EOF (or a reset if it was
    /// writing) rather than a guaranteed RST: std has no `SO_LINGER`, and no socket crate is a
    /// dependency. For the client the effect is the same: the connection and any request in
    /// flight on it are gone.
    pub fn kill_connections(&self, seed: u64, lifetime: RangeInclusive<Duration>) {
        self.stop_killing();
        let (lo, hi) = lifetime.into_inner();
        assert!(lo <= hi, "empty lifetime range {lo:?}..={hi:?}");
        let msg = format!(
            "proxy {}: connection killer on, seed {seed:#x}, lifetimes {lo:?}..={hi:?}",
            self.addr
        );
        log::info!("{msg}");
        if verbose() {
            eprintln!("{msg}");
        }
        // Connections seen under an earlier killer get a deadline from this one.
        for c in self.inner.lock_conns().values() {
            *lock(&c.kill_at) = None;
        }
        let inner = Arc::clone(&self.inner);
        let stop = Arc::new(AtomicBool::new(false));
        let rng = Rng::new(seed);
        let stop2 = Arc::clone(&stop);
        let handle = thread::Builder::new()
            .name(self.inner.thread_name("kill"))
            .spawn(move || inner.killer_loop(rng, lo, hi, &stop2))
            .unwrap_or_else(|e| panic!("proxy: cannot spawn the connection killer: {e}"));
        *lock(&self.inner.killer) = Some((stop, handle));
    }

    /// Ends [`Proxy::kill_connections`]; the connections open now stay open.
    pub fn stop_killing(&self) {
        self.inner.stop_killer();
    }

    /// Connections the killer has reset so far.
    pub fn resets(&self) -> u64 {
        self.inner.resets.load(Ordering::SeqCst)
    }

    /// From now on ApiVersions (v3+) also announces the finalized features (KIP-584) that
    /// `upstream` announces, as the real broker does. For a proxy emulating the upstream's own
    /// release, when what the client picks from them matters (`transaction.version` 2 is
    /// KIP-890's transaction protocol): without it, the client sees a broker that finalized
    /// nothing. Panics if the broker does not answer.
    pub fn relay_finalized_features(&self, upstream: SocketAddr) {
        let req = ApiVersionsRequest {
            client_software_name: "kafka-group-proxy".into(),
            client_software_version: "0.1.0".into(),
            ..Default::default()
        };
        let resp = WireClient::connect(upstream)
            .and_then(|mut c| c.call(&req, 3))
            .unwrap_or_else(|e| panic!("ApiVersions v3 to broker {upstream}: {e}"));
        assert_eq!(resp.error_code, 0, "ApiVersions v3 to broker {upstream}");
        *lock(&self.inner.finalized) = Some((resp.finalized_features_epoch, resp.finalized_features));
    }
}

/// Whether `KAFKA_GROUP_CHAOS_VERBOSE` asks for each reset on stderr.
fn verbose() -> bool {
    std::env::var_os("KAFKA_GROUP_CHAOS_VERBOSE").is_some_and(|v| !v.is_empty() && v != "0")
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let inner = &self.inner;
        inner.shutdown.store(true, Ordering::SeqCst);
        inner.stop_killer();
        // A listener held by `hold_connects` is waiting on the faults, not in accept.
        drop(inner.lock_faults());
        inner.faults_changed.notify_all();
        lock(&inner.fillers).clear();
        let listeners = std::mem::take(&mut inner.lock_listeners().threads);
        for (addr, handle) in listeners {
            // Wake the blocking accept; the listener sees `shutdown` and returns.
            match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                Ok(_) => {
                    let _ = handle.join();
                }
                // Gone already (it was held, and returned at the notification above).
                Err(_) if handle.is_finished() => {
                    let _ = handle.join();
                }
                Err(e) => log::warn!("proxy {addr}: cannot wake listener to stop it ({e}); leaving it"),
            }
        }
        inner.drop_connections();
        inner.faults_changed.notify_all();
        let threads = std::mem::take(&mut *lock(&inner.conn_threads));
        for t in threads {
            let _ = t.join();
        }
        log::info!("proxy {} ({}) stopped", self.addr, inner.release);
    }
}

#[derive(Default)]
struct Faults {
    delay: Duration,
    /// API key → extra hold for its responses ([`Proxy::delay_api`]).
    api_delay: HashMap<i16, Duration>,
    /// API key → requests seen.
    seen: HashMap<i16, u64>,
    blackhole: bool,
    /// Whether listeners stop accepting ([`Proxy::hold_connects`]).
    hold_connects: bool,
    /// API key → how many more connections to reset when they carry a request of it.
    reset_on: HashMap<i16, usize>,
    /// The error code of the next `describe_groups_failures` DescribeGroups answers.
    describe_groups_error: i16,
    describe_groups_failures: usize,
    /// Every Fetch request seen while [`Proxy::record_fetches`] is on.
    fetch_log: Option<Vec<FetchSeen>>,
}

#[derive(Default)]
struct Listeners {
    /// Upstream (host, port) as a broker advertises it → local listener.
    by_upstream: HashMap<(String, i32), SocketAddr>,
    threads: Vec<(SocketAddr, JoinHandle<()>)>,
}

struct Inner {
    id: u64,
    release: String,
    table: VersionTable,
    shutdown: AtomicBool,
    faults: Mutex<Faults>,
    /// Signalled when faults change or a connection closes, to release relays waiting on them.
    faults_changed: Condvar,
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    conn_threads: Mutex<Vec<JoinHandle<()>>>,
    listeners: Mutex<Listeners>,
    /// The connections that fill the accept queues while [`Proxy::hold_connects`] is on.
    fillers: Mutex<Vec<TcpStream>>,
    next_conn: AtomicU64,
    /// Connections reset by the killer.
    resets: AtomicU64,
    /// The killer thread and its stop flag, while [`Proxy::kill_connections`] is on.
    killer: Mutex<Option<(Arc<AtomicBool>, JoinHandle<()>)>>,
    /// The finalized features (epoch, features) ApiVersions v3+ announces, once
    /// [`Proxy::relay_finalized_features`] took them from the real broker; none before.
    finalized: Mutex<Option<(i64, Vec<FinalizedFeatureKey>)>>,
}

/// A poisoned lock only means another relay thread panicked; the data is still usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Inner {
    fn lock_faults(&self) -> MutexGuard<'_, Faults> {
        lock(&self.faults)
    }

    fn lock_conns(&self) -> MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        lock(&self.conns)
    }

    fn lock_listeners(&self) -> MutexGuard<'_, Listeners> {
        lock(&self.listeners)
    }

    /// Linux keeps 15 bytes of a thread name: `px<id>-<role>` fits for ids below 10^6.
    fn thread_name(&self, role: &str) -> String {
        format!("px{}-{role}", self.id)
    }

    fn delay(&self) -> Duration {
        self.lock_faults().delay
    }

    fn stop_killer(&self) {
        let Some((stop, handle)) = lock(&self.killer).take() else {
            return;
        };
        stop.store(true, Ordering::SeqCst);
        drop(self.lock_faults());
        self.faults_changed.notify_all();
        let _ = handle.join();
    }

    /// Gives every connection without one a deadline in `lo..=hi` from now, closes those whose
    /// deadline passed, and sleeps until the next deadline (or a change: a new or closed
    /// connection, a fault setting, `stop`). No two locks are held at once: `Conn::close` takes
    /// the faults lock itself.
    fn killer_loop(&self, mut rng: Rng, lo: Duration, hi: Duration, stop: &AtomicBool) {
        while !stop.load(Ordering::SeqCst) && !self.shutdown.load(Ordering::SeqCst) {
            let conns: Vec<Arc<Conn>> = self.lock_conns().values().cloned().collect();
            let now = Instant::now();
            let mut next: Option<Instant> = None;
            for c in &conns {
                let at = *lock(&c.kill_at).get_or_insert_with(|| now + rng.duration(lo, hi));
                if at > now {
                    next = Some(next.map_or(at, |n| n.min(at)));
                } else if !c.is_closed() {
                    let n = self.resets.fetch_add(1, Ordering::SeqCst) + 1;
                    let msg = format!(
                        "proxy: chaos reset #{n}: connection {} from {} after {:?}",
                        c.id,
                        c.peer,
                        c.opened.elapsed()
                    );
                    log::debug!("{msg}");
                    if verbose() {
                        eprintln!("{msg}");
                    }
                    c.close(self);
                }
            }
            let faults = self.lock_faults();
            if stop.load(Ordering::SeqCst) {
                return;
            }
            // New connections notify; the cap only bounds the wait if a notify is missed.
            let wait = next.map_or(Duration::from_millis(100), |n| {
                n.saturating_duration_since(Instant::now())
            });
            let _ = self
                .faults_changed
                .wait_timeout(faults, wait.min(Duration::from_millis(100)));
        }
    }

    /// Blocks while [`Proxy::hold_connects`] is on; false once the proxy shuts down.
    fn wait_while_holding_connects(&self) -> bool {
        let mut faults = self.lock_faults();
        while faults.hold_connects && !self.shutdown.load(Ordering::SeqCst) {
            faults = self
                .faults_changed
                .wait(faults)
                .unwrap_or_else(|p| p.into_inner());
        }
        !self.shutdown.load(Ordering::SeqCst)
    }

    fn drop_connections(&self) {
        let conns: Vec<Arc<Conn>> = self.lock_conns().drain().map(|(_, c)| c).collect();
        for c in &conns {
            log::info!("proxy: dropping connection {} from {}", c.id, c.peer);
            c.close(self);
        }
    }

    /// The local listener for an upstream broker, created on first use.
    fn listener_for(self: &Arc<Self>, key: (String, i32), upstream: String) -> io::Result<SocketAddr> {
        let mut listeners = self.lock_listeners();
        if let Some(addr) = listeners.by_upstream.get(&key) {
            return Ok(*addr);
        }
        // Checked under the lock that Drop takes to collect listener threads, so no listener is
        // created after Drop has collected them.
        if self.shutdown.load(Ordering::SeqCst) {
            return Err(io::Error::other("proxy is shutting down"));
        }
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let inner = Arc::clone(self);
        let handle = thread::Builder::new()
            .name(self.thread_name("listen"))
            .spawn(move || inner.accept_loop(listener, upstream))?;
        log::debug!("proxy {addr}: listening for broker {}:{}", key.0, key.1);
        listeners.by_upstream.insert(key, addr);
        listeners.threads.push((addr, handle));
        Ok(addr)
    }

    fn accept_loop(self: Arc<Self>, listener: TcpListener, upstream: String) {
        for stream in listener.incoming() {
            if self.shutdown.load(Ordering::SeqCst) {
                return;
            }
            let client = match stream {
                Ok(s) => s,
                Err(e) => {
                    log::warn!("proxy: accept failed: {e}");
                    thread::sleep(Duration::from_millis(10));
                    continue;
                }
            };
            if !self.wait_while_holding_connects() {
                return;
            }
            let inner = Arc::clone(&self);
            let upstream = upstream.clone();
            let spawned = thread::Builder::new()
                .name(self.thread_name("conn"))
                .spawn(move || inner.serve(client, &upstream));
            match spawned {
                Ok(h) => {
                    // Finished threads are joined, not detached: a detached thread can still be
                    // exiting when the proxy is dropped.
                    let mut threads = lock(&self.conn_threads);
                    let (done, running): (Vec<_>, Vec<_>) = std::mem::take(&mut *threads)
                        .into_iter()
                        .partition(|t| t.is_finished());
                    *threads = running;
                    threads.push(h);
                    drop(threads);
                    for t in done {
                        let _ = t.join();
                    }
                }
                Err(e) => log::warn!("proxy: cannot spawn connection thread: {e}"),
            }
        }
    }

    /// One client connection: this thread relays requests; one thread reads responses from the
    /// broker and one writes responses to the client in request order.
    fn serve(self: Arc<Self>, client: TcpStream, upstream_addr: &str) {
        let peer = client
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "?".into());
        let upstream = match connect(upstream_addr) {
            Ok(u) => u,
            Err(e) => {
                log::warn!("proxy: client {peer}: cannot reach broker {upstream_addr}: {e}; closing");
                return;
            }
        };
        let _ = client.set_nodelay(true);
        let _ = upstream.set_nodelay(true);
        let conn = Arc::new(Conn {
            id: self.next_conn.fetch_add(1, Ordering::Relaxed),
            peer,
            client,
            upstream,
            closed: AtomicBool::new(false),
            opened: Instant::now(),
            kill_at: Mutex::new(None),
        });
        self.lock_conns().insert(conn.id, Arc::clone(&conn));
        // Wakes the killer (if on) to give the new connection its deadline.
        drop(self.lock_faults());
        self.faults_changed.notify_all();
        // Drop sets `shutdown` before draining `conns`: a connection registered after the drain
        // must close itself.
        if self.shutdown.load(Ordering::SeqCst) {
            conn.close(&self);
        }
        log::debug!(
            "proxy: connection {} from {} to {upstream_addr}",
            conn.id,
            conn.peer
        );

        let (slot_tx, slot_rx) = mpsc::channel::<Slot>();
        let (resp_tx, resp_rx) = mpsc::channel::<(Vec<u8>, Instant)>();
        let reader = {
            let (inner, conn) = (Arc::clone(&self), Arc::clone(&conn));
            thread::Builder::new()
                .name(self.thread_name("broker"))
                .spawn(move || inner.read_responses(&conn, resp_tx))
        };
        let writer = {
            let (inner, conn) = (Arc::clone(&self), Arc::clone(&conn));
            thread::Builder::new()
                .name(self.thread_name("client"))
                .spawn(move || inner.write_responses(&conn, slot_rx, resp_rx))
        };
        if reader.is_ok() && writer.is_ok() {
            self.relay_requests(&conn, slot_tx);
        } else {
            log::warn!("proxy: connection {}: cannot spawn relay threads", conn.id);
        }
        conn.close(&self);
        for t in [reader, writer].into_iter().flatten() {
            let _ = t.join();
        }
        self.lock_conns().remove(&conn.id);
        log::debug!("proxy: connection {} from {} closed", conn.id, conn.peer);
    }

    /// Client → broker. Ends (and so closes the connection) on EOF, an error, or a request the
    /// emulated release would reject.
    fn relay_requests(&self, conn: &Conn, slots: mpsc::Sender<Slot>) {
        loop {
            // Taken over as `Bytes` without a copy, so that a Produce request's acks decode in place.
            let frame = match read_frame(&conn.client) {
                Ok(Some(f)) => bytes::Bytes::from(f),
                Ok(None) => return,
                Err(e) => {
                    if !conn.is_closed() {
                        log::debug!("proxy: connection {}: client read: {e}", conn.id);
                    }
                    return;
                }
            };
            let received = Instant::now();
            let Some((api_key, version, correlation_id)) = request_prefix(&frame) else {
                log::warn!(
                    "proxy: connection {}: request of {} bytes has no header",
                    conn.id,
                    frame.len()
                );
                return;
            };
            let name = ApiKey::from_key(api_key).map_or("?", |k| k.name());
            let reset = {
                let mut faults = self.lock_faults();
                *faults.seen.entry(api_key).or_default() += 1;
                if api_key == ApiKey::Fetch.key() {
                    if let Some(log) = faults.fetch_log.as_mut() {
                        log.extend(fetch_seen(&frame, version));
                    }
                }
                match faults.reset_on.get_mut(&api_key) {
                    Some(n) if *n > 0 => {
                        *n -= 1;
                        true
                    }
                    _ => false,
                }
            };
            if reset {
                log::info!("proxy: connection {}: resetting it on {name} as asked", conn.id);
                conn.close(self);
                return;
            }
            if api_key == ApiKey::ApiVersions.key() {
                let Some(frame) = self.answer_api_versions(version, correlation_id) else {
                    log::warn!(
                        "proxy: connection {}: cannot encode ApiVersions v{version}; closing",
                        conn.id
                    );
                    return;
                };
                let ready = received + self.delay();
                if slots.send(Slot::Local { frame, ready }).is_err() {
                    return;
                }
                continue;
            }
            match self.table.get(&api_key) {
                Some(&(min, max)) if (min..=max).contains(&version) => {}
                supported => {
                    let range = supported.map_or("none".to_string(), |(lo, hi)| format!("{lo}..={hi}"));
                    log::warn!(
                        "proxy: connection {}: {name} (key {api_key}) v{version} is not supported by {} \
                         (supports {range}); closing the connection as that broker would",
                        conn.id,
                        self.release
                    );
                    return;
                }
            }
            // Produce with acks=0 gets no response; waiting for one would stall every later one.
            let expects_response =
                api_key != ApiKey::Produce.key() || produce_acks(&frame, version) != Some(0);
            if expects_response {
                let slot = Slot::Forwarded {
                    api_key,
                    version,
                    correlation_id,
                };
                if slots.send(slot).is_err() {
                    return;
                }
            }
            if !self.wait_until(conn, None) {
                return;
            }
            if let Err(e) = write_frame(&conn.upstream, &frame) {
                if !conn.is_closed() {
                    log::debug!("proxy: connection {}: broker write: {e}", conn.id);
                }
                return;
            }
        }
    }

    /// Broker → channel, stamping each response with the time it may be passed on.
    fn read_responses(&self, conn: &Conn, out: mpsc::Sender<(Vec<u8>, Instant)>) {
        loop {
            match read_frame(&conn.upstream) {
                Ok(Some(frame)) => {
                    let ready = Instant::now() + self.delay();
                    if out.send((frame, ready)).is_err() {
                        break;
                    }
                }
                Ok(None) => {
                    if !conn.is_closed() {
                        log::info!("proxy: connection {}: broker closed the connection", conn.id);
                    }
                    break;
                }
                Err(e) => {
                    if !conn.is_closed() {
                        log::debug!("proxy: connection {}: broker read: {e}", conn.id);
                    }
                    break;
                }
            }
        }
        conn.close(self);
    }

    /// Responses → client, in request order: the broker's answers interleaved with the ones the
    /// proxy makes itself.
    fn write_responses(
        self: &Arc<Self>,
        conn: &Conn,
        slots: mpsc::Receiver<Slot>,
        responses: mpsc::Receiver<(Vec<u8>, Instant)>,
    ) {
        for slot in slots {
            let (frame, ready) = match slot {
                Slot::Local { frame, ready } => (frame, ready),
                Slot::Forwarded {
                    api_key,
                    version,
                    correlation_id,
                } => {
                    let Ok((frame, ready)) = responses.recv() else {
                        break;
                    };
                    let got = frame
                        .get(..4)
                        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                    if got != Some(correlation_id) {
                        log::warn!(
                            "proxy: connection {}: broker answered correlation id {got:?}, expected \
                             {correlation_id}; closing",
                            conn.id
                        );
                        break;
                    }
                    let ready = ready
                        + self
                            .lock_faults()
                            .api_delay
                            .get(&api_key)
                            .copied()
                            .unwrap_or_default();
                    match self.rewrite_response(api_key, version, frame) {
                        Ok(f) => (f, ready),
                        Err(e) => {
                            log::warn!(
                                "proxy: connection {}: cannot rewrite broker addresses in key {api_key} \
                                 v{version} response: {e}; closing",
                                conn.id
                            );
                            break;
                        }
                    }
                }
            };
            if !self.wait_until(conn, Some(ready)) {
                break;
            }
            if let Err(e) = write_frame(&conn.client, &frame) {
                if !conn.is_closed() {
                    log::debug!("proxy: connection {}: client write: {e}", conn.id);
                }
                break;
            }
        }
        conn.close(self);
    }

    /// Blocks while the blackhole is on or `deadline` is ahead; false once the connection closed.
    fn wait_until(&self, conn: &Conn, deadline: Option<Instant>) -> bool {
        let mut faults = self.lock_faults();
        loop {
            if conn.is_closed() {
                return false;
            }
            let now = Instant::now();
            if faults.blackhole {
                faults = self
                    .faults_changed
                    .wait(faults)
                    .unwrap_or_else(|p| p.into_inner());
            } else if let Some(d) = deadline.filter(|d| *d > now) {
                faults = self
                    .faults_changed
                    .wait_timeout(faults, d - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            } else {
                return true;
            }
        }
    }

    /// The ApiVersions response the emulated release gives, framed with response header v0.
    fn answer_api_versions(&self, version: i16, correlation_id: i32) -> Option<Vec<u8>> {
        let own = self
            .table
            .get(&ApiKey::ApiVersions.key())
            .copied()
            .unwrap_or((0, 0));
        let (body, body_version) = if (own.0..=own.1).contains(&version) {
            let api_keys = self
                .table
                .iter()
                .map(|(&api_key, &(min_version, max_version))| ApiVersion {
                    api_key,
                    min_version,
                    max_version,
                    ..Default::default()
                })
                .collect();
            let mut resp = ApiVersionsResponse {
                api_keys,
                ..Default::default()
            };
            // Tagged fields of v3+ only.
            if let Some((epoch, features)) = lock(&self.finalized).clone().filter(|_| version >= 3) {
                resp.finalized_features_epoch = epoch;
                resp.finalized_features = features;
            }
            (resp, version)
        } else {
            // KIP-511: a version the broker does not know gets a v0 answer carrying the error and
            // the ApiVersions range, so the client can retry at a version both sides have.
            let api_keys = vec![ApiVersion {
                api_key: ApiKey::ApiVersions.key(),
                min_version: own.0,
                max_version: own.1,
                ..Default::default()
            }];
            let resp = ApiVersionsResponse {
                error_code: KafkaCode::UnsupportedVersion.code(),
                api_keys,
                ..Default::default()
            };
            (resp, 0)
        };
        let mut out = Vec::new();
        ResponseHeader {
            correlation_id,
            ..Default::default()
        }
        .encode(0, &mut out)
        .ok()?;
        body.encode(body_version, &mut out).ok()?;
        Some(out)
    }

    /// Metadata and FindCoordinator responses with every broker address replaced by a proxy
    /// listener; every other response unchanged.
    fn rewrite_response(
        self: &Arc<Self>,
        api_key: i16,
        version: i16,
        frame: Vec<u8>,
    ) -> Result<Vec<u8>, String> {
        if api_key == ApiKey::Metadata.key() {
            let hv = MetadataRequest::response_header_version(version);
            let (header, mut body) = decode_response::<MetadataResponse>(frame, hv, version)?;
            for b in &mut body.brokers {
                (b.host, b.port) = self.local_for(&b.host, b.port)?;
            }
            encode_response(&header, hv, &body, version)
        } else if api_key == ApiKey::FindCoordinator.key() {
            let hv = FindCoordinatorRequest::response_header_version(version);
            let (header, mut body) = decode_response::<FindCoordinatorResponse>(frame, hv, version)?;
            // Errors come with host "" and port -1: nothing to point at.
            if version <= 3 && body.error_code == 0 {
                (body.host, body.port) = self.local_for(&body.host, body.port)?;
            }
            for c in body.coordinators.iter_mut().filter(|c| c.error_code == 0) {
                (c.host, c.port) = self.local_for(&c.host, c.port)?;
            }
            encode_response(&header, hv, &body, version)
        } else if api_key == ApiKey::DescribeGroups.key() {
            let code = {
                let mut faults = self.lock_faults();
                if faults.describe_groups_failures == 0 {
                    return Ok(frame);
                }
                faults.describe_groups_failures -= 1;
                faults.describe_groups_error
            };
            let hv = DescribeGroupsRequest::response_header_version(version);
            let (header, mut body) = decode_response::<DescribeGroupsResponse>(frame, hv, version)?;
            for g in &mut body.groups {
                g.error_code = code;
                g.group_state = KafkaStr::from_static("");
                g.members.clear();
            }
            encode_response(&header, hv, &body, version)
        } else {
            Ok(frame)
        }
    }

    fn local_for(self: &Arc<Self>, host: &str, port: i32) -> Result<(KafkaStr, i32), String> {
        let upstream = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let addr = self
            .listener_for((host.to_string(), port), upstream)
            .map_err(|e| format!("no listener for {host}:{port}: {e}"))?;
        Ok((addr.ip().to_string().into(), i32::from(addr.port())))
    }
}

fn decode_response<M: Message>(
    frame: Vec<u8>,
    header_version: i16,
    version: i16,
) -> Result<(ResponseHeader, M), String> {
    let frame_bytes = bytes::Bytes::from(frame);
    let mut d = Decoder::new(&frame_bytes);
    let header = ResponseHeader::decode(&mut d, header_version).map_err(|e| format!("header: {e}"))?;
    let body = M::decode(&mut d, version).map_err(|e| format!("{}: {e}", M::NAME))?;
    match d.remaining() {
        0 => Ok((header, body)),
        n => Err(format!("{} bytes after {}", n, M::NAME)),
    }
}

fn encode_response<M: Message>(
    header: &ResponseHeader,
    header_version: i16,
    body: &M,
    version: i16,
) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    header
        .encode(header_version, &mut out)
        .map_err(|e| e.to_string())?;
    body.encode(version, &mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

/// What the writer owes the client next, in request order.
enum Slot {
    /// The next response from the broker, for this request.
    Forwarded {
        api_key: i16,
        version: i16,
        correlation_id: i32,
    },
    /// A response the proxy made, to pass on at `ready`.
    Local { frame: Vec<u8>, ready: Instant },
}

struct Conn {
    id: u64,
    peer: String,
    client: TcpStream,
    upstream: TcpStream,
    closed: AtomicBool,
    opened: Instant,
    /// When the connection killer closes it; set by the killer on first sight.
    kill_at: Mutex<Option<Instant>>,
}

impl Conn {
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Shuts both sockets down, which ends every blocking read and write on them, and wakes relays
    /// waiting on faults. Idempotent.
    fn close(&self, inner: &Inner) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let _ = self.client.shutdown(Shutdown::Both);
        let _ = self.upstream.shutdown(Shutdown::Both);
        // Taking the lock orders this notify after any waiter's check of `closed`.
        drop(inner.lock_faults());
        inner.faults_changed.notify_all();
    }
}

fn connect(addr: &str) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{addr} resolves to nothing"));
    for a in addr.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, Duration::from_secs(5)) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Reads one size-prefixed frame; `None` on EOF before its first byte.
fn read_frame(mut r: &TcpStream) -> io::Result<Option<Vec<u8>>> {
    let mut size = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut size[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let len = i32::from_be_bytes(size);
    let len = usize::try_from(len)
        .ok()
        .filter(|l| *l <= MAX_FRAME)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("frame size {len}")))?;
    let mut frame = vec![0; len];
    r.read_exact(&mut frame)?;
    Ok(Some(frame))
}

fn write_frame(mut w: &TcpStream, frame: &[u8]) -> io::Result<()> {
    let len = u32::try_from(frame.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut buf = Vec::with_capacity(4 + frame.len());
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(frame);
    w.write_all(&buf)
}

/// The request header's fixed prefix: api key, api version, correlation id.
fn request_prefix(frame: &[u8]) -> Option<(i16, i16, i32)> {
    let b = frame.get(..8)?;
    Some((
        i16::from_be_bytes([b[0], b[1]]),
        i16::from_be_bytes([b[2], b[3]]),
        i32::from_be_bytes([b[4], b[5], b[6], b[7]]),
    ))
}

/// The session fields of a Fetch request frame (`None` if it does not decode).
fn fetch_seen(frame: &bytes::Bytes, version: i16) -> Option<FetchSeen> {
    let mut d = Decoder::new(frame);
    RequestHeader::decode(&mut d, FetchRequest::header_version(version)).ok()?;
    let req = FetchRequest::decode(&mut d, version).ok()?;
    Some(FetchSeen {
        session_id: req.session_id,
        session_epoch: req.session_epoch,
        partitions: req.topics.iter().map(|t| t.partitions.len()).sum(),
        forgotten: req
            .forgotten_topics_data
            .iter()
            .map(|t| t.partitions.as_slice().len())
            .sum(),
        bytes: frame.len(),
    })
}

/// A Produce request's `acks`, the only request field that decides whether a response comes.
fn produce_acks(frame: &bytes::Bytes, version: i16) -> Option<i16> {
    let mut d = Decoder::new(frame);
    RequestHeader::decode(&mut d, ProduceRequest::header_version(version)).ok()?;
    if version >= 3 {
        d.get_nullable_string(version >= 9).ok()?;
    }
    d.get_i16().ok()
}
