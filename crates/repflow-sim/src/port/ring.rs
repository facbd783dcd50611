//! The packets on a link, in order: a ring buffer of power-of-two capacity. Unlike a
//! `VecDeque`, indexing is one mask, so the admission path (which reads the packets that
//! started serialization since the last admission) stays short.

use crate::engine::Time;
use crate::packet::Packet;

#[derive(Clone, Copy, Debug, Default)]
#[repr(align(32))]
pub(super) struct InFlight {
    /// When the packet has fully arrived at the far end of the link. (Its serialization
    /// starts a propagation delay and a transmission time earlier: not stored, so that an
    /// entry is 32 bytes — half a cache line, and, aligned to 32, never split across two;
    /// the allocator alone aligns a ring's buffer to 16 only.)
    pub(super) arrival: Time,
    pub(super) pkt: Packet,
}

/// The packets on a port, in order: a ring buffer of power-of-two capacity. Unlike a
/// `VecDeque`, indexing is one mask, so the admission path (which reads the packets that
/// started serialization since the last admission) stays short.
#[derive(Clone, Debug)]
pub(super) struct Ring {
    buf: Box<[InFlight]>,
    head: u32,
    len: u32,
}

impl Ring {
    /// An empty ring, with no buffer until its first packet (a large network has many links
    /// that a run never uses, and a threaded run's replicas use only their part's).
    pub(super) fn new() -> Ring {
        Ring {
            buf: Box::default(),
            head: 0,
            len: 0,
        }
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        self.len as usize
    }

    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `i`-th packet from the front (`i < len`).
    #[inline]
    pub(super) fn get(&self, i: usize) -> &InFlight {
        &self.buf[(self.head as usize + i) & (self.buf.len() - 1)]
    }

    #[inline]
    pub(super) fn front(&self) -> Option<&InFlight> {
        if self.len == 0 {
            None
        } else {
            Some(&self.buf[self.head as usize])
        }
    }

    /// The last entry, if any.
    #[inline]
    pub(super) fn back_mut(&mut self) -> Option<&mut InFlight> {
        if self.len == 0 {
            return None;
        }
        let mask = self.buf.len() - 1;
        Some(&mut self.buf[(self.head + self.len - 1) as usize & mask])
    }

    /// Address of the front entry's slot (the slot itself if the ring is empty): a prefetch
    /// target, never read through.
    #[inline]
    pub(super) fn front_ptr(&self) -> *const InFlight {
        self.buf.as_ptr().wrapping_add(self.head as usize)
    }

    #[inline]
    pub(super) fn push_back(&mut self, x: InFlight) {
        if self.len as usize == self.buf.len() {
            self.grow();
        }
        let mask = self.buf.len() - 1;
        self.buf[(self.head + self.len) as usize & mask] = x;
        self.len += 1;
        // The next admission's slot, asked for now: on a port with a long queue it lies in
        // a line last touched one lap of the buffer ago (long evicted), and the next
        // admission is a transmission time away (docs/performance.md, "Where the slow
        // phase's misses fall"). (A read request: a line one thread alone reads arrives
        // exclusive, so the write that follows costs no further transfer.)
        crate::engine::prefetch(
            self.buf
                .as_ptr()
                .wrapping_add((self.head + self.len) as usize & mask),
        );
    }

    #[inline]
    pub(super) fn pop_front(&mut self) -> Option<InFlight> {
        if self.len == 0 {
            return None;
        }
        let x = self.buf[self.head as usize];
        self.len -= 1;
        // An emptied ring starts again at its first slot: a port whose queue drains keeps
        // reusing the same few (cached) entries instead of walking its whole buffer, which
        // grows to the longest queue ever seen (possibly megabytes, past L2).
        let keep = (self.len != 0) as u32;
        self.head = (self.head + 1) & (self.buf.len() - 1) as u32 & keep.wrapping_neg();
        // The entry after the new head (read at this port's next arrival, for the arrival
        // after it), asked for a packet ahead, as the admission's slot above.
        crate::engine::prefetch(
            self.buf
                .as_ptr()
                .wrapping_add((self.head as usize + 1) & (self.buf.len() - 1)),
        );
        Some(x)
    }

    /// Doubles the buffer (the first one holds 4 packets).
    #[cold]
    pub(super) fn grow(&mut self) {
        let mut buf = vec![InFlight::default(); (self.buf.len() * 2).max(4)].into_boxed_slice();
        assert!(buf.len() <= 1 << 31, "a link FIFO of 2^31 packets");
        for (i, x) in buf.iter_mut().take(self.len()).enumerate() {
            *x = *self.get(i);
        }
        self.buf = buf;
        self.head = 0;
    }
}

const _: () = assert!(std::mem::size_of::<InFlight>() == 32);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_fifo_order_across_wraps_and_growth() {
        let mut r = Ring::new();
        let mut reference = std::collections::VecDeque::new();
        let mut next = 0u64;
        for round in 0..200u64 {
            // Pushes outnumber pops early (growth while wrapped), then drain.
            let pushes = if round < 100 { 3 } else { 0 };
            for _ in 0..pushes {
                let x = InFlight {
                    arrival: next,
                    ..InFlight::default()
                };
                r.push_back(x);
                reference.push_back(next);
                next += 1;
            }
            for _ in 0..2 {
                assert_eq!(r.pop_front().map(|f| f.arrival), reference.pop_front());
            }
            assert_eq!(r.len(), reference.len());
            for (i, &v) in reference.iter().enumerate() {
                assert_eq!(r.get(i).arrival, v);
            }
        }
        assert!(r.is_empty());
    }

    #[test]
    fn a_new_ring_holds_no_buffer_until_its_first_packet() {
        let mut r = Ring::new();
        assert_eq!(r.buf.len(), 0);
        assert!(r.front().is_none() && r.back_mut().is_none() && r.pop_front().is_none());
        let _ = r.front_ptr(); // a prefetch target only: any address will do
        r.push_back(InFlight {
            arrival: 5,
            ..InFlight::default()
        });
        assert_eq!(r.buf.len(), 4);
        assert_eq!(r.pop_front().map(|f| f.arrival), Some(5));
    }

    #[test]
    fn emptied_ring_starts_again_at_its_first_slot() {
        let mut r = Ring::new();
        for i in 0..3u64 {
            r.push_back(InFlight {
                arrival: i,
                ..InFlight::default()
            });
        }
        assert_eq!(r.pop_front().map(|f| f.arrival), Some(0));
        assert_eq!(r.head, 1);
        r.pop_front();
        r.pop_front();
        assert!(r.is_empty());
        assert_eq!(r.head, 0);
        r.push_back(InFlight {
            arrival: 7,
            ..InFlight::default()
        });
        assert_eq!(r.buf[0].arrival, 7);
        assert_eq!(r.front().map(|f| f.arrival), Some(7));
    }
}
