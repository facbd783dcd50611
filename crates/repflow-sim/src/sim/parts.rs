//! How a partitioned run splits the network ([`Partitioning`], [`PartitionPlan`]) and the
//! parts' own state ([`Parts`]): per-part queues, inboxes, the node → part maps.

use super::exchange::Exchange;
use crate::config::sections::TopologyKind;
use crate::config::Config;
use crate::engine::{Anc, Event, EventQueue, Time};
use crate::network::Topology;

/// How a partitioned run splits the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Partitioning {
    /// `n` parts: a fat-tree's pod `p` (its hosts, edge and aggregation switches) in part
    /// `p mod n`, its core switches dealt round-robin; in another topology, node `i` in
    /// part `i mod n`.
    Pods(u32),
    /// Every node a part of its own (the finest split).
    Nodes,
}

/// A partitioned run's plan ([`super::run_partitioned`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionPlan {
    /// How the network is split.
    pub partitioning: Partitioning,
    /// Run the parts of each window in reverse order. The results do not depend on the
    /// order (that is what the tests check with this).
    pub reverse: bool,
}

/// A partitioned run's parts.
pub(super) struct Parts {
    /// Number of parts.
    pub(super) n: u32,
    /// Node → its part.
    pub(super) node_part: Vec<u32>,
    /// Link → the part of its far end (where its arrivals are handled).
    pub(super) link_end_part: Vec<u32>,
    /// Each part's queue; the part being run has swapped its own into `World::q`. (A
    /// threaded replica's is moved into `World::q` for good, and this is empty.)
    pub(super) queues: Vec<EventQueue>,
    /// The part being run.
    pub(super) cur: u32,
    /// End of the window being run: every event handed to another part is at or after it.
    pub(super) window_end: Time,
    /// Per part, the events other parts scheduled for it in this window.
    pub(super) inbox: Vec<Vec<(Time, Anc, Event)>>,
    /// Per link, the arrival time and arrival-event place of the packet admitted last.
    pub(super) wire_last: Vec<Option<(Time, Anc)>>,
    /// Order in which a window runs the parts.
    pub(super) order: Vec<u32>,
    /// A threaded run's exchange state ([`super::threads`]): this replica runs only part
    /// `cur`, and what it owes other parts leaves at each window's end. `None` on one
    /// thread.
    pub(super) threaded: Option<Box<Exchange>>,
}

impl Parts {
    /// Hands `e`, at `t` and scheduled with `anc`, to part `p`.
    pub(super) fn send(&mut self, p: u32, t: Time, anc: Anc, e: Event) {
        assert!(
            t >= self.window_end,
            "an event for another part inside the lookahead window"
        );
        self.inbox[p as usize].push((t, anc, e));
    }
}

/// Node → pod of a fat-tree (its core switches dealt round-robin), or `None` for another
/// topology. Nodes are numbered as the builder makes them: hosts, edge, aggregation and
/// core switches.
pub(super) fn fat_tree_pods(topo: &Topology, cfg: &Config) -> Option<(Vec<u32>, usize)> {
    let t = &cfg.topology;
    if t.kind != TopologyKind::FatTree {
        return None;
    }
    let k = t.k as usize;
    let half = k / 2;
    let hpe = t.fat_tree_hosts_per_edge() as usize;
    let hosts = k * half * hpe;
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
    Some((pod, k))
}
