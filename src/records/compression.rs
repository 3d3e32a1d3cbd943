//! The four codecs Kafka compresses records with, as its Java client frames them, with bounded
//! decompression.
//!
//! Every decompressor stops at `limit + 1` output bytes: a small batch that inflates to
//! gigabytes (a decompression bomb, or plain garbage that happens to parse) costs at most the
//! limit in memory and is reported as [`RecordsError::TooLarge`].

use super::{Compression, RecordsError};
use std::io::{Read, Write};

/// The xerial snappy-java stream header: magic, then format version 1 and compatible version 1
/// (big-endian i32 each). Kafka's Java client writes snappy through `SnappyOutputStream`, so
/// every snappy payload (record batches and legacy wrappers alike) starts with it.
const XERIAL_HEADER: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
/// The part of [`XERIAL_HEADER`] that identifies the framing (the versions are not checked,
/// as snappy-java does not).
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
/// snappy-java's default block size, which Kafka keeps.
const XERIAL_BLOCK: usize = 32 * 1024;

/// The LZ4 frame magic number as it appears on the wire (little-endian 0x184D2204).
const LZ4_MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];

/// zstd level Kafka uses by default (`compression.zstd.level`).
const ZSTD_LEVEL: i32 = 3;

/// Compresses `data` as a Kafka producer of that record format would.
///
/// `lz4_broken_checksum` selects the LZ4 frame header checksum that Kafka wrote for magic 0
/// messages before KAFKA-3160 and that brokers of that era still verify.
pub(super) fn compress(
    codec: Compression,
    data: &[u8],
    lz4_broken_checksum: bool,
) -> Result<Vec<u8>, RecordsError> {
    let failed = |e: std::io::Error| RecordsError::Unsupported(format!("{codec:?} compression failed: {e}"));
    match codec {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(data).map_err(failed)?;
            e.finish().map_err(failed)
        }
        Compression::Snappy => {
            let mut out = Vec::with_capacity(XERIAL_HEADER.len() + snap::raw::max_compress_len(data.len()));
            out.extend_from_slice(XERIAL_HEADER);
            let mut enc = snap::raw::Encoder::new();
            for block in data.chunks(XERIAL_BLOCK) {
                let c = enc
                    .compress_vec(block)
                    .map_err(|e| RecordsError::Unsupported(format!("snappy compression failed: {e}")))?;
                // A block is at most 32 KiB before compression, so its length fits.
                out.extend_from_slice(&(c.len() as u32).to_be_bytes());
                out.extend_from_slice(&c);
            }
            Ok(out)
        }
        Compression::Lz4 => {
            // What KafkaLZ4BlockOutputStream writes: 64 KiB independent blocks, no checksums
            // beyond the header's, which is what every Kafka reader understands.
            let mut e = lz4::EncoderBuilder::new()
                .block_size(lz4::BlockSize::Max64KB)
                .block_mode(lz4::BlockMode::Independent)
                .checksum(lz4::ContentChecksum::NoChecksum)
                .build(Vec::new())
                .map_err(failed)?;
            e.write_all(data).map_err(failed)?;
            let (mut out, r) = e.finish();
            r.map_err(failed)?;
            if lz4_broken_checksum {
                set_lz4_header_checksum(&mut out, true);
            }
            Ok(out)
        }
        Compression::Zstd => zstd::bulk::compress(data, ZSTD_LEVEL).map_err(failed),
    }
}

/// Decompresses `data`, failing with [`RecordsError::TooLarge`] beyond `limit` bytes.
///
/// `lz4_broken_checksum` says the LZ4 header checksum may be the pre-KAFKA-3160 one (magic 0):
/// like Kafka's reader, the checksum is then not verified.
pub(super) fn decompress(
    codec: Compression,
    data: &[u8],
    limit: usize,
    lz4_broken_checksum: bool,
) -> Result<Vec<u8>, RecordsError> {
    let corrupt = |e: std::io::Error| RecordsError::Corrupt(format!("{codec:?} data: {e}"));
    // Real data rarely compresses beyond 4:1; start there and let the vector grow (at most to
    // about twice the limit) when it does.
    let hint = data
        .len()
        .saturating_mul(4)
        .clamp(256, limit.saturating_add(1).max(256));
    match codec {
        Compression::None => Ok(data.to_vec()),
        // Java reads gzip with GZIPInputStream, which accepts concatenated members.
        Compression::Gzip => read_bounded(flate2::read::MultiGzDecoder::new(data), limit, hint, corrupt),
        Compression::Snappy => snappy_decompress(data, limit),
        Compression::Lz4 => {
            let mut fixed;
            let data = if lz4_broken_checksum {
                fixed = data.to_vec();
                set_lz4_header_checksum(&mut fixed, false);
                &fixed[..]
            } else {
                data
            };
            let mut d = lz4::Decoder::new(data).map_err(corrupt)?;
            let out = read_bounded(&mut d, limit, hint, corrupt)?;
            // The reader ends quietly at the end of the input, even mid-frame.
            d.finish()
                .1
                .map_err(|_| RecordsError::Corrupt("LZ4 frame is truncated".into()))?;
            Ok(out)
        }
        Compression::Zstd => {
            let d = zstd::stream::read::Decoder::with_buffer(data).map_err(corrupt)?;
            read_bounded(d, limit, hint, corrupt)
        }
    }
}

/// Reads `r` to its end, but never more than `limit + 1` bytes.
fn read_bounded(
    r: impl Read,
    limit: usize,
    hint: usize,
    corrupt: impl Fn(std::io::Error) -> RecordsError,
) -> Result<Vec<u8>, RecordsError> {
    let mut out = Vec::with_capacity(hint);
    r.take((limit as u64).saturating_add(1))
        .read_to_end(&mut out)
        .map_err(corrupt)?;
    if out.len() > limit {
        return Err(RecordsError::TooLarge { limit });
    }
    Ok(out)
}

/// Snappy as snappy-java's `SnappyInputStream` reads it: xerial-framed blocks (possibly several
/// concatenated streams), or one raw snappy block when the header is absent.
fn snappy_decompress(data: &[u8], limit: usize) -> Result<Vec<u8>, RecordsError> {
    let corrupt = |e: snap::Error| RecordsError::Corrupt(format!("snappy data: {e}"));
    let mut dec = snap::raw::Decoder::new();
    if !data.starts_with(XERIAL_MAGIC) {
        // The length a snappy block declares up front is checked before anything is allocated.
        let len = snap::raw::decompress_len(data).map_err(corrupt)?;
        if len > limit {
            return Err(RecordsError::TooLarge { limit });
        }
        return dec.decompress_vec(data).map_err(corrupt);
    }
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        if rest.starts_with(XERIAL_MAGIC) {
            rest = rest
                .get(XERIAL_HEADER.len()..)
                .ok_or_else(|| RecordsError::Corrupt("truncated snappy stream header".into()))?;
            continue;
        }
        let (len, tail) = match rest.split_first_chunk::<4>() {
            Some((len, tail)) => (u32::from_be_bytes(*len) as usize, tail),
            None => return Err(RecordsError::Corrupt("truncated snappy block length".into())),
        };
        let block = tail
            .get(..len)
            .ok_or_else(|| RecordsError::Corrupt(format!("snappy block of {len} bytes is truncated")))?;
        let n = snap::raw::decompress_len(block).map_err(corrupt)?;
        let start = out.len();
        if n > limit - start {
            return Err(RecordsError::TooLarge { limit });
        }
        out.resize(start + n, 0);
        let written = dec.decompress(block, &mut out[start..]).map_err(corrupt)?;
        out.truncate(start + written);
        rest = &tail[len..];
    }
    Ok(out)
}

/// Rewrites the header checksum (HC) byte of the LZ4 frame at the start of `frame`: the correct
/// one (xxHash32 of the frame descriptor) or, with `broken`, the one Kafka wrote for magic 0
/// before KAFKA-3160 (xxHash32 that also covers the four magic bytes). Anything that is not
/// an LZ4 frame header is left alone for the decoder to reject.
fn set_lz4_header_checksum(frame: &mut [u8], broken: bool) {
    if frame.len() < 7 || frame[..4] != LZ4_MAGIC {
        return;
    }
    let flg = frame[4];
    // FLG, BD, then the optional content size (bit 3) and dictionary id (bit 0).
    let descriptor = 2 + if flg & 0x08 != 0 { 8 } else { 0 } + if flg & 0x01 != 0 { 4 } else { 0 };
    let hc = 4 + descriptor;
    if hc >= frame.len() {
        return;
    }
    let from = if broken { 0 } else { 4 };
    frame[hc] = (xxh32(&frame[from..hc], 0) >> 8) as u8;
}

const P1: u32 = 0x9E37_79B1;
const P2: u32 = 0x85EB_CA77;
const P3: u32 = 0xC2B2_AE3D;
const P4: u32 = 0x27D4_EB2F;
const P5: u32 = 0x1656_67B1;

/// xxHash32, for the LZ4 frame header checksum (a few bytes, so no need for speed).
pub(super) fn xxh32(data: &[u8], seed: u32) -> u32 {
    let round = |acc: u32, lane: &[u8]| {
        let v = u32::from_le_bytes([lane[0], lane[1], lane[2], lane[3]]);
        acc.wrapping_add(v.wrapping_mul(P2))
            .rotate_left(13)
            .wrapping_mul(P1)
    };
    let mut stripes = data.chunks_exact(16);
    let mut h = if data.len() >= 16 {
        let mut v = [
            seed.wrapping_add(P1).wrapping_add(P2),
            seed.wrapping_add(P2),
            seed,
            seed.wrapping_sub(P1),
        ];
        for stripe in &mut stripes {
            for (i, acc) in v.iter_mut().enumerate() {
                *acc = round(*acc, &stripe[4 * i..]);
            }
        }
        v[0].rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18))
    } else {
        seed.wrapping_add(P5)
    };
    h = h.wrapping_add(data.len() as u32);
    let tail = stripes.remainder();
    let mut words = tail.chunks_exact(4);
    for w in &mut words {
        let v = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        h = h
            .wrapping_add(v.wrapping_mul(P3))
            .rotate_left(17)
            .wrapping_mul(P4);
    }
    for &b in words.remainder() {
        h = h
            .wrapping_add((b as u32).wrapping_mul(P5))
            .rotate_left(11)
            .wrapping_mul(P1);
    }
    h ^= h >> 15;
    h = h.wrapping_mul(P2);
    h ^= h >> 13;
    h = h.wrapping_mul(P3);
    h ^ (h >> 16)
}
