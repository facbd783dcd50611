//! Async frame reading and writing shared by the client and the server.

use crate::frame::{check_auth, FrameError, Header, HEADER_LEN, TAG_LEN};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::timeout;

/// Why reading a frame stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    /// The peer closed the connection cleanly between frames.
    #[error("connection closed")]
    Eof,
    /// Nothing arrived within the allowed time.
    #[error("timed out waiting for data")]
    Timeout,
    /// Socket error (reset, …).
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The frame is malformed or not authenticated.
    #[error("{0}")]
    Frame(#[from] FrameError),
}

/// Fills `buf`, each read bounded by `idle`; `Ok(false)` on EOF before the first byte.
async fn read_full<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut [u8],
    first: Duration,
    idle: Duration,
) -> Result<bool, ReadError> {
    let mut off = 0;
    while off < buf.len() {
        let t = if off == 0 { first } else { idle };
        let n = match timeout(t, r.read(&mut buf[off..])).await {
            Err(_) => return Err(ReadError::Timeout),
            Ok(r) => r?,
        };
        if n == 0 {
            if off == 0 {
                return Ok(false);
            }
            return Err(ReadError::Io(io::ErrorKind::UnexpectedEof.into()));
        }
        off += n;
    }
    Ok(true)
}

/// One frame read from a stream.
pub(crate) struct ReadFrame {
    pub header: Header,
    pub payload: Vec<u8>,
}

/// Reads one whole frame: waits up to `first` for its whole header, then up to `idle` for
/// each further read; enforces `max_len` before allocating and checks authentication.
pub(crate) async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    key: Option<&[u8]>,
    max_len: u32,
    first: Duration,
    idle: Duration,
) -> Result<ReadFrame, ReadError> {
    let mut hb = [0u8; HEADER_LEN];
    // The whole header must arrive within `first`.
    match timeout(first, read_full(r, &mut hb, first, first)).await {
        Err(_) => return Err(ReadError::Timeout),
        Ok(Ok(false)) => return Err(ReadError::Eof),
        Ok(Ok(true)) => {}
        Ok(Err(e)) => return Err(e),
    }
    let header = Header::parse(&hb)?;
    header.check_length(max_len)?;
    let mut tag = [0u8; TAG_LEN];
    if header.has_tag() && !read_full(r, &mut tag, idle, idle).await? {
        return Err(ReadError::Io(io::ErrorKind::UnexpectedEof.into()));
    }
    let mut payload = vec![0u8; header.length as usize];
    if !payload.is_empty() && !read_full(r, &mut payload, idle, idle).await? {
        return Err(ReadError::Io(io::ErrorKind::UnexpectedEof.into()));
    }
    check_auth(key, &header, &payload, header.has_tag().then_some(&tag[..]))?;
    Ok(ReadFrame { header, payload })
}

/// Writes `head` then `body` (vectored, without copying), adding every byte accepted by the
/// socket to `counter` as it goes (so a copy cancelled mid-write has counted what it sent).
pub(crate) async fn write_counted<W: AsyncWrite + Unpin>(
    w: &mut W,
    head: &[u8],
    body: &[u8],
    counter: &AtomicU64,
) -> io::Result<()> {
    let (mut h, mut b) = (0, 0);
    while h < head.len() || b < body.len() {
        let bufs = [io::IoSlice::new(&head[h..]), io::IoSlice::new(&body[b..])];
        let n = w.write_vectored(&bufs).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        counter.fetch_add(n as u64, Ordering::Relaxed);
        let from_head = n.min(head.len() - h);
        h += from_head;
        b += n - from_head;
    }
    Ok(())
}

/// Writes `head` and `body` without counting.
pub(crate) async fn write_all<W: AsyncWrite + Unpin>(
    w: &mut W,
    head: &[u8],
    body: &[u8],
) -> io::Result<()> {
    if body.is_empty() {
        return w.write_all(head).await;
    }
    let c = AtomicU64::new(0);
    write_counted(w, head, body, &c).await
}
