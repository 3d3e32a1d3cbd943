//! Hostile input never panics. Every response decoder the client runs on broker bytes, in every
//! version, is fed truncated valid encodings, random and mutated bytes, and valid encodings with
//! a length prefix replaced by an absurd one. A decode may fail, but only with an error; when it
//! succeeds, the value must survive a re-encode and a second decode unchanged.
//!
//! The length-prefix test runs under a counting allocator ([`meter`]): checking for panics alone
//! would pass a decoder that sizes a `Vec` from a wire length, because with overcommit an
//! untouched 2 GiB reservation costs nothing until a real broker frame makes it real.

use super::messages::*;
use super::{DecodeError, Message, Sample, SampleGen};
use bytes::Bytes;
use std::fmt::Debug;
use std::ops::Range;
use std::panic::{self, AssertUnwindSafe};

/// A decoder under test.
trait Decoded: Message + Sample + PartialEq + Debug {}
impl<T: Message + Sample + PartialEq + Debug> Decoded for T {}

/// Work done once per response decoder (a generic closure, which Rust lacks).
trait Visit {
    fn visit<M: Decoded>(&mut self);
}

macro_rules! responses {
    ($($m:ident),* $(,)?) => {
        /// Calls `v.visit::<M>()` for every decoder that reads bytes a broker sent.
        fn each_response(v: &mut impl Visit) {
            $( v.visit::<$m>(); )*
        }
    };
}

for_each_received!(responses);

fn versions<M: Message>() -> std::ops::RangeInclusive<i16> {
    M::VERSIONS.min..=M::VERSIONS.max
}

/// Valid values and their encodings for `version`, one per seed.
fn samples<M: Decoded>(version: i16, seeds: Range<u64>) -> Vec<(M, Bytes)> {
    seeds
        .map(|seed| {
            let mut g = SampleGen::new(seed ^ ((version as u64) << 48) ^ 0x0b57_11e5);
            let v = M::sample(&mut g, version);
            let bytes = v
                .to_bytes(version)
                .unwrap_or_else(|e| panic!("{} v{version} seed {seed}: {e}", M::NAME));
            (v, Bytes::from(bytes))
        })
        .collect()
}

/// The input, shortened so that a failure message stays readable.
fn show(input: &[u8]) -> String {
    let head: Vec<String> = input.iter().take(64).map(|b| format!("{b:02x}")).collect();
    let more = if input.len() > 64 { "…" } else { "" };
    format!("[{}{more}] ({} bytes)", head.join(" "), input.len())
}

/// Runs `f` (a decode of `input`), turning a panic into one that names the decoder, version and
/// input.
fn no_panic<M: Decoded, R>(input: &Bytes, version: i16, what: &str, f: impl FnOnce() -> R) -> R {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => panic!("{} v{version} panicked on {what} {}", M::NAME, show(input)),
    }
}

/// `M::from_bytes`, turning a panic into one that names the decoder, version and input.
fn decode<M: Decoded>(input: &Bytes, version: i16, what: &str) -> Result<M, DecodeError> {
    no_panic::<M, _>(input, version, what, || M::from_bytes(input.clone(), version))
}

/// A value decoded from hostile bytes is still a value the client may log, store or send back,
/// so it must re-encode and decode to itself.
fn assert_round_trips<M: Decoded>(value: &M, version: i16, input: &Bytes, what: &str) {
    let again = value.to_bytes(version).unwrap_or_else(|e| {
        panic!(
            "{} v{version}: {what} {} decodes but does not re-encode: {e}",
            M::NAME,
            show(input)
        )
    });
    let back = M::from_bytes(again, version).unwrap_or_else(|e| {
        panic!(
            "{} v{version}: {what} {} decodes, re-encodes, then fails: {e}",
            M::NAME,
            show(input)
        )
    });
    assert_eq!(&back, value, "{} v{version}: {what} {}", M::NAME, show(input));
}

/// Every prefix of a short encoding; for a long one, both ends densely (headers and tagged
/// sections live there) and the middle evenly and at random.
fn cut_points(len: usize, g: &mut SampleGen) -> Vec<usize> {
    if len <= 512 {
        return (0..len).collect();
    }
    let mut cuts: Vec<usize> = (0..64)
        .chain(len - 64..len)
        .chain((0..128).map(|i| 64 + i * (len - 128) / 128))
        .chain((0..128).map(|_| (g.next_u64() % len as u64) as usize))
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

#[derive(Default)]
struct Truncations {
    decodes: usize,
}

impl Visit for Truncations {
    fn visit<M: Decoded>(&mut self) {
        for version in versions::<M>() {
            let mut g = SampleGen::new(version as u64);
            for (_, bytes) in samples::<M>(version, 0..4) {
                let cuts = cut_points(bytes.len(), &mut g);
                assert!(cuts.len() >= bytes.len().min(200), "{} v{version}", M::NAME);
                for cut in cuts {
                    // A strict prefix sends the decoder down the same path as the whole input
                    // until the bytes run out, so Truncated is the only right answer: any other
                    // error, and above all a value, would mean it read past what it was given.
                    match decode::<M>(&bytes.slice(..cut), version, "a truncation") {
                        Err(DecodeError::Truncated { .. }) => {}
                        Err(e) => panic!(
                            "{} v{version}: the first {cut} of {} bytes failed with {e:?}, not Truncated",
                            M::NAME,
                            bytes.len()
                        ),
                        Ok(_) => panic!(
                            "{} v{version}: the first {cut} of {} bytes decoded to a value",
                            M::NAME,
                            bytes.len()
                        ),
                    }
                    self.decodes += 1;
                }
            }
        }
    }
}

#[test]
fn every_truncation_is_a_truncated_error() {
    let mut t = Truncations::default();
    each_response(&mut t);
    assert!(t.decodes > 50_000, "only {} truncations decoded", t.decodes);
    eprintln!("{} truncations", t.decodes);
}

/// Random bytes skewed towards 0x00, 0x01 and 0xff, so that lengths, counts and nulls are often
/// plausible and decoding gets past the first field.
fn random_bytes(g: &mut SampleGen, len: usize) -> Bytes {
    (0..len)
        .map(|_| match g.next_u64() % 5 {
            0 => 0x00,
            1 => 0x01,
            2 => 0xff,
            _ => g.next_u64() as u8,
        })
        .collect::<Vec<u8>>()
        .into()
}

#[derive(Default)]
struct RandomInput {
    decodes: usize,
    values: usize,
}

impl Visit for RandomInput {
    fn visit<M: Decoded>(&mut self) {
        let lens = (0..=64).chain([96, 128, 255, 256, 1000, 4096]);
        for version in versions::<M>() {
            let mut g = SampleGen::new(0xbad ^ version as u64);
            for len in lens.clone() {
                for _ in 0..4 {
                    let input = random_bytes(&mut g, len);
                    if let Ok(v) = decode::<M>(&input, version, "random bytes") {
                        assert_round_trips(&v, version, &input, "random bytes");
                        self.values += 1;
                    }
                    // Random bytes are rarely exactly one message, but often start with one, as
                    // a body starts after its header in a frame: decode that much too.
                    let mut d = super::Decoder::new(&input);
                    if let Ok(v) =
                        no_panic::<M, _>(&input, version, "random bytes", || M::decode(&mut d, version))
                    {
                        assert_round_trips(&v, version, &input, "the start of random bytes");
                        self.values += 1;
                    }
                    self.decodes += 2;
                }
            }
        }
        // Versions the message does not have are refused before a byte is read.
        let mut g = SampleGen::new(0);
        for version in [M::VERSIONS.min - 1, M::VERSIONS.max + 1, i16::MIN, i16::MAX] {
            let input = random_bytes(&mut g, 32);
            let r = decode::<M>(&input, version, "an unsupported version");
            assert!(
                matches!(r, Err(DecodeError::UnsupportedVersion { .. })),
                "{} v{version}: {r:?}",
                M::NAME
            );
        }
    }
}

#[test]
fn random_bytes_decode_or_fail_but_never_panic() {
    let mut r = RandomInput::default();
    each_response(&mut r);
    eprintln!("{} random inputs, {} of them values", r.decodes, r.values);
    assert!(r.decodes > 80_000, "only {} random inputs decoded", r.decodes);
    // Some random inputs are valid messages (an all-zero HeartbeatResponse, say), which is what
    // gives the round-trip check something to bite on.
    assert!(r.values > 1_000, "only {} random inputs were values", r.values);
}

/// A valid encoding with one small, random corruption.
fn mutate(g: &mut SampleGen, bytes: &Bytes) -> Bytes {
    let mut b = bytes.to_vec();
    let at = |g: &mut SampleGen, len: usize| (g.next_u64() % len.max(1) as u64) as usize;
    match g.next_u64() % 6 {
        0 if !b.is_empty() => {
            let i = at(g, b.len());
            b[i] ^= 1 << (g.next_u64() % 8);
        }
        1 if !b.is_empty() => {
            let i = at(g, b.len());
            b[i] = [0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff][(g.next_u64() % 6) as usize];
        }
        2 => {
            let i = at(g, b.len() + 1);
            b.insert(i, g.next_u64() as u8);
        }
        3 if !b.is_empty() => {
            let i = at(g, b.len());
            b.remove(i);
        }
        4 if b.len() >= 2 => {
            // Repeat a short run, as a confused broker repeating a field would.
            let i = at(g, b.len() - 1);
            let n = 1 + at(g, (b.len() - i).min(8));
            let run: Vec<u8> = b[i..i + n].to_vec();
            b.splice(i..i, run);
        }
        _ => b.truncate(at(g, b.len() + 1)),
    }
    b.into()
}

#[derive(Default)]
struct Mutations {
    decodes: usize,
    values: usize,
}

impl Visit for Mutations {
    fn visit<M: Decoded>(&mut self) {
        for version in versions::<M>() {
            let mut g = SampleGen::new(0x0dd ^ version as u64);
            for (_, bytes) in samples::<M>(version, 0..4) {
                for _ in 0..64 {
                    let input = mutate(&mut g, &bytes);
                    if let Ok(v) = decode::<M>(&input, version, "a mutated encoding") {
                        assert_round_trips(&v, version, &input, "a mutated encoding");
                        self.values += 1;
                    }
                    self.decodes += 1;
                }
            }
        }
    }
}

#[test]
fn mutated_encodings_decode_or_fail_but_never_panic() {
    let mut m = Mutations::default();
    each_response(&mut m);
    eprintln!("{} mutated encodings, {} of them values", m.decodes, m.values);
    assert!(m.decodes > 30_000, "only {} mutations decoded", m.decodes);
    assert!(m.values > 1_000, "only {} mutations were values", m.values);
}

/// Bytes a decoder may hold at once for an input of `len` bytes. Strings are copied and arrays
/// reserve at most what the remaining bytes could hold (`Decoder::capacity_hint`), but a
/// growing `Vec` of structs that are small on the wire and large in memory (an element with
/// only defaulted fields is two bytes on the wire and ~100 in memory) legitimately costs
/// several times the input. A decoder that trusts a length of `i32::MAX` asks for gigabytes.
fn allocation_budget(len: usize) -> usize {
    16 * len + (64 << 10)
}

/// Length prefixes no real frame of a few KiB can honour, by wire type.
const HOSTILE_INT32: [i32; 3] = [i32::MAX, -2, i32::MIN];
const HOSTILE_INT16: [i16; 3] = [i16::MAX, -2, i16::MIN];
/// Compact lengths are stored plus one: u32::MAX (length 4 GiB - 2) and 2^31 (length i32::MAX).
const HOSTILE_UVARINT: [&[u8]; 2] = [&[0xff, 0xff, 0xff, 0xff, 0x0f], &[0x80, 0x80, 0x80, 0x80, 0x08]];

/// Positions to plant a hostile length at: all of them, or for a long encoding both ends and a
/// random half-thousand in between.
fn positions(len: usize, g: &mut SampleGen) -> Vec<usize> {
    if len <= 1024 {
        return (0..len).collect();
    }
    let mut at: Vec<usize> = (0..256)
        .chain(len - 256..len)
        .chain((0..512).map(|_| (g.next_u64() % len as u64) as usize))
        .collect();
    at.sort_unstable();
    at.dedup();
    at
}

/// Every way to plant a hostile length at `p`: over an int32 or int16 there, or in place of the
/// unsigned varint that starts there.
fn plant(bytes: &Bytes, p: usize) -> Vec<Bytes> {
    let mut out = Vec::new();
    let overwrite = |with: &[u8]| -> Option<Bytes> {
        let mut b = bytes.to_vec();
        b.get_mut(p..p + with.len())?.copy_from_slice(with);
        Some(b.into())
    };
    out.extend(HOSTILE_INT32.iter().filter_map(|v| overwrite(&v.to_be_bytes())));
    out.extend(HOSTILE_INT16.iter().filter_map(|v| overwrite(&v.to_be_bytes())));
    let tail = bytes.slice(p..);
    let mut d = super::Decoder::new(&tail);
    if d.get_uvarint().is_ok() {
        let end = p + d.position();
        for v in HOSTILE_UVARINT {
            let mut b = bytes.to_vec();
            b.splice(p..end, v.iter().copied());
            out.push(b.into());
        }
    }
    out
}

#[derive(Default)]
struct HostileLengths {
    decodes: usize,
    truncated: usize,
    invalid_length: usize,
    worst_ratio: f64,
    worst_peak: usize,
}

impl Visit for HostileLengths {
    fn visit<M: Decoded>(&mut self) {
        for version in versions::<M>() {
            let mut g = SampleGen::new(0x1e4 ^ version as u64);
            for (_, bytes) in samples::<M>(version, 0..3) {
                for p in positions(bytes.len(), &mut g) {
                    for input in plant(&bytes, p) {
                        let (r, peak) = meter::measure(|| decode::<M>(&input, version, "a hostile length"));
                        assert!(
                            peak <= allocation_budget(input.len()),
                            "{} v{version}: {peak} bytes allocated to decode {} (hostile length at {p})",
                            M::NAME,
                            show(&input),
                        );
                        if input.len() >= 1024 {
                            self.worst_ratio = self.worst_ratio.max(peak as f64 / input.len() as f64);
                        }
                        self.worst_peak = self.worst_peak.max(peak);
                        match r {
                            Ok(v) => assert_round_trips(&v, version, &input, "a hostile length"),
                            Err(DecodeError::Truncated { .. }) => self.truncated += 1,
                            Err(DecodeError::InvalidLength(_)) => self.invalid_length += 1,
                            Err(_) => {}
                        }
                        self.decodes += 1;
                    }
                }
            }
        }
    }
}

#[test]
fn hostile_lengths_fail_without_allocating() {
    let mut h = HostileLengths::default();
    each_response(&mut h);
    eprintln!(
        "{} hostile inputs ({} truncated, {} invalid lengths); at most {} bytes allocated at once, \
         {:.1} per input byte for inputs of 1 KiB or more",
        h.decodes, h.truncated, h.invalid_length, h.worst_peak, h.worst_ratio
    );
    // The planted values must actually have been read as lengths, or this proves nothing.
    assert!(h.decodes > 100_000, "only {} hostile inputs decoded", h.decodes);
    assert!(
        h.truncated > 10_000,
        "only {} hostile lengths were read as lengths",
        h.truncated
    );
    assert!(
        h.invalid_length > 1_000,
        "only {} negative lengths were refused",
        h.invalid_length
    );
}

#[test]
fn the_meter_sees_a_reservation_it_would_have_to_refuse() {
    // The allocation test is only as good as the meter: make sure it is installed and counts a
    // reservation that is never touched, which is exactly what `Vec::with_capacity(len)` is.
    let (_, peak) = meter::measure(|| Vec::<u64>::with_capacity(1 << 20));
    assert!(peak >= 8 << 20, "meter saw {peak} bytes");
    let (_, peak) = meter::measure(|| std::hint::black_box(7));
    assert_eq!(peak, 0);
}

/// A counting global allocator for this test binary. It counts only on a thread that armed it,
/// so the other tests running in parallel neither disturb nor are disturbed by a measurement.
#[allow(unsafe_code)]
pub(crate) mod meter {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;
    use std::io::Write;

    /// While armed, a single request above this is refused: the process then aborts with
    /// "memory allocation of N bytes failed" instead of letting a broken decoder reserve many
    /// gigabytes on a shared machine, or pass because the OS overcommits.
    const REFUSE_ABOVE: usize = 1 << 30;

    struct Counting;

    #[global_allocator]
    static COUNTING: Counting = Counting;

    thread_local! {
        static ARMED: Cell<bool> = const { Cell::new(false) };
        // Signed: memory allocated before arming may be freed while armed.
        static LIVE: Cell<isize> = const { Cell::new(0) };
        static PEAK: Cell<isize> = const { Cell::new(0) };
    }

    fn armed() -> bool {
        ARMED.try_with(Cell::get).unwrap_or(false)
    }

    fn add(delta: isize) {
        let _ = LIVE.try_with(|live| {
            let now = live.get().saturating_add(delta);
            live.set(now);
            let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
        });
    }

    /// Counts an allocation of `size` bytes if armed; false if it must be refused.
    fn admit(size: usize) -> bool {
        if !armed() {
            return true;
        }
        if size > REFUSE_ABOVE {
            return false;
        }
        add(size as isize);
        true
    }

    fn refuse() -> *mut u8 {
        let _ = std::io::stderr()
            .write_all(b"hostile_tests: a decoder asked for over 1 GiB while decoding hostile input\n");
        std::ptr::null_mut()
    }

    // SAFETY: every call is forwarded unchanged to `System`; the counters are plain
    // thread-locals with const initialisers, which neither allocate nor register destructors.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            if !admit(layout.size()) {
                return refuse();
            }
            System.alloc(layout)
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            if !admit(layout.size()) {
                return refuse();
            }
            System.alloc_zeroed(layout)
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            if armed() {
                add(-(layout.size() as isize));
            }
            System.dealloc(ptr, layout)
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            // Count the new block before freeing the old, as a realloc that moves does.
            if !admit(new_size) {
                return refuse();
            }
            if armed() {
                add(-(layout.size() as isize));
            }
            System.realloc(ptr, layout, new_size)
        }
    }

    /// Runs `f` and returns its result with the most bytes it had allocated at once.
    pub fn measure<R>(f: impl FnOnce() -> R) -> (R, usize) {
        struct Disarm;
        impl Drop for Disarm {
            fn drop(&mut self) {
                ARMED.with(|a| a.set(false));
            }
        }
        LIVE.with(|l| l.set(0));
        PEAK.with(|p| p.set(0));
        ARMED.with(|a| a.set(true));
        let disarm = Disarm;
        let r = f();
        drop(disarm);
        (r, PEAK.with(Cell::get).max(0) as usize)
    }
}
