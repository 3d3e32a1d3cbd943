//! The wire primitives on their own: a program of reads over fuzzer bytes (every read fails
//! cleanly or consumes what it claims, and a length never exceeds what remains), then a list of
//! values written and read back.
#![no_main]

use bytes::Bytes;
use kafka_group::unstable::protocol::wire::*;
use kafka_group::unstable::protocol::{DecodeError, Decoder, UnknownTaggedFields, Uuid};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;

#[derive(Arbitrary, Debug)]
enum Read {
    Bool,
    I8,
    I16,
    U16,
    I32,
    U32,
    I64,
    F64,
    Uuid,
    Uvarint,
    Uvarlong,
    Varint,
    Varlong,
    String { compact: bool },
    NullableString { compact: bool },
    Bytes { compact: bool },
    NullableBytes { compact: bool },
    ArrayLen { compact: bool },
    NullableArrayLen { compact: bool },
    Raw(u16),
    Sub(u16),
    CapacityHint(u32),
}

#[derive(Arbitrary, Debug)]
enum Value {
    Bool(bool),
    I8(i8),
    I16(i16),
    U16(u16),
    I32(i32),
    U32(u32),
    I64(i64),
    F64(f64),
    Uuid([u8; 16]),
    Uvarint(u32),
    Uvarlong(u64),
    Varint(i32),
    Varlong(i64),
    String(String, bool),
    NullString(bool),
    Bytes(Vec<u8>, bool),
    NullBytes(bool),
    /// An array length followed by that many one-byte elements.
    Array(u8, bool),
    NullArray(bool),
    Tagged(BTreeMap<u32, Vec<u8>>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    values: Vec<Value>,
    reads: Vec<Read>,
    buf: Vec<u8>,
}

/// A fixed-width read: it fails iff too few bytes remain, consuming nothing, and on success
/// writing the value back gives exactly the bytes it consumed.
fn fixed<T>(
    d: &mut Decoder,
    raw: &[u8],
    width: usize,
    read: fn(&mut Decoder) -> Result<T, DecodeError>,
    put: fn(&mut Vec<u8>, T),
) {
    let (before, remaining) = (d.position(), d.remaining());
    match read(d) {
        Ok(v) => {
            assert!(remaining >= width);
            let mut w = Vec::new();
            put(&mut w, v);
            assert_eq!(w, &raw[before..d.position()]);
        }
        Err(e) => {
            assert!(remaining < width, "{e}");
            assert!(matches!(e, DecodeError::Truncated { .. }));
            assert_eq!(d.position(), before);
        }
    }
}

/// A varint read: on success it took at most `max` bytes and its value re-encodes to itself.
/// Varints may arrive non-canonical (0x80 0x00 is zero), so values are compared, not bytes.
fn varint<T: Copy + PartialEq + std::fmt::Debug>(
    d: &mut Decoder,
    max: usize,
    read: fn(&mut Decoder) -> Result<T, DecodeError>,
    put: fn(&mut Vec<u8>, T),
) {
    let before = d.position();
    if let Ok(v) = read(d) {
        assert!(d.position() - before <= max);
        let mut w = Vec::new();
        put(&mut w, v);
        assert_eq!(read(&mut Decoder::new(&bytes::Bytes::from(w))), Ok(v));
    }
}

/// An array length that was read: the promise every array decoder relies on to bound its loop
/// and its allocation.
fn array_len_fits(d: &Decoder, n: Option<usize>) {
    if let Some(n) = n {
        assert!(
            n <= d.remaining(),
            "array of {n} with {} bytes left",
            d.remaining()
        );
    }
}

/// A length-prefixed read that succeeded: the payload is the last `len` bytes it consumed.
fn payload_ends_read(raw: &[u8], before: usize, after: usize, payload: &[u8]) {
    assert!(after - before >= payload.len());
    assert_eq!(payload, &raw[after - payload.len()..after]);
}

fn read_one(d: &mut Decoder, raw: &[u8], op: &Read) {
    let before = d.position();
    let remaining = d.remaining();
    match *op {
        Read::Bool => {
            if let Ok(b) = d.get_bool() {
                assert_eq!(b, raw[before] != 0);
            }
        }
        Read::I8 => fixed(d, raw, 1, |d| d.get_i8(), put_i8),
        Read::I16 => fixed(d, raw, 2, |d| d.get_i16(), put_i16),
        Read::U16 => fixed(d, raw, 2, |d| d.get_u16(), put_u16),
        Read::I32 => fixed(d, raw, 4, |d| d.get_i32(), put_i32),
        Read::U32 => fixed(d, raw, 4, |d| d.get_u32(), put_u32),
        Read::I64 => fixed(d, raw, 8, |d| d.get_i64(), put_i64),
        Read::F64 => fixed(d, raw, 8, |d| d.get_f64(), put_f64),
        Read::Uuid => fixed(d, raw, 16, |d| d.get_uuid(), |b, u| put_uuid(b, &u)),
        Read::Uvarint => varint(d, 5, |d| d.get_uvarint(), put_uvarint),
        Read::Uvarlong => varint(d, 10, |d| d.get_uvarlong(), put_uvarlong),
        Read::Varint => varint(d, 5, |d| d.get_varint(), put_varint),
        Read::Varlong => varint(d, 10, |d| d.get_varlong(), put_varlong),
        Read::String { compact } => {
            if let Ok(s) = d.get_string(compact) {
                payload_ends_read(raw, before, d.position(), s.as_bytes());
                let mut w = Vec::new();
                put_string(&mut w, &s, compact).expect("a string read as classic fits classic");
                assert_eq!(Decoder::new(&bytes::Bytes::from(w)).get_string(compact), Ok(s));
            }
        }
        Read::NullableString { compact } => {
            if let Ok(s) = d.get_nullable_string(compact) {
                let mut w = Vec::new();
                match &s {
                    Some(s) => {
                        payload_ends_read(raw, before, d.position(), s.as_bytes());
                        put_string(&mut w, s, compact).expect("a string read as classic fits classic");
                    }
                    None => put_null_string(&mut w, compact),
                }
                assert_eq!(Decoder::new(&bytes::Bytes::from(w)).get_nullable_string(compact), Ok(s));
            }
        }
        Read::Bytes { compact } => {
            if let Ok(b) = d.get_bytes(compact) {
                payload_ends_read(raw, before, d.position(), &b);
            }
        }
        Read::NullableBytes { compact } => {
            if let Ok(Some(b)) = d.get_nullable_bytes(compact) {
                payload_ends_read(raw, before, d.position(), &b);
            }
        }
        Read::ArrayLen { compact } => {
            let n = d.get_array_len(compact).ok();
            array_len_fits(d, n);
        }
        Read::NullableArrayLen { compact } => {
            let n = d.get_nullable_array_len(compact).ok().flatten();
            array_len_fits(d, n);
        }
        Read::Raw(n) => {
            let n = usize::from(n);
            match d.get_raw(n) {
                Ok(b) => assert_eq!(&b[..], &raw[before..before + n]),
                Err(_) => assert!(n > remaining && d.position() == before),
            }
        }
        Read::Sub(n) => {
            let n = usize::from(n);
            match d.sub(n) {
                Ok(sub) => assert_eq!((sub.remaining(), sub.position()), (n, 0)),
                Err(_) => assert!(n > remaining && d.position() == before),
            }
        }
        Read::CapacityHint(n) => {
            let n = n as usize;
            let hint = d.capacity_hint::<u64>(n);
            assert!(hint <= n && hint * 8 <= remaining);
            assert!(d.capacity_hint::<()>(n) <= n);
        }
    }
    assert!(d.position() >= before);
    assert_eq!(d.position() + d.remaining(), raw.len());
}

fn write_infallible(buf: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Bool(b) => put_bool(buf, *b),
        Value::I8(n) => put_i8(buf, *n),
        Value::I16(n) => put_i16(buf, *n),
        Value::U16(n) => put_u16(buf, *n),
        Value::I32(n) => put_i32(buf, *n),
        Value::U32(n) => put_u32(buf, *n),
        Value::I64(n) => put_i64(buf, *n),
        Value::F64(n) => put_f64(buf, *n),
        Value::Uuid(u) => put_uuid(buf, &Uuid(*u)),
        Value::Uvarint(n) => put_uvarint(buf, *n),
        Value::Uvarlong(n) => put_uvarlong(buf, *n),
        Value::Varint(n) => put_varint(buf, *n),
        Value::Varlong(n) => put_varlong(buf, *n),
        Value::NullString(compact) => put_null_string(buf, *compact),
        Value::NullBytes(compact) => put_null_bytes(buf, *compact),
        Value::NullArray(compact) => put_null_array(buf, *compact),
        Value::Tagged(fields) => {
            let fields: UnknownTaggedFields =
                fields.iter().map(|(t, d)| (*t, Bytes::from(d.clone()))).collect();
            put_unknown_tagged(buf, &fields);
        }
        Value::String(..) | Value::Bytes(..) | Value::Array(..) => unreachable!("fallible writes"),
    }
}

/// Writes `v`; false if the encoding cannot express it.
fn write(buf: &mut Vec<u8>, v: &Value) -> bool {
    let start = buf.len();
    let r = match v {
        Value::String(s, compact) => put_string(buf, s, *compact),
        Value::Bytes(b, compact) => put_bytes(buf, b, *compact),
        Value::Array(n, compact) => put_array_len(buf, usize::from(*n), *compact).map(|()| {
            buf.resize(buf.len() + usize::from(*n), 0xa5);
        }),
        _ => {
            write_infallible(buf, v);
            Ok(())
        }
    };
    if r.is_err() {
        // Only a classic string over 32 KiB is too long for the fuzzer to build.
        assert!(
            matches!(v, Value::String(s, false) if s.len() > i16::MAX as usize),
            "{v:?}: {r:?}"
        );
        assert_eq!(buf.len(), start, "a failed write left bytes behind");
    }
    r.is_ok()
}

fn read_back(d: &mut Decoder, v: &Value) {
    match v {
        Value::Bool(b) => assert_eq!(d.get_bool(), Ok(*b)),
        Value::I8(n) => assert_eq!(d.get_i8(), Ok(*n)),
        Value::I16(n) => assert_eq!(d.get_i16(), Ok(*n)),
        Value::U16(n) => assert_eq!(d.get_u16(), Ok(*n)),
        Value::I32(n) => assert_eq!(d.get_i32(), Ok(*n)),
        Value::U32(n) => assert_eq!(d.get_u32(), Ok(*n)),
        Value::I64(n) => assert_eq!(d.get_i64(), Ok(*n)),
        Value::F64(n) => assert_eq!(d.get_f64().map(f64::to_bits), Ok(n.to_bits())),
        Value::Uuid(u) => assert_eq!(d.get_uuid(), Ok(Uuid(*u))),
        Value::Uvarint(n) => assert_eq!(d.get_uvarint(), Ok(*n)),
        Value::Uvarlong(n) => assert_eq!(d.get_uvarlong(), Ok(*n)),
        Value::Varint(n) => assert_eq!(d.get_varint(), Ok(*n)),
        Value::Varlong(n) => assert_eq!(d.get_varlong(), Ok(*n)),
        Value::String(s, compact) => assert_eq!(d.get_nullable_string(*compact), Ok(Some(s.as_str().into()))),
        Value::NullString(compact) => assert_eq!(d.get_nullable_string(*compact), Ok(None)),
        Value::Bytes(b, compact) => {
            assert_eq!(d.get_nullable_bytes(*compact), Ok(Some(Bytes::from(b.clone()))))
        }
        Value::NullBytes(compact) => assert_eq!(d.get_nullable_bytes(*compact), Ok(None)),
        Value::Array(n, compact) => {
            assert_eq!(d.get_array_len(*compact), Ok(usize::from(*n)));
            assert_eq!(d.get_raw(usize::from(*n)).map(|b| b.len()), Ok(usize::from(*n)));
        }
        Value::NullArray(compact) => assert_eq!(d.get_nullable_array_len(*compact), Ok(None)),
        Value::Tagged(fields) => {
            let count = d.get_uvarint().expect("tag count");
            let mut back = BTreeMap::new();
            for _ in 0..count {
                let tag = d.get_uvarint().expect("tag");
                let size = d.get_uvarint().expect("size") as usize;
                back.insert(tag, d.get_raw(size).expect("tagged value").to_vec());
            }
            assert_eq!(&back, fields);
        }
    }
}

fuzz_target!(|input: Input| {
    let frame_bytes = bytes::Bytes::from(input.buf.clone());
    let mut d = Decoder::new(&frame_bytes);
    for op in &input.reads {
        read_one(&mut d, &input.buf, op);
    }

    let mut buf = Vec::new();
    let written: Vec<&Value> = input.values.iter().filter(|v| write(&mut buf, v)).collect();
    let frame_bytes = bytes::Bytes::from(buf);
    let mut d = Decoder::new(&frame_bytes);
    for v in written {
        read_back(&mut d, v);
    }
    assert_eq!(d.remaining(), 0, "values read back left bytes over");
});
