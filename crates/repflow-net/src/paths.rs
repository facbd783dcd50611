//! Sans-IO part of SmartRep's hash-collision avoidance (HCA): a cache of probed paths per
//! (destination, source port) and the choice of source ports whose paths differ pairwise.
//!
//! The driver (the `probe` module and the client) asks [`PortSelector::next_probe`]
//! which source port to probe next, runs the probe, and feeds the answer back with
//! [`PortSelector::record`]; [`PortSelector::select`] then picks ports for a flow's copies.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;

pub use crate::pathsig::{provably_different, Hop, PathSig, ProbeOutcome};

fn silent_hops(sig: &PathSig) -> usize {
    sig.iter().filter(|h| **h == Hop::Silent).count()
}

/// Why a flow's ports were not chosen by path.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fallback {
    /// Probes to this destination got no answer: plain RepFlow ports were used.
    NoProbeAnswers,
    /// Fewer distinct paths than copies were found within the probe budget.
    FewerPaths {
        /// Distinct paths known.
        found: usize,
    },
    /// Every probed port of some path was busy; the kernel picked the port.
    PortsBusy,
}

/// The ports chosen for a flow's copies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Source ports on pairwise different paths (one per copy).
    Ports(Vec<u16>),
    /// Use the RepFlow strategy (destination port + i) instead, for this reason.
    Fallback(Fallback),
}

#[derive(Debug, Default)]
struct DstState {
    /// Probed source port → outcome.
    probed: BTreeMap<u16, ProbeOutcome>,
    /// Signature → ports that got it, in probe order. Signatures with silent hops are kept
    /// apart from complete ones: they are used only where provably different from the rest.
    by_path: BTreeMap<PathSig, Vec<u16>>,
    next_port: u16,
    no_answers: u32,
}

/// A destination's signature groups, complete signatures first.
struct Groups<'a>(Vec<(&'a PathSig, &'a Vec<u16>)>);

impl Groups<'_> {
    /// Size of the greedy set of pairwise provably different signatures.
    fn count_distinct(&self) -> usize {
        let mut chosen: Vec<&PathSig> = Vec::new();
        for (sig, _) in &self.0 {
            if chosen.iter().all(|c| provably_different(c, sig)) {
                chosen.push(sig);
            }
        }
        chosen.len()
    }
}

impl DstState {
    fn groups_in_order(&self) -> Groups<'_> {
        let mut g: Vec<_> = self.by_path.iter().collect();
        // stable: within a silence count, signature order (the map's)
        g.sort_by_key(|(sig, _)| silent_hops(sig));
        Groups(g)
    }
}

/// Path cache and HCA port choice for every destination.
#[derive(Debug)]
pub struct PortSelector {
    first_port: u16,
    last_port: u16,
    /// After this many probes with no answer (and none with one), a destination is treated
    /// as unprobeable.
    pub give_up_after: u32,
    /// At most this many ports are probed per destination.
    pub max_probes: usize,
    /// Offset into the port range of the first port probed per destination (0: the range's
    /// first port). Clients that may run side by side on one host (two sidecars) start at
    /// random offsets, so that their probed ports, and the connections bound to them, rarely
    /// meet.
    pub start: u16,
    dsts: HashMap<SocketAddr, DstState>,
}

impl PortSelector {
    /// Candidate source ports are `first_port..=last_port`.
    pub fn new(first_port: u16, last_port: u16) -> Self {
        PortSelector {
            first_port,
            last_port: last_port.max(first_port),
            give_up_after: 3,
            max_probes: 64,
            start: 0,
            dsts: HashMap::new(),
        }
    }

    /// Known paths to `dst` that are pairwise provably different (see
    /// [`provably_different`]; a greedy choice, complete signatures first).
    pub fn distinct_paths(&self, dst: SocketAddr) -> usize {
        self.dsts
            .get(&dst)
            .map_or(0, |d| d.groups_in_order().count_distinct())
    }

    /// Whether probing `dst` was given up (no answers).
    pub fn unprobeable(&self, dst: SocketAddr) -> bool {
        self.dsts
            .get(&dst)
            .is_some_and(|d| d.by_path.is_empty() && d.no_answers >= self.give_up_after)
    }

    /// The next source port worth probing to find `want` distinct paths to `dst`, or `None`
    /// when enough are known or the budget is spent.
    pub fn next_probe(&mut self, dst: SocketAddr, want: usize) -> Option<u16> {
        let (first, last, max_probes) = (self.first_port, self.last_port, self.max_probes);
        let give_up = self.give_up_after;
        let d = self.dsts.entry(dst).or_default();
        if d.groups_in_order().count_distinct() >= want
            || d.probed.len() >= max_probes
            || (d.by_path.is_empty() && d.no_answers >= give_up)
        {
            return None;
        }
        let span = usize::from(last - first) + 1;
        if d.next_port < first || d.next_port > last {
            d.next_port = first + (usize::from(self.start) % span) as u16;
        }
        for _ in 0..span {
            let p = d.next_port;
            d.next_port = if p >= last { first } else { p + 1 };
            if !d.probed.contains_key(&p) {
                return Some(p);
            }
        }
        None
    }

    /// Records the outcome of probing `src_port` towards `dst` (the cache entry).
    pub fn record(&mut self, dst: SocketAddr, src_port: u16, outcome: ProbeOutcome) {
        let d = self.dsts.entry(dst).or_default();
        match &outcome {
            ProbeOutcome::Path(sig) => d.by_path.entry(sig.clone()).or_default().push(src_port),
            ProbeOutcome::NoAnswer => d.no_answers += 1,
        }
        d.probed.insert(src_port, outcome);
    }

    /// Every port probed towards `dst` with its outcome, in port order (the order
    /// [`PortSelector::next_probe`] hands them out, from the first port of the range).
    pub fn probed(&self, dst: SocketAddr) -> Vec<(u16, ProbeOutcome)> {
        self.dsts.get(&dst).map_or_else(Vec::new, |d| {
            d.probed.iter().map(|(p, o)| (*p, o.clone())).collect()
        })
    }

    /// The cached outcome for `(dst, src_port)`.
    pub fn cached(&self, dst: SocketAddr, src_port: u16) -> Option<&ProbeOutcome> {
        self.dsts.get(&dst).and_then(|d| d.probed.get(&src_port))
    }

    /// Chooses source ports for `copies` copies to `dst` on pairwise different paths,
    /// avoiding ports in `busy`. With fewer known paths than copies, returns as many ports as
    /// there are paths when at least two are known (the caller sends fewer copies), else a
    /// fallback.
    pub fn select(&self, dst: SocketAddr, copies: usize, busy: &HashSet<u16>) -> Selection {
        let Some(d) = self.dsts.get(&dst) else {
            return Selection::Fallback(Fallback::NoProbeAnswers);
        };
        if d.by_path.is_empty() {
            return Selection::Fallback(Fallback::NoProbeAnswers);
        }
        let mut ports = Vec::new();
        let mut chosen: Vec<&PathSig> = Vec::new();
        let mut busy_path = false;
        for (sig, candidates) in d.groups_in_order().0 {
            if ports.len() == copies {
                break;
            }
            if chosen.iter().any(|c| !provably_different(c, sig)) {
                continue;
            }
            match candidates.iter().find(|p| !busy.contains(p)) {
                Some(&p) => {
                    ports.push(p);
                    chosen.push(sig);
                }
                None => busy_path = true,
            }
        }
        if ports.len() < copies && busy_path {
            return Selection::Fallback(Fallback::PortsBusy);
        }
        if ports.len() < copies && ports.len() < 2 && copies > 1 {
            return Selection::Fallback(Fallback::FewerPaths { found: ports.len() });
        }
        Selection::Ports(ports)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    fn r(last: u8) -> ProbeOutcome {
        ProbeOutcome::Path(vec![Hop::Router(IpAddr::from([10, 0, 0, last]))])
    }

    #[test]
    fn hca_picks_pairwise_different_paths() {
        let dst: SocketAddr = "10.1.0.2:5000".parse().unwrap();
        let mut s = PortSelector::new(20000, 20010);
        // Paths by port: 20000→a, 20001→a, 20002→b, 20003→c.
        let answers = [r(1), r(1), r(2), r(3)];
        let mut i = 0;
        while let Some(p) = s.next_probe(dst, 3) {
            s.record(dst, p, answers[i].clone());
            i += 1;
        }
        assert_eq!(i, 4, "probing stops once 3 distinct paths are known");
        assert_eq!(s.distinct_paths(dst), 3);
        assert_eq!(s.cached(dst, 20001), Some(&r(1)));
        match s.select(dst, 3, &HashSet::new()) {
            Selection::Ports(p) => assert_eq!(p, vec![20000, 20002, 20003]),
            other => panic!("{other:?}"),
        }
        // A busy port is replaced by another on the same path.
        let busy: HashSet<u16> = [20000].into();
        assert_eq!(
            s.select(dst, 2, &busy),
            Selection::Ports(vec![20001, 20002])
        );
        let busy: HashSet<u16> = [20002].into();
        assert_eq!(
            s.select(dst, 3, &busy),
            Selection::Fallback(Fallback::PortsBusy)
        );
    }

    fn sig(hops: &[Option<u8>]) -> ProbeOutcome {
        ProbeOutcome::Path(
            hops.iter()
                .map(|h| match h {
                    Some(x) => Hop::Router(IpAddr::from([10, 0, 0, *x])),
                    None => Hop::Silent,
                })
                .collect(),
        )
    }

    #[test]
    fn a_silent_hop_does_not_make_a_new_path() {
        // Toy topology: TTL 2 meets middle switch 3 or 4, TTL 3 the far edge switch 2. A probe
        // whose TTL-3 SYN died in a full queue reads [3, silent]: it may be the same path as
        // [3, 2], so it must not be picked beside it.
        let dst: SocketAddr = "10.1.0.2:5000".parse().unwrap();
        let mut s = PortSelector::new(20000, 20010);
        let answers = [
            sig(&[Some(3), Some(2)]),
            sig(&[Some(3), None]),
            sig(&[None, Some(2)]),
            sig(&[Some(4), None]),
        ];
        let mut i = 0;
        while let Some(p) = s.next_probe(dst, 2) {
            s.record(dst, p, answers[i].clone());
            i += 1;
        }
        assert_eq!(i, 4, "only [4, silent] proves a second path");
        assert_eq!(s.distinct_paths(dst), 2);
        assert_eq!(
            s.select(dst, 2, &HashSet::new()),
            Selection::Ports(vec![20000, 20003])
        );
        // Same path, one hop silent: not a pair.
        assert!(!provably_different(
            &vec![Hop::Router(IpAddr::from([10, 0, 0, 3])), Hop::Silent],
            &vec![
                Hop::Router(IpAddr::from([10, 0, 0, 3])),
                Hop::Router(IpAddr::from([10, 0, 0, 2]))
            ]
        ));
    }

    #[test]
    fn no_answers_fall_back() {
        let dst: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let mut s = PortSelector::new(20000, 20100);
        let mut probes = 0;
        while let Some(p) = s.next_probe(dst, 2) {
            s.record(dst, p, ProbeOutcome::NoAnswer);
            probes += 1;
        }
        assert_eq!(probes, 3);
        assert!(s.unprobeable(dst));
        assert_eq!(
            s.select(dst, 2, &HashSet::new()),
            Selection::Fallback(Fallback::NoProbeAnswers)
        );
    }

    #[test]
    fn single_path_gives_fallback_and_budget_is_bounded() {
        let dst: SocketAddr = "10.1.0.2:5000".parse().unwrap();
        let mut s = PortSelector::new(20000, 20003);
        s.max_probes = 10;
        let mut n = 0;
        while let Some(p) = s.next_probe(dst, 2) {
            s.record(dst, p, r(9));
            n += 1;
        }
        assert_eq!(n, 4, "port range exhausted");
        assert_eq!(
            s.select(dst, 2, &HashSet::new()),
            Selection::Fallback(Fallback::FewerPaths { found: 1 })
        );
    }
}
