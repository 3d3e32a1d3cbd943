//! What the fuzz targets check, shared with the seed-corpus writer (`examples/seed.rs`) so that
//! a seed's selector bytes pick exactly the decoder and version it was encoded for.
//!
//! Inputs start with two selector bytes: which decoder (or API), then which version. The version
//! byte ranges over every version of the message plus one below and one above, so the fuzzer
//! also checks that an unsupported version is refused rather than decoded.

use kafka_group::unstable::protocol::messages::*;
use kafka_group::unstable::protocol::{DecodeError, Decoder, Message, Request, Sample, SampleGen, VersionRange};
use std::fmt::Debug;
use std::ops::Range;

/// The version a selector byte picks: `range.min - 1 ..= range.max + 1`.
pub fn pick_version(range: VersionRange, b: u8) -> i16 {
    let span = (range.max - range.min + 3) as u16;
    range.min - 1 + (u16::from(b) % span) as i16
}

/// The selector byte for `version` (the inverse of [`pick_version`]).
pub fn version_byte(range: VersionRange, version: i16) -> u8 {
    (version - range.min + 1) as u8
}

/// Encodes `v`, decodes it again and checks both that the value survived and that a second
/// encoding is byte-for-byte the first: what the client decoded from a broker it may log, cache
/// or send back, so it has to be a value the codecs agree on.
pub fn assert_round_trips<M: Message + PartialEq + Debug>(v: &M, version: i16) {
    let bytes = v
        .to_bytes(version)
        .unwrap_or_else(|e| panic!("{} v{version} decoded {v:?} but cannot encode it: {e}", M::NAME));
    let back = M::from_bytes(bytes.clone(), version).unwrap_or_else(|e| {
        panic!(
            "{} v{version} cannot decode its own encoding of {v:?}: {e}",
            M::NAME
        )
    });
    assert_eq!(&back, v, "{} v{version} changed in a round trip", M::NAME);
    let again = back.to_bytes(version).expect("a decoded value encodes");
    assert_eq!(
        again,
        bytes,
        "{} v{version} encodes the same value two ways",
        M::NAME
    );
}

/// Decodes `body` as a whole message and as the start of a longer buffer; checks that the two
/// agree and that whatever decodes round-trips.
pub fn check_message<M: Message + PartialEq + Debug>(version: i16, body: &[u8]) {
    let whole = M::from_bytes(body.to_vec(), version);
    if !M::VERSIONS.contains(version) {
        assert!(
            matches!(whole, Err(DecodeError::UnsupportedVersion { .. })),
            "{} decoded version {version}, which it does not have: {whole:?}",
            M::NAME
        );
        return;
    }
    let frame_bytes = bytes::Bytes::from(body.to_vec());
    let mut d = Decoder::new(&frame_bytes);
    let start = M::decode(&mut d, version);
    // `from_bytes` is `decode` plus "nothing left over"; anything else is a second decoder.
    match (&start, &whole) {
        (Ok(s), Ok(w)) => {
            assert_eq!(d.remaining(), 0, "{}: from_bytes ignored trailing bytes", M::NAME);
            assert_eq!(s, w, "{}: decode and from_bytes disagree", M::NAME);
        }
        (Ok(_), Err(DecodeError::TrailingBytes(n))) => assert_eq!(*n, d.remaining(), "{}", M::NAME),
        (Err(a), Err(b)) => assert_eq!(a, b, "{}: decode and from_bytes fail differently", M::NAME),
        (s, w) => panic!("{} v{version}: decode gave {s:?}, from_bytes {w:?}", M::NAME),
    }
    if let Ok(v) = &start {
        assert_round_trips(v, version);
    }
}

fn check_picked<M: Message + PartialEq + Debug>(version_byte: u8, body: &[u8]) {
    check_message::<M>(pick_version(M::VERSIONS, version_byte), body);
}

/// Decodes a response frame after the size prefix (header, then body) for request type `R` in
/// `version`, as the client does, and checks that what decodes round-trips.
pub fn check_frame<R: Request>(version: i16, frame: &[u8])
where
    R::Response: PartialEq + Debug,
{
    if !R::VERSIONS.contains(version) {
        // Header versions are only defined for versions the API has; the body must refuse.
        let r = R::Response::from_bytes(frame.to_vec(), version);
        assert!(
            matches!(r, Err(DecodeError::UnsupportedVersion { .. })),
            "{}: {r:?}",
            R::NAME
        );
        return;
    }
    let hv = R::response_header_version(version);
    let frame_bytes = bytes::Bytes::from(frame.to_vec());
    let mut d = Decoder::new(&frame_bytes);
    let Ok(header) = ResponseHeader::decode(&mut d, hv) else {
        return;
    };
    let Ok(body) = R::Response::decode(&mut d, version) else {
        return;
    };
    // Bytes after the body make the client refuse the frame, but what decoded must still be a
    // value the codecs agree on.
    let mut buf = Vec::new();
    header.encode(hv, &mut buf).expect("a decoded header encodes");
    body.encode(version, &mut buf).unwrap_or_else(|e| {
        panic!(
            "{} v{version}: decoded {body:?} but cannot encode it: {e}",
            R::NAME
        )
    });
    let frame_bytes = bytes::Bytes::from(buf);
    let mut d = Decoder::new(&frame_bytes);
    let header2 = ResponseHeader::decode(&mut d, hv).expect("the header decodes again");
    let body2 = R::Response::decode(&mut d, version).expect("the body decodes again");
    assert_eq!(
        d.remaining(),
        0,
        "{} v{version}: re-encoded frame has trailing bytes",
        R::NAME
    );
    assert_eq!(header2, header);
    assert_eq!(
        body2,
        body,
        "{} v{version}: response changed in a round trip",
        R::NAME
    );
}

fn check_frame_picked<R: Request>(version_byte: u8, frame: &[u8])
where
    R::Response: PartialEq + Debug,
{
    check_frame::<R>(pick_version(R::VERSIONS, version_byte), frame);
}

/// Seeds larger than this would raise libFuzzer's `-max_len` for every input and slow it down;
/// the 32 KiB strings they hold are covered by the unit tests.
const MAX_SEED: usize = 16 << 10;

/// A seed file: its name and contents.
pub type Seed = (String, Vec<u8>);

fn message_seeds<M: Message + Sample>(index: u8, seeds: Range<u64>, out: &mut Vec<Seed>) {
    for version in M::VERSIONS.min..=M::VERSIONS.max {
        for seed in seeds.clone() {
            let v = M::sample(&mut SampleGen::new(seed ^ ((version as u64) << 32)), version);
            let mut input = vec![index, version_byte(M::VERSIONS, version)];
            v.encode(version, &mut input).expect("a sample encodes");
            if input.len() <= MAX_SEED {
                out.push((format!("{}-v{version}-{seed}", M::NAME), input));
            }
        }
    }
}

fn frame_seeds<R: Request>(index: u8, seeds: Range<u64>, out: &mut Vec<Seed>)
where
    R::Response: Sample,
{
    for version in R::VERSIONS.min..=R::VERSIONS.max {
        let hv = R::response_header_version(version);
        for seed in seeds.clone() {
            let mut g = SampleGen::new(seed ^ ((version as u64) << 32));
            let mut input = vec![index, version_byte(R::VERSIONS, version)];
            ResponseHeader::sample(&mut g, hv)
                .encode(hv, &mut input)
                .expect("a sample encodes");
            R::Response::sample(&mut g, version)
                .encode(version, &mut input)
                .expect("a sample encodes");
            if input.len() <= MAX_SEED {
                out.push((format!("{}-v{version}-{seed}", R::NAME), input));
            }
        }
    }
}

/// A checker chosen by a selector byte: `(name, check(version_byte, rest))`.
pub type Checker = (&'static str, fn(u8, &[u8]));

/// Writes one type's seeds, selector bytes first: `(selector, seeds, out)`.
type Seeder = fn(u8, Range<u64>, &mut Vec<Seed>);

/// Every seeder's seeds, each under its position in the table as selector byte (the position of
/// its checker in the matching [`Checker`] table).
fn seeds_of(seeders: &[Seeder], seeds: Range<u64>) -> Vec<Seed> {
    let mut out = Vec::new();
    for (index, seeder) in seeders.iter().enumerate() {
        seeder(index as u8, seeds.clone(), &mut out);
    }
    out
}

macro_rules! responses {
    ($($m:ident),* $(,)?) => {
        /// Every decoder of bytes a broker (or another group member) sends.
        pub const RESPONSES: &[Checker] = &[$((stringify!($m), check_picked::<$m> as fn(u8, &[u8]))),*];
        const RESPONSE_SEEDERS: &[Seeder] = &[$(message_seeds::<$m> as Seeder),*];
    };
}

kafka_group::for_each_received!(responses);

/// Seeds for `decode_responses`: selector bytes, then a sample encoding.
pub fn response_seeds(seeds: Range<u64>) -> Vec<Seed> {
    seeds_of(RESPONSE_SEEDERS, seeds)
}

macro_rules! apis {
    ($($r:ident),* $(,)?) => {
        /// Every API, by request type: a frame is decoded as that API's response.
        pub const APIS: &[Checker] = &[$((stringify!($r), check_frame_picked::<$r> as fn(u8, &[u8]))),*];
        const API_SEEDERS: &[Seeder] = &[$(frame_seeds::<$r> as Seeder),*];
    };
}

kafka_group::for_each_request!(apis);

/// Seeds for `decode_frame`: selector bytes, then a sample header and body.
pub fn api_seeds(seeds: Range<u64>) -> Vec<Seed> {
    seeds_of(API_SEEDERS, seeds)
}

/// Runs the checker a selector byte picks on the rest of the input.
pub fn dispatch(table: &[Checker], data: &[u8]) {
    if let [which, version, rest @ ..] = data {
        let (_, check) = table[usize::from(*which) % table.len()];
        check(*version, rest);
    }
}
