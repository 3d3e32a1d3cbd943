//! Credentials withdrawn while a static member runs, on a real broker with
//! `connections.max.reauth.ms`: the next KIP-368 re-authentication fails, and the member reports
//! one clear `Error::Authentication` instead of reconnecting in a loop; its heartbeat thread
//! stops. Unlike fencing this is not terminal: once the credential is back, polling brings the
//! member into its group again.

use crate::support::secure::{self, ADMIN};
use crate::support::{create_topic, unique_name};
use kafka_group::sasl::{Mechanism, Secret};
use kafka_group::{Client, Error, OffsetReset, SecurityProtocol};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Sends AlterUserScramCredentials v0 (API 51) with `body` (its flexible body after the
/// header) over the PLAINTEXT listener, whose ANONYMOUS principal is a super user, and checks
/// that `user`'s result has no error. The crate has no admin call for SCRAM credentials, and the
/// broker's classpath has no `kafka-configs` tool, so the request is written out here.
fn alter_scram(plaintext: SocketAddr, user: &str, body: &[u8]) {
    let mut frame = Vec::new();
    frame.extend_from_slice(&51i16.to_be_bytes()); // api key
    frame.extend_from_slice(&0i16.to_be_bytes()); // version
    frame.extend_from_slice(&7i32.to_be_bytes()); // correlation id
    frame.extend_from_slice(&(-1i16).to_be_bytes()); // client id: null
    frame.push(0); // header tags
    frame.extend_from_slice(body);
    let mut s = TcpStream::connect(plaintext).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(&(frame.len() as i32).to_be_bytes()).unwrap();
    s.write_all(&frame).unwrap();
    let mut size = [0; 4];
    s.read_exact(&mut size).unwrap();
    let mut resp = vec![0; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut resp).unwrap();
    // correlation id (4), header tags (1), throttle (4), results array (1), user string.
    assert_eq!(&resp[..4], &7i32.to_be_bytes());
    assert_eq!(resp[9], 2, "one result: {resp:?}");
    let name_len = resp[10] as usize - 1;
    assert_eq!(&resp[11..11 + name_len], user.as_bytes());
    let code = i16::from_be_bytes([resp[11 + name_len], resp[12 + name_len]]);
    assert_eq!(
        code, 0,
        "AlterUserScramCredentials answered error {code}: {resp:?}"
    );
}

/// A compact string or bytes field: length + 1 as one varint byte (short values only).
fn compact(out: &mut Vec<u8>, bytes: &[u8]) {
    assert!(bytes.len() < 127);
    out.push(bytes.len() as u8 + 1);
    out.extend_from_slice(bytes);
}

const SCRAM_SHA_512: u8 = 2;

/// Deletes `user`'s SCRAM-SHA-512 credential.
fn delete_scram_512(plaintext: SocketAddr, user: &str) {
    let mut body = vec![2]; // deletions: compact array of 1
    compact(&mut body, user.as_bytes());
    body.extend_from_slice(&[SCRAM_SHA_512, 0]); // mechanism, tags
    body.extend_from_slice(&[1, 0]); // no upsertions, body tags
    alter_scram(plaintext, user, &body);
}

/// Sets `user`'s SCRAM-SHA-512 password: the client computes the salted password (RFC 5802 Hi:
/// PBKDF2-HMAC-SHA-512), as `kafka-configs --add-config` does.
fn upsert_scram_512(plaintext: SocketAddr, user: &str, password: &str) {
    let (salt, iterations) = (b"revoked-test-salt", 4096u32);
    let mut salted = [0u8; 64];
    pbkdf2::pbkdf2_hmac::<sha2::Sha512>(password.as_bytes(), salt, iterations, &mut salted);
    let mut body = vec![1, 2]; // no deletions; upsertions: compact array of 1
    compact(&mut body, user.as_bytes());
    body.push(SCRAM_SHA_512);
    body.extend_from_slice(&(iterations as i32).to_be_bytes());
    compact(&mut body, salt);
    compact(&mut body, &salted);
    body.extend_from_slice(&[0, 0]); // upsertion tags, body tags
    alter_scram(plaintext, user, &body);
}

#[test]
fn a_credential_deleted_under_a_running_member_is_one_clear_error_until_it_is_back() {
    let reauth = Duration::from_secs(3);
    let b = secure::reauth(reauth.as_millis() as u64);
    let client = Client::builder()
        .bootstrap_servers(format!("localhost:{}", b.sasl_ssl.port()))
        .security_protocol(SecurityProtocol::SaslSsl)
        .ssl_ca_location(&b.tls.ca)
        .sasl(Mechanism::ScramSha512 {
            username: ADMIN.name.into(),
            password: Secret::new(ADMIN.password),
        })
        .request_timeout(Duration::from_secs(10))
        .api_timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let topic = create_topic(&client, "revoked", 1, 1);
    let mut c = client
        .consumer(&unique_name("revoked"))
        .group_instance_id("r1")
        .subscribe([topic.as_str()])
        .auto_offset_reset(OffsetReset::Earliest)
        // Long enough that the password comes back within the session: no rebalance then.
        .session_timeout(Duration::from_secs(45))
        .build()
        .unwrap();
    // Joined, heartbeating, and past one re-authentication with the credential still there.
    let started = Instant::now();
    while started.elapsed() < reauth * 2 {
        c.poll(Duration::from_millis(300)).unwrap();
    }
    assert!(c.member().unwrap().metrics().heartbeats > 0);
    let generation = c.member().unwrap().generation().cloned().unwrap();

    delete_scram_512(b.plaintext, ADMIN.name);
    let deleted = Instant::now();
    let e = loop {
        match c.poll(Duration::from_millis(500)) {
            // The next re-authentication (within `reauth`) fails.
            Ok(_) => assert!(
                deleted.elapsed() < reauth + crate::support::LOAD_MARGIN,
                "still polling {:?} after the credential went",
                deleted.elapsed()
            ),
            Err(e) => break e,
        }
    };
    assert!(matches!(e, Error::Authentication { .. }), "{e:?}");
    assert!(!format!("{e} {e:?}").contains(ADMIN.password), "{e}");
    // Each later poll says the same at once; none waits out its timeout retrying (a timeout
    // well past the bound, so that one that did fails the test).
    for _ in 0..3 {
        let t = Instant::now();
        let e = c.poll(3 * crate::support::LOAD_MARGIN).unwrap_err();
        assert!(
            t.elapsed() < crate::support::LOAD_MARGIN,
            "poll retried for {:?}",
            t.elapsed()
        );
        assert!(matches!(e, Error::Authentication { .. }), "{e:?}");
    }
    // The heartbeat thread stopped too: its connection's re-authentication failed within a
    // session lifetime, and it does not reconnect in a loop.
    std::thread::sleep(reauth * 2);
    let before = c.member().unwrap().metrics();
    std::thread::sleep(reauth);
    let after = c.member().unwrap().metrics();
    assert_eq!(
        (before.heartbeats, before.heartbeat_failures),
        (after.heartbeats, after.heartbeat_failures),
        "heartbeats went on"
    );

    // Not terminal: once the broker knows the password again, the next poll restarts the
    // heartbeats, and the member is still in its group, heartbeating.
    upsert_scram_512(b.plaintext, ADMIN.name, ADMIN.password);
    let restored = Instant::now();
    loop {
        assert!(
            restored.elapsed() < Duration::from_secs(60),
            "no recovery in {:?}",
            restored.elapsed()
        );
        if c.poll(Duration::from_millis(500)).is_ok() && !c.assignment().is_empty() {
            let beats = c.member().unwrap().metrics().heartbeats;
            std::thread::sleep(Duration::from_secs(2));
            if c.member().unwrap().metrics().heartbeats > beats {
                break;
            }
        }
    }
    eprintln!(
        "member back in its group {:?} after the password was restored",
        restored.elapsed()
    );
    // Within the session: the same generation, no rebalance, nothing lost.
    assert_eq!(c.member().unwrap().generation(), Some(&generation));
    assert_eq!(c.member().unwrap().metrics().rebalances, 0);
    c.close().unwrap();
}
