//! The Kafka wire protocol: primitives ([`wire`]), the generated messages ([`messages`]) and the
//! traits that tie a request to its response and its header versions.
//!
//! Every message has `encode(&self, version, &mut buf)` and `decode(&mut decoder, version)` for
//! every version in Kafka 3.9's schemas. Encoding a field the chosen version does not have is an
//! error unless the field is at its default or the schema marks it ignorable: that is what turns
//! `group_instance_id` on JoinGroup v4 into [`EncodeError::UnsupportedField`] instead of a
//! silently dynamic member.

// `#[macro_use]`: the generated `for_each_*` type lists are used by the tests declared below.
#[macro_use]
pub mod messages;
mod int32_list;
mod kafka_str;
#[cfg(any(test, feature = "sample"))]
pub mod sample;
mod unknown_tags;
pub mod wire;

use bytes::Bytes;
use std::fmt;

pub use int32_list::Int32List;
pub use kafka_str::KafkaStr;
pub use messages::ApiKey;
pub use unknown_tags::UnknownTaggedFields;
pub use wire::{Decoder, Segments, WireWrite};

/// A 128-bit UUID as Kafka sends it (topic ids, directory ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    /// The all-zero UUID Kafka uses for "no id".
    pub const NIL: Uuid = Uuid([0; 16]);
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// An inclusive range of protocol versions; `min > max` means no version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VersionRange {
    /// Lowest version.
    pub min: i16,
    /// Highest version.
    pub max: i16,
}

impl VersionRange {
    /// The empty range.
    pub const NONE: VersionRange = VersionRange { min: 0, max: -1 };

    /// `min..=max`.
    pub const fn new(min: i16, max: i16) -> Self {
        VersionRange { min, max }
    }

    /// Whether `v` is in the range.
    #[inline]
    pub const fn contains(&self, v: i16) -> bool {
        self.min <= v && v <= self.max
    }

    /// Whether the range holds no version.
    pub const fn is_empty(&self) -> bool {
        self.min > self.max
    }

    /// The versions in both ranges (possibly empty).
    pub const fn intersect(&self, other: &VersionRange) -> VersionRange {
        let min = if self.min > other.min { self.min } else { other.min };
        let max = if self.max < other.max { self.max } else { other.max };
        VersionRange { min, max }
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            f.write_str("none")
        } else {
            write!(f, "{}..={}", self.min, self.max)
        }
    }
}

/// Why a message could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// The message does not exist in this version.
    UnsupportedVersion {
        /// Message name.
        message: &'static str,
        /// Requested version.
        version: i16,
    },
    /// A field that is set (not at its default) does not exist in this version and is not
    /// ignorable, so sending the message would silently drop it.
    UnsupportedField {
        /// Message or struct name.
        message: &'static str,
        /// Rust field name.
        field: &'static str,
        /// Requested version.
        version: i16,
    },
    /// A field is `None` in a version where it cannot be null.
    NullNotAllowed {
        /// Message or struct name.
        message: &'static str,
        /// Rust field name.
        field: &'static str,
        /// Requested version.
        version: i16,
    },
    /// A string, bytes or array is longer than its length prefix can express.
    TooLong {
        /// Actual length.
        len: usize,
        /// Largest length the encoding allows.
        max: usize,
    },
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::UnsupportedVersion { message, version } => {
                write!(f, "{message} has no version {version}")
            }
            EncodeError::UnsupportedField {
                message,
                field,
                version,
            } => write!(
                f,
                "{message}.{field} is set but {message} v{version} has no such field; \
                 it would be dropped on the wire"
            ),
            EncodeError::NullNotAllowed {
                message,
                field,
                version,
            } => {
                write!(f, "{message}.{field} cannot be null in v{version}")
            }
            EncodeError::TooLong { len, max } => write!(f, "length {len} exceeds the protocol maximum {max}"),
        }
    }
}

impl std::error::Error for EncodeError {}

/// Why bytes could not be decoded as a message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended before the value did.
    Truncated {
        /// Bytes the value needed.
        needed: usize,
        /// Bytes that were left.
        remaining: usize,
    },
    /// A length prefix below -1.
    InvalidLength(i64),
    /// A varint longer than its type allows.
    VarintTooLong,
    /// A string that is not UTF-8.
    InvalidUtf8,
    /// A null where the schema does not allow one.
    UnexpectedNull,
    /// The message does not exist in this version.
    UnsupportedVersion {
        /// Message name.
        message: &'static str,
        /// Requested version.
        version: i16,
    },
    /// Bytes were left after a whole message was read.
    TrailingBytes(usize),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated { needed, remaining } => {
                write!(f, "truncated input: needed {needed} bytes, {remaining} left")
            }
            DecodeError::InvalidLength(l) => write!(f, "invalid length prefix {l}"),
            DecodeError::VarintTooLong => f.write_str("varint too long"),
            DecodeError::InvalidUtf8 => f.write_str("string is not valid UTF-8"),
            DecodeError::UnexpectedNull => f.write_str("null in a non-nullable field"),
            DecodeError::UnsupportedVersion { message, version } => {
                write!(f, "{message} has no version {version}")
            }
            DecodeError::TrailingBytes(n) => write!(f, "{n} bytes left after the message"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// A message or struct with codecs for every version of its schema.
pub trait Message: Sized {
    /// The schema's name for it.
    const NAME: &'static str;
    /// Versions it exists in.
    const VERSIONS: VersionRange;
    /// Versions that use the compact encoding and tagged fields.
    const FLEXIBLE_VERSIONS: VersionRange;

    /// Appends the encoding of `self` in `version` to `buf` (a `Vec<u8>`, or
    /// [`wire::Segments`] to keep large `bytes` and `records` values by reference).
    fn encode<'a, B: WireWrite<'a> + ?Sized>(&'a self, version: i16, buf: &mut B) -> Result<(), EncodeError>;

    /// Reads one value in `version` from `d`.
    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError>;

    /// Encodes into a new buffer.
    fn to_bytes(&self, version: i16) -> Result<Vec<u8>, EncodeError> {
        let mut buf = Vec::new();
        self.encode(version, &mut buf)?;
        Ok(buf)
    }

    /// Decodes a buffer that must hold exactly one value.
    fn from_bytes(bytes: impl Into<Bytes>, version: i16) -> Result<Self, DecodeError> {
        let bytes = bytes.into();
        let mut d = Decoder::new(&bytes);
        let v = Self::decode(&mut d, version)?;
        match d.remaining() {
            0 => Ok(v),
            n => Err(DecodeError::TrailingBytes(n)),
        }
    }
}

/// A request: its API key, its response type, and the header versions that frame it.
pub trait Request: Message {
    /// The API this request belongs to.
    const API_KEY: ApiKey;
    /// The response the broker sends back.
    type Response: Message;
    /// RequestHeader version for this request version (2 when flexible, else 1).
    fn header_version(version: i16) -> i16;
    /// ResponseHeader version for this request version (1 when flexible, else 0; always 0 for
    /// ApiVersions so that a client can read the answer to a version the broker rejected).
    fn response_header_version(version: i16) -> i16;
}

/// Test support: a random instance of a message that is valid for a version.
#[cfg(any(test, feature = "sample"))]
pub trait Sample {
    /// A random value using only fields (and nulls) that `version` has.
    fn sample(g: &mut sample::SampleGen, version: i16) -> Self;
}

#[cfg(any(test, feature = "sample"))]
pub use sample::SampleGen;

#[cfg(test)]
mod diff_tests;
#[cfg(test)]
mod golden_tests;
#[cfg(test)]
pub(crate) mod hostile_tests;
#[cfg(test)]
mod tests;
