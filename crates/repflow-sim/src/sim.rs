//! Glue: builds the network from a [`Config`], runs the workload through the replication
//! layer and TCP, and collects per-flow records.

use crate::cc::CcFactory;
use crate::config::{Config, ConfigError, PairPattern, SchemeName};
use crate::engine::{Event, EventQueue, Rng, Time};
use crate::ideal::{ideal_fct, Hop};
use crate::metrics::{Counters, FlowRecord, Summary};
use crate::network::{FiveTuple, NodeKind, Path, Topology, TxClock, MAX_HOPS};
use crate::queue::{kind, DropTail, EcnThreshold, Packet, Port, PortStats, Qdisc};
use crate::replication::{CopySpec, FlowSpec, ReplicationPolicy};
use crate::smartrep::Hca;
use crate::transport::{Receiver, Sender, TcpParams};
use crate::units::PS_PER_SEC;
use crate::workload::{builtin_text, Arrival, Cdf, PoissonArrivals};
use std::collections::HashMap;
use std::time::Instant;
use thiserror::Error;

/// Why a run could not be done.
#[derive(Debug, Error)]
pub enum SimError {
    /// The configuration is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An input (such as a CDF file) is unusable; the message names it.
    #[error("{0}")]
    Input(String),
    /// The run was stopped by its progress callback.
    #[error("the run was cancelled")]
    Cancelled,
}

/// Progress of a running simulation, passed to the caller's callback.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    /// Simulated time, seconds.
    pub sim_time: f64,
    /// End of the arrival phase, seconds.
    pub duration: f64,
    /// Flows that have arrived.
    pub flows_started: u64,
    /// Flows that have completed.
    pub flows_finished: u64,
    /// Events processed so far.
    pub events: u64,
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

/// Loads the flow-size CDF a configuration names (built-in name, inline text, or file path).
pub fn load_cdf(cfg: &Config) -> Result<Cdf, SimError> {
    let w = &cfg.workload;
    let (text, origin): (String, String) = if let Some(t) = &w.cdf_text {
        (t.clone(), format!("workload.cdf ({})", w.cdf))
    } else if let Some(t) = builtin_text(&w.cdf) {
        (
            t.to_string(),
            format!("workload.cdf (built-in '{}')", w.cdf),
        )
    } else {
        let names: Vec<&str> = crate::workload::BUILTIN.iter().map(|b| b.0).collect();
        let t = std::fs::read_to_string(&w.cdf).map_err(|e| {
            SimError::Input(format!(
                "workload.cdf: '{}' is neither a built-in workload ({}) nor a readable file ({e})",
                w.cdf,
                names.join(", ")
            ))
        })?;
        (t, format!("workload.cdf file '{}'", w.cdf))
    };
    Cdf::parse(&text).map_err(|e| SimError::Input(format!("{origin}: {e}")))
}

/// The arrivals of an explicit list of flows.
fn trace_arrivals(flows: &[crate::config::TraceFlow]) -> Vec<Arrival> {
    flows
        .iter()
        .map(|f| Arrival {
            time: f.start.ps(),
            src: f.src,
            dst: f.dst,
            size: f.size.0,
        })
        .collect()
}

const EV_RTO: u64 = 1;
const EV_DELACK: u64 = 2;
const EV_FLOW: u64 = 3;
/// A flow whose copies waited for HCA probes starts them.
const EV_HCA: u64 = 4;

/// Whether a packet of kind `k` takes its connection's data path (data segments and SYNs;
/// ACKs and SYN-ACKs take the ACK path): the data-path kinds are the even ones, so this is
/// one bit test.
#[inline]
fn on_data_path(k: u8) -> bool {
    const _: () = assert!(
        kind::DATA & 1 == 0 && kind::SYN & 1 == 0 && kind::ACK & 1 == 1 && kind::SYNACK & 1 == 1
    );
    k & 1 == 0
}

#[inline]
fn ev(tag: u64, id: u32) -> u64 {
    (tag << 32) | id as u64
}

/// A connection's state. Line-aligned, with what a delivery and the following injection
/// touch (both endpoints, timers, byte count) first and the rest after, so that a delivery
/// reads few cache lines.
#[repr(C, align(64))]
struct Conn {
    snd: Sender,
    rcv: Receiver,
    wire_bytes: u64,
    rto_at: Option<Time>,
    delack_at: Option<Time>,
    flow: u32,
    copy: u8,
    tuple: FiveTuple,
    completed_at: Option<Time>,
    fwd: Path,
    rev: Path,
}

struct FlowState {
    spec: FlowSpec,
    start: Time,
    first_conn: u32,
    copies: u8,
    finish: Option<Time>,
    winner: i32,
}

enum Arrivals {
    Poisson(Box<PoissonArrivals>),
    Trace(std::vec::IntoIter<Arrival>),
    Mixed(Box<MixedArrivals>),
}

/// Poisson arrivals merged in time order with explicit background flows (a background flow
/// goes first on a tie).
struct MixedArrivals {
    poisson: PoissonArrivals,
    next_poisson: Option<Arrival>,
    poisson_done: bool,
    background: std::iter::Peekable<std::vec::IntoIter<Arrival>>,
}

impl MixedArrivals {
    fn next(&mut self, end: Time) -> Option<Arrival> {
        if self.next_poisson.is_none() && !self.poisson_done {
            let a = self.poisson.next_arrival();
            if a.time < end {
                self.next_poisson = Some(a);
            } else {
                self.poisson_done = true;
            }
        }
        match (self.next_poisson, self.background.peek()) {
            (Some(p), Some(b)) if b.time > p.time => self.next_poisson.take(),
            (_, Some(_)) => self.background.next(),
            (Some(_), None) => self.next_poisson.take(),
            (None, None) => None,
        }
    }
}

/// Link ids of every connection's `[data path, ACK path]`, indexed by connection.
///
/// The per-hop lookup is a random access by connection: with u16 link ids both directions
/// fit in 32 bytes (half a cache line) instead of 72, which cuts L1 misses on the hop path.
/// The narrow form holds paths of fewer than `MAX_HOPS` links (the slot after the last link
/// is `NO_LINK`); topologies with `NO_LINK` links or more, or a path of `MAX_HOPS` links,
/// use the wide form.
enum Routes {
    /// u16 link ids; the slots past a path's end hold `NO_LINK`.
    Narrow(Vec<[[u16; MAX_HOPS]; 2]>),
    /// u32 link ids with lengths.
    Wide(Vec<[Path; 2]>),
}

/// Asks the CPU to bring the cache line at `p` into L1 (no effect on memory: any address
/// is accepted, even an invalid one; elsewhere than x86_64, nothing).
///
/// The hop path waits on memory more than it computes; this lets the port of the likely
/// next event load while the current one is handled. Measured on bench-A against the
/// build without it (with `World::enqueue` inlined), alternating runs pinned to one core:
/// median ratios of 1.01 to 1.11 over five sets.
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program sees and never faults, whatever the
    // address; SSE is part of the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Marks the slots past a narrow route's end (never a link id there).
const NO_LINK: u16 = u16::MAX;

impl Routes {
    fn new(links: usize) -> Self {
        if links < NO_LINK as usize {
            Routes::Narrow(Vec::new())
        } else {
            Routes::Wide(Vec::new())
        }
    }

    fn push(&mut self, fwd: Path, rev: Path) {
        if let Routes::Narrow(v) = self {
            if fwd.len() < MAX_HOPS && rev.len() < MAX_HOPS {
                let mut r = [[NO_LINK; MAX_HOPS]; 2];
                for (dst, p) in r.iter_mut().zip([&fwd, &rev]) {
                    for (d, &l) in dst.iter_mut().zip(p.links()) {
                        *d = l as u16; // below NO_LINK: checked in `new`
                    }
                }
                v.push(r);
                return;
            }
            // A path too long for the narrow form: convert what is stored.
            let wide = v
                .iter()
                .map(|r| {
                    r.map(|links| {
                        let mut p = Path::default();
                        links
                            .iter()
                            .take_while(|&&l| l != NO_LINK)
                            .for_each(|&l| p.push(l as u32));
                        p
                    })
                })
                .collect();
            *self = Routes::Wide(wide);
        }
        if let Routes::Wide(v) = self {
            v.push([fwd, rev]);
        }
    }

    /// Puts `pkt` (of connection `pkt.conn`, direction `dir`: 0 data, 1 ACK) on the first
    /// link of its path and returns that link.
    #[inline]
    fn first(&self, pkt: &mut Packet, dir: usize) -> u32 {
        pkt.hop = 0;
        match self {
            Routes::Narrow(v) => {
                let links = &v[pkt.conn as usize][dir];
                pkt.next = links[1];
                links[0] as u32
            }
            Routes::Wide(v) => v[pkt.conn as usize][dir].links()[0],
        }
    }

    /// Moves `pkt` (direction `dir`) past the link it has crossed: returns the next link of
    /// its path, or `None` at the path's end. The narrow form takes the next link from the
    /// packet (`Packet::next`) and stamps the one after it, so the path lookup runs beside
    /// the next port's admission instead of before it.
    #[inline]
    fn advance(&self, pkt: &mut Packet, dir: usize) -> Option<u32> {
        pkt.hop += 1;
        match self {
            Routes::Narrow(v) => {
                let l = pkt.next;
                // hop + 1 <= len + 1 <= MAX_HOPS: the mask keeps a useful index (past the
                // end it reads a harmless slot) and drops a bounds check.
                pkt.next = v[pkt.conn as usize][dir][(pkt.hop as usize + 1) & (MAX_HOPS - 1)];
                (l != NO_LINK).then_some(l as u32)
            }
            Routes::Wide(v) => v[pkt.conn as usize][dir]
                .links()
                .get(pkt.hop as usize)
                .copied(),
        }
    }

    /// Link `hop` (at most the path's length) of direction `dir` (0 data, 1 ACK) of
    /// connection `conn`, or `None` at the path's end: the direct lookup the tests check
    /// `first` and `advance` against.
    #[cfg(test)]
    fn link(&self, conn: u32, dir: usize, hop: usize) -> Option<u32> {
        match self {
            Routes::Narrow(v) => {
                // hop <= len < MAX_HOPS, so the mask keeps the index and drops a bounds check.
                let l = v[conn as usize][dir][hop & (MAX_HOPS - 1)];
                (l != NO_LINK).then_some(l as u32)
            }
            Routes::Wide(v) => v[conn as usize][dir].links().get(hop).copied(),
        }
    }
}

struct World<'a> {
    cfg: &'a Config,
    topo: Topology,
    ports: Vec<Port>,
    tcp: TcpParams,
    conns: Vec<Conn>,
    /// `[data path, ACK path]` of every connection, apart from `conns` for cache locality.
    paths: Routes,
    flows: Vec<FlowState>,
    /// Near events: ids `0..links` are packet arrivals at the end of a link, ids
    /// `links..2 * links` a scheduled port's transmit completions.
    q: EventQueue,
    now: Time,
    out: Vec<Packet>,
    policy: Box<dyn ReplicationPolicy>,
    arrivals: Arrivals,
    pending: Option<Arrival>,
    rng_ports: Rng,
    arrivals_done: bool,
    end_arrivals: Time,
    counters: Counters,
    copies_buf: Vec<CopySpec>,
    /// SmartRep's probe cache and busy ports (schemes that choose ports by HCA).
    hca: Option<Hca>,
    hca_ports: Vec<u16>,
    /// Congestion control of the scheme.
    cc: CcFactory,
}

/// Round trip of a full segment and its ACK over the longest host-to-host path, ps, and the
/// rate of host links (pFabric's window and timeout derive from them).
fn longest_rtt(topo: &Topology, full: u32, header: u32) -> (Time, u64) {
    let mut rtt = 0;
    for dst in 1..topo.n_hosts as u32 {
        let t = FiveTuple {
            src: 0,
            dst,
            sport: 40000,
            dport: crate::replication::BASE_PORT,
            proto: 6,
        };
        let one_way = |p: Path, bytes: u32| -> Time {
            p.links()
                .iter()
                .map(|&l| {
                    let link = &topo.links[l as usize];
                    TxClock::new(link.rate).tx(bytes) + link.delay
                })
                .sum()
        };
        rtt = rtt.max(one_way(topo.path(t), full) + one_way(topo.path(t.reversed()), header));
    }
    (rtt, topo.links[topo.out_links[0][0] as usize].rate.bps())
}

/// The scheme's TCP parameters and its pFabric window (segments).
fn scheme_tcp(cfg: &Config, topo: &Topology) -> (TcpParams, u32) {
    let mut tcp = TcpParams::from_config(&cfg.tcp);
    let s = &cfg.scheme;
    tcp.ecn = s.name.uses_ecn();
    if s.name != SchemeName::Pfabric {
        return (tcp, tcp.init_cwnd);
    }
    let full = cfg.tcp.mss + cfg.tcp.header;
    let (rtt, bps) = longest_rtt(topo, full, cfg.tcp.header);
    let bdp = (bps as u128 * rtt as u128).div_ceil(8 * PS_PER_SEC as u128) as u64;
    let window = s
        .pfabric_window
        .unwrap_or_else(|| bdp.div_ceil(full as u64).max(1) as u32);
    let rto = s.pfabric_rto.map_or(3 * rtt, |d| d.ps());
    tcp.init_cwnd = window;
    tcp.max_window = window;
    tcp.min_rto = rto;
    tcp.max_rto = rto;
    tcp.initial_rto = rto;
    tcp.backoff = 1.0;
    tcp.dupack_threshold = u32::MAX;
    (tcp, window)
}

impl<'a> World<'a> {
    fn new(cfg: &'a Config) -> Result<World<'a>, SimError> {
        let cdf = load_cdf(cfg)?;
        let topo = Topology::build(&cfg.topology, cfg.routing.hash, cfg.seed);
        let (policy, hca) = crate::smartrep::build_policy(cfg, &topo, &cdf);
        let (lp, lb) = match cfg.queue.limit_bytes {
            Some(b) => (0, b.0),
            None => (cfg.queue.limit_packets, 0),
        };
        let ports = topo
            .links
            .iter()
            .map(|l| {
                let qd = if topo.nodes[l.from as usize] == NodeKind::Host {
                    DropTail {
                        limit_packets: cfg.queue.host_limit_packets,
                        limit_bytes: 0,
                    }
                } else {
                    DropTail {
                        limit_packets: lp,
                        limit_bytes: lb,
                    }
                };
                let host = topo.nodes[l.from as usize] == NodeKind::Host;
                let clock = TxClock::new(l.rate);
                if cfg.scheme.name == SchemeName::Pfabric {
                    let full = (cfg.tcp.mss + cfg.tcp.header) as u64;
                    let limit = if host {
                        qd.limit_packets as u64 * full
                    } else {
                        cfg.scheme.pfabric_buffer.0
                    };
                    Port::new_scheduled(clock, l.delay, limit)
                } else if cfg.scheme.name.uses_ecn() && !host {
                    let (k_packets, k_bytes) = cfg.queue.ecn_k(l.rate);
                    let ecn = EcnThreshold {
                        limit: qd,
                        k_packets,
                        k_bytes,
                    };
                    Port::new(clock, l.delay, Qdisc::Ecn(ecn))
                } else {
                    Port::new(clock, l.delay, Qdisc::DropTail(qd))
                }
            })
            .collect();
        let capacity_bps: f64 = (0..topo.n_hosts)
            .map(|h| topo.links[topo.out_links[h][0] as usize].rate.bps() as f64)
            .sum();
        // Wheel slots about a 256th of a full packet's time on the fastest link (bench-A:
        // 4096 ps, 1024 slots of 8 bytes): most slots hold one event, and a slot's list
        // stays short. (Full bench-A under cachegrind: a 512th costs 0.23 more L1 misses
        // and 0.14 fewer mispredicts per hop, about the same; wall-clock differences were
        // within the noise.)
        let fastest = topo.links.iter().map(|l| l.rate.bps()).max().unwrap_or(1);
        let full = (cfg.tcp.mss + cfg.tcp.header) as u64;
        let slot = crate::units::Rate(fastest).tx_time(full) / 256;
        // Near events (arrivals at the end of a link, pFabric transmit completions) lie at
        // most a full packet's transmission and a propagation delay ahead: a wheel just that
        // wide turns through few, cache-warm slots.
        let horizon = topo
            .links
            .iter()
            .map(|l| l.rate.tx_time(full) + l.delay)
            .max()
            .unwrap_or(0);
        let mut end_arrivals = cfg.workload.duration.ps();
        let arrivals = match &cfg.workload.trace {
            Some(trace) => {
                let v = trace_arrivals(trace);
                if let Some(last) = v.last() {
                    end_arrivals = end_arrivals.max(last.time + 1);
                }
                Arrivals::Trace(v.into_iter())
            }
            None => {
                let poisson = PoissonArrivals::new(
                    cdf,
                    cfg.workload.load,
                    capacity_bps,
                    topo.host_group.clone(),
                    cfg.workload.pairs == PairPattern::InterPod,
                    Rng::new(cfg.seed, 1),
                )
                .to_first(cfg.workload.pairs == PairPattern::Incast);
                match &cfg.workload.background {
                    None => Arrivals::Poisson(Box::new(poisson)),
                    Some(bg) => {
                        let v = trace_arrivals(bg);
                        Arrivals::Mixed(Box::new(MixedArrivals {
                            poisson,
                            next_poisson: None,
                            poisson_done: false,
                            background: v.into_iter().peekable(),
                        }))
                    }
                }
            }
        };
        let (tcp, pfabric_window) = scheme_tcp(cfg, &topo);
        let topo_links = topo.links.len();
        let mut w = World {
            cfg,
            topo,
            ports,
            tcp,
            conns: Vec::new(),
            paths: Routes::new(topo_links),
            flows: Vec::new(),
            q: EventQueue::new(2 * topo_links, slot, horizon),
            now: 0,
            out: Vec::with_capacity(64),
            policy,
            arrivals,
            pending: None,
            rng_ports: Rng::new(cfg.seed, 2),
            arrivals_done: false,
            end_arrivals,
            counters: Counters::default(),
            copies_buf: Vec::new(),
            hca,
            hca_ports: Vec::new(),
            cc: CcFactory::new(&cfg.scheme, pfabric_window),
        };
        w.schedule_next_arrival();
        Ok(w)
    }

    fn schedule_next_arrival(&mut self) {
        let capped = self
            .cfg
            .workload
            .max_flows
            .is_some_and(|m| self.flows.len() as u64 >= m);
        let next = match &mut self.arrivals {
            Arrivals::Poisson(p) => Some(p.next_arrival()).filter(|a| a.time < self.end_arrivals),
            Arrivals::Trace(it) => it.next(),
            Arrivals::Mixed(m) => m.next(self.end_arrivals),
        };
        match next {
            Some(a) if !capped => {
                self.pending = Some(a);
                self.q.push_timer(a.time.max(self.now), ev(EV_FLOW, 0));
            }
            _ => self.arrivals_done = true,
        }
    }

    fn start_flow(&mut self) {
        let a = self.pending.take().expect("a flow event has its arrival");
        let (src, dst, size) = (a.src, a.dst, a.size);
        let id = self.flows.len() as u64;
        let spec = FlowSpec { id, src, dst, size };
        self.copies_buf.clear();
        let paths = crate::smartrep::disjoint_paths(&self.topo, src, dst);
        self.policy
            .plan_paths(&spec, paths, &mut self.rng_ports, &mut self.copies_buf);
        let hca_wait = self.choose_hca_ports(src, dst);
        let first_conn = self.conns.len() as u32;
        let n = self.copies_buf.len();
        self.counters.flows += 1;
        self.counters.flow_bytes += size;
        if self.now < self.end_arrivals {
            self.counters.offered_load += size as f64;
        }
        self.counters.extra_copy_bytes += size * (n as u64 - 1);
        self.flows.push(FlowState {
            spec,
            start: self.now,
            first_conn,
            copies: n as u8,
            finish: None,
            winner: -1,
        });
        for i in 0..n {
            let c = self.copies_buf[i];
            let t = FiveTuple {
                src,
                dst,
                sport: c.sport,
                dport: c.dport,
                proto: 6,
            };
            let conn_id = self.conns.len() as u32;
            let (fwd, rev) = (self.topo.path(t), self.topo.path(t.reversed()));
            self.paths.push(fwd, rev);
            let snd = Sender::new(conn_id, size, &self.tcp, self.cc.make(t.dport));
            let total = snd.total_segments();
            self.conns.push(Conn {
                flow: id as u32,
                copy: i as u8,
                tuple: t,
                fwd,
                rev,
                snd,
                rcv: Receiver::new(total),
                rto_at: None,
                delack_at: None,
                wire_bytes: 0,
                completed_at: None,
            });
            self.counters.connections += 1;
            if hca_wait == 0 {
                self.start_conn(conn_id);
            }
        }
        if n > 1 {
            self.count_collisions(first_conn, n as u32);
        }
        if hca_wait > 0 {
            self.q
                .push_timer(self.now + hca_wait, ev(EV_HCA, id as u32));
        }
    }

    fn start_conn(&mut self, conn_id: u32) {
        let tcp = self.tcp;
        let now = self.now;
        let mut out = std::mem::take(&mut self.out);
        self.conns[conn_id as usize].snd.start(&tcp, now, &mut out);
        self.out = out;
        self.flush(conn_id);
    }

    /// Starts the copies of a flow that waited for its HCA probes.
    fn start_probed_flow(&mut self, flow: u32) {
        let f = &self.flows[flow as usize];
        let (first, n) = (f.first_conn, f.copies as u32);
        for c in first..first + n {
            self.start_conn(c);
        }
    }

    /// Replaces the planned source ports of a multi-copy flow by HCA's (once per flow, off
    /// the per-packet path); drops copies beyond the link-disjoint paths found. Returns how
    /// long the flow waits for its probes.
    fn choose_hca_ports(&mut self, src: u32, dst: u32) -> Time {
        let n = self.copies_buf.len() as u32;
        let Some(hca) = self.hca.as_mut() else {
            return 0;
        };
        if n < 2 || !self.policy.probes_paths() {
            return 0;
        }
        let dport = self.copies_buf[0].dport;
        let Some(wait) = hca.choose(&self.topo, src, dst, dport, n, &mut self.hca_ports) else {
            return 0;
        };
        if self.hca_ports.is_empty() {
            self.copies_buf.truncate(1);
        } else {
            self.copies_buf.truncate(self.hca_ports.len());
            for (c, &p) in self.copies_buf.iter_mut().zip(&self.hca_ports) {
                c.sport = p;
                c.dport = dport;
            }
        }
        wait
    }

    /// Counts a replicated flow, and a collision when two of its copies share a
    /// switch-to-switch link.
    fn count_collisions(&mut self, first: u32, n: u32) {
        self.counters.replicated_flows += 1;
        let conns = &self.conns[first as usize..(first + n) as usize];
        let collide = (0..conns.len()).any(|i| {
            (i + 1..conns.len()).any(|j| {
                crate::smartrep::paths_collide(
                    &self.topo,
                    conns[i].fwd.links(),
                    conns[j].fwd.links(),
                )
            })
        });
        if collide {
            self.counters.copy_collisions += 1;
        }
    }

    /// Injects the packets a connection emitted and re-arms its timers.
    fn flush(&mut self, conn_id: u32) {
        let mut out = std::mem::take(&mut self.out);
        let mut wire = 0;
        for mut pkt in out.iter().copied() {
            wire += pkt.bytes as u64;
            let dir = !on_data_path(pkt.kind) as usize;
            let first = self.paths.first(&mut pkt, dir);
            self.enqueue(first, pkt);
        }
        self.conns[conn_id as usize].wire_bytes += wire;
        self.counters.packets_injected += out.len() as u64;
        out.clear();
        self.out = out;
        let now = self.now;
        let c = &mut self.conns[conn_id as usize];
        if let Some(d) = c.snd.rto_deadline {
            if c.rto_at.is_none_or(|a| d < a) {
                c.rto_at = Some(d.max(now));
                self.q.push_timer(d.max(now), ev(EV_RTO, conn_id));
            }
        }
        if let Some(d) = c.rcv.delack_deadline {
            if c.delack_at.is_none_or(|a| d < a) {
                c.delack_at = Some(d.max(now));
                self.q.push_timer(d.max(now), ev(EV_DELACK, conn_id));
            }
        }
    }

    #[inline(always)]
    fn enqueue(&mut self, link: u32, pkt: Packet) {
        if !self.ports[link as usize].is_fast() {
            self.enqueue_other(link, pkt);
            return;
        }
        self.enqueue_fifo::<true>(link, pkt);
    }

    /// Offers a packet to a port off the fast path: a priority-scheduled one, or a FIFO port
    /// whose clock is not exact.
    #[cold]
    #[inline(never)]
    fn enqueue_other(&mut self, link: u32, pkt: Packet) {
        if self.ports[link as usize].is_scheduled() {
            self.enqueue_scheduled(link, pkt);
            return;
        }
        self.enqueue_fifo::<false>(link, pkt);
    }

    /// Offers a packet to a FIFO port (`FAST`: one of which [`Port::is_fast`] holds) and
    /// schedules its arrival if it found the link idle.
    #[inline(always)]
    fn enqueue_fifo<const FAST: bool>(&mut self, link: u32, pkt: Packet) {
        let port = &mut self.ports[link as usize];
        let r = if FAST {
            port.enqueue_fast(pkt, self.now)
        } else {
            port.enqueue_general(pkt, self.now)
        };
        match r {
            Some(true) => {
                let t = port.head_arrival().expect("just enqueued");
                self.q.push_near(t, link);
            }
            Some(false) => {}
            None => self.count_drops(link, 1),
        }
    }

    /// Offers a packet to a priority-scheduled (pFabric) port.
    #[cold]
    #[inline(never)]
    fn enqueue_scheduled(&mut self, link: u32, pkt: Packet) {
        let c = &self.conns[pkt.conn as usize];
        let prio = crate::pfabric::priority(&pkt, c.snd.size(), self.tcp.mss);
        let port = &mut self.ports[link as usize];
        let r = port.sched_enqueue(pkt, prio, self.now);
        if r.head_arrival {
            let t = port.head_arrival().expect("just sent");
            self.q.push_near(t, link);
        }
        if let Some(t) = r.tx_done {
            self.q.push_near(t, self.tx_done_id(link));
        }
        if r.dropped > 0 {
            self.count_drops(link, r.dropped as u64);
        }
    }

    /// Near-event id of link `link`'s transmit completion (arrivals use the link id).
    fn tx_done_id(&self, link: u32) -> u32 {
        self.ports.len() as u32 + link
    }

    /// A scheduled port finished a transmission: it starts its next packet.
    fn on_tx_done(&mut self, link: u32) {
        let port = &mut self.ports[link as usize];
        if let Some((done, wire_was_empty)) = port.sched_tx_done(self.now) {
            if wire_was_empty {
                let t = port.head_arrival().expect("just sent");
                self.q.push_near(t, link);
            }
            self.q.push_near(done, self.tx_done_id(link));
        }
    }

    #[cold]
    #[inline(never)]
    fn count_drops(&mut self, link: u32, n: u64) {
        if n == 0 {
            return;
        }
        self.counters.drops += n;
        if self.topo.nodes[self.topo.links[link as usize].from as usize] == NodeKind::Host {
            self.counters.host_drops += n;
        } else {
            self.counters.switch_drops += n;
        }
    }

    /// A packet reached the end of `link`. Returns whether it reached its end host (only
    /// then can the run's end condition change).
    #[inline]
    fn on_arrive(&mut self, link: u32) -> bool {
        let port = &mut self.ports[link as usize];
        let mut pkt = port.pop_arrived();
        if let Some(t) = port.head_arrival() {
            self.q.push_near(t, link);
        }
        // Hops are counted by the ports (`Port::packets`), summed after the run.
        let forward = on_data_path(pkt.kind);
        // Compact per-connection paths (not the whole connection state) on the per-hop path.
        if let Some(next) = self.paths.advance(&mut pkt, !forward as usize) {
            self.enqueue(next, pkt);
            return false;
        }
        // At the end host.
        self.counters.packets_delivered += 1;
        let conn_id = pkt.conn;
        let tcp = self.tcp;
        let now = self.now;
        let mut out = std::mem::take(&mut self.out);
        let c = &mut self.conns[conn_id as usize];
        if forward {
            let completed = c.rcv.on_packet(&tcp, &pkt, now, &mut out);
            self.out = out;
            if completed {
                self.copy_completed(conn_id);
            }
        } else {
            c.snd.on_packet(&tcp, &pkt, now, &mut out);
            self.out = out;
        }
        self.flush(conn_id);
        true
    }

    fn copy_completed(&mut self, conn_id: u32) {
        self.conns[conn_id as usize].completed_at = Some(self.now);
        if let Some(h) = self.hca.as_mut() {
            h.release(self.conns[conn_id as usize].tuple);
        }
        let c = &self.conns[conn_id as usize];
        let (flow_id, copy) = (c.flow as usize, c.copy);
        let f = &mut self.flows[flow_id];
        if f.finish.is_some() {
            return;
        }
        f.finish = Some(self.now);
        f.winner = copy as i32;
        self.counters.flows_finished += 1;
        if self.policy.cancel_losers() && f.copies > 1 {
            let (first, n) = (f.first_conn, f.copies as u32);
            for other in first..first + n {
                if other != conn_id {
                    self.conns[other as usize].snd.cancel();
                    if let Some(h) = self.hca.as_mut() {
                        h.release(self.conns[other as usize].tuple);
                    }
                }
            }
        }
    }

    fn on_rto(&mut self, conn_id: u32) {
        let now = self.now;
        let c = &mut self.conns[conn_id as usize];
        if c.rto_at != Some(now) {
            return; // superseded
        }
        c.rto_at = None;
        match c.snd.rto_deadline {
            None => {}
            Some(d) if d > now => {
                c.rto_at = Some(d);
                self.q.push_timer(d, ev(EV_RTO, conn_id));
            }
            Some(_) => {
                let tcp = self.tcp;
                let mut out = std::mem::take(&mut self.out);
                c.snd.on_timeout(&tcp, now, &mut out);
                self.out = out;
                self.flush(conn_id);
            }
        }
    }

    fn on_delack(&mut self, conn_id: u32) {
        let now = self.now;
        let c = &mut self.conns[conn_id as usize];
        if c.delack_at != Some(now) {
            return;
        }
        c.delack_at = None;
        match c.rcv.delack_deadline {
            None => {}
            Some(d) if d > now => {
                c.delack_at = Some(d);
                self.q.push_timer(d, ev(EV_DELACK, conn_id));
            }
            Some(_) => {
                let tcp = self.tcp;
                let mut out = std::mem::take(&mut self.out);
                c.rcv.on_delack_timer(conn_id, &tcp, &mut out);
                self.out = out;
                self.flush(conn_id);
            }
        }
    }

    /// Every event but a packet arrival.
    #[inline(never)]
    fn on_other_event(&mut self, e: u64) {
        let id = e as u32;
        match e >> 32 {
            EV_RTO => self.on_rto(id),
            EV_DELACK => self.on_delack(id),
            EV_FLOW => {
                self.start_flow();
                self.schedule_next_arrival();
            }
            EV_HCA => self.start_probed_flow(id),
            _ => unreachable!("unknown event tag"),
        }
    }

    fn run(&mut self, progress: &mut dyn FnMut(&Progress) -> bool) -> Result<(), SimError> {
        let t_end = self.end_arrivals + self.cfg.workload.drain.ps();
        let mut last_report = Instant::now();
        let mut events: u64 = 0;
        let links = self.ports.len() as u32;
        while let Some((t, e)) = self.q.pop() {
            if t > t_end {
                break;
            }
            self.now = t;
            events += 1;
            // The likely next event's port (a hint: any id, even none, is harmless).
            prefetch(self.ports.as_ptr().wrapping_add(self.q.hint() as usize));
            // Packet arrivals are nearly all events. A packet forwarded by a switch cannot
            // end the run: the end test is skipped.
            let may_end = match e {
                Event::Near(id) if id < links => self.on_arrive(id),
                Event::Near(id) => {
                    self.on_tx_done(id - links);
                    true
                }
                Event::Timer(e) => {
                    self.on_other_event(e);
                    true
                }
            };
            if may_end && self.arrivals_done && self.counters.flows_finished == self.counters.flows
            {
                break;
            }
            if events & 0xFFFF == 0 && last_report.elapsed().as_millis() >= 200 {
                last_report = Instant::now();
                let p = Progress {
                    sim_time: self.now as f64 / PS_PER_SEC as f64,
                    duration: self.end_arrivals as f64 / PS_PER_SEC as f64,
                    flows_started: self.counters.flows,
                    flows_finished: self.counters.flows_finished,
                    events,
                };
                if !progress(&p) {
                    return Err(SimError::Cancelled);
                }
            }
        }
        self.counters.events = events;
        Ok(())
    }

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
        // and the congestion control (which may depend on the destination port): memoize it
        // (many flows share a path shape and, with packet CDFs, a size).
        type Key = (Vec<(u64, Time)>, Vec<(u64, Time)>, u64, u16);
        let mut memo: HashMap<Key, Time> = HashMap::new();
        let shape = |p: &Path| -> Vec<(u64, Time)> {
            p.links()
                .iter()
                .map(|&l| {
                    let link = &self.topo.links[l as usize];
                    (link.rate.bps(), link.delay)
                })
                .collect()
        };
        self.flows
            .iter()
            .map(|f| {
                let copy = f.winner.max(0) as u32;
                let c = &self.conns[(f.first_conn + copy) as usize];
                let key = (shape(&c.fwd), shape(&c.rev), f.spec.size, c.tuple.dport);
                let ideal = *memo.entry(key).or_insert_with(|| {
                    ideal_fct(
                        &self.hops(&c.fwd),
                        &self.hops(&c.rev),
                        f.spec.size,
                        &self.tcp,
                        self.cc.make(c.tuple.dport),
                    )
                });
                let conns =
                    &self.conns[f.first_conn as usize..(f.first_conn + f.copies as u32) as usize];
                let (fct, finish) = match f.finish {
                    Some(t) => (secs(t - f.start), secs(t)),
                    None => (f64::NAN, f64::NAN),
                };
                let ideal_s = secs(ideal);
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
                    retransmissions: conns.iter().map(|c| c.snd.stats.retransmissions).sum(),
                    timeouts: conns.iter().map(|c| c.snd.stats.timeouts).sum(),
                }
            })
            .collect()
    }
}

/// Runs one simulation. `progress` is called now and then; returning `false` cancels the run.
pub fn run(
    config: &Config,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Result<RunOutput, SimError> {
    config.validate()?;
    let wall = Instant::now();
    let mut world = World::new(config)?;
    tracing::info!(
        hosts = world.topo.n_hosts,
        links = world.topo.links.len(),
        "simulation starting"
    );
    world.run(progress)?;
    let records = world.records();
    let mut counters = world.counters.clone();
    counters.sim_time = world.now as f64 / PS_PER_SEC as f64;
    // Every hop is one arrival at the end of a link, which its port counts.
    counters.packet_hops = world.ports.iter().map(|p| p.packets()).sum();
    if let Some(h) = &world.hca {
        h.fill_counters(&mut counters);
    }
    let capacity_bytes: f64 = (0..world.topo.n_hosts)
        .map(|h| {
            world.topo.links[world.topo.out_links[h][0] as usize]
                .rate
                .bps() as f64
                / 8.0
        })
        .sum();
    counters.offered_load /= capacity_bytes * config.workload.duration.secs();
    counters.packets_in_flight = world.ports.iter().map(|p| p.in_system() as u64).sum();
    counters.max_switch_queue = world
        .ports
        .iter()
        .zip(&world.topo.links)
        .filter(|(_, l)| world.topo.nodes[l.from as usize] != NodeKind::Host)
        .map(|(p, _)| p.max_backlog as u64)
        .max()
        .unwrap_or(0);
    counters.extra_copy_bytes_sent = world
        .flows
        .iter()
        .map(|f| {
            (0..f.copies as u32)
                .filter(|&i| i as i32 != f.winner.max(0))
                .map(|i| {
                    world.conns[(f.first_conn + i) as usize]
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
    let connections = world
        .conns
        .iter()
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
    let link_packets = world.ports.iter().map(|p| p.packets()).collect();
    let link_stats = world.ports.iter().map(|p| p.stats(world.now)).collect();
    Ok(RunOutput {
        records,
        counters,
        summary,
        config: config.clone(),
        connections,
        link_packets,
        link_stats,
        topology: world.topo,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(links: &[u32]) -> Path {
        let mut p = Path::default();
        links.iter().for_each(|&l| p.push(l));
        p
    }

    /// The links a packet of connection `conn` crosses in direction `dir`, moved as the
    /// simulator moves it (`first`, then `advance` to the path's end; the narrow form
    /// through the link each hop stamps on the packet), checked against direct lookups.
    fn walk(r: &Routes, conn: u32, dir: usize) -> Vec<u32> {
        let mut pkt = Packet {
            conn,
            ..Packet::default()
        };
        let mut links = vec![r.first(&mut pkt, dir)];
        while let Some(l) = r.advance(&mut pkt, dir) {
            links.push(l);
        }
        let looked_up: Vec<u32> = (0..).map_while(|h| r.link(conn, dir, h)).collect();
        assert_eq!(links, looked_up);
        links
    }

    #[test]
    fn narrow_and_wide_routes_give_the_same_links() {
        let cases = [
            (path(&[0, 5, 9]), path(&[10, 6, 1])),
            (path(&[3]), path(&[4])),
            (
                path(&[1, 2, 3, 4, 5, 6, 65_534]),
                path(&[7, 8, 9, 10, 11, 12, 13]),
            ),
        ];
        let mut narrow = Routes::new(65_534);
        let mut wide = Routes::new(65_535);
        assert!(matches!(narrow, Routes::Narrow(_)));
        assert!(matches!(wide, Routes::Wide(_)));
        for (f, r) in cases {
            narrow.push(f, r);
            wide.push(f, r);
        }
        assert!(matches!(narrow, Routes::Narrow(_)));
        for (c, (f, r)) in cases.iter().enumerate() {
            for (dir, p) in [(0, f), (1, r)] {
                assert_eq!(walk(&narrow, c as u32, dir), p.links());
                assert_eq!(walk(&wide, c as u32, dir), p.links());
            }
        }
        // A path of MAX_HOPS links does not fit the narrow form: the routes turn wide and
        // keep the stored ones.
        let long = path(&[1, 2, 3, 4, 5, 6, 7, 8]);
        narrow.push(long, path(&[9]));
        assert!(matches!(narrow, Routes::Wide(_)));
        assert_eq!(walk(&narrow, 3, 0), long.links());
        assert_eq!(walk(&narrow, 3, 1), [9]);
        for (c, (f, r)) in cases.iter().enumerate() {
            assert_eq!(walk(&narrow, c as u32, 0), f.links());
            assert_eq!(walk(&narrow, c as u32, 1), r.links());
        }
    }
}
