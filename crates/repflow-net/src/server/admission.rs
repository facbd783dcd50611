//! Admission: who holds a connection slot. When `max_connections` (or a source address's
//! share) is full, a new connection takes the slot of the connection, among those the full
//! limit counts, that has gone longest without completing a frame, if that is at least
//! `evict_after`; otherwise the new connection is refused. A connection waiting for the
//! application is never evicted. So a flood of trickling connections from any number of
//! addresses cannot keep out a client that completes frames.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// A connection's progress: the time (milliseconds on the server's clock) it was accepted or
/// last completed a frame, or [`BUSY`] while it waits for the application.
#[derive(Debug, Default)]
pub(crate) struct Progress(AtomicU64);

/// The progress mark of a connection waiting for the application (not evictable).
const BUSY: u64 = u64::MAX;

impl Progress {
    /// A frame completed (or the connection was accepted) at `now_ms`.
    pub(crate) fn mark(&self, now_ms: u64) {
        self.0.store(now_ms, Ordering::Relaxed);
    }

    /// The connection waits for the application: not evictable until the next `mark`.
    pub(crate) fn busy(&self) {
        self.0.store(BUSY, Ordering::Relaxed);
    }
}

#[derive(Debug)]
struct Slot {
    ip: IpAddr,
    progress: Arc<Progress>,
    kill: Arc<Notify>,
}

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Every slot is taken by a connection that made progress within `evict_after`.
    Full,
    /// The source address holds its share, each of its connections recently active.
    SourceShare,
}

/// An admitted connection: its slot id, its progress mark, what tells it to stop (evicted),
/// and whether it took the slot of an evicted connection.
#[derive(Debug)]
pub(crate) struct Admitted {
    pub(crate) id: u64,
    pub(crate) progress: Arc<Progress>,
    pub(crate) kill: Arc<Notify>,
    pub(crate) evicted: Option<IpAddr>,
}

/// The connection slots (bounded by `max_connections`) and the count per source address
/// (entries removed at zero).
#[derive(Debug, Default)]
pub(crate) struct Slots {
    slots: HashMap<u64, Slot>,
    per_source: HashMap<IpAddr, usize>,
    next_id: u64,
}

impl Slots {
    /// Connections held now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Admits a connection from `ip` at `now_ms` within `max` slots and `share` per address,
    /// evicting the least-progressed connection stalled at least `evict_after_ms` if a limit
    /// is full.
    pub(crate) fn admit(
        &mut self,
        ip: IpAddr,
        now_ms: u64,
        (max, share, evict_after_ms): (usize, usize, u64),
    ) -> Result<Admitted, Refused> {
        let (max, share) = (max.max(1), share.max(1));
        let mine = self.per_source.get(&ip).copied().unwrap_or(0);
        let mut evicted = None;
        if mine >= share || self.slots.len() >= max {
            let same_source = mine >= share;
            let victim = self
                .slots
                .iter()
                .filter(|(_, s)| !same_source || s.ip == ip)
                .map(|(id, s)| (*id, s.progress.0.load(Ordering::Relaxed)))
                .filter(|&(_, since)| {
                    since != BUSY && now_ms.saturating_sub(since) >= evict_after_ms
                })
                .min_by_key(|&(id, since)| (since, id))
                .map(|(id, _)| id);
            let Some(v) = victim else {
                return Err(if same_source {
                    Refused::SourceShare
                } else {
                    Refused::Full
                });
            };
            let s = self.release(v).expect("victim holds a slot");
            s.kill.notify_one();
            evicted = Some(s.ip);
        }
        self.next_id += 1;
        let id = self.next_id;
        let progress = Arc::new(Progress::default());
        progress.mark(now_ms);
        let kill = Arc::new(Notify::new());
        self.slots.insert(
            id,
            Slot {
                ip,
                progress: progress.clone(),
                kill: kill.clone(),
            },
        );
        *self.per_source.entry(ip).or_insert(0) += 1;
        Ok(Admitted {
            id,
            progress,
            kill,
            evicted,
        })
    }

    /// Frees slot `id` (when its connection ends; nothing if it was evicted before).
    fn release(&mut self, id: u64) -> Option<Slot> {
        let s = self.slots.remove(&id)?;
        if let Some(n) = self.per_source.get_mut(&s.ip) {
            *n -= 1;
            if *n == 0 {
                self.per_source.remove(&s.ip);
            }
        }
        Some(s)
    }

    /// Frees slot `id` when its connection ends.
    pub(crate) fn leave(&mut self, id: u64) {
        let _ = self.release(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, n])
    }

    #[test]
    fn full_slots_evict_the_longest_stalled_of_the_full_limit() {
        let mut s = Slots::default();
        let lim = (4, 2, 100);
        let a = s.admit(ip(1), 0, lim).unwrap();
        let b = s.admit(ip(1), 10, lim).unwrap();
        let c = s.admit(ip(2), 20, lim).unwrap();
        let _d = s.admit(ip(3), 30, lim).unwrap();
        // Full, nobody stalled 100 ms yet: refused.
        assert_eq!(s.admit(ip(4), 50, lim).unwrap_err(), Refused::Full);
        // `a` and `b` completed a frame at 60: `c` (since 20) is now the longest stalled.
        a.progress.mark(60);
        b.progress.mark(60);
        let e = s.admit(ip(4), 130, lim).unwrap();
        assert_eq!(e.evicted, Some(ip(2)));
        assert_eq!(s.len(), 4);
        drop(c);
        // Source 1 holds its share (2): the newcomer from 1 evicts one of 1's, not others'.
        let f = s.admit(ip(1), 500, lim).unwrap();
        assert_eq!(f.evicted, Some(ip(1)));
        // A connection waiting for the application is never evicted.
        f.progress.busy();
        e.progress.busy();
        let g = s.admit(ip(5), 10_000, lim).unwrap();
        assert_ne!(g.evicted, None);
        s.leave(g.id);
        s.leave(g.id);
        assert_eq!(s.len(), 3);
    }
}
