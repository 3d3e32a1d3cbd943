//! Codec throughput against kafka-protocol 0.18, the reference Rust implementation, in the same run
//! and on the same bytes.
//!
//! Each case builds one of our messages, encodes it, and builds the kafka-protocol value by
//! decoding that encoding, so both libraries see identical input; before timing anything it
//! checks that kafka-protocol re-encodes it byte for byte and that we decode it back to the
//! same value. Encoding goes into one reused buffer, cleared inside the timed loop, for both
//! libraries; decoding starts from a `Bytes` of the frame, as a connection would hand it over.
//! Our encode is measured twice: into `Segments` (`ours`, the connection's path, which keeps large
//! `bytes`/`records` values by reference) and into a `Vec<u8>` (`ours-contiguous`, copying).
//!
//! Run with `cargo bench --bench codecs`, then `scripts/bench-ratios` for the ours/theirs table.
//! Results land in `target/criterion/<case>-<encode|decode>/<ours|kafka-protocol>/`. The cases are
//! built in `cases/mod.rs`; `codec_ratios` times the same ones interleaved, for steadier ratios on
//! a busy machine.

mod cases;

use cases::{
    fetch_response, heartbeat_request, heartbeat_response, join_group_request, join_group_response,
    metadata_response,
};
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use kafka_group::unstable::protocol::{Decoder, Message, Segments};
use kafka_protocol::messages as kp;
use kafka_protocol::protocol::{Decodable, Encodable};
use std::fmt::Debug;
use std::time::Duration;

/// Benchmarks encode and decode of `ours` in `version` against kafka-protocol's `T`.
fn case<M, T>(c: &mut Criterion, name: &str, version: i16, ours: M)
where
    M: Message + PartialEq + Debug,
    T: Encodable + Decodable,
{
    let (frame, theirs) = cases::checked_frame::<M, T>(name, version, &ours);

    let mut group = c.benchmark_group(format!("{name}-encode"));
    group.throughput(Throughput::Bytes(frame.len() as u64));
    // Both start from a buffer that has already grown to the message's size, as a connection's
    // reused write buffer would have; the clear is part of what is timed.
    let mut buf = Vec::with_capacity(frame.len());
    // `ours` is what a connection does: encode into `Segments`, which keeps `bytes`/`records`
    // values of 256 bytes or more by reference and hands them to one vectored write.
    let mut segments = Segments::with_capacity(frame.len());
    group.bench_function("ours", |b| {
        b.iter(|| {
            segments.clear();
            black_box(&ours).encode(version, &mut segments).expect("encode");
            black_box(&segments);
        })
    });
    // The same encoder into one contiguous `Vec<u8>`, copying everything as kafka-protocol does.
    group.bench_function("ours-contiguous", |b| {
        b.iter(|| {
            buf.clear();
            black_box(&ours).encode(version, &mut buf).expect("encode");
            black_box(&buf);
        })
    });
    group.bench_function("kafka-protocol", |b| {
        b.iter(|| {
            buf.clear();
            black_box(&theirs).encode(&mut buf, version).expect("encode");
            black_box(&buf);
        })
    });
    group.finish();

    let mut group = c.benchmark_group(format!("{name}-decode"));
    group.throughput(Throughput::Bytes(frame.len() as u64));
    group.bench_function("ours", |b| {
        b.iter(|| M::decode(&mut Decoder::new(black_box(&frame)), version).expect("decode"))
    });
    group.bench_function("kafka-protocol", |b| {
        b.iter(|| T::decode(&mut black_box(&frame).clone(), version).expect("decode"))
    });
    group.finish();
}

fn codecs(c: &mut Criterion) {
    case::<_, kp::JoinGroupRequest>(c, "join_group_request_v9", 9, join_group_request());
    case::<_, kp::JoinGroupResponse>(c, "join_group_response_v9", 9, join_group_response());
    case::<_, kp::HeartbeatRequest>(c, "heartbeat_request_v4", 4, heartbeat_request());
    case::<_, kp::HeartbeatResponse>(c, "heartbeat_response_v4", 4, heartbeat_response());
    case::<_, kp::MetadataResponse>(c, "metadata_response_v12", 12, metadata_response());
    case::<_, kp::FetchResponse>(c, "fetch_response_v11", 11, fetch_response());
}

criterion_group! {
    name = benches;
    // 24 benchmarks at ~4 s each keep a full run near two minutes on a 2-core machine, which is
    // enough for stable means: every case runs thousands of iterations per sample.
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(800))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50);
    targets = codecs
}
criterion_main!(benches);
