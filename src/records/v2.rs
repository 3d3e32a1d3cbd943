//! Record batches (magic 2, Kafka 0.11+): `DefaultRecordBatch` and `DefaultRecord` in Kafka.
//!
//! Decoded here rather than with `kafka-protocol`'s `RecordBatchDecoder` (0.18), whose record
//! reader trusts counts on the wire: a 13-byte record declaring 2^31-1 headers makes it ask for
//! 36 GB and abort the process, behind a valid CRC. It also adds timestamp deltas unchecked (a
//! panic in debug builds), keeps one header per key and ignores `LogAppendTime`. Encoded here
//! too, so that repeated header keys survive and every format shares one set of codecs
//! ([`super::compression`]).

use super::compression::{compress, decompress};
use super::{
    be, now_ms, BatchInfo, BatchProducer, Compression, DecodeLimits, Decoded, NewRecord, Record, RecordsError,
};
use crate::protocol::wire::{put_varint, put_varlong};
use crate::protocol::Decoder;
use bytes::Bytes;

/// Bytes from the base offset to the first record: baseOffset (8), batchLength (4),
/// partitionLeaderEpoch (4), magic (1), crc (4), attributes (2), lastOffsetDelta (4),
/// baseTimestamp (8), maxTimestamp (8), producerId (8), producerEpoch (2), baseSequence (4),
/// recordsCount (4).
pub(super) const HEADER: usize = 61;
/// Where the CRC-32C is stored, and where the bytes it covers (attributes to the end) start.
const CRC_AT: usize = 17;
const CRC_FROM: usize = 21;
/// Where producer id (8), producer epoch (2) and base sequence (4) are, inside the CRC.
const PRODUCER_AT: usize = 43;
/// The smallest a record can be on the wire: length, attributes, timestamp delta, offset
/// delta, key length, value length and header count, one byte each.
const MIN_RECORD: usize = 7;

const TIMESTAMP_TYPE_LOG_APPEND: i16 = 0x08;
const TRANSACTIONAL: i16 = 0x10;
const CONTROL: i16 = 0x20;

fn corrupt(e: impl std::fmt::Display) -> RecordsError {
    RecordsError::Corrupt(e.to_string())
}

/// Decodes one complete batch (exactly its bytes) into `out`.
pub(super) fn decode_batch(
    batch: Bytes,
    limits: &DecodeLimits,
    out: &mut Decoded,
) -> Result<(), RecordsError> {
    if batch.len() < HEADER {
        return Err(RecordsError::Corrupt(format!(
            "record batch of {} bytes is shorter than its header",
            batch.len()
        )));
    }
    let stored_crc = u32::from_be_bytes(be(&batch, CRC_AT));
    let crc = crc32c::crc32c(&batch[CRC_FROM..]);
    if crc != stored_crc {
        return Err(RecordsError::Corrupt(format!(
            "record batch CRC is {crc:#010x}, expected {stored_crc:#010x}"
        )));
    }
    let base_offset = i64::from_be_bytes(be(&batch, 0));
    let attributes = i16::from_be_bytes(be(&batch, 21));
    let last_offset_delta = i32::from_be_bytes(be(&batch, 23));
    let base_timestamp = i64::from_be_bytes(be(&batch, 27));
    let max_timestamp = i64::from_be_bytes(be(&batch, 35));
    let producer_id = i64::from_be_bytes(be(&batch, PRODUCER_AT));
    let producer_epoch = i16::from_be_bytes(be(&batch, PRODUCER_AT + 8));
    let base_sequence = i32::from_be_bytes(be(&batch, PRODUCER_AT + 10));
    let record_count = i32::from_be_bytes(be(&batch, 57));
    if record_count < 0 {
        return Err(RecordsError::Corrupt(format!(
            "negative record count {record_count}"
        )));
    }
    let codec = Compression::from_code((attributes & 0x07) as u8)?;
    let control = attributes & CONTROL != 0;
    let body = batch.slice(HEADER..);
    let body = match codec {
        Compression::None => body,
        c => Bytes::from(decompress(c, &body, limits.max_decompressed, false)?),
    };

    // Offsets come from the header, not the records: compaction may have removed the last
    // records (or all of them), and the next fetch must still start after the batch.
    let leader_epoch = i32::from_be_bytes(be(&batch, 12));
    out.push_batch(BatchInfo {
        base_offset,
        last_offset: base_offset.wrapping_add(last_offset_delta as i64),
        leader_epoch: (leader_epoch >= 0).then_some(leader_epoch),
        producer_id,
        producer_epoch,
        base_sequence,
        transactional: attributes & TRANSACTIONAL != 0,
        control,
    });

    let mut d = Decoder::new(&body);
    // The count is only a hint: a hostile one cannot reserve more than the bytes could hold.
    out.records
        .reserve((record_count as usize).min(d.remaining() / MIN_RECORD));
    for _ in 0..record_count {
        let len = d.get_varint().map_err(corrupt)?;
        if len < 0 {
            return Err(RecordsError::Corrupt(format!("negative record length {len}")));
        }
        let mut r = d.sub(len as usize).map_err(corrupt)?;
        let _attributes = r.get_i8().map_err(corrupt)?;
        let timestamp_delta = r.get_varlong().map_err(corrupt)?;
        let offset_delta = r.get_varint().map_err(corrupt)?;
        let key = nullable(&mut r, "key")?;
        let value = nullable(&mut r, "value")?;
        let header_count = r.get_varint().map_err(corrupt)?;
        if header_count < 0 {
            return Err(RecordsError::Corrupt(format!(
                "negative header count {header_count}"
            )));
        }
        // A header takes at least two bytes (two lengths).
        let mut headers = Vec::with_capacity((header_count as usize).min(r.remaining() / 2));
        for _ in 0..header_count {
            let key_len = r.get_varint().map_err(corrupt)?;
            if key_len < 0 {
                return Err(RecordsError::Corrupt(format!(
                    "negative header key length {key_len}"
                )));
            }
            let name = r.get_raw(key_len as usize).map_err(corrupt)?;
            let name = String::from_utf8(name.to_vec())
                .map_err(|_| RecordsError::Corrupt("header key is not UTF-8".into()))?;
            headers.push((name, nullable(&mut r, "header value")?));
        }
        if r.remaining() != 0 {
            return Err(RecordsError::Corrupt(format!(
                "record has {} bytes beyond its headers",
                r.remaining()
            )));
        }
        let offset = base_offset.wrapping_add(offset_delta as i64);
        if control {
            // Control record key: version (int16), type (int16): 0 abort, 1 commit. Other types
            // (KRaft's) never reach a consumer and mark nothing here.
            let kind = match key.as_deref() {
                Some([_, _, hi, lo, ..]) => i16::from_be_bytes([*hi, *lo]),
                _ => return Err(RecordsError::Corrupt("control record without a type".into())),
            };
            if kind == 0 || kind == 1 {
                out.control.push((producer_id, offset, kind == 1));
            }
            continue;
        }
        let timestamp = if attributes & TIMESTAMP_TYPE_LOG_APPEND != 0 {
            // The broker stamps only the batch; every record takes its time.
            max_timestamp
        } else {
            base_timestamp.wrapping_add(timestamp_delta)
        };
        out.records.push(Record {
            offset,
            timestamp,
            key,
            value,
            headers,
        });
    }
    if d.remaining() != 0 {
        return Err(RecordsError::Corrupt(format!(
            "{} bytes after the {record_count} records of a batch",
            d.remaining()
        )));
    }
    Ok(())
}

/// Reads varint-length bytes, -1 being null.
fn nullable(r: &mut Decoder<'_>, what: &str) -> Result<Option<Bytes>, RecordsError> {
    match r.get_varint().map_err(corrupt)? {
        -1 => Ok(None),
        n if n < 0 => Err(RecordsError::Corrupt(format!("{what} length {n}"))),
        n => r.get_raw(n as usize).map(Some).map_err(corrupt),
    }
}

fn put_nullable(buf: &mut Vec<u8>, b: Option<&[u8]>) -> Result<(), RecordsError> {
    match b {
        None => put_varint(buf, -1),
        Some(b) => {
            put_varint(buf, len_i32(b.len())?);
            buf.extend_from_slice(b);
        }
    }
    Ok(())
}

fn len_i32(n: usize) -> Result<i32, RecordsError> {
    i32::try_from(n).map_err(|_| RecordsError::Unsupported(format!("{n} bytes do not fit a record batch")))
}

/// Encodes `records` as one batch with base offset 0 (the broker assigns offsets), written by
/// `producer` (id, epoch and base sequence, already checked; all -1 for a plain batch) and with
/// create-time timestamps. No records encode to no bytes. The records' own sequences are
/// implied (base sequence + offset delta), so only the header carries them; the broker derives
/// the last sequence from the last offset delta, wrapping past `i32::MAX` to 0.
pub(super) fn encode_batch_with(
    records: &[NewRecord],
    compression: Compression,
    producer: &BatchProducer,
) -> Result<Bytes, RecordsError> {
    if records.is_empty() {
        return Ok(Bytes::new());
    }
    let count = len_i32(records.len())?;
    let now = now_ms();
    let base_timestamp = records[0].timestamp.unwrap_or(now);
    let mut max_timestamp = base_timestamp;
    // The records go right after room for the header, so that uncompressed (the producer's
    // default) they are not copied again.
    let mut buf = vec![0; HEADER];
    let mut rec = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let timestamp = r.timestamp.unwrap_or(now);
        max_timestamp = max_timestamp.max(timestamp);
        rec.clear();
        rec.push(0); // attributes: unused
        put_varlong(&mut rec, timestamp.wrapping_sub(base_timestamp));
        put_varint(&mut rec, i as i32); // below `count`, so it fits
        put_nullable(&mut rec, r.key.as_deref())?;
        put_nullable(&mut rec, r.value.as_deref())?;
        put_varint(&mut rec, len_i32(r.headers.len())?);
        for (name, value) in &r.headers {
            put_varint(&mut rec, len_i32(name.len())?);
            rec.extend_from_slice(name.as_bytes());
            put_nullable(&mut rec, value.as_deref())?;
        }
        put_varint(&mut buf, len_i32(rec.len())?);
        buf.extend_from_slice(&rec);
    }
    if compression != Compression::None {
        let body = compress(compression, &buf[HEADER..], false)?;
        buf.truncate(HEADER);
        buf.extend_from_slice(&body);
    }
    let batch_length = len_i32(buf.len() - 12)?;

    let mut header = Vec::with_capacity(HEADER);
    header.extend_from_slice(&0i64.to_be_bytes()); // base offset
    header.extend_from_slice(&batch_length.to_be_bytes());
    header.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    header.push(2); // magic
    header.extend_from_slice(&[0; 4]); // CRC, filled in below
    let transactional = if producer.transactional { TRANSACTIONAL } else { 0 };
    header.extend_from_slice(&(compression.code() as i16 | transactional).to_be_bytes());
    header.extend_from_slice(&(count - 1).to_be_bytes()); // last offset delta
    header.extend_from_slice(&base_timestamp.to_be_bytes());
    header.extend_from_slice(&max_timestamp.to_be_bytes());
    header.extend_from_slice(&producer.id.to_be_bytes());
    header.extend_from_slice(&producer.epoch.to_be_bytes());
    header.extend_from_slice(&producer.base_sequence.to_be_bytes());
    header.extend_from_slice(&count.to_be_bytes());
    buf[..HEADER].copy_from_slice(&header);
    seal(&mut buf);
    Ok(Bytes::from(buf))
}

/// Writes the CRC-32C of everything after it.
fn seal(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[CRC_FROM..]);
    batch[CRC_AT..CRC_FROM].copy_from_slice(&crc.to_be_bytes());
}

/// A copy of `batch` (exactly one magic 2 batch) with `producer` in its header. The old CRC is
/// checked first, so a batch damaged in memory is not sealed again as if it were sound.
pub(super) fn restamp(batch: &Bytes, producer: &BatchProducer) -> Result<Bytes, RecordsError> {
    if batch.len() < HEADER || batch[super::MAGIC_OFFSET] != 2 {
        return Err(RecordsError::Unsupported(
            "only a whole magic 2 record batch can be restamped".into(),
        ));
    }
    let length = i32::from_be_bytes(be(batch, 8));
    if usize::try_from(length).ok().map(|l| l + super::LOG_OVERHEAD) != Some(batch.len()) {
        return Err(RecordsError::Unsupported(
            "restamp takes exactly one record batch".into(),
        ));
    }
    if crc32c::crc32c(&batch[CRC_FROM..]) != u32::from_be_bytes(be(batch, CRC_AT)) {
        return Err(RecordsError::Corrupt(
            "record batch CRC does not match before restamp".into(),
        ));
    }
    let mut out = batch.to_vec();
    out[PRODUCER_AT..PRODUCER_AT + 8].copy_from_slice(&producer.id.to_be_bytes());
    out[PRODUCER_AT + 8..PRODUCER_AT + 10].copy_from_slice(&producer.epoch.to_be_bytes());
    out[PRODUCER_AT + 10..PRODUCER_AT + 14].copy_from_slice(&producer.base_sequence.to_be_bytes());
    seal(&mut out);
    Ok(Bytes::from(out))
}
