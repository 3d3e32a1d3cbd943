//! `SCRAM-SHA-256` / `SCRAM-SHA-512` client (RFC 5802, RFC 7677), without channel binding.
//!
//! The exchange: client-first (`n,,n=<user>,r=<nonce>`), server-first (`r=<nonce>,s=<salt>,
//! i=<iterations>`), client-final (`c=biws,r=<nonce>,p=<proof>`), server-final (`v=<signature>`
//! or `e=<error>`). The server signature is checked: a server that cannot prove it knows the
//! password (a man in the middle, a wrong broker) fails the authentication.

use super::authenticator::Step;
use super::secret::Secret;
use crate::error::{Error, Result};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

/// The hash a SCRAM mechanism is built on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScramHash {
    /// SCRAM-SHA-256.
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
}

/// Fewest iterations accepted: RFC 7677's minimum, and the lowest Kafka stores.
pub const MIN_ITERATIONS: u32 = 4096;
/// Most iterations accepted. Kafka stores at most 16,384; this leaves room for other tools while
/// a hostile server still cannot make the client hash for minutes.
pub const MAX_ITERATIONS: u32 = 1_000_000;

impl ScramHash {
    fn name(self) -> &'static str {
        match self {
            ScramHash::Sha256 => "SCRAM-SHA-256",
            ScramHash::Sha512 => "SCRAM-SHA-512",
        }
    }

    // HMAC takes keys of any length (longer ones are hashed), so `new_from_slice` cannot fail.
    fn mac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => {
                let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC accepts any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            ScramHash::Sha512 => {
                let mut m = Hmac::<Sha512>::new_from_slice(key).expect("HMAC accepts any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    /// Constant-time check that `expected` is HMAC(key, data).
    fn verify(self, key: &[u8], data: &[u8], expected: &[u8]) -> bool {
        match self {
            ScramHash::Sha256 => {
                let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC accepts any key length");
                m.update(data);
                m.verify_slice(expected).is_ok()
            }
            ScramHash::Sha512 => {
                let mut m = Hmac::<Sha512>::new_from_slice(key).expect("HMAC accepts any key length");
                m.update(data);
                m.verify_slice(expected).is_ok()
            }
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => Sha256::digest(data).to_vec(),
            ScramHash::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// `Hi(password, salt, i)`: PBKDF2 with this HMAC.
    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => {
                let mut out = vec![0; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out
            }
            ScramHash::Sha512 => {
                let mut out = vec![0; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out
            }
        }
    }
}

/// `saslname` (RFC 5802 §5.1): `=` and `,` escaped. Full SASLprep (RFC 4013) normalization is
/// not applied, as in Kafka's own client, so the name the broker's credential was stored under
/// is sent unchanged.
fn sasl_name(username: &str) -> String {
    username.replace('=', "=3D").replace(',', "=2C")
}

/// A nonce from the operating system's CSPRNG: 18 bytes, base64 (printable, no `,`).
pub fn random_nonce() -> Result<String> {
    let mut bytes = [0u8; 18];
    getrandom::fill(&mut bytes).map_err(|e| Error::Authentication {
        mechanism: "SCRAM",
        message: format!("no random bytes for the nonce: {e}"),
    })?;
    Ok(STANDARD.encode(bytes))
}

enum State {
    Initial,
    SentClientFirst,
    SentClientFinal {
        server_key: Vec<u8>,
        auth_message: String,
    },
    Done,
}

/// The client side of one SCRAM exchange.
pub struct Scram {
    hash: ScramHash,
    username: String,
    password: Secret,
    nonce: String,
    state: State,
}

impl Scram {
    /// For `username`/`password`, with a client nonce (use [`random_nonce`]; tests inject one).
    pub fn new(hash: ScramHash, username: &str, password: &Secret, nonce: String) -> Scram {
        Scram {
            hash,
            username: username.to_owned(),
            password: password.clone(),
            nonce,
            state: State::Initial,
        }
    }

    pub(super) fn secret(&self) -> &str {
        self.password.expose()
    }

    pub(super) fn mechanism(&self) -> &'static str {
        self.hash.name()
    }

    fn fail(&self, message: impl Into<String>) -> Error {
        Error::Authentication {
            mechanism: self.hash.name(),
            message: message.into(),
        }
    }

    fn client_first_bare(&self) -> String {
        format!("n={},r={}", sasl_name(&self.username), self.nonce)
    }

    /// The client-first message.
    pub fn initial_response(&mut self) -> Vec<u8> {
        self.state = State::SentClientFirst;
        format!("n,,{}", self.client_first_bare()).into_bytes()
    }

    /// Answers server-first with client-final, then checks server-final.
    pub fn on_challenge(&mut self, challenge: &[u8]) -> Result<Step> {
        match self.state {
            State::SentClientFirst => self.client_final(challenge),
            State::SentClientFinal { .. } => self.server_final(challenge),
            State::Initial | State::Done => Err(self.fail("the broker sent a challenge out of turn")),
        }
    }

    fn client_final(&mut self, server_first: &[u8]) -> Result<Step> {
        let server_first =
            std::str::from_utf8(server_first).map_err(|_| self.fail("server-first message is not UTF-8"))?;
        let (mut nonce, mut salt, mut iterations) = (None, None, None);
        for (i, attr) in server_first.split(',').enumerate() {
            match attr.split_once('=') {
                Some(("m", _)) if i == 0 => {
                    return Err(self.fail("the server requires an unsupported SCRAM extension"))
                }
                Some(("r", v)) if i == 0 => nonce = Some(v),
                Some(("s", v)) if i == 1 => salt = Some(v),
                Some(("i", v)) if i == 2 => iterations = Some(v),
                _ if i >= 3 => {} // extensions after the mandatory attributes are ignored (RFC 5802 §7)
                _ => return Err(self.fail("server-first message is not r=…,s=…,i=…")),
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err(self.fail("server-first message is not r=…,s=…,i=…"));
        };
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(self.fail("the server's nonce does not extend the client's"));
        }
        let salt = STANDARD
            .decode(salt)
            .map_err(|_| self.fail("the server's salt is not base64"))?;
        if salt.is_empty() {
            return Err(self.fail("the server's salt is empty"));
        }
        let iterations: u32 = iterations
            .parse()
            .map_err(|_| self.fail("the server's iteration count is not a number"))?;
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(self.fail(format!(
                "the server asks for {iterations} iterations; accepted are {MIN_ITERATIONS}..={MAX_ITERATIONS}"
            )));
        }

        let h = self.hash;
        let password = self.password.expose().as_bytes();
        let bits = match h {
            ScramHash::Sha256 => 256,
            ScramHash::Sha512 => 512,
        };
        let salted = super::salted::salted_password(bits, password, &salt, iterations, || {
            h.salted_password(password, &salt, iterations)
        });
        let client_key = h.mac(&salted, b"Client Key");
        let stored_key = h.hash(&client_key);
        // `biws` is base64("n,,"): no channel binding, no authorization identity.
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare());
        let signature = h.mac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
        let server_key = h.mac(&salted, b"Server Key");
        self.state = State::SentClientFinal {
            server_key,
            auth_message,
        };
        Ok(Step::Respond(
            format!("{without_proof},p={}", STANDARD.encode(proof)).into_bytes(),
        ))
    }

    fn server_final(&mut self, server_final: &[u8]) -> Result<Step> {
        let State::SentClientFinal {
            server_key,
            auth_message,
        } = &self.state
        else {
            return Err(self.fail("the broker sent a challenge out of turn"));
        };
        let text =
            std::str::from_utf8(server_final).map_err(|_| self.fail("server-final message is not UTF-8"))?;
        let first = text.split(',').next().unwrap_or("");
        if let Some(error) = first.strip_prefix("e=") {
            return Err(self.fail(format!("the server refused: {error}")));
        }
        let Some(signature) = first.strip_prefix("v=") else {
            return Err(self.fail("server-final message has neither v= nor e="));
        };
        let signature = STANDARD
            .decode(signature)
            .map_err(|_| self.fail("the server signature is not base64"))?;
        if !self.hash.verify(server_key, auth_message.as_bytes(), &signature) {
            return Err(self.fail("the server's signature is wrong: it does not know the password (wrong broker, or a man in the middle)"));
        }
        self.state = State::Done;
        Ok(Step::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RFC_SERVER_FIRST: &str =
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";

    fn rfc7677() -> Scram {
        Scram::new(
            ScramHash::Sha256,
            "user",
            &"pencil".into(),
            "rOprNGfwEbeRWgbNEkqO".into(),
        )
    }

    fn respond(step: Result<Step>) -> String {
        match step {
            Ok(Step::Respond(b)) => String::from_utf8(b).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    fn err(step: Result<Step>) -> String {
        match step {
            Err(e @ Error::Authentication { .. }) => e.to_string(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rfc7677_example() {
        let mut s = rfc7677();
        assert_eq!(s.initial_response(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        assert_eq!(
            respond(s.on_challenge(RFC_SERVER_FIRST.as_bytes())),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        assert!(matches!(
            s.on_challenge(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
            Ok(Step::Done)
        ));
        // Nothing more is expected.
        assert!(s.on_challenge(b"").is_err());
    }

    #[test]
    fn wrong_server_signature() {
        let mut s = rfc7677();
        s.initial_response();
        respond(s.on_challenge(RFC_SERVER_FIRST.as_bytes()));
        let e = err(s.on_challenge(b"v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="));
        assert!(e.contains("signature is wrong"), "{e}");
        assert!(!e.contains("pencil"));
        let mut s = rfc7677();
        s.initial_response();
        respond(s.on_challenge(RFC_SERVER_FIRST.as_bytes()));
        assert!(err(s.on_challenge(b"v=AAAA")).contains("signature is wrong"));
        let mut s = rfc7677();
        s.initial_response();
        respond(s.on_challenge(RFC_SERVER_FIRST.as_bytes()));
        assert!(err(s.on_challenge(b"e=invalid-proof")).contains("invalid-proof"));
        let mut s = rfc7677();
        s.initial_response();
        respond(s.on_challenge(RFC_SERVER_FIRST.as_bytes()));
        assert!(err(s.on_challenge(b"")).contains("neither"));
    }

    #[test]
    fn bad_server_first() {
        let check = |server_first: &str, wanted: &str| {
            let mut s = rfc7677();
            s.initial_response();
            let e = err(s.on_challenge(server_first.as_bytes()));
            assert!(e.contains(wanted), "{server_first}: {e}");
        };
        // A nonce that does not extend ours, or only repeats it.
        check(
            "r=rOprNGfwEbeRWgbNEkqX%hvYD,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
            "nonce",
        );
        check(
            "r=XrOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
            "nonce",
        );
        check(
            "r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
            "nonce",
        );
        check("r=rOprNGfwEbeRWgbNEkqOx,s=!!!,i=4096", "base64");
        check("r=rOprNGfwEbeRWgbNEkqOx,s=,i=4096", "salt");
        check(
            "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=x",
            "not a number",
        );
        check(
            "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=-1",
            "not a number",
        );
        check(
            "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=0",
            "iterations",
        );
        check(
            "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095",
            "iterations",
        );
        check(
            "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1000001",
            "iterations",
        );
        check(
            "m=ext,r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
            "extension",
        );
        check("s=W22ZaJ0SNY7soEsUEjb6gQ==,r=rOprNGfwEbeRWgbNEkqOx,i=4096", "r=");
        check("r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==", "r=");
        check("", "r=");
        let mut s = rfc7677();
        s.initial_response();
        assert!(s.on_challenge(&[0xff, 0xfe]).is_err());
    }

    #[test]
    fn iteration_bounds_accepted() {
        for i in [MIN_ITERATIONS, 16384] {
            let mut s = rfc7677();
            s.initial_response();
            let first = format!("r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i={i},x=ext");
            respond(s.on_challenge(first.as_bytes()));
        }
    }

    #[test]
    fn username_is_escaped() {
        let mut s = Scram::new(ScramHash::Sha512, "a=b,c", &"p".into(), "n0nce".into());
        assert_eq!(s.initial_response(), b"n,,n=a=3Db=2Cc,r=n0nce");
    }

    #[test]
    fn nonces_are_random_and_printable() {
        let (a, b) = (random_nonce().unwrap(), random_nonce().unwrap());
        assert_ne!(a, b);
        assert_eq!(a.len(), 24);
        assert!(a.bytes().all(|c| c.is_ascii_graphic() && c != b','));
    }

    /// RFC 5802's server side, enough to check the client against.
    struct TestServer {
        hash: ScramHash,
        salt: Vec<u8>,
        iterations: u32,
        stored_key: Vec<u8>,
        server_key: Vec<u8>,
    }

    impl TestServer {
        fn new(hash: ScramHash, password: &str) -> TestServer {
            let salt = b"kafka-group-salt".to_vec();
            let iterations = 4096;
            let salted = hash.salted_password(password.as_bytes(), &salt, iterations);
            TestServer {
                hash,
                stored_key: hash.hash(&hash.mac(&salted, b"Client Key")),
                server_key: hash.mac(&salted, b"Server Key"),
                salt,
                iterations,
            }
        }

        /// Runs the exchange against `client`; `Err` when the server rejects the proof.
        fn run(&self, client: &mut Scram) -> Result<Result<Step>, &'static str> {
            let first = String::from_utf8(client.initial_response()).unwrap();
            let bare = first.strip_prefix("n,,").unwrap();
            let cnonce = bare.split_once(",r=").unwrap().1;
            let server_first = format!(
                "r={cnonce}srvNonce,s={},i={}",
                STANDARD.encode(&self.salt),
                self.iterations
            );
            let client_final = respond(client.on_challenge(server_first.as_bytes()));
            let (without_proof, proof) = client_final.rsplit_once(",p=").unwrap();
            assert_eq!(without_proof, format!("c=biws,r={cnonce}srvNonce"));
            let auth_message = format!("{bare},{server_first},{without_proof}");
            let signature = self.hash.mac(&self.stored_key, auth_message.as_bytes());
            let client_key: Vec<u8> = STANDARD
                .decode(proof)
                .unwrap()
                .iter()
                .zip(&signature)
                .map(|(p, s)| p ^ s)
                .collect();
            if self.hash.hash(&client_key) != self.stored_key {
                return Err("invalid proof");
            }
            let v = STANDARD.encode(self.hash.mac(&self.server_key, auth_message.as_bytes()));
            Ok(client.on_challenge(format!("v={v}").as_bytes()))
        }
    }

    #[test]
    fn sha512_round_trip() {
        let server = TestServer::new(ScramHash::Sha512, "s3cr3t");
        let mut ok = Scram::new(
            ScramHash::Sha512,
            "alice",
            &"s3cr3t".into(),
            random_nonce().unwrap(),
        );
        assert!(matches!(server.run(&mut ok), Ok(Ok(Step::Done))));
        let mut wrong = Scram::new(
            ScramHash::Sha512,
            "alice",
            &"guess".into(),
            random_nonce().unwrap(),
        );
        assert_eq!(server.run(&mut wrong).unwrap_err(), "invalid proof");
        // The same server, SHA-256: the proof does not verify under another hash.
        let server = TestServer::new(ScramHash::Sha256, "s3cr3t");
        let mut ok = Scram::new(
            ScramHash::Sha256,
            "alice",
            &"s3cr3t".into(),
            random_nonce().unwrap(),
        );
        assert!(matches!(server.run(&mut ok), Ok(Ok(Step::Done))));
    }

    #[test]
    fn server_signature_from_a_server_without_the_password() {
        // An impostor that knows the salt but not the password cannot produce v=.
        let real = TestServer::new(ScramHash::Sha512, "s3cr3t");
        let impostor = TestServer {
            server_key: TestServer::new(ScramHash::Sha512, "other").server_key,
            ..real
        };
        let mut c = Scram::new(
            ScramHash::Sha512,
            "alice",
            &"s3cr3t".into(),
            random_nonce().unwrap(),
        );
        let e = err(impostor.run(&mut c).unwrap());
        assert!(e.contains("signature is wrong"), "{e}");
    }
}
