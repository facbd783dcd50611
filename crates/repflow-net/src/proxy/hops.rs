//! Where a request's time goes inside the sidecars: one histogram of durations per hop.
//!
//! The client sidecar times, per call: `client_in` (the request's last bytes read from the
//! application → the call starts: parsing, and waiting behind the connection's earlier
//! call), `client_call` (the call: copies sent → the first response) and `client_out` (the
//! response → written back to the application). The server sidecar times `server_queue` (a
//! request's first complete copy read → its handler starts: the library's queue and the
//! in-flight bound), `server_in` (handler → upstream exchange: checks, journal) and
//! `server_upstream` (the exchange with the real server, pool wait included). The wire and
//! the libraries' framing are `client_call` less the server's three hops.
//!
//! Histograms are cumulative (counts per bucket); two snapshots subtract
//! ([`HopSnapshot::since`]), so a caller isolates one run by snapshotting before and after it.
//! Buckets are eight per octave of nanoseconds (quantiles within ~9 %); memory is fixed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Sub-buckets per octave.
const SUB: u32 = 8;
/// Buckets: durations below 2^50 ns (~13 days) have their own; longer ones fall in the last.
const BUCKETS: usize = (48 * SUB) as usize;

/// One hop's cumulative histogram.
#[derive(Debug)]
pub(crate) struct Histogram {
    buckets: Box<[AtomicU64]>,
    sum_ns: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum_ns: AtomicU64::new(0),
        }
    }
}

/// The bucket of `ns`: exact below 8 ns, then eight per octave.
fn bucket(ns: u64) -> usize {
    if ns < u64::from(SUB) {
        return ns as usize;
    }
    let octave = 63 - ns.leading_zeros(); // ≥ 3
    let frac = (ns >> (octave - 3)) & u64::from(SUB - 1);
    ((octave - 2) * SUB + frac as u32).min(BUCKETS as u32 - 1) as usize
}

/// The smallest duration (ns) of bucket `b`.
fn bucket_low(b: usize) -> f64 {
    let b = b as u32;
    if b < SUB {
        return f64::from(b);
    }
    let octave = b / SUB + 2;
    let frac = b % SUB;
    2f64.powi(octave as i32) * (1.0 + f64::from(frac) / f64::from(SUB))
}

impl Histogram {
    pub(crate) fn record(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.buckets[bucket(ns)].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    fn snapshot(&self, name: &'static str) -> HopSnapshot {
        HopSnapshot {
            name,
            sum_ns: self.sum_ns.load(Ordering::Relaxed),
            buckets: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
        }
    }
}

/// A hop's histogram at one moment (cumulative since the sidecar started).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HopSnapshot {
    /// The hop (`client_in`, `client_call`, … see the module's docs).
    pub name: &'static str,
    /// Total time, ns.
    pub sum_ns: u64,
    /// Counts per bucket (eight per octave of ns).
    pub buckets: Vec<u64>,
}

impl HopSnapshot {
    /// Durations recorded.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// What was recorded after `earlier` (a snapshot of the same hop).
    pub fn since(&self, earlier: &HopSnapshot) -> HopSnapshot {
        HopSnapshot {
            name: self.name,
            sum_ns: self.sum_ns.saturating_sub(earlier.sum_ns),
            buckets: self
                .buckets
                .iter()
                .zip(&earlier.buckets)
                .map(|(a, b)| a.saturating_sub(*b))
                .collect(),
        }
    }

    /// The `q` quantile in µs (the geometric middle of its bucket), `None` when empty.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        quantile_us(&self.buckets, q)
    }
}

/// The `q` quantile (µs) of bucket counts as [`HopSnapshot::buckets`] holds them.
pub fn quantile_us(buckets: &[u64], q: f64) -> Option<f64> {
    let n: u64 = buckets.iter().sum();
    if n == 0 {
        return None;
    }
    let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (b, &c) in buckets.iter().enumerate() {
        seen += c;
        if seen >= rank {
            let (lo, hi) = (bucket_low(b), bucket_low(b + 1));
            return Some((lo * hi).sqrt().max(lo) / 1e3);
        }
    }
    None
}

macro_rules! hops {
    ($set:ident, $($name:ident),*) => {
        /// The hops one side of the proxy times.
        #[derive(Debug, Default)]
        pub(crate) struct $set {
            $(pub(crate) $name: Histogram,)*
        }

        impl $set {
            pub(crate) fn snapshot(&self) -> Vec<HopSnapshot> {
                vec![$(self.$name.snapshot(stringify!($name)),)*]
            }
        }
    };
}

hops!(ClientHops, client_in, client_call, client_out);
hops!(ServerHops, server_queue, server_in, server_upstream);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_cover_their_durations() {
        let mut last = 0;
        for ns in (0..100_000u64).chain([1 << 20, 1 << 30, 1 << 40, u64::MAX]) {
            let b = bucket(ns);
            assert!(b >= last || ns >= 1 << 20, "{ns}");
            last = b;
            if b + 1 < BUCKETS {
                assert!(
                    bucket_low(b) <= ns as f64 && (ns as f64) < bucket_low(b + 1),
                    "{ns}"
                );
            }
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_fall_within_a_bucket_of_the_truth() {
        let h = Histogram::default();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let s = h.snapshot("x");
        assert_eq!(s.count(), 1000);
        for (q, truth) in [(0.5, 500.0), (0.9, 900.0), (0.99, 990.0)] {
            let got = s.quantile_us(q).unwrap();
            assert!((got / truth - 1.0).abs() < 0.09, "q {q}: {got} vs {truth}");
        }
        assert_eq!(s.sum_ns, 500_500_000);
    }

    #[test]
    fn a_snapshot_less_an_earlier_one_is_what_came_between() {
        let h = Histogram::default();
        for _ in 0..50 {
            h.record(Duration::from_millis(3));
        }
        let before = h.snapshot("x");
        for _ in 0..10 {
            h.record(Duration::from_micros(40));
        }
        let run = h.snapshot("x").since(&before);
        assert_eq!(run.count(), 10);
        assert_eq!(run.sum_ns, 400_000);
        let p50 = run.quantile_us(0.5).unwrap();
        assert!((p50 / 40.0 - 1.0).abs() < 0.09, "{p50}");
        assert_eq!(
            HopSnapshot {
                buckets: vec![0; 4],
                ..run
            }
            .quantile_us(0.5),
            None
        );
    }
}
