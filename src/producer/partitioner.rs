//! Java's default partitioner for keyed records: murmur2 of the key, sign bit masked, modulo
//! the partition count. (Keyless records stick to a partition; that lives with the batches, in
//! the accumulator, because it depends on which batch is full.)

/// Kafka's `Utils.murmur2`: the 32-bit MurmurHash2 with seed `0x9747b28c`, exactly as the Java
/// client computes it to partition keyed records.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    // Java's int arithmetic wraps, and `>>>` is a logical shift: u32 does both.
    let mut h: u32 = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition Java's default partitioner gives `key` in a topic of `partitions` partitions:
/// `toPositive(murmur2(key)) % partitions` (all partitions, available or not, so a key's
/// partition does not move while a leader is down).
pub fn key_partition(key: &[u8], partitions: i32) -> i32 {
    // toPositive masks the sign bit rather than taking abs(), so i32::MIN maps to 0.
    (murmur2(key) & 0x7fff_ffff) % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_kafka_utils_test() {
        // Kafka's UtilsTest.testMurmur2.
        assert_eq!(murmur2(b"21"), -973932308);
        assert_eq!(murmur2(b"foobar"), -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1486304829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58897971
        );
        assert_eq!(murmur2(b"abc"), 479470107);
        // Each remainder length (0-3 trailing bytes) and the empty key.
        assert_eq!(murmur2(b"1"), -1993445489);
        assert_eq!(murmur2(b"12"), 126087238);
        assert_eq!(murmur2(b"123"), -267702483);
        assert_eq!(murmur2(b"1234"), -1614185708);
        assert_eq!(murmur2(b"12345"), -1188365604);
        assert_eq!(murmur2(b""), 275646681);
    }

    #[test]
    fn key_partition_masks_the_sign_bit_like_to_positive() {
        // murmur2("21") is negative: toPositive keeps the low 31 bits.
        assert_eq!(key_partition(b"21", 10), (-973932308i32 & 0x7fff_ffff) % 10);
        assert_eq!(key_partition(b"21", 10), 0);
        for n in 1..20 {
            let p = key_partition(b"foobar", n);
            assert!((0..n).contains(&p));
        }
        // A degenerate count does not divide by zero.
        assert_eq!(key_partition(b"x", 0), 0);
    }
}
