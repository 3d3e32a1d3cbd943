//! The heartbeat thread: one per member, with its own connection to the coordinator, so that
//! a JoinGroup or a slow application never delays the heartbeats that keep the session alive.
//!
//! It talks to the member only through channels: the member sends [`Command`]s, the thread
//! answers with [`Event`]s that carry the generation they concern (id, member id and
//! protocol). The member ignores events for a generation it has already left, which is how a
//! late error from an old generation is kept from disturbing a new one.
//!
//! What the thread does with each answer is decided by [`on_answer`] and [`on_failure`], pure
//! functions of the answer and the generation, unit-tested row by row.

use super::timer::HeartbeatTimer;
use crate::client::{Broker, Client};
use crate::group::action::{classify, GroupAction};
use crate::group::metrics::Metrics;
use crate::group::poll_timer::{PollClock, PollTimer};
use crate::group::requests;
use crate::group::state::Generation;
use crate::net::link::{Link, Purpose};
use crate::protocol::messages::HeartbeatRequest;
use crate::protocol::ApiKey;
use crate::worker::{Stop, Worker};
use crate::KafkaCode;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// From the member to its heartbeat thread.
#[derive(Debug)]
pub(crate) enum Command {
    /// JoinGroup answered: heartbeat for this generation at this coordinator.
    Start {
        generation: Generation,
        coordinator: Broker,
        instance_id: Option<String>,
    },
    /// SyncGroup answered for this generation: from now on `REBALANCE_IN_PROGRESS` means a new
    /// rebalance.
    Stable(Generation),
    /// Stop heartbeating (a JoinGroup is about to be sent, or the member left).
    Pause,
    /// A test hook: stop answering without telling the member, to simulate a hung process.
    Freeze,
    /// End the thread.
    Shutdown,
}

/// From the heartbeat thread to its member. Every event but a coordinator move carries the
/// whole generation it concerns, for the member to check against its own
/// ([`is_current`](crate::group::state::is_current)).
#[derive(Debug)]
pub(crate) enum Event {
    /// The group must be joined again.
    RejoinNeeded {
        generation: Generation,
        reset_member_id: bool,
        reason: KafkaCode,
    },
    /// The coordinator moved; the thread already heartbeats to the new one.
    /// (Whatever the generation: the coordinator is the group's, not a generation's.)
    CoordinatorMoved { coordinator: Broker },
    /// No heartbeat succeeded for a whole session timeout.
    SessionExpired { generation: Generation },
    /// The application did not poll within `max.poll.interval.ms`: the thread left the group
    /// (a dynamic member sent LeaveGroup; a static one stopped heartbeating, so that the
    /// session timeout removes it) and stopped.
    PollTimeout { generation: Generation },
    /// Another process took our `group.instance.id`.
    Fenced { generation: Generation },
    /// An error that retrying cannot fix.
    Fatal { generation: Generation, code: KafkaCode },
    /// The coordinator's connection could not be opened for a reason the same on every try
    /// ([`refuses_connection`]): credentials rejected, certificates, a token provider failing.
    /// Heartbeats stopped.
    Refused {
        generation: Generation,
        error: Box<crate::Error>,
    },
}

/// What the thread does after a heartbeat was answered with an error code, or failed.
#[derive(Debug)]
pub(crate) enum Reaction {
    /// Keep heartbeating this generation at the usual pace (the answer counted as a failure).
    KeepGoing,
    /// Keep heartbeating — counting the answer as proof the session lives, so it holds while
    /// the application finishes its work — and tell the member.
    KeepGoingAndTell(Event),
    /// Drop the connection, look for the coordinator again, then keep heartbeating.
    Rediscover,
    /// Stop heartbeating this generation and tell the member.
    Stop(Event),
}

/// The reaction to a heartbeat answered with `code` (not `NONE`) for generation `g`; `stable`
/// once SyncGroup has answered for it.
pub(crate) fn on_answer(code: KafkaCode, g: &Generation, stable: bool) -> Reaction {
    let rejoin = |reset_member_id| Event::RejoinNeeded {
        generation: g.clone(),
        reset_member_id,
        reason: code,
    };
    match classify(code) {
        GroupAction::Proceed | GroupAction::Retry => Reaction::KeepGoing,
        // A new rebalance. While awaiting SyncGroup the rebalance is ours: the SyncGroup answer
        // decides, not the heartbeat.
        GroupAction::Rejoin if code == KafkaCode::RebalanceInProgress => match stable {
            true => Reaction::KeepGoingAndTell(rejoin(false)),
            false => Reaction::KeepGoing,
        },
        GroupAction::Rejoin => Reaction::Stop(rejoin(false)),
        // Static and dynamic members alike: a static one is recognised again by its instance id.
        GroupAction::RejoinWithResetMemberId => Reaction::Stop(rejoin(true)),
        GroupAction::RediscoverCoordinator => Reaction::Rediscover,
        GroupAction::Fenced => Reaction::Stop(Event::Fenced {
            generation: g.clone(),
        }),
        GroupAction::Fatal => Reaction::Stop(Event::Fatal {
            generation: g.clone(),
            code,
        }),
    }
}

/// The reaction to a heartbeat for generation `g` that got no answer: a connection refused for
/// good ([`refuses_connection`]) stops the thread; anything else (a reset, a timeout, a
/// coordinator gone) is looked for again.
pub(crate) fn on_failure(e: crate::Error, g: &Generation) -> Reaction {
    if refuses_connection(&e) {
        Reaction::Stop(Event::Refused {
            generation: g.clone(),
            error: Box::new(e),
        })
    } else {
        Reaction::Rediscover
    }
}

/// Whether a failure to open or use a connection comes from the configuration or credentials
/// rather than the network: rejected credentials (also on a KIP-368 re-authentication, after a
/// password change), a mechanism the broker lacks, a certificate problem, a token provider's
/// error. Every broker and every later try would answer the same, so the heartbeat thread stops
/// instead of reconnecting until the session ends.
pub(crate) fn refuses_connection(e: &crate::Error) -> bool {
    use crate::Error as E;
    matches!(
        e,
        E::Authentication { .. }
            | E::UnsupportedMechanism { .. }
            | E::TokenProvider { .. }
            | E::Tls { .. }
            | E::Config { .. }
    )
}

/// The member's end of the thread.
#[derive(Debug)]
pub(crate) struct HeartbeatHandle {
    commands: Sender<Command>,
    pub(crate) events: Receiver<Event>,
    stop: Arc<Stop>,
    thread: Thread,
}

/// The heartbeat thread starts with the first generation it is told to heartbeat: a member
/// that never joins with the classic protocol (a `group.protocol=consumer` member, whose own
/// thread heartbeats) never runs it.
enum Thread {
    NotStarted(Box<Heartbeats>),
    Running(Worker),
    Ended,
}

impl std::fmt::Debug for Thread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Thread::NotStarted(_) => f.write_str("NotStarted"),
            Thread::Running(w) => f.debug_tuple("Running").field(w).finish(),
            Thread::Ended => f.write_str("Ended"),
        }
    }
}

impl HeartbeatHandle {
    /// A handle whose thread starts at [`start`](Self::start).
    pub(crate) fn new(
        client: Client,
        group: String,
        interval: Duration,
        session_timeout: Duration,
        retry_backoff: Duration,
        metrics: Arc<Metrics>,
        poll: (Arc<PollClock>, PollTimer),
    ) -> HeartbeatHandle {
        let (cmd_tx, cmd_rx) = crossbeam_channel::unbounded();
        let (ev_tx, ev_rx) = crossbeam_channel::unbounded();
        // The thread waits for its next command: a stop is one more.
        let shutdown = cmd_tx.clone();
        let stop = Arc::new(Stop::with_waker(move || {
            let _ = shutdown.send(Command::Shutdown);
        }));
        let body = Heartbeats {
            stop: stop.clone(),
            client,
            group,
            interval,
            session_timeout,
            retry_backoff,
            metrics,
            poll_clock: poll.0,
            poll_timer: poll.1,
            commands: cmd_rx,
            events: ev_tx,
            active: None,
            parked: None,
            frozen: false,
        };
        HeartbeatHandle {
            commands: cmd_tx,
            events: ev_rx,
            stop,
            thread: Thread::NotStarted(Box::new(body)),
        }
    }

    pub(crate) fn send(&self, c: Command) {
        // The thread only exits on Shutdown, so a send error means it is already gone; there
        // is nothing left to tell. Commands sent before it starts wait in the channel.
        let _ = self.commands.send(c);
    }

    /// Starts the thread unless it runs already: before the first classic join.
    pub(crate) fn start(&mut self) -> std::io::Result<()> {
        let body = match std::mem::replace(&mut self.thread, Thread::Ended) {
            Thread::NotStarted(body) => body,
            Thread::Running(w) => {
                self.thread = Thread::Running(w);
                return Ok(());
            }
            // A failed start (its body went with it) or a shut-down member.
            Thread::Ended => return Err(std::io::Error::other("the heartbeat thread has ended")),
        };
        let name = format!("kafka-hb-{}", body.group);
        // Heartbeating needs little stack; a small one keeps many members per process cheap.
        let worker = Worker::spawn(name, Some(256 * 1024), self.stop.clone(), move || body.run())?;
        self.thread = Thread::Running(worker);
        Ok(())
    }

    /// Stops the thread and waits for it, at most `bound` (see [`Worker::shutdown`]): a
    /// heartbeat in flight is cut off, and a thread still in a name lookup or TCP connect is
    /// not waited for, so a static member's close returns at once whatever the network does.
    pub(crate) fn shutdown(&mut self, bound: Duration) {
        match std::mem::replace(&mut self.thread, Thread::Ended) {
            Thread::Running(mut w) => w.shutdown(bound),
            Thread::NotStarted(_) | Thread::Ended => {
                self.stop.request();
            }
        }
    }
}

struct Active {
    generation: Generation,
    /// Built once per generation: every heartbeat of it is the same request.
    request: HeartbeatRequest,
    /// Group, member id, instance id and generation for log lines, formatted once per generation.
    ctx: String,
    coordinator: Broker,
    conn: Option<Link>,
    timer: HeartbeatTimer,
    stable: bool,
    expired_reported: bool,
    /// Sent with a `group.instance.id`: a late poll stops the heartbeats without a LeaveGroup.
    static_member: bool,
}

struct Heartbeats {
    stop: Arc<Stop>,
    client: Client,
    group: String,
    interval: Duration,
    session_timeout: Duration,
    retry_backoff: Duration,
    metrics: Arc<Metrics>,
    /// The application's polls, and how late they may be (`max.poll.interval.ms`).
    poll_clock: Arc<PollClock>,
    poll_timer: PollTimer,
    commands: Receiver<Command>,
    events: Sender<Event>,
    active: Option<Active>,
    /// The link of the last generation heartbeated, kept while paused (a rejoin) for the next
    /// one at the same coordinator: its connection and its reconnect backoff carry over.
    parked: Option<(Broker, Link)>,
    frozen: bool,
}

impl Heartbeats {
    fn run(mut self) {
        loop {
            if self.stop.requested() {
                return;
            }
            let wait = match &self.active {
                Some(a) if !self.frozen => {
                    let now = Instant::now();
                    let poll_due = self.poll_timer.time_to_expiry(self.poll_clock.polling(), now);
                    a.timer.time_to_next(now).min(poll_due)
                }
                _ => Duration::from_secs(3600),
            };
            match self.commands.recv_timeout(wait) {
                Ok(Command::Shutdown) | Err(RecvTimeoutError::Disconnected) => return,
                Ok(c) => self.on_command(c),
                Err(RecvTimeoutError::Timeout) => {}
            }
            if !self.frozen && !self.stop.requested() {
                self.tick();
            }
        }
    }

    fn on_command(&mut self, c: Command) {
        match c {
            Command::Start {
                generation,
                coordinator,
                instance_id,
            } => {
                let now = Instant::now();
                // Keep the link when the coordinator did not change: a rejoin should not cost a
                // reconnect and handshake, nor reset the reconnect backoff.
                self.park();
                let conn = self
                    .parked
                    .take()
                    .filter(|(b, _)| *b == coordinator)
                    .map(|(_, link)| link);
                let ctx = format!(
                    "group={} member={} instance={} generation={}",
                    self.group,
                    generation.member_id,
                    instance_id.as_deref().unwrap_or("-"),
                    generation.id
                );
                let request = requests::heartbeat(&self.group, &generation, instance_id.as_deref());
                let static_member = instance_id.is_some();
                self.active = Some(Active {
                    generation,
                    request,
                    ctx,
                    coordinator,
                    conn,
                    timer: HeartbeatTimer::new(now, self.interval, self.session_timeout, self.retry_backoff),
                    stable: false,
                    expired_reported: false,
                    static_member,
                });
            }
            Command::Stable(g) => {
                if let Some(a) = self.active.as_mut().filter(|a| a.generation == g) {
                    a.stable = true;
                }
            }
            Command::Pause => self.park(),
            Command::Freeze => self.frozen = true,
            Command::Shutdown => {}
        }
    }

    /// Stops heartbeating, keeping the link for a later generation at the same coordinator.
    fn park(&mut self) {
        if let Some(a) = self.active.take() {
            self.parked = a.conn.map(|link| (a.coordinator, link));
        }
    }

    fn tick(&mut self) {
        let now = Instant::now();
        if self.poll_timer.expired(self.poll_clock.polling(), now) {
            self.leave_for_late_poll();
            return;
        }
        let Some(a) = self.active.as_mut() else { return };
        if a.timer.session_expired(now) && !a.expired_reported {
            a.expired_reported = true;
            log::warn!(
                "{}: no successful heartbeat for {:?}; session expired",
                a.ctx,
                self.session_timeout
            );
            emit(
                &self.events,
                Event::SessionExpired {
                    generation: a.generation.clone(),
                },
            );
        }
        if !a.timer.should_send(now) {
            return;
        }
        a.timer.on_sent(now);
        let result = Self::heartbeat(&self.client, &self.metrics, a, &self.stop);
        if self.stop.requested() {
            // Whatever came back belongs to a member that is closing.
            return;
        }
        let done = Instant::now();
        let rtt = done - now;
        let ctx = &a.ctx;
        let reaction = match result {
            Ok(KafkaCode::None) => {
                a.timer.on_success(done);
                a.expired_reported = false;
                // The broker saw the session alive no later than when the request left.
                self.metrics.heartbeat_ok(rtt, now);
                log::debug!("{ctx}: heartbeat ok in {rtt:?}");
                return;
            }
            Ok(code) => {
                a.timer.on_failure(done);
                self.metrics.heartbeat_failed();
                log::debug!("{ctx}: heartbeat answered {code} in {rtt:?}");
                let reaction = on_answer(code, &a.generation, a.stable);
                if matches!(reaction, Reaction::Rediscover) {
                    log::info!("{ctx}: {code}; looking for the coordinator again");
                }
                reaction
            }
            Err(e) => {
                if !refuses_connection(&e) {
                    log::debug!("{ctx}: heartbeat failed: {e}; looking for the coordinator again");
                }
                let reaction = on_failure(e, &a.generation);
                if !matches!(reaction, Reaction::Stop(_)) {
                    // A refused connection stops the thread; only a retried one counts against
                    // the timer.
                    a.timer.on_failure(done);
                }
                self.metrics.heartbeat_failed();
                reaction
            }
        };
        match reaction {
            Reaction::KeepGoing => {}
            Reaction::KeepGoingAndTell(event) => {
                log::info!("{ctx}: group is rebalancing; rejoin needed");
                a.timer.on_success(done);
                emit(&self.events, event);
            }
            Reaction::Rediscover => {
                // The link stays (its reconnect backoff with it); only the connection goes.
                if let Some(link) = a.conn.as_mut() {
                    link.disconnect();
                }
                self.rediscover();
            }
            Reaction::Stop(event) => {
                match &event {
                    Event::RejoinNeeded {
                        reason,
                        reset_member_id,
                        ..
                    } => log::info!(
                        "{ctx}: {reason}; rejoin needed{}",
                        if *reset_member_id {
                            " with a new member id"
                        } else {
                            ""
                        }
                    ),
                    Event::Fenced { .. } => log::error!(
                        "{ctx}: fenced: another member uses this group.instance.id; heartbeats stop"
                    ),
                    Event::Fatal { code, .. } => {
                        log::error!("{ctx}: heartbeat failed with {code}; heartbeats stop")
                    }
                    Event::Refused { error, .. } => {
                        log::error!("{ctx}: cannot talk to the coordinator: {error}; heartbeats stop")
                    }
                    Event::SessionExpired { .. }
                    | Event::CoordinatorMoved { .. }
                    | Event::PollTimeout { .. } => {}
                }
                self.park();
                emit(&self.events, event);
            }
        }
    }

    fn heartbeat(
        client: &Client,
        metrics: &Metrics,
        a: &mut Active,
        stop: &Stop,
    ) -> crate::Result<KafkaCode> {
        // Waiting past the session's end for one answer (or a connection) is pointless: by
        // then the broker has given up on us, and the timer must get to report the expiry.
        let session_end = a.timer.session_deadline();
        let link = a.conn.get_or_insert_with(|| {
            let mut link = client.link(Purpose::Coordinator, a.coordinator.addr());
            link.count_reauthentications_in(metrics.reauthentication_counter());
            link
        });
        // After failed attempts the reconnect backoff holds the next one back. The thread does
        // not sleep it out here, where neither a command nor a close could cut it short: the
        // attempt fails at once (`ReconnectBackoff`) and the timer retries.
        let now = Instant::now();
        let by = match link.retry_at() {
            Some(at) if at > now => now,
            _ => session_end,
        };
        stop.uninterruptible(|| link.connect_watched(Some(by), &|socket| stop.watch_socket(socket)))
            .unwrap_or(Err(crate::Error::Closed))?;
        if stop.requested() {
            // Stopped while connecting: the member has closed, nothing more goes out.
            return Err(crate::Error::Closed);
        }
        stop.watch(a.conn.as_ref());
        let conn = a.conn.as_mut().ok_or(crate::Error::Closed)?;
        let version = conn.version(crate::protocol::ApiKey::Heartbeat)?;
        let timeout = crate::deadline::clamp(client.connection_config().request_timeout, session_end);
        let resp = conn.send_at(&a.request, version, Some(timeout));
        stop.watch(None);
        Ok(KafkaCode::from_code(resp?.error_code))
    }

    /// The application has not polled for `max.poll.interval.ms`: as Java's consumer does, the
    /// member gets out of the way of the group, whose other members take its partitions. A
    /// dynamic member leaves (LeaveGroup, one attempt within `request.timeout.ms`); a static
    /// one only stops heartbeating, and the coordinator removes it when its session times
    /// out (a LeaveGroup would need its instance id, which is for a member that goes for
    /// good). The member hears of it at its next poll, reports the partitions lost and
    /// rejoins.
    fn leave_for_late_poll(&mut self) {
        let Some(mut a) = self.active.take() else { return };
        let interval = self.poll_timer.interval();
        if a.static_member {
            log::warn!(
                "{}: the application has not polled within max.poll.interval.ms ({interval:?}); \
                 heartbeats stop and the coordinator removes this static member once its session \
                 times out ({:?}); it rejoins at its next poll. Poll more often, or raise \
                 max.poll.interval.ms or lower max.poll.records",
                a.ctx,
                self.session_timeout
            );
        } else {
            log::warn!(
                "{}: the application has not polled within max.poll.interval.ms ({interval:?}); \
                 leaving the group so that the other members take the partitions; it rejoins \
                 at its next poll. Poll more often, or raise max.poll.interval.ms or lower \
                 max.poll.records",
                a.ctx
            );
            if let Err(e) = self.send_leave(&mut a) {
                log::info!(
                    "{}: LeaveGroup after the late poll failed: {e}; the coordinator removes \
                     the member when its session times out",
                    a.ctx
                );
            }
        }
        let generation = a.generation.clone();
        self.active = Some(a);
        self.park();
        emit(&self.events, Event::PollTimeout { generation });
    }

    /// LeaveGroup for the dynamic member of `a`, on the heartbeat connection.
    fn send_leave(&self, a: &mut Active) -> crate::Result<()> {
        let deadline = crate::deadline::after(self.client.connection_config().request_timeout);
        let link = a.conn.get_or_insert_with(|| {
            let mut link = self.client.link(Purpose::Coordinator, a.coordinator.addr());
            link.count_reauthentications_in(self.metrics.reauthentication_counter());
            link
        });
        link.connect_watched(Some(deadline), &|socket| self.stop.watch_socket(socket))?;
        self.stop.watch(a.conn.as_ref());
        let conn = a.conn.as_mut().ok_or(crate::Error::Closed)?;
        let version = conn.version(ApiKey::LeaveGroup)?;
        let me = requests::member_identity(&a.generation.member_id, None, LATE_POLL_REASON);
        let req = requests::leave_group(&self.group, &[me], version);
        let timeout = crate::deadline::clamp(self.client.connection_config().request_timeout, deadline);
        let resp = conn.send_at(&req, version, Some(timeout));
        self.stop.watch(None);
        // Already out (UNKNOWN_MEMBER_ID: the session expired meanwhile) is what the leave was for.
        if let Some(code) = super::leave_error(&resp?) {
            return Err(crate::Error::Kafka {
                api: ApiKey::LeaveGroup,
                code,
                message: None,
            });
        }
        log::info!("{}: left the group (late poll)", a.ctx);
        Ok(())
    }

    /// One coordinator lookup; on success the thread heartbeats there and tells the member.
    fn rediscover(&mut self) {
        if self.stop.requested() {
            return;
        }
        let Some(a) = self.active.as_mut() else { return };
        // One attempt no longer than an interval (at least a second): the thread must get back
        // to its timer, and to a close, rather than sit out a request timeout.
        let by = crate::deadline::after(self.interval.max(Duration::from_secs(1)));
        let client = &self.client;
        let found = self
            .stop
            .uninterruptible(|| client.lookup_coordinator_by(&self.group, by));
        let Some(found) = found.filter(|_| !self.stop.requested()) else {
            return;
        };
        match found {
            Ok(b) => {
                if b != a.coordinator {
                    log::info!(
                        "{}: coordinator moved from {} to {}",
                        a.ctx,
                        a.coordinator.addr(),
                        b.addr()
                    );
                    a.coordinator = b.clone();
                    a.conn = None;
                    emit(&self.events, Event::CoordinatorMoved { coordinator: b });
                }
            }
            Err(e) => log::debug!("{}: coordinator lookup failed: {e}", a.ctx),
        }
    }
}

/// What v5+ coordinators log as the reason for a LeaveGroup sent after a late poll (KIP-800).
const LATE_POLL_REASON: &str = "consumer poll timeout has expired (max.poll.interval.ms)";

fn emit(events: &Sender<Event>, e: Event) {
    // The member only drops its receiver when it is dropped itself, and then it stops this
    // thread too: an event nobody can receive any more needs no reporting.
    let _ = events.send(e);
}

#[cfg(test)]
mod tests {
    use super::{on_answer, on_failure, refuses_connection, Event, Reaction};
    use crate::group::Generation;
    use crate::{Error, KafkaCode};
    use std::io;

    fn generation() -> Generation {
        Generation {
            id: 4,
            member_id: "m-4".into(),
            protocol: Some("range".into()),
        }
    }

    /// The event of a reaction that stops heartbeating, with the generation checked.
    fn stopped(r: Reaction) -> Event {
        match r {
            Reaction::Stop(e) => e,
            other => panic!("expected heartbeats to stop, got {other:?}"),
        }
    }

    fn rejoin(e: &Event) -> (bool, KafkaCode) {
        match e {
            Event::RejoinNeeded {
                generation: g,
                reset_member_id,
                reason,
            } => {
                assert_eq!(*g, generation());
                (*reset_member_id, *reason)
            }
            other => panic!("expected a rejoin, got {other:?}"),
        }
    }

    #[test]
    fn rebalance_in_progress_once_stable_keeps_heartbeating_and_tells_the_member() {
        match on_answer(KafkaCode::RebalanceInProgress, &generation(), true) {
            Reaction::KeepGoingAndTell(e) => {
                assert_eq!(rejoin(&e), (false, KafkaCode::RebalanceInProgress))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rebalance_in_progress_while_awaiting_sync_is_left_to_the_sync_answer() {
        assert!(matches!(
            on_answer(KafkaCode::RebalanceInProgress, &generation(), false),
            Reaction::KeepGoing
        ));
    }

    #[test]
    fn illegal_generation_stops_and_rejoins_with_the_same_member_id() {
        for stable in [false, true] {
            let e = stopped(on_answer(KafkaCode::IllegalGeneration, &generation(), stable));
            assert_eq!(rejoin(&e), (false, KafkaCode::IllegalGeneration));
        }
    }

    #[test]
    fn unknown_member_id_rejoins_with_a_new_member_id_static_or_dynamic() {
        // The reaction does not depend on the member being static: a static one joins again
        // with an empty member id too, and the coordinator recognises its instance id.
        let static_member = Generation {
            member_id: "worker-1-2f1c".into(),
            ..generation()
        };
        for g in [generation(), static_member] {
            let e = stopped(on_answer(KafkaCode::UnknownMemberId, &g, true));
            let Event::RejoinNeeded {
                generation,
                reset_member_id,
                reason,
            } = e
            else {
                panic!("{e:?}")
            };
            assert_eq!(generation, g);
            assert!(reset_member_id);
            assert_eq!(reason, KafkaCode::UnknownMemberId);
        }
    }

    #[test]
    fn coordinator_moved_or_unavailable_is_looked_for_again() {
        for code in [KafkaCode::NotCoordinator, KafkaCode::CoordinatorNotAvailable] {
            for stable in [false, true] {
                assert!(
                    matches!(on_answer(code, &generation(), stable), Reaction::Rediscover),
                    "{code}"
                );
            }
        }
    }

    #[test]
    fn a_loading_coordinator_or_a_retriable_code_is_retried_in_place() {
        for code in [
            KafkaCode::CoordinatorLoadInProgress,
            KafkaCode::RequestTimedOut,
            KafkaCode::NetworkException,
        ] {
            assert!(
                matches!(on_answer(code, &generation(), true), Reaction::KeepGoing),
                "{code}"
            );
        }
    }

    #[test]
    fn fenced_instance_id_stops() {
        match stopped(on_answer(KafkaCode::FencedInstanceId, &generation(), true)) {
            Event::Fenced { generation: g } => assert_eq!(g, generation()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn fatal_codes_stop_with_the_code() {
        for code in [
            KafkaCode::GroupAuthorizationFailed,
            KafkaCode::InconsistentGroupProtocol,
            KafkaCode::InvalidSessionTimeout,
            KafkaCode::Unknown(-999),
        ] {
            match stopped(on_answer(code, &generation(), true)) {
                Event::Fatal {
                    generation: g,
                    code: c,
                } => {
                    assert_eq!((g, c), (generation(), code));
                }
                other => panic!("{code}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_lost_connection_is_looked_for_again_a_refused_one_stops() {
        let reset = Error::Io {
            addr: "b:9092".into(),
            source: io::ErrorKind::ConnectionReset.into(),
        };
        assert!(matches!(on_failure(reset, &generation()), Reaction::Rediscover));
        assert!(matches!(
            on_failure(Error::Closed, &generation()),
            Reaction::Rediscover
        ));
        let auth = Error::Authentication {
            mechanism: "PLAIN",
            message: "Authentication failed".into(),
        };
        match stopped(on_failure(auth, &generation())) {
            Event::Refused { generation: g, error } => {
                assert_eq!(g, generation());
                assert!(matches!(*error, Error::Authentication { .. }));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn only_failures_every_try_would_repeat_stop_the_thread() {
        let auth = Error::Authentication {
            mechanism: "SCRAM-SHA-512",
            message: "Authentication failed".into(),
        };
        let mechanism = Error::UnsupportedMechanism {
            wanted: "PLAIN",
            enabled: vec!["SCRAM-SHA-512".into()],
        };
        let tls = Error::Tls {
            addr: "b:9093".into(),
            source: "expired".into(),
        };
        for e in [&auth, &mechanism, &tls] {
            assert!(refuses_connection(e), "{e}");
        }
        // The network, a restarting broker: reconnect, as before.
        let io = Error::Io {
            addr: "b:9093".into(),
            source: io::ErrorKind::ConnectionRefused.into(),
        };
        for e in [&io, &Error::Closed, &Error::UnknownBroker { id: 1 }] {
            assert!(!refuses_connection(e), "{e}");
        }
    }
}
