//! The packet: small and `Copy`, it travels by value through port FIFOs.

use crate::engine::Time;

/// Packet kinds.
pub mod kind {
    /// Data segment.
    pub const DATA: u8 = 0;
    /// Pure acknowledgement.
    pub const ACK: u8 = 1;
    /// Connection request.
    pub const SYN: u8 = 2;
    /// Connection accept.
    pub const SYNACK: u8 = 3;
}

/// Packet flag bits.
pub mod flag {
    /// ECN-capable transport.
    pub const ECT: u8 = 1;
    /// Congestion experienced (set by a switch).
    pub const CE: u8 = 2;
    /// ECN echo (set by a receiver on an ACK).
    pub const ECE: u8 = 4;
}

/// A bit of [`Packet::hop`] (whose values stay below `network::MAX_HOPS`): the simulator's
/// own mark, in a partitioned run only, that this packet's arrival at the end of the link it
/// is on was scheduled when it was admitted (not by the arrival of the packet ahead).
/// Cleared when the packet leaves the link. (The flag bits are all taken: MPTCP-L's
/// sequence tags use the high five.)
pub const HOP_WIRE_SCHEDULED: u8 = 0x80;

/// A packet in flight. Small and `Copy` (24 bytes): it travels by value through port FIFOs.
/// (A priority, as pFabric's, is not carried: the scheme gives it to a scheduled port.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Packet {
    /// Connection index.
    pub conn: u32,
    /// Data: segment number. ACK: cumulative acknowledgement (next expected segment).
    pub seq: u32,
    /// Data: time it was sent. ACK: the echoed send time of the segment that triggered it.
    pub ts: Time,
    /// Bytes on the wire (at most 65,535: see the `tcp.mss` and `tcp.header` checks).
    pub bytes: u16,
    /// The link after the one the packet is on, stamped by the simulator when paths are
    /// short and link ids narrow (so that a hop does not wait for a path lookup); else 0.
    pub next: u16,
    /// Index on the packet's path of the link it is on.
    pub hop: u8,
    /// One of [`kind`].
    pub kind: u8,
    /// Bits of [`flag`].
    pub flags: u8,
}
