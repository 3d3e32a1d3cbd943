//! Peak memory of a client handling a very large Metadata answer (not a test: it prints
//! figures). A fake broker in this process answers with one topic of PARTITIONS partitions
//! (default 2,000,000: a 68 MB frame at v12, the size that once peaked at 6× in memory); each phase — `refresh_metadata`,
//! a producer's first send and flush, and a second `refresh_metadata` while the first answer is
//! cached — runs in a child process (this program re-run), whose
//! peak RSS growth (VmHWM) it reports against the frame size.
//!
//! ```text
//! cargo run --release --example metadata_memory [-- PARTITIONS]
//! ```

#[path = "../tests/it/support/big_metadata.rs"]
mod big_metadata;

use big_metadata::{BigMetadata, Measured, Phase};
use kafka_group::ApiKey;
use std::process::Command;
use std::time::Instant;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, addr, phase] = args.as_slice() {
        if flag == "--child" {
            let phase = Phase::parse(phase).ok_or("unknown phase")?;
            println!("{}", big_metadata::run_phase(addr, phase).line());
            return Ok(());
        }
    }
    let partitions: i32 = match args.first() {
        Some(n) => n.parse()?,
        None => 2_000_000,
    };
    let broker = BigMetadata::start(partitions);
    let frame = broker.frame_len(ApiKey::Metadata.versions().max);
    let mb = |b: f64| b / 1e6;
    println!(
        "one topic of {partitions} partitions: Metadata v{} frame {:.1} MB",
        ApiKey::Metadata.versions().max,
        mb(frame as f64)
    );
    for phase in [Phase::Refresh, Phase::Produce, Phase::Again] {
        let started = Instant::now();
        let out = Command::new(std::env::current_exe()?)
            .args(["--child", &broker.addr.to_string(), phase.name()])
            .output()?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!(
                "{} child failed: {stdout}{}",
                phase.name(),
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        let m = Measured::parse(&stdout).ok_or("no figures from the child")?;
        let growth = m.growth_kib() as f64 * 1024.0;
        println!(
            "{:<8} peak RSS growth {:>7.1} MB = {:.2}× the frame (peak {:.1} MB; {:.1?})",
            phase.name(),
            mb(growth),
            growth / frame as f64,
            mb(m.peak_kib as f64 * 1024.0),
            started.elapsed()
        );
    }
    Ok(())
}
