//! [`ClientBuilder`]: one setter per Kafka property over a [`ClientConfig`], checked in
//! [`build`](ClientBuilder::build) before any network call.

use super::config::ClientConfig;
use super::Client;
use crate::error::Result;
use crate::net::sasl::{Mechanism, Secret};
use crate::net::wire::{Dialer, Tcp};
use crate::net::{EndpointIdentification, SecurityProtocol};
use crate::properties::Setting;
use crate::protocol::ApiKey;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Builds a [`Client`]; every setter names the Kafka property it mirrors and its default.
#[derive(Debug, Clone, Default)]
pub struct ClientBuilder {
    config: ClientConfig,
}

impl ClientBuilder {
    /// `bootstrap.servers`: comma-separated `host:port` list (IPv6 as `[::1]:9092`), without a
    /// scheme or path. Required; no default.
    pub fn bootstrap_servers(mut self, servers: impl Into<String>) -> Self {
        self.config.bootstrap = servers.into();
        self
    }

    /// `client.id`, sent with every request. Default: `kafka-group`.
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.config.conn.client_id = Some(id.into());
        self
    }

    /// `request.timeout.ms`: how long to wait for each response; above zero and at most
    /// `i32::MAX` ms (about 24.8 days), as Kafka's own config requires. Default: 30 s.
    pub fn request_timeout(mut self, t: Duration) -> Self {
        self.config.conn.request_timeout = t;
        self
    }

    /// `socket.connection.setup.timeout.ms`: TCP connect timeout per address; above zero (any
    /// larger value, up to `Duration::MAX`, is bounded by the OS's own connect timeout).
    /// Default: 10 s.
    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.config.conn.connect_timeout = t;
        self
    }

    /// `default.api.timeout.ms`: total time for operations that retry, such as finding a
    /// coordinator; above zero. `Duration::MAX` retries without a limit (each request is still
    /// bounded by `request.timeout.ms`). Default: 60 s.
    pub fn api_timeout(mut self, t: Duration) -> Self {
        self.config.api_timeout = t;
        self
    }

    /// `retry.backoff.ms`: pause between retries of a failed request; never slept past the
    /// deadline of the call retrying. Members, consumers and producers made from this client
    /// use it too, unless their own builder sets `retry_backoff`. Default: 100 ms.
    pub fn retry_backoff(mut self, t: Duration) -> Self {
        self.config.retry_backoff = t;
        self
    }

    /// `reconnect.backoff.ms`: first pause before reconnecting to a broker. Default: 50 ms.
    pub fn reconnect_backoff(mut self, t: Duration) -> Self {
        self.config.reconnect_backoff = t;
        self
    }

    /// `reconnect.backoff.max.ms`: the reconnect pause doubles per failure up to this; at
    /// least `reconnect.backoff.ms`. A call whose deadline comes before the next attempt fails
    /// at once instead of sleeping. Default: 1 s.
    pub fn reconnect_backoff_max(mut self, t: Duration) -> Self {
        self.config.reconnect_backoff_max = t;
        self
    }

    /// Largest response frame accepted, in bytes (no Kafka property; guards against garbage
    /// lengths such as a TLS port's answer); at least 1024. Default: 100 MiB.
    pub fn max_response_size(mut self, bytes: usize) -> Self {
        self.config.conn.max_response_size = bytes;
        self
    }

    /// Pins `api` to at most `version` (no Kafka property; for working around broker bugs).
    /// Default: no cap.
    pub fn max_api_version(mut self, api: ApiKey, version: i16) -> Self {
        self.config.conn.version_caps.insert(api.key(), version);
        self
    }

    /// `security.protocol`: how every connection of the client (bootstrap, metadata, the
    /// coordinator, heartbeats, fetches, produce, admin) talks to the brokers. With `Ssl` or
    /// `SaslSsl`, connections use TLS 1.2 or 1.3 (rustls), verifying the broker's certificate
    /// against the system's trust store or `ssl.ca.location`, and its host name unless
    /// `ssl.endpoint.identification.algorithm` is `none`. Default:
    /// [`SecurityProtocol::Plaintext`].
    pub fn security_protocol(mut self, p: SecurityProtocol) -> Self {
        self.config.security_protocol = p;
        self
    }

    /// `ssl.ca.location`: a PEM file of the CA certificates to trust, in place of the system's
    /// trust store (a cluster with its own CA, such as Aiven's project CA). Default: the system's
    /// store.
    pub fn ssl_ca_location(mut self, path: impl Into<PathBuf>) -> Self {
        self.config.tls.ca_location = Some(path.into());
        self
    }

    /// `ssl.certificate.location`: a PEM file of the client's certificate chain, for listeners
    /// that authenticate clients by certificate (mTLS; `ssl.client.auth=required`). Needs
    /// `ssl.key.location`. Default: none.
    pub fn ssl_certificate_location(mut self, path: impl Into<PathBuf>) -> Self {
        self.config.tls.certificate_location = Some(path.into());
        self
    }

    /// `ssl.key.location`: a PEM file of the client certificate's private key: PKCS#8, PKCS#1
    /// or SEC1, or encrypted PKCS#8 (`BEGIN ENCRYPTED PRIVATE KEY`, as `openssl pkcs8 -topk8`
    /// writes) with [`ssl_key_password`](Self::ssl_key_password). Default: none.
    pub fn ssl_key_location(mut self, path: impl Into<PathBuf>) -> Self {
        self.config.tls.key_location = Some(path.into());
        self
    }

    /// `ssl.key.password`: the password of an encrypted `ssl.key.location` (PBES2: PBKDF2 or
    /// scrypt with AES-CBC); never printed by `Debug` or in errors. Default: none.
    pub fn ssl_key_password(mut self, password: impl Into<Secret>) -> Self {
        self.config.tls.key_password = Some(password.into());
        self
    }

    /// Trusts the root certificates compiled into the crate (no Kafka property; Mozilla's, from
    /// `webpki-roots`, Cargo feature `bundled-roots`) instead of the system's trust store, for machines that
    /// have none (a scratch container). `ssl.ca.location`, when set, still takes precedence.
    /// Without the feature, `build()` returns [`Error::Config`](crate::Error::Config). Default: `false`, the system's
    /// store.
    pub fn ssl_ca_bundled(mut self, bundled: bool) -> Self {
        self.config.tls.bundled_roots = bundled;
        self
    }

    /// `ssl.endpoint.identification.algorithm`: [`EndpointIdentification::Https`] checks that
    /// the broker's certificate names the host connected to (the bootstrap address, then each
    /// broker's advertised host); `None` skips only that check. Default:
    /// [`EndpointIdentification::Https`].
    pub fn ssl_endpoint_identification_algorithm(mut self, a: EndpointIdentification) -> Self {
        self.config.tls.endpoint_identification = a;
        self
    }

    /// `sasl.mechanism` with its credentials (`sasl.username`, `sasl.password`, or for
    /// OAUTHBEARER the token source), for `security.protocol` SASL_SSL or
    /// SASL_PLAINTEXT: `Mechanism::Plain`, `ScramSha256`, `ScramSha512` (username and
    /// password) or `OAuthBearer` (a [`TokenProvider`](crate::net::sasl::TokenProvider) the
    /// application implements, asked for a token before each authentication). Default: none.
    pub fn sasl(mut self, mechanism: Mechanism) -> Self {
        self.config.sasl.mechanism = Some(mechanism);
        self
    }

    // `sasl.mechanism`, `sasl.username` and `sasl.password` by name, from `property`: one public
    // setter per property, `sasl`, whose `Mechanism` carries the credentials.
    fn sasl_mechanism(mut self, name: impl Into<String>) -> Self {
        self.config.sasl.name = Some(name.into());
        self
    }

    fn sasl_username(mut self, username: impl Into<String>) -> Self {
        self.config.sasl.username = Some(username.into());
        self
    }

    fn sasl_password(mut self, password: impl Into<Secret>) -> Self {
        self.config.sasl.password = Some(password.into());
        self
    }

    /// Sets a setting by its Kafka property name, as found in a `client.properties` file, so
    /// that one file configures the whole client: give each of its entries to this builder and
    /// to the [member](crate::MemberBuilder::property),
    /// [consumer](crate::ConsumerBuilder::property) or
    /// [producer](crate::ProducerBuilder::property) builder, and each takes its own.
    ///
    /// This builder's: `bootstrap.servers`, `client.id`, `request.timeout.ms`,
    /// `socket.connection.setup.timeout.ms`, `default.api.timeout.ms`, `retry.backoff.ms`,
    /// `reconnect.backoff.ms`, `reconnect.backoff.max.ms`, `security.protocol`,
    /// `ssl.ca.location`, `ssl.certificate.location`, `ssl.key.location`, `ssl.key.password`,
    /// `ssl.endpoint.identification.algorithm` (`https`, or empty/`none`, as Java's empty value
    /// means), `sasl.mechanism`, `sasl.username`, `sasl.password`, `sasl.jaas.config`. A
    /// consumer's or producer's property (`group.id`, `acks` …) and Java's serializer class
    /// names are skipped here.
    ///
    /// A name no builder knows is an [`Error::UnknownProperty`](crate::Error::UnknownProperty)
    /// naming it (and the nearest known name, for a typo); a value that does not parse is an
    /// [`Error::Config`](crate::Error::Config) naming its property. Either way the builder is left as it was, so a caller can report the entry
    /// and go on.
    pub fn property(&mut self, key: &str, value: &str) -> Result<&mut Self> {
        let setting = crate::properties::parse(key, value)?;
        *self = std::mem::take(self).apply(key, setting);
        Ok(self)
    }

    fn apply(self, key: &str, setting: Setting) -> Self {
        match setting {
            Setting::BootstrapServers(v) => self.bootstrap_servers(v),
            Setting::ClientId(v) => self.client_id(v),
            Setting::RequestTimeout(t) => self.request_timeout(t),
            Setting::ConnectTimeout(t) => self.connect_timeout(t),
            Setting::ApiTimeout(t) => self.api_timeout(t),
            Setting::RetryBackoff(t) => self.retry_backoff(t),
            Setting::ReconnectBackoff(t) => self.reconnect_backoff(t),
            Setting::ReconnectBackoffMax(t) => self.reconnect_backoff_max(t),
            Setting::SecurityProtocol(p) => self.security_protocol(p),
            Setting::SslCaLocation(v) => self.ssl_ca_location(v),
            Setting::SslCertificateLocation(v) => self.ssl_certificate_location(v),
            Setting::SslKeyLocation(v) => self.ssl_key_location(v),
            Setting::SslKeyPassword(v) => self.ssl_key_password(v),
            Setting::SslEndpointIdentification(a) => self.ssl_endpoint_identification_algorithm(a),
            Setting::SaslMechanism(v) => self.sasl_mechanism(v),
            Setting::SaslUsername(v) => self.sasl_username(v),
            Setting::SaslPassword(v) => self.sasl_password(v),
            Setting::SaslJaasConfig { username, password } => {
                self.sasl_username(username).sasl_password(password)
            }
            _ => {
                log::debug!("{key}: not a client setting; skipped by the client builder");
                self
            }
        }
    }

    /// Validates the configuration (without touching the network) and builds the client.
    pub fn build(self) -> Result<Client> {
        self.build_with(Arc::new(Tcp))
    }

    /// [`build`](Self::build) with every connection opened by `dialer` (a scripted broker in
    /// unit tests).
    pub(crate) fn build_with(self, dialer: Arc<dyn Dialer>) -> Result<Client> {
        let resolved = self.config.validate()?;
        Ok(Client::new(&self.config, resolved, dialer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn an_unknown_property_is_named_in_the_error() {
        let e = Client::builder()
            .property("ssl.keystore.location", "/etc/kafka/client.jks")
            .unwrap_err();
        assert!(
            matches!(&e, Error::UnknownProperty { property } if property == "ssl.keystore.location"),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(
            text.contains("`ssl.keystore.location`") && !text.contains("(property name)"),
            "{text}"
        );
    }

    #[test]
    fn a_java_properties_file_sets_the_client_settings_and_skips_the_others() {
        let mut b = Client::builder();
        for (k, v) in crate::properties::JAVA_FILE {
            b.property(k, v).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
        }
        assert_eq!(b.config.bootstrap, "h:9092");
        let e = b.property("bootstrap.server", "other:9092").unwrap_err();
        assert!(e.to_string().contains("did you mean `bootstrap.servers`?"), "{e}");
        assert_eq!(b.config.bootstrap, "h:9092", "left as it was");
        b.build().unwrap();
    }

    #[test]
    fn properties_set_the_same_settings_as_the_setters() {
        let mut b = Client::builder();
        b.property("bootstrap.servers", "h:9093")
            .unwrap()
            .property("request.timeout.ms", " 5000 ")
            .unwrap()
            .property("security.protocol", "ssl")
            .unwrap()
            .property("ssl.endpoint.identification.algorithm", "")
            .unwrap();
        assert_eq!(b.config.bootstrap, "h:9093");
        assert_eq!(b.config.conn.request_timeout, Duration::from_secs(5));
        assert_eq!(b.config.security_protocol, SecurityProtocol::Ssl);
        assert_eq!(b.config.tls.endpoint_identification, EndpointIdentification::None);
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
        let mut b = Client::builder();
        b.property("bootstrap.servers", "h:9093")
            .unwrap()
            .property("security.protocol", "SASL_SSL")
            .unwrap()
            .property("sasl.mechanism", "SCRAM-SHA-512")
            .unwrap()
            .property("sasl.jaas.config", jaas)
            .unwrap();
        let m = b.config.sasl.mechanism().unwrap();
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
}
