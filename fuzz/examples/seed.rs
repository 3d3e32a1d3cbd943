//! Writes a seed corpus for every fuzz target from `Sample` encodings:
//! `cargo run --example seed -- <corpus dir>` (default `corpus`, i.e. `fuzz/corpus`).

use kafka_group_fuzz::{api_seeds, response_seeds, Seed};
use std::path::Path;

fn write(dir: &Path, target: &str, seeds: &[Seed]) -> std::io::Result<()> {
    let dir = dir.join(target);
    std::fs::create_dir_all(&dir)?;
    for (name, bytes) in seeds {
        std::fs::write(dir.join(format!("seed-{name}")), bytes)?;
    }
    println!("{}: {} seeds in {}", target, seeds.len(), dir.display());
    Ok(())
}

fn main() -> std::io::Result<()> {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "corpus".into());
    let dir = Path::new(&dir);
    let responses = response_seeds(0..4);
    write(dir, "decode_responses", &responses)?;
    write(dir, "decode_frame", &api_seeds(0..4))?;
    // wire_primitives reads structured input, but real encodings still make varied programs.
    let some: Vec<Seed> = responses.into_iter().step_by(7).collect();
    write(dir, "wire_primitives", &some)
}
