//! `max.poll.interval.ms` on the client's side: the application that stops calling `poll`
//! (a hung or too slow worker) must not keep its partitions for ever. The heartbeat threads
//! keep the session alive on their own, so, as Java's consumer does, they also watch the time
//! since the last poll and take the member out of the group once it passes the interval.
//!
//! [`PollTimer`] is the rule, a pure function of what the clock says and the time;
//! [`PollClock`] is where the member's thread stamps its calls for a heartbeat thread to read
//! (two atomics, so that a poll costs no lock and no message).

use crate::deadline::at;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the application is doing, as far as polling goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Polling {
    /// Inside a call that counts as a poll: never late, whatever it waits for (the call's own
    /// timeout bounds it).
    Now,
    /// The last such call returned at this instant.
    Last(Instant),
}

/// Whether the application has gone longer than `max.poll.interval.ms` without polling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PollTimer {
    interval: Duration,
}

impl PollTimer {
    pub(crate) fn new(interval: Duration) -> Self {
        PollTimer { interval }
    }

    pub(crate) fn interval(&self) -> Duration {
        self.interval
    }

    /// Whether the interval has passed since the last poll returned.
    pub(crate) fn expired(&self, polling: Polling, now: Instant) -> bool {
        match polling {
            Polling::Now => false,
            Polling::Last(t) => now >= at(t, self.interval),
        }
    }

    /// How long until [`expired`](Self::expired) may turn true: during a poll, one whole
    /// interval (the earliest it could, were the poll to return now).
    pub(crate) fn time_to_expiry(&self, polling: Polling, now: Instant) -> Duration {
        match polling {
            Polling::Now => self.interval,
            Polling::Last(t) => at(t, self.interval).saturating_duration_since(now),
        }
    }
}

/// The member's polls, stamped by its thread and read by its heartbeat thread. Calls nest (a
/// consumer's poll calls its member's), so the clock counts them.
#[derive(Debug)]
pub(crate) struct PollClock {
    base: Instant,
    /// Calls in progress.
    calls: AtomicU32,
    /// When the last call returned, in nanoseconds since `base`.
    last: AtomicU64,
}

impl PollClock {
    /// A clock whose last poll is now (a member just built has not been late yet).
    pub(crate) fn new() -> Arc<PollClock> {
        Arc::new(PollClock {
            base: Instant::now(),
            calls: AtomicU32::new(0),
            last: AtomicU64::new(0),
        })
    }

    /// Marks a poll as in progress until the guard is dropped (also on an early return).
    pub(crate) fn enter(self: &Arc<Self>) -> PollGuard {
        self.calls.fetch_add(1, Ordering::SeqCst);
        PollGuard(Arc::clone(self))
    }

    /// What the application is doing now. A poll that starts while this reads may be seen as
    /// not started yet: at worst the member leaves just as the application comes back, and
    /// that poll reports the loss and rejoins (Java's timer has the same window).
    pub(crate) fn polling(&self) -> Polling {
        if self.calls.load(Ordering::SeqCst) > 0 {
            return Polling::Now;
        }
        let nanos = self.last.load(Ordering::SeqCst);
        Polling::Last(self.base + Duration::from_nanos(nanos))
    }
}

/// A poll in progress ([`PollClock::enter`]).
#[derive(Debug)]
pub(crate) struct PollGuard(Arc<PollClock>);

impl Drop for PollGuard {
    fn drop(&mut self) {
        let nanos = u64::try_from(self.0.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
        // The stamp first: a reader that sees no call in progress sees this return too.
        self.0.last.fetch_max(nanos, Ordering::SeqCst);
        self.0.calls.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn late_once_the_interval_has_passed_since_the_last_poll_returned() {
        let t0 = Instant::now();
        let timer = PollTimer::new(2 * S);
        let last = Polling::Last(t0);
        assert!(!timer.expired(last, t0));
        assert!(!timer.expired(last, t0 + 2 * S - Duration::from_millis(1)));
        assert!(timer.expired(last, t0 + 2 * S));
        assert_eq!(timer.time_to_expiry(last, t0 + S / 2), 3 * S / 2);
        assert_eq!(timer.time_to_expiry(last, t0 + 5 * S), Duration::ZERO);
    }

    #[test]
    fn a_poll_in_progress_is_never_late_however_long_it_waits() {
        let t0 = Instant::now();
        let timer = PollTimer::new(2 * S);
        assert!(!timer.expired(Polling::Now, t0 + 3600 * S));
        assert_eq!(timer.time_to_expiry(Polling::Now, t0), 2 * S);
    }

    #[test]
    fn huge_intervals_saturate() {
        let t0 = Instant::now();
        let timer = PollTimer::new(Duration::MAX);
        assert!(!timer.expired(Polling::Last(t0), t0 + 3600 * S));
        assert!(timer.time_to_expiry(Polling::Last(t0), t0) > 3600 * S);
    }

    #[test]
    fn the_clock_counts_nested_polls_and_stamps_the_last_return() {
        let clock = PollClock::new();
        let Polling::Last(start) = clock.polling() else {
            panic!("a new clock is not in a poll")
        };
        let outer = clock.enter();
        let inner = clock.enter();
        drop(inner);
        assert_eq!(clock.polling(), Polling::Now, "the outer poll is still going");
        std::thread::sleep(Duration::from_millis(5));
        drop(outer);
        match clock.polling() {
            Polling::Last(t) => assert!(t >= start + Duration::from_millis(5), "{t:?} {start:?}"),
            Polling::Now => panic!("no poll in progress"),
        }
    }
}
