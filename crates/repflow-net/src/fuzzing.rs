//! Entry points for the fuzz targets (`fuzz/`) and their stable, seeded counterparts
//! (`tests/fuzz_stable.rs`): each takes arbitrary bytes and panics if an invariant breaks.
//! Not part of the library's API.

use crate::dedup::{Dedup, Seen};
use crate::frame::decode_frame;
use crate::wire::{read_frame, BufferGauge, FrameReader, ReadError};
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, ReadBuf};

/// A reader handing out at most `step` bytes per read.
struct Trickle<'a> {
    data: &'a [u8],
    step: usize,
}

impl AsyncRead for Trickle<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let n = self.step.min(self.data.len()).min(buf.remaining());
        buf.put_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Poll::Ready(Ok(()))
    }
}

/// The server's stream reader over `data` (byte 0: read size 1–64 and key choice; the rest:
/// the stream): every frame it returns is the frame the sans-IO decoder finds at the same
/// offset, it stops exactly where the decoder fails or needs more, and the receive-buffer
/// gauge is back to zero afterwards. Returns the number of frames read.
pub fn stream_reader(data: &[u8]) -> usize {
    let Some((&ctl, stream)) = data.split_first() else {
        return 0;
    };
    let key: Option<&[u8]> = (ctl & 0x80 != 0).then_some(b"fuzz-key");
    let step = usize::from(ctl & 0x3f) + 1;
    let max = 1 << 12;
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let gauge = Arc::new(BufferGauge::default());
    let frames = rt.block_on(async {
        let mut r = FrameReader::new(Trickle { data: stream, step }, 64).with_gauge(gauge.clone());
        let mut off = 0;
        let mut frames = 0;
        loop {
            let got = read_frame(&mut r, key, max, None, None, None).await;
            let want = decode_frame(&stream[off..], key, max);
            match (got, want) {
                (Ok(f), Ok(Some(d))) => {
                    assert_eq!(f.header, d.header);
                    assert_eq!(&f.payload[..], d.payload);
                    off += d.consumed;
                    frames += 1;
                }
                (Err(ReadError::Eof), Ok(None)) => {
                    assert_eq!(off, stream.len());
                    break;
                }
                (Err(ReadError::Io(e)), Ok(None)) => {
                    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
                    break;
                }
                (Err(ReadError::Frame(a)), Err(b)) => {
                    assert_eq!(a, b);
                    break;
                }
                (g, w) => panic!("stream reader {g:?} vs decoder {w:?} at offset {off}"),
            }
        }
        frames
    });
    assert_eq!(gauge.current(), 0);
    frames
}

/// The duplicate filter driven by `data` (4 bytes per operation: id, copy and copies, call
/// and answer, time step) with a capacity and TTL from the first two bytes: it never holds
/// more than its capacity, its order queue stays bounded, and an id is delivered again only
/// after it was forgotten (by TTL or capacity).
pub fn dedup_ops(data: &[u8]) {
    let Some((head, ops)) = data.split_at_checked(2) else {
        return;
    };
    let cap = usize::from(head[0] % 32) + 1;
    let ttl = Duration::from_millis(u64::from(head[1]) + 1);
    // Room for about 3 held one-byte responses in all, 2 per sender address.
    let mut d: Dedup<u8, u8> = Dedup::new(cap, ttl).with_response_bounds(3 * 65, 2 * 65);
    let mut now = Instant::now();
    let mut delivered: HashMap<u8, (Instant, u64)> = HashMap::new();
    for op in ops.chunks_exact(4) {
        now += Duration::from_millis(u64::from(op[3] % 8));
        let id = op[0] % 48;
        let copies = op[1] % 5 + 1;
        let copy = (op[1] / 5) % copies;
        let call = op[2] & 1 == 1;
        let digest = u64::from(op[2] >> 7);
        let before = d.stats().capacity_evictions;
        let seen = d.on_copy(id, copy, copies, call, Some(0), (digest, 0, false), now);
        if seen == Seen::New {
            if let Some(&(at, evicted)) = delivered.get(&id) {
                assert!(
                    now.saturating_duration_since(at) > ttl || before > evicted,
                    "id {id} delivered twice while remembered"
                );
            }
            delivered.insert(id, (now, d.stats().capacity_evictions));
        }
        if call && op[2] & 2 == 2 {
            d.complete(
                id,
                Arc::from(&b"r"[..]),
                std::net::IpAddr::from([127, 0, 0, 1]),
                now,
            );
        }
        assert!(d.len() <= cap);
        assert!(d.order_len() <= 2 * cap + 65);
        assert!(d.held_bytes() <= 3 * 65);
        assert!(d.held_queue_len() <= 2 * cap + 65);
        assert!(d.source_queue_len() <= 2 * cap + 65);
    }
}
