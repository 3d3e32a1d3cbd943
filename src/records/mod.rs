//! Records: what a Fetch response carries and a Produce request sends.
//!
//! Record batches (magic 2, Kafka 0.11+) with all four compressions, and legacy message sets
//! (magic 0 and 1, which brokers before 0.11 and down-converting brokers send) with gzip,
//! snappy and lz4. A Fetch response may end with a partial batch (the broker cuts at
//! `max.bytes`, and a down-converting broker at the size of what it stored, KIP-283); it is
//! skipped, not an error, and the next fetch starts at the first offset not returned.
//!
//! Decoding trusts nothing it reads: checksums are verified (CRC-32C for batches, CRC-32 for
//! every legacy message, inner ones included), no count or length from the wire sizes an
//! allocation beyond the bytes present, and decompression stops at
//! [`DecodeLimits::max_decompressed`].

mod compression;
mod legacy;
#[cfg(test)]
mod tests;
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
    /// Headers (magic 2 only: encoding them as magic 0/1 fails with
    /// [`RecordsError::Unsupported`]).
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
    /// Zstandard (Kafka 2.1+, magic 2 only).
    Zstd,
}

impl std::str::FromStr for Compression {
    type Err = crate::Error;

    /// Parses Kafka's names (`compression.type`), case-insensitively: `none`, `gzip`,
    /// `snappy`, `lz4`, `zstd`.
    fn from_str(s: &str) -> crate::Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(Compression::None),
            "gzip" => Ok(Compression::Gzip),
            "snappy" => Ok(Compression::Snappy),
            "lz4" => Ok(Compression::Lz4),
            "zstd" => Ok(Compression::Zstd),
            _ => Err(crate::Error::Config {
                property: "compression.type",
                problem: format!("{s:?} is not one of none, gzip, snappy, lz4, zstd"),
            }),
        }
    }
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

    /// The codec in a batch's (or legacy message's) attribute bits: the inverse of
    /// [`Compression::code`].
    fn from_code(bits: u8) -> Result<Compression, RecordsError> {
        Ok(match bits {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            other => {
                return Err(RecordsError::Corrupt(format!(
                    "unknown compression codec {other}"
                )))
            }
        })
    }
}

/// Limits applied while decoding, so a hostile or corrupt batch cannot exhaust memory.
#[derive(Debug, Clone, Copy)]
pub struct DecodeLimits {
    /// Largest decompressed size of one batch (or legacy wrapper message); a batch inflating
    /// beyond it fails with [`RecordsError::TooLarge`], having allocated no more than about
    /// twice this for it. Uncompressed batches are bounded by the response itself.
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
    /// Data records in offset order (control records removed). A batch may start below the
    /// offset that was fetched: its earlier records are here too, for the caller to skip.
    pub records: Vec<Record>,
    /// Where the next fetch should start: one past the last offset of the last complete batch,
    /// as the batch header says (so past control batches, and past records that compaction
    /// removed from the end of a batch). `None` when not even one batch was complete.
    pub next_offset: Option<i64>,
    /// Every complete batch's header, in offset order (a legacy message counts as one batch).
    pub batches: Vec<BatchInfo>,
    /// Transaction markers (control records): `(producer_id, offset, commit)`; `commit` is
    /// false for an abort marker.
    pub control: Vec<(i64, i64, bool)>,
}

impl Decoded {
    /// Transactional data batches, for read_committed filtering: `(producer_id, first_offset,
    /// last_offset)`, one per batch. The records in that offset range came from that producer's
    /// transaction; they are dropped when the Fetch response lists an aborted transaction of
    /// that producer starting at or before the batch and its abort marker is not yet passed
    /// (Java's `Fetcher` logic).
    pub fn transactional(&self) -> Vec<(i64, i64, i64)> {
        self.batches
            .iter()
            .filter(|b| b.transactional && !b.control)
            .map(|b| (b.producer_id, b.base_offset, b.last_offset))
            .collect()
    }

    /// Records a complete batch: the next fetch starts after its last offset (or stays after a
    /// later batch already seen).
    fn push_batch(&mut self, info: BatchInfo) {
        let next = info.last_offset.wrapping_add(1);
        self.next_offset = Some(self.next_offset.map_or(next, |n| n.max(next)));
        self.batches.push(info);
    }
}

/// What one batch's header says; read once, while decoding, so the consumer needs no second
/// pass over the bytes for read_committed filtering or leader epochs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchInfo {
    /// First offset (of the first inner message, for a compressed legacy wrapper).
    pub base_offset: i64,
    /// Last offset, from the header (compaction may have removed the records at the end).
    pub last_offset: i64,
    /// Partition leader epoch when the batch was written (magic 2 only).
    pub leader_epoch: Option<i32>,
    /// Producer id, -1 for none.
    pub producer_id: i64,
    /// Producer epoch, -1 for none (and for legacy messages).
    pub producer_epoch: i16,
    /// Sequence number of the batch's first record (KIP-98), -1 for none.
    pub base_sequence: i32,
    /// Part of a transaction.
    pub transactional: bool,
    /// Holds control records (transaction markers).
    pub control: bool,
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
/// A record batch's header (magic 2), records aside: what a batch costs beyond its records.
pub(crate) const BATCH_HEADER: usize = v2::HEADER;

/// Decodes every complete batch in `bytes` (a Fetch response's `records`). A partial batch at
/// the end is ignored; whether a batch is partial is judged from its length field alone, so a
/// length below the smallest possible message is corruption, not a partial batch (as in Java's
/// `ByteBufferLogInputStream`).
pub fn decode(bytes: &Bytes, limits: &DecodeLimits) -> Result<Decoded, RecordsError> {
    let mut out = Decoded::default();
    let mut rest = bytes.clone();
    while let Some(head) = rest.first_chunk::<LOG_OVERHEAD>() {
        let len = i32::from_be_bytes(be(head, 8));
        let size = match usize::try_from(len) {
            Ok(l) if l >= legacy::overhead(0) => LOG_OVERHEAD + l,
            _ => return Err(RecordsError::Corrupt(format!("batch length {len}"))),
        };
        if size > rest.len() {
            break; // the broker cut the last batch at max.bytes
        }
        let batch = rest.split_to(size);
        // In bounds: `size` is at least LOG_OVERHEAD + 14.
        match batch[MAGIC_OFFSET] {
            2 => v2::decode_batch(batch, limits, &mut out)?,
            0 | 1 => legacy::decode_message(batch, limits, &mut out)?,
            m => return Err(RecordsError::Corrupt(format!("unknown magic byte {m}"))),
        }
    }
    Ok(out)
}

/// Who writes a batch, for the idempotent producer (KIP-98): the producer id and epoch from
/// InitProducerId and the sequence number of the batch's first record in its partition.
///
/// The three travel in the batch header, under its CRC. A retried batch must be resent with the
/// same three values (the broker recognises a duplicate by them), so they are fixed when the
/// batch is first encoded and the same bytes are resent; only after an epoch bump does a batch
/// take new values, through [`restamp`], which rewrites the header without re-encoding the
/// records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchProducer {
    /// Producer id, -1 for none.
    pub id: i64,
    /// Producer epoch, -1 for none.
    pub epoch: i16,
    /// Sequence of the first record, -1 for none.
    pub base_sequence: i32,
    /// Part of a transaction (the header's transactional attribute): a `read_committed`
    /// consumer returns it only once its transaction's commit marker is written.
    pub transactional: bool,
}

impl BatchProducer {
    /// No producer: a plain, non-idempotent batch.
    pub const NONE: BatchProducer = BatchProducer {
        id: -1,
        epoch: -1,
        base_sequence: -1,
        transactional: false,
    };

    /// Whether this names a producer (an idempotent batch).
    pub fn is_some(&self) -> bool {
        self.id >= 0
    }

    /// Refuses values a broker would reject: an id with a negative epoch or sequence, or an
    /// epoch or sequence without an id.
    fn check(&self) -> Result<(), RecordsError> {
        let ok = if self.id >= 0 {
            self.epoch >= 0 && self.base_sequence >= 0
        } else if self.transactional {
            false
        } else {
            *self == BatchProducer::NONE
        };
        if ok {
            Ok(())
        } else {
            Err(RecordsError::Unsupported(format!(
                "invalid producer id {}, epoch {}, base sequence {}",
                self.id, self.epoch, self.base_sequence
            )))
        }
    }
}

impl Default for BatchProducer {
    fn default() -> Self {
        BatchProducer::NONE
    }
}

/// Encodes `records` as one batch for a Produce request: magic 2 (record batch, Produce v3+)
/// when `magic == 2`, else a legacy message set of that magic (Produce v0–v2, brokers before
/// 0.11; magic 1 from Produce v2). Offsets are 0, 1, …: the broker assigns the real ones. No
/// records encode to no bytes. The batch has no producer: see [`encode_with`].
pub fn encode(records: &[NewRecord], compression: Compression, magic: i8) -> Result<Bytes, RecordsError> {
    encode_with(records, compression, magic, &BatchProducer::NONE)
}

/// [`encode`] with a producer id, epoch and base sequence in the batch header (idempotent
/// produce, magic 2 only: legacy message sets have no room for them and fail with
/// [`RecordsError::Unsupported`], as do an id without epoch and sequence or the reverse).
pub fn encode_with(
    records: &[NewRecord],
    compression: Compression,
    magic: i8,
    producer: &BatchProducer,
) -> Result<Bytes, RecordsError> {
    producer.check()?;
    match magic {
        2 => v2::encode_batch_with(records, compression, producer),
        0 | 1 if producer.is_some() => Err(RecordsError::Unsupported(format!(
            "magic {magic} message sets carry no producer id (idempotence needs Produce v3+)"
        ))),
        0 | 1 => legacy::encode_message_set(records, compression, magic),
        m => Err(RecordsError::Unsupported(format!("unknown magic {m}"))),
    }
}

/// A copy of one encoded record batch (magic 2, as [`encode_with`] writes it) with another
/// producer id, epoch and base sequence, and its CRC recomputed; the records are not touched,
/// so a compressed batch is not compressed again. For resending a batch after an epoch bump
/// renumbered its partition's sequences. No bytes stay no bytes.
pub fn restamp(batch: &Bytes, producer: &BatchProducer) -> Result<Bytes, RecordsError> {
    producer.check()?;
    if batch.is_empty() {
        return Ok(Bytes::new());
    }
    v2::restamp(batch, producer)
}

/// The `N` bytes at `at`, for a big-endian integer at a fixed position of a header whose length
/// has been checked.
fn be<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[at..at + N]);
    a
}

/// The current time in milliseconds since the epoch, for record timestamps.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
