//! Consumer group membership: static (KIP-345) and dynamic members.
//!
//! A [`GroupMember`] (`member.rs`) is a thin shell over the engine of its group protocol,
//! chosen once at build: the classic protocol's (`classic/`: the join loop, the heartbeat
//! thread, the leader's assignment and its watch of the subscribed topics) or KIP-848's
//! (`kip848/`: the membership rules, pure, its heartbeat thread, and the engine that wires
//! them to the member). What both share is the member's core (`member/core.rs`) and its
//! coordinator session (`session.rs`: the coordinator, the member's own connection to it,
//! the requests over it).
//!
//! Pure logic — the [state machine](state), the classic heartbeat timer
//! (`classic/timer.rs`), the [error classification](action), the [assignors](assignor), the
//! KIP-848 rules (`kip848/mod.rs`), the group requests (`requests.rs`) — is kept apart from
//! what talks to the coordinator. The member's settings are a `MemberConfig` (`config.rs`:
//! defaults, validation), set through [`MemberBuilder`] (`builder.rs`) or
//! [`ConsumerBuilder`](crate::ConsumerBuilder).

pub mod action;
pub mod assignment;
pub mod assignor;
mod builder;
mod classic;
mod config;
mod group_protocol;
pub(crate) mod kip848;
pub mod member;
mod metrics;
mod poll_timer;
pub(crate) mod requests;
mod session;
pub mod state;

pub use assignment::{Assignment, Subscription, TopicPartition};
pub use assignor::{
    Assignor, CooperativeStickyAssignor, MemberSubscription, RangeAssignor, RebalanceProtocol,
    RoundRobinAssignor, StickyAssignor,
};
pub(crate) use builder::member_setters;
pub use builder::MemberBuilder;
pub(crate) use classic::missing_topics_hint;
pub(crate) use config::MemberConfig;
pub use config::{GroupProtocolPolicy, MissingTopicPolicy, OldBrokerPolicy};
pub use group_protocol::GroupProtocol;
pub use member::{GroupEvent, GroupMember};
pub use metrics::MemberMetrics;
pub use state::{Generation, MemberState};
