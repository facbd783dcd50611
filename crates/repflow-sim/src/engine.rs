//! The discrete-event engine: integer-picosecond time, a deterministic event queue and seeded
//! random streams. Nothing here knows about networks.

use std::collections::BinaryHeap;
use std::hint::select_unpredictable;

/// Simulated time in picoseconds.
pub type Time = u64;

/// An event taken from an [`EventQueue`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A near event, by its id (see [`EventQueue::push_near`]).
    Near(u32),
    /// A timer, with its payload.
    Timer(u64),
}

/// The pending events of a run, ordered by `(time, insertion order)`.
///
/// Near events (packet arrivals at the end of a link: the bulk of all events) are named by a
/// small id, of which at most one is pending at a time (a link has one head packet). They go
/// to a calendar wheel of `2^k` fine slots, each an intrusive list in key order through a
/// per-id node array, with its first and last node held in the slot: a push nearly always
/// appends (an empty slot, or a key after the slot's last), a pop takes the first node of
/// the first occupied slot, found in the occupancy bitmap's current word (whether or not
/// the current slot is empty, so that the branch is nearly always taken) — no per-slot
/// buffers, no sorting, few branches that depend on the traffic. Events beyond the wheel's
/// horizon wait in an overflow heap and move onto the wheel as it turns. Timers (one per
/// open connection, far away, rarely due) live in their own heap. The earliest among them is
/// served, and all share one sequence counter, so the order is exactly that of a single
/// priority queue: a seed gives bit-identical runs.
pub struct EventQueue {
    wheel: Wheel,
    timers: BinaryHeap<Entry<u64>>,
    /// Time of the earliest timer (`Time::MAX` if none).
    timer_time: Time,
    /// `timer_time`'s wheel slot (`timer_time >> shift`).
    timer_slot: u64,
    seq: u64,
    /// Insertion number of the event last popped.
    last_seq: u64,
    /// Who scheduled each event (cargo feature `tie-stats`).
    #[cfg(feature = "tie-stats")]
    pub ancestry: Ancestry,
}

/// [`Ancestry`]'s creator of the events scheduled before the first pop.
#[cfg(feature = "tie-stats")]
pub const ROOT: u32 = u32::MAX;

/// Which event scheduled each event, and as its how-manieth push (cargo feature
/// `tie-stats`). The insertion order among events of one time is the processing
/// order of their creators, then the push index: this records what a partitioned engine,
/// which has no global insertion counter, would have to compare to reproduce that order.
#[cfg(feature = "tie-stats")]
pub struct Ancestry {
    /// Insertion number → (creator's record, push index), while pending.
    pending: std::collections::HashMap<u64, (u32, u32)>,
    /// Per popped event, in processing order: `(time, creator's record or ROOT, push
    /// index)`.
    pub recs: Vec<(Time, u32, u32)>,
    cur: u32,
    cur_i: u32,
}

#[cfg(feature = "tie-stats")]
impl Ancestry {
    fn new() -> Ancestry {
        Ancestry {
            pending: std::collections::HashMap::new(),
            recs: Vec::new(),
            cur: ROOT,
            cur_i: 0,
        }
    }

    fn on_push(&mut self, seq: u64) {
        self.pending.insert(seq, (self.cur, self.cur_i));
        self.cur_i += 1;
    }

    fn on_pop(&mut self, time: Time, seq: u64) {
        let (c, i) = self
            .pending
            .remove(&seq)
            .expect("every popped event was pushed");
        self.recs.push((time, c, i));
        self.cur = (self.recs.len() - 1) as u32;
        self.cur_i = 0;
    }
}

#[derive(Clone, Copy)]
struct Entry<E> {
    time: Time,
    seq: u64,
    e: E,
}

impl<E> Entry<E> {
    #[inline]
    fn key(&self) -> (Time, u64) {
        (self.time, self.seq)
    }
}
impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        self.key() == o.key()
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    #[inline]
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        // Reversed: BinaryHeap is a max-heap.
        o.key().cmp(&self.key())
    }
}

const WHEEL_BITS: u32 = 14;
/// Most slots a wheel can have.
const WHEEL_SLOTS: u64 = 1 << WHEEL_BITS;
/// Fewest slots a wheel has (one bitmap word).
const MIN_SLOTS: u64 = 64;
/// End of a slot's list.
const NIL: u32 = u32::MAX;

/// A pending near event: its key and the next node of its slot's list.
#[derive(Clone, Copy, Debug)]
struct Node {
    time: Time,
    seq: u64,
    /// Next node of the slot's list (`NIL`: the last).
    next: u32,
}

/// One slot of the wheel: a list of nodes in increasing key order.
#[derive(Clone, Copy, Debug)]
struct Slot {
    /// First node (`NIL`: the slot is empty).
    first: u32,
    /// Last node (meaningless when empty).
    last: u32,
}

const EMPTY_SLOT: Slot = Slot {
    first: NIL,
    last: NIL,
};

struct Wheel {
    shift: u32,
    /// Slots in use minus one: a power of two between `MIN_SLOTS` and `WHEEL_SLOTS`, minus one.
    mask: u64,
    /// The slots. Fixed size: an index masked by `WHEEL_SLOTS - 1` needs no bounds check.
    slots: Box<[Slot; WHEEL_SLOTS as usize]>,
    occupied: Box<[u64; (WHEEL_SLOTS / 64) as usize]>,
    /// One node per near-event id.
    nodes: Vec<Node>,
    /// Absolute slot number (time >> shift) of the current slot.
    cur: u64,
    /// `index(cur)`, kept with it.
    cur_idx: usize,
    /// Pending events, overflow included.
    len: usize,
    /// The node after the last one popped in its slot: a likely next event (`NIL`: none).
    hint: u32,
    overflow: BinaryHeap<Entry<u32>>,
}

/// The least node of a non-empty slot.
#[derive(Clone, Copy)]
struct Least {
    id: u32,
    time: Time,
}

impl Wheel {
    fn new(shift: u32, slots: u64, ids: usize) -> Self {
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
                    seq: 0,
                    next: NIL,
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
    fn turn(&mut self, abs: u64) {
        self.cur = abs;
        self.cur_idx = self.index(abs);
    }

    /// Index in `slots` of absolute slot `abs`.
    #[inline]
    fn index(&self, abs: u64) -> usize {
        (abs & self.mask & (WHEEL_SLOTS - 1)) as usize
    }

    #[inline]
    fn push<const FRESH: bool>(&mut self, id: u32, time: Time, seq: u64) {
        self.len += 1;
        let abs = time >> self.shift;
        debug_assert!(abs >= self.cur, "event scheduled in the past");
        if abs - self.cur > self.mask {
            self.overflow.push(Entry { time, seq, e: id });
            return;
        }
        self.link::<FRESH>(id, time, seq, abs);
    }

    /// Puts node `id` into slot `abs`'s list (within the horizon), in key order. The
    /// usual cases — an empty slot, or a key after the slot's last (a new event has the
    /// greatest `seq`, and many events of a slot share one time) — append without branches.
    /// `FRESH`: `seq` is the newest of all pending events (a push, not a move from the
    /// overflow heap), so the key is before the last node's exactly if its time is earlier;
    /// and with the new node's time written first, an empty slot (whose "last node" is the
    /// new one itself) compares equal: one comparison decides, with no emptiness term.
    #[inline]
    fn link<const FRESH: bool>(&mut self, id: u32, time: Time, seq: u64, abs: u64) {
        let idx = self.index(abs);
        let slot = self.slots[idx];
        let empty = slot.first == NIL;
        // An empty slot's "last node" is the new one itself: the link written to it is
        // overwritten just below.
        let last = select_unpredictable(empty, id, slot.last);
        let before = if FRESH {
            self.nodes[id as usize].time = time;
            time < self.nodes[last as usize].time
        } else {
            let ln = self.nodes[last as usize];
            !empty & ((time, seq) < (ln.time, ln.seq))
        };
        if before {
            self.insert_before_later::<FRESH>(idx, id, time, seq);
            return;
        }
        self.nodes[last as usize].next = id;
        self.nodes[id as usize] = Node {
            time,
            seq,
            next: NIL,
        };
        self.slots[idx] = Slot {
            first: select_unpredictable(empty, id, slot.first),
            last: id,
        };
        self.occupied[idx >> 6] |= 1 << (idx & 63);
    }

    /// `link` of a key before the last of the non-empty slot `idx`: walks from the slot's
    /// first node to the first later one (the last node is later, so the walk ends).
    #[cold]
    #[inline(never)]
    fn insert_before_later<const FRESH: bool>(
        &mut self,
        idx: usize,
        id: u32,
        time: Time,
        seq: u64,
    ) {
        // A fresh key (the newest `seq`) is before a node's exactly if its time is earlier.
        let before = |n: &Node| {
            if FRESH {
                time < n.time
            } else {
                (time, seq) < (n.time, n.seq)
            }
        };
        let first = self.slots[idx].first;
        let f = self.nodes[first as usize];
        if before(&f) {
            self.nodes[id as usize] = Node {
                time,
                seq,
                next: first,
            };
            self.slots[idx].first = id;
            return;
        }
        let mut prev = first;
        let mut x = f.next;
        loop {
            let n = self.nodes[x as usize];
            if before(&n) {
                break;
            }
            prev = x;
            x = n.next;
        }
        self.nodes[id as usize] = Node { time, seq, next: x };
        self.nodes[prev as usize].next = id;
    }

    /// Next occupied absolute slot after `cur` (whose slot must be empty), within the
    /// horizon: the rest of the current bitmap word, the following words, and finally the
    /// current word's bits below `cur` (slots one turn ahead).
    #[inline]
    fn next_occupied(&self) -> Option<u64> {
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
    fn least(&self) -> Option<Least> {
        let first = self.slots[self.cur_idx].first;
        (first != NIL).then(|| Least {
            id: first,
            time: self.nodes[first as usize].time,
        })
    }

    /// Removes `l` (just found by `least`: the first node) from the current slot, without
    /// branches.
    #[inline]
    fn unlink(&mut self, l: Least) {
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
    fn settle(&mut self, limit: u64) -> Option<Least> {
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
                self.link::<false>(y.e, y.time, y.seq, abs);
            }
        }
    }
}

impl EventQueue {
    /// An empty queue for near-event ids `0..ids`, with slots about `width_ps` wide (rounded
    /// down to a power of two; wider if the horizon would not fit 16,384 of them) and a
    /// wheel just wide enough for near events at most
    /// `horizon_ps` after the current time (between 64 and 16,384 slots). Only the speed
    /// depends on the geometry (later near events wait in the overflow heap), never the
    /// order.
    pub fn new(ids: usize, width_ps: u64, horizon_ps: u64) -> Self {
        let mut shift = 63 - width_ps.max(1).leading_zeros();
        // Slots too narrow for the horizon to fit the largest wheel would send most events
        // through the overflow heap: widen them until it fits.
        while shift < 63 && (horizon_ps >> shift).saturating_add(2) > WHEEL_SLOTS {
            shift += 1;
        }
        // An event `horizon_ps` ahead lies at most `(horizon_ps >> shift) + 1` slots after
        // the current one.
        let slots = (horizon_ps >> shift)
            .saturating_add(2)
            .checked_next_power_of_two()
            .unwrap_or(WHEEL_SLOTS)
            .clamp(MIN_SLOTS, WHEEL_SLOTS);
        EventQueue {
            wheel: Wheel::new(shift, slots, ids),
            timers: BinaryHeap::new(),
            timer_time: Time::MAX,
            timer_slot: Time::MAX >> shift,
            seq: 0,
            last_seq: 0,
            #[cfg(feature = "tie-stats")]
            ancestry: Ancestry::new(),
        }
    }

    /// Records `t` as the earliest timer's time (`Time::MAX`: none), with its slot.
    #[inline]
    fn set_timer_time(&mut self, t: Time) {
        self.timer_time = t;
        self.timer_slot = t >> self.wheel.shift;
    }

    /// Schedules near event `id` (such as a packet arrival at the end of link `id`) at
    /// `time`. An id has at most one pending event: pushing it again before it is popped
    /// corrupts the queue.
    #[inline]
    pub fn push_near(&mut self, time: Time, id: u32) {
        let seq = self.seq;
        self.seq += 1;
        #[cfg(feature = "tie-stats")]
        self.ancestry.on_push(seq);
        self.wheel.push::<true>(id, time, seq);
    }

    /// Takes the next insertion number without scheduling anything: an event that may
    /// never be needed keeps its place in the order, and [`EventQueue::push_near_reserved`]
    /// schedules it later, ordered exactly as if it had been pushed now.
    #[inline]
    pub fn reserve_seq(&mut self) -> u64 {
        let seq = self.seq;
        self.seq += 1;
        #[cfg(feature = "tie-stats")]
        self.ancestry.on_push(seq);
        seq
    }

    /// Schedules near event `id` at `time` with an insertion number taken earlier by
    /// [`EventQueue::reserve_seq`] (and not used since), at or after the current time.
    #[inline]
    pub fn push_near_reserved(&mut self, time: Time, id: u32, seq: u64) {
        debug_assert!(seq < self.seq, "a reserved insertion number");
        self.wheel.push::<false>(id, time, seq);
    }

    /// Insertion number of the event last popped: with its time, its place in the order.
    #[inline]
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Schedules a timer at `time`. Ordered exactly as if it were a near event.
    #[inline]
    pub fn push_timer(&mut self, time: Time, event: u64) {
        self.set_timer_time(self.timer_time.min(time));
        #[cfg(feature = "tie-stats")]
        self.ancestry.on_push(self.seq);
        self.timers.push(Entry {
            time,
            seq: self.seq,
            e: event,
        });
        self.seq += 1;
    }

    /// Removes and returns the earliest event, with its time.
    #[inline]
    pub fn pop(&mut self) -> Option<(Time, Event)> {
        // Fast path (no overflow): the first occupied slot found in the current bitmap word,
        // if not after the earliest timer's slot, holds the wheel's minimum; it goes first if
        // it is strictly earlier than every timer.
        //
        // The word is read whether or not the current slot is empty: with events as dense
        // as a loaded network's it nearly always has a slot, so the only branches here are nearly
        // always taken (testing the current slot first mispredicted about every other pop).
        let w = &mut self.wheel;
        if w.overflow.is_empty() {
            let i = w.cur_idx;
            let bit = i & 63;
            // Bits below the current slot's stand for slots a whole turn ahead.
            let word = w.occupied[i >> 6] & (!0u64 << bit);
            if word != 0 {
                let skip = word.trailing_zeros() as usize - bit;
                let abs = w.cur + skip as u64;
                if abs <= self.timer_slot {
                    w.cur = abs;
                    w.cur_idx = i + skip;
                    let id = w.slots[w.cur_idx].first;
                    let l = Least {
                        id,
                        time: w.nodes[id as usize].time,
                    };
                    if l.time < self.timer_time {
                        self.last_seq = w.nodes[id as usize].seq;
                        w.unlink(l);
                        #[cfg(feature = "tie-stats")]
                        self.ancestry.on_pop(l.time, self.last_seq);
                        return Some((l.time, Event::Near(l.id)));
                    }
                }
            }
        }
        self.pop_slow()
    }

    fn pop_slow(&mut self) -> Option<(Time, Event)> {
        let near = self.wheel.settle(self.timer_slot);
        let take_timer = match (near, self.timers.peek()) {
            (None, None) => return None,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (Some(n), Some(t)) => t.key() < (n.time, self.wheel.nodes[n.id as usize].seq),
        };
        if take_timer {
            let x = self.timers.pop().expect("peeked");
            self.set_timer_time(self.timers.peek().map_or(Time::MAX, |t| t.time));
            self.last_seq = x.seq;
            #[cfg(feature = "tie-stats")]
            self.ancestry.on_pop(x.time, x.seq);
            Some((x.time, Event::Timer(x.e)))
        } else {
            let l = near.expect("a near event");
            self.last_seq = self.wheel.nodes[l.id as usize].seq;
            self.wheel.unlink(l);
            #[cfg(feature = "tie-stats")]
            self.ancestry.on_pop(l.time, self.last_seq);
            Some((l.time, Event::Near(l.id)))
        }
    }

    /// A likely next near event (a hint, for prefetching its state; `u32::MAX` when none):
    /// the node after the last one popped in its slot, else the first node of the next
    /// occupied slot in the current bitmap word. (With slots sized to hold about one event,
    /// the first alone is nearly always none.)
    #[inline]
    pub fn hint(&self) -> u32 {
        let w = &self.wheel;
        if w.hint != NIL {
            return w.hint;
        }
        let i = w.cur_idx;
        let word = w.occupied[i >> 6] & (!1u64 << (i & 63));
        if word == 0 {
            return NIL;
        }
        w.slots[((i & !63) + word.trailing_zeros() as usize) & (WHEEL_SLOTS as usize - 1)].first
    }

    /// The likely next three near events (`u32::MAX` where none is known), in the wheel's
    /// order: the node after the last one popped in its slot, and after each guess the
    /// next node of its slot's list or else the first node of the next occupied slot in
    /// the current bitmap word (timers and overflow are ignored). A prefetch pipeline asks
    /// for each one's state a few events ahead (see `sim::run`); a wrong guess costs a
    /// wasted prefetch, never a wrong order.
    #[inline]
    pub fn hints(&self) -> [u32; 3] {
        let w = &self.wheel;
        let i = w.cur_idx;
        let mut word = w.occupied[i >> 6] & (!1u64 << (i & 63));
        let base = i & !63;
        let mut after = |h: u32| {
            if let Some(n) = w.nodes.get(h as usize) {
                if n.next != NIL {
                    return n.next;
                }
            }
            if word == 0 {
                return NIL;
            }
            let idx = (base + word.trailing_zeros() as usize) & (WHEEL_SLOTS as usize - 1);
            word &= word - 1;
            w.slots[idx].first
        };
        let h1 = if w.hint != NIL { w.hint } else { after(NIL) };
        let h2 = after(h1);
        let h3 = after(h2);
        [h1, h2, h3]
    }

    /// Asks the CPU for the wheel node of near event `id` (see [`EventQueue::hint`]); any
    /// id is accepted.
    #[inline]
    pub fn prefetch_node(&self, id: u32) {
        crate::routes::prefetch(self.wheel.nodes.as_ptr().wrapping_add(id as usize));
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.wheel.len + self.timers.len()
    }

    /// Whether no event is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A small, fast, seedable random generator (xoshiro256**), with independent streams derived
/// from one seed by SplitMix64. The algorithm is fixed here so results never change with a
/// dependency's version.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

/// SplitMix64 step: a good 64-bit mixer, also used for seeding and hashing.
#[inline]
pub fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// The generator for `stream` under master `seed`. Different streams are independent.
    pub fn new(seed: u64, stream: u64) -> Rng {
        let mut x = splitmix64(seed ^ splitmix64(stream.wrapping_add(0x5EED)));
        let mut s = [0u64; 4];
        for v in &mut s {
            x = splitmix64(x);
            *v = x;
        }
        if s.iter().all(|&v| v == 0) {
            s[0] = 1;
        }
        Rng { s }
    }

    /// Next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 random bits.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in [0, n) (n > 0), without modulo bias.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let threshold = n.wrapping_neg() % n;
        loop {
            let x = self.next_u64();
            let m = (x as u128) * (n as u128);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// Exponential with the given mean.
    #[inline]
    pub fn exp(&mut self, mean: f64) -> f64 {
        // 1 - U is in (0, 1], so the log is finite.
        -mean * (1.0 - self.next_f64()).ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pops everything, as `(time, event)`.
    fn drain(q: &mut EventQueue) -> Vec<(Time, Event)> {
        std::iter::from_fn(|| q.pop()).collect()
    }

    #[test]
    fn hint_names_the_next_event_of_the_slot() {
        let mut q = EventQueue::new(8, 1000, 10_000);
        q.push_near(100, 3);
        q.push_near(100, 5);
        q.push_near(300, 1); // same 512-ps slot, later
        q.push_near(5000, 2); // another slot
        assert_eq!(q.pop(), Some((100, Event::Near(3))));
        assert_eq!(q.hint(), 5);
        assert_eq!(q.pop(), Some((100, Event::Near(5))));
        assert_eq!(q.hint(), 1);
        assert_eq!(q.pop(), Some((300, Event::Near(1))));
        assert_eq!(
            q.hint(),
            2,
            "the slot is empty: the next occupied slot's first"
        );
        assert_eq!(q.pop(), Some((5000, Event::Near(2))));
        assert_eq!(q.hint(), u32::MAX, "nothing pending");
        // A slot a whole turn ahead (its bit lies below the current one's) is not named.
        q.push_near(5000 + 64 * 512, 4);
        assert_eq!(q.hint(), u32::MAX);
        assert_eq!(q.pop(), Some((5000 + 64 * 512, Event::Near(4))));
    }

    #[test]
    fn hints_follow_the_slot_then_the_next_occupied_slots() {
        let mut q = EventQueue::new(8, 1000, 10_000);
        for (t, id) in [(100, 3), (100, 5), (300, 1), (5000, 2), (6000, 4)] {
            q.push_near(t, id);
        }
        assert_eq!(q.pop(), Some((100, Event::Near(3))));
        assert_eq!(q.hints(), [5, 1, 2]);
        assert_eq!(q.pop(), Some((100, Event::Near(5))));
        assert_eq!(q.hints(), [1, 2, 4]);
        assert_eq!(q.pop(), Some((300, Event::Near(1))));
        assert_eq!(q.hints(), [2, 4, u32::MAX]);
        // The guesses are the order in which the events then come.
        assert_eq!(q.pop(), Some((5000, Event::Near(2))));
        assert_eq!(q.pop(), Some((6000, Event::Near(4))));
        assert_eq!(q.hints(), [u32::MAX; 3]);
    }

    #[test]
    fn queue_orders_by_time_then_insertion() {
        use Event::{Near, Timer};
        let mut q = EventQueue::new(8, 1000, 10_000);
        q.push_near(10, 0);
        q.push_near(5, 1);
        q.push_timer(10, 100);
        q.push_near(5, 2);
        assert_eq!(q.pop(), Some((5, Near(1))));
        q.push_near(5, 3);
        q.push_timer(5, 101);
        q.push_near(7, 4);
        assert_eq!(q.len(), 6);
        assert_eq!(
            drain(&mut q),
            [
                (5, Near(2)),
                (5, Near(3)),
                (5, Timer(101)),
                (7, Near(4)),
                (10, Near(0)),
                (10, Timer(100))
            ]
        );
        assert!(q.is_empty());
    }

    #[test]
    fn a_crowded_slot_pops_in_key_order() {
        // One 1024 ps slot holding many ids with few distinct times: ties go by insertion.
        let mut q = EventQueue::new(64, 1024, 4096);
        let mut rng = Rng::new(5, 5);
        let mut want = Vec::new();
        for id in 0..64u32 {
            let t = 2048 + rng.below(4);
            q.push_near(t, id);
            want.push((t, Event::Near(id)));
        }
        want.sort_by_key(|&(t, _)| t); // stable: insertion order within a time
        assert_eq!(drain(&mut q), want);
    }

    #[test]
    fn queue_mixes_wheel_overflow_and_timers_in_order() {
        // A wide wheel, and a 64-slot one whose horizon most events exceed.
        mixes_in_order(EventQueue::new(256, 1000, 1 << 40));
        mixes_in_order(EventQueue::new(256, 1000, 10_000));
        mixes_in_order(EventQueue::new(256, 1, 100));
        // Wide slots: many events each, pushed out of order into the current and later
        // slots.
        mixes_in_order(EventQueue::new(256, 1 << 20, 1 << 30));
    }

    #[test]
    fn wheel_width_follows_the_horizon() {
        let slots = |q: EventQueue| q.wheel.mask + 1;
        assert_eq!(slots(EventQueue::new(1, 1000, 1 << 40)), WHEEL_SLOTS);
        assert_eq!(slots(EventQueue::new(1, 1000, 10_000)), MIN_SLOTS);
        // bench-A: 1024 ps slots, 2.2 us horizon (2149 slots ahead).
        assert_eq!(slots(EventQueue::new(1, 1171, 2_200_000)), 4096);
        // Slots asked too narrow for the horizon are widened until it fits: 2.2 us in 256 ps
        // slots is 8,594 (128 ps would be 17,188, past the 16,384 a wheel has).
        let q = EventQueue::new(1, 1, 2_200_000);
        assert_eq!((q.wheel.shift, q.wheel.mask + 1), (8, WHEEL_SLOTS));
    }

    /// Random pushes (near ids reused once popped, near and far times, timers) and pops
    /// against a reference: every pop is the least `(time, insertion)` pending.
    fn mixes_in_order(mut q: EventQueue) {
        let mut rng = Rng::new(9, 9);
        let mut now = 0u64;
        let mut free: Vec<u32> = (0..256).rev().collect();
        // Pending events as (time, insertion number, event).
        let mut pending: Vec<(Time, u64, Event)> = Vec::new();
        let mut n = 0u64;
        for _ in 0..60_000 {
            if rng.below(10) < 6 || pending.is_empty() {
                let t = match rng.below(3) {
                    0 => now + rng.below(5_000),
                    1 => now + rng.below(50_000_000),
                    _ => now,
                };
                let e = match free.pop() {
                    Some(id) if rng.below(2) == 0 => {
                        q.push_near(t, id);
                        Event::Near(id)
                    }
                    other => {
                        free.extend(other);
                        q.push_timer(t, n);
                        Event::Timer(n)
                    }
                };
                pending.push((t, n, e));
                n += 1;
            } else {
                let got = q.pop().expect("events pending");
                let i = (0..pending.len())
                    .min_by_key(|&i| (pending[i].0, pending[i].1))
                    .expect("not empty");
                let (t, _, e) = pending.swap_remove(i);
                assert_eq!(got, (t, e));
                if let Event::Near(id) = e {
                    free.push(id);
                }
                now = t;
            }
            assert_eq!(q.len(), pending.len());
        }
        pending.sort_by_key(|&(t, s, _)| (t, s));
        let want: Vec<_> = pending.iter().map(|&(t, _, e)| (t, e)).collect();
        assert_eq!(drain(&mut q), want);
    }

    #[test]
    fn rng_streams_are_reproducible_and_distinct() {
        let a: Vec<u64> = (0..4).map(|_| Rng::new(1, 2).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(Rng::new(1, 2).next_u64(), Rng::new(1, 3).next_u64());
        assert_ne!(Rng::new(1, 2).next_u64(), Rng::new(2, 2).next_u64());
        let mut r = Rng::new(3, 3);
        let mean: f64 = (0..100_000).map(|_| r.exp(2.0)).sum::<f64>() / 100_000.0;
        assert!((mean - 2.0).abs() < 0.05);
    }
}
