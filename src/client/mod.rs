//! The [`Client`]: bootstrap, a metadata cache, connections per broker and purpose,
//! coordinator lookup.
//!
//! A `Client` is a cheap handle (`Arc` inside) that many threads can share. It keeps one
//! connection (a `Link`) per broker and purpose (metadata and admin, group coordinator,
//! produce, fetch), each behind its own lock: requests to different brokers, or of different
//! purposes to one broker, run in parallel, while requests of one purpose to the same broker
//! queue (one in flight per connection). So a Produce waiting on a slow ISR never holds up a
//! heartbeat thread's coordinator lookup on that broker. Long-lived users such as a member
//! and its heartbeat thread take links of their own, built by the same type.

use crate::authorization::Scope;
use crate::error::{Error, Result};
use crate::net::link::{Backoff, Link, Purpose};
use crate::net::sasl::{Mechanism, Secret};
use crate::net::wire::{Dialer, Tcp};
use crate::net::{
    BrokerVersions, Connection, ConnectionConfig, EndpointIdentification, SecurityProtocol, TlsSettings,
};
use crate::protocol::messages::metadata_request::MetadataRequestTopic;
use crate::protocol::messages::metadata_response::{MetadataResponseBroker, MetadataResponsePartition};
use crate::protocol::messages::{
    FindCoordinatorRequest, FindCoordinatorResponse, MetadataRequest, MetadataResponse,
};
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, Request, Uuid};
use crate::retry::{self, retry, Step};
use crate::KafkaCode;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A broker as the cluster describes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Broker {
    /// `node.id`.
    pub id: i32,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: u16,
    /// `broker.rack`, if set.
    pub rack: Option<String>,
}

impl Broker {
    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// One partition's placement.
///
/// A cluster's metadata can hold millions of these, so they are small: the replica and ISR
/// lists are shared slices (`Arc<[i32]>`), one per distinct list in a Metadata answer rather
/// than two allocations per partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMetadata {
    /// Partition index.
    pub partition: i32,
    /// Leader broker id, -1 when there is none.
    pub leader: i32,
    /// Leader epoch, -1 when unknown (brokers before 2.1).
    pub leader_epoch: i32,
    /// Replica broker ids.
    pub replicas: Arc<[i32]>,
    /// In-sync replica broker ids.
    pub isr: Arc<[i32]>,
    /// Partition-level error.
    pub error: KafkaCode,
}

/// One topic's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    /// Topic name.
    pub name: String,
    /// Topic id (nil before Kafka 2.8).
    pub id: Uuid,
    /// Topic-level error (e.g. `UNKNOWN_TOPIC_OR_PARTITION`).
    pub error: KafkaCode,
    /// Whether it is an internal topic such as `__consumer_offsets`.
    pub internal: bool,
    /// Partitions, sorted by index.
    pub partitions: Vec<PartitionMetadata>,
}

/// A snapshot of the cluster's metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    /// Cluster id (from Kafka 0.10.1).
    pub cluster_id: Option<String>,
    /// Controller broker id, -1 if unknown.
    pub controller_id: i32,
    /// Brokers by id.
    pub brokers: BTreeMap<i32, Broker>,
    /// Topics by name (only those asked for, or all). Shared (`Arc`) between snapshots, so
    /// that a refresh of one topic, or a coordinator learnt, does not copy the others.
    pub topics: BTreeMap<String, Arc<TopicMetadata>>,
}

/// Builds a [`Client`]; every setter names the Kafka property it mirrors and its default.
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    bootstrap: String,
    conn: ConnectionConfig,
    retry_backoff: Duration,
    reconnect_backoff: Duration,
    reconnect_backoff_max: Duration,
    api_timeout: Duration,
    security_protocol: SecurityProtocol,
    tls: TlsSettings,
    sasl: SaslSettings,
}

/// The `sasl.*` settings as given; [`SaslSettings::mechanism`] makes the mechanism at build.
#[derive(Debug, Clone, Default)]
struct SaslSettings {
    /// A mechanism given whole ([`ClientBuilder::sasl`]).
    mechanism: Option<Mechanism>,
    /// `sasl.mechanism` by name, with `sasl.username` / `sasl.password`.
    name: Option<String>,
    username: Option<String>,
    password: Option<Secret>,
}

impl SaslSettings {
    fn mechanism(&self) -> Result<Mechanism> {
        if let Some(m) = &self.mechanism {
            m.validate()?;
            return Ok(m.clone());
        }
        let name = self.name.as_deref().unwrap_or("GSSAPI");
        let username = self.username.clone().unwrap_or_default();
        let password = self.password.clone().unwrap_or_else(|| Secret::new(""));
        let m = match name.to_ascii_uppercase().as_str() {
            "PLAIN" => Mechanism::Plain { username, password },
            "SCRAM-SHA-256" => Mechanism::ScramSha256 { username, password },
            "SCRAM-SHA-512" => Mechanism::ScramSha512 { username, password },
            "OAUTHBEARER" => return Err(Error::Config {
                property: "sasl.mechanism",
                problem:
                    "OAUTHBEARER needs a token provider: ClientBuilder::sasl(Mechanism::OAuthBearer { .. })"
                        .into(),
            }),
            other => {
                return Err(Error::Config {
                    property: "sasl.mechanism",
                    problem: format!(
                        "{other:?} is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER){}",
                        if self.name.is_none() {
                            "; none was set and Kafka's default is GSSAPI"
                        } else {
                            ""
                        }
                    ),
                })
            }
        };
        m.validate()?;
        Ok(m)
    }
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            bootstrap: String::new(),
            conn: ConnectionConfig::default(),
            retry_backoff: Duration::from_millis(100),
            reconnect_backoff: Duration::from_millis(50),
            reconnect_backoff_max: Duration::from_millis(1000),
            api_timeout: Duration::from_secs(60),
            security_protocol: SecurityProtocol::Plaintext,
            tls: TlsSettings::default(),
            sasl: SaslSettings::default(),
        }
    }
}

impl ClientBuilder {
    /// `bootstrap.servers`: comma-separated `host:port` list (IPv6 as `[::1]:9092`), without a
    /// scheme or path. Required; no default.
    pub fn bootstrap_servers(mut self, servers: impl Into<String>) -> Self {
        self.bootstrap = servers.into();
        self
    }

    /// `client.id`, sent with every request. Default: `kafka-group`.
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.conn.client_id = Some(id.into());
        self
    }

    /// `request.timeout.ms`: how long to wait for each response; above zero and at most
    /// `i32::MAX` ms (about 24.8 days), as Kafka's own config requires. Default: 30 s.
    pub fn request_timeout(mut self, t: Duration) -> Self {
        self.conn.request_timeout = t;
        self
    }

    /// `socket.connection.setup.timeout.ms`: TCP connect timeout per address; above zero (any
    /// larger value, up to `Duration::MAX`, is bounded by the OS's own connect timeout).
    /// Default: 10 s.
    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.conn.connect_timeout = t;
        self
    }

    /// `default.api.timeout.ms`: total time for operations that retry, such as finding a
    /// coordinator; above zero. `Duration::MAX` retries without a limit (each request is still
    /// bounded by `request.timeout.ms`). Default: 60 s.
    pub fn api_timeout(mut self, t: Duration) -> Self {
        self.api_timeout = t;
        self
    }

    /// `retry.backoff.ms`: pause between retries of a failed request; never slept past the
    /// deadline of the call retrying. Members, consumers and producers made from this client
    /// use it too, unless their own builder sets `retry_backoff`. Default: 100 ms.
    pub fn retry_backoff(mut self, t: Duration) -> Self {
        self.retry_backoff = t;
        self
    }

    /// `reconnect.backoff.ms`: first pause before reconnecting to a broker. Default: 50 ms.
    pub fn reconnect_backoff(mut self, t: Duration) -> Self {
        self.reconnect_backoff = t;
        self
    }

    /// `reconnect.backoff.max.ms`: the reconnect pause doubles per failure up to this; at
    /// least `reconnect.backoff.ms`. A call whose deadline comes before the next attempt fails
    /// at once instead of sleeping. Default: 1 s.
    pub fn reconnect_backoff_max(mut self, t: Duration) -> Self {
        self.reconnect_backoff_max = t;
        self
    }

    /// Largest response frame accepted, in bytes (no Kafka property; guards against garbage
    /// lengths such as a TLS port's answer); at least 1024. Default: 100 MiB.
    pub fn max_response_size(mut self, bytes: usize) -> Self {
        self.conn.max_response_size = bytes;
        self
    }

    /// Pins `api` to at most `version` (no Kafka property; for working around broker bugs).
    /// Default: no cap.
    pub fn max_api_version(mut self, api: ApiKey, version: i16) -> Self {
        self.conn.version_caps.insert(api.key(), version);
        self
    }

    /// `security.protocol`: how every connection of the client (bootstrap, metadata, the
    /// coordinator, heartbeats, fetches, produce, admin) talks to the brokers. With `Ssl` or
    /// `SaslSsl`, connections use TLS 1.2 or 1.3 (rustls), verifying the broker's certificate
    /// against the system's trust store or `ssl.ca.location`, and its host name unless
    /// `ssl.endpoint.identification.algorithm` is `none`. Default:
    /// [`SecurityProtocol::Plaintext`].
    pub fn security_protocol(mut self, p: SecurityProtocol) -> Self {
        self.security_protocol = p;
        self
    }

    /// `ssl.ca.location`: a PEM file of the CA certificates to trust, in place of the system's
    /// trust store (a cluster with its own CA, such as Aiven's project CA). Default: the system's
    /// store.
    pub fn ssl_ca_location(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls.ca_location = Some(path.into());
        self
    }

    /// `ssl.certificate.location`: a PEM file of the client's certificate chain, for listeners
    /// that authenticate clients by certificate (mTLS; `ssl.client.auth=required`). Needs
    /// `ssl.key.location`. Default: none.
    pub fn ssl_certificate_location(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls.certificate_location = Some(path.into());
        self
    }

    /// `ssl.key.location`: a PEM file of the client certificate's private key: PKCS#8, PKCS#1
    /// or SEC1, or encrypted PKCS#8 (`BEGIN ENCRYPTED PRIVATE KEY`, as `openssl pkcs8 -topk8`
    /// writes) with [`ssl_key_password`](Self::ssl_key_password). Default: none.
    pub fn ssl_key_location(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls.key_location = Some(path.into());
        self
    }

    /// `ssl.key.password`: the password of an encrypted `ssl.key.location` (PBES2: PBKDF2 or
    /// scrypt with AES-CBC); never printed by `Debug` or in errors. Default: none.
    pub fn ssl_key_password(mut self, password: impl Into<Secret>) -> Self {
        self.tls.key_password = Some(password.into());
        self
    }

    /// Trusts the root certificates compiled into the crate (no Kafka property; Mozilla's, from
    /// `webpki-roots`, Cargo feature `bundled-roots`) instead of the system's trust store, for machines that
    /// have none (a scratch container). `ssl.ca.location`, when set, still takes precedence.
    /// Without the feature, `build()` returns [`Error::Config`]. Default: `false`, the system's
    /// store.
    pub fn ssl_ca_bundled(mut self, bundled: bool) -> Self {
        self.tls.bundled_roots = bundled;
        self
    }

    /// `ssl.endpoint.identification.algorithm`: [`EndpointIdentification::Https`] checks that
    /// the broker's certificate names the host connected to (the bootstrap address, then each
    /// broker's advertised host); `None` skips only that check. Default:
    /// [`EndpointIdentification::Https`].
    pub fn ssl_endpoint_identification_algorithm(mut self, a: EndpointIdentification) -> Self {
        self.tls.endpoint_identification = a;
        self
    }

    /// `sasl.mechanism` with its credentials (`sasl.username`, `sasl.password`, or for
    /// OAUTHBEARER the token source), for `security.protocol` SASL_SSL or
    /// SASL_PLAINTEXT: `Mechanism::Plain`, `ScramSha256`, `ScramSha512` (username and
    /// password) or `OAuthBearer` (a [`TokenProvider`](crate::net::sasl::TokenProvider) the
    /// application implements, asked for a token before each authentication). Default: none.
    pub fn sasl(mut self, mechanism: Mechanism) -> Self {
        self.sasl.mechanism = Some(mechanism);
        self
    }

    /// `sasl.mechanism` by name: `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`, with
    /// [`sasl_username`](Self::sasl_username) and [`sasl_password`](Self::sasl_password).
    /// Default: none (Kafka's default, GSSAPI, is not supported).
    pub fn sasl_mechanism(mut self, name: impl Into<String>) -> Self {
        self.sasl.name = Some(name.into());
        self
    }

    /// `sasl.username`. Default: none.
    pub fn sasl_username(mut self, username: impl Into<String>) -> Self {
        self.sasl.username = Some(username.into());
        self
    }

    /// `sasl.password`; never printed by `Debug` or in errors. Default: none.
    pub fn sasl_password(mut self, password: impl Into<Secret>) -> Self {
        self.sasl.password = Some(password.into());
        self
    }

    /// Sets a client setting by its Kafka property name, as found in a `client.properties`
    /// file: `bootstrap.servers`, `client.id`, `request.timeout.ms`,
    /// `socket.connection.setup.timeout.ms`, `default.api.timeout.ms`, `retry.backoff.ms`,
    /// `reconnect.backoff.ms`, `reconnect.backoff.max.ms`, `security.protocol`,
    /// `ssl.ca.location`, `ssl.certificate.location`, `ssl.key.location`, `ssl.key.password`,
    /// `sasl.mechanism`, `sasl.username`, `sasl.password`, `sasl.jaas.config`,
    /// `ssl.endpoint.identification.algorithm` (`https`, or empty/`none`, as Java's empty
    /// value means). An unknown name is an [`Error::Config`] naming it, so that a typo is not
    /// silently ignored; a value that does not parse likewise.
    pub fn property(self, key: &str, value: &str) -> Result<Self> {
        let value = value.trim();
        let ms = |property: &'static str| -> Result<Duration> {
            value
                .parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| Error::Config {
                    property,
                    problem: format!("{value:?} is not a number of milliseconds"),
                })
        };
        Ok(match key {
            "bootstrap.servers" => self.bootstrap_servers(value),
            "client.id" => self.client_id(value),
            "request.timeout.ms" => self.request_timeout(ms("request.timeout.ms")?),
            "socket.connection.setup.timeout.ms" => {
                self.connect_timeout(ms("socket.connection.setup.timeout.ms")?)
            }
            "default.api.timeout.ms" => self.api_timeout(ms("default.api.timeout.ms")?),
            "retry.backoff.ms" => self.retry_backoff(ms("retry.backoff.ms")?),
            "reconnect.backoff.ms" => self.reconnect_backoff(ms("reconnect.backoff.ms")?),
            "reconnect.backoff.max.ms" => self.reconnect_backoff_max(ms("reconnect.backoff.max.ms")?),
            "security.protocol" => self.security_protocol(value.parse()?),
            "ssl.ca.location" => self.ssl_ca_location(value),
            "ssl.certificate.location" => self.ssl_certificate_location(value),
            "ssl.key.location" => self.ssl_key_location(value),
            "ssl.key.password" => self.ssl_key_password(value),
            "sasl.mechanism" => self.sasl_mechanism(value),
            "sasl.username" => self.sasl_username(value),
            "sasl.password" => self.sasl_password(value),
            "sasl.jaas.config" => {
                let (username, password) = jaas_credentials(value)?;
                self.sasl_username(username).sasl_password(password)
            }
            "ssl.endpoint.identification.algorithm" => {
                self.ssl_endpoint_identification_algorithm(match value.to_ascii_lowercase().as_str() {
                    "https" => EndpointIdentification::Https,
                    "" | "none" => EndpointIdentification::None,
                    _ => {
                        return Err(Error::Config {
                            property: "ssl.endpoint.identification.algorithm",
                            problem: format!("{value:?} is not https or none"),
                        })
                    }
                })
            }
            _ => {
                return Err(Error::Config {
                    property: "(property name)",
                    problem: format!("{key:?} is not a client setting this client knows"),
                })
            }
        })
    }

    /// Validates the configuration (without touching the network) and builds the client.
    pub fn build(self) -> Result<Client> {
        self.build_with(Arc::new(Tcp))
    }

    /// [`build`](Self::build) with every connection opened by `dialer` (a scripted broker in
    /// unit tests).
    pub(crate) fn build_with(mut self, dialer: Arc<dyn Dialer>) -> Result<Client> {
        let bootstrap = parse_bootstrap(&self.bootstrap)?;
        self.conn.sasl = if self.security_protocol.uses_sasl() {
            Some(self.sasl.mechanism()?)
        } else {
            None
        };
        // Certificates and keys are read here, so a missing file fails before any connection.
        self.conn.tls = if self.security_protocol.uses_tls() {
            Some(self.tls.client_config()?)
        } else {
            None
        };
        let positive = |property: &'static str, d: Duration| {
            if d.is_zero() {
                Err(Error::Config {
                    property,
                    problem: "must be greater than zero".into(),
                })
            } else {
                Ok(())
            }
        };
        positive("request.timeout.ms", self.conn.request_timeout)?;
        crate::deadline::check_int_ms("request.timeout.ms", self.conn.request_timeout)?;
        positive("socket.connection.setup.timeout.ms", self.conn.connect_timeout)?;
        positive("default.api.timeout.ms", self.api_timeout)?;
        if self.reconnect_backoff_max < self.reconnect_backoff {
            return Err(Error::Config {
                property: "reconnect.backoff.max.ms",
                problem: "must not be below reconnect.backoff.ms".into(),
            });
        }
        if self.conn.max_response_size < 1024 {
            return Err(Error::Config {
                property: "max_response_size",
                problem: "must be at least 1024 bytes".into(),
            });
        }
        for (&key, &cap) in &self.conn.version_caps {
            let api = ApiKey::from_key(key).ok_or(Error::Config {
                property: "max_api_version",
                problem: format!("unknown API key {key}"),
            })?;
            if cap < api.versions().min {
                return Err(Error::Config {
                    property: "max_api_version",
                    problem: format!(
                        "{} v{cap} is below the lowest version the client has ({})",
                        api.name(),
                        api.versions()
                    ),
                });
            }
        }
        Ok(Client {
            inner: Arc::new(Inner {
                bootstrap,
                conn: Arc::new(self.conn),
                dialer,
                retry_backoff: self.retry_backoff,
                reconnect_backoff: self.reconnect_backoff,
                reconnect_backoff_max: self.reconnect_backoff_max,
                api_timeout: self.api_timeout,
                metadata: Mutex::new(Arc::new(Metadata::default())),
                links: Mutex::new(HashMap::new()),
            }),
        })
    }
}

/// The username and password of a Java `sasl.jaas.config` for `PlainLoginModule` or
/// `ScramLoginModule` (`… required username="u" password="p";`), as an operator's existing
/// `client.properties` has them.
fn jaas_credentials(jaas: &str) -> Result<(String, Secret)> {
    let err = |problem: String| Error::Config {
        property: "sasl.jaas.config",
        problem,
    };
    let module = jaas.split_whitespace().next().unwrap_or_default();
    if !(module.ends_with("PlainLoginModule") || module.ends_with("ScramLoginModule")) {
        return Err(err(format!(
            "only PlainLoginModule and ScramLoginModule are understood, not {module:?}"
        )));
    }
    let option = |name: &str| -> Option<String> {
        let at = jaas.find(&format!(" {name}="))? + name.len() + 2;
        let rest = &jaas[at..];
        if let Some(quoted) = rest.strip_prefix('"') {
            let mut out = String::new();
            let mut chars = quoted.chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => out.push(chars.next()?),
                    '"' => return Some(out),
                    c => out.push(c),
                }
            }
            None
        } else {
            Some(
                rest.split(|c: char| c.is_whitespace() || c == ';')
                    .next()?
                    .to_string(),
            )
        }
    };
    match (option("username"), option("password")) {
        (Some(u), Some(p)) => Ok((u, Secret::new(p))),
        // Never echo the value: it holds the password.
        _ => Err(err("no username=\"…\" and password=\"…\" options found".into())),
    }
}

fn parse_bootstrap(s: &str) -> Result<Vec<String>> {
    let err = |problem: String| Error::Config {
        property: "bootstrap.servers",
        problem,
    };
    let list: Vec<String> = s
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(String::from)
        .collect();
    if list.is_empty() {
        return Err(err("no broker address given".into()));
    }
    for a in &list {
        if a.contains('/') {
            return Err(err(format!(
                "{a:?} has a scheme or path; bootstrap.servers takes host:port only"
            )));
        }
        let (host, port) = a
            .rsplit_once(':')
            .ok_or_else(|| err(format!("{a:?} is not host:port")))?;
        if host.is_empty() || port.parse::<u16>().ok().filter(|p| *p > 0).is_none() {
            return Err(err(format!("{a:?} is not host:port with a port in 1..=65535")));
        }
        let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
            None => host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')),
        };
        if !host_ok {
            return Err(err(format!(
                "{a:?}: {host:?} is not a host name or address (IPv6 goes in brackets: [::1]:9092)"
            )));
        }
    }
    Ok(list)
}

/// Where a connection goes: a bootstrap address (before metadata names brokers) or a broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Target {
    Bootstrap(usize),
    Broker(i32),
}

/// The client's shared connections, one per purpose and target, each behind its own lock.
type Links = HashMap<(Purpose, Target), Arc<Mutex<Link>>>;

#[derive(Debug)]
struct Inner {
    bootstrap: Vec<String>,
    conn: Arc<ConnectionConfig>,
    dialer: Arc<dyn Dialer>,
    retry_backoff: Duration,
    reconnect_backoff: Duration,
    reconnect_backoff_max: Duration,
    api_timeout: Duration,
    metadata: Mutex<Arc<Metadata>>,
    links: Mutex<Links>,
}

/// A thread-safe, cheaply cloned handle on a Kafka cluster.
///
/// ```no_run
/// use kafka_group::Client;
/// use std::time::Duration;
///
/// # fn main() -> kafka_group::Result<()> {
/// let client = Client::builder()
///     .bootstrap_servers("127.0.0.1:9092")
///     .client_id("billing")
///     .request_timeout(Duration::from_secs(10))
///     .build()?; // validated here; nothing is sent until the first request
/// let metadata = client.refresh_metadata(Some(&["invoices"]))?;
/// println!("{} brokers", metadata.brokers.len());
/// let coordinator = client.find_coordinator("billing")?;
/// println!("group coordinator: broker {} at {}", coordinator.id, coordinator.addr());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// Locks `m`, ignoring poison: a panic while holding one of these locks cannot leave the data
/// half-updated (each critical section is a single assignment, map operation or set of counter
/// updates), so the poison flag is noise.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Client {
    /// Starts building a client.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// The last metadata fetched (empty before the first fetch).
    pub fn cached_metadata(&self) -> Arc<Metadata> {
        lock(&self.inner.metadata).clone()
    }

    /// `default.api.timeout.ms` as configured.
    pub fn api_timeout(&self) -> Duration {
        self.inner.api_timeout
    }

    /// `retry.backoff.ms` as configured.
    pub fn retry_backoff(&self) -> Duration {
        self.inner.retry_backoff
    }

    /// The connection settings every connection of this client uses.
    pub(crate) fn connection_config(&self) -> &ConnectionConfig {
        &self.inner.conn
    }

    /// A broker from the cached metadata (or a coordinator seen since).
    pub fn broker(&self, id: i32) -> Option<Broker> {
        self.cached_metadata().brokers.get(&id).cloned()
    }

    /// Opens a new connection of its own to `broker`, outside the client's links (for tools
    /// and tests that speak the protocol directly).
    pub(crate) fn connect(&self, broker: &Broker) -> Result<Connection> {
        Connection::connect(&broker.addr(), &self.inner.conn)
    }

    /// Sends a request to broker `id`, building it for the version negotiated with that broker.
    pub(crate) fn send_to<R: Request>(&self, id: i32, build: impl FnOnce(i16) -> R) -> Result<R::Response> {
        self.send_target(Purpose::Metadata, Target::Broker(id), None, build)
    }

    /// A link of its own to `addr` for `purpose`, with this client's connection settings and
    /// reconnect backoff (a member's and its heartbeat thread's coordinator connections, a
    /// consumer's fetch connections).
    pub(crate) fn link(&self, purpose: Purpose, addr: impl Into<String>) -> Link {
        Link::new(
            purpose,
            addr,
            self.inner.dialer.clone(),
            self.inner.conn.clone(),
            self.backoff(),
        )
    }

    fn backoff(&self) -> Backoff {
        Backoff::new(self.inner.reconnect_backoff, self.inner.reconnect_backoff_max)
    }

    /// [`send_to`](Self::send_to) over the client's connection to broker `id` for `purpose`,
    /// within `deadline` if one is given (see [`send_to_by`](Self::send_to_by)).
    pub(crate) fn send_for<R: Request>(
        &self,
        purpose: Purpose,
        id: i32,
        deadline: Option<Instant>,
        build: impl FnOnce(i16) -> R,
    ) -> Result<R::Response> {
        self.send_target(purpose, Target::Broker(id), deadline, build)
    }

    /// [`send_to_no_response`](Self::send_to_no_response) over the connection for `purpose`.
    pub(crate) fn send_no_response_for<R: Request>(
        &self,
        purpose: Purpose,
        id: i32,
        build: impl FnOnce(i16) -> R,
    ) -> Result<()> {
        self.with_link(purpose, Target::Broker(id), |link| {
            link.send_no_response(None, build)
        })
    }

    /// [`broker_versions`](Self::broker_versions) as the connection for `purpose` has them.
    pub(crate) fn broker_versions_for(&self, purpose: Purpose, id: i32) -> Result<BrokerVersions> {
        self.with_link(purpose, Target::Broker(id), |link| link.broker_versions(None))
    }

    /// [`send_to`](Self::send_to) within an operation that must end by `deadline`: connecting
    /// and waiting for the answer take no longer than what is left (nor than
    /// `request.timeout.ms`), so a retrying call does not overshoot its limit.
    pub(crate) fn send_to_by<R: Request>(
        &self,
        id: i32,
        deadline: Instant,
        build: impl FnOnce(i16) -> R,
    ) -> Result<R::Response> {
        self.send_target(Purpose::Metadata, Target::Broker(id), Some(deadline), build)
    }

    /// Sends a request the broker does not answer (Produce with `acks=0`) to broker `id`,
    /// building it for the negotiated version; returns once it is written.
    pub(crate) fn send_to_no_response<R: Request>(
        &self,
        id: i32,
        build: impl FnOnce(i16) -> R,
    ) -> Result<()> {
        self.send_no_response_for(Purpose::Metadata, id, build)
    }

    /// Sends a request to any reachable broker (known brokers first, then bootstrap
    /// addresses), moving on to the next one when a broker cannot be reached.
    pub(crate) fn send_any<R: Request>(&self, build: impl Fn(i16) -> R) -> Result<R::Response> {
        self.send_any_within(Purpose::Metadata, None, build)
    }

    /// [`send_any`](Self::send_any) within an operation that must end by `deadline` (see
    /// [`send_to_by`](Self::send_to_by)).
    pub(crate) fn send_any_by<R: Request>(
        &self,
        deadline: Instant,
        build: impl Fn(i16) -> R,
    ) -> Result<R::Response> {
        self.send_any_within(Purpose::Metadata, Some(deadline), build)
    }

    fn send_any_within<R: Request>(
        &self,
        purpose: Purpose,
        deadline: Option<Instant>,
        build: impl Fn(i16) -> R,
    ) -> Result<R::Response> {
        self.first_answer(Error::is_unreachable, |t| {
            self.send_target(purpose, t, deadline, &build)
        })
    }

    /// The ApiVersions table of broker `id` (connecting if needed).
    pub(crate) fn broker_versions(&self, id: i32) -> Result<BrokerVersions> {
        self.broker_versions_for(Purpose::Metadata, id)
    }

    /// The ApiVersions table of whichever broker answers first.
    pub(crate) fn any_broker_versions(&self) -> Result<BrokerVersions> {
        self.first_answer(
            |_| true,
            |t| self.with_link(Purpose::Metadata, t, |link| link.broker_versions(None)),
        )
    }

    /// Runs `call` on each of [`targets`](Self::targets) in turn until one answers, moving on
    /// past the errors for which `move_on` holds; returns the last of those if none answers.
    fn first_answer<T>(
        &self,
        move_on: impl Fn(&Error) -> bool,
        mut call: impl FnMut(Target) -> Result<T>,
    ) -> Result<T> {
        let mut last = Error::NoBrokers;
        for t in self.targets() {
            match call(t) {
                Ok(r) => return Ok(r),
                Err(e) if move_on(&e) => {
                    log::debug!("{t:?} unusable ({e}); trying the next broker");
                    last = e;
                }
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// Known brokers first (their connections are likely open), then the bootstrap addresses.
    fn targets(&self) -> Vec<Target> {
        let mut targets: Vec<Target> = self
            .cached_metadata()
            .brokers
            .keys()
            .map(|id| Target::Broker(*id))
            .collect();
        targets.extend((0..self.inner.bootstrap.len()).map(Target::Bootstrap));
        targets
    }

    fn send_target<R: Request>(
        &self,
        purpose: Purpose,
        t: Target,
        deadline: Option<Instant>,
        build: impl FnOnce(i16) -> R,
    ) -> Result<R::Response> {
        self.with_link(purpose, t, |link| link.request(deadline, build))
    }

    fn addr_of(&self, t: Target) -> Result<String> {
        match t {
            Target::Bootstrap(i) => Ok(self.inner.bootstrap[i].clone()),
            Target::Broker(id) => self
                .broker(id)
                .map(|b| b.addr())
                .ok_or(Error::UnknownBroker { id }),
        }
    }

    /// Runs `f` on the client's link to `t` for `purpose`, holding that link (and only it)
    /// for the call. An unconnected link is first pointed at `t`'s current address; the link
    /// itself connects, backs off after failures and drops a broken connection.
    fn with_link<T>(&self, purpose: Purpose, t: Target, f: impl FnOnce(&mut Link) -> Result<T>) -> Result<T> {
        let link = lock(&self.inner.links)
            .entry((purpose, t))
            .or_insert_with(|| Arc::new(Mutex::new(self.link(purpose, String::new()))))
            .clone();
        let mut link = lock(&link);
        if !link.is_connected() {
            let addr = self.addr_of(t)?;
            link.retarget(&addr);
        }
        f(&mut link)
    }

    /// Fetches metadata for `topics` (all topics for `None`) and updates the cache. Brokers are
    /// always replaced; topics are merged so that callers interested in different topics do
    /// not evict each other's entries.
    pub fn refresh_metadata(&self, topics: Option<&[&str]>) -> Result<Arc<Metadata>> {
        self.refresh_metadata_within(topics, None)
    }

    /// [`refresh_metadata`](Self::refresh_metadata) within an operation that must end by
    /// `deadline` (see [`send_to_by`](Self::send_to_by)).
    pub(crate) fn refresh_metadata_by(
        &self,
        topics: Option<&[&str]>,
        deadline: Instant,
    ) -> Result<Arc<Metadata>> {
        self.refresh_metadata_within(topics, Some(deadline))
    }

    fn refresh_metadata_within(
        &self,
        topics: Option<&[&str]>,
        deadline: Option<Instant>,
    ) -> Result<Arc<Metadata>> {
        // Decoded straight into the cache's form: the frame is gone by the time it returns.
        // Topics that have not changed are the cached ones, shared.
        let cached = self.cached_metadata();
        let mut fresh = self.first_answer(Error::is_unreachable, |t| {
            self.with_link(Purpose::Metadata, t, |link| {
                link.request_with(
                    deadline,
                    |version| metadata_request(topics, version),
                    |d, version| decode_metadata(d, version, &cached),
                )
            })
        })?;
        drop(cached);
        // The broker list is always whole in a Metadata answer, so it replaces the cached one:
        // dead brokers drop out. A coordinator learnt from FindCoordinator is re-added by the
        // next lookup if it is missing. Only the topics the answer did not cover are kept, and
        // shared rather than copied.
        let mut cache = lock(&self.inner.metadata);
        if topics.is_some() {
            for (name, t) in &cache.topics {
                if !fresh.topics.contains_key(name) {
                    fresh.topics.insert(name.clone(), t.clone());
                }
            }
        }
        *cache = Arc::new(fresh);
        Ok(cache.clone())
    }

    /// Forgets a broker's connections (e.g. after `NOT_COORDINATOR`), so the next request
    /// reconnects. A connection with a request in flight is left to it (and dropped by its
    /// link if it breaks): waiting for a slow Produce here would stall the caller, the very
    /// thing connections by purpose are there to avoid.
    pub fn disconnect(&self, id: i32) {
        let links: Vec<_> = Purpose::ALL
            .iter()
            .filter_map(|p| lock(&self.inner.links).get(&(*p, Target::Broker(id))).cloned())
            .collect();
        for link in links {
            match link.try_lock() {
                Ok(mut link) => link.disconnect(),
                // See `lock`: the poison flag is noise here.
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().disconnect(),
                Err(std::sync::TryLockError::WouldBlock) => {}
            }
        }
    }

    /// Finds the coordinator of consumer group `group`, retrying while the broker says the
    /// coordinator is not available or still loading, until `default.api.timeout.ms`.
    pub fn find_coordinator(&self, group: &str) -> Result<Broker> {
        self.find_coordinator_by(group, crate::deadline::after(self.inner.api_timeout))
    }

    /// [`find_coordinator`](Self::find_coordinator), retrying until `deadline` instead, each
    /// request bounded by what is left.
    pub(crate) fn find_coordinator_by(&self, group: &str, deadline: Instant) -> Result<Broker> {
        self.retry_coordinator_errors(deadline, &format!("FindCoordinator({group})"), || {
            self.lookup_coordinator_within(group, Some(deadline))
        })
    }

    /// Runs `call` until it succeeds or fails for a reason other than the coordinator moving,
    /// loading or being unreachable, pausing `retry.backoff.ms` between tries; past `deadline`
    /// the last error becomes the retries timeout naming `what`.
    pub(crate) fn retry_coordinator_errors<T>(
        &self,
        deadline: Instant,
        what: &str,
        mut call: impl FnMut() -> Result<T>,
    ) -> Result<T> {
        let backoff = retry::Backoff::fixed(self.inner.retry_backoff);
        retry(
            deadline,
            backoff,
            || what.to_string(),
            || match call() {
                Err(e) if e.is_coordinator_transient() => {
                    log::debug!("{what}: {e}; retrying");
                    Ok(Step::Retry(e))
                }
                other => other.map(Step::Done),
            },
        )
    }

    /// One FindCoordinator attempt, without retries (for callers with their own loop, such as
    /// a heartbeat thread that must keep listening to its commands).
    pub fn lookup_coordinator(&self, group: &str) -> Result<Broker> {
        self.lookup_coordinator_within(group, None)
    }

    /// [`lookup_coordinator`](Self::lookup_coordinator), connecting and waiting no longer than
    /// until `deadline`.
    pub(crate) fn lookup_coordinator_by(&self, group: &str, deadline: Instant) -> Result<Broker> {
        self.lookup_coordinator_within(group, Some(deadline))
    }

    fn lookup_coordinator_within(&self, group: &str, deadline: Option<Instant>) -> Result<Broker> {
        let resp: FindCoordinatorResponse =
            self.send_any_within(Purpose::Coordinator, deadline, |version| {
                find_coordinator_request(group, version)
            })?;
        let b = coordinator_from(group, resp)?;
        self.remember_broker(&b);
        Ok(b)
    }

    fn remember_broker(&self, b: &Broker) {
        let mut cache = lock(&self.inner.metadata);
        if cache.brokers.get(&b.id) != Some(b) {
            // Topics are `Arc`s: this copies the broker list and the topic names, not the
            // partitions.
            let mut m = (**cache).clone();
            m.brokers.insert(b.id, b.clone());
            *cache = Arc::new(m);
        }
    }
}

/// A Metadata request for `topics` (all for `None`) at `version`. v0 has no way to say "no
/// topics" and means "all" with an empty list; from v1 null means all.
pub(crate) fn metadata_request(topics: Option<&[&str]>, version: i16) -> MetadataRequest {
    let list = topics.map(|ts| {
        ts.iter()
            .map(|t| MetadataRequestTopic {
                name: Some((*t).into()),
                ..Default::default()
            })
            .collect()
    });
    MetadataRequest {
        topics: if version == 0 {
            Some(list.unwrap_or_default())
        } else {
            list
        },
        // Auto-creation is a broker policy this client never asks for: topics come from admin
        // calls. Only v4+ has the field; below it the broker decides.
        allow_auto_topic_creation: version < 4,
        ..Default::default()
    }
}

/// A broker of a Metadata answer as the cache keeps it. A broker whose port is not a TCP port
/// (0, negative, above 65535) is left out with a warning rather than failing the whole answer:
/// the rest of the cluster stays usable, and that broker's partitions then look leaderless,
/// which every caller already retries after a refresh — as if the broker were unreachable,
/// which it is. Truncating the port instead would send requests to some other service's port.
fn broker_from(b: MetadataResponseBroker) -> Option<Broker> {
    let Some(port) = u16::try_from(b.port).ok().filter(|p| *p > 0) else {
        log::warn!(
            "metadata: broker {} advertises {}:{}, which is not a TCP port; ignoring it",
            b.node_id,
            b.host,
            b.port
        );
        return None;
    };
    Some(Broker {
        id: b.node_id,
        host: b.host.into(),
        port,
        rack: b.rack.map(Into::into),
    })
}

/// Shares equal broker-id lists between the partitions of one Metadata answer. A topic's
/// partitions have few distinct replica sets (their number is bounded by the ways to place
/// them on the brokers, and assignment cycles through far fewer), and an ISR is usually its
/// replica set: so a partition holds two pointers to shared lists instead of two allocations
/// of its own. The table stops growing at [`Self::MAX`] lists, so that an answer of all
/// distinct lists costs no more than unshared ones.
#[derive(Default)]
struct SharedLists(HashSet<Arc<[i32]>>);

impl SharedLists {
    const MAX: usize = 1 << 16;

    fn get(&mut self, ids: &[i32]) -> Arc<[i32]> {
        if let Some(shared) = self.0.get(ids) {
            return shared.clone();
        }
        let list: Arc<[i32]> = ids.into();
        if self.0.len() < Self::MAX {
            self.0.insert(list.clone());
        }
        list
    }
}

fn partition_from(p: MetadataResponsePartition, lists: &mut SharedLists) -> PartitionMetadata {
    let replicas = lists.get(&p.replica_nodes);
    let isr = if p.isr_nodes == p.replica_nodes {
        replicas.clone()
    } else {
        lists.get(&p.isr_nodes)
    };
    PartitionMetadata {
        partition: p.partition_index,
        leader: p.leader_id,
        leader_epoch: p.leader_epoch,
        replicas,
        isr,
        error: KafkaCode::from_code(p.error_code),
    }
}

/// The fewest bytes a partition takes in a Metadata answer (error, index, leader, epoch and
/// three empty lists), which bounds how many a frame can hold whatever count it announces.
const MIN_PARTITION_BYTES: usize = 2 + 4 + 4 + 4 + 3;

/// Reads a Metadata answer straight into the cache's form.
///
/// Decoding the generated [`MetadataResponse`] first would hold every partition whole (about
/// 120 bytes each, 3.5× what one takes on the wire) next to the frame and then next to the
/// converted cache: 6.4× the frame at the peak for one topic of 2 M partitions. Here only the
/// response's and the topics' own fields are read by hand — in the order and at the versions of
/// `schemas/MetadataResponse.json`, which a unit test checks against the generated decoder for
/// every version — while brokers and partitions are decoded by the generated code one at a
/// time and converted at once, so the peak is the frame plus the cache.
///
/// A topic whose every partition is as in `cached` (in the same order) is `cached`'s, shared:
/// a periodic refresh of an unchanged cluster then builds nothing, rather than a second copy
/// of the cache while the first is still in place.
fn decode_metadata(
    d: &mut Decoder<'_>,
    version: i16,
    cached: &Metadata,
) -> std::result::Result<Metadata, DecodeError> {
    if !MetadataResponse::VERSIONS.contains(version) {
        return Err(DecodeError::UnsupportedVersion {
            message: MetadataResponse::NAME,
            version,
        });
    }
    let flexible = MetadataResponse::FLEXIBLE_VERSIONS.contains(version);
    if version >= 3 {
        d.get_i32()?; // throttle_time_ms
    }
    let mut brokers = BTreeMap::new();
    for _ in 0..d.get_array_len(flexible)? {
        if let Some(b) = broker_from(MetadataResponseBroker::decode(d, version)?) {
            brokers.insert(b.id, b);
        }
    }
    let cluster_id = if version >= 2 {
        d.get_nullable_string(flexible)?.map(Into::into)
    } else {
        None
    };
    let controller_id = if version >= 1 { d.get_i32()? } else { -1 };
    let mut lists = SharedLists::default();
    let mut topics = BTreeMap::new();
    for _ in 0..d.get_array_len(flexible)? {
        let error = KafkaCode::from_code(d.get_i16()?);
        let name = if version >= 12 {
            d.get_nullable_string(flexible)?
        } else {
            Some(d.get_string(flexible)?)
        };
        let id = if version >= 10 { d.get_uuid()? } else { Uuid::NIL };
        let internal = version >= 1 && d.get_bool()?;
        let count = d.get_array_len(flexible)?;
        let first = d.clone();
        let mut same = name
            .as_ref()
            .and_then(|n| cached.topics.get(n.as_str()))
            .filter(|t| t.partitions.len() == count);
        if let Some(t) = same {
            for c in &t.partitions {
                if !unchanged(&MetadataResponsePartition::decode(d, version)?, c) {
                    same = None;
                    break;
                }
            }
        }
        let partitions = if same.is_some() {
            None
        } else {
            // From the first partition again, if some matched.
            *d = first;
            // Exact for an honest answer. The decoder has checked the count against the bytes
            // left; a partition takes at least MIN_PARTITION_BYTES of them, which bounds it
            // closer.
            let mut partitions = Vec::with_capacity(count.min(d.remaining() / MIN_PARTITION_BYTES));
            for _ in 0..count {
                partitions.push(partition_from(
                    MetadataResponsePartition::decode(d, version)?,
                    &mut lists,
                ));
            }
            // In place: a stable sort would allocate half the list again. Kafka numbers
            // partitions uniquely, so stability is of no use.
            if partitions.windows(2).any(|w| w[0].partition > w[1].partition) {
                partitions.sort_unstable_by_key(|p| p.partition);
            }
            Some(partitions)
        };
        if version >= 8 {
            d.get_i32()?; // topic_authorized_operations
        }
        skip_tagged_fields(d, flexible)?;
        let Some(name) = name else { continue };
        let topic = match (partitions, same) {
            (None, Some(t)) if (t.id, t.error, t.internal) == (id, error, internal) => t.clone(),
            (partitions, same) => {
                let name = String::from(name.as_str());
                let partitions = partitions
                    .or_else(|| same.map(|t| t.partitions.clone()))
                    .unwrap_or_default();
                Arc::new(TopicMetadata {
                    name,
                    id,
                    error,
                    internal,
                    partitions,
                })
            }
        };
        topics.insert(topic.name.clone(), topic);
    }
    if (8..=10).contains(&version) {
        d.get_i32()?; // cluster_authorized_operations
    }
    skip_tagged_fields(d, flexible)?;
    Ok(Metadata {
        cluster_id,
        controller_id,
        brokers,
        topics,
    })
}

/// Whether `p`, read from the wire, says what the cached `c` says.
fn unchanged(p: &MetadataResponsePartition, c: &PartitionMetadata) -> bool {
    p.partition_index == c.partition
        && p.leader_id == c.leader
        && p.leader_epoch == c.leader_epoch
        && p.error_code == c.error.code()
        && *p.replica_nodes == *c.replicas
        && *p.isr_nodes == *c.isr
}

/// Reads past a flexible structure's tagged fields, none of which the cache keeps.
fn skip_tagged_fields(d: &mut Decoder<'_>, flexible: bool) -> std::result::Result<(), DecodeError> {
    if flexible {
        for _ in 0..d.get_uvarint()? {
            d.get_uvarint()?; // tag
            let size = d.get_uvarint()? as usize;
            d.get_raw(size)?;
        }
    }
    Ok(())
}

/// The authorization error a Metadata answer holds for `topic` (`TOPIC_AUTHORIZATION_FAILED`:
/// the principal may not DESCRIBE it), if any. Such a topic comes back with no partitions, so
/// without this check a caller would wait for leaders that never appear.
pub(crate) fn topic_denied(meta: &Metadata, topic: &str) -> Option<Error> {
    let t = meta.topics.get(topic)?;
    Error::authorization(ApiKey::Metadata, t.error, Scope::topic(topic))
}

/// FindCoordinator for a group: v4+ batches keys (KIP-699), below one key per request.
pub(crate) fn find_coordinator_request(group: &str, version: i16) -> FindCoordinatorRequest {
    if version >= 4 {
        FindCoordinatorRequest {
            coordinator_keys: vec![group.into()],
            ..Default::default()
        }
    } else {
        FindCoordinatorRequest {
            key: group.into(),
            ..Default::default()
        }
    }
}

fn coordinator_from(group: &str, r: FindCoordinatorResponse) -> Result<Broker> {
    let (code, message, id, host, port) = match r.coordinators.into_iter().find(|c| c.key == group) {
        Some(c) => (c.error_code, c.error_message, c.node_id, c.host, c.port),
        None => (r.error_code, r.error_message, r.node_id, r.host, r.port),
    };
    let code = KafkaCode::from_code(code);
    if code.is_error() {
        let message = message.map(String::from).filter(|m| !m.is_empty());
        return Err(Error::from_code(
            ApiKey::FindCoordinator,
            code,
            Scope::group(group),
            message,
        ));
    }
    let port = u16::try_from(port)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| Error::InvalidBrokerAddress {
            id,
            host: host.to_string(),
            port,
        })?;
    Ok(Broker {
        id,
        host: host.into(),
        port,
        rack: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_is_send_sync_and_clone() {
        fn check<T: Send + Sync + Clone>() {}
        check::<Client>();
    }

    #[test]
    fn configuration_is_checked_before_any_network_call() {
        let e = Client::builder().build().unwrap_err();
        assert!(
            matches!(
                e,
                Error::Config {
                    property: "bootstrap.servers",
                    ..
                }
            ),
            "{e}"
        );
        let e = Client::builder()
            .bootstrap_servers("localhost")
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("not host:port"), "{e}");
        let e = Client::builder().bootstrap_servers("h:0").build().unwrap_err();
        assert!(e.to_string().contains("1..=65535"), "{e}");
        let e = Client::builder()
            .bootstrap_servers("h:1")
            .request_timeout(Duration::ZERO)
            .build()
            .unwrap_err();
        assert!(matches!(
            e,
            Error::Config {
                property: "request.timeout.ms",
                ..
            }
        ));
        let e = Client::builder()
            .bootstrap_servers("h:1")
            .reconnect_backoff(Duration::from_secs(2))
            .build()
            .unwrap_err();
        assert!(matches!(
            e,
            Error::Config {
                property: "reconnect.backoff.max.ms",
                ..
            }
        ));
        let e = Client::builder()
            .bootstrap_servers("h:1")
            .max_api_version(ApiKey::Fetch, -1)
            .build()
            .unwrap_err();
        assert!(matches!(
            e,
            Error::Config {
                property: "max_api_version",
                ..
            }
        ));
        let too_long = Duration::from_millis(i32::MAX as u64 + 1);
        for t in [too_long, Duration::MAX, Duration::from_secs(u64::MAX)] {
            let e = Client::builder()
                .bootstrap_servers("h:1")
                .request_timeout(t)
                .build()
                .unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::Config {
                        property: "request.timeout.ms",
                        ..
                    }
                ),
                "{e}"
            );
        }
        // Settings Kafka types as long (and the api timeout, a bound on retrying) saturate.
        assert!(Client::builder()
            .bootstrap_servers("h:1")
            .request_timeout(Duration::from_millis(i32::MAX as u64))
            .connect_timeout(Duration::MAX)
            .api_timeout(Duration::MAX)
            .retry_backoff(Duration::MAX)
            .reconnect_backoff(Duration::MAX)
            .reconnect_backoff_max(Duration::MAX)
            .build()
            .is_ok());
        // An unresolvable host is fine at build time: nothing touches the network yet.
        assert!(Client::builder()
            .bootstrap_servers("no-such-host.invalid:9092, b:9093")
            .build()
            .is_ok());
    }

    #[test]
    fn bootstrap_addresses_are_host_port_only() {
        let problem = |s: &str| match Client::builder().bootstrap_servers(s).build() {
            Ok(_) => None,
            Err(Error::Config {
                property: "bootstrap.servers",
                problem,
            }) => Some(problem),
            Err(e) => panic!("{e}"),
        };
        for ok in [
            "[::1]:9092",
            "127.0.0.1:9092",
            "kafka-1.eu_west.example:9092",
            "a:1, [fe80::1]:2",
        ] {
            assert_eq!(problem(ok), None, "{ok}");
        }
        for scheme in ["http://h:9092", "PLAINTEXT://h:9092", "h:9092/", "h/x:9092"] {
            assert!(problem(scheme).unwrap().contains("scheme or path"), "{scheme}");
        }
        for bad in ["::1:9092", "[::1:9092", "[zz]:9092", "h h:9092", "h@x:9092"] {
            assert!(problem(bad).is_some(), "{bad}");
        }
    }

    /// The cache's view of `r` as a broker would send it: encoded at `version`, then read by
    /// [`decode_metadata`] into an empty cache.
    fn metadata_at(r: &MetadataResponse, version: i16) -> Metadata {
        metadata_over(r, version, &Metadata::default())
    }

    /// [`metadata_at`] with `cached` in the cache.
    fn metadata_over(r: &MetadataResponse, version: i16, cached: &Metadata) -> Metadata {
        let frame = bytes::Bytes::from(r.to_bytes(version).unwrap());
        let mut d = Decoder::new(&frame);
        let m = decode_metadata(&mut d, version, cached).unwrap();
        assert_eq!(d.remaining(), 0, "v{version}: bytes left over");
        m
    }

    fn metadata_from(r: MetadataResponse) -> Metadata {
        metadata_at(&r, ApiKey::Metadata.versions().max)
    }

    /// What the cache made of an answer before [`decode_metadata`]: the generated decoder's
    /// whole response, converted field by field. The reference the streaming read must match.
    fn reference(r: MetadataResponse) -> Metadata {
        let mut lists = SharedLists::default();
        Metadata {
            cluster_id: r.cluster_id.map(Into::into),
            controller_id: r.controller_id,
            brokers: r
                .brokers
                .into_iter()
                .filter_map(broker_from)
                .map(|b| (b.id, b))
                .collect(),
            topics: r
                .topics
                .into_iter()
                .filter_map(|t| {
                    let name: String = t.name?.into();
                    let mut partitions: Vec<PartitionMetadata> = t
                        .partitions
                        .into_iter()
                        .map(|p| partition_from(p, &mut lists))
                        .collect();
                    partitions.sort_by_key(|p| p.partition);
                    let topic = TopicMetadata {
                        name: name.clone(),
                        id: t.topic_id,
                        error: KafkaCode::from_code(t.error_code),
                        internal: t.is_internal,
                        partitions,
                    };
                    Some((name, Arc::new(topic)))
                })
                .collect(),
        }
    }

    #[test]
    fn metadata_read_from_the_frame_matches_the_generated_decoder_in_every_version() {
        use crate::protocol::{Sample, SampleGen};
        let mut partitions = 0;
        for version in ApiKey::Metadata.versions().min..=ApiKey::Metadata.versions().max {
            for seed in 0..200u64 {
                let mut r =
                    MetadataResponse::sample(&mut SampleGen::new(seed ^ ((version as u64) << 48)), version);
                for t in &mut r.topics {
                    // Unique indexes, in descending order: the sort has work to do, and its
                    // result does not depend on stability.
                    let n = t.partitions.len() as i32;
                    for (i, p) in t.partitions.iter_mut().enumerate() {
                        p.partition_index = n - i as i32;
                    }
                    partitions += t.partitions.len();
                }
                let frame = bytes::Bytes::from(r.to_bytes(version).unwrap());
                let generated = MetadataResponse::decode(&mut Decoder::new(&frame), version).unwrap();
                assert_eq!(
                    metadata_at(&r, version),
                    reference(generated),
                    "v{version} seed {seed}"
                );
            }
        }
        assert!(partitions > 1000, "the samples had only {partitions} partitions");
    }

    #[test]
    fn a_refresh_shares_the_cached_topics_that_have_not_changed() {
        use crate::protocol::messages::metadata_response::MetadataResponseTopic;
        let topic = |name: &str, leaders: &[i32]| MetadataResponseTopic {
            name: Some(name.into()),
            topic_id: Uuid([name.len() as u8; 16]),
            partitions: leaders
                .iter()
                .enumerate()
                .map(|(i, &leader)| MetadataResponsePartition {
                    partition_index: i as i32,
                    leader_id: leader,
                    replica_nodes: [1, 2].into(),
                    isr_nodes: [1, 2].into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let answer = |topics: Vec<MetadataResponseTopic>| MetadataResponse {
            topics,
            ..Default::default()
        };
        let v = ApiKey::Metadata.versions().max;
        let first = metadata_at(&answer(vec![topic("a", &[1, 2, 1]), topic("bb", &[2, 1])]), v);
        let again = answer(vec![topic("a", &[1, 2, 1]), topic("bb", &[2, 2])]);
        let second = metadata_over(&again, v, &first);
        // Each read is what an empty cache would make of it.
        assert_eq!(second, metadata_at(&again, v));
        assert!(Arc::ptr_eq(&first.topics["a"], &second.topics["a"]));
        // One leader moved in "bb" (its last partition): a topic of its own.
        assert!(!Arc::ptr_eq(&first.topics["bb"], &second.topics["bb"]));
        assert_eq!(second.topics["bb"].partitions[1].leader, 2);
        // The same partitions under a topic-level change, in another order, or fewer of them.
        let mut error = topic("a", &[1, 2, 1]);
        error.error_code = KafkaCode::TopicAuthorizationFailed.code();
        let mut reversed = topic("a", &[1, 2, 1]);
        reversed.partitions.reverse();
        let shorter = topic("a", &[1, 2]);
        for t in [error, reversed, shorter] {
            let again = answer(vec![t]);
            let second = metadata_over(&again, v, &first);
            assert_eq!(second, metadata_at(&again, v));
            assert!(!Arc::ptr_eq(&first.topics["a"], &second.topics["a"]));
        }
        // Against every version and random answers, reading over a cache changes nothing.
        use crate::protocol::{Sample, SampleGen};
        for version in ApiKey::Metadata.versions().min..=v {
            for seed in 0..50u64 {
                let r = MetadataResponse::sample(&mut SampleGen::new(seed), version);
                let cached = metadata_at(&r, version);
                assert_eq!(
                    metadata_over(&r, version, &cached),
                    cached,
                    "v{version} seed {seed}"
                );
            }
        }
    }

    #[test]
    fn a_cached_partition_is_small() {
        // Millions of these can be cached; the generated struct it replaces is far larger.
        assert_eq!(std::mem::size_of::<PartitionMetadata>(), 48);
        assert!(std::mem::size_of::<MetadataResponsePartition>() >= 100);
    }

    #[test]
    fn metadata_shares_equal_broker_lists() {
        use crate::protocol::messages::metadata_response::MetadataResponseTopic;
        let partition = |i: i32, replicas: &[i32], isr: &[i32]| MetadataResponsePartition {
            partition_index: i,
            replica_nodes: replicas.into(),
            isr_nodes: isr.into(),
            ..Default::default()
        };
        let m = metadata_from(MetadataResponse {
            topics: vec![MetadataResponseTopic {
                name: Some("t".into()),
                partitions: vec![
                    partition(2, &[1, 2], &[1, 2]),
                    partition(0, &[1, 2], &[1]),
                    partition(1, &[2, 1], &[1]),
                ],
                ..Default::default()
            }],
            ..Default::default()
        });
        let p = &m.topics["t"].partitions;
        assert_eq!(p.iter().map(|p| p.partition).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!((&*p[0].replicas, &*p[0].isr), (&[1, 2][..], &[1][..]));
        assert_eq!((&*p[1].replicas, &*p[1].isr), (&[2, 1][..], &[1][..]));
        assert!(Arc::ptr_eq(&p[0].replicas, &p[2].replicas));
        assert!(Arc::ptr_eq(&p[2].replicas, &p[2].isr));
        assert!(Arc::ptr_eq(&p[0].isr, &p[1].isr));
        // Past the table's size, lists are still right, only no longer shared.
        let mut lists = SharedLists::default();
        for i in 0..SharedLists::MAX as i32 {
            lists.get(&[i]);
        }
        let (a, b) = (lists.get(&[-1]), lists.get(&[-1]));
        assert_eq!((&*a, &*b), (&[-1][..], &[-1][..]));
        assert!(!Arc::ptr_eq(&a, &b));
        assert!(Arc::ptr_eq(&lists.get(&[7]), &lists.get(&[7])));
    }

    #[test]
    fn brokers_with_ports_outside_tcp_are_left_out_of_metadata() {
        use crate::protocol::messages::metadata_response::MetadataResponseBroker;
        let broker = |id: i32, port: i32| MetadataResponseBroker {
            node_id: id,
            host: "h".into(),
            port,
            ..Default::default()
        };
        let m = metadata_from(MetadataResponse {
            brokers: vec![
                broker(1, 9092),
                broker(2, 65536 + 9092),
                broker(3, -1),
                broker(4, 0),
            ],
            ..Default::default()
        });
        assert_eq!(m.brokers.keys().copied().collect::<Vec<_>>(), vec![1]);
        assert_eq!(m.brokers[&1].port, 9092);
        let coordinator = |port: i32| {
            coordinator_from(
                "g",
                FindCoordinatorResponse {
                    node_id: 1,
                    host: "h".into(),
                    port,
                    ..Default::default()
                },
            )
        };
        assert_eq!(coordinator(9092).unwrap().port, 9092);
        for port in [0, -1, 65536 + 9092] {
            assert!(
                matches!(coordinator(port), Err(Error::InvalidBrokerAddress { .. })),
                "{port}"
            );
        }
    }

    #[test]
    fn a_denied_group_or_topic_is_an_authorization_error_naming_it() {
        use crate::protocol::messages::find_coordinator_response::Coordinator;
        use crate::protocol::messages::metadata_response::MetadataResponseTopic;
        use crate::Resource;
        // FindCoordinator v4+ answers per key; before, at the top level.
        let denied = KafkaCode::GroupAuthorizationFailed.code();
        let batched = FindCoordinatorResponse {
            coordinators: vec![Coordinator {
                key: "g".into(),
                node_id: -1,
                port: -1,
                error_code: denied,
                error_message: Some("".into()),
                ..Default::default()
            }],
            ..Default::default()
        };
        let old = FindCoordinatorResponse {
            error_code: denied,
            error_message: Some("Group authorization failed.".into()),
            ..Default::default()
        };
        for (r, message) in [(batched, None), (old, Some("Group authorization failed."))] {
            match coordinator_from("g", r) {
                Err(Error::Authorization {
                    api: ApiKey::FindCoordinator,
                    code: KafkaCode::GroupAuthorizationFailed,
                    resource: Resource::Group(g),
                    message: m,
                }) => assert_eq!((g.as_str(), m.as_deref()), ("g", message)),
                other => panic!("{other:?}"),
            }
        }
        // Metadata: a topic the principal may not describe comes back with the code and no
        // partitions.
        let mut r = MetadataResponse::default();
        r.topics.push(MetadataResponseTopic {
            name: Some("t".into()),
            error_code: KafkaCode::TopicAuthorizationFailed.code(),
            ..Default::default()
        });
        r.topics.push(MetadataResponseTopic {
            name: Some("gone".into()),
            error_code: KafkaCode::UnknownTopicOrPartition.code(),
            ..Default::default()
        });
        let m = metadata_from(r);
        let e = topic_denied(&m, "t").unwrap();
        assert!(
            matches!(&e, Error::Authorization { api: ApiKey::Metadata, resource: Resource::Topic(t), .. } if t == "t"),
            "{e:?}"
        );
        assert!(topic_denied(&m, "gone").is_none());
        assert!(topic_denied(&m, "unasked").is_none());
    }

    #[test]
    fn properties_set_the_same_settings_as_the_setters() {
        let b = Client::builder()
            .property("bootstrap.servers", "h:9093")
            .unwrap()
            .property("request.timeout.ms", " 5000 ")
            .unwrap()
            .property("security.protocol", "ssl")
            .unwrap()
            .property("ssl.endpoint.identification.algorithm", "")
            .unwrap();
        assert_eq!(b.bootstrap, "h:9093");
        assert_eq!(b.conn.request_timeout, Duration::from_secs(5));
        assert_eq!(b.security_protocol, SecurityProtocol::Ssl);
        assert_eq!(b.tls.endpoint_identification, EndpointIdentification::None);
        let e = Client::builder()
            .property("request.timeout.ms", "5s")
            .unwrap_err();
        assert!(e.to_string().contains("request.timeout.ms"), "{e}");
        let e = Client::builder().property("ssl.cafile", "x").unwrap_err();
        assert!(e.to_string().contains("ssl.cafile"), "{e}");
    }

    #[test]
    fn sasl_settings_by_name_and_from_a_jaas_config() {
        let jaas = r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="al\"ice-secret";"#;
        let b = Client::builder()
            .property("bootstrap.servers", "h:9093")
            .unwrap()
            .property("security.protocol", "SASL_SSL")
            .unwrap()
            .property("sasl.mechanism", "SCRAM-SHA-512")
            .unwrap()
            .property("sasl.jaas.config", jaas)
            .unwrap();
        let m = b.sasl.mechanism().unwrap();
        assert_eq!(m.name(), "SCRAM-SHA-512");
        assert!(
            matches!(&m, Mechanism::ScramSha512 { username, password } if username == "alice" && password.expose() == "al\"ice-secret")
        );
        let debug = format!("{b:?} {m:?}");
        assert!(debug.contains("alice") && !debug.contains("secret"), "{debug}");
        let e = Client::builder()
            .property("sasl.jaas.config", "com.example.Krb5LoginModule required;")
            .unwrap_err();
        assert!(e.to_string().contains("PlainLoginModule"), "{e}");
        let e = Client::builder()
            .property(
                "sasl.jaas.config",
                "x.PlainLoginModule required username=\"u\" passwd=\"hunter2\";",
            )
            .unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
        // SASL without a mechanism, or without credentials, fails at build.
        let e = Client::builder()
            .bootstrap_servers("h:1")
            .security_protocol(SecurityProtocol::SaslPlaintext)
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("GSSAPI"), "{e}");
        let e = Client::builder()
            .bootstrap_servers("h:1")
            .security_protocol(SecurityProtocol::SaslPlaintext)
            .sasl_mechanism("PLAIN")
            .sasl_username("u")
            .build()
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::Config {
                    property: "sasl.password",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn metadata_requests_per_version() {
        assert_eq!(metadata_request(None, 0).topics, Some(vec![]));
        assert_eq!(metadata_request(None, 1).topics, None);
        let r = metadata_request(Some(&["a"]), 12);
        assert_eq!(r.topics.unwrap()[0].name.as_deref(), Some("a"));
        assert!(!metadata_request(None, 4).allow_auto_topic_creation);
        // Every version encodes: no field is set that the version lacks.
        for v in 0..=ApiKey::Metadata.versions().max {
            use crate::protocol::Message;
            metadata_request(Some(&["a"]), v).to_bytes(v).unwrap();
            find_coordinator_request("g", v.min(ApiKey::FindCoordinator.versions().max))
                .to_bytes(v.min(ApiKey::FindCoordinator.versions().max))
                .unwrap();
        }
    }
}
