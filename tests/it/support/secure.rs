//! A single-node broker with secure listeners (`scripts/kafka start --security`): SSL, MTLS,
//! SASL_SSL (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER with Kafka's unsecured JWS validator),
//! SASL_PLAINTEXT (SCRAM), and two SSL listeners presenting an expired and a wrong-host
//! certificate. The test CA and certificates are made by the script for each run, in
//! `<run dir>/tls`; nothing secret is committed. `StandardAuthorizer` is on: admin, the MTLS
//! client (`CN=client`) and ANONYMOUS (PLAINTEXT, SSL) are super users; bob may only use topics
//! and groups whose names start with [`BOB_PREFIX`], and describe those starting with
//! [`PEEK_PREFIX`].
//!
//! Like [`super::broker::shared`], the brokers are watchdog-owned by this process.

use super::broker::{resolve_version, run_dir, scripts_kafka, version_under_test};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// The prefix of the topics and groups bob's ACLs allow (ALL operations, PREFIXED pattern).
pub const BOB_PREFIX: &str = "bob-";

/// The prefix of the topics and groups bob may only DESCRIBE (PREFIXED): he sees their
/// metadata and their coordinator, and is denied reading, writing, joining and committing.
pub const PEEK_PREFIX: &str = "peek-";

/// A user name and its password, valid for PLAIN and both SCRAM mechanisms.
#[derive(Debug, Clone, Copy)]
pub struct User {
    /// `sasl.username`.
    pub name: &'static str,
    /// `sasl.password`.
    pub password: &'static str,
}

/// Super user.
pub const ADMIN: User = User {
    name: "admin",
    password: "admin-secret",
};
/// No ACLs at all: authenticates, is denied every topic and group.
pub const ALICE: User = User {
    name: "alice",
    password: "alice-secret",
};
/// Restricted: ACLs only for [`BOB_PREFIX`] topics and groups.
pub const BOB: User = User {
    name: "bob",
    password: "bob-secret",
};

/// Paths of the test PKI, all PEM.
#[derive(Debug, Clone)]
pub struct Tls {
    /// The test CA's certificate (`ssl.ca.location`).
    pub ca: PathBuf,
    /// Client certificate (`CN=client`, principal `User:client` on MTLS) and its key.
    pub client_cert: PathBuf,
    /// Unencrypted PKCS#8 key of `client_cert`.
    pub client_key: PathBuf,
    /// The same key, PKCS#8 encrypted (AES-256-CBC) with [`Tls::CLIENT_KEY_PASSWORD`].
    pub client_key_encrypted: PathBuf,
    /// Certificate and key valid only for `wrong.invalid` (the WRONG_HOST listener presents it).
    pub wrong_host_cert: PathBuf,
    /// Key of `wrong_host_cert`.
    pub wrong_host_key: PathBuf,
    /// Certificate for localhost/127.0.0.1 that expired in 2020 (the EXPIRED listener's).
    pub expired_cert: PathBuf,
    /// Key of `expired_cert`.
    pub expired_key: PathBuf,
}

impl Tls {
    /// Password of [`Tls::client_key_encrypted`].
    pub const CLIENT_KEY_PASSWORD: &'static str = "client-key-secret";
}

/// The secure broker: one address per listener, the PKI, the users.
#[derive(Debug)]
pub struct SecureBroker {
    dir: PathBuf,
    /// Exact Kafka release.
    pub version: String,
    /// PLAINTEXT (principal ANONYMOUS, a super user).
    pub plaintext: SocketAddr,
    /// SSL, no client certificate asked for.
    pub ssl: SocketAddr,
    /// SSL with `ssl.client.auth=required` (0.11+; see [`SecureBroker::mtls`]).
    mtls: Option<SocketAddr>,
    /// SASL_SSL: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (unsecured JWS: any `sub`).
    pub sasl_ssl: SocketAddr,
    /// SASL_PLAINTEXT: SCRAM-SHA-256, SCRAM-SHA-512.
    pub sasl_plaintext: SocketAddr,
    /// SSL presenting an expired certificate (0.11+).
    expired: Option<SocketAddr>,
    /// SSL presenting a certificate for `wrong.invalid` (0.11+).
    wrong_host: Option<SocketAddr>,
    /// The test PKI.
    pub tls: Tls,
    /// `connections.max.reauth.ms` of the SASL listeners, if set.
    pub reauth_ms: Option<u64>,
}

impl SecureBroker {
    /// SSL with `ssl.client.auth=required`. Kafka before 0.11 has no listener with settings of
    /// its own, so no such listener: panics there.
    pub fn mtls(&self) -> SocketAddr {
        self.optional(self.mtls, "MTLS")
    }

    /// SSL presenting an expired certificate; panics before Kafka 0.11, like [`Self::mtls`].
    pub fn expired(&self) -> SocketAddr {
        self.optional(self.expired, "EXPIRED")
    }

    /// SSL presenting a certificate for `wrong.invalid`; panics before Kafka 0.11.
    pub fn wrong_host(&self) -> SocketAddr {
        self.optional(self.wrong_host, "WRONG_HOST")
    }

    fn optional(&self, addr: Option<SocketAddr>, name: &str) -> SocketAddr {
        addr.unwrap_or_else(|| {
            panic!(
                "Kafka {} has no {name} listener (it needs 0.11 or later)",
                self.version
            )
        })
    }

    /// The run directory (`listeners`, `tls/`, `node-1/broker.log`).
    pub fn dir(&self) -> &PathBuf {
        &self.dir
    }
}

/// The secure broker of the version under test (`KAFKA_VERSION`), shared by the whole test
/// binary, started on first use.
pub fn shared() -> &'static SecureBroker {
    shared_of(version_under_test())
}

/// The secure broker of `version` (an alias such as `3.9`, or an exact release), shared by the
/// whole test binary and started on first use: the "on Kafka 4.x and 3.9" without a
/// second test run. The version under test and its alias get the same broker.
pub fn shared_of(version: &str) -> &'static SecureBroker {
    super::init_logs();
    type Slot = &'static OnceLock<Result<SecureBroker, String>>;
    static SHARED: OnceLock<Mutex<BTreeMap<String, Slot>>> = OnceLock::new();
    let exact = resolve_version(version);
    // The map only hands out the slot; the start itself runs outside its lock, so brokers of
    // two versions start side by side.
    let slot: Slot = *SHARED
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(exact.clone())
        .or_insert_with(|| Box::leak(Box::new(OnceLock::new())));
    let name = format!("it-secure-{}-{}", exact.replace('.', "_"), process::id());
    match slot.get_or_init(|| start(&name, &exact, None)) {
        Ok(broker) => broker,
        Err(e) => panic!("{e}"),
    }
}

/// A private secure broker of the version under test with `connections.max.reauth.ms = ms` on
/// the SASL listeners (KIP-368 tests); stopped when dropped.
pub fn reauth(ms: u64) -> Private {
    reauth_of(version_under_test(), ms)
}

/// [`reauth`] on Kafka `version` (alias or exact release).
pub fn reauth_of(version: &str, ms: u64) -> Private {
    super::init_logs();
    static N: AtomicUsize = AtomicUsize::new(0);
    let exact = resolve_version(version);
    let name = format!(
        "it-secure-reauth-{}-{}-{}",
        exact.replace('.', "_"),
        process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    Private(start(&name, &exact, Some(ms)).unwrap_or_else(|e| panic!("{e}")))
}

/// A secure broker of one test's own; derefs to [`SecureBroker`].
#[derive(Debug)]
pub struct Private(SecureBroker);

impl std::ops::Deref for Private {
    type Target = SecureBroker;
    fn deref(&self) -> &SecureBroker {
        &self.0
    }
}

impl Drop for Private {
    fn drop(&mut self) {
        if let Err(e) = scripts_kafka(&["stop", "--dir", &self.0.dir.to_string_lossy()]) {
            eprintln!("{e}");
        }
    }
}

fn start(name: &str, version: &str, reauth_ms: Option<u64>) -> Result<SecureBroker, String> {
    let dir = run_dir(name);
    let version = version.to_owned();
    let (dir_s, owner) = (dir.to_string_lossy().into_owned(), process::id().to_string());
    let ms = reauth_ms.map(|ms| ms.to_string());
    let mut args = vec!["start", "--security", "--version", &version, "--dir", &dir_s];
    args.extend(["--owner-pid", &owner]);
    if let Some(ms) = &ms {
        args.extend(["--reauth-ms", ms]);
    }
    scripts_kafka(&args)?;
    let listeners = std::fs::read_to_string(dir.join("listeners"))
        .map_err(|e| format!("{}: {e}", dir.join("listeners").display()))?;
    let addr = |name: &str| -> Result<SocketAddr, String> {
        listeners
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
            .ok_or_else(|| format!("no {name} in {}/listeners", dir.display()))?
            .parse()
            .map_err(|e| format!("{name} in {}/listeners: {e}", dir.display()))
    };
    // Absent on releases before 0.11 (scripts/kafka's write_zk_security).
    let optional = |name: &str| -> Result<Option<SocketAddr>, String> {
        let present = listeners.lines().any(|l| l.starts_with(&format!("{name}=")));
        present.then(|| addr(name)).transpose()
    };
    let t = dir.join("tls");
    Ok(SecureBroker {
        version,
        plaintext: addr("PLAINTEXT")?,
        ssl: addr("SSL")?,
        mtls: optional("MTLS")?,
        sasl_ssl: addr("SASL_SSL")?,
        sasl_plaintext: addr("SASL_PLAINTEXT")?,
        expired: optional("EXPIRED")?,
        wrong_host: optional("WRONG_HOST")?,
        tls: Tls {
            ca: t.join("ca.pem"),
            client_cert: t.join("client.pem"),
            client_key: t.join("client.key"),
            client_key_encrypted: t.join("client-encrypted.key"),
            wrong_host_cert: t.join("wrong-host.pem"),
            wrong_host_key: t.join("wrong-host.key"),
            expired_cert: t.join("expired.pem"),
            expired_key: t.join("expired.key"),
        },
        reauth_ms,
        dir,
    })
}
