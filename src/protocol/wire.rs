//! Kafka's wire primitives: big-endian integers, varints, (compact) (nullable) strings, bytes and
//! arrays, UUIDs and tagged-field sections.
//!
//! Writing appends to a [`WireWrite`] sink — a `Vec<u8>`, or [`Segments`], which keeps large
//! `bytes` and `records` values by reference so that a frame reaches the socket without them being
//! copied — and cannot fail except for lengths the format cannot express.
//! Reading goes through [`Decoder`], which checks every length against the bytes that remain
//! before it slices or allocates, so hostile input costs an error, never a panic or a huge
//! allocation.

use super::{DecodeError, EncodeError, Int32List, KafkaStr, UnknownTaggedFields, Uuid};
use byteorder::{BigEndian, ByteOrder};
use bytes::Bytes;
use std::io::{self, IoSlice, Write};

/// Where encoded bytes go: a `Vec<u8>`, or [`Segments`] for frames sent with vectored writes.
///
/// `'a` is how long the values being encoded live: a sink that keeps references to large
/// buffers (`Segments`) borrows them for that long instead of copying or reference-counting them.
pub trait WireWrite<'a> {
    /// Appends bytes by copying them.
    fn put_slice(&mut self, s: &[u8]);

    /// Appends one byte.
    #[inline]
    fn put_u8(&mut self, b: u8) {
        self.put_slice(&[b]);
    }

    /// Appends a large buffer (a `bytes` or `records` value) that outlives the sink. The default
    /// copies it; a sink that can hold references borrows it instead.
    #[inline]
    fn put_shared(&mut self, b: &'a [u8]) {
        self.put_slice(b);
    }
}

impl WireWrite<'_> for Vec<u8> {
    #[inline]
    fn put_slice(&mut self, s: &[u8]) {
        self.extend_from_slice(s);
    }

    #[inline]
    fn put_u8(&mut self, b: u8) {
        self.push(b);
    }
}

/// An encoded frame as copied bytes with large shared buffers spliced in by reference.
///
/// Encoding into a `Vec<u8>` copies every `bytes` and `records` value, which for a Produce
/// request or a leader's SyncGroup is nearly the whole frame. `Segments` copies only what is
/// smaller than [`Segments::SHARE_FROM`] and borrows the rest from the message being encoded
/// (for `'a`, so no reference count is touched); [`Segments::write_to`] then hands the pieces to
/// the socket in one vectored write, as Kafka's own `Send` objects do.
///
/// A connection keeps the copied part's allocation between requests with [`Segments::from_vec`]
/// and [`Segments::into_vec`].
#[derive(Debug, Default, Clone)]
pub struct Segments<'a> {
    /// Everything written by copy, in order.
    copied: Vec<u8>,
    /// Borrowed buffers and the position in `copied` they come before.
    shared: Vec<(usize, &'a [u8])>,
    /// Total length of `shared`.
    shared_len: usize,
}

impl<'a> Segments<'a> {
    /// Shared values at least this long are kept by reference; shorter ones are cheaper to copy
    /// than to track (a reference costs an I/O vector entry, and a piece of a vectored write).
    pub const SHARE_FROM: usize = 256;

    /// An empty frame.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty frame with room for `n` copied bytes.
    pub fn with_capacity(n: usize) -> Self {
        Self::from_vec(Vec::with_capacity(n))
    }

    /// An empty frame that copies into `buf`'s allocation (its contents are dropped).
    pub fn from_vec(mut buf: Vec<u8>) -> Self {
        buf.clear();
        Segments {
            copied: buf,
            shared: Vec::new(),
            shared_len: 0,
        }
    }

    /// The copied part's allocation, emptied, for the next frame; the borrows end here.
    pub fn into_vec(self) -> Vec<u8> {
        let mut buf = self.copied;
        buf.clear();
        buf
    }

    /// Encoded length in bytes.
    pub fn len(&self) -> usize {
        self.copied.len() + self.shared_len
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets the contents, keeping the allocations.
    pub fn clear(&mut self) {
        self.copied.clear();
        self.shared.clear();
        self.shared_len = 0;
    }

    /// How many buffers are held by reference.
    pub fn shared_count(&self) -> usize {
        self.shared.len()
    }

    /// Overwrites 4 already-written bytes at `pos` (counted in the whole frame) with `v`: how
    /// a size prefix is filled in once the frame is encoded. `pos` must lie in copied bytes
    /// written before any shared buffer, which a frame's first bytes always are.
    pub fn set_i32(&mut self, pos: usize, v: i32) {
        let before_shared = self.shared.first().map_or(self.copied.len(), |(at, _)| *at);
        assert!(
            pos + 4 <= before_shared,
            "set_i32 at {pos} overlaps a shared segment"
        );
        self.copied[pos..pos + 4].copy_from_slice(&v.to_be_bytes());
    }

    /// The pieces in order, empty ones left out.
    pub fn slices(&self) -> impl Iterator<Item = &[u8]> {
        self.pieces().into_iter()
    }

    fn pieces(&self) -> Vec<&[u8]> {
        let mut from = 0;
        let mut pieces = Vec::with_capacity(self.shared.len() * 2 + 1);
        for (at, b) in &self.shared {
            pieces.push(&self.copied[from..*at]);
            pieces.push(&b[..]);
            from = *at;
        }
        pieces.push(&self.copied[from..]);
        pieces.retain(|p| !p.is_empty());
        pieces
    }

    /// The frame as one contiguous buffer (tests, and sinks that need one).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len());
        for p in self.slices() {
            v.extend_from_slice(p);
        }
        v
    }

    /// Writes the whole frame with vectored writes, retrying short ones.
    pub fn write_to<W: Write + ?Sized>(&self, w: &mut W) -> io::Result<()> {
        if self.shared.is_empty() {
            return w.write_all(&self.copied);
        }
        // Linux takes at most IOV_MAX (1024) vectors per call; a bigger batch is sent in turns.
        const BATCH: usize = 1024;
        let pieces = self.pieces();
        // The first piece not fully written, and how much of it was.
        let (mut first, mut offset) = (0, 0);
        while first < pieces.len() {
            let batch: Vec<IoSlice<'_>> = std::iter::once(&pieces[first][offset..])
                .chain(pieces[first + 1..].iter().copied())
                .take(BATCH)
                .map(IoSlice::new)
                .collect();
            let mut n = match w.write_vectored(&batch) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            // Step over what was written (`IoSlice::advance_slices` needs Rust 1.81).
            while first < pieces.len() && n >= pieces[first].len() - offset {
                n -= pieces[first].len() - offset;
                first += 1;
                offset = 0;
            }
            offset += n;
        }
        Ok(())
    }
}

impl<'a> WireWrite<'a> for Segments<'a> {
    #[inline]
    fn put_slice(&mut self, s: &[u8]) {
        self.copied.extend_from_slice(s);
    }

    #[inline]
    fn put_u8(&mut self, b: u8) {
        self.copied.push(b);
    }

    #[inline]
    fn put_shared(&mut self, b: &'a [u8]) {
        if b.len() < Self::SHARE_FROM {
            self.copied.extend_from_slice(b);
        } else {
            self.shared.push((self.copied.len(), b));
            self.shared_len += b.len();
        }
    }
}

/// Appends a boolean (one byte, 0 or 1).
#[inline]
pub fn put_bool<'a, B: WireWrite<'a> + ?Sized>(buf: &mut B, v: bool) {
    buf.put_u8(v as u8);
}

/// Appends an `int8`.
#[inline]
pub fn put_i8<'a, B: WireWrite<'a> + ?Sized>(buf: &mut B, v: i8) {
    buf.put_u8(v as u8);
}

macro_rules! put_int {
    ($name:ident, $ty:ty, $n:expr, $write:ident) => {
        #[doc = concat!("Appends a big-endian `", stringify!($ty), "`.")]
        #[inline]
        pub fn $name<'a, B: WireWrite<'a> + ?Sized>(buf: &mut B, v: $ty) {
            let mut b = [0u8; $n];
            BigEndian::$write(&mut b, v);
            buf.put_slice(&b);
        }
    };
}

put_int!(put_i16, i16, 2, write_i16);
put_int!(put_u16, u16, 2, write_u16);
put_int!(put_i32, i32, 4, write_i32);
put_int!(put_u32, u32, 4, write_u32);
put_int!(put_i64, i64, 8, write_i64);
put_int!(put_f64, f64, 8, write_f64);

/// Appends a UUID's 16 bytes.
#[inline]
pub fn put_uuid<'a, B: WireWrite<'a> + ?Sized>(buf: &mut B, v: &Uuid) {
    buf.put_slice(&v.0);
}

/// Appends an unsigned varint (LEB128, as Kafka's `ByteUtils.writeUnsignedVarint`).
// Always inlined, with the rest out of line: lengths, counts and tags are nearly always one
// byte, and a call per length prefix cost more than the byte.
#[inline(always)]
pub fn put_uvarint<'a, B: WireWrite<'a> + ?Sized>(buf: &mut B, v: u32) {
    if v < 0x80 {
        buf.put_u8(v as u8);
    } else {
        put_leb128(buf, u64::from(v));
    }
}

/// Appends an unsigned 64-bit varint.
#[inline]
pub fn put_uvarlong<'a, B: WireWrite<'a> + ?Sized>(buf: &mut B, v: u64) {
    if v < 0x80 {
        buf.put_u8(v as u8);
    } else {
        put_leb128(buf, v);
    }
}

/// The multi-byte case of [`put_uvarint`] and [`put_uvarlong`] (a `u32` encodes as the same
/// `u64`).
#[inline(never)]
fn put_leb128<'a, B: WireWrite<'a> + ?Sized>(buf: &mut B, mut v: u64) {
    let mut b = [0u8; 10];
    let mut n = 0;
    while v >= 0x80 {
        b[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    b[n] = v as u8;
    buf.put_slice(&b[..=n]);
}

/// Appends a zig-zag signed varint (record fields).
#[inline]
pub fn put_varint<'a, B: WireWrite<'a> + ?Sized>(buf: &mut B, v: i32) {
    put_uvarint(buf, ((v << 1) ^ (v >> 31)) as u32);
}

/// Appends a zig-zag signed varlong (record fields).
#[inline]
pub fn put_varlong<'a, B: WireWrite<'a> + ?Sized>(buf: &mut B, v: i64) {
    put_uvarlong(buf, ((v << 1) ^ (v >> 63)) as u64);
}

/// Appends a length prefix: compact (unsigned varint of length + 1), `int16` for a classic
/// string (`short`), else `int32`; the mirror of `Decoder::get_len`.
// Always inlined: `compact` and `short` are constants at every call site, and left as a call the
// generic encoders ran Metadata v12 a quarter slower.
#[inline(always)]
fn put_len<'a, B: WireWrite<'a> + ?Sized>(
    buf: &mut B,
    len: usize,
    compact: bool,
    short: bool,
) -> Result<(), EncodeError> {
    let max = match (compact, short) {
        (true, _) => u32::MAX as usize - 1,
        (false, true) => i16::MAX as usize,
        (false, false) => i32::MAX as usize,
    };
    if len > max {
        return Err(EncodeError::TooLong { len, max });
    }
    if compact {
        // Compact lengths are stored plus one so that zero can mean null.
        put_uvarint(buf, len as u32 + 1);
    } else if short {
        put_i16(buf, len as i16);
    } else {
        put_i32(buf, len as i32);
    }
    Ok(())
}

/// Appends a string: `int16` length (or compact unsigned varint length + 1) then UTF-8 bytes.
#[inline(always)]
pub fn put_string<'a, B: WireWrite<'a> + ?Sized>(
    buf: &mut B,
    s: &str,
    compact: bool,
) -> Result<(), EncodeError> {
    put_len(buf, s.len(), compact, true)?;
    buf.put_slice(s.as_bytes());
    Ok(())
}

/// Appends a null string (`-1`, or compact `0`).
#[inline]
pub fn put_null_string<'a, B: WireWrite<'a> + ?Sized>(buf: &mut B, compact: bool) {
    if compact {
        buf.put_u8(0);
    } else {
        put_i16(buf, -1);
    }
}

/// Appends bytes: `int32` length (or compact unsigned varint length + 1) then the bytes.
#[inline]
pub fn put_bytes<'a, B: WireWrite<'a> + ?Sized>(
    buf: &mut B,
    b: &[u8],
    compact: bool,
) -> Result<(), EncodeError> {
    put_len(buf, b.len(), compact, false)?;
    buf.put_slice(b);
    Ok(())
}

/// Appends a `bytes` or `records` field held as [`Bytes`]: like [`put_bytes`], except that a
/// sink that keeps references (see [`Segments`]) takes a large value without copying it.
#[inline]
pub fn put_shared_bytes<'a, B: WireWrite<'a> + ?Sized>(
    buf: &mut B,
    b: &'a [u8],
    compact: bool,
) -> Result<(), EncodeError> {
    put_len(buf, b.len(), compact, false)?;
    buf.put_shared(b);
    Ok(())
}

/// Appends null bytes (`-1`, or compact `0`).
#[inline]
pub fn put_null_bytes<'a, B: WireWrite<'a> + ?Sized>(buf: &mut B, compact: bool) {
    if compact {
        buf.put_u8(0);
    } else {
        put_i32(buf, -1);
    }
}

/// Appends an array length: `int32` (or compact unsigned varint length + 1).
#[inline]
pub fn put_array_len<'a, B: WireWrite<'a> + ?Sized>(
    buf: &mut B,
    len: usize,
    compact: bool,
) -> Result<(), EncodeError> {
    put_len(buf, len, compact, false)
}

/// Appends a null array (`-1`, or compact `0`).
#[inline]
pub fn put_null_array<'a, B: WireWrite<'a> + ?Sized>(buf: &mut B, compact: bool) {
    put_null_bytes(buf, compact);
}

/// Appends one tagged field: tag, size, then the already-encoded value.
#[inline]
pub fn put_tagged_raw<'a, B: WireWrite<'a> + ?Sized>(buf: &mut B, tag: u32, data: &[u8]) {
    put_uvarint(buf, tag);
    put_uvarint(buf, data.len() as u32);
    buf.put_slice(data);
}

/// Appends a tagged-field section that holds only fields the client does not know.
// Always inlined: nearly every struct has none, and the byte costs less than a call.
#[inline(always)]
pub fn put_unknown_tagged<'a, B: WireWrite<'a> + ?Sized>(buf: &mut B, fields: &UnknownTaggedFields) {
    if fields.is_empty() {
        buf.put_u8(0);
    } else {
        put_some_unknown_tagged(buf, fields);
    }
}

#[inline(never)]
fn put_some_unknown_tagged<'a, B: WireWrite<'a> + ?Sized>(buf: &mut B, fields: &UnknownTaggedFields) {
    put_uvarint(buf, fields.len() as u32);
    for (tag, data) in fields.iter() {
        put_tagged_raw(buf, tag, data);
    }
}

/// Reads Kafka primitives from a frame it borrows, without copying `bytes` and `records` fields:
/// they come out as slices sharing the frame's buffer.
///
/// The decoder holds the unread part as a plain `&[u8]` that shrinks from the front: every read
/// is one comparison against its length, and building a decoder touches no reference count.
/// Only a `bytes` or `records` field takes a reference on the frame (`Bytes::slice_ref`), so a
/// heartbeat or a metadata answer decodes without a single atomic operation, where a decoder
/// owning a `Bytes` clone pays two (one to clone, one to drop) on every message.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    rest: &'a [u8],
    /// The frame `rest` lies in, for sharing slices of it.
    frame: &'a Bytes,
    /// Length of this decoder's whole buffer, so that `position` survives `rest` shrinking.
    len: usize,
}

/// Kept out of line so that the hot path of every read is a compare and a branch.
#[cold]
#[inline(never)]
fn truncated(needed: usize, remaining: usize) -> DecodeError {
    DecodeError::Truncated { needed, remaining }
}

impl<'a> Decoder<'a> {
    /// A decoder over a whole frame (or any buffer).
    #[inline]
    pub fn new(frame: &'a Bytes) -> Self {
        Decoder {
            rest: frame,
            frame,
            len: frame.len(),
        }
    }

    /// Bytes not yet read.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// How many bytes have been read.
    #[inline]
    pub fn position(&self) -> usize {
        self.len - self.rest.len()
    }

    /// The next `N` bytes by value.
    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        match self.rest.split_first_chunk::<N>() {
            Some((a, tail)) => {
                self.rest = tail;
                Ok(*a)
            }
            None => Err(truncated(N, self.rest.len())),
        }
    }

    /// Reads a boolean; any non-zero byte is true, as in Kafka.
    #[inline]
    pub fn get_bool(&mut self) -> Result<bool, DecodeError> {
        Ok(self.array::<1>()?[0] != 0)
    }

    /// Reads an `int8`.
    #[inline]
    pub fn get_i8(&mut self) -> Result<i8, DecodeError> {
        Ok(self.array::<1>()?[0] as i8)
    }

    /// Reads a big-endian `int16`.
    #[inline]
    pub fn get_i16(&mut self) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    /// Reads a big-endian `uint16`.
    #[inline]
    pub fn get_u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    /// Reads a big-endian `int32`.
    #[inline]
    pub fn get_i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    /// Reads a big-endian `uint32`.
    #[inline]
    pub fn get_u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    /// Reads a big-endian `int64`.
    #[inline]
    pub fn get_i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// Reads a big-endian `float64`.
    #[inline]
    pub fn get_f64(&mut self) -> Result<f64, DecodeError> {
        Ok(f64::from_be_bytes(self.array()?))
    }

    /// Reads a UUID.
    #[inline]
    pub fn get_uuid(&mut self) -> Result<Uuid, DecodeError> {
        Ok(Uuid(self.array()?))
    }

    /// Reads an unsigned varint of at most 5 bytes.
    #[inline]
    pub fn get_uvarint(&mut self) -> Result<u32, DecodeError> {
        // Lengths, counts and tags are almost always below 128: one byte, read inline.
        match self.rest.split_first() {
            Some((&b, tail)) if b < 0x80 => {
                self.rest = tail;
                Ok(b as u32)
            }
            // Five bytes at most, the fifth with 4 bits: the value fits in a u32.
            _ => self.get_leb128(5, 0x0f).map(|v| v as u32),
        }
    }

    /// Reads an unsigned varlong of at most 10 bytes.
    #[inline]
    pub fn get_uvarlong(&mut self) -> Result<u64, DecodeError> {
        // Record fields (lengths, deltas) are mostly below 128 too: one byte, read inline.
        match self.rest.split_first() {
            Some((&b, tail)) if b < 0x80 => {
                self.rest = tail;
                Ok(b as u64)
            }
            _ => self.get_leb128(10, 0x01),
        }
    }

    /// The multi-byte case of [`get_uvarint`](Self::get_uvarint) and
    /// [`get_uvarlong`](Self::get_uvarlong): at most `max` bytes, the last of which may be at
    /// most `last`, so that the value fits the type it is read for.
    #[inline(never)]
    fn get_leb128(&mut self, max: u32, last: u8) -> Result<u64, DecodeError> {
        let mut v: u64 = 0;
        for i in 0..max {
            let [b] = self.array::<1>()?;
            if i == max - 1 && b > last {
                return Err(DecodeError::VarintTooLong);
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::VarintTooLong)
    }

    /// Reads a zig-zag signed varint.
    #[inline]
    pub fn get_varint(&mut self) -> Result<i32, DecodeError> {
        let u = self.get_uvarint()?;
        Ok(((u >> 1) as i32) ^ -((u & 1) as i32))
    }

    /// Reads a zig-zag signed varlong.
    #[inline]
    pub fn get_varlong(&mut self) -> Result<i64, DecodeError> {
        let u = self.get_uvarlong()?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }

    /// Reads a length prefix: `None` for null, else a length that fits in what remains.
    // Always inlined into the handful of readers that use it: returned through memory, the
    // `Result<Option<usize>>` costs more than the read itself.
    #[inline(always)]
    fn get_len(&mut self, compact: bool, short: bool) -> Result<Option<usize>, DecodeError> {
        let len = if compact {
            // Stored plus one, so it cannot be below -1.
            match self.get_uvarint()? {
                0 => return Ok(None),
                n => (n - 1) as usize,
            }
        } else {
            let len = if short {
                self.get_i16()? as i32
            } else {
                self.get_i32()?
            };
            match len {
                -1 => return Ok(None),
                l if l < 0 => return Err(DecodeError::InvalidLength(l as i64)),
                l => l as usize,
            }
        };
        // Every string, bytes and array element the client decodes takes at least one byte, so
        // a length beyond what remains is garbage; rejecting it here bounds every loop and
        // allocation by the frame's own size.
        if len > self.remaining() {
            return Err(truncated(len, self.remaining()));
        }
        Ok(Some(len))
    }

    #[inline]
    fn str_from(&mut self, len: usize) -> Result<KafkaStr, DecodeError> {
        let Some((raw, tail)) = self.rest.split_at_checked(len) else {
            return Err(truncated(len, self.remaining()));
        };
        let s = KafkaStr::from_frame(self.frame, raw).map_err(|_| DecodeError::InvalidUtf8)?;
        self.rest = tail;
        Ok(s)
    }

    /// Reads a non-null string.
    #[inline]
    pub fn get_string(&mut self, compact: bool) -> Result<KafkaStr, DecodeError> {
        match self.get_len(compact, true)? {
            Some(len) => self.str_from(len),
            None => Err(DecodeError::UnexpectedNull),
        }
    }

    /// Reads a nullable string.
    #[inline]
    pub fn get_nullable_string(&mut self, compact: bool) -> Result<Option<KafkaStr>, DecodeError> {
        match self.get_len(compact, true)? {
            Some(len) => self.str_from(len).map(Some),
            None => Ok(None),
        }
    }

    /// Reads non-null bytes, sharing the frame's buffer.
    #[inline]
    pub fn get_bytes(&mut self, compact: bool) -> Result<Bytes, DecodeError> {
        match self.get_len(compact, false)? {
            Some(len) => self.get_raw(len),
            None => Err(DecodeError::UnexpectedNull),
        }
    }

    /// Reads nullable bytes, sharing the frame's buffer.
    #[inline]
    pub fn get_nullable_bytes(&mut self, compact: bool) -> Result<Option<Bytes>, DecodeError> {
        match self.get_len(compact, false)? {
            Some(len) => self.get_raw(len).map(Some),
            None => Ok(None),
        }
    }

    /// Reads `n` bytes as a slice of the frame.
    #[inline]
    pub fn get_raw(&mut self, n: usize) -> Result<Bytes, DecodeError> {
        let raw = self.take(n)?;
        Ok(self.frame.slice_ref(raw))
    }

    /// The next `n` bytes, borrowed, advancing past them.
    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        match self.rest.split_at_checked(n) {
            Some((head, tail)) => {
                self.rest = tail;
                Ok(head)
            }
            None => Err(truncated(n, self.rest.len())),
        }
    }

    /// Reads `n` elements of a fixed-width type (`N` bytes each on the wire) at once: one length
    /// check and one exact allocation instead of a check and a capacity test per element.
    ///
    /// Too few bytes for all `n` is `Truncated`, as reading them one by one would end.
    #[inline]
    pub fn get_fixed_array<T, const N: usize>(
        &mut self,
        n: usize,
        from_be: impl Fn([u8; N]) -> T,
    ) -> Result<Vec<T>, DecodeError> {
        let raw = self.take(n.saturating_mul(N))?;
        let v = raw
            .chunks_exact(N)
            .map(|c| {
                let mut a = [0u8; N];
                a.copy_from_slice(c);
                from_be(a)
            })
            .collect();
        Ok(v)
    }

    /// Reads `n` `int32`s into an [`Int32List`]: no allocation for the short broker and
    /// partition id lists that make up most of them.
    #[inline]
    pub fn get_int32_list(&mut self, n: usize) -> Result<Int32List, DecodeError> {
        let raw = self.take(n.saturating_mul(4))?;
        Ok(Int32List::from_be_bytes(raw))
    }

    /// Reads a non-null array length.
    #[inline]
    pub fn get_array_len(&mut self, compact: bool) -> Result<usize, DecodeError> {
        self.get_len(compact, false)?.ok_or(DecodeError::UnexpectedNull)
    }

    /// Reads a nullable array length.
    #[inline]
    pub fn get_nullable_array_len(&mut self, compact: bool) -> Result<Option<usize>, DecodeError> {
        self.get_len(compact, false)
    }

    /// A decoder over the next `n` bytes (a tagged field's value), advancing past them.
    #[inline]
    pub fn sub(&mut self, n: usize) -> Result<Decoder<'a>, DecodeError> {
        let rest = self.take(n)?;
        Ok(Decoder {
            rest,
            frame: self.frame,
            len: n,
        })
    }

    /// How many elements of `T` to reserve for an array of `n`: at most what the remaining bytes
    /// could hold if each element were as large in memory as on the wire, so that a hostile
    /// length cannot reserve more memory than the frame itself takes.
    #[inline]
    pub fn capacity_hint<T>(&self, n: usize) -> usize {
        n.min(self.remaining() / std::mem::size_of::<T>().max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uvarint_round_trip_and_limits() {
        for v in [0u32, 1, 127, 128, 300, 16_383, 16_384, u32::MAX] {
            let mut buf = Vec::new();
            put_uvarint(&mut buf, v);
            let frame = Bytes::from(buf);
            let mut d = Decoder::new(&frame);
            assert_eq!(d.get_uvarint().unwrap(), v);
            assert_eq!(d.remaining(), 0);
        }
        let frame = Bytes::from(vec![0xff, 0xff, 0xff, 0xff, 0x1f]);
        let mut d = Decoder::new(&frame);
        assert_eq!(d.get_uvarint(), Err(DecodeError::VarintTooLong));
        let frame = Bytes::from(vec![0x80, 0x80]);
        let mut d = Decoder::new(&frame);
        assert!(matches!(d.get_uvarint(), Err(DecodeError::Truncated { .. })));
    }

    #[test]
    fn uvarlong_round_trip_and_limits() {
        for v in [0u64, 1, 127, 128, 16_384, u32::MAX as u64 + 1, u64::MAX] {
            let mut buf = Vec::new();
            put_uvarlong(&mut buf, v);
            let frame = Bytes::from(buf);
            let mut d = Decoder::new(&frame);
            assert_eq!(d.get_uvarlong().unwrap(), v);
            assert_eq!(d.remaining(), 0);
        }
        // u64::MAX is nine 0xff and a 0x01; a larger tenth byte overflows.
        let mut max = vec![0xff; 9];
        max.push(0x01);
        assert_eq!(Decoder::new(&Bytes::from(max)).get_uvarlong(), Ok(u64::MAX));
        let mut over = vec![0xff; 9];
        over.push(0x02);
        assert_eq!(
            Decoder::new(&Bytes::from(over)).get_uvarlong(),
            Err(DecodeError::VarintTooLong)
        );
        assert!(matches!(
            Decoder::new(&Bytes::from(vec![0x80; 3])).get_uvarlong(),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn zigzag_round_trip() {
        for v in [0i32, -1, 1, i32::MIN, i32::MAX, -64, 63] {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            assert_eq!(Decoder::new(&Bytes::from(buf)).get_varint().unwrap(), v);
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            let mut buf = Vec::new();
            put_varlong(&mut buf, v);
            assert_eq!(Decoder::new(&Bytes::from(buf)).get_varlong().unwrap(), v);
        }
        // Known encodings from Kafka's ByteUtilsTest.
        let mut buf = Vec::new();
        put_varint(&mut buf, -1);
        assert_eq!(buf, [0x01]);
        let mut buf = Vec::new();
        put_varint(&mut buf, 300);
        assert_eq!(buf, [0xd8, 0x04]);
    }

    #[test]
    fn strings_classic_and_compact() {
        let mut buf = Vec::new();
        put_string(&mut buf, "abc", false).unwrap();
        put_null_string(&mut buf, false);
        put_string(&mut buf, "abc", true).unwrap();
        put_null_string(&mut buf, true);
        assert_eq!(buf, [0, 3, b'a', b'b', b'c', 0xff, 0xff, 4, b'a', b'b', b'c', 0]);
        let frame = Bytes::from(buf);
        let mut d = Decoder::new(&frame);
        assert_eq!(d.get_string(false).unwrap(), "abc");
        assert_eq!(d.get_nullable_string(false).unwrap(), None);
        assert_eq!(d.get_nullable_string(true).unwrap().as_deref(), Some("abc"));
        assert_eq!(d.get_string(true), Err(DecodeError::UnexpectedNull));
    }

    #[test]
    fn too_long_classic_string_is_an_error() {
        let s = "x".repeat(i16::MAX as usize + 1);
        let err = put_string(&mut Vec::new(), &s, false).unwrap_err();
        assert!(matches!(err, EncodeError::TooLong { .. }));
        assert!(put_string(&mut Vec::new(), &s, true).is_ok());
    }

    #[test]
    fn hostile_lengths_are_errors_not_allocations() {
        // i32::MAX bytes announced, 2 present.
        let frame = Bytes::from(vec![0x7f, 0xff, 0xff, 0xff, 1, 2]);
        let mut d = Decoder::new(&frame);
        assert!(matches!(d.get_bytes(false), Err(DecodeError::Truncated { .. })));
        let frame = Bytes::from(vec![0x7f, 0xff, 0xff, 0xff]);
        let mut d = Decoder::new(&frame);
        assert!(matches!(
            d.get_array_len(false),
            Err(DecodeError::Truncated { .. })
        ));
        let frame = Bytes::from(vec![0xff, 0xff, 0xff, 0xfe]);
        let mut d = Decoder::new(&frame);
        assert_eq!(d.get_array_len(false), Err(DecodeError::InvalidLength(-2)));
        let frame = Bytes::from(vec![0, 2, 0xff, 0xfe]);
        let mut d = Decoder::new(&frame);
        assert_eq!(d.get_string(false), Err(DecodeError::InvalidUtf8));
        let frame = Bytes::from(vec![0u8; 64]);
        let d = Decoder::new(&frame);
        assert_eq!(d.capacity_hint::<u64>(1_000_000), 8);
    }

    #[test]
    fn fixed_arrays_read_in_one_go() {
        let mut buf = Vec::new();
        for v in [1i32, -2, i32::MAX] {
            put_i32(&mut buf, v);
        }
        buf.push(9);
        let frame = Bytes::from(buf);
        let mut d = Decoder::new(&frame);
        assert_eq!(
            d.get_fixed_array(3, i32::from_be_bytes).unwrap(),
            [1, -2, i32::MAX]
        );
        assert_eq!(d.position(), 12);
        assert_eq!(
            d.get_fixed_array(0, i64::from_be_bytes).unwrap(),
            Vec::<i64>::new()
        );
        // One byte left: too few for a whole element, and nothing is consumed.
        assert_eq!(
            d.get_fixed_array(1, i32::from_be_bytes),
            Err(DecodeError::Truncated {
                needed: 4,
                remaining: 1
            })
        );
        assert_eq!(d.position(), 12);
        assert!(matches!(
            d.get_fixed_array(usize::MAX, u16::from_be_bytes),
            Err(DecodeError::Truncated { .. })
        ));
        assert_eq!(d.get_fixed_array(1, |[b]: [u8; 1]| b != 0).unwrap(), [true]);
    }

    /// A writer that takes at most `max` bytes per call, to exercise short vectored writes.
    struct Trickle {
        out: Vec<u8>,
        max: usize,
        calls: usize,
    }

    impl Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.write_vectored(&[IoSlice::new(buf)])
        }

        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            self.calls += 1;
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(self.max - n);
                self.out.extend_from_slice(&b[..take]);
                n += take;
                if n == self.max {
                    break;
                }
            }
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn segments_share_large_values_and_write_them_in_order() {
        let big = Bytes::from((0..1000u32).map(|i| i as u8).collect::<Vec<u8>>());
        let small = Bytes::from_static(b"tiny");
        let mut seg = Segments::new();
        let mut vec = Vec::new();
        for sink in [&mut seg as &mut dyn WireWrite<'_>, &mut vec] {
            put_i32(sink, 0);
            put_shared_bytes(sink, &small, false).unwrap();
            put_shared_bytes(sink, &big, true).unwrap();
            put_shared_bytes(sink, &big, false).unwrap();
            put_string(sink, "after", false).unwrap();
        }
        // Only the two large values are held by reference, and the bytes match a plain encode.
        assert_eq!(seg.shared_count(), 2);
        assert_eq!(seg.len(), vec.len());
        seg.set_i32(0, (seg.len() - 4) as i32);
        let size = (vec.len() - 4) as i32;
        vec[..4].copy_from_slice(&size.to_be_bytes());
        assert_eq!(seg.to_vec(), vec);
        // Shared pieces point at the caller's buffer: nothing was copied.
        assert!(seg.slices().any(|p| p.as_ptr() == big.as_ptr()));

        for max in [1, 7, 999, 1000, 1001, 5000] {
            let mut w = Trickle {
                out: Vec::new(),
                max,
                calls: 0,
            };
            seg.write_to(&mut w).unwrap();
            assert_eq!(w.out, vec, "max {max}");
            if max >= vec.len() {
                assert_eq!(w.calls, 1, "one vectored write when the socket takes it all");
            }
        }
        seg.clear();
        assert!(seg.is_empty() && seg.shared_count() == 0);
    }

    #[test]
    #[should_panic(expected = "overlaps a shared segment")]
    fn segments_refuse_to_patch_a_shared_buffer() {
        let big = vec![0u8; 300];
        let mut seg = Segments::new();
        seg.put_shared(&big);
        seg.set_i32(0, 1);
    }

    #[test]
    fn segments_write_more_pieces_than_one_call_takes() {
        // 1500 shared values make 3000 pieces: more than one IOV_MAX batch.
        let big = Bytes::from(vec![7u8; Segments::SHARE_FROM]);
        let mut seg = Segments::new();
        let mut vec = Vec::new();
        for i in 0..1500u32 {
            put_u32(&mut seg, i);
            seg.put_shared(&big);
            put_u32(&mut vec, i);
            vec.extend_from_slice(&big);
        }
        let mut w = Trickle {
            out: Vec::new(),
            max: usize::MAX,
            calls: 0,
        };
        seg.write_to(&mut w).unwrap();
        assert_eq!(w.out, vec);
        assert_eq!(w.calls, 3);
    }

    #[test]
    fn bytes_share_the_frame() {
        let frame = Bytes::from(vec![0, 0, 0, 3, 7, 8, 9]);
        let mut d = Decoder::new(&frame);
        let b = d.get_bytes(false).unwrap();
        assert_eq!(&b[..], &[7, 8, 9]);
        assert_eq!(b.as_ptr(), frame[4..].as_ptr());
    }

    #[test]
    fn strings_share_the_frame_once_checked() {
        let frame = Bytes::from(vec![4, b'a', b'b', b'c', 3, 0xc3, 0x28]);
        let mut d = Decoder::new(&frame);
        let s = d.get_string(true).unwrap();
        assert_eq!(s, "abc");
        assert_eq!(s.as_ptr(), frame[1..].as_ptr());
        // Two bytes that are not UTF-8: an error, and they are left unread.
        assert_eq!(d.get_string(true), Err(DecodeError::InvalidUtf8));
        assert_eq!(d.remaining(), 2);
    }
}
