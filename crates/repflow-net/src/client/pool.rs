//! Persistent connections (pooled mode): a connection's queue of frames, its pending replies
//! matched by (flow id, copy), and the guards that clean them up.

use super::types::Reply;
use crate::payload::Payload;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

pub(super) struct OutFrame {
    pub(super) head: Vec<u8>,
    pub(super) payload: Payload,
    pub(super) cancel: Arc<AtomicBool>,
    pub(super) written: Arc<AtomicU64>,
    /// (flow id, copy): the reply's key.
    pub(super) key: (u64, u8),
}

/// When each frame awaiting a reply was queued (path pool: the reply's response time feeds
/// the slot's mean); bounded by [`SENT_MAX`], entries leave at the reply, when the frame is
/// skipped, or when the connection dies.
pub(super) type Sent = Arc<Mutex<HashMap<(u64, u8), std::time::Instant>>>;

/// Most frames timed at once per pooled connection (more are sent untimed).
pub(super) const SENT_MAX: usize = 4 * POOL_QUEUE;

pub(super) type Pending = Arc<Mutex<HashMap<(u64, u8), oneshot::Sender<Result<Reply, String>>>>>;

/// Frames queued at most per pooled connection; further senders wait (within their flow
/// timeout) for room.
pub(super) const POOL_QUEUE: usize = 1024;

pub(super) struct PooledConn {
    pub(super) tx: mpsc::Sender<OutFrame>,
    /// When a frame (a copy or a keepalive) was last queued (ms since the client's epoch).
    pub(super) last_used: Arc<AtomicU64>,
    /// When a copy was last queued (keepalives stop `pool_keepalive` after it).
    pub(super) last_copy: Arc<AtomicU64>,
    pub(super) pending: Pending,
    pub(super) sent: Sent,
    pub(super) alive: Arc<AtomicBool>,
    pub(super) tasks: [JoinHandle<()>; 2],
}

impl PooledConn {
    /// Open, and used within the last `idle_ms` (a connection idle for longer may be closed
    /// by the server's idle timeout at any moment, so it is replaced rather than reused).
    pub(super) fn fresh(&self, now_ms: u64, idle_ms: u64) -> bool {
        self.alive.load(std::sync::atomic::Ordering::Relaxed)
            && now_ms.saturating_sub(self.last_used.load(std::sync::atomic::Ordering::Relaxed))
                < idle_ms
    }
}

impl Drop for PooledConn {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

pub(super) struct PendingGuard {
    pub(super) pending: Pending,
    pub(super) key: (u64, u8),
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        self.pending.lock().expect("pending lock").remove(&self.key);
    }
}
