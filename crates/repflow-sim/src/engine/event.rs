//! Event identity and order: simulated time, the events a queue hands out, and the key
//! ([`Anc`], [`Place`]) by which events of one time are ordered.

/// Simulated time in picoseconds.
pub type Time = u64;

/// An event taken from an [`EventQueue`](super::EventQueue).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A near event, by its id (see [`EventQueue::push_near`](super::EventQueue::push_near)).
    Near(u32),
    /// A timer, with its payload.
    Timer(u64),
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
pub(super) struct Entry<E> {
    pub(super) time: Time,
    pub(super) push: Anc,
    pub(super) rank: u64,
    pub(super) e: E,
}

impl<E> Entry<E> {
    #[inline]
    pub(super) fn key(&self) -> (Time, Anc, u64) {
        (self.time, self.push, self.rank)
    }
}

/// A near event's key after its time: scheduled at, then ancestry and id in one integer.
#[inline(always)]
pub(super) fn near_key(push: Time, b: u32, id: u32) -> (Time, u64) {
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
