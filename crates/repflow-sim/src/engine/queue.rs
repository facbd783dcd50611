//! The event queue: pending events of a run in their canonical order, near events on a
//! calendar wheel, timers in a heap.

#[cfg(feature = "tie-stats")]
use super::ancestry::Ancestry;
use super::event::{anc_b, Anc, Entry, Event, Place, Time, TIMER_RANK};
use super::prefetch::prefetch;
use super::wheel::{Least, Wheel, MIN_SLOTS, NIL, WHEEL_SLOTS};
use std::collections::BinaryHeap;
use std::hint::select_unpredictable;

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
    pub(super) wheel: Wheel,
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
    ///
    /// Without branches: whether the last slot popped holds a next node follows the traffic,
    /// and the branch on it was mispredicted 1.1 M times in the first 5 ms of bench-A
    /// (cachegrind: 14 % of all mispredictions). Both guesses are computed (the second reads
    /// a bitmap word and a slot, both at hand) and one is selected.
    #[inline]
    pub fn hint(&self) -> u32 {
        let w = &self.wheel;
        let i = w.cur_idx;
        let word = w.occupied[i >> 6] & (!1u64 << (i & 63));
        // (An empty word gives 64: the index is then any slot's, and not used.)
        let next = w.slots
            [((i & !63) + word.trailing_zeros() as usize) & (WHEEL_SLOTS as usize - 1)]
            .first;
        let next = select_unpredictable(word == 0, NIL, next);
        select_unpredictable(w.hint != NIL, w.hint, next)
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
        // Without branches on the guesses, as `hint` (for a guess of NIL, `next` is NIL).
        let mut after = |h: u32| {
            let next = w.nodes.get(h as usize).map_or(NIL, |n| n.next);
            let in_slot = next != NIL;
            let idx = (base + word.trailing_zeros() as usize) & (WHEEL_SLOTS as usize - 1);
            let first = select_unpredictable(word == 0, NIL, w.slots[idx].first);
            word = select_unpredictable(in_slot, word, word & word.wrapping_sub(1));
            select_unpredictable(in_slot, next, first)
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
        prefetch(self.wheel.nodes.as_ptr().wrapping_add(id as usize));
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
