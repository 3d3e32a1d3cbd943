//! Peak memory while handling a very large Metadata answer: one topic of
//! 300,000 partitions, a 10 MB frame, from a fake broker (no real broker of the test harness has
//! that many partitions to spare). Each phase runs in a child process of its own — this test
//! binary re-run for [`child`] — so that its peak RSS is its own; the bound is 3× the frame, and
//! 1.5× for a second refresh of the same answer, which should hold only the frame.

use crate::support::big_metadata::{self, BigMetadata, Measured, Phase};
use std::process::Command;

const PARTITIONS: i32 = 300_000;
/// Where the child finds the fake broker and its phase (`ADDR PHASE`).
const CHILD_ENV: &str = "KAFKA_GROUP_BIG_METADATA_CHILD";

/// Runs `phase` in a child and checks that its peak RSS grew by at most `limit` times the frame.
fn peak_growth_within(phase: Phase, limit: f64) {
    crate::support::init_logs();
    let broker = BigMetadata::start(PARTITIONS);
    let frame = broker.frame_len(kafka_group::unstable::versions::implemented(
        kafka_group::ApiKey::Metadata,
    ));
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "memory_tests::child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, format!("{} {}", broker.addr, phase.name()))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stdout}\n{stderr}");
    let m = Measured::parse(&stdout).unwrap_or_else(|| panic!("no figures in: {stdout}"));
    assert_eq!(m.partitions, PARTITIONS as usize);
    let growth = m.growth_kib() * 1024;
    println!(
        "{}: frame {frame} B, peak RSS growth {growth} B ({:.2}× the frame)",
        phase.name(),
        growth as f64 / frame as f64
    );
    assert!(
        growth as f64 <= limit * frame as f64,
        "{}: peak RSS grew by {growth} B for a {frame} B Metadata frame ({:.2}×, limit {limit}×)",
        phase.name(),
        growth as f64 / frame as f64
    );
}

#[test]
fn refresh_metadata_peaks_within_three_frames() {
    peak_growth_within(Phase::Refresh, 3.0);
}

#[test]
fn producer_send_peaks_within_three_frames() {
    peak_growth_within(Phase::Produce, 3.0);
}

#[test]
fn a_second_refresh_of_an_unchanged_topic_peaks_at_the_frame() {
    // The first answer's cache stays in place; the second one shares it rather than building
    // another.
    peak_growth_within(Phase::Again, 1.5);
}

/// The child process of the tests above; it needs their fake broker, so a plain `--ignored`
/// run without them has nothing to measure and says so.
#[test]
#[ignore = "the child process of memory_tests; run by them"]
fn child() {
    let spec = std::env::var(CHILD_ENV)
        .unwrap_or_else(|_| panic!("{CHILD_ENV} is unset: this runs as the child of memory_tests"));
    let (addr, phase) = spec.split_once(' ').unwrap();
    let m = big_metadata::run_phase(addr, Phase::parse(phase).unwrap());
    println!("{}", m.line());
}
