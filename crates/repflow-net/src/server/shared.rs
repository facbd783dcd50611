//! The state every task of one server shares: configuration, counters, the duplicate filter
//! and the per-source connection counts (the hub the other files of `server/` read).

use super::admission::Slots;
use super::config::ServerConfig;
use super::counters::{AtomicCounters, ServerCounters};
use super::refusals::Refusals;
use crate::dedup::Dedup;
use crate::frame::Header;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::mpsc;

/// How the duplicate filter names a flow: with a key, by its (authenticated) flow id alone
/// (`None` address); without, by the sender's address and flow id.
pub(crate) type DedupKey = (Option<IpAddr>, u64);

/// A frame queued for a connection's writer.
#[derive(Debug)]
pub(crate) struct Out {
    pub(crate) head: Vec<u8>,
    pub(crate) body: Option<Arc<[u8]>>,
    /// The bytes this queued response holds against `response_queue_bytes` (released when
    /// it is written or dropped).
    pub(crate) _charge: Option<QueuedCharge>,
}

/// Bytes of one queued response, counted in [`Shared::queued_bytes`] while it lives.
#[derive(Debug)]
pub(crate) struct QueuedCharge {
    pub(crate) shared: Arc<Shared>,
    pub(crate) bytes: usize,
}

impl Drop for QueuedCharge {
    fn drop(&mut self) {
        self.shared
            .queued_bytes
            .fetch_sub(self.bytes as u64, Ordering::Relaxed);
    }
}

pub(crate) type Waiter = (mpsc::Sender<Out>, Header);

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) cfg: ServerConfig,
    pub(crate) counters: AtomicCounters,
    pub(crate) dedup: Mutex<Dedup<DedupKey, Waiter>>,
    /// The connection slots and their count per source address.
    pub(crate) slots: Mutex<Slots>,
    /// The rate-limited refusal log.
    pub(crate) refusals: Refusals,
    /// Bytes of call responses queued for connections' writers (all connections).
    pub(crate) queued_bytes: AtomicU64,
    /// Origin of the server's millisecond clock (connection progress).
    pub(crate) epoch: Instant,
    /// Wall-clock milliseconds when the server was bound: with a key, frames stamped earlier
    /// are refused (the duplicate filter of an earlier life is gone).
    pub(crate) started_ms: u64,
}

impl Shared {
    /// Milliseconds since the server started.
    pub(crate) fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub(crate) fn counters(&self) -> ServerCounters {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (d, dedup_entries, held) = {
            let g = self.dedup.lock().expect("dedup lock");
            (g.stats(), g.len() as u64, g.held_bytes() as u64)
        };
        ServerCounters {
            connections: l(&c.connections),
            connections_rejected: l(&c.connections_rejected),
            connections_evicted: l(&c.connections_evicted),
            accept_errors: l(&c.accept_errors),
            copies_received: l(&c.copies_received),
            flows_delivered: l(&c.flows_delivered),
            keepalives: l(&c.keepalives),
            calls_delivered: l(&c.calls_delivered),
            duplicates: l(&c.duplicates),
            bytes_received: l(&c.bytes_received),
            duplicate_bytes: l(&c.duplicate_bytes),
            malformed: l(&c.malformed),
            auth_failures: l(&c.auth_failures),
            timeouts: l(&c.timeouts),
            connections_rejected_source: l(&c.connections_rejected_source),
            frame_timeouts: l(&c.frame_timeouts),
            write_timeouts: l(&c.write_timeouts),
            responses_dropped: l(&c.responses_dropped),
            digest_mismatches: l(&c.digest_mismatches) + d.conflicts,
            replays_refused: l(&c.replays_refused),
            buffered_bytes: c.buffer.current(),
            buffered_peak: c.buffer.peak(),
            dedup_evictions: d.evictions,
            dedup_capacity_evictions: d.capacity_evictions,
            calls_expired: d.calls_expired,
            repeated_copies: d.repeats,
            dedup_entries,
            response_queue_bytes: l(&self.queued_bytes),
            response_cache_bytes: held,
            responses_evicted: d.responses_evicted,
            response_bytes: l(&c.response_bytes),
            replies_elsewhere: l(&c.replies_elsewhere),
        }
    }
}
