//! [`KafkaStr`]: the type of every string field in the generated messages.

use bytes::Bytes;
use bytestring::ByteString;
use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// A UTF-8 string as the generated messages hold it: a decoded string is a slice of the frame it
/// came in, static text costs nothing, and anything else is owned.
///
/// It reads as a `&str` (`Deref`), compares with `str` and `String`, and is built from either
/// with `.into()`; [`KafkaStr::from_static`] makes one without allocating, which is how schema
/// defaults and fixed values such as protocol names cost nothing.
///
/// Decoding shares the frame's buffer, as `bytes` fields do (the text is checked to be UTF-8
/// once, when it is decoded): a JoinGroup answer with 100 members makes no allocation per member
/// id. A string kept long after its message therefore keeps the whole frame alive; copy what you
/// keep (`String::from(&s)`, or `KafkaStr::from(s.as_str())`), as this crate's client does.
///
/// Measured with `benches/codec_ratios.rs` (JoinGroup v9 response with 100 members decodes in
/// 3.7 µs as slices, 8.6 µs copied into owned strings): the allocator's work per string, freeing
/// included, costs far more than the reference count a slice takes. The owned form used to win
/// only because the decoder itself cloned the frame; it now borrows it. An inline small-string
/// form (up to 23 bytes, `smol_str`) was slower than both.
#[derive(Clone)]
pub struct KafkaStr(ByteString);

impl KafkaStr {
    /// The empty string.
    pub const fn new() -> Self {
        KafkaStr(ByteString::new())
    }

    /// A string pointing at static text, without allocating.
    pub const fn from_static(s: &'static str) -> Self {
        KafkaStr(ByteString::from_static(s))
    }

    /// Checks that `raw` is UTF-8 and copies it.
    #[inline]
    pub fn from_utf8(raw: &[u8]) -> Result<Self, std::str::Utf8Error> {
        std::str::from_utf8(raw).map(Self::from)
    }

    /// A slice of `frame` (which `raw` must lie in), if it is valid UTF-8.
    #[inline]
    pub(crate) fn from_frame(frame: &Bytes, raw: &[u8]) -> Result<Self, std::str::Utf8Error> {
        ByteString::try_from(frame.slice_ref(raw)).map(KafkaStr)
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
        KafkaStr(ByteString::from(s))
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
        KafkaStr(ByteString::from(s))
    }
}

impl From<KafkaStr> for String {
    fn from(s: KafkaStr) -> Self {
        String::from(s.0)
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
