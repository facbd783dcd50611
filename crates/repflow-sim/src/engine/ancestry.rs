//! The full ancestry of every event (cargo feature `tie-stats`), against which the queue's
//! two-generation key is measured.

use super::event::{Anc, Place, Time};

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
    pub(super) fn new() -> Ancestry {
        Ancestry {
            pending: std::collections::HashMap::new(),
            reserved: std::collections::HashMap::new(),
            recs: Vec::new(),
            cur: ROOT,
            cur_i: 0,
        }
    }

    pub(super) fn creator(&mut self) -> (u32, u32) {
        let c = (self.cur, self.cur_i);
        self.cur_i += 1;
        c
    }

    pub(super) fn on_push(&mut self, key: (Time, Anc, u64)) {
        let c = self.creator();
        self.pending.entry(key).or_default().push(c);
    }

    pub(super) fn on_reserve(&mut self, place: Place) {
        let c = self.creator();
        self.reserved.insert(place, c);
    }

    /// A push with a push index taken earlier by the current event.
    pub(super) fn on_push_taken(&mut self, key: (Time, Anc, u64), i: u32) {
        self.pending.entry(key).or_default().push((self.cur, i));
    }

    /// A push at a place taken earlier: its creator is the event that took the place.
    pub(super) fn on_push_reserved(&mut self, key: (Time, Anc, u64)) {
        let c = self
            .reserved
            .remove(&(key.1, key.2))
            .unwrap_or((self.cur, u32::MAX));
        self.pending.entry(key).or_default().push(c);
    }

    pub(super) fn on_pop(&mut self, key: (Time, Anc, u64)) {
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
