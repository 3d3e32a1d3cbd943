//! Generates the protocol codecs and the error-code table into `OUT_DIR`.
//!
//! Thin on purpose: which files, rerun triggers, and where to write. Supporting a new API is
//! adding its two schema files to `SCHEMAS` (and to `schemas/4.4/` or `schemas/3.9/`).

use std::path::{Path, PathBuf};

/// The schema files the client speaks. Each is read from every folder of `RELEASES` that has it
/// and the definitions are merged (schemas/README.md).
const SCHEMAS: &[&str] = &[
    "RequestHeader.json",
    "ResponseHeader.json",
    "ApiVersionsRequest.json",
    "ApiVersionsResponse.json",
    "MetadataRequest.json",
    "MetadataResponse.json",
    "FindCoordinatorRequest.json",
    "FindCoordinatorResponse.json",
    "JoinGroupRequest.json",
    "JoinGroupResponse.json",
    "SyncGroupRequest.json",
    "SyncGroupResponse.json",
    "HeartbeatRequest.json",
    "HeartbeatResponse.json",
    "LeaveGroupRequest.json",
    "LeaveGroupResponse.json",
    "OffsetCommitRequest.json",
    "OffsetCommitResponse.json",
    "OffsetFetchRequest.json",
    "OffsetFetchResponse.json",
    "ListOffsetsRequest.json",
    "ListOffsetsResponse.json",
    "FetchRequest.json",
    "FetchResponse.json",
    "ProduceRequest.json",
    "ProduceResponse.json",
    "InitProducerIdRequest.json",
    "InitProducerIdResponse.json",
    "CreateTopicsRequest.json",
    "CreateTopicsResponse.json",
    "DeleteTopicsRequest.json",
    "DeleteTopicsResponse.json",
    "CreatePartitionsRequest.json",
    "CreatePartitionsResponse.json",
    "DescribeGroupsRequest.json",
    "DescribeGroupsResponse.json",
    "DescribeConfigsRequest.json",
    "DescribeConfigsResponse.json",
    "ListGroupsRequest.json",
    "ListGroupsResponse.json",
    "SaslHandshakeRequest.json",
    "SaslHandshakeResponse.json",
    "SaslAuthenticateRequest.json",
    "SaslAuthenticateResponse.json",
    "ConsumerGroupHeartbeatRequest.json",
    "ConsumerGroupHeartbeatResponse.json",
    "ConsumerGroupDescribeRequest.json",
    "ConsumerGroupDescribeResponse.json",
    "AddPartitionsToTxnRequest.json",
    "AddPartitionsToTxnResponse.json",
    "AddOffsetsToTxnRequest.json",
    "AddOffsetsToTxnResponse.json",
    "TxnOffsetCommitRequest.json",
    "TxnOffsetCommitResponse.json",
    "EndTxnRequest.json",
    "EndTxnResponse.json",
    "ListTransactionsRequest.json",
    "ListTransactionsResponse.json",
    "DescribeTransactionsRequest.json",
    "DescribeTransactionsResponse.json",
    "DescribeProducersRequest.json",
    "DescribeProducersResponse.json",
    "ShareGroupHeartbeatRequest.json",
    "ShareGroupHeartbeatResponse.json",
    "ShareFetchRequest.json",
    "ShareFetchResponse.json",
    "ShareAcknowledgeRequest.json",
    "ShareAcknowledgeResponse.json",
    "ShareGroupDescribeRequest.json",
    "ShareGroupDescribeResponse.json",
    "DescribeShareGroupOffsetsRequest.json",
    "DescribeShareGroupOffsetsResponse.json",
    "AlterShareGroupOffsetsRequest.json",
    "AlterShareGroupOffsetsResponse.json",
    "DeleteShareGroupOffsetsRequest.json",
    "DeleteShareGroupOffsetsResponse.json",
    "DeleteGroupsRequest.json",
    "DeleteGroupsResponse.json",
    "ConsumerProtocolSubscription.json",
    "ConsumerProtocolAssignment.json",
];

/// The schema sets under `schemas/`, oldest first: 3.9 for the versions 4.0 dropped, 4.4 for the
/// versions and APIs 4.x added.
const RELEASES: &[&str] = &["3.9", "4.4"];

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let schemas = root.join("schemas");
    println!("cargo:rerun-if-changed=schemas");
    println!("cargo:rerun-if-changed=data/kafka-error-codes.tsv");
    println!("cargo:rerun-if-changed=build.rs");

    let dirs: Vec<PathBuf> = RELEASES.iter().map(|r| schemas.join(r)).collect();
    let dirs: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
    let messages = kafka_group_codegen::generate(&dirs, SCHEMAS).unwrap_or_else(|e| fail(&e));
    write(&out.join("messages.rs"), &messages);

    let tsv_path = root.join("data/kafka-error-codes.tsv");
    let tsv =
        std::fs::read_to_string(&tsv_path).unwrap_or_else(|e| fail(&format!("{}: {e}", tsv_path.display())));
    let codes = kafka_group_codegen::error_codes::emit_error_codes(&tsv)
        .unwrap_or_else(|e| fail(&format!("data/kafka-error-codes.tsv: {e}")));
    write(&out.join("error_codes.rs"), &codes);
}

fn write(path: &Path, contents: &str) {
    kafka_group_codegen::write_if_changed(path, contents)
        .unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())));
}

fn fail(msg: &str) -> ! {
    // A panic would bury the schema error under a backtrace; this prints just the message.
    eprintln!("error: kafka-group codegen: {msg}");
    std::process::exit(1);
}
