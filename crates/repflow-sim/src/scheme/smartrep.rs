//! SmartRep (Xu et al., "SmartRep"): replicas per flow size chosen by RepNumAssign under a
//! byte budget, on source ports that HCA's path probes show to be link-disjoint
//! ([`crate::hca`]); and the two schemes built from the same parts, RepFlow with HCA ports
//! and FullRep (one copy per link-disjoint path).

use super::repflow::DEFAULT_THRESHOLD;
use super::shared::check_copies;
use super::unit::{Context, Parts, Scheme};
use crate::config::error::ConfigError;
use crate::config::sections::TcpConfig;
use crate::engine::Rng;
use crate::hca::{max_disjoint_paths, Hca};
use crate::network::Topology;
use crate::replication::{
    ephemeral_port, CopySpec, FlowSpec, NoReplication, RepFlow, ReplicationPolicy, BASE_PORT,
};
use crate::units::{Bytes, Duration};
use crate::workload::Cdf;
use serde::{Deserialize, Serialize};

/// Whether HCA's probe cache starts empty.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ProbeCache {
    /// Empty at start: a flow waits for the probes of ports not yet in the cache.
    Cold,
    /// Filled in advance: lookups cost no time.
    Warm,
}

/// HCA's default time per probe on top of its round trip (the paper: 18 µs at the hosts and
/// 11 µs at the switch).
const DEFAULT_PROBE_PROCESSING: Duration = Duration(29_000_000);

fn hca(processing: Duration, cache: ProbeCache) -> Option<Hca> {
    Some(Hca::new(processing.ps(), cache == ProbeCache::Warm))
}

/// RepFlow with HCA: `copies` copies of every flow of at most `threshold` bytes, on
/// pairwise link-disjoint paths (as many as exist).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RepflowHcaScheme {
    /// Flows of at most this many bytes are replicated.
    pub threshold: Bytes,
    /// Copies of a replicated flow (the original included), 1–64.
    pub copies: u32,
    /// Stop the other copies once one completes.
    pub cancel: bool,
    /// Host and switch time per probe on top of its round trip (paper: 18 + 11 µs).
    pub probe_processing: Duration,
    /// `cold`: the probe cache starts empty and flows wait for their probes; `warm`: probes
    /// were done in advance (the paper's evaluation), no waiting.
    pub probe_cache: ProbeCache,
}

impl Default for RepflowHcaScheme {
    fn default() -> Self {
        RepflowHcaScheme {
            threshold: DEFAULT_THRESHOLD,
            copies: 2,
            cancel: false,
            probe_processing: DEFAULT_PROBE_PROCESSING,
            probe_cache: ProbeCache::Cold,
        }
    }
}

impl Scheme for RepflowHcaScheme {
    fn validate(&self, _tcp: &TcpConfig) -> Result<(), ConfigError> {
        check_copies(self.copies)
    }

    fn build(&self, ctx: &Context) -> Parts {
        Parts {
            policy: Box::new(RepFlowHca {
                threshold: self.threshold.0,
                copies: self.copies,
                cancel: self.cancel,
            }),
            hca: hca(self.probe_processing, self.probe_cache),
            ..Parts::plain(ctx)
        }
    }
}

/// SmartRep's parameters.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SmartrepScheme {
    /// Flows of at most this many bytes may be replicated.
    pub threshold: Bytes,
    /// Stop the other copies once one completes.
    pub cancel: bool,
    /// Replica bytes may be at most this fraction of all bytes (RepNumAssign's ε), 0 < ε < 1.
    pub eps: f64,
    /// Probability that a copy meets a large flow (RepNumAssign's p), 0 < p < 1.
    pub p: f64,
    /// Earlier run whose flow sizes are the history (run directory, `flows.parquet` or
    /// `run.json`); unset = the workload's CDF. Read by the front end into `table`.
    pub history: Option<String>,
    /// Explicit replica table, `table[i]` replicas for sizes in `(i KB, (i+1) KB]`
    /// (1 KB = 1000 B); unset = computed by RepNumAssign at run start.
    pub table: Option<Vec<u32>>,
    /// Host and switch time per probe on top of its round trip.
    pub probe_processing: Duration,
    /// `cold` or `warm` probe cache (see [`RepflowHcaScheme::probe_cache`]).
    pub probe_cache: ProbeCache,
}

impl Default for SmartrepScheme {
    fn default() -> Self {
        SmartrepScheme {
            threshold: DEFAULT_THRESHOLD,
            cancel: false,
            eps: 0.03,
            p: 0.1,
            history: None,
            table: None,
            probe_processing: DEFAULT_PROBE_PROCESSING,
            probe_cache: ProbeCache::Cold,
        }
    }
}

impl SmartrepScheme {
    /// The replica table of a run: `table` when given, else RepNumAssign over the workload's
    /// CDF with at most ([`max_disjoint_paths`] − 1) replicas.
    pub fn replica_table(&self, topo: &Topology, cdf: &Cdf) -> ReplicaTable {
        if let Some(t) = &self.table {
            return ReplicaTable {
                unit_bytes: DEFAULT_UNIT_BYTES,
                extra: t.clone(),
            };
        }
        let max_extra = max_disjoint_paths(topo).saturating_sub(1);
        SizeHistogram::from_cdf(cdf, DEFAULT_UNIT_BYTES, self.threshold.0)
            .table(self.eps, self.p, max_extra)
    }
}

impl Scheme for SmartrepScheme {
    fn validate(&self, _tcp: &TcpConfig) -> Result<(), ConfigError> {
        for (field, v) in [("scheme.eps", self.eps), ("scheme.p", self.p)] {
            if !(v.is_finite() && v > 0.0 && v < 1.0) {
                return Err(ConfigError::new(
                    field,
                    format!("must be a number strictly between 0 and 1, got {v}"),
                ));
            }
        }
        if let Some(t) = &self.table {
            if t.iter().any(|&x| x > 63) {
                return Err(ConfigError::new(
                    "scheme.table",
                    "replicas per size bin must be between 0 and 63",
                ));
            }
        } else if self.history.is_some() {
            return Err(ConfigError::new(
                "scheme.history",
                "the earlier run's flow sizes must be turned into scheme.table by the front end \
                 (repflow sim / repflow.simulate do it); set scheme.table or unset scheme.history",
            ));
        }
        Ok(())
    }

    fn build(&self, ctx: &Context) -> Parts {
        let table = self.replica_table(ctx.topo, ctx.cdf);
        tracing::info!(table = ?table.extra, "SmartRep replica table");
        Parts {
            policy: Box::new(SmartRep {
                threshold: self.threshold.0,
                table,
                cancel: self.cancel,
            }),
            hca: hca(self.probe_processing, self.probe_cache),
            ..Parts::plain(ctx)
        }
    }
}

/// FullRep's parameters.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FullrepScheme {
    /// Flows of at most this many bytes are replicated.
    pub threshold: Bytes,
    /// Stop the other copies once one completes.
    pub cancel: bool,
    /// Host and switch time per probe on top of its round trip.
    pub probe_processing: Duration,
    /// `cold` or `warm` probe cache.
    pub probe_cache: ProbeCache,
}

impl Default for FullrepScheme {
    fn default() -> Self {
        FullrepScheme {
            threshold: DEFAULT_THRESHOLD,
            cancel: false,
            probe_processing: DEFAULT_PROBE_PROCESSING,
            probe_cache: ProbeCache::Cold,
        }
    }
}

impl Scheme for FullrepScheme {
    fn build(&self, ctx: &Context) -> Parts {
        Parts {
            policy: Box::new(FullRep {
                threshold: self.threshold.0,
                cancel: self.cancel,
            }),
            hca: hca(self.probe_processing, self.probe_cache),
            ..Parts::plain(ctx)
        }
    }
}

/// Width of a RepNumAssign size bin (the paper's "i KB"), bytes.
pub const DEFAULT_UNIT_BYTES: u64 = 1000;

/// SmartRep's RepNumAssign (Algorithm 3), shared with `repflow-net`: see
/// [`repflow_repnum::rep_num_assign`].
pub use repflow_repnum::rep_num_assign;

/// A replica-count table: `extra[i]` replicas for flows of `(i·unit, (i+1)·unit]` bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaTable {
    /// Bin width, bytes.
    pub unit_bytes: u64,
    /// Replicas (beyond the original) per bin; sizes past the table get none.
    pub extra: Vec<u32>,
}

impl ReplicaTable {
    /// Replicas for a flow of `size` bytes.
    pub fn replicas_for(&self, size: u64) -> u32 {
        let bin = repflow_repnum::size_bin(size, self.unit_bytes);
        self.extra.get(bin).copied().unwrap_or(0)
    }
}

/// Flow-size history binned for RepNumAssign.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeHistogram {
    /// Bin width, bytes.
    pub unit_bytes: u64,
    /// Weight of each bin up to the threshold (index `i` = sizes in `(i·unit, (i+1)·unit]`).
    pub counts: Vec<f64>,
    /// Θ: bytes of all flows, long ones included, with the same weighting.
    pub total_bytes: f64,
}

impl SizeHistogram {
    /// The histogram of observed sizes (an earlier run's records).
    pub fn from_sizes(sizes: &[u64], unit_bytes: u64, threshold: u64) -> SizeHistogram {
        let unit = unit_bytes.max(1);
        let mut counts = vec![0.0; threshold.div_ceil(unit) as usize];
        let mut total = 0.0;
        for &s in sizes {
            total += s as f64;
            if let Some(c) = counts.get_mut(repflow_repnum::size_bin(s, unit)) {
                *c += 1.0;
            }
        }
        SizeHistogram {
            unit_bytes: unit,
            counts,
            total_bytes: total,
        }
    }

    /// The exact bin probabilities of a workload's CDF (the expected histogram of one flow;
    /// RepNumAssign is unchanged by scaling counts and Θ together).
    pub fn from_cdf(cdf: &Cdf, unit_bytes: u64, threshold: u64) -> SizeHistogram {
        let unit = unit_bytes.max(1);
        let bins = threshold.div_ceil(unit) as usize;
        let mut counts = Vec::with_capacity(bins);
        let mut below = 0.0;
        for i in 1..=bins as u64 {
            let at = cdf.prob_at_most(i * unit);
            counts.push((at - below).max(0.0));
            below = at;
        }
        SizeHistogram {
            unit_bytes: unit,
            counts,
            total_bytes: cdf.mean_bytes(),
        }
    }

    /// RepNumAssign over this history.
    pub fn table(&self, eps: f64, p: f64, max_extra: u32) -> ReplicaTable {
        ReplicaTable {
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

    /// Replica bytes a table costs, as a fraction of Θ (the budget ε bounds it).
    pub fn overhead(&self, table: &ReplicaTable) -> f64 {
        let used: f64 = self
            .counts
            .iter()
            .zip(&table.extra)
            .enumerate()
            .map(|(i, (&c, &x))| (i as f64 + 1.0) * self.unit_bytes as f64 * c * x as f64)
            .sum();
        if self.total_bytes > 0.0 {
            used / self.total_bytes
        } else {
            0.0
        }
    }
}

/// Pushes `n` copies to `dport` (source ports are filled in by HCA when `n > 1`).
fn hca_copies(n: u32, rng: &mut Rng, out: &mut Vec<CopySpec>) {
    let sport = ephemeral_port(rng);
    for _ in 0..n.max(1) {
        out.push(CopySpec {
            sport,
            dport: BASE_PORT,
        });
    }
}

/// RepFlow with HCA: flows of at most `threshold` bytes get `copies` connections on pairwise
/// link-disjoint paths (as many as exist). Under one ToR (one path) the copies keep RepFlow's
/// ports.
#[derive(Clone, Copy, Debug)]
pub struct RepFlowHca {
    /// Largest replicated flow, bytes.
    pub threshold: u64,
    /// Copies of a short flow (original included).
    pub copies: u32,
    /// Cancel losers.
    pub cancel: bool,
}

impl ReplicationPolicy for RepFlowHca {
    fn plan(&mut self, flow: &FlowSpec, rng: &mut Rng, out: &mut Vec<CopySpec>) {
        RepFlow {
            threshold: self.threshold,
            copies: self.copies,
            cancel: self.cancel,
        }
        .plan(flow, rng, out)
    }
    fn plan_paths(&mut self, flow: &FlowSpec, paths: u32, rng: &mut Rng, out: &mut Vec<CopySpec>) {
        if paths <= 1 || flow.size > self.threshold {
            self.plan(flow, rng, out);
        } else {
            hca_copies(self.copies.min(paths), rng, out);
        }
    }
    fn cancel_losers(&self) -> bool {
        self.cancel
    }
    fn probes_paths(&self) -> bool {
        true
    }
}

/// SmartRep: a flow of at most `threshold` bytes between hosts under different ToRs gets
/// `1 + table.replicas_for(size)` copies (at most one per link-disjoint path), on HCA ports.
#[derive(Clone, Debug)]
pub struct SmartRep {
    /// Largest replicated flow, bytes.
    pub threshold: u64,
    /// Replicas per size (RepNumAssign).
    pub table: ReplicaTable,
    /// Cancel losers.
    pub cancel: bool,
}

impl ReplicationPolicy for SmartRep {
    fn plan(&mut self, flow: &FlowSpec, rng: &mut Rng, out: &mut Vec<CopySpec>) {
        NoReplication.plan(flow, rng, out)
    }
    fn plan_paths(&mut self, flow: &FlowSpec, paths: u32, rng: &mut Rng, out: &mut Vec<CopySpec>) {
        if paths <= 1 || flow.size > self.threshold {
            return self.plan(flow, rng, out);
        }
        let n = (1 + self.table.replicas_for(flow.size)).min(paths);
        hca_copies(n, rng, out);
    }
    fn cancel_losers(&self) -> bool {
        self.cancel
    }
    fn probes_paths(&self) -> bool {
        true
    }
}

/// FullRep: a flow of at most `threshold` bytes gets one copy per link-disjoint equal-cost
/// path between its hosts, on HCA ports.
#[derive(Clone, Copy, Debug)]
pub struct FullRep {
    /// Largest replicated flow, bytes.
    pub threshold: u64,
    /// Cancel losers.
    pub cancel: bool,
}

impl ReplicationPolicy for FullRep {
    fn plan(&mut self, flow: &FlowSpec, rng: &mut Rng, out: &mut Vec<CopySpec>) {
        NoReplication.plan(flow, rng, out)
    }
    fn plan_paths(&mut self, flow: &FlowSpec, paths: u32, rng: &mut Rng, out: &mut Vec<CopySpec>) {
        if paths <= 1 || flow.size > self.threshold {
            return self.plan(flow, rng, out);
        }
        hca_copies(paths, rng, out);
    }
    fn cancel_losers(&self) -> bool {
        self.cancel
    }
    fn probes_paths(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_by_hand() {
        // Bins 1 KB (10 flows) and 2 KB (1 flow); Θ = 1,000 KB; ε = 0.03 → 30 KB.
        // η1 = 10 KB, η2 = 2 KB. p = 0.1: terms 1 vs 0.1 → bin 1 (10 KB used); 0.1 vs 0.1,
        // tie → bin 1 (20); 0.01 vs 0.1 → bin 2 (22); 0.01 vs 0.01 → bin 1 would make 32 >
        // 30: closed; bin 2 three more times (24, 26, 28) up to max_extra = 4.
        let x = rep_num_assign(&[10.0, 1.0], 1000, 1e6, 0.03, 0.1, 4);
        assert_eq!(x, vec![2, 4]);
    }
}
