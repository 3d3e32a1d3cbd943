//! Connection error paths against a scripted broker: KIP-511 and hostile frames.

use crate::support::scripted::{api_versions_frame, full_table, Reply, Scripted, Seen};
use kafka_group::unstable::protocol::messages::HeartbeatRequest;
use kafka_group::unstable::{Connection, ConnectionConfig};
use kafka_group::ApiKey;
use kafka_group::{Error, KafkaCode, ProtocolViolation, Timeout};
use std::time::Duration;

const API_VERSIONS: i16 = ApiKey::ApiVersions.key();

/// Connects to `fake` with a 5 s request timeout.
fn connect(fake: &Scripted) -> Result<Connection, Error> {
    let config = ConnectionConfig {
        request_timeout: Duration::from_secs(5),
        ..Default::default()
    };
    Connection::connect(&fake.addr.to_string(), &config)
}

/// The full table at the version `req` asked for.
fn accept(req: &Seen) -> Reply {
    Reply::Frame(api_versions_frame(
        req.correlation_id,
        req.api_version,
        0,
        &full_table(),
    ))
}

/// KIP-511's answer to a version the broker does not know: UNSUPPORTED_VERSION in a v0 body
/// advertising `apis`.
fn reject(req: &Seen, apis: &[(i16, i16, i16)]) -> Reply {
    Reply::Frame(api_versions_frame(
        req.correlation_id,
        0,
        KafkaCode::UnsupportedVersion.code(),
        apis,
    ))
}

/// The protocol violation `err` reports, if it is one.
fn violation(err: &Error) -> Option<&ProtocolViolation> {
    match err {
        Error::Protocol { violation, .. } => Some(violation),
        _ => None,
    }
}

/// The highest ApiVersions version the client has, which it tries first.
fn ours() -> i16 {
    kafka_group::unstable::versions::implemented(ApiKey::ApiVersions)
}

#[test]
fn kip_511_rejecting_our_version_with_max_2_gets_v2() {
    let fake = Scripted::start(|req| {
        if req.api_version > 2 {
            reject(req, &[(API_VERSIONS, 0, 2)])
        } else {
            accept(req)
        }
    });
    let conn = connect(&fake).unwrap();
    assert_eq!(fake.versions_seen(API_VERSIONS), vec![ours(), 2]);
    assert!(conn.broker_versions().len() > 10);
}

#[test]
fn kip_511_advertising_nothing_gets_v0() {
    let fake = Scripted::start(|req| {
        if req.api_version > 0 {
            reject(req, &[])
        } else {
            accept(req)
        }
    });
    connect(&fake).unwrap();
    assert_eq!(fake.versions_seen(API_VERSIONS), vec![ours(), 0]);
}

#[test]
fn kip_511_a_broker_that_keeps_rejecting_does_not_loop() {
    // Rejects every version while claiming to support the one just sent, then v0 too.
    let fake = Scripted::start(|req| reject(req, &[(API_VERSIONS, 0, req.api_version.max(1) - 1)]));
    let err = connect(&fake).unwrap_err();
    assert!(
        matches!(violation(&err), Some(ProtocolViolation::Handshake(_))),
        "{err}"
    );
    let seen = fake.versions_seen(API_VERSIONS);
    assert_eq!(
        seen,
        (0..=ours()).rev().collect::<Vec<_>>(),
        "strictly decreasing, then stop"
    );
}

#[test]
fn kip_511_a_broker_that_rejects_the_version_it_advertises_ends_the_handshake() {
    // Claims to support exactly what it rejects: retrying would loop.
    let fake = Scripted::start(|req| reject(req, &[(API_VERSIONS, 0, req.api_version)]));
    let err = connect(&fake).unwrap_err();
    assert!(
        matches!(violation(&err), Some(ProtocolViolation::Handshake(_))),
        "{err}"
    );
    assert_eq!(fake.versions_seen(API_VERSIONS), vec![ours()], "one attempt only");
}

/// Connects through a handshake, then lets `after` answer the first real request.
fn after_handshake(after: Reply) -> (Scripted, Connection) {
    let mut after = Some(after);
    let fake = Scripted::start(move |req| {
        if req.api_key == API_VERSIONS {
            accept(req)
        } else {
            after.take().unwrap_or(Reply::Close)
        }
    });
    let conn = connect(&fake).unwrap();
    (fake, conn)
}

fn heartbeat_request() -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: "g".into(),
        ..Default::default()
    }
}

fn heartbeat(conn: &mut Connection) -> Result<(), Error> {
    conn.send(&heartbeat_request()).map(|_| ())
}

#[test]
fn length_prefix_of_2_gib_is_an_error() {
    let (_fake, mut conn) = after_handshake(Reply::Raw(vec![0x80, 0, 0, 0, 1, 2, 3]));
    let err = heartbeat(&mut conn).unwrap_err();
    assert!(
        matches!(violation(&err), Some(ProtocolViolation::FrameSize { size, .. }) if *size == i32::MIN as i64),
        "{err}"
    );
    assert!(conn.is_broken());
    assert!(matches!(heartbeat(&mut conn), Err(Error::Closed)));
}

#[test]
fn length_above_max_response_size_is_an_error() {
    let (_fake, mut conn) = after_handshake(Reply::Raw(i32::MAX.to_be_bytes().to_vec()));
    let err = heartbeat(&mut conn).unwrap_err();
    assert!(
        matches!(violation(&err), Some(ProtocolViolation::FrameSize { .. })),
        "{err}"
    );
}

#[test]
fn tls_handshake_bytes_are_an_error() {
    // What a TLS listener sends to a plaintext client: an alert record.
    let (_fake, mut conn) = after_handshake(Reply::RawThenClose(vec![
        0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x50,
    ]));
    let err = heartbeat(&mut conn).unwrap_err();
    assert!(
        matches!(violation(&err), Some(ProtocolViolation::FrameSize { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("PLAINTEXT"), "{err}");
}

#[test]
fn wrong_correlation_id_closes_the_connection() {
    let (_fake, mut conn) = after_handshake(Reply::Frame({
        // Header with a correlation id nobody sent, then a valid Heartbeat body.
        let mut b = 999_999i32.to_be_bytes().to_vec();
        b.push(0); // tagged fields of response header v1
        b.extend([0, 0, 0, 0, 0, 0, 0]); // throttle, error code, tagged fields
        b
    }));
    let err = heartbeat(&mut conn).unwrap_err();
    assert!(
        matches!(
            violation(&err),
            Some(ProtocolViolation::CorrelationMismatch {
                received: 999_999,
                ..
            })
        ),
        "{err}"
    );
    assert!(conn.is_broken());
}

#[test]
fn connection_closed_mid_frame_is_an_io_error() {
    let (_fake, mut conn) = after_handshake(Reply::RawThenClose(vec![0, 0, 0, 100, 0, 0, 0]));
    let err = heartbeat(&mut conn).unwrap_err();
    assert!(
        matches!(&err, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::UnexpectedEof),
        "{err}"
    );
}

#[test]
fn truncated_body_is_a_decode_error() {
    // A complete frame whose body stops short of what a Heartbeat response needs.
    let (_fake, mut conn) = after_handshake(Reply::Frame(vec![0, 0, 0, 1, 0, 0, 0]));
    let err = heartbeat(&mut conn).unwrap_err();
    assert!(matches!(err, Error::Decode { .. }), "{err}");
}

#[test]
fn a_silent_broker_is_a_response_timeout() {
    let (_fake, mut conn) = after_handshake(Reply::Raw(vec![]));
    let started = std::time::Instant::now();
    let err = conn
        .send_at(&heartbeat_request(), 4, Some(Duration::from_millis(300)))
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Timeout {
                which: Timeout::Response,
                ..
            }
        ),
        "{err}"
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[test]
fn a_huge_announced_frame_that_stalls_holds_no_memory() {
    // 99 MiB announced (under the 100 MiB limit), 10 bytes sent, then silence.
    let mut raw = (99 * 1024 * 1024i32).to_be_bytes().to_vec();
    raw.extend([0u8; 10]);
    let (_fake, mut conn) = after_handshake(Reply::Raw(raw));
    let before = peak_rss_kib();
    let err = conn
        .send_at(&heartbeat_request(), 4, Some(Duration::from_millis(300)))
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
    let grown = peak_rss_kib().saturating_sub(before);
    assert!(
        grown < 32 * 1024,
        "peak RSS grew by {grown} KiB for a stalled 99 MiB frame"
    );
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(|l| l.to_string()))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}
