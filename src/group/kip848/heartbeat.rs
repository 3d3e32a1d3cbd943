//! The heartbeat thread of a `consumer`-protocol member: sends ConsumerGroupHeartbeat at the
//! interval the coordinator asks for (at once when the member must acknowledge or rejoin),
//! applies each answer to the shared [`Membership`], and queues what the application must
//! see. The member's own thread (its `poll`) takes those steps, tells the membership when the
//! application is done with revoked partitions, and wakes this thread to acknowledge.
//!
//! Under this protocol the heartbeat *is* the rebalance, so, unlike the classic thread, this
//! one owns the member's whole conversation with the coordinator about membership; commits and
//! offset lookups go over the member's other connection.

use super::{answer, request, share_answer, share_request, Answer, Heartbeat, Membership, Phase, Step};
use crate::client::{lock, Broker, Client};
use crate::error::{Error, Result};
use crate::group::metrics::Metrics;
use crate::group::poll_timer::{PollClock, PollTimer};
use crate::net::link::{Link, Purpose};
use crate::protocol::ApiKey;
use crate::worker::{Stop, Worker};
use crossbeam_channel::{Receiver, Sender};
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Which heartbeat the thread sends: a consumer group's (KIP-848) or a share group's
/// (KIP-932), whose membership rules are the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeartbeatApi {
    /// ConsumerGroupHeartbeat.
    ConsumerGroup,
    /// ShareGroupHeartbeat.
    ShareGroup,
}

impl HeartbeatApi {
    fn key(self) -> ApiKey {
        match self {
            HeartbeatApi::ConsumerGroup => ApiKey::ConsumerGroupHeartbeat,
            HeartbeatApi::ShareGroup => ApiKey::ShareGroupHeartbeat,
        }
    }

    /// The thread's name prefix (a thread name is cut at 15 bytes, so the group comes last).
    fn thread_prefix(self) -> &'static str {
        match self {
            HeartbeatApi::ConsumerGroup => "kafka-cghb-",
            HeartbeatApi::ShareGroup => "kafka-shhb-",
        }
    }
}

/// What the member's thread and the heartbeat thread share, under one lock.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The protocol state; every change goes through it.
    pub(crate) membership: Membership,
    /// What the application must see, oldest first ([`Step::Revoke`], [`Step::Assign`],
    /// [`Step::Lose`], [`Step::Fatal`]).
    pub(crate) steps: VecDeque<Step>,
    /// The coordinator the last heartbeat went to; `None` while it is being found.
    pub(crate) coordinator: Option<Broker>,
    /// Why the last heartbeat got no answer, until one does: what a join that times out
    /// reports.
    pub(crate) last_error: Option<Error>,
    /// When the next heartbeat is due.
    next: Instant,
    /// Test hook: no heartbeat goes out while set, as if the process hung.
    pub(crate) frozen: bool,
}

#[derive(Debug)]
struct Inner {
    shared: Mutex<Shared>,
    wake: Condvar,
}

/// The member's end of the thread.
#[derive(Debug)]
pub(crate) struct HeartbeatThread {
    inner: Arc<Inner>,
    /// A token whenever steps were queued or the membership changed phase.
    pub(crate) notices: Receiver<()>,
    /// Disconnected once the thread has ended.
    thread: Worker,
}

impl HeartbeatThread {
    /// Starts heartbeating at once for `membership`, at `coordinator` if known, over `link` if
    /// one is open to it already (the join then costs no second connection).
    // Each argument is a separate thing the thread owns from its start; a struct to carry
    // them would only be built here.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn spawn(
        api: HeartbeatApi,
        client: Client,
        group: String,
        membership: Membership,
        coordinator: Option<Broker>,
        link: Option<Link>,
        retry_backoff: Duration,
        metrics: Arc<Metrics>,
        poll: (Arc<PollClock>, PollTimer),
    ) -> std::io::Result<HeartbeatThread> {
        let inner = Arc::new(Inner {
            shared: Mutex::new(Shared {
                membership,
                steps: VecDeque::new(),
                coordinator,
                last_error: None,
                next: Instant::now(),
                frozen: false,
            }),
            wake: Condvar::new(),
        });
        // One token is enough: the member drains everything queued when it wakes.
        let (notice_tx, notices) = crossbeam_channel::bounded(1);
        // The thread waits on the condition variable, checking the stop under the lock: taking
        // it to notify makes sure the wake-up cannot fall between the check and the wait.
        let woken = inner.clone();
        let stop = Arc::new(Stop::with_waker(move || {
            let _held = lock(&woken.shared);
            woken.wake.notify_all();
        }));
        let body = Heartbeats {
            api,
            inner: inner.clone(),
            stop: stop.clone(),
            client,
            group: group.clone(),
            retry_backoff,
            metrics,
            notices: notice_tx,
            link,
            poll_clock: poll.0,
            poll_timer: poll.1,
        };
        let thread = Worker::spawn(
            format!("{}{group}", api.thread_prefix()),
            Some(256 * 1024),
            stop,
            move || body.run(),
        )?;
        Ok(HeartbeatThread {
            inner,
            notices,
            thread,
        })
    }

    /// The shared state; hold it briefly (the thread takes it to send and after each answer).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Shared> {
        lock(&self.inner.shared)
    }

    /// Sends the next heartbeat now rather than at the interval (an acknowledgement, a leave).
    pub(crate) fn heartbeat_now(&self) {
        self.lock().next = Instant::now();
        self.inner.wake.notify_all();
    }

    /// Waits until the membership has left (its leave heartbeat answered, or a fatal error),
    /// at most until `deadline`; whether it has.
    pub(crate) fn wait_left(&self, deadline: Instant) -> bool {
        loop {
            if *self.lock().membership.phase() == Phase::Left {
                return true;
            }
            match self.notices.recv_deadline(deadline) {
                Ok(()) => {}
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    return *self.lock().membership.phase() == Phase::Left
                }
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return false,
            }
        }
    }

    /// Stops the thread and waits for it, at most `bound` (see [`Worker::shutdown`]): a
    /// heartbeat in flight is cut off, and a thread in a coordinator lookup or a connect is not
    /// waited for (it ends by itself when the step does, sending nothing more).
    pub(crate) fn shutdown(&mut self, bound: Duration) {
        self.thread.shutdown(bound);
    }
}

struct Heartbeats {
    api: HeartbeatApi,
    inner: Arc<Inner>,
    stop: Arc<Stop>,
    client: Client,
    group: String,
    retry_backoff: Duration,
    metrics: Arc<Metrics>,
    notices: Sender<()>,
    link: Option<Link>,
    /// The application's polls, and how late they may be (`max.poll.interval.ms`).
    poll_clock: Arc<PollClock>,
    poll_timer: PollTimer,
}

/// Runs `step`, which a stop cannot cut short, marked as such (see [`Stop::uninterruptible`]);
/// [`Error::Closed`] if stopped before or during it.
fn uninterruptible<T>(stop: &Stop, step: impl FnOnce() -> Result<T>) -> Result<T> {
    let result = stop.uninterruptible(step).ok_or(Error::Closed)?;
    if stop.requested() {
        return Err(Error::Closed);
    }
    result
}

/// Once left, the thread only waits for its stop; this long between needless wake-ups.
const IDLE: Duration = Duration::from_secs(3600);

impl Heartbeats {
    fn run(mut self) {
        loop {
            let Some((hb, coordinator)) = self.next_heartbeat() else {
                return;
            };
            let sent = Instant::now();
            log::trace!(
                "group {}: {} epoch {} owned {:?}",
                self.group,
                self.api.key().name(),
                hb.member_epoch,
                hb.owned
            );
            let result = self.send(coordinator, &hb);
            if !self.apply(result, sent) {
                return;
            }
            let _ = self.notices.try_send(());
        }
    }

    /// Waits until a heartbeat is due and returns it, or `None` once stopped.
    fn next_heartbeat(&self) -> Option<(Heartbeat, Option<Broker>)> {
        let mut shared = lock(&self.inner.shared);
        loop {
            if self.stop.requested() {
                return None;
            }
            let now = Instant::now();
            let watched = shared.membership.in_group() && !shared.frozen;
            let polling = self.poll_clock.polling();
            if watched && self.poll_timer.expired(polling, now) {
                self.leave_late(&mut shared, now);
            }
            let left = *shared.membership.phase() == Phase::Left || shared.frozen;
            if !left && now >= shared.next {
                if let Some(hb) = shared.membership.heartbeat() {
                    return Some((hb, shared.coordinator.clone()));
                }
            }
            let wait = if shared.frozen {
                Duration::from_millis(50)
            } else if left {
                IDLE
            } else if watched {
                let late = self.poll_timer.time_to_expiry(polling, now);
                shared.next.saturating_duration_since(now).min(late)
            } else {
                shared.next.saturating_duration_since(now)
            };
            shared = self
                .inner
                .wake
                .wait_timeout(shared, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The application has not polled for `max.poll.interval.ms`: as Java's consumer does, the
    /// member leaves at once (epoch -1; a static member -2, so that the coordinator keeps its
    /// partitions for it until its session times out), and its partitions are reported lost;
    /// it rejoins at its next poll.
    fn leave_late(&self, shared: &mut Shared, now: Instant) {
        let lost = shared.membership.leave_late();
        log::warn!(
            "group {}: the application has not polled within max.poll.interval.ms ({:?}); \
             leaving the group{} so that its {} partitions can move; it rejoins at its next \
             poll. Poll more often, or raise max.poll.interval.ms or lower max.poll.records",
            self.group,
            self.poll_timer.interval(),
            match shared.membership.leave_epoch() {
                Some(epoch) if epoch == super::STATIC_LEAVE_EPOCH =>
                    " (static: the coordinator keeps them for it until its session times out)",
                _ => "",
            },
            lost.values().map(|ps| ps.len()).sum::<usize>()
        );
        if !lost.is_empty() {
            shared.steps.push_back(Step::Lose(lost));
        }
        shared.next = now;
        let _ = self.notices.try_send(());
    }

    /// Sends `hb` to `coordinator` (found first if unknown) and reads the answer, within
    /// `request.timeout.ms`.
    fn send(&mut self, coordinator: Option<Broker>, hb: &Heartbeat) -> Result<(Broker, Answer)> {
        let deadline = crate::deadline::after(self.client.connection_config().request_timeout);
        let stop = &self.stop;
        let broker = match coordinator {
            Some(b) => b,
            None => uninterruptible(stop, || self.client.lookup_coordinator_by(&self.group, deadline))?,
        };
        let link = self.link.get_or_insert_with(|| {
            let mut link = self.client.link(Purpose::Coordinator, broker.addr());
            link.count_reauthentications_in(self.metrics.reauthentication_counter());
            link
        });
        // A no-op for the same address; another coordinator starts with its own backoff.
        link.retarget(&broker.addr());
        uninterruptible(stop, || link.connect(Some(deadline)))?;
        stop.watch(Some(link));
        if stop.requested() {
            stop.watch(None);
            return Err(Error::Closed);
        }
        let group = self.group.clone();
        let result = match self.api {
            HeartbeatApi::ConsumerGroup => link
                .request(Some(deadline), |_| request(&group, hb))
                .map(|r| answer(&r)),
            HeartbeatApi::ShareGroup => link
                .request(Some(deadline), |_| share_request(&group, hb))
                .map(|r| share_answer(&r)),
        };
        stop.watch(None);
        Ok((broker, result?))
    }

    /// Applies what a heartbeat got; `false` once the thread is to stop.
    fn apply(&mut self, result: Result<(Broker, Answer)>, sent: Instant) -> bool {
        let mut shared = lock(&self.inner.shared);
        if self.stop.requested() {
            return false;
        }
        let now = Instant::now();
        match result {
            Ok((broker, answer)) => {
                let code = answer.code;
                let message = answer.message.clone();
                log::trace!(
                    "group {}: {} answered {code}, epoch {}, assignment {:?}",
                    self.group,
                    self.api.key().name(),
                    answer.member_epoch,
                    answer.assignment
                );
                shared.coordinator = Some(broker);
                let steps = shared.membership.on_answer(answer);
                let mut next = now + shared.membership.interval();
                for step in steps {
                    match step {
                        Step::HeartbeatNow => next = now,
                        Step::Backoff => next = now + self.retry_backoff,
                        Step::FindCoordinator => {
                            shared.coordinator = None;
                            self.link = None;
                            next = now + self.retry_backoff;
                        }
                        other => shared.steps.push_back(other),
                    }
                }
                if code == crate::KafkaCode::None {
                    shared.last_error = None;
                    self.metrics.heartbeat_ok(now - sent, sent);
                } else {
                    self.metrics.heartbeat_failed();
                    log::debug!("group {}: {} answered {code}", self.group, self.api.key().name());
                    shared.last_error = Some(Error::Kafka {
                        api: self.api.key(),
                        code,
                        message,
                    });
                }
                shared.next = next;
            }
            Err(e) => {
                shared.membership.lost_answer();
                self.metrics.heartbeat_failed();
                log::debug!("group {}: {} failed: {e}", self.group, self.api.key().name());
                if e.breaks_connection() || e.is_coordinator_transient() {
                    // Found again before the next one: the coordinator may have moved.
                    shared.coordinator = None;
                    self.link = None;
                }
                shared.last_error = Some(e);
                shared.next = now + self.retry_backoff;
            }
        }
        true
    }
}
