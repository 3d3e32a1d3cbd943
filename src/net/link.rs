//! The one owner of a broker connection: [`Link`].
//!
//! A link is one broker address and at most one open connection ([`Wire`]) to it. It opens the
//! connection when a request needs it, holding reconnects back by an exponential backoff
//! (`reconnect.backoff.ms` doubling up to `reconnect.backoff.max.ms`) after failures, picks
//! each request's version from the broker's ApiVersions table, drops the connection when an
//! error leaves it unusable, and keeps the last error it met so that a later "gave up" error
//! can still name the cause (the address and `connection refused`).
//!
//! Everything that talks to a broker goes through a link: the client's shared connections
//! (one per broker and [`Purpose`]), a group member's connection to its coordinator, the
//! heartbeat thread's, the consumer's fetch connections. The TLS, SASL and KIP-368 handshakes
//! stay inside the connection a [`Dialer`] opens, so they exist once.

use crate::error::{Error, Result};
use crate::net::connection::{ConnectionConfig, Interrupter, Pending};
use crate::net::versions::{self, BrokerVersions, Capability};
use crate::net::wire::{Dialer, RawPending, Wire};
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, Request};
use crate::retry;
use bytes::Bytes;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a connection is for: the client's shared connections are one per broker for
/// `Metadata` and one for `Coordinator`; the `Produce` and `Fetch` links (and members' and
/// heartbeat threads' `Coordinator` links) are owned by the thread that uses them. Kept apart
/// so that a request that waits long on one (a Produce with `acks=all` behind a slow ISR, a
/// Fetch waiting out `fetch.max.wait.ms`) never holds up another kind on the same broker (a
/// heartbeat, a coordinator lookup, a metadata refresh).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Purpose {
    /// Metadata, admin requests, bootstrap, anything not below.
    Metadata,
    /// FindCoordinator and the group requests of members and their heartbeat threads.
    Coordinator,
    /// A producer's Produce requests.
    Produce,
    /// A consumer's Fetch requests.
    Fetch,
}

impl Purpose {
    /// Every purpose.
    pub(crate) const ALL: [Purpose; 4] = [
        Purpose::Metadata,
        Purpose::Coordinator,
        Purpose::Produce,
        Purpose::Fetch,
    ];
}

/// How long a connection may sit unused before the link drops it instead of sending on it: a
/// minute less than brokers' `connections.max.idle.ms` (10 min by default), after which the
/// broker closes it and the next request would fail on a dead socket. Java's client uses the
/// same 9 minutes. Matters since connections are kept by purpose: some (a client's
/// coordinator lookups, an admin's) go unused for long stretches.
pub(crate) const MAX_IDLE: Duration = Duration::from_secs(9 * 60);

/// The reconnect backoff of one link: pure, given the time. The schedule is the crate's one
/// ([`retry::Backoff`]); this keeps the failures in a row and when the next attempt may start.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    schedule: retry::Backoff,
    failures: u32,
    retry_at: Option<Instant>,
}

impl Backoff {
    /// `reconnect.backoff.ms` and `reconnect.backoff.max.ms`.
    pub(crate) fn new(first: Duration, max: Duration) -> Self {
        Backoff {
            schedule: retry::Backoff::exponential(first, max),
            failures: 0,
            retry_at: None,
        }
    }

    /// The pause after `failures` failed attempts in a row.
    pub(crate) fn pause(&self, failures: u32) -> Duration {
        self.schedule.after(failures)
    }

    /// An attempt failed at `now`; returns the pause before the next one.
    pub(crate) fn failed(&mut self, now: Instant) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let pause = self.pause(self.failures);
        self.retry_at = Some(crate::deadline::at(now, pause));
        pause
    }

    /// An attempt succeeded: the next failure starts from the first backoff again.
    pub(crate) fn succeeded(&mut self) {
        self.failures = 0;
        self.retry_at = None;
    }

    /// When the next attempt may be made, after a failure.
    pub(crate) fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }

    /// Failed attempts in a row.
    #[cfg(test)]
    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }
}

/// One broker address and at most one open connection to it; see the [module](self).
pub(crate) struct Link {
    purpose: Purpose,
    addr: String,
    dialer: Arc<dyn Dialer>,
    config: Arc<ConnectionConfig>,
    backoff: Backoff,
    wire: Option<Box<dyn Wire>>,
    /// When the connection last sent or received (or was opened).
    last_used: Instant,
    last_error: Option<Error>,
    reauthentications: Option<Arc<AtomicU64>>,
    /// A lookup whose caller stopped waiting at its own deadline; see
    /// [`request_resumable`](Link::request_resumable).
    resumable: Option<Resumable>,
}

/// A request left in flight by [`Link::request_resumable`] when its caller's deadline came
/// before the answer, with the answer once it came (read while another request had to go).
#[derive(Debug)]
struct Resumable {
    /// The request's encoded body: with the API and version of `pending`, only the very same
    /// request takes the answer over.
    body: Vec<u8>,
    pending: RawPending,
    answer: Option<Bytes>,
}

impl fmt::Debug for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Link")
            .field("purpose", &self.purpose)
            .field("addr", &self.addr)
            .field("connected", &self.is_connected())
            .field("failures", &self.backoff.failures)
            .finish()
    }
}

impl Link {
    /// A link to `addr`, not connected yet.
    pub(crate) fn new(
        purpose: Purpose,
        addr: impl Into<String>,
        dialer: Arc<dyn Dialer>,
        config: Arc<ConnectionConfig>,
        backoff: Backoff,
    ) -> Link {
        Link {
            purpose,
            addr: addr.into(),
            dialer,
            config,
            backoff,
            wire: None,
            last_used: Instant::now(),
            last_error: None,
            reauthentications: None,
            resumable: None,
        }
    }

    /// The broker address (`host:port`).
    #[cfg(test)]
    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    /// Points the link at `addr` (a broker's address in fresh metadata). A different address
    /// drops the connection and the backoff, which were the old address's.
    pub(crate) fn retarget(&mut self, addr: &str) {
        if self.addr != addr {
            self.addr = addr.to_string();
            self.drop_wire();
            self.backoff.succeeded();
        }
    }

    /// Whether a usable connection is open.
    pub(crate) fn is_connected(&self) -> bool {
        self.wire.as_ref().is_some_and(|w| !w.is_broken())
    }

    /// Also counts the re-authentications of every connection this link opens from now on
    /// in `sink` (a member's metrics, which outlive its connections).
    pub(crate) fn count_reauthentications_in(&mut self, sink: Arc<AtomicU64>) {
        if let Some(w) = self.wire.as_mut() {
            w.count_reauthentications_in(sink.clone());
        }
        self.reauthentications = Some(sink);
    }

    /// The last error a connection attempt or request on this link met, if any.
    #[cfg(test)]
    pub(crate) fn last_error(&self) -> Option<&Error> {
        self.last_error.as_ref()
    }

    /// Failed connection attempts in a row.
    #[cfg(test)]
    pub(crate) fn failures(&self) -> u32 {
        self.backoff.failures()
    }

    /// When the reconnect backoff lets the next connection attempt start, if failed attempts
    /// hold it back (for a caller that must not sleep it out in [`connect`](Self::connect)).
    pub(crate) fn retry_at(&self) -> Option<Instant> {
        self.backoff.retry_at()
    }

    /// The pause the backoff would impose after the failures so far.
    #[cfg(test)]
    pub(crate) fn current_backoff(&self) -> Duration {
        self.backoff.pause(self.backoff.failures())
    }

    /// Opens the connection unless one is open, by `deadline` (none: the configured connect
    /// and request timeouts alone bound it). After failed attempts the next one waits for the
    /// reconnect backoff; a backoff that would end past `deadline` fails at once with
    /// [`Error::ReconnectBackoff`] instead of being slept.
    pub(crate) fn connect(&mut self, deadline: Option<Instant>) -> Result<()> {
        self.connect_watched(deadline, &|_| {})
    }

    /// [`connect`](Self::connect), handing `watch` an [`Interrupter`] while the handshake runs
    /// (how a member's close cuts its heartbeat thread's connection attempt short).
    pub(crate) fn connect_watched(
        &mut self,
        deadline: Option<Instant>,
        watch: &dyn Fn(Option<Interrupter>),
    ) -> Result<()> {
        if self.wire.as_ref().is_some_and(|w| w.is_broken()) {
            self.drop_wire();
        }
        // A caller about to send on the connection (a member's JoinGroup) cannot read behind a
        // lookup's answer still to come: that one's connection goes, a new one is opened.
        self.free_for_other(Instant::now());
        if self.wire.is_some() && idle_too_long(self.last_used, Instant::now()) {
            log::debug!(
                "{} ({:?}): idle over {MAX_IDLE:?}, reconnecting",
                self.addr,
                self.purpose
            );
            self.drop_wire();
        }
        if self.wire.is_some() {
            return Ok(());
        }
        if let Some(at) = self.backoff.retry_at() {
            let wait = crate::deadline::left(at);
            if deadline.is_some_and(|d| at > d) {
                return Err(Error::ReconnectBackoff {
                    addr: self.addr.clone(),
                    retry_in: wait,
                    last: self.last_error.as_ref().and_then(copy_of).map(Box::new),
                });
            }
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
        }
        let by = deadline.unwrap_or_else(|| crate::deadline::after(Duration::MAX));
        match self.dialer.dial(&self.addr, &self.config, by, watch) {
            Ok(mut wire) => {
                log::debug!("connected to {} ({:?})", self.addr, self.purpose);
                if let Some(sink) = &self.reauthentications {
                    wire.count_reauthentications_in(sink.clone());
                }
                self.wire = Some(wire);
                self.last_used = Instant::now();
                self.backoff.succeeded();
                Ok(())
            }
            Err(e) => {
                let pause = self.backoff.failed(Instant::now());
                log::debug!(
                    "connecting to {} ({:?}) failed ({e}); next try in {pause:?}",
                    self.addr,
                    self.purpose
                );
                self.last_error = copy_of(&e);
                Err(e)
            }
        }
    }

    /// Drops the connection (the next request opens a new one, without a backoff).
    pub(crate) fn disconnect(&mut self) {
        self.drop_wire();
    }

    /// Drops the connection and what was in flight on it.
    fn drop_wire(&mut self) {
        self.wire = None;
        self.resumable = None;
    }

    /// Makes the connection free for another request than the one left in flight by
    /// [`request_resumable`](Self::request_resumable): waits for that one's answer until
    /// `until` (keeping it for the same request asked again), and drops the connection if it
    /// has not come by then, since answers come in order.
    fn free_for_other(&mut self, until: Instant) {
        let Some(mut r) = self.resumable.take() else {
            return;
        };
        if r.answer.is_none() {
            let wait = crate::deadline::left(until.min(r.pending.deadline));
            let Some(wire) = self.wire.as_mut().filter(|w| !w.is_broken()) else {
                return;
            };
            match wire.receive(&r.pending, wait) {
                Ok(Some(body)) => r.answer = Some(body),
                Ok(None) | Err(_) => {
                    log::debug!(
                        "{} ({:?}): {} left in flight not answered yet; reconnecting for the next request",
                        self.addr,
                        self.purpose,
                        r.pending.api.name()
                    );
                    self.drop_wire();
                    return;
                }
            }
        }
        self.resumable = Some(r);
    }

    /// [`request`](Self::request) for a lookup the caller repeats until it is answered (the
    /// consumer's OffsetFetch and ListOffsets for positions, once per poll): when `deadline`
    /// comes before the answer, the request is left in flight instead of being abandoned with
    /// its connection, and the call fails with [`Timeout::Retries`](crate::error::Timeout) (a
    /// deadline, not a broken connection). The same request asked again (same API, version and
    /// bytes) waits for that answer instead of being sent again, so a broker slower than the
    /// caller's timeout still answers one of them, as with Java's consumer, whose poll returns
    /// while its lookups stay in flight. Another request on the link first takes the answer
    /// in if it is there by its own deadline, else reconnects. Only for requests that are
    /// safe to answer late: reads.
    pub(crate) fn request_resumable<R: Request>(
        &mut self,
        deadline: Instant,
        build: impl FnOnce(i16) -> R,
    ) -> Result<R::Response> {
        // Not while a request is left in flight: connecting frees the link for another one.
        let usable = self.wire.as_ref().is_some_and(|w| !w.is_broken());
        if self.resumable.is_none() || !usable {
            self.connect(Some(deadline))?;
        }
        let version = self.version(R::API_KEY)?;
        let req = build(version);
        let body = req.to_bytes(version).map_err(|source| Error::Encode {
            api: R::API_KEY,
            source,
        })?;
        let same =
            |r: &mut Resumable| r.pending.api == R::API_KEY && r.pending.version == version && r.body == body;
        let mut r = match self.resumable.take_if(same) {
            Some(r) => {
                log::debug!(
                    "{} ({:?}): {} resumed",
                    self.addr,
                    self.purpose,
                    R::API_KEY.name()
                );
                r
            }
            None => {
                // Another lookup left in flight, if any: its answer is read off the connection
                // (or the connection goes) and is not used.
                self.free_for_other(deadline);
                self.resumable = None;
                self.connect(Some(deadline))?;
                let pending = self.wire_mut()?.send_pending(&req, version, None);
                let pending = self.settle(pending)?;
                Resumable {
                    body,
                    pending,
                    answer: None,
                }
            }
        };
        let answer = match r.answer.take() {
            Some(b) => Some(b),
            None => {
                let got = self
                    .wire_mut()?
                    .receive(&r.pending, crate::deadline::left(deadline));
                self.settle(got)?
            }
        };
        match answer {
            Some(b) => {
                let decode = <R::Response as Message>::decode;
                self.decode_answer(R::API_KEY, b, version, decode)
            }
            None => {
                let operation = format!(
                    "{} to {} (left in flight: asked again, it takes the answer)",
                    R::API_KEY.name(),
                    self.addr
                );
                self.resumable = Some(r);
                Err(Error::Timeout {
                    which: crate::error::Timeout::Retries,
                    operation,
                    last: None,
                })
            }
        }
    }

    fn wire(&self) -> Result<&dyn Wire> {
        self.wire
            .as_deref()
            .filter(|w| !w.is_broken())
            .ok_or(Error::Closed)
    }

    fn wire_mut(&mut self) -> Result<&mut Box<dyn Wire>> {
        match self.wire.as_mut() {
            Some(w) if !w.is_broken() => Ok(w),
            _ => Err(Error::Closed),
        }
    }

    /// The open connection's ApiVersions table ([`Error::Closed`] when none is open).
    pub(crate) fn versions(&self) -> Result<&BrokerVersions> {
        Ok(self.wire()?.broker_versions())
    }

    /// The broker's ApiVersions table, connecting by `deadline` if needed.
    pub(crate) fn broker_versions(&mut self, deadline: Option<Instant>) -> Result<BrokerVersions> {
        self.connect(deadline)?;
        self.versions().cloned()
    }

    /// The finalized level of feature `name` on the broker, connecting by `deadline` if needed.
    pub(crate) fn finalized_feature(&mut self, name: &str, deadline: Option<Instant>) -> Result<Option<i16>> {
        self.connect(deadline)?;
        Ok(self.wire()?.finalized_feature(name))
    }

    /// [`request`](Self::request) at no higher version than `max`: for an API whose newer
    /// versions mean a protocol the caller has not chosen (transaction protocol v2).
    pub(crate) fn request_capped<R: Request>(
        &mut self,
        deadline: Option<Instant>,
        max: i16,
        build: impl FnOnce(i16) -> R,
    ) -> Result<R::Response> {
        self.free_for_other(deadline.unwrap_or_else(|| crate::deadline::after(self.config.request_timeout)));
        self.connect(deadline)?;
        let version = self.version(R::API_KEY)?;
        let version = match self.versions()?.get(&R::API_KEY.key()) {
            Some(b) if version > max && b.min <= max => max,
            _ if version > max => {
                return Err(Error::UnsupportedVersion {
                    api: R::API_KEY,
                    ours: crate::VersionRange::new(0, max),
                    broker: self.versions()?.get(&R::API_KEY.key()).copied(),
                })
            }
            _ => version,
        };
        let timeout = deadline.map(|d| crate::deadline::clamp(self.config.request_timeout, d));
        self.send_at_with(
            &build(version),
            version,
            timeout,
            <R::Response as Message>::decode,
        )
    }

    /// The version the open connection uses for `api`.
    pub(crate) fn version(&self, api: ApiKey) -> Result<i16> {
        self.config.pick_version(api, self.versions()?)
    }

    /// Checks that the connected broker has a capability (e.g. static membership).
    pub(crate) fn check(&self, cap: &Capability) -> Result<()> {
        versions::check(cap, self.versions()?)
    }

    /// A handle that cuts a request blocked on this link short from another thread.
    pub(crate) fn interrupter(&self) -> Option<Interrupter> {
        self.wire.as_ref().and_then(|w| w.interrupter())
    }

    /// Whether the open connection waits for its requests in flight to drain before it
    /// re-authenticates (KIP-368).
    pub(crate) fn reauthentication_due(&self) -> bool {
        self.wire.as_ref().is_some_and(|w| w.reauthentication_due())
    }

    /// Connects by `deadline` if needed and sends the request `build` makes for the
    /// negotiated version, waiting for the answer no longer than `request.timeout.ms` nor
    /// past `deadline`.
    pub(crate) fn request<R: Request>(
        &mut self,
        deadline: Option<Instant>,
        build: impl FnOnce(i16) -> R,
    ) -> Result<R::Response> {
        self.request_with(deadline, build, <R::Response as Message>::decode)
    }

    /// [`request`](Self::request), reading the answer with `decode` (see
    /// [`send_at_with`](Self::send_at_with)).
    pub(crate) fn request_with<R: Request, T>(
        &mut self,
        deadline: Option<Instant>,
        build: impl FnOnce(i16) -> R,
        decode: impl FnOnce(&mut Decoder<'_>, i16) -> std::result::Result<T, DecodeError>,
    ) -> Result<T> {
        self.free_for_other(deadline.unwrap_or_else(|| crate::deadline::after(self.config.request_timeout)));
        self.connect(deadline)?;
        let version = self.version(R::API_KEY)?;
        let timeout = deadline.map(|d| crate::deadline::clamp(self.config.request_timeout, d));
        self.send_at_with(&build(version), version, timeout, decode)
    }

    /// Connects by `deadline` if needed and writes a request the broker never answers
    /// (Produce with `acks=0`), built for the negotiated version.
    pub(crate) fn send_no_response<R: Request>(
        &mut self,
        deadline: Option<Instant>,
        build: impl FnOnce(i16) -> R,
    ) -> Result<()> {
        self.free_for_other(deadline.unwrap_or_else(Instant::now));
        self.connect(deadline)?;
        let version = self.version(R::API_KEY)?;
        let req = build(version);
        let result = self.wire_mut()?.send_no_response(&req, version);
        self.settle(result)
    }

    /// Sends `req` at `version` on the open connection, waiting up to `timeout` (default
    /// `request.timeout.ms`).
    pub(crate) fn send_at<R: Request>(
        &mut self,
        req: &R,
        version: i16,
        timeout: Option<Duration>,
    ) -> Result<R::Response> {
        self.send_at_with(req, version, timeout, <R::Response as Message>::decode)
    }

    /// [`send_at`](Self::send_at), reading the answer with `decode` instead of decoding
    /// `R::Response`: for an answer so large (Metadata of a big cluster) that its decoded form
    /// should never exist whole. The frame is freed before this returns.
    pub(crate) fn send_at_with<R: Request, T>(
        &mut self,
        req: &R,
        version: i16,
        timeout: Option<Duration>,
        decode: impl FnOnce(&mut Decoder<'_>, i16) -> std::result::Result<T, DecodeError>,
    ) -> Result<T> {
        self.free_for_other(Instant::now());
        let body = self.wire_mut()?.call(req, version, timeout);
        let body = self.settle(body)?;
        self.decode_answer(R::API_KEY, body, version, decode)
    }

    /// Writes `req` at `version` and returns at once; the answer is collected with
    /// [`receive`](Self::receive), possibly over several calls (a JoinGroup the coordinator
    /// holds for a whole rebalance). `timeout` bounds the wait for the answer from now.
    pub(crate) fn send_pending<R: Request>(
        &mut self,
        req: &R,
        version: i16,
        timeout: Option<Duration>,
    ) -> Result<Pending<R>> {
        self.free_for_other(Instant::now());
        let pending = self.wire_mut()?.send_pending(req, version, timeout);
        self.settle(pending).map(Pending::new)
    }

    /// Waits up to `wait` for the answer to `pending`: `Ok(None)` if none has begun to arrive
    /// (the request stays in flight); a response timeout once its own deadline has passed.
    pub(crate) fn receive<R: Request>(
        &mut self,
        pending: &Pending<R>,
        wait: Duration,
    ) -> Result<Option<R::Response>> {
        let body = self.wire_mut()?.receive(pending.raw(), wait);
        let Some(body) = self.settle(body)? else {
            return Ok(None);
        };
        let decode = <R::Response as Message>::decode;
        self.decode_answer(R::API_KEY, body, pending.version(), decode)
            .map(Some)
    }

    /// Reads an answer's `body` with `decode`, freeing the frame before returning; an answer
    /// that does not decode leaves the rest of the stream unaccounted for, so it breaks the
    /// connection.
    fn decode_answer<T>(
        &mut self,
        api: ApiKey,
        body: Bytes,
        version: i16,
        decode: impl FnOnce(&mut Decoder<'_>, i16) -> std::result::Result<T, DecodeError>,
    ) -> Result<T> {
        let decoded = decode(&mut Decoder::new(&body), version);
        drop(body);
        let decoded = decoded.map_err(|source| Error::Decode { api, source });
        if decoded.is_err() {
            if let Some(w) = self.wire.as_mut() {
                w.mark_broken();
            }
        }
        self.settle(decoded)
    }

    /// Keeps a failure's copy and drops the connection if the failure broke it.
    fn settle<T>(&mut self, result: Result<T>) -> Result<T> {
        self.last_used = Instant::now();
        if let Err(e) = &result {
            if let Some(copy) = copy_of(e) {
                self.last_error = Some(copy);
            }
        }
        if self.wire.as_ref().is_some_and(|w| w.is_broken()) {
            log::debug!("{} ({:?}): connection dropped", self.addr, self.purpose);
            self.drop_wire();
        }
        result
    }
}

/// Whether a connection last used at `last_used` has been idle long enough at `now` that the
/// broker may have closed it ([`MAX_IDLE`]).
fn idle_too_long(last_used: Instant, now: Instant) -> bool {
    now.saturating_duration_since(last_used) >= MAX_IDLE
}

/// A copy of `e` to keep as a link's last error, for the errors a retry can get past (the
/// network's and the broker's); `None` for the rest, which are returned and not retried.
/// An I/O error cannot be cloned: its copy has the same kind and text.
pub(crate) fn copy_of(e: &Error) -> Option<Error> {
    Some(match e {
        Error::Io { addr, source } => Error::Io {
            addr: addr.clone(),
            source: std::io::Error::new(source.kind(), source.to_string()),
        },
        Error::Timeout {
            which,
            operation,
            last,
        } => Error::Timeout {
            which: *which,
            operation: operation.clone(),
            last: last.as_deref().and_then(copy_of).map(Box::new),
        },
        Error::Protocol { addr, violation } => Error::Protocol {
            addr: addr.clone(),
            violation: violation.clone(),
        },
        Error::Unresolved { addr, source } => Error::Unresolved {
            addr: addr.clone(),
            source: source
                .as_ref()
                .map(|e| std::io::Error::new(e.kind(), e.to_string())),
        },
        Error::ReconnectBackoff { addr, retry_in, last } => Error::ReconnectBackoff {
            addr: addr.clone(),
            retry_in: *retry_in,
            last: last.as_deref().and_then(copy_of).map(Box::new),
        },
        Error::NoCoordinator { group } => Error::NoCoordinator { group: group.clone() },
        Error::NoLeader { partition } => Error::NoLeader {
            partition: partition.clone(),
        },
        Error::UnknownBroker { id } => Error::UnknownBroker { id: *id },
        Error::NoBrokers => Error::NoBrokers,
        Error::Kafka { api, code, message } => Error::Kafka {
            api: *api,
            code: *code,
            message: message.clone(),
        },
        Error::Decode { api, source } => Error::Decode {
            api: *api,
            source: source.clone(),
        },
        Error::Closed => Error::Closed,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_its_maximum_and_resets_on_success() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(50), ms(1000));
        let now = Instant::now();
        let pauses: Vec<Duration> = (0..7).map(|_| b.failed(now)).collect();
        assert_eq!(
            pauses,
            [ms(50), ms(100), ms(200), ms(400), ms(800), ms(1000), ms(1000)]
        );
        assert_eq!(b.retry_at(), Some(now + ms(1000)));
        b.succeeded();
        assert_eq!((b.failures(), b.retry_at()), (0, None));
        assert_eq!(b.failed(now), ms(50));
        // Far past the cap, the doubling saturates rather than overflowing.
        let mut huge = Backoff::new(Duration::MAX, Duration::MAX);
        for _ in 0..40 {
            huge.failed(now);
        }
        assert_eq!(huge.pause(huge.failures()), Duration::MAX);
    }

    #[test]
    fn a_connection_idle_past_the_brokers_limit_is_not_reused() {
        let t = Instant::now();
        assert!(!idle_too_long(t, t));
        assert!(!idle_too_long(t, t + MAX_IDLE - Duration::from_millis(1)));
        assert!(idle_too_long(t, t + MAX_IDLE));
        // A clock read before `last_used` (another thread's) is not idle time.
        assert!(!idle_too_long(t + Duration::from_secs(1), t));
        assert!(MAX_IDLE < Duration::from_secs(600), "under the broker's default");
    }

    #[test]
    fn a_copied_io_error_keeps_its_kind_address_and_text() {
        let e = Error::Io {
            addr: "b:9092".into(),
            source: std::io::ErrorKind::ConnectionRefused.into(),
        };
        let c = copy_of(&e).unwrap();
        assert_eq!(c.to_string(), e.to_string());
        assert!(
            matches!(&c, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::ConnectionRefused)
        );
        assert!(copy_of(&Error::Tls {
            addr: "b".into(),
            source: "x".into()
        })
        .is_none());
    }
}
