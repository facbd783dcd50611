//! The plan a multipath scheme hands the event loop ([`MultipathPlan`]): how many subflows a
//! flow has, when they join, how their windows couple, and MPTCP-L's loss detection.

use crate::transport::detect::DetectParams;
use serde::{Deserialize, Serialize};

/// Largest number of subflows of one connection.
pub const MAX_SUBFLOWS: u32 = 64;

/// How the subflows of one connection share congestion control.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Coupling {
    /// LIA, RFC 6356's linked increases (MPTCP's default).
    #[default]
    Lia,
    /// Every subflow its own NewReno.
    Uncoupled,
    /// OLIA (Khalili et al., CoNEXT 2012): LIA's responsiveness without its unfairness to
    /// paths with fewer losses.
    Olia,
}

/// When the subflows after the first open.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Join {
    /// All subflows at the flow's start.
    #[default]
    Start,
    /// After the first subflow's first round trip (its handshake, or its first ACK without
    /// handshakes), as the Linux kernel joins.
    AfterRtt,
}

/// How the subflows of a flow share its data.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SubflowPlan {
    /// Subflows of the flow.
    pub subflows: u32,
    /// Every segment on every subflow (MPTCP-L's redundant scheduler) instead of each
    /// segment on one (the lowest-RTT scheduler).
    pub redundant: bool,
    /// MPTCP-L's loss detection on each subflow.
    pub detect: Option<DetectParams>,
}

/// What a multipath scheme asks of the simulator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MultipathPlan {
    /// Flows above `short_threshold` (all flows without one).
    pub long: SubflowPlan,
    /// Flows of at most this many bytes use `short` (MPTCP-L's latency-sensitive flows).
    pub short_threshold: Option<u64>,
    /// The plan of short flows.
    pub short: SubflowPlan,
    /// Congestion-control coupling.
    pub coupling: Coupling,
    /// Subflow join timing.
    pub join: Join,
}

impl MultipathPlan {
    /// The plan of a flow of `size` bytes.
    pub fn for_size(&self, size: u64) -> &SubflowPlan {
        match self.short_threshold {
            Some(t) if size <= t => &self.short,
            _ => &self.long,
        }
    }
}
