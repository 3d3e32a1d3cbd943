//! Legacy message sets (magic 0 and 1), as brokers before 0.11 read and write them and newer
//! brokers down-convert to for old Fetch versions.

use super::{Compression, DecodeLimits, Decoded, NewRecord, RecordsError};
use bytes::Bytes;

/// Decodes one legacy message (with its offset and size header) into `out`.
pub(super) fn decode_message(
    msg: Bytes,
    limits: &DecodeLimits,
    out: &mut Decoded,
) -> Result<(), RecordsError> {
    let _ = (msg, limits, out);
    Err(RecordsError::Unsupported(
        "legacy message sets are not implemented yet".into(),
    ))
}

/// Encodes a legacy message set.
pub(super) fn encode_message_set(
    records: &[NewRecord],
    compression: Compression,
    magic: i8,
) -> Result<Bytes, RecordsError> {
    let _ = (records, compression, magic);
    Err(RecordsError::Unsupported(
        "legacy message sets are not implemented yet".into(),
    ))
}
