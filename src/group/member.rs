//! A group member: a thin shell over the engine of its group protocol, chosen once when it is
//! built — [`Classic`] (JoinGroup, SyncGroup, Heartbeat; `crate::group::classic`) or
//! [`Kip848`] (ConsumerGroupHeartbeat; `crate::group::kip848`). A KIP-848 member whose
//! coordinator lacks that protocol is handed to a new classic engine when its policy allows
//! (`GroupProtocolPolicy::FallBackToClassic`); nothing else ever switches.
//!
//! The shell keeps what both protocols share ([`core`]: settings, client, state machine and
//! identity, assignment, the coordinator session, wakeup, poll clock, events a failed call
//! could not deliver, and the stop on fencing or denial) and answers the calls of the
//! application and of the [`Consumer`](crate::Consumer) that wraps it.

pub(in crate::group) mod core;
mod join_warnings;

use self::core::Core;
use super::assignment::{Assignment, TopicPartition};
use super::assignor::RebalanceProtocol;
use super::classic::Classic;
use super::config::MemberConfig;
use super::kip848::heartbeat::HeartbeatApi;
use super::kip848::member::Kip848;
use super::metrics::MemberMetrics;
use super::poll_timer::PollGuard;
use super::state::{Generation, MemberState, Transition};
use crate::client::{Broker, Client};
use crate::error::{Error, Result};
use crate::wakeup::{Wakeup, WakeupHandle};
use std::time::{Duration, Instant};

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
    core: Core,
    engine: Engine,
}

/// The protocol a member speaks, each with its own state; chosen at build.
#[derive(Debug)]
enum Engine {
    /// `group.protocol=classic`, or a KIP-848 member that fell back.
    Classic(Box<Classic>),
    /// `group.protocol=consumer` (KIP-848).
    Kip848(Box<Kip848>),
}

/// The least time a coordinator lookup (and the connection to the coordinator) is given, however
/// little the caller left: a poll is late by at most this when the coordinator is unreachable.
pub(in crate::group) const MIN_LOOKUP: Duration = Duration::from_secs(1);

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
        let core = Core::new(client, config);
        let engine = match core.config.group_protocol {
            _ if core.config.share => Engine::Kip848(Box::new(Kip848::new(HeartbeatApi::ShareGroup))),
            crate::GroupProtocol::Consumer => {
                Engine::Kip848(Box::new(Kip848::new(HeartbeatApi::ConsumerGroup)))
            }
            crate::GroupProtocol::Classic => Engine::Classic(Box::new(Classic::new(&core))),
        };
        Ok(GroupMember { core, engine })
    }

    /// A handle another thread can use to make a blocked [`poll`](Self::poll) or
    /// [`join`](Self::join) return [`Error::Wakeup`] at once (or the next call, if none is
    /// blocked); see [`WakeupHandle`]. Java's `KafkaConsumer.wakeup()`.
    pub fn wakeup_handle(&self) -> WakeupHandle {
        self.core.wakeup.handle()
    }

    /// The member's wakeup, which its consumer shares.
    pub(crate) fn wakeup(&self) -> &Wakeup {
        &self.core.wakeup
    }

    /// The group id.
    pub fn group_id(&self) -> &str {
        &self.core.config.group_id
    }

    /// The configured `group.instance.id`.
    pub fn group_instance_id(&self) -> Option<&str> {
        self.core.config.group_instance_id.as_deref()
    }

    /// Whether the member joins as a static member (false after a fallback to dynamic).
    pub fn is_static(&self) -> bool {
        self.core.static_member
    }

    /// Current state.
    pub fn state(&self) -> MemberState {
        match &self.engine {
            Engine::Classic(_) => self.core.state.state(),
            Engine::Kip848(k) => k.state(&self.core),
        }
    }

    /// Why the member has not joined (yet): the last error its join retried past, such as a
    /// refused connection or a coordinator not available. `None` once a join succeeded, and
    /// before any failed. A `poll` that keeps retrying returns `Ok` with no events; this is
    /// what a program that gives up on joining reports (the CLI's `join` does).
    pub fn last_join_error(&self) -> Option<&Error> {
        self.core.last_join_error.as_ref()
    }

    /// The generation joined last; under the consumer protocol, the member epoch (its `id`)
    /// and the member id as of the last call.
    pub fn generation(&self) -> Option<&Generation> {
        self.core.generation()
    }

    /// Our member id (empty before the first join).
    pub fn member_id(&self) -> &str {
        self.core.state.member_id()
    }

    /// The group protocol this member speaks: the configured `group.protocol`, or classic
    /// after a fallback ([`GroupProtocolPolicy::FallBackToClassic`](super::GroupProtocolPolicy)).
    pub fn group_protocol(&self) -> crate::GroupProtocol {
        match self.engine {
            Engine::Classic(_) => crate::GroupProtocol::Classic,
            Engine::Kip848(_) => crate::GroupProtocol::Consumer,
        }
    }

    /// The current assignment (empty unless Stable).
    pub fn assignment(&self) -> &Assignment {
        &self.core.assignment
    }

    /// The coordinator in use.
    pub fn coordinator(&self) -> Option<&Broker> {
        match &self.engine {
            Engine::Classic(_) => self.core.session.coordinator.as_ref(),
            Engine::Kip848(k) => k.coordinator(&self.core),
        }
    }

    /// Join, sync and heartbeat figures.
    pub fn metrics(&self) -> MemberMetrics {
        self.core.metrics.snapshot()
    }

    /// The topics this member subscribes to.
    pub fn subscription(&self) -> &[String] {
        &self.core.config.topics
    }

    /// Whether a rebalance is pending or under way (the next [`poll`](Self::poll) rejoins, or
    /// goes on with the join in flight).
    pub fn rejoin_pending(&self) -> bool {
        match &self.engine {
            Engine::Classic(c) => c.rejoin_pending(self.core.state.state()),
            Engine::Kip848(k) => k.rejoin_pending(),
        }
    }

    /// The rebalance protocol this member follows (always cooperative under KIP-848, whose
    /// assignments are incremental whatever the client-side assignors say).
    pub fn rebalance_protocol(&self) -> RebalanceProtocol {
        match &self.engine {
            Engine::Classic(c) => c.protocol(),
            Engine::Kip848(_) => RebalanceProtocol::Cooperative,
        }
    }

    /// Who is speaking, for log lines (also the consumer's).
    pub(crate) fn ctx(&self) -> String {
        self.core.ctx()
    }

    /// Stops the member for good if `e` says the principal may not use the group (as for
    /// fencing: heartbeats stop, the assignment is dropped, every later call returns the
    /// error; only an ACL can fix it, and retrying would just hammer the coordinator); returns
    /// `e` either way.
    pub(crate) fn stop_if_denied(&mut self, e: Error) -> Error {
        match &mut self.engine {
            Engine::Classic(c) => c.stop_if_denied(&mut self.core, e),
            Engine::Kip848(_) => {
                self.core.deny(&e);
                e
            }
        }
    }

    /// Joins the group (or rejoins it when a rebalance is pending) and returns what changed.
    /// Blocks until the member has an assignment, a fatal error occurs, or `timeout` passes.
    ///
    /// On timeout the join is not abandoned: a JoinGroup or SyncGroup in flight stays in flight
    /// and the next `join` or [`poll`](Self::poll) takes it up where it stopped. The
    /// [`Error::Timeout`] returned keeps the last error the join retried past (e.g. the
    /// coordinator's address and `connection refused`) as its `last`.
    pub fn join(&mut self, timeout: Duration) -> Result<Vec<GroupEvent>> {
        let _polling = self.core.poll_clock.enter();
        self.core.check_usable()?;
        self.core.wakeup.check()?;
        let deadline = crate::deadline::after(timeout);
        if self.core.config.topics.is_empty() {
            return Err(Error::Config {
                property: "subscribe",
                problem: "no topics to join with (unsubscribed); subscribe first".into(),
            });
        }
        let joined = loop {
            match &mut self.engine {
                Engine::Classic(c) => break c.join(&mut self.core, deadline),
                Engine::Kip848(k) => match k.join(&mut self.core, deadline) {
                    Ok(Some(events)) => break Ok(events),
                    // Fell back to classic: its join goes on.
                    Ok(None) => self.fall_back_to_classic(),
                    Err(e) => break Err(e),
                },
            }
        };
        joined.map_err(|e| self.stop_if_denied(e))
    }

    /// A KIP-848 member whose coordinator lacks the protocol becomes a classic one
    /// (`GroupProtocolPolicy::FallBackToClassic`; the KIP-848 engine has stopped its thread).
    fn fall_back_to_classic(&mut self) {
        self.engine = Engine::Classic(Box::new(Classic::new(&self.core)));
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
        self.core.check_usable()?;
        match &mut self.engine {
            Engine::Classic(c) => c.coordinator_request(&mut self.core, deadline, build, resumable),
            Engine::Kip848(_) => {
                if let Err(e) = self.core.ensure_connected(deadline) {
                    return Err(self.stop_if_denied(e));
                }
                self.core.request_connected(deadline, build, resumable)
            }
        }
    }

    /// Handles what the heartbeat thread reported, rejoining if needed, and returns within
    /// about `timeout` whatever the group is doing: a rejoin that does not finish in time goes
    /// on at the next call (its JoinGroup or SyncGroup stays in flight), and failures a retry
    /// can fix (a connection reset, a coordinator moving, a leader's metadata lookup failing)
    /// are retried, not returned. If the coordinator stays unreachable for
    /// `default.api.timeout.ms`, poll returns [`Error::Timeout`] naming the last cause; the
    /// member stays usable and keeps trying on the next call.
    pub fn poll(&mut self, timeout: Duration) -> Result<Vec<GroupEvent>> {
        let _polling = self.core.poll_clock.enter();
        self.core.check_usable()?;
        self.core.wakeup.check()?;
        let deadline = crate::deadline::after(timeout);
        if self.core.config.topics.is_empty() {
            // Unsubscribed: nothing to join until `subscribe`.
            let events = std::mem::take(&mut self.core.undelivered);
            if events.is_empty() {
                self.core.wakeup.sleep_within(timeout, deadline);
                self.core.wakeup.check()?;
            }
            return Ok(events);
        }
        let polled = loop {
            match &mut self.engine {
                Engine::Classic(c) => break c.poll(&mut self.core, deadline),
                Engine::Kip848(k) => match k.poll(&mut self.core, deadline) {
                    Ok(Some(events)) => break Ok(events),
                    // Fell back to classic: its poll goes on.
                    Ok(None) => self.fall_back_to_classic(),
                    Err(e) => break Err(e),
                },
            }
        };
        polled.map_err(|e| self.stop_if_denied(e))
    }

    /// Marks the coordinator unknown (after a broken connection, or `NOT_COORDINATOR` or
    /// `COORDINATOR_NOT_AVAILABLE` on a request sent through
    /// [`coordinator_request`](Self::coordinator_request)), so the next request finds it again.
    pub(crate) fn forget_coordinator(&mut self) {
        match &mut self.engine {
            Engine::Classic(c) => c.forget_coordinator(&mut self.core),
            Engine::Kip848(_) => self.core.session.forget(),
        }
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
        self.core.check_usable()?;
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
        if topics == self.core.config.topics {
            return Ok(());
        }
        log::info!(
            "{}: subscription {:?} -> {topics:?}",
            self.ctx(),
            self.core.config.topics
        );
        self.core.config.topics = topics;
        match &mut self.engine {
            Engine::Classic(c) => c.subscribed(&mut self.core),
            Engine::Kip848(k) => k.subscribe(&mut self.core),
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
        self.core.check_usable()?;
        let left = match &mut self.engine {
            Engine::Classic(c) => c.unsubscribe(&mut self.core),
            // A consumer's `unsubscribe` has left already, and leaves nothing to do here.
            Engine::Kip848(k) if k.is_running() => self.leave_group(),
            Engine::Kip848(_) => Ok(()),
        };
        self.core.config.topics.clear();
        log::info!("{}: unsubscribed", self.ctx());
        left
    }

    /// Asks for a rebalance at the next [`poll`](Self::poll) (e.g. after the application
    /// changed what it can handle).
    pub fn request_rejoin(&mut self) {
        match &mut self.engine {
            Engine::Classic(c) => c.request_rejoin(),
            // The coordinator decides every rebalance under this protocol.
            Engine::Kip848(_) => log::debug!(
                "{}: rejoin requested; the consumer protocol has none to do",
                self.ctx()
            ),
        }
    }

    /// Removes this static member from the group now (LeaveGroup v3+ by instance id), so its
    /// partitions move to the others at once instead of after the session timeout — for
    /// scaling down. Needs Kafka 2.4+. A dynamic member sends a plain LeaveGroup.
    pub fn leave_group(&mut self) -> Result<()> {
        self.core.check_usable()?;
        match &mut self.engine {
            Engine::Classic(c) => c.leave_group(&mut self.core),
            Engine::Kip848(k) => {
                let deadline = crate::deadline::after(self.core.client.api_timeout());
                let result = k.leave(&mut self.core, false, deadline);
                self.core.transition(Transition::Left);
                result
            }
        }
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
        self.close_inner(crate::deadline::after(self.core.config.close_timeout))
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
        self.core.poll_clock.enter()
    }

    /// The configured close bound.
    pub(crate) fn close_timeout(&self) -> Duration {
        self.core.config.close_timeout
    }

    /// The generation a commit carries: the classic generation, or under the consumer
    /// protocol the member epoch as the heartbeat thread knows it now (it may have moved since
    /// the last poll, and a commit with an older one is refused with STALE_MEMBER_EPOCH).
    pub(crate) fn commit_generation(&mut self) -> Option<Generation> {
        match &mut self.engine {
            Engine::Classic(_) => self.core.generation().cloned(),
            Engine::Kip848(k) => k.commit_generation(&mut self.core),
        }
    }

    fn close_inner(&mut self, deadline: Instant) -> Result<()> {
        if matches!(self.core.state.state(), MemberState::Closed) {
            return Ok(());
        }
        // `close_timeout` bounds everything here.
        let result = match &mut self.engine {
            Engine::Classic(c) => c.close(&mut self.core, deadline),
            // The consumer protocol's leave heartbeat: epoch -2 for a static member (its
            // partitions wait for it for the session timeout), -1 for a dynamic one.
            Engine::Kip848(k) => k.leave(&mut self.core, true, deadline),
        };
        self.core.transition(Transition::Closed);
        self.core.session.conn = None;
        result
    }

    /// The heartbeat thread stops sending without telling the member, as if the process hung
    /// (`unstable::TestHooks`).
    pub(crate) fn freeze_heartbeats(&self) {
        match &self.engine {
            Engine::Classic(c) => c.freeze_heartbeats(),
            Engine::Kip848(k) => k.freeze(true),
        }
    }

    /// Stops like a killed process, telling the coordinator nothing (a static member's close
    /// sends nothing on classic either; under the consumer protocol it sends the static leave
    /// heartbeat, which a crash does not) (`unstable::TestHooks`).
    pub(crate) fn crash(mut self) {
        match &mut self.engine {
            Engine::Classic(c) => c.crash(&mut self.core),
            Engine::Kip848(k) => k.crash(),
        }
        self.core.transition(Transition::Closed);
    }

    /// A consumer-protocol member's heartbeats resume after
    /// [`freeze_heartbeats`](Self::freeze_heartbeats), as when a hung process wakes up
    /// (`unstable::TestHooks`).
    pub(crate) fn thaw_heartbeats(&self) {
        if let Engine::Kip848(k) = &self.engine {
            k.freeze(false);
        }
    }
}

impl Drop for GroupMember {
    fn drop(&mut self) {
        if let Err(e) = self.close_inner(crate::deadline::after(self.core.config.close_timeout)) {
            log::debug!("{}: close on drop: {e}", self.ctx());
        }
    }
}
