//! The waiting packets of a priority-scheduled port (pFabric's switch queue): the most urgent
//! packet is sent first, except that among the packets of the flow that holds it the earliest
//! queued goes first (pFabric's rule against reordering and starvation within a flow). When
//! an arrival would overflow the buffer, the least urgent packet of the queue, the arrival
//! included, is dropped (the latest queued among equals).

use crate::packet::Packet;
use std::hint::select_unpredictable;

/// The waiting packets of a pFabric port (the packet being transmitted excluded), kept as
/// parallel arrays so that the searches read only what they compare: a packed key per
/// packet (priority in the high 32 bits, enqueue order in the low 32: smaller is served
/// first, larger dropped first) and its connection. The packets themselves are read only
/// when one leaves.
#[derive(Clone, Debug, Default)]
pub struct PrioQueue {
    /// `prio << 32 | order`: the order (enqueue order, for ties and "earliest of the flow")
    /// counts from 0 and is renumbered before it would pass `u32::MAX`
    /// ([`PrioQueue::renumber`]), which keeps every comparison as with an unbounded count.
    keys: Vec<u64>,
    conns: Vec<u32>,
    pkts: Vec<Packet>,
    bytes: u64,
    next_order: u32,
    /// Buffer size, bytes (0: unlimited).
    pub limit_bytes: u64,
}

/// Index of the first of `keys` (not empty) that no other `beats`, without a branch on the
/// comparisons.
#[inline(always)]
fn arg_best(keys: &[u64], beats: impl Fn(u64, u64) -> bool) -> usize {
    let (mut best, mut bk) = (0, keys[0]);
    for (j, &k) in keys.iter().enumerate().skip(1) {
        let b = beats(k, bk);
        best = select_unpredictable(b, j, best);
        bk = select_unpredictable(b, k, bk);
    }
    best
}

impl PrioQueue {
    /// An empty queue holding at most `limit_bytes` (0: unlimited).
    pub fn new(limit_bytes: u64) -> PrioQueue {
        PrioQueue {
            limit_bytes,
            ..PrioQueue::default()
        }
    }

    /// Asks the CPU for what a pop reads: every line of the keys and the connections (up to
    /// 16 packets' worth of lines) and the last packet (moved into the gap).
    #[inline(always)]
    pub fn prefetch(&self) {
        let n = self.keys.len().min(16);
        let keys = self.keys.as_ptr();
        for i in (0..n).step_by(8) {
            crate::engine::prefetch(keys.wrapping_add(i));
        }
        if n > 0 {
            crate::engine::prefetch(keys.wrapping_add(n - 1));
            crate::engine::prefetch(self.conns.as_ptr());
            crate::engine::prefetch(self.conns.as_ptr().wrapping_add(n - 1));
            crate::engine::prefetch(self.pkts.as_ptr().wrapping_add(self.pkts.len() - 1));
        }
    }

    /// Packets waiting.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Nothing waits.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Bytes waiting.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Renumbers the waiting packets' orders 0, 1, … in their present order, so that the
    /// count can go on (the orders only ever compare among waiting packets).
    #[cold]
    fn renumber(&mut self) {
        let mut idx: Vec<usize> = (0..self.keys.len()).collect();
        idx.sort_unstable_by_key(|&i| self.keys[i] as u32);
        for (rank, i) in idx.into_iter().enumerate() {
            self.keys[i] = (self.keys[i] & !0xffff_ffff) | rank as u64;
        }
        self.next_order = self.keys.len() as u32;
    }

    /// Removes waiting packet `i`.
    #[inline]
    fn remove(&mut self, i: usize) -> Packet {
        self.keys.swap_remove(i);
        self.conns.swap_remove(i);
        let pkt = self.pkts.swap_remove(i);
        self.bytes -= pkt.bytes as u64;
        pkt
    }

    /// Queues `pkt` with priority `prio`, then drops lowest-priority packets until the
    /// buffer fits. Returns the number of packets dropped (the arrival may be one of them).
    pub fn push(&mut self, pkt: Packet, prio: u32) -> u32 {
        if self.next_order == u32::MAX {
            self.renumber();
        }
        self.keys.push((prio as u64) << 32 | self.next_order as u64);
        self.conns.push(pkt.conn);
        self.pkts.push(pkt);
        self.next_order += 1;
        self.bytes += pkt.bytes as u64;
        let mut dropped = 0;
        while self.limit_bytes != 0 && self.bytes > self.limit_bytes {
            // Lowest priority = largest prio value; among equals the latest queued: the
            // largest key.
            self.remove(arg_best(&self.keys, |a, b| a > b));
            dropped += 1;
        }
        dropped
    }

    /// Removes the packet to transmit next: the earliest queued packet of the connection
    /// that holds the highest-priority packet.
    pub fn pop(&mut self) -> Option<Packet> {
        if self.keys.is_empty() {
            return None;
        }
        let conn = self.conns[arg_best(&self.keys, |a, b| a < b)];
        // The earliest of that connection's packets: the smallest order among them (every
        // other packet compares as the largest).
        let (mut first, mut fo) = (0, u32::MAX as u64 + 1);
        for (j, (&k, &c)) in self.keys.iter().zip(&self.conns).enumerate() {
            let o = select_unpredictable(c == conn, k as u32 as u64, u32::MAX as u64 + 1);
            let less = o < fo;
            first = select_unpredictable(less, j, first);
            fo = select_unpredictable(less, o, fo);
        }
        Some(self.remove(first))
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
        assert!(!q.conns.contains(&5));
    }

    /// The rule as stated, on a plain list with an unbounded enqueue count.
    struct Reference {
        items: Vec<(Packet, u32, u64)>,
        next: u64,
        bytes: u64,
        limit: u64,
    }

    impl Reference {
        fn push(&mut self, pkt: Packet, prio: u32) -> u32 {
            self.items.push((pkt, prio, self.next));
            self.next += 1;
            self.bytes += pkt.bytes as u64;
            let mut dropped = 0;
            while self.limit != 0 && self.bytes > self.limit {
                let worst = (0..self.items.len())
                    .max_by_key(|&i| (self.items[i].1, self.items[i].2))
                    .unwrap();
                self.bytes -= self.items.remove(worst).0.bytes as u64;
                dropped += 1;
            }
            dropped
        }

        fn pop(&mut self) -> Option<Packet> {
            let best = (0..self.items.len()).min_by_key(|&i| (self.items[i].1, self.items[i].2))?;
            let conn = self.items[best].0.conn;
            let first = (0..self.items.len())
                .filter(|&i| self.items[i].0.conn == conn)
                .min_by_key(|&i| self.items[i].2)
                .unwrap();
            let (pkt, _, _) = self.items.remove(first);
            self.bytes -= pkt.bytes as u64;
            Some(pkt)
        }
    }

    #[test]
    fn agrees_with_the_rule_across_the_order_count_wrapping() {
        let mut rng = crate::engine::Rng::new(7, 0);
        for case in 0..200 {
            let limit = [0, 3000, 9000, 36_000][case % 4];
            let mut q = PrioQueue::new(limit);
            // Half the cases start just before the packed order count must be renumbered.
            if case % 2 == 1 {
                q.next_order = u32::MAX - 1 - rng.below(20) as u32;
            }
            let mut r = Reference {
                items: Vec::new(),
                next: 0,
                bytes: 0,
                limit,
            };
            for step in 0..400u32 {
                if rng.below(3) < 2 {
                    let pkt = Packet {
                        conn: rng.below(6) as u32,
                        seq: step,
                        bytes: [64, 590, 1500][rng.below(3) as usize],
                        kind: kind::DATA,
                        ..Packet::default()
                    };
                    let prio = rng.below(8) as u32 * 1000;
                    assert_eq!(
                        q.push(pkt, prio),
                        r.push(pkt, prio),
                        "case {case} step {step}"
                    );
                } else {
                    assert_eq!(q.pop(), r.pop(), "case {case} step {step}");
                }
                assert_eq!((q.len(), q.bytes()), (r.items.len(), r.bytes));
            }
            while let Some(p) = r.pop() {
                assert_eq!(q.pop(), Some(p), "case {case}");
            }
            assert!(q.is_empty());
        }
    }
}
