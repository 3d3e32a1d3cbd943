//! Consumer group membership: static (KIP-345) and dynamic members, with a heartbeat thread
//! per member.
//!
//! Pure logic — the [state machine](state), the [heartbeat timer](timer), the
//! [error classification](action), the [assignors](assignor), what a restarted leader checks
//! of the assignment it keeps (`leader.rs`), the group requests (`requests.rs`) — is kept
//! apart from what talks to the coordinator: the heartbeat thread (`heartbeat.rs`) and the
//! [`member`] (the join loop, events, leave and close; the leader's assignment in
//! `member/assign.rs`, its watch of the subscribed topics in `member/metadata_watch.rs`). The
//! member's settings are a `MemberConfig` (`config.rs`: defaults, validation), set through
//! [`MemberBuilder`] (`builder.rs`) or [`ConsumerBuilder`](crate::ConsumerBuilder).

pub mod action;
pub mod assignment;
pub mod assignor;
mod builder;
mod config;
mod group_protocol;
mod heartbeat;
pub(crate) mod kip848;
mod leader;
pub mod member;
mod metrics;
mod poll_timer;
pub(crate) mod requests;
pub mod state;
pub mod timer;

pub use assignment::{Assignment, Subscription, TopicPartition};
pub use assignor::{
    Assignor, CooperativeStickyAssignor, MemberSubscription, RangeAssignor, RebalanceProtocol,
    RoundRobinAssignor, StickyAssignor,
};
pub(crate) use builder::member_setters;
pub use builder::MemberBuilder;
pub(crate) use config::MemberConfig;
pub use config::{GroupProtocolPolicy, MissingTopicPolicy, OldBrokerPolicy};
pub use group_protocol::GroupProtocol;
pub(crate) use member::missing_topics_hint;
pub use member::{GroupEvent, GroupMember};
pub use metrics::MemberMetrics;
pub use state::{Generation, MemberState};
