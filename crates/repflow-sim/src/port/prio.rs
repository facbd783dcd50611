//! The waiting packets of a priority-scheduled port (pFabric's switch queue): the most urgent
//! packet is sent first, except that among the packets of the flow that holds it the earliest
//! queued goes first (pFabric's rule against reordering and starvation within a flow). When
//! an arrival would overflow the buffer, the least urgent packet of the queue, the arrival
//! included, is dropped (the latest queued among equals).

use crate::packet::Packet;

#[derive(Clone, Copy, Debug)]
struct Queued {
    pkt: Packet,
    /// Smaller is more urgent (the scheme decides it, e.g. pFabric: remaining bytes).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::kind;

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
}
