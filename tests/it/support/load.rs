//! Background CPU load inside a test: threads that spin and rest in turn, so that the
//! consumer's poll loop, its heartbeat and fetch threads and the broker all get the CPU late
//! and in small slices, as on a busy machine. Races that need two things to happen within
//! one turn of a loop (two rebalance steps within one poll, say) then happen often rather
//! than only when the machine happens to be loaded.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The load; stops when dropped.
pub struct CpuLoad {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl CpuLoad {
    /// `threads` threads, each busy for `busy` then asleep for `rest`, over and over.
    pub fn start(threads: usize, busy: Duration, rest: Duration) -> CpuLoad {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..threads)
            .map(|i| {
                let stop = stop.clone();
                std::thread::Builder::new()
                    .name(format!("cpu-load-{i}"))
                    .spawn(move || {
                        let mut x: u64 = i as u64;
                        while !stop.load(Ordering::Relaxed) {
                            let until = Instant::now() + busy;
                            while Instant::now() < until {
                                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                            }
                            std::thread::sleep(rest);
                        }
                    })
                    .expect("spawn a load thread")
            })
            .collect();
        CpuLoad { stop, threads }
    }
}

impl Drop for CpuLoad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
