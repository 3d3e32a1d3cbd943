//! A member's state machine, pure: transitions are checked and tested without a broker.
//!
//! ```text
//!  Unjoined ──join──▶ Joining ──JoinGroup ok──▶ AwaitingSync ──SyncGroup ok──▶ Stable
//!      ▲                 ▲  │                        │                          │
//!      │                 └──┴──── rejoin ◀───────────┴──────────────────────────┘
//!      └──── (any) ──close──▶ Closed          (any) ──FENCED_INSTANCE_ID──▶ Fenced
//!                                              (any) ──GROUP_AUTHORIZATION_FAILED──▶ Unauthorized
//! ```

use std::fmt;

/// Where a member is in the group protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemberState {
    /// Not in the group (before the first join, or after leaving).
    Unjoined,
    /// JoinGroup sent, waiting for the rebalance to gather members.
    Joining,
    /// JoinGroup answered; waiting for SyncGroup to hand out assignments. Heartbeats already
    /// run so a slow leader cannot expire our session.
    AwaitingSync,
    /// Member of the current generation with an assignment.
    Stable,
    /// Another process took over our `group.instance.id`; terminal.
    Fenced,
    /// The coordinator denied the group (`GROUP_AUTHORIZATION_FAILED`: the principal has no
    /// ACL for it); terminal, like [`Fenced`](Self::Fenced), since retrying cannot add the ACL.
    Unauthorized,
    /// Closed by the application; terminal.
    Closed,
}

impl fmt::Display for MemberState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemberState::Unjoined => "unjoined",
            MemberState::Joining => "joining",
            MemberState::AwaitingSync => "awaiting-sync",
            MemberState::Stable => "stable",
            MemberState::Fenced => "fenced",
            MemberState::Unauthorized => "unauthorized",
            MemberState::Closed => "closed",
        })
    }
}

/// One generation of the group as this member joined it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    /// The generation id the coordinator assigned.
    pub id: i32,
    /// Our member id in it.
    pub member_id: String,
    /// The assignment protocol the group chose (e.g. `range`).
    pub protocol: Option<String>,
}

/// What happened, as the state machine sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// A JoinGroup is about to be sent.
    JoinSent,
    /// JoinGroup answered with a generation.
    Joined(Generation),
    /// SyncGroup answered with our assignment.
    Synced,
    /// The group must be joined again; `reset_member_id` when the coordinator forgot us.
    RejoinNeeded {
        /// Join with an empty member id.
        reset_member_id: bool,
    },
    /// Fenced by another member with our instance id.
    Fenced,
    /// The coordinator denied the group (`GROUP_AUTHORIZATION_FAILED`).
    Denied,
    /// Left the group (LeaveGroup sent, or static member closed).
    Left,
    /// Closed by the application.
    Closed,
}

/// Illegal transition for the current state (a bug in the caller, reported not panicked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidTransition {
    /// State when it happened.
    pub from: MemberState,
    /// What was attempted.
    pub transition: Transition,
}

/// The member's state, generation and identity.
#[derive(Debug, Clone)]
pub struct GroupState {
    state: MemberState,
    member_id: String,
    generation: Option<Generation>,
    stable_once: bool,
}

impl Default for GroupState {
    fn default() -> Self {
        GroupState {
            state: MemberState::Unjoined,
            member_id: String::new(),
            generation: None,
            stable_once: false,
        }
    }
}

impl GroupState {
    /// Current state.
    pub fn state(&self) -> MemberState {
        self.state
    }

    /// The member id to send on the next JoinGroup (empty before the coordinator gave one).
    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    /// Remembers the member id a `MEMBER_ID_REQUIRED` answer handed out (KIP-394).
    pub fn set_member_id(&mut self, id: String) {
        self.member_id = id;
    }

    /// The generation joined last, if any.
    pub fn generation(&self) -> Option<&Generation> {
        self.generation.as_ref()
    }

    /// Whether `g` is the generation we are in now: answers to requests sent for an older
    /// generation must not move the state. Id, member id and protocol must all match.
    pub fn is_current(&self, g: &Generation) -> bool {
        is_current(self.generation.as_ref(), g)
    }

    /// Sets the member epoch and member id a KIP-848 member holds (`None`: none, after a loss
    /// or before its first answer). That protocol has no generation of its own and no join
    /// phases: its coordinator decides every change, so the state does not move.
    pub fn set_epoch(&mut self, epoch: Option<Generation>) {
        self.member_id = epoch.as_ref().map(|g| g.member_id.clone()).unwrap_or_default();
        self.generation = epoch;
    }

    /// Whether this member has ever been Stable (used to recognise a fencing loop).
    pub fn was_stable(&self) -> bool {
        self.stable_once
    }

    /// Applies a transition.
    pub fn apply(&mut self, t: Transition) -> Result<(), InvalidTransition> {
        use MemberState as S;
        let next = match (&t, self.state) {
            (_, S::Fenced | S::Unauthorized | S::Closed) if t != Transition::Closed => None,
            (Transition::Closed, _) => Some(S::Closed),
            (Transition::Fenced, _) => Some(S::Fenced),
            (Transition::Denied, _) => Some(S::Unauthorized),
            (Transition::JoinSent, S::Unjoined | S::Joining | S::AwaitingSync | S::Stable) => {
                Some(S::Joining)
            }
            (Transition::Joined(_), S::Joining) => Some(S::AwaitingSync),
            (Transition::Synced, S::AwaitingSync) => Some(S::Stable),
            (Transition::RejoinNeeded { .. }, S::Unjoined | S::Joining | S::AwaitingSync | S::Stable) => {
                Some(S::Joining)
            }
            (Transition::Left, S::Unjoined | S::Joining | S::AwaitingSync | S::Stable) => Some(S::Unjoined),
            _ => None,
        };
        let Some(next) = next else {
            return Err(InvalidTransition {
                from: self.state,
                transition: t,
            });
        };
        match t {
            Transition::Joined(g) => {
                self.member_id = g.member_id.clone();
                self.generation = Some(g);
            }
            Transition::Synced => self.stable_once = true,
            Transition::RejoinNeeded {
                reset_member_id: true,
            } => {
                self.member_id.clear();
                self.generation = None;
            }
            // A dynamic member that left is forgotten by the coordinator; a static one keeps
            // its member id in memory so a close racing an in-flight request cannot fence
            // itself (the caller decides which by not sending LeaveGroup for static members).
            Transition::Left => self.generation = None,
            _ => {}
        }
        self.state = next;
        Ok(())
    }
}

/// Whether something that concerns generation `of` (a heartbeat's answer, say) concerns
/// `current`, the generation the member is in now (`None`: none). All three parts count, as in
/// Kafka's Java client: a static member that rejoins an unchanged group keeps the generation id
/// but gets a new member id, and an answer to the old member id must not be taken for one to
/// the new.
pub(crate) fn is_current(current: Option<&Generation>, of: &Generation) -> bool {
    current == Some(of)
}

/// The rejoin to run once `reset_member_id` is asked for while `pending` is (`None`: none is):
/// `true` (join with an empty member id) as soon as any request needed it, so a later plain
/// request — a metadata change, the application's — cannot undo a reset the coordinator asked for.
pub(crate) fn merge_rejoin(pending: Option<bool>, reset_member_id: bool) -> bool {
    pending.unwrap_or(false) || reset_member_id
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generation(id: i32) -> Generation {
        Generation {
            id,
            member_id: format!("m-{id}"),
            protocol: Some("range".into()),
        }
    }

    #[test]
    fn happy_path() {
        let mut s = GroupState::default();
        s.apply(Transition::JoinSent).unwrap();
        assert_eq!(s.state(), MemberState::Joining);
        s.apply(Transition::Joined(generation(3))).unwrap();
        assert_eq!(s.state(), MemberState::AwaitingSync);
        assert_eq!(s.member_id(), "m-3");
        assert!(s.is_current(&generation(3)) && !s.is_current(&generation(2)));
        assert!(!s.was_stable());
        s.apply(Transition::Synced).unwrap();
        assert_eq!(s.state(), MemberState::Stable);
        assert!(s.was_stable());
    }

    #[test]
    fn rejoin_keeps_or_resets_the_member_id() {
        let mut s = GroupState::default();
        s.apply(Transition::JoinSent).unwrap();
        s.apply(Transition::Joined(generation(1))).unwrap();
        s.apply(Transition::Synced).unwrap();
        s.apply(Transition::RejoinNeeded {
            reset_member_id: false,
        })
        .unwrap();
        assert_eq!(s.member_id(), "m-1");
        assert_eq!(s.state(), MemberState::Joining);
        s.apply(Transition::RejoinNeeded {
            reset_member_id: true,
        })
        .unwrap();
        assert_eq!(s.member_id(), "");
        assert!(s.generation().is_none());
    }

    #[test]
    fn illegal_transitions_are_errors() {
        let mut s = GroupState::default();
        assert!(s.apply(Transition::Synced).is_err());
        assert!(s.apply(Transition::Joined(generation(1))).is_err());
        s.apply(Transition::JoinSent).unwrap();
        assert!(s.apply(Transition::Synced).is_err());
    }

    #[test]
    fn fenced_and_closed_are_terminal() {
        let mut s = GroupState::default();
        s.apply(Transition::JoinSent).unwrap();
        s.apply(Transition::Fenced).unwrap();
        assert_eq!(s.state(), MemberState::Fenced);
        assert!(s.apply(Transition::JoinSent).is_err());
        assert!(s
            .apply(Transition::RejoinNeeded {
                reset_member_id: true
            })
            .is_err());
        s.apply(Transition::Closed).unwrap();
        assert_eq!(s.state(), MemberState::Closed);
        assert!(s.apply(Transition::JoinSent).is_err());
    }

    #[test]
    fn a_denied_group_is_terminal() {
        let mut s = GroupState::default();
        s.apply(Transition::JoinSent).unwrap();
        s.apply(Transition::Denied).unwrap();
        assert_eq!(s.state(), MemberState::Unauthorized);
        assert!(s.apply(Transition::JoinSent).is_err());
        assert!(s.apply(Transition::Fenced).is_err());
        s.apply(Transition::Closed).unwrap();
        assert_eq!(s.state(), MemberState::Closed);
        // Denied before any join (the coordinator lookup is the first request).
        let mut s = GroupState::default();
        s.apply(Transition::Denied).unwrap();
        assert_eq!(s.state(), MemberState::Unauthorized);
    }

    #[test]
    fn a_pending_reset_survives_later_plain_rejoins() {
        assert!(!merge_rejoin(None, false));
        assert!(merge_rejoin(None, true));
        assert!(!merge_rejoin(Some(false), false));
        assert!(merge_rejoin(Some(false), true));
        assert!(
            merge_rejoin(Some(true), false),
            "a plain rejoin must not drop the reset"
        );
        assert!(merge_rejoin(Some(true), true));
    }

    #[test]
    fn an_event_is_current_only_for_the_same_id_member_id_and_protocol() {
        let now = generation(7);
        assert!(is_current(Some(&now), &now));
        // No generation (before the first join, after a reset or a leave): nothing is current.
        assert!(!is_current(None, &now));
        let stale_id = Generation { id: 6, ..now.clone() };
        assert!(!is_current(Some(&now), &stale_id));
        // A static member that rejoined an unchanged group: same id, new member id.
        let old_member = Generation {
            member_id: "m-7-before-restart".into(),
            ..now.clone()
        };
        assert!(!is_current(Some(&now), &old_member));
        let other_protocol = Generation {
            protocol: Some("roundrobin".into()),
            ..now.clone()
        };
        assert!(!is_current(Some(&now), &other_protocol));
        let no_protocol = Generation {
            protocol: None,
            ..now.clone()
        };
        assert!(!is_current(Some(&now), &no_protocol));
    }

    #[test]
    fn leaving_forgets_the_generation() {
        let mut s = GroupState::default();
        s.apply(Transition::JoinSent).unwrap();
        s.apply(Transition::Joined(generation(5))).unwrap();
        s.apply(Transition::Synced).unwrap();
        s.apply(Transition::Left).unwrap();
        assert_eq!(s.state(), MemberState::Unjoined);
        assert!(s.generation().is_none());
        assert_eq!(s.member_id(), "m-5");
    }

    #[test]
    fn an_epoch_sets_the_identity_and_leaves_the_state() {
        let mut s = GroupState::default();
        s.set_epoch(Some(generation(7)));
        assert_eq!(s.state(), MemberState::Unjoined);
        assert_eq!(s.generation().map(|g| g.id), Some(7));
        assert_eq!(s.member_id(), "m-7");
        s.set_epoch(None);
        assert!(s.generation().is_none());
        assert_eq!(s.member_id(), "");
    }
}
