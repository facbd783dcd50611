//! How much a conservative parallel engine could gain on a run, measured on the sequential
//! one (cargo feature `parallelism-stats`; off by default, so the run loop pays nothing).
//!
//! A conservative engine cuts the network at links, lets each logical process (LP) run the
//! events of one window of simulated time (the lookahead: the smallest link delay) on its
//! own, and synchronizes the threads between windows. A window lasts as long as its busiest
//! thread, so the run's critical path is the sum over windows of the busiest thread's work.
//! Work is counted in packet arrivals (nearly all events; each is handled where the link
//! ends), for two partitions:
//!
//! - **by pod** (fat-trees): a pod's hosts, edge and aggregation switches form one LP, core
//!   switches are dealt round-robin to pods; threads take equal blocks of consecutive pods;
//! - **fine-grained** (any topology, as Unison does for ns-3): every node is an LP and each
//!   window's LPs are spread over the threads ideally, so the busiest thread has the larger
//!   of an equal share and the busiest single node.
//!
//! Both give upper bounds on speedup: they leave out synchronization (see the `sync_cost`
//! example), packets handed between threads, and how a smaller per-thread working set
//! changes the cost of a hop.

use crate::config::Config;
use crate::engine::Time;
#[cfg(feature = "tie-stats")]
use crate::engine::{Ancestry, ROOT};
use crate::network::Topology;

/// Thread counts the report covers.
pub const THREADS: [u32; 6] = [2, 4, 8, 16, 32, 64];

/// The measured bounds of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct ParallelismReport {
    /// The window: the smallest link delay, ps.
    pub lookahead_ps: Time,
    /// Windows from time 0 to the last arrival.
    pub windows: u64,
    /// Windows holding at least one arrival.
    pub busy_windows: u64,
    /// Packet arrivals counted.
    pub arrivals: u64,
    /// `(threads, speedup bound)` partitioned by pod (fat-trees; threads up to the pods).
    pub by_pod: Vec<(u32, f64)>,
    /// `(threads, speedup bound)` with a node per LP, ideally spread per window.
    pub fine_grained: Vec<(u32, f64)>,
    /// Events of one time at one node, and what ordering them as the sequential engine does
    /// takes (cargo feature `tie-stats`).
    #[cfg(feature = "tie-stats")]
    pub ties: TieReport,
}

/// Ties: pairs of events at one node and one time, popped one after the other there (a
/// node's events, by packet arrival at its links' ends, transmit completions of its ports,
/// and its connections' timers). An insertion counter orders them by the processing order
/// of the events that scheduled them, then by push; a partitioned engine has no global
/// counter, and can only compare who scheduled the two events — the same event (then the
/// push index decides: depth 1), events of different times (depth 2), or events of one
/// time, whose own creators are compared in turn (depth 3, …). The depth is how many
/// generations of ancestry an event's key must carry; the queue's key carries enough for
/// depth 3 ([`crate::engine::Anc`]), and the report says how many ties it served against
/// the counter's order.
#[cfg(feature = "tie-stats")]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TieReport {
    /// Events whose node is known.
    pub events: u64,
    /// Ties.
    pub ties: u64,
    /// `(depth, ties decided at that depth)`, depths 1–8; the last entry counts depth 9
    /// and more.
    pub depths: Vec<(u32, u64)>,
    /// Greatest depth seen.
    pub max_depth: u32,
    /// Ties of depth 1–3 that the queue served against the order an insertion counter
    /// gives: 0 unless its two-generation key (`engine::Anc`) is wrong, or one of its
    /// fields saturated (a push index past 15, a creator scheduled more than 268 µs
    /// before its own time).
    pub violations: u64,
    /// Deeper ties (depth 4 and more), which the key leaves to the events' rank, served
    /// against the insertion counter's order.
    pub deep_reordered: u64,
}

#[cfg(feature = "tie-stats")]
/// Depths [`TieReport::depths`] tells apart.
const DEPTHS: usize = 9;

/// Measures [`TieReport`] as a run goes.
#[cfg(feature = "tie-stats")]
pub(super) struct TieStats {
    /// Node → (time, record) of the last event there.
    last: Vec<(Time, u32)>,
    report: TieReport,
    hist: [u64; DEPTHS],
}

#[cfg(feature = "tie-stats")]
impl TieStats {
    fn new(nodes: usize) -> TieStats {
        TieStats {
            last: vec![(Time::MAX, 0); nodes],
            report: TieReport::default(),
            hist: [0; DEPTHS],
        }
    }

    /// The event just popped (the last of `anc`'s records) happened at `node`.
    fn on_event(&mut self, anc: &Ancestry, node: u32) {
        let b = (anc.recs.len() - 1) as u32;
        let t = anc.recs[b as usize].0;
        self.report.events += 1;
        let slot = &mut self.last[node as usize];
        let (lt, a) = std::mem::replace(slot, (t, b));
        if lt != t {
            return;
        }
        self.report.ties += 1;
        let (depth, before) = order(&anc.recs, a, b);
        self.hist[(depth as usize - 1).min(DEPTHS - 1)] += 1;
        self.report.max_depth = self.report.max_depth.max(depth);
        if depth <= 3 {
            self.report.violations += !before as u64;
        } else {
            self.report.deep_reordered += !before as u64;
        }
    }
}

/// How the ancestry orders records `a` and `b` (events of one time): the depth at which it
/// decides, and whether it puts `a` first.
#[cfg(feature = "tie-stats")]
fn order(recs: &[(Time, u32, u32)], mut a: u32, mut b: u32) -> (u32, bool) {
    let mut depth = 1;
    loop {
        let (_, ca, ia) = recs[a as usize];
        let (_, cb, ib) = recs[b as usize];
        if ca == cb {
            return (depth, ia < ib);
        }
        // Events scheduled before the first pop were pushed before all others.
        if ca == ROOT || cb == ROOT {
            return (depth, ca == ROOT);
        }
        let (ta, tb) = (recs[ca as usize].0, recs[cb as usize].0);
        if ta != tb {
            return (depth + 1, ta < tb);
        }
        (a, b) = (ca, cb);
        depth += 1;
    }
}

/// Counts arrivals per window, node and pod as a run goes.
pub(super) struct ParallelismStats {
    lookahead: Time,
    /// Link → the node where its arrivals are handled.
    link_to: Vec<u32>,
    /// Node → pod (fat-trees), else empty.
    pod: Vec<u32>,
    pods: usize,
    window: u64,
    busy_windows: u64,
    arrivals: u64,
    node_counts: Vec<u32>,
    pod_counts: Vec<u64>,
    touched: Vec<u32>,
    /// Critical path so far, per entry of [`THREADS`]: fine-grained, then by pod.
    fine: [u64; THREADS.len()],
    by_pod: [u64; THREADS.len()],
    /// Link → the node that sends on it.
    #[cfg(feature = "tie-stats")]
    link_from: Vec<u32>,
    #[cfg(feature = "tie-stats")]
    ties: TieStats,
}

/// Where an event happened, for [`ParallelismStats::on_event`].
#[cfg(feature = "tie-stats")]
pub(super) enum At {
    /// At the end of this link.
    LinkEnd(u32),
    /// At this link's sending node.
    LinkStart(u32),
    /// At this node.
    Node(u32),
}

impl ParallelismStats {
    pub(super) fn new(topo: &Topology, cfg: &Config) -> ParallelismStats {
        let (pod, pods) = super::parts::fat_tree_pods(topo, cfg).unwrap_or_else(|| (Vec::new(), 0));
        ParallelismStats {
            lookahead: topo.links.iter().map(|l| l.delay).min().unwrap_or(1).max(1),
            link_to: topo.links.iter().map(|l| l.to).collect(),
            pod,
            pods,
            window: 0,
            busy_windows: 0,
            arrivals: 0,
            node_counts: vec![0; topo.nodes.len()],
            pod_counts: vec![0; pods],
            touched: Vec::new(),
            fine: [0; THREADS.len()],
            by_pod: [0; THREADS.len()],
            #[cfg(feature = "tie-stats")]
            link_from: topo.links.iter().map(|l| l.from).collect(),
            #[cfg(feature = "tie-stats")]
            ties: TieStats::new(topo.nodes.len()),
        }
    }

    /// The event just popped (the last of `anc`'s records) happened `at`.
    #[cfg(feature = "tie-stats")]
    pub(super) fn on_event(&mut self, anc: &Ancestry, at: At) {
        let node = match at {
            At::LinkEnd(l) => self.link_to[l as usize],
            At::LinkStart(l) => self.link_from[l as usize],
            At::Node(n) => n,
        };
        self.ties.on_event(anc, node);
    }

    /// A packet arrived at the end of `link` at `now` (times never decrease).
    pub(super) fn on_arrival(&mut self, now: Time, link: u32) {
        let w = now / self.lookahead;
        if w != self.window {
            self.close_window();
            self.window = w;
        }
        let node = self.link_to[link as usize];
        let c = &mut self.node_counts[node as usize];
        if *c == 0 {
            self.touched.push(node);
        }
        *c += 1;
        if let Some(&p) = self.pod.get(node as usize) {
            self.pod_counts[p as usize] += 1;
        }
        self.arrivals += 1;
    }

    fn close_window(&mut self) {
        if self.touched.is_empty() {
            return;
        }
        self.busy_windows += 1;
        let (mut total, mut busiest) = (0u64, 0u64);
        for &n in &self.touched {
            let c = std::mem::take(&mut self.node_counts[n as usize]) as u64;
            total += c;
            busiest = busiest.max(c);
        }
        self.touched.clear();
        for (i, &p) in THREADS.iter().enumerate() {
            self.fine[i] += total.div_ceil(p as u64).max(busiest);
            let p = p as usize;
            if p <= self.pods {
                let per = self.pods / p;
                self.by_pod[i] += self
                    .pod_counts
                    .chunks(per)
                    .map(|c| c.iter().sum::<u64>())
                    .max()
                    .unwrap_or(0);
            }
        }
        self.pod_counts.iter_mut().for_each(|c| *c = 0);
    }

    pub(super) fn finish(mut self) -> ParallelismReport {
        self.close_window();
        #[cfg(feature = "tie-stats")]
        let ties = {
            let mut t = std::mem::take(&mut self.ties.report);
            t.depths = (1..=DEPTHS as u32).zip(self.ties.hist).collect();
            t
        };
        let speedup = |crit: u64| {
            if crit == 0 {
                1.0
            } else {
                self.arrivals as f64 / crit as f64
            }
        };
        ParallelismReport {
            lookahead_ps: self.lookahead,
            windows: self.window + 1,
            busy_windows: self.busy_windows,
            arrivals: self.arrivals,
            by_pod: THREADS
                .iter()
                .zip(self.by_pod)
                .filter(|(&p, _)| p as usize <= self.pods && self.pods.is_multiple_of(p as usize))
                .map(|(&p, c)| (p, speedup(c)))
                .collect(),
            fine_grained: THREADS
                .iter()
                .zip(self.fine)
                .map(|(&p, c)| (p, speedup(c)))
                .collect(),
            #[cfg(feature = "tie-stats")]
            ties,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(feature = "tie-stats")]
    fn ancestry_orders_ties_by_the_first_generation_that_differs() {
        // Two events scheduled before the first pop (0, 1); each schedules one event at 5
        // (2, 3); those schedule one each at 9 (4, 5), and 3 also a second one at 9 (6).
        let recs = [
            (0, ROOT, 0),
            (0, ROOT, 1),
            (5, 0, 0),
            (5, 1, 0),
            (9, 2, 0),
            (9, 3, 0),
            (9, 3, 1),
        ];
        // Same creator: the push index decides.
        assert_eq!(order(&recs, 5, 6), (1, true));
        assert_eq!(order(&recs, 6, 5), (1, false));
        // Creators of one time (5), whose creators were pushed in order before any pop.
        assert_eq!(order(&recs, 4, 5), (3, true));
        assert_eq!(order(&recs, 5, 4), (3, false));
        // Creators of different times.
        let recs = [(0, ROOT, 0), (3, 0, 0), (4, 0, 1), (9, 1, 0), (9, 2, 0)];
        assert_eq!(order(&recs, 3, 4), (2, true));
    }

    #[test]
    #[cfg(feature = "tie-stats")]
    fn the_queue_serves_every_shallow_tie_in_the_insertion_counters_order() {
        // Sixteen senders start at one instant towards one host: ties at its switch port go
        // many generations back.
        let trace: Vec<String> = (1..16)
            .map(|s| format!(r#"{{"src": {s}, "dst": 0, "size": "200KB", "start": "1ms"}}"#))
            .collect();
        let cfg = Config::from_json(&format!(
            r#"{{"topology": {{"kind": "star", "hosts": 16, "link_rate": "1Gbps",
                               "link_delay": "10us"}},
                 "queue": {{"limit_packets": 30}},
                 "workload": {{"trace": [{}], "drain": "5s"}}}}"#,
            trace.join(",")
        ))
        .expect("a valid config");
        let out = crate::run(&cfg, &mut |_| true).expect("the run");
        let t = &out.parallelism.ties;
        assert!(t.ties > 100, "{t:?}");
        assert!(t.depths.iter().any(|&(d, n)| d >= 3 && n > 0), "{t:?}");
        assert_eq!(t.violations, 0, "{t:?}");
        assert_eq!(t.depths.iter().map(|x| x.1).sum::<u64>(), t.ties);
    }

    fn stats(k: u32) -> (ParallelismStats, Topology) {
        let cfg = Config::from_json(&format!(
            r#"{{"topology": {{"kind": "fat-tree", "k": {k}, "link_delay": "1us"}}}}"#
        ))
        .expect("a valid config");
        let topo = Topology::build(&cfg.topology, cfg.routing.hash, 1);
        (ParallelismStats::new(&topo, &cfg), topo)
    }

    #[test]
    fn one_busy_node_per_window_gives_no_speedup_and_even_pods_give_full() {
        let (mut s, topo) = stats(4);
        // Window 0: four arrivals at one node: the busiest node bounds every thread count.
        let l = 0;
        for i in 0..4 {
            s.on_arrival(i * 10, l);
        }
        // Window 1: one arrival in each pod at its hosts' uplink ends (the edge switches).
        let us = 1_000_000;
        let mut seen = [false; 4];
        for (i, link) in topo.links.iter().enumerate() {
            if link.from < 16 {
                let pod = (link.from / 4) as usize;
                if !seen[pod] {
                    seen[pod] = true;
                    s.on_arrival(us, i as u32);
                }
            }
        }
        let r = s.finish();
        assert_eq!((r.windows, r.busy_windows, r.arrivals), (2, 2, 8));
        // Critical path with 2 threads: window 0 = 4 (one node), window 1 = 2: 8 / 6.
        let two = |v: &[(u32, f64)]| v.iter().find(|x| x.0 == 2).expect("2 threads").1;
        assert!((two(&r.fine_grained) - 8.0 / 6.0).abs() < 1e-12);
        assert!((two(&r.by_pod) - 8.0 / 6.0).abs() < 1e-12);
        // By pod: at most k = 4 threads, and only divisors of the pod count.
        assert_eq!(r.by_pod.iter().map(|x| x.0).collect::<Vec<_>>(), vec![2, 4]);
        // Four threads: window 0 still 4, window 1 is 1 each: 8 / 5.
        let four = r.by_pod.iter().find(|x| x.0 == 4).expect("4 threads").1;
        assert!((four - 8.0 / 5.0).abs() < 1e-12);
    }
}
