//! pFabric (Alizadeh et al., SIGCOMM 2013), as the RepFlow paper runs it: switch ports with a
//! small buffer that serve and drop by priority, and a minimal transport on the hosts.
//!
//! Every data packet carries its flow's remaining bytes (from this segment to the end of the
//! flow) as its priority; smaller is more urgent, and control packets (SYN, ACK) carry 0.
//! A port sends the packet of highest priority, except that among the packets of the flow
//! that holds it the earliest queued goes first (pFabric's rule against reordering and
//! starvation within a flow). When an arrival would overflow the buffer, the
//! lowest-priority packet of the queue, the arrival included, is dropped (the latest queued
//! among equals).
//!
//! The transport is the simulator's TCP with pFabric's settings (see [`PfabricTransport`]):
//! it starts at line rate with a window of about one bandwidth-delay product, never slow
//! starts beyond it, detects loss only by a small fixed timeout (about three RTTs) and then
//! goes back to the first unacknowledged segment.

use crate::queue::{kind, Packet};
use crate::transport::{AckInfo, CongestionControl, Window};

#[derive(Clone, Copy, Debug)]
struct Queued {
    pkt: Packet,
    /// See [`priority`].
    prio: u32,
    /// Enqueue order (ties and "earliest of the flow").
    order: u64,
}

/// The waiting packets of a pFabric port (the packet being transmitted excluded).
#[derive(Clone, Debug, Default)]
pub struct PrioQueue {
    items: Vec<Queued>,
    bytes: u64,
    next_order: u64,
    /// Buffer size, bytes (0: unlimited).
    pub limit_bytes: u64,
}

impl PrioQueue {
    /// An empty queue holding at most `limit_bytes` (0: unlimited).
    pub fn new(limit_bytes: u64) -> PrioQueue {
        PrioQueue {
            limit_bytes,
            ..PrioQueue::default()
        }
    }

    /// Packets waiting.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Nothing waits.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Bytes waiting.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Queues `pkt` with priority `prio`, then drops lowest-priority packets until the
    /// buffer fits. Returns the number of packets dropped (the arrival may be one of them).
    pub fn push(&mut self, pkt: Packet, prio: u32) -> u32 {
        self.items.push(Queued {
            pkt,
            prio,
            order: self.next_order,
        });
        self.next_order += 1;
        self.bytes += pkt.bytes as u64;
        let mut dropped = 0;
        while self.limit_bytes != 0 && self.bytes > self.limit_bytes {
            // Lowest priority = largest prio value; among equals the latest queued.
            let (i, _) = self
                .items
                .iter()
                .enumerate()
                .max_by_key(|(_, q)| (q.prio, q.order))
                .expect("over the limit means non-empty");
            let q = self.items.swap_remove(i);
            self.bytes -= q.pkt.bytes as u64;
            dropped += 1;
        }
        dropped
    }

    /// Removes the packet to transmit next: the earliest queued packet of the connection
    /// that holds the highest-priority packet.
    pub fn pop(&mut self) -> Option<Packet> {
        let best = self.items.iter().min_by_key(|q| (q.prio, q.order))?;
        let conn = best.pkt.conn;
        let (i, _) = self
            .items
            .iter()
            .enumerate()
            .filter(|(_, q)| q.pkt.conn == conn)
            .min_by_key(|(_, q)| q.order)
            .expect("the best packet's connection has a packet");
        let q = self.items.swap_remove(i);
        self.bytes -= q.pkt.bytes as u64;
        Some(q.pkt)
    }
}

/// pFabric priority of a packet of a flow of `size` bytes sent with segments of `mss`
/// payload bytes: a data segment's is the flow's bytes from its first byte to the end
/// (saturated at `u32::MAX`), a control packet's 0.
#[inline]
pub fn priority(pkt: &Packet, size: u64, mss: u32) -> u32 {
    if pkt.kind == kind::DATA {
        size.saturating_sub(pkt.seq as u64 * mss as u64)
            .min(u32::MAX as u64) as u32
    } else {
        0
    }
}

/// pFabric's window control: a fixed window (the initial window, about one BDP) that a
/// timeout shrinks to one segment and that then grows back by one segment per segment
/// acknowledged, up to the fixed window. (Loss is detected by timeout only; the sender's
/// duplicate-ACK threshold is set out of reach.)
#[derive(Clone, Copy, Debug)]
pub struct PfabricTransport {
    /// The window a flow starts with and never exceeds, segments.
    pub window: u32,
}

impl CongestionControl for PfabricTransport {
    fn name(&self) -> &'static str {
        "pfabric"
    }
    fn on_ack(&mut self, w: &mut Window, info: &AckInfo) {
        w.cwnd = (w.cwnd + info.acked).min(self.window);
    }
    fn ssthresh_after_loss(&mut self, _w: &Window, _flight: u32) -> u32 {
        self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(conn: u32, seq: u32) -> Packet {
        Packet {
            conn,
            seq,
            bytes: 1500,
            kind: kind::DATA,
            ..Packet::default()
        }
    }

    #[test]
    fn priority_is_the_remaining_bytes_of_data_and_zero_for_control() {
        // A 3,000-byte flow in segments of 1,460 bytes: 3000, 1540 and 80 bytes remain.
        let prios: Vec<u32> = (0..3).map(|s| priority(&p(0, s), 3000, 1460)).collect();
        assert_eq!(prios, [3000, 1540, 80]);
        let ack = Packet {
            kind: kind::ACK,
            ..p(0, 1)
        };
        assert_eq!(priority(&ack, 3000, 1460), 0);
        assert_eq!(priority(&p(0, 0), 1 << 40, 1460), u32::MAX);
    }

    #[test]
    fn serves_highest_priority_flow_earliest_packet_first() {
        let mut q = PrioQueue::new(0);
        q.push(p(1, 0), 9000);
        q.push(p(2, 0), 3000);
        q.push(p(1, 1), 7500);
        q.push(p(2, 1), 1500);
        // Flow 2 holds the most urgent packet (1500): its earliest packet (seq 0) first.
        assert_eq!(q.pop().map(|x| (x.conn, x.seq)), Some((2, 0)));
        assert_eq!(q.pop().map(|x| (x.conn, x.seq)), Some((2, 1)));
        assert_eq!(q.pop().map(|x| (x.conn, x.seq)), Some((1, 0)));
        assert_eq!(q.pop().map(|x| (x.conn, x.seq)), Some((1, 1)));
        assert!(q.pop().is_none());
        assert_eq!(q.bytes(), 0);
    }

    #[test]
    fn overflow_drops_the_lowest_priority_packet_arrival_included() {
        let mut q = PrioQueue::new(3 * 1500);
        q.push(p(1, 0), 5000);
        q.push(p(2, 0), 100_000);
        q.push(p(3, 0), 2000);
        // Full. A more urgent arrival pushes out the least urgent queued packet.
        assert_eq!(q.push(p(4, 0), 1000), 1);
        let mut left: Vec<u32> = Vec::new();
        let mut r = q.clone();
        while let Some(x) = r.pop() {
            left.push(x.conn);
        }
        assert_eq!(left, vec![4, 3, 1]);
        // A less urgent arrival is itself dropped.
        assert_eq!(q.push(p(5, 0), 50_000), 1);
        assert_eq!(q.len(), 3);
        assert!(!q.items.iter().any(|x| x.pkt.conn == 5));
    }

    #[test]
    fn window_is_fixed_and_regrows_after_a_timeout() {
        let mut cc = PfabricTransport { window: 8 };
        let mut w = Window {
            cwnd: 1,
            cwnd_cnt: 0,
            ssthresh: 8,
        };
        let info = AckInfo {
            acked: 3,
            ece: false,
            ack: 3,
            snd_nxt: 4,
            now: 0,
            bytes_sent: 0,
        };
        cc.on_ack(&mut w, &info);
        assert_eq!(w.cwnd, 4);
        cc.on_ack(&mut w, &info);
        cc.on_ack(&mut w, &info);
        assert_eq!(w.cwnd, 8);
    }
}
