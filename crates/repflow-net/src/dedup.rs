//! The receiver's delivery decision as a state machine (sans-IO: no tokio, no clock of its
//! own; the caller passes the time, so tests drive it with a fake clock).
//!
//! A flow is delivered when the first copy of its id arrives; every later frame of that id
//! is a duplicate, whatever its copy index or copy count, while the id is remembered. The
//! copy indices seen are kept as a set, so a repeated index (copy 0 twice) is recognised as
//! a repeat rather than counted towards the flow's copies.
//!
//! Bounds: at most `capacity` ids are remembered (the oldest is forgotten first when a new one
//! would exceed it); an id is forgotten `ttl` after it was registered (or after its call was
//! answered); the insertion-order queue holds at most `2 × capacity + 64` entries. A call's
//! waiters hold at most one entry per distinct copy index (≤ 255).

use std::collections::hash_map::Entry as Slot;
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the caller does with a complete copy.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    /// First copy of this id: deliver it to the application.
    New,
    /// A later copy: do not deliver; answer with `DUP` (and with the cached response of a
    /// call, if it exists). `repeat` is set when this copy index had already arrived.
    Dup {
        /// The call's response, if it was answered.
        cached: Option<Arc<[u8]>>,
        /// The same copy index arrived before.
        repeat: bool,
    },
    /// A frame of a remembered id whose payload digest differs from the first copy's:
    /// refuse it (not delivered, not answered).
    Conflict,
    /// An id not remembered whose timestamp is not newer than an id the full table had to
    /// forget (only checked when asked): it may be a replay, refuse it.
    Stale,
}

#[derive(Debug)]
enum Resp<W> {
    Flow,
    Pending(Vec<W>),
    Done(Arc<[u8]>),
}

#[derive(Debug)]
struct Entry<W> {
    copies: u8,
    digest: u64,
    ts: u64,
    seen: [u64; 4],
    gen: u64,
    resp: Resp<W>,
}

impl<W> Entry<W> {
    fn mark(&mut self, copy: u8) -> bool {
        let (w, b) = (usize::from(copy / 64), copy % 64);
        let was = self.seen[w] >> b & 1 == 1;
        self.seen[w] |= 1 << b;
        was
    }

    fn distinct(&self) -> u32 {
        self.seen.iter().map(|w| w.count_ones()).sum()
    }
}

/// Counters of what the filter forgot and why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DedupStats {
    /// Ids forgotten before all their copies had arrived (by TTL or capacity).
    pub evictions: u64,
    /// Ids forgotten because the table was full (before their TTL).
    pub capacity_evictions: u64,
    /// Calls forgotten before the application answered them (their waiters get no response).
    pub calls_expired: u64,
    /// Frames whose copy index had already arrived for that id.
    pub repeats: u64,
    /// Frames refused because their digest differs from the first copy's.
    pub conflicts: u64,
}

/// The bounded duplicate filter. `K` identifies a flow (sender and flow id), `W` is what
/// waits for a call's response (a connection's queue, in the server).
#[derive(Debug)]
pub(crate) struct Dedup<K, W> {
    map: HashMap<K, Entry<W>>,
    /// Ids in registration order with their generation and registration time: whether the
    /// oldest id is due is decided here, without touching the map (one map access per
    /// eviction, none while nothing is due).
    order: VecDeque<(K, u64, Instant)>,
    cap: usize,
    ttl: Duration,
    next_gen: u64,
    stats: DedupStats,
    /// Newest timestamp among ids forgotten because the table was full.
    horizon: u64,
}

impl<K: Copy + Eq + Hash, W> Dedup<K, W> {
    /// A filter remembering at most `cap` ids for `ttl` each.
    pub(crate) fn new(cap: usize, ttl: Duration) -> Self {
        Dedup {
            map: HashMap::new(),
            order: VecDeque::new(),
            cap: cap.max(1),
            ttl,
            next_gen: 0,
            stats: DedupStats::default(),
            horizon: 0,
        }
    }

    /// Ids remembered now.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Entries of the insertion-order queue (bounded by `2 × capacity + 64`).
    pub(crate) fn order_len(&self) -> usize {
        self.order.len()
    }

    /// The counters.
    pub(crate) fn stats(&self) -> DedupStats {
        self.stats
    }

    fn push_order(&mut self, key: K, gen: u64, now: Instant) {
        self.order.push_back((key, gen, now));
        if self.order.len() > 2 * self.cap + 64 {
            // Drop stale entries (ids re-queued by `complete`): amortised O(1).
            let map = &self.map;
            self.order
                .retain(|(k, g, _)| map.get(k).is_some_and(|e| e.gen == *g) || *g == gen);
        }
    }

    /// Forgets ids older than the TTL, and the oldest ids while more than `cap` are held.
    pub(crate) fn expire(&mut self, now: Instant) {
        while let Some(&(k, gen, born)) = self.order.front() {
            let old = now.saturating_duration_since(born) > self.ttl;
            let full = self.map.len() > self.cap;
            if !old && !full {
                break;
            }
            self.order.pop_front();
            // A queue entry whose id is gone or was re-queued since (a later generation) is
            // stale: skip it.
            let Slot::Occupied(slot) = self.map.entry(k) else {
                continue;
            };
            if slot.get().gen != gen {
                continue;
            }
            let e = slot.remove();
            if e.distinct() < u32::from(e.copies) {
                self.stats.evictions += 1;
            }
            if !old {
                self.stats.capacity_evictions += 1;
                self.horizon = self.horizon.max(e.ts);
            }
            if matches!(e.resp, Resp::Pending(_)) {
                self.stats.calls_expired += 1;
            }
        }
    }

    /// Registers a complete copy (`copy` of `copies`, payload digest `digest`, sender
    /// timestamp `ts`); `waiter` is who answers a call's later copies (kept once per distinct
    /// copy index while the call is unanswered). With `guard`, an unknown id whose timestamp
    /// is not newer than the newest id forgotten for lack of room is refused
    /// ([`Seen::Stale`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_copy(
        &mut self,
        key: K,
        copy: u8,
        copies: u8,
        call: bool,
        waiter: Option<W>,
        (digest, ts, guard): (u64, u64, bool),
        now: Instant,
    ) -> Seen {
        self.expire(now);
        let slot = match self.map.entry(key) {
            Slot::Occupied(slot) => slot,
            Slot::Vacant(slot) => {
                if guard && self.horizon > 0 && ts <= self.horizon {
                    return Seen::Stale;
                }
                let resp = if call {
                    Resp::Pending(waiter.into_iter().collect())
                } else {
                    Resp::Flow
                };
                self.next_gen += 1;
                let gen = self.next_gen;
                let mut e = Entry {
                    copies,
                    digest,
                    ts,
                    seen: [0; 4],
                    gen,
                    resp,
                };
                e.mark(copy);
                slot.insert(e);
                self.push_order(key, gen, now);
                self.expire(now);
                return Seen::New;
            }
        };
        {
            let e = slot.into_mut();
            if e.digest != digest {
                self.stats.conflicts += 1;
                return Seen::Conflict;
            }
            let repeat = e.mark(copy);
            if repeat {
                self.stats.repeats += 1;
            }
            let cached = match &mut e.resp {
                Resp::Flow => None,
                Resp::Pending(w) => {
                    if let (Some(tx), false) = (waiter, repeat) {
                        w.push(tx);
                    }
                    None
                }
                Resp::Done(b) => Some(b.clone()),
            };
            Seen::Dup { cached, repeat }
        }
    }

    /// Records a call's response; returns who waits for it (nothing if the call was
    /// forgotten meanwhile). The id is then remembered `ttl` longer, to answer late copies.
    pub(crate) fn complete(&mut self, key: K, body: Arc<[u8]>, now: Instant) -> Vec<W> {
        let Some(e) = self.map.get_mut(&key) else {
            return Vec::new();
        };
        let waiters = match std::mem::replace(&mut e.resp, Resp::Done(body)) {
            Resp::Pending(w) => w,
            _ => Vec::new(),
        };
        self.next_gen += 1;
        let gen = self.next_gen;
        e.gen = gen;
        self.push_order(key, gen, now);
        waiters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type D = Dedup<u64, u32>;
    const S: Duration = Duration::from_secs(1);

    fn dup(repeat: bool) -> Seen {
        Seen::Dup {
            cached: None,
            repeat,
        }
    }

    #[test]
    fn repeated_index_is_not_a_new_copy() {
        let t = Instant::now();
        let mut d = D::new(16, S);
        assert_eq!(d.on_copy(1, 0, 2, false, None, (0, 0, false), t), Seen::New);
        assert_eq!(d.on_copy(1, 0, 2, false, None, (0, 0, false), t), dup(true));
        assert_eq!(
            d.on_copy(1, 1, 2, false, None, (0, 0, false), t),
            dup(false)
        );
        // Every copy has arrived, yet the id stays remembered: a replay is still a duplicate.
        assert_eq!(d.on_copy(1, 1, 2, false, None, (0, 0, false), t), dup(true));
        assert_eq!(d.stats().repeats, 2);
    }

    #[test]
    fn copy_count_change_is_a_duplicate() {
        let t = Instant::now();
        let mut d = D::new(16, S);
        assert_eq!(d.on_copy(5, 0, 1, false, None, (0, 0, false), t), Seen::New);
        assert_eq!(
            d.on_copy(5, 1, 2, false, None, (0, 0, false), t),
            dup(false)
        );
    }

    #[test]
    fn ttl_eviction_with_fake_clock() {
        let t = Instant::now();
        let mut d = D::new(16, S);
        d.on_copy(1, 0, 2, false, None, (0, 0, false), t);
        d.on_copy(2, 0, 2, false, None, (0, 0, false), t + S / 2);
        d.on_copy(2, 1, 2, false, None, (0, 0, false), t + S / 2);
        d.expire(t + S + Duration::from_millis(1));
        assert_eq!(d.len(), 1);
        // Id 1 was forgotten with its copy 1 missing: counted; a late copy is new again.
        assert_eq!(d.stats().evictions, 1);
        assert_eq!(
            d.on_copy(1, 1, 2, false, None, (0, 0, false), t + 2 * S),
            Seen::New,
            "after eviction a late copy is delivered again (documented limit)"
        );
        d.expire(t + 3 * S + Duration::from_millis(1));
        assert_eq!(d.len(), 0);
        // Id 2 had all its copies: not counted as an early eviction.
        assert_eq!(d.stats().evictions, 2);
    }

    #[test]
    fn capacity_eviction_keeps_the_newest() {
        let t = Instant::now();
        let mut d = D::new(4, Duration::from_secs(3600));
        for id in 0..10u64 {
            assert_eq!(
                d.on_copy(id, 0, 2, false, None, (0, 0, false), t),
                Seen::New
            );
            assert!(d.len() <= 4);
        }
        assert_eq!(d.stats().capacity_evictions, 6);
        assert_eq!(
            d.on_copy(9, 1, 2, false, None, (0, 0, false), t),
            dup(false)
        );
        assert_eq!(d.on_copy(0, 1, 2, false, None, (0, 0, false), t), Seen::New);
    }

    #[test]
    fn order_queue_is_bounded_by_capacity() {
        let t = Instant::now();
        let mut d = D::new(8, Duration::from_secs(3600));
        for id in 0..10_000u64 {
            d.on_copy(id, 0, 1, true, Some(1), (0, 0, false), t);
            d.complete(id, Arc::from(&b"r"[..]), t);
            assert!(d.order_len() <= 2 * 8 + 64 + 1, "{}", d.order_len());
        }
    }

    #[test]
    fn call_waiters_once_per_index_and_cached_response() {
        let t = Instant::now();
        let mut d = D::new(16, S);
        assert_eq!(
            d.on_copy(3, 0, 3, true, Some(10), (0, 0, false), t),
            Seen::New
        );
        assert_eq!(
            d.on_copy(3, 1, 3, true, Some(11), (0, 0, false), t),
            dup(false)
        );
        assert_eq!(
            d.on_copy(3, 1, 3, true, Some(12), (0, 0, false), t),
            dup(true)
        );
        let w = d.complete(3, Arc::from(&b"ok"[..]), t);
        assert_eq!(w, vec![10, 11]);
        match d.on_copy(3, 2, 3, true, Some(13), (0, 0, false), t) {
            Seen::Dup {
                cached: Some(b), ..
            } => assert_eq!(&b[..], b"ok"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unanswered_call_expires_and_is_counted() {
        let t = Instant::now();
        let mut d = D::new(16, S);
        d.on_copy(4, 0, 1, true, Some(1), (0, 0, false), t);
        d.expire(t + 2 * S);
        assert_eq!(d.stats().calls_expired, 1);
        assert!(d.complete(4, Arc::from(&b""[..]), t + 2 * S).is_empty());
    }

    #[test]
    fn different_content_is_a_conflict() {
        let t = Instant::now();
        let mut d = D::new(16, S);
        assert_eq!(d.on_copy(1, 0, 2, false, None, (7, 0, false), t), Seen::New);
        assert_eq!(
            d.on_copy(1, 1, 2, false, None, (8, 0, false), t),
            Seen::Conflict
        );
        assert_eq!(
            d.on_copy(1, 1, 2, false, None, (7, 0, false), t),
            dup(false)
        );
        assert_eq!(d.stats().conflicts, 1);
    }

    #[test]
    fn replay_after_capacity_eviction_is_stale() {
        let t = Instant::now();
        let mut d = D::new(1, Duration::from_secs(3600));
        assert_eq!(
            d.on_copy(1, 0, 1, false, None, (0, 100, true), t),
            Seen::New
        );
        assert_eq!(
            d.on_copy(2, 0, 1, false, None, (0, 101, true), t),
            Seen::New
        );
        // Id 1 was pushed out; its replay (timestamp 100) is refused, newer ids are not.
        assert_eq!(
            d.on_copy(1, 0, 1, false, None, (0, 100, true), t),
            Seen::Stale
        );
        assert_eq!(
            d.on_copy(3, 0, 1, false, None, (0, 102, true), t),
            Seen::New
        );
    }

    /// Seeded random sequences against a model: at most one delivery per id among those
    /// remembered, and the bounds always hold.
    #[test]
    fn random_sequences_respect_bounds_and_deliver_once() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..200 {
            let cap = 1 + (next() % 32) as usize;
            let mut d: D = D::new(cap, Duration::from_millis(50));
            let t0 = Instant::now();
            let mut now = t0;
            let mut delivered: HashMap<u64, Instant> = HashMap::new();
            for _ in 0..500 {
                now += Duration::from_millis(next() % 5);
                let id = next() % 40;
                let copies = 1 + (next() % 4) as u8;
                let copy = (next() % u64::from(copies)) as u8;
                let call = next() % 3 == 0;
                let seen = d.on_copy(id, copy, copies, call, Some(0), (0, 0, false), now);
                if seen == Seen::New {
                    if let Some(&at) = delivered.get(&id) {
                        // A second delivery only after the first was forgotten: by TTL or by
                        // capacity (more than `cap` other ids since).
                        assert!(
                            now.duration_since(at) > Duration::from_millis(50)
                                || d.stats().capacity_evictions > 0
                        );
                    }
                    delivered.insert(id, now);
                }
                if call && next() % 2 == 0 {
                    d.complete(id, Arc::from(&b"x"[..]), now);
                }
                assert!(d.len() <= cap);
                assert!(d.order_len() <= 2 * cap + 64 + 1);
            }
        }
    }
}
