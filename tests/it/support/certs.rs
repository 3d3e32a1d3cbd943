//! A test PKI made at test time (never committed): a CA, and certificates it signs for a given
//! set of names, valid or expired, written as PEM files for the client's `ssl.*` settings.

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A certificate authority.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
    dir: PathBuf,
}

/// A certificate with its key, in DER (for a test server) and as PEM files (for the client).
pub struct Leaf {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    pub cert_pem: PathBuf,
    pub key_pem: PathBuf,
}

impl Ca {
    /// A new CA whose files go to a fresh directory under the system's temp dir.
    pub fn new(name: &str) -> Ca {
        let dir = std::env::temp_dir().join(crate::support::unique_name(&format!("kafka-group-pki-{name}")));
        std::fs::create_dir_all(&dir).unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("kafka-group test CA {name}"));
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        std::fs::write(dir.join("ca.pem"), issuer.pem()).unwrap();
        Ca { issuer, dir }
    }

    /// The CA certificate's PEM file (`ssl.ca.location`).
    pub fn pem(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// A certificate for `names` (host names or IP addresses), expired if asked.
    pub fn issue(&self, file: &str, names: &[&str], expired: bool) -> Leaf {
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        if expired {
            params.not_before = rcgen::date_time_ymd(2000, 1, 1);
            params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        }
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let cert_pem = self.dir.join(format!("{file}.pem"));
        let key_pem = self.dir.join(format!("{file}-key.pem"));
        std::fs::write(&cert_pem, cert.pem()).unwrap();
        std::fs::write(&key_pem, key.serialize_pem()).unwrap();
        Leaf {
            chain: vec![cert.der().clone()],
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            cert_pem,
            key_pem,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Ca {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A TLS server configuration presenting `leaf` (no client authentication).
// rustls deprecates its ring provider (no post-quantum key exchange) without another way to
// get it; the scripted servers speak what the client does.
#[allow(deprecated)]
pub fn server_config(leaf: &Leaf) -> Arc<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(leaf.chain.clone(), leaf.key.clone_key())
            .unwrap(),
    )
}
