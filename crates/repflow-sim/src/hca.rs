//! SmartRep's hash-collision avoidance (HCA): path probing with a cache, and the path
//! arithmetic it rests on.
//!
//! "Different paths" follows the SmartRep paper (Xu et al.): two copies collide when their
//! data paths share a switch-to-switch link. Between two hosts under different top-of-rack
//! (ToR) switches the number of pairwise link-disjoint equal-cost paths is the number of
//! uplinks in the ToR's ECMP group (k/2 in a k-ary fat-tree: 5 for the paper's 10-pod tree,
//! which has 25 equal-cost inter-pod paths of which at most 5 avoid sharing an edge uplink);
//! [`disjoint_paths`] computes it. In every supported topology the switch a packet reaches
//! after two hops (the one above the ToR) identifies the path's class: copies whose second
//! switches differ share no switch-to-switch link, and copies whose second switches are
//! equal share the ToR uplink. A simulated probe therefore reports that switch, as a
//! TTL-limited probe would.

use crate::engine::Time;
use crate::metrics::Counters;
use crate::network::{FiveTuple, NodeKind, Topology};
use crate::units::Rate;
use crate::units::PS_PER_SEC;
use std::collections::{HashMap, HashSet};

/// First source port HCA tries for a (source, destination) pair; later ports follow in order.
pub const HCA_FIRST_PORT: u16 = 32768;

/// Size of a probe packet on the wire (IP + TCP headers, no payload, Ethernet framing).
pub const PROBE_BYTES: u64 = 64;

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
