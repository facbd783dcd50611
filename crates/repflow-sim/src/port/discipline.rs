//! What a FIFO port admits and marks: DropTail limits, and DCTCP's ECN threshold marking on
//! top of them. A port applies the limits itself (most admissions are decided on bounds of
//! the backlog, see [`super::Port`]); the marking rule is read only by ports that mark.

use crate::packet::{flag, Packet};

/// DropTail: drop an arrival when the backlog has reached the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DropTail {
    /// Limit in packets (0: no packet limit).
    pub limit_packets: u32,
    /// Limit in bytes (0: no byte limit). A packet is admitted if it fits entirely.
    pub limit_bytes: u64,
}

/// DropTail with ECN threshold marking (DCTCP): an ECN-capable arrival that finds at least
/// `k_packets` packets (or, if `k_bytes` is non-zero, at least `k_bytes` bytes) waiting is
/// marked CE. Packets that are not ECN-capable are never marked (nor dropped early).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EcnThreshold {
    /// The buffer limit.
    pub limit: DropTail,
    /// Marking threshold K in packets (used when `k_bytes` is 0).
    pub k_packets: u32,
    /// Marking threshold K in bytes (0: use `k_packets`).
    pub k_bytes: u64,
}

impl EcnThreshold {
    /// Marks an admitted `pkt` that found `waiting_packets` packets of `waiting_bytes` bytes
    /// ahead of it (the packet in service excluded).
    #[inline]
    pub fn mark(&self, pkt: &mut Packet, waiting_packets: u32, waiting_bytes: u64) {
        if self.k_bytes != 0 {
            Self::mark_if(pkt, waiting_bytes >= self.k_bytes);
        } else {
            Self::mark_packets(pkt, waiting_packets, self.k_packets);
        }
    }

    /// [`EcnThreshold::mark`] by a packet threshold `k_packets`.
    #[inline]
    pub fn mark_packets(pkt: &mut Packet, waiting_packets: u32, k_packets: u32) {
        Self::mark_if(pkt, waiting_packets >= k_packets);
    }

    #[inline]
    fn mark_if(pkt: &mut Packet, over: bool) {
        if over && pkt.flags & flag::ECT != 0 {
            pkt.flags |= flag::CE;
        }
    }
}

/// The discipline of a FIFO port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Qdisc {
    /// Plain DropTail.
    DropTail(DropTail),
    /// DropTail with ECN threshold marking.
    Ecn(EcnThreshold),
}

impl Qdisc {
    /// The buffer limits.
    pub fn limits(&self) -> DropTail {
        match self {
            Qdisc::DropTail(d) => *d,
            Qdisc::Ecn(e) => e.limit,
        }
    }

    /// The marking rule, if the port marks.
    pub fn marking(&self) -> Option<EcnThreshold> {
        match self {
            Qdisc::DropTail(_) => None,
            Qdisc::Ecn(e) => Some(*e),
        }
    }
}
