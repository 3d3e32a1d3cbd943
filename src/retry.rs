//! The crate's one retry loop: try, pause, try again until a deadline.
//!
//! Every operation that retries (finding a controller, waiting for metadata to settle,
//! ListOffsets, OffsetFetch, OffsetCommit, the producer's wait for a topic) says per attempt
//! whether it is done, failed for good, or may work later; this loop does the rest the same way
//! for all of them: the pause never runs past the deadline, no attempt starts after it, and when
//! time runs out the last error is kept in the [`Timeout::Retries`](crate::Timeout::Retries)
//! error the caller sees, so the cause (an address and `connection refused`, a code) is never
//! lost behind the timeout.
//!
//! The clock and the sleep are behind [`Clock`], so the loop is tested without waiting.

use crate::error::{Error, Result};
use std::time::{Duration, Instant};

/// What one attempt came to, when it did not fail for good (that is an `Err` from the attempt,
/// returned at once).
#[derive(Debug)]
pub(crate) enum Step<T> {
    /// Finished with this value.
    Done(T),
    /// Failed in a way a later attempt may fix; kept as the cause should time run out.
    Retry(Error),
    /// Nothing failed, but the condition polled for does not hold yet (e.g. brokers that do not
    /// show a new topic yet). An earlier attempt's error stays the cause.
    Wait,
}

/// The pause between attempts: fixed, or doubling up to a ceiling. The crate's one backoff
/// schedule: the retry loop below takes its pauses in turn, and a [`Link`]'s reconnect backoff
/// asks for the pause after so many failures.
///
/// [`Link`]: crate::net::link::Link
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    first: Duration,
    max: Duration,
    /// Pauses taken so far (by [`take`](Self::take)).
    taken: u32,
}

impl Backoff {
    /// The same pause after every attempt (`retry.backoff.ms`).
    pub(crate) fn fixed(pause: Duration) -> Self {
        Backoff::exponential(pause, pause)
    }

    /// `first`, doubling after each attempt, never above `max` (`first` is capped by it too).
    pub(crate) fn exponential(first: Duration, max: Duration) -> Self {
        Backoff {
            first: first.min(max),
            max,
            taken: 0,
        }
    }

    /// The pause after `failures` failed attempts in a row: none after none, then the first,
    /// doubled per further failure, at most the maximum (saturating, never overflowing).
    pub(crate) fn after(&self, failures: u32) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        self.first
            .saturating_mul(1 << (failures - 1).min(16))
            .min(self.max)
    }

    /// The pause to take now; the next one doubles if this backoff is exponential.
    fn take(&mut self) -> Duration {
        self.taken = self.taken.saturating_add(1);
        self.after(self.taken)
    }
}

/// The shortest pause between attempts, whatever the backoff says.
const MIN_PAUSE: Duration = Duration::from_millis(1);

/// The time source and the sleep of a retry loop: the system's in the crate, a fake in tests.
pub(crate) trait Clock {
    /// The current instant.
    fn now(&self) -> Instant;
    /// Pauses for `pause`.
    fn sleep(&mut self, pause: Duration);
}

/// The system's monotonic clock and `thread::sleep`.
struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep(&mut self, pause: Duration) {
        std::thread::sleep(pause);
    }
}

/// Why a retry loop stopped without a value.
#[derive(Debug)]
enum Stop {
    /// The attempt failed in a way the caller says no retry fixes.
    Failed(Error),
    /// The deadline passed; the last retriable error, if an attempt gave one.
    Expired(Option<Error>),
}

/// Runs `attempt` until it is done or fails for good, pausing `backoff` between attempts, until
/// `deadline`. At least one attempt is made, whatever the deadline; none starts after it, and no
/// pause runs past it (a `deadline` from [`crate::deadline::after`]`(Duration::MAX)` retries
/// without a limit). When time runs out, the result is
/// [`Error::Timeout`]`{ which: Timeout::Retries, operation: what(), last }` with the last
/// retriable error as `last` (built by [`Error::retries_timeout`]).
pub(crate) fn retry<T>(
    deadline: Instant,
    backoff: Backoff,
    what: impl FnOnce() -> String,
    attempt: impl FnMut() -> Result<Step<T>>,
) -> Result<T> {
    run(&mut SystemClock, deadline, backoff, attempt).map_err(|stop| match stop {
        Stop::Failed(e) => e,
        Stop::Expired(last) => Error::retries_timeout(what(), last),
    })
}

/// [`retry`] for the operations whose contract is to answer with the broker's (or the
/// connection's) own last error when time runs out, not a timeout around it: the producer's
/// wait for a topic (`max.block.ms` ends with `UNKNOWN_TOPIC_OR_PARTITION`) and a commit (ends
/// with the OffsetCommit code). A timeout naming `what()` only if no attempt gave an error.
pub(crate) fn retry_or_last<T>(
    deadline: Instant,
    backoff: Backoff,
    what: impl FnOnce() -> String,
    attempt: impl FnMut() -> Result<Step<T>>,
) -> Result<T> {
    run(&mut SystemClock, deadline, backoff, attempt).map_err(|stop| match stop {
        Stop::Failed(e) | Stop::Expired(Some(e)) => e,
        Stop::Expired(None) => Error::retries_timeout(what(), None),
    })
}

/// The loop itself, on `clock`.
fn run<T>(
    clock: &mut impl Clock,
    deadline: Instant,
    mut backoff: Backoff,
    mut attempt: impl FnMut() -> Result<Step<T>>,
) -> Result<T, Stop> {
    let mut last = None;
    loop {
        match attempt() {
            Ok(Step::Done(v)) => return Ok(v),
            Ok(Step::Retry(e)) => last = Some(e),
            Ok(Step::Wait) => {}
            Err(e) => return Err(Stop::Failed(e)),
        }
        let left = deadline.saturating_duration_since(clock.now());
        // `retry.backoff.ms=0` is valid in Kafka; a floor keeps it from spinning on a CPU.
        let pause = backoff.take().max(MIN_PAUSE).min(left);
        if !pause.is_zero() {
            clock.sleep(pause);
        }
        // An attempt started at the deadline would have no time for its request, and its
        // timeout would replace the cause worth reporting.
        if clock.now() >= deadline {
            return Err(Stop::Expired(last));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Timeout;
    use crate::protocol::ApiKey;
    use crate::KafkaCode;

    /// A clock that moves only when slept on, recording each pause.
    struct FakeClock {
        now: Instant,
        pauses: Vec<Duration>,
    }

    impl FakeClock {
        fn new() -> Self {
            FakeClock {
                now: Instant::now(),
                pauses: Vec::new(),
            }
        }
    }

    impl Clock for FakeClock {
        fn now(&self) -> Instant {
            self.now
        }

        fn sleep(&mut self, pause: Duration) {
            self.pauses.push(pause);
            self.now += pause;
        }
    }

    fn retriable(n: usize) -> Error {
        Error::Kafka {
            api: ApiKey::OffsetFetch,
            code: KafkaCode::CoordinatorLoadInProgress,
            message: Some(format!("try {n}")),
        }
    }

    fn refused() -> Error {
        Error::Io {
            addr: "127.0.0.1:1".into(),
            source: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        }
    }

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn succeeds_on_the_nth_try_pausing_between_tries() {
        let mut clock = FakeClock::new();
        let deadline = clock.now + 1000 * MS;
        let mut tries = 0;
        let got = run(&mut clock, deadline, Backoff::fixed(10 * MS), || {
            tries += 1;
            Ok(if tries < 4 {
                Step::Retry(retriable(tries))
            } else {
                Step::Done(tries)
            })
        });
        assert_eq!(got.unwrap(), 4);
        assert_eq!(clock.pauses, vec![10 * MS; 3]);
    }

    #[test]
    fn a_failure_for_good_is_returned_at_once() {
        let mut clock = FakeClock::new();
        let deadline = clock.now + 1000 * MS;
        let mut tries = 0;
        let got: Result<(), Stop> = run(&mut clock, deadline, Backoff::fixed(10 * MS), || {
            tries += 1;
            if tries == 1 {
                return Ok(Step::Retry(retriable(1)));
            }
            Err(Error::Kafka {
                api: ApiKey::OffsetFetch,
                code: KafkaCode::GroupAuthorizationFailed,
                message: None,
            })
        });
        assert!(
            matches!(&got, Err(Stop::Failed(e)) if e.kafka_code() == Some(KafkaCode::GroupAuthorizationFailed)),
            "{got:?}"
        );
        assert_eq!(tries, 2);
        assert_eq!(clock.pauses.len(), 1);
    }

    #[test]
    fn running_out_of_time_keeps_the_last_error() {
        let mut clock = FakeClock::new();
        let deadline = clock.now + 95 * MS;
        let mut tries = 0;
        let got: Result<(), Stop> = run(&mut clock, deadline, Backoff::fixed(10 * MS), || {
            tries += 1;
            Ok(if tries == 1 {
                Step::Retry(refused())
            } else {
                Step::Retry(retriable(tries))
            })
        });
        // Tries at 0, 10, ... 90 ms; the last pause is cut to the 5 ms left, and no try starts
        // at the deadline.
        assert_eq!(tries, 10);
        assert_eq!(clock.pauses.last(), Some(&(5 * MS)));
        assert_eq!(clock.now, deadline);
        match got {
            Err(Stop::Expired(Some(e))) => assert_eq!(e.to_string(), retriable(10).to_string()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_wait_after_an_error_keeps_that_error_as_the_cause() {
        let mut clock = FakeClock::new();
        let deadline = clock.now + 50 * MS;
        let mut tries = 0;
        let got: Result<(), Stop> = run(&mut clock, deadline, Backoff::fixed(10 * MS), || {
            tries += 1;
            Ok(if tries == 1 {
                Step::Retry(refused())
            } else {
                Step::Wait
            })
        });
        assert!(
            matches!(got, Err(Stop::Expired(Some(Error::Io { .. })))),
            "{got:?}"
        );
        // Only waits: no cause to give.
        let mut clock = FakeClock::new();
        let deadline = clock.now + 50 * MS;
        let got: Result<(), Stop> = run(&mut clock, deadline, Backoff::fixed(10 * MS), || Ok(Step::Wait));
        assert!(matches!(got, Err(Stop::Expired(None))), "{got:?}");
    }

    #[test]
    fn the_backoff_never_sleeps_past_the_deadline() {
        for (timeout, backoff) in [
            (30 * MS, Backoff::fixed(Duration::MAX)),
            (30 * MS, Backoff::fixed(7 * MS)),
            (1000 * MS, Backoff::exponential(MS, 64 * MS)),
            (Duration::ZERO, Backoff::fixed(10 * MS)),
        ] {
            let mut clock = FakeClock::new();
            let deadline = crate::deadline::at(clock.now, timeout);
            let mut tries = 0;
            let got: Result<(), Stop> = run(&mut clock, deadline, backoff, || {
                tries += 1;
                Ok(Step::Retry(refused()))
            });
            assert!(matches!(got, Err(Stop::Expired(Some(_)))), "{got:?}");
            assert_eq!(clock.now, deadline, "{timeout:?} {backoff:?}");
            assert!(tries >= 1, "at least one try");
        }
    }

    #[test]
    fn a_zero_backoff_still_pauses_a_millisecond() {
        let mut clock = FakeClock::new();
        let deadline = clock.now + 5 * MS;
        let got: Result<(), Stop> = run(&mut clock, deadline, Backoff::fixed(Duration::ZERO), || {
            Ok(Step::Retry(retriable(0)))
        });
        assert!(matches!(got, Err(Stop::Expired(Some(_)))));
        assert_eq!(clock.pauses, [MS; 5]);
    }

    #[test]
    fn an_exponential_backoff_doubles_up_to_its_ceiling() {
        let mut clock = FakeClock::new();
        let deadline = clock.now + 1000 * MS;
        let mut tries = 0;
        run(
            &mut clock,
            deadline,
            Backoff::exponential(10 * MS, 50 * MS),
            || {
                tries += 1;
                Ok(if tries < 6 { Step::Wait } else { Step::Done(()) })
            },
        )
        .unwrap();
        assert_eq!(clock.pauses, [10, 20, 40, 50, 50].map(|n| n * MS));
        // A first pause above the ceiling starts at the ceiling.
        let mut b = Backoff::exponential(Duration::MAX, 50 * MS);
        assert_eq!(b.take(), 50 * MS);
    }

    #[test]
    fn an_unlimited_deadline_does_not_panic() {
        let mut clock = FakeClock::new();
        let deadline = crate::deadline::at(clock.now, Duration::MAX);
        let mut tries = 0;
        let got = run(
            &mut clock,
            deadline,
            Backoff::exponential(MS, Duration::MAX),
            || {
                tries += 1;
                Ok(if tries < 3 {
                    Step::Retry(refused())
                } else {
                    Step::Done(tries)
                })
            },
        );
        assert_eq!(got.unwrap(), 3);
        assert_eq!(clock.pauses, [MS, 2 * MS]);
        // An unlimited backoff too: the one pause is what is left, about a century.
        let mut clock = FakeClock::new();
        let deadline = crate::deadline::at(clock.now, Duration::MAX);
        let got: Result<(), Stop> = run(&mut clock, deadline, Backoff::fixed(Duration::MAX), || {
            Ok(Step::Retry(refused()))
        });
        assert!(matches!(got, Err(Stop::Expired(Some(_)))), "{got:?}");
        assert_eq!(clock.now, deadline);
    }

    #[test]
    fn the_public_shapes_on_the_system_clock() {
        // Tiny durations: the point is the error's shape, and that it ends by the deadline.
        let started = Instant::now();
        let deadline = crate::deadline::after(20 * MS);
        let e = retry::<()>(
            deadline,
            Backoff::fixed(MS),
            || "finding the controller".into(),
            || Ok(Step::Retry(refused())),
        )
        .unwrap_err();
        assert!(Instant::now() >= deadline);
        assert!(
            started.elapsed() < 20 * MS + crate::deadline::LOAD_MARGIN,
            "{:?}",
            started.elapsed()
        );
        match &e {
            Error::Timeout {
                which: Timeout::Retries,
                operation,
                last: Some(last),
            } => {
                assert_eq!(operation, "finding the controller");
                assert!(matches!(**last, Error::Io { .. }), "{last}");
            }
            other => panic!("{other:?}"),
        }
        assert!(e.to_string().contains("127.0.0.1:1"), "{e}");
        assert!(std::error::Error::source(&e).is_some());

        // The last error itself, for the callers whose contract it is.
        let deadline = crate::deadline::after(5 * MS);
        let e = retry_or_last::<()>(
            deadline,
            Backoff::fixed(MS),
            || "unused".into(),
            || Ok(Step::Retry(retriable(0))),
        )
        .unwrap_err();
        assert_eq!(e.kafka_code(), Some(KafkaCode::CoordinatorLoadInProgress));
        // With nothing to give, a timeout naming the operation.
        let e = retry_or_last::<()>(
            crate::deadline::after(MS),
            Backoff::fixed(MS),
            || "op".into(),
            || Ok(Step::Wait),
        )
        .unwrap_err();
        assert!(
            matches!(&e, Error::Timeout { which: Timeout::Retries, operation, last: None } if operation == "op"),
            "{e:?}"
        );
        // A failure for good passes through both unchanged.
        let e = retry::<()>(
            crate::deadline::after(Duration::MAX),
            Backoff::fixed(MS),
            || "op".into(),
            || Err(Error::Closed),
        )
        .unwrap_err();
        assert!(matches!(e, Error::Closed), "{e:?}");
    }
}
