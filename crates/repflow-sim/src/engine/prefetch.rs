//! A CPU cache prefetch hint, for the hot paths of the engine, the ports and the event loop.

/// Asks the CPU to bring the cache line at `p` into L1 (no effect on memory: any address
/// is accepted, even an invalid one; elsewhere than x86_64, nothing).
///
/// The hop path waits on memory more than it computes; this lets the port of the likely
/// next event load while the current one is handled.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program sees and never faults, whatever the
    // address; SSE is part of the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
