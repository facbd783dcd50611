//! The barrier the threads of a threaded run meet at once per window ([`SpinBarrier`]).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Fewest rounds a waiting thread spins before it yields (the adaptive budget's floor).
const MIN_SPINS: u32 = 1 << 6;
/// Times a waiting thread yields its core after spinning and before it parks: a thread of
/// the run that was preempted gets the core back at once if it shares it with this one.
const YIELDS: u32 = 8;

/// A barrier for the threads of a run. A waiting thread spins for a while (the threads of a
/// run usually wait for each other microseconds, less than a sleep and a wake-up take), yields
/// its core a few times, then parks until the last thread to arrive wakes it. It fails if a
/// thread gave up (panicked).
///
/// How long it spins adapts (between [`MIN_SPINS`] and the barrier's maximum): a wait that
/// ends while spinning, late in the budget, doubles the budget; a wait that outlasts it
/// halves it. On idle cores the waits end while spinning and the budget stays at its
/// maximum; when other work takes the cores (the thread waited for was preempted, and
/// spinning takes the time it needs to run) the budget falls to the floor within a few
/// windows and the waiting threads give their cores away instead.
pub(super) struct SpinBarrier {
    n: usize,
    /// Most rounds a waiting thread spins before it yields and parks.
    max_spins: u32,
    /// Rounds a waiting thread spins now (adapted, `MIN_SPINS..=max_spins`).
    spins: AtomicU32,
    count: AtomicUsize,
    generation: AtomicUsize,
    /// Threads parked, or about to park, in [`SpinBarrier::wait`].
    sleepers: AtomicUsize,
    /// The run's threads (each registers itself), to wake the parked ones.
    threads: Mutex<Vec<std::thread::Thread>>,
    broken: AtomicBool,
}

impl SpinBarrier {
    /// A barrier for `n` threads that spin at most `max_spins` rounds before they yield and
    /// park.
    pub(super) fn new(n: usize, max_spins: u32) -> SpinBarrier {
        SpinBarrier {
            n,
            max_spins: max_spins.max(MIN_SPINS),
            spins: AtomicU32::new(max_spins.max(MIN_SPINS)),
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
        let spins = self.spins.load(Ordering::Relaxed);
        for i in 0..spins {
            if passed() {
                // Passed late in the budget: the next wait may need more.
                if i >= spins / 2 {
                    self.grow(spins);
                }
                return !self.broken.load(Ordering::SeqCst);
            }
            std::hint::spin_loop();
        }
        for _ in 0..YIELDS {
            if passed() {
                // Passed just after the budget ran out: it was a little short.
                self.grow(spins);
                return !self.broken.load(Ordering::SeqCst);
            }
            std::thread::yield_now();
        }
        // Outlasted the spins and the yields: the thread waited for is far behind, or not
        // running at all (preempted by other work). Spin less next time.
        self.spins
            .store((spins / 2).max(MIN_SPINS), Ordering::Relaxed);
        // Counted as a sleeper before the last look: the last thread either sees the count
        // and wakes this one, or advanced the generation before that look.
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        while !passed() {
            std::thread::park_timeout(std::time::Duration::from_millis(5));
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        !self.broken.load(Ordering::SeqCst)
    }

    /// Doubles the spin budget (up to the maximum) from `spins`.
    fn grow(&self, spins: u32) {
        if spins < self.max_spins {
            self.spins.store(
                spins.saturating_mul(2).min(self.max_spins),
                Ordering::Relaxed,
            );
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn spins_less_once_waits_outlast_the_spinning_and_passes_every_wait() {
        let b = SpinBarrier::new(2, 1 << 12);
        std::thread::scope(|s| {
            s.spawn(|| {
                b.register();
                for _ in 0..12 {
                    std::thread::sleep(Duration::from_millis(20));
                    assert!(b.wait());
                }
            });
            b.register();
            for _ in 0..12 {
                assert!(b.wait());
            }
        });
        // This thread waited ~20 ms each time: far longer than 2^12 rounds and eight yields.
        assert!(b.spins.load(Ordering::Relaxed) < 1 << 12);
    }

    #[test]
    fn a_broken_barrier_releases_its_waiters() {
        let b = SpinBarrier::new(2, MIN_SPINS);
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(20));
                b.break_it();
            });
            b.register();
            assert!(!b.wait());
        });
    }
}
