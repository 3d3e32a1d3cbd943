//! Round trips of every generated message in every version with seeded random values.

use super::messages::*;
use super::{Message, Sample, SampleGen, Segments};

/// Returns how many values were checked, and how many of their `Segments` encodings held a
/// buffer by reference (so that the caller can tell the zero-copy path was exercised).
fn round_trip<M: Message + Sample + PartialEq + std::fmt::Debug>(
    seeds: std::ops::Range<u64>,
) -> (usize, usize) {
    let (mut checked, mut shared) = (0, 0);
    for version in M::VERSIONS.min..=M::VERSIONS.max {
        for seed in seeds.clone() {
            let mut g = SampleGen::new(seed ^ ((version as u64) << 48));
            let v = M::sample(&mut g, version);
            let bytes = v
                .to_bytes(version)
                .unwrap_or_else(|e| panic!("{} v{version} seed {seed}: {e}", M::NAME));
            let back = M::from_bytes(bytes.clone(), version)
                .unwrap_or_else(|e| panic!("{} v{version} seed {seed}: {e}", M::NAME));
            assert_eq!(back, v, "{} v{version} seed {seed}", M::NAME);
            // The frame a connection sends, with large values by reference, is the same bytes.
            let mut frame = Segments::new();
            v.encode(version, &mut frame).unwrap();
            assert_eq!(
                frame.to_vec(),
                bytes,
                "{} v{version} seed {seed}: segments",
                M::NAME
            );
            shared += (frame.shared_count() > 0) as usize;
            // Re-encoding must be stable, byte for byte.
            assert_eq!(
                back.to_bytes(version).unwrap(),
                bytes,
                "{} v{version} seed {seed}",
                M::NAME
            );
            checked += 1;
        }
    }
    (checked, shared)
}

macro_rules! round_trips {
    ($($m:ident),* $(,)?) => {
        #[test]
        fn every_message_every_version_round_trips() {
            let (mut total, mut shared) = (0, 0);
            $(
                let (checked, by_reference) = round_trip::<$m>(0..64);
                total += checked;
                shared += by_reference;
            )*
            assert!(total > 0);
            assert!(shared > 100, "the zero-copy path was hardly exercised");
        }
    };
}

round_trips!(
    RequestHeader,
    ResponseHeader,
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    FetchRequest,
    FetchResponse,
    ProduceRequest,
    ProduceResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerProtocolSubscription,
    ConsumerProtocolAssignment,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
);

#[test]
fn group_instance_id_on_join_group_v4_is_an_error() {
    let join = JoinGroupRequest {
        group_instance_id: Some("a".into()),
        ..Default::default()
    };
    let err = join.to_bytes(4).unwrap_err();
    assert_eq!(
        err,
        super::EncodeError::UnsupportedField {
            message: "JoinGroupRequest",
            field: "group_instance_id",
            version: 4
        }
    );
    assert!(join.to_bytes(5).is_ok());
    // Ignorable fields are dropped quietly: the rebalance timeout simply does not exist in v0.
    let join = JoinGroupRequest {
        rebalance_timeout_ms: 1000,
        ..Default::default()
    };
    assert!(join.to_bytes(0).is_ok());
}

/// The same round trip with proptest choosing the seed and array sizes, so a failure shrinks to
/// the smallest seed and length that still breaks and proptest records it for the next run.
mod seeded_by_proptest {
    use super::*;
    use proptest::prelude::*;

    fn round_trips<M: Message + Sample + PartialEq + std::fmt::Debug>(
        seed: u64,
        max_len: usize,
    ) -> Result<(), TestCaseError> {
        for version in M::VERSIONS.min..=M::VERSIONS.max {
            let mut g = SampleGen::new(seed);
            g.max_len = max_len;
            let v = M::sample(&mut g, version);
            let bytes = v
                .to_bytes(version)
                .map_err(|e| TestCaseError::fail(format!("{} v{version}: {e}", M::NAME)))?;
            let back = M::from_bytes(bytes.clone(), version)
                .map_err(|e| TestCaseError::fail(format!("{} v{version}: {e}", M::NAME)))?;
            prop_assert_eq!(&back, &v, "{} v{}", M::NAME, version);
            let again = back
                .to_bytes(version)
                .map_err(|e| TestCaseError::fail(format!("{} v{version} re-encode: {e}", M::NAME)))?;
            prop_assert_eq!(again, bytes, "{} v{} re-encoding", M::NAME, version);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn group_messages_round_trip_for_any_seed(seed in any::<u64>(), max_len in 0usize..5) {
            round_trips::<RequestHeader>(seed, max_len)?;
            round_trips::<ResponseHeader>(seed, max_len)?;
            round_trips::<ApiVersionsResponse>(seed, max_len)?;
            round_trips::<FindCoordinatorResponse>(seed, max_len)?;
            round_trips::<JoinGroupRequest>(seed, max_len)?;
            round_trips::<JoinGroupResponse>(seed, max_len)?;
            round_trips::<SyncGroupRequest>(seed, max_len)?;
            round_trips::<SyncGroupResponse>(seed, max_len)?;
            round_trips::<HeartbeatRequest>(seed, max_len)?;
            round_trips::<LeaveGroupRequest>(seed, max_len)?;
            round_trips::<LeaveGroupResponse>(seed, max_len)?;
            round_trips::<OffsetCommitRequest>(seed, max_len)?;
            round_trips::<OffsetFetchResponse>(seed, max_len)?;
            round_trips::<ConsumerGroupHeartbeatRequest>(seed, max_len)?;
            round_trips::<ConsumerGroupHeartbeatResponse>(seed, max_len)?;
            round_trips::<ConsumerProtocolSubscription>(seed, max_len)?;
            round_trips::<ConsumerProtocolAssignment>(seed, max_len)?;
        }

        #[test]
        fn share_group_messages_round_trip_for_any_seed(seed in any::<u64>(), max_len in 0usize..4) {
            round_trips::<ShareGroupHeartbeatRequest>(seed, max_len)?;
            round_trips::<ShareGroupHeartbeatResponse>(seed, max_len)?;
            round_trips::<ShareFetchRequest>(seed, max_len)?;
            round_trips::<ShareFetchResponse>(seed, max_len)?;
            round_trips::<ShareAcknowledgeRequest>(seed, max_len)?;
            round_trips::<ShareAcknowledgeResponse>(seed, max_len)?;
            round_trips::<ShareGroupDescribeResponse>(seed, max_len)?;
            round_trips::<DescribeShareGroupOffsetsResponse>(seed, max_len)?;
            round_trips::<AlterShareGroupOffsetsRequest>(seed, max_len)?;
            round_trips::<DeleteShareGroupOffsetsResponse>(seed, max_len)?;
            round_trips::<DeleteGroupsResponse>(seed, max_len)?;
        }

        #[test]
        fn data_path_messages_round_trip_for_any_seed(seed in any::<u64>(), max_len in 0usize..4) {
            round_trips::<MetadataResponse>(seed, max_len)?;
            round_trips::<ListOffsetsResponse>(seed, max_len)?;
            round_trips::<FetchRequest>(seed, max_len)?;
            round_trips::<FetchResponse>(seed, max_len)?;
            round_trips::<ProduceRequest>(seed, max_len)?;
            round_trips::<InitProducerIdRequest>(seed, max_len)?;
            round_trips::<InitProducerIdResponse>(seed, max_len)?;
        }
    }
}
