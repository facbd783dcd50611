//! What the threads of a threaded run hand each other at a window's end: a [`Batch`] per
//! pair of parts, and each replica's [`Exchange`] state.

use crate::engine::{Anc, Event, Time};
use crate::network::FiveTuple;
use crate::packet::Packet;

/// What one part sends another at a window's end.
#[derive(Default)]
pub(super) struct Batch {
    /// Events for the other part's queue: time, place, event.
    pub(super) events: Vec<(Time, Anc, Event)>,
    /// Packets for the other part's copies of links: link, arrival time, packet.
    pub(super) wire: Vec<(u32, Time, Packet)>,
    /// Receipt-log entries: connection, count, then the entries; repeated.
    pub(super) sack: Vec<u32>,
    /// HCA choices: flow, connection, its five-tuple, copies the flow keeps.
    pub(super) hca: Vec<(u32, u32, FiveTuple, u8)>,
    /// Multipath subflows' data-segment assignments: connection, count, then the data
    /// segments; repeated.
    pub(super) dsn: Vec<u32>,
    /// MPTCP-L reports: connection, then the report (tag, from, to).
    pub(super) reports: Vec<(u32, (u8, u32, u32))>,
}

impl Batch {
    pub(super) fn clear(&mut self) {
        self.events.clear();
        self.wire.clear();
        self.sack.clear();
        self.hca.clear();
        self.dsn.clear();
        self.reports.clear();
    }
}

/// A threaded run's per-replica exchange state (in [`Parts`](super::parts::Parts)).
pub(super) struct Exchange {
    /// Per part, the packets admitted here to links whose far end it is.
    pub(super) wire_out: Vec<Vec<(u32, Time, Packet)>>,
    /// Connections whose receiver (here) logged segments or wrote MPTCP-L reports in this
    /// window, for a sender in another part (repeats allowed).
    pub(super) sack_dirty: Vec<u32>,
    /// Per connection, how much of its receiver's log was sent to its sender's part.
    pub(super) sack_sent: Vec<u32>,
    /// Per connection, how many of its receiver's MPTCP-L reports were sent.
    pub(super) reports_sent: Vec<u32>,
    /// Subflows whose sender (here) assigned data segments in this window, for a receiver
    /// in another part (repeats allowed).
    pub(super) dsn_dirty: Vec<u32>,
    /// Per connection, how many of its sender's assignments were sent.
    pub(super) dsn_sent: Vec<u32>,
    /// HCA choices made here in this window (see [`Batch::hca`]).
    pub(super) hca_out: Vec<(u32, u32, FiveTuple, u8)>,
    /// Per part, a batch to swap into its mailbox (empty between windows).
    pub(super) out: Vec<Batch>,
}
