//! Which group protocol a group runs: Kafka's classic one (JoinGroup, SyncGroup, Heartbeat) or
//! KIP-848's `consumer` protocol (ConsumerGroupHeartbeat, assignments computed by the
//! coordinator), GA since Kafka 4.0.

use std::fmt;

/// A consumer group's protocol, as [`Admin::describe_group`](crate::Admin::describe_group)
/// reports it for a group and for each of its members (a group being migrated online from
/// one to the other has members of both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GroupProtocol {
    /// JoinGroup/SyncGroup/Heartbeat, assignments computed by a member (the group's leader).
    Classic,
    /// KIP-848: ConsumerGroupHeartbeat, assignments computed by the coordinator.
    Consumer,
}

impl std::str::FromStr for GroupProtocol {
    type Err = crate::Error;

    /// Parses Kafka's values (`group.protocol`), case-insensitively: `classic`, `consumer`.
    fn from_str(s: &str) -> crate::Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "classic" => Ok(GroupProtocol::Classic),
            "consumer" => Ok(GroupProtocol::Consumer),
            _ => Err(crate::Error::Config {
                property: "group.protocol",
                problem: format!("{s:?} is not one of classic, consumer"),
            }),
        }
    }
}

impl fmt::Display for GroupProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GroupProtocol::Classic => "classic",
            GroupProtocol::Consumer => "consumer",
        })
    }
}
