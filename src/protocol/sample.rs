//! Random message values for round-trip, differential and fuzz-seed tests.
//!
//! A tiny deterministic generator (splitmix64) driven by a seed, so proptest can shrink on the
//! seed and a failure is reproducible from one number. It favours edge values — null, empty,
//! extremes, long strings — because that is where codecs break.

use super::{UnknownTaggedFields, Uuid};
use bytes::Bytes;

/// Seeded source of field values.
#[derive(Debug, Clone)]
pub struct SampleGen {
    state: u64,
    /// Upper bound on generated array lengths.
    pub max_len: usize,
}

impl SampleGen {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        SampleGen {
            state: seed ^ 0x9E37_79B9_7F4A_7C15,
            max_len: 3,
        }
    }

    /// Next raw 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn one_in(&mut self, n: u64) -> bool {
        self.next_u64() % n == 0
    }

    fn int(&mut self, min: i64, max: i64) -> i64 {
        match self.next_u64() % 8 {
            0 => min,
            1 => max,
            2 => 0,
            3 => -1i64.clamp(min, max),
            _ => {
                let span = (max as i128 - min as i128 + 1) as u128;
                (min as i128 + (self.next_u64() as u128 % span) as i128) as i64
            }
        }
    }

    /// Whether a nullable field should be null this time.
    pub fn null(&mut self) -> bool {
        self.one_in(4)
    }

    /// A random array length.
    pub fn array_len(&mut self) -> usize {
        (self.next_u64() % (self.max_len as u64 + 1)) as usize
    }

    /// A random boolean.
    pub fn bool(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }

    /// A random `int8`.
    pub fn i8(&mut self) -> i8 {
        self.int(i8::MIN as i64, i8::MAX as i64) as i8
    }

    /// A random `int16`.
    pub fn i16(&mut self) -> i16 {
        self.int(i16::MIN as i64, i16::MAX as i64) as i16
    }

    /// A random `uint16`.
    pub fn u16(&mut self) -> u16 {
        self.int(0, u16::MAX as i64) as u16
    }

    /// A random `int32`.
    pub fn i32(&mut self) -> i32 {
        self.int(i32::MIN as i64, i32::MAX as i64) as i32
    }

    /// A random `uint32`.
    pub fn u32(&mut self) -> u32 {
        self.int(0, u32::MAX as i64) as u32
    }

    /// A random `int64`.
    pub fn i64(&mut self) -> i64 {
        self.int(i64::MIN, i64::MAX)
    }

    /// A random finite `float64` (NaN would break equality checks, not codecs).
    pub fn f64(&mut self) -> f64 {
        match self.next_u64() % 4 {
            0 => 0.0,
            1 => f64::MAX,
            2 => -1.5,
            _ => (self.next_u64() >> 11) as f64 / 1024.0,
        }
    }

    /// A random UUID.
    pub fn uuid(&mut self) -> Uuid {
        let mut u = [0u8; 16];
        u[..8].copy_from_slice(&self.next_u64().to_be_bytes());
        u[8..].copy_from_slice(&self.next_u64().to_be_bytes());
        Uuid(u)
    }

    /// A random string: usually short, sometimes empty, non-ASCII, or at the classic maximum.
    pub fn string(&mut self) -> String {
        match self.next_u64() % 16 {
            0 => String::new(),
            1 => "grüße-κόσμε-🚀".into(),
            // The longest a non-compact string can be.
            2 if self.one_in(8) => "s".repeat(i16::MAX as usize),
            _ => {
                let n = (self.next_u64() % 24) as usize;
                (0..n)
                    .map(|_| (b'a' + (self.next_u64() % 26) as u8) as char)
                    .collect()
            }
        }
    }

    /// Random bytes: usually short, sometimes empty or a few KiB.
    pub fn bytes(&mut self) -> Bytes {
        let n = match self.next_u64() % 8 {
            0 => 0,
            1 => 4096,
            _ => (self.next_u64() % 40) as usize,
        };
        (0..n).map(|_| self.next_u64() as u8).collect::<Vec<u8>>().into()
    }

    /// Sometimes adds tagged fields the schema does not know, with tags clear of `known`.
    pub fn unknown_tags(&mut self, fields: &mut UnknownTaggedFields, known: &[u32]) {
        if !self.one_in(4) {
            return;
        }
        for _ in 0..1 + self.next_u64() % 2 {
            let tag = 100 + (self.next_u64() % 50) as u32;
            if !known.contains(&tag) {
                let data = self.bytes();
                fields.insert(tag, data);
            }
        }
    }
}
