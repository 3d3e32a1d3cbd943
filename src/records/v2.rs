//! Record batches (magic 2) through the `kafka-protocol` crate.

use super::{now_ms, Compression, DecodeLimits, Decoded, NewRecord, Record, RecordsError};
use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression as KpCompression, Record as KpRecord, RecordBatchDecoder, RecordBatchEncoder,
    RecordEncodeOptions, TimestampType,
};

fn kp_compression(c: Compression) -> KpCompression {
    match c {
        Compression::None => KpCompression::None,
        Compression::Gzip => KpCompression::Gzip,
        Compression::Snappy => KpCompression::Snappy,
        Compression::Lz4 => KpCompression::Lz4,
        Compression::Zstd => KpCompression::Zstd,
    }
}

/// Decodes one complete batch (exactly its bytes) into `out`.
pub(super) fn decode_batch(
    batch: Bytes,
    limits: &DecodeLimits,
    out: &mut Decoded,
) -> Result<(), RecordsError> {
    // TODO(records helper): bounded decompression via decode_with_custom_compression.
    let _ = limits;
    let mut buf = batch;
    let set = RecordBatchDecoder::decode(&mut buf).map_err(|e| RecordsError::Corrupt(e.to_string()))?;
    for r in set.records {
        let next = r.offset + 1;
        out.next_offset = Some(out.next_offset.map_or(next, |n: i64| n.max(next)));
        if r.control {
            // Control record key: version (2), type (2): 0 = abort, 1 = commit.
            let commit = r.key.as_ref().is_some_and(|k| k.len() >= 4 && k[3] == 1);
            out.control.push((r.producer_id, r.offset, commit));
            continue;
        }
        if r.transactional && !out.transactional.iter().any(|&(p, _)| p == r.producer_id) {
            out.transactional.push((r.producer_id, r.offset));
        }
        out.records.push(Record {
            offset: r.offset,
            timestamp: r.timestamp,
            key: r.key,
            value: r.value,
            headers: r.headers.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        });
    }
    Ok(())
}

/// Encodes `records` as one batch with base offset 0 (the broker assigns offsets).
pub(super) fn encode_batch(records: &[NewRecord], compression: Compression) -> Result<Bytes, RecordsError> {
    let now = now_ms();
    let kp: Vec<KpRecord> = records
        .iter()
        .enumerate()
        .map(|(i, r)| KpRecord {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: -1,
            timestamp: r.timestamp.unwrap_or(now),
            key: r.key.clone(),
            value: r.value.clone(),
            headers: r
                .headers
                .iter()
                .map(|(k, v)| (StrBytes::from_string(k.clone()), v.clone()))
                .collect(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &kp,
        &RecordEncodeOptions {
            version: 2,
            compression: kp_compression(compression),
        },
    )
    .map_err(|e| RecordsError::Unsupported(e.to_string()))?;
    Ok(buf.freeze())
}
