//! Async frame reading and writing shared by the client and the server.

use crate::frame::{check_auth, check_digest, FrameError, Header, HEADER_LEN, TAG_LEN};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
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
    /// The frame did not complete within its deadline (however steadily bytes arrived).
    #[error("frame not complete within its deadline")]
    FrameTimeout,
    /// Socket error (reset, …).
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The frame is malformed or not authenticated.
    #[error("{0}")]
    Frame(#[from] FrameError),
}

/// A buffered frame reader. Unlike `tokio::io::BufReader` it never zero-fills its buffer
/// (allocated on the first read, uninitialised spare capacity filled by `read_buf`), and long
/// payloads are read straight into their own vector: a per-flow server connection used to
/// spend a 16 KiB `memset` on every accept (3.5 % of the whole per-flow benchmark's CPU time
/// under `perf`).
pub(crate) struct FrameReader<R> {
    inner: R,
    buf: Vec<u8>,
    pos: usize,
    cap: usize,
    gauge: Option<Arc<BufferGauge>>,
}

/// Bytes held by receive buffers of frames still being read, summed over readers (a gauge)
/// and its peak: what peers can make a receiver hold before a frame completes.
#[derive(Debug, Default)]
pub(crate) struct BufferGauge {
    now: AtomicU64,
    peak: AtomicU64,
}

impl BufferGauge {
    fn add(&self, n: u64) {
        let v = self.now.fetch_add(n, Ordering::Relaxed) + n;
        self.peak.fetch_max(v, Ordering::Relaxed);
    }

    fn sub(&self, n: u64) {
        self.now.fetch_sub(n, Ordering::Relaxed);
    }

    /// Bytes held now.
    pub(crate) fn current(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }

    /// Highest value held.
    pub(crate) fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }
}

/// A payload being received: its capacity is added to the gauge as it grows and taken off
/// when the frame is complete, fails or is cancelled.
struct Growing<'g> {
    out: Vec<u8>,
    counted: usize,
    gauge: Option<&'g BufferGauge>,
}

impl Growing<'_> {
    fn account(&mut self) {
        let c = self.out.capacity();
        if let Some(g) = self.gauge {
            if c > self.counted {
                g.add((c - self.counted) as u64);
            }
        }
        self.counted = c;
    }

    fn take(mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }
}

impl Drop for Growing<'_> {
    fn drop(&mut self) {
        if let Some(g) = self.gauge {
            g.sub(self.counted as u64);
        }
    }
}

/// Largest step by which a payload buffer grows ahead of the bytes received.
const GROW_STEP: usize = 64 * 1024;

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Reads from `inner` through a buffer of `cap` bytes.
    pub(crate) fn new(inner: R, cap: usize) -> Self {
        FrameReader {
            inner,
            buf: Vec::new(),
            pos: 0,
            cap: cap.max(HEADER_LEN + 2 * TAG_LEN),
            gauge: None,
        }
    }

    /// Counts payload buffers in `gauge` while they are being filled.
    pub(crate) fn with_gauge(mut self, gauge: Arc<BufferGauge>) -> Self {
        self.gauge = Some(gauge);
        self
    }

    /// Changes the buffer size for the next reads (the buffer grows when next refilled).
    pub(crate) fn set_capacity(&mut self, cap: usize) {
        self.cap = cap.max(HEADER_LEN + 2 * TAG_LEN);
    }

    /// Bytes read from the stream but not yet consumed.
    pub(crate) fn buffered(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// Reads more bytes into the buffer, within `wait`; `Ok(0)` at end of stream.
    async fn fill(&mut self, wait: Option<Duration>) -> Result<usize, ReadError> {
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        if self.buf.capacity() < self.cap {
            self.buf.reserve_exact(self.cap - self.buf.len());
        }
        let room = (self.buf.capacity() - self.buf.len()) as u64;
        let mut src = (&mut self.inner).take(room);
        within(wait, src.read_buf(&mut self.buf)).await
    }

    /// Buffers at least `n` bytes, waiting up to `wait` for each read; `Ok(false)` on a clean
    /// end of stream before the first byte.
    async fn want(&mut self, n: usize, wait: Option<Duration>) -> Result<bool, ReadError> {
        while self.buffered().len() < n {
            if self.fill(wait).await? == 0 {
                if self.buffered().is_empty() {
                    return Ok(false);
                }
                return Err(ReadError::Io(io::ErrorKind::UnexpectedEof.into()));
            }
        }
        Ok(true)
    }

    /// Reads exactly `len` bytes into a new vector, each read within `idle`. The vector grows
    /// with the bytes received (at most [`GROW_STEP`] ahead of them, doubling), never to the
    /// announced `len` up front.
    async fn payload(&mut self, len: usize, idle: Option<Duration>) -> Result<Vec<u8>, ReadError> {
        let gauge = self.gauge.clone();
        let mut g = Growing {
            out: Vec::with_capacity(len.min(GROW_STEP)),
            counted: 0,
            gauge: gauge.as_deref(),
        };
        g.account();
        while g.out.len() < len {
            let avail = self.buffered();
            if !avail.is_empty() {
                let k = avail.len().min(len - g.out.len());
                g.out.extend_from_slice(&avail[..k]);
                self.pos += k;
                g.account();
                continue;
            }
            let rest = len - g.out.len();
            let n = if rest >= self.cap {
                // Long payload: straight into its vector, no copy through the buffer.
                if g.out.capacity() == g.out.len() {
                    g.out.reserve(rest.min(GROW_STEP.max(g.out.len())));
                    g.account();
                }
                let room = (g.out.capacity() - g.out.len()).min(rest);
                let mut src = (&mut self.inner).take(room as u64);
                within(idle, src.read_buf(&mut g.out)).await?
            } else {
                self.fill(idle).await?
            };
            if n == 0 {
                return Err(ReadError::Io(io::ErrorKind::UnexpectedEof.into()));
            }
        }
        Ok(g.take())
    }
}

/// Awaits one read, bounded by `wait` when given.
async fn within<T>(
    wait: Option<Duration>,
    f: impl std::future::Future<Output = io::Result<T>>,
) -> Result<T, ReadError> {
    match wait {
        None => Ok(f.await?),
        Some(t) => match timeout(t, f).await {
            Err(_) => Err(ReadError::Timeout),
            Ok(r) => Ok(r?),
        },
    }
}

/// One frame read from a stream.
#[derive(Debug)]
pub(crate) struct ReadFrame {
    pub header: Header,
    pub payload: Vec<u8>,
}

/// Reads one whole frame: waits up to `first` for its whole header, then up to `idle` for
/// each further read and up to `deadline` for the whole rest of the frame (`None`: no limit,
/// when the caller bounds the whole exchange); enforces `max_len` before reading the payload
/// and checks authentication.
pub(crate) async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut FrameReader<R>,
    key: Option<&[u8]>,
    max_len: u32,
    first: Option<Duration>,
    idle: Option<Duration>,
    deadline: Option<Duration>,
) -> Result<ReadFrame, ReadError> {
    // The whole header must arrive within `first`: one timer for all its reads, armed only if
    // the header is not already buffered.
    if r.buffered().len() < HEADER_LEN {
        // Each read is checked as it arrives: a wrong magic or version is refused at its
        // third byte, not after 36 bytes or the header timeout.
        let header_in = async {
            while r.buffered().len() < HEADER_LEN {
                Header::check_prefix(r.buffered(), Some(key.is_some()))?;
                if r.fill(None).await? == 0 {
                    if r.buffered().is_empty() {
                        return Err(ReadError::Eof);
                    }
                    return Err(ReadError::Io(io::ErrorKind::UnexpectedEof.into()));
                }
            }
            Ok(())
        };
        match first {
            None => header_in.await?,
            Some(t) => match timeout(t, header_in).await {
                Err(_) => return Err(ReadError::Timeout),
                Ok(r) => r?,
            },
        }
    }
    let fixed: &[u8; HEADER_LEN] = r.buffered()[..HEADER_LEN].try_into().expect("header bytes");
    Header::check_prefix(fixed, Some(key.is_some()))?;
    let header = Header::parse(fixed)?;
    header.check_length(max_len)?;
    let rest = async {
        let hl = header.wire_len();
        if !r.want(hl, idle).await? {
            return Err(ReadError::Io(io::ErrorKind::UnexpectedEof.into()));
        }
        // With a key, a long frame's length is authenticated (header tag) before any of its
        // payload is read.
        header.check_head_tag(key, &r.buffered()[(HEADER_LEN + TAG_LEN).min(hl)..hl])?;
        let mut tag = [0u8; TAG_LEN];
        if header.has_tag() {
            tag.copy_from_slice(&r.buffered()[HEADER_LEN..HEADER_LEN + TAG_LEN]);
        }
        r.pos += hl;
        let payload = r.payload(header.length as usize, idle).await?;
        check_auth(key, &header, &payload, header.has_tag().then_some(&tag[..]))?;
        check_digest(&header, &payload)?;
        Ok(ReadFrame { header, payload })
    };
    match deadline {
        None => rest.await,
        Some(t) => timeout(t, rest)
            .await
            .unwrap_or(Err(ReadError::FrameTimeout)),
    }
}

/// The part of a frame (`head` then `body`) not yet accepted by a socket.
pub(crate) struct Unsent<'a> {
    /// Rest of the header.
    pub head: &'a [u8],
    /// Rest of the payload.
    pub body: &'a [u8],
}

impl<'a> Unsent<'a> {
    /// All of `head` then `body`.
    pub fn new(head: &'a [u8], body: &'a [u8]) -> Self {
        Unsent { head, body }
    }

    /// Whether everything was sent.
    pub fn is_empty(&self) -> bool {
        self.head.is_empty() && self.body.is_empty()
    }

    /// The rest, for a vectored write.
    pub fn slices(&self) -> [io::IoSlice<'a>; 2] {
        [io::IoSlice::new(self.head), io::IoSlice::new(self.body)]
    }

    /// Drops the first `n` bytes (accepted by a write).
    pub fn advance(&mut self, n: usize) {
        let from_head = n.min(self.head.len());
        self.head = &self.head[from_head..];
        self.body = &self.body[n - from_head..];
    }
}

/// Writes `head` then `body` (vectored, without copying), adding every byte accepted by the
/// socket to `counter` as it goes (so a copy cancelled mid-write has counted what it sent).
pub(crate) async fn write_counted<W: AsyncWrite + Unpin>(
    w: &mut W,
    head: &[u8],
    body: &[u8],
    counter: &AtomicU64,
) -> io::Result<()> {
    let mut rest = Unsent::new(head, body);
    while !rest.is_empty() {
        let n = w.write_vectored(&rest.slices()).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        counter.fetch_add(n as u64, Ordering::Relaxed);
        rest.advance(n);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{encode_frame, flags};
    use tokio::io::AsyncWriteExt;

    fn frame(id: u64, len: usize, key: Option<&[u8]>) -> Vec<u8> {
        let h = Header {
            flags: flags::CALL,
            copy: 0,
            copies: 2,
            flow_id: id,
            length: 0,
            timestamp_ms: 0,
            digest: 0,
        };
        let payload: Vec<u8> = (0..len).map(|i| (i * 7 + id as usize) as u8).collect();
        encode_frame(h, key, &payload)
    }

    /// Back-to-back frames of every size class (within the buffer, longer than it, tagged),
    /// delivered in small pieces, come out whole and in order; the stream then ends cleanly.
    #[tokio::test]
    async fn reads_frames_split_and_coalesced() {
        let key: Option<&[u8]> = Some(b"k");
        let sizes = [0usize, 1, 100, 63, 64, 65, 1000, 5000];
        let mut wire = Vec::new();
        for (i, &n) in sizes.iter().enumerate() {
            wire.extend(frame(i as u64, n, key));
        }
        let (mut tx, rx) = tokio::io::duplex(37);
        let w = wire.clone();
        let writer = tokio::spawn(async move {
            for chunk in w.chunks(29) {
                tx.write_all(chunk).await.unwrap();
            }
        });
        let mut r = FrameReader::new(rx, 64);
        let t = Some(Duration::from_secs(5));
        for (i, &n) in sizes.iter().enumerate() {
            let f = read_frame(&mut r, key, 1 << 20, t, t, None).await.unwrap();
            assert_eq!(f.header.flow_id, i as u64);
            let want = frame(i as u64, n, key);
            assert_eq!(f.payload, want[HEADER_LEN + TAG_LEN..]);
        }
        writer.await.unwrap();
        assert!(matches!(
            read_frame(&mut r, key, 1 << 20, t, t, None).await,
            Err(ReadError::Eof)
        ));
    }

    #[tokio::test]
    async fn truncated_frame_is_an_error_and_silence_times_out() {
        let f = frame(1, 500, None);
        let mut r = FrameReader::new(&f[..300], 64);
        let got = read_frame(&mut r, None, 1 << 20, None, None, None).await;
        assert!(matches!(got, Err(ReadError::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof));
        let mut r = FrameReader::new(&f[..10], 64);
        let got = read_frame(&mut r, None, 1 << 20, None, None, None).await;
        assert!(matches!(got, Err(ReadError::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof));
        let (_tx, rx) = tokio::io::duplex(64);
        let mut r = FrameReader::new(rx, 64);
        let ms = Some(Duration::from_millis(20));
        assert!(matches!(
            read_frame(&mut r, None, 1 << 20, ms, ms, None).await,
            Err(ReadError::Timeout)
        ));
        let f = frame(2, 100, None);
        let mut r = FrameReader::new(&f[..], 64);
        assert!(matches!(
            read_frame(&mut r, None, 99, None, None, None).await,
            Err(ReadError::Frame(FrameError::TooLong { .. }))
        ));
    }
}
