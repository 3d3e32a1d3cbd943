//! TLS settings (`ssl.*`) and the rustls client configuration made from them once, when the
//! client is built, so that a missing or unreadable file is a configuration error before any
//! network call, and every connection shares one configuration.

use crate::error::{Error, Result};
use crate::net::sasl::Secret;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `security.protocol`: how every connection of a client talks to the brokers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SecurityProtocol {
    /// Plain TCP, no authentication (the default, as in Kafka).
    #[default]
    Plaintext,
    /// TLS, authenticated by a client certificate if one is configured (mTLS).
    Ssl,
    /// SASL authentication over plain TCP.
    SaslPlaintext,
    /// SASL authentication over TLS (what managed services ask for).
    SaslSsl,
}

impl SecurityProtocol {
    /// Whether connections use TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether connections authenticate with SASL.
    pub fn uses_sasl(self) -> bool {
        matches!(self, SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl)
    }

    /// Kafka's name for it (`SASL_SSL` …).
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for SecurityProtocol {
    type Err = Error;

    /// Parses Kafka's names, case-insensitively.
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Ok(SecurityProtocol::Plaintext),
            "SSL" => Ok(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Ok(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Ok(SecurityProtocol::SaslSsl),
            _ => Err(Error::Config {
                property: "security.protocol",
                problem: format!("{s:?} is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
            }),
        }
    }
}

/// `ssl.endpoint.identification.algorithm`: whether the broker's certificate must name the host
/// the client connects to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum EndpointIdentification {
    /// `https`: the certificate must be valid for the broker's host name or address (default).
    #[default]
    Https,
    /// `none`: any host name is accepted; the certificate chain is still verified.
    None,
}

/// The `ssl.*` settings.
#[derive(Debug, Clone, Default)]
pub(crate) struct TlsSettings {
    /// `ssl.ca.location`: PEM file of the CA certificates to trust instead of the system's.
    pub ca_location: Option<PathBuf>,
    /// `ssl.certificate.location`: PEM file of the client certificate chain (mTLS).
    pub certificate_location: Option<PathBuf>,
    /// `ssl.key.location`: PEM file of the client's private key (PKCS#8, PKCS#1 or SEC1, or
    /// encrypted PKCS#8 with `ssl.key.password`).
    pub key_location: Option<PathBuf>,
    /// `ssl.key.password`: the password of an encrypted `ssl.key.location`.
    pub key_password: Option<Secret>,
    /// Trust the roots compiled into the crate (feature `bundled-roots`) instead of the
    /// system's store, when `ssl.ca.location` is not set.
    pub bundled_roots: bool,
    /// `ssl.endpoint.identification.algorithm`.
    pub endpoint_identification: EndpointIdentification,
}

/// The TLS configuration every TLS connection of a client uses, made once from the `ssl.*`
/// settings when the client is built. Opaque: set it through the `ClientBuilder::ssl_*` setters.
#[derive(Clone)]
pub struct Tls(pub(crate) Arc<ClientConfig>);

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Tls { .. }")
    }
}

fn read_pem<T>(
    property: &'static str,
    path: &Path,
    parse: impl FnOnce(&Path) -> std::result::Result<T, String>,
) -> Result<T> {
    if let Err(e) = std::fs::metadata(path) {
        return Err(Error::Config {
            property,
            problem: format!("cannot read {}: {e}", path.display()),
        });
    }
    parse(path).map_err(|problem| Error::Config { property, problem })
}

fn certificates(property: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    read_pem(property, path, |p| {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(p)
            .map_err(|e| format!("cannot read {}: {e}", p.display()))?
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| format!("{} is not a PEM certificate file: {e}", p.display()))?;
        if certs.is_empty() {
            return Err(format!("{} holds no PEM certificate", p.display()));
        }
        Ok(certs)
    })
}

const ENCRYPTED_PKCS8: &str = "ENCRYPTED PRIVATE KEY";

/// Reads the client key at `path`: unencrypted PKCS#8, PKCS#1 or SEC1 PEM, or an encrypted
/// PKCS#8 PEM (PBES2) decrypted with `password`. The messages name the file and what to do,
/// never the password.
fn private_key(
    path: &Path,
    password: Option<&Secret>,
) -> std::result::Result<PrivateKeyDer<'static>, String> {
    let text = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    // The key may share its file with certificates (`openssl pkcs12 -out all.pem` writes
    // both), and the PEM decoder takes exactly one block: hand it the key's block alone.
    let encrypted = encrypted_block(&text).and_then(|block| {
        pkcs8::der::pem::decode_vec(block)
            .ok()
            .filter(|(label, _)| *label == ENCRYPTED_PKCS8)
    });
    if let Some((_, der)) = encrypted {
        let Some(password) = password.filter(|p| !p.is_empty()) else {
            return Err(format!(
                "{} is an encrypted private key: set ssl.key.password",
                path.display()
            ));
        };
        let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice())
            .map_err(|e| format!("{} is not a valid encrypted PKCS#8 key: {e}", path.display()))?;
        // The library cannot tell a wrong password from a corrupt file: both fail the padding
        // check of the decrypted key, so the message names both.
        let key = info.decrypt(password.expose()).map_err(|e| {
            format!(
                "cannot decrypt {} with ssl.key.password (wrong password, or an encryption \
                 scheme other than PBES2 with PBKDF2 or scrypt and AES-CBC): {e}",
                path.display()
            )
        })?;
        return Ok(PrivateKeyDer::Pkcs8(key.as_bytes().to_vec().into()));
    }
    if String::from_utf8_lossy(&text).contains("Proc-Type: 4,ENCRYPTED") {
        return Err(format!(
            "{} is encrypted the legacy OpenSSL way (Proc-Type/DEK-Info headers), which is not \
             supported: convert it to encrypted PKCS#8 with `openssl pkcs8 -topk8 -v2 aes-256-cbc`",
            path.display()
        ));
    }
    PrivateKeyDer::from_pem_slice(&text).map_err(|e| {
        format!(
            "{} is not a PEM private key (PKCS#8, PKCS#1, SEC1 or encrypted PKCS#8): {e}",
            path.display()
        )
    })
}

/// The `ENCRYPTED PRIVATE KEY` PEM block of `text`, boundaries included, if it has one.
fn encrypted_block(text: &[u8]) -> Option<&[u8]> {
    let begin = format!("-----BEGIN {ENCRYPTED_PKCS8}-----");
    let end = format!("-----END {ENCRYPTED_PKCS8}-----");
    let start = find(text, begin.as_bytes())?;
    let stop = start + find(&text[start..], end.as_bytes())? + end.len();
    Some(&text[start..stop])
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(feature = "bundled-roots")]
fn bundled_roots(roots: &mut RootCertStore) -> Result<()> {
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    Ok(())
}

#[cfg(not(feature = "bundled-roots"))]
fn bundled_roots(_: &mut RootCertStore) -> Result<()> {
    Err(Error::Config {
        property: "ssl.ca.location",
        problem: "bundled roots were asked for (ClientBuilder::ssl_ca_bundled), but this build of \
                  kafka-group has none: enable its `bundled-roots` feature"
            .into(),
    })
}

impl TlsSettings {
    /// Checks the files and builds the rustls configuration. No network call.
    pub(crate) fn client_config(&self) -> Result<Tls> {
        let provider = Arc::new(ring_provider());
        let mut roots = RootCertStore::empty();
        match &self.ca_location {
            Some(path) => {
                for cert in certificates("ssl.ca.location", path)? {
                    roots.add(cert).map_err(|e| Error::Config {
                        property: "ssl.ca.location",
                        problem: format!("{}: not a usable CA certificate: {e}", path.display()),
                    })?;
                }
            }
            None if self.bundled_roots => bundled_roots(&mut roots)?,
            None => {
                let found = rustls_native_certs::load_native_certs();
                for e in &found.errors {
                    log::debug!("system trust store: {e}");
                }
                let (added, _) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    return Err(Error::Config {
                        property: "ssl.ca.location",
                        problem: "no CA certificate found in the system's trust store; give a PEM \
                                  file of the CAs to trust"
                            .into(),
                    });
                }
            }
        }
        let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| Error::Config {
                property: "ssl.ca.location",
                problem: format!("cannot verify servers with these CAs: {e}"),
            })?;
        let verifier: Arc<dyn ServerCertVerifier> = match self.endpoint_identification {
            EndpointIdentification::Https => verifier,
            EndpointIdentification::None => Arc::new(AnyName(verifier)),
        };
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| Error::Config {
                property: "security.protocol",
                problem: format!("TLS versions: {e}"),
            })?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match (&self.certificate_location, &self.key_location) {
            (None, None) => builder.with_no_client_auth(),
            (Some(cert), Some(key)) => {
                let chain = certificates("ssl.certificate.location", cert)?;
                let key_der = read_pem("ssl.key.location", key, |p| {
                    private_key(p, self.key_password.as_ref())
                })?;
                let certified = certified_key(&provider, chain, key_der, cert, key)?;
                builder.with_client_cert_resolver(Arc::new(SingleCertAndKey::from(certified)))
            }
            (Some(_), None) => {
                return Err(Error::Config {
                    property: "ssl.key.location",
                    problem: "ssl.certificate.location is set but no key for it".into(),
                })
            }
            (None, Some(_)) => {
                return Err(Error::Config {
                    property: "ssl.certificate.location",
                    problem: "ssl.key.location is set but no certificate for it".into(),
                })
            }
        };
        Ok(Tls(Arc::new(config)))
    }
}

/// rustls' provider backed by *ring* (see Cargo.toml for why *ring*). rustls 0.23.48 marks
/// `ring::default_provider` deprecated because *ring* has no post-quantum key exchange, and
/// offers no other way to get this provider: its own feature-selected default calls the same
/// function under the same `allow`. Kafka brokers (Java's TLS) negotiate X25519 or the NIST
/// curves, which *ring* has, so nothing is lost; the warning would only reach every build.
#[allow(deprecated)]
fn ring_provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

/// The client certificate chain and its key, checked only for belonging together: the public
/// key of the chain's first certificate must be the private key's. The certificate is not
/// validated otherwise (version, extensions, dates, issuer): that is the broker's to judge, and
/// a v1 certificate (`openssl x509 -req` without `-extfile`), which Java and librdkafka send,
/// would fail a check meant for server certificates.
fn certified_key(
    provider: &CryptoProvider,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    cert_path: &Path,
    key_path: &Path,
) -> Result<CertifiedKey> {
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| Error::Config {
            property: "ssl.key.location",
            problem: format!(
                "{} is not a private key this client can sign with (RSA, ECDSA P-256 or P-384, \
             Ed25519): {e}",
                key_path.display()
            ),
        })?;
    // `certificates` never returns an empty chain.
    let Some(first) = chain.first() else {
        return Err(Error::Config {
            property: "ssl.certificate.location",
            problem: format!("{} holds no PEM certificate", cert_path.display()),
        });
    };
    let cert_spki = certificate_spki(first).map_err(|e| Error::Config {
        property: "ssl.certificate.location",
        problem: format!("{} is not an X.509 certificate: {e}", cert_path.display()),
    })?;
    match signing.public_key() {
        Some(key_spki) if key_spki.as_ref() != cert_spki => Err(Error::Config {
            property: "ssl.key.location",
            problem: format!(
                "the private key in {} does not match the certificate in {} \
                 (ssl.certificate.location): their public keys differ",
                key_path.display(),
                cert_path.display()
            ),
        }),
        // A key whose public half rustls cannot derive cannot be compared; the broker will
        // refuse the handshake if the two do not belong together.
        _ => Ok(CertifiedKey::new(chain, signing)),
    }
}

/// The DER of an X.509 certificate's SubjectPublicKeyInfo (RFC 5280 4.1), found by stepping
/// over the fields before it. Works for every version: v1 lacks the `[0]` version field and
/// the extensions, which come after the key anyway.
fn certificate_spki(cert: &[u8]) -> std::result::Result<&[u8], pkcs8::der::Error> {
    use pkcs8::der::{Decode, Header, Reader, SliceReader, Tag, TagNumber};
    let mut outer = SliceReader::new(cert)?;
    let certificate = Header::decode(&mut outer)?;
    certificate.tag.assert_eq(Tag::Sequence)?;
    let mut certificate = SliceReader::new(outer.read_slice(certificate.length)?)?;
    let tbs = Header::decode(&mut certificate)?;
    tbs.tag.assert_eq(Tag::Sequence)?;
    let mut tbs = SliceReader::new(certificate.read_slice(tbs.length)?)?;
    let version = Tag::ContextSpecific {
        constructed: true,
        number: TagNumber::N0,
    };
    if tbs.peek_tag()? == version {
        tbs.tlv_bytes()?;
    }
    // serialNumber, signature, issuer, validity, subject.
    for _ in 0..5 {
        tbs.tlv_bytes()?;
    }
    tbs.peek_tag()?.assert_eq(Tag::Sequence)?;
    tbs.tlv_bytes()
}

/// The name to verify and send as SNI for a broker at `host` (its advertised host name, or an
/// IP address).
pub(crate) fn server_name(host: &str) -> Result<ServerName<'static>> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).map_err(|e| Error::Config {
        property: "bootstrap.servers",
        problem: format!("{host:?} cannot be checked against a certificate: {e}"),
    })
}

/// `ssl.endpoint.identification.algorithm=none`: the chain is verified as usual, only a name
/// mismatch is accepted.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn security_protocols_parse_by_kafka_name() {
        for p in [
            SecurityProtocol::Plaintext,
            SecurityProtocol::Ssl,
            SecurityProtocol::SaslPlaintext,
            SecurityProtocol::SaslSsl,
        ] {
            assert_eq!(p.name().parse::<SecurityProtocol>().unwrap(), p);
            assert_eq!(p.name().to_lowercase().parse::<SecurityProtocol>().unwrap(), p);
        }
        let e = "TLS".parse::<SecurityProtocol>().unwrap_err();
        assert!(e.to_string().contains("security.protocol"), "{e}");
        assert!(SecurityProtocol::SaslSsl.uses_tls() && SecurityProtocol::SaslSsl.uses_sasl());
        assert!(!SecurityProtocol::Ssl.uses_sasl() && !SecurityProtocol::SaslPlaintext.uses_tls());
    }

    #[test]
    fn missing_or_unusable_files_are_configuration_errors() {
        let missing = TlsSettings {
            ca_location: Some("/no/such/ca.pem".into()),
            ..Default::default()
        };
        let e = missing.client_config().unwrap_err();
        assert!(
            matches!(
                e,
                Error::Config {
                    property: "ssl.ca.location",
                    ..
                }
            ) && e.to_string().contains("/no/such/ca.pem"),
            "{e}"
        );
        let dir = std::env::temp_dir().join(format!("kafka-group-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "not a certificate\n").unwrap();
        let e = TlsSettings {
            ca_location: Some(junk.clone()),
            ..Default::default()
        }
        .client_config()
        .unwrap_err();
        assert!(e.to_string().contains("no PEM certificate"), "{e}");
        let e = TlsSettings {
            ca_location: None,
            certificate_location: Some(junk.clone()),
            key_location: None,
            ..Default::default()
        }
        .client_config();
        // Either the system store is empty here (that error) or the lone certificate is refused.
        assert!(e.is_err());
        let e = TlsSettings {
            key_location: Some(junk),
            ..Default::default()
        }
        .client_config()
        .unwrap_err();
        assert!(e.to_string().contains("ssl."), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn server_names_for_hosts_and_addresses() {
        assert!(matches!(
            server_name("broker-1.example.com").unwrap(),
            ServerName::DnsName(_)
        ));
        assert!(matches!(
            server_name("127.0.0.1").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(server_name("[::1]").unwrap(), ServerName::IpAddress(_)));
    }

    #[cfg(not(feature = "bundled-roots"))]
    #[test]
    fn bundled_roots_without_the_feature_say_which_feature() {
        let settings = TlsSettings {
            bundled_roots: true,
            ..Default::default()
        };
        let e = settings.client_config().unwrap_err();
        assert!(e.to_string().contains("bundled-roots"), "{e}");
    }

    #[cfg(feature = "bundled-roots")]
    #[test]
    fn bundled_roots_fill_the_trust_store() {
        let mut roots = RootCertStore::empty();
        bundled_roots(&mut roots).unwrap();
        // Mozilla's set has well over a hundred roots; a handful would mean a broken build.
        assert!(roots.len() > 100, "{}", roots.len());
        let settings = TlsSettings {
            bundled_roots: true,
            ..Default::default()
        };
        settings.client_config().unwrap();
    }

    #[test]
    fn key_files_in_every_form_are_read_or_named_in_the_error() {
        let dir = std::env::temp_dir().join(format!("kafka-group-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, text: &str| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        // Not a key at all.
        let junk = write("junk.pem", "hello");
        let e = private_key(&junk, None).unwrap_err();
        assert!(
            e.contains("junk.pem") && e.contains("not a PEM private key"),
            "{e}"
        );
        // Encrypted PKCS#8 whose body is garbage: named, no panic, password never shown.
        let bad = write(
            "bad.pem",
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
        );
        let e = private_key(&bad, None).unwrap_err();
        assert!(e.contains("set ssl.key.password"), "{e}");
        let e = private_key(&bad, Some(&Secret::new("pw-123"))).unwrap_err();
        assert!(e.contains("bad.pem") && !e.contains("pw-123"), "{e}");
        // The legacy OpenSSL header form.
        let legacy = write(
            "legacy.pem",
            "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC,00\n\nAAAA\n-----END RSA PRIVATE KEY-----\n",
        );
        let e = private_key(&legacy, Some(&Secret::new("pw"))).unwrap_err();
        assert!(e.contains("openssl pkcs8 -topk8"), "{e}");
        // An encrypted block beside a certificate, in either order, is still found.
        let cert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let key = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n";
        for (i, text) in [format!("{cert}{key}"), format!("{key}{cert}")]
            .iter()
            .enumerate()
        {
            let both = write(&format!("both-{i}.pem"), text);
            let e = private_key(&both, None).unwrap_err();
            assert!(e.contains("set ssl.key.password"), "{e}");
        }
        let missing = private_key(&dir.join("none.pem"), None).unwrap_err();
        assert!(missing.contains("none.pem"), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
