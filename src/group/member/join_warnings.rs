//! When a join that keeps failing is worth a warning, as a pure value told the time.
//!
//! A retrying member would fill the log at warn (every `retry.backoff.ms` against a closed
//! port), or say nothing at debug. So a failure is warned about at most once per [`EVERY`],
//! the ones in between at debug. A coordinator that is not ready yet (not available, loading,
//! moved) is normal for a few seconds while a new cluster creates `__consumer_offsets` or a
//! coordinator fails over: it stays at debug until it has lasted [`EVERY`].

use std::time::{Duration, Instant};

/// How often a failing join is warned about, and how long an unready coordinator is tolerated
/// before the first warning.
pub(super) const EVERY: Duration = Duration::from_secs(10);

/// The failures of the joins since the last success.
#[derive(Debug, Default)]
pub(in crate::group) struct JoinWarnings {
    /// When the current run of failures started.
    failing_since: Option<Instant>,
    /// When the last warning went out.
    last_warn: Option<Instant>,
    /// Failures since the last warning (that one included).
    failures: u32,
}

impl JoinWarnings {
    /// A join failed at `now`; `coordinator_unready` when only because the coordinator is not
    /// ready yet. `Some(n)` when this one is to be warned about, with the failures it stands for
    /// (itself and those logged at debug since the last warning).
    pub(in crate::group) fn failed(&mut self, now: Instant, coordinator_unready: bool) -> Option<u32> {
        let since = *self.failing_since.get_or_insert(now);
        self.failures += 1;
        let tolerated = coordinator_unready && now.duration_since(since) < EVERY;
        let quiet = self.last_warn.is_some_and(|t| now.duration_since(t) < EVERY);
        if tolerated || quiet {
            return None;
        }
        self.last_warn = Some(now);
        Some(std::mem::take(&mut self.failures))
    }

    /// The member joined: the next failure starts a new run.
    pub(in crate::group) fn joined(&mut self) {
        *self = JoinWarnings::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn an_unreachable_coordinator_is_warned_about_at_once_then_every_interval() {
        let t = Instant::now();
        let mut w = JoinWarnings::default();
        assert_eq!(w.failed(t, false), Some(1));
        assert_eq!(w.failed(t + ms(100), false), None);
        assert_eq!(w.failed(t + ms(200), false), None);
        assert_eq!(w.failed(t + EVERY, false), Some(3));
        assert_eq!(w.failed(t + EVERY + ms(100), false), None);
    }

    #[test]
    fn an_unready_coordinator_is_quiet_until_it_lasts() {
        let t = Instant::now();
        let mut w = JoinWarnings::default();
        for i in 0..50 {
            assert_eq!(w.failed(t + ms(i * 100), true), None, "failure {i}");
        }
        assert_eq!(w.failed(t + EVERY, true), Some(51));
        assert_eq!(w.failed(t + EVERY + ms(100), true), None);
        assert_eq!(w.failed(t + EVERY * 2, true), Some(2));
    }

    #[test]
    fn another_failure_during_an_unready_spell_is_warned_about() {
        let t = Instant::now();
        let mut w = JoinWarnings::default();
        assert_eq!(w.failed(t, true), None);
        assert_eq!(w.failed(t + ms(100), false), Some(2));
    }

    #[test]
    fn a_join_starts_a_new_run() {
        let t = Instant::now();
        let mut w = JoinWarnings::default();
        assert_eq!(w.failed(t, true), None);
        w.joined();
        assert_eq!(
            w.failed(t + EVERY, true),
            None,
            "a new run: the spell starts again"
        );
        assert_eq!(w.failed(t + EVERY * 2, true), Some(2));
    }
}
