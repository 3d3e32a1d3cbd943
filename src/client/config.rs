//! Client settings, with Kafka's defaults, validated before any network call: the
//! [`ClientConfig`] a [`ClientBuilder`](super::ClientBuilder) fills, the `sasl.*` settings, and
//! the parsing of `bootstrap.servers` and of a Java `sasl.jaas.config`.

use crate::error::{Error, Result};
use crate::net::sasl::{Mechanism, Secret};
use crate::net::{ConnectionConfig, SecurityProtocol, TlsSettings};
use crate::protocol::ApiKey;
use std::time::Duration;

/// A client's settings; see [`ClientBuilder`](super::ClientBuilder) for each one's Kafka
/// property and default.
#[derive(Debug, Clone)]
pub(crate) struct ClientConfig {
    /// `bootstrap.servers` as given; [`validate`](Self::validate) parses it.
    pub bootstrap: String,
    /// `client.id`, the timeouts, the frame limit and the version caps. Its `tls` and `sasl`
    /// stay `None` here: [`validate`](Self::validate) makes them from the settings below.
    pub conn: ConnectionConfig,
    pub retry_backoff: Duration,
    pub reconnect_backoff: Duration,
    pub reconnect_backoff_max: Duration,
    pub api_timeout: Duration,
    pub security_protocol: SecurityProtocol,
    pub tls: TlsSettings,
    pub sasl: SaslSettings,
}

/// What a valid [`ClientConfig`] resolves to: the bootstrap addresses, and the connection
/// settings with the TLS configuration and SASL mechanism made.
#[derive(Debug)]
pub(crate) struct Resolved {
    pub bootstrap: Vec<String>,
    pub conn: ConnectionConfig,
}

impl Default for ClientConfig {
    /// The Java client's defaults (`bootstrap.servers` empty, which
    /// [`validate`](Self::validate) refuses).
    fn default() -> Self {
        ClientConfig {
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

impl ClientConfig {
    /// Checks every setting against Kafka's rules, without touching the network, and resolves
    /// them. Certificates and keys are read here, so that a missing file fails before any
    /// connection; the SASL mechanism is made and checked here too.
    pub fn validate(&self) -> Result<Resolved> {
        let bootstrap = parse_bootstrap(&self.bootstrap)?;
        let mut conn = self.conn.clone();
        conn.sasl = if self.security_protocol.uses_sasl() {
            Some(self.sasl.mechanism()?)
        } else {
            None
        };
        conn.tls = if self.security_protocol.uses_tls() {
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
        positive("request.timeout.ms", conn.request_timeout)?;
        crate::deadline::check_int_ms("request.timeout.ms", conn.request_timeout)?;
        positive("socket.connection.setup.timeout.ms", conn.connect_timeout)?;
        positive("default.api.timeout.ms", self.api_timeout)?;
        if self.reconnect_backoff_max < self.reconnect_backoff {
            return Err(Error::Config {
                property: "reconnect.backoff.max.ms",
                problem: "must not be below reconnect.backoff.ms".into(),
            });
        }
        if conn.max_response_size < 1024 {
            return Err(Error::Config {
                property: "max_response_size",
                problem: "must be at least 1024 bytes".into(),
            });
        }
        for (&key, &cap) in &conn.version_caps {
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
        Ok(Resolved { bootstrap, conn })
    }
}

/// The `sasl.*` settings as given; [`SaslSettings::mechanism`] makes the mechanism at build.
#[derive(Debug, Clone, Default)]
pub(crate) struct SaslSettings {
    /// A mechanism given whole ([`ClientBuilder::sasl`](super::ClientBuilder::sasl)).
    pub mechanism: Option<Mechanism>,
    /// `sasl.mechanism` by name, with `sasl.username` / `sasl.password`.
    pub name: Option<String>,
    pub username: Option<String>,
    pub password: Option<Secret>,
}

impl SaslSettings {
    pub fn mechanism(&self) -> Result<Mechanism> {
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

/// The username and password of a Java `sasl.jaas.config` for `PlainLoginModule` or
/// `ScramLoginModule` (`… required username="u" password="p";`), as an operator's existing
/// `client.properties` has them.
pub(crate) fn jaas_credentials(jaas: &str) -> Result<(String, Secret)> {
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

/// The `bootstrap.servers` list, each entry checked to be `host:port`, so that a URL or a typo
/// fails at build rather than later as a broker that cannot be reached.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Client;

    #[test]
    fn defaults_are_kafkas_and_valid_once_bootstrap_is_set() {
        let c = ClientConfig::default();
        assert_eq!(c.conn.client_id.as_deref(), Some("kafka-group"));
        assert_eq!(c.conn.request_timeout, Duration::from_secs(30));
        assert_eq!(c.conn.connect_timeout, Duration::from_secs(10));
        assert_eq!(c.retry_backoff, Duration::from_millis(100));
        assert_eq!(c.reconnect_backoff, Duration::from_millis(50));
        assert_eq!(c.reconnect_backoff_max, Duration::from_secs(1));
        assert_eq!(c.api_timeout, Duration::from_secs(60));
        assert_eq!(c.security_protocol, SecurityProtocol::Plaintext);
        assert!(matches!(
            c.validate(),
            Err(Error::Config {
                property: "bootstrap.servers",
                ..
            })
        ));
        let r = ClientConfig {
            bootstrap: " a:1, b:2 ".into(),
            ..c
        }
        .validate()
        .unwrap();
        assert_eq!(r.bootstrap, ["a:1", "b:2"]);
        assert!(r.conn.tls.is_none() && r.conn.sasl.is_none());
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
}
