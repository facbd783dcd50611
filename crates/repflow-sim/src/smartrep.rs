//! SmartRep (Xu et al.): hash-collision avoidance (HCA) by path probing, and RepNumAssign,
//! the greedy choice of how many replicas each short-flow size gets under a byte budget.
//!
//! "Different paths" follows the paper: two copies collide when their data paths share a
//! switch-to-switch link. Between two hosts under different top-of-rack (ToR) switches the
//! number of pairwise link-disjoint equal-cost paths is the number of uplinks in the ToR's
//! ECMP group (k/2 in a k-ary fat-tree: 5 for the paper's 10-pod tree, which has 25 equal-cost
//! inter-pod paths of which at most 5 avoid sharing an edge uplink); [`disjoint_paths`]
//! computes it. In every supported topology the switch a packet reaches after two hops (the
//! one above the ToR) identifies the path's class: copies whose second switches differ share
//! no switch-to-switch link, and copies whose second switches are equal share the ToR uplink.
//! A simulated probe therefore reports that switch, as a TTL-limited probe would.

use crate::config::{Config, ProbeCache, SchemeName};
use crate::engine::Time;
use crate::metrics::Counters;
use crate::network::{FiveTuple, NodeKind, Topology};
use crate::replication::{policy_with_table, ReplicationPolicy};
use crate::units::Rate;
use crate::units::PS_PER_SEC;
use crate::workload::Cdf;
use std::collections::{HashMap, HashSet};

/// Width of a RepNumAssign size bin (the paper's "i KB"), bytes.
pub const DEFAULT_UNIT_BYTES: u64 = 1000;

/// First source port HCA tries for a (source, destination) pair; later ports follow in order.
pub const HCA_FIRST_PORT: u16 = 32768;

/// Size of a probe packet on the wire (IP + TCP headers, no payload, Ethernet framing).
pub const PROBE_BYTES: u64 = 64;

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

/// Whether a directed link joins two switches.
pub fn is_fabric_link(topo: &Topology, link: u32) -> bool {
    let l = &topo.links[link as usize];
    matches!(topo.nodes[l.from as usize], NodeKind::Switch(_))
        && matches!(topo.nodes[l.to as usize], NodeKind::Switch(_))
}

/// Whether two paths share a switch-to-switch link (a "flow hash collision").
pub fn paths_collide(topo: &Topology, a: &[u32], b: &[u32]) -> bool {
    a.iter().any(|l| is_fabric_link(topo, *l) && b.contains(l))
}

/// Pairwise link-disjoint equal-cost paths between two hosts: the ECMP group of the source's
/// ToR towards the destination (1 under the same ToR).
pub fn disjoint_paths(topo: &Topology, src: u32, dst: u32) -> u32 {
    let tor = topo.host_tor[src as usize];
    if tor == topo.host_tor[dst as usize] {
        return 1;
    }
    topo.ecmp_group(tor, dst).count().max(1) as u32
}

/// The largest [`disjoint_paths`] over all host pairs ("ecpNum" between hosts in different
/// pods).
pub fn max_disjoint_paths(topo: &Topology) -> u32 {
    let mut best = 1;
    let mut seen = HashSet::new();
    for h in 0..topo.n_hosts as u32 {
        if seen.insert(topo.host_tor[h as usize]) {
            best = best.max(disjoint_paths(topo, 0, h));
        }
    }
    best
}

/// What a probe of `t` reports: the switch reached after two hops (TTL 2), or `None` when the
/// path has no switch above the ToR (both hosts under one switch).
pub fn probe_answer(topo: &Topology, t: FiveTuple) -> Option<u32> {
    let p = topo.path(t);
    let links = p.links();
    if links.len() < 3 {
        return None;
    }
    Some(topo.links[links[1] as usize].to)
}

/// How long one probe of `t` takes: the unloaded round trip to the answering switch (a
/// [`PROBE_BYTES`] packet out and an ICMP reply of the same size back over the same links:
/// propagation plus serialization per hop) plus `processing` (host and switch time to build
/// and answer the probe; the paper measures 18 µs at the hosts and 11 µs at the switch).
pub fn probe_time(topo: &Topology, t: FiveTuple, processing: Time) -> Time {
    let p = topo.path(t);
    let mut rtt = processing;
    for &l in p.links().iter().take(2) {
        let link = &topo.links[l as usize];
        rtt += 2 * (link.delay + Rate(link.rate.bps()).tx_time(PROBE_BYTES));
    }
    rtt
}

/// Probe counters of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HcaStats {
    /// Probes sent (cache misses).
    pub probes: u64,
    /// Lookups answered by the cache.
    pub cache_hits: u64,
    /// Flows that got fewer copies than planned (not enough distinct paths found).
    pub fewer_paths: u64,
    /// Total time flows waited for probes, picoseconds.
    pub wait: Time,
}

/// HCA state of a simulation: the probe cache ("database") per five-tuple and the source
/// ports currently in use.
#[derive(Debug)]
pub struct Hca {
    cache: HashMap<FiveTuple, Option<u32>>,
    busy: HashSet<(u32, u32, u16, u16)>,
    /// Time charged per probe on top of the round trip.
    pub processing: Time,
    /// The cache starts full (probes done in advance, as in the paper's evaluation): lookups
    /// cost no time but are still counted as probes the first time.
    pub warm: bool,
    /// Ports tried per copy before giving up.
    pub max_tries_per_copy: u32,
    /// Counters.
    pub stats: HcaStats,
}

impl Hca {
    /// Empty state.
    pub fn new(processing: Time, warm: bool) -> Hca {
        Hca {
            cache: HashMap::new(),
            busy: HashSet::new(),
            processing,
            warm,
            max_tries_per_copy: 64,
            stats: HcaStats::default(),
        }
    }

    /// Chooses source ports for up to `copies` copies from `src` to `dst:dport` whose paths
    /// are pairwise link-disjoint (Algorithm 2 with a cache): ports are tried in order from
    /// [`HCA_FIRST_PORT`], skipping ports in use, and a port is taken when its probed path
    /// differs from the ports already taken. Returns the ports (possibly fewer than `copies`
    /// when not enough paths were found) and the time the probes took. Both hosts under one
    /// ToR: `None` (no switch-to-switch link, nothing to avoid).
    pub fn choose(
        &mut self,
        topo: &Topology,
        src: u32,
        dst: u32,
        dport: u16,
        copies: u32,
        out: &mut Vec<u16>,
    ) -> Option<Time> {
        out.clear();
        if topo.host_tor[src as usize] == topo.host_tor[dst as usize] {
            return None;
        }
        let mut seen: Vec<u32> = Vec::with_capacity(copies as usize);
        let mut wait: Time = 0;
        let mut port = HCA_FIRST_PORT;
        let mut tries = 0u32;
        let budget = self.max_tries_per_copy.saturating_mul(copies);
        while (out.len() as u32) < copies && tries < budget && port < u16::MAX {
            let sport = port;
            port += 1;
            if self.busy.contains(&(src, dst, sport, dport)) {
                continue;
            }
            tries += 1;
            let t = FiveTuple {
                src,
                dst,
                sport,
                dport,
                proto: 6,
            };
            let answer = match self.cache.get(&t) {
                Some(&a) => {
                    self.stats.cache_hits += 1;
                    a
                }
                None => {
                    self.stats.probes += 1;
                    if !self.warm {
                        wait += probe_time(topo, t, self.processing);
                    }
                    let a = probe_answer(topo, t);
                    self.cache.insert(t, a);
                    a
                }
            };
            if let Some(sw) = answer {
                if !seen.contains(&sw) {
                    seen.push(sw);
                    out.push(sport);
                }
            }
        }
        if (out.len() as u32) < copies {
            self.stats.fewer_paths += 1;
        }
        for &sport in out.iter() {
            self.busy.insert((src, dst, sport, dport));
        }
        self.stats.wait += wait;
        Some(wait)
    }

    /// Marks a connection's source port free again.
    pub fn release(&mut self, t: FiveTuple) {
        self.busy.remove(&(t.src, t.dst, t.sport, t.dport));
    }

    /// Cache hit rate (hits over lookups), NaN before any lookup.
    pub fn hit_rate(&self) -> f64 {
        let n = self.stats.cache_hits + self.stats.probes;
        if n == 0 {
            f64::NAN
        } else {
            self.stats.cache_hits as f64 / n as f64
        }
    }
}

impl Hca {
    /// Writes the probe counters into a run's counters.
    pub fn fill_counters(&self, c: &mut Counters) {
        c.hca_probes = self.stats.probes;
        c.hca_cache_hits = self.stats.cache_hits;
        c.hca_cache_hit_rate = self.hit_rate();
        c.hca_wait = self.stats.wait as f64 / PS_PER_SEC as f64;
        c.hca_fewer_paths = self.stats.fewer_paths;
    }
}

/// SmartRep's replica table for a run: `scheme.table` when given, else RepNumAssign over the
/// workload's CDF with at most ([`max_disjoint_paths`] − 1) replicas.
pub fn table_for(cfg: &Config, topo: &Topology, cdf: &Cdf) -> ReplicaTable {
    if let Some(t) = &cfg.scheme.table {
        return ReplicaTable {
            unit_bytes: DEFAULT_UNIT_BYTES,
            extra: t.clone(),
        };
    }
    let max_extra = max_disjoint_paths(topo).saturating_sub(1);
    SizeHistogram::from_cdf(cdf, DEFAULT_UNIT_BYTES, cfg.scheme.threshold.0).table(
        cfg.scheme.eps,
        cfg.scheme.p,
        max_extra,
    )
}

/// The replication policy of a run, and HCA state when the scheme probes paths.
pub fn build_policy(
    cfg: &Config,
    topo: &Topology,
    cdf: &Cdf,
) -> (Box<dyn ReplicationPolicy>, Option<Hca>) {
    let table = (cfg.scheme.name == SchemeName::Smartrep).then(|| table_for(cfg, topo, cdf));
    if let Some(t) = &table {
        tracing::info!(table = ?t.extra, "SmartRep replica table");
    }
    let policy = policy_with_table(&cfg.scheme, table);
    let hca = policy.probes_paths().then(|| {
        Hca::new(
            cfg.scheme.probe_processing.ps(),
            cfg.scheme.probe_cache == ProbeCache::Warm,
        )
    });
    (policy, hca)
}

/// Collision rate of RepFlow's port choice: over `pairs`, the fraction whose copy 1 (same
/// source port `sports[i]`, destination port + 1) shares a switch-to-switch link with copy 0.
/// Pairs under one ToR (no fabric link) count as not colliding; `inter_tor` reports how many
/// pairs could collide at all.
pub fn repflow_collisions(
    topo: &Topology,
    pairs: &[(u32, u32)],
    sports: &[u16],
    dport: u16,
) -> CollisionCount {
    let mut c = CollisionCount::default();
    for (&(src, dst), &sport) in pairs.iter().zip(sports) {
        c.flows += 1;
        if topo.host_tor[src as usize] == topo.host_tor[dst as usize] {
            continue;
        }
        c.inter_tor += 1;
        let t0 = FiveTuple {
            src,
            dst,
            sport,
            dport,
            proto: 6,
        };
        let t1 = FiveTuple {
            dport: dport + 1,
            ..t0
        };
        if paths_collide(topo, topo.path(t0).links(), topo.path(t1).links()) {
            c.collisions += 1;
        }
    }
    c
}

/// Result of [`repflow_collisions`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CollisionCount {
    /// Flows examined.
    pub flows: u64,
    /// Flows whose hosts are under different ToRs.
    pub inter_tor: u64,
    /// Flows whose two copies share a switch-to-switch link.
    pub collisions: u64,
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
