//! Records: what a Fetch response carries and a Produce request sends.
//!
//! Record batches (magic 2, Kafka 0.11+) are decoded and encoded with the `kafka-protocol`
//! crate, with all four compressions; legacy message sets (magic 0 and 1, which brokers before
//! 0.11 and down-converting brokers send) are handled in [`legacy`]. A Fetch response may end
//! with a partial batch (the broker cuts at `max.bytes`); it is skipped, not an error, and the
//! next fetch starts at the first offset not returned.

pub mod legacy;
mod v2;

use bytes::Bytes;
use std::fmt;

/// One record as the application sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Offset in its partition.
    pub offset: i64,
    /// Timestamp in milliseconds (create or log-append time; -1 when unknown, magic 0).
    pub timestamp: i64,
    /// Key, if any.
    pub key: Option<Bytes>,
    /// Value, if any (`None` is a tombstone).
    pub value: Option<Bytes>,
    /// Headers, in order (magic 2 only).
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// A record to write.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewRecord {
    /// Key, if any.
    pub key: Option<Bytes>,
    /// Value, if any.
    pub value: Option<Bytes>,
    /// Headers (dropped with an error on magic 0/1, which cannot carry them).
    pub headers: Vec<(String, Option<Bytes>)>,
    /// Create time in milliseconds; `None` takes the current time.
    pub timestamp: Option<i64>,
}

/// `compression.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// No compression.
    #[default]
    None,
    /// gzip.
    Gzip,
    /// Snappy.
    Snappy,
    /// LZ4.
    Lz4,
    /// Zstandard (Kafka 2.1+, record batches only).
    Zstd,
}

impl Compression {
    /// The attribute bits Kafka uses for it.
    pub fn code(self) -> i8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }
}

/// Limits applied while decoding, so a hostile or corrupt batch cannot exhaust memory.
#[derive(Debug, Clone, Copy)]
pub struct DecodeLimits {
    /// Largest decompressed size of one batch.
    pub max_decompressed: usize,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        // Brokers cap a batch at message.max.bytes (1 MiB by default); compression ratios of
        // real data stay far below 64x, while a decompression bomb does not.
        DecodeLimits {
            max_decompressed: 64 * 1024 * 1024,
        }
    }
}

/// The batches of one partition's records, flattened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decoded {
    /// Data records in offset order (control records removed).
    pub records: Vec<Record>,
    /// Where the next fetch should start: one past the last offset of the last complete batch
    /// (including control batches and records below the requested offset).
    pub next_offset: Option<i64>,
    /// Transactional batches, for read_committed filtering: `(producer_id, first_offset)`.
    pub transactional: Vec<(i64, i64)>,
    /// Control records: `(producer_id, offset, commit)`; a commit is false for an abort marker.
    pub control: Vec<(i64, i64, bool)>,
}

/// Why records could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordsError {
    /// A batch is malformed (bad CRC, bad lengths, unknown magic…).
    Corrupt(String),
    /// A batch decompresses to more than [`DecodeLimits::max_decompressed`].
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// The records cannot be written in the requested format.
    Unsupported(String),
}

impl fmt::Display for RecordsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordsError::Corrupt(m) => write!(f, "corrupt record batch: {m}"),
            RecordsError::TooLarge { limit } => {
                write!(f, "record batch decompresses to more than {limit} bytes")
            }
            RecordsError::Unsupported(m) => write!(f, "cannot encode records: {m}"),
        }
    }
}

impl std::error::Error for RecordsError {}

/// Offset of the magic byte, the same in every format: offset (8), length (4), then either
/// partition leader epoch (v2) or CRC (v0/v1), 4 bytes.
const MAGIC_OFFSET: usize = 16;
/// Bytes before a batch's or message's own length counts: offset and length.
const LOG_OVERHEAD: usize = 12;

/// Decodes every complete batch in `bytes` (a Fetch response's `records`). A partial batch at
/// the end is ignored.
pub fn decode(bytes: &Bytes, limits: &DecodeLimits) -> Result<Decoded, RecordsError> {
    let mut out = Decoded::default();
    let mut pos = 0usize;
    while bytes.len() - pos >= LOG_OVERHEAD {
        let len = i32::from_be_bytes([bytes[pos + 8], bytes[pos + 9], bytes[pos + 10], bytes[pos + 11]]);
        if len < 0 {
            return Err(RecordsError::Corrupt(format!("negative batch length {len}")));
        }
        let end = pos + LOG_OVERHEAD + len as usize;
        if end > bytes.len() || bytes.len() - pos <= MAGIC_OFFSET {
            break; // the broker cut the last batch at max.bytes
        }
        let batch = bytes.slice(pos..end);
        match bytes[pos + MAGIC_OFFSET] {
            2 => v2::decode_batch(batch, limits, &mut out)?,
            0 | 1 => legacy::decode_message(batch, limits, &mut out)?,
            m => return Err(RecordsError::Corrupt(format!("unknown magic byte {m}"))),
        }
        pos = end;
    }
    Ok(out)
}

/// Encodes `records` as one batch for a Produce request: magic 2 (record batch) when
/// `magic == 2`, else a legacy message set of that magic.
pub fn encode(records: &[NewRecord], compression: Compression, magic: i8) -> Result<Bytes, RecordsError> {
    match magic {
        2 => v2::encode_batch(records, compression),
        0 | 1 => legacy::encode_message_set(records, compression, magic),
        m => Err(RecordsError::Unsupported(format!("unknown magic {m}"))),
    }
}

/// The current time in milliseconds since the epoch, for record timestamps.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
