//! Glue: builds the network from a [`Config`], runs the workload through the replication
//! layer and TCP, and collects per-flow records.

use crate::arrivals::{load_cdf, Arrivals};
use crate::config::{Config, ConfigError};
use crate::engine::{Anc, Event, EventQueue, Place, Rng, Time};
use crate::hca::{disjoint_paths, paths_collide, Hca};
use crate::metrics::Counters;
use crate::network::{FiveTuple, NodeKind, Path, Topology};
use crate::packet::{kind, Packet};
use crate::port::Port;
use crate::replication::{CopySpec, FlowSpec, ReplicationPolicy};
use crate::routes::{prefetch, Routes};
use crate::scheme::{CcFactory, Context, MultipathPlan, PriorityFn};
use crate::transport::{Receiver, Sender, TcpParams};
use crate::units::PS_PER_SEC;
use crate::workload::Arrival;
use std::sync::Arc;
use std::time::Instant;
use thiserror::Error;

mod multipath;
mod output;
#[cfg(feature = "parallelism-stats")]
pub mod parallelism;
mod partition;
mod threads;
pub use output::{ConnRecord, RunOutput};
pub use partition::{PartitionPlan, Partitioning};
pub use threads::{run_threaded, ThreadReport};

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

const EV_RTO: u64 = 1;
const EV_DELACK: u64 = 2;
const EV_FLOW: u64 = 3;
/// A flow whose copies waited for HCA probes starts them.
const EV_HCA: u64 = 4;
/// A copy completed at its receiver: its source learns it (SmartRep's HCA frees the copy's
/// port). Sent from the receiver, it takes the ACK path's propagation delay.
const EV_RELEASE: u64 = 5;
/// A flow completed at its receiver: the source stops this copy (or subflow). Sent like
/// [`EV_RELEASE`].
const EV_CANCEL: u64 = 6;

/// One end of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Sender,
    Receiver,
}

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
/// reads few cache lines. The multipath flag, which every delivery reads first, sits in the
/// sender's last line, and the receiver starts on a line of its own after it: at the end
/// the flag took a line of its own per delivery, one more than now for an ACK and for a
/// data segment alike (the study's costliest TCP point: +3 to +5 % events/s in its slow
/// phase, −1 to −2 % for the whole point, outputs identical).
#[repr(C, align(64))]
struct Conn {
    snd: Sender,
    /// A subflow of a multipath connection ([`multipath`]).
    multipath: bool,
    copy: u8,
    rcv: Receiver,
    wire_bytes: u64,
    rto_at: Option<Time>,
    delack_at: Option<Time>,
    flow: u32,
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
    /// Index of the flow's connection level in `World::mp` (multipath schemes), else
    /// [`NO_MP`].
    mp: u32,
}

/// Links from which the run loop prefetches three events ahead instead of one.
const DEEP_PREFETCH_LINKS: u32 = 16_384;

/// Links from which runs with priority-scheduled ports always take the three-event pipeline,
/// and other runs take it while busy ([`DEEP_PENDING`]).
const BUSY_PREFETCH_LINKS: u32 = 4_096;

/// Networks of fewer links than [`DEEP_PREFETCH_LINKS`] (but at least
/// [`BUSY_PREFETCH_LINKS`]) take the three-event pipeline while at least this many events
/// are pending: their state then outgrows the caches as k = 32's does (the study's web
/// search at load 0.8 holds 27,000 to 83,000 in its slow phase; data mining at 0.8 at most
/// 15,000, web search at 0.2 at most 20,000, k = 16's bench a few thousand). Checked every
/// 65,536 events.
const DEEP_PENDING: usize = 24_576;

/// `FlowState::mp` of a flow that is not multipath.
const NO_MP: u32 = u32::MAX;

/// A run's state. `P`: a partitioned run ([`partition`]), whose queue `q` is the part
/// being run's.
struct World<'a, const P: bool = false> {
    cfg: &'a Config,
    /// Read-only: a threaded run's replicas share one.
    topo: Arc<Topology>,
    ports: Vec<Port>,
    tcp: TcpParams,
    conns: Vec<Conn>,
    /// `[data path, ACK path]` of every connection, apart from `conns` for cache locality.
    paths: Routes,
    flows: Vec<FlowState>,
    /// Near events: ids `0..links` are packet arrivals at the end of a link, ids
    /// `links..2 * links` a scheduled port's transmit completions.
    q: EventQueue,
    /// `q`'s ids, slot width and horizon (a partitioned run makes one queue per part).
    q_shape: (usize, u64, u64),
    /// Some port is priority-scheduled (pFabric): the run loop prefetches its boxed state
    /// and queue ahead (see `prefetch_pipeline` and `prefetch_next_port_state`).
    sched_ports: bool,
    now: Time,
    out: Vec<Packet>,
    arrivals: Arrivals,
    /// The next arrival, scheduled (its flow's id is `arrivals_scheduled - 1`), with the
    /// time its flow event is due and that event's place.
    pending: Option<(Arrival, Time, Anc)>,
    /// Arrivals drawn so far.
    arrivals_scheduled: u64,
    rng_ports: Rng,
    arrivals_done: bool,
    end_arrivals: Time,
    counters: Counters,
    copies_buf: Vec<CopySpec>,
    /// SmartRep's HCA: the source ports it chose for a flow's copies.
    hca_ports: Vec<u16>,
    /// What the scheme built: congestion control, replication policy, probe state.
    scheme: SchemeParts,
    /// Connection level of multipath flows.
    mp: Vec<multipath::MpFlow>,
    /// A partitioned run's parts (`P`), else `None`.
    part: Option<Box<partition::Parts>>,
    /// Time and place of the last flow event a partitioned run drew.
    gen_prev: Option<(Time, Anc)>,
    #[cfg(feature = "parallelism-stats")]
    parallelism: parallelism::ParallelismStats,
}

/// The parts of [`crate::scheme::Parts`] the run keeps after building its ports and TCP
/// parameters.
struct SchemeParts {
    cc: CcFactory,
    policy: Box<dyn ReplicationPolicy>,
    hca: Option<Hca>,
    priority: Option<PriorityFn>,
    multipath: Option<MultipathPlan>,
}

impl<'a, const P: bool> World<'a, P> {
    fn new(cfg: &'a Config) -> Result<World<'a, P>, SimError> {
        World::with_topology(cfg, Arc::new(build_topology(cfg)))
    }

    /// [`World::new`] on `topo`, built from `cfg` already.
    fn with_topology(cfg: &'a Config, topo: Arc<Topology>) -> Result<World<'a, P>, SimError> {
        let cdf = load_cdf(cfg).map_err(SimError::Input)?;
        let parts = cfg.scheme.build(&Context {
            tcp: &cfg.tcp,
            topo: &topo,
            cdf: &cdf,
        });
        let ports: Vec<Port> = topo
            .links
            .iter()
            .map(|l| parts.port(l, topo.nodes[l.from as usize] == NodeKind::Host, &cfg.queue))
            .collect();
        // Wheel slots narrow enough that a slot's list stays short. Arrivals come at most one
        // per link per full packet's time, so the density of near events grows with the
        // number of links: slots are a full packet's time on the fastest link divided by a
        // third of the links (at least 256; the queue widens them if the horizon would not
        // fit its wheel). At k = 32 (49,152 links) a 256th held ~30 events at load 0.5
        // during arrivals, and keeping each list in order walked it on most pushes (27 % of
        // the run's time); at k = 16 a twelfth of the links still cost the paper-scale run
        // 18 % against a third. Only the speed depends on this, never the order of events.
        let fastest = topo.links.iter().map(|l| l.rate.bps()).max().unwrap_or(1);
        let full = (cfg.tcp.mss + cfg.tcp.header) as u64;
        let div = (topo.links.len() as u64 / 3).max(256);
        let slot = crate::units::Rate(fastest).tx_time(full) / div;
        // Near events (arrivals at the end of a link, pFabric transmit completions) lie at
        // most a full packet's transmission and a propagation delay ahead: a wheel just that
        // wide turns through few, cache-warm slots.
        let horizon = topo
            .links
            .iter()
            .map(|l| l.rate.tx_time(full) + l.delay)
            .max()
            .unwrap_or(0);
        let sched_ports = ports.iter().any(|p| p.is_scheduled());
        let (arrivals, end_arrivals) = Arrivals::new(cfg, &topo, cdf);
        let topo_links = topo.links.len();
        let priority = parts.priority();
        #[cfg(feature = "parallelism-stats")]
        let parallelism = parallelism::ParallelismStats::new(&topo, cfg);
        let mut w = World {
            cfg,
            topo,
            ports,
            tcp: parts.tcp,
            conns: Vec::new(),
            paths: Routes::new(topo_links),
            flows: Vec::new(),
            q: EventQueue::new(2 * topo_links, slot, horizon),
            q_shape: (2 * topo_links, slot, horizon),
            sched_ports,
            now: 0,
            out: Vec::with_capacity(64),
            arrivals,
            pending: None,
            arrivals_scheduled: 0,
            rng_ports: Rng::new(cfg.seed, 2),
            arrivals_done: false,
            end_arrivals,
            counters: Counters::default(),
            copies_buf: Vec::new(),
            hca_ports: Vec::new(),
            scheme: SchemeParts {
                cc: parts.cc,
                policy: parts.policy,
                hca: parts.hca,
                priority,
                multipath: parts.multipath,
            },
            mp: Vec::new(),
            part: None,
            gen_prev: None,
            #[cfg(feature = "parallelism-stats")]
            parallelism,
        };
        if !P {
            w.schedule_next_arrival();
        }
        Ok(w)
    }

    /// Draws the next arrival and schedules its flow event. The chain of flow events is
    /// independent of the network: each is scheduled by the one before as its first push
    /// (push index 0; the first before any event), at its arrival time or the previous
    /// flow's if earlier, so its time and place follow from the arrivals alone (a
    /// partitioned run draws them ahead).
    fn schedule_next_arrival(&mut self) {
        match self.draw_arrival() {
            Some(a) => {
                let id = self.arrivals_scheduled - 1;
                let t = a.time.max(self.now);
                let anc = self.q.take_anc();
                self.q.push_timer_as(t, ev(EV_FLOW, id as u32), anc);
                self.pending = Some((a, t, anc));
            }
            _ => {
                self.q.take_anc();
                self.arrivals_done = true;
            }
        }
    }

    /// The next arrival, counted, unless the arrivals (or `workload.max_flows`) are
    /// exhausted.
    fn draw_arrival(&mut self) -> Option<Arrival> {
        let capped = self
            .cfg
            .workload
            .max_flows
            .is_some_and(|m| self.arrivals_scheduled >= m);
        let next = self.arrivals.next(self.end_arrivals);
        let a = next.filter(|_| !capped)?;
        self.arrivals_scheduled += 1;
        Some(a)
    }

    /// Flow event `id`: the flow's arrival (drawn when its event was scheduled) becomes a
    /// flow. (A partitioned run admitted it when it drew it, and scheduled the next.)
    fn on_flow(&mut self, id: u32) {
        if P {
            self.q.take_anc();
            self.launch_flow(id);
            return;
        }
        let (a, t, _) = self.pending.take().expect("a flow event has its arrival");
        self.schedule_next_arrival();
        let admitted = self.admit_flow(a, t);
        debug_assert_eq!(admitted, id);
        self.launch_flow(id);
    }

    /// Records flow `arrival` (its event due at `t`) with its copies, their five-tuples and
    /// connections: all that depends on the arrivals alone (the replication policy's port
    /// draws included), so that flows and connections are numbered in arrival order however
    /// a run is partitioned. Returns the flow's id.
    fn admit_flow(&mut self, a: Arrival, t: Time) -> u32 {
        let (src, dst, size) = (a.src, a.dst, a.size);
        let id = self.flows.len() as u64;
        let spec = FlowSpec { id, src, dst, size };
        if self.scheme.multipath.is_some() {
            self.admit_mp_flow(spec, t);
            return id as u32;
        }
        self.copies_buf.clear();
        let paths = disjoint_paths(&self.topo, src, dst);
        self.scheme
            .policy
            .plan_paths(&spec, paths, &mut self.rng_ports, &mut self.copies_buf);
        let first_conn = self.conns.len() as u32;
        let n = self.copies_buf.len();
        self.push_flow(spec, t, first_conn, n as u8, NO_MP);
        for i in 0..n {
            let c = self.copies_buf[i];
            let tuple = FiveTuple {
                src,
                dst,
                sport: c.sport,
                dport: c.dport,
                proto: 6,
            };
            let conn_id = self.conns.len() as u32;
            let conn = self.new_conn(conn_id, id as u32, i as u8, tuple, size);
            self.paths.push(conn.fwd, conn.rev);
            self.conns.push(conn);
        }
        id as u32
    }

    /// A connection of `size` bytes, copy `copy` of flow `flow`, on five-tuple `t`.
    fn new_conn(&self, conn_id: u32, flow: u32, copy: u8, t: FiveTuple, size: u64) -> Conn {
        let (fwd, rev) = (self.topo.path(t), self.topo.path(t.reversed()));
        let snd = Sender::new(conn_id, size, &self.tcp, (self.scheme.cc)(t.dport));
        let total = snd.total_segments();
        Conn {
            flow,
            copy,
            tuple: t,
            fwd,
            rev,
            snd,
            rcv: Receiver::new(total, self.tcp.sack),
            rto_at: None,
            delack_at: None,
            wire_bytes: 0,
            completed_at: None,
            multipath: false,
        }
    }

    /// Starts flow `id` at its source: SmartRep's HCA may replace its copies' source ports
    /// (and drop copies beyond the link-disjoint paths it finds), then the copies start, at
    /// once or after the probes.
    fn launch_flow(&mut self, id: u32) {
        let f = &self.flows[id as usize];
        if f.mp != NO_MP {
            self.launch_mp_flow(id);
            return;
        }
        let (first_conn, spec) = (f.first_conn, f.spec);
        let hca_wait = self.choose_hca_ports(id);
        let n = self.flows[id as usize].copies as u32;
        self.counters.extra_copy_bytes += spec.size * (n as u64 - 1);
        self.counters.connections += n as u64;
        if hca_wait == 0 {
            for c in first_conn..first_conn + n {
                self.start_conn(c);
            }
        }
        if n > 1 {
            self.count_collisions(first_conn, n);
        }
        if hca_wait > 0 {
            self.q.push_timer(self.now + hca_wait, ev(EV_HCA, id));
        }
    }

    /// Counts a new flow, due at `t`, and records its state (`mp`: its connection level, or
    /// [`NO_MP`]).
    fn push_flow(&mut self, spec: FlowSpec, t: Time, first_conn: u32, copies: u8, mp: u32) {
        self.counters.flows += 1;
        self.counters.flow_bytes += spec.size;
        if t < self.end_arrivals {
            self.counters.offered_load += spec.size as f64;
        }
        self.flows.push(FlowState {
            spec,
            start: t,
            first_conn,
            copies,
            finish: None,
            winner: -1,
            mp,
        });
    }

    fn start_conn(&mut self, conn_id: u32) {
        let tcp = self.tcp;
        let now = self.now;
        let mut out = std::mem::take(&mut self.out);
        self.conns[conn_id as usize].snd.start(&tcp, now, &mut out);
        self.out = out;
        self.flush(conn_id, End::Sender);
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
    /// the per-packet path); drops copies beyond the link-disjoint paths found (their
    /// connections stay numbered but never start). Returns how long the flow waits for its
    /// probes.
    fn choose_hca_ports(&mut self, id: u32) -> Time {
        let f = &self.flows[id as usize];
        let (first, n, spec) = (f.first_conn, f.copies as u32, f.spec);
        let Some(hca) = self.scheme.hca.as_mut() else {
            return 0;
        };
        if n < 2 || !self.scheme.policy.probes_paths() {
            return 0;
        }
        let dport = self.conns[first as usize].tuple.dport;
        let Some(wait) = hca.choose(
            &self.topo,
            spec.src,
            spec.dst,
            dport,
            n,
            &mut self.hca_ports,
        ) else {
            return 0;
        };
        let kept = self.hca_ports.len().max(1) as u32;
        for i in 0..self.hca_ports.len() as u32 {
            let c = first + i;
            let mut t = self.conns[c as usize].tuple;
            t.sport = self.hca_ports[i as usize];
            t.dport = dport;
            self.retuple_conn(id, c, t);
            if P {
                self.note_hca(id, c, t, kept as u8);
            }
        }
        self.flows[id as usize].copies = kept as u8;
        wait
    }

    /// Gives connection `conn` of flow `flow` five-tuple `t`: a fresh connection, on that
    /// tuple's paths (SmartRep's HCA, before the connection starts).
    fn retuple_conn(&mut self, flow: u32, conn: u32, t: FiveTuple) {
        let copy = self.conns[conn as usize].copy;
        let size = self.flows[flow as usize].spec.size;
        let c = self.new_conn(conn, flow, copy, t, size);
        self.paths.set(conn, c.fwd, c.rev);
        self.conns[conn as usize] = c;
    }

    /// Counts a replicated flow, and a collision when two of its copies share a
    /// switch-to-switch link.
    fn count_collisions(&mut self, first: u32, n: u32) {
        self.counters.replicated_flows += 1;
        let conns = &self.conns[first as usize..(first + n) as usize];
        let collide = (0..conns.len()).any(|i| {
            (i + 1..conns.len())
                .any(|j| paths_collide(&self.topo, conns[i].fwd.links(), conns[j].fwd.links()))
        });
        if collide {
            self.counters.copy_collisions += 1;
        }
    }

    /// Injects the packets one end of a connection emitted and re-arms that end's timer (the
    /// sender's retransmission timer, the receiver's delayed ACK): an event at one end
    /// changes nothing at the other.
    fn flush(&mut self, conn_id: u32, end: End) {
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
        match end {
            End::Sender => {
                if let Some(d) = c.snd.deadline() {
                    if c.rto_at.is_none_or(|a| d < a) {
                        c.rto_at = Some(d.max(now));
                        self.q.push_timer(d.max(now), ev(EV_RTO, conn_id));
                    }
                }
            }
            End::Receiver => {
                if let Some(d) = c.rcv.delack_deadline {
                    if c.delack_at.is_none_or(|a| d < a) {
                        c.delack_at = Some(d.max(now));
                        self.q.push_timer(d.max(now), ev(EV_DELACK, conn_id));
                    }
                }
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
        if P {
            self.enqueue_fifo_part::<FAST>(link, pkt);
            return;
        }
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
        let priority = self.scheme.priority.expect("a scheme with priority ports");
        let prio = priority(&pkt, c.snd.size(), self.tcp.mss);
        let done_id = self.tx_done_id(link);
        let lazy = self.lazy_completions(link);
        let place = self.q.last_place();
        if lazy {
            self.catch_up(link, self.now, place);
        }
        let port = &mut self.ports[link as usize];
        let r = port.sched_enqueue(pkt, prio, self.now, place, lazy);
        if P {
            if r.started.is_some() {
                self.wire_admitted(link, place);
            }
        } else if r.head_arrival {
            let t = port.head_arrival().expect("just sent");
            self.q.push_near(t, link);
        }
        if r.started.is_some() {
            // The completion's place in the order; it becomes an event only if a packet
            // comes to wait for it.
            let port = &mut self.ports[link as usize];
            port.sched_set_tx_place(self.q.place(done_id));
        }
        if let Some((t, place)) = r.tx_done {
            self.q.push_near_at(t, done_id, place);
        }
        if r.dropped > 0 {
            self.count_drops(link, r.dropped as u64);
        }
    }

    /// Near-event id of link `link`'s transmit completion (arrivals use the link id).
    fn tx_done_id(&self, link: u32) -> u32 {
        self.ports.len() as u32 + link
    }

    /// Whether scheduled port `link` decides its transmit completions late, at the next
    /// event that sees the port ([`Port::sched_catch_up`]), instead of as events of their
    /// own: in a sequential run, on a link with a propagation delay. (A partitioned run
    /// keeps the events: the arrival that would decide them may be another part's. The
    /// `tie-stats` build keeps them too: it records every event's ancestry.) Either way the
    /// run is the same, bit for bit; each completion decided late counts as an event.
    #[inline]
    fn lazy_completions(&self, link: u32) -> bool {
        !P && !cfg!(feature = "tie-stats") && self.ports[link as usize].sched_lazy_ok()
    }

    /// A packet arrives at the end of link `link`, whose port is off the fast path: if the
    /// port is scheduled and decides its completions late, those before this event are
    /// decided first (the next packet on the wire may be one of them).
    #[cold]
    #[inline(never)]
    fn catch_up_before_arrival(&mut self, link: u32) {
        if self.ports[link as usize].is_scheduled() && self.lazy_completions(link) {
            self.catch_up(link, self.now, self.q.last_place());
        }
    }

    /// Decides scheduled port `link`'s completions before `now` and `place`
    /// ([`Port::sched_catch_up`]), counted as events; returns the time of the last, if any.
    #[inline]
    fn catch_up(&mut self, link: u32, now: Time, place: Place) -> Option<Time> {
        let done_id = self.tx_done_id(link);
        let (n, last) = self.ports[link as usize].sched_catch_up(now, place, done_id);
        self.counters.events += n;
        (n > 0).then_some(last)
    }

    /// At the end of a sequential run, whose events from `limit` on were not run: the
    /// completions before `limit` that no later event decided are decided now, as their
    /// events would have been; the run's time moves to the last of them.
    fn catch_up_at_end(&mut self, limit: Time) {
        if self.scheme.priority.is_none() {
            return;
        }
        for link in 0..self.ports.len() as u32 {
            if !self.ports[link as usize].is_scheduled() || !self.lazy_completions(link) {
                continue;
            }
            if let Some(last) = self.catch_up(link, limit, ((0, 0), 0)) {
                self.now = self.now.max(last);
            }
        }
    }

    /// A scheduled port finished a transmission: it starts its next packet.
    fn on_tx_done(&mut self, link: u32) {
        let done_id = self.tx_done_id(link);
        let place = self.q.last_place();
        let port = &mut self.ports[link as usize];
        if let Some((_, wire_was_empty)) = port.sched_tx_done(self.now) {
            if P {
                self.wire_admitted(link, place);
            } else if wire_was_empty {
                let t = port.head_arrival().expect("just sent");
                self.q.push_near(t, link);
            }
            let port = &mut self.ports[link as usize];
            port.sched_set_tx_place(self.q.place(done_id));
            if let Some((t, place)) = port.sched_claim_tx_event() {
                self.q.push_near_at(t, done_id, place);
            }
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
        if !P && !self.ports[link as usize].is_fast() {
            self.catch_up_before_arrival(link);
        }
        let port = &mut self.ports[link as usize];
        let mut pkt = port.pop_arrived();
        // The next packet's arrival is this event's first push, whether or not a packet is
        // there yet: the places of its other pushes do not depend on that (in a partitioned
        // run the packet may have been admitted by a queue not yet run to this time).
        let anc = self.q.take_anc();
        if P {
            // Unless its admission scheduled it already (see `wire_admitted`).
            pkt.hop &= !crate::packet::HOP_WIRE_SCHEDULED;
            if let Some(h) = port.head_packet() {
                if h.hop & crate::packet::HOP_WIRE_SCHEDULED == 0 {
                    let t = port.head_arrival().expect("a head packet");
                    self.q.push_near_taken(t, link, anc);
                }
            }
        } else if let Some(t) = port.head_arrival() {
            self.q.push_near_taken(t, link, anc);
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
        if c.multipath {
            self.out = out;
            self.mp_arrive(conn_id, &pkt, forward);
            return true;
        }
        let end = if forward {
            let completed = c.rcv.on_packet(&tcp, &pkt, now, &mut out);
            self.out = out;
            if P {
                self.note_for_other_end(conn_id, End::Receiver);
            }
            if completed {
                self.copy_completed(conn_id);
            }
            End::Receiver
        } else {
            c.snd.on_packet(&tcp, &pkt, c.rcv.sack_log(), now, &mut out);
            self.out = out;
            End::Sender
        };
        self.flush(conn_id, end);
        true
    }

    /// A packet of a multipath subflow reached its end host.
    #[cold]
    #[inline(never)]
    fn mp_arrive(&mut self, conn_id: u32, pkt: &Packet, forward: bool) {
        let tcp = self.tcp;
        let now = self.now;
        let mut out = std::mem::take(&mut self.out);
        if forward {
            let c = &mut self.conns[conn_id as usize];
            c.rcv.on_packet(&tcp, pkt, now, &mut out);
            self.out = out;
            if P {
                self.note_for_other_end(conn_id, End::Receiver);
            }
            self.flush(conn_id, End::Receiver);
            self.mp_data(conn_id, pkt);
        } else {
            self.mp_couple(conn_id);
            let c = &mut self.conns[conn_id as usize];
            let una = c.snd.snd_una();
            c.snd.on_packet(&tcp, pkt, c.rcv.sack_log(), now, &mut out);
            if let Some((from, to)) = c.snd.take_report(&c.rcv, pkt.flags) {
                c.snd.on_loss_report(&tcp, from, to, now, &mut out);
            }
            self.out = out;
            self.flush(conn_id, End::Sender);
            self.mp_acked(conn_id, una);
        }
    }

    fn copy_completed(&mut self, conn_id: u32) {
        self.conns[conn_id as usize].completed_at = Some(self.now);
        if self.scheme.hca.is_some() {
            self.send_to_source(conn_id, EV_RELEASE);
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
        if self.scheme.policy.cancel_losers() && f.copies > 1 {
            let (first, n) = (f.first_conn, f.copies as u32);
            for other in first..first + n {
                if other != conn_id {
                    self.send_to_source(other, EV_CANCEL);
                }
            }
        }
    }

    /// Frees connection `conn`'s source port in SmartRep's HCA table (if the scheme has one).
    fn release_port(&mut self, conn: u32) {
        if let Some(h) = self.scheme.hca.as_mut() {
            h.release(self.conns[conn as usize].tuple);
        }
    }

    /// Tells connection `conn`'s source, from its receiver, that something happened there
    /// (event `tag`): it learns it the ACK path's propagation delay later, as from the ACK
    /// that would carry it. (Nothing at a distance acts at once: what happens at one host
    /// depends only on what reached it.)
    fn send_to_source(&mut self, conn: u32, tag: u64) {
        let c = &self.conns[conn as usize];
        let delay: Time = c
            .rev
            .links()
            .iter()
            .map(|&l| self.topo.links[l as usize].delay)
            .sum();
        let (t, src) = (self.now + delay, c.tuple.src);
        self.push_timer_at(t, ev(tag, conn), src);
    }

    /// The source of connection `conn` learns that its flow completed: it stops the copy
    /// (and frees its HCA port), or, for a subflow, the whole multipath connection.
    fn on_cancel(&mut self, conn: u32) {
        self.conns[conn as usize].snd.cancel();
        self.release_port(conn);
        if self.conns[conn as usize].multipath {
            self.mp_stop(conn);
        }
    }

    fn on_rto(&mut self, conn_id: u32) {
        let now = self.now;
        let c = &mut self.conns[conn_id as usize];
        if c.rto_at != Some(now) {
            return; // superseded
        }
        c.rto_at = None;
        match c.snd.deadline() {
            None => {}
            Some(d) if d > now => {
                c.rto_at = Some(d);
                self.q.push_timer(d, ev(EV_RTO, conn_id));
            }
            Some(_) => {
                let tcp = self.tcp;
                let mut out = std::mem::take(&mut self.out);
                let timed_out = c.snd.on_timer(&tcp, now, &mut out);
                let multipath = c.multipath;
                self.out = out;
                self.flush(conn_id, End::Sender);
                if multipath && timed_out {
                    self.mp_timed_out(conn_id);
                }
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
                if P {
                    // An MPTCP-L report may leave with this ACK.
                    self.note_for_other_end(conn_id, End::Receiver);
                }
                self.flush(conn_id, End::Receiver);
            }
        }
    }

    /// Prefetches for the likely next three events, each stage one event after the one
    /// before: the third's port line and wheel node; the second's head packet (its port
    /// line was asked for one event ago); the first's next port, both its lines, and route
    /// (its head packet was asked for one event ago). Nothing here changes state.
    ///
    /// The next port's second line (the accumulators an admission adds to, and the limits it
    /// reads when its bounds do not decide) was a miss of its own at k = 32: cachegrind (2 MiB
    /// last level) counted 0.75 last-level misses per hop on it. Asking for it too: k = 32 at
    /// 10 Gb/s, with its drain and its loaded network alone, −3 % each (medians of seven
    /// interleaved rounds). Ports are 128 bytes aligned to 64, so the two lines take two
    /// requests. Not with priority-scheduled ports, whose pipeline asks for more already:
    /// the second request cost pFabric 2 % (k = 16, web search at 0.8, 100 ms of arrivals).
    #[inline(always)]
    fn prefetch_pipeline(&self, h1: u32, h2: u32, h3: u32) {
        prefetch(self.ports.as_ptr().wrapping_add(h3 as usize));
        self.q.prefetch_node(h3);
        if let Some(p) = self.ports.get(h2 as usize) {
            prefetch(p.head_ptr());
            if self.sched_ports {
                p.prefetch_extra();
            }
        }
        if let Some(p) = self.ports.get(h1 as usize) {
            if self.sched_ports {
                p.prefetch_queue();
            }
            if let Some(pkt) = p.head_packet() {
                let next = self.ports.as_ptr().wrapping_add(pkt.next as usize);
                prefetch(next);
                if !self.sched_ports {
                    prefetch(next.cast::<u8>().wrapping_add(64));
                }
                self.paths.prefetch(pkt.conn);
            }
        }
    }

    /// With priority-scheduled ports, before packet arrival `e` runs: asks for the boxed
    /// state of the port its packet goes to next, which the admission reads first (that
    /// port's line was asked for one event ago, so the box's address is at hand; the
    /// pipeline's own stages cannot reach it). Read-only; any event is accepted.
    #[inline(always)]
    fn prefetch_next_port_state(&self, e: Event) {
        if let Event::Near(id) = e {
            if let Some(h) = self.ports.get(id as usize).and_then(|p| p.head_packet()) {
                if let Some(next) = self.ports.get(h.next as usize) {
                    next.prefetch_extra();
                }
            }
        }
    }

    /// The smallest link delay: the least time between an event at one node and its
    /// effect at another (0 if a link has none).
    fn lookahead(&self) -> Time {
        self.topo.links.iter().map(|l| l.delay).min().unwrap_or(0)
    }

    /// Before an event: prefetches for the likely next event(s) (`deep`: the three-stage
    /// pipeline) and returns the likely next event's port (a hint: any id, even none, is
    /// harmless).
    #[inline(always)]
    fn prefetch_next(&self, deep: bool) -> u32 {
        if deep {
            let [h1, h2, h3] = self.q.hints();
            self.prefetch_pipeline(h1, h2, h3);
            h1
        } else {
            let hint = self.q.hint();
            prefetch(self.ports.as_ptr().wrapping_add(hint as usize));
            self.q.prefetch_node(hint);
            hint
        }
    }

    /// After an event: the likely next event's port line was asked for before it and has had
    /// its time to arrive: asks for that port's head packet's entry now (the hint taken
    /// before this event's pushes: a hint need not be right), so that the next arrival finds
    /// both (its ring is a separate allocation, cold at scale). The deep pipeline does this
    /// itself.
    #[inline(always)]
    fn prefetch_next_head(&self, deep: bool, hint: u32) {
        if !deep {
            if let Some(p) = self.ports.get(hint as usize) {
                prefetch(p.head_ptr());
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
            EV_FLOW => self.on_flow(id),
            EV_HCA => self.start_probed_flow(id),
            EV_RELEASE => self.release_port(id),
            EV_CANCEL => self.on_cancel(id),
            _ => unreachable!("unknown event tag"),
        }
    }

    /// Hands the event just popped, with its node, to the tie statistics.
    #[cfg(feature = "tie-stats")]
    fn count_tie(&mut self, links: u32, e: Event) {
        use parallelism::At;
        let conn = |x: u64| &self.conns[x as u32 as usize];
        let at = match e {
            Event::Near(id) if id < links => At::LinkEnd(id),
            Event::Near(id) => At::LinkStart(id - links),
            Event::Timer(x) if x >> 32 == EV_RTO => At::Node(conn(x).tuple.src),
            Event::Timer(x) if x >> 32 == EV_DELACK => At::Node(conn(x).tuple.dst),
            Event::Timer(_) => return,
        };
        self.parallelism.on_event(&self.q.ancestry, at);
    }

    /// Where the run stands at simulated time `now`, after `events` events.
    fn progress(&self, now: Time, events: u64) -> Progress {
        Progress {
            sim_time: now as f64 / PS_PER_SEC as f64,
            duration: self.end_arrivals as f64 / PS_PER_SEC as f64,
            flows_started: self.counters.flows,
            flows_finished: self.counters.flows_finished,
            events,
        }
    }

    /// Handles one event (of `links` links' network); returns whether it may have ended
    /// the run.
    #[inline(always)]
    fn step(&mut self, links: u32, e: Event) -> bool {
        match e {
            Event::Near(id) if id < links => self.on_arrive(id),
            Event::Near(id) => {
                self.on_tx_done(id - links);
                true
            }
            Event::Timer(x) => {
                self.on_other_event(x);
                true
            }
        }
    }

    fn run(&mut self, progress: &mut dyn FnMut(&Progress) -> bool) -> Result<(), SimError> {
        if P {
            return self.run_partitioned(progress);
        }
        let t_end = self.end_arrivals + self.cfg.workload.drain.ps();
        // Events at `limit` or later are not run: past the drain, or past the end of the
        // lookahead window in which the last flow completed (a partitioned run sees that
        // only at a window's end: ending there too gives both the same counters).
        let mut limit = t_end.saturating_add(1);
        let lookahead = self.lookahead();
        let mut last_report = Instant::now();
        let mut events: u64 = 0;
        let links = self.ports.len() as u32;
        // Large networks (the ports' hot lines alone past 1 MiB, half this machine's L2) wait
        // on memory at every stage of a hop: prefetch for the next three events, in a
        // pipeline. Measured on the loaded phase: +20 % at k = 32 (49,152 links), nothing
        // at k = 16 (6,144), −5 % at k = 8 (768), which keep the one-event prefetch. Runs
        // with priority-scheduled ports (pFabric) take it from 4,096 links: its stages also
        // ask for a port's boxed state and then its queue, which the port's next pop reads
        // (a whole pFabric point at k = 16, web search at load 0.8: −10 %; at k = 8, whose
        // state fits the caches, it cost 20 %), and each event asks for the boxed state of
        // the port its packet goes to next (+6 % events/s on that point's slow phase).
        // Other networks of 4,096 links or more take it while many events are pending
        // (`DEEP_PENDING`): the costliest TCP point of the study (k = 16, web search at 0.8)
        // −4 to −6 %, DCTCP's slow phase +3 to +8 % events/s; on short queues it cost (data
        // mining at 0.8: +3 % with the pipeline throughout), so those keep the one-event
        // prefetch. Prefetches only read: the choice never changes a result.
        let always_deep =
            links >= DEEP_PREFETCH_LINKS || (self.sched_ports && links >= BUSY_PREFETCH_LINKS);
        let next_port_state = always_deep && self.sched_ports;
        let mut deep = always_deep;
        while let Some((t, e)) = self.q.pop() {
            if t >= limit {
                break;
            }
            self.now = t;
            events += 1;
            #[cfg(feature = "tie-stats")]
            self.count_tie(links, e);
            if next_port_state {
                self.prefetch_next_port_state(e);
            }
            let hint = self.prefetch_next(deep);
            // Packet arrivals are nearly all events. A packet forwarded by a switch cannot
            // end the run: the end test is skipped.
            #[cfg(feature = "parallelism-stats")]
            if let Event::Near(id) = e {
                if id < links {
                    self.parallelism.on_arrival(t, id);
                }
            }
            let may_end = self.step(links, e);
            self.prefetch_next_head(deep, hint);
            if may_end && self.arrivals_done && self.counters.flows_finished == self.counters.flows
            {
                limit = limit.min(window_end(t, lookahead));
            }
            if events & 0xFFFF == 0 {
                if !always_deep && links >= BUSY_PREFETCH_LINKS {
                    deep = self.q.len() >= DEEP_PENDING;
                }
                if last_report.elapsed().as_millis() >= 200 {
                    last_report = Instant::now();
                    if !progress(&self.progress(self.now, events)) {
                        return Err(SimError::Cancelled);
                    }
                }
            }
        }
        self.catch_up_at_end(limit);
        // (Completions decided late are counted there already.)
        self.counters.events += events;
        Ok(())
    }
}

/// The network `cfg` describes, with its routing hash salted by its seed.
fn build_topology(cfg: &Config) -> Topology {
    Topology::build(&cfg.topology, cfg.routing.hash, cfg.seed)
}

/// End of the lookahead window holding time `t`: windows are `lookahead` long from time 0
/// (`lookahead` 0: `t` itself).
fn window_end(t: Time, lookahead: Time) -> Time {
    t.checked_div(lookahead).map_or(t, |w| (w + 1) * lookahead)
}

/// Runs one simulation. `progress` is called now and then; returning `false` cancels the run.
pub fn run(
    config: &Config,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Result<RunOutput, SimError> {
    config.validate()?;
    let wall = Instant::now();
    let mut world: World<'_, false> = World::new(config)?;
    tracing::info!(
        hosts = world.topo.n_hosts,
        links = world.topo.links.len(),
        "simulation starting"
    );
    world.run(progress)?;
    Ok(world.output(config, wall))
}

/// Runs one simulation as [`run`] does, with the network split into parts that each keep
/// their own event queue and are run one lookahead window (the smallest link delay) at a
/// time, the events one part schedules for another handed over at the window's end: the
/// schedule of a parallel engine, on one thread. The records, counters and statistics are
/// those of [`run`], bit for bit, whatever the plan.
pub fn run_partitioned(
    config: &Config,
    plan: &PartitionPlan,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Result<RunOutput, SimError> {
    config.validate()?;
    let wall = Instant::now();
    let mut world: World<'_, true> = World::new(config)?;
    world.partition(plan)?;
    tracing::info!(
        hosts = world.topo.n_hosts,
        links = world.topo.links.len(),
        parts = world.part.as_ref().map_or(0, |p| p.n),
        "partitioned simulation starting"
    );
    world.run(progress)?;
    Ok(world.output(config, wall))
}
