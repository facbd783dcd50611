//! The barrier the threads of a threaded run meet at once per window ([`SpinBarrier`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// A barrier for the threads of a run. A waiting thread spins for a while (the threads of a run
/// usually wait for each other microseconds, less than a sleep and a wake-up take),
/// then parks until the last thread to arrive wakes it (more threads than cores must not
/// spin against the thread they wait for). It fails if a thread gave up (panicked).
pub(super) struct SpinBarrier {
    n: usize,
    /// Rounds a waiting thread spins before it parks.
    spins: u32,
    count: AtomicUsize,
    generation: AtomicUsize,
    /// Threads parked, or about to park, in [`SpinBarrier::wait`].
    sleepers: AtomicUsize,
    /// The run's threads (each registers itself), to wake the parked ones.
    threads: Mutex<Vec<std::thread::Thread>>,
    broken: AtomicBool,
}

impl SpinBarrier {
    /// A barrier for `n` threads that spin `spins` rounds before they park.
    pub(super) fn new(n: usize, spins: u32) -> SpinBarrier {
        SpinBarrier {
            n,
            spins,
            count: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            threads: Mutex::new(Vec::with_capacity(n)),
            broken: AtomicBool::new(false),
        }
    }

    /// Registers the calling thread (before its first wait).
    pub(super) fn register(&self) {
        self.threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(std::thread::current());
    }

    /// Wakes every parked thread.
    pub(super) fn wake_all(&self) {
        for t in self
            .threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            t.unpark();
        }
    }

    /// Marks the barrier broken and wakes everyone.
    pub(super) fn break_it(&self) {
        self.broken.store(true, Ordering::SeqCst);
        self.wake_all();
    }

    /// Waits for all threads; `false` if the barrier is broken.
    pub(super) fn wait(&self) -> bool {
        let gen = self.generation.load(Ordering::SeqCst);
        if self.count.fetch_add(1, Ordering::SeqCst) + 1 == self.n {
            self.count.store(0, Ordering::SeqCst);
            self.generation.fetch_add(1, Ordering::SeqCst);
            if self.sleepers.load(Ordering::SeqCst) > 0 {
                self.wake_all();
            }
            return !self.broken.load(Ordering::SeqCst);
        }
        let passed =
            || self.generation.load(Ordering::SeqCst) != gen || self.broken.load(Ordering::SeqCst);
        for _ in 0..self.spins {
            if passed() {
                return !self.broken.load(Ordering::SeqCst);
            }
            std::hint::spin_loop();
        }
        // Counted as a sleeper before the last look: the last thread either sees the count
        // and wakes this one, or advanced the generation before that look.
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        while !passed() {
            std::thread::park_timeout(std::time::Duration::from_millis(5));
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        !self.broken.load(Ordering::SeqCst)
    }
}

/// Breaks the barrier if its thread unwinds, so that the others stop waiting.
pub(super) struct BreakOnPanic<'a>(pub(super) &'a SpinBarrier);

impl Drop for BreakOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.break_it();
        }
    }
}
