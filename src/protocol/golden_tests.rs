//! Golden bytes: messages written out by hand from the Kafka protocol guide
//! (<https://kafka.apache.org/protocol>) and the 3.9 JSON schemas, one comment per field.
//!
//! The differential tests prove we agree with kafka-protocol; these pin the encoding to the
//! spec itself, so a bug both implementations shared would still show up here. They cover the
//! two encodings side by side: classic (int16 string lengths, int32 array lengths) and flexible
//! (unsigned-varint length + 1, a tagged-field section after every struct).

use super::messages::api_versions_response::{ApiVersion, FinalizedFeatureKey, SupportedFeatureKey};
use super::messages::join_group_request::JoinGroupRequestProtocol;
use super::messages::*;
use super::{Decoder, EncodeError, Message, Request};
use bytes::Bytes;

/// Encodes `msg` in `version`, compares with `golden`, then decodes `golden` back to `msg`.
fn assert_golden<M: Message + PartialEq + std::fmt::Debug>(msg: &M, version: i16, golden: &[u8]) {
    let encoded = msg.to_bytes(version).unwrap();
    assert_eq!(
        encoded,
        golden,
        "{} v{version} encoding\n ours:   {:02x?}\n golden: {:02x?}",
        M::NAME,
        encoded,
        golden
    );
    assert_eq!(
        &M::from_bytes(golden.to_vec(), version).unwrap(),
        msg,
        "{} v{version} decoding",
        M::NAME
    );
}

#[test]
fn join_group_v5_with_group_instance_id() {
    let join = JoinGroupRequest {
        group_id: "g".into(),
        session_timeout_ms: 30_000,
        rebalance_timeout_ms: 60_000,
        member_id: String::new().into(),
        group_instance_id: Some("i1".into()),
        protocol_type: "consumer".into(),
        protocols: vec![JoinGroupRequestProtocol {
            name: "range".into(),
            metadata: Bytes::from_static(&[1, 2, 3]),
            ..Default::default()
        }],
        ..Default::default()
    };
    #[rustfmt::skip]
    let golden = [
        0x00, 0x01, b'g',                               // group_id: int16 length 1, "g"
        0x00, 0x00, 0x75, 0x30,                         // session_timeout_ms: int32 30000
        0x00, 0x00, 0xea, 0x60,                         // rebalance_timeout_ms: int32 60000 (v1+)
        0x00, 0x00,                                     // member_id: int16 length 0, ""
        0x00, 0x02, b'i', b'1',                         // group_instance_id: int16 length 2, "i1" (v5+)
        0x00, 0x08, b'c', b'o', b'n', b's', b'u', b'm', b'e', b'r', // protocol_type: "consumer"
        0x00, 0x00, 0x00, 0x01,                         // protocols: int32 count 1
        0x00, 0x05, b'r', b'a', b'n', b'g', b'e',       //   name: int16 length 5, "range"
        0x00, 0x00, 0x00, 0x03, 0x01, 0x02, 0x03,       //   metadata: int32 length 3, bytes
        // no reason (v8+), no tagged fields (v5 is not flexible)
    ];
    assert_golden(&join, 5, &golden);
    assert_eq!(<JoinGroupRequest as Request>::header_version(5), 1);
    assert_eq!(<JoinGroupRequest as Request>::response_header_version(5), 0);
}

#[test]
fn join_group_v4_refuses_a_group_instance_id() {
    let mut join = JoinGroupRequest {
        group_id: "g".into(),
        group_instance_id: Some("i1".into()),
        ..Default::default()
    };
    // v4 has no field for it: sending would silently turn a static member into a dynamic one.
    assert_eq!(
        join.to_bytes(4),
        Err(EncodeError::UnsupportedField {
            message: "JoinGroupRequest",
            field: "group_instance_id",
            version: 4
        })
    );
    join.group_instance_id = None;
    #[rustfmt::skip]
    let golden = [
        0x00, 0x01, b'g',          // group_id
        0x00, 0x00, 0x00, 0x00,    // session_timeout_ms: 0
        0xff, 0xff, 0xff, 0xff,    // rebalance_timeout_ms: -1, the schema default
        0x00, 0x00,                // member_id: ""
        0x00, 0x00,                // protocol_type: ""
        0x00, 0x00, 0x00, 0x00,    // protocols: int32 count 0
    ];
    assert_golden(&join, 4, &golden);
}

#[test]
fn heartbeat_v3_classic_and_v4_flexible() {
    let hb = HeartbeatRequest {
        group_id: "g".into(),
        generation_id: 7,
        member_id: "m".into(),
        group_instance_id: Some("i".into()),
        ..Default::default()
    };
    #[rustfmt::skip]
    let v3 = [
        0x00, 0x01, b'g',          // group_id: int16 length 1
        0x00, 0x00, 0x00, 0x07,    // generation_id: int32 7
        0x00, 0x01, b'm',          // member_id: int16 length 1
        0x00, 0x01, b'i',          // group_instance_id: int16 length 1 (v3+)
    ];
    assert_golden(&hb, 3, &v3);
    #[rustfmt::skip]
    let v4 = [
        0x02, b'g',                // group_id: compact string, uvarint length + 1 = 2
        0x00, 0x00, 0x00, 0x07,    // generation_id: int32 7 (integers do not change)
        0x02, b'm',                // member_id: compact string
        0x02, b'i',                // group_instance_id: compact nullable string
        0x00,                      // tagged fields: none
    ];
    assert_golden(&hb, 4, &v4);

    let dynamic = HeartbeatRequest {
        group_instance_id: None,
        ..hb
    };
    #[rustfmt::skip]
    let v3_null = [
        0x00, 0x01, b'g', 0x00, 0x00, 0x00, 0x07, 0x00, 0x01, b'm',
        0xff, 0xff,                // group_instance_id: null is int16 length -1
    ];
    assert_golden(&dynamic, 3, &v3_null);
    #[rustfmt::skip]
    let v4_null = [
        0x02, b'g', 0x00, 0x00, 0x00, 0x07, 0x02, b'm',
        0x00,                      // group_instance_id: null is compact length 0
        0x00,                      // tagged fields: none
    ];
    assert_golden(&dynamic, 4, &v4_null);

    // v4 is flexible, so it is framed with RequestHeader v2 and ResponseHeader v1.
    assert_eq!(<HeartbeatRequest as Request>::header_version(4), 2);
    assert_eq!(<HeartbeatRequest as Request>::response_header_version(4), 1);
    assert_eq!(<HeartbeatRequest as Request>::header_version(3), 1);
    assert_eq!(<HeartbeatRequest as Request>::response_header_version(3), 0);
}

#[test]
fn request_header_v2_keeps_a_classic_client_id() {
    let header = RequestHeader {
        request_api_key: 12,
        request_api_version: 4,
        correlation_id: 42,
        client_id: Some("c".into()),
        ..Default::default()
    };
    #[rustfmt::skip]
    let golden = [
        0x00, 0x0c,                // request_api_key: 12 (Heartbeat)
        0x00, 0x04,                // request_api_version: 4
        0x00, 0x00, 0x00, 0x2a,    // correlation_id: 42
        0x00, 0x01, b'c',          // client_id: int16 length even in v2 ("flexibleVersions": "none")
        0x00,                      // tagged fields: none
    ];
    assert_golden(&header, 2, &golden);
}

#[test]
fn api_versions_v3_request() {
    let req = ApiVersionsRequest {
        client_software_name: "kafka-group".into(),
        client_software_version: "0.1.0".into(),
        ..Default::default()
    };
    #[rustfmt::skip]
    let golden = [
        0x0c, b'k', b'a', b'f', b'k', b'a', b'-', b'g', b'r', b'o', b'u', b'p', // name: compact, 11 + 1
        0x06, b'0', b'.', b'1', b'.', b'0',             // version: compact, 5 + 1
        0x00,                                           // tagged fields: none
    ];
    assert_golden(&req, 3, &golden);
    assert_eq!(<ApiVersionsRequest as Request>::header_version(3), 2);
}

#[test]
fn api_versions_v3_response_behind_header_v0() {
    // ApiVersions responses always use ResponseHeader v0 (no tagged-field byte) so that a client
    // can read the error from a broker that does not know the request version (KIP-511).
    assert_eq!(<ApiVersionsRequest as Request>::response_header_version(3), 0);
    assert_eq!(<ApiVersionsRequest as Request>::response_header_version(4), 0);

    #[rustfmt::skip]
    let frame = [
        // ResponseHeader v0
        0x00, 0x00, 0x00, 0x2a,                         // correlation_id: 42
        // ApiVersionsResponse v3
        0x00, 0x00,                                     // error_code: 0
        0x03,                                           // api_keys: compact array, 2 + 1
        0x00, 0x0b, 0x00, 0x00, 0x00, 0x09, 0x00,       //   JoinGroup (11) v0-9, no tags
        0x00, 0x0c, 0x00, 0x00, 0x00, 0x04, 0x00,       //   Heartbeat (12) v0-4, no tags
        0x00, 0x00, 0x00, 0x00,                         // throttle_time_ms: 0
        0x02,                                           // tagged fields: 2
        0x00, 0x17,                                     //   tag 0 supported_features, 23 bytes
        0x02,                                           //     compact array, 1 + 1
        0x11, b'm', b'e', b't', b'a', b'd', b'a', b't', b'a', b'.',
              b'v', b'e', b'r', b's', b'i', b'o', b'n', //     name: compact, 16 + 1
        0x00, 0x01, 0x00, 0x15,                         //     min_version 1, max_version 21
        0x00,                                           //     no tags
        0x01, 0x08,                                     //   tag 1 finalized_features_epoch, 8 bytes
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, //     epoch 5
    ];
    let frame_bytes = bytes::Bytes::from(frame.to_vec());
    let mut d = Decoder::new(&frame_bytes);
    let header = ResponseHeader::decode(&mut d, 0).unwrap();
    assert_eq!(header.correlation_id, 42);
    let resp = ApiVersionsResponse::decode(&mut d, 3).unwrap();
    assert_eq!(d.remaining(), 0);
    let expected = ApiVersionsResponse {
        error_code: 0,
        api_keys: vec![
            ApiVersion {
                api_key: 11,
                min_version: 0,
                max_version: 9,
                ..Default::default()
            },
            ApiVersion {
                api_key: 12,
                min_version: 0,
                max_version: 4,
                ..Default::default()
            },
        ],
        throttle_time_ms: 0,
        supported_features: vec![SupportedFeatureKey {
            name: "metadata.version".into(),
            min_version: 1,
            max_version: 21,
            ..Default::default()
        }],
        finalized_features_epoch: 5,
        finalized_features: Vec::<FinalizedFeatureKey>::new(),
        ..Default::default()
    };
    assert_eq!(resp, expected);
    // And back: the body re-encodes to exactly the bytes after the header.
    assert_eq!(expected.to_bytes(3).unwrap(), &frame[4..]);

    // Reading the same frame with header v1 would take the error code's first byte as the
    // header's tagged-field count and misparse everything after it.
    let frame_bytes = bytes::Bytes::from(frame.to_vec());
    let mut d = Decoder::new(&frame_bytes);
    ResponseHeader::decode(&mut d, 1).unwrap();
    assert_ne!(ApiVersionsResponse::decode(&mut d, 3).ok(), Some(expected));
}
