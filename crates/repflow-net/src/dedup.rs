//! The receiver's delivery decision as a state machine (sans-IO: no tokio, no clock of its
//! own; the caller passes the time, so tests drive it with a fake clock).
//!
//! A flow is delivered when the first copy of its id arrives; every later frame of that id
//! is a duplicate, whatever its copy index or copy count, while the id is remembered. The
//! copy indices seen are kept as a set, so a repeated index (copy 0 twice) is recognised as
//! a repeat rather than counted towards the flow's copies.
//!
//! Bounds: at most `capacity` ids are remembered; when a new one would exceed it, the source
//! (sender address, [`Sourced`]) that holds the most ids loses its oldest, so that a flood
//! from one address forgets its own ids first, never another address's while it holds more
//! than they do; an id is forgotten `ttl` after it was registered (or after its call was
//! answered); the insertion-order queue holds at most `2 × capacity + 64` entries, and so do
//! the per-source queues together. A call's
//! waiters hold at most one entry per distinct copy index (≤ 255).
//!
//! Responses kept to answer a call's late copies are bounded in bytes: each costs its length
//! plus [`HELD_OVERHEAD`]; one sender address holds at most `per_peer` bytes (its oldest
//! response is dropped first) and all of them at most `total` (the address holding the most
//! loses its oldest first, so an address flooding the cache evicts its own responses before
//! anyone else's). A response dropped this way leaves its id remembered: a late copy is
//! answered "executed, response no longer held" ([`Seen::Dup`] with `gone`), never delivered
//! again.

use std::collections::hash_map::Entry as Slot;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::hash::Hash;
use std::net::IpAddr;
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
        /// The call's response, if it was answered and is still held.
        cached: Option<Arc<[u8]>>,
        /// The same copy index arrived before.
        repeat: bool,
        /// The call was answered but its response was dropped to stay within the byte bounds:
        /// answer "executed, response no longer held".
        gone: bool,
        /// The flow or call is still with the application (its copies wait for it).
        waiting: bool,
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
    /// Answered: the response, held for late copies, and the address it is charged to.
    Done(Arc<[u8]>, IpAddr),
    /// Answered, response dropped (byte bounds).
    Gone,
}

/// Bytes a held response is charged beyond its length (its allocation and bookkeeping).
pub(crate) const HELD_OVERHEAD: usize = 64;

fn held_cost(len: usize) -> usize {
    len.saturating_add(HELD_OVERHEAD)
}

/// What one address's held responses cost, oldest first.
#[derive(Debug)]
struct PeerHeld<K> {
    bytes: usize,
    queue: VecDeque<(K, u64)>,
}

/// The byte accounting of held responses.
#[derive(Debug)]
struct Held<K> {
    max_total: usize,
    max_peer: usize,
    total: usize,
    peers: HashMap<IpAddr, PeerHeld<K>>,
    /// `(bytes, address)` of every address holding responses: the largest holder is last.
    by_size: BTreeSet<(usize, IpAddr)>,
    /// Entries of every address's queue together.
    queued: usize,
}

impl<K> Held<K> {
    fn set_bytes(&mut self, peer: IpAddr, old: usize, new: usize) {
        self.by_size.remove(&(old, peer));
        if new > 0 {
            self.by_size.insert((new, peer));
        } else if let Some(p) = self.peers.remove(&peer) {
            self.queued -= p.queue.len();
        }
    }
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
    /// Responses dropped (or never held) to stay within the byte bounds.
    pub responses_evicted: u64,
    /// Frames whose copy index had already arrived for that id.
    pub repeats: u64,
    /// Frames refused because their digest differs from the first copy's.
    pub conflicts: u64,
}

/// The sender address a key names, if any: capacity evictions take from the address holding
/// the most ids (keys without one share one bucket).
pub(crate) trait Sourced {
    /// The sender address.
    fn source(&self) -> Option<IpAddr>;
}

impl Sourced for (Option<IpAddr>, u64) {
    fn source(&self) -> Option<IpAddr> {
        self.0
    }
}

impl Sourced for u64 {
    fn source(&self) -> Option<IpAddr> {
        // Tests: the low 2 bits pick one of four addresses when above 1,000,000.
        (*self >= 1_000_000).then(|| IpAddr::from([127, 0, 0, (*self % 4) as u8]))
    }
}

impl Sourced for u8 {
    fn source(&self) -> Option<IpAddr> {
        Some(IpAddr::from([127, 0, 0, *self % 3]))
    }
}

/// One source's ids, in (re)registration order (stale entries skipped lazily).
#[derive(Debug)]
struct SourceIds<K> {
    live: usize,
    queue: VecDeque<(K, u64)>,
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
    held: Held<K>,
    sources: HashMap<Option<IpAddr>, SourceIds<K>>,
    /// `(live ids, source)`: the source holding the most is last.
    by_count: BTreeSet<(usize, Option<IpAddr>)>,
    /// Entries of every source queue together.
    source_queued: usize,
}

impl<K: Copy + Eq + Hash + Sourced, W> Dedup<K, W> {
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
            held: Held {
                max_total: usize::MAX,
                max_peer: usize::MAX,
                total: 0,
                peers: HashMap::new(),
                by_size: BTreeSet::new(),
                queued: 0,
            },
            sources: HashMap::new(),
            by_count: BTreeSet::new(),
            source_queued: 0,
        }
    }

    /// Entries of the per-source queues together (bounded by `2 × capacity + 64`).
    pub(crate) fn source_queue_len(&self) -> usize {
        self.source_queued
    }

    /// Queues `key` (generation `gen`) behind its source's ids; `new` when it is a new id.
    fn source_push(&mut self, key: K, gen: u64, new: bool) {
        let src = key.source();
        let s = self.sources.entry(src).or_insert_with(|| SourceIds {
            live: 0,
            queue: VecDeque::new(),
        });
        s.queue.push_back((key, gen));
        self.source_queued += 1;
        if new {
            self.by_count.remove(&(s.live, src));
            s.live += 1;
            self.by_count.insert((s.live, src));
        }
        if self.source_queued > 2 * self.cap + 64 {
            // Drop stale entries (ids forgotten or re-queued since): amortised O(1).
            let map = &self.map;
            let mut n = 0;
            for s in self.sources.values_mut() {
                s.queue
                    .retain(|(k, g)| map.get(k).is_some_and(|e| e.gen == *g) || *g == gen);
                n += s.queue.len();
            }
            self.source_queued = n;
        }
    }

    /// Counts an id of `src` as forgotten and drops the stale entries at its queue's front.
    fn source_forget(&mut self, src: Option<IpAddr>) {
        let Some(s) = self.sources.get_mut(&src) else {
            return;
        };
        self.by_count.remove(&(s.live, src));
        s.live -= 1;
        if s.live == 0 {
            self.source_queued -= s.queue.len();
            self.sources.remove(&src);
            return;
        }
        self.by_count.insert((s.live, src));
        let map = &self.map;
        while let Some(&(k, g)) = s.queue.front() {
            if map.get(&k).is_some_and(|e| e.gen == g) {
                break;
            }
            s.queue.pop_front();
            self.source_queued -= 1;
        }
    }

    /// Forgets the entry of `key` (already taken out of the map): counters and accounting.
    fn forgotten(&mut self, key: K, e: Entry<W>, by_capacity: bool) {
        if e.distinct() < u32::from(e.copies) {
            self.stats.evictions += 1;
        }
        if by_capacity {
            self.stats.capacity_evictions += 1;
            self.horizon = self.horizon.max(e.ts);
        }
        match e.resp {
            Resp::Pending(_) => self.stats.calls_expired += 1,
            Resp::Done(body, peer) => self.release(peer, held_cost(body.len())),
            _ => {}
        }
        self.source_forget(key.source());
    }

    /// Bounds the bytes of held responses: `total` for all senders, `per_peer` for one
    /// sender address (see the module documentation).
    pub(crate) fn with_response_bounds(mut self, total: usize, per_peer: usize) -> Self {
        self.held.max_total = total;
        self.held.max_peer = per_peer;
        self
    }

    /// Bytes charged to held responses now (≤ the total bound).
    pub(crate) fn held_bytes(&self) -> usize {
        self.held.total
    }

    /// Entries of the held responses' queues together (bounded by `2 × capacity + 64`).
    pub(crate) fn held_queue_len(&self) -> usize {
        self.held.queued
    }

    /// Stops charging `peer` for a response of `cost` bytes (its queue entry is stale now and
    /// dropped from the queue's front, where the oldest are).
    fn release(&mut self, peer: IpAddr, cost: usize) {
        let Some(p) = self.held.peers.get_mut(&peer) else {
            return;
        };
        let old = p.bytes;
        p.bytes -= cost.min(old);
        let new = p.bytes;
        self.held.total -= cost.min(self.held.total);
        let map = &self.map;
        while let Some(&(k, g)) = p.queue.front() {
            let live = map
                .get(&k)
                .is_some_and(|e| e.gen == g && matches!(e.resp, Resp::Done(..)));
            if live {
                break;
            }
            p.queue.pop_front();
            self.held.queued -= 1;
        }
        self.held.set_bytes(peer, old, new);
    }

    /// Drops `peer`'s oldest held response (its id stays remembered, as answered).
    fn evict_oldest(&mut self, peer: IpAddr) -> bool {
        loop {
            let Some(p) = self.held.peers.get_mut(&peer) else {
                return false;
            };
            let Some((k, g)) = p.queue.pop_front() else {
                return false;
            };
            self.held.queued -= 1;
            let Some(e) = self.map.get_mut(&k) else {
                continue;
            };
            if e.gen != g {
                continue;
            }
            if let Resp::Done(body, _) = std::mem::replace(&mut e.resp, Resp::Gone) {
                self.stats.responses_evicted += 1;
                self.release(peer, held_cost(body.len()));
                return true;
            }
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

    /// Forgets ids older than the TTL, then, while more than `cap` are held, the oldest id
    /// of the source holding the most.
    pub(crate) fn expire(&mut self, now: Instant) {
        self.expire_but(now, None);
    }

    /// [`expire`](Self::expire), never forgetting `keep` (the id just registered): a source
    /// whose only id it is gives way to the next largest.
    fn expire_but(&mut self, now: Instant, keep: Option<K>) {
        while let Some(&(k, gen, born)) = self.order.front() {
            if now.saturating_duration_since(born) <= self.ttl {
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
            self.forgotten(k, e, false);
        }
        let kept_src = keep.map(|k| k.source());
        while self.map.len() > self.cap {
            let Some(&(_, src)) = self
                .by_count
                .iter()
                .rev()
                .find(|&&(live, src)| !(live == 1 && Some(src) == kept_src))
            else {
                break;
            };
            let Some(s) = self.sources.get_mut(&src) else {
                break;
            };
            let Some((k, g)) = s.queue.pop_front() else {
                break;
            };
            self.source_queued -= 1;
            let Slot::Occupied(slot) = self.map.entry(k) else {
                continue;
            };
            if slot.get().gen != g {
                continue;
            }
            let e = slot.remove();
            self.forgotten(k, e, true);
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
                self.source_push(key, gen, true);
                self.expire_but(now, Some(key));
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
            let (cached, gone) = match &mut e.resp {
                Resp::Flow => (None, false),
                Resp::Pending(w) => {
                    if let (Some(tx), false) = (waiter, repeat) {
                        w.push(tx);
                    }
                    (None, false)
                }
                Resp::Done(b, _) => (Some(b.clone()), false),
                Resp::Gone => (None, true),
            };
            let waiting = matches!(e.resp, Resp::Pending(_));
            Seen::Dup {
                cached,
                repeat,
                gone,
                waiting,
            }
        }
    }

    /// A flow whose first copy was registered as pending has entered the application's
    /// queue: it becomes an ordinary delivered flow (no response held); returns the copies
    /// that waited for that.
    pub(crate) fn admit(&mut self, key: K) -> Vec<W> {
        match self.map.get_mut(&key) {
            Some(e) if matches!(e.resp, Resp::Pending(_)) => {
                match std::mem::replace(&mut e.resp, Resp::Flow) {
                    Resp::Pending(w) => w,
                    _ => Vec::new(),
                }
            }
            _ => Vec::new(),
        }
    }

    /// Adds `waiter` to a pending flow or call; `false` (nothing added) when it is no longer
    /// pending or forgotten.
    pub(crate) fn add_waiter(&mut self, key: K, waiter: W) -> bool {
        match self.map.get_mut(&key).map(|e| &mut e.resp) {
            Some(Resp::Pending(w)) if w.len() < 256 => {
                w.push(waiter);
                true
            }
            _ => false,
        }
    }

    /// Records a call's response, charged to the sender address `peer`; returns who waits
    /// for it (nothing if the call was forgotten meanwhile). The id is then remembered `ttl`
    /// longer, to answer late copies; the response is held as long unless the byte bounds
    /// drop it first.
    pub(crate) fn complete(
        &mut self,
        key: K,
        body: Arc<[u8]>,
        peer: IpAddr,
        now: Instant,
    ) -> Vec<W> {
        let Some(e) = self.map.get_mut(&key) else {
            return Vec::new();
        };
        let cost = held_cost(body.len());
        let fits = cost <= self.held.max_peer && cost <= self.held.max_total;
        let stored = if fits {
            Resp::Done(body, peer)
        } else {
            self.stats.responses_evicted += 1;
            Resp::Gone
        };
        let old = std::mem::replace(&mut e.resp, stored);
        self.next_gen += 1;
        let gen = self.next_gen;
        e.gen = gen;
        let waiters = match old {
            Resp::Pending(w) => w,
            Resp::Done(b, p) => {
                self.release(p, held_cost(b.len()));
                Vec::new()
            }
            _ => Vec::new(),
        };
        self.push_order(key, gen, now);
        self.source_push(key, gen, false);
        if fits {
            let h = &mut self.held;
            let p = h.peers.entry(peer).or_insert_with(|| PeerHeld {
                bytes: 0,
                queue: VecDeque::new(),
            });
            let before = p.bytes;
            p.bytes += cost;
            p.queue.push_back((key, gen));
            let after = p.bytes;
            h.total += cost;
            h.queued += 1;
            h.set_bytes(peer, before, after);
            if h.queued > 2 * self.cap + 64 {
                // Drop stale entries (responses dropped or ids forgotten out of order, by
                // source): amortised O(1).
                let map = &self.map;
                let mut n = 0;
                for p in h.peers.values_mut() {
                    p.queue.retain(|(k, g)| {
                        map.get(k)
                            .is_some_and(|e| e.gen == *g && matches!(e.resp, Resp::Done(..)))
                    });
                    n += p.queue.len();
                }
                h.queued = n;
            }
            while self
                .held
                .peers
                .get(&peer)
                .is_some_and(|p| p.bytes > self.held.max_peer)
            {
                if !self.evict_oldest(peer) {
                    break;
                }
            }
            while self.held.total > self.held.max_total {
                let Some(&(_, largest)) = self.held.by_size.iter().next_back() else {
                    break;
                };
                if !self.evict_oldest(largest) {
                    break;
                }
            }
        }
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
            gone: false,
            waiting: false,
        }
    }

    const PEER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

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
            d.complete(id, Arc::from(&b"r"[..]), PEER, t);
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
        let pending = |repeat| Seen::Dup {
            cached: None,
            repeat,
            gone: false,
            waiting: true,
        };
        assert_eq!(
            d.on_copy(3, 1, 3, true, Some(11), (0, 0, false), t),
            pending(false)
        );
        assert_eq!(
            d.on_copy(3, 1, 3, true, Some(12), (0, 0, false), t),
            pending(true)
        );
        let w = d.complete(3, Arc::from(&b"ok"[..]), PEER, t);
        assert_eq!(w, vec![10, 11]);
        match d.on_copy(3, 2, 3, true, Some(13), (0, 0, false), t) {
            Seen::Dup {
                cached: Some(b), ..
            } => assert_eq!(&b[..], b"ok"),
            other => panic!("{other:?}"),
        }
    }

    /// Held responses stay within their byte bounds; a flood from one address drops that
    /// address's oldest responses, not another's; an evicted response leaves its id
    /// remembered and answered as gone; expiry releases the bytes.
    #[test]
    fn held_responses_are_bounded_in_bytes_per_peer_and_in_total() {
        let t = Instant::now();
        let a = IpAddr::from([127, 0, 0, 2]);
        let b = IpAddr::from([127, 0, 0, 3]);
        let body = |n: usize| Arc::from(vec![7u8; n]);
        let cost = held_cost(1000);
        let mut d = D::new(1 << 16, S).with_response_bounds(10 * cost, 4 * cost);
        // The victim (b) holds 2 responses.
        for id in 0..2u64 {
            d.on_copy(1_000 + id, 0, 2, true, Some(0), (0, 0, false), t);
            d.complete(1_000 + id, body(1000), b, t);
        }
        // The flooder (a) sends 100 calls with 1,000-byte responses.
        for id in 0..100u64 {
            d.on_copy(id, 0, 2, true, Some(0), (0, 0, false), t);
            d.complete(id, body(1000), a, t);
            assert!(d.held_bytes() <= 10 * cost);
        }
        assert_eq!(d.held_bytes(), 6 * cost, "a at its share, b untouched");
        for id in 0..2u64 {
            match d.on_copy(1_000 + id, 1, 2, true, Some(0), (0, 0, false), t) {
                Seen::Dup {
                    cached: Some(r), ..
                } => assert_eq!(r.len(), 1000),
                other => panic!("victim's response lost: {other:?}"),
            }
        }
        // a's oldest responses are gone but remembered: never delivered again.
        assert_eq!(
            d.on_copy(0, 1, 2, true, Some(0), (0, 0, false), t),
            Seen::Dup {
                cached: None,
                repeat: false,
                gone: true,
                waiting: false
            }
        );
        assert_eq!(d.stats().responses_evicted, 96);
        assert!(d.held_queue_len() <= 6 + 1);
        // With a total below the sum of shares, the largest holder loses first.
        let mut d = D::new(1 << 16, S).with_response_bounds(5 * cost, 4 * cost);
        d.on_copy(500, 0, 2, true, Some(0), (0, 0, false), t);
        d.complete(500, body(1000), b, t);
        for id in 0..10u64 {
            d.on_copy(id, 0, 2, true, Some(0), (0, 0, false), t);
            d.complete(id, body(1000), a, t);
        }
        assert!(matches!(
            d.on_copy(500, 1, 2, true, Some(0), (0, 0, false), t),
            Seen::Dup {
                cached: Some(_),
                ..
            }
        ));
        // Larger than a share: answered but never held.
        d.on_copy(600, 0, 2, true, Some(0), (0, 0, false), t);
        d.complete(600, body(5 * 1000), b, t);
        assert!(matches!(
            d.on_copy(600, 1, 2, true, Some(0), (0, 0, false), t),
            Seen::Dup { gone: true, .. }
        ));
        // Expiry (no traffic needed beyond the call to `expire`) releases every byte.
        d.expire(t + 2 * S);
        assert_eq!((d.held_bytes(), d.held_queue_len(), d.len()), (0, 0, 0));
    }

    /// A flood of new ids from one source, past the capacity, forgets that source's own
    /// ids; another source's ids stay remembered (their late copies are duplicates).
    #[test]
    fn a_flooding_source_forgets_its_own_ids_first() {
        let t = Instant::now();
        let cap = 64;
        let mut d = D::new(cap, Duration::from_secs(3600));
        let victim: Vec<u64> = (0..10).map(|i| 1_000_002 + 4 * i).collect();
        for &id in &victim {
            assert_eq!(
                d.on_copy(id, 0, 2, false, None, (0, 0, false), t),
                Seen::New
            );
        }
        for i in 0..10_000u64 {
            let id = 1_000_001 + 4 * i;
            d.on_copy(id, 0, 1, true, Some(0), (0, 0, false), t);
            if i % 2 == 0 {
                d.complete(id, Arc::from(&b"r"[..]), PEER, t);
            }
            assert!(d.len() <= cap);
            assert!(d.source_queue_len() <= 2 * cap + 64 + 1);
        }
        for &id in &victim {
            assert_eq!(
                d.on_copy(id, 1, 2, false, None, (0, 0, false), t),
                dup(false),
                "victim's id {id} forgotten"
            );
        }
        assert_eq!(d.stats().capacity_evictions, 10_000 + 10 - cap as u64);
    }

    #[test]
    fn unanswered_call_expires_and_is_counted() {
        let t = Instant::now();
        let mut d = D::new(16, S);
        d.on_copy(4, 0, 1, true, Some(1), (0, 0, false), t);
        d.expire(t + 2 * S);
        assert_eq!(d.stats().calls_expired, 1);
        assert!(d
            .complete(4, Arc::from(&b""[..]), PEER, t + 2 * S)
            .is_empty());
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
                    d.complete(id, Arc::from(&b"x"[..]), PEER, now);
                }
                assert!(d.len() <= cap);
                assert!(d.order_len() <= 2 * cap + 64 + 1);
            }
        }
    }
}
