//! Per-member figures an operator wants: how long joins take, how often the group rebalances,
//! how fresh the session is, how often its connections re-authenticated.

use crate::client::lock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A snapshot of a member's metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemberMetrics {
    /// Duration of the last JoinGroup round trip(s), including KIP-394's second one.
    pub last_join: Option<Duration>,
    /// Duration of the last SyncGroup round trip.
    pub last_sync: Option<Duration>,
    /// Round-trip time of the last successful heartbeat.
    pub last_heartbeat_rtt: Option<Duration>,
    /// Heartbeats answered without error.
    pub heartbeats: u64,
    /// Heartbeats that failed (error code or connection).
    pub heartbeat_failures: u64,
    /// Completed joins (each is one rebalance this member took part in).
    pub joins: u64,
    /// Joins after which the generation differed from the previous one this member held.
    pub rebalances: u64,
    /// Time since the last successful heartbeat (or join).
    pub last_heartbeat_age: Option<Duration>,
    /// JoinGroup answers of `MEMBER_ID_REQUIRED` (KIP-394: the second round trip of a new
    /// dynamic member on brokers 2.2+).
    pub member_id_required: u64,
    /// Joins as a restarted static leader told to keep the current assignment (KIP-814
    /// `skip_assignment`, JoinGroup v9).
    pub skipped_assignments: u64,
    /// KIP-368 re-authentications of the member's connections to the coordinator (its own,
    /// which carries joins and commits, and its heartbeat thread's), over the member's life.
    /// A broker with `connections.max.reauth.ms` set, or an OAUTHBEARER token that expires,
    /// gives each SASL connection a session lifetime; the connection authenticates again
    /// before it ends, or the broker would close it. Zero without SASL or without a lifetime.
    pub reauthentications: u64,
}

/// Shared between a member and its heartbeat thread.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    inner: Mutex<(MemberMetrics, Option<Instant>)>,
    /// When a request last proved the session alive: the member's own check that its session
    /// may have expired (the heartbeat thread can be stuck in a request at that moment).
    proven: Mutex<Option<Instant>>,
    /// Shared with the member's connections, which count their re-authentications into it
    /// themselves: a connection is replaced on reconnect, the count must outlive it.
    reauthentications: Arc<AtomicU64>,
}

impl Metrics {
    fn with<R>(&self, f: impl FnOnce(&mut MemberMetrics, &mut Option<Instant>) -> R) -> R {
        let (m, last) = &mut *lock(&self.inner);
        f(m, last)
    }

    pub(crate) fn joined(&self, join: Duration, sync: Duration, rebalanced: bool) {
        self.with(|m, last| {
            m.last_join = Some(join);
            m.last_sync = Some(sync);
            m.joins += 1;
            m.rebalances += u64::from(rebalanced);
            *last = Some(Instant::now());
        });
    }

    /// A heartbeat sent at `sent` was answered without error after `rtt`.
    pub(crate) fn heartbeat_ok(&self, rtt: Duration, sent: Instant) {
        self.with(|m, last| {
            m.last_heartbeat_rtt = Some(rtt);
            m.heartbeats += 1;
            *last = Some(Instant::now());
        });
        self.session_proven(sent);
    }

    /// The coordinator saw this member's session alive at `at` (a request that proves it, such
    /// as a heartbeat or a SyncGroup, was sent then and answered without error).
    pub(crate) fn session_proven(&self, at: Instant) {
        let mut proven = lock(&self.proven);
        if !proven.is_some_and(|p| p >= at) {
            *proven = Some(at);
        }
    }

    /// Since when the session may have been dead on the broker's side, counted from the last
    /// request that proved it alive; `None` before any.
    pub(crate) fn session_age(&self) -> Option<Duration> {
        lock(&self.proven).map(|p| p.elapsed())
    }

    pub(crate) fn member_id_required(&self) {
        self.with(|m, _| m.member_id_required += 1);
    }

    pub(crate) fn skipped_assignment(&self) {
        self.with(|m, _| m.skipped_assignments += 1);
    }

    pub(crate) fn heartbeat_failed(&self) {
        self.with(|m, _| m.heartbeat_failures += 1);
    }

    /// The counter each of the member's connections adds its re-authentications to
    /// ([`Connection::count_reauthentications_in`](crate::net::Connection::count_reauthentications_in)).
    pub(crate) fn reauthentication_counter(&self) -> Arc<AtomicU64> {
        self.reauthentications.clone()
    }

    pub(crate) fn snapshot(&self) -> MemberMetrics {
        self.with(|m, last| MemberMetrics {
            last_heartbeat_age: last.map(|t| t.elapsed()),
            reauthentications: self.reauthentications.load(Ordering::Relaxed),
            ..m.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reauthentications_counted_by_connections_outlive_them() {
        let metrics = Metrics::default();
        // Two connections in turn (a reconnect replaces the first), each adding its own.
        for _ in 0..2 {
            let counter = metrics.reauthentication_counter();
            counter.fetch_add(3, Ordering::Relaxed);
            drop(counter);
        }
        assert_eq!(metrics.snapshot().reauthentications, 6);
    }
}
