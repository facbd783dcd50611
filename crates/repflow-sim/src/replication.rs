//! Replication: a policy turns one application flow into one or more copies, each a
//! connection with explicit ports (so ECMP may place it on its own path). The first copy to
//! deliver every byte completes the flow; optionally the others are cancelled.

use crate::engine::Rng;

/// Well-known port the simulated servers listen on; copy `i` of RepFlow uses `BASE_PORT + i`.
pub const BASE_PORT: u16 = 5000;

/// A flow as the replication layer sees it.
#[derive(Clone, Copy, Debug)]
pub struct FlowSpec {
    /// Flow id.
    pub id: u64,
    /// Source host.
    pub src: u32,
    /// Destination host.
    pub dst: u32,
    /// Application bytes.
    pub size: u64,
}

/// One copy of a flow: the ports of its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopySpec {
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
}

/// Decides how many copies a flow gets and which ports they use.
pub trait ReplicationPolicy {
    /// The copies of `flow` (at least one; copy 0 is the original).
    fn plan(&mut self, flow: &FlowSpec, rng: &mut Rng, out: &mut Vec<CopySpec>);
    /// Whether losing copies are stopped once one completes.
    fn cancel_losers(&self) -> bool;
    /// The copies of `flow` when the hosts are joined by `paths` link-disjoint equal-cost
    /// paths (1 under the same ToR); the default ignores `paths`.
    fn plan_paths(&mut self, flow: &FlowSpec, paths: u32, rng: &mut Rng, out: &mut Vec<CopySpec>) {
        let _ = paths;
        self.plan(flow, rng, out);
    }
    /// Whether the source ports of a replicated flow's copies are chosen by SmartRep's HCA
    /// (the simulator overwrites the planned source ports with probed ones).
    fn probes_paths(&self) -> bool {
        false
    }
}

/// Draws an ephemeral source port (Linux's default range 32768–60999).
pub fn ephemeral_port(rng: &mut Rng) -> u16 {
    32768 + rng.below(60999 - 32768 + 1) as u16
}

/// No replication: one connection per flow.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoReplication;

impl ReplicationPolicy for NoReplication {
    fn plan(&mut self, _flow: &FlowSpec, rng: &mut Rng, out: &mut Vec<CopySpec>) {
        out.push(CopySpec {
            sport: ephemeral_port(rng),
            dport: BASE_PORT,
        });
    }
    fn cancel_losers(&self) -> bool {
        false
    }
}

/// RepFlow: flows of at most `threshold` bytes get `copies` connections sharing the source
/// port, copy `i` sending to destination port `BASE_PORT + i` (the paper's implementation
/// keeps the source port and changes the destination port).
#[derive(Clone, Copy, Debug)]
pub struct RepFlow {
    /// Largest replicated flow, bytes.
    pub threshold: u64,
    /// Copies of a short flow (original included).
    pub copies: u32,
    /// Cancel losers.
    pub cancel: bool,
}

impl ReplicationPolicy for RepFlow {
    fn plan(&mut self, flow: &FlowSpec, rng: &mut Rng, out: &mut Vec<CopySpec>) {
        let sport = ephemeral_port(rng);
        let n = if flow.size <= self.threshold {
            self.copies
        } else {
            1
        };
        for i in 0..n {
            out.push(CopySpec {
                sport,
                dport: BASE_PORT + i as u16,
            });
        }
    }
    fn cancel_losers(&self) -> bool {
        self.cancel
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repflow_replicates_only_short_flows_with_distinct_dports() {
        let mut p = RepFlow {
            threshold: 100_000,
            copies: 2,
            cancel: false,
        };
        let mut rng = Rng::new(1, 1);
        let mut out = Vec::new();
        let f = FlowSpec {
            id: 0,
            src: 0,
            dst: 1,
            size: 100_000,
        };
        p.plan(&f, &mut rng, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].sport, out[1].sport);
        assert_eq!(out[1].dport, out[0].dport + 1);
        out.clear();
        p.plan(&FlowSpec { size: 100_001, ..f }, &mut rng, &mut out);
        assert_eq!(out.len(), 1);
    }
}
