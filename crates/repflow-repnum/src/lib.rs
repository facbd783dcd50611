//! SmartRep's RepNumAssign (Algorithm 3 of the SmartRep paper), in one place for the simulator
//! (`repflow-sim`, which bins a workload's CDF or a run's sizes) and the transport library
//! (`repflow-net`, which bins the sizes it has sent). No dependencies.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

/// Index (0-based) of the size bin of a `size`-byte flow: bin `i` holds sizes in
/// `(i·unit, (i+1)·unit]`, and an empty flow falls in the first bin. A `unit_bytes` of 0 is
/// taken as 1. The simulator's and the library's histograms and tables all bin this way.
pub fn size_bin(size: u64, unit_bytes: u64) -> usize {
    (size.div_ceil(unit_bytes.max(1)).max(1) - 1) as usize
}

/// Greedy replica counts per size bin under a byte budget.
///
/// `counts[i]` is the weight (number or probability) of flows in size bin `i + 1`, i.e. sizes
/// in `(i·unit, (i+1)·unit]`; `total_bytes` is the traffic Θ of all flows with the same
/// weighting (long flows included); replica bytes are budgeted as `(i+1)·unit·counts[i]` per
/// replica of bin `i + 1` (the bin's upper edge, the paper's `i · π_i`) and may not exceed
/// `eps · total_bytes`. `p` is the per-path probability of meeting a large flow (0.1 in the
/// paper). Each step gives one more replica to the open bin with the largest
/// `counts[i] · p^(x_i + 1)` (ties: the smaller bin); a bin closes when its next replica would
/// break the budget, when it reaches `max_extra` (equal-cost paths − 1), or when it is empty.
pub fn rep_num_assign(
    counts: &[f64],
    unit_bytes: u64,
    total_bytes: f64,
    eps: f64,
    p: f64,
    max_extra: u32,
) -> Vec<u32> {
    let n = counts.len();
    let mut x = vec![0u32; n];
    let eta: Vec<f64> = (0..n)
        .map(|i| (i as f64 + 1.0) * unit_bytes as f64 * counts[i])
        .collect();
    let budget = eps * total_bytes;
    let mut used = 0.0;
    let mut open: Vec<bool> = counts.iter().map(|&c| c > 0.0 && max_extra > 0).collect();
    let term = |i: usize, x: &[u32]| counts[i] * p.powi(x[i] as i32 + 1);
    loop {
        let mut best: Option<(usize, f64)> = None;
        for (i, _) in open.iter().enumerate().filter(|(_, &o)| o) {
            let t = term(i, &x);
            match best {
                Some((_, b)) if t <= b => {}
                _ => best = Some((i, t)),
            }
        }
        let Some((k, _)) = best else { break };
        if used + eta[k] > budget {
            open[k] = false;
            continue;
        }
        x[k] += 1;
        used += eta[k];
        if x[k] >= max_extra {
            open[k] = false;
        }
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_by_hand() {
        // One bin of 4 flows of ≤ 1 KB: each replica costs 4 KB of a 10 KB budget → 2 replicas.
        assert_eq!(rep_num_assign(&[4.0], 1000, 100e3, 0.1, 0.1, 9), vec![2]);
        // The cap binds first.
        assert_eq!(rep_num_assign(&[4.0], 1000, 100e3, 0.1, 0.1, 1), vec![1]);
        // No replicas allowed at all.
        assert_eq!(
            rep_num_assign(&[10.0, 1.0], 1000, 1e9, 0.5, 0.1, 0),
            vec![0, 0]
        );
        // Budget 30 KB; a replica costs 10 KB in bin 1, 2 KB in bin 2. Bin 1 first (term 1),
        // then bin 1 again (0.1, tying with bin 2's 0.1: the smaller bin wins), then bin 2;
        // bin 1's third replica would reach 32 KB and closes it; bin 2 fills to the cap.
        assert_eq!(
            rep_num_assign(&[10.0, 1.0], 1000, 1_000_000.0, 0.03, 0.1, 4),
            vec![2, 4]
        );
    }

    #[test]
    fn bins_are_right_closed() {
        assert_eq!(size_bin(0, 1000), 0);
        assert_eq!(size_bin(1000, 1000), 0);
        assert_eq!(size_bin(1001, 1000), 1);
        assert_eq!(size_bin(5, 0), 4);
    }

    #[test]
    fn never_over_budget() {
        let counts = [30.0, 0.0, 12.0, 5.0, 1.0, 0.0, 2.0];
        for eps in [0.001, 0.01, 0.05, 0.2] {
            let x = rep_num_assign(&counts, 1000, 500_000.0, eps, 0.1, 9);
            let used: f64 = x
                .iter()
                .enumerate()
                .map(|(i, &r)| r as f64 * (i as f64 + 1.0) * 1000.0 * counts[i])
                .sum();
            assert!(used <= eps * 500_000.0 + 1e-9, "eps {eps}: {used}");
            assert_eq!(x[1], 0, "empty bins get nothing");
        }
    }
}
