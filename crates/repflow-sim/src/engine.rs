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

/// The pending events of a run, ordered by time, then by [`Place`]: when each was scheduled
/// and by what ([`Anc`]), then its rank (a near event's rank is its id, a timer's is
/// [`TIMER_RANK`] plus its payload). No insertion counter takes part (see [`EventQueue`]).
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
/// served.
///
/// Events of one time go by their ancestry, two generations deep: when they were scheduled,
/// when the event that scheduled them had been scheduled, and their push index — which is
/// the order an insertion counter gives whenever two generations tell the events apart
/// (ties at one node, measured: 70–99 % outside pFabric) — then by rank. The order is
/// canonical: each event's key is a function of its own history, not of how many events
/// were pushed before it, so a seed gives bit-identical runs, and a queue holding any subset
/// of the events (one partition's, in a parallel engine) serves them in the same relative
/// order as this one.
pub struct EventQueue {
    wheel: Wheel,
    timers: BinaryHeap<Entry<u64>>,
    /// Time of the earliest timer (`Time::MAX` if none).
    timer_time: Time,
    /// `timer_time`'s wheel slot (`timer_time >> shift`).
    timer_slot: u64,
    /// The current time: that of the event last popped (0 before the first).
    now: Time,
    /// Place of the event last popped.
    last_place: Place,
    /// The creator part of the [`Anc`] of events pushed now (see [`anc_b`]).
    cur_b: u32,
    /// Pushes since the last pop (the push index of [`Anc`]).
    cur_i: u32,
    /// Who scheduled each event (cargo feature `tie-stats`).
    #[cfg(feature = "tie-stats")]
    pub ancestry: Ancestry,
}

/// [`Ancestry`]'s creator of the events scheduled before the first pop.
#[cfg(feature = "tie-stats")]
pub const ROOT: u32 = u32::MAX;

/// Which event scheduled each event, and as its how-manieth push (cargo feature
/// `tie-stats`): the whole ancestry, against which the queue's two-generation key
/// ([`Anc`]) is measured — an insertion counter orders a tie by the processing order of the
/// two events' creators, recursively, which is what this lets one compute.
#[cfg(feature = "tie-stats")]
pub struct Ancestry {
    /// A pending event's full key → (creator's record, push index) (a list: keys may
    /// repeat once push indices saturate).
    pending: std::collections::HashMap<(Time, Anc, u64), Vec<(u32, u32)>>,
    /// Places taken by [`EventQueue::place`] and not yet scheduled.
    reserved: std::collections::HashMap<(Anc, u64), (u32, u32)>,
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
            reserved: std::collections::HashMap::new(),
            recs: Vec::new(),
            cur: ROOT,
            cur_i: 0,
        }
    }

    fn creator(&mut self) -> (u32, u32) {
        let c = (self.cur, self.cur_i);
        self.cur_i += 1;
        c
    }

    fn on_push(&mut self, key: (Time, Anc, u64)) {
        let c = self.creator();
        self.pending.entry(key).or_default().push(c);
    }

    fn on_reserve(&mut self, place: Place) {
        let c = self.creator();
        self.reserved.insert(place, c);
    }

    /// A push with a push index taken earlier by the current event.
    fn on_push_taken(&mut self, key: (Time, Anc, u64), i: u32) {
        self.pending.entry(key).or_default().push((self.cur, i));
    }

    /// A push at a place taken earlier: its creator is the event that took the place.
    fn on_push_reserved(&mut self, key: (Time, Anc, u64)) {
        let c = self
            .reserved
            .remove(&(key.1, key.2))
            .unwrap_or((self.cur, u32::MAX));
        self.pending.entry(key).or_default().push(c);
    }

    fn on_pop(&mut self, key: (Time, Anc, u64)) {
        let list = self
            .pending
            .get_mut(&key)
            .expect("every popped event was pushed");
        let (c, i) = list.remove(0);
        if list.is_empty() {
            self.pending.remove(&key);
        }
        self.recs.push((key.0, c, i));
        self.cur = (self.recs.len() - 1) as u32;
        self.cur_i = 0;
    }
}

/// When an event was scheduled: the current time when it was pushed, then, packed in 32
/// bits so that they compare in that order, the time the event that pushed it had been
/// scheduled at (two generations of its ancestry) and its push index (see [`anc_b`]).
pub type Anc = (Time, u32);

/// The 32-bit part of an [`Anc`]: `!(push - cpush)` in 28 bits (a later creator is a shorter
/// delay), then the push index `i` in 4. Delays past 268 µs and indices past 15 saturate:
/// such ties fall to the rank, in a fixed order all the same.
#[inline(always)]
pub fn anc_b(push: Time, cpush: Time, i: u32) -> u32 {
    let c = (push - cpush).min(0x0fff_ffff) as u32;
    (((!c) & 0x0fff_ffff) << 4) | i.min(15)
}

/// Where an event stands among the events of its time: when it was scheduled ([`Anc`]),
/// then its rank.
pub type Place = (Anc, u64);

/// Rank of a timer with payload 0: among events scheduled at one time for one time, timers
/// go after every near event, and among themselves by payload (below `TIMER_RANK`).
pub const TIMER_RANK: u64 = 1 << 63;

#[derive(Clone, Copy)]
struct Entry<E> {
    time: Time,
    push: Anc,
    rank: u64,
    e: E,
}

impl<E> Entry<E> {
    #[inline]
    fn key(&self) -> (Time, Anc, u64) {
        (self.time, self.push, self.rank)
    }
}

/// A near event's key after its time: scheduled at, then ancestry and id in one integer.
#[inline(always)]
fn near_key(push: Time, b: u32, id: u32) -> (Time, u64) {
    (push, ((b as u64) << 32) | id as u64)
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

/// log2 of [`WHEEL_SLOTS`]. 2^16 lets k = 32's wheel take the slots its link count asks
/// for (64 ps at 10 Gb/s, against 256 ps with 2^14: +6-9 % packet-hops/s on its loaded
/// network, docs/performance.md); smaller networks use fewer (the arrays cost 520 KiB).
const WHEEL_BITS: u32 = 16;
/// Most slots a wheel can have.
const WHEEL_SLOTS: u64 = 1 << WHEEL_BITS;
/// Fewest slots a wheel has (one bitmap word).
const MIN_SLOTS: u64 = 64;
/// End of a slot's list.
const NIL: u32 = u32::MAX;

/// A pending near event: its time, when it was scheduled (its rank is its id) and the next
/// node of its slot's list.
#[derive(Clone, Copy, Debug)]
struct Node {
    time: Time,
    /// When it was scheduled.
    push: Time,
    /// Next node of the slot's list (`NIL`: the last).
    next: u32,
    /// The 32-bit part of its [`Anc`].
    b: u32,
}

impl Node {
    #[inline(always)]
    fn key(&self, id: u32) -> (Time, Time, u64) {
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
const WRITE_EMPTY_SLOTS: u64 = 16_384;

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
    fn turn(&mut self, abs: u64) {
        self.cur = abs;
        self.cur_idx = self.index(abs);
    }

    /// Index in `slots` of absolute slot `abs`.
    #[inline]
    fn index(&self, abs: u64) -> usize {
        (abs & self.mask & (WHEEL_SLOTS - 1)) as usize
    }

    #[inline(always)]
    fn push<const FRESH: bool>(&mut self, id: u32, time: Time, push: Anc) {
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
    fn link<const FRESH: bool>(&mut self, id: u32, time: Time, push: Anc, abs: u64) {
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
    fn insert_before_later(&mut self, idx: usize, id: u32) {
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
                self.link::<false>(y.e, y.time, y.push, abs);
            }
        }
    }
}

impl EventQueue {
    /// An empty queue for near-event ids `0..ids`, with slots about `width_ps` wide (rounded
    /// down to a power of two; wider if the horizon would not fit 65,536 of them) and a
    /// wheel just wide enough for near events at most
    /// `horizon_ps` after the current time (between 64 and 65,536 slots). Only the speed
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
            now: 0,
            last_place: ((0, 0), 0),
            cur_b: anc_b(0, 0, 0),
            cur_i: 0,
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
    /// `time`, as scheduled now. An id has at most one pending event: pushing it again
    /// before it is popped corrupts the queue.
    #[inline]
    pub fn push_near(&mut self, time: Time, id: u32) {
        let a = self.anc();
        #[cfg(feature = "tie-stats")]
        self.ancestry.on_push((time, a, id as u64));
        self.wheel.push::<true>(id, time, a);
    }

    /// Schedules near event `id` at `time` (not before the current time) as if it had been
    /// scheduled at `push` (not after the current time): an event that may never be needed
    /// is decided late and keeps the place it would have had (see [`EventQueue::place`]).
    #[inline]
    pub fn push_near_as_of(&mut self, time: Time, id: u32, push: Anc) {
        debug_assert!(push.0 <= self.now && time >= self.now, "out of order");
        #[cfg(feature = "tie-stats")]
        self.ancestry.on_push_reserved((time, push, id as u64));
        self.wheel.push::<false>(id, time, push);
    }

    /// Takes the [`Anc`] of the next push without scheduling anything: the push index is
    /// used whether or not an event is then scheduled with it
    /// ([`EventQueue::push_near_taken`]), so that the places of this event's later pushes do
    /// not depend on whether it was.
    #[inline(always)]
    pub fn take_anc(&mut self) -> Anc {
        self.anc()
    }

    /// Schedules near event `id` at `time` with an [`Anc`] taken by the current event
    /// ([`EventQueue::take_anc`]): ordered exactly as [`EventQueue::push_near`] would have
    /// ordered it at that push.
    #[inline]
    pub fn push_near_taken(&mut self, time: Time, id: u32, anc: Anc) {
        debug_assert!(anc.0 == self.now, "a place taken now");
        #[cfg(feature = "tie-stats")]
        self.ancestry
            .on_push_taken((time, anc, id as u64), anc.1 & 15);
        self.wheel.push::<true>(id, time, anc);
    }

    /// Schedules a timer at `time` with an [`Anc`] taken by the current event
    /// ([`EventQueue::take_anc`]).
    pub fn push_timer_as(&mut self, time: Time, event: u64, anc: Anc) {
        debug_assert!(anc.0 == self.now && event < TIMER_RANK, "a place taken now");
        #[cfg(feature = "tie-stats")]
        self.ancestry
            .on_push_taken((time, anc, TIMER_RANK | event), anc.1 & 15);
        self.timer_entry(time, event, anc);
    }

    fn timer_entry(&mut self, time: Time, event: u64, anc: Anc) {
        self.set_timer_time(self.timer_time.min(time));
        self.timers.push(Entry {
            time,
            push: anc,
            rank: TIMER_RANK | event,
            e: event,
        });
    }

    /// Schedules near event `id` at `time`, which another queue's current event scheduled
    /// with [`Anc`] `anc` (a partitioned run hands events between queues at the end of a
    /// window: `time` is not before this queue's current time, `anc` may be after it).
    pub fn push_near_remote(&mut self, time: Time, id: u32, anc: Anc) {
        assert!(time >= self.now, "an event handed over in the past");
        // (Ancestry is recorded for sequential runs only: the creator is unknown here.)
        #[cfg(feature = "tie-stats")]
        self.ancestry.on_push_taken((time, anc, id as u64), 0);
        self.wheel.push::<false>(id, time, anc);
    }

    /// [`EventQueue::push_near_remote`] for a timer.
    pub fn push_timer_remote(&mut self, time: Time, event: u64, anc: Anc) {
        assert!(time >= self.now, "an event handed over in the past");
        #[cfg(feature = "tie-stats")]
        self.ancestry
            .on_push_taken((time, anc, TIMER_RANK | event), 0);
        self.timer_entry(time, event, anc);
    }

    /// Time of the earliest pending event, without taking it (nor turning the wheel).
    pub fn peek_time(&self) -> Option<Time> {
        let w = &self.wheel;
        let near = match w.least() {
            Some(l) => Some(l.time),
            None if w.len == 0 => None,
            None => {
                let slot = w
                    .next_occupied()
                    .map(|abs| w.nodes[w.slots[w.index(abs)].first as usize].time);
                let over = w.overflow.peek().map(|y| y.time);
                match (slot, over) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            }
        };
        let timer = (self.timer_time != Time::MAX).then_some(self.timer_time);
        match (near, timer) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// [`EventQueue::pop`] if the earliest event is before `limit`; else `None`, the event
    /// left in place.
    pub fn pop_before(&mut self, limit: Time) -> Option<(Time, Event)> {
        if let Some(r) = self.pop_fast::<true>(limit) {
            return r;
        }
        if self.peek_time()? >= limit {
            return None;
        }
        self.pop()
    }

    /// [`EventQueue::push_near_as_of`] at `place`.
    #[inline]
    pub fn push_near_at(&mut self, time: Time, id: u32, place: Place) {
        self.push_near_as_of(time, id, place.0);
    }

    /// The place near event `id` at `time` takes when scheduled now (a push: it counts in
    /// the push index of the events scheduled after it).
    #[inline]
    pub fn place(&mut self, id: u32) -> Place {
        let p = (self.anc(), id as u64);
        #[cfg(feature = "tie-stats")]
        self.ancestry.on_reserve(p);
        p
    }

    /// The [`Anc`] of the next push.
    #[inline(always)]
    fn anc(&mut self) -> Anc {
        let i = self.cur_i;
        self.cur_i += 1;
        (self.now, self.cur_b | i.min(15))
    }

    /// Records the event just popped, at `time` and `place`.
    #[inline(always)]
    fn popped(&mut self, time: Time, place: Place) {
        #[cfg(feature = "tie-stats")]
        self.ancestry.on_pop((time, place.0, place.1));
        self.now = time;
        self.last_place = place;
        self.cur_b = anc_b(time, place.0 .0, 0);
        self.cur_i = 0;
    }

    /// Place of the event last popped: with its time, its place in the order.
    #[inline]
    pub fn last_place(&self) -> Place {
        self.last_place
    }

    /// Schedules a timer at `time`, as scheduled now; among the events scheduled at one time
    /// for one time, timers go after near events, and among themselves by payload. `event`
    /// must be below [`TIMER_RANK`].
    #[inline]
    pub fn push_timer(&mut self, time: Time, event: u64) {
        let anc = self.anc();
        debug_assert!(event < TIMER_RANK, "timer payload too large");
        self.set_timer_time(self.timer_time.min(time));
        #[cfg(feature = "tie-stats")]
        self.ancestry.on_push((time, anc, TIMER_RANK | event));
        self.timers.push(Entry {
            time,
            push: anc,
            rank: TIMER_RANK | event,
            e: event,
        });
    }

    /// Removes and returns the earliest event, with its time.
    #[inline]
    pub fn pop(&mut self) -> Option<(Time, Event)> {
        if let Some(r) = self.pop_fast::<false>(0) {
            return r;
        }
        self.pop_slow()
    }

    /// The fast path of [`EventQueue::pop`] (`LIMITED`: of [`EventQueue::pop_before`]
    /// `limit`): `Some` when it decides, `None` to take the slow path.
    ///
    /// With no overflow, the first occupied slot found in the current bitmap word, if not
    /// after the earliest timer's slot, holds the wheel's minimum; it goes first if it is
    /// strictly earlier than every timer. The word is read whether or not the current slot
    /// is empty: with events as dense as a loaded network's it nearly always has a slot, so
    /// the only branches here are nearly always taken (testing the current slot first
    /// mispredicted about every other pop). The wheel turns only to the slot of an event it
    /// takes (the slow path turns to the same slot).
    #[inline(always)]
    fn pop_fast<const LIMITED: bool>(&mut self, limit: Time) -> Option<Option<(Time, Event)>> {
        let w = &mut self.wheel;
        if !w.overflow.is_empty() {
            return None;
        }
        let i = w.cur_idx;
        let bit = i & 63;
        // Bits below the current slot's stand for slots a whole turn ahead.
        let word = w.occupied[i >> 6] & (!0u64 << bit);
        if word == 0 {
            return None;
        }
        let skip = word.trailing_zeros() as usize - bit;
        let abs = w.cur + skip as u64;
        if abs > self.timer_slot {
            return None;
        }
        let id = w.slots[i + skip].first;
        let time = w.nodes[id as usize].time;
        if time >= self.timer_time {
            return None;
        }
        // The earliest event of all.
        if LIMITED && time >= limit {
            return Some(None);
        }
        w.cur = abs;
        w.cur_idx = i + skip;
        let n = w.nodes[id as usize];
        w.unlink(Least { id, time });
        self.popped(time, ((n.push, n.b), id as u64));
        Some(Some((time, Event::Near(id))))
    }

    fn pop_slow(&mut self) -> Option<(Time, Event)> {
        let near = self.wheel.settle(self.timer_slot);
        let take_timer = match (near, self.timers.peek()) {
            (None, None) => return None,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (Some(n), Some(t)) => {
                let x = self.wheel.nodes[n.id as usize];
                t.key() < (n.time, (x.push, x.b), n.id as u64)
            }
        };
        if take_timer {
            let x = self.timers.pop().expect("peeked");
            self.set_timer_time(self.timers.peek().map_or(Time::MAX, |t| t.time));
            self.popped(x.time, (x.push, x.rank));
            Some((x.time, Event::Timer(x.e)))
        } else {
            let l = near.expect("a near event");
            let x = self.wheel.nodes[l.id as usize];
            self.wheel.unlink(l);
            self.popped(l.time, ((x.push, x.b), l.id as u64));
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
    fn queue_orders_by_time_then_place() {
        use Event::{Near, Timer};
        let mut q = EventQueue::new(8, 1000, 10_000);
        // Before the first pop, the pushes of one (notional) event: index 0, 1, 2, 3.
        q.push_near(10, 0);
        q.push_timer(10, 100);
        q.push_near(5, 3);
        q.push_near(5, 1);
        let b0 = anc_b(0, 0, 0);
        // Scheduled by one event for one time: in push order, whatever the ids.
        assert_eq!(q.pop(), Some((5, Near(3))));
        assert_eq!(q.last_place(), ((0, b0 | 2), 3));
        // Scheduled later (at 5): after id 1; among themselves in push order, timer or not.
        q.push_timer(5, 101);
        q.push_near(5, 2);
        q.push_near(7, 4);
        let b5 = anc_b(5, 0, 0);
        assert_eq!(q.place(6), ((5, b5 | 3), 6));
        assert_eq!(q.len(), 6);
        assert_eq!(
            drain(&mut q),
            [
                (5, Near(1)),
                (5, Timer(101)),
                (5, Near(2)),
                (7, Near(4)),
                (10, Near(0)),
                (10, Timer(100))
            ]
        );
        assert!(q.is_empty());
    }

    #[test]
    fn ties_between_creators_of_one_time_go_by_their_own_scheduling_times() {
        use Event::Near;
        let mut q = EventQueue::new(8, 1000, 100_000);
        // Two events at 100, the first scheduled at 0 (id 1), the other at 50 (id 0): 1
        // goes first. Each schedules an event at 300 (ids 2 and 3 resp.).
        q.push_near(50, 7);
        q.push_near(100, 1);
        assert_eq!(q.pop(), Some((50, Near(7))));
        q.push_near(100, 0);
        assert_eq!(q.pop(), Some((100, Near(1))));
        q.push_near(300, 3);
        assert_eq!(q.pop(), Some((100, Near(0))));
        q.push_near(300, 2);
        // Both scheduled at 100; 3's creator had been scheduled earlier (at 0, against 50).
        assert_eq!(drain(&mut q), [(300, Near(3)), (300, Near(2))]);
    }

    #[test]
    fn a_crowded_slot_pops_in_key_order() {
        // One 1024 ps slot holding many ids with few distinct times, pushed by one event in
        // no order of id: ties go by push index (which saturates at 15), then by id.
        let mut q = EventQueue::new(64, 1024, 4096);
        let mut rng = Rng::new(5, 5);
        let mut want = Vec::new();
        for i in 0..64u32 {
            let id = (i * 37) % 64;
            let t = 2048 + rng.below(4);
            q.push_near(t, id);
            want.push((t, i.min(15), id));
        }
        want.sort();
        let want: Vec<_> = want
            .into_iter()
            .map(|(t, _, id)| (t, Event::Near(id)))
            .collect();
        assert_eq!(drain(&mut q), want);
    }

    #[test]
    fn queue_mixes_wheel_overflow_and_timers_in_order() {
        // A wide wheel, and a 64-slot one whose horizon most events exceed. Wheels of
        // `WRITE_EMPTY_SLOTS` or more write events into empty slots without reading them,
        // the others push without a branch on emptiness: both ways are checked.
        mixes_in_order(EventQueue::new(256, 1000, 1 << 40));
        // k = 32's geometry: 65,536 slots of 64 ps, most of them empty at a push.
        let narrow = EventQueue::new(256, 64, 2_200_000);
        assert!(narrow.wheel.mask + 1 >= WRITE_EMPTY_SLOTS && narrow.wheel.shift == 6);
        mixes_in_order(narrow);
        mixes_in_order(EventQueue::new(256, 1000, 10_000));
        mixes_in_order(EventQueue::new(256, 1, 100));
        // Wide slots: many events each, pushed out of order into the current and later
        // slots.
        let wide_slots = EventQueue::new(256, 1 << 20, 1 << 30);
        assert!(wide_slots.wheel.mask + 1 < WRITE_EMPTY_SLOTS);
        mixes_in_order(wide_slots);
    }

    #[test]
    fn wheel_width_follows_the_horizon() {
        let slots = |q: EventQueue| q.wheel.mask + 1;
        assert_eq!(slots(EventQueue::new(1, 1000, 1 << 40)), WHEEL_SLOTS);
        assert_eq!(slots(EventQueue::new(1, 1000, 10_000)), MIN_SLOTS);
        // bench-A: 1024 ps slots, 2.2 us horizon (2149 slots ahead).
        assert_eq!(slots(EventQueue::new(1, 1171, 2_200_000)), 4096);
        // Slots asked too narrow for the horizon are widened until it fits: 2.2 us in 64 ps
        // slots is 34,375 (32 ps would be 68,750, past the 65,536 a wheel has).
        let q = EventQueue::new(1, 1, 2_200_000);
        assert_eq!((q.wheel.shift, q.wheel.mask + 1), (6, WHEEL_SLOTS));
    }

    /// Random pushes (near ids reused once popped, near and far times, timers) and pops
    /// against a reference: every pop is the least `(time, scheduled at, rank)` pending.
    fn mixes_in_order(mut q: EventQueue) {
        let mut rng = Rng::new(9, 9);
        let mut now = 0u64;
        let mut free: Vec<u32> = (0..256).rev().collect();
        // Pending events as ((time, ancestry, rank), event); the queue's ancestry state
        // modelled alongside.
        type Key = (Time, Anc, u64);
        let mut pending: Vec<(Key, Event)> = Vec::new();
        let (mut cur_b, mut i) = (anc_b(0, 0, 0), 0u32);
        let mut earlier = 0u64; // a past time, for near events placed as of then
        let mut n = 0u64;
        for _ in 0..60_000 {
            if rng.below(10) < 6 || pending.is_empty() {
                // Far, near and present times, and a coarse lattice (as equal packet sizes
                // make), so that many events share a time and a time of scheduling.
                let t = match rng.below(4) {
                    0 => now + rng.below(5_000),
                    1 => now + rng.below(50_000_000),
                    2 => now + 1000 * rng.below(4),
                    _ => now,
                };
                let fresh = (now, cur_b | i.min(15));
                let (key, e) = match free.pop() {
                    Some(id) if rng.below(2) == 0 => {
                        if rng.below(4) == 0 {
                            let anc = (earlier, rng.below(1 << 32) as u32);
                            q.push_near_as_of(t, id, anc);
                            ((t, anc, id as u64), Event::Near(id))
                        } else {
                            q.push_near(t, id);
                            i += 1;
                            ((t, fresh, id as u64), Event::Near(id))
                        }
                    }
                    other => {
                        free.extend(other);
                        q.push_timer(t, n);
                        i += 1;
                        ((t, fresh, TIMER_RANK | n), Event::Timer(n))
                    }
                };
                pending.push((key, e));
                n += 1;
            } else {
                let peeked = q.peek_time();
                // Nothing before the earliest time: pop_before leaves it in place.
                assert_eq!(q.pop_before(peeked.expect("events pending")), None);
                let got = q.pop().expect("events pending");
                assert_eq!(peeked, Some(got.0));
                let k = (0..pending.len())
                    .min_by_key(|&k| pending[k].0)
                    .expect("not empty");
                let (key, e) = pending.swap_remove(k);
                assert_eq!(got, (key.0, e));
                assert_eq!(q.last_place(), (key.1, key.2));
                if let Event::Near(id) = e {
                    free.push(id);
                }
                if key.0 > now {
                    earlier = now;
                }
                now = key.0;
                (cur_b, i) = (anc_b(now, key.1 .0, 0), 0);
            }
            assert_eq!(q.len(), pending.len());
        }
        pending.sort_by_key(|&(k, _)| k);
        let want: Vec<_> = pending.iter().map(|&(k, e)| (k.0, e)).collect();
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
