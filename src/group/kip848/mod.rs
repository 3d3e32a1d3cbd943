//! The member of a KIP-848 `consumer`-protocol group, as pure logic: what the next
//! ConsumerGroupHeartbeat carries, what an answer does to the member, and the incremental
//! reconciliation of the assignment the coordinator sends.
//!
//! No socket or thread here: the engine (`member.rs`) wires it to the coordinator and the
//! heartbeat thread (`heartbeat.rs`). Kept apart so that every rule is unit-tested without a
//! broker. The rules follow Kafka's own client
//! (`ConsumerMembershipManager`, `ConsumerHeartbeatRequestManager`):
//!
//! - a member joins with epoch 0 and every field; later heartbeats leave out (send null for)
//!   what has not changed since the last one the coordinator answered, and any error makes the
//!   next heartbeat a full one again, since the coordinator may not have seen the last;
//! - the coordinator's assignment is a target: partitions owned and not in it are revoked first
//!   (the application may commit them), then the new ones are assigned, and the heartbeat that
//!   follows at once lists what the member owns, which is how it acknowledges;
//! - `FENCED_MEMBER_EPOCH` and `UNKNOWN_MEMBER_ID` lose every partition (no commit is possible
//!   any more) and rejoin with epoch 0, keeping the member id and the instance id;
//!   `UNRELEASED_INSTANCE_ID` (the instance id's previous member has not left yet) is retried a
//!   bounded number of times; `FENCED_INSTANCE_ID` and configuration errors are fatal;
//! - leaving sends epoch `-1`; a static member that will come back sends `-2`, which keeps its
//!   assignment for it for the session timeout.
//!
//! Topics are kept by id, as the protocol sends them; resolving names through metadata is the
//! caller's part.

use crate::protocol::messages::consumer_group_heartbeat_request as request;
use crate::protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
};
use crate::protocol::Uuid;
use crate::KafkaCode;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

pub(crate) mod heartbeat;
pub(in crate::group) mod member;
#[cfg(test)]
mod scripted;

/// Partitions by topic id.
pub(crate) type Partitions = BTreeMap<Uuid, BTreeSet<i32>>;

/// The member epoch a leaving member sends: it leaves the group for good.
pub(crate) const LEAVE_EPOCH: i32 = -1;
/// The epoch a static member sends when it stops but will come back within the session timeout.
pub(crate) const STATIC_LEAVE_EPOCH: i32 = -2;
/// How many `UNRELEASED_INSTANCE_ID` answers in a row are retried before the member gives up,
/// unless told otherwise ([`Membership::unreleased_retries`]).
pub(crate) const UNRELEASED_RETRIES: u32 = 10;

/// Where the member is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Sending epoch 0 until the coordinator answers with an epoch.
    Joining,
    /// In the group; owns what the coordinator last asked for.
    Stable,
    /// Waiting for the application to finish with revoked partitions ([`Membership::revoked`]).
    Revoking(Partitions),
    /// The leave heartbeat (epoch `-1` or `-2`) is to be sent, or was.
    Leaving(i32),
    /// The coordinator acknowledged the leave, or the member stopped for good.
    Left,
}

/// What the caller does after an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Hand these partitions back: the application may commit them, then calls
    /// [`Membership::revoked`].
    Revoke(Partitions),
    /// Start consuming these.
    Assign(Partitions),
    /// These are gone without a commit (the member was fenced).
    Lose(Partitions),
    /// Send the next heartbeat now, not at the interval (an acknowledgement or a rejoin).
    HeartbeatNow,
    /// Find the coordinator again, then heartbeat.
    FindCoordinator,
    /// Heartbeat again after the retry backoff.
    Backoff,
    /// Stop: the error cannot be retried.
    Fatal(Fatal),
}

/// Why the member stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fatal {
    /// Another process took over this `group.instance.id` (`FENCED_INSTANCE_ID`).
    InstanceFenced,
    /// The instance id's previous member did not leave within the retries: another process may
    /// be using it. Under this protocol the newcomer is the one refused.
    InstanceInUse { attempts: u32 },
    /// Any other error that retrying cannot fix, with the coordinator's message if any.
    Refused {
        code: KafkaCode,
        message: Option<String>,
    },
}

/// One heartbeat's content; `None` means "unchanged" (null on the wire).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Heartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: Option<i32>,
    pub subscribed_topics: Option<Vec<String>>,
    pub server_assignor: Option<String>,
    pub owned: Option<Partitions>,
}

/// The answer to a heartbeat, as the member needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    pub code: KafkaCode,
    pub message: Option<String>,
    pub member_id: Option<String>,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// `None`: the assignment has not changed.
    pub assignment: Option<Partitions>,
}

/// The member's state under the consumer protocol.
#[derive(Debug)]
pub(crate) struct Membership {
    member_id: String,
    epoch: i32,
    instance_id: Option<String>,
    rack_id: Option<String>,
    rebalance_timeout_ms: i32,
    server_assignor: Option<String>,
    subscription: Vec<String>,
    phase: Phase,
    owned: Partitions,
    /// The latest assignment the coordinator sent, until the member owns exactly it.
    target: Option<Partitions>,
    interval: Duration,
    /// What the coordinator has seen, for leaving out the unchanged; `None` forces a full
    /// heartbeat.
    acked: Option<Sent>,
    /// What the heartbeat in flight carried.
    in_flight: Option<Sent>,
    unreleased: u32,
    unreleased_retries: u32,
    /// Whether any heartbeat went out (a join the coordinator may have seen).
    sent_any: bool,
    /// Left because the application did not poll in time ([`leave_late`](Self::leave_late)):
    /// the next poll rejoins.
    stale: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Sent {
    subscription: Vec<String>,
    owned: Partitions,
    epoch: i32,
}

impl Membership {
    /// A member about to join. `member_id` is the client-generated id (KIP-1082, heartbeat v1)
    /// or empty for v0, where the coordinator picks one.
    pub(crate) fn new(member_id: String, instance_id: Option<String>, rebalance_timeout: Duration) -> Self {
        Membership {
            member_id,
            epoch: 0,
            instance_id,
            rack_id: None,
            rebalance_timeout_ms: i32::try_from(rebalance_timeout.as_millis()).unwrap_or(i32::MAX),
            server_assignor: None,
            subscription: Vec::new(),
            phase: Phase::Joining,
            owned: Partitions::new(),
            target: None,
            interval: Duration::from_secs(5),
            acked: None,
            in_flight: None,
            unreleased: 0,
            unreleased_retries: UNRELEASED_RETRIES,
            sent_any: false,
            stale: false,
        }
    }

    /// `group.remote.assignor`.
    pub(crate) fn server_assignor(mut self, name: Option<String>) -> Self {
        self.server_assignor = name;
        self
    }

    /// How many `UNRELEASED_INSTANCE_ID` answers in a row are retried (each after the retry
    /// backoff) before [`Fatal::InstanceInUse`].
    pub(crate) fn unreleased_retries(mut self, n: u32) -> Self {
        self.unreleased_retries = n;
        self
    }

    /// `client.rack`.
    pub(crate) fn rack(mut self, rack: Option<String>) -> Self {
        self.rack_id = rack;
        self
    }

    /// Changes the subscribed topics; the next heartbeat carries them.
    pub(crate) fn subscribe(&mut self, mut topics: Vec<String>) {
        topics.sort();
        topics.dedup();
        self.subscription = topics;
    }

    pub(crate) fn phase(&self) -> &Phase {
        &self.phase
    }

    pub(crate) fn epoch(&self) -> i32 {
        self.epoch
    }

    pub(crate) fn member_id(&self) -> &str {
        &self.member_id
    }

    #[cfg(test)]
    pub(crate) fn owned(&self) -> &Partitions {
        &self.owned
    }

    /// The epoch the leave heartbeat carries (`-1` or `-2`) while leaving; `None` otherwise
    /// (also once left without having to send one).
    pub(crate) fn leave_epoch(&self) -> Option<i32> {
        match self.phase {
            Phase::Leaving(epoch) => Some(epoch),
            _ => None,
        }
    }

    /// The interval the coordinator asked for.
    pub(crate) fn interval(&self) -> Duration {
        self.interval
    }

    /// The next heartbeat to send (and remembers it as in flight), or `None` once left.
    pub(crate) fn heartbeat(&mut self) -> Option<Heartbeat> {
        let epoch = match self.phase {
            Phase::Left => return None,
            Phase::Leaving(epoch) => epoch,
            _ => self.epoch,
        };
        let sent = Sent {
            subscription: self.subscription.clone(),
            owned: self.owned.clone(),
            epoch,
        };
        let full = epoch == 0 || self.acked.is_none();
        let changed = |f: &dyn Fn(&Sent) -> bool| full || self.acked.as_ref().is_some_and(|a| !f(a));
        let leaving = epoch < 0;
        let hb = Heartbeat {
            member_id: self.member_id.clone(),
            member_epoch: epoch,
            // The instance id goes on every heartbeat: the coordinator checks it against the
            // member id each time.
            instance_id: self.instance_id.clone(),
            rack_id: if full && !leaving {
                self.rack_id.clone()
            } else {
                None
            },
            rebalance_timeout_ms: (full && !leaving).then_some(self.rebalance_timeout_ms),
            subscribed_topics: (!leaving && changed(&|a| a.subscription == sent.subscription))
                .then(|| sent.subscription.clone()),
            server_assignor: if full && !leaving {
                self.server_assignor.clone()
            } else {
                None
            },
            owned: (!leaving && changed(&|a| a.owned == sent.owned)).then(|| sent.owned.clone()),
        };
        self.in_flight = Some(sent);
        self.sent_any = true;
        Some(hb)
    }

    /// Starts leaving: the next heartbeat sends epoch `-1`, or `-2` for a static member that
    /// will come back (`temporary`). Returns what the member owned, for the caller to revoke
    /// (commit first) before it sends; the member owns nothing from now on.
    pub(crate) fn leave(&mut self, temporary: bool) -> Partitions {
        let epoch = if temporary && self.instance_id.is_some() {
            STATIC_LEAVE_EPOCH
        } else {
            LEAVE_EPOCH
        };
        self.phase = if !self.sent_any || self.phase == Phase::Left {
            // Never heartbeated: nothing to tell the coordinator.
            Phase::Left
        } else {
            Phase::Leaving(epoch)
        };
        self.target = None;
        std::mem::take(&mut self.owned)
    }

    /// Whether the member is in the group or on its way in: neither leaving nor left.
    pub(crate) fn in_group(&self) -> bool {
        matches!(self.phase, Phase::Joining | Phase::Stable | Phase::Revoking(_))
    }

    /// The application did not poll within `max.poll.interval.ms`: leave as
    /// [`leave`](Self::leave) does — epoch `-1`, or `-2` for a static member, whose partitions
    /// the coordinator then keeps for it until its session times out — and rejoin once it
    /// polls again ([`rejoin_if_stale`](Self::rejoin_if_stale)). Returns what the member owned,
    /// lost: it is not the member's to commit any more.
    pub(crate) fn leave_late(&mut self) -> Partitions {
        self.stale = true;
        self.leave(true)
    }

    /// After [`leave_late`](Self::leave_late), once the leave is done: join again with epoch 0,
    /// keeping the member id and the instance id (as Java's consumer rejoins a stale member).
    /// Whether it did; a leave still under way rejoins at a later call.
    pub(crate) fn rejoin_if_stale(&mut self) -> bool {
        if !self.stale || self.phase != Phase::Left {
            return false;
        }
        self.stale = false;
        self.epoch = 0;
        self.phase = Phase::Joining;
        self.target = None;
        self.acked = None;
        self.in_flight = None;
        self.unreleased = 0;
        true
    }

    /// The application is done with the partitions of [`Step::Revoke`]; what follows.
    pub(crate) fn revoked(&mut self) -> Vec<Step> {
        // A fence or a fatal error may have ended the revocation first: its phase stays.
        if !matches!(self.phase, Phase::Revoking(_)) {
            return Vec::new();
        }
        let Phase::Revoking(gone) = std::mem::replace(&mut self.phase, Phase::Stable) else {
            return Vec::new();
        };
        remove(&mut self.owned, &gone);
        let mut steps = self.reconcile();
        // The owned set changed: acknowledge it now, unless a further revocation comes first.
        if !steps
            .iter()
            .any(|s| matches!(s, Step::Revoke(_) | Step::HeartbeatNow))
        {
            steps.push(Step::HeartbeatNow);
        }
        steps
    }

    /// The heartbeat in flight failed on the way (no answer): the next one is a full one.
    pub(crate) fn lost_answer(&mut self) {
        self.in_flight = None;
        self.acked = None;
    }

    /// Applies the coordinator's answer to the heartbeat in flight.
    pub(crate) fn on_answer(&mut self, answer: Answer) -> Vec<Step> {
        use KafkaCode as K;
        let sent = self.in_flight.take();
        if answer.code != K::None {
            self.acked = None;
        }
        if answer.code != K::UnreleasedInstanceId {
            self.unreleased = 0;
        }
        match answer.code {
            K::None => {}
            K::NotCoordinator | K::CoordinatorNotAvailable => return vec![Step::FindCoordinator],
            K::CoordinatorLoadInProgress => return vec![Step::Backoff],
            K::FencedMemberEpoch | K::UnknownMemberId => {
                if matches!(self.phase, Phase::Leaving(_) | Phase::Left) {
                    // Fenced while leaving: the member is out either way.
                    self.phase = Phase::Left;
                    return Vec::new();
                }
                return self.fenced();
            }
            K::UnreleasedInstanceId => {
                self.unreleased += 1;
                if self.unreleased > self.unreleased_retries {
                    self.phase = Phase::Left;
                    return vec![Step::Fatal(Fatal::InstanceInUse {
                        attempts: self.unreleased,
                    })];
                }
                return vec![Step::Backoff];
            }
            K::FencedInstanceId => {
                self.phase = Phase::Left;
                return vec![Step::Fatal(Fatal::InstanceFenced)];
            }
            code if code.is_retriable() => return vec![Step::Backoff],
            code => {
                self.phase = Phase::Left;
                return vec![Step::Fatal(Fatal::Refused {
                    code,
                    message: answer.message,
                })];
            }
        }
        if let Phase::Leaving(_) = self.phase {
            // Only the answer to the leave heartbeat itself says the member is out: one sent
            // before `leave` may come back first (then the leave still has to go).
            if sent.as_ref().is_some_and(|s| s.epoch < 0) {
                self.phase = Phase::Left;
            }
            return Vec::new();
        }
        if let Some(id) = answer.member_id.filter(|id| !id.is_empty()) {
            self.member_id = id;
        }
        self.epoch = answer.member_epoch;
        if let Ok(ms) = u64::try_from(answer.heartbeat_interval_ms) {
            if ms > 0 {
                self.interval = Duration::from_millis(ms);
            }
        }
        self.acked = sent;
        if self.phase == Phase::Joining {
            self.phase = Phase::Stable;
        }
        if let Some(target) = answer.assignment {
            self.target = Some(target);
        }
        if matches!(self.phase, Phase::Revoking(_)) {
            // The new target is reconciled once the revocation in progress is done.
            return Vec::new();
        }
        self.reconcile()
    }

    /// Moves the owned partitions toward the target: revoke first, assign once nothing is left
    /// to revoke, then acknowledge.
    fn reconcile(&mut self) -> Vec<Step> {
        let Some(target) = &self.target else {
            return Vec::new();
        };
        let gone = difference(&self.owned, target);
        if !gone.is_empty() {
            self.phase = Phase::Revoking(gone.clone());
            return vec![Step::Revoke(gone)];
        }
        let added = difference(target, &self.owned);
        self.target = None;
        if added.is_empty() {
            return Vec::new();
        }
        for (topic, ps) in &added {
            self.owned.entry(*topic).or_default().extend(ps);
        }
        vec![Step::Assign(added), Step::HeartbeatNow]
    }

    /// `FENCED_MEMBER_EPOCH` or `UNKNOWN_MEMBER_ID`: everything owned is lost; rejoin at epoch 0
    /// with the same member and instance ids.
    fn fenced(&mut self) -> Vec<Step> {
        self.epoch = 0;
        self.phase = Phase::Joining;
        self.target = None;
        let lost = std::mem::take(&mut self.owned);
        let mut steps = Vec::new();
        if !lost.is_empty() {
            steps.push(Step::Lose(lost));
        }
        steps.push(Step::HeartbeatNow);
        steps
    }
}

/// `a − b`, without empty topics.
fn difference(a: &Partitions, b: &Partitions) -> Partitions {
    a.iter()
        .filter_map(|(topic, ps)| {
            let left: BTreeSet<i32> = match b.get(topic) {
                Some(other) => ps.difference(other).copied().collect(),
                None => ps.clone(),
            };
            (!left.is_empty()).then_some((*topic, left))
        })
        .collect()
}

/// Removes `gone` from `owned`, dropping topics left empty.
fn remove(owned: &mut Partitions, gone: &Partitions) {
    for (topic, ps) in gone {
        if let Some(mine) = owned.get_mut(topic) {
            mine.retain(|p| !ps.contains(p));
            if mine.is_empty() {
                owned.remove(topic);
            }
        }
    }
}

/// The ConsumerGroupHeartbeat request for `hb` (any version: v1 only adds the regex, which is not
/// offered yet). Unchanged fields go as null, and the rebalance timeout as -1, as the protocol
/// asks.
pub(crate) fn request(group_id: &str, hb: &Heartbeat) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest {
        group_id: group_id.into(),
        member_id: hb.member_id.as_str().into(),
        member_epoch: hb.member_epoch,
        instance_id: hb.instance_id.as_deref().map(Into::into),
        rack_id: hb.rack_id.as_deref().map(Into::into),
        rebalance_timeout_ms: hb.rebalance_timeout_ms.unwrap_or(-1),
        subscribed_topic_names: hb
            .subscribed_topics
            .as_ref()
            .map(|ts| ts.iter().map(|t| t.as_str().into()).collect()),
        server_assignor: hb.server_assignor.as_deref().map(Into::into),
        topic_partitions: hb.owned.as_ref().map(|owned| {
            owned
                .iter()
                .map(|(id, ps)| request::TopicPartitions {
                    topic_id: *id,
                    partitions: ps.iter().copied().collect(),
                    ..Default::default()
                })
                .collect()
        }),
        ..Default::default()
    }
}

/// The member's view of a ConsumerGroupHeartbeat answer. A topic listed twice has its
/// partitions united; nothing from the wire can make this fail.
pub(crate) fn answer(resp: &ConsumerGroupHeartbeatResponse) -> Answer {
    Answer {
        code: KafkaCode::from_code(resp.error_code),
        message: resp.error_message.as_ref().map(|m| m.to_string()),
        member_id: resp.member_id.as_ref().map(|m| m.to_string()),
        member_epoch: resp.member_epoch,
        heartbeat_interval_ms: resp.heartbeat_interval_ms,
        assignment: resp.assignment.as_ref().map(|a| {
            let mut out = Partitions::new();
            for t in &a.topic_partitions {
                out.entry(t.topic_id)
                    .or_default()
                    .extend(t.partitions.iter().copied());
            }
            out
        }),
    }
}

/// The ShareGroupHeartbeat (KIP-932) carrying `hb`: a share group's membership follows the
/// same epochs and rules as KIP-848's (join with 0, leave with -1, the full subscription again
/// after an error), without what share groups do not have: an instance id, a rebalance
/// timeout, a server assignor and owned partitions (no partition is any one member's).
pub(crate) fn share_request(group_id: &str, hb: &Heartbeat) -> ShareGroupHeartbeatRequest {
    ShareGroupHeartbeatRequest {
        group_id: group_id.into(),
        member_id: hb.member_id.as_str().into(),
        member_epoch: hb.member_epoch,
        rack_id: hb.rack_id.as_deref().map(Into::into),
        subscribed_topic_names: hb
            .subscribed_topics
            .as_ref()
            .map(|ts| ts.iter().map(|t| t.as_str().into()).collect()),
        ..Default::default()
    }
}

/// The member's view of a ShareGroupHeartbeat answer, as [`answer`] reads a
/// ConsumerGroupHeartbeat's.
pub(crate) fn share_answer(resp: &ShareGroupHeartbeatResponse) -> Answer {
    Answer {
        code: KafkaCode::from_code(resp.error_code),
        message: resp.error_message.as_ref().map(|m| m.to_string()),
        member_id: resp.member_id.as_ref().map(|m| m.to_string()),
        member_epoch: resp.member_epoch,
        heartbeat_interval_ms: resp.heartbeat_interval_ms,
        assignment: resp.assignment.as_ref().map(|a| {
            let mut out = Partitions::new();
            for t in &a.topic_partitions {
                out.entry(t.topic_id)
                    .or_default()
                    .extend(t.partitions.iter().copied());
            }
            out
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> Uuid {
        Uuid([n; 16])
    }

    fn parts(rows: &[(u8, &[i32])]) -> Partitions {
        rows.iter()
            .map(|(t, ps)| (id(*t), ps.iter().copied().collect()))
            .collect()
    }

    fn ok(epoch: i32, assignment: Option<Partitions>) -> Answer {
        Answer {
            code: KafkaCode::None,
            message: None,
            member_id: Some("m-1".into()),
            member_epoch: epoch,
            heartbeat_interval_ms: 3000,
            assignment,
        }
    }

    fn error(code: KafkaCode) -> Answer {
        Answer {
            code,
            message: None,
            member_id: None,
            member_epoch: -1,
            heartbeat_interval_ms: 0,
            assignment: None,
        }
    }

    fn member() -> Membership {
        let mut m = Membership::new(String::new(), Some("i-1".into()), Duration::from_secs(60))
            .server_assignor(Some("uniform".into()))
            .rack(Some("r1".into()));
        m.subscribe(vec!["b".into(), "a".into(), "a".into()]);
        m
    }

    /// A member in the group at `epoch` owning `owned`, with the coordinator up to date.
    fn stable(owned: Partitions, epoch: i32) -> Membership {
        let mut m = member();
        m.heartbeat();
        let steps = m.on_answer(ok(epoch, Some(owned)));
        assert!(matches!(steps[0], Step::Assign(_)), "{steps:?}");
        m.heartbeat();
        assert_eq!(m.on_answer(ok(epoch, None)), []);
        m
    }

    #[test]
    fn the_join_heartbeat_carries_everything_and_later_ones_only_what_changed() {
        let mut m = member();
        let join = m.heartbeat().unwrap();
        assert_eq!(join.member_epoch, 0);
        assert_eq!(join.member_id, "");
        assert_eq!(join.instance_id.as_deref(), Some("i-1"));
        assert_eq!(join.rack_id.as_deref(), Some("r1"));
        assert_eq!(join.rebalance_timeout_ms, Some(60_000));
        assert_eq!(join.subscribed_topics, Some(vec!["a".into(), "b".into()]));
        assert_eq!(join.server_assignor.as_deref(), Some("uniform"));
        assert_eq!(join.owned, Some(Partitions::new()));
        assert_eq!(m.on_answer(ok(1, None)), []);
        assert_eq!((m.member_id(), m.epoch()), ("m-1", 1));
        assert_eq!(m.interval(), Duration::from_secs(3));
        assert_eq!(m.phase(), &Phase::Stable);

        let next = m.heartbeat().unwrap();
        assert_eq!(
            next,
            Heartbeat {
                member_id: "m-1".into(),
                member_epoch: 1,
                instance_id: Some("i-1".into()),
                ..Default::default()
            }
        );
        m.on_answer(ok(1, None));
        m.subscribe(vec!["c".into()]);
        assert_eq!(m.heartbeat().unwrap().subscribed_topics, Some(vec!["c".into()]));
    }

    #[test]
    fn an_assignment_is_taken_then_acknowledged_at_once() {
        let mut m = member();
        m.heartbeat();
        let steps = m.on_answer(ok(1, Some(parts(&[(1, &[0, 1])]))));
        assert_eq!(steps, [Step::Assign(parts(&[(1, &[0, 1])])), Step::HeartbeatNow]);
        assert_eq!(m.owned(), &parts(&[(1, &[0, 1])]));
        // The acknowledgement lists what is owned now.
        assert_eq!(m.heartbeat().unwrap().owned, Some(parts(&[(1, &[0, 1])])));
        assert_eq!(m.on_answer(ok(1, None)), []);
        assert_eq!(m.heartbeat().unwrap().owned, None);
    }

    #[test]
    fn partitions_moving_away_are_revoked_before_new_ones_are_assigned() {
        let mut m = stable(parts(&[(1, &[0, 1, 2])]), 3);
        m.heartbeat();
        let steps = m.on_answer(ok(4, Some(parts(&[(1, &[0]), (2, &[5])]))));
        assert_eq!(steps, [Step::Revoke(parts(&[(1, &[1, 2])]))]);
        // Still owned while the application commits them.
        assert_eq!(m.owned(), &parts(&[(1, &[0, 1, 2])]));
        // Heartbeats go on meanwhile; an answer does not reconcile twice.
        m.heartbeat();
        assert_eq!(m.on_answer(ok(4, None)), []);
        let steps = m.revoked();
        assert_eq!(steps, [Step::Assign(parts(&[(2, &[5])])), Step::HeartbeatNow]);
        assert_eq!(m.owned(), &parts(&[(1, &[0]), (2, &[5])]));
        assert_eq!(m.heartbeat().unwrap().owned, Some(parts(&[(1, &[0]), (2, &[5])])));
    }

    #[test]
    fn a_revocation_only_target_is_acknowledged_after_the_revocation() {
        let mut m = stable(parts(&[(1, &[0, 1])]), 2);
        m.heartbeat();
        assert_eq!(
            m.on_answer(ok(3, Some(parts(&[(1, &[0])])))),
            [Step::Revoke(parts(&[(1, &[1])]))]
        );
        assert_eq!(m.revoked(), [Step::HeartbeatNow]);
        assert_eq!(m.heartbeat().unwrap().owned, Some(parts(&[(1, &[0])])));
    }

    #[test]
    fn a_new_target_during_a_revocation_is_reconciled_after_it() {
        let mut m = stable(parts(&[(1, &[0, 1, 2])]), 1);
        m.heartbeat();
        m.on_answer(ok(2, Some(parts(&[(1, &[0, 1])]))));
        m.heartbeat();
        // The target changes again while partition 2 is being revoked: 1 must go too.
        assert_eq!(m.on_answer(ok(3, Some(parts(&[(1, &[0])])))), []);
        assert_eq!(m.revoked(), [Step::Revoke(parts(&[(1, &[1])]))]);
        assert_eq!(m.revoked(), [Step::HeartbeatNow]);
        assert_eq!(m.owned(), &parts(&[(1, &[0])]));
    }

    #[test]
    fn a_fenced_member_loses_everything_and_rejoins_with_epoch_0_and_its_ids() {
        for code in [KafkaCode::FencedMemberEpoch, KafkaCode::UnknownMemberId] {
            let mut m = stable(parts(&[(1, &[0, 1])]), 7);
            m.heartbeat();
            assert_eq!(
                m.on_answer(error(code)),
                [Step::Lose(parts(&[(1, &[0, 1])])), Step::HeartbeatNow],
                "{code:?}"
            );
            assert!(m.owned().is_empty());
            let rejoin = m.heartbeat().unwrap();
            assert_eq!(rejoin.member_epoch, 0);
            assert_eq!(rejoin.member_id, "m-1");
            assert_eq!(rejoin.instance_id.as_deref(), Some("i-1"));
            assert_eq!(rejoin.subscribed_topics, Some(vec!["a".into(), "b".into()]));
            assert_eq!(rejoin.owned, Some(Partitions::new()));
        }
    }

    #[test]
    fn any_error_makes_the_next_heartbeat_a_full_one() {
        let mut m = stable(parts(&[(1, &[0])]), 2);
        m.heartbeat();
        assert_eq!(
            m.on_answer(error(KafkaCode::NotCoordinator)),
            [Step::FindCoordinator]
        );
        let hb = m.heartbeat().unwrap();
        assert_eq!(hb.member_epoch, 2);
        assert_eq!(hb.subscribed_topics, Some(vec!["a".into(), "b".into()]));
        assert_eq!(hb.owned, Some(parts(&[(1, &[0])])));
        assert_eq!(hb.rebalance_timeout_ms, Some(60_000));
        m.on_answer(ok(2, None));
        m.heartbeat();
        m.lost_answer();
        assert!(m.heartbeat().unwrap().owned.is_some(), "no answer: full again");
        assert_eq!(
            m.on_answer(error(KafkaCode::CoordinatorLoadInProgress)),
            [Step::Backoff]
        );
        assert_eq!(
            m.owned(),
            &parts(&[(1, &[0])]),
            "retriable errors keep the partitions"
        );
    }

    #[test]
    fn unreleased_instance_id_is_retried_a_bounded_number_of_times() {
        let mut m = member();
        for _ in 0..UNRELEASED_RETRIES {
            m.heartbeat();
            assert_eq!(
                m.on_answer(error(KafkaCode::UnreleasedInstanceId)),
                [Step::Backoff]
            );
        }
        m.heartbeat();
        assert_eq!(
            m.on_answer(error(KafkaCode::UnreleasedInstanceId)),
            [Step::Fatal(Fatal::InstanceInUse {
                attempts: UNRELEASED_RETRIES + 1
            })]
        );
        assert_eq!(m.heartbeat(), None);
        // An answer in between starts the count again.
        let mut m = member();
        for _ in 0..UNRELEASED_RETRIES {
            m.heartbeat();
            m.on_answer(error(KafkaCode::UnreleasedInstanceId));
        }
        m.heartbeat();
        m.on_answer(ok(1, None));
        m.heartbeat();
        assert_eq!(
            m.on_answer(error(KafkaCode::UnreleasedInstanceId)),
            [Step::Backoff]
        );
    }

    #[test]
    fn the_end_of_a_revocation_cut_short_by_a_fence_or_a_fatal_error_changes_nothing() {
        // Fenced while the application had the revocation: the rejoin goes on.
        let mut m = stable(parts(&[(1, &[0, 1])]), 3);
        m.heartbeat();
        assert_eq!(
            m.on_answer(ok(4, Some(parts(&[(1, &[0])])))),
            [Step::Revoke(parts(&[(1, &[1])]))]
        );
        m.heartbeat();
        m.on_answer(error(KafkaCode::FencedMemberEpoch));
        assert_eq!(m.revoked(), []);
        assert_eq!(m.phase(), &Phase::Joining);
        assert_eq!(m.heartbeat().unwrap().member_epoch, 0);
        // Stopped by another process taking the instance id: no heartbeat ever again.
        let mut m = stable(parts(&[(1, &[0, 1])]), 3);
        m.heartbeat();
        m.on_answer(ok(4, Some(parts(&[(1, &[0])]))));
        m.heartbeat();
        m.on_answer(error(KafkaCode::FencedInstanceId));
        assert_eq!(m.revoked(), []);
        assert_eq!(m.phase(), &Phase::Left);
        assert_eq!(m.heartbeat(), None);
    }

    #[test]
    fn fatal_errors_stop_the_member() {
        let mut m = stable(parts(&[(1, &[0])]), 1);
        m.heartbeat();
        assert_eq!(
            m.on_answer(error(KafkaCode::FencedInstanceId)),
            [Step::Fatal(Fatal::InstanceFenced)]
        );
        assert_eq!(m.heartbeat(), None);
        for code in [
            KafkaCode::UnsupportedAssignor,
            KafkaCode::GroupMaxSizeReached,
            KafkaCode::GroupAuthorizationFailed,
            KafkaCode::InvalidRequest,
            KafkaCode::UnsupportedVersion,
        ] {
            let mut m = member();
            m.heartbeat();
            let mut a = error(code);
            a.message = Some("why".into());
            assert_eq!(
                m.on_answer(a),
                [Step::Fatal(Fatal::Refused {
                    code,
                    message: Some("why".into())
                })]
            );
        }
    }

    #[test]
    fn leaving_sends_minus_one_and_a_static_restart_minus_two() {
        let mut m = stable(parts(&[(1, &[0])]), 4);
        assert_eq!(m.leave(true), parts(&[(1, &[0])]));
        let hb = m.heartbeat().unwrap();
        assert_eq!(
            (hb.member_id.as_str(), hb.member_epoch),
            ("m-1", STATIC_LEAVE_EPOCH)
        );
        assert_eq!(hb.instance_id.as_deref(), Some("i-1"));
        assert_eq!((hb.owned, hb.subscribed_topics), (None, None));
        assert_eq!(m.on_answer(ok(STATIC_LEAVE_EPOCH, None)), []);
        assert_eq!(m.phase(), &Phase::Left);
        assert_eq!(m.heartbeat(), None);

        let mut m = stable(parts(&[(1, &[0])]), 4);
        m.leave(false);
        assert_eq!(m.heartbeat().unwrap().member_epoch, LEAVE_EPOCH);
        // A dynamic member has no temporary leave.
        let mut d = Membership::new("m-2".into(), None, Duration::from_secs(1));
        d.heartbeat();
        d.on_answer(ok(1, None));
        d.leave(true);
        assert_eq!(d.heartbeat().unwrap().member_epoch, LEAVE_EPOCH);
        // Fenced while leaving: out all the same.
        assert_eq!(d.on_answer(error(KafkaCode::UnknownMemberId)), []);
        assert_eq!(d.phase(), &Phase::Left);
    }

    #[test]
    fn the_answer_to_a_heartbeat_sent_before_leaving_does_not_complete_the_leave() {
        let mut m = member();
        m.heartbeat();
        m.on_answer(ok(1, Some(parts(&[(1, &[0])]))));
        m.heartbeat().unwrap();
        m.leave(false);
        // The regular heartbeat's answer comes after `leave`.
        assert!(m.on_answer(ok(1, None)).is_empty());
        assert_eq!(*m.phase(), Phase::Leaving(LEAVE_EPOCH));
        assert_eq!(m.heartbeat().map(|hb| hb.member_epoch), Some(LEAVE_EPOCH));
        m.on_answer(ok(LEAVE_EPOCH, None));
        assert_eq!(*m.phase(), Phase::Left);
    }

    #[test]
    fn a_late_poll_leaves_losing_everything_and_the_next_poll_rejoins_with_epoch_0() {
        for (instance, epoch) in [(None, LEAVE_EPOCH), (Some("w1"), STATIC_LEAVE_EPOCH)] {
            let mut m = Membership::new("m1".into(), instance.map(String::from), Duration::from_secs(2));
            m.subscribe(vec!["t".into()]);
            m.heartbeat();
            m.on_answer(ok(3, Some(parts(&[(1, &[0, 1])]))));
            m.heartbeat();
            m.on_answer(ok(3, None));
            assert!(m.in_group());
            assert_eq!(m.leave_late(), parts(&[(1, &[0, 1])]));
            assert!(!m.in_group());
            assert!(!m.rejoin_if_stale(), "not before the leave is answered");
            let hb = m.heartbeat().unwrap();
            assert_eq!(hb.member_epoch, epoch);
            m.on_answer(ok(epoch, None));
            assert_eq!(m.phase(), &Phase::Left);
            assert!(m.rejoin_if_stale());
            assert!(!m.rejoin_if_stale(), "once");
            let hb = m.heartbeat().unwrap();
            assert_eq!((hb.member_id.as_str(), hb.member_epoch), ("m-1", 0));
            assert_eq!(hb.instance_id.as_deref(), instance);
            assert_eq!(hb.subscribed_topics, Some(vec!["t".to_string()]));
            assert_eq!(hb.owned, Some(Partitions::new()));
        }
    }

    #[test]
    fn a_member_left_by_close_does_not_rejoin() {
        let mut m = stable(parts(&[(1, &[0])]), 3);
        m.leave(false);
        m.heartbeat();
        m.on_answer(ok(LEAVE_EPOCH, None));
        assert_eq!(m.phase(), &Phase::Left);
        assert!(!m.rejoin_if_stale());
    }

    #[test]
    fn a_member_that_never_joined_leaves_without_a_heartbeat() {
        let mut m = member();
        assert!(m.leave(false).is_empty());
        assert_eq!(m.heartbeat(), None);
    }

    #[test]
    fn a_heartbeat_becomes_a_request_that_encodes_in_every_version() {
        use crate::protocol::{ApiKey, Message};
        let mut m = member();
        m.heartbeat();
        m.on_answer(ok(1, Some(parts(&[(1, &[2, 0]), (2, &[1])]))));
        let hb = m.heartbeat().unwrap();
        let req = request("g", &hb);
        assert_eq!((req.group_id.as_ref(), req.member_id.as_ref()), ("g", "m-1"));
        assert_eq!(req.member_epoch, 1);
        assert_eq!(req.rebalance_timeout_ms, -1, "unchanged");
        assert_eq!(req.subscribed_topic_names, None);
        let owned = req.topic_partitions.as_ref().unwrap();
        assert_eq!(owned.len(), 2);
        assert_eq!((owned[0].topic_id, &owned[0].partitions), (id(1), &[0, 2].into()));
        let join = request("g", &member().heartbeat().unwrap());
        assert_eq!(join.rebalance_timeout_ms, 60_000);
        assert_eq!(join.server_assignor.as_deref(), Some("uniform"));
        let range = ApiKey::ConsumerGroupHeartbeat.versions();
        for v in range.min..=range.max {
            for r in [&req, &join] {
                let bytes = r.to_bytes(v).unwrap();
                assert_eq!(&ConsumerGroupHeartbeatRequest::from_bytes(bytes, v).unwrap(), r);
            }
        }
    }

    #[test]
    fn an_answer_with_a_topic_twice_unites_its_partitions() {
        use crate::protocol::messages::consumer_group_heartbeat_response as response;
        let tp = |t: u8, ps: &[i32]| response::TopicPartitions {
            topic_id: id(t),
            partitions: ps.iter().copied().collect(),
            ..Default::default()
        };
        let resp = ConsumerGroupHeartbeatResponse {
            error_code: 0,
            member_id: Some("m".into()),
            member_epoch: 5,
            heartbeat_interval_ms: 2500,
            assignment: Some(response::Assignment {
                topic_partitions: vec![tp(1, &[0]), tp(2, &[3]), tp(1, &[1, 0])],
                ..Default::default()
            }),
            ..Default::default()
        };
        let a = answer(&resp);
        assert_eq!(a.code, KafkaCode::None);
        assert_eq!((a.member_id.as_deref(), a.member_epoch), (Some("m"), 5));
        assert_eq!(a.assignment, Some(parts(&[(1, &[0, 1]), (2, &[3])])));
        let unknown = answer(&ConsumerGroupHeartbeatResponse {
            error_code: 25,
            ..Default::default()
        });
        assert_eq!(
            (unknown.code, unknown.assignment),
            (KafkaCode::UnknownMemberId, None)
        );
    }

    #[test]
    fn a_share_heartbeat_carries_the_membership_without_what_share_groups_lack() {
        use crate::protocol::messages::share_group_heartbeat_response as share;
        let hb = Heartbeat {
            member_id: "m".into(),
            member_epoch: 0,
            instance_id: Some("i".into()),
            rack_id: Some("r".into()),
            rebalance_timeout_ms: Some(1000),
            subscribed_topics: Some(vec!["t".into()]),
            server_assignor: Some("uniform".into()),
            owned: Some(Partitions::new()),
        };
        let req = share_request("g", &hb);
        assert_eq!(
            (req.group_id.as_str(), req.member_id.as_str(), req.member_epoch),
            ("g", "m", 0)
        );
        assert_eq!(req.rack_id.as_deref(), Some("r"));
        let topics: Vec<&str> = req
            .subscribed_topic_names
            .iter()
            .flatten()
            .map(|t| t.as_str())
            .collect();
        assert_eq!(topics, ["t"]);
        let id = Uuid([7; 16]);
        let resp = ShareGroupHeartbeatResponse {
            member_id: Some("m".into()),
            member_epoch: 3,
            heartbeat_interval_ms: 5000,
            assignment: Some(share::Assignment {
                topic_partitions: vec![
                    share::TopicPartitions {
                        topic_id: id,
                        partitions: vec![1, 0].into(),
                        ..Default::default()
                    },
                    share::TopicPartitions {
                        topic_id: id,
                        partitions: vec![2].into(),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }),
            ..Default::default()
        };
        let a = share_answer(&resp);
        assert_eq!(
            (a.code, a.member_epoch, a.heartbeat_interval_ms),
            (KafkaCode::None, 3, 5000)
        );
        assert_eq!(
            a.assignment,
            Some(Partitions::from([(id, BTreeSet::from([0, 1, 2]))]))
        );
    }
}
