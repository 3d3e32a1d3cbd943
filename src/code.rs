//! Kafka's protocol error codes as one typed enum, [`KafkaCode`].
//!
//! Every Kafka response carries its outcome as a bare `i16` (0 for success), often one per topic,
//! partition or member. Decoding them into [`KafkaCode`] in one place keeps magic numbers out of
//! the rest of the crate and gives logs the name Kafka's own documentation uses.
//!
//! The enum is generated at build time from `data/kafka-error-codes.tsv` by
//! `kafka-group-codegen`, so adding a code means editing the table, not this file. It only
//! records facts about each code (name, retriable, needs a metadata refresh); deciding what the
//! consumer group should do about an error (rejoin, re-find the coordinator, give up) lives with
//! the group logic, not here.

include!(concat!(env!("OUT_DIR"), "/error_codes.rs"));

#[cfg(test)]
mod tests {
    use super::KafkaCode;
    use std::collections::HashSet;

    #[test]
    fn every_known_code_round_trips() {
        for &known in KafkaCode::ALL {
            assert_eq!(KafkaCode::from_code(known.code()), known, "{known}");
            assert_eq!(KafkaCode::from(known.code()), known, "{known}");
            assert!(!matches!(known, KafkaCode::Unknown(_)), "{known:?}");
        }
    }

    #[test]
    fn all_lists_each_code_once_in_order() {
        let codes: Vec<i16> = KafkaCode::ALL.iter().map(|c| c.code()).collect();
        assert!(codes.windows(2).all(|w| w[0] < w[1]), "{codes:?}");
        let names: HashSet<&str> = KafkaCode::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names.len(), KafkaCode::ALL.len());
    }

    /// Guards against the build using a stale or differently parsed table.
    #[test]
    fn matches_the_data_table() {
        let tsv = include_str!("../data/kafka-error-codes.tsv");
        let rows: Vec<Vec<&str>> = tsv
            .lines()
            .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
            .skip(1)
            .map(|line| line.split('\t').collect())
            .collect();
        assert_eq!(rows.len(), KafkaCode::ALL.len());
        for row in rows {
            let code = KafkaCode::from_code(row[0].parse().unwrap());
            assert_eq!(code.name(), row[1]);
            assert_eq!(code.is_retriable().to_string(), row[2], "{code}");
            assert_eq!(code.needs_metadata_refresh().to_string(), row[3], "{code}");
        }
    }

    #[test]
    fn unknown_codes_are_kept() {
        let code = KafkaCode::from_code(9999);
        assert_eq!(code, KafkaCode::Unknown(9999));
        assert_eq!(code.code(), 9999);
        assert_eq!(code.name(), "UNKNOWN");
        assert!(code.is_error());
        assert!(!code.is_retriable());
        assert!(!code.needs_metadata_refresh());
        assert_eq!(KafkaCode::from(i16::MIN), KafkaCode::Unknown(i16::MIN));
    }

    #[test]
    fn success_is_not_an_error() {
        assert_eq!(KafkaCode::from_code(0), KafkaCode::None);
        assert!(!KafkaCode::None.is_error());
        assert_eq!(KafkaCode::None.name(), "NONE");
        assert!(KafkaCode::from_code(-1).is_error());
        assert_eq!(KafkaCode::from_code(-1), KafkaCode::UnknownServerError);
    }

    fn assert_code(wire: i16, expected: KafkaCode, name: &str, retriable: bool, refresh: bool) {
        let code = KafkaCode::from_code(wire);
        assert_eq!(code, expected);
        assert_eq!(code.code(), wire);
        assert_eq!(code.name(), name);
        assert!(code.is_error());
        assert_eq!(code.is_retriable(), retriable, "{code} retriable");
        assert_eq!(code.needs_metadata_refresh(), refresh, "{code} refresh");
    }

    #[test]
    fn group_membership_codes() {
        assert_code(
            22,
            KafkaCode::IllegalGeneration,
            "ILLEGAL_GENERATION",
            false,
            false,
        );
        assert_code(25, KafkaCode::UnknownMemberId, "UNKNOWN_MEMBER_ID", false, false);
        assert_code(
            27,
            KafkaCode::RebalanceInProgress,
            "REBALANCE_IN_PROGRESS",
            false,
            false,
        );
        assert_code(
            79,
            KafkaCode::MemberIdRequired,
            "MEMBER_ID_REQUIRED",
            false,
            false,
        );
        assert_code(
            82,
            KafkaCode::FencedInstanceId,
            "FENCED_INSTANCE_ID",
            false,
            false,
        );
    }

    #[test]
    fn coordinator_and_metadata_codes() {
        // The Java client retries coordinator errors but does not class them as stale metadata:
        // re-finding the coordinator is the group logic's job, not a metadata refresh.
        assert_code(
            15,
            KafkaCode::CoordinatorNotAvailable,
            "COORDINATOR_NOT_AVAILABLE",
            true,
            false,
        );
        assert_code(16, KafkaCode::NotCoordinator, "NOT_COORDINATOR", true, false);
        assert_code(
            3,
            KafkaCode::UnknownTopicOrPartition,
            "UNKNOWN_TOPIC_OR_PARTITION",
            true,
            true,
        );
    }

    #[test]
    fn display_shows_name_and_code() {
        assert_eq!(KafkaCode::UnknownMemberId.to_string(), "UNKNOWN_MEMBER_ID (25)");
        assert_eq!(KafkaCode::None.to_string(), "NONE (0)");
        assert_eq!(
            KafkaCode::UnknownServerError.to_string(),
            "UNKNOWN_SERVER_ERROR (-1)"
        );
        assert_eq!(KafkaCode::from_code(9999).to_string(), "UNKNOWN (9999)");
    }
}
