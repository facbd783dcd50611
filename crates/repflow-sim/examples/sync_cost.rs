//! What one synchronization window of a conservative parallel engine would cost on this
//! machine: `threads` threads (default 2) meet at a spinning barrier `rounds` times (default
//! 200,000), each doing `work_ns` of busy work per round first (default 0), and the program
//! prints the time per round beyond the work.
//!
//!     cargo run --release -p repflow-sim --example sync_cost -- [threads] [rounds] [work_ns]
//!
//! A partitioned engine with lookahead L (the smallest link delay between partitions) meets
//! once per L of simulated time, so its synchronization overhead per simulated second is
//! (1 s / L) × the time per round printed here; docs/performance.md turns that into expected
//! speedups. The threads are not pinned: run under `taskset` to choose the CPUs.

use std::hint::spin_loop;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A sense-reversing spinning barrier: the last thread to arrive flips the sense.
struct SpinBarrier {
    count: AtomicUsize,
    sense: AtomicBool,
    threads: usize,
}

impl SpinBarrier {
    fn wait(&self, local: &mut bool) {
        *local = !*local;
        if self.count.fetch_add(1, Ordering::AcqRel) + 1 == self.threads {
            self.count.store(0, Ordering::Relaxed);
            self.sense.store(*local, Ordering::Release);
        } else {
            while self.sense.load(Ordering::Acquire) != *local {
                spin_loop();
            }
        }
    }
}

/// Spins for about `ns` nanoseconds (the stand-in for a window's simulation work).
fn busy(ns: u64) {
    if ns == 0 {
        return;
    }
    let until = Instant::now() + Duration::from_nanos(ns);
    while Instant::now() < until {
        spin_loop();
    }
}

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .map(|s| {
            s.parse().unwrap_or_else(|_| {
                eprintln!("error: argument {i} must be a whole number (got {s:?})");
                std::process::exit(2)
            })
        })
        .unwrap_or(default)
}

fn main() {
    let threads = arg(1, 2) as usize;
    let rounds = arg(2, 200_000);
    let work_ns = arg(3, 0);
    if threads < 2 || rounds == 0 {
        eprintln!("error: threads must be at least 2 and rounds at least 1");
        std::process::exit(2);
    }
    let barrier = Arc::new(SpinBarrier {
        count: AtomicUsize::new(0),
        sense: AtomicBool::new(false),
        threads,
    });
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let b = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let mut local = false;
                let mut worst = Duration::ZERO;
                for _ in 0..rounds {
                    busy(work_ns);
                    let t = Instant::now();
                    b.wait(&mut local);
                    worst = worst.max(t.elapsed());
                }
                worst
            })
        })
        .collect();
    let worst = handles
        .into_iter()
        .map(|h| h.join().expect("a barrier thread panicked"))
        .max()
        .unwrap_or_default();
    let total = start.elapsed().as_nanos() as f64;
    let per_round = total / rounds as f64 - work_ns as f64;
    println!(
        "threads {threads}, rounds {rounds}, work {work_ns} ns per round: {per_round:.0} ns per \
         round beyond the work (longest single wait {:.1} us)",
        worst.as_nanos() as f64 / 1e3
    );
}
