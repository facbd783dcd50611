//! The calendar wheel that holds an [`EventQueue`](super::EventQueue)'s near events: fine slots,
//! each an intrusive list through a per-id node array, and an overflow heap past its horizon.

use super::event::{near_key, Anc, Entry, Time};
use std::collections::BinaryHeap;
use std::hint::select_unpredictable;

/// log2 of [`WHEEL_SLOTS`]. 2^16 lets k = 32's wheel take the slots its link count asks
/// for (64 ps at 10 Gb/s, against 256 ps with 2^14: +6-9 % packet-hops/s on its loaded
/// network, docs/performance.md); smaller networks use fewer (the arrays cost 520 KiB).
pub(super) const WHEEL_BITS: u32 = 16;
/// Most slots a wheel can have.
pub(super) const WHEEL_SLOTS: u64 = 1 << WHEEL_BITS;
/// Fewest slots a wheel has (one bitmap word).
pub(super) const MIN_SLOTS: u64 = 64;
/// End of a slot's list.
pub(super) const NIL: u32 = u32::MAX;

/// A pending near event: its time, when it was scheduled (its rank is its id) and the next
/// node of its slot's list.
#[derive(Clone, Copy, Debug)]
pub(super) struct Node {
    pub(super) time: Time,
    /// When it was scheduled.
    pub(super) push: Time,
    /// Next node of the slot's list (`NIL`: the last).
    pub(super) next: u32,
    /// The 32-bit part of its [`Anc`].
    pub(super) b: u32,
}

impl Node {
    #[inline(always)]
    pub(super) fn key(&self, id: u32) -> (Time, Time, u64) {
        let (p, bid) = near_key(self.push, self.b, id);
        (self.time, p, bid)
    }
}

/// Wheels of this many slots or more, while they hold at most one pending event per eight
/// slots, put an event into an empty slot without reading the slot: the occupancy bitmap
/// (8 KiB at most) says it is empty. A large wheel's slot array (from 128 KiB) does not
/// stay in cache, and with few events per slot most pushes find theirs empty: the slot's
/// line was a miss on the path of each. Smaller wheels, and a large one crowded with
/// events (k = 32's loaded network holds 15,000–30,000), keep the branch-free push: their
/// slots are at hand and a branch on emptiness would be mispredicted often. Interleaved
/// runs, pinned, medians of three: k = 32's bench at 10 Gb/s (65,536 slots, 5,000–11,000
/// events pending after the first arrivals) −3 %, at 1 Gb/s (32,768) −3 %, their loaded
/// networks alone −1 to −2 %; without the bound on pending events the loaded network at
/// 10 Gb/s lost 1–3 %, and at every wheel size bench-A (1,024 slots) took 6 % more time
/// and k = 16 (8,192) 3 % more (docs/performance.md).
pub(super) const WRITE_EMPTY_SLOTS: u64 = 16_384;

/// One slot of the wheel: a list of nodes in increasing key order.
#[derive(Clone, Copy, Debug)]
pub(super) struct Slot {
    /// First node (`NIL`: the slot is empty).
    pub(super) first: u32,
    /// Last node (meaningless when empty).
    pub(super) last: u32,
}

pub(super) const EMPTY_SLOT: Slot = Slot {
    first: NIL,
    last: NIL,
};

pub(super) struct Wheel {
    pub(super) shift: u32,
    /// Slots in use minus one: a power of two between `MIN_SLOTS` and `WHEEL_SLOTS`, minus one.
    pub(super) mask: u64,
    /// The slots. Fixed size: an index masked by `WHEEL_SLOTS - 1` needs no bounds check.
    pub(super) slots: Box<[Slot; WHEEL_SLOTS as usize]>,
    pub(super) occupied: Box<[u64; (WHEEL_SLOTS / 64) as usize]>,
    /// One node per near-event id.
    pub(super) nodes: Vec<Node>,
    /// Absolute slot number (time >> shift) of the current slot.
    pub(super) cur: u64,
    /// `index(cur)`, kept with it.
    pub(super) cur_idx: usize,
    /// Pending events, overflow included.
    pub(super) len: usize,
    /// The node after the last one popped in its slot: a likely next event (`NIL`: none).
    pub(super) hint: u32,
    pub(super) overflow: BinaryHeap<Entry<u32>>,
}

/// The least node of a non-empty slot.
#[derive(Clone, Copy)]
pub(super) struct Least {
    pub(super) id: u32,
    pub(super) time: Time,
}

impl Wheel {
    pub(super) fn new(shift: u32, slots: u64, ids: usize) -> Self {
        debug_assert!(slots.is_power_of_two() && (MIN_SLOTS..=WHEEL_SLOTS).contains(&slots));
        assert!(ids < NIL as usize, "too many near-event ids");
        Wheel {
            shift,
            mask: slots - 1,
            slots: vec![EMPTY_SLOT; WHEEL_SLOTS as usize]
                .into_boxed_slice()
                .try_into()
                .unwrap_or_else(|_| unreachable!("WHEEL_SLOTS entries")),
            occupied: Box::new([0; (WHEEL_SLOTS / 64) as usize]),
            nodes: vec![
                Node {
                    time: 0,
                    push: 0,
                    next: NIL,
                    b: 0,
                };
                ids
            ],
            cur: 0,
            cur_idx: 0,
            len: 0,
            hint: NIL,
            overflow: BinaryHeap::new(),
        }
    }

    /// Makes absolute slot `abs` the current one.
    #[inline]
    pub(super) fn turn(&mut self, abs: u64) {
        self.cur = abs;
        self.cur_idx = self.index(abs);
    }

    /// Index in `slots` of absolute slot `abs`.
    #[inline]
    pub(super) fn index(&self, abs: u64) -> usize {
        (abs & self.mask & (WHEEL_SLOTS - 1)) as usize
    }

    #[inline(always)]
    pub(super) fn push<const FRESH: bool>(&mut self, id: u32, time: Time, push: Anc) {
        self.len += 1;
        let abs = time >> self.shift;
        debug_assert!(abs >= self.cur, "event scheduled in the past");
        if abs - self.cur > self.mask {
            self.overflow.push(Entry {
                time,
                push,
                rank: id as u64,
                e: id,
            });
            return;
        }
        self.link::<FRESH>(id, time, push, abs);
    }

    /// Puts node `id` into slot `abs`'s list (within the horizon), in key order. The
    /// usual cases — an empty slot, or a key after the slot's last (events mostly come in
    /// time order, and one scheduled now goes after those of its time scheduled earlier) —
    /// append without branches. `FRESH`: the event is scheduled now, so no pending event was
    /// scheduled later, and the key is before the last node's exactly if its time is
    /// earlier, or equal with both scheduled now and the rest of the key smaller; with the
    /// new node written first, an empty slot (whose "last node" is the new one itself)
    /// compares equal: no emptiness term.
    #[inline(always)]
    pub(super) fn link<const FRESH: bool>(&mut self, id: u32, time: Time, push: Anc, abs: u64) {
        let idx = self.index(abs);
        let node = Node {
            time,
            push: push.0,
            next: NIL,
            b: push.1,
        };
        if self.mask >= WRITE_EMPTY_SLOTS - 1
            && self.len <= (self.mask >> 3) as usize
            && self.occupied[idx >> 6] & (1 << (idx & 63)) == 0
        {
            // An empty slot of a large, sparse wheel (told by the bitmap, which stays in
            // cache): written, not read (see `WRITE_EMPTY_SLOTS`).
            self.nodes[id as usize] = node;
            self.slots[idx] = Slot {
                first: id,
                last: id,
            };
            self.occupied[idx >> 6] |= 1 << (idx & 63);
            return;
        }
        let slot = self.slots[idx];
        let empty = slot.first == NIL;
        // An empty slot's "last node" is the new one itself: the link written to it is
        // overwritten just below.
        let last = select_unpredictable(empty, id, slot.last);
        let before = if FRESH {
            self.nodes[id as usize] = node;
            let ln = self.nodes[last as usize];
            let (_, bid) = near_key(push.0, push.1, id);
            let (_, lbid) = near_key(ln.push, ln.b, last);
            (time < ln.time) | ((time == ln.time) & (push.0 == ln.push) & (bid < lbid))
        } else {
            let ln = self.nodes[last as usize];
            !empty & (node.key(id) < ln.key(last))
        };
        if !FRESH {
            self.nodes[id as usize] = node;
        }
        if before {
            self.insert_before_later(idx, id);
            return;
        }
        self.nodes[last as usize].next = id;
        // (An empty slot's last node is the new one: its next is set back to none.)
        self.nodes[id as usize].next = NIL;
        self.slots[idx] = Slot {
            first: select_unpredictable(empty, id, slot.first),
            last: id,
        };
        self.occupied[idx >> 6] |= 1 << (idx & 63);
    }

    /// `link` of node `id` (written, with no next) before the last of the non-empty slot
    /// `idx`: walks from the slot's first node to the first later one (the last node is
    /// later, so the walk ends).
    #[cold]
    #[inline(never)]
    pub(super) fn insert_before_later(&mut self, idx: usize, id: u32) {
        let key = self.nodes[id as usize].key(id);
        let first = self.slots[idx].first;
        let f = self.nodes[first as usize];
        if key < f.key(first) {
            self.nodes[id as usize].next = first;
            self.slots[idx].first = id;
            return;
        }
        let mut prev = first;
        let mut x = f.next;
        loop {
            let n = self.nodes[x as usize];
            if key < n.key(x) {
                break;
            }
            prev = x;
            x = n.next;
        }
        self.nodes[id as usize].next = x;
        self.nodes[prev as usize].next = id;
    }

    /// Next occupied absolute slot after `cur` (whose slot must be empty), within the
    /// horizon: the rest of the current bitmap word, the following words, and finally the
    /// current word's bits below `cur` (slots one turn ahead).
    #[inline]
    pub(super) fn next_occupied(&self) -> Option<u64> {
        let i = self.cur_idx;
        let bit = (i & 63) as u64;
        let words = ((self.mask + 1) / 64) as usize;
        let mut w = i >> 6;
        let mut word = self.occupied[w] & (!1u64 << bit);
        let mut base = self.cur - bit;
        for _ in 0..words {
            if word != 0 {
                return Some(base + word.trailing_zeros() as u64);
            }
            w = (w + 1) & (words - 1) & (WHEEL_SLOTS as usize / 64 - 1);
            base += 64;
            word = self.occupied[w];
        }
        // Back at the current word: its bits at and above `cur`'s are clear.
        (word != 0).then(|| base + word.trailing_zeros() as u64)
    }

    /// The least node of the current slot, if the slot is not empty.
    #[inline]
    pub(super) fn least(&self) -> Option<Least> {
        let first = self.slots[self.cur_idx].first;
        (first != NIL).then(|| Least {
            id: first,
            time: self.nodes[first as usize].time,
        })
    }

    /// Removes `l` (just found by `least`: the first node) from the current slot, without
    /// branches.
    #[inline]
    pub(super) fn unlink(&mut self, l: Least) {
        self.len -= 1;
        let idx = self.cur_idx;
        let next = self.nodes[l.id as usize].next;
        let only = next == NIL;
        self.slots[idx].first = next;
        self.occupied[idx >> 6] &= !((only as u64) << (idx & 63));
        self.hint = next;
    }

    /// Turns the wheel to the first occupied slot (moving overflow events within the new
    /// horizon onto it), unless that slot lies after `limit`: the wheel must never turn past
    /// an event served from elsewhere, since later pushes may be as early as that event.
    /// Returns the current slot's least node, if the wheel holds one not after `limit`.
    pub(super) fn settle(&mut self, limit: u64) -> Option<Least> {
        loop {
            if let Some(l) = self.least() {
                return Some(l);
            }
            if self.len == 0 {
                return None;
            }
            let next = self.next_occupied();
            let over = self.overflow.peek().map(|y| y.time >> self.shift);
            let target = match (next, over) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) => a,
                (None, Some(b)) => b,
                (None, None) => unreachable!("len > 0"),
            };
            if target > limit {
                return None;
            }
            self.turn(target);
            while let Some(y) = self.overflow.peek() {
                let abs = y.time >> self.shift;
                if abs - self.cur > self.mask {
                    break;
                }
                let y = self.overflow.pop().expect("peeked");
                self.link::<false>(y.e, y.time, y.push, abs);
            }
        }
    }
}
