//! Heartbeat timing as a pure value that is told the time, so every rule is tested without
//! threads or sleeps.

use crate::deadline::at;
use std::time::{Duration, Instant};

/// When to send the next heartbeat and whether the session has lapsed on our side.
#[derive(Debug, Clone)]
pub struct HeartbeatTimer {
    interval: Duration,
    session_timeout: Duration,
    retry_backoff: Duration,
    next_send: Instant,
    last_success: Instant,
    in_flight_since: Option<Instant>,
}

impl HeartbeatTimer {
    /// A timer whose session starts at `now` (the JoinGroup answer).
    pub fn new(now: Instant, interval: Duration, session_timeout: Duration, retry_backoff: Duration) -> Self {
        HeartbeatTimer {
            interval,
            session_timeout,
            retry_backoff,
            // The JoinGroup answer itself proved the session alive; the first heartbeat is due one
            // interval later.
            next_send: at(now, interval),
            last_success: now,
            in_flight_since: None,
        }
    }

    /// Restarts the session clock (a new generation was joined). The heartbeat thread makes a
    /// new timer for each generation instead; the tests use this to replay one timer.
    #[cfg(test)]
    pub fn reset(&mut self, now: Instant) {
        self.next_send = at(now, self.interval);
        self.last_success = now;
        self.in_flight_since = None;
    }

    /// Whether a heartbeat should go out now.
    pub fn should_send(&self, now: Instant) -> bool {
        self.in_flight_since.is_none() && now >= self.next_send
    }

    /// How long until something is due: the next heartbeat or the session deadline.
    pub fn time_to_next(&self, now: Instant) -> Duration {
        let send = self.next_send.saturating_duration_since(now);
        send.min(self.session_deadline().saturating_duration_since(now))
    }

    /// Records that a heartbeat was sent at `now`.
    pub fn on_sent(&mut self, now: Instant) {
        self.in_flight_since = Some(now);
    }

    /// Records a successful answer; the next heartbeat is one interval after it was sent, so
    /// round-trip time does not stretch the interval.
    pub fn on_success(&mut self, now: Instant) {
        let sent = self.in_flight_since.take().unwrap_or(now);
        self.last_success = now;
        self.next_send = at(sent, self.interval).max(now);
    }

    /// Records a failed attempt; retry after `retry.backoff.ms`, never later than the regular
    /// interval would have been.
    pub fn on_failure(&mut self, now: Instant) {
        self.in_flight_since = None;
        self.next_send = at(now, self.retry_backoff.min(self.interval));
    }

    /// The instant the broker will consider us dead if no heartbeat succeeds before it.
    pub fn session_deadline(&self) -> Instant {
        at(self.last_success, self.session_timeout)
    }

    /// Whether no heartbeat succeeded for a whole session timeout.
    pub fn session_expired(&self, now: Instant) -> bool {
        now >= self.session_deadline()
    }

    /// Time since the last successful heartbeat (or join); only the tests ask.
    #[cfg(test)]
    pub fn since_last_success(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.last_success)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn timer(t0: Instant) -> HeartbeatTimer {
        HeartbeatTimer::new(t0, 3000 * MS, 10_000 * MS, 100 * MS)
    }

    #[test]
    fn first_heartbeat_one_interval_after_join() {
        let t0 = Instant::now();
        let t = timer(t0);
        assert!(!t.should_send(t0));
        assert_eq!(t.time_to_next(t0), 3000 * MS);
        assert!(t.should_send(t0 + 3000 * MS));
    }

    #[test]
    fn interval_counts_from_send_not_answer() {
        let t0 = Instant::now();
        let mut t = timer(t0);
        t.on_sent(t0 + 3000 * MS);
        assert!(!t.should_send(t0 + 3500 * MS), "one in flight at a time");
        t.on_success(t0 + 3200 * MS);
        assert_eq!(t.time_to_next(t0 + 3200 * MS), 2800 * MS);
    }

    #[test]
    fn failure_retries_after_backoff_and_session_lapses() {
        let t0 = Instant::now();
        let mut t = timer(t0);
        t.on_sent(t0 + 3000 * MS);
        t.on_failure(t0 + 3010 * MS);
        assert!(t.should_send(t0 + 3110 * MS));
        assert!(!t.session_expired(t0 + 9999 * MS));
        assert!(t.session_expired(t0 + 10_000 * MS));
        // The retry is due 100 ms after the failure, well before the session deadline...
        assert_eq!(t.time_to_next(t0 + 3050 * MS), 60 * MS);
        // ...and once it is overdue there is nothing to wait for.
        assert_eq!(t.time_to_next(t0 + 9990 * MS), Duration::ZERO);
        t.on_sent(t0 + 9000 * MS);
        t.on_success(t0 + 9100 * MS);
        assert!(!t.session_expired(t0 + 19_000 * MS));
        assert_eq!(t.since_last_success(t0 + 9600 * MS), 500 * MS);
    }

    #[test]
    fn reset_restarts_the_session() {
        let t0 = Instant::now();
        let mut t = timer(t0);
        t.reset(t0 + 20_000 * MS);
        assert!(!t.session_expired(t0 + 25_000 * MS));
        assert_eq!(t.time_to_next(t0 + 20_000 * MS), 3000 * MS);
    }

    #[test]
    fn huge_durations_saturate() {
        let t0 = Instant::now();
        let mut t = HeartbeatTimer::new(t0, Duration::MAX, Duration::MAX, Duration::MAX);
        assert!(!t.should_send(t0 + 3600 * 1000 * MS));
        assert!(!t.session_expired(t0 + 3600 * 1000 * MS));
        t.on_sent(t0);
        t.on_success(t0);
        t.on_failure(t0);
        t.reset(t0);
        assert!(t.time_to_next(t0) > 3600 * 1000 * MS);
    }
}
