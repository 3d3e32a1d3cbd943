//! Legacy message sets (magic 0 and 1), as brokers before 0.11 read and write them and newer
//! brokers down-convert to for old Fetch versions: `LegacyRecord` and
//! `AbstractLegacyRecordBatch` in Kafka.
//!
//! A message is: offset (int64), size (int32), then what the size counts: CRC-32 (uint32,
//! over everything after it), magic (int8), attributes (int8; the low 3 bits are the codec,
//! bit 3 on magic 1 is the timestamp type), timestamp (int64, magic 1 only), key and value
//! (int32 length, -1 for null). A compressed message is a wrapper whose value is a whole
//! message set, compressed; its offset is that of its last inner message.

use super::compression::{compress, decompress};
use super::{
    be, now_ms, BatchInfo, Compression, DecodeLimits, Decoded, NewRecord, Record, RecordsError, LOG_OVERHEAD,
};
use bytes::Bytes;

/// Bytes of a message from its CRC to its key: CRC, magic, attributes and, on magic 1, the
/// timestamp.
fn fixed_part(magic: u8) -> usize {
    if magic == 0 {
        6
    } else {
        14
    }
}

/// Bytes of an empty message after its size field (CRC, magic, attributes, timestamp on magic 1,
/// key and value lengths): `LegacyRecord.RECORD_OVERHEAD_V0` / `_V1`.
pub(super) fn overhead(magic: u8) -> usize {
    fixed_part(magic) + 8
}

const TIMESTAMP_TYPE_LOG_APPEND: u8 = 0x08;

/// One message as read off the wire (CRC verified).
struct Message {
    offset: i64,
    magic: u8,
    attributes: u8,
    /// -1 on magic 0, which has none.
    timestamp: i64,
    key: Option<Bytes>,
    value: Option<Bytes>,
}

/// Parses the one message that `msg` holds exactly (offset and size included).
fn parse(msg: &Bytes) -> Result<Message, RecordsError> {
    let magic = match msg.get(16) {
        Some(&m) if m <= 1 => m,
        Some(&m) => {
            return Err(RecordsError::Corrupt(format!(
                "message magic {m} in a magic 0/1 set"
            )))
        }
        None => return Err(RecordsError::Corrupt("message shorter than its header".into())),
    };
    if msg.len() < LOG_OVERHEAD + overhead(magic) {
        return Err(RecordsError::Corrupt(format!(
            "magic {magic} message of {} bytes is shorter than its header",
            msg.len()
        )));
    }
    let stored_crc = u32::from_be_bytes(be(msg, 12));
    let crc = crc32fast::hash(&msg[16..]);
    if crc != stored_crc {
        return Err(RecordsError::Corrupt(format!(
            "message CRC is {crc:#010x}, expected {stored_crc:#010x}"
        )));
    }
    let attributes = msg[17];
    let timestamp = if magic == 0 {
        -1
    } else {
        i64::from_be_bytes(be(msg, 18))
    };
    let mut pos = LOG_OVERHEAD + fixed_part(magic);
    let mut field = |what: &str| -> Result<Option<Bytes>, RecordsError> {
        // At least 4 bytes remain: the header check covers the key length, and the key read
        // below leaves 4 for the value length or fails.
        let len = msg
            .get(pos..pos + 4)
            .map(|b| i32::from_be_bytes(be(b, 0)))
            .ok_or_else(|| RecordsError::Corrupt(format!("message {what} length is truncated")))?;
        pos += 4;
        match len {
            -1 => Ok(None),
            n if n < 0 => Err(RecordsError::Corrupt(format!("message {what} length {n}"))),
            n if n as usize > msg.len() - pos => Err(RecordsError::Corrupt(format!(
                "message {what} of {n} bytes is longer than the message"
            ))),
            n => {
                let b = msg.slice(pos..pos + n as usize);
                pos += n as usize;
                Ok(Some(b))
            }
        }
    };
    let key = field("key")?;
    let value = field("value")?;
    if pos != msg.len() {
        return Err(RecordsError::Corrupt(format!(
            "{} bytes after the message value",
            msg.len() - pos
        )));
    }
    Ok(Message {
        offset: i64::from_be_bytes(be(msg, 0)),
        magic,
        attributes,
        timestamp,
        key,
        value,
    })
}

/// Legacy messages have no producer, transaction or leader epoch.
fn legacy_batch(base_offset: i64, last_offset: i64) -> BatchInfo {
    BatchInfo {
        base_offset,
        last_offset,
        leader_epoch: None,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        transactional: false,
        control: false,
    }
}

/// Decodes one legacy message (with its offset and size header) into `out`.
pub(super) fn decode_message(
    msg: Bytes,
    limits: &DecodeLimits,
    out: &mut Decoded,
) -> Result<(), RecordsError> {
    let m = parse(&msg)?;
    let codec = Compression::from_code(m.attributes & 0x07)?;
    if codec == Compression::None {
        out.records.push(Record {
            offset: m.offset,
            timestamp: m.timestamp,
            key: m.key,
            value: m.value,
            headers: Vec::new(),
        });
        out.push_batch(legacy_batch(m.offset, m.offset));
        return Ok(());
    }
    if codec == Compression::Zstd {
        return Err(RecordsError::Corrupt("zstd in a magic 0/1 message".into()));
    }
    let Some(wrapped) = m.value else {
        return Err(RecordsError::Corrupt("compressed message without a value".into()));
    };
    let inner = Bytes::from(decompress(
        codec,
        &wrapped,
        limits.max_decompressed,
        m.magic == 0,
    )?);

    let mut messages = Vec::new();
    let mut rest = inner;
    while !rest.is_empty() {
        let size = match rest.first_chunk::<LOG_OVERHEAD>() {
            Some(head) => i32::from_be_bytes(be(head, 8)),
            None => {
                return Err(RecordsError::Corrupt(
                    "truncated message in a compressed set".into(),
                ))
            }
        };
        let end = usize::try_from(size)
            .ok()
            .and_then(|s| s.checked_add(LOG_OVERHEAD))
            .filter(|&end| end <= rest.len())
            .ok_or_else(|| RecordsError::Corrupt(format!("message size {size} in a compressed set")))?;
        let inner = parse(&rest.split_to(end))?;
        if inner.magic != m.magic {
            return Err(RecordsError::Corrupt(format!(
                "magic {} message inside a magic {} wrapper",
                inner.magic, m.magic
            )));
        }
        if inner.attributes & 0x07 != 0 {
            return Err(RecordsError::Corrupt(
                "compressed message inside a compressed one".into(),
            ));
        }
        messages.push(inner);
    }
    // Magic 1 inner offsets are relative (0, 1, …) and the wrapper carries the absolute offset
    // of the last one; magic 0 inner offsets are absolute already (the broker rewrote them).
    let base = match (m.magic, messages.last()) {
        (1, Some(last)) => m.offset.wrapping_sub(last.offset),
        _ => 0,
    };
    let log_append_time = m.magic == 1 && m.attributes & TIMESTAMP_TYPE_LOG_APPEND != 0;
    let first = messages.first().map_or(m.offset, |f| base.wrapping_add(f.offset));
    out.push_batch(legacy_batch(first, m.offset));
    out.records.reserve(messages.len());
    for inner in messages {
        out.records.push(Record {
            offset: base.wrapping_add(inner.offset),
            // With LogAppendTime the broker stamps only the wrapper.
            timestamp: if log_append_time {
                m.timestamp
            } else {
                inner.timestamp
            },
            key: inner.key,
            value: inner.value,
            headers: Vec::new(),
        });
    }
    Ok(())
}

/// Appends one message to `buf`.
pub(super) fn put_message(
    buf: &mut Vec<u8>,
    offset: i64,
    magic: u8,
    attributes: u8,
    timestamp: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> Result<(), RecordsError> {
    let field_len = |b: Option<&[u8]>| b.map_or(0, <[u8]>::len);
    let size = overhead(magic)
        .checked_add(field_len(key))
        .and_then(|s| s.checked_add(field_len(value)))
        .and_then(|s| i32::try_from(s).ok())
        .ok_or_else(|| RecordsError::Unsupported("message larger than 2 GiB".into()))?;
    buf.extend_from_slice(&offset.to_be_bytes());
    buf.extend_from_slice(&size.to_be_bytes());
    let crc_at = buf.len();
    buf.extend_from_slice(&[0; 4]);
    buf.push(magic);
    buf.push(attributes);
    if magic == 1 {
        buf.extend_from_slice(&timestamp.to_be_bytes());
    }
    for b in [key, value] {
        match b {
            // The size check above bounds every length.
            Some(b) => {
                buf.extend_from_slice(&(b.len() as i32).to_be_bytes());
                buf.extend_from_slice(b);
            }
            None => buf.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    let crc = crc32fast::hash(&buf[crc_at + 4..]);
    buf[crc_at..crc_at + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

/// Encodes a legacy message set for Produce v0–v2, with offsets 0, 1, … (the broker assigns
/// real ones). Compressed, it is one wrapper message holding them (relative offsets, which
/// magic 0 brokers rewrite), stamped with the last inner offset and, on magic 1, the latest
/// timestamp. Magic 0 has no timestamps; neither format has headers.
pub(super) fn encode_message_set(
    records: &[NewRecord],
    compression: Compression,
    magic: i8,
) -> Result<Bytes, RecordsError> {
    let magic = match magic {
        0 => 0u8,
        1 => 1u8,
        m => {
            return Err(RecordsError::Unsupported(format!(
                "magic {m} is not a legacy format"
            )))
        }
    };
    if records.iter().any(|r| !r.headers.is_empty()) {
        return Err(RecordsError::Unsupported(format!(
            "record headers need magic 2 (Kafka 0.11+), not magic {magic}"
        )));
    }
    if compression == Compression::Zstd {
        return Err(RecordsError::Unsupported(format!(
            "zstd needs magic 2 (Kafka 2.1+), not magic {magic}"
        )));
    }
    if records.is_empty() {
        return Ok(Bytes::new());
    }
    let now = now_ms();
    let mut set = Vec::new();
    let mut max_timestamp = i64::MIN;
    for (i, r) in records.iter().enumerate() {
        let timestamp = r.timestamp.unwrap_or(now);
        max_timestamp = max_timestamp.max(timestamp);
        put_message(
            &mut set,
            i as i64,
            magic,
            0,
            timestamp,
            r.key.as_deref(),
            r.value.as_deref(),
        )?;
    }
    if compression == Compression::None {
        return Ok(Bytes::from(set));
    }
    let wrapped = compress(compression, &set, magic == 0)?;
    let mut out = Vec::with_capacity(LOG_OVERHEAD + overhead(magic) + wrapped.len());
    put_message(
        &mut out,
        records.len() as i64 - 1,
        magic,
        compression.code() as u8,
        max_timestamp,
        None,
        Some(&wrapped),
    )?;
    Ok(Bytes::from(out))
}
