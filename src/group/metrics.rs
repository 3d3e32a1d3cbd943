//! Per-member figures an operator wants: how long joins take, how often the group rebalances,
//! how fresh the session is.

use crate::client::lock;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A snapshot of a member's metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
}

/// Shared between a member and its heartbeat thread.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    inner: Mutex<(MemberMetrics, Option<Instant>)>,
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

    pub(crate) fn heartbeat_ok(&self, rtt: Duration) {
        self.with(|m, last| {
            m.last_heartbeat_rtt = Some(rtt);
            m.heartbeats += 1;
            *last = Some(Instant::now());
        });
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

    pub(crate) fn snapshot(&self) -> MemberMetrics {
        self.with(|m, last| MemberMetrics {
            last_heartbeat_age: last.map(|t| t.elapsed()),
            ..m.clone()
        })
    }
}
