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

use crate::config::{Config, TopologyKind};
use crate::engine::Time;
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
}

impl ParallelismStats {
    pub(super) fn new(topo: &Topology, cfg: &Config) -> ParallelismStats {
        let t = &cfg.topology;
        let (pod, pods) = if t.kind == TopologyKind::FatTree {
            let k = t.k as usize;
            let half = k / 2;
            let hpe = t.fat_tree_hosts_per_edge() as usize;
            let hosts = k * half * hpe;
            // Builder order: hosts, edge switches, aggregation switches, core switches.
            let pod = (0..topo.nodes.len())
                .map(|n| {
                    (if n < hosts {
                        n / (half * hpe)
                    } else if n < hosts + k * half {
                        (n - hosts) / half
                    } else if n < hosts + 2 * k * half {
                        (n - hosts - k * half) / half
                    } else {
                        (n - hosts - 2 * k * half) % k
                    }) as u32
                })
                .collect();
            (pod, k)
        } else {
            (Vec::new(), 0)
        };
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
        }
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
