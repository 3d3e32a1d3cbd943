//! Ours-vs-kafka-protocol codec ratios that hold still on a busy machine.
//!
//! `benches/codecs.rs` (criterion) times each contender in its own block of seconds, one after the
//! other. On a small shared machine (2 cores, other builds and tests running) the load changes
//! between those blocks, so its ratios swing by ±50% from run to run. This benchmark measures the
//! same cases (`cases/mod.rs`) with the same correctness checks, but differently:
//!
//! - Interleaved: every round times one batch of each contender back to back, in alternating
//!   order (forward on even rounds, reversed on odd ones), and goes through every case and op, so
//!   each one's samples are spread over the whole run instead of one short stretch of it.
//!   Whatever drifts during the run (other processes, CPU frequency, thermal throttling) hits all
//!   contenders alike instead of whichever happened to be running at the time, and neither one
//!   always runs first, right after the other has warmed or cooled the caches.
//! - Minimum: other processes only ever add time (preemption, cache and memory-bandwidth
//!   contention), never remove it, so the fastest batch of each contender is the least disturbed
//!   one and the closest to its true cost; the ratio of the minimums is the steadiest figure. The
//!   median is printed too, as a check: when both ratios agree the run was quiet enough.
//!
//! A batch is K iterations with K chosen once per case and contender so that a batch takes about
//! `BATCH_TARGET`: long enough for `Instant` to resolve, short enough that most batches run
//! undisturbed. Every contender's batches take about the same time, so each is equally likely to
//! be interrupted. Outputs are passed through `std::hint::black_box`; encoding reuses a buffer
//! already grown to the frame's size and clears it inside the timed loop, and decoding starts
//! from the frame as each library's API takes it: ours borrows the frame's `Bytes`;
//! kafka-protocol advances a `Bytes`, so it is given a clone (`kafka-protocol`), or reads a
//! `&[u8]`, copying every string and `bytes` field (`kafka-protocol-slice`). The ratio is taken
//! against whichever of its two is faster for that message.
//!
//! Run with `cargo bench --bench codec_ratios` (about 5 s of measuring). Options (after `--`): a
//! number of rounds (default 300; also `--rounds N`, or the `ROUNDS` environment variable, which
//! arguments override), substrings selecting cases by name, and `--test` for one round of each as
//! a smoke test. Flags cargo, libtest or criterion pass (`--bench`, `--nocapture`, ...) are
//! accepted and ignored. The table goes to stdout, progress to stderr.

mod cases;

use kafka_group::unstable::protocol::{Decoder, Message, Segments};
use kafka_protocol::messages as kp;
use kafka_protocol::protocol::{Decodable, Encodable};
use std::fmt::Debug;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Rounds per case and op unless told otherwise.
const DEFAULT_ROUNDS: usize = 300;
/// Untimed rounds before the timed ones.
const WARM_UP_ROUNDS: usize = 10;
/// How long one batch of one contender should take.
const BATCH_TARGET: Duration = Duration::from_micros(500);

/// Criterion flags that take a value as the next argument, skipped along with it.
const FLAGS_WITH_VALUE: &[&str] = &[
    "--baseline",
    "--color",
    "--confidence-level",
    "--format",
    "--load-baseline",
    "--logfile",
    "--measurement-time",
    "--noise-threshold",
    "--nresamples",
    "--output-format",
    "--plotting-backend",
    "--profile-time",
    "--sample-size",
    "--save-baseline",
    "--significance-level",
    "--skip",
    "--test-threads",
    "--warm-up-time",
];

struct Options {
    rounds: usize,
    warm_up: usize,
    /// Only cases whose name contains one of these, if any are given.
    filters: Vec<String>,
}

fn parse_rounds(s: &str, from: &str) -> usize {
    match s.trim().parse::<usize>() {
        Ok(n) if n > 0 => n,
        _ => {
            eprintln!("codec_ratios: {from} must be a positive number of rounds, not {s:?}");
            std::process::exit(2);
        }
    }
}

fn options() -> Options {
    let mut rounds = std::env::var("ROUNDS").ok().map(|s| parse_rounds(&s, "ROUNDS"));
    let mut test = false;
    let mut filters = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--test" {
            test = true;
        } else if arg == "--rounds" {
            let n = args.next().unwrap_or_default();
            rounds = Some(parse_rounds(&n, "--rounds"));
        } else if let Some(n) = arg.strip_prefix("--rounds=") {
            rounds = Some(parse_rounds(n, "--rounds"));
        } else if FLAGS_WITH_VALUE.contains(&arg.as_str()) {
            args.next();
        } else if arg.starts_with('-') {
            // `--bench` from cargo, and any other harness flag: nothing to do.
        } else if arg.bytes().all(|b| b.is_ascii_digit()) {
            rounds = Some(parse_rounds(&arg, "the rounds argument"));
        } else {
            filters.push(arg);
        }
    }
    if test {
        return Options {
            rounds: 1,
            warm_up: 0,
            filters,
        };
    }
    Options {
        rounds: rounds.unwrap_or(DEFAULT_ROUNDS),
        warm_up: WARM_UP_ROUNDS,
        filters,
    }
}

/// One contender's operation, run the given number of times.
type Run = Box<dyn FnMut(u64)>;

struct Contender {
    name: &'static str,
    run: Run,
    /// Iterations per batch.
    batch: u64,
    /// Time per iteration of each timed round, in nanoseconds.
    times: Vec<f64>,
}

impl Contender {
    fn new(name: &'static str, run: impl FnMut(u64) + 'static) -> Self {
        Contender {
            name,
            run: Box::new(run),
            batch: 0,
            times: Vec::new(),
        }
    }

    fn min(&self) -> f64 {
        self.times.iter().copied().fold(f64::INFINITY, f64::min)
    }

    fn median(&self) -> f64 {
        median(self.times.clone())
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

/// One op of one case: `ours` first, then `ours-contiguous` when encoding, then kafka-protocol's
/// ways of doing the same (names starting with `kafka-protocol`).
struct Group {
    case: &'static str,
    op: &'static str,
    bytes: usize,
    contenders: Vec<Contender>,
}

impl Group {
    fn ours(&self) -> &Contender {
        &self.contenders[0]
    }

    /// kafka-protocol's fastest way (lowest minimum): the reference every ratio is taken against.
    fn theirs(&self) -> &Contender {
        self.contenders
            .iter()
            .filter(|c| c.name.starts_with("kafka-protocol"))
            .min_by(|a, b| a.min().total_cmp(&b.min()))
            .expect("every group has a kafka-protocol contender")
    }

    fn contiguous(&self) -> Option<&Contender> {
        self.contenders.iter().find(|c| c.name == "ours-contiguous")
    }
}

/// Iterations per batch so that one batch takes about [`BATCH_TARGET`].
fn batch_size(run: &mut Run) -> u64 {
    run(1);
    let mut n = 1u64;
    loop {
        let start = Instant::now();
        run(n);
        let mut best = start.elapsed();
        if best >= BATCH_TARGET / 8 || n >= 1 << 32 {
            // Best of three, so that one disturbed measurement does not shrink the batch.
            for _ in 0..2 {
                let start = Instant::now();
                run(n);
                best = best.min(start.elapsed());
            }
            let per_iteration = best.as_secs_f64() / n as f64;
            return ((BATCH_TARGET.as_secs_f64() / per_iteration).round() as u64).max(1);
        }
        n *= 2;
    }
}

/// Times every group's contenders, interleaved within each round and every round going through
/// all groups, so that each group's samples are spread over the whole run.
fn measure(opts: &Options, groups: &mut [Group]) {
    for g in groups.iter_mut() {
        for c in &mut g.contenders {
            c.batch = batch_size(&mut c.run);
            c.times.reserve(opts.rounds);
        }
        let sizes: Vec<String> = g
            .contenders
            .iter()
            .map(|c| format!("{} ×{}", c.name, c.batch))
            .collect();
        eprintln!("{} {}: batches of {}", g.case, g.op, sizes.join(", "));
    }
    let total = opts.warm_up + opts.rounds;
    for round in 0..total {
        for g in groups.iter_mut() {
            let count = g.contenders.len();
            for i in 0..count {
                // Forward on even rounds, reversed on odd ones.
                let c = &mut g.contenders[if round % 2 == 0 { i } else { count - 1 - i }];
                let start = Instant::now();
                (c.run)(c.batch);
                let elapsed = start.elapsed();
                if round >= opts.warm_up {
                    c.times.push(elapsed.as_nanos() as f64 / c.batch as f64);
                }
            }
        }
        if (round + 1) % (total / 4).max(1) == 0 {
            eprintln!("round {}/{total}", round + 1);
        }
    }
}

/// Checks `ours` in `version` against kafka-protocol's `T` and returns its encode and decode
/// groups, untimed.
fn case<M, T>(name: &'static str, version: i16, ours: M) -> [Group; 2]
where
    M: Message + PartialEq + Debug + 'static,
    T: Encodable + Decodable + 'static,
{
    let (frame, theirs) = cases::checked_frame::<M, T>(name, version, &ours);
    let mut segments = Segments::with_capacity(frame.len());

    // Shared by the closures for the whole run (a few MiB in all).
    let ours: &'static M = Box::leak(Box::new(ours));
    let theirs: &'static T = Box::leak(Box::new(theirs));
    // Every buffer starts already grown to the frame's size, as a connection's reused write
    // buffer would be; the clear is part of what is timed.
    let mut ours_vec = Vec::with_capacity(frame.len());
    let mut theirs_vec = Vec::with_capacity(frame.len());
    let encode = Group {
        case: name,
        op: "encode",
        bytes: frame.len(),
        contenders: vec![
            Contender::new("ours", move |n| {
                for _ in 0..n {
                    segments.clear();
                    black_box(ours).encode(version, &mut segments).expect("encode");
                    black_box(&segments);
                }
            }),
            Contender::new("ours-contiguous", move |n| {
                for _ in 0..n {
                    ours_vec.clear();
                    black_box(ours).encode(version, &mut ours_vec).expect("encode");
                    black_box(&ours_vec);
                }
            }),
            Contender::new("kafka-protocol", move |n| {
                for _ in 0..n {
                    theirs_vec.clear();
                    black_box(theirs)
                        .encode(&mut theirs_vec, version)
                        .expect("encode");
                    black_box(&theirs_vec);
                }
            }),
        ],
    };
    let (ours_frame, theirs_frame, theirs_slice_frame) = (frame.clone(), frame.clone(), frame.to_vec());
    let decode = Group {
        case: name,
        op: "decode",
        bytes: frame.len(),
        contenders: vec![
            Contender::new("ours", move |n| {
                for _ in 0..n {
                    let decoder = &mut Decoder::new(black_box(&ours_frame));
                    black_box(M::decode(decoder, version).expect("decode"));
                }
            }),
            Contender::new("kafka-protocol", move |n| {
                for _ in 0..n {
                    black_box(T::decode(&mut black_box(&theirs_frame).clone(), version).expect("decode"));
                }
            }),
            // Its other input: no reference count to take on the frame, but every string and
            // `bytes` field copied. Whichever is faster for a message is the reference.
            Contender::new("kafka-protocol-slice", move |n| {
                for _ in 0..n {
                    let mut input: &[u8] = black_box(&theirs_slice_frame);
                    black_box(T::decode(&mut input, version).expect("decode"));
                }
            }),
        ],
    };
    [encode, decode]
}

fn fmt_time(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.1} ns")
    }
}

/// The group with the lowest `ratio`, if any group has one.
fn lowest(groups: &[Group], ratio: impl Fn(&Group) -> Option<f64>) -> Option<(f64, &Group)> {
    groups
        .iter()
        .filter_map(|g| ratio(g).map(|x| (x, g)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
}

fn ratio_min(g: &Group) -> f64 {
    g.theirs().min() / g.ours().min()
}

fn ratio_median(g: &Group) -> f64 {
    g.theirs().median() / g.ours().median()
}

fn ratio_contiguous(g: &Group) -> Option<f64> {
    g.contiguous().map(|c| g.theirs().min() / c.min())
}

fn print_table(opts: &Options, groups: &[Group]) {
    println!(
        "{} interleaved rounds ({} warm-up), batches of ~{} µs",
        opts.rounds,
        opts.warm_up,
        BATCH_TARGET.as_micros()
    );
    println!("ratio = kafka-protocol time / ours (above 1: ours is faster); ours encodes into Segments,");
    println!("contiguous = ours encoding into a Vec<u8>; k-p = kafka-protocol's faster input (decode:");
    println!("a clone of the frame's Bytes, or -slice: a &[u8]); times are per iteration");
    println!();
    println!(
        "{:<24} {:<6} {:>9} {:>11} {:>11} {:>11} {:>14} {:>17}  k-p input",
        "case", "op", "bytes", "ours min", "k-p min", "ratio (min)", "ratio (median)", "contiguous (min)"
    );
    for g in groups {
        let contiguous = match ratio_contiguous(g) {
            Some(x) => format!("{x:.2}"),
            None => "-".to_string(),
        };
        println!(
            "{:<24} {:<6} {:>9} {:>11} {:>11} {:>11.2} {:>14.2} {:>17}  {}",
            g.case,
            g.op,
            g.bytes,
            fmt_time(g.ours().min()),
            fmt_time(g.theirs().min()),
            ratio_min(g),
            ratio_median(g),
            contiguous,
            g.theirs().name,
        );
    }
    println!();
    let report = |label: &str, found: Option<(f64, &Group)>| {
        if let Some((x, g)) = found {
            println!("{label:<26} {x:.2} ({} {})", g.case, g.op);
        }
    };
    report("lowest ratio (min):", lowest(groups, |g| Some(ratio_min(g))));
    report(
        "lowest ratio (median):",
        lowest(groups, |g| Some(ratio_median(g))),
    );
    report("lowest contiguous (min):", lowest(groups, ratio_contiguous));
}

fn main() {
    let opts = options();
    let started = Instant::now();
    let selected =
        |name: &str| opts.filters.is_empty() || opts.filters.iter().any(|f| name.contains(f.as_str()));
    let mut groups = Vec::new();
    macro_rules! case {
        ($theirs:ty, $name:literal, $version:literal, $build:expr) => {
            if selected($name) {
                groups.extend(case::<_, $theirs>($name, $version, $build));
            }
        };
    }
    case!(
        kp::JoinGroupRequest,
        "join_group_request_v9",
        9,
        cases::join_group_request()
    );
    case!(
        kp::JoinGroupResponse,
        "join_group_response_v9",
        9,
        cases::join_group_response()
    );
    case!(
        kp::HeartbeatRequest,
        "heartbeat_request_v4",
        4,
        cases::heartbeat_request()
    );
    case!(
        kp::HeartbeatResponse,
        "heartbeat_response_v4",
        4,
        cases::heartbeat_response()
    );
    case!(
        kp::MetadataResponse,
        "metadata_response_v12",
        12,
        cases::metadata_response()
    );
    case!(
        kp::FetchResponse,
        "fetch_response_v11",
        11,
        cases::fetch_response()
    );
    measure(&opts, &mut groups);
    eprintln!("measured in {:.1} s", started.elapsed().as_secs_f64());
    print_table(&opts, &groups);
}
