//! Packets and output ports: a FIFO port computes every admitted packet's departure at
//! admission (a FIFO, work-conserving server fed in time order needs no "transmission done"
//! event), and keeps the packets in flight on its link in a FIFO of which only the head is
//! in the global event queue.
//!
//! Admission is decided by a [`QueueDiscipline`] from the port's current backlog (packets and
//! bytes waiting, the packet in service excluded): DropTail here; ECN threshold marking plugs
//! in the same way. Disciplines that reorder packets (pFabric) need a scheduled port and are
//! added with their scheme.

use crate::engine::Time;
use crate::network::TxClock;
use std::collections::VecDeque;

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

/// A packet in flight. Small and `Copy`: it travels by value through port FIFOs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Packet {
    /// Connection index.
    pub conn: u32,
    /// Data: segment number. ACK: cumulative acknowledgement (next expected segment).
    pub seq: u32,
    /// Data: time it was sent. ACK: the echoed send time of the segment that triggered it.
    pub ts: Time,
    /// Bytes on the wire.
    pub bytes: u32,
    /// Scheme-specific priority (pFabric: remaining bytes); 0 otherwise.
    pub prio: u32,
    /// Index of the next link on the packet's path.
    pub hop: u8,
    /// One of [`kind`].
    pub kind: u8,
    /// Bits of [`flag`].
    pub flags: u8,
}

/// What a discipline decides for an arriving packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Queue it (the discipline may have marked it).
    Admit,
    /// Drop it.
    Drop,
}

/// Admission policy of a FIFO output port.
pub trait QueueDiscipline {
    /// Decides on `pkt` given the backlog waiting ahead of it (the packet in service
    /// excluded). May set flags on the packet (ECN marking).
    fn admit(&mut self, pkt: &mut Packet, waiting_packets: u32, waiting_bytes: u64) -> Verdict;
}

/// DropTail: drop an arrival when the backlog has reached the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DropTail {
    /// Limit in packets (0: no packet limit).
    pub limit_packets: u32,
    /// Limit in bytes (0: no byte limit). A packet is admitted if it fits entirely.
    pub limit_bytes: u64,
}

impl QueueDiscipline for DropTail {
    #[inline]
    fn admit(&mut self, pkt: &mut Packet, waiting_packets: u32, waiting_bytes: u64) -> Verdict {
        if self.limit_packets != 0 && waiting_packets >= self.limit_packets {
            return Verdict::Drop;
        }
        if self.limit_bytes != 0 && waiting_bytes + pkt.bytes as u64 > self.limit_bytes {
            return Verdict::Drop;
        }
        Verdict::Admit
    }
}

/// The disciplines a FIFO port can run (static dispatch on the hot path).
#[derive(Clone, Debug)]
pub enum Qdisc {
    /// Plain DropTail.
    DropTail(DropTail),
}

impl QueueDiscipline for Qdisc {
    #[inline]
    fn admit(&mut self, pkt: &mut Packet, waiting_packets: u32, waiting_bytes: u64) -> Verdict {
        match self {
            Qdisc::DropTail(d) => d.admit(pkt, waiting_packets, waiting_bytes),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct InFlight {
    /// When the packet has fully arrived at the far end of the link.
    arrival: Time,
    /// When its serialization starts.
    start: Time,
    /// Bytes admitted to this port up to and including this packet.
    cum_bytes: u64,
    pkt: Packet,
}

/// A FIFO output port and its link.
#[derive(Clone, Debug)]
pub struct Port {
    clock: TxClock,
    delay: Time,
    qdisc: Qdisc,
    /// When the last admitted packet finishes serialization.
    busy_until: Time,
    /// Admitted packets not yet arrived at the far end, in order.
    fifo: VecDeque<InFlight>,
    /// Index into `fifo` of the first packet whose serialization had not started at the last
    /// admission (a lower bound; advanced lazily).
    first_waiting: usize,
    cum_bytes: u64,
    /// Packets dropped here.
    pub drops: u64,
    /// Largest backlog seen, packets.
    pub max_backlog: u32,
    /// Packets that crossed this link.
    pub packets: u64,
}

impl Port {
    /// A port sending at `clock`'s rate onto a link of propagation delay `delay`.
    pub fn new(clock: TxClock, delay: Time, qdisc: Qdisc) -> Port {
        Port {
            clock,
            delay,
            qdisc,
            busy_until: 0,
            fifo: VecDeque::new(),
            first_waiting: 0,
            cum_bytes: 0,
            drops: 0,
            max_backlog: 0,
            packets: 0,
        }
    }

    /// Backlog waiting at `now` (packets, bytes), the packet in service excluded.
    fn backlog(&mut self, now: Time) -> (u32, u64) {
        let len = self.fifo.len();
        let mut i = self.first_waiting.min(len);
        while i < len && self.fifo[i].start <= now {
            i += 1;
        }
        self.first_waiting = i;
        if i == len {
            return (0, 0);
        }
        let before = if i == 0 {
            self.fifo[0].cum_bytes - self.fifo[0].pkt.bytes as u64
        } else {
            self.fifo[i - 1].cum_bytes
        };
        ((len - i) as u32, self.cum_bytes - before)
    }

    /// Offers `pkt` at `now`. On admission returns `Some(true)` if the link was idle (so the
    /// caller must schedule an arrival event for [`Port::head_arrival`]), `Some(false)`
    /// otherwise; `None` if the packet was dropped.
    #[inline]
    pub fn enqueue(&mut self, mut pkt: Packet, now: Time) -> Option<bool> {
        let (wp, wb) = self.backlog(now);
        if self.qdisc.admit(&mut pkt, wp, wb) == Verdict::Drop {
            self.drops += 1;
            return None;
        }
        if wp + 1 > self.max_backlog && self.busy_until > now {
            self.max_backlog = wp + 1;
        }
        let start = self.busy_until.max(now);
        let finish = start + self.clock.tx(pkt.bytes);
        self.busy_until = finish;
        self.cum_bytes += pkt.bytes as u64;
        let was_empty = self.fifo.is_empty();
        self.fifo.push_back(InFlight {
            arrival: finish + self.delay,
            start,
            cum_bytes: self.cum_bytes,
            pkt,
        });
        Some(was_empty)
    }

    /// Arrival time of the packet at the head of the link, if any.
    #[inline]
    pub fn head_arrival(&self) -> Option<Time> {
        self.fifo.front().map(|f| f.arrival)
    }

    /// Removes the head packet (it has arrived at the far end).
    #[inline]
    pub fn pop_arrived(&mut self) -> Packet {
        let f = self.fifo.pop_front().expect("pop on an empty link");
        self.first_waiting = self.first_waiting.saturating_sub(1);
        self.packets += 1;
        f.pkt
    }

    /// Packets admitted and not yet arrived.
    pub fn in_system(&self) -> usize {
        self.fifo.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Rate;

    fn port(limit: u32) -> Port {
        Port::new(
            TxClock::new(Rate(1_000_000_000)),
            1_000_000,
            Qdisc::DropTail(DropTail {
                limit_packets: limit,
                limit_bytes: 0,
            }),
        )
    }

    fn pkt() -> Packet {
        Packet {
            bytes: 1500,
            ..Packet::default()
        }
    }

    #[test]
    fn droptail_never_exceeds_its_limit_and_counts_drops() {
        let mut p = port(5);
        let mut admitted = 0;
        for _ in 0..20 {
            if p.enqueue(pkt(), 0).is_some() {
                admitted += 1;
            }
        }
        // One in service + 5 waiting.
        assert_eq!(admitted, 6);
        assert_eq!(p.drops, 14);
        assert!(p.max_backlog <= 5 + 1);
        // After one serialization time (12 us) one more fits.
        assert!(p.enqueue(pkt(), 12_000_000).is_some());
        assert!(p.enqueue(pkt(), 12_000_000).is_none());
    }

    #[test]
    fn departures_are_back_to_back() {
        let mut p = port(100);
        assert_eq!(p.enqueue(pkt(), 0), Some(true));
        assert_eq!(p.enqueue(pkt(), 0), Some(false));
        assert_eq!(p.head_arrival(), Some(12_000_000 + 1_000_000));
        p.pop_arrived();
        assert_eq!(p.head_arrival(), Some(24_000_000 + 1_000_000));
    }

    #[test]
    fn byte_limit() {
        let mut p = Port::new(
            TxClock::new(Rate(1_000_000_000)),
            0,
            Qdisc::DropTail(DropTail {
                limit_packets: 0,
                limit_bytes: 3000,
            }),
        );
        let n = (0..10).filter(|_| p.enqueue(pkt(), 0).is_some()).count();
        assert_eq!(n, 3); // one in service, two (3000 B) waiting
    }
}
