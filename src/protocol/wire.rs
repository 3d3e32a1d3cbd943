//! Kafka's wire primitives: big-endian integers, varints, (compact) (nullable) strings, bytes and
//! arrays, UUIDs and tagged-field sections.
//!
//! Writing appends to a `Vec<u8>` and cannot fail except for lengths the format cannot express.
//! Reading goes through [`Decoder`], which checks every length against the bytes that remain
//! before it slices or allocates, so hostile input costs an error, never a panic or a huge
//! allocation.

use super::{DecodeError, EncodeError, UnknownTaggedFields, Uuid};
use byteorder::{BigEndian, ByteOrder};
use bytes::Bytes;

/// Appends a boolean (one byte, 0 or 1).
#[inline]
pub fn put_bool(buf: &mut Vec<u8>, v: bool) {
    buf.push(v as u8);
}

/// Appends an `int8`.
#[inline]
pub fn put_i8(buf: &mut Vec<u8>, v: i8) {
    buf.push(v as u8);
}

macro_rules! put_int {
    ($name:ident, $ty:ty, $n:expr, $write:ident) => {
        #[doc = concat!("Appends a big-endian `", stringify!($ty), "`.")]
        #[inline]
        pub fn $name(buf: &mut Vec<u8>, v: $ty) {
            let mut b = [0u8; $n];
            BigEndian::$write(&mut b, v);
            buf.extend_from_slice(&b);
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
pub fn put_uuid(buf: &mut Vec<u8>, v: &Uuid) {
    buf.extend_from_slice(&v.0);
}

/// Appends an unsigned varint (LEB128, as Kafka's `ByteUtils.writeUnsignedVarint`).
#[inline]
pub fn put_uvarint(buf: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Appends an unsigned 64-bit varint.
#[inline]
pub fn put_uvarlong(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Appends a zig-zag signed varint (record fields).
#[inline]
pub fn put_varint(buf: &mut Vec<u8>, v: i32) {
    put_uvarint(buf, ((v << 1) ^ (v >> 31)) as u32);
}

/// Appends a zig-zag signed varlong (record fields).
#[inline]
pub fn put_varlong(buf: &mut Vec<u8>, v: i64) {
    put_uvarlong(buf, ((v << 1) ^ (v >> 63)) as u64);
}

#[inline]
fn put_len(buf: &mut Vec<u8>, len: usize, compact: bool, max: usize) -> Result<(), EncodeError> {
    if len > max {
        return Err(EncodeError::TooLong { len, max });
    }
    if compact {
        // Compact lengths are stored plus one so that zero can mean null.
        put_uvarint(buf, len as u32 + 1);
    } else if max == i16::MAX as usize {
        put_i16(buf, len as i16);
    } else {
        put_i32(buf, len as i32);
    }
    Ok(())
}

/// Appends a string: `int16` length (or compact unsigned varint length + 1) then UTF-8 bytes.
#[inline]
pub fn put_string(buf: &mut Vec<u8>, s: &str, compact: bool) -> Result<(), EncodeError> {
    let max = if compact {
        u32::MAX as usize - 1
    } else {
        i16::MAX as usize
    };
    put_len(buf, s.len(), compact, max)?;
    buf.extend_from_slice(s.as_bytes());
    Ok(())
}

/// Appends a null string (`-1`, or compact `0`).
#[inline]
pub fn put_null_string(buf: &mut Vec<u8>, compact: bool) {
    if compact {
        buf.push(0);
    } else {
        put_i16(buf, -1);
    }
}

/// Appends bytes: `int32` length (or compact unsigned varint length + 1) then the bytes.
#[inline]
pub fn put_bytes(buf: &mut Vec<u8>, b: &[u8], compact: bool) -> Result<(), EncodeError> {
    let max = if compact {
        u32::MAX as usize - 1
    } else {
        i32::MAX as usize
    };
    put_len(buf, b.len(), compact, max)?;
    buf.extend_from_slice(b);
    Ok(())
}

/// Appends null bytes (`-1`, or compact `0`).
#[inline]
pub fn put_null_bytes(buf: &mut Vec<u8>, compact: bool) {
    if compact {
        buf.push(0);
    } else {
        put_i32(buf, -1);
    }
}

/// Appends an array length: `int32` (or compact unsigned varint length + 1).
#[inline]
pub fn put_array_len(buf: &mut Vec<u8>, len: usize, compact: bool) -> Result<(), EncodeError> {
    let max = if compact {
        u32::MAX as usize - 1
    } else {
        i32::MAX as usize
    };
    put_len(buf, len, compact, max)
}

/// Appends a null array (`-1`, or compact `0`).
#[inline]
pub fn put_null_array(buf: &mut Vec<u8>, compact: bool) {
    put_null_bytes(buf, compact);
}

/// Appends one tagged field: tag, size, then the already-encoded value.
#[inline]
pub fn put_tagged_raw(buf: &mut Vec<u8>, tag: u32, data: &[u8]) {
    put_uvarint(buf, tag);
    put_uvarint(buf, data.len() as u32);
    buf.extend_from_slice(data);
}

/// Appends a tagged-field section that holds only fields the client does not know.
#[inline]
pub fn put_unknown_tagged(buf: &mut Vec<u8>, fields: &UnknownTaggedFields) {
    // Nearly every struct has none, and setting up a BTreeMap iterator costs more than the byte.
    if fields.is_empty() {
        buf.push(0);
        return;
    }
    put_uvarint(buf, fields.len() as u32);
    for (tag, data) in fields {
        put_tagged_raw(buf, *tag, data);
    }
}

/// Reads Kafka primitives from a frame without copying `bytes` and `records` fields: they come
/// out as slices sharing the frame's buffer.
///
/// The unread part is kept as a `Bytes` that shrinks from the front (as kafka-protocol does):
/// every read then needs one comparison against its length, where an offset into the frame
/// needed the compiler to prove `offset <= len` and `offset + n` does not overflow as well.
#[derive(Debug, Clone)]
pub struct Decoder {
    rest: Bytes,
    /// Length of the whole buffer, so that `position` survives `rest` shrinking.
    len: usize,
}

/// Kept out of line so that the hot path of every read is a compare and a branch.
#[cold]
#[inline(never)]
fn truncated(needed: usize, remaining: usize) -> DecodeError {
    DecodeError::Truncated { needed, remaining }
}

impl Decoder {
    /// A decoder over a whole frame (or any buffer).
    pub fn new(buf: impl Into<Bytes>) -> Self {
        let rest = buf.into();
        Decoder {
            len: rest.len(),
            rest,
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
        match self.rest.first_chunk::<N>() {
            Some(a) => {
                let a = *a;
                bytes::Buf::advance(&mut self.rest, N);
                Ok(a)
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
        match self.rest.first() {
            Some(&b) if b < 0x80 => {
                bytes::Buf::advance(&mut self.rest, 1);
                Ok(b as u32)
            }
            _ => self.get_uvarint_long(),
        }
    }

    #[inline(never)]
    fn get_uvarint_long(&mut self) -> Result<u32, DecodeError> {
        let mut v: u32 = 0;
        for i in 0..5 {
            let [b] = self.array::<1>()?;
            if i == 4 && b > 0x0f {
                return Err(DecodeError::VarintTooLong);
            }
            v |= ((b & 0x7f) as u32) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::VarintTooLong)
    }

    /// Reads an unsigned varlong of at most 10 bytes.
    #[inline]
    pub fn get_uvarlong(&mut self) -> Result<u64, DecodeError> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let [b] = self.array::<1>()?;
            if i == 9 && b > 0x01 {
                return Err(DecodeError::VarintTooLong);
            }
            v |= ((b & 0x7f) as u64) << (7 * i);
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
    fn str_from(&mut self, len: usize) -> Result<String, DecodeError> {
        let s = match self.rest.get(..len) {
            Some(raw) => std::str::from_utf8(raw)
                .map_err(|_| DecodeError::InvalidUtf8)?
                .to_owned(),
            None => return Err(truncated(len, self.remaining())),
        };
        bytes::Buf::advance(&mut self.rest, len);
        Ok(s)
    }

    /// Reads a non-null string.
    #[inline]
    pub fn get_string(&mut self, compact: bool) -> Result<String, DecodeError> {
        match self.get_len(compact, true)? {
            Some(len) => self.str_from(len),
            None => Err(DecodeError::UnexpectedNull),
        }
    }

    /// Reads a nullable string.
    #[inline]
    pub fn get_nullable_string(&mut self, compact: bool) -> Result<Option<String>, DecodeError> {
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
        if n > self.remaining() {
            return Err(truncated(n, self.remaining()));
        }
        Ok(self.rest.split_to(n))
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
        let size = n.saturating_mul(N);
        let Some(raw) = self.rest.get(..size) else {
            return Err(truncated(size, self.remaining()));
        };
        let v = raw
            .chunks_exact(N)
            .map(|c| {
                let mut a = [0u8; N];
                a.copy_from_slice(c);
                from_be(a)
            })
            .collect();
        bytes::Buf::advance(&mut self.rest, size);
        Ok(v)
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
    pub fn sub(&mut self, n: usize) -> Result<Decoder, DecodeError> {
        Ok(Decoder::new(self.get_raw(n)?))
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
            let mut d = Decoder::new(buf);
            assert_eq!(d.get_uvarint().unwrap(), v);
            assert_eq!(d.remaining(), 0);
        }
        let mut d = Decoder::new(vec![0xff, 0xff, 0xff, 0xff, 0x1f]);
        assert_eq!(d.get_uvarint(), Err(DecodeError::VarintTooLong));
        let mut d = Decoder::new(vec![0x80, 0x80]);
        assert!(matches!(d.get_uvarint(), Err(DecodeError::Truncated { .. })));
    }

    #[test]
    fn zigzag_round_trip() {
        for v in [0i32, -1, 1, i32::MIN, i32::MAX, -64, 63] {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            assert_eq!(Decoder::new(buf).get_varint().unwrap(), v);
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            let mut buf = Vec::new();
            put_varlong(&mut buf, v);
            assert_eq!(Decoder::new(buf).get_varlong().unwrap(), v);
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
        let mut d = Decoder::new(buf);
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
        let mut d = Decoder::new(vec![0x7f, 0xff, 0xff, 0xff, 1, 2]);
        assert!(matches!(d.get_bytes(false), Err(DecodeError::Truncated { .. })));
        let mut d = Decoder::new(vec![0x7f, 0xff, 0xff, 0xff]);
        assert!(matches!(
            d.get_array_len(false),
            Err(DecodeError::Truncated { .. })
        ));
        let mut d = Decoder::new(vec![0xff, 0xff, 0xff, 0xfe]);
        assert_eq!(d.get_array_len(false), Err(DecodeError::InvalidLength(-2)));
        let mut d = Decoder::new(vec![0, 2, 0xff, 0xfe]);
        assert_eq!(d.get_string(false), Err(DecodeError::InvalidUtf8));
        let d = Decoder::new(vec![0u8; 64]);
        assert_eq!(d.capacity_hint::<u64>(1_000_000), 8);
    }

    #[test]
    fn fixed_arrays_read_in_one_go() {
        let mut buf = Vec::new();
        for v in [1i32, -2, i32::MAX] {
            put_i32(&mut buf, v);
        }
        buf.push(9);
        let mut d = Decoder::new(buf);
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

    #[test]
    fn bytes_share_the_frame() {
        let frame = Bytes::from(vec![0, 0, 0, 3, 7, 8, 9]);
        let mut d = Decoder::new(frame.clone());
        let b = d.get_bytes(false).unwrap();
        assert_eq!(&b[..], &[7, 8, 9]);
        assert_eq!(b.as_ptr(), frame[4..].as_ptr());
    }
}
