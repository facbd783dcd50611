//! Sans-IO bookkeeping of a pooled client's per-path connections: per destination, a set of
//! slots (a source port each, so a five-tuple each, so an ECMP path each), what probes learnt
//! about each slot's path, and each slot's recent response time; per request, which slots
//! carry its copies.
//!
//! A pooled connection keeps its five-tuple, so ECMP hashes it once: with one connection per
//! copy every request of that copy takes the same path, and if that path is behind a large
//! flow, so is every request. RepFlow's gain comes from a fresh path draw per short flow. The
//! pool recreates it without a handshake per request: it keeps several connections per
//! destination on paths known (from hop-limited probes) to differ, and sends each request's
//! copies on slots of *different* paths:
//!
//! - the first copy goes to the slot with the lowest recent response time (an exponentially
//!   weighted mean of every reply's time on that slot, losers' replies included; a slot never
//!   measured counts as fastest, so each is tried early); for an exploration share
//!   `explore` of requests with a single copy, a second copy goes to a random other slot, so
//!   that a slow slot that got fast again is noticed without betting the request on it
//!   (with more copies, the further copies keep the slots measured);
//! - every further copy goes to a slot whose path is provably different from those already
//!   chosen and **diverges from them at the earliest hop** (in a fat tree: another uplink of
//!   the host's edge switch before another core), at random among the slots that tie: a
//!   large flow that fills one uplink then delays at most one of the copies;
//! - when probes get no answer (no ICMP on the way), paths are unknown: copies go to distinct
//!   slots, first by response time, the rest at random — with `size` connections their hashes
//!   spread over the paths, and response times steer the first copy away from a slow one.
//!
//! A slot whose connection failed is replaced by a new source port, preferably one already
//! probed onto the same path; a slot re-probed onto another path takes the new signature.
//!
//! The I/O side (the client) probes with [`crate::probe`] and opens the connections; this
//! module only decides, so its tests use fake probes and fake response times.

use crate::pathsig::{provably_different, Hop, PathSig, ProbeOutcome};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

/// Settings of a [`PathPool`].
#[derive(Clone, Debug, PartialEq)]
pub struct PathPoolConfig {
    /// Connections (slots) kept per destination.
    pub size: usize,
    /// Source ports probed at most per destination while filling the pool.
    pub probe_budget: usize,
    /// Share of single-copy requests sent to a random slot instead of the fastest (requests
    /// with more copies never explore: their further copies keep the other paths measured).
    pub explore: f64,
    /// Weight of the newest response time in a slot's moving mean.
    pub alpha: f64,
}

impl Default for PathPoolConfig {
    /// 8 slots, 32 probed ports, 1 % exploration, weight 0.2: a k = 4 fat tree has 4 paths
    /// between pods (2 per edge uplink), so 8 slots hold two connections on each; 32 probes
    /// find all 4 with probability > 0.999 when the hash spreads evenly.
    fn default() -> Self {
        PathPoolConfig {
            size: 8,
            probe_budget: 32,
            explore: 0.01,
            alpha: 0.2,
        }
    }
}

/// One connection's place in the pool.
#[derive(Clone, Debug, PartialEq)]
pub struct Slot {
    /// Source port of its five-tuple.
    pub port: u16,
    /// The path probes found for that port (`None`: probes got no answer).
    pub path: Option<PathSig>,
    /// Moving mean of its replies' response times, µs (`None`: none seen yet).
    pub mean_us: Option<f64>,
    /// Replies seen.
    pub replies: u64,
}

#[derive(Debug, Default)]
struct DstPool {
    slots: Vec<Slot>,
    /// Probed ports not in a slot, with their outcome: replacements for failed slots.
    spare: Vec<(u16, ProbeOutcome)>,
    /// The next never-probed port to hand out when no probed one is left.
    next_fresh: u16,
}

/// Counters of a [`PathPool`].
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PathPoolCounters {
    /// Requests whose copies the pool placed.
    pub picks: u64,
    /// Of those, requests with at least two copies on provably different paths.
    pub picks_distinct: u64,
    /// Of those, one-copy requests that explored: a second copy on a random other slot.
    pub explored: u64,
    /// Slots replaced after their connection failed.
    pub replaced: u64,
    /// Slots whose path changed on a later probe.
    pub path_changes: u64,
    /// One-copy requests that found no slot ready and went out as two copies on different
    /// paths, racing two handshakes (see [`PathPool::pick_ready`]).
    pub cold_races: u64,
}

/// Per-destination path pools (see the module documentation).
#[derive(Debug)]
pub struct PathPool {
    cfg: PathPoolConfig,
    /// Ports handed out when no probed one is left: `fresh.0..=fresh.1`.
    fresh: (u16, u16),
    dsts: HashMap<SocketAddr, DstPool>,
    rng: u64,
    counters: PathPoolCounters,
}

/// Index of the first probed hop at which two paths provably differ (`usize::MAX`: they never
/// do — same path, or not comparable).
fn divergence(x: &PathSig, y: &PathSig) -> usize {
    x.iter()
        .zip(y)
        .position(|(a, b)| *a != Hop::Silent && *b != Hop::Silent && a != b)
        .unwrap_or(usize::MAX)
}

impl PathPool {
    /// An empty pool; `fresh` is the inclusive range of source ports handed out when no probed
    /// port is left (keep it outside the kernel's ephemeral range), `seed` seeds the random
    /// choices.
    pub fn new(cfg: PathPoolConfig, fresh: (u16, u16), seed: u64) -> Self {
        PathPool {
            cfg,
            fresh: (fresh.0, fresh.1.max(fresh.0)),
            dsts: HashMap::new(),
            rng: seed | 1,
            counters: PathPoolCounters::default(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &PathPoolConfig {
        &self.cfg
    }

    /// The counters.
    pub fn counters(&self) -> PathPoolCounters {
        self.counters.clone()
    }

    /// The slots of `dst` (empty until [`PathPool::fill`]).
    pub fn slots(&self, dst: SocketAddr) -> &[Slot] {
        self.dsts.get(&dst).map_or(&[], |d| d.slots.as_slice())
    }

    /// Whether `dst` has slots.
    pub fn is_filled(&self, dst: SocketAddr) -> bool {
        !self.slots(dst).is_empty()
    }

    fn next_u64(&mut self) -> u64 {
        // xorshift64*: the choices need spread, not secrecy.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    fn fresh_port(&mut self, dst: SocketAddr, taken: &[u16]) -> u16 {
        let (lo, hi) = self.fresh;
        let d = self.dsts.entry(dst).or_default();
        if d.next_fresh < lo || d.next_fresh > hi {
            d.next_fresh = lo;
        }
        let span = usize::from(hi - lo) + 1;
        for _ in 0..span {
            let p = d.next_fresh;
            d.next_fresh = if p >= hi { lo } else { p + 1 };
            if !taken.contains(&p) && !d.slots.iter().any(|s| s.port == p) {
                return p;
            }
        }
        lo
    }

    /// Fills `dst`'s slots from the probes made to it (`probed`: source port and outcome, in
    /// probe order): one slot per path first, taking paths that are pairwise provably
    /// different (complete signatures first), then a second port of each path, and so on, up
    /// to `size`; ports whose probes got no answer fill what is left, then fresh ports. The
    /// probed ports not used are kept as replacements. Replaces any earlier slots of `dst`.
    pub fn fill(&mut self, dst: SocketAddr, probed: &[(u16, ProbeOutcome)]) {
        let size = self.cfg.size.max(1);
        // Paths in probe order, each with its ports.
        let mut paths: Vec<(PathSig, Vec<u16>)> = Vec::new();
        let mut silent: Vec<u16> = Vec::new();
        for (port, o) in probed {
            match o {
                ProbeOutcome::Path(sig) => match paths.iter_mut().find(|(s, _)| s == sig) {
                    Some((_, ports)) => ports.push(*port),
                    None => paths.push((sig.clone(), vec![*port])),
                },
                ProbeOutcome::NoAnswer => silent.push(*port),
            }
        }
        // Complete signatures first (stable), then keep a greedy pairwise-different set in
        // front: those are the paths the copies are spread over.
        paths.sort_by_key(|(s, _)| s.iter().filter(|h| **h == Hop::Silent).count());
        let mut order: Vec<usize> = Vec::new();
        for i in 0..paths.len() {
            if order
                .iter()
                .all(|&j| provably_different(&paths[j].0, &paths[i].0))
            {
                order.push(i);
            }
        }
        let rest: Vec<usize> = (0..paths.len()).filter(|i| !order.contains(i)).collect();
        order.extend(rest);
        let mut slots: Vec<Slot> = Vec::new();
        let mut round = 0;
        while slots.len() < size {
            let mut added = false;
            for &i in &order {
                if slots.len() == size {
                    break;
                }
                if let Some(&p) = paths[i].1.get(round) {
                    slots.push(Slot {
                        port: p,
                        path: Some(paths[i].0.clone()),
                        mean_us: None,
                        replies: 0,
                    });
                    added = true;
                }
            }
            if !added {
                break;
            }
            round += 1;
        }
        for &p in &silent {
            if slots.len() == size {
                break;
            }
            slots.push(Slot {
                port: p,
                path: None,
                mean_us: None,
                replies: 0,
            });
        }
        let spare: Vec<(u16, ProbeOutcome)> = probed
            .iter()
            .filter(|(p, _)| !slots.iter().any(|s| s.port == *p))
            .cloned()
            .collect();
        let d = self.dsts.entry(dst).or_default();
        d.slots = slots;
        d.spare = spare;
        while self.slots(dst).len() < size {
            let taken: Vec<u16> = probed.iter().map(|(p, _)| *p).collect();
            let p = self.fresh_port(dst, &taken);
            let d = self.dsts.get_mut(&dst).expect("just inserted");
            if d.slots.iter().any(|s| s.port == p) {
                break; // the fresh range is exhausted
            }
            d.slots.push(Slot {
                port: p,
                path: None,
                mean_us: None,
                replies: 0,
            });
        }
    }

    /// Number of pairwise provably different paths among `dst`'s slots (greedy).
    pub fn distinct_paths(&self, dst: SocketAddr) -> usize {
        let mut chosen: Vec<&PathSig> = Vec::new();
        for s in self.slots(dst) {
            if let Some(p) = &s.path {
                if chosen.iter().all(|c| provably_different(c, p)) {
                    chosen.push(p);
                }
            }
        }
        chosen.len()
    }

    /// Source ports for the `copies` copies of one request to `dst`, at most one per slot
    /// (fewer when the pool has fewer slots; one more for a one-copy request that explores:
    /// a random other slot). The first is the fastest slot; each next one a slot on a path that
    /// diverges earliest from those chosen, at random among ties (see the module
    /// documentation). Empty when `dst` has no slots.
    pub fn pick(&mut self, dst: SocketAddr, copies: usize) -> Vec<u16> {
        self.pick_ready(dst, copies, |_| true)
    }

    /// [`PathPool::pick`], preferring slots whose connection is `ready` (open and fresh): a
    /// copy put on a slot that must connect first waits for a handshake, and a handshake
    /// whose SYN is dropped in a full queue waits a second — so the first copy goes to the
    /// fastest ready slot (any slot if none is ready), and each further copy to a ready slot
    /// among those whose path diverges earliest (any of them if none is ready). The caller
    /// opens the slots that are not ready in the background.
    ///
    /// When no slot is ready (every connection idle past `pool_idle`, or none opened yet), a
    /// one-copy request gets a second copy on a slot of another path: both copies open their
    /// connections, and a handshake that loses its SYN in a full queue (a second's wait) is
    /// raced by the other path's. The receiver runs a request once whichever copy arrives,
    /// so the extra copy costs bytes, not semantics; it is counted (`cold_races`).
    pub fn pick_ready(
        &mut self,
        dst: SocketAddr,
        copies: usize,
        ready: impl Fn(u16) -> bool,
    ) -> Vec<u16> {
        let n = self.slots(dst).len();
        if n == 0 || copies == 0 {
            return Vec::new();
        }
        let is_ready: Vec<bool> = self.slots(dst).iter().map(|s| ready(s.port)).collect();
        let any_ready = is_ready.iter().any(|&r| r);
        let copies = if !any_ready && copies == 1 && n >= 2 {
            self.counters.cold_races += 1;
            2
        } else {
            copies
        };
        let eligible = |i: usize| !any_ready || is_ready[i];
        // Only a single copy explores: with two or more, the further copies keep every
        // slot of the other paths measured. A one-copy request that explores keeps its first
        // copy on the fastest slot and sends a second one to a random other slot, whose reply
        // (the loser's too) measures it: a slow slot that got fast again is noticed, paid
        // by `explore` of the requests in bytes, never in latency. (Until 2026-11-29 the
        // only copy went to the random slot: behind a full queue a dropped one-packet
        // request waits for a retransmission timeout, ~0.2 s, and with 1 % exploration half
        // the testbed's trials had a one-copy HTTP p99 near 0.1 s.)
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let explore = copies == 1 && n >= 2 && u < self.cfg.explore;
        // Fastest; a never-measured slot counts as 0 µs (tried early); ties at random.
        let first = {
            let slots = self.slots(dst);
            let best = (0..n)
                .filter(|&i| eligible(i))
                .map(|i| slots[i].mean_us.unwrap_or(0.0))
                .fold(f64::INFINITY, f64::min);
            let ties: Vec<usize> = (0..n)
                .filter(|&i| eligible(i) && slots[i].mean_us.unwrap_or(0.0) <= best)
                .collect();
            let k = self.below(ties.len());
            ties[k]
        };
        let mut chosen = vec![first];
        if explore {
            let mut others: Vec<usize> = (0..n).filter(|&i| i != first && eligible(i)).collect();
            if others.is_empty() {
                others = (0..n).filter(|&i| i != first).collect();
            }
            let k = self.below(others.len());
            chosen.push(others[k]);
        }
        while chosen.len() < copies.min(n) {
            let slots = self.slots(dst);
            // Each candidate's earliest divergence from every chosen slot (the minimum over
            // them: the hop where it first could share a queue with one of them); a slot
            // with an unknown path, or not provably different from a chosen one, ranks last.
            let rank = |i: usize| -> usize {
                let Some(p) = &slots[i].path else {
                    return usize::MAX - 1;
                };
                chosen
                    .iter()
                    .map(|&c| match &slots[c].path {
                        Some(q) if provably_different(p, q) => divergence(p, q),
                        Some(_) => usize::MAX,
                        None => usize::MAX - 1,
                    })
                    .max()
                    .unwrap_or(0)
            };
            let free: Vec<usize> = (0..n).filter(|i| !chosen.contains(i)).collect();
            let best = free.iter().map(|&i| rank(i)).min().expect("a free slot");
            let mut ties: Vec<usize> = free.into_iter().filter(|&i| rank(i) == best).collect();
            if ties.iter().any(|&i| is_ready[i]) {
                ties.retain(|&i| is_ready[i]);
            }
            let k = self.below(ties.len());
            chosen.push(ties[k]);
        }
        let slots = self.slots(dst);
        let distinct = chosen.len() >= 2
            && chosen.iter().enumerate().all(|(a, &i)| {
                chosen[a + 1..]
                    .iter()
                    .all(|&j| match (&slots[i].path, &slots[j].path) {
                        (Some(p), Some(q)) => provably_different(p, q),
                        _ => false,
                    })
            });
        let ports = chosen.iter().map(|&i| slots[i].port).collect();
        self.counters.picks += 1;
        self.counters.picks_distinct += u64::from(distinct);
        self.counters.explored += u64::from(explore);
        ports
    }

    /// A reply came back on `dst`'s slot with source port `port` after `elapsed` (from the
    /// request's queueing to its reply): the slot's moving mean takes it.
    pub fn observe(&mut self, dst: SocketAddr, port: u16, elapsed: Duration) {
        let alpha = self.cfg.alpha;
        if let Some(s) = self
            .dsts
            .get_mut(&dst)
            .and_then(|d| d.slots.iter_mut().find(|s| s.port == port))
        {
            let x = elapsed.as_secs_f64() * 1e6;
            s.mean_us = Some(match s.mean_us {
                Some(m) => m + alpha * (x - m),
                None => x,
            });
            s.replies += 1;
        }
    }

    /// The connection of `dst`'s slot with source port `port` failed: the slot gets another
    /// port — a spare probed onto the same path if there is one, else a spare on a path no
    /// other slot has, else any spare, else a fresh (unprobed) port. Returns the new port, or
    /// `None` if `port` is not a slot of `dst`.
    pub fn replace(&mut self, dst: SocketAddr, port: u16) -> Option<u16> {
        let d = self.dsts.get_mut(&dst)?;
        let i = d.slots.iter().position(|s| s.port == port)?;
        let path = d.slots[i].path.clone();
        let others: Vec<Option<PathSig>> = d
            .slots
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, s)| s.path.clone())
            .collect();
        let same = d.spare.iter().position(|(_, o)| match (o, &path) {
            (ProbeOutcome::Path(s), Some(p)) => s == p,
            (ProbeOutcome::NoAnswer, None) => true,
            _ => false,
        });
        let new_path = d.spare.iter().position(|(_, o)| match o {
            ProbeOutcome::Path(s) => others.iter().all(|x| x.as_ref() != Some(s)),
            ProbeOutcome::NoAnswer => false,
        });
        let pick = same.or(new_path).or((!d.spare.is_empty()).then_some(0));
        let (new_port, new_sig) = match pick {
            Some(k) => {
                let (p, o) = d.spare.remove(k);
                (
                    p,
                    match o {
                        ProbeOutcome::Path(s) => Some(s),
                        ProbeOutcome::NoAnswer => None,
                    },
                )
            }
            None => {
                let p = self.fresh_port(dst, &[port]);
                (p, None)
            }
        };
        let d = self.dsts.get_mut(&dst).expect("checked above");
        d.slots[i] = Slot {
            port: new_port,
            path: new_sig,
            mean_us: None,
            replies: 0,
        };
        self.counters.replaced += 1;
        Some(new_port)
    }

    /// A later probe of `dst`'s slot `port` found `outcome`: if it is a path other than the
    /// recorded one, the slot takes it (its response times restart). Returns whether the
    /// path changed.
    pub fn reprobed(&mut self, dst: SocketAddr, port: u16, outcome: &ProbeOutcome) -> bool {
        let ProbeOutcome::Path(sig) = outcome else {
            return false; // silence proves nothing
        };
        let Some(s) = self
            .dsts
            .get_mut(&dst)
            .and_then(|d| d.slots.iter_mut().find(|s| s.port == port))
        else {
            return false;
        };
        let changed = match &s.path {
            Some(p) => provably_different(p, sig),
            None => true,
        };
        if changed {
            s.path = Some(sig.clone());
            s.mean_us = None;
            s.replies = 0;
            self.counters.path_changes += 1;
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    const DST: &str = "10.3.0.2:7000";

    fn dst() -> SocketAddr {
        DST.parse().unwrap()
    }

    fn path(agg: u8, core: u8) -> ProbeOutcome {
        ProbeOutcome::Path(vec![
            Hop::Router(IpAddr::from([10, 0, 1, agg])),
            Hop::Router(IpAddr::from([10, 0, 2, core])),
        ])
    }

    /// A fake fat-tree hash: port → (agg, core) of a k = 4 pod (2 × 2 paths).
    fn fake_probe(port: u16) -> ProbeOutcome {
        let h = (u32::from(port)).wrapping_mul(2_654_435_761) >> 16;
        path((h & 1) as u8, ((h >> 1) & 1) as u8)
    }

    fn probe_all(ports: std::ops::Range<u16>) -> Vec<(u16, ProbeOutcome)> {
        ports.map(|p| (p, fake_probe(p))).collect()
    }

    fn agg(s: &Slot) -> IpAddr {
        match &s.path.as_ref().unwrap()[0] {
            Hop::Router(a) => *a,
            h => panic!("{h:?}"),
        }
    }

    #[test]
    fn fill_spreads_slots_over_distinct_paths() {
        let mut pool = PathPool::new(PathPoolConfig::default(), (30000, 30999), 7);
        pool.fill(dst(), &probe_all(21000..21032));
        let slots = pool.slots(dst());
        assert_eq!(slots.len(), 8);
        assert_eq!(pool.distinct_paths(dst()), 4);
        // Two slots on each of the four paths.
        let mut per: HashMap<PathSig, usize> = HashMap::new();
        for s in slots {
            *per.entry(s.path.clone().unwrap()).or_default() += 1;
        }
        assert!(per.values().all(|&n| n == 2), "{per:?}");
    }

    #[test]
    fn two_copies_always_leave_on_different_uplinks() {
        let mut pool = PathPool::new(PathPoolConfig::default(), (30000, 30999), 1);
        pool.fill(dst(), &probe_all(21000..21032));
        for _ in 0..1000 {
            let ports = pool.pick(dst(), 2);
            assert_eq!(ports.len(), 2);
            let s: Vec<&Slot> = ports
                .iter()
                .map(|p| pool.slots(dst()).iter().find(|s| s.port == *p).unwrap())
                .collect();
            assert_ne!(agg(s[0]), agg(s[1]), "copies share the first uplink");
        }
        let c = pool.counters();
        assert_eq!((c.picks, c.picks_distinct), (1000, 1000));
        assert_eq!(c.explored, 0, "a request with two copies never explores");
    }

    #[test]
    fn first_copy_follows_the_fastest_slot_and_moves_when_it_slows() {
        let cfg = PathPoolConfig {
            explore: 0.0,
            ..PathPoolConfig::default()
        };
        let mut pool = PathPool::new(cfg, (30000, 30999), 3);
        pool.fill(dst(), &probe_all(21000..21032));
        let ports: Vec<u16> = pool.slots(dst()).iter().map(|s| s.port).collect();
        // Every slot measured: slot 5 fastest.
        for (i, &p) in ports.iter().enumerate() {
            let us = if i == 5 { 200 } else { 1000 + 100 * i as u64 };
            pool.observe(dst(), p, Duration::from_micros(us));
        }
        for _ in 0..50 {
            assert_eq!(pool.pick(dst(), 2)[0], ports[5]);
        }
        // Slot 5 falls behind a large flow: its mean rises past the others' within a few
        // replies, and the first copy moves to the next fastest (slot 0).
        for _ in 0..20 {
            pool.observe(dst(), ports[5], Duration::from_millis(12));
        }
        assert_eq!(pool.pick(dst(), 2)[0], ports[0]);
    }

    #[test]
    fn ready_slots_are_preferred_without_giving_up_a_different_uplink() {
        let cfg = PathPoolConfig {
            explore: 0.0,
            ..PathPoolConfig::default()
        };
        let mut pool = PathPool::new(cfg, (30000, 30999), 13);
        pool.fill(dst(), &probe_all(21000..21032));
        let slots = pool.slots(dst()).to_vec();
        // Only two slots are ready, both on the first slot's uplink.
        let up = agg(&slots[0]);
        let ready: Vec<u16> = slots
            .iter()
            .filter(|s| agg(s) == up)
            .take(2)
            .map(|s| s.port)
            .collect();
        for _ in 0..200 {
            let p = pool.pick_ready(dst(), 2, |port| ready.contains(&port));
            assert!(ready.contains(&p[0]), "the first copy on a ready slot");
            let second = slots.iter().find(|s| s.port == p[1]).unwrap();
            assert_ne!(agg(second), up, "the second copy keeps to the other uplink");
        }
        // None ready: any slot, as `pick`.
        assert_eq!(pool.pick_ready(dst(), 2, |_| false).len(), 2);
        assert_eq!(pool.counters().cold_races, 0);
    }

    #[test]
    fn a_single_copy_with_no_slot_ready_races_two_paths() {
        let mut pool = PathPool::new(PathPoolConfig::default(), (30000, 30999), 5);
        pool.fill(dst(), &probe_all(21000..21032));
        let slots = pool.slots(dst()).to_vec();
        for _ in 0..50 {
            let p = pool.pick_ready(dst(), 1, |_| false);
            assert_eq!(p.len(), 2, "a second copy races the first's handshake");
            let path = |port: u16| {
                let s = slots.iter().find(|s| s.port == port).unwrap();
                s.path.clone().unwrap()
            };
            assert!(
                provably_different(&path(p[0]), &path(p[1])),
                "on another path"
            );
        }
        assert_eq!(pool.counters().cold_races, 50);
        // One ready slot is enough: one copy, on it.
        let one = slots[3].port;
        assert_eq!(pool.pick_ready(dst(), 1, |port| port == one), vec![one]);
        assert_eq!(pool.counters().cold_races, 50);
    }

    #[test]
    fn exploration_reaches_every_slot() {
        let cfg = PathPoolConfig {
            explore: 0.2,
            ..PathPoolConfig::default()
        };
        let mut pool = PathPool::new(cfg, (30000, 30999), 11);
        pool.fill(dst(), &probe_all(21000..21032));
        let ports: Vec<u16> = pool.slots(dst()).iter().map(|s| s.port).collect();
        for (i, &p) in ports.iter().enumerate() {
            pool.observe(dst(), p, Duration::from_micros(100 + i as u64));
        }
        // The fastest slot (the first observed) carries every request's first copy; an
        // exploring request adds a second copy on another slot, and every slot gets some.
        let fastest = ports[0];
        let mut reached = std::collections::HashSet::new();
        let mut two = 0;
        for _ in 0..2000 {
            let p = pool.pick(dst(), 1);
            assert_eq!(p[0], fastest, "an exploring request keeps the fast chance");
            if p.len() == 2 {
                assert_ne!(p[1], fastest);
                two += 1;
            }
            reached.extend(p);
        }
        assert_eq!(reached.len(), ports.len());
        let c = pool.counters();
        assert_eq!(c.explored, two);
        assert!((300..500).contains(&two), "about 20 % explored: {two}");
    }

    #[test]
    fn silent_probes_fall_back_to_distinct_unprobed_slots() {
        let mut pool = PathPool::new(PathPoolConfig::default(), (30000, 30999), 5);
        let silent: Vec<(u16, ProbeOutcome)> = (21000..21003)
            .map(|p| (p, ProbeOutcome::NoAnswer))
            .collect();
        pool.fill(dst(), &silent);
        let slots = pool.slots(dst());
        assert_eq!(slots.len(), 8, "the pool is filled with fresh ports");
        assert!(slots.iter().all(|s| s.path.is_none()));
        let mut ports: Vec<u16> = slots.iter().map(|s| s.port).collect();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 8, "distinct five-tuples");
        assert_eq!(pool.distinct_paths(dst()), 0);
        let mut seconds = std::collections::HashSet::new();
        for _ in 0..500 {
            let p = pool.pick(dst(), 2);
            assert_ne!(p[0], p[1]);
            seconds.insert(p[1]);
        }
        // The second copy spreads over the other slots (random), not one fixed connection.
        assert!(seconds.len() >= 7, "{seconds:?}");
        assert_eq!(pool.counters().picks_distinct, 0);
    }

    #[test]
    fn a_failed_slot_is_replaced_on_the_same_path() {
        let mut pool = PathPool::new(PathPoolConfig::default(), (30000, 30999), 9);
        let probed = probe_all(21000..21032);
        pool.fill(dst(), &probed);
        let old = pool.slots(dst())[0].clone();
        pool.observe(dst(), old.port, Duration::from_micros(300));
        let new = pool.replace(dst(), old.port).expect("a slot");
        assert_ne!(new, old.port);
        let s = pool.slots(dst())[0].clone();
        assert_eq!((s.port, &s.path), (new, &old.path), "same path, new port");
        assert_eq!(s.mean_us, None, "the new connection starts unmeasured");
        assert_eq!(pool.distinct_paths(dst()), 4);
        assert_eq!(pool.replace(dst(), 1), None, "not a slot");
        // Spares run out: later replacements take fresh ports, path unknown.
        let mut port = new;
        for _ in 0..40 {
            port = pool.replace(dst(), port).unwrap();
        }
        let s = &pool.slots(dst())[0];
        assert!((30000..=30999).contains(&s.port) && s.path.is_none());
        assert_eq!(pool.counters().replaced, 41);
    }

    #[test]
    fn a_reprobed_slot_takes_its_new_path() {
        let mut pool = PathPool::new(PathPoolConfig::default(), (30000, 30999), 2);
        pool.fill(dst(), &probe_all(21000..21032));
        let s = pool.slots(dst())[0].clone();
        pool.observe(dst(), s.port, Duration::from_micros(300));
        assert!(!pool.reprobed(dst(), s.port, &ProbeOutcome::NoAnswer));
        assert!(!pool.reprobed(dst(), s.port, &ProbeOutcome::Path(s.path.clone().unwrap())));
        assert!(pool.reprobed(dst(), s.port, &path(9, 9)));
        let t = &pool.slots(dst())[0];
        assert_eq!(
            (t.path.clone(), t.mean_us),
            (
                Some(match path(9, 9) {
                    ProbeOutcome::Path(p) => p,
                    ProbeOutcome::NoAnswer => unreachable!(),
                }),
                None
            )
        );
        assert_eq!(pool.counters().path_changes, 1);
    }

    #[test]
    fn same_seed_same_choices() {
        let run = |seed| {
            let mut pool = PathPool::new(PathPoolConfig::default(), (30000, 30999), seed);
            pool.fill(dst(), &probe_all(21000..21032));
            (0..100).map(|_| pool.pick(dst(), 2)).collect::<Vec<_>>()
        };
        assert_eq!(run(4), run(4));
    }
}
