//! The connection-level state of one multipath flow ([`MpFlow`]): data-level sequence space,
//! scheduler cursors, reinjection, reassembly.

use crate::scheme::SubflowPlan;
use std::collections::VecDeque;

/// A set of segment numbers.
#[derive(Debug, Default)]
pub(super) struct Bits(pub(super) Vec<u64>);

impl Bits {
    pub(super) fn new(n: u32) -> Bits {
        Bits(vec![0; (n as usize).div_ceil(64)])
    }
    pub(super) fn has(&self, i: u32) -> bool {
        self.0[(i / 64) as usize] & (1 << (i % 64)) != 0
    }
    /// Sets bit `i`; returns whether it was clear.
    pub(super) fn set(&mut self, i: u32) -> bool {
        let w = &mut self.0[(i / 64) as usize];
        let new = *w & (1 << (i % 64)) == 0;
        *w |= 1 << (i % 64);
        new
    }
}

/// The connection level of one multipath flow.
pub(super) struct MpFlow {
    pub(super) plan: SubflowPlan,
    /// Data segments of the flow.
    pub(super) total: u32,
    /// Next data segment never given to a subflow (lowest-RTT scheduler).
    pub(super) next_new: u32,
    /// Data segments to send again on other subflows (after a subflow's timeout).
    pub(super) reinject: VecDeque<u32>,
    /// Data segments a subflow has had acknowledged (the sender's DATA_ACK view).
    pub(super) acked: Bits,
    /// Data segments the receiver holds, and how many.
    pub(super) held: Bits,
    pub(super) held_count: u32,
    /// Redundant scheduler: each subflow's next data segment.
    pub(super) cursors: Vec<u32>,
    /// Every subflow has been started.
    pub(super) joined: bool,
    /// The source has learnt that the flow completed: nothing more is scheduled.
    pub(super) stopped: bool,
}
