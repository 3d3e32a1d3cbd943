//! The one place that decides what a group error code means for a member.

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
        K::CoordinatorLoadInProgress | K::RequestTimedOut | K::NetworkException | K::UnknownServerError => {
            GroupAction::Retry
        }
        K::RebalanceInProgress | K::IllegalGeneration => GroupAction::Rejoin,
        K::UnknownMemberId => GroupAction::RejoinWithResetMemberId,
        K::FencedInstanceId => GroupAction::Fenced,
        _ if code.is_retriable() => GroupAction::Retry,
        _ => GroupAction::Fatal,
    }
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
}
