//! Replication: a policy turns one application flow into one or more copies, each a
//! connection with explicit ports (so ECMP may place it on its own path). The first copy to
//! deliver every byte completes the flow; optionally the others are cancelled.

use crate::config::{SchemeConfig, SchemeName};
use crate::engine::Rng;
use crate::smartrep::{ReplicaTable, DEFAULT_UNIT_BYTES};

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

/// Pushes `n` copies to `dport` (source ports are filled in by HCA when `n > 1`).
fn hca_copies(n: u32, rng: &mut Rng, out: &mut Vec<CopySpec>) {
    let sport = ephemeral_port(rng);
    for _ in 0..n.max(1) {
        out.push(CopySpec {
            sport,
            dport: BASE_PORT,
        });
    }
}

/// RepFlow with HCA: flows of at most `threshold` bytes get `copies` connections on pairwise
/// link-disjoint paths (as many as exist). Under one ToR (one path) the copies keep RepFlow's
/// ports.
#[derive(Clone, Copy, Debug)]
pub struct RepFlowHca {
    /// Largest replicated flow, bytes.
    pub threshold: u64,
    /// Copies of a short flow (original included).
    pub copies: u32,
    /// Cancel losers.
    pub cancel: bool,
}

impl ReplicationPolicy for RepFlowHca {
    fn plan(&mut self, flow: &FlowSpec, rng: &mut Rng, out: &mut Vec<CopySpec>) {
        RepFlow {
            threshold: self.threshold,
            copies: self.copies,
            cancel: self.cancel,
        }
        .plan(flow, rng, out)
    }
    fn plan_paths(&mut self, flow: &FlowSpec, paths: u32, rng: &mut Rng, out: &mut Vec<CopySpec>) {
        if paths <= 1 || flow.size > self.threshold {
            self.plan(flow, rng, out);
        } else {
            hca_copies(self.copies.min(paths), rng, out);
        }
    }
    fn cancel_losers(&self) -> bool {
        self.cancel
    }
    fn probes_paths(&self) -> bool {
        true
    }
}

/// SmartRep: a flow of at most `threshold` bytes between hosts under different ToRs gets
/// `1 + table.replicas_for(size)` copies (at most one per link-disjoint path), on HCA ports.
#[derive(Clone, Debug)]
pub struct SmartRep {
    /// Largest replicated flow, bytes.
    pub threshold: u64,
    /// Replicas per size (RepNumAssign).
    pub table: ReplicaTable,
    /// Cancel losers.
    pub cancel: bool,
}

impl ReplicationPolicy for SmartRep {
    fn plan(&mut self, flow: &FlowSpec, rng: &mut Rng, out: &mut Vec<CopySpec>) {
        NoReplication.plan(flow, rng, out)
    }
    fn plan_paths(&mut self, flow: &FlowSpec, paths: u32, rng: &mut Rng, out: &mut Vec<CopySpec>) {
        if paths <= 1 || flow.size > self.threshold {
            return self.plan(flow, rng, out);
        }
        let n = (1 + self.table.replicas_for(flow.size)).min(paths);
        hca_copies(n, rng, out);
    }
    fn cancel_losers(&self) -> bool {
        self.cancel
    }
    fn probes_paths(&self) -> bool {
        true
    }
}

/// FullRep: a flow of at most `threshold` bytes gets one copy per link-disjoint equal-cost
/// path between its hosts, on HCA ports.
#[derive(Clone, Copy, Debug)]
pub struct FullRep {
    /// Largest replicated flow, bytes.
    pub threshold: u64,
    /// Cancel losers.
    pub cancel: bool,
}

impl ReplicationPolicy for FullRep {
    fn plan(&mut self, flow: &FlowSpec, rng: &mut Rng, out: &mut Vec<CopySpec>) {
        NoReplication.plan(flow, rng, out)
    }
    fn plan_paths(&mut self, flow: &FlowSpec, paths: u32, rng: &mut Rng, out: &mut Vec<CopySpec>) {
        if paths <= 1 || flow.size > self.threshold {
            return self.plan(flow, rng, out);
        }
        hca_copies(paths, rng, out);
    }
    fn cancel_losers(&self) -> bool {
        self.cancel
    }
    fn probes_paths(&self) -> bool {
        true
    }
}

/// The policy of a scheme. `table` is SmartRep's replica table (ignored by other schemes).
pub fn policy_with_table(
    s: &SchemeConfig,
    table: Option<ReplicaTable>,
) -> Box<dyn ReplicationPolicy> {
    let threshold = s.threshold.0;
    match s.name {
        SchemeName::RepflowHca => Box::new(RepFlowHca {
            threshold,
            copies: s.copies,
            cancel: s.cancel,
        }),
        SchemeName::Smartrep => Box::new(SmartRep {
            threshold,
            table: table.unwrap_or(ReplicaTable {
                unit_bytes: DEFAULT_UNIT_BYTES,
                extra: Vec::new(),
            }),
            cancel: s.cancel,
        }),
        SchemeName::Fullrep => Box::new(FullRep {
            threshold,
            cancel: s.cancel,
        }),
        _ => policy_for(s),
    }
}

/// The policy of a scheme.
pub fn policy_for(s: &SchemeConfig) -> Box<dyn ReplicationPolicy> {
    match s.name {
        SchemeName::Tcp
        | SchemeName::Dctcp
        | SchemeName::Pfabric
        | SchemeName::L2dct
        | SchemeName::FaDctcp => Box::new(NoReplication),
        SchemeName::Repflow | SchemeName::RepflowDctcp => Box::new(RepFlow {
            threshold: s.threshold.0,
            copies: s.copies,
            cancel: s.cancel,
        }),
        SchemeName::RepflowHca | SchemeName::Smartrep | SchemeName::Fullrep => {
            policy_with_table(s, None)
        }
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
