//! The seam under a [`Link`](super::link::Link): what a link needs from a broker connection
//! ([`Wire`]) and how it opens one ([`Dialer`]). The real implementation is
//! [`Connection`](super::Connection) over TCP (with TLS, SASL and KIP-368 inside it); unit
//! tests plug in the scripted broker of `net/script.rs` instead.
//!
//! Both traits are object-safe, so a link holds a `Box<dyn Wire>` and the client an
//! `Arc<dyn Dialer>`: requests cross the seam as [`Outgoing`] (encode yourself into the frame)
//! and answers as the body bytes after the response header, decoded by the link with the
//! generated codecs.

use crate::error::Result;
use crate::net::connection::{Connection, ConnectionConfig, Interrupter};
use crate::net::versions::BrokerVersions;
use crate::protocol::{ApiKey, EncodeError, Request, Segments};
use bytes::Bytes;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A request as it crosses the seam: its API, its header versions, and its body's encoding.
/// Every generated request is one.
pub(crate) trait Outgoing {
    /// The API key.
    fn api(&self) -> ApiKey;
    /// The RequestHeader version for `version`.
    fn header_version(&self, version: i16) -> i16;
    /// The ResponseHeader version for `version`.
    fn response_header_version(&self, version: i16) -> i16;
    /// Appends the body at `version` to `buf` (large values by reference).
    fn encode_into<'a>(&'a self, version: i16, buf: &mut Segments<'a>) -> Result<(), EncodeError>;
}

impl<R: Request> Outgoing for R {
    fn api(&self) -> ApiKey {
        R::API_KEY
    }
    fn header_version(&self, version: i16) -> i16 {
        R::header_version(version)
    }
    fn response_header_version(&self, version: i16) -> i16 {
        R::response_header_version(version)
    }
    fn encode_into<'a>(&'a self, version: i16, buf: &mut Segments<'a>) -> Result<(), EncodeError> {
        self.encode(version, buf)
    }
}

/// A request written with [`Wire::send_pending`] whose answer is still to come.
#[derive(Debug, Clone)]
pub(crate) struct RawPending {
    pub(crate) api: ApiKey,
    pub(crate) correlation_id: i32,
    pub(crate) version: i16,
    pub(crate) header_version: i16,
    pub(crate) deadline: Instant,
}

/// One open, version-negotiated broker connection. Any error from a call may leave it
/// broken ([`is_broken`](Self::is_broken)); its owner then drops it.
pub(crate) trait Wire: Send + fmt::Debug {
    /// The broker's ApiVersions table.
    fn broker_versions(&self) -> &BrokerVersions;
    /// The cluster-wide level of feature `name` (e.g. `transaction.version`) its ApiVersions
    /// answer gave (v3+), if finalized.
    fn finalized_feature(&self, _name: &str) -> Option<i16> {
        None
    }
    /// Whether an earlier error made it unusable.
    fn is_broken(&self) -> bool;
    /// Marks it unusable (an answer that did not decode leaves the stream unaccounted for).
    fn mark_broken(&mut self);
    /// Sends `req` at `version` and returns the body of its answer, waiting up to `timeout`
    /// (default `request.timeout.ms`).
    fn call(&mut self, req: &dyn Outgoing, version: i16, timeout: Option<Duration>) -> Result<Bytes>;
    /// Writes `req` and returns at once; the answer comes through [`receive`](Self::receive).
    fn send_pending(
        &mut self,
        req: &dyn Outgoing,
        version: i16,
        timeout: Option<Duration>,
    ) -> Result<RawPending>;
    /// Waits up to `wait` for the answer to `pending`: `None` if none has begun to arrive.
    fn receive(&mut self, pending: &RawPending, wait: Duration) -> Result<Option<Bytes>>;
    /// Writes a request the broker never answers (Produce with `acks=0`).
    fn send_no_response(&mut self, req: &dyn Outgoing, version: i16) -> Result<()>;
    /// A handle that cuts a blocked call short from another thread.
    fn interrupter(&self) -> Option<Interrupter>;
    /// Also counts each later re-authentication (KIP-368) in `sink`.
    fn count_reauthentications_in(&mut self, sink: Arc<AtomicU64>);
    /// Whether a re-authentication waits for the requests in flight to drain.
    fn reauthentication_due(&self) -> bool {
        false
    }
}

/// Opens [`Wire`]s. One per client, shared by all its links.
pub(crate) trait Dialer: Send + Sync + fmt::Debug {
    /// Connects to `addr` and negotiates versions (and TLS, SASL) by `deadline`, handing
    /// `watch` an [`Interrupter`] while the handshake runs (and `None` once it is over).
    fn dial(
        &self,
        addr: &str,
        config: &ConnectionConfig,
        deadline: Instant,
        watch: &dyn Fn(Option<Interrupter>),
    ) -> Result<Box<dyn Wire>>;
}

/// The real dialer: TCP, then [`Connection`]'s handshake.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Tcp;

impl Dialer for Tcp {
    fn dial(
        &self,
        addr: &str,
        config: &ConnectionConfig,
        deadline: Instant,
        watch: &dyn Fn(Option<Interrupter>),
    ) -> Result<Box<dyn Wire>> {
        Ok(Box::new(Connection::connect_watched(
            addr, config, deadline, watch,
        )?))
    }
}

impl Wire for Connection {
    fn broker_versions(&self) -> &BrokerVersions {
        Connection::broker_versions(self)
    }
    fn finalized_feature(&self, name: &str) -> Option<i16> {
        Connection::finalized_feature(self, name)
    }
    fn is_broken(&self) -> bool {
        Connection::is_broken(self)
    }
    fn mark_broken(&mut self) {
        self.set_broken();
    }
    fn call(&mut self, req: &dyn Outgoing, version: i16, timeout: Option<Duration>) -> Result<Bytes> {
        self.call_raw(req, version, timeout)
    }
    fn send_pending(
        &mut self,
        req: &dyn Outgoing,
        version: i16,
        timeout: Option<Duration>,
    ) -> Result<RawPending> {
        self.send_pending_raw(req, version, timeout)
    }
    fn receive(&mut self, pending: &RawPending, wait: Duration) -> Result<Option<Bytes>> {
        self.receive_raw(pending, wait)
    }
    fn send_no_response(&mut self, req: &dyn Outgoing, version: i16) -> Result<()> {
        self.send_no_response_raw(req, version)
    }
    fn interrupter(&self) -> Option<Interrupter> {
        Connection::interrupter(self)
    }
    fn count_reauthentications_in(&mut self, sink: Arc<AtomicU64>) {
        Connection::count_reauthentications_in(self, sink)
    }
    fn reauthentication_due(&self) -> bool {
        Connection::reauthentication_due(self)
    }
}
