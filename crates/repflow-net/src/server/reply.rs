//! Replies: the write side of a connection (acknowledgements and responses, coalesced and
//! bounded by the write timeout) and the task that writes a call's responses.

use super::admission::Progress;
use super::counters::inc;
use super::shared::{Out, Shared};
use crate::frame::{Header, HEADER_LEN};
use crate::wire::write_all;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::debug;

/// Largest run of replies held back to be written together.
const WRITE_BATCH: usize = 16 * 1024;

/// The write side of a connection: replies are appended to a buffer that grows only as far
/// as needed (20 bytes for a per-flow connection's one acknowledgement, where a 16 KiB
/// `BufWriter` cost a large allocation per connection) and go out on `flush`, coalesced on
/// pooled connections.
pub(crate) struct ConnWriter {
    pub(crate) half: OwnedWriteHalf,
    pub(crate) buf: Vec<u8>,
    /// Every write must be accepted within this time.
    pub(crate) limit: Duration,
    pub(crate) shared: Arc<Shared>,
}

impl ConnWriter {
    pub(crate) async fn send(&mut self, head: &[u8], body: &[u8]) -> std::io::Result<()> {
        let n = head.len() + body.len();
        if self.buf.len() + n > WRITE_BATCH {
            self.flush().await?;
            if n > WRITE_BATCH {
                let w = write_all(&mut self.half, head, body);
                return bounded(self.limit, &self.shared, w).await;
            }
        }
        self.buf.extend_from_slice(head);
        self.buf.extend_from_slice(body);
        Ok(())
    }

    pub(crate) async fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        // Most writes are accepted at once: try without arming a timer first.
        let mut done = 0;
        while done < self.buf.len() {
            match self.half.try_write(&self.buf[done..]) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.buf.clear();
                    return Err(e);
                }
            }
        }
        let r = if done < self.buf.len() {
            bounded(
                self.limit,
                &self.shared,
                self.half.write_all(&self.buf[done..]),
            )
            .await
        } else {
            Ok(())
        };
        self.buf.clear();
        r
    }
}

/// Awaits a write within `limit`; a timeout is counted and becomes an error.
async fn bounded(
    limit: Duration,
    shared: &Shared,
    w: impl std::future::Future<Output = std::io::Result<()>>,
) -> std::io::Result<()> {
    match tokio::time::timeout(limit, w).await {
        Ok(r) => r,
        Err(_) => {
            inc(&shared.counters.write_timeouts, 1);
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "write not accepted within write_timeout (peer not reading)",
            ))
        }
    }
}

pub(crate) type SharedWriter = Arc<tokio::sync::Mutex<ConnWriter>>;

/// Responses queued at most per connection; more are counted in `responses_dropped`.
const RESPONSE_QUEUE: usize = 256;

/// Wakes the connection's reader when the response writer stops (write failed or timed
/// out), so that the connection closes instead of waiting for its idle timeout.
struct NotifyOnDrop(Arc<tokio::sync::Notify>);

impl Drop for NotifyOnDrop {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

/// Whether `buf` already holds the whole next frame (then replies can wait to be coalesced).
pub(crate) fn next_frame_buffered(buf: &[u8]) -> bool {
    if buf.len() < HEADER_LEN {
        return false;
    }
    let fixed: &[u8; HEADER_LEN] = buf[..HEADER_LEN].try_into().expect("header bytes");
    match Header::parse(fixed) {
        Ok(h) => buf.len() >= h.wire_len() + h.length as usize,
        // Malformed: the connection closes (and flushes) right after.
        Err(_) => true,
    }
}

/// Writer of call responses (which come from the application, at any time), started with the
/// first call on a connection.
pub(crate) fn spawn_response_writer(
    wr: SharedWriter,
    dead: Arc<tokio::sync::Notify>,
    progress: Arc<Progress>,
    shared: Arc<Shared>,
) -> (mpsc::Sender<Out>, JoinHandle<()>) {
    let (tx, mut rx) = mpsc::channel::<Out>(RESPONSE_QUEUE);
    let h = tokio::spawn(async move {
        let _dead = NotifyOnDrop(dead);
        while let Some(mut o) = rx.recv().await {
            let mut w = wr.lock().await;
            loop {
                let body = o.body.as_deref().unwrap_or(&[]);
                if let Err(e) = w.send(&o.head, body).await {
                    debug!(error = %e, "write failed");
                    return;
                }
                match rx.try_recv() {
                    Ok(next) => o = next,
                    Err(_) => break,
                }
            }
            if let Err(e) = w.flush().await {
                debug!(error = %e, "write failed");
                return;
            }
            // Answered: the connection is evictable again, from now.
            progress.mark(shared.now_ms());
        }
    });
    (tx, h)
}
