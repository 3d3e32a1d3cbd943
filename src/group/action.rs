//! The one place that decides what a group error code means for a member, and which codes
//! say that the coordinator itself cannot serve the group right now (`coordinator_unready`,
//! which `Error::is_coordinator_transient` asks).
//!
//! As in Kafka's Java client (`AbstractCoordinator`, `ConsumerCoordinator`):
//! `NOT_COORDINATOR` and `COORDINATOR_NOT_AVAILABLE` mark the coordinator unknown, so it is
//! found again; `COORDINATOR_LOAD_IN_PROGRESS` is retried at the same coordinator after a
//! backoff — the broker is the group's coordinator, it is only still reading the group's log.

use crate::KafkaCode;

/// What a member does about an error from a group request (JoinGroup, SyncGroup, Heartbeat,
/// OffsetCommit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupAction {
    /// Nothing went wrong.
    Proceed,
    /// Transient: try the same request again after `retry.backoff.ms`.
    Retry,
    /// The coordinator moved or is unreachable: find it again, then retry.
    RediscoverCoordinator,
    /// The group is rebalancing or our generation is stale: join again with the same member id.
    Rejoin,
    /// The coordinator does not know our member id: join again with an empty member id (a
    /// static member keeps its instance id, which is what lets the broker recognise it).
    RejoinWithResetMemberId,
    /// Another member with our `group.instance.id` took over; stop.
    Fenced,
    /// Cannot be fixed by retrying (authorization, invalid configuration, protocol mismatch).
    Fatal,
}

/// Classifies a group error code.
pub fn classify(code: KafkaCode) -> GroupAction {
    use KafkaCode as K;
    match code {
        K::None => GroupAction::Proceed,
        K::CoordinatorNotAvailable | K::NotCoordinator => GroupAction::RediscoverCoordinator,
        // Not a rediscovery: the same broker answers once it has loaded the group.
        K::CoordinatorLoadInProgress => GroupAction::Retry,
        K::RequestTimedOut | K::NetworkException | K::UnknownServerError => GroupAction::Retry,
        K::RebalanceInProgress | K::IllegalGeneration => GroupAction::Rejoin,
        K::UnknownMemberId => GroupAction::RejoinWithResetMemberId,
        K::FencedInstanceId => GroupAction::Fenced,
        _ if code.is_retriable() => GroupAction::Retry,
        _ => GroupAction::Fatal,
    }
}

/// Whether a group request answered `code` only because its coordinator is moving, unavailable
/// or still loading the group: the request is sound and works once retried — at a coordinator
/// found again, or, while it loads, at the same one ([`classify`] says which).
pub(crate) fn coordinator_unready(code: KafkaCode) -> bool {
    code == KafkaCode::CoordinatorLoadInProgress || classify(code) == GroupAction::RediscoverCoordinator
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_codes() {
        assert_eq!(classify(KafkaCode::None), GroupAction::Proceed);
        assert_eq!(
            classify(KafkaCode::NotCoordinator),
            GroupAction::RediscoverCoordinator
        );
        assert_eq!(
            classify(KafkaCode::CoordinatorNotAvailable),
            GroupAction::RediscoverCoordinator
        );
        assert_eq!(classify(KafkaCode::CoordinatorLoadInProgress), GroupAction::Retry);
        assert_eq!(classify(KafkaCode::RebalanceInProgress), GroupAction::Rejoin);
        assert_eq!(classify(KafkaCode::IllegalGeneration), GroupAction::Rejoin);
        assert_eq!(
            classify(KafkaCode::UnknownMemberId),
            GroupAction::RejoinWithResetMemberId
        );
        assert_eq!(classify(KafkaCode::FencedInstanceId), GroupAction::Fenced);
        // Authorization: fatal (never retried); the member stops on a denied group.
        assert_eq!(classify(KafkaCode::GroupAuthorizationFailed), GroupAction::Fatal);
        assert_eq!(classify(KafkaCode::TopicAuthorizationFailed), GroupAction::Fatal);
        assert_eq!(
            classify(KafkaCode::ClusterAuthorizationFailed),
            GroupAction::Fatal
        );
        assert_eq!(classify(KafkaCode::InconsistentGroupProtocol), GroupAction::Fatal);
        assert_eq!(classify(KafkaCode::InvalidSessionTimeout), GroupAction::Fatal);
        assert_eq!(classify(KafkaCode::Unknown(-999)), GroupAction::Fatal);
    }

    #[test]
    fn a_loading_coordinator_is_retried_in_place_a_moved_one_found_again() {
        // Kafka's Java client: "backoff and retry" on a loading coordinator, without marking
        // it unknown.
        assert_eq!(classify(KafkaCode::CoordinatorLoadInProgress), GroupAction::Retry);
        for code in [
            KafkaCode::CoordinatorLoadInProgress,
            KafkaCode::NotCoordinator,
            KafkaCode::CoordinatorNotAvailable,
        ] {
            assert!(coordinator_unready(code), "{code}");
        }
        // Retried too, but they say nothing about the coordinator.
        for code in [
            KafkaCode::None,
            KafkaCode::RequestTimedOut,
            KafkaCode::NetworkException,
            KafkaCode::UnknownServerError,
            KafkaCode::RebalanceInProgress,
            KafkaCode::UnknownMemberId,
            KafkaCode::GroupAuthorizationFailed,
        ] {
            assert!(!coordinator_unready(code), "{code}");
        }
    }

    #[test]
    fn an_unready_coordinator_is_always_retried() {
        for code in (-1..=130).map(KafkaCode::from_code) {
            if coordinator_unready(code) {
                assert!(
                    matches!(
                        classify(code),
                        GroupAction::Retry | GroupAction::RediscoverCoordinator
                    ),
                    "{code}"
                );
            }
        }
    }
}
