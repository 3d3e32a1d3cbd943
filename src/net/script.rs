//! A scripted broker in memory, for unit tests of code that talks to brokers (the client, a
//! group member and its heartbeat thread) without a broker or a socket.
//!
//! A [`Script`] is a [`Dialer`]: a client built with [`Script::client`] opens every
//! connection to it, whatever the address. Each request that arrives is recorded (decoded
//! with the generated codecs, so what the code under test encoded is what the test reads)
//! and answered by, in order: the next answer queued for its API with [`Script::push`], else
//! the handler set with [`Script::on`], else an I/O error saying that nothing was scripted
//! (which breaks the connection, as a broker hanging up would). The ApiVersions table every
//! connection negotiates is configurable ([`Script::versions`]); connection attempts can be
//! refused ([`Script::refuse`], or to one address: [`Script::refuse_to`]) and open connections
//! broken ([`Script::break_connections`]). Metadata answers carry the topics set with
//! [`Script::topic`].
//!
//! ```ignore
//! use crate::net::script::{Answer, Script};
//! use crate::protocol::messages::{HeartbeatRequest, HeartbeatResponse};
//!
//! let script = Script::new();
//! // Metadata: two brokers; FindCoordinator: broker 1 for every group.
//! script.cluster(&[(0, "b0", 9092), (1, "b1", 9092)]).coordinator(1);
//! // The first heartbeat is told a rebalance is on, every later one is fine.
//! script.push::<HeartbeatRequest>(Answer::Reply(HeartbeatResponse {
//!     error_code: KafkaCode::RebalanceInProgress.code(),
//!     ..Default::default()
//! }));
//! script.on::<HeartbeatRequest>(|_req, _version| Answer::Reply(HeartbeatResponse::default()));
//! let client = script.client(Client::builder().bootstrap_servers("b0:9092"))?;
//! // … drive `client.member(…)` …
//! let sent: Vec<HeartbeatRequest> = script.requests::<HeartbeatRequest>();
//! assert_eq!(sent[0].generation_id, 1);
//! ```
//!
//! A JoinGroup (or any request) answered with [`Answer::Silence`] gets no answer: a call waits
//! out its timeout and fails with a response timeout, a pending request's `receive` reports
//! nothing yet until its deadline, as on a real connection; [`Answer::Delayed`] answers after
//! a while (after the request's timeout: as `Silence`). Waits are real time, so keep the
//! timeouts of such tests short. A connection's interrupter (a member closing) ends a wait
//! at once, as shutting a socket down would.

use crate::client::{lock, Client, ClientBuilder};
use crate::error::{Error, Result, Timeout};
use crate::net::connection::{ConnectionConfig, Interrupter};
use crate::net::versions::BrokerVersions;
use crate::net::wire::{Dialer, Outgoing, RawPending, Wire};
use crate::protocol::messages::find_coordinator_response::Coordinator;
use crate::protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use crate::protocol::messages::{
    FindCoordinatorRequest, FindCoordinatorResponse, MetadataRequest, MetadataResponse,
};
use crate::protocol::{ApiKey, Message, Request, Segments, VersionRange};
use bytes::Bytes;
use std::collections::{HashMap, HashSet, VecDeque};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the scripted broker answers one request.
#[derive(Debug)]
pub(crate) enum Answer<T> {
    /// This response, encoded at the request's version.
    Reply(T),
    /// This response, after this long (a broker holding a JoinGroup, a slow heartbeat).
    Delayed(Duration, T),
    /// The connection fails with this I/O error (and is broken afterwards).
    Fail(io::ErrorKind),
    /// No answer ever comes (the request times out).
    Silence,
}

/// An answer encoded, ready for the wire.
#[derive(Debug, Clone)]
enum Raw {
    Reply(Bytes),
    /// Not to be read before this time.
    At(Instant, Bytes),
    Fail(io::ErrorKind, String),
    Silence,
}

type Handler = Box<dyn FnMut(&Seen) -> Raw + Send>;
/// A queued answer, encoded once the request's version is known.
type Queued = Box<dyn FnOnce(i16) -> Raw + Send>;

/// One request the scripted broker received.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    /// Which connection it came on (numbered from 1 in the order they were opened).
    pub(crate) connection: u64,
    /// The address that connection was opened to.
    pub(crate) addr: String,
    /// Its API.
    pub(crate) api: ApiKey,
    /// Its version.
    pub(crate) version: i16,
    /// Its body as encoded.
    pub(crate) body: Bytes,
}

impl Seen {
    /// The request decoded with the generated codec (panics if it is not an `R`, or does
    /// not decode: either is a bug the test should show).
    pub(crate) fn decode<R: Request>(&self) -> R {
        assert_eq!(self.api, R::API_KEY, "{self:?} is not a {}", R::NAME);
        R::from_bytes(self.body.clone(), self.version)
            .unwrap_or_else(|e| panic!("{} v{} does not decode: {e}", R::NAME, self.version))
    }
}

struct State {
    versions: BrokerVersions,
    /// Finalized feature levels the connections' ApiVersions announce.
    features: Vec<(String, i16)>,
    queued: HashMap<i16, VecDeque<Queued>>,
    handlers: HashMap<i16, Handler>,
    seen: Vec<Seen>,
    dials: Vec<String>,
    refusals: VecDeque<io::ErrorKind>,
    /// Connections opened before this epoch are broken.
    broken_before: u64,
    connections: u64,
    /// Topics [`Script::cluster`] answers with (name → partition count).
    topics: HashMap<String, i32>,
    /// Addresses every connection attempt to is refused.
    refused: HashSet<String>,
}

/// The id [`Script::cluster`]'s Metadata answers give topic `name`: its first 15 bytes, then 1
/// (never the nil id).
pub(crate) fn topic_id(name: &str) -> crate::protocol::Uuid {
    let mut id = [0u8; 16];
    for (to, from) in id.iter_mut().zip(name.bytes().take(15)) {
        *to = from;
    }
    id[15] = 1;
    crate::protocol::Uuid(id)
}

/// A scripted broker; see the [module](self). Cheap to clone: clones share the script.
#[derive(Clone)]
pub(crate) struct Script {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Script")
    }
}

impl Default for Script {
    fn default() -> Self {
        Script::new()
    }
}

impl Script {
    /// A broker that supports every version of every API this client has, and answers
    /// nothing until told to.
    pub(crate) fn new() -> Script {
        let versions = ApiKey::ALL
            .iter()
            .map(|api| (api.key(), api.versions()))
            .collect();
        Script {
            state: Arc::new(Mutex::new(State {
                versions,
                features: Vec::new(),
                queued: HashMap::new(),
                handlers: HashMap::new(),
                seen: Vec::new(),
                dials: Vec::new(),
                refusals: VecDeque::new(),
                broken_before: 0,
                connections: 0,
                topics: HashMap::new(),
                refused: HashSet::new(),
            })),
        }
    }

    /// A client whose connections all go to this script.
    pub(crate) fn client(&self, builder: ClientBuilder) -> Result<Client> {
        builder.build_with(Arc::new(self.clone()))
    }

    /// Sets the ApiVersions table of connections opened from now on.
    pub(crate) fn versions(&self, table: BrokerVersions) -> &Self {
        lock(&self.state).versions = table;
        self
    }

    /// Advertises `range` for `api` (`None`: not at all) on connections opened from now on.
    pub(crate) fn version_range(&self, api: ApiKey, range: Option<VersionRange>) -> &Self {
        let mut s = lock(&self.state);
        match range {
            Some(r) => s.versions.insert(api.key(), r),
            None => s.versions.remove(&api.key()),
        };
        self
    }

    /// Connections opened from now on announce feature `name` finalized at `level`.
    pub(crate) fn feature(&self, name: &str, level: i16) -> &Self {
        lock(&self.state).features.push((name.to_string(), level));
        self
    }

    /// Answers every `R` with `f(request, version)` (after any answers queued with
    /// [`push`](Self::push)).
    pub(crate) fn on<R: Request>(
        &self,
        mut f: impl FnMut(&R, i16) -> Answer<R::Response> + Send + 'static,
    ) -> &Self {
        let handler: Handler =
            Box::new(move |seen: &Seen| encode(f(&seen.decode::<R>(), seen.version), seen.version));
        lock(&self.state).handlers.insert(R::API_KEY.key(), handler);
        self
    }

    /// Queues one answer for the next `R` (queued answers go first, in order). The response
    /// is encoded at the version the request comes in.
    pub(crate) fn push<R: Request>(&self, answer: Answer<R::Response>) -> &Self
    where
        R::Response: Send + 'static,
    {
        let queued: Queued = Box::new(move |version| encode(answer, version));
        lock(&self.state)
            .queued
            .entry(R::API_KEY.key())
            .or_default()
            .push_back(queued);
        self
    }

    /// Queues `body` as the next answer to `api`, as it stands: for answers the generated
    /// codecs would not make (truncated, garbage).
    pub(crate) fn push_raw(&self, api: ApiKey, body: &[u8]) -> &Self {
        let body = Bytes::copy_from_slice(body);
        let queued: Queued = Box::new(move |_| Raw::Reply(body));
        lock(&self.state)
            .queued
            .entry(api.key())
            .or_default()
            .push_back(queued);
        self
    }

    /// Answers Metadata with these brokers (`(id, host, port)`), broker 0 or the first as
    /// controller, the topics set with [`topic`](Self::topic) that were asked for (every
    /// partition led by the first broker), and other topics asked for as unknown (left out).
    pub(crate) fn cluster(&self, brokers: &[(i32, &str, i32)]) -> &Self {
        let brokers: Vec<(i32, String, i32)> = brokers
            .iter()
            .map(|(id, h, p)| (*id, h.to_string(), *p))
            .collect();
        let script = self.clone();
        self.on::<MetadataRequest>(move |req, _| {
            let leader = brokers.first().map_or(-1, |b| b.0);
            let known = lock(&script.state).topics.clone();
            let asked: Vec<String> = match &req.topics {
                Some(ts) => ts
                    .iter()
                    .filter_map(|t| t.name.as_deref().map(str::to_string))
                    .collect(),
                None => known.keys().cloned().collect(),
            };
            Answer::Reply(MetadataResponse {
                brokers: brokers
                    .iter()
                    .map(|(id, host, port)| MetadataResponseBroker {
                        node_id: *id,
                        host: host.as_str().into(),
                        port: *port,
                        ..Default::default()
                    })
                    .collect(),
                controller_id: leader,
                topics: asked
                    .iter()
                    .filter_map(|name| Some((name, *known.get(name)?)))
                    .map(|(name, count)| MetadataResponseTopic {
                        name: Some(name.as_str().into()),
                        topic_id: topic_id(name),
                        partitions: (0..count)
                            .map(|p| MetadataResponsePartition {
                                partition_index: p,
                                leader_id: leader,
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
        })
    }

    /// Makes Metadata answers (of [`cluster`](Self::cluster)) show topic `name` with
    /// `partitions` partitions from now on (again: it grew).
    pub(crate) fn topic(&self, name: &str, partitions: i32) -> &Self {
        lock(&self.state).topics.insert(name.to_string(), partitions);
        self
    }

    /// Answers FindCoordinator with broker `id` at `b<id>:9092` for every key (the address
    /// [`cluster`](Self::cluster) should give it, for the member to find it in metadata).
    pub(crate) fn coordinator(&self, id: i32) -> &Self {
        self.on::<FindCoordinatorRequest>(move |req, version| {
            let (host, port) = (format!("b{id}"), 9092);
            Answer::Reply(if version >= 4 {
                FindCoordinatorResponse {
                    coordinators: req
                        .coordinator_keys
                        .iter()
                        .map(|k| Coordinator {
                            key: k.clone(),
                            node_id: id,
                            host: host.as_str().into(),
                            port,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }
            } else {
                FindCoordinatorResponse {
                    node_id: id,
                    host: host.as_str().into(),
                    port,
                    ..Default::default()
                }
            })
        })
    }

    /// The next `n` connection attempts fail with `kind` (e.g. `ConnectionRefused`).
    pub(crate) fn refuse(&self, n: usize, kind: io::ErrorKind) -> &Self {
        lock(&self.state).refusals.extend(std::iter::repeat(kind).take(n));
        self
    }

    /// Refuses every connection attempt to `addr` from now on (`false`: accepts them again),
    /// as a broker that is down would.
    pub(crate) fn refuse_to(&self, addr: &str, refused: bool) -> &Self {
        let mut s = lock(&self.state);
        match refused {
            true => s.refused.insert(addr.to_string()),
            false => s.refused.remove(addr),
        };
        self
    }

    /// Breaks every connection open now: its next call fails with a reset.
    pub(crate) fn break_connections(&self) -> &Self {
        let mut s = lock(&self.state);
        s.broken_before = s.connections + 1;
        self
    }

    /// Every request received so far, in order.
    pub(crate) fn seen(&self) -> Vec<Seen> {
        lock(&self.state).seen.clone()
    }

    /// The `R` requests received so far, decoded.
    pub(crate) fn requests<R: Request>(&self) -> Vec<R> {
        self.seen()
            .iter()
            .filter(|s| s.api == R::API_KEY)
            .map(Seen::decode::<R>)
            .collect()
    }

    /// The addresses of every connection attempt so far (refused ones included), in order.
    pub(crate) fn dials(&self) -> Vec<String> {
        lock(&self.state).dials.clone()
    }

    /// Records `req` and works out its answer.
    fn answer(&self, wire: &ScriptWire, req: &dyn Outgoing, version: i16) -> Raw {
        let mut buf = Segments::new();
        if let Err(e) = req.encode_into(version, &mut buf) {
            panic!("{} v{version} does not encode: {e}", req.api().name());
        }
        let seen = Seen {
            connection: wire.id,
            addr: wire.addr.clone(),
            api: req.api(),
            version,
            body: Bytes::from(buf.to_vec()),
        };
        let mut s = lock(&self.state);
        s.seen.push(seen.clone());
        if wire.id < s.broken_before {
            return Raw::Fail(
                io::ErrorKind::ConnectionReset,
                "scripted connection broken".into(),
            );
        }
        let key = req.api().key();
        if let Some(queued) = s.queued.get_mut(&key).and_then(VecDeque::pop_front) {
            return queued(version);
        }
        // The handler runs without the lock, so that it may use the script itself.
        let Some(mut handler) = s.handlers.remove(&key) else {
            return unscripted(&seen);
        };
        drop(s);
        let raw = handler(&seen);
        lock(&self.state).handlers.entry(key).or_insert(handler);
        raw
    }
}

fn encode<T: Message>(a: Answer<T>, version: i16) -> Raw {
    match a {
        Answer::Reply(m) => Raw::Reply(encode_message(&m, version)),
        Answer::Delayed(d, m) => Raw::At(crate::deadline::after(d), encode_message(&m, version)),
        Answer::Fail(kind) => Raw::Fail(kind, "scripted failure".into()),
        Answer::Silence => Raw::Silence,
    }
}

fn encode_message<T: Message>(m: &T, version: i16) -> Bytes {
    match m.to_bytes(version) {
        Ok(b) => Bytes::from(b),
        Err(e) => panic!("scripted {} v{version} does not encode: {e}", T::NAME),
    }
}

fn unscripted(seen: &Seen) -> Raw {
    Raw::Fail(
        io::ErrorKind::Other,
        format!("no scripted answer for {} v{}", seen.api.name(), seen.version),
    )
}

impl Dialer for Script {
    fn dial(
        &self,
        addr: &str,
        _config: &ConnectionConfig,
        _deadline: Instant,
        _watch: &dyn Fn(Option<Interrupter>),
    ) -> Result<Box<dyn Wire>> {
        let mut s = lock(&self.state);
        s.dials.push(addr.to_string());
        let refused = s
            .refused
            .contains(addr)
            .then_some(io::ErrorKind::ConnectionRefused);
        if let Some(kind) = refused.or_else(|| s.refusals.pop_front()) {
            return Err(Error::Io {
                addr: addr.to_string(),
                source: kind.into(),
            });
        }
        s.connections += 1;
        Ok(Box::new(ScriptWire {
            script: self.clone(),
            id: s.connections,
            addr: addr.to_string(),
            versions: s.versions.clone(),
            features: s.features.clone(),
            broken: Arc::new(AtomicBool::new(false)),
            next_correlation_id: 0,
            in_flight: HashMap::new(),
            reauthentications: None,
        }))
    }
}

/// One connection to the scripted broker.
#[derive(Debug)]
struct ScriptWire {
    script: Script,
    id: u64,
    addr: String,
    versions: BrokerVersions,
    features: Vec<(String, i16)>,
    /// Shared with its interrupters.
    broken: Arc<AtomicBool>,
    next_correlation_id: i32,
    in_flight: HashMap<i32, Raw>,
    reauthentications: Option<Arc<AtomicU64>>,
}

impl ScriptWire {
    fn fail(&mut self, kind: io::ErrorKind, message: String) -> Error {
        self.broken.store(true, Ordering::Release);
        Error::Io {
            addr: self.addr.clone(),
            source: io::Error::new(kind, message),
        }
    }

    fn timed_out(&mut self) -> Error {
        self.broken.store(true, Ordering::Release);
        Error::Timeout {
            which: Timeout::Response,
            operation: self.addr.clone(),
            last: None,
        }
    }

    /// Whether an interrupter or [`Script::break_connections`] broke this connection.
    fn interrupted(&self) -> bool {
        self.broken.load(Ordering::Acquire) || self.id < lock(&self.script.state).broken_before
    }

    /// Sleeps until `until` or a break; returns whether broken.
    fn wait(&self, until: Instant) -> bool {
        while Instant::now() < until {
            if self.interrupted() {
                return true;
            }
            std::thread::sleep(crate::deadline::left(until).min(Duration::from_millis(2)));
        }
        self.interrupted()
    }

    fn check(&self) -> Result<()> {
        match self.broken.load(Ordering::Acquire) {
            true => Err(Error::Closed),
            false => Ok(()),
        }
    }
}

impl Wire for ScriptWire {
    fn broker_versions(&self) -> &BrokerVersions {
        &self.versions
    }
    fn finalized_feature(&self, name: &str) -> Option<i16> {
        self.features.iter().find(|(n, _)| n == name).map(|(_, l)| *l)
    }
    fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Acquire)
    }
    fn mark_broken(&mut self) {
        self.broken.store(true, Ordering::Release);
    }
    fn call(&mut self, req: &dyn Outgoing, version: i16, timeout: Option<Duration>) -> Result<Bytes> {
        self.check()?;
        let timeout = timeout.unwrap_or(Duration::from_secs(30));
        let deadline = crate::deadline::after(timeout);
        match self.script.clone().answer(self, req, version) {
            Raw::Reply(b) => Ok(b),
            Raw::At(at, b) if at <= deadline => match self.wait(at) {
                true => Err(self.fail(
                    io::ErrorKind::ConnectionReset,
                    "scripted connection broken".into(),
                )),
                false => Ok(b),
            },
            Raw::Fail(kind, m) => Err(self.fail(kind, m)),
            Raw::At(..) | Raw::Silence => {
                if self.wait(deadline) {
                    return Err(self.fail(
                        io::ErrorKind::ConnectionReset,
                        "scripted connection broken".into(),
                    ));
                }
                Err(self.timed_out())
            }
        }
    }
    fn send_pending(
        &mut self,
        req: &dyn Outgoing,
        version: i16,
        timeout: Option<Duration>,
    ) -> Result<RawPending> {
        self.check()?;
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let raw = self.script.clone().answer(self, req, version);
        self.in_flight.insert(correlation_id, raw);
        Ok(RawPending {
            api: req.api(),
            correlation_id,
            version,
            header_version: req.response_header_version(version),
            deadline: crate::deadline::after(timeout.unwrap_or(Duration::from_secs(30))),
        })
    }
    fn receive(&mut self, pending: &RawPending, wait: Duration) -> Result<Option<Bytes>> {
        self.check()?;
        match self.in_flight.get(&pending.correlation_id).cloned() {
            Some(Raw::Reply(b)) => {
                self.in_flight.remove(&pending.correlation_id);
                Ok(Some(b))
            }
            Some(Raw::Fail(kind, m)) => Err(self.fail(kind, m)),
            Some(Raw::At(at, b)) if at <= pending.deadline => {
                let until = crate::deadline::after(wait).min(at);
                if self.wait(until) {
                    return Err(Error::Closed);
                }
                if Instant::now() < at {
                    return Ok(None);
                }
                self.in_flight.remove(&pending.correlation_id);
                Ok(Some(b))
            }
            Some(Raw::At(..) | Raw::Silence) => {
                let until = crate::deadline::after(wait).min(pending.deadline);
                if self.wait(until) {
                    return Err(Error::Closed);
                }
                if Instant::now() >= pending.deadline {
                    return Err(self.timed_out());
                }
                Ok(None)
            }
            None => Err(self.fail(io::ErrorKind::Other, "no such request in flight".into())),
        }
    }
    fn send_no_response(&mut self, req: &dyn Outgoing, version: i16) -> Result<()> {
        self.check()?;
        match self.script.clone().answer(self, req, version) {
            Raw::Fail(kind, m) => Err(self.fail(kind, m)),
            Raw::Reply(_) | Raw::At(..) | Raw::Silence => Ok(()),
        }
    }
    fn interrupter(&self) -> Option<Interrupter> {
        let broken = self.broken.clone();
        Some(Interrupter::new(move || broken.store(true, Ordering::Release)))
    }
    fn count_reauthentications_in(&mut self, sink: Arc<AtomicU64>) {
        self.reauthentications = Some(sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::{Assignment, GroupEvent, TopicPartition};
    use crate::net::link::{Backoff, Link, Purpose};
    use crate::protocol::messages::{
        HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
        LeaveGroupResponse, ProduceRequest, SyncGroupRequest, SyncGroupResponse,
    };
    use crate::KafkaCode;

    const MS: Duration = Duration::from_millis(1);

    fn link(script: &Script, first: Duration, max: Duration) -> Link {
        Link::new(
            Purpose::Metadata,
            "b0:9092",
            Arc::new(script.clone()),
            Arc::new(ConnectionConfig::default()),
            Backoff::new(first, max),
        )
    }

    fn heartbeat(link: &mut Link) -> Result<HeartbeatResponse> {
        link.request(Some(crate::deadline::after(Duration::from_secs(5))), |_| {
            HeartbeatRequest {
                group_id: "g".into(),
                generation_id: 7,
                member_id: "m".into(),
                ..Default::default()
            }
        })
    }

    #[test]
    fn a_metadata_refresh_goes_through_the_script() {
        let script = Script::new();
        script.cluster(&[(0, "b0", 9092), (1, "b1", 9093)]);
        let client = script
            .client(Client::builder().bootstrap_servers("boot:9092"))
            .unwrap();
        // The table the script advertises is the one versions are picked from.
        script.version_range(ApiKey::Metadata, Some(VersionRange::new(0, 4)));
        let meta = client.refresh_metadata(Some(&["t"])).unwrap();
        assert_eq!(meta.brokers.keys().copied().collect::<Vec<_>>(), [0, 1]);
        assert_eq!(meta.brokers[&1].addr(), "b1:9093");
        assert_eq!(script.dials(), ["boot:9092"]);
        let asked = script.requests::<MetadataRequest>();
        assert_eq!(asked.len(), 1);
        assert_eq!(script.seen()[0].version, 4);
        let topics: Vec<_> = asked[0].topics.iter().flatten().map(|t| t.name.clone()).collect();
        assert_eq!(topics, [Some("t".into())]);
        // Known brokers come first now: the next refresh goes to broker 0's own connection.
        client.refresh_metadata(None).unwrap();
        assert_eq!(script.dials(), ["boot:9092", "b0:9092"]);
    }

    #[test]
    fn the_reconnect_backoff_grows_and_resets() {
        let script = Script::new();
        script.on::<HeartbeatRequest>(|_, _| Answer::Reply(HeartbeatResponse::default()));
        let (first, max) = (20 * MS, 60 * MS);
        let mut l = link(&script, first, max);
        script.refuse(3, io::ErrorKind::ConnectionRefused);
        let mut backoffs = Vec::new();
        for _ in 0..3 {
            let started = Instant::now();
            let before = l.current_backoff();
            assert!(matches!(l.connect(None), Err(Error::Io { .. })));
            // Each attempt after a failure waited out the backoff the failure set.
            assert!(
                started.elapsed() >= before,
                "{:?} < {before:?}",
                started.elapsed()
            );
            backoffs.push(l.current_backoff());
        }
        assert_eq!(backoffs, [first, 2 * first, max]);
        assert_eq!(l.failures(), 3);
        heartbeat(&mut l).unwrap();
        assert_eq!((l.failures(), l.current_backoff()), (0, Duration::ZERO));
        // After a success the next failure starts from the first backoff again.
        l.disconnect();
        script.refuse(1, io::ErrorKind::ConnectionRefused);
        assert!(l.connect(None).is_err());
        assert_eq!(l.current_backoff(), first);
        assert_eq!(script.dials().len(), 5);
        // Another address is another broker: its backoff starts afresh.
        l.retarget("b9:9092");
        assert_eq!((l.addr(), l.failures()), ("b9:9092", 0));
        heartbeat(&mut l).unwrap();
        assert_eq!(script.dials().last().map(String::as_str), Some("b9:9092"));
    }

    /// What `Link::request_resumable` promises: a lookup slower than its caller's deadline is
    /// left in flight (the connection kept) and the same request asked again takes its answer,
    /// sent once; another request first takes the answer in for it; a different lookup is sent.
    #[test]
    fn a_resumable_request_is_sent_once_and_answered_to_the_same_request_asked_again() {
        use crate::protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
        let script = Script::new();
        let mut l = link(&script, MS, MS);
        let lookup = |replica_id| {
            move |_| ListOffsetsRequest {
                replica_id,
                ..Default::default()
            }
        };
        let answer = |marker| ListOffsetsResponse {
            throttle_time_ms: marker,
            ..Default::default()
        };
        let soon = || crate::deadline::after(20 * MS);
        let later = || crate::deadline::after(Duration::from_secs(5));
        let left_in_flight = |r: Result<ListOffsetsResponse>| {
            matches!(
                r,
                Err(Error::Timeout {
                    which: Timeout::Retries,
                    ..
                })
            )
        };
        script.push::<ListOffsetsRequest>(Answer::Delayed(150 * MS, answer(1)));
        assert!(left_in_flight(l.request_resumable(soon(), lookup(-1))));
        assert!(l.is_connected(), "the connection stays for the answer");
        assert!(left_in_flight(l.request_resumable(soon(), lookup(-1))));
        assert_eq!(
            l.request_resumable(later(), lookup(-1)).unwrap().throttle_time_ms,
            1
        );
        assert_eq!(script.requests::<ListOffsetsRequest>().len(), 1, "sent once");
        // Another request meanwhile takes the answer in, kept for the same lookup.
        script.push::<ListOffsetsRequest>(Answer::Delayed(100 * MS, answer(2)));
        assert!(left_in_flight(l.request_resumable(soon(), lookup(-1))));
        script.push::<HeartbeatRequest>(Answer::Reply(HeartbeatResponse::default()));
        heartbeat(&mut l).unwrap();
        assert_eq!(
            l.request_resumable(soon(), lookup(-1)).unwrap().throttle_time_ms,
            2
        );
        assert_eq!(script.requests::<ListOffsetsRequest>().len(), 2);
        // A different lookup is not given another's answer.
        script.push::<ListOffsetsRequest>(Answer::Delayed(60 * MS, answer(3)));
        script.push::<ListOffsetsRequest>(Answer::Reply(answer(4)));
        assert!(left_in_flight(l.request_resumable(soon(), lookup(-1))));
        assert_eq!(
            l.request_resumable(later(), lookup(5)).unwrap().throttle_time_ms,
            4
        );
        let sent: Vec<i32> = script
            .requests::<ListOffsetsRequest>()
            .iter()
            .map(|r| r.replica_id)
            .collect();
        assert_eq!(sent, [-1, -1, -1, 5]);
        // A request that cannot wait (a JoinGroup going out) reconnects rather than read
        // behind an answer still to come.
        script.push::<ListOffsetsRequest>(Answer::Silence);
        assert!(left_in_flight(l.request_resumable(soon(), lookup(-1))));
        let dials = script.dials().len();
        l.connect(None).unwrap();
        assert_eq!(script.dials().len(), dials + 1);
        let version = l.version(ApiKey::JoinGroup).unwrap();
        l.send_pending(&JoinGroupRequest::default(), version, None)
            .unwrap();
    }

    #[test]
    fn pending_requests_are_answered_late_or_never_as_scripted() {
        let script = Script::new();
        let mut l = link(&script, MS, MS);
        l.connect(None).unwrap();
        let join = |member: &str| JoinGroupRequest {
            group_id: "g".into(),
            member_id: member.into(),
            protocol_type: "consumer".into(),
            ..Default::default()
        };
        let reply = |generation_id| JoinGroupResponse {
            generation_id,
            ..Default::default()
        };
        script.push::<JoinGroupRequest>(Answer::Delayed(50 * MS, reply(1)));
        script.push::<JoinGroupRequest>(Answer::Silence);
        let version = l.version(ApiKey::JoinGroup).unwrap();
        let pending = l
            .send_pending(&join("a"), version, Some(Duration::from_secs(5)))
            .unwrap();
        assert!(l.receive(&pending, Duration::ZERO).unwrap().is_none());
        let until = crate::deadline::after(Duration::from_secs(5));
        let resp = loop {
            if let Some(r) = l.receive(&pending, 10 * MS).unwrap() {
                break r;
            }
            assert!(Instant::now() < until, "never answered");
        };
        assert_eq!(resp.generation_id, 1);
        // No answer: nothing yet until the request's own deadline, then a response timeout
        // that drops the connection.
        let pending = l.send_pending(&join("b"), version, Some(30 * MS)).unwrap();
        assert!(l.receive(&pending, Duration::ZERO).unwrap().is_none());
        let e = l.receive(&pending, Duration::from_secs(5)).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Timeout {
                    which: Timeout::Response,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(!l.is_connected());
        let members: Vec<String> = script
            .requests::<JoinGroupRequest>()
            .iter()
            .map(|r| r.member_id.to_string())
            .collect();
        assert_eq!(members, ["a", "b"]);
    }

    #[test]
    fn versions_are_picked_from_the_scripted_table() {
        let script = Script::new();
        script.versions(
            [(ApiKey::ApiVersions.key(), VersionRange::new(0, 3))]
                .into_iter()
                .collect(),
        );
        let mut l = link(&script, MS, MS);
        let e = heartbeat(&mut l).unwrap_err();
        assert!(
            matches!(
                e,
                Error::UnsupportedVersion {
                    api: ApiKey::Heartbeat,
                    broker: None,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(script.seen().is_empty());
        assert!(
            l.is_connected(),
            "a version mismatch is not the connection's fault"
        );
    }

    #[test]
    fn a_broken_connection_is_dropped_and_reopened() {
        let script = Script::new();
        script.on::<HeartbeatRequest>(|_, _| Answer::Reply(HeartbeatResponse::default()));
        let mut l = link(&script, MS, MS);
        heartbeat(&mut l).unwrap();
        heartbeat(&mut l).unwrap();
        script.break_connections();
        let e = heartbeat(&mut l).unwrap_err();
        assert!(e.breaks_connection(), "{e}");
        assert!(!l.is_connected());
        heartbeat(&mut l).unwrap();
        let connections: Vec<u64> = script.seen().iter().map(|s| s.connection).collect();
        assert_eq!(connections, [1, 1, 1, 2]);
        script.push::<HeartbeatRequest>(Answer::Fail(io::ErrorKind::UnexpectedEof));
        assert!(heartbeat(&mut l).is_err());
        assert!(!l.is_connected());
        assert_eq!(script.dials(), ["b0:9092", "b0:9092"]);
        // An answer that does not decode leaves the stream unaccounted for: dropped too.
        script.push_raw(ApiKey::Heartbeat, &[0]);
        let e = heartbeat(&mut l).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Decode {
                    api: ApiKey::Heartbeat,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(!l.is_connected());
        heartbeat(&mut l).unwrap();
        assert_eq!(script.dials().len(), 4);
    }

    #[test]
    fn the_last_io_error_is_kept_past_a_backoff_and_into_the_timeout() {
        let script = Script::new();
        // A deadline well past the bound below, and a backoff past the deadline.
        let margin = crate::deadline::LOAD_MARGIN;
        let mut l = link(&script, 6 * margin, 6 * margin);
        script.refuse(1, io::ErrorKind::ConnectionRefused);
        let by = Some(crate::deadline::after(3 * margin));
        let refused = l.connect(by).unwrap_err();
        assert!(
            matches!(&refused, Error::Io { source, .. } if source.kind() == io::ErrorKind::ConnectionRefused)
        );
        assert_eq!(l.last_error().map(ToString::to_string), Some(refused.to_string()));
        // The next attempt would start past the deadline: no dial, the cause kept.
        let started = Instant::now();
        let held = l.connect(by).unwrap_err();
        assert!(
            started.elapsed() < margin,
            "slept the backoff: {:?}",
            started.elapsed()
        );
        assert_eq!(script.dials().len(), 1);
        let Error::ReconnectBackoff { addr, last, .. } = &held else {
            panic!("{held:?}")
        };
        assert_eq!(addr, "b0:9092");
        assert_eq!(
            last.as_deref().map(ToString::to_string),
            Some(refused.to_string())
        );
        // A retry loop that gives up names the refusal, not the backoff.
        let timeout = Error::retries_timeout("sending", Some(held));
        let Error::Timeout { last: Some(last), .. } = &timeout else {
            panic!("{timeout:?}")
        };
        assert!(
            matches!(&**last, Error::Io { source, .. } if source.kind() == io::ErrorKind::ConnectionRefused)
        );
        assert!(timeout.to_string().contains("b0:9092"), "{timeout}");
    }

    #[test]
    fn the_client_backs_off_per_broker_and_says_why_it_gave_up() {
        let script = Script::new();
        script.cluster(&[(0, "b0", 9092)]);
        let client = script
            .client(
                Client::builder()
                    .bootstrap_servers("b0:9092")
                    .reconnect_backoff(Duration::from_secs(30))
                    .reconnect_backoff_max(Duration::from_secs(30)),
            )
            .unwrap();
        client.refresh_metadata(None).unwrap();
        let by = crate::deadline::after(Duration::from_secs(5));
        script.refuse(1, io::ErrorKind::ConnectionRefused);
        let hb = |_| HeartbeatRequest::default();
        assert!(matches!(client.send_to_by(0, by, hb), Err(Error::Io { .. })));
        let e = client.send_to_by(0, by, hb).unwrap_err();
        assert!(
            matches!(&e, Error::ReconnectBackoff { last: Some(_), .. }),
            "{e:?}"
        );
        assert!(e.is_unreachable());
        // Another purpose has a connection (and a backoff) of its own.
        script.on::<HeartbeatRequest>(|_, _| Answer::Reply(HeartbeatResponse::default()));
        client.send_for(Purpose::Coordinator, 0, Some(by), hb).unwrap();
        assert!(matches!(
            client.send_to_by(7, by, hb),
            Err(Error::UnknownBroker { id: 7 })
        ));
    }

    #[test]
    fn a_produce_in_flight_does_not_hold_up_a_coordinator_lookup_on_the_same_broker() {
        let script = Script::new();
        script.cluster(&[(0, "b0", 9092)]).coordinator(0);
        script.on::<ProduceRequest>(|_, _| Answer::Silence);
        let client = script
            .client(
                Client::builder()
                    .bootstrap_servers("b0:9092")
                    .request_timeout(Duration::from_secs(20)),
            )
            .unwrap();
        client.refresh_metadata(None).unwrap();
        let producer = {
            let client = client.clone();
            std::thread::spawn(move || {
                client.send_for(Purpose::Produce, 0, None, |_| ProduceRequest {
                    acks: -1,
                    timeout_ms: 20_000,
                    ..Default::default()
                })
            })
        };
        // Wait until the Produce is in flight on broker 0.
        let until = crate::deadline::after(Duration::from_secs(10));
        while script.requests::<ProduceRequest>().is_empty() {
            assert!(Instant::now() < until, "the Produce was never sent");
            std::thread::sleep(MS);
        }
        let coordinator = client.lookup_coordinator("g").unwrap();
        assert_eq!(coordinator.id, 0);
        // The lookup answered while the Produce still waits for its answer.
        assert!(!producer.is_finished());
        client.disconnect(0);
        assert!(!producer.is_finished(), "disconnect waited for the Produce");
        script.break_connections();
        let produced = producer.join().unwrap();
        assert!(produced.is_err());
    }

    #[test]
    fn a_member_joins_and_heartbeats_through_the_script() {
        let script = Script::new();
        script.cluster(&[(0, "b0", 9092), (1, "b1", 9092)]).coordinator(1);
        script.on::<JoinGroupRequest>(|req, _| {
            Answer::Reply(JoinGroupResponse {
                generation_id: 3,
                protocol_name: req.protocols.first().map(|p| p.name.clone()),
                leader: "someone-else".into(),
                member_id: "m-1".into(),
                ..Default::default()
            })
        });
        let assignment = Assignment {
            partitions: [("t".to_string(), vec![0, 2])].into_iter().collect(),
            user_data: None,
        };
        let bytes = assignment.encode();
        script.on::<SyncGroupRequest>(move |req, _| {
            Answer::Reply(SyncGroupResponse {
                protocol_type: Some("consumer".into()),
                protocol_name: req.protocol_name.clone(),
                assignment: bytes.clone(),
                ..Default::default()
            })
        });
        script.on::<HeartbeatRequest>(|_, _| Answer::Reply(HeartbeatResponse::default()));
        script.on::<LeaveGroupRequest>(|_, _| Answer::Reply(LeaveGroupResponse::default()));
        let client = script
            .client(Client::builder().bootstrap_servers("b0:9092"))
            .unwrap();
        let mut member = client
            .member("g")
            .subscribe(["t"])
            .heartbeat_interval(Duration::from_millis(10))
            .build()
            .unwrap();
        let events = member.join(Duration::from_secs(10)).unwrap();
        let assigned = events.iter().find_map(|e| match e {
            GroupEvent::Assigned { partitions, .. } => Some(partitions.clone()),
            _ => None,
        });
        assert_eq!(
            assigned,
            Some(vec![TopicPartition::new("t", 0), TopicPartition::new("t", 2)])
        );
        // The heartbeat thread heartbeats on a connection of its own to the coordinator.
        let until = crate::deadline::after(Duration::from_secs(10));
        while script.requests::<HeartbeatRequest>().len() < 2 {
            assert!(Instant::now() < until, "no heartbeats");
            member.poll(Duration::from_millis(5)).unwrap();
        }
        let hb = &script.requests::<HeartbeatRequest>()[0];
        assert_eq!((hb.generation_id, hb.member_id.as_str()), (3, "m-1"));
        let by_api = |api: ApiKey| -> Vec<(String, u64)> {
            script
                .seen()
                .iter()
                .filter(|s| s.api == api)
                .map(|s| (s.addr.clone(), s.connection))
                .collect()
        };
        let join = by_api(ApiKey::JoinGroup);
        let beats = by_api(ApiKey::Heartbeat);
        assert_eq!(join[0].0, "b1:9092");
        assert_eq!(beats[0].0, "b1:9092");
        assert_ne!(
            join[0].1, beats[0].1,
            "the heartbeat thread shares the member's connection"
        );
        // A heartbeat that finds a rebalance makes the member join again.
        script.push::<HeartbeatRequest>(Answer::Reply(HeartbeatResponse {
            error_code: KafkaCode::RebalanceInProgress.code(),
            ..Default::default()
        }));
        let until = crate::deadline::after(Duration::from_secs(10));
        while script.requests::<JoinGroupRequest>().len() < 2 {
            assert!(Instant::now() < until, "no rejoin");
            member.poll(Duration::from_millis(5)).unwrap();
        }
        assert_eq!(script.requests::<JoinGroupRequest>()[1].member_id.as_str(), "m-1");
        member.close().unwrap();
        let leave = script.requests::<LeaveGroupRequest>();
        assert_eq!(leave.len(), 1);
        assert_eq!(leave[0].members[0].member_id.as_str(), "m-1");
    }
}
