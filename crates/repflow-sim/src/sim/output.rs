//! What a run hands back: per-flow records (with each flow's ideal FCT), per-connection
//! records, per-link statistics, the run's counters and summary, and how a threaded run's
//! threads spent their time.

use super::world::{Conn, FlowState, World, NO_MP};
use crate::config::Config;
use crate::engine::Time;
use crate::ideal::{ideal_fcts, Hop};
use crate::metrics::{Counters, FlowRecord, Summary};
use crate::network::{FiveTuple, NodeKind, Path, Topology, TxClock};
use crate::port::PortStats;
use crate::units::PS_PER_SEC;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// How the threads of a threaded run spent their time: what a larger machine's speedup can
/// be estimated from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThreadReport {
    /// Threads (one part of the network each).
    pub threads: u32,
    /// Lookahead windows run (each ends with a barrier).
    pub windows: u64,
    /// Length of a window (the smallest link delay), seconds of simulated time.
    pub window: f64,
    /// Per thread, events run.
    pub events: Vec<u64>,
    /// Per thread, wall-clock seconds spent waiting at barriers.
    pub wait: Vec<f64>,
    /// Per thread, wall-clock seconds from its first window to its last barrier.
    pub busy: Vec<f64>,
    /// Packets handed from one part to another (over links between parts).
    pub packets_exchanged: u64,
}

/// Everything a run produces.
#[derive(Clone, Debug)]
pub struct RunOutput {
    /// One record per application flow, in id order.
    pub records: Vec<FlowRecord>,
    /// Run counters.
    pub counters: Counters,
    /// Summary computed from the records.
    pub summary: Summary,
    /// The configuration that ran, with every default filled in.
    pub config: Config,
    /// One record per connection (copy), in creation order.
    pub connections: Vec<ConnRecord>,
    /// Packets that crossed each directed link, indexed like [`Topology::links`].
    pub link_packets: Vec<u64>,
    /// Busy time and mean backlog of each directed link's output port, indexed like
    /// [`Topology::links`].
    pub link_stats: Vec<PortStats>,
    /// The network the run used.
    pub topology: Topology,
    /// How the threads of a threaded run ([`super::run_threaded`]) spent their time; `None`
    /// for a run on one thread.
    pub threads: Option<ThreadReport>,
    /// How much a conservative parallel engine could gain on this run (feature
    /// `parallelism-stats`).
    #[cfg(feature = "parallelism-stats")]
    pub parallelism: super::parallelism::ParallelismReport,
}

/// One connection (one copy of a flow).
#[derive(Clone, Debug, PartialEq)]
pub struct ConnRecord {
    /// Flow id.
    pub flow: u64,
    /// Copy index within the flow.
    pub copy: u32,
    /// The connection's five-tuple (data direction).
    pub tuple: FiveTuple,
    /// Links of the data path.
    pub fwd: Vec<u32>,
    /// Links of the ACK path.
    pub rev: Vec<u32>,
    /// When the receiver held every byte, seconds (NaN if never).
    pub completed: f64,
    /// Bytes injected by both ends.
    pub wire_bytes: u64,
    /// Payload bytes sent, retransmissions included.
    pub payload_bytes: u64,
}

impl<const P: bool> World<'_, P> {
    fn hops(&self, path: &Path) -> Vec<Hop> {
        path.links()
            .iter()
            .map(|&l| {
                let link = &self.topo.links[l as usize];
                Hop {
                    clock: TxClock::new(link.rate),
                    delay: link.delay,
                }
            })
            .collect()
    }

    fn records(&self) -> Vec<FlowRecord> {
        let secs = |t: Time| t as f64 / PS_PER_SEC as f64;
        // The ideal FCT depends only on the links' rates and delays along both paths, the size
        // and the congestion control (which may depend on the destination port): the flows
        // that share all but the size take theirs from one replay ([`ideal_fcts`]).
        type Key = (Vec<(u64, Time)>, Vec<(u64, Time)>, u16);
        let shape = |p: &Path| -> Vec<(u64, Time)> {
            p.links()
                .iter()
                .map(|&l| {
                    let link = &self.topo.links[l as usize];
                    (link.rate.bps(), link.delay)
                })
                .collect()
        };
        let winner = |f: &FlowState| &self.conns[(f.first_conn + f.winner.max(0) as u32) as usize];
        let mut groups: HashMap<Key, Vec<usize>> = HashMap::new();
        for (i, f) in self.flows.iter().enumerate() {
            let c = winner(f);
            let key = (shape(&c.fwd), shape(&c.rev), c.tuple.dport);
            groups.entry(key).or_default().push(i);
        }
        let mut ideals: Vec<Time> = vec![0; self.flows.len()];
        for members in groups.values() {
            let c = winner(&self.flows[members[0]]);
            let sizes: Vec<u64> = members.iter().map(|&i| self.flows[i].spec.size).collect();
            let fcts = ideal_fcts(
                &self.hops(&c.fwd),
                &self.hops(&c.rev),
                &sizes,
                &self.tcp,
                (self.scheme.cc)(c.tuple.dport),
            );
            for (&i, t) in members.iter().zip(fcts) {
                ideals[i] = t;
            }
        }
        self.flows
            .iter()
            .zip(ideals)
            .map(|(f, ideal)| {
                let conns =
                    &self.conns[f.first_conn as usize..(f.first_conn + f.copies as u32) as usize];
                let (fct, finish) = match f.finish {
                    Some(t) => (secs(t - f.start), secs(t)),
                    None => (f64::NAN, f64::NAN),
                };
                let ideal_s = secs(ideal);
                let sum = |f: fn(&Conn) -> u64| conns.iter().map(f).sum::<u64>();
                FlowRecord {
                    id: f.spec.id,
                    src: f.spec.src,
                    dst: f.spec.dst,
                    size: f.spec.size,
                    start: secs(f.start),
                    finish,
                    fct,
                    ideal_fct: ideal_s,
                    slowdown: fct / ideal_s,
                    copies: f.copies as u32,
                    winner: f.winner,
                    bytes_sent: conns.iter().map(|c| c.wire_bytes).sum(),
                    retransmissions: sum(|c| c.snd.stats.retransmissions),
                    timeouts: sum(|c| c.snd.stats.timeouts),
                    fast_retransmits: sum(|c| c.snd.stats.fast_retransmits),
                    timeout_retransmits: sum(|c| c.snd.stats.timeout_retransmits),
                    data_timeouts: sum(|c| c.snd.stats.timeouts - c.snd.stats.syn_timeouts),
                    syn_timeouts: sum(|c| c.snd.stats.syn_timeouts),
                    spurious_retransmissions: sum(|c| c.rcv.duplicate_segments),
                    detect_retransmits: sum(|c| c.snd.stats.detect_retransmits),
                    atimer_retransmits: sum(|c| c.snd.stats.atimer_retransmits),
                }
            })
            .collect()
    }

    /// The run's records, counters and statistics, once it has ended.
    pub(super) fn output(self, config: &Config, wall: Instant) -> RunOutput {
        let records = self.records();
        let mut counters = self.counters.clone();
        counters.sim_time = self.now as f64 / PS_PER_SEC as f64;
        // Every hop is one arrival at the end of a link, which its port counts.
        counters.packet_hops = self.ports.iter().map(|p| p.packets()).sum();
        if let Some(h) = &self.scheme.hca {
            h.fill_counters(&mut counters);
        }
        let capacity_bytes: f64 = (0..self.topo.n_hosts)
            .map(|h| {
                self.topo.links[self.topo.out_links[h][0] as usize]
                    .rate
                    .bps() as f64
                    / 8.0
            })
            .sum();
        counters.offered_load /= capacity_bytes * config.workload.duration.secs();
        counters.packets_in_flight = self.ports.iter().map(|p| p.in_system() as u64).sum();
        counters.max_switch_queue = self
            .ports
            .iter()
            .zip(&self.topo.links)
            .filter(|(_, l)| self.topo.nodes[l.from as usize] != NodeKind::Host)
            .map(|(p, _)| p.max_backlog as u64)
            .max()
            .unwrap_or(0);
        counters.extra_copy_bytes_sent = self
            .flows
            .iter()
            .map(|f| {
                if f.mp != NO_MP {
                    // A multipath flow: payload beyond the flow's size is redundancy (MPTCP-L's
                    // copies) or, for a lowest-RTT flow, retransmissions — counted as copies
                    // only for a redundant flow.
                    if f.copies < 2 || !self.mp_redundant(f.mp) {
                        return 0;
                    }
                    let first = f.first_conn as usize;
                    return self.conns[first..first + f.copies as usize]
                        .iter()
                        .map(|c| c.snd.stats.payload_bytes)
                        .sum::<u64>()
                        .saturating_sub(f.spec.size);
                }
                (0..f.copies as u32)
                    .filter(|&i| i as i32 != f.winner.max(0))
                    .map(|i| {
                        self.conns[(f.first_conn + i) as usize]
                            .snd
                            .stats
                            .payload_bytes
                    })
                    .sum::<u64>()
            })
            .sum();
        counters.wall_time = wall.elapsed().as_secs_f64();
        counters.events_per_sec = counters.events as f64 / counters.wall_time.max(1e-9);
        counters.packet_hops_per_sec = counters.packet_hops as f64 / counters.wall_time.max(1e-9);
        let summary = Summary::from_records(&records, &counters);
        tracing::info!(
            flows = counters.flows,
            events = counters.events,
            wall = counters.wall_time,
            "simulation done"
        );
        // (Copies HCA dropped keep their numbers but never started: not listed.)
        let connections = self
            .conns
            .iter()
            .filter(|c| (c.copy as u32) < self.flows[c.flow as usize].copies as u32)
            .map(|c| ConnRecord {
                flow: c.flow as u64,
                copy: c.copy as u32,
                tuple: c.tuple,
                fwd: c.fwd.links().to_vec(),
                rev: c.rev.links().to_vec(),
                completed: c
                    .completed_at
                    .map_or(f64::NAN, |t| t as f64 / PS_PER_SEC as f64),
                wire_bytes: c.wire_bytes,
                payload_bytes: c.snd.stats.payload_bytes,
            })
            .collect();
        let link_packets = self.ports.iter().map(|p| p.packets()).collect();
        let link_stats = self.ports.iter().map(|p| p.stats(self.now)).collect();
        RunOutput {
            records,
            counters,
            summary,
            config: config.clone(),
            connections,
            link_packets,
            link_stats,
            // A threaded run's other replicas may still hold it.
            topology: Arc::try_unwrap(self.topo).unwrap_or_else(|t| (*t).clone()),
            threads: None,
            #[cfg(feature = "parallelism-stats")]
            parallelism: self.parallelism.finish(),
        }
    }
}
