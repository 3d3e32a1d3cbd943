//! The classic group protocol's engine: join (FindCoordinator → JoinGroup → assign if leader →
//! SyncGroup), react to what the heartbeat thread reports, leave.
//!
//! Every request but heartbeats runs on the caller's thread over the member's coordinator
//! session ([`crate::group::session`]); the heartbeat thread (`heartbeat.rs`, started at the
//! first join) has a connection of its own. Pure parts are unit-tested apart: the heartbeat
//! timer (`timer.rs`), the checks of a restarted leader (`leader.rs`), the join's reading of
//! each error code ([`join_step`]). The leader's assignment is in `assign.rs`, its watch of the
//! subscribed topics in `metadata_watch.rs`, the report of missing topics in
//! `missing_topics.rs`, and what an `INVALID_SESSION_TIMEOUT` is told in `session_bounds.rs`.

mod assign;
pub(crate) mod heartbeat;
mod leader;
mod metadata_watch;
mod missing_topics;
#[cfg(test)]
pub(in crate::group) mod scripted;
mod session_bounds;
pub mod timer;

use crate::authorization::Scope;
use crate::error::{Error, Result};
use crate::group::action::{classify, GroupAction};
use crate::group::assignment::{Assignment, Change, Subscription, TopicPartition};
use crate::group::assignor::{common_protocol, RebalanceProtocol};
use crate::group::member::core::Core;
use crate::group::member::GroupEvent;
use crate::group::poll_timer::PollTimer;
use crate::group::requests;
use crate::group::state::{merge_rejoin, Generation, MemberState, Transition};
use crate::net::{Pending, REMOVE_MEMBERS_BY_INSTANCE_ID};
use crate::protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use crate::protocol::messages::{JoinGroupRequest, JoinGroupResponse, LeaveGroupResponse, SyncGroupRequest};
use crate::protocol::ApiKey;
use crate::wakeup::Waited;
use crate::KafkaCode;
use heartbeat::{Command, Event, HeartbeatHandle};
use leader::LeaderSnapshot;
pub(crate) use missing_topics::missing_topics_hint;
use std::time::{Duration, Instant};

/// JoinGroup may legitimately block for the whole rebalance timeout; the socket waits that long
/// plus this, as Kafka's client does, so a slow rebalance is not mistaken for a dead broker.
const JOIN_MARGIN: Duration = Duration::from_secs(5);

/// What v5+ coordinators log as the reason a member left (KIP-800).
const LEAVE_REASON: &str = "the member is leaving the group";

/// A classic-protocol member's own state, beside the [`Core`] it shares with the shell.
#[derive(Debug)]
pub(in crate::group) struct Classic {
    /// Started at the first join: a member that never joins (or speaks KIP-848) runs none.
    heartbeat: HeartbeatHandle,
    /// Eager or cooperative: what every assignor this member offers supports.
    protocol: RebalanceProtocol,
    /// The last assignment SyncGroup gave (of generation `last_generation`), kept through an
    /// eager revocation: what the sticky assignors' user data says this member owned.
    last_assigned: Assignment,
    /// A cooperative member's generation ended under it (a join answered UNKNOWN_MEMBER_ID):
    /// the next join starts by giving its partitions up as lost, as Java's does.
    generation_lost: bool,
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
    /// The heartbeat thread stopped on a refused connection; the next poll restarts it.
    heartbeats_refused: bool,
}

/// Where a join stands between calls. A JoinGroup may be held by the coordinator for a whole
/// rebalance; keeping it in flight here lets `poll` return within its timeout and take the
/// join up again on the next call.
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

impl Classic {
    /// The engine of a member with `core`'s settings; starts no thread.
    pub(in crate::group) fn new(core: &Core) -> Classic {
        let heartbeat = HeartbeatHandle::new(
            core.client.clone(),
            core.config.group_id.clone(),
            core.config.heartbeat_interval,
            core.config.session_timeout,
            core.config.retry_backoff(&core.client),
            core.metrics.clone(),
            (
                core.poll_clock.clone(),
                PollTimer::new(core.config.max_poll_interval),
            ),
        );
        Classic {
            heartbeat,
            protocol: common_protocol(&core.config.assignors),
            last_assigned: Assignment::default(),
            generation_lost: false,
            rejoin: None,
            leader_snapshot: None,
            last_metadata_check: Instant::now(),
            last_generation: None,
            missing_check: None,
            first_join_rebalanced: None,
            joining: Joining::Start,
            heartbeats_refused: false,
        }
    }

    /// The rebalance protocol this member follows.
    pub(in crate::group) fn protocol(&self) -> RebalanceProtocol {
        self.protocol
    }

    /// Whether a JoinGroup or SyncGroup is in flight on the member's connection.
    pub(in crate::group) fn joining(&self) -> bool {
        !matches!(self.joining, Joining::Start)
    }

    /// Whether a rebalance is pending or under way.
    pub(in crate::group) fn rejoin_pending(&self, state: MemberState) -> bool {
        self.rejoin.is_some() || state != MemberState::Stable
    }

    /// [`GroupMember::join`](crate::GroupMember::join) for this protocol.
    pub(in crate::group) fn join(&mut self, core: &mut Core, deadline: Instant) -> Result<Vec<GroupEvent>> {
        let mut events = std::mem::take(&mut core.undelivered);
        self.begin_join(core, &mut events);
        match self.drive_join(core, deadline, &mut events) {
            Ok(true) => Ok(events),
            Ok(false) => {
                // Revocations and coordinator moves seen so far reach the caller next time.
                core.undelivered = events;
                core.wakeup.check()?;
                Err(Error::retries_timeout(
                    format!("joining group {}", core.config.group_id),
                    core.last_join_error.take(),
                ))
            }
            Err(e) => {
                core.undelivered = events;
                Err(e)
            }
        }
    }

    /// [`GroupMember::poll`](crate::GroupMember::poll) for this protocol, subscribed.
    pub(in crate::group) fn poll(&mut self, core: &mut Core, deadline: Instant) -> Result<Vec<GroupEvent>> {
        self.resume_refused_heartbeats(core);
        let mut events = std::mem::take(&mut core.undelivered);
        loop {
            while let Ok(e) = self.heartbeat.events.try_recv() {
                self.on_event_keeping(core, e, &mut events)?;
            }
            self.check_session(core, &mut events);
            self.check_leader_metadata(core, deadline);
            if let Err(e) = self.check_missing_topics(core, deadline, &mut events) {
                core.undelivered = events;
                return Err(e);
            }
            if self.rejoin.is_some() || core.state.state() != MemberState::Stable {
                // Eager protocol: hand the revocation to the caller first, so it can commit
                // what it processed while its generation is still valid; the join happens on
                // the next poll. Cooperative members keep their partitions and join at once.
                if self.revokes_before_joining(core) {
                    events.push(self.revoke_all(core));
                    return Ok(events);
                }
                self.begin_join(core, &mut events);
                if let Err(e) = self.drive_join(core, deadline, &mut events) {
                    core.undelivered = events;
                    return Err(e);
                }
                core.wakeup.check_unless(!events.is_empty())?;
                return Ok(events);
            }
            if !events.is_empty() {
                return Ok(events);
            }
            match core.wakeup.recv_deadline(&self.heartbeat.events, deadline) {
                Waited::Got(e) => self.on_event_keeping(core, e, &mut events)?,
                Waited::TimedOut => return Ok(events),
                Waited::Woken => core.wakeup.check()?,
            }
        }
    }

    /// Stops the member for good if `e` is the coordinator denying the group: heartbeats stop
    /// and a join in flight is dropped, beside what [`Core::deny`] does. Returns `e`.
    pub(in crate::group) fn stop_if_denied(&mut self, core: &mut Core, e: Error) -> Error {
        if core.deny(&e) {
            self.heartbeat.send(Command::Pause);
            self.abandon_join(core);
        }
        e
    }

    /// A request to the coordinator as
    /// [`GroupMember::coordinator_request`](crate::GroupMember) sends it: over the member's
    /// connection, or while it carries a join, as [`Core::request_while_joining`] does.
    pub(in crate::group) fn coordinator_request<R: crate::protocol::Request>(
        &mut self,
        core: &mut Core,
        deadline: Instant,
        build: impl FnOnce(i16) -> R,
        resumable: bool,
    ) -> Result<R::Response> {
        if self.joining() {
            return core.request_while_joining(deadline, build, resumable);
        }
        if let Err(e) = core.ensure_connected(deadline) {
            return Err(self.stop_if_denied(core, e));
        }
        core.request_connected(deadline, build, resumable)
    }

    /// Marks the coordinator unknown (after a broken connection, or `NOT_COORDINATOR` or
    /// `COORDINATOR_NOT_AVAILABLE` on a request to it), so the next request finds it again.
    pub(in crate::group) fn forget_coordinator(&mut self, core: &mut Core) {
        self.joining = Joining::Start;
        core.session.forget();
    }

    /// The subscription changed: the member rejoins with it once it is in a generation.
    pub(in crate::group) fn subscribed(&mut self, core: &mut Core) {
        // What the leader compares the metadata with was the old subscription's.
        self.leader_snapshot = None;
        if core.state.generation().is_some() {
            self.schedule_rejoin(false);
        }
    }

    /// Leaves the group if in a generation (a join in flight is dropped otherwise), and wants
    /// no rejoin: the subscription is empty now.
    pub(in crate::group) fn unsubscribe(&mut self, core: &mut Core) -> Result<()> {
        let left = if core.state.generation().is_some() {
            self.leave_group(core)
        } else {
            // Not in the group yet: a join in flight is dropped, nothing to leave.
            self.abandon_join(core);
            Ok(())
        };
        self.rejoin = None;
        left
    }

    /// Asks for a rebalance at the next poll.
    pub(in crate::group) fn request_rejoin(&mut self) {
        self.schedule_rejoin(false);
    }

    /// LeaveGroup now, for a static member too (by instance id, Kafka 2.4+).
    pub(in crate::group) fn leave_group(&mut self, core: &mut Core) -> Result<()> {
        self.heartbeat.send(Command::Pause);
        self.abandon_join(core);
        let deadline = crate::deadline::after(core.client.api_timeout());
        let result = self.send_leave(core, deadline);
        core.assignment = Assignment::default();
        core.transition(Transition::Left);
        result
    }

    /// Stops the member by `deadline`: a dynamic member leaves the group, a static one only
    /// stops its heartbeat thread (interrupting a heartbeat in flight) and needs no network.
    pub(in crate::group) fn close(&mut self, core: &mut Core, deadline: Instant) -> Result<()> {
        self.heartbeat.shutdown(crate::deadline::left(deadline));
        self.abandon_join(core);
        let joined = matches!(
            core.state.state(),
            MemberState::Joining | MemberState::AwaitingSync | MemberState::Stable
        );
        let result = if joined && !core.static_member && !core.state.member_id().is_empty() {
            self.send_leave(core, deadline)
        } else {
            Ok(())
        };
        if core.static_member {
            log::info!(
                "{}: closed; static member keeps its partitions until the session times out",
                core.ctx()
            );
        }
        result
    }

    /// Stops like a killed process, telling the coordinator nothing.
    pub(in crate::group) fn crash(&mut self, core: &mut Core) {
        self.heartbeat.shutdown(Duration::from_secs(1));
        self.abandon_join(core);
    }

    /// The heartbeat thread stops sending without telling the member, as if the process hung.
    pub(in crate::group) fn freeze_heartbeats(&self) {
        self.heartbeat.send(Command::Freeze);
    }

    fn fence(&mut self, core: &mut Core) -> Error {
        let was_stable = core.state.was_stable();
        core.transition(Transition::Fenced);
        self.heartbeat.send(Command::Pause);
        core.assignment = Assignment::default();
        log::error!(
            "{}: fenced by another member with the same group.instance.id{}; stopping without rejoining",
            core.ctx(),
            if was_stable {
                " after this member had joined (two processes share the id)"
            } else {
                ""
            }
        );
        core.fenced_error()
    }

    /// Starts a rejoin unless one is in flight: applies the pending rejoin request and gives up
    /// the assignment (eager protocol: everything is given up before rejoining).
    fn begin_join(&mut self, core: &mut Core, events: &mut Vec<GroupEvent>) {
        if !matches!(self.joining, Joining::Start) {
            return;
        }
        if let Some(reset) = self.rejoin.take() {
            core.transition(Transition::RejoinNeeded {
                reset_member_id: reset,
            });
        }
        if self.revokes_before_joining(core) {
            events.push(self.revoke_all(core));
        }
    }

    /// Runs the join until the member has its assignment (`Ok(true)`) or `deadline` passes
    /// (`Ok(false)`, the join's progress kept in `self.joining`). Every wait in here is bounded
    /// by `deadline`; retriable failures are retried, never returned.
    fn drive_join(
        &mut self,
        core: &mut Core,
        deadline: Instant,
        events: &mut Vec<GroupEvent>,
    ) -> Result<bool> {
        loop {
            match std::mem::take(&mut self.joining) {
                Joining::Start => {
                    if std::mem::take(&mut self.generation_lost) && !core.assignment.is_empty() {
                        events.push(self.lose_all(core));
                    }
                    if let Some(moved) = core.ensure_coordinator(deadline)? {
                        events.push(moved);
                    }
                    if core.session.conn.is_none() {
                        return Ok(false);
                    }
                    // The classic heartbeat thread runs from the first classic join on.
                    self.heartbeat.start().map_err(|source| Error::Io {
                        addr: "heartbeat thread".into(),
                        source,
                    })?;
                    self.heartbeat.send(Command::Pause);
                    core.transition(Transition::JoinSent);
                    let started = *core.join_started.get_or_insert_with(Instant::now);
                    match self.send_join(core) {
                        Ok(pending) => self.joining = Joining::AwaitingJoin { pending, started },
                        Err(e) => self.on_request_error(core, e, "JoinGroup", deadline)?,
                    }
                }
                Joining::AwaitingJoin { pending, started } => {
                    let Some(conn) = core.session.conn.as_mut() else {
                        continue;
                    };
                    let left = crate::deadline::left(deadline);
                    // Woken: the coordinator may hold the JoinGroup for the whole rebalance.
                    let received = core
                        .wakeup
                        .during(conn.interrupter(), || conn.receive(&pending, left));
                    let resp = match received.unwrap_or(Ok(None)) {
                        Ok(Some(resp)) => resp,
                        Ok(None) => {
                            self.joining = Joining::AwaitingJoin { pending, started };
                            return Ok(false);
                        }
                        Err(e) if core.wakeup.is_pending() => return self.woken_mid_request(core, e),
                        Err(e) => {
                            self.on_request_error(core, e, "JoinGroup", deadline)?;
                            continue;
                        }
                    };
                    if let Some(next) = self.on_join_response(core, resp, started, deadline)? {
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
                        match self.lead(core, &resp, deadline) {
                            Ok(a) => a,
                            Err(e) if e.is_transient() => {
                                // The followers wait in SyncGroup for this assignment until the
                                // rebalance timeout; a brief failure of the leader's metadata
                                // lookup is retried within it, not returned from poll.
                                if Instant::now() >= until {
                                    log::warn!(
                                        "{}: could not assign partitions within the rebalance timeout: {e}; joining again",
                                        core.ctx()
                                    );
                                    core.last_join_error = Some(e);
                                    continue;
                                }
                                core.note_join_error(e, "assigning partitions");
                                self.joining = Joining::Assigning {
                                    resp,
                                    generation,
                                    join_time,
                                    until,
                                };
                                if !core.backoff(deadline) {
                                    return Ok(false);
                                }
                                continue;
                            }
                            Err(e) => return Err(e),
                        }
                    } else {
                        Vec::new()
                    };
                    match self.send_sync(core, &generation, assignments) {
                        Ok(pending) => {
                            self.joining = Joining::AwaitingSync {
                                pending,
                                generation,
                                join_time,
                                sent: Instant::now(),
                            }
                        }
                        Err(e) => self.on_request_error(core, e, "SyncGroup", deadline)?,
                    }
                }
                Joining::AwaitingSync {
                    pending,
                    generation,
                    join_time,
                    sent,
                } => {
                    let Some(conn) = core.session.conn.as_mut() else {
                        continue;
                    };
                    let left = crate::deadline::left(deadline);
                    let received = core
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
                        Err(e) if core.wakeup.is_pending() => return self.woken_mid_request(core, e),
                        Err(e) => {
                            self.on_request_error(core, e, "SyncGroup", deadline)?;
                            continue;
                        }
                    };
                    let code = KafkaCode::from_code(sync.error_code);
                    if !self.handle_group_code(core, code, ApiKey::SyncGroup, deadline)? {
                        continue;
                    }
                    let sync_time = sent.elapsed();
                    let assignment =
                        Assignment::decode(&sync.assignment).map_err(|source| Error::Decode {
                            api: ApiKey::SyncGroup,
                            source,
                        })?;
                    core.transition(Transition::Synced);
                    self.heartbeat.send(Command::Stable(generation.clone()));
                    core.metrics.session_proven(sent);
                    let rejoined = self.last_generation.map(|g| g != generation.id);
                    core.metrics.joined(join_time, sync_time, rejoined == Some(true));
                    let rebalanced = rejoined.or(std::mem::take(&mut self.first_join_rebalanced));
                    self.last_generation = Some(generation.id);
                    core.join_started = None;
                    core.last_join_error = None;
                    core.join_warnings.joined();
                    log::info!("{}: assigned {} in {sync_time:?} (sync)", core.ctx(), assignment);
                    // Eager: everything was revoked before the join, so all of it is new.
                    let change = Change::between(&core.assignment, &assignment);
                    if !change.revoked.is_empty() {
                        // Cooperative: the partitions moving away are revoked now, in the new
                        // generation (so that the application can still commit them), and the
                        // next poll rejoins so that their new owners get them (KIP-429).
                        log::info!(
                            "{}: revoking {} partitions that move to other members; rejoining",
                            core.ctx(),
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
                    core.assignment = assignment;
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
        core: &mut Core,
        resp: JoinGroupResponse,
        started: Instant,
        deadline: Instant,
    ) -> Result<Option<Joining>> {
        let code = KafkaCode::from_code(resp.error_code);
        if join_step(ApiKey::JoinGroup, code) == JoinStep::JoinWithGivenMemberId {
            // KIP-394: the coordinator handed out our member id; join again with it at once.
            log::debug!(
                "{}: MEMBER_ID_REQUIRED, rejoining as {}",
                core.ctx(),
                resp.member_id
            );
            core.state.set_member_id(resp.member_id.into());
            core.metrics.member_id_required();
            return Ok(None);
        }
        if !self.handle_group_code(core, code, ApiKey::JoinGroup, deadline)? {
            return Ok(None);
        }
        let join_time = started.elapsed();
        let generation = joined_generation(&resp);
        core.transition(Transition::Joined(generation.clone()));
        let coordinator = core.session.coordinator.clone().ok_or(Error::Closed)?;
        // Heartbeats start now, not after SyncGroup, so a slow leader cannot expire us.
        self.heartbeat.send(Command::Start {
            generation: generation.clone(),
            coordinator,
            instance_id: core.instance_id_to_send(),
        });
        let is_leader = leads(&resp);
        if self.last_generation.is_none() {
            let version = core
                .session
                .conn
                .as_ref()
                .and_then(|c| c.version(ApiKey::JoinGroup).ok());
            self.first_join_rebalanced = first_join_rebalanced(
                core.instance_id_to_send().is_some(),
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
            core.ctx(),
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
            until: crate::deadline::after(core.config.max_poll_interval),
        }))
    }

    /// Drops a JoinGroup or SyncGroup still in flight, with the connection it was sent on (its
    /// answer would arrive where another request's is expected).
    fn abandon_join(&mut self, core: &mut Core) {
        if !matches!(self.joining, Joining::Start) {
            self.joining = Joining::Start;
            core.session.conn = None;
        }
    }

    /// Gives up the whole assignment (eager protocol) as a [`GroupEvent::Revoked`].
    fn revoke_all(&mut self, core: &mut Core) -> GroupEvent {
        let (generation, partitions) = self.give_up_all(core, "revoking");
        GroupEvent::Revoked {
            generation,
            partitions,
        }
    }

    /// Gives up the whole assignment as a [`GroupEvent::Lost`] (no commit possible).
    fn lose_all(&mut self, core: &mut Core) -> GroupEvent {
        let (generation, partitions) = self.give_up_all(core, "lost");
        GroupEvent::Lost {
            generation,
            partitions,
        }
    }

    fn give_up_all(&mut self, core: &mut Core, how: &str) -> (i32, Vec<TopicPartition>) {
        let generation = core.state.generation().map_or(-1, |g| g.id);
        let partitions = std::mem::take(&mut core.assignment).topic_partitions();
        log::info!("{}: {how} {} partitions", core.ctx(), partitions.len());
        (generation, partitions)
    }

    /// The heartbeat thread stopped because the coordinator refused its connection (credentials,
    /// certificates: [`Event::Refused`]); that can be fixed outside the process, so each poll
    /// after the error restarts it for the current generation, one connection attempt at its
    /// next heartbeat. If the session is still alive then, the member stays in its group with
    /// no rebalance; if not, the session check rejoins.
    fn resume_refused_heartbeats(&mut self, core: &mut Core) {
        if !std::mem::take(&mut self.heartbeats_refused) {
            return;
        }
        // Mid-join (or unjoined) the join itself starts heartbeats for the generation it gets;
        // heartbeating the old one meanwhile would only earn a second rebalance.
        if core.state.state() != MemberState::Stable || !matches!(self.joining, Joining::Start) {
            return;
        }
        let (Some(generation), Some(coordinator)) =
            (core.state.generation().cloned(), core.session.coordinator.clone())
        else {
            return;
        };
        self.heartbeat.send(Command::Start {
            generation: generation.clone(),
            coordinator,
            instance_id: core.instance_id_to_send(),
        });
        self.heartbeat.send(Command::Stable(generation.clone()));
    }

    /// Gives the assignment up as lost once no request has proved the session alive for a
    /// whole `session.timeout.ms`: by then the coordinator may have handed the partitions to
    /// another member, so records of them must stop going to the application, and nothing can
    /// be committed for them. The heartbeat thread may be stuck in a request at that moment;
    /// this check does not depend on it.
    fn check_session(&mut self, core: &mut Core, events: &mut Vec<GroupEvent>) {
        if core.state.state() != MemberState::Stable || core.assignment.is_empty() {
            return;
        }
        let Some(age) = core.metrics.session_age() else {
            return;
        };
        if age < core.config.session_timeout {
            return;
        }
        log::warn!(
            "{}: no heartbeat answered for {age:?} (session.timeout.ms {:?}); the partitions may \
             belong to another member now: giving them up and rejoining",
            core.ctx(),
            core.config.session_timeout
        );
        events.push(self.lose_all(core));
        // Heartbeats of a generation the coordinator has likely ended only hold the client's
        // connections; the rejoin starts them again.
        self.heartbeat.send(Command::Pause);
        self.abandon_join(core);
        core.session.conn = None;
        core.session.coordinator = None;
        // The broker has dropped a dynamic member; a static one is recognised again by its
        // instance id whatever member id it sends.
        self.schedule_rejoin(!core.static_member);
    }

    /// [`on_event`](Self::on_event) in `poll`: on an error, the events gathered so far (a
    /// revocation, a loss) are kept for the next call. A refused connection is not the end of
    /// the member, and they must still reach the caller.
    fn on_event_keeping(&mut self, core: &mut Core, e: Event, events: &mut Vec<GroupEvent>) -> Result<()> {
        self.on_event(core, e, events).inspect_err(|_| {
            core.undelivered = std::mem::take(events);
        })
    }

    fn on_event(&mut self, core: &mut Core, e: Event, events: &mut Vec<GroupEvent>) -> Result<()> {
        match e {
            Event::CoordinatorMoved { coordinator } => {
                if core.session.coordinator.as_ref() != Some(&coordinator) {
                    core.session.coordinator = Some(coordinator.clone());
                    core.session.conn = None;
                    events.push(GroupEvent::CoordinatorMoved { coordinator });
                }
            }
            // A JoinGroup is on its way (or about to be resent): it answers what a heartbeat
            // thread's rejoin or expired session would ask for, and the coordinator keeps the
            // member for the rebalance timeout, not the session. Acting on either would take
            // the new generation down with the old one (Java ignores them while rejoining).
            Event::RejoinNeeded { .. } | Event::SessionExpired { .. }
                if core.state.state() == MemberState::Joining =>
            {
                log::debug!("{}: ignoring {e:?}: a join is in progress", core.ctx());
            }
            Event::RejoinNeeded {
                generation,
                reset_member_id,
                reason,
            } if core.state.is_current(&generation) => {
                log::info!("{}: rejoin needed ({reason})", core.ctx());
                // A cooperative member keeps its partitions through a rebalance, but not past
                // the end of its generation (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID): others
                // may own them already, so they are lost (in the generation they belonged
                // to, before the rejoin resets it), as Java's `onPartitionsLost`.
                let over = reason != KafkaCode::RebalanceInProgress;
                if over && self.protocol == RebalanceProtocol::Cooperative && !core.assignment.is_empty() {
                    events.push(self.lose_all(core));
                }
                self.schedule_rejoin(reset_member_id);
            }
            Event::SessionExpired { generation } if core.state.is_current(&generation) => {
                log::warn!(
                    "{}: session expired on our side; rediscovering the coordinator and rejoining",
                    core.ctx()
                );
                if !core.assignment.is_empty() {
                    events.push(self.lose_all(core));
                }
                self.abandon_join(core);
                core.session.conn = None;
                core.session.coordinator = None;
                // The broker has dropped a dynamic member; a static one is recognised again by
                // its instance id whatever member id it sends.
                self.schedule_rejoin(!core.static_member);
            }
            Event::PollTimeout { generation } if core.state.is_current(&generation) => {
                // The heartbeat thread has left (or, static, stopped heartbeating) and said why.
                if !core.assignment.is_empty() {
                    events.push(self.lose_all(core));
                }
                self.abandon_join(core);
                // A dynamic member's id went with its LeaveGroup; a static one is recognised
                // again by its instance id.
                self.schedule_rejoin(!core.static_member);
            }
            Event::Fenced { generation } if core.state.is_current(&generation) => {
                return Err(self.fence(core))
            }
            Event::Fatal { generation, code } if core.state.is_current(&generation) => {
                let e = core.group_error(ApiKey::Heartbeat, code);
                return Err(self.stop_if_denied(core, e));
            }
            Event::Refused { generation, error } if core.state.is_current(&generation) => {
                self.heartbeats_refused = true;
                return Err(*error);
            }
            stale => log::debug!("{}: ignoring {stale:?} from an older generation", core.ctx()),
        }
        Ok(())
    }

    /// Returns `Ok(true)` to go on, `Ok(false)` to retry the join from the start, or the error.
    fn handle_group_code(
        &mut self,
        core: &mut Core,
        code: KafkaCode,
        api: ApiKey,
        deadline: Instant,
    ) -> Result<bool> {
        let during = api.name();
        match join_step(api, code) {
            JoinStep::Proceed => Ok(true),
            JoinStep::JoinAgain { backoff } => {
                log::info!("{}: {during} answered {code}; joining again", core.ctx());
                if backoff {
                    core.backoff(deadline);
                }
                Ok(false)
            }
            // Only a JoinGroup answers it, and `on_join_response` takes the member id first.
            JoinStep::JoinWithGivenMemberId => Ok(false),
            JoinStep::JoinAgainWithNewMemberId => {
                log::info!(
                    "{}: {during} answered {code}; joining again with a new member id",
                    core.ctx()
                );
                self.generation_lost = self.protocol == RebalanceProtocol::Cooperative;
                core.transition(Transition::RejoinNeeded {
                    reset_member_id: true,
                });
                Ok(false)
            }
            JoinStep::FindCoordinator => {
                log::info!(
                    "{}: {during} answered {code}; looking for the coordinator again",
                    core.ctx()
                );
                self.forget_coordinator(core);
                core.backoff(deadline);
                Ok(false)
            }
            JoinStep::Fenced => Err(self.fence(core)),
            JoinStep::Fatal if api == ApiKey::JoinGroup && code == KafkaCode::InvalidSessionTimeout => {
                Err(self.invalid_session_timeout(core, deadline))
            }
            JoinStep::Fatal => Err(core.group_error(api, code)),
        }
    }

    fn on_request_error(&mut self, core: &mut Core, e: Error, during: &str, deadline: Instant) -> Result<()> {
        if e.breaks_connection() {
            core.note_join_error(e, &format!("{during} failed; looking for the coordinator again"));
            self.forget_coordinator(core);
            core.backoff(deadline);
            Ok(())
        } else {
            Err(e)
        }
    }

    /// A wakeup cut a JoinGroup or SyncGroup read short, breaking the coordinator connection
    /// (`e`): the join starts over at the next call, over a new connection to the same
    /// coordinator (the coordinator keeps the member through it), and the caller returns.
    fn woken_mid_request(&mut self, core: &mut Core, e: Error) -> Result<bool> {
        log::debug!("{}: woken up during a join: {e}", core.ctx());
        core.session.conn = None;
        self.joining = Joining::Start;
        Ok(false)
    }

    /// Whether this member gives up its partitions before it rejoins: under the eager
    /// protocol; cooperative members keep them (and the consumer keeps fetching them) through
    /// the rebalance, and the new assignment says which to give up.
    fn revokes_before_joining(&self, core: &Core) -> bool {
        !core.assignment.is_empty() && self.protocol == RebalanceProtocol::Eager
    }

    /// The subscription sent for `assignor`: a cooperative member says what it owns and from
    /// which generation; each assignor adds its own user data.
    fn subscription_metadata(&self, core: &Core, assignor: &dyn super::Assignor) -> Subscription {
        let cooperative = self.protocol == RebalanceProtocol::Cooperative;
        let owns = cooperative && !core.assignment.is_empty();
        Subscription {
            topics: core.config.topics.clone(),
            user_data: assignor
                .subscription_user_data(self.last_generation.map(|g| (&self.last_assigned, g))),
            owned: match owns {
                true => core.assignment.topic_partitions(),
                false => Vec::new(),
            },
            rack_id: core.config.client_rack.clone(),
            generation: self.last_generation.filter(|_| owns),
        }
    }

    /// The JoinGroup this member sends now (its member id, and whether it is still static,
    /// change between joins).
    fn join_request(&self, core: &Core) -> JoinGroupRequest {
        let instance = core.instance_id_to_send();
        let protocols: Vec<(&str, bytes::Bytes)> = core
            .config
            .assignors
            .iter()
            .map(|a| (a.name(), self.subscription_metadata(core, a.as_ref()).encode()))
            .collect();
        requests::join_group(&requests::JoinGroup {
            group: &core.config.group_id,
            member_id: core.state.member_id(),
            instance_id: instance.as_deref(),
            session_timeout: core.config.session_timeout,
            rebalance_timeout: core.config.max_poll_interval,
            protocols: &protocols,
        })
    }

    fn send_join(&mut self, core: &mut Core) -> Result<Pending<JoinGroupRequest>> {
        let req = self.join_request(core);
        let wait = core.config.max_poll_interval.max(core.config.session_timeout) + JOIN_MARGIN;
        let version = core
            .session
            .conn
            .as_ref()
            .ok_or(Error::Closed)?
            .version(ApiKey::JoinGroup)?;
        log::debug!("{}: JoinGroup v{version}", core.ctx());
        let conn = core.session.conn.as_mut().ok_or(Error::Closed)?;
        conn.send_pending(&req, version, Some(wait))
    }

    fn send_sync(
        &mut self,
        core: &mut Core,
        g: &Generation,
        assignments: Vec<SyncGroupRequestAssignment>,
    ) -> Result<Pending<SyncGroupRequest>> {
        let instance = core.instance_id_to_send();
        let req = requests::sync_group(&core.config.group_id, g, instance.as_deref(), assignments);
        // Followers wait in SyncGroup for the leader to assign, up to the rebalance timeout.
        let wait = core.config.max_poll_interval + JOIN_MARGIN;
        let conn = core.session.conn.as_mut().ok_or(Error::Closed)?;
        let version = conn.version(ApiKey::SyncGroup)?;
        conn.send_pending(&req, version, Some(wait))
    }

    /// Marks a rejoin pending, keeping an empty member id once one was asked for.
    fn schedule_rejoin(&mut self, reset_member_id: bool) {
        self.rejoin = Some(merge_rejoin(self.rejoin, reset_member_id));
    }

    /// Sends LeaveGroup, giving up at `deadline`.
    fn send_leave(&mut self, core: &mut Core, deadline: Instant) -> Result<()> {
        if core.session.conn.is_none() {
            let by = deadline.min(crate::deadline::after(
                core.client.connection_config().request_timeout,
            ));
            core.ensure_coordinator(by)?;
            if core.session.conn.is_none() {
                return Err(Error::retries_timeout(
                    format!("LeaveGroup for group {}", core.config.group_id),
                    core.last_join_error.take(),
                ));
            }
        }
        // After connecting: finding the coordinator decides whether we are still static.
        let instance = core.instance_id_to_send();
        let conn = core.session.conn.as_mut().ok_or(Error::Closed)?;
        let version = conn.version(ApiKey::LeaveGroup)?;
        if instance.is_some() {
            conn.check(&REMOVE_MEMBERS_BY_INSTANCE_ID)?;
        }
        let me = requests::member_identity(core.state.member_id(), instance.as_deref(), LEAVE_REASON);
        let req = requests::leave_group(&core.config.group_id, &[me], version);
        let timeout = crate::deadline::clamp(core.client.connection_config().request_timeout, deadline);
        let resp = conn.send_at(&req, version, Some(timeout))?;
        if let Some(c) = leave_error(&resp) {
            let group = &core.config.group_id;
            return Err(Error::from_code(ApiKey::LeaveGroup, c, Scope::group(group), None));
        }
        log::info!("{}: left the group", core.ctx());
        Ok(())
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
    use crate::client::Client;
    use crate::group::config::MemberConfig;
    use crate::protocol::messages::leave_group_response::MemberResponse;

    /// A static member's core and classic engine (its close sends nothing) in generation `g`,
    /// without any network.
    fn stable_member(g: &Generation) -> Member {
        let client = Client::builder()
            .bootstrap_servers("localhost:1")
            .build()
            .unwrap();
        let mut config = MemberConfig::new("g");
        config.group_instance_id = Some("worker-1".into());
        let core = Core::new(client, config);
        let mut m = Member {
            classic: Classic::new(&core),
            core,
        };
        m.transition(Transition::JoinSent);
        m.transition(Transition::Joined(g.clone()));
        m.transition(Transition::Synced);
        assert_eq!(m.state(), MemberState::Stable);
        m
    }

    /// What `GroupMember` holds under the classic protocol, opened up for these tests.
    struct Member {
        core: Core,
        classic: Classic,
    }

    impl Member {
        fn transition(&mut self, t: Transition) {
            self.core.transition(t)
        }

        fn on_event(&mut self, e: Event, events: &mut Vec<GroupEvent>) -> Result<()> {
            self.classic.on_event(&mut self.core, e, events)
        }

        fn state(&self) -> MemberState {
            self.core.state.state()
        }

        fn member_id(&self) -> &str {
            self.core.state.member_id()
        }
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
            assert_eq!(m.classic.rejoin, None, "{old:?}");
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
        assert_eq!(m.classic.rejoin, None);
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
        assert_eq!(m.classic.rejoin, Some(false));
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
