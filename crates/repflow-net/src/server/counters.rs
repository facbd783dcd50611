//! What a server counts: the public snapshot [`ServerCounters`] and the atomic counters the
//! connection tasks add to.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Server-side counters (a snapshot).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ServerCounters {
    /// Connections accepted.
    pub connections: u64,
    /// Connections refused because of `max_connections` (no connection could be evicted).
    pub connections_rejected: u64,
    /// Connections closed to give their slot to a new connection (the server was full and
    /// they had gone longest without completing a frame).
    pub connections_evicted: u64,
    /// `accept` calls that failed (e.g. out of file descriptors, os error 24).
    pub accept_errors: u64,
    /// Frames (copies) received completely.
    pub copies_received: u64,
    /// Flows delivered to the application.
    pub flows_delivered: u64,
    /// Keepalives acknowledged (empty one-way flows of one copy; not delivered).
    pub keepalives: u64,
    /// Calls delivered to the application.
    pub calls_delivered: u64,
    /// Late duplicate copies discarded.
    pub duplicates: u64,
    /// Payload bytes received (all copies).
    pub bytes_received: u64,
    /// Payload bytes of discarded duplicates.
    pub duplicate_bytes: u64,
    /// Connections closed for a malformed or oversized frame.
    pub malformed: u64,
    /// Connections closed for a missing or wrong authentication tag.
    pub auth_failures: u64,
    /// Connections closed by the header or idle timeout.
    pub timeouts: u64,
    /// Connections refused because their source address held its share
    /// (`max_connections_per_source`).
    pub connections_rejected_source: u64,
    /// Connections closed because a frame did not complete within `frame_timeout`.
    pub frame_timeouts: u64,
    /// Connections closed because a write was not accepted within `write_timeout`.
    pub write_timeouts: u64,
    /// Call responses not queued for a connection (its queue of 256 was full or it closed).
    pub responses_dropped: u64,
    /// Frames refused because their payload does not match their digest, or differs from an
    /// earlier copy of the same flow (connection closed).
    pub digest_mismatches: u64,
    /// Frames refused as possible replays (with a key): timestamp outside the replay window,
    /// or not newer than an id the full duplicate filter had to forget (connection closed).
    pub replays_refused: u64,
    /// Bytes currently held in receive buffers of frames not yet complete (all connections).
    pub buffered_bytes: u64,
    /// Highest value `buffered_bytes` reached.
    pub buffered_peak: u64,
    /// Flow ids forgotten by the duplicate filter before all their copies arrived.
    pub dedup_evictions: u64,
    /// Flow ids forgotten because the duplicate filter was full (before their TTL).
    pub dedup_capacity_evictions: u64,
    /// Calls forgotten by the duplicate filter before the application answered them.
    pub calls_expired: u64,
    /// Frames whose copy index had already arrived for their flow (repeats, not delivered).
    pub repeated_copies: u64,
    /// Flow ids the duplicate filter remembers now.
    pub dedup_entries: u64,
    /// Bytes of call responses queued now for connections that have not taken them yet (at
    /// most `response_queue_bytes`, plus one response).
    pub response_queue_bytes: u64,
    /// Bytes of call responses held now for late copies (each counted as its length + 64;
    /// at most `response_cache_bytes`).
    pub response_cache_bytes: u64,
    /// Call responses dropped, or never held, to stay within the response cache's bounds.
    pub responses_evicted: u64,
    /// Payload bytes of call responses queued for sending (once per copy answered with the
    /// response: with `reply_once`, about once per call).
    pub response_bytes: u64,
    /// Copies answered with an empty `ELSEWHERE` reply (`reply_once`: the response went to
    /// another copy's connection).
    pub replies_elsewhere: u64,
}

#[derive(Debug, Default)]
pub(crate) struct AtomicCounters {
    pub(crate) connections: AtomicU64,
    pub(crate) connections_rejected: AtomicU64,
    pub(crate) connections_evicted: AtomicU64,
    pub(crate) accept_errors: AtomicU64,
    pub(crate) copies_received: AtomicU64,
    pub(crate) flows_delivered: AtomicU64,
    pub(crate) keepalives: AtomicU64,
    pub(crate) calls_delivered: AtomicU64,
    pub(crate) duplicates: AtomicU64,
    pub(crate) bytes_received: AtomicU64,
    pub(crate) duplicate_bytes: AtomicU64,
    pub(crate) malformed: AtomicU64,
    pub(crate) auth_failures: AtomicU64,
    pub(crate) timeouts: AtomicU64,
    pub(crate) connections_rejected_source: AtomicU64,
    pub(crate) frame_timeouts: AtomicU64,
    pub(crate) write_timeouts: AtomicU64,
    pub(crate) responses_dropped: AtomicU64,
    pub(crate) digest_mismatches: AtomicU64,
    pub(crate) replays_refused: AtomicU64,
    pub(crate) response_bytes: AtomicU64,
    pub(crate) replies_elsewhere: AtomicU64,
    pub(crate) buffer: Arc<crate::wire::BufferGauge>,
}

pub(crate) fn inc(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}
