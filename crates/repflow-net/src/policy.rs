//! Sans-IO replication policy: which flows get copies, how many, and where they go.
//!
//! Nothing here touches a socket or reads a clock: callers pass `now` as a [`Duration`]
//! since any fixed origin. The same policy drives per-flow and pooled connections.

use std::collections::VecDeque;
use std::time::Duration;

/// Default replication threshold (bytes): flows of at most this size are replicated.
pub const DEFAULT_THRESHOLD: u64 = 100 * 1000;

/// How many copies a short flow gets.
#[derive(Clone, Debug, PartialEq)]
pub enum CopiesRule {
    /// Every short flow gets this many copies in total (RepFlow: 2). 1 disables replication.
    Fixed(u8),
    /// SmartRep: copies by flow size from [`rep_num_assign`].
    Table(CopiesTable),
}

/// Where the copies of a flow go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortStrategy {
    /// RepFlow: copy `i` goes to destination port + `i` (the receiver listens on consecutive
    /// ports); the kernel picks the source port.
    DstPortPlus,
    /// SmartRep HCA: every copy goes to the destination port, from a source port whose
    /// probed path differs from the other copies' paths (see [`crate::paths`]).
    ProbedSourcePorts,
}

/// SmartRep's replica-count table: `extra[b]` replicas for flows in size bin `b + 1`, where
/// bin `k` holds sizes in `((k−1)·unit, k·unit]` bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopiesTable {
    /// Width of a size bin in bytes (SmartRep uses 1 KB).
    pub unit_bytes: u64,
    /// Extra copies (replicas) per bin, starting at bin 1.
    pub extra: Vec<u8>,
}

impl CopiesTable {
    /// Total copies (original included) for a flow of `size` bytes; sizes beyond the table
    /// get one copy.
    pub fn copies_for(&self, size: u64) -> u8 {
        match self
            .extra
            .get(repflow_repnum::size_bin(size, self.unit_bytes))
        {
            Some(&e) => e.saturating_add(1),
            None => 1,
        }
    }
}

/// SmartRep's RepNumAssign (Algorithm 3): greedy replica counts per size bin under a byte
/// budget, on flow counts (the shared implementation, [`repflow_repnum::rep_num_assign`]).
///
/// `counts[b]` is the number of observed flows in size bin `b + 1` (bin `k` = sizes up to
/// `k·unit_bytes`), `total_bytes` the total traffic Θ of all observed flows (long ones
/// included), `eps` the budget ε (replica bytes ≤ ε·Θ), `p` the per-path probability of
/// meeting a large flow (0.1 in the paper), `max_extra` the cap on replicas per flow
/// (equal-cost paths − 1).
pub fn rep_num_assign(
    counts: &[u64],
    unit_bytes: u64,
    total_bytes: f64,
    eps: f64,
    p: f64,
    max_extra: u8,
) -> Vec<u8> {
    let weights: Vec<f64> = counts.iter().map(|&c| c as f64).collect();
    repflow_repnum::rep_num_assign(
        &weights,
        unit_bytes,
        total_bytes,
        eps,
        p,
        u32::from(max_extra),
    )
    .into_iter()
    .map(|x| x as u8) // x ≤ max_extra ≤ 255
    .collect()
}

/// Observed flow sizes, binned for [`rep_num_assign`].
#[derive(Clone, Debug, PartialEq)]
pub struct SizeHistogram {
    /// Bin width in bytes.
    pub unit_bytes: u64,
    /// Flows per bin for sizes up to the threshold (bin `k` at index `k − 1`).
    pub counts: Vec<u64>,
    /// Bytes of every observed flow, long ones included (Θ).
    pub total_bytes: f64,
    /// Number of observed flows.
    pub flows: u64,
}

impl SizeHistogram {
    /// An empty histogram with bins of `unit_bytes` up to `threshold` bytes.
    pub fn new(unit_bytes: u64, threshold: u64) -> Self {
        let unit = unit_bytes.max(1);
        SizeHistogram {
            unit_bytes: unit,
            counts: vec![0; threshold.div_ceil(unit) as usize],
            total_bytes: 0.0,
            flows: 0,
        }
    }

    /// Records one flow of `size` bytes.
    pub fn observe(&mut self, size: u64) {
        self.flows += 1;
        self.total_bytes += size as f64;
        if let Some(c) = self
            .counts
            .get_mut(repflow_repnum::size_bin(size, self.unit_bytes))
        {
            *c += 1;
        }
    }

    /// The SmartRep table for this history.
    pub fn table(&self, eps: f64, p: f64, max_extra: u8) -> CopiesTable {
        CopiesTable {
            unit_bytes: self.unit_bytes,
            extra: rep_num_assign(
                &self.counts,
                self.unit_bytes,
                self.total_bytes,
                eps,
                p,
                max_extra,
            ),
        }
    }
}

/// Run-time bound on replication overhead: extra bytes / all bytes over a sliding window.
#[derive(Clone, Debug)]
pub struct OverheadBudget {
    /// Largest allowed ratio of extra (replica) bytes to all bytes sent, in [0, 1].
    pub limit: f64,
    /// Width of the sliding window.
    pub window: Duration,
    events: VecDeque<(Duration, u64, u64)>,
    total: u64,
    extra: u64,
}

impl OverheadBudget {
    /// A budget of `limit` over `window`.
    pub fn new(limit: f64, window: Duration) -> Self {
        OverheadBudget {
            limit,
            window,
            events: VecDeque::new(),
            total: 0,
            extra: 0,
        }
    }

    fn expire(&mut self, now: Duration) {
        while let Some(&(t, tot, ex)) = self.events.front() {
            if now.saturating_sub(t) > self.window {
                self.events.pop_front();
                self.total -= tot;
                self.extra -= ex;
            } else {
                break;
            }
        }
    }

    /// Records a finished flow: `total` bytes sent by all its copies, `extra` of which beyond
    /// the single copy that was needed.
    pub fn record(&mut self, now: Duration, total: u64, extra: u64) {
        self.expire(now);
        self.events.push_back((now, total, extra));
        self.total += total;
        self.extra += extra.min(total);
    }

    /// The current ratio of extra bytes over the window (0 when nothing was sent).
    pub fn ratio(&mut self, now: Duration) -> f64 {
        self.expire(now);
        if self.total == 0 {
            0.0
        } else {
            self.extra as f64 / self.total as f64
        }
    }

    /// Whether copies may be made now.
    pub fn allows(&mut self, now: Duration) -> bool {
        self.ratio(now) <= self.limit
    }
}

/// Configuration of a [`Policy`].
#[derive(Clone, Debug)]
pub struct PolicyConfig {
    /// Flows of at most this many bytes are replicated.
    pub threshold: u64,
    /// Copies per short flow.
    pub copies: CopiesRule,
    /// Port choice for the copies.
    pub ports: PortStrategy,
    /// Optional run-time overhead budget `(limit, window)`.
    pub overhead_budget: Option<(f64, Duration)>,
}

impl PolicyConfig {
    /// Plain TCP: one copy per flow.
    pub fn tcp() -> Self {
        PolicyConfig {
            threshold: DEFAULT_THRESHOLD,
            copies: CopiesRule::Fixed(1),
            ports: PortStrategy::DstPortPlus,
            overhead_budget: None,
        }
    }

    /// RepFlow: `copies` copies of every flow up to 100 KB, to destination port + i.
    pub fn repflow(copies: u8) -> Self {
        PolicyConfig {
            copies: CopiesRule::Fixed(copies.max(1)),
            ..PolicyConfig::tcp()
        }
    }

    /// SmartRep: copies from `table`, source ports from path probes.
    pub fn smartrep(table: CopiesRule) -> Self {
        PolicyConfig {
            copies: table,
            ports: PortStrategy::ProbedSourcePorts,
            ..PolicyConfig::tcp()
        }
    }
}

/// Why a flow got the number of copies it got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionReason {
    /// Larger than the threshold: one copy.
    AboveThreshold,
    /// The copies rule gives this size one copy.
    RuleSingleCopy,
    /// The overhead budget is exhausted: one copy.
    BudgetExceeded,
    /// Replicated.
    Replicated,
}

/// The policy's decision for one flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Total copies (≥ 1).
    pub copies: u8,
    /// Why.
    pub reason: DecisionReason,
}

/// The replication policy (sans-IO).
#[derive(Clone, Debug)]
pub struct Policy {
    cfg: PolicyConfig,
    budget: Option<OverheadBudget>,
}

impl Policy {
    /// A policy from its configuration.
    pub fn new(cfg: PolicyConfig) -> Self {
        let budget = cfg.overhead_budget.map(|(l, w)| OverheadBudget::new(l, w));
        Policy { cfg, budget }
    }

    /// The configuration.
    pub fn config(&self) -> &PolicyConfig {
        &self.cfg
    }

    /// Replaces the copies rule (e.g. after re-running RepNumAssign on new history).
    pub fn set_copies(&mut self, rule: CopiesRule) {
        self.cfg.copies = rule;
    }

    /// How many copies a flow of `size` bytes gets now.
    pub fn decide(&mut self, size: u64, now: Duration) -> Decision {
        if size > self.cfg.threshold {
            return Decision {
                copies: 1,
                reason: DecisionReason::AboveThreshold,
            };
        }
        let n = match &self.cfg.copies {
            CopiesRule::Fixed(n) => (*n).max(1),
            CopiesRule::Table(t) => t.copies_for(size),
        };
        if n <= 1 {
            return Decision {
                copies: 1,
                reason: DecisionReason::RuleSingleCopy,
            };
        }
        if let Some(b) = &mut self.budget {
            if !b.allows(now) {
                return Decision {
                    copies: 1,
                    reason: DecisionReason::BudgetExceeded,
                };
            }
        }
        Decision {
            copies: n,
            reason: DecisionReason::Replicated,
        }
    }

    /// Feeds a finished flow's bytes to the overhead budget.
    pub fn record(&mut self, now: Duration, bytes_sent: u64, extra_bytes: u64) {
        if let Some(b) = &mut self.budget {
            b.record(now, bytes_sent, extra_bytes);
        }
    }

    /// Current overhead ratio over the budget's window (`None` without a budget).
    pub fn overhead_ratio(&mut self, now: Duration) -> Option<f64> {
        self.budget.as_mut().map(|b| b.ratio(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn threshold_and_fixed_copies() {
        let mut p = Policy::new(PolicyConfig::repflow(2));
        assert_eq!(p.decide(100_000, S).copies, 2);
        assert_eq!(p.decide(1, S).copies, 2);
        let d = p.decide(100_001, S);
        assert_eq!((d.copies, d.reason), (1, DecisionReason::AboveThreshold));
        let mut t = Policy::new(PolicyConfig::tcp());
        assert_eq!(t.decide(10, S).reason, DecisionReason::RuleSingleCopy);
    }

    #[test]
    fn copies_table_bins() {
        let t = CopiesTable {
            unit_bytes: 1000,
            extra: vec![3, 1, 0],
        };
        assert_eq!(t.copies_for(0), 4);
        assert_eq!(t.copies_for(1000), 4);
        assert_eq!(t.copies_for(1001), 2);
        assert_eq!(t.copies_for(3000), 1);
        assert_eq!(t.copies_for(3001), 1);
    }

    #[test]
    fn rep_num_assign_greedy_by_hand() {
        // Bins 1 KB (10 flows) and 2 KB (1 flow); Θ = 1000 KB; ε = 0.03 → 30 KB budget.
        // η1 = 10 KB, η2 = 2 KB. Terms (p = 0.1): bin1 10·0.1 = 1, bin2 0.1 → bin1 gets one
        // (sum 10); bin1 0.1 vs bin2 0.1 tie → bin1 (smaller) (sum 20); bin1 0.01 < bin2 0.1
        // → bin2 (22); bin2 0.01 vs bin1 0.01 → bin1 (32 > 30, closed); bin2 (24), (26) …
        // until max_extra = 4 for bin2.
        let x = rep_num_assign(&[10, 1], 1000, 1_000_000.0, 0.03, 0.1, 4);
        assert_eq!(x, vec![2, 4]);
        // A tight budget gives nothing; zero max_extra gives nothing.
        assert_eq!(
            rep_num_assign(&[10, 1], 1000, 1_000_000.0, 0.001, 0.1, 4),
            vec![0, 0]
        );
        assert_eq!(rep_num_assign(&[10, 1], 1000, 1e9, 0.5, 0.1, 0), vec![0, 0]);
        // Budget is respected.
        let counts = [5, 0, 7, 3, 9];
        let x = rep_num_assign(&counts, 1000, 500_000.0, 0.05, 0.1, 9);
        let used: f64 = (0..5)
            .map(|i| (i as f64 + 1.0) * 1000.0 * counts[i] as f64 * x[i] as f64)
            .sum();
        assert!(used <= 0.05 * 500_000.0, "{used}");
        assert_eq!(x[1], 0);
    }

    #[test]
    fn histogram_builds_table() {
        let mut h = SizeHistogram::new(1000, 3000);
        for s in [500, 900, 1500, 50_000] {
            h.observe(s);
        }
        assert_eq!(h.counts, vec![2, 1, 0]);
        assert_eq!(h.total_bytes, 52_900.0);
        let t = h.table(0.2, 0.1, 2);
        // budget 10.58 KB: bin1 η=2 KB, bin2 η=2 KB → both reach 2 (8 KB total).
        assert_eq!(t.extra, vec![2, 2, 0]);
    }

    #[test]
    fn overhead_budget_window() {
        let mut p = Policy::new(PolicyConfig {
            overhead_budget: Some((0.1, Duration::from_secs(10))),
            ..PolicyConfig::repflow(2)
        });
        let t0 = Duration::from_secs(100);
        assert_eq!(p.decide(1000, t0).copies, 2);
        p.record(t0, 2000, 1000); // 50 % overhead
        let d = p.decide(1000, t0 + S);
        assert_eq!((d.copies, d.reason), (1, DecisionReason::BudgetExceeded));
        p.record(t0 + S, 20_000, 0); // 1000 / 22000 < 10 %
        assert_eq!(p.decide(1000, t0 + S).copies, 2);
        assert!((p.overhead_ratio(t0 + S).unwrap() - 1000.0 / 22000.0).abs() < 1e-12);
        // After the window everything has expired.
        assert_eq!(p.overhead_ratio(t0 + Duration::from_secs(30)), Some(0.0));
    }
}
