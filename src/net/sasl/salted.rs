//! SCRAM's salted passwords, kept so that `Hi()` runs once per credential rather than once per
//! connection.
//!
//! `Hi(password, salt, i)` is PBKDF2 with 4,096 or more rounds: about 5 ms of CPU for
//! SCRAM-SHA-512 on a laptop, and most of what a SCRAM connection costs the client. A broker
//! answers every authentication of a user with the same salt and iteration count until the
//! credential changes, so a client that opens many connections (one per broker and purpose, a
//! heartbeat connection per member, KIP-368 re-authentications) would compute the same value
//! again each time. Java's and librdkafka's clients do; this cache avoids it.
//!
//! The key holds a SHA-256 digest of the password, not the password; the value (the salted
//! password) is wiped when evicted or dropped. It is no more secret than the password itself,
//! which the client holds anyway to reconnect. A changed salt (a new credential) is a new entry.

use sha2::{Digest, Sha256};
use std::sync::{Mutex, OnceLock};
use zeroize::Zeroizing;

/// Entries kept at most: a process talks to few clusters as few users. When full, the oldest
/// entry goes.
const CAPACITY: usize = 16;

#[derive(PartialEq, Eq)]
struct Key {
    /// 256 or 512.
    bits: u16,
    password: [u8; 32],
    salt: Vec<u8>,
    iterations: u32,
}

/// A bounded map from (hash, password, salt, iterations) to the salted password.
#[derive(Default)]
pub(crate) struct SaltedPasswords {
    entries: Vec<(Key, Zeroizing<Vec<u8>>)>,
}

impl SaltedPasswords {
    fn key(bits: u16, password: &[u8], salt: &[u8], iterations: u32) -> Key {
        Key {
            bits,
            password: Sha256::digest(password).into(),
            salt: salt.to_vec(),
            iterations,
        }
    }

    /// The salted password kept for these inputs, if any.
    pub(crate) fn get(
        &self,
        bits: u16,
        password: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> Option<Zeroizing<Vec<u8>>> {
        let key = Self::key(bits, password, salt, iterations);
        self.entries
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone())
    }

    /// Keeps `value` for these inputs.
    pub(crate) fn put(&mut self, bits: u16, password: &[u8], salt: &[u8], iterations: u32, value: &[u8]) {
        let key = Self::key(bits, password, salt, iterations);
        if self.entries.iter().any(|(k, _)| *k == key) {
            return;
        }
        if self.entries.len() >= CAPACITY {
            self.entries.remove(0);
        }
        self.entries.push((key, Zeroizing::new(value.to_vec())));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

/// `Hi()` through the process's cache: looked up, else computed by `compute` (outside the
/// lock, so that connections of different users do not wait on each other's PBKDF2) and kept.
pub(crate) fn salted_password(
    bits: u16,
    password: &[u8],
    salt: &[u8],
    iterations: u32,
    compute: impl FnOnce() -> Vec<u8>,
) -> Zeroizing<Vec<u8>> {
    if let Some(v) = crate::client::lock(shared()).get(bits, password, salt, iterations) {
        return v;
    }
    let value = Zeroizing::new(compute());
    crate::client::lock(shared()).put(bits, password, salt, iterations, &value);
    value
}

/// The process's cache.
fn shared() -> &'static Mutex<SaltedPasswords> {
    static SHARED: OnceLock<Mutex<SaltedPasswords>> = OnceLock::new();
    SHARED.get_or_init(Mutex::default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_once_per_credential_and_bounded() {
        let mut c = SaltedPasswords::default();
        c.put(512, b"pw", b"salt", 4096, b"v1");
        assert_eq!(*c.get(512, b"pw", b"salt", 4096).unwrap(), b"v1".to_vec());
        // Another hash, salt (the credential was reset), password or count: not the same entry.
        assert!(c.get(256, b"pw", b"salt", 4096).is_none());
        assert!(c.get(512, b"pw", b"salt2", 4096).is_none());
        assert!(c.get(512, b"pw2", b"salt", 4096).is_none());
        assert!(c.get(512, b"pw", b"salt", 8192).is_none());
        for i in 0..40u32 {
            c.put(512, b"pw", &i.to_be_bytes(), 4096, b"x");
        }
        assert_eq!(c.len(), CAPACITY);
        // The first entry was evicted long ago.
        assert!(c.get(512, b"pw", b"salt", 4096).is_none());
    }

    #[test]
    fn computes_only_on_a_miss() {
        let salt = b"salted-rs-test-unique-salt";
        let mut calls = 0;
        for _ in 0..3 {
            let v = salted_password(512, b"pw", salt, 4096, || {
                calls += 1;
                b"computed".to_vec()
            });
            assert_eq!(*v, b"computed".to_vec());
        }
        assert_eq!(calls, 1);
    }
}
