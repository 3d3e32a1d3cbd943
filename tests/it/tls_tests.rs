//! TLS failures a user meets, each one clear and not retried, and hostile input on the TLS path,
//! against scripted TLS servers (exact error paths; the real-broker TLS tests are in
//! `secure_tests`), and encrypted client keys on the real broker's mTLS listener.

use crate::support::certs::{server_config, Ca};
use crate::support::scripted::{api_versions_frame, full_table, Reply, Scripted};
use crate::support::{broker, LOAD_MARGIN};
use kafka_group::unstable::RawClient;
use kafka_group::unstable::{Connection, ConnectionConfig};
use kafka_group::{Client, ClientBuilder, EndpointIdentification, Error, SecurityProtocol};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

/// Request and api timeouts well past [`LOAD_MARGIN`]: an error that should come at once is
/// asserted within the margin, and one that waited for either timeout fails that.
fn tls_builder(bootstrap: &str, ca: &Ca) -> ClientBuilder {
    Client::builder()
        .bootstrap_servers(bootstrap)
        .security_protocol(SecurityProtocol::Ssl)
        .ssl_ca_location(ca.pem())
        .request_timeout(3 * LOAD_MARGIN)
        .connect_timeout(Duration::from_secs(2))
        .api_timeout(3 * LOAD_MARGIN)
}

/// The ApiVersions answer a scripted broker gives, so that a handshake past TLS completes.
fn answer_api_versions(seen: &crate::support::scripted::Seen) -> Reply {
    Reply::Frame(api_versions_frame(
        seen.correlation_id,
        seen.api_version,
        0,
        &full_table(),
    ))
}

/// One connection through the client's own settings (what every connection of it does).
fn connect(builder: ClientBuilder, addr: &str) -> Result<Connection, Error> {
    // The client's connection settings, TLS included, as build() made them.
    let client = builder.build()?;
    Connection::connect(addr, client.connection_config())
}

fn text(e: &Error) -> String {
    e.to_string()
}

#[test]
fn a_tls_connection_to_a_scripted_broker_negotiates_versions() {
    let ca = Ca::new("ok");
    let leaf = ca.issue("broker", &["localhost", "127.0.0.1"], false);
    let server = Scripted::start_tls(server_config(&leaf), |s| match s.api_key {
        18 => answer_api_versions(s),
        _ => Reply::Close,
    });
    let addr = format!("localhost:{}", server.addr.port());
    let conn = connect(tls_builder(&addr, &ca), &addr).unwrap();
    assert!(!conn.broker_versions().is_empty());
    // By IP address too: the certificate names 127.0.0.1.
    drop(conn);
    drop(server);
    let server = Scripted::start_tls(server_config(&leaf), answer_api_versions);
    let addr = server.addr.to_string();
    connect(tls_builder(&addr, &ca), &addr).unwrap();
}

#[test]
fn certificate_problems_are_one_clear_error() {
    let ca = Ca::new("trusted");
    let other = Ca::new("untrusted");
    let cases = [
        (
            "untrusted CA",
            other.issue("broker", &["localhost"], false),
            "not signed by a trusted CA",
        ),
        ("expired", ca.issue("expired", &["localhost"], true), "expired"),
        (
            "wrong host",
            ca.issue("wrong-host", &["broker.example.com"], false),
            "not valid for \"localhost\"",
        ),
    ];
    for (what, leaf, says) in cases {
        let server = Scripted::start_tls(server_config(&leaf), answer_api_versions);
        let addr = format!("localhost:{}", server.addr.port());
        let t = Instant::now();
        let e = connect(tls_builder(&addr, &ca), &addr).unwrap_err();
        assert!(matches!(e, Error::Tls { .. }), "{what}: {e:?}");
        assert!(text(&e).contains(says) && text(&e).contains(&addr), "{what}: {e}");
        assert!(
            std::error::Error::source(&e).is_some(),
            "{what}: the cause is kept"
        );
        assert!(t.elapsed() < LOAD_MARGIN, "{what}: took {:?}", t.elapsed());
    }
    // A client call fails at once with it too: a TLS failure is not retried until the api
    // timeout.
    let leaf = other.issue("broker2", &["localhost"], false);
    let server = Scripted::start_tls(server_config(&leaf), answer_api_versions);
    let addr = format!("localhost:{}", server.addr.port());
    let client = tls_builder(&addr, &ca).build().unwrap();
    let t = Instant::now();
    let e = client.find_coordinator("g").unwrap_err();
    assert!(t.elapsed() < LOAD_MARGIN, "retried for {:?}: {e}", t.elapsed());
    assert!(text(&e).contains("trusted CA"), "{e}");
}

#[test]
fn hostname_verification_can_be_turned_off_but_the_chain_still_counts() {
    let ca = Ca::new("noverify");
    let leaf = ca.issue("wrong-host", &["broker.example.com"], false);
    let server = Scripted::start_tls(server_config(&leaf), answer_api_versions);
    let addr = format!("localhost:{}", server.addr.port());
    let b = tls_builder(&addr, &ca).ssl_endpoint_identification_algorithm(EndpointIdentification::None);
    connect(b, &addr).unwrap();
    let other = Ca::new("noverify-other");
    let leaf = other.issue("broker", &["broker.example.com"], false);
    let server = Scripted::start_tls(server_config(&leaf), answer_api_versions);
    let addr = format!("localhost:{}", server.addr.port());
    let b = tls_builder(&addr, &ca).ssl_endpoint_identification_algorithm(EndpointIdentification::None);
    let e = connect(b, &addr).unwrap_err();
    assert!(text(&e).contains("trusted CA"), "{e}");
}

#[test]
fn tls_and_plaintext_ports_mixed_up_say_so() {
    // A TLS client on a real broker's PLAINTEXT listener.
    let ca = Ca::new("mixup");
    let plain = broker::shared().bootstrap().to_string();
    let t = Instant::now();
    let e = connect(tls_builder(&plain, &ca), &plain).unwrap_err();
    assert!(text(&e).contains("PLAINTEXT one hangs up"), "{e}");
    assert!(t.elapsed() < LOAD_MARGIN, "took {:?}", t.elapsed());
    // A plaintext client on a TLS port: the TLS server's alert is read as a frame length.
    let leaf = ca.issue("broker", &["localhost"], false);
    let server = Scripted::start_tls(server_config(&leaf), answer_api_versions);
    let addr = format!("localhost:{}", server.addr.port());
    let e = Connection::connect(&addr, &ConnectionConfig::default()).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Protocol { .. } | Error::Io { .. } | Error::Decode { .. }
        ),
        "{e:?}"
    );
}

#[test]
fn hostile_input_on_the_tls_path_is_an_error_not_a_panic_or_a_hang() {
    let ca = Ca::new("hostile");
    let leaf = ca.issue("broker", &["localhost"], false);
    // Garbage inside TLS after the handshake: a frame size no broker sends.
    let server = Scripted::start_tls(server_config(&leaf), |_| {
        Reply::Raw(vec![0x7f, 0xff, 0xff, 0xff, 1, 2, 3])
    });
    let addr = format!("localhost:{}", server.addr.port());
    let e = connect(tls_builder(&addr, &ca), &addr).unwrap_err();
    assert!(matches!(e, Error::Protocol { .. }), "{e:?}");
    // A truncated frame inside TLS, then the connection closes.
    let server = Scripted::start_tls(server_config(&leaf), |_| {
        Reply::RawThenClose(vec![0, 0, 0, 40, 0, 0])
    });
    let addr = format!("localhost:{}", server.addr.port());
    let e = connect(tls_builder(&addr, &ca), &addr).unwrap_err();
    assert!(matches!(e, Error::Io { .. } | Error::Tls { .. }), "{e:?}");

    // Raw bytes that are not TLS after the server's first flight, and a truncated TLS record.
    for bytes in [
        vec![0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0],
        vec![0x16, 0x03, 0x03, 0x40, 0x00, 0x02],
    ] {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = format!("localhost:{}", l.local_addr().unwrap().port());
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut hello = [0u8; 512];
            let _ = s.read(&mut hello);
            let _ = s.write_all(&bytes);
            // Closing ends a truncated record: the client must not wait for the rest forever.
            std::thread::sleep(Duration::from_millis(200));
        });
        let started = Instant::now();
        let e = connect(tls_builder(&addr, &ca), &addr).unwrap_err();
        assert!(matches!(e, Error::Tls { .. } | Error::Io { .. }), "{e:?}");
        assert!(started.elapsed() < LOAD_MARGIN, "took {:?}", started.elapsed());
        t.join().unwrap();
    }

    // A server that accepts and never answers the ClientHello: bounded by the timeouts.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = format!("localhost:{}", l.local_addr().unwrap().port());
    let request_timeout = Duration::from_secs(5);
    // The server holds the connection past the bound below (unless told the test is done), so
    // a client that waited for the server to give up fails the test.
    let hold = request_timeout + 2 * LOAD_MARGIN;
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let _ = wait.recv_timeout(hold);
        drop(s);
    });
    let started = Instant::now();
    let b = tls_builder(&addr, &ca).request_timeout(request_timeout);
    let e = connect(b, &addr).unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
    assert!(
        started.elapsed() < request_timeout + LOAD_MARGIN,
        "a stalled handshake took {:?} with a {request_timeout:?} request timeout",
        started.elapsed()
    );
    let _ = done.send(());
    t.join().unwrap();
}

#[test]
fn missing_files_are_configuration_errors_before_any_network_call() {
    let e = Client::builder()
        .bootstrap_servers("localhost:1")
        .security_protocol(SecurityProtocol::Ssl)
        .ssl_ca_location("/no/such/ca.pem")
        .build()
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Config {
                property: "ssl.ca.location",
                ..
            }
        ),
        "{e}"
    );
    let ca = Ca::new("files");
    let e = Client::builder()
        .bootstrap_servers("localhost:1")
        .security_protocol(SecurityProtocol::Ssl)
        .ssl_ca_location(ca.pem())
        .ssl_certificate_location(ca.pem())
        .ssl_key_location(ca.dir().join("missing-key.pem"))
        .build()
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Config {
                property: "ssl.key.location",
                ..
            }
        ),
        "{e}"
    );
}

/// An encrypted PKCS#8 client key (`openssl pkcs8 -topk8 -v2 aes-256-cbc`, made by
/// `scripts/kafka` with the test PKI) opens with `ssl.key.password` and authenticates on the
/// real broker's mTLS listener; a missing or wrong password, and a key encrypted the legacy
/// OpenSSL way, are configuration errors from `build()`, naming the file and not the password.
#[test]
fn an_encrypted_client_key_opens_with_its_password_on_a_real_mtls_listener() {
    use crate::support::secure::{self, Tls};
    let b = secure::shared();
    let mtls = |key: &std::path::Path| {
        Client::builder()
            .bootstrap_servers(format!("localhost:{}", b.mtls().port()))
            .security_protocol(SecurityProtocol::Ssl)
            .ssl_ca_location(&b.tls.ca)
            .ssl_certificate_location(&b.tls.client_cert)
            .ssl_key_location(key)
    };
    let mut builder = mtls(&b.tls.client_key_encrypted);
    builder
        .property("ssl.key.password", Tls::CLIENT_KEY_PASSWORD)
        .unwrap();
    let client = builder.build().unwrap();
    client.refresh_metadata(None).unwrap();

    let config_error = |builder: ClientBuilder| -> String {
        let e = builder.build().unwrap_err();
        assert!(
            matches!(
                e,
                Error::Config {
                    property: "ssl.key.location",
                    ..
                }
            ),
            "{e:?}"
        );
        let text = format!("{e} {e:?}");
        assert!(
            text.contains("client-encrypted.key") || text.contains("legacy"),
            "{text}"
        );
        assert!(!text.contains(Tls::CLIENT_KEY_PASSWORD), "{text}");
        text
    };
    let text = config_error(mtls(&b.tls.client_key_encrypted));
    assert!(text.contains("set ssl.key.password"), "{text}");
    let text = config_error(mtls(&b.tls.client_key_encrypted).ssl_key_password("not-the-key-password"));
    assert!(text.contains("wrong password"), "{text}");
    assert!(!text.contains("not-the-key-password"), "{text}");

    // The same key encrypted with OpenSSL's legacy PEM headers (Proc-Type/DEK-Info).
    let scratch = Ca::new("legacy-key");
    let legacy = scratch.dir().join("legacy.key");
    let out = std::process::Command::new("openssl")
        .args([
            "pkey",
            "-traditional",
            "-aes256",
            "-passout",
            "pass:legacy-secret",
            "-in",
        ])
        .arg(&b.tls.client_key)
        .arg("-out")
        .arg(&legacy)
        .output()
        .expect("openssl");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = config_error(mtls(&legacy).ssl_key_password("legacy-secret"));
    assert!(text.contains("openssl pkcs8 -topk8"), "{text}");
}

/// Runs `openssl` with `args`, panicking with its standard error if it fails.
fn openssl(args: &[&std::ffi::OsStr]) {
    let out = std::process::Command::new("openssl")
        .args(args)
        .output()
        .expect("openssl");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Signs the request `csr` into `out` as `openssl x509 -req` does without `-extfile`: an X.509
/// v1 certificate, valid two days. `signer` says by whom (`-CA …` or `-signkey …`).
fn sign_v1(csr: &std::path::Path, signer: &[&std::ffi::OsStr], out: &std::path::Path) {
    let mut args: Vec<&std::ffi::OsStr> = ["x509", "-req", "-days", "2", "-in"]
        .iter()
        .map(|a| a.as_ref())
        .collect();
    args.push(csr.as_os_str());
    args.extend_from_slice(signer);
    args.extend(["-out".as_ref(), out.as_os_str()]);
    openssl(&args);
}

/// An X.509 v1 client certificate, as `openssl x509 -req` without `-extfile` makes it (and
/// many Kafka mTLS guides do), is sent to the real broker's mTLS listener, which accepts it:
/// the client does not judge its own certificate, the broker does. Signed by the broker's test
/// CA for `CN=client`, the principal the listener's authorizer lets do everything.
#[test]
fn a_v1_client_certificate_authenticates_on_a_real_mtls_listener() {
    use crate::support::secure;
    use kafka_group::ProducerRecord;
    let b = secure::shared();
    let scratch = Ca::new("v1-client");
    let (key, csr, cert) = (
        scratch.dir().join("v1.key"),
        scratch.dir().join("v1.csr"),
        scratch.dir().join("v1.pem"),
    );
    let ca_key = b.tls.ca.with_file_name("ca.key");
    openssl(&[
        "req".as_ref(),
        "-newkey".as_ref(),
        "rsa:2048".as_ref(),
        "-nodes".as_ref(),
        "-subj".as_ref(),
        "/CN=client".as_ref(),
        "-keyout".as_ref(),
        key.as_os_str(),
        "-out".as_ref(),
        csr.as_os_str(),
    ]);
    let serial = scratch.dir().join("ca.srl");
    sign_v1(
        &csr,
        &[
            "-CA".as_ref(),
            b.tls.ca.as_os_str(),
            "-CAkey".as_ref(),
            ca_key.as_os_str(),
            "-CAserial".as_ref(),
            serial.as_os_str(),
            "-CAcreateserial".as_ref(),
        ],
        &cert,
    );
    let text = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in"])
        .arg(&cert)
        .output()
        .expect("openssl");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("Version: 1 (0x0)"), "not a v1 certificate: {text}");

    let client = Client::builder()
        .bootstrap_servers(format!("localhost:{}", b.mtls().port()))
        .security_protocol(SecurityProtocol::Ssl)
        .ssl_ca_location(&b.tls.ca)
        .ssl_certificate_location(&cert)
        .ssl_key_location(&key)
        .request_timeout(Duration::from_secs(10))
        .api_timeout(Duration::from_secs(30))
        .build()
        .unwrap_or_else(|e| panic!("a v1 client certificate was refused: {e}"));
    // Requests the broker authorizes only for the certificate's principal: create a topic,
    // produce to it.
    let topic = crate::support::create_topic(&client, "v1-cert", 1, 1);
    let mut producer = client.producer().build().unwrap();
    let handle = producer
        .send(ProducerRecord::new(&topic, "over a v1 certificate"))
        .unwrap();
    producer.flush().unwrap();
    assert!(
        handle.try_result().is_some_and(|r| r.is_ok()),
        "{:?}",
        handle.try_result()
    );
    producer.close().unwrap();
}

/// A key that is not the certificate's is a configuration error from `build()` naming
/// `ssl.key.location` and saying that the two do not match, for a v3 certificate as well as for
/// a v1 one (whose check must not depend on parsing it as a server certificate would be).
#[test]
fn a_client_key_that_is_not_the_certificates_is_refused_at_build() {
    let ca = Ca::new("mismatch");
    let leaf = ca.issue("client", &["client"], false);
    let other = ca.issue("other", &["other"], false);
    // A v1 certificate for `leaf`'s key, made by openssl from a request signed by that key.
    let (csr, v1) = (ca.dir().join("v1.csr"), ca.dir().join("v1.pem"));
    openssl(&[
        "req".as_ref(),
        "-new".as_ref(),
        "-subj".as_ref(),
        "/CN=client".as_ref(),
        "-key".as_ref(),
        leaf.key_pem.as_os_str(),
        "-out".as_ref(),
        csr.as_os_str(),
    ]);
    sign_v1(&csr, &["-signkey".as_ref(), leaf.key_pem.as_os_str()], &v1);
    for cert in [&leaf.cert_pem, &v1] {
        let builder = || {
            Client::builder()
                .bootstrap_servers("localhost:9093")
                .security_protocol(SecurityProtocol::Ssl)
                .ssl_ca_location(ca.pem())
                .ssl_certificate_location(cert)
        };
        // The right key builds.
        builder().ssl_key_location(&leaf.key_pem).build().unwrap();
        let e = builder().ssl_key_location(&other.key_pem).build().unwrap_err();
        assert!(
            matches!(
                e,
                Error::Config {
                    property: "ssl.key.location",
                    ..
                }
            ),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(
            text.contains("does not match") && text.contains("other-key.pem"),
            "{text}"
        );
    }
}
