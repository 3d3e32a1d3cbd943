//! The messages the codec benchmarks (`codecs`, `codec_ratios`) encode and decode: one module
//! shared by both so that they measure the same inputs.

use bytes::Bytes;
use kafka_group::unstable::protocol::messages::{
    fetch_response, join_group_request, join_group_response, metadata_response, FetchResponse,
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, MetadataResponse,
};
use kafka_group::unstable::protocol::{Message, Segments, Uuid};
use kafka_protocol::protocol::{Decodable, Encodable};
use std::fmt::Debug;

/// Our encoding of `ours` and kafka-protocol's decoding of it, after checking, before anything is
/// timed, that both libraries agree: kafka-protocol writes our bytes back byte for byte, we
/// decode them back to `ours`, and encoding into `Segments` gives the same frame.
pub fn checked_frame<M, T>(name: &str, version: i16, ours: &M) -> (Bytes, T)
where
    M: Message + PartialEq + Debug,
    T: Encodable + Decodable,
{
    let frame = Bytes::from(ours.to_bytes(version).expect("our encoding"));
    let theirs = T::decode(&mut frame.clone(), version).expect("kafka-protocol decodes our encoding");
    let mut again = Vec::new();
    theirs
        .encode(&mut again, version)
        .expect("kafka-protocol encoding");
    assert!(
        again == frame,
        "{name}: kafka-protocol re-encodes our bytes differently"
    );
    assert_eq!(
        &M::from_bytes(frame.clone(), version).expect("our decoding"),
        ours
    );
    let mut segments = Segments::with_capacity(frame.len());
    ours.encode(version, &mut segments).expect("encode");
    assert!(
        segments.to_vec() == frame,
        "{name}: encoding into Segments differs from encoding into a Vec"
    );
    (frame, theirs)
}

/// Deterministic filler so that payloads are not all zeroes (which no library treats specially,
/// but which would make a corrupted copy harder to spot in a failed assertion).
pub fn payload(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

pub fn uuid(i: u32) -> Uuid {
    let mut u = [0u8; 16];
    u[..4].copy_from_slice(&i.to_be_bytes());
    u[8..12].copy_from_slice(&(!i).to_be_bytes());
    Uuid(u)
}

/// A static member's JoinGroup: two assignors, each with 1 KiB of subscription metadata (a
/// request carries the joining member's protocols, not the group's members).
pub fn join_group_request() -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: "payments-settlement-consumers".into(),
        session_timeout_ms: 45_000,
        rebalance_timeout_ms: 300_000,
        member_id: "worker-17-3f6a2c1e-8b7d-4e0a-9c55-0d1e2f3a4b5c".into(),
        group_instance_id: Some("worker-17".into()),
        protocol_type: "consumer".into(),
        protocols: ["range", "cooperative-sticky"]
            .iter()
            .enumerate()
            .map(|(i, name)| join_group_request::JoinGroupRequestProtocol {
                name: (*name).into(),
                metadata: payload(1024, i as u8),
                ..Default::default()
            })
            .collect(),
        reason: Some("rebalance failed due to MemberIdRequiredException".into()),
        ..Default::default()
    }
}

/// What the leader gets: 100 static members, each with 1 KiB of subscription metadata.
pub fn join_group_response() -> JoinGroupResponse {
    JoinGroupResponse {
        throttle_time_ms: 0,
        error_code: 0,
        generation_id: 42,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("cooperative-sticky".into()),
        leader: "worker-0-3f6a2c1e-8b7d-4e0a-9c55-0d1e2f3a4b5c".into(),
        skip_assignment: false,
        member_id: "worker-0-3f6a2c1e-8b7d-4e0a-9c55-0d1e2f3a4b5c".into(),
        members: (0..100)
            .map(|i| join_group_response::JoinGroupResponseMember {
                member_id: format!("worker-{i}-3f6a2c1e-8b7d-4e0a-9c55-0d1e2f3a4b5c").into(),
                group_instance_id: Some(format!("worker-{i}").into()),
                metadata: payload(1024, i as u8),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

pub fn heartbeat_request() -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: "payments-settlement-consumers".into(),
        generation_id: 42,
        member_id: "worker-17-3f6a2c1e-8b7d-4e0a-9c55-0d1e2f3a4b5c".into(),
        group_instance_id: Some("worker-17".into()),
        ..Default::default()
    }
}

pub fn heartbeat_response() -> HeartbeatResponse {
    HeartbeatResponse {
        throttle_time_ms: 0,
        error_code: 0,
        ..Default::default()
    }
}

/// 3 brokers, 100 topics of 10 partitions, each with 3 replicas all in sync.
pub fn metadata_response() -> MetadataResponse {
    MetadataResponse {
        throttle_time_ms: 0,
        brokers: (0..3)
            .map(|i| metadata_response::MetadataResponseBroker {
                node_id: i,
                host: format!("kafka-{i}.kafka-headless.streaming.svc.cluster.local").into(),
                port: 9092,
                rack: Some(format!("eu-west-1{}", (b'a' + i as u8) as char).into()),
                ..Default::default()
            })
            .collect(),
        cluster_id: Some("Q2xvc2VkIGZvciBiZW5jaG1h".into()),
        controller_id: 1,
        topics: (0..100)
            .map(|t| metadata_response::MetadataResponseTopic {
                error_code: 0,
                name: Some(format!("orders.events.v2.partition-group-{t}").into()),
                topic_id: uuid(t as u32),
                is_internal: false,
                partitions: (0..10)
                    .map(|p| {
                        let replicas: Vec<i32> = (0..3).map(|r| (p + r) % 3).collect();
                        metadata_response::MetadataResponsePartition {
                            error_code: 0,
                            partition_index: p,
                            leader_id: replicas[0],
                            leader_epoch: 7,
                            isr_nodes: replicas.clone().into(),
                            replica_nodes: replicas.into(),
                            offline_replicas: Default::default(),
                            ..Default::default()
                        }
                    })
                    .collect(),
                topic_authorized_operations: i32::MIN,
                ..Default::default()
            })
            .collect(),
        cluster_authorized_operations: i32::MIN,
        ..Default::default()
    }
}

/// 1 MiB of records: 4 topics × 4 partitions × 64 KiB each. The record bytes are opaque to both
/// codecs (a `records` field is a length-prefixed blob), so filler stands in for real batches.
pub fn fetch_response() -> FetchResponse {
    FetchResponse {
        throttle_time_ms: 0,
        error_code: 0,
        session_id: 1_234_567,
        responses: (0..4)
            .map(|t| fetch_response::FetchableTopicResponse {
                topic: format!("orders.events.v2.partition-group-{t}").into(),
                partitions: (0..4)
                    .map(|p| fetch_response::PartitionData {
                        partition_index: p,
                        error_code: 0,
                        high_watermark: 10_000_000 + p as i64,
                        last_stable_offset: 10_000_000 + p as i64,
                        log_start_offset: 1_000,
                        aborted_transactions: Some(Vec::new()),
                        preferred_read_replica: -1,
                        records: Some(payload(64 * 1024, (t * 4 + p) as u8)),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}
