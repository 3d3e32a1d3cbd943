//! The KIP-848 engine of a [`GroupMember`](crate::GroupMember) (`group.protocol=consumer`):
//! starting the protocol's heartbeat thread once the coordinator is known to serve it (or
//! handing the member to the classic engine, by policy), turning what that thread queues into
//! [`GroupEvent`]s with topic names, acknowledging revocations once the application had them,
//! and leaving. The member epoch and id it holds are the core's generation
//! ([`GroupState::set_epoch`](crate::group::state::GroupState::set_epoch)).
//!
//! The protocol itself — epochs, what each heartbeat carries, reconciliation, which error does
//! what — is [`crate::group::kip848`]'s, unit-tested there without a broker.

use crate::authorization::Scope;
use crate::error::{Error, Result};
use crate::group::config::GroupProtocolPolicy;
use crate::group::kip848::heartbeat::{HeartbeatApi, HeartbeatThread};
use crate::group::kip848::{Fatal, Membership, Partitions, Phase, Step};
use crate::group::member::core::Core;
use crate::group::member::{lookup_deadline, GroupEvent};
use crate::group::poll_timer::PollTimer;
use crate::group::state::{Generation, MemberState, Transition};
use crate::group::{Assignment, TopicPartition};
use crate::net::{CONSUMER_GROUP_PROTOCOL, SHARE_GROUPS};
use crate::protocol::{ApiKey, Uuid};
use crate::wakeup::Waited;
use crate::KafkaCode;
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// The KIP-848 engine: nothing until the protocol starts at the first join or poll. A share
/// group's member (KIP-932) runs on it too, with ShareGroupHeartbeat: the membership rules are
/// the same.
#[derive(Debug)]
pub(in crate::group) struct Kip848 {
    api: HeartbeatApi,
    running: Option<Running>,
}

/// A started KIP-848 membership's state on the member's thread.
#[derive(Debug)]
struct Running {
    thread: HeartbeatThread,
    /// Topic names by id, learnt from metadata.
    names: BTreeMap<Uuid, String>,
    /// Steps taken from the thread, not yet reported (their topic ids not all named yet, or
    /// behind a revocation the application has not finished).
    pending: VecDeque<Step>,
    /// A `Revoked` went to the application; the next call tells the membership it is done.
    revoking: bool,
    /// The coordinator answered the join (an epoch above 0, the first assignment reconciled).
    joined: bool,
    /// Why the member stopped, for every later call.
    fatal: Option<Fatal>,
    /// The coordinator last reported, for `CoordinatorMoved`.
    coordinator: Option<crate::client::Broker>,
}

/// How many UNRELEASED_INSTANCE_ID answers, one per `backoff`, make up `timeout`.
fn unreleased_retries(timeout: Duration, backoff: Duration) -> u32 {
    let per = backoff.max(Duration::from_millis(1)).as_millis();
    u32::try_from(timeout.as_millis() / per)
        .unwrap_or(u32::MAX)
        .max(1)
}

/// How the steps of one call become events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Batching {
    /// `join`: everything up to the join, in order (an assignment, its loss, the next one).
    InOrder,
    /// `poll`: at most one `Assigned`, `Revoked` or `Lost` per call, so that each of
    /// [`Polled`](crate::Polled)'s `assigned()`, `revoked()` and `lost()` says all of it; the
    /// rest waits for the next poll.
    OneKind,
}

/// Whether `step` can join the events a poll already has: nothing after a revocation or a
/// loss, and an assignment only after other assignments (merged into one).
fn fits(events: &[GroupEvent], step: &Step) -> bool {
    let mut membership = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                GroupEvent::Assigned { .. } | GroupEvent::Revoked { .. } | GroupEvent::Lost { .. }
            )
        })
        .peekable();
    if membership.peek().is_none() {
        return true;
    }
    // Merged into the last event, which must be that assignment.
    matches!(step, Step::Assign(_))
        && membership.all(|e| matches!(e, GroupEvent::Assigned { .. }))
        && matches!(events.last(), Some(GroupEvent::Assigned { .. }))
}

/// How starting the consumer protocol went.
enum Start {
    /// The heartbeat thread runs.
    Started,
    /// The coordinator lacks the protocol; the member becomes a classic one.
    FellBack,
    /// No coordinator by the deadline (the next call tries again).
    NotYet,
}

/// A member id for ConsumerGroupHeartbeat v1 (KIP-1082): the client picks it, a random UUID,
/// so that a join whose answer is lost is retried as the same member rather than a second one.
fn new_member_id() -> String {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // No OS randomness: unique enough within one process and time.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes = nanos.to_le_bytes();
        bytes[15] ^= std::process::id() as u8;
    }
    URL_SAFE_NO_PAD.encode(bytes)
}

impl Kip848 {
    /// The engine of a member whose heartbeats are `api`'s.
    pub(in crate::group) fn new(api: HeartbeatApi) -> Kip848 {
        Kip848 { api, running: None }
    }

    /// Hands a changed subscription to the heartbeat thread, whose next heartbeat (sent now)
    /// carries it; before the first join, the start takes it from the config.
    pub(in crate::group) fn subscribe(&mut self, core: &mut Core) {
        if let Some(c) = self.running.as_ref() {
            c.thread.lock().membership.subscribe(core.config.topics.clone());
            c.thread.heartbeat_now();
        }
    }

    /// Finds the coordinator, checks that it serves the consumer protocol and starts the
    /// heartbeat thread.
    fn start(&mut self, core: &mut Core, deadline: Instant) -> Result<Start> {
        core.ensure_coordinator(deadline)?;
        let Some(conn) = core.session.conn.as_ref() else {
            return Ok(Start::NotYet);
        };
        let needs = match self.api {
            HeartbeatApi::ConsumerGroup => &CONSUMER_GROUP_PROTOCOL,
            HeartbeatApi::ShareGroup => &SHARE_GROUPS,
        };
        if let Err(e) = conn.check(needs) {
            self.fall_back_or(core, e)?;
            return Ok(Start::FellBack);
        }
        let membership = {
            let mut m = Membership::new(
                new_member_id(),
                core.instance_id_to_send(),
                core.config.max_poll_interval,
            )
            .server_assignor(
                core.config
                    .remote_assignor
                    .clone()
                    .filter(|_| self.api == HeartbeatApi::ConsumerGroup),
            )
            .unreleased_retries(unreleased_retries(
                core.config.unreleased_instance_id_timeout,
                core.config.retry_backoff(&core.client),
            ))
            .rack(core.config.client_rack.clone());
            m.subscribe(core.config.topics.clone());
            m
        };
        let thread = HeartbeatThread::spawn(
            self.api,
            core.client.clone(),
            core.config.group_id.clone(),
            membership,
            core.session.coordinator.clone(),
            // The connection the check above used: the first heartbeat goes out on it at once.
            // Commits and offset lookups open another when they first need one.
            core.session.conn.take(),
            core.config.retry_backoff(&core.client),
            core.metrics.clone(),
            (
                core.poll_clock.clone(),
                PollTimer::new(core.config.max_poll_interval),
            ),
        )
        .map_err(|source| Error::Io {
            addr: "heartbeat thread".into(),
            source,
        })?;
        core.join_started = Some(Instant::now());
        self.running = Some(Running {
            thread,
            names: BTreeMap::new(),
            pending: VecDeque::new(),
            revoking: false,
            joined: false,
            fatal: None,
            coordinator: core.session.coordinator.clone(),
        });
        log::info!(
            "{}: joining with {}",
            core.ctx(),
            match self.api {
                HeartbeatApi::ConsumerGroup => "the consumer group protocol (KIP-848)",
                HeartbeatApi::ShareGroup => "the share group protocol (KIP-932)",
            }
        );
        Ok(Start::Started)
    }

    /// The coordinator lacks the consumer protocol (`why`): the error, or classic by policy
    /// (`Ok`: the heartbeat thread has stopped, and the member becomes a classic one).
    fn fall_back_or(&mut self, core: &mut Core, why: Error) -> Result<()> {
        if self.api == HeartbeatApi::ShareGroup {
            // A share group has no other protocol to fall back to.
            return Err(why);
        }
        match core.config.group_protocol_policy {
            GroupProtocolPolicy::Error => Err(why),
            GroupProtocolPolicy::FallBackToClassic => {
                log::warn!(
                    "{}: {why}; joining with the classic group protocol instead (FallBackToClassic)",
                    core.ctx()
                );
                if let Some(mut c) = self.running.take() {
                    c.thread.shutdown(Duration::from_secs(1));
                }
                Ok(())
            }
        }
    }

    /// [`GroupMember::join`](crate::GroupMember::join) under the consumer protocol: returns once the coordinator has
    /// answered the join and the first assignment is reported; `Ok(None)`: the member fell
    /// back to classic, whose join goes on.
    pub(in crate::group) fn join(
        &mut self,
        core: &mut Core,
        deadline: Instant,
    ) -> Result<Option<Vec<GroupEvent>>> {
        let mut events = std::mem::take(&mut core.undelivered);
        loop {
            match self.start_unless_started(core, &mut events, deadline)? {
                Start::Started => {}
                Start::FellBack => return Ok(None),
                Start::NotYet => {
                    return Err(Error::retries_timeout(
                        format!("joining group {}", core.config.group_id),
                        core.last_join_error.take(),
                    ))
                }
            }
            if !self.take_steps(core, &mut events, deadline, Batching::InOrder)? {
                return Ok(None);
            }
            if self.running.as_ref().is_some_and(|c| c.joined) {
                return Ok(Some(events));
            }
            let Some(c) = self.running.as_ref() else {
                continue;
            };
            match core.wakeup.recv_deadline(&c.thread.notices, deadline) {
                Waited::Got(()) => {}
                Waited::Woken => {
                    core.undelivered = events;
                    core.wakeup.check()?;
                    return Err(Error::Wakeup);
                }
                Waited::TimedOut => {
                    core.undelivered = events;
                    let last = c.thread.lock().last_error.take();
                    return Err(Error::retries_timeout(
                        format!("joining group {}", core.config.group_id),
                        last,
                    ));
                }
            }
        }
    }

    /// Starts the protocol unless it runs; on anything but [`Start::Started`] (an error
    /// included) the events so far wait for the next call.
    fn start_unless_started(
        &mut self,
        core: &mut Core,
        events: &mut Vec<GroupEvent>,
        deadline: Instant,
    ) -> Result<Start> {
        if self.running.is_some() {
            return Ok(Start::Started);
        }
        let started = self.start(core, deadline);
        if !matches!(started, Ok(Start::Started)) {
            core.undelivered = std::mem::take(events);
        }
        started
    }

    /// [`steps`](Self::steps), with the fallback policy applied when the
    /// coordinator refuses the protocol on the first heartbeat: `Ok(false)` once the member is
    /// a classic one. On an error or a fallback, the events so far wait for the next call.
    fn take_steps(
        &mut self,
        core: &mut Core,
        events: &mut Vec<GroupEvent>,
        deadline: Instant,
        batching: Batching,
    ) -> Result<bool> {
        let Err(e) = self.steps(core, events, deadline, batching) else {
            return Ok(true);
        };
        core.undelivered = std::mem::take(events);
        if !self.refused_as_unsupported(core, &e) {
            return Err(e);
        }
        self.fall_back_or(core, e)?;
        Ok(false)
    }

    /// Whether `e` is the coordinator refusing the protocol itself on the first heartbeat (a
    /// broker that advertises ConsumerGroupHeartbeat but answers UNSUPPORTED_VERSION).
    fn refused_as_unsupported(&self, core: &Core, e: &Error) -> bool {
        e.kafka_code() == Some(KafkaCode::UnsupportedVersion)
            && self
                .running
                .as_ref()
                .is_some_and(|c| !c.joined && core.generation().is_none())
    }

    /// [`GroupMember::poll`](crate::GroupMember::poll) under the consumer protocol: joins first if needed, and returns
    /// within about the caller's time whatever the group does; `Ok(None)`: the member fell
    /// back to classic, whose poll goes on.
    pub(in crate::group) fn poll(
        &mut self,
        core: &mut Core,
        deadline: Instant,
    ) -> Result<Option<Vec<GroupEvent>>> {
        let mut events = std::mem::take(&mut core.undelivered);
        match self.start_unless_started(core, &mut events, deadline)? {
            Start::Started => {}
            Start::FellBack => return Ok(None),
            // The poll's events go now; the start is tried again at the next call.
            Start::NotYet => return Ok(Some(std::mem::take(&mut core.undelivered))),
        }
        loop {
            if !self.take_steps(core, &mut events, deadline, Batching::OneKind)? {
                return Ok(None);
            }
            if !events.is_empty() {
                return Ok(Some(events));
            }
            let Some(c) = self.running.as_ref() else {
                return Ok(Some(events));
            };
            match core.wakeup.recv_deadline(&c.thread.notices, deadline) {
                Waited::Got(()) => {}
                Waited::TimedOut => return Ok(Some(events)),
                Waited::Woken => core.wakeup.check()?,
            }
        }
    }

    /// Acknowledges a revocation the application had, takes what the heartbeat thread queued,
    /// and reports it as events, in order.
    fn steps(
        &mut self,
        core: &mut Core,
        events: &mut Vec<GroupEvent>,
        deadline: Instant,
        batching: Batching,
    ) -> Result<()> {
        let Some(c) = self.running.as_mut() else {
            return Ok(());
        };
        if let Some(f) = c.fatal.clone() {
            return Err(self.fatal_error(core, f));
        }
        {
            let mut shared = c.thread.lock();
            if shared.membership.rejoin_if_stale() {
                // Left after a late poll; this call is the poll that was late.
                log::info!(
                    "group {}: rejoining after leaving on a late poll",
                    core.config.group_id
                );
                drop(shared);
                c.thread.heartbeat_now();
                shared = c.thread.lock();
            }
            if std::mem::take(&mut c.revoking) {
                let mut now = false;
                for step in shared.membership.revoked() {
                    match step {
                        Step::HeartbeatNow => now = true,
                        other => c.pending.push_back(other),
                    }
                }
                if now {
                    drop(shared);
                    c.thread.heartbeat_now();
                    shared = c.thread.lock();
                }
            }
            c.pending.extend(shared.steps.drain(..));
            let epoch = shared.membership.epoch();
            if epoch > 0 {
                let member_id = shared.membership.member_id().to_string();
                if !core
                    .generation()
                    .is_some_and(|g| g.id == epoch && g.member_id == member_id)
                {
                    core.state.set_epoch(Some(Generation {
                        id: epoch,
                        member_id,
                        protocol: None,
                    }));
                }
            }
            if shared.coordinator.is_some() && shared.coordinator != c.coordinator {
                if let (Some(old), Some(new)) = (&c.coordinator, &shared.coordinator) {
                    if old != new {
                        events.push(GroupEvent::CoordinatorMoved {
                            coordinator: new.clone(),
                        });
                    }
                }
                c.coordinator = shared.coordinator.clone();
            }
            let settled = epoch > 0 && *shared.membership.phase() == Phase::Stable;
            drop(shared);
            if settled && c.pending.is_empty() && !c.joined {
                self.mark_joined(core);
                if !events.iter().any(|e| matches!(e, GroupEvent::Assigned { .. })) {
                    // Joined with nothing (yet): say so, as a classic join does.
                    events.push(GroupEvent::Assigned {
                        generation: epoch,
                        partitions: Vec::new(),
                        rebalanced: None,
                    });
                }
            }
        }
        self.report_pending(core, events, deadline, batching)
    }

    /// Reports the pending steps until one needs the application first (a revocation) or
    /// names a topic the metadata does not know yet.
    fn report_pending(
        &mut self,
        core: &mut Core,
        events: &mut Vec<GroupEvent>,
        deadline: Instant,
        batching: Batching,
    ) -> Result<()> {
        loop {
            let Some(c) = self.running.as_mut() else {
                return Ok(());
            };
            if c.revoking {
                return Ok(());
            }
            let Some(step) = c.pending.front().cloned() else {
                return Ok(());
            };
            let generation = core.generation().map_or(0, |g| g.id);
            if batching == Batching::OneKind && !fits(events, &step) {
                return Ok(());
            }
            let partitions = match &step {
                Step::Revoke(p) | Step::Assign(p) | Step::Lose(p) => match self.named(core, p, deadline) {
                    Some(named) => named,
                    None => return Ok(()),
                },
                Step::Fatal(f) => {
                    let f = f.clone();
                    if let Some(c) = self.running.as_mut() {
                        c.pending.pop_front();
                        c.fatal = Some(f.clone());
                    }
                    return Err(self.fatal_error(core, f));
                }
                _ => Vec::new(),
            };
            let Some(c) = self.running.as_mut() else {
                return Ok(());
            };
            c.pending.pop_front();
            match step {
                Step::Revoke(_) => {
                    remove_from(&mut core.assignment, &partitions);
                    c.revoking = true;
                    log::info!("{}: revoking {} partitions", core.ctx(), partitions.len());
                    events.push(GroupEvent::Revoked {
                        generation,
                        partitions,
                    });
                }
                Step::Assign(_) => {
                    for tp in &partitions {
                        let ps = core.assignment.partitions.entry(tp.topic.clone()).or_default();
                        if let Err(at) = ps.binary_search(&tp.partition) {
                            ps.insert(at, tp.partition);
                        }
                    }
                    log::info!("{}: assigned {} partitions", core.ctx(), partitions.len());
                    self.mark_joined(core);
                    match events.last_mut() {
                        // One poll, one `Assigned`: reconciliations that followed each other
                        // since the last poll are reported together, in the latest epoch.
                        Some(GroupEvent::Assigned {
                            generation: g,
                            partitions: ps,
                            ..
                        }) if batching == Batching::OneKind => {
                            *g = generation;
                            ps.extend(partitions);
                            ps.sort();
                            ps.dedup();
                        }
                        _ => events.push(GroupEvent::Assigned {
                            generation,
                            partitions,
                            rebalanced: None,
                        }),
                    }
                }
                Step::Lose(_) => {
                    remove_from(&mut core.assignment, &partitions);
                    log::warn!(
                        "{}: {} partitions lost (fenced by the coordinator, or left after a late \
                         poll); rejoining",
                        core.ctx(),
                        partitions.len()
                    );
                    if let Some(c) = self.running.as_mut() {
                        c.joined = false;
                    }
                    core.state.set_epoch(None);
                    events.push(GroupEvent::Lost {
                        generation,
                        partitions,
                    });
                }
                _ => {}
            }
        }
    }

    /// The coordinator has taken the member in (its first assignment is reported): `join`
    /// returns, the join time is recorded.
    fn mark_joined(&mut self, core: &mut Core) {
        let Some(c) = self.running.as_mut() else {
            return;
        };
        if std::mem::replace(&mut c.joined, true) {
            return;
        }
        let took = core.join_started.take().map_or(Duration::ZERO, |t| t.elapsed());
        core.metrics.joined(took, Duration::ZERO, true);
    }

    /// `partitions` by topic name, looking unknown topic ids up in the metadata of the
    /// subscribed topics (once per call); `None` if some are still unknown.
    fn named(
        &mut self,
        core: &mut Core,
        partitions: &Partitions,
        deadline: Instant,
    ) -> Option<Vec<TopicPartition>> {
        let known = |c: &Running| partitions.keys().all(|id| c.names.contains_key(id));
        let c = self.running.as_mut()?;
        if !known(c) {
            let cached = core.client.cached_metadata();
            learn_names(&mut c.names, &cached);
        }
        if !known(self.running.as_ref()?) {
            let topics: Vec<&str> = core.config.topics.iter().map(String::as_str).collect();
            let by = lookup_deadline(deadline);
            match core.client.refresh_metadata_by(Some(&topics), by) {
                Ok(meta) => learn_names(&mut self.running.as_mut()?.names, &meta),
                Err(e) => log::debug!("{}: metadata for the assigned topic ids: {e}", core.ctx()),
            }
        }
        let c = self.running.as_ref()?;
        if !known(c) {
            log::debug!(
                "{}: assigned topic ids not in the metadata yet; waiting",
                core.ctx()
            );
            return None;
        }
        Some(
            partitions
                .iter()
                .flat_map(|(id, ps)| {
                    let name = &c.names[id];
                    ps.iter().map(move |p| TopicPartition::new(name.clone(), *p))
                })
                .collect(),
        )
    }

    /// The error a stopped consumer-protocol member returns, moving it to its final state.
    fn fatal_error(&mut self, core: &mut Core, f: Fatal) -> Error {
        let group = core.config.group_id.clone();
        let instance_id = core.config.group_instance_id.clone().unwrap_or_default();
        core.assignment = Assignment::default();
        match f {
            Fatal::InstanceFenced => {
                if core.state.state() != MemberState::Fenced {
                    core.transition(Transition::Fenced);
                    log::error!(
                        "{}: fenced by another member with the same group.instance.id; stopping",
                        core.ctx()
                    );
                }
                core.fenced_error()
            }
            Fatal::InstanceInUse { attempts } => {
                log::error!(
                    "{}: group.instance.id {instance_id:?} is still held by another member; stopping",
                    core.ctx()
                );
                Error::InstanceInUse {
                    group,
                    instance_id,
                    attempts,
                }
            }
            Fatal::Refused { code, message } => {
                let e = Error::from_code(
                    ApiKey::ConsumerGroupHeartbeat,
                    code,
                    Scope::group(&group),
                    message,
                );
                // A denial stops the member: the shell's `stop_if_denied` sees this error.
                e
            }
        }
    }

    /// The generation a commit carries: under the consumer protocol the member epoch as the
    /// heartbeat thread knows it now (it may have moved since the last poll, and a commit with
    /// an older one is refused with STALE_MEMBER_EPOCH).
    pub(in crate::group) fn commit_generation(&mut self, core: &mut Core) -> Option<Generation> {
        let Some(c) = self.running.as_mut() else {
            return core.state.generation().cloned();
        };
        let shared = c.thread.lock();
        let epoch = shared.membership.epoch();
        (epoch > 0).then(|| Generation {
            id: epoch,
            member_id: shared.membership.member_id().to_string(),
            protocol: None,
        })
    }

    /// Leaves under the consumer protocol: the leave heartbeat (epoch -1, or -2 for a static
    /// member that will come back, `temporary`) by `deadline`, then the thread stops.
    pub(in crate::group) fn leave(
        &mut self,
        core: &mut Core,
        temporary: bool,
        deadline: Instant,
    ) -> Result<()> {
        let Some(mut c) = self.running.take() else {
            return Ok(());
        };
        let epoch = {
            let mut shared = c.thread.lock();
            shared.membership.leave(temporary);
            shared.membership.leave_epoch()
        };
        c.thread.heartbeat_now();
        let left = c.thread.wait_left(deadline);
        let last = c.thread.lock().last_error.take();
        c.thread.shutdown(crate::deadline::left(deadline));
        core.assignment = Assignment::default();
        if left || epoch.is_none() {
            log::info!(
                "{}: {}",
                core.ctx(),
                match epoch {
                    Some(-2) =>
                        "left temporarily (epoch -2): the coordinator keeps this static \
                                 member's partitions until its session times out",
                    Some(_) => "left the group",
                    None => "closed before joining",
                }
            );
            Ok(())
        } else {
            Err(Error::retries_timeout(
                format!("leaving group {}", core.config.group_id),
                last,
            ))
        }
    }

    /// The member's state: the core's once it has ended (fenced, denied, left, closed),
    /// else joining until the coordinator has taken the member in, then stable.
    pub(in crate::group) fn state(&self, core: &Core) -> MemberState {
        match &self.running {
            Some(c) if core.state.state() == MemberState::Unjoined => match c.joined {
                true => MemberState::Stable,
                false => MemberState::Joining,
            },
            _ => core.state.state(),
        }
    }

    /// Whether the member holds a membership (started, and not left).
    pub(in crate::group) fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Stops the heartbeat thread without leaving (a crash, for tests).
    pub(in crate::group) fn crash(&mut self) {
        if let Some(mut c) = self.running.take() {
            c.thread.shutdown(Duration::from_secs(1));
        }
    }

    /// Stops or resumes the heartbeats without the member knowing, as a hung process would
    /// (`unstable::TestHooks`).
    pub(in crate::group) fn freeze(&self, frozen: bool) {
        if let Some(c) = &self.running {
            c.thread.lock().frozen = frozen;
            if !frozen {
                c.thread.heartbeat_now();
            }
        }
    }

    /// The coordinator the heartbeats last reached, as of the last call (before the protocol
    /// started, the one the session found).
    pub(in crate::group) fn coordinator<'a>(&'a self, core: &'a Core) -> Option<&'a crate::client::Broker> {
        match &self.running {
            Some(c) => c.coordinator.as_ref(),
            None => core.session.coordinator.as_ref(),
        }
    }

    /// Whether the member has yet to be taken in by the coordinator.
    pub(in crate::group) fn rejoin_pending(&self) -> bool {
        self.running.as_ref().map_or(true, |c| !c.joined)
    }
}

fn learn_names(names: &mut BTreeMap<Uuid, String>, meta: &crate::client::Metadata) {
    for (name, t) in &meta.topics {
        if t.id != Uuid::default() {
            names.insert(t.id, name.clone());
        }
    }
}

fn remove_from(assignment: &mut Assignment, gone: &[TopicPartition]) {
    for tp in gone {
        if let Some(ps) = assignment.partitions.get_mut(&tp.topic) {
            ps.retain(|p| *p != tp.partition);
            if ps.is_empty() {
                assignment.partitions.remove(&tp.topic);
            }
        }
    }
}
