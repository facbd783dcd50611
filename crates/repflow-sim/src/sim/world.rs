//! A run's state ([`World`]): its connections, flows, ports and queue, the event tags,
//! and how it is built from a [`Config`].

use super::error::SimError;
use super::mp_flow::MpFlow;
#[cfg(feature = "parallelism-stats")]
use super::parallelism;
use super::parts::Parts;
use crate::arrivals::{load_cdf, Arrivals};
use crate::config::Config;
use crate::engine::{Anc, EventQueue, Rng, Time};
use crate::hca::Hca;
use crate::metrics::Counters;
use crate::network::{FiveTuple, NodeKind, Path, Topology};
use crate::packet::{kind, Packet};
use crate::port::Port;
use crate::replication::{CopySpec, FlowSpec, ReplicationPolicy};
use crate::routes::Routes;
use crate::scheme::{CcFactory, Context, MultipathPlan, PriorityFn};
use crate::transport::{Receiver, Sender, TcpParams};
use crate::workload::Arrival;
use std::sync::Arc;

pub(super) const EV_RTO: u64 = 1;
pub(super) const EV_DELACK: u64 = 2;
pub(super) const EV_FLOW: u64 = 3;
/// A flow whose copies waited for HCA probes starts them.
pub(super) const EV_HCA: u64 = 4;
/// A copy completed at its receiver: its source learns it (SmartRep's HCA frees the copy's
/// port). Sent from the receiver, it takes the ACK path's propagation delay.
pub(super) const EV_RELEASE: u64 = 5;
/// A flow completed at its receiver: the source stops this copy (or subflow). Sent like
/// [`EV_RELEASE`].
pub(super) const EV_CANCEL: u64 = 6;

/// One end of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum End {
    Sender,
    Receiver,
}

/// Whether a packet of kind `k` takes its connection's data path (data segments and SYNs;
/// ACKs and SYN-ACKs take the ACK path): the data-path kinds are the even ones, so this is
/// one bit test.
#[inline]
pub(super) fn on_data_path(k: u8) -> bool {
    const _: () = assert!(
        kind::DATA & 1 == 0 && kind::SYN & 1 == 0 && kind::ACK & 1 == 1 && kind::SYNACK & 1 == 1
    );
    k & 1 == 0
}

#[inline]
pub(super) fn ev(tag: u64, id: u32) -> u64 {
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
pub(super) struct Conn {
    pub(super) snd: Sender,
    /// A subflow of a multipath connection ([`multipath`](super::multipath)).
    pub(super) multipath: bool,
    pub(super) copy: u8,
    pub(super) rcv: Receiver,
    pub(super) wire_bytes: u64,
    pub(super) rto_at: Option<Time>,
    pub(super) delack_at: Option<Time>,
    pub(super) flow: u32,
    pub(super) tuple: FiveTuple,
    pub(super) completed_at: Option<Time>,
    pub(super) fwd: Path,
    pub(super) rev: Path,
}

pub(super) struct FlowState {
    pub(super) spec: FlowSpec,
    pub(super) start: Time,
    pub(super) first_conn: u32,
    pub(super) copies: u8,
    pub(super) finish: Option<Time>,
    pub(super) winner: i32,
    /// Index of the flow's connection level in `World::mp` (multipath schemes), else
    /// [`NO_MP`].
    pub(super) mp: u32,
}

/// Links from which the run loop prefetches three events ahead instead of one.
pub(super) const DEEP_PREFETCH_LINKS: u32 = 16_384;

/// Links from which runs with priority-scheduled ports always take the three-event pipeline,
/// and other runs take it while busy ([`DEEP_PENDING`]).
pub(super) const BUSY_PREFETCH_LINKS: u32 = 4_096;

/// Networks of fewer links than [`DEEP_PREFETCH_LINKS`] (but at least
/// [`BUSY_PREFETCH_LINKS`]) take the three-event pipeline while at least this many events
/// are pending: their state then outgrows the caches as k = 32's does (the study's web
/// search at load 0.8 holds 27,000 to 83,000 in its slow phase; data mining at 0.8 at most
/// 15,000, web search at 0.2 at most 20,000, k = 16's bench a few thousand). Checked every
/// 65,536 events.
pub(super) const DEEP_PENDING: usize = 24_576;

/// `FlowState::mp` of a flow that is not multipath.
pub(super) const NO_MP: u32 = u32::MAX;

/// A run's state. `P`: a partitioned run ([`partition`](super::partition)), whose queue `q`
/// is the part being run's.
pub(super) struct World<'a, const P: bool = false> {
    pub(super) cfg: &'a Config,
    /// Read-only: a threaded run's replicas share one.
    pub(super) topo: Arc<Topology>,
    pub(super) ports: Vec<Port>,
    pub(super) tcp: TcpParams,
    pub(super) conns: Vec<Conn>,
    /// `[data path, ACK path]` of every connection, apart from `conns` for cache locality.
    pub(super) paths: Routes,
    pub(super) flows: Vec<FlowState>,
    /// Near events: ids `0..links` are packet arrivals at the end of a link, ids
    /// `links..2 * links` a scheduled port's transmit completions.
    pub(super) q: EventQueue,
    /// `q`'s ids, slot width and horizon (a partitioned run makes one queue per part).
    pub(super) q_shape: (usize, u64, u64),
    /// Some port is priority-scheduled (pFabric): the run loop prefetches its boxed state
    /// and queue ahead (see `prefetch_pipeline` and `prefetch_next_port_state`).
    pub(super) sched_ports: bool,
    pub(super) now: Time,
    pub(super) out: Vec<Packet>,
    pub(super) arrivals: Arrivals,
    /// The next arrival, scheduled (its flow's id is `arrivals_scheduled - 1`), with the
    /// time its flow event is due and that event's place.
    pub(super) pending: Option<(Arrival, Time, Anc)>,
    /// Arrivals drawn so far.
    pub(super) arrivals_scheduled: u64,
    pub(super) rng_ports: Rng,
    pub(super) arrivals_done: bool,
    pub(super) end_arrivals: Time,
    pub(super) counters: Counters,
    pub(super) copies_buf: Vec<CopySpec>,
    /// SmartRep's HCA: the source ports it chose for a flow's copies.
    pub(super) hca_ports: Vec<u16>,
    /// What the scheme built: congestion control, replication policy, probe state.
    pub(super) scheme: SchemeParts,
    /// Connection level of multipath flows.
    pub(super) mp: Vec<MpFlow>,
    /// A partitioned run's parts (`P`), else `None`.
    pub(super) part: Option<Box<Parts>>,
    /// Time and place of the last flow event a partitioned run drew.
    pub(super) gen_prev: Option<(Time, Anc)>,
    #[cfg(feature = "parallelism-stats")]
    pub(super) parallelism: parallelism::ParallelismStats,
}

/// The parts of [`crate::scheme::Parts`] the run keeps after building its ports and TCP
/// parameters.
pub(super) struct SchemeParts {
    pub(super) cc: CcFactory,
    pub(super) policy: Box<dyn ReplicationPolicy>,
    pub(super) hca: Option<Hca>,
    pub(super) priority: Option<PriorityFn>,
    pub(super) multipath: Option<MultipathPlan>,
}

impl<'a, const P: bool> World<'a, P> {
    pub(super) fn new(cfg: &'a Config) -> Result<World<'a, P>, SimError> {
        World::with_topology(cfg, Arc::new(build_topology(cfg)))
    }

    /// [`World::new`] on `topo`, built from `cfg` already.
    pub(super) fn with_topology(
        cfg: &'a Config,
        topo: Arc<Topology>,
    ) -> Result<World<'a, P>, SimError> {
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
}

/// The network `cfg` describes, with its routing hash salted by its seed.
pub(super) fn build_topology(cfg: &Config) -> Topology {
    Topology::build(&cfg.topology, cfg.routing.hash, cfg.seed)
}

/// End of the lookahead window holding time `t`: windows are `lookahead` long from time 0
/// (`lookahead` 0: `t` itself).
pub(super) fn window_end(t: Time, lookahead: Time) -> Time {
    t.checked_div(lookahead).map_or(t, |w| (w + 1) * lookahead)
}
