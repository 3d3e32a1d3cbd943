//! Differential tests against `kafka-protocol` (0.18), an independent implementation generated
//! from Kafka 4.x schemas.
//!
//! For every message both crates know, every version both accept and many seeds: our sample is
//! encoded by us (bytes A), decoded and re-encoded by kafka-protocol (bytes B), and must come
//! back byte for byte; B must then decode with us to the value we started from. Going through
//! bytes keeps the two type systems (their `StrBytes`, builders, `non_exhaustive` structs) out of
//! the comparison: only the wire format is compared.

use super::messages as ours;
use super::{Message, Request, Sample, SampleGen, VersionRange};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages as theirs;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message as TheirMessage};
use std::fmt::Debug;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Seeds per (message, version).
const SEEDS: u64 = 64;

/// Bytes shown either side of the first difference in a failure report.
const WINDOW: usize = 16;

/// A (message, version) pair excluded from the byte comparison because Kafka 3.9 and the newer
/// schemas kafka-protocol is generated from disagree on that version's layout.
struct Skip {
    version: i16,
    why: &'static str,
}

/// The versions a message has in both crates.
fn shared(ours: VersionRange, theirs: kafka_protocol::protocol::VersionRange) -> VersionRange {
    ours.intersect(&VersionRange::new(theirs.min, theirs.max))
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Where `a` and `b` first differ, with both sides around that offset in hex.
fn describe_diff(a: &[u8], b: &[u8]) -> String {
    let pos = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    let start = pos.saturating_sub(WINDOW);
    let window = |s: &[u8]| hex(&s[start.min(s.len())..(pos + WINDOW).min(s.len())]);
    format!(
        "first difference at byte {pos} (ours {} bytes, kafka-protocol {} bytes)\n      \
         ours  [{start}..]: {}\n      theirs[{start}..]: {}",
        a.len(),
        b.len(),
        window(a),
        window(b)
    )
}

/// One seed: ours → A → theirs → B, A == B, B → ours == original.
fn check_one<O, T>(version: i16, seed: u64) -> Result<(), String>
where
    O: Message + Sample + PartialEq + Debug,
    T: Encodable + Decodable,
{
    let original = O::sample(&mut SampleGen::new(seed), version);
    let a = original
        .to_bytes(version)
        .map_err(|e| format!("our encoder failed: {e}"))?;

    let mut input = Bytes::from(a.clone());
    let decoded = T::decode(&mut input, version)
        .map_err(|e| format!("kafka-protocol cannot decode our bytes: {e:#}"))?;
    if !input.is_empty() {
        return Err(format!(
            "kafka-protocol left {} of our {} bytes unread\n      ours: {}",
            input.len(),
            a.len(),
            hex(&a)
        ));
    }

    let mut b = BytesMut::new();
    decoded
        .encode(&mut b, version)
        .map_err(|e| format!("kafka-protocol cannot re-encode what it decoded: {e:#}"))?;
    let size = decoded
        .compute_size(version)
        .map_err(|e| format!("kafka-protocol compute_size failed: {e:#}"))?;
    if size != b.len() {
        return Err(format!(
            "kafka-protocol compute_size {size} but wrote {} bytes",
            b.len()
        ));
    }
    if a[..] != b[..] {
        return Err(describe_diff(&a, &b));
    }

    let back = O::from_bytes(b.freeze(), version)
        .map_err(|e| format!("we cannot decode kafka-protocol's bytes: {e}"))?;
    if back != original {
        return Err(format!(
            "decoding kafka-protocol's bytes gave a different value\n      sent: {original:?}\n      got:  {back:?}"
        ));
    }
    Ok(())
}

/// Runs every shared version and seed; returns the number of versions compared, or every
/// failure as one line per (version, seed).
fn differential<O, T>(skips: &[Skip]) -> Result<usize, Vec<String>>
where
    O: Message + Sample + PartialEq + Debug,
    T: Encodable + Decodable + TheirMessage,
{
    let range = shared(O::VERSIONS, T::VERSIONS);
    let mut failures = Vec::new();
    let mut compared = 0;
    for version in range.min..=range.max {
        if skips.iter().any(|s| s.version == version) {
            continue;
        }
        compared += 1;
        for seed in 0..SEEDS {
            // A panic in either codec is a failure of this seed, not of the whole run, so the
            // report still lists every other (version, seed) that breaks.
            let outcome =
                catch_unwind(AssertUnwindSafe(|| check_one::<O, T>(version, seed))).unwrap_or_else(|p| {
                    let msg = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    Err(format!("panicked: {msg}"))
                });
            if let Err(e) = outcome {
                failures.push(format!("{} v{version} seed {seed}: {e}", O::NAME));
            }
        }
    }
    for s in skips {
        // A skip outside the shared range would hide nothing and only rot.
        assert!(
            range.contains(s.version),
            "{} v{} is skipped but not shared ({range}): {}",
            O::NAME,
            s.version,
            s.why
        );
    }
    if failures.is_empty() {
        Ok(compared)
    } else {
        Err(failures)
    }
}

/// Header versions must agree too: a wrong one shifts every byte after the header. `ours` is
/// `O`'s request or response header version (`which` says which), `T` the matching message.
fn header_versions_agree<O, T>(which: &str, ours: fn(i16) -> i16) -> Result<(), String>
where
    O: Request,
    T: TheirMessage + HeaderVersion,
{
    let range = shared(O::VERSIONS, T::VERSIONS);
    for v in range.min..=range.max {
        let (o, t) = (ours(v), T::header_version(v));
        if o != t {
            return Err(format!(
                "{} v{v}: {which} header v{o}, kafka-protocol v{t}",
                O::NAME
            ));
        }
    }
    Ok(())
}

/// Ours and theirs, side by side, for the range test.
struct Ranges {
    name: &'static str,
    ours: VersionRange,
    theirs: VersionRange,
}

/// One `#[test]` per pair (so a failure names its message), plus the list of all pairs.
macro_rules! pairs {
    ($($test:ident: $name:ident $([$($v:literal => $why:literal),+ $(,)?])?;)*) => {
        $(
            #[test]
            fn $test() {
                let skips: &[Skip] = &[$($(Skip { version: $v, why: $why }),+)?];
                match differential::<ours::$name, theirs::$name>(skips) {
                    Ok(n) => assert!(n > 0, "{}: no version in common", stringify!($name)),
                    Err(failures) => panic!(
                        "{} of {} cases differ from kafka-protocol:\n{}",
                        failures.len(),
                        stringify!($name),
                        failures.join("\n")
                    ),
                }
            }
        )*

        fn all_ranges() -> Vec<Ranges> {
            vec![$(Ranges {
                name: stringify!($name),
                ours: <ours::$name as Message>::VERSIONS,
                theirs: {
                    let t = <theirs::$name as TheirMessage>::VERSIONS;
                    VersionRange::new(t.min, t.max)
                },
            }),*]
        }

        #[test]
        fn pairs_compared() {
            let mut pairs = 0;
            $(
                let skips: &[i16] = &[$($($v),+)?];
                let r = shared(<ours::$name as Message>::VERSIONS, <theirs::$name as TheirMessage>::VERSIONS);
                pairs += (r.min..=r.max).filter(|v| !skips.contains(v)).count();
            )*
            println!("{pairs} (message, version) pairs x {SEEDS} seeds compared with kafka-protocol");
            assert!(pairs > 200, "only {pairs} pairs");
        }
    };
}

pairs! {
    request_header: RequestHeader;
    response_header: ResponseHeader;
    api_versions_request: ApiVersionsRequest;
    api_versions_response: ApiVersionsResponse;
    metadata_request: MetadataRequest;
    metadata_response: MetadataResponse;
    find_coordinator_request: FindCoordinatorRequest;
    find_coordinator_response: FindCoordinatorResponse;
    join_group_request: JoinGroupRequest;
    join_group_response: JoinGroupResponse;
    sync_group_request: SyncGroupRequest;
    sync_group_response: SyncGroupResponse;
    heartbeat_request: HeartbeatRequest;
    heartbeat_response: HeartbeatResponse;
    leave_group_request: LeaveGroupRequest;
    leave_group_response: LeaveGroupResponse;
    offset_commit_request: OffsetCommitRequest;
    offset_commit_response: OffsetCommitResponse;
    offset_fetch_request: OffsetFetchRequest;
    offset_fetch_response: OffsetFetchResponse;
    list_offsets_request: ListOffsetsRequest;
    list_offsets_response: ListOffsetsResponse;
    fetch_request: FetchRequest;
    fetch_response: FetchResponse;
    produce_request: ProduceRequest;
    produce_response: ProduceResponse;
    init_producer_id_request: InitProducerIdRequest;
    init_producer_id_response: InitProducerIdResponse;
    create_topics_request: CreateTopicsRequest;
    create_topics_response: CreateTopicsResponse;
    delete_topics_request: DeleteTopicsRequest;
    delete_topics_response: DeleteTopicsResponse;
    describe_groups_request: DescribeGroupsRequest;
    describe_groups_response: DescribeGroupsResponse;
    list_groups_request: ListGroupsRequest;
    list_groups_response: ListGroupsResponse;
    sasl_handshake_request: SaslHandshakeRequest;
    sasl_handshake_response: SaslHandshakeResponse;
    sasl_authenticate_request: SaslAuthenticateRequest;
    sasl_authenticate_response: SaslAuthenticateResponse;
    consumer_group_heartbeat_request: ConsumerGroupHeartbeatRequest;
    consumer_group_heartbeat_response: ConsumerGroupHeartbeatResponse;
    consumer_protocol_subscription: ConsumerProtocolSubscription;
    consumer_protocol_assignment: ConsumerProtocolAssignment;
}

/// Header versions for every request and response both crates know.
macro_rules! header_pairs {
    ($($req:ident / $resp:ident),* $(,)?) => {
        #[test]
        fn header_versions_match_kafka_protocol() {
            let mut errors = Vec::new();
            $(
                let (request, response) = (ours::$req::header_version, ours::$req::response_header_version);
                errors.extend(header_versions_agree::<ours::$req, theirs::$req>("request", request).err());
                errors.extend(header_versions_agree::<ours::$req, theirs::$resp>("response", response).err());
            )*
            assert!(errors.is_empty(), "header versions differ:\n{}", errors.join("\n"));
        }
    };
}

header_pairs!(
    ApiVersionsRequest / ApiVersionsResponse,
    MetadataRequest / MetadataResponse,
    FindCoordinatorRequest / FindCoordinatorResponse,
    JoinGroupRequest / JoinGroupResponse,
    SyncGroupRequest / SyncGroupResponse,
    HeartbeatRequest / HeartbeatResponse,
    LeaveGroupRequest / LeaveGroupResponse,
    OffsetCommitRequest / OffsetCommitResponse,
    OffsetFetchRequest / OffsetFetchResponse,
    ListOffsetsRequest / ListOffsetsResponse,
    FetchRequest / FetchResponse,
    ProduceRequest / ProduceResponse,
    InitProducerIdRequest / InitProducerIdResponse,
    CreateTopicsRequest / CreateTopicsResponse,
    DeleteTopicsRequest / DeleteTopicsResponse,
    DescribeGroupsRequest / DescribeGroupsResponse,
    ListGroupsRequest / ListGroupsResponse,
    SaslHandshakeRequest / SaslHandshakeResponse,
    SaslAuthenticateRequest / SaslAuthenticateResponse,
    ConsumerGroupHeartbeatRequest / ConsumerGroupHeartbeatResponse,
);

/// Versions kafka-protocol has above ours: `(message, our max, their max)`. Empty since the
/// codecs are generated from the 4.4 schemas as well as 3.9's (schemas/README.md): every version
/// kafka-protocol 0.18 knows is one we know, so the differential tests compare all of them.
/// A kafka-protocol upgrade that goes beyond 4.4 fails here and gets looked at.
const NEWER_THAN_OURS: &[(&str, i16, i16)] = &[];

#[test]
fn our_ranges_contain_kafka_protocols() {
    let mut errors = Vec::new();
    let mut newer = Vec::new();
    for r in all_ranges() {
        println!(
            "{:32} ours {:8} kafka-protocol {}",
            r.name,
            r.ours.to_string(),
            r.theirs
        );
        // KIP-896 removed old versions in Kafka 4.0; the 3.9 schemas still have them, so our
        // minimum can only be lower or equal.
        if r.ours.min > r.theirs.min {
            errors.push(format!(
                "{}: our min {} > kafka-protocol's {}",
                r.name, r.ours.min, r.theirs.min
            ));
        }
        if r.theirs.max > r.ours.max {
            newer.push((r.name, r.ours.max, r.theirs.max));
        }
    }
    for (name, o, t) in &newer {
        println!(
            "kafka-protocol goes higher: {name} v{}..=v{t} (ours stop at v{o})",
            o + 1
        );
        if !NEWER_THAN_OURS.contains(&(*name, *o, *t)) {
            errors.push(format!(
                "{name}: kafka-protocol has v{}..=v{t} beyond our v{o} and it is not a listed exception",
                o + 1
            ));
        }
    }
    for exception in NEWER_THAN_OURS {
        if !newer.contains(exception) {
            errors.push(format!("stale exception {exception:?}: no longer observed"));
        }
    }
    assert!(errors.is_empty(), "version ranges:\n{}", errors.join("\n"));
}

/// The harness itself must be able to fail: two messages with different layouts are caught.
#[test]
fn a_layout_mismatch_is_reported() {
    // HeartbeatRequest v0 is SyncGroupRequest v0 without the assignments array, so
    // kafka-protocol runs out of bytes (or reads a different message) on every seed.
    let failures = differential::<ours::HeartbeatRequest, theirs::SyncGroupRequest>(&[]).unwrap_err();
    assert!(
        failures[0].starts_with("HeartbeatRequest v0 seed 0: "),
        "{}",
        failures[0]
    );
    // Same layout up to the last field, which differs only in width: caught at the right byte.
    let diff = describe_diff(&[0, 1, 2, 3], &[0, 1, 9, 3, 4]);
    assert!(
        diff.starts_with("first difference at byte 2 (ours 4 bytes, kafka-protocol 5 bytes)"),
        "{diff}"
    );
    let diff = describe_diff(&[0, 1], &[0, 1, 2]);
    assert!(diff.starts_with("first difference at byte 2 "), "{diff}");
}
