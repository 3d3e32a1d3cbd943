//! A small seeded random stream (splitmix64) for tests that must replay: fault schedules,
//! restart plans. No dependency, and the same numbers on every platform.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// splitmix64: a reproducible stream from a 64-bit seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The stream `seed` starts.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0); the modulo bias is irrelevant at test sizes.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A duration in `lo..=hi`, to the millisecond.
    pub fn duration(&mut self, lo: Duration, hi: Duration) -> Duration {
        let (lo_ms, hi_ms) = (lo.as_millis() as u64, hi.as_millis() as u64);
        Duration::from_millis(lo_ms + self.below(hi_ms.saturating_sub(lo_ms) + 1))
    }
}

/// The seed in the environment variable `var` (decimal or `0x` hex), else one from the clock, so
/// that runs differ but any run can be replayed by setting `var` to the seed it printed.
/// Panics on a value that is not a number, rather than silently running another seed.
pub fn seed_from_env(var: &str) -> u64 {
    match std::env::var(var) {
        Ok(s) => {
            let s = s.trim();
            let parsed = match s.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => s.parse(),
            };
            parsed.unwrap_or_else(|e| panic!("{var}={s:?} is not a seed: {e}"))
        }
        Err(_) => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    }
}
