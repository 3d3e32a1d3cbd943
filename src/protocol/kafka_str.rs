//! [`KafkaStr`]: the type of every string field in the generated messages.

use std::borrow::Borrow;
use std::borrow::Cow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// A UTF-8 string as the generated messages hold it: static text without allocating, anything
/// else owned.
///
/// It reads as a `&str` (`Deref`), compares with `str` and `String`, and is built from either
/// with `.into()`; [`KafkaStr::from_static`] makes one without allocating, which is how schema
/// defaults and fixed values such as protocol names cost nothing.
///
/// Why not a slice of the received frame, as `bytes` fields are: measured with
/// `benches/codec_ratios.rs`, the two atomic reference-count operations such a slice costs were
/// slower than allocating and copying a 50-byte id, and a kept name would pin the whole frame.
/// An inline small-string form (up to 23 bytes) was slower still.
#[derive(Clone)]
pub struct KafkaStr(Cow<'static, str>);

impl KafkaStr {
    /// The empty string.
    pub const fn new() -> Self {
        KafkaStr(Cow::Borrowed(""))
    }

    /// A string pointing at static text, without allocating.
    pub const fn from_static(s: &'static str) -> Self {
        KafkaStr(Cow::Borrowed(s))
    }

    /// Checks that `raw` is UTF-8 and copies it.
    #[inline]
    pub fn from_utf8(raw: &[u8]) -> Result<Self, std::str::Utf8Error> {
        std::str::from_utf8(raw).map(Self::from)
    }

    /// The text.
    #[inline]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for KafkaStr {
    fn default() -> Self {
        Self::new()
    }
}

impl Deref for KafkaStr {
    type Target = str;

    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for KafkaStr {
    fn as_ref(&self) -> &str {
        self
    }
}

impl AsRef<[u8]> for KafkaStr {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

/// Lets maps keyed by `KafkaStr` be queried with a `&str`; `Hash` and `Eq` agree with `str`'s.
impl Borrow<str> for KafkaStr {
    fn borrow(&self) -> &str {
        self
    }
}

impl Hash for KafkaStr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialEq for KafkaStr {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for KafkaStr {}

impl PartialOrd for KafkaStr {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for KafkaStr {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

macro_rules! eq_both_ways {
    ($($other:ty),*) => {$(
        impl PartialEq<$other> for KafkaStr {
            fn eq(&self, other: &$other) -> bool {
                self.as_str() == &other[..]
            }
        }

        impl PartialEq<KafkaStr> for $other {
            fn eq(&self, other: &KafkaStr) -> bool {
                &self[..] == other.as_str()
            }
        }
    )*};
}

eq_both_ways!(str, &str, String);

impl From<&str> for KafkaStr {
    #[inline]
    fn from(s: &str) -> Self {
        KafkaStr(Cow::Owned(s.to_owned()))
    }
}

impl From<&String> for KafkaStr {
    fn from(s: &String) -> Self {
        s.as_str().into()
    }
}

/// Takes the `String` over without copying it.
impl From<String> for KafkaStr {
    fn from(s: String) -> Self {
        KafkaStr(Cow::Owned(s))
    }
}

impl From<KafkaStr> for String {
    fn from(s: KafkaStr) -> Self {
        s.0.into_owned()
    }
}

impl From<&KafkaStr> for String {
    fn from(s: &KafkaStr) -> Self {
        s.as_str().to_owned()
    }
}

impl fmt::Display for KafkaStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl fmt::Debug for KafkaStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn reads_compares_and_hashes_as_str() {
        for text in ["group-1", "a-static-member-id-that-is-longer-than-23-bytes", ""] {
            let s = KafkaStr::from_utf8(text.as_bytes()).unwrap();
            assert_eq!(s, text);
            assert_eq!(text, s);
            assert_eq!(s, String::from(text));
            assert_eq!(s.len(), text.len());
            assert_eq!(format!("{s}|{s:?}"), format!("{text}|{text:?}"));
            // Maps keyed by it answer &str queries.
            let mut m = HashMap::new();
            m.insert(s.clone(), 1);
            assert_eq!(m.get(text), Some(&1));
            assert_eq!(String::from(s.clone()), text);
            assert_eq!(KafkaStr::from(text.to_string()), s);
        }
        let (a, b) = (KafkaStr::from_static("a"), KafkaStr::from_static("b"));
        assert!(a < b);
        assert_eq!(KafkaStr::from_static(""), KafkaStr::new());
    }

    #[test]
    fn invalid_utf8_is_refused() {
        assert!(KafkaStr::from_utf8(&[0xff, 0xfe]).is_err());
        assert!(KafkaStr::from_utf8(&[0xff; 40]).is_err());
    }
}
