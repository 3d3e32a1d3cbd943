//! One TCP connection to one broker: framing, correlation ids, timeouts, and the ApiVersions
//! handshake that decides which version of each API this connection speaks.
//!
//! One request is in flight at a time; callers that need concurrency hold several
//! connections. Any I/O, timeout or protocol error leaves the connection unusable (the next
//! call returns [`Error::Closed`]) because the byte stream can no longer be trusted to be at a
//! frame boundary.

use crate::error::{Error, ProtocolViolation, Result, Timeout};
use crate::net::sasl::exchange::{self as sasl, Framing};
use crate::net::sasl::Mechanism;
use crate::net::stream::Stream;
use crate::net::tls::Tls;
use crate::net::versions::{self, BrokerVersions, Capability, Handshake};
use crate::net::wire::{Outgoing, RawPending};
use crate::protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader};
use crate::protocol::{
    ApiKey, DecodeError, Decoder, KafkaStr, Message, Request, Segments, VersionRange, WireWrite,
};
use crate::KafkaCode;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::io::Write;
use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Settings every connection of a client shares.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// `client.id`, sent in every request header.
    pub client_id: Option<String>,
    /// `socket.connection.setup.timeout.ms`: per address tried.
    pub connect_timeout: Duration,
    /// `request.timeout.ms`: how long to wait for each response.
    pub request_timeout: Duration,
    /// Largest response frame accepted, in bytes.
    pub max_response_size: usize,
    /// Highest version to use per API key, for pinning.
    pub version_caps: BTreeMap<i16, i16>,
    /// The TLS configuration when `security.protocol` is SSL or SASL_SSL (set by
    /// `ClientBuilder::build` from the `ssl.*` settings).
    pub tls: Option<Tls>,
    /// The SASL mechanism when `security.protocol` is SASL_PLAINTEXT or SASL_SSL.
    pub sasl: Option<Mechanism>,
}

impl ConnectionConfig {
    /// The configured highest version for `api` (`ClientBuilder::max_api_version`), if any.
    pub fn version_cap(&self, api: ApiKey) -> Option<i16> {
        self.version_caps.get(&api.key()).copied()
    }

    /// The version to use for `api` with a broker advertising `broker`: the highest both
    /// support, below the configured cap — what a connection to that broker sends.
    pub fn pick_version(&self, api: ApiKey, broker: &BrokerVersions) -> Result<i16> {
        versions::pick(api, broker, self.version_cap(api))
    }
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig {
            client_id: Some("kafka-group".into()),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_response_size: 100 * 1024 * 1024,
            version_caps: BTreeMap::new(),
            tls: None,
            sasl: None,
        }
    }
}

/// Whether an I/O error carries a TLS failure (rustls reports them as `InvalidData`).
fn is_tls_error(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>())
}

/// The error for a TLS failure with `addr`: a rustls error keeps its cause and gets an
/// explanation; a timeout or reset during the handshake stays what it is.
fn tls_error(addr: &str, e: io::Error) -> Error {
    if !is_tls_error(&e) {
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Error::Timeout {
                which: Timeout::Response,
                operation: format!("TLS handshake with {addr}"),
                last: None,
            },
            // A PLAINTEXT listener reads the ClientHello as an absurd frame size and hangs up.
            // Kept an I/O error (a broker going away mid-handshake is retried like any other),
            // with the likely cause said.
            kind => Error::Io {
                addr: addr.to_string(),
                source: io::Error::new(
                    kind,
                    format!(
                        "{e} during the TLS handshake (is this a TLS listener? a PLAINTEXT one hangs \
                         up on a TLS client: check security.protocol)"
                    ),
                ),
            },
        };
    }
    let source = e.into_inner().expect("checked by is_tls_error");
    Error::Tls {
        addr: addr.to_string(),
        source,
    }
}

/// A request written by [`Connection::send_pending`] whose answer is still to be read.
#[derive(Debug)]
pub struct Pending<R> {
    raw: RawPending,
    request: std::marker::PhantomData<fn() -> R>,
}

impl<R> Pending<R> {
    pub(crate) fn new(raw: RawPending) -> Self {
        Pending {
            raw,
            request: std::marker::PhantomData,
        }
    }

    /// The version the request was sent at.
    pub fn version(&self) -> i16 {
        self.raw.version
    }

    pub(crate) fn raw(&self) -> &RawPending {
        &self.raw
    }
}

/// Shuts a connection's socket down from another thread; see [`Connection::interrupter`].
pub struct Interrupter(Box<dyn Fn() + Send + Sync>);

impl Interrupter {
    /// Interrupts with `f` (a scripted connection's way of being shut down).
    pub(crate) fn new(f: impl Fn() + Send + Sync + 'static) -> Self {
        Interrupter(Box::new(f))
    }

    pub(crate) fn socket(socket: TcpStream) -> Self {
        Interrupter::new(move || {
            let _ = socket.shutdown(std::net::Shutdown::Both);
        })
    }

    /// Shuts the socket down: a read or write blocked on it returns an error at once, and the
    /// connection is unusable afterwards.
    pub fn interrupt(&self) {
        (self.0)()
    }
}

impl std::fmt::Debug for Interrupter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Interrupter")
    }
}

/// The software name and version sent in ApiVersions v3+ (KIP-511); brokers expose them in
/// metrics, so operators can see which clients talk to them.
const SOFTWARE_NAME: &str = "kafka-group";
const SOFTWARE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The least time between the starts of two re-authentications of one connection. A broker
/// refuses a re-authentication that begins less than a second after the previous one
/// (KIP-368; Kafka's `KafkaChannel` checks it when the SaslHandshake arrives) and answers its
/// SaslHandshake with `ILLEGAL_SASL_STATE`. The margin covers a first handshake that took
/// longer to reach the broker than the second.
const MIN_REAUTHENTICATION_INTERVAL: Duration = Duration::from_millis(1200);

/// A connected, version-negotiated broker connection.
#[derive(Debug)]
pub struct Connection {
    stream: Stream,
    addr: String,
    peer: SocketAddr,
    next_correlation_id: i32,
    versions: BrokerVersions,
    /// Finalized feature levels from ApiVersions v3+ (`transaction.version` …).
    features: Vec<(String, i16)>,
    config: ConnectionConfig,
    /// `config.client_id` as the header carries it, made once: every request (each heartbeat)
    /// then shares it instead of copying the string.
    client_id: Option<KafkaStr>,
    broken: bool,
    write_buf: Vec<u8>,
    /// When to re-authenticate (KIP-368), if the broker set a session lifetime.
    reauthenticate_at: Option<Instant>,
    /// Requests written by `send_pending` whose answers are not read yet (a producer keeps
    /// several in flight): no re-authentication may start while any is, or its exchange would
    /// read their answers.
    outstanding: usize,
    /// When the last re-authentication began (see [`MIN_REAUTHENTICATION_INTERVAL`]).
    last_reauthentication: Option<Instant>,
    reauthentications: u64,
    /// Where else to count re-authentications (a member's metrics, which outlive the
    /// connections it replaces).
    reauthentication_sink: Option<Arc<AtomicU64>>,
}

/// How an error names the broker at `addr` reached at `peer`: the address alone when it is
/// the peer's already (`127.0.0.1:9092`), else both (`broker-1:9092 (10.0.0.7:9092)`), since a
/// host name may resolve to several addresses and the failing one is worth knowing.
fn peer_text(addr: &str, peer: SocketAddr) -> String {
    if addr.parse::<SocketAddr>().is_ok_and(|a| a == peer) {
        addr.to_string()
    } else {
        format!("{addr} ({peer})")
    }
}

impl Connection {
    /// Connects to `addr` (`host:port`), trying each resolved address in turn, then runs the
    /// ApiVersions handshake.
    pub fn connect(addr: &str, config: &ConnectionConfig) -> Result<Connection> {
        Self::connect_by(addr, config, crate::deadline::after(Duration::MAX))
    }

    /// [`connect`](Self::connect), giving up at `deadline`: the connect and the handshake each
    /// wait at most their configured timeout or what is left, whichever is shorter. Later
    /// requests on the connection use the configured timeouts as usual.
    pub fn connect_by(addr: &str, config: &ConnectionConfig, deadline: Instant) -> Result<Connection> {
        Self::connect_watched(addr, config, deadline, &|_| {})
    }

    /// [`connect_by`](Self::connect_by), handing `watch` an [`Interrupter`] for the socket as
    /// soon as the TCP connection is up, so that another thread can cut the handshake short
    /// (and `None` once the handshake is over).
    pub(crate) fn connect_watched(
        addr: &str,
        config: &ConnectionConfig,
        deadline: Instant,
        watch: &dyn Fn(Option<Interrupter>),
    ) -> Result<Connection> {
        let resolved: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|source| Error::Unresolved {
                addr: addr.to_string(),
                source: Some(source),
            })?
            .collect();
        let mut last = Error::Unresolved {
            addr: addr.to_string(),
            source: None,
        };
        for peer in resolved {
            let connect_timeout = crate::deadline::clamp(config.connect_timeout, deadline);
            match TcpStream::connect_timeout(&peer, connect_timeout) {
                Ok(stream) => {
                    let io_err = |source| Error::Io {
                        addr: addr.to_string(),
                        source,
                    };
                    // Requests are small and latency-bound (heartbeats); Nagle would hold them
                    // back.
                    stream.set_nodelay(true).map_err(io_err)?;
                    stream
                        .set_write_timeout(Some(config.request_timeout))
                        .map_err(io_err)?;
                    watch(stream.try_clone().ok().map(Interrupter::socket));
                    let timeout = crate::deadline::clamp(config.request_timeout, deadline);
                    let stream = match &config.tls {
                        None => Stream::Plain(stream),
                        Some(tls) => {
                            let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
                            match Stream::tls(stream, host, tls, timeout) {
                                Ok(s) => s,
                                Err(e) => {
                                    watch(None);
                                    return Err(tls_error(addr, e));
                                }
                            }
                        }
                    };
                    let mut conn = Connection::from_stream(stream, addr, peer, config);
                    let shaken = conn.handshake(timeout).and_then(|()| match &config.sasl {
                        Some(m) => conn.authenticate(m, crate::deadline::after(timeout)),
                        None => Ok(()),
                    });
                    watch(None);
                    shaken?;
                    return Ok(conn);
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock) => {
                    last = Error::Timeout {
                        which: Timeout::Connect,
                        operation: peer_text(addr, peer),
                        last: None,
                    }
                }
                Err(source) => {
                    last = Error::Io {
                        addr: peer_text(addr, peer),
                        source,
                    }
                }
            }
        }
        Err(last)
    }

    fn from_stream(stream: Stream, addr: &str, peer: SocketAddr, config: &ConnectionConfig) -> Self {
        Connection {
            stream,
            addr: addr.to_string(),
            peer,
            next_correlation_id: 0,
            versions: BrokerVersions::new(),
            features: Vec::new(),
            config: config.clone(),
            client_id: config.client_id.as_deref().map(KafkaStr::from),
            broken: false,
            write_buf: Vec::with_capacity(256),
            reauthenticate_at: None,
            outstanding: 0,
            last_reauthentication: None,
            reauthentications: 0,
            reauthentication_sink: None,
        }
    }

    /// The address this connection was opened with (`host:port`).
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The socket address actually connected to.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// The broker's ApiVersions table.
    pub fn broker_versions(&self) -> &BrokerVersions {
        &self.versions
    }

    /// The finalized level of feature `name` the broker announced, if any.
    pub fn finalized_feature(&self, name: &str) -> Option<i16> {
        self.features
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, level)| *level)
    }

    /// Whether an earlier error made the connection unusable.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Makes the connection unusable (its owner found the stream out of step).
    pub(crate) fn set_broken(&mut self) {
        self.broken = true;
        let _ = self.stream.tcp().shutdown(std::net::Shutdown::Both);
    }

    /// The version this connection uses for `api`.
    pub fn version(&self, api: ApiKey) -> Result<i16> {
        self.config.pick_version(api, &self.versions)
    }

    /// Checks that the broker supports a capability (e.g. static membership).
    pub fn check(&self, cap: &Capability) -> Result<()> {
        versions::check(cap, &self.versions)
    }

    /// Sends `req` at the negotiated version and waits for its response.
    pub fn send<R: Request>(&mut self, req: &R) -> Result<R::Response> {
        let version = self.version(R::API_KEY)?;
        self.send_at(req, version, None)
    }

    /// Sends `req` at `version`, waiting up to `timeout` (default `request.timeout.ms`).
    pub fn send_at<R: Request>(
        &mut self,
        req: &R,
        version: i16,
        timeout: Option<Duration>,
    ) -> Result<R::Response> {
        self.send_at_with(req, version, timeout, <R::Response as Message>::decode)
    }

    /// [`send_at`](Self::send_at), reading the answer with `decode` instead of decoding
    /// `R::Response`: for an answer so large (Metadata of a big cluster) that its decoded form
    /// should never exist whole, `decode` can build what the caller keeps straight from the
    /// frame. The frame is freed before this returns.
    pub(crate) fn send_at_with<R: Request, T>(
        &mut self,
        req: &R,
        version: i16,
        timeout: Option<Duration>,
        decode: impl FnOnce(&mut Decoder<'_>, i16) -> std::result::Result<T, DecodeError>,
    ) -> Result<T> {
        let body = self.call_raw(req, version, timeout)?;
        let decoded = decode(&mut Decoder::new(&body), version);
        drop(body);
        decoded.map_err(|source| self.decode_failed(R::API_KEY, source))
    }

    /// One request (re-authenticating first if due) and the body of its answer: what every
    /// request of a [`Link`](crate::net::link::Link) comes down to.
    pub(crate) fn call_raw(
        &mut self,
        req: &dyn Outgoing,
        version: i16,
        timeout: Option<Duration>,
    ) -> Result<Bytes> {
        let deadline = crate::deadline::after(timeout.unwrap_or(self.config.request_timeout));
        // A re-authentication comes out of the request's own time, not on top of it.
        let timeout = match self.reauthenticate_if_due(deadline)? {
            true => Some(crate::deadline::left(deadline)),
            false => timeout,
        };
        log::debug!("{} -> {} v{version}", self.addr, req.api().name());
        self.exchange(req, version, timeout)
    }

    /// One request and its answer read with `decode`: [`send_at_with`](Self::send_at_with)
    /// without the re-authentication check, which the SASL exchange itself goes through.
    fn call_with<R: Request, T>(
        &mut self,
        req: &R,
        version: i16,
        timeout: Option<Duration>,
        decode: impl FnOnce(&mut Decoder<'_>, i16) -> std::result::Result<T, DecodeError>,
    ) -> Result<T> {
        let api = R::API_KEY;
        log::debug!("{} -> {} v{version}", self.addr, api.name());
        let body = self.exchange(req, version, timeout)?;
        let decoded = decode(&mut Decoder::new(&body), version);
        drop(body);
        decoded.map_err(|source| self.decode_failed(api, source))
    }

    /// Writes `req` at `version` and returns at once; the answer is collected with
    /// [`receive`](Self::receive), possibly over several calls. This is how a JoinGroup, which
    /// the coordinator may hold for a whole rebalance, stays in flight across bounded polls.
    /// `timeout` (default `request.timeout.ms`) bounds the wait for the answer from now.
    /// Nothing else may be sent on this connection until the answer is in.
    pub fn send_pending<R: Request>(
        &mut self,
        req: &R,
        version: i16,
        timeout: Option<Duration>,
    ) -> Result<Pending<R>> {
        self.send_pending_raw(req, version, timeout).map(Pending::new)
    }

    /// [`send_pending`](Self::send_pending) for any request.
    pub(crate) fn send_pending_raw(
        &mut self,
        req: &dyn Outgoing,
        version: i16,
        timeout: Option<Duration>,
    ) -> Result<RawPending> {
        let deadline = crate::deadline::after(timeout.unwrap_or(self.config.request_timeout));
        self.reauthenticate_if_due(deadline)?;
        log::debug!("{} -> {} v{version} (pending)", self.addr, req.api().name());
        let correlation_id = self.write_request(req, version)?;
        self.outstanding += 1;
        Ok(RawPending {
            api: req.api(),
            correlation_id,
            version,
            header_version: req.response_header_version(version),
            deadline,
        })
    }

    /// Waits up to `wait` for the answer to `pending`. `Ok(None)` when none has started to
    /// arrive yet: the connection stays usable and the request in flight, so the caller can
    /// come back later. Once the request's own deadline has passed, that is a response timeout
    /// and the connection is closed, as for [`send_at`](Self::send_at).
    pub fn receive<R: Request>(
        &mut self,
        pending: &Pending<R>,
        wait: Duration,
    ) -> Result<Option<R::Response>> {
        let Some(body) = self.receive_raw(&pending.raw, wait)? else {
            return Ok(None);
        };
        <R::Response as Message>::decode(&mut Decoder::new(&body), pending.raw.version)
            .map(Some)
            .map_err(|source| self.decode_failed(R::API_KEY, source))
    }

    /// [`receive`](Self::receive), returning the answer's body undecoded.
    pub(crate) fn receive_raw(&mut self, pending: &RawPending, wait: Duration) -> Result<Option<Bytes>> {
        if self.broken {
            return Err(Error::Closed);
        }
        let until = crate::deadline::after(wait).min(pending.deadline);
        if !self.wait_readable(until)? {
            if Instant::now() >= pending.deadline {
                return Err(self.fail_io(io::ErrorKind::TimedOut.into(), Timeout::Response));
            }
            return Ok(None);
        }
        // The answer has started to arrive: the rest of it follows at network speed, within
        // what is left of the request's own timeout.
        let body = self.read_response(
            pending.api,
            pending.correlation_id,
            pending.header_version,
            pending.deadline,
        );
        self.outstanding = self.outstanding.saturating_sub(1);
        body.map(Some)
    }

    /// Whether response bytes can be read before `until`, without consuming them. Looks at
    /// least once, even when `until` has passed, so that an answer already in is not missed.
    fn wait_readable(&mut self, until: Instant) -> Result<bool> {
        match self.stream.wait_readable(until) {
            Ok(ready) => Ok(ready),
            Err(e) => Err(self.fail_io(e, Timeout::Response)),
        }
    }

    /// Whether a re-authentication (KIP-368) is due: it waits until no answer is outstanding,
    /// so a caller keeping requests in flight should let them drain before sending more.
    pub(crate) fn reauthentication_due(&self) -> bool {
        self.config.sasl.is_some() && self.reauthenticate_at.is_some_and(|at| Instant::now() >= at)
    }

    /// A handle that can shut this connection's socket down from another thread, making a
    /// blocked read or write on it return at once (how a member's close interrupts its
    /// heartbeat thread mid-request). `None` if the socket cannot be shared.
    pub fn interrupter(&self) -> Option<Interrupter> {
        self.stream.tcp().try_clone().ok().map(Interrupter::socket)
    }

    /// Sends `req` at `version` without waiting for a response, for the one request the broker
    /// never answers: Produce with `acks=0`. Waiting for a response there would sit out
    /// `request.timeout.ms` and then close a healthy connection.
    pub fn send_no_response<R: Request>(&mut self, req: &R, version: i16) -> Result<()> {
        self.send_no_response_raw(req, version)
    }

    /// [`send_no_response`](Self::send_no_response) for any request.
    pub(crate) fn send_no_response_raw(&mut self, req: &dyn Outgoing, version: i16) -> Result<()> {
        log::debug!(
            "{} -> {} v{version} (no response expected)",
            self.addr,
            req.api().name()
        );
        self.reauthenticate_if_due(crate::deadline::after(self.config.request_timeout))?;
        self.write_request(req, version).map(|_| ())
    }

    /// SASL authentication on this connection (after ApiVersions, before any other request),
    /// every step of it done by `deadline`. Schedules the KIP-368 re-authentication when the
    /// broker reports a session lifetime.
    fn authenticate(&mut self, mechanism: &Mechanism, deadline: Instant) -> Result<()> {
        let framing = sasl::framing(&self.config, &self.versions)?;
        sasl::handshake(mechanism, framing, |req, v| self.sasl_call(req, v, deadline))?;
        let session = match framing {
            Framing::Kip152 { authenticate, .. } => sasl::authenticate(
                mechanism,
                authenticate,
                |req, v| self.sasl_call(req, v, deadline),
                sasl::random_fraction(),
            ),
            // No SaslAuthenticate, so no session lifetime either: the broker cannot tell us
            // when it would end the session, and KIP-368 needs SaslAuthenticate v1.
            Framing::Raw => {
                sasl::authenticate_raw(mechanism, |token| self.raw_sasl_token(mechanism, token, deadline))
                    .map(|()| sasl::Session {
                        lifetime: None,
                        reauthenticate_after: None,
                    })
            }
        }
        .inspect_err(|_| self.broken = true)?;
        self.reauthenticate_at = session
            .reauthenticate_after
            .map(|d| crate::deadline::at(Instant::now(), d));
        log::debug!(
            "{}: authenticated with {} (session lifetime {:?})",
            self.addr,
            mechanism.name(),
            session.lifetime
        );
        Ok(())
    }

    /// KIP-368: before the session the broker granted ends, authenticate again on this
    /// connection (only between requests: nothing is in flight when a request is about to be
    /// written). A broker with `connections.max.reauth.ms` would close it otherwise.
    ///
    /// A session shorter than [`MIN_REAUTHENTICATION_INTERVAL`] (an OAUTHBEARER token close to
    /// its expiry) cannot be renewed in time: the broker refuses a re-authentication that soon
    /// after the previous one. Then this waits out the rest of the interval (at most that
    /// long) and re-authenticates before the request, because the broker accepts a late
    /// re-authentication but closes the connection on any other request after the session.
    ///
    /// All of it (the wait included) is done by `deadline`, the request's own: if the wait
    /// alone would pass it, the connection is given up with a timeout instead (a new one
    /// authenticates afresh, with no wait). The wait ends early when the socket is shut down
    /// from another thread (a member closing). Returns whether it re-authenticated.
    fn reauthenticate_if_due(&mut self, deadline: Instant) -> Result<bool> {
        let Some(at) = self.reauthenticate_at else {
            return Ok(false);
        };
        if Instant::now() < at || self.outstanding > 0 {
            return Ok(false);
        }
        let Some(mechanism) = self.config.sasl.clone() else {
            return Ok(false);
        };
        if let Some(last) = self.last_reauthentication {
            let wait = MIN_REAUTHENTICATION_INTERVAL.saturating_sub(last.elapsed());
            if !wait.is_zero() {
                let until = Instant::now() + wait;
                if until >= deadline {
                    return Err(self.fail_io(io::ErrorKind::TimedOut.into(), Timeout::Response));
                }
                log::debug!(
                    "{}: session shorter than {MIN_REAUTHENTICATION_INTERVAL:?}; re-authenticating in {wait:?}",
                    self.addr
                );
                // Nothing is in flight, so the socket turns readable only if it is closed or
                // shut down: then the authentication below fails at once, as it should.
                if let Err(e) = self.stream.wait_readable(until) {
                    return Err(self.fail_io(e, Timeout::Response));
                }
            }
        }
        self.reauthenticate_at = None;
        self.last_reauthentication = Some(Instant::now());
        log::debug!("{}: re-authenticating ({})", self.addr, mechanism.name());
        self.authenticate(&mechanism, deadline)?;
        self.reauthentications += 1;
        if let Some(sink) = &self.reauthentication_sink {
            sink.fetch_add(1, Ordering::Relaxed);
        }
        Ok(true)
    }

    /// Also adds each later re-authentication of this connection to `sink`.
    pub(crate) fn count_reauthentications_in(&mut self, sink: Arc<AtomicU64>) {
        self.reauthentication_sink = Some(sink);
    }

    /// How many times this connection re-authenticated (KIP-368).
    pub fn reauthentications(&self) -> u64 {
        self.reauthentications
    }

    /// One SASL request and its answer (no re-authentication check: it is part of one).
    fn sasl_call<R: Request>(&mut self, req: &R, version: i16, deadline: Instant) -> Result<R::Response> {
        let left = crate::deadline::left(deadline);
        self.call_with(req, version, Some(left), <R::Response as Message>::decode)
    }

    /// One token of the pre-KIP-152 framing (SaslHandshake v0): written with a 4-byte length
    /// and no Kafka header, the server's next token read back the same way, by `deadline`.
    fn raw_sasl_token(&mut self, mechanism: &Mechanism, token: &[u8], deadline: Instant) -> Result<Vec<u8>> {
        if self.broken {
            return Err(Error::Closed);
        }
        let len = i32::try_from(token.len()).map_err(|_| Error::Authentication {
            mechanism: mechanism.name(),
            message: format!("a SASL token of {} bytes is too long to send", token.len()),
        })?;
        let mut frame = Vec::with_capacity(4 + token.len());
        frame.extend_from_slice(&len.to_be_bytes());
        frame.extend_from_slice(token);
        // A failed write is the network's doing, reported as it is; only the broker closing
        // the connection after reading a token is its way of refusing it.
        if let Err(e) = self.stream.write_all(&frame).and_then(|()| self.stream.flush()) {
            return Err(self.fail_io(e, Timeout::Write));
        }
        // An empty token is a valid answer here (PLAIN's server sends one), unlike a response.
        match self.read_sized(deadline, 0) {
            Ok(token) => Ok(token.to_vec()),
            Err(e) => Err(self.raw_rejection(mechanism, e)),
        }
    }

    /// Under the raw framing a broker rejects credentials by closing the connection once it has
    /// read the token, with no error code or message: say so, rather than report a bare end of
    /// stream. A reset is not that (the broker closes cleanly), and stays an I/O error.
    fn raw_rejection(&self, mechanism: &Mechanism, e: Error) -> Error {
        let closed = matches!(&e, Error::Io { source, .. } if source.kind() == io::ErrorKind::UnexpectedEof);
        if !closed {
            return e;
        }
        Error::Authentication {
            mechanism: mechanism.name(),
            message: format!(
                "{} closed the connection during authentication; with SaslHandshake v0 (raw \
                 tokens) that is how a broker rejects credentials, and it gives no reason",
                self.addr
            ),
        }
    }

    /// Writes one request frame; returns its correlation id.
    fn write_request(&mut self, req: &dyn Outgoing, version: i16) -> Result<i32> {
        if self.broken {
            return Err(Error::Closed);
        }
        let api = req.api();
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let header = RequestHeader {
            request_api_key: api.key(),
            request_api_version: version,
            correlation_id,
            client_id: self.client_id.clone(),
            ..Default::default()
        };
        // Record batches and group metadata go to the socket from the caller's buffers: the
        // frame borrows them, and is written with one vectored write. Only the copied part's
        // allocation is kept for the next request.
        let mut buf = Segments::from_vec(std::mem::take(&mut self.write_buf));
        buf.put_slice(&[0; 4]);
        let encoded = header
            .encode(req.header_version(version), &mut buf)
            .and_then(|()| req.encode_into(version, &mut buf));
        let written = encoded.map(|()| {
            let size = (buf.len() - 4) as i32;
            buf.set_i32(0, size);
            buf.write_to(&mut self.stream).and_then(|()| self.stream.flush())
        });
        self.write_buf = buf.into_vec();
        match written {
            Err(source) => return Err(Error::Encode { api, source }),
            Ok(Err(e)) => return Err(self.fail_io(e, Timeout::Write)),
            Ok(Ok(())) => {}
        }
        Ok(correlation_id)
    }

    /// Writes one request frame and reads its response, returning the response body (the frame
    /// after its header).
    fn exchange(&mut self, req: &dyn Outgoing, version: i16, timeout: Option<Duration>) -> Result<Bytes> {
        let correlation_id = self.write_request(req, version)?;
        let deadline = crate::deadline::after(timeout.unwrap_or(self.config.request_timeout));
        self.read_response(
            req.api(),
            correlation_id,
            req.response_header_version(version),
            deadline,
        )
    }

    /// Reads the response to request `correlation_id` of `api` (whose response header has
    /// `header_version`) before `deadline` and returns its body.
    fn read_response(
        &mut self,
        api: ApiKey,
        correlation_id: i32,
        header_version: i16,
        deadline: Instant,
    ) -> Result<Bytes> {
        let mut frame = self.read_frame(deadline)?;
        let mut d = Decoder::new(&frame);
        let header = ResponseHeader::decode(&mut d, header_version);
        let header_len = d.position();
        let header = header.map_err(|source| self.decode_failed(api, source))?;
        if header.correlation_id != correlation_id {
            self.broken = true;
            return Err(Error::Protocol {
                addr: self.addr.clone(),
                violation: ProtocolViolation::CorrelationMismatch {
                    expected: correlation_id,
                    received: header.correlation_id,
                },
            });
        }
        // The frame is ours alone, so this moves a pointer and touches no reference count.
        bytes::Buf::advance(&mut frame, header_len);
        Ok(frame)
    }

    /// A response that does not decode leaves the rest of the stream unaccounted for.
    fn decode_failed(&mut self, api: ApiKey, source: DecodeError) -> Error {
        self.broken = true;
        Error::Decode { api, source }
    }

    fn fail_io(&mut self, e: io::Error, which: Timeout) -> Error {
        self.broken = true;
        let _ = self.stream.tcp().shutdown(std::net::Shutdown::Both);
        if is_tls_error(&e) {
            return tls_error(&self.addr, e);
        }
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Error::Timeout {
                which,
                operation: self.addr.clone(),
                last: None,
            },
            _ => Error::Io {
                addr: self.addr.clone(),
                source: e,
            },
        }
    }

    fn read_frame(&mut self, deadline: Instant) -> Result<Bytes> {
        // A correlation id needs at least 4 bytes.
        self.read_sized(deadline, 4)
    }

    /// Reads one size-prefixed frame of at least `min` bytes before `deadline`.
    fn read_sized(&mut self, deadline: Instant, min: i64) -> Result<Bytes> {
        let mut size = [0u8; 4];
        self.read_exact_until(&mut size, deadline)?;
        let size = i32::from_be_bytes(size) as i64;
        // Anything outside the bounds is garbage such as a TLS alert read as a length, and must
        // not size an allocation.
        if size < min || size as u64 > self.config.max_response_size as u64 {
            self.broken = true;
            let _ = self.stream.tcp().shutdown(std::net::Shutdown::Both);
            return Err(Error::Protocol {
                addr: self.addr.clone(),
                violation: ProtocolViolation::FrameSize {
                    size,
                    max: self.config.max_response_size,
                },
            });
        }
        let size = size as usize;
        // Grow with the bytes that actually arrive rather than trusting the prefix up front:
        // a peer that announces 99 MiB and stalls holds only what it sent.
        let mut frame = Vec::with_capacity(size.min(64 * 1024));
        while frame.len() < size {
            let want = (size - frame.len()).min(1 << 20);
            let start = frame.len();
            // Doubling as `resize` would, but never past the announced size: the frame lives as
            // long as anything decoded from it, and `Bytes` keeps the whole allocation.
            if frame.capacity() < start + want {
                frame.reserve_exact(frame_capacity(frame.capacity(), start + want, size) - start);
            }
            frame.resize(start + want, 0);
            let n = self.read_some(&mut frame[start..], deadline)?;
            frame.truncate(start + n);
        }
        Ok(Bytes::from(frame))
    }

    fn read_exact_until(&mut self, mut buf: &mut [u8], deadline: Instant) -> Result<()> {
        while !buf.is_empty() {
            let n = self.read_some(buf, deadline)?;
            buf = &mut buf[n..];
        }
        Ok(())
    }

    /// Reads at least one byte before `deadline`.
    fn read_some(&mut self, buf: &mut [u8], deadline: Instant) -> Result<usize> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(self.fail_io(io::ErrorKind::TimedOut.into(), Timeout::Response));
            }
            if let Err(e) = self.stream.tcp().set_read_timeout(Some(left)) {
                return Err(self.fail_io(e, Timeout::Response));
            }
            match self.stream.read(buf) {
                Ok(0) => {
                    let e = io::Error::new(io::ErrorKind::UnexpectedEof, "broker closed the connection");
                    return Err(self.fail_io(e, Timeout::Response));
                }
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.fail_io(e, Timeout::Response)),
            }
        }
    }

    /// ApiVersions, starting at the highest version we have and stepping down per KIP-511.
    fn handshake(&mut self, timeout: Duration) -> Result<()> {
        let api = ApiKey::ApiVersions;
        let mut version = versions::ours(api, self.config.version_cap(api)).max;
        loop {
            let req = ApiVersionsRequest {
                client_software_name: SOFTWARE_NAME.into(),
                client_software_version: SOFTWARE_VERSION.into(),
                ..Default::default()
            };
            let body = self.exchange(&req, version, Some(timeout))?;
            let mut d = Decoder::new(&body);
            // Every version starts with the error code; on UNSUPPORTED_VERSION the body is in
            // the v0 shape whatever version we sent.
            let mut peek = d.clone();
            let code =
                KafkaCode::from_code(peek.get_i16().map_err(|source| self.decode_failed(api, source))?);
            let body_version = if code == KafkaCode::UnsupportedVersion {
                0
            } else {
                version
            };
            let resp = ApiVersionsResponse::decode(&mut d, body_version)
                .map_err(|source| self.decode_failed(api, source))?;
            let features: Vec<(String, i16)> = if resp.finalized_features_epoch >= 0 {
                resp.finalized_features
                    .iter()
                    .map(|f| (f.name.to_string(), f.max_version_level))
                    .collect()
            } else {
                Vec::new()
            };
            let table: BrokerVersions = resp
                .api_keys
                .iter()
                .map(|k| (k.api_key, VersionRange::new(k.min_version, k.max_version)))
                .collect();
            match versions::after_attempt(version, code, table) {
                Ok(Handshake::Done(table)) => {
                    log::debug!(
                        "{}: ApiVersions v{version} handshake done, {} APIs",
                        self.addr,
                        table.len()
                    );
                    self.versions = table;
                    self.features = features;
                    // A version pick per API, done on every connect, only for this log.
                    if log::log_enabled!(log::Level::Debug) {
                        for api in ApiKey::ALL {
                            if let Ok(v) = self.version(*api) {
                                log::debug!("{}: using {} v{v}", self.addr, api.name());
                            }
                        }
                    }
                    return Ok(());
                }
                Ok(Handshake::Retry(lower)) => {
                    log::debug!(
                        "{}: broker rejected ApiVersions v{version}, retrying with v{lower}",
                        self.addr
                    );
                    version = lower;
                }
                Err(m) => {
                    self.broken = true;
                    return Err(Error::Protocol {
                        addr: self.addr.clone(),
                        violation: ProtocolViolation::Handshake(m),
                    });
                }
            }
        }
    }
}

/// The capacity to grow a frame buffer to when `needed` bytes must fit: double `cap`, as
/// amortized growth does, but at least `needed` and never more than the frame's `size`.
fn frame_capacity(cap: usize, needed: usize, size: usize) -> usize {
    cap.saturating_mul(2).clamp(needed, size.max(needed))
}

#[cfg(test)]
mod tests {
    use super::{frame_capacity, Connection, ConnectionConfig};
    use crate::error::Error;

    #[test]
    fn a_host_that_does_not_resolve_is_unresolved_with_its_cause() {
        // `.invalid` never resolves (RFC 2606).
        let e = Connection::connect("no-such-host.invalid:9092", &ConnectionConfig::default())
            .map(|_| ())
            .expect_err("connected to no-such-host.invalid");
        assert!(
            matches!(&e, Error::Unresolved { addr, source: Some(_) } if addr == "no-such-host.invalid:9092"),
            "{e:?}"
        );
        assert!(e.to_string().contains("no-such-host.invalid:9092"), "{e}");
    }

    #[test]
    fn an_address_is_named_once_and_a_host_with_what_it_resolved_to() {
        // Port 1 on the loopback: refused at once.
        let e = Connection::connect("127.0.0.1:1", &ConnectionConfig::default())
            .map(|_| ())
            .expect_err("connected to port 1");
        let text = e.to_string();
        assert_eq!(text.matches("127.0.0.1:1").count(), 1, "{text}");
        let peer = "127.0.0.1:1".parse().unwrap();
        assert_eq!(super::peer_text("127.0.0.1:1", peer), "127.0.0.1:1");
        assert_eq!(super::peer_text("localhost:1", peer), "localhost:1 (127.0.0.1:1)");
        let v6 = "[::1]:9092".parse().unwrap();
        assert_eq!(super::peer_text("[::1]:9092", v6), "[::1]:9092");
        assert_eq!(super::peer_text("[0:0::1]:9092", v6), "[0:0::1]:9092");
    }

    #[test]
    fn frame_buffers_double_but_never_past_the_frame() {
        const MIB: usize = 1 << 20;
        assert_eq!(frame_capacity(64 * 1024, MIB, 68 * MIB), MIB);
        assert_eq!(frame_capacity(MIB, 2 * MIB, 68 * MIB), 2 * MIB);
        assert_eq!(frame_capacity(8 * MIB, 9 * MIB, 68 * MIB), 16 * MIB);
        // `resize` would double 64 MiB to 128 MiB for a 68 MiB frame.
        assert_eq!(frame_capacity(64 * MIB, 65 * MIB, 68 * MIB), 68 * MIB);
        assert_eq!(
            frame_capacity(usize::MAX / 2 + 1, usize::MAX, usize::MAX),
            usize::MAX
        );
    }
}
