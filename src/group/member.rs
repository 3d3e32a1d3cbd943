//! A group member: join (FindCoordinator → JoinGroup → assign if leader → SyncGroup), react
//! to what the heartbeat thread reports, and leave.
//!
//! All group requests except heartbeats run on the caller's thread over the member's own
//! connection to the coordinator; the heartbeat thread has another. Neither shares the
//! client's per-broker connections, because a JoinGroup can block for a whole rebalance and
//! must not hold up other members embedded in the same process.

mod assign;
mod join_warnings;
mod kip848;
mod metadata_watch;
mod missing_topics;
#[cfg(test)]
mod scripted;
#[cfg(test)]
mod scripted_kip848;
mod session_bounds;

use super::action::{classify, GroupAction};
use super::assignment::{Assignment, Change, Subscription, TopicPartition};
use super::assignor::{common_protocol, RebalanceProtocol};
use super::config::{MemberConfig, OldBrokerPolicy};
use super::heartbeat::{Command, Event, HeartbeatHandle};
use super::leader::LeaderSnapshot;
use super::metrics::{MemberMetrics, Metrics};
use super::poll_timer::{PollClock, PollGuard, PollTimer};
use super::requests;
use super::state::{merge_rejoin, Generation, GroupState, MemberState, Transition};
use crate::authorization::{Resource, Scope};
use crate::client::{Broker, Client};
use crate::error::{Error, Result};
use crate::net::link::{Link, Purpose};
use crate::net::{Pending, REMOVE_MEMBERS_BY_INSTANCE_ID, STATIC_MEMBERSHIP};
use crate::protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use crate::protocol::messages::{JoinGroupRequest, JoinGroupResponse, LeaveGroupResponse, SyncGroupRequest};
use crate::protocol::ApiKey;
use crate::wakeup::{Waited, Wakeup, WakeupHandle};
use crate::KafkaCode;
pub(crate) use missing_topics::missing_topics_hint;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// JoinGroup may legitimately block for the whole rebalance timeout; the socket waits that long
/// plus this, as Kafka's client does, so a slow rebalance is not mistaken for a dead broker.
const JOIN_MARGIN: Duration = Duration::from_secs(5);

/// What v5+ coordinators log as the reason a member left (KIP-800).
const LEAVE_REASON: &str = "the member is leaving the group";

/// What changed for the application.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GroupEvent {
    /// Partitions taken away. Eager protocol: all of them, before a rejoin. Cooperative
    /// ([`RebalanceProtocol::Cooperative`](crate::RebalanceProtocol)): only those the new
    /// assignment moves to other members, reported with that assignment's `Assigned` (and
    /// before it), in the new generation; the member rejoins at the next poll so that their
    /// new owners get them. Either way, commit what was processed of them before polling again.
    Revoked {
        /// The generation they belonged to.
        generation: i32,
        /// The partitions.
        partitions: Vec<TopicPartition>,
    },
    /// The member joined a generation and got these partitions: eager protocol, its whole
    /// assignment; cooperative, the partitions added to those it kept (possibly none —
    /// [`GroupMember::assignment`] has the whole).
    Assigned {
        /// The generation.
        generation: i32,
        /// The partitions.
        partitions: Vec<TopicPartition>,
        /// Whether the group went through a rebalance for this generation.
        ///
        /// On a rejoin of this member: whether the generation differs from the one it held
        /// before. On its first join (a new process), what the coordinator's answers say
        /// (Kafka's classic group coordinator, `GroupMetadataManager`; KIP-345, KIP-814):
        /// - a dynamic member: `Some(true)`. Its member id is new, and a generation's members
        ///   are fixed when its join phase completes, so the group made a new generation.
        /// - a static leader on JoinGroup v9+ (Kafka 3.2+): `Some(false)` when told to skip
        ///   the assignment (it took its place back over in a `Stable` group, keeping the
        ///   generation), `Some(true)` otherwise (its JoinGroup completed a join phase).
        /// - a static follower, or a static leader on JoinGroup v5–v8: `None`. The answer is
        ///   the same whether the coordinator handed back the generation it had or completed a
        ///   rebalance for the join, and no other request tells (DescribeGroups has no
        ///   generation id).
        rebalanced: Option<bool>,
    },
    /// Partitions given up without a chance to commit: the member's session expired (no
    /// heartbeat was answered for `session.timeout.ms`), or the member left the group because
    /// the application did not poll within `max.poll.interval.ms`, so the coordinator may
    /// already have handed them to another member. Stop processing them; the member rejoins.
    Lost {
        /// The generation they belonged to.
        generation: i32,
        /// The partitions.
        partitions: Vec<TopicPartition>,
    },
    /// The coordinator moved to another broker.
    CoordinatorMoved {
        /// The new coordinator.
        coordinator: Broker,
    },
    /// Topics this member subscribes to do not exist, so no partition of them is assigned
    /// (with [`MissingTopicPolicy::Warn`](crate::MissingTopicPolicy::Warn), the default; also
    /// logged at warn). Reported by the poll after each `Assigned` that lacks them; the group
    /// picks a topic up once it is created (its leader checks for it every second), with a
    /// rebalance. A [`Consumer`](crate::Consumer) passes it on in `Polled::events`.
    TopicsMissing {
        /// The topics, as subscribed.
        topics: Vec<String>,
    },
}

/// One member of a consumer group, static or dynamic, with its heartbeat thread.
///
/// Blocking: [`join`](Self::join) returns once the member has an assignment;
/// [`poll`](Self::poll) reacts to rebalances, coordinator moves and fencing reported by the
/// heartbeat thread. Use it directly to coordinate work by partition without consuming through
/// Kafka; [`Consumer`](crate::Consumer) wraps it to fetch and commit.
///
/// As the group's leader it rebalances when the subscribed topics change: every
/// `metadata.max.age.ms` it compares their partition counts with those the group's
/// assignment was made for. A restarted static leader that a Kafka 3.2+ coordinator tells to
/// skip the assignment (KIP-814) keeps the group's assignment only after reading it
/// (DescribeGroups) and finding that it covers every partition of the subscribed topics
/// exactly once; otherwise — partitions added while the old leader ran, say — it rebalances
/// at once. If the assignment cannot be read for the moment, it tries again at each
/// [`poll`](Self::poll) (every `retry.backoff.ms`); if it cannot be read at all, it rebalances.
///
/// **Group protocol.** By default the member speaks the classic protocol (JoinGroup,
/// SyncGroup, Heartbeat; assignments made by the group's leader). With
/// [`group_protocol(GroupProtocol::Consumer)`](crate::MemberBuilder::group_protocol) it speaks
/// KIP-848's (Kafka 4.0+): ConsumerGroupHeartbeat on its heartbeat thread, at the interval the
/// coordinator returns, assignments made by the coordinator and always incremental (`Revoked`
/// lists only what moves and is acknowledged at the next `poll`; `Assigned` only what is
/// added), [`Generation::id`] the member epoch. A static member's [`close`](Self::close) then
/// sends the leave heartbeat with epoch `-2` (the coordinator keeps its partitions for the
/// session timeout) and [`leave_group`](Self::leave_group) epoch `-1`; and a second process
/// with the same `group.instance.id` is the one refused
/// ([`Error::InstanceInUse`](crate::Error::InstanceInUse)), not the running one. The guide's
/// [KIP-848 page](crate::guide::kip848) compares the two.
///
/// **Polling on time.** The heartbeat thread keeps the session alive whatever the application
/// does, so `max.poll.interval.ms` is held against the application's calls to
/// [`poll`](Self::poll) and [`join`](Self::join) (a call in progress is never late): when none
/// came for that long, the member leaves the group — see
/// [`MemberBuilder::max_poll_interval`](crate::MemberBuilder::max_poll_interval) — and the
/// next poll reports [`GroupEvent::Lost`] and rejoins. An application that works on its
/// partitions elsewhere still polls the member within the interval.
///
/// A coordinator that denies the group (`GROUP_AUTHORIZATION_FAILED` from FindCoordinator,
/// JoinGroup, SyncGroup or a heartbeat) stops the member for good, as fencing does: it enters
/// [`MemberState::Unauthorized`], its heartbeats stop, and every later call returns the
/// [`Error::Authorization`]. A leader that may not describe a subscribed topic returns that
/// error from the join instead of assigning the other topics, and joins again at the next call.
///
/// ```no_run
/// use kafka_group::GroupEvent;
/// use kafka_group::Client;
/// use std::time::Duration;
///
/// # fn main() -> kafka_group::Result<()> {
/// let client = Client::builder().bootstrap_servers("127.0.0.1:9092").build()?;
/// let mut member = client
///     .member("billing")
///     .group_instance_id("billing-worker-1")
///     .subscribe(["invoices"])
///     .session_timeout(Duration::from_secs(30))
///     .build()?;
/// member.join(Duration::from_secs(60))?;
/// println!("generation {:?}: {}", member.generation().map(|g| g.id), member.assignment());
/// loop {
///     for event in member.poll(Duration::from_secs(1))? {
///         match event {
///             GroupEvent::Revoked { partitions, .. } => println!("stop working on {partitions:?}"),
///             GroupEvent::Assigned { partitions, .. } => println!("start working on {partitions:?}"),
///             other => println!("{other:?}"),
///         }
///     }
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct GroupMember {
    client: Client,
    config: MemberConfig,
    state: GroupState,
    coordinator: Option<Broker>,
    conn: Option<Link>,
    assignment: Assignment,
    /// Eager or cooperative: what every assignor this member offers supports.
    protocol: RebalanceProtocol,
    /// The last assignment SyncGroup gave (of generation `last_generation`), kept through an
    /// eager revocation: what the sticky assignors' user data says this member owned.
    last_assigned: Assignment,
    /// A cooperative member's generation ended under it (a join answered UNKNOWN_MEMBER_ID):
    /// the next join starts by giving its partitions up as lost, as Java's does.
    generation_lost: bool,
    static_member: bool,
    warned_fallback: bool,
    heartbeat: HeartbeatHandle,
    metrics: Arc<Metrics>,
    /// A rejoin is pending; `true` when it must use an empty member id.
    rejoin: Option<bool>,
    /// What this member, when it leads, compares the subscribed topics' metadata with.
    leader_snapshot: Option<LeaderSnapshot>,
    last_metadata_check: Instant,
    last_generation: Option<i32>,
    /// When this member next looks for its subscribed topics in the metadata (set by each
    /// `Assigned`, so the look costs the join nothing: it happens in a later poll).
    missing_check: Option<Instant>,
    /// What the answer of this member's first JoinGroup says about the group rebalancing
    /// for it (see [`first_join_rebalanced`]); reported by the `Assigned` that follows.
    first_join_rebalanced: Option<bool>,
    /// The join in progress, kept across calls (see [`Joining`]).
    joining: Joining,
    /// When the current join sent its first JoinGroup (for the join-time metric).
    join_started: Option<Instant>,
    /// When coordinator lookups started failing in a row.
    discovery_since: Option<Instant>,
    /// The last error a join retried past, for the timeout a caller may get.
    last_join_error: Option<Error>,
    /// Which join failures are worth a warning.
    join_warnings: join_warnings::JoinWarnings,
    /// Events of a join that returned an error, delivered by the next call.
    undelivered: Vec<GroupEvent>,
    /// The request the coordinator denied the group on (`MemberState::Unauthorized`), with
    /// the code and the broker's message, to return from every later call.
    denied: Option<(ApiKey, KafkaCode, Option<String>)>,
    /// The heartbeat thread stopped on a refused connection; the next poll restarts it.
    heartbeats_refused: bool,
    /// The link whose connection attempt to the coordinator failed, kept for the next attempt
    /// so that its reconnect backoff holds (a fresh link would dial at once, every retry).
    failed_link: Option<Link>,
    /// Lets another thread end a blocked `poll` or `join` ([`GroupMember::wakeup_handle`]).
    wakeup: Wakeup,
    /// The consumer-protocol member, once started (`group.protocol=consumer`).
    consumer: Option<kip848::ConsumerMember>,
    /// A `group.protocol=consumer` member whose coordinator lacks the protocol, joining as a
    /// classic one by `GroupProtocolPolicy::FallBackToClassic`.
    fell_back_to_classic: bool,
    /// The application's calls to `poll` and `join`, which the heartbeat threads hold against
    /// `max.poll.interval.ms`.
    poll_clock: Arc<PollClock>,
}

/// Where a join stands between calls. A JoinGroup may be held by the coordinator for a whole
/// rebalance; keeping it in flight here lets [`GroupMember::poll`] return within its timeout
/// and take the join up again on the next call.
#[derive(Debug, Default)]
enum Joining {
    /// Nothing in flight: the next step finds the coordinator and sends JoinGroup.
    #[default]
    Start,
    /// JoinGroup sent at `started` (the first of this join, KIP-394's retry included).
    AwaitingJoin {
        pending: Pending<JoinGroupRequest>,
        started: Instant,
    },
    /// JoinGroup answered; the leader computes the assignment, retrying its metadata lookups
    /// until `until` (the rebalance timeout, which is how long the followers wait for it).
    Assigning {
        resp: JoinGroupResponse,
        generation: Generation,
        join_time: Duration,
        until: Instant,
    },
    /// SyncGroup sent at `sent`.
    AwaitingSync {
        pending: Pending<SyncGroupRequest>,
        generation: Generation,
        join_time: Duration,
        sent: Instant,
    },
}

/// The least time a coordinator lookup (and the connection to the coordinator) is given, however
/// little the caller left: a poll is late by at most this when the coordinator is unreachable.
const MIN_LOOKUP: Duration = Duration::from_secs(1);

/// The deadline of one lookup (coordinator, metadata) within a call that must end by
/// `deadline`: that, or [`MIN_LOOKUP`] from now if less is left, so that a `poll(0)` loop still
/// gets lookups of a useful length.
pub(crate) fn lookup_deadline(deadline: Instant) -> Instant {
    deadline.max(crate::deadline::after(MIN_LOOKUP))
}

impl GroupMember {
    /// A member with a validated `config`; makes no network call and starts no thread (the
    /// heartbeat thread of its protocol starts with its first join).
    pub(super) fn new(client: Client, config: MemberConfig) -> Result<GroupMember> {
        let metrics = Arc::new(Metrics::default());
        let poll_clock = PollClock::new();
        let heartbeat = HeartbeatHandle::new(
            client.clone(),
            config.group_id.clone(),
            config.heartbeat_interval,
            config.session_timeout,
            config.retry_backoff(&client),
            metrics.clone(),
            (poll_clock.clone(), PollTimer::new(config.max_poll_interval)),
        );
        // The consumer protocol is incremental whatever the (unused) client-side assignors say;
        // a fallback to classic takes theirs.
        let protocol = match config.group_protocol {
            crate::GroupProtocol::Consumer => RebalanceProtocol::Cooperative,
            crate::GroupProtocol::Classic => common_protocol(&config.assignors),
        };
        Ok(GroupMember {
            static_member: config.group_instance_id.is_some(),
            client,
            config,
            state: GroupState::default(),
            coordinator: None,
            conn: None,
            assignment: Assignment::default(),
            protocol,
            last_assigned: Assignment::default(),
            generation_lost: false,
            warned_fallback: false,
            heartbeat,
            metrics,
            rejoin: None,
            leader_snapshot: None,
            last_metadata_check: Instant::now(),
            last_generation: None,
            missing_check: None,
            first_join_rebalanced: None,
            joining: Joining::Start,
            join_started: None,
            discovery_since: None,
            last_join_error: None,
            join_warnings: Default::default(),
            undelivered: Vec::new(),
            denied: None,
            heartbeats_refused: false,
            failed_link: None,
            wakeup: Wakeup::default(),
            consumer: None,
            fell_back_to_classic: false,
            poll_clock,
        })
    }

    /// A handle another thread can use to make a blocked [`poll`](Self::poll) or
    /// [`join`](Self::join) return [`Error::Wakeup`] at once (or the next call, if none is
    /// blocked); see [`WakeupHandle`]. Java's `KafkaConsumer.wakeup()`.
    pub fn wakeup_handle(&self) -> WakeupHandle {
        self.wakeup.handle()
    }

    /// The member's wakeup, which its consumer shares.
    pub(crate) fn wakeup(&self) -> &Wakeup {
        &self.wakeup
    }

    /// The group id.
    pub fn group_id(&self) -> &str {
        &self.config.group_id
    }

    /// The configured `group.instance.id`.
    pub fn group_instance_id(&self) -> Option<&str> {
        self.config.group_instance_id.as_deref()
    }

    /// Whether the member joins as a static member (false after a fallback to dynamic).
    pub fn is_static(&self) -> bool {
        self.static_member
    }

    /// Current state.
    pub fn state(&self) -> MemberState {
        self.consumer_state().unwrap_or(self.state.state())
    }

    /// Why the member has not joined (yet): the last error its join retried past, such as a
    /// refused connection or a coordinator not available. `None` once a join succeeded, and
    /// before any failed. A `poll` that keeps retrying returns `Ok` with no events; this is
    /// what a program that gives up on joining reports (the CLI's `join` does).
    pub fn last_join_error(&self) -> Option<&Error> {
        self.last_join_error.as_ref()
    }

    /// The generation joined last; under the consumer protocol, the member epoch (its `id`)
    /// and the member id as of the last call.
    pub fn generation(&self) -> Option<&Generation> {
        match self.consumer_generation() {
            Some(g) => g,
            None => self.state.generation(),
        }
    }

    /// Our member id (empty before the first join).
    pub fn member_id(&self) -> &str {
        match self.consumer_generation() {
            Some(g) => g.map_or("", |g| g.member_id.as_str()),
            None => self.state.member_id(),
        }
    }

    /// The group protocol this member speaks: the configured `group.protocol`, or classic
    /// after a fallback ([`GroupProtocolPolicy::FallBackToClassic`](super::GroupProtocolPolicy)).
    pub fn group_protocol(&self) -> crate::GroupProtocol {
        if self.uses_consumer_protocol() {
            crate::GroupProtocol::Consumer
        } else {
            crate::GroupProtocol::Classic
        }
    }

    /// The current assignment (empty unless Stable).
    pub fn assignment(&self) -> &Assignment {
        &self.assignment
    }

    /// The coordinator in use.
    pub fn coordinator(&self) -> Option<&Broker> {
        match self.consumer_coordinator() {
            Some(b) => b,
            None => self.coordinator.as_ref(),
        }
    }

    /// Join, sync and heartbeat figures.
    pub fn metrics(&self) -> MemberMetrics {
        self.metrics.snapshot()
    }

    /// The topics this member subscribes to.
    pub fn subscription(&self) -> &[String] {
        &self.config.topics
    }

    /// Whether a rebalance is pending or under way (the next [`poll`](Self::poll) rejoins, or
    /// goes on with the join in flight).
    pub fn rejoin_pending(&self) -> bool {
        if self.uses_consumer_protocol() {
            return self.consumer_joining().unwrap_or(true);
        }
        self.rejoin.is_some() || self.state.state() != MemberState::Stable
    }

    /// Who is speaking, for log lines (also the consumer's).
    pub(crate) fn ctx(&self) -> String {
        format!(
            "group={} member={} instance={} generation={}",
            self.config.group_id,
            if self.member_id().is_empty() {
                "-"
            } else {
                self.member_id()
            },
            self.config.group_instance_id.as_deref().unwrap_or("-"),
            self.generation().map_or(-1, |g| g.id)
        )
    }

    fn transition(&mut self, t: Transition) {
        let from = self.state.state();
        match self.state.apply(t) {
            Ok(()) if from != self.state.state() => {
                log::info!("{}: {from} -> {}", self.ctx(), self.state.state())
            }
            Ok(()) => {}
            // A bug in this module, not a runtime condition; never worth a panic.
            Err(e) => log::error!(
                "{}: invalid transition {:?} from {}",
                self.ctx(),
                e.transition,
                e.from
            ),
        }
    }

    fn check_usable(&self) -> Result<()> {
        match self.state.state() {
            MemberState::Fenced => Err(self.fenced_error()),
            MemberState::Unauthorized => Err(self.denied_error()),
            MemberState::Closed => Err(Error::Closed),
            _ => Ok(()),
        }
    }

    fn fenced_error(&self) -> Error {
        Error::Fenced {
            group: self.config.group_id.clone(),
            instance_id: self.config.group_instance_id.clone().unwrap_or_default(),
        }
    }

    fn fence(&mut self) -> Error {
        let was_stable = self.state.was_stable();
        self.transition(Transition::Fenced);
        self.heartbeat.send(Command::Pause);
        self.assignment = Assignment::default();
        log::error!(
            "{}: fenced by another member with the same group.instance.id{}; stopping without rejoining",
            self.ctx(),
            if was_stable {
                " after this member had joined (two processes share the id)"
            } else {
                ""
            }
        );
        self.fenced_error()
    }

    fn denied_error(&self) -> Error {
        let (api, code, message) =
            self.denied
                .clone()
                .unwrap_or((ApiKey::JoinGroup, KafkaCode::GroupAuthorizationFailed, None));
        Error::Authorization {
            api,
            code,
            resource: Resource::Group(self.config.group_id.clone()),
            message,
        }
    }

    /// Stops the member for good if `e` says the principal may not use the group (as for
    /// fencing: heartbeats stop, the assignment is dropped, every later call returns the
    /// error; only an ACL can fix it, and retrying would just hammer the coordinator); returns
    /// `e` either way.
    pub(crate) fn stop_if_denied(&mut self, e: Error) -> Error {
        let Error::Authorization {
            api,
            code,
            resource: Resource::Group(_),
            message,
        } = &e
        else {
            return e;
        };
        self.denied = Some((*api, *code, message.clone()));
        self.transition(Transition::Denied);
        self.heartbeat.send(Command::Pause);
        self.assignment = Assignment::default();
        self.abandon_join();
        self.conn = None;
        log::error!("{}: {e}; stopping without rejoining", self.ctx());
        e
    }

    /// Joins the group (or rejoins it when a rebalance is pending) and returns what changed.
    /// Blocks until the member has an assignment, a fatal error occurs, or `timeout` passes.
    ///
    /// On timeout the join is not abandoned: a JoinGroup or SyncGroup in flight stays in flight
    /// and the next `join` or [`poll`](Self::poll) takes it up where it stopped. The
    /// [`Error::Timeout`] returned keeps the last error the join retried past (e.g. the
    /// coordinator's address and `connection refused`) as its `last`.
    pub fn join(&mut self, timeout: Duration) -> Result<Vec<GroupEvent>> {
        let _polling = self.poll_clock.enter();
        self.check_usable()?;
        self.wakeup.check()?;
        let deadline = crate::deadline::after(timeout);
        if self.config.topics.is_empty() {
            return Err(Error::Config {
                property: "subscribe",
                problem: "no topics to join with (unsubscribed); subscribe first".into(),
            });
        }
        if self.uses_consumer_protocol() {
            match self.consumer_join(deadline) {
                Ok(Some(events)) => return Ok(events),
                // Fell back to classic: its join goes on.
                Ok(None) => {}
                Err(e) => return Err(self.stop_if_denied(e)),
            }
        }
        let mut events = std::mem::take(&mut self.undelivered);
        self.begin_join(&mut events);
        match self.drive_join(deadline, &mut events) {
            Ok(true) => Ok(events),
            Ok(false) => {
                // Revocations and coordinator moves seen so far reach the caller next time.
                self.undelivered = events;
                self.wakeup.check()?;
                Err(Error::retries_timeout(
                    format!("joining group {}", self.config.group_id),
                    self.last_join_error.take(),
                ))
            }
            Err(e) => {
                self.undelivered = events;
                Err(self.stop_if_denied(e))
            }
        }
    }

    /// Starts a rejoin unless one is in flight: applies the pending rejoin request and gives up
    /// the assignment (eager protocol: everything is given up before rejoining).
    fn begin_join(&mut self, events: &mut Vec<GroupEvent>) {
        if !matches!(self.joining, Joining::Start) {
            return;
        }
        if let Some(reset) = self.rejoin.take() {
            self.transition(Transition::RejoinNeeded {
                reset_member_id: reset,
            });
        }
        if self.revokes_before_joining() {
            events.push(self.revoke_all());
        }
    }

    /// Runs the join until the member has its assignment (`Ok(true)`) or `deadline` passes
    /// (`Ok(false)`, the join's progress kept in `self.joining`). Every wait in here is bounded
    /// by `deadline`; retriable failures are retried, never returned.
    fn drive_join(&mut self, deadline: Instant, events: &mut Vec<GroupEvent>) -> Result<bool> {
        loop {
            match std::mem::take(&mut self.joining) {
                Joining::Start => {
                    if std::mem::take(&mut self.generation_lost) && !self.assignment.is_empty() {
                        events.push(self.lose_all());
                    }
                    if let Some(moved) = self.ensure_coordinator(deadline)? {
                        events.push(moved);
                    }
                    if self.conn.is_none() {
                        return Ok(false);
                    }
                    // The classic heartbeat thread runs from the first classic join on.
                    self.heartbeat.start().map_err(|source| Error::Io {
                        addr: "heartbeat thread".into(),
                        source,
                    })?;
                    self.heartbeat.send(Command::Pause);
                    self.transition(Transition::JoinSent);
                    let started = *self.join_started.get_or_insert_with(Instant::now);
                    match self.send_join() {
                        Ok(pending) => self.joining = Joining::AwaitingJoin { pending, started },
                        Err(e) => self.on_request_error(e, "JoinGroup", deadline)?,
                    }
                }
                Joining::AwaitingJoin { pending, started } => {
                    let Some(conn) = self.conn.as_mut() else { continue };
                    let left = crate::deadline::left(deadline);
                    // Woken: the coordinator may hold the JoinGroup for the whole rebalance.
                    let received = self
                        .wakeup
                        .during(conn.interrupter(), || conn.receive(&pending, left));
                    let resp = match received.unwrap_or(Ok(None)) {
                        Ok(Some(resp)) => resp,
                        Ok(None) => {
                            self.joining = Joining::AwaitingJoin { pending, started };
                            return Ok(false);
                        }
                        Err(e) if self.wakeup.is_pending() => return self.woken_mid_request(e),
                        Err(e) => {
                            self.on_request_error(e, "JoinGroup", deadline)?;
                            continue;
                        }
                    };
                    if let Some(next) = self.on_join_response(resp, started, deadline)? {
                        self.joining = next;
                    }
                }
                Joining::Assigning {
                    resp,
                    generation,
                    join_time,
                    until,
                } => {
                    let assignments = if leads(&resp) {
                        match self.lead(&resp, deadline) {
                            Ok(a) => a,
                            Err(e) if e.is_transient() => {
                                // The followers wait in SyncGroup for this assignment until the
                                // rebalance timeout; a brief failure of the leader's metadata
                                // lookup is retried within it, not returned from poll.
                                if Instant::now() >= until {
                                    log::warn!(
                                        "{}: could not assign partitions within the rebalance timeout: {e}; joining again",
                                        self.ctx()
                                    );
                                    self.last_join_error = Some(e);
                                    continue;
                                }
                                self.note_join_error(e, "assigning partitions");
                                self.joining = Joining::Assigning {
                                    resp,
                                    generation,
                                    join_time,
                                    until,
                                };
                                if !self.backoff(deadline) {
                                    return Ok(false);
                                }
                                continue;
                            }
                            Err(e) => return Err(e),
                        }
                    } else {
                        Vec::new()
                    };
                    match self.send_sync(&generation, assignments) {
                        Ok(pending) => {
                            self.joining = Joining::AwaitingSync {
                                pending,
                                generation,
                                join_time,
                                sent: Instant::now(),
                            }
                        }
                        Err(e) => self.on_request_error(e, "SyncGroup", deadline)?,
                    }
                }
                Joining::AwaitingSync {
                    pending,
                    generation,
                    join_time,
                    sent,
                } => {
                    let Some(conn) = self.conn.as_mut() else { continue };
                    let left = crate::deadline::left(deadline);
                    let received = self
                        .wakeup
                        .during(conn.interrupter(), || conn.receive(&pending, left));
                    let sync = match received.unwrap_or(Ok(None)) {
                        Ok(Some(sync)) => sync,
                        Ok(None) => {
                            self.joining = Joining::AwaitingSync {
                                pending,
                                generation,
                                join_time,
                                sent,
                            };
                            return Ok(false);
                        }
                        Err(e) if self.wakeup.is_pending() => return self.woken_mid_request(e),
                        Err(e) => {
                            self.on_request_error(e, "SyncGroup", deadline)?;
                            continue;
                        }
                    };
                    let code = KafkaCode::from_code(sync.error_code);
                    if !self.handle_group_code(code, ApiKey::SyncGroup, deadline)? {
                        continue;
                    }
                    let sync_time = sent.elapsed();
                    let assignment =
                        Assignment::decode(&sync.assignment).map_err(|source| Error::Decode {
                            api: ApiKey::SyncGroup,
                            source,
                        })?;
                    self.transition(Transition::Synced);
                    self.heartbeat.send(Command::Stable(generation.clone()));
                    self.metrics.session_proven(sent);
                    let rejoined = self.last_generation.map(|g| g != generation.id);
                    self.metrics.joined(join_time, sync_time, rejoined == Some(true));
                    let rebalanced = rejoined.or(std::mem::take(&mut self.first_join_rebalanced));
                    self.last_generation = Some(generation.id);
                    self.join_started = None;
                    self.last_join_error = None;
                    self.join_warnings.joined();
                    log::info!("{}: assigned {} in {sync_time:?} (sync)", self.ctx(), assignment);
                    // Eager: everything was revoked before the join, so all of it is new.
                    let change = Change::between(&self.assignment, &assignment);
                    if !change.revoked.is_empty() {
                        // Cooperative: the partitions moving away are revoked now, in the new
                        // generation (so that the application can still commit them), and the
                        // next poll rejoins so that their new owners get them (KIP-429).
                        log::info!(
                            "{}: revoking {} partitions that move to other members; rejoining",
                            self.ctx(),
                            change.revoked.len()
                        );
                        events.push(GroupEvent::Revoked {
                            generation: generation.id,
                            partitions: change.revoked,
                        });
                        self.schedule_rejoin(false);
                    }
                    events.push(GroupEvent::Assigned {
                        generation: generation.id,
                        partitions: change.added,
                        rebalanced,
                    });
                    self.last_assigned = assignment.clone();
                    self.assignment = assignment;
                    self.last_metadata_check = Instant::now();
                    self.missing_check = Some(Instant::now());
                    return Ok(true);
                }
            }
        }
    }

    /// Acts on a JoinGroup answer: the next step of the join, or `None` to start over.
    fn on_join_response(
        &mut self,
        resp: JoinGroupResponse,
        started: Instant,
        deadline: Instant,
    ) -> Result<Option<Joining>> {
        let code = KafkaCode::from_code(resp.error_code);
        if join_step(ApiKey::JoinGroup, code) == JoinStep::JoinWithGivenMemberId {
            // KIP-394: the coordinator handed out our member id; join again with it at once.
            log::debug!(
                "{}: MEMBER_ID_REQUIRED, rejoining as {}",
                self.ctx(),
                resp.member_id
            );
            self.state.set_member_id(resp.member_id.into());
            self.metrics.member_id_required();
            return Ok(None);
        }
        if !self.handle_group_code(code, ApiKey::JoinGroup, deadline)? {
            return Ok(None);
        }
        let join_time = started.elapsed();
        let generation = joined_generation(&resp);
        self.transition(Transition::Joined(generation.clone()));
        let coordinator = self.coordinator.clone().ok_or(Error::Closed)?;
        // Heartbeats start now, not after SyncGroup, so a slow leader cannot expire us.
        self.heartbeat.send(Command::Start {
            generation: generation.clone(),
            coordinator,
            instance_id: self.instance_id_to_send(),
        });
        let is_leader = leads(&resp);
        if self.last_generation.is_none() {
            let version = self.conn.as_ref().and_then(|c| c.version(ApiKey::JoinGroup).ok());
            self.first_join_rebalanced = first_join_rebalanced(
                self.instance_id_to_send().is_some(),
                is_leader,
                resp.skip_assignment,
                version,
            );
        }
        if !is_leader {
            // A former leader's watch of the topics is the new leader's job now.
            self.leader_snapshot = None;
        }
        log::info!(
            "{}: joined in {join_time:?} ({} protocol {}, {} members{})",
            self.ctx(),
            if is_leader { "leader," } else { "follower," },
            generation.protocol.as_deref().unwrap_or("?"),
            resp.members.len(),
            if resp.skip_assignment {
                ", skip_assignment"
            } else {
                ""
            }
        );
        Ok(Some(Joining::Assigning {
            resp,
            generation,
            join_time,
            until: crate::deadline::after(self.config.max_poll_interval),
        }))
    }

    /// Remembers why the join had to retry, for the timeout a caller may finally get, and logs
    /// it: at warn when [`JoinWarnings`](join_warnings::JoinWarnings) says so, else at debug.
    fn note_join_error(&mut self, e: Error, during: &str) {
        let unready = e
            .kafka_code()
            .is_some_and(crate::group::action::coordinator_unready);
        match self.join_warnings.failed(Instant::now(), unready) {
            Some(failures) => log::warn!(
                "{}: {during}: {e} ({failures} failure(s) since the last warning); retrying",
                self.ctx()
            ),
            None => log::debug!("{}: {during}: {e}; retrying", self.ctx()),
        }
        self.last_join_error = Some(e);
    }

    /// Sleeps `retry.backoff.ms`, or until `deadline` if that comes first; false if `deadline`
    /// has passed.
    fn backoff(&self, deadline: Instant) -> bool {
        self.wakeup
            .sleep_within(self.config.retry_backoff(&self.client), deadline)
    }

    /// Drops a JoinGroup or SyncGroup still in flight, with the connection it was sent on (its
    /// answer would arrive where another request's is expected).
    fn abandon_join(&mut self) {
        if !matches!(self.joining, Joining::Start) {
            self.joining = Joining::Start;
            self.conn = None;
        }
    }

    /// Gives up the whole assignment (eager protocol) as a [`GroupEvent::Revoked`].
    fn revoke_all(&mut self) -> GroupEvent {
        let (generation, partitions) = self.give_up_all("revoking");
        GroupEvent::Revoked {
            generation,
            partitions,
        }
    }

    /// Gives up the whole assignment as a [`GroupEvent::Lost`] (no commit possible).
    fn lose_all(&mut self) -> GroupEvent {
        let (generation, partitions) = self.give_up_all("lost");
        GroupEvent::Lost {
            generation,
            partitions,
        }
    }

    fn give_up_all(&mut self, how: &str) -> (i32, Vec<TopicPartition>) {
        let generation = self.state.generation().map_or(-1, |g| g.id);
        let partitions = std::mem::take(&mut self.assignment).topic_partitions();
        log::info!("{}: {how} {} partitions", self.ctx(), partitions.len());
        (generation, partitions)
    }

    /// Sends a request to the coordinator over the member's own connection (finding the
    /// coordinator first if needed), built for the negotiated version, giving up at `deadline`:
    /// the path for OffsetCommit and OffsetFetch, which must reach the group's coordinator.
    /// When no coordinator could be reached in time, the error is the last cause (a transient
    /// one), so that the caller's own retry loop goes on until its limit.
    ///
    /// While the member's connection carries its JoinGroup or SyncGroup, a commit is refused
    /// (REBALANCE_IN_PROGRESS: its generation is ending), and any other request — OffsetFetch,
    /// DescribeGroups, which no generation bounds — goes over the client's own connection to
    /// the coordinator: a cooperative member rejoins while it keeps consuming, and looks up
    /// the committed offsets of partitions it was just given.
    pub(crate) fn coordinator_request<R: crate::protocol::Request>(
        &mut self,
        deadline: Instant,
        build: impl FnOnce(i16) -> R,
    ) -> Result<R::Response> {
        self.coordinator_request_as(deadline, build, false)
    }

    /// [`coordinator_request`](Self::coordinator_request) for a read the caller repeats until
    /// it is answered (the consumer's OffsetFetch for positions): left in flight at `deadline`
    /// and taken up again by the same request (see `Link::request_resumable`).
    pub(crate) fn coordinator_request_resumable<R: crate::protocol::Request>(
        &mut self,
        deadline: Instant,
        build: impl FnOnce(i16) -> R,
    ) -> Result<R::Response> {
        self.coordinator_request_as(deadline, build, true)
    }

    fn coordinator_request_as<R: crate::protocol::Request>(
        &mut self,
        deadline: Instant,
        build: impl FnOnce(i16) -> R,
        resumable: bool,
    ) -> Result<R::Response> {
        self.check_usable()?;
        if !matches!(self.joining, Joining::Start) {
            if let Some(coordinator) = self
                .coordinator
                .as_ref()
                .filter(|_| R::API_KEY != ApiKey::OffsetCommit)
            {
                return match resumable {
                    true => self.client.send_to_resumable_by(coordinator.id, deadline, build),
                    false => self.client.send_to_by(coordinator.id, deadline, build),
                };
            }
            return Err(Error::Kafka {
                api: R::API_KEY,
                code: KafkaCode::RebalanceInProgress,
                message: Some(format!(
                    "group {} is rebalancing (this member is joining)",
                    self.config.group_id
                )),
            });
        }
        if let Err(e) = self.ensure_connected(deadline) {
            return Err(self.stop_if_denied(e));
        }
        let conn = self.conn.as_mut().ok_or(Error::Closed)?;
        let result = match resumable {
            true => conn.request_resumable(deadline, build),
            false => conn.request(Some(deadline), build),
        };
        if let Err(e) = &result {
            if e.breaks_connection() {
                self.forget_coordinator();
            }
        }
        result
    }

    /// Handles what the heartbeat thread reported, rejoining if needed, and returns within
    /// about `timeout` whatever the group is doing: a rejoin that does not finish in time goes
    /// on at the next call (its JoinGroup or SyncGroup stays in flight), and failures a retry
    /// can fix (a connection reset, a coordinator moving, a leader's metadata lookup failing)
    /// are retried, not returned. If the coordinator stays unreachable for
    /// `default.api.timeout.ms`, poll returns [`Error::Timeout`] naming the last cause; the
    /// member stays usable and keeps trying on the next call.
    pub fn poll(&mut self, timeout: Duration) -> Result<Vec<GroupEvent>> {
        let _polling = self.poll_clock.enter();
        self.check_usable()?;
        self.wakeup.check()?;
        let deadline = crate::deadline::after(timeout);
        if self.config.topics.is_empty() {
            // Unsubscribed: nothing to join until `subscribe`.
            let events = std::mem::take(&mut self.undelivered);
            if events.is_empty() {
                self.wakeup.sleep_within(timeout, deadline);
                self.wakeup.check()?;
            }
            return Ok(events);
        }
        if self.uses_consumer_protocol() {
            match self.consumer_poll(deadline) {
                Ok(Some(events)) => return Ok(events),
                Ok(None) => {}
                Err(e) => return Err(self.stop_if_denied(e)),
            }
        }
        self.resume_refused_heartbeats();
        let mut events = std::mem::take(&mut self.undelivered);
        loop {
            while let Ok(e) = self.heartbeat.events.try_recv() {
                self.on_event_keeping(e, &mut events)?;
            }
            self.check_session(&mut events);
            self.check_leader_metadata(deadline);
            if let Err(e) = self.check_missing_topics(deadline, &mut events) {
                self.undelivered = events;
                return Err(e);
            }
            if self.rejoin_pending() {
                // Eager protocol: hand the revocation to the caller first, so it can commit
                // what it processed while its generation is still valid; the join happens on
                // the next poll. Cooperative members keep their partitions and join at once.
                if self.revokes_before_joining() {
                    events.push(self.revoke_all());
                    return Ok(events);
                }
                self.begin_join(&mut events);
                if let Err(e) = self.drive_join(deadline, &mut events) {
                    self.undelivered = events;
                    return Err(self.stop_if_denied(e));
                }
                self.wakeup.check_unless(!events.is_empty())?;
                return Ok(events);
            }
            if !events.is_empty() {
                return Ok(events);
            }
            match self.wakeup.recv_deadline(&self.heartbeat.events, deadline) {
                Waited::Got(e) => self.on_event_keeping(e, &mut events)?,
                Waited::TimedOut => return Ok(events),
                Waited::Woken => self.wakeup.check()?,
            }
        }
    }

    /// The heartbeat thread stopped because the coordinator refused its connection (credentials,
    /// certificates: [`Event::Refused`]); that can be fixed outside the process, so each poll
    /// after the error restarts it for the current generation, one connection attempt at its
    /// next heartbeat. If the session is still alive then, the member stays in its group with
    /// no rebalance; if not, the session check rejoins.
    fn resume_refused_heartbeats(&mut self) {
        if !std::mem::take(&mut self.heartbeats_refused) {
            return;
        }
        // Mid-join (or unjoined) the join itself starts heartbeats for the generation it gets;
        // heartbeating the old one meanwhile would only earn a second rebalance.
        if self.state.state() != MemberState::Stable || !matches!(self.joining, Joining::Start) {
            return;
        }
        let (Some(generation), Some(coordinator)) =
            (self.state.generation().cloned(), self.coordinator.clone())
        else {
            return;
        };
        self.heartbeat.send(Command::Start {
            generation: generation.clone(),
            coordinator,
            instance_id: self.instance_id_to_send(),
        });
        self.heartbeat.send(Command::Stable(generation.clone()));
    }

    /// Gives the assignment up as lost once no request has proved the session alive for a
    /// whole `session.timeout.ms`: by then the coordinator may have handed the partitions to
    /// another member, so records of them must stop going to the application, and nothing can
    /// be committed for them. The heartbeat thread may be stuck in a request at that moment;
    /// this check does not depend on it.
    fn check_session(&mut self, events: &mut Vec<GroupEvent>) {
        if self.state.state() != MemberState::Stable || self.assignment.is_empty() {
            return;
        }
        let Some(age) = self.metrics.session_age() else {
            return;
        };
        if age < self.config.session_timeout {
            return;
        }
        log::warn!(
            "{}: no heartbeat answered for {age:?} (session.timeout.ms {:?}); the partitions may \
             belong to another member now: giving them up and rejoining",
            self.ctx(),
            self.config.session_timeout
        );
        events.push(self.lose_all());
        // Heartbeats of a generation the coordinator has likely ended only hold the client's
        // connections; the rejoin starts them again.
        self.heartbeat.send(Command::Pause);
        self.abandon_join();
        self.conn = None;
        self.coordinator = None;
        // The broker has dropped a dynamic member; a static one is recognised again by its
        // instance id whatever member id it sends.
        self.schedule_rejoin(!self.static_member);
    }

    /// [`on_event`](Self::on_event) in `poll`: on an error, the events gathered so far (a
    /// revocation, a loss) are kept for the next call. A refused connection is not the end of
    /// the member, and they must still reach the caller.
    fn on_event_keeping(&mut self, e: Event, events: &mut Vec<GroupEvent>) -> Result<()> {
        self.on_event(e, events).inspect_err(|_| {
            self.undelivered = std::mem::take(events);
        })
    }

    fn on_event(&mut self, e: Event, events: &mut Vec<GroupEvent>) -> Result<()> {
        match e {
            Event::CoordinatorMoved { coordinator } => {
                if self.coordinator.as_ref() != Some(&coordinator) {
                    self.coordinator = Some(coordinator.clone());
                    self.conn = None;
                    events.push(GroupEvent::CoordinatorMoved { coordinator });
                }
            }
            // A JoinGroup is on its way (or about to be resent): it answers what a heartbeat
            // thread's rejoin or expired session would ask for, and the coordinator keeps the
            // member for the rebalance timeout, not the session. Acting on either would take
            // the new generation down with the old one (Java ignores them while rejoining).
            Event::RejoinNeeded { .. } | Event::SessionExpired { .. }
                if self.state() == MemberState::Joining =>
            {
                log::debug!("{}: ignoring {e:?}: a join is in progress", self.ctx());
            }
            Event::RejoinNeeded {
                generation,
                reset_member_id,
                reason,
            } if self.state.is_current(&generation) => {
                log::info!("{}: rejoin needed ({reason})", self.ctx());
                // A cooperative member keeps its partitions through a rebalance, but not past
                // the end of its generation (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID): others
                // may own them already, so they are lost (in the generation they belonged
                // to, before the rejoin resets it), as Java's `onPartitionsLost`.
                let over = reason != KafkaCode::RebalanceInProgress;
                if over && self.protocol == RebalanceProtocol::Cooperative && !self.assignment.is_empty() {
                    events.push(self.lose_all());
                }
                self.schedule_rejoin(reset_member_id);
            }
            Event::SessionExpired { generation } if self.state.is_current(&generation) => {
                log::warn!(
                    "{}: session expired on our side; rediscovering the coordinator and rejoining",
                    self.ctx()
                );
                if !self.assignment.is_empty() {
                    events.push(self.lose_all());
                }
                self.abandon_join();
                self.conn = None;
                self.coordinator = None;
                // The broker has dropped a dynamic member; a static one is recognised again by
                // its instance id whatever member id it sends.
                self.schedule_rejoin(!self.static_member);
            }
            Event::PollTimeout { generation } if self.state.is_current(&generation) => {
                // The heartbeat thread has left (or, static, stopped heartbeating) and said why.
                if !self.assignment.is_empty() {
                    events.push(self.lose_all());
                }
                self.abandon_join();
                // A dynamic member's id went with its LeaveGroup; a static one is recognised
                // again by its instance id.
                self.schedule_rejoin(!self.static_member);
            }
            Event::Fenced { generation } if self.state.is_current(&generation) => return Err(self.fence()),
            Event::Fatal { generation, code } if self.state.is_current(&generation) => {
                let e = self.group_error(ApiKey::Heartbeat, code);
                return Err(self.stop_if_denied(e));
            }
            Event::Refused { generation, error } if self.state.is_current(&generation) => {
                self.heartbeats_refused = true;
                return Err(*error);
            }
            stale => log::debug!("{}: ignoring {stale:?} from an older generation", self.ctx()),
        }
        Ok(())
    }

    /// Returns `Ok(true)` to go on, `Ok(false)` to retry the join from the start, or the error.
    fn handle_group_code(&mut self, code: KafkaCode, api: ApiKey, deadline: Instant) -> Result<bool> {
        let during = api.name();
        match join_step(api, code) {
            JoinStep::Proceed => Ok(true),
            JoinStep::JoinAgain { backoff } => {
                log::info!("{}: {during} answered {code}; joining again", self.ctx());
                if backoff {
                    self.backoff(deadline);
                }
                Ok(false)
            }
            // Only a JoinGroup answers it, and `on_join_response` takes the member id first.
            JoinStep::JoinWithGivenMemberId => Ok(false),
            JoinStep::JoinAgainWithNewMemberId => {
                log::info!(
                    "{}: {during} answered {code}; joining again with a new member id",
                    self.ctx()
                );
                self.generation_lost = self.protocol == RebalanceProtocol::Cooperative;
                self.transition(Transition::RejoinNeeded {
                    reset_member_id: true,
                });
                Ok(false)
            }
            JoinStep::FindCoordinator => {
                log::info!(
                    "{}: {during} answered {code}; looking for the coordinator again",
                    self.ctx()
                );
                self.forget_coordinator();
                self.backoff(deadline);
                Ok(false)
            }
            JoinStep::Fenced => Err(self.fence()),
            JoinStep::Fatal if api == ApiKey::JoinGroup && code == KafkaCode::InvalidSessionTimeout => {
                Err(self.invalid_session_timeout(deadline))
            }
            JoinStep::Fatal => Err(self.group_error(api, code)),
        }
    }

    /// A fatal group code as an error: [`Error::Authorization`] for the group when the
    /// coordinator denied it, [`Error::Group`] otherwise.
    fn group_error(&self, api: ApiKey, code: KafkaCode) -> Error {
        let group = &self.config.group_id;
        Error::authorization(api, code, Scope::group(group)).unwrap_or_else(|| Error::Group {
            group: group.clone(),
            code,
            during: api.name(),
        })
    }

    fn on_request_error(&mut self, e: Error, during: &str, deadline: Instant) -> Result<()> {
        if e.breaks_connection() {
            self.note_join_error(e, &format!("{during} failed; looking for the coordinator again"));
            self.forget_coordinator();
            self.backoff(deadline);
            Ok(())
        } else {
            Err(e)
        }
    }

    /// A wakeup cut a JoinGroup or SyncGroup read short, breaking the coordinator connection
    /// (`e`): the join starts over at the next call, over a new connection to the same
    /// coordinator (the coordinator keeps the member through it), and the caller returns.
    fn woken_mid_request(&mut self, e: Error) -> Result<bool> {
        log::debug!("{}: woken up during a join: {e}", self.ctx());
        self.conn = None;
        self.joining = Joining::Start;
        Ok(false)
    }

    /// Marks the coordinator unknown (after a broken connection, or `NOT_COORDINATOR` or
    /// `COORDINATOR_NOT_AVAILABLE` on a request sent through
    /// [`coordinator_request`](Self::coordinator_request)), so the next request finds it again.
    pub(crate) fn forget_coordinator(&mut self) {
        self.joining = Joining::Start;
        // Only the member's own connection: the client's to that broker (metadata, produce,
        // its coordinator lookups) are not wrong because the group moved, and dropping them
        // would make a producer sharing the client reconnect at every coordinator move.
        self.conn = None;
        self.coordinator = None;
    }

    /// Finds the coordinator and connects to it unless connected, by `deadline`: the step
    /// before a request outside of joining. Without a connection by then, returns the last
    /// error the lookups met.
    fn ensure_connected(&mut self, deadline: Instant) -> Result<()> {
        if self.conn.is_none() {
            self.ensure_coordinator(deadline)?;
        }
        if self.conn.is_none() {
            return Err(self
                .last_join_error
                .take()
                .unwrap_or_else(|| Error::NoCoordinator {
                    group: self.config.group_id.clone(),
                }));
        }
        Ok(())
    }

    /// Finds the coordinator and connects to it if needed, until `deadline`; checks static
    /// membership support. Returns with no connection when `deadline` passes first. Once
    /// lookups have failed for `default.api.timeout.ms` in a row, returns the retries timeout
    /// with the last cause (and starts counting again).
    fn ensure_coordinator(&mut self, deadline: Instant) -> Result<Option<GroupEvent>> {
        let mut moved = None;
        let mut first = true;
        // At least one lookup, even when `deadline` has passed (a poll with no time left).
        while self.conn.is_none() {
            let since = *self.discovery_since.get_or_insert_with(Instant::now);
            let group = self.config.group_id.clone();
            // A call with no time left still gets one lookup of a useful length, or a poll(0)
            // loop would never find its coordinator; later attempts end at `deadline` (they
            // might otherwise sleep out a reconnect backoff past it).
            let by = if first {
                lookup_deadline(deadline)
            } else {
                deadline
            };
            first = false;
            let found = self.client.lookup_coordinator_by(&group, by).and_then(|b| {
                let mut link = self.failed_link.take().unwrap_or_else(|| {
                    let mut link = self.client.link(Purpose::Coordinator, b.addr());
                    link.count_reauthentications_in(self.metrics.reauthentication_counter());
                    link
                });
                // Another coordinator starts with a backoff of its own.
                link.retarget(&b.addr());
                match link.connect(Some(by)) {
                    Ok(()) => Ok((b, link)),
                    Err(e) => {
                        self.failed_link = Some(link);
                        Err(e)
                    }
                }
            });
            match found {
                Ok((b, conn)) => {
                    self.discovery_since = None;
                    self.check_static_support(&conn)?;
                    if self.coordinator.as_ref().is_some_and(|old| *old != b) {
                        moved = Some(GroupEvent::CoordinatorMoved {
                            coordinator: b.clone(),
                        });
                    }
                    log::debug!("{}: coordinator is broker {} at {}", self.ctx(), b.id, b.addr());
                    self.coordinator = Some(b);
                    self.conn = Some(conn);
                }
                // A queued lookup never went out: another caller of the client held its
                // connection until `deadline`. Nothing is wrong with the coordinator, and the
                // next call looks again; an error would fail a poll over a neighbour's request.
                Err(e) if e.is_coordinator_transient() || e.is_queued() => {
                    self.note_join_error(e, "finding the coordinator");
                    if since.elapsed() >= self.client.api_timeout() {
                        self.discovery_since = None;
                        return Err(Error::retries_timeout(
                            format!(
                                "finding the coordinator of group {} (default.api.timeout.ms {:?})",
                                self.config.group_id,
                                self.client.api_timeout()
                            ),
                            self.last_join_error.take(),
                        ));
                    }
                    if !self.backoff(deadline) {
                        return Ok(moved);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(moved)
    }

    fn check_static_support(&mut self, conn: &Link) -> Result<()> {
        if self.config.group_instance_id.is_none() {
            return Ok(());
        }
        match conn.check(&STATIC_MEMBERSHIP) {
            Ok(()) => {
                self.static_member = true;
                Ok(())
            }
            Err(e) => match self.config.old_broker_policy {
                OldBrokerPolicy::Error => Err(e),
                OldBrokerPolicy::FallBackToDynamic => {
                    if !self.warned_fallback {
                        log::warn!(
                            "{}: {e}; joining as a dynamic member (FallBackToDynamic)",
                            self.ctx()
                        );
                        self.warned_fallback = true;
                    }
                    self.static_member = false;
                    Ok(())
                }
            },
        }
    }

    fn instance_id_to_send(&self) -> Option<String> {
        self.config
            .group_instance_id
            .clone()
            .filter(|_| self.static_member)
    }

    /// Whether this member gives up its partitions before it rejoins: under the eager
    /// protocol; cooperative members keep them (and the consumer keeps fetching them) through
    /// the rebalance, and the new assignment says which to give up.
    fn revokes_before_joining(&self) -> bool {
        !self.assignment.is_empty() && self.protocol == RebalanceProtocol::Eager
    }

    /// The subscription sent for `assignor`: a cooperative member says what it owns and from
    /// which generation; each assignor adds its own user data.
    fn subscription_metadata(&self, assignor: &dyn super::Assignor) -> Subscription {
        let cooperative = self.protocol == RebalanceProtocol::Cooperative;
        let owns = cooperative && !self.assignment.is_empty();
        Subscription {
            topics: self.config.topics.clone(),
            user_data: assignor
                .subscription_user_data(self.last_generation.map(|g| (&self.last_assigned, g))),
            owned: match owns {
                true => self.assignment.topic_partitions(),
                false => Vec::new(),
            },
            rack_id: self.config.client_rack.clone(),
            generation: self.last_generation.filter(|_| owns),
        }
    }

    /// The rebalance protocol this member follows.
    pub fn rebalance_protocol(&self) -> RebalanceProtocol {
        self.protocol
    }

    /// The JoinGroup this member sends now (its member id, and whether it is still static,
    /// change between joins).
    fn join_request(&self) -> JoinGroupRequest {
        let instance = self.instance_id_to_send();
        let protocols: Vec<(&str, bytes::Bytes)> = self
            .config
            .assignors
            .iter()
            .map(|a| (a.name(), self.subscription_metadata(a.as_ref()).encode()))
            .collect();
        requests::join_group(&requests::JoinGroup {
            group: &self.config.group_id,
            member_id: self.state.member_id(),
            instance_id: instance.as_deref(),
            session_timeout: self.config.session_timeout,
            rebalance_timeout: self.config.max_poll_interval,
            protocols: &protocols,
        })
    }

    fn send_join(&mut self) -> Result<Pending<JoinGroupRequest>> {
        let req = self.join_request();
        let wait = self.config.max_poll_interval.max(self.config.session_timeout) + JOIN_MARGIN;
        let version = self
            .conn
            .as_ref()
            .ok_or(Error::Closed)?
            .version(ApiKey::JoinGroup)?;
        log::debug!("{}: JoinGroup v{version}", self.ctx());
        let conn = self.conn.as_mut().ok_or(Error::Closed)?;
        conn.send_pending(&req, version, Some(wait))
    }

    fn send_sync(
        &mut self,
        g: &Generation,
        assignments: Vec<SyncGroupRequestAssignment>,
    ) -> Result<Pending<SyncGroupRequest>> {
        let instance = self.instance_id_to_send();
        let req = requests::sync_group(&self.config.group_id, g, instance.as_deref(), assignments);
        // Followers wait in SyncGroup for the leader to assign, up to the rebalance timeout.
        let wait = self.config.max_poll_interval + JOIN_MARGIN;
        let conn = self.conn.as_mut().ok_or(Error::Closed)?;
        let version = conn.version(ApiKey::SyncGroup)?;
        conn.send_pending(&req, version, Some(wait))
    }

    /// Replaces the subscribed topics (Java's `subscribe` called again), each a valid topic
    /// name, at least one; checked before anything changes. Takes effect at the next
    /// [`poll`](Self::poll): under the classic protocol the member rejoins with the new
    /// subscription (an eager member gives all its partitions up first, a cooperative one
    /// those the new assignment moves, topics dropped included); under the consumer protocol
    /// its next heartbeat carries the subscription and the coordinator reassigns. After
    /// [`unsubscribe`](Self::unsubscribe), the next poll joins the group again.
    pub fn subscribe<I, S>(&mut self, topics: I) -> Result<()>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.check_usable()?;
        let topics: Vec<String> = topics.into_iter().map(Into::into).collect();
        if topics.is_empty() {
            return Err(Error::Config {
                property: "subscribe",
                problem: "no topics (unsubscribe leaves the group)".into(),
            });
        }
        for t in &topics {
            crate::names::check_topic("subscribe", t)?;
        }
        if topics == self.config.topics {
            return Ok(());
        }
        log::info!(
            "{}: subscription {:?} -> {topics:?}",
            self.ctx(),
            self.config.topics
        );
        self.config.topics = topics;
        // What the leader compares the metadata with was the old subscription's.
        self.leader_snapshot = None;
        if self.uses_consumer_protocol() {
            self.consumer_subscribe();
        } else if self.state.generation().is_some() {
            self.schedule_rejoin(false);
        }
        Ok(())
    }

    /// Leaves the group ([`leave_group`](Self::leave_group): its partitions move to the
    /// others at once, a static member's included) and subscribes to nothing (Java's
    /// `unsubscribe`): [`poll`](Self::poll) then joins nothing and returns no events until
    /// [`subscribe`](Self::subscribe). The member holds no partitions afterwards, and no
    /// event says so (as after `leave_group`). Returns the LeaveGroup's error, if any; the
    /// subscription is empty regardless.
    pub fn unsubscribe(&mut self) -> Result<()> {
        self.check_usable()?;
        // In the group: a classic generation, or a consumer-protocol membership (a consumer's
        // `unsubscribe` has left already, and leaves nothing to do here).
        let left = if self.state.generation().is_some() || self.consumer.is_some() {
            self.leave_group()
        } else {
            // Not in the group yet: a join in flight is dropped, nothing to leave.
            self.abandon_join();
            Ok(())
        };
        self.config.topics.clear();
        self.rejoin = None;
        log::info!("{}: unsubscribed", self.ctx());
        left
    }

    /// Asks for a rebalance at the next [`poll`](Self::poll) (e.g. after the application
    /// changed what it can handle).
    pub fn request_rejoin(&mut self) {
        if self.uses_consumer_protocol() {
            // The coordinator decides every rebalance under this protocol.
            log::debug!(
                "{}: rejoin requested; the consumer protocol has none to do",
                self.ctx()
            );
            return;
        }
        self.schedule_rejoin(false);
    }

    /// Marks a rejoin pending, keeping an empty member id once one was asked for.
    fn schedule_rejoin(&mut self, reset_member_id: bool) {
        self.rejoin = Some(merge_rejoin(self.rejoin, reset_member_id));
    }

    /// Removes this static member from the group now (LeaveGroup v3+ by instance id), so its
    /// partitions move to the others at once instead of after the session timeout — for
    /// scaling down. Needs Kafka 2.4+. A dynamic member sends a plain LeaveGroup.
    pub fn leave_group(&mut self) -> Result<()> {
        self.check_usable()?;
        if self.uses_consumer_protocol() {
            let deadline = crate::deadline::after(self.client.api_timeout());
            let result = self.consumer_leave(false, deadline);
            self.transition(Transition::Left);
            return result;
        }
        self.heartbeat.send(Command::Pause);
        self.abandon_join();
        let deadline = crate::deadline::after(self.client.api_timeout());
        let result = self.send_leave(deadline);
        self.assignment = Assignment::default();
        self.transition(Transition::Left);
        result
    }

    /// Sends LeaveGroup, giving up at `deadline`.
    fn send_leave(&mut self, deadline: Instant) -> Result<()> {
        if self.conn.is_none() {
            let by = deadline.min(crate::deadline::after(
                self.client.connection_config().request_timeout,
            ));
            self.ensure_coordinator(by)?;
            if self.conn.is_none() {
                return Err(Error::retries_timeout(
                    format!("LeaveGroup for group {}", self.config.group_id),
                    self.last_join_error.take(),
                ));
            }
        }
        // After connecting: finding the coordinator decides whether we are still static.
        let instance = self.instance_id_to_send();
        let conn = self.conn.as_mut().ok_or(Error::Closed)?;
        let version = conn.version(ApiKey::LeaveGroup)?;
        if instance.is_some() {
            conn.check(&REMOVE_MEMBERS_BY_INSTANCE_ID)?;
        }
        let me = requests::member_identity(self.state.member_id(), instance.as_deref(), LEAVE_REASON);
        let req = requests::leave_group(&self.config.group_id, &[me], version);
        let timeout = crate::deadline::clamp(self.client.connection_config().request_timeout, deadline);
        let resp = conn.send_at(&req, version, Some(timeout))?;
        if let Some(c) = leave_error(&resp) {
            let group = &self.config.group_id;
            return Err(Error::from_code(ApiKey::LeaveGroup, c, Scope::group(group), None));
        }
        log::info!("{}: left the group", self.ctx());
        Ok(())
    }

    /// Stops the member, within `close_timeout`. A dynamic member leaves the group so that its
    /// partitions move at once. A static member's partitions stay reserved for it until the
    /// session times out, so a restart within the session timeout gets them back without a
    /// rebalance: under the classic protocol it stops heartbeating and sends no LeaveGroup;
    /// under the consumer protocol (KIP-848) it sends the static leave heartbeat (member epoch
    /// -2), which tells the coordinator it is gone but keeps its assignment for it. The
    /// heartbeat thread is stopped before this returns, so no request for this member is in
    /// flight afterwards: a heartbeat in flight is cut off, and a thread still in a name lookup
    /// or TCP connect, which nothing can cut short, is not waited for (it ends with that step
    /// and sends nothing more).
    pub fn close(mut self) -> Result<()> {
        self.close_inner(crate::deadline::after(self.config.close_timeout))
    }

    /// [`close`](Self::close), done by `deadline` (a consumer's close shares its bound with
    /// its final commit).
    pub(crate) fn close_by(mut self, deadline: Instant) -> Result<()> {
        self.close_inner(deadline)
    }

    /// Marks a call of the application's as a poll until the guard drops: a
    /// [`Consumer`](crate::Consumer)'s poll, around everything it does between its member's
    /// polls.
    pub(crate) fn polling(&self) -> PollGuard {
        self.poll_clock.enter()
    }

    /// The configured close bound.
    pub(crate) fn close_timeout(&self) -> Duration {
        self.config.close_timeout
    }

    fn close_inner(&mut self, deadline: Instant) -> Result<()> {
        if matches!(self.state.state(), MemberState::Closed) {
            return Ok(());
        }
        if self.consumer.is_some() {
            // The consumer protocol's leave heartbeat: epoch -2 for a static member (its
            // partitions wait for it for the session timeout), -1 for a dynamic one.
            let result = self.consumer_leave(true, deadline);
            self.heartbeat.shutdown(crate::deadline::left(deadline));
            self.transition(Transition::Closed);
            self.conn = None;
            return result;
        }
        // `close_timeout` bounds everything here. A static member needs no network at all: it
        // only stops its heartbeat thread, interrupting a heartbeat in flight.
        self.heartbeat.shutdown(crate::deadline::left(deadline));
        self.abandon_join();
        let joined = matches!(
            self.state.state(),
            MemberState::Joining | MemberState::AwaitingSync | MemberState::Stable
        );
        let result = if joined && !self.static_member && !self.state.member_id().is_empty() {
            self.send_leave(deadline)
        } else {
            Ok(())
        };
        if self.static_member {
            log::info!(
                "{}: closed; static member keeps its partitions until the session times out",
                self.ctx()
            );
        }
        self.transition(Transition::Closed);
        self.conn = None;
        result
    }

    /// The heartbeat thread stops sending without telling the member, as if the process hung
    /// (`unstable::TestHooks`).
    pub(crate) fn freeze_heartbeats(&self) {
        self.freeze_consumer_heartbeats(true);
        self.heartbeat.send(Command::Freeze);
    }

    /// Stops like a killed process, telling the coordinator nothing (a static member's close
    /// sends nothing on classic either; under the consumer protocol it sends the static leave
    /// heartbeat, which a crash does not) (`unstable::TestHooks`).
    pub(crate) fn crash(mut self) {
        self.abandon_consumer_protocol();
        self.heartbeat.shutdown(Duration::from_secs(1));
        self.abandon_join();
        self.transition(Transition::Closed);
    }

    /// A consumer-protocol member's heartbeats resume after
    /// [`freeze_heartbeats`](Self::freeze_heartbeats), as when a hung process wakes up
    /// (`unstable::TestHooks`).
    pub(crate) fn thaw_heartbeats(&self) {
        self.freeze_consumer_heartbeats(false);
    }
}

impl Drop for GroupMember {
    fn drop(&mut self) {
        if let Err(e) = self.close_inner(crate::deadline::after(self.config.close_timeout)) {
            log::debug!("{}: close on drop: {e}", self.ctx());
        }
    }
}

/// What the join does about the code a JoinGroup or SyncGroup answered: the group table
/// ([`classify`]) read for the join loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JoinStep {
    /// Go on with the answer.
    Proceed,
    /// KIP-394, JoinGroup only: the coordinator handed out our member id; join again with it at
    /// once.
    JoinWithGivenMemberId,
    /// Join again from the start with the same member id, after `retry.backoff.ms` if
    /// `backoff` (not when the group is only rebalancing: the JoinGroup is what it waits for).
    JoinAgain {
        /// Pause first.
        backoff: bool,
    },
    /// The coordinator forgot us: join again at once with an empty member id.
    JoinAgainWithNewMemberId,
    /// Find the coordinator again (after a backoff), then join.
    FindCoordinator,
    /// Another member has our instance id: stop.
    Fenced,
    /// Stop with the code as the error.
    Fatal,
}

fn join_step(api: ApiKey, code: KafkaCode) -> JoinStep {
    if api == ApiKey::JoinGroup && code == KafkaCode::MemberIdRequired {
        return JoinStep::JoinWithGivenMemberId;
    }
    match classify(code) {
        GroupAction::Proceed => JoinStep::Proceed,
        GroupAction::Retry | GroupAction::Rejoin => JoinStep::JoinAgain {
            backoff: code != KafkaCode::RebalanceInProgress,
        },
        GroupAction::RejoinWithResetMemberId => JoinStep::JoinAgainWithNewMemberId,
        GroupAction::RediscoverCoordinator => JoinStep::FindCoordinator,
        GroupAction::Fenced => JoinStep::Fenced,
        GroupAction::Fatal => JoinStep::Fatal,
    }
}

/// The generation a successful JoinGroup answer puts us in.
fn joined_generation(resp: &JoinGroupResponse) -> Generation {
    Generation {
        id: resp.generation_id,
        member_id: resp.member_id.clone().into(),
        protocol: resp.protocol_name.clone().map(Into::into),
    }
}

/// What a first JoinGroup answer (the member had no generation before in this process) says
/// about the group rebalancing for it, as Kafka's classic group coordinator answers
/// (`GroupMetadataManager`): a new dynamic member always completes a join phase (a new
/// generation); a static member retaking its place in a `Stable` group gets the group's
/// generation as it was, and on JoinGroup v9+ (KIP-814) the leader is then told, and only then,
/// to skip the assignment. Below v9 a 3.2+ coordinator also hands a static leader the old
/// generation without saying so, and a follower's answer never differs: `None`.
fn first_join_rebalanced(
    static_member: bool,
    leader: bool,
    skip_assignment: bool,
    join_version: Option<i16>,
) -> Option<bool> {
    if !static_member {
        return Some(true);
    }
    match join_version {
        Some(v) if v >= 9 && leader => Some(!skip_assignment),
        _ => None,
    }
}

/// Whether the JoinGroup answer makes us the leader, the member that assigns.
fn leads(resp: &JoinGroupResponse) -> bool {
    resp.leader == resp.member_id
}

/// The error a LeaveGroup answer reports, at the group's level or for our member (v3+), if
/// any. `UNKNOWN_MEMBER_ID` is none: the coordinator already forgetting us is what leaving
/// wants anyway.
pub(super) fn leave_error(resp: &LeaveGroupResponse) -> Option<KafkaCode> {
    let member_code = resp.members.first().map_or(0, |m| m.error_code);
    [resp.error_code, member_code]
        .into_iter()
        .map(KafkaCode::from_code)
        .find(|c| c.is_error() && *c != KafkaCode::UnknownMemberId)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::leave_group_response::MemberResponse;

    /// A static member (its close sends nothing) in generation `g`, without any network.
    fn stable_member(g: &Generation) -> GroupMember {
        let client = Client::builder()
            .bootstrap_servers("localhost:1")
            .build()
            .unwrap();
        let mut config = MemberConfig::new("g");
        config.group_instance_id = Some("worker-1".into());
        let mut m = GroupMember::new(client, config).unwrap();
        m.transition(Transition::JoinSent);
        m.transition(Transition::Joined(g.clone()));
        m.transition(Transition::Synced);
        assert_eq!(m.state(), MemberState::Stable);
        m
    }

    fn generation(id: i32, member_id: &str) -> Generation {
        Generation {
            id,
            member_id: member_id.into(),
            protocol: Some("range".into()),
        }
    }

    #[test]
    fn an_event_for_an_older_generation_is_ignored() {
        let now = generation(3, "worker-1-new");
        // Same generation id: a static member that rejoined an unchanged group.
        let stale = [
            generation(3, "worker-1-old"),
            generation(2, "worker-1-new"),
            Generation {
                protocol: Some("roundrobin".into()),
                ..now.clone()
            },
        ];
        for old in &stale {
            let mut m = stable_member(&now);
            let mut events = Vec::new();
            let rejoin = Event::RejoinNeeded {
                generation: old.clone(),
                reset_member_id: true,
                reason: KafkaCode::UnknownMemberId,
            };
            m.on_event(rejoin, &mut events).unwrap();
            m.on_event(
                Event::Fenced {
                    generation: old.clone(),
                },
                &mut events,
            )
            .unwrap();
            let fatal = Event::Fatal {
                generation: old.clone(),
                code: KafkaCode::GroupAuthorizationFailed,
            };
            m.on_event(fatal, &mut events).unwrap();
            m.on_event(
                Event::SessionExpired {
                    generation: old.clone(),
                },
                &mut events,
            )
            .unwrap();
            assert!(events.is_empty(), "{old:?}: {events:?}");
            assert_eq!(m.rejoin, None, "{old:?}");
            assert_eq!(m.state(), MemberState::Stable, "{old:?}");
            assert_eq!(m.member_id(), "worker-1-new");
        }
    }

    #[test]
    fn a_rejoin_or_expiry_of_the_current_generation_is_ignored_while_joining() {
        // The heartbeat thread answered for generation 3 just before the member sent its
        // JoinGroup: the generation is still current, but the join already does what the
        // event asks, and acting on it would rebalance the group a second time.
        let now = generation(3, "worker-1");
        let mut m = stable_member(&now);
        m.transition(Transition::JoinSent);
        assert_eq!(m.state(), MemberState::Joining);
        let mut events = Vec::new();
        let rejoin = Event::RejoinNeeded {
            generation: now.clone(),
            reset_member_id: false,
            reason: KafkaCode::RebalanceInProgress,
        };
        m.on_event(rejoin, &mut events).unwrap();
        let expired = Event::SessionExpired {
            generation: now.clone(),
        };
        m.on_event(expired, &mut events).unwrap();
        assert!(events.is_empty(), "{events:?}");
        assert_eq!(m.rejoin, None);
        assert_eq!(m.state(), MemberState::Joining);
        // A fence is acted on whatever the member is doing.
        let fenced = Event::Fenced { generation: now };
        assert!(matches!(
            m.on_event(fenced, &mut events),
            Err(Error::Fenced { .. })
        ));
    }

    #[test]
    fn an_event_for_the_current_generation_is_acted_on() {
        let now = generation(3, "worker-1-new");
        let mut m = stable_member(&now);
        let rejoin = Event::RejoinNeeded {
            generation: now.clone(),
            reset_member_id: false,
            reason: KafkaCode::RebalanceInProgress,
        };
        m.on_event(rejoin, &mut Vec::new()).unwrap();
        assert_eq!(m.rejoin, Some(false));
        let e = m
            .on_event(
                Event::Fenced {
                    generation: now.clone(),
                },
                &mut Vec::new(),
            )
            .unwrap_err();
        assert!(matches!(e, Error::Fenced { .. }), "{e}");
        assert_eq!(m.state(), MemberState::Fenced);
    }

    #[test]
    fn join_answers_each_code() {
        use JoinStep as S;
        use KafkaCode as K;
        for api in [ApiKey::JoinGroup, ApiKey::SyncGroup] {
            let step = |code| join_step(api, code);
            assert_eq!(step(K::None), S::Proceed);
            // The group rebalances: the next JoinGroup is what it waits for, so no pause.
            assert_eq!(step(K::RebalanceInProgress), S::JoinAgain { backoff: false });
            assert_eq!(step(K::IllegalGeneration), S::JoinAgain { backoff: true });
            // Loading: the same coordinator, after a pause (as Kafka's Java client does).
            assert_eq!(step(K::CoordinatorLoadInProgress), S::JoinAgain { backoff: true });
            assert_eq!(step(K::RequestTimedOut), S::JoinAgain { backoff: true });
            assert_eq!(step(K::UnknownMemberId), S::JoinAgainWithNewMemberId);
            assert_eq!(step(K::NotCoordinator), S::FindCoordinator);
            assert_eq!(step(K::CoordinatorNotAvailable), S::FindCoordinator);
            assert_eq!(step(K::FencedInstanceId), S::Fenced);
            for fatal in [
                K::GroupAuthorizationFailed,
                K::InconsistentGroupProtocol,
                K::InvalidSessionTimeout,
                K::GroupMaxSizeReached,
                K::Unknown(-999),
            ] {
                assert_eq!(step(fatal), S::Fatal, "{api:?} {fatal}");
            }
        }
        // KIP-394's member id is handed out by JoinGroup only.
        assert_eq!(
            join_step(ApiKey::JoinGroup, K::MemberIdRequired),
            S::JoinWithGivenMemberId
        );
        assert_eq!(join_step(ApiKey::SyncGroup, K::MemberIdRequired), S::Fatal);
    }

    #[test]
    fn a_first_join_knows_it_rebalanced_where_the_answer_says_so() {
        // Dynamic: always a new generation.
        for v in [None, Some(0), Some(9)] {
            assert_eq!(first_join_rebalanced(false, true, false, v), Some(true));
            assert_eq!(first_join_rebalanced(false, false, false, v), Some(true));
        }
        // A static leader on v9+: skip_assignment is exactly "no rebalance".
        assert_eq!(first_join_rebalanced(true, true, true, Some(9)), Some(false));
        assert_eq!(first_join_rebalanced(true, true, false, Some(9)), Some(true));
        // Below v9 and for followers the answer is the same either way.
        assert_eq!(first_join_rebalanced(true, true, false, Some(8)), None);
        assert_eq!(first_join_rebalanced(true, false, false, Some(9)), None);
        assert_eq!(first_join_rebalanced(true, true, false, None), None);
    }

    #[test]
    fn a_join_answer_gives_the_generation_and_the_leader() {
        let resp = JoinGroupResponse {
            generation_id: 8,
            member_id: "m-2".into(),
            leader: "m-1".into(),
            protocol_name: Some("range".into()),
            ..Default::default()
        };
        assert_eq!(
            joined_generation(&resp),
            Generation {
                id: 8,
                member_id: "m-2".into(),
                protocol: Some("range".into()),
            }
        );
        assert!(!leads(&resp));
        let leader = JoinGroupResponse {
            leader: "m-2".into(),
            ..resp
        };
        assert!(leads(&leader));
    }

    #[test]
    fn leaving_reports_errors_but_not_an_unknown_member() {
        let answer = |top: KafkaCode, member: Option<KafkaCode>| LeaveGroupResponse {
            error_code: top.code(),
            members: member
                .map(|c| MemberResponse {
                    member_id: "m-1".into(),
                    error_code: c.code(),
                    ..Default::default()
                })
                .into_iter()
                .collect(),
            ..Default::default()
        };
        use KafkaCode as K;
        // v0-2 answers have no members.
        assert_eq!(leave_error(&answer(K::None, None)), None);
        assert_eq!(leave_error(&answer(K::UnknownMemberId, None)), None);
        assert_eq!(leave_error(&answer(K::None, Some(K::UnknownMemberId))), None);
        assert_eq!(leave_error(&answer(K::None, Some(K::None))), None);
        assert_eq!(
            leave_error(&answer(K::NotCoordinator, None)),
            Some(K::NotCoordinator)
        );
        assert_eq!(
            leave_error(&answer(K::None, Some(K::FencedInstanceId))),
            Some(K::FencedInstanceId)
        );
        // The group's code comes first.
        assert_eq!(
            leave_error(&answer(K::GroupAuthorizationFailed, Some(K::FencedInstanceId))),
            Some(K::GroupAuthorizationFailed)
        );
    }
}
