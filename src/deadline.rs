//! Deadlines that cannot overflow.
//!
//! Callers pass timeouts such as `Duration::MAX` to mean "wait forever"; `Instant + Duration`
//! panics when the sum does not fit, so every deadline in the crate is made here, saturating at
//! a point far enough away to mean "never" (about a century).

use crate::error::{Error, Result};
use std::time::{Duration, Instant};

/// Far enough to mean "never", near enough that `Instant` holds it on every platform.
const NEVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// What a unit test adds to a bound the code promises (a configured timeout) before calling it
/// broken: room for a loaded 2-core machine, where a thread may wait seconds to run. A test whose
/// point is that something returns well before another timeout makes that timeout larger than
/// its bound plus this. (`tests/it/support` has the same margin for the integration tests.)
#[cfg(test)]
pub(crate) const LOAD_MARGIN: Duration = Duration::from_secs(10);

/// The instant `timeout` from now, saturating at about a century from now.
pub(crate) fn after(timeout: Duration) -> Instant {
    at(Instant::now(), timeout)
}

/// `from + timeout`, saturating at about a century after `from`.
pub(crate) fn at(from: Instant, timeout: Duration) -> Instant {
    from.checked_add(timeout.min(NEVER))
        .or_else(|| from.checked_add(Duration::from_secs(u32::MAX as u64)))
        .unwrap_or(from)
}

/// What is left before `deadline` (zero once it has passed).
pub(crate) fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

/// A single request's timeout within an operation that must end by `deadline`: the request's own
/// timeout, or what is left if that is shorter, so a retrying call never overshoots its limit by
/// up to a request timeout. Never below one millisecond, which a socket read timeout of zero
/// would read as "no timeout".
pub(crate) fn clamp(request_timeout: Duration, deadline: Instant) -> Duration {
    request_timeout.min(left(deadline)).max(Duration::from_millis(1))
}

/// The rule of Kafka's INT-typed millisecond properties (`request.timeout.ms`,
/// `session.timeout.ms`, `delivery.timeout.ms` …): the value must fit in an `i32` of
/// milliseconds, as it does in Kafka's own config and, for some, on the wire.
pub(crate) fn check_int_ms(property: &'static str, d: Duration) -> Result<()> {
    if d.as_millis() > i32::MAX as u128 {
        return Err(Error::Config {
            property,
            problem: format!(
                "{} ms is above the largest value Kafka allows ({} ms, about 24.8 days)",
                d.as_millis(),
                i32::MAX
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_timeouts_saturate_instead_of_panicking() {
        let now = Instant::now();
        for t in [Duration::MAX, Duration::from_secs(u64::MAX), NEVER * 2] {
            let d = at(now, t);
            assert!(d > now + Duration::from_secs(50 * 365 * 24 * 3600), "{t:?}");
            assert!(left(d) > Duration::from_secs(3600));
        }
        assert_eq!(at(now, Duration::from_secs(1)), now + Duration::from_secs(1));
        assert_eq!(at(now, Duration::ZERO), now);
    }

    #[test]
    fn int_ms_properties_fit_in_i32() {
        let max = Duration::from_millis(i32::MAX as u64);
        assert!(check_int_ms("p", max).is_ok());
        assert!(check_int_ms("p", Duration::ZERO).is_ok());
        for d in [
            max + Duration::from_millis(1),
            Duration::MAX,
            Duration::from_secs(u64::MAX),
        ] {
            assert!(
                matches!(check_int_ms("p", d), Err(Error::Config { property: "p", .. })),
                "{d:?}"
            );
        }
    }

    #[test]
    fn requests_are_clamped_to_the_time_left() {
        let passed = Instant::now() - Duration::from_millis(5);
        assert_eq!(left(passed), Duration::ZERO);
        assert_eq!(clamp(Duration::from_secs(30), passed), Duration::from_millis(1));
        // What is left, less however long this thread waited to run since `after`.
        let soon = after(3 * LOAD_MARGIN);
        let c = clamp(6 * LOAD_MARGIN, soon);
        assert!(c <= 3 * LOAD_MARGIN && c > 2 * LOAD_MARGIN, "{c:?}");
        assert_eq!(
            clamp(Duration::from_secs(3), after(Duration::MAX)),
            Duration::from_secs(3)
        );
    }
}
