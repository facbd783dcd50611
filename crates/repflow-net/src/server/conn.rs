//! One connection's frames: reads each frame (bounded by the header, idle and frame
//! timeouts), checks it, lets the duplicate filter decide, and replies.

use super::admission::Progress;
use super::config::AckAfter;
use super::counters::inc;
use super::delivery::{answer_waiters, Incoming, IncomingKind, Responder};
use super::refusals::Kind;
use super::reply::{next_frame_buffered, spawn_response_writer, ConnWriter, SharedWriter};
use super::shared::{Out, Shared};
use crate::dedup::Seen;
use crate::frame::{flags, Header};
use crate::wire::{read_frame, FrameReader, ReadError};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::debug;

pub(crate) async fn serve_conn(
    stream: TcpStream,
    peer: SocketAddr,
    shared: &Arc<Shared>,
    app: &mpsc::Sender<Incoming>,
    progress: &Arc<Progress>,
) {
    let log = |kind: Kind, who: &str, what: &str| shared.refusals.log(kind, who, what);
    // On Linux the listener's TCP_NODELAY is inherited (test `accepted_sockets_are_nodelay`).
    if !cfg!(target_os = "linux") {
        let _ = stream.set_nodelay(true);
    }
    let (rd, wr) = stream.into_split();
    // A small read buffer for the one frame of a per-flow connection; a pooled connection's
    // grows to 16 KiB at its second frame.
    let mut rd = FrameReader::new(rd, 2048).with_gauge(shared.counters.buffer.clone());
    // Acknowledgements are written inline by this task (the first copy's goes out at once);
    // on a pooled connection they are coalesced while further frames are already buffered.
    let wr: SharedWriter = Arc::new(tokio::sync::Mutex::new(ConnWriter {
        half: wr,
        buf: Vec::new(),
        limit: shared.cfg.write_timeout,
        shared: shared.clone(),
    }));
    let dead = Arc::new(tokio::sync::Notify::new());
    let mut responses: Option<(mpsc::Sender<Out>, JoinHandle<()>)> = None;
    let mut unflushed = false;
    let cfg = &shared.cfg;
    let c = &shared.counters;
    let key = cfg.key.as_deref();
    let mut first = true;
    // Set when the peer closed or reset the connection: no FIN needs to precede the close.
    let mut peer_gone = false;
    loop {
        if unflushed && !next_frame_buffered(rd.buffered()) {
            if let Err(e) = wr.lock().await.flush().await {
                debug!(error = %e, "write failed");
                break;
            }
            unflushed = false;
        }
        let wait = if first {
            cfg.header_timeout
        } else {
            cfg.idle_timeout
        };
        let read = read_frame(
            &mut rd,
            key,
            cfg.max_flow_size,
            Some(wait),
            Some(cfg.idle_timeout),
            Some(cfg.frame_timeout),
        );
        let got = if responses.is_some() {
            tokio::select! {
                r = read => r,
                _ = dead.notified() => {
                    debug!("response writer stopped; closing");
                    break;
                }
            }
        } else {
            read.await
        };
        let f = match got {
            Ok(f) => f,
            Err(ReadError::FrameTimeout) => {
                inc(&c.frame_timeouts, 1);
                log(
                    Kind::FrameTimeout,
                    &format!("{peer}"),
                    "frame not complete within frame_timeout; closing",
                );
                break;
            }
            Err(ReadError::Eof) => {
                peer_gone = true;
                break;
            }
            Err(ReadError::Timeout) => {
                inc(&c.timeouts, 1);
                if first || !rd.buffered().is_empty() {
                    log(
                        Kind::Timeout,
                        &format!("{peer}"),
                        "frame did not arrive within the header/idle timeout; closing",
                    );
                } else {
                    debug!("closing idle connection");
                }
                break;
            }
            Err(ReadError::Io(e)) => {
                debug!(error = %e, "connection ended");
                peer_gone = true;
                break;
            }
            Err(ReadError::Frame(e @ crate::frame::FrameError::BadDigest { .. })) => {
                inc(&c.digest_mismatches, 1);
                log(
                    Kind::Digest,
                    &format!("{peer}: {e}"),
                    "rejected frame; closing connection",
                );
                break;
            }
            Err(ReadError::Frame(e)) => {
                use crate::frame::FrameError as E;
                let kind = match e {
                    E::BadTag | E::MissingTag | E::UnexpectedTag | E::BadHeadTag => Kind::Auth,
                    E::BadMagic(_) => Kind::Garbage,
                    E::BadVersion(_) => Kind::Version,
                    _ => Kind::Malformed,
                };
                if kind == Kind::Auth {
                    inc(&c.auth_failures, 1);
                } else {
                    inc(&c.malformed, 1);
                }
                log(
                    kind,
                    &format!("{peer}: {e}"),
                    "rejected frame; closing connection",
                );
                break;
            }
        };
        if !first {
            rd.set_capacity(16 * 1024);
        }
        first = false;
        progress.mark(shared.now_ms());
        let h = f.header;
        if h.flags & (flags::REPLY | flags::DUP | flags::GONE | flags::ELSEWHERE) != 0 {
            inc(&c.malformed, 1);
            log(
                Kind::Malformed,
                &format!("{peer}"),
                "reply flags on a request; closing connection",
            );
            break;
        }
        if key.is_some() {
            let skew = crate::frame::now_ms().abs_diff(h.timestamp_ms);
            if skew > cfg.replay_window.as_millis() as u64 {
                inc(&c.replays_refused, 1);
                log(
                    Kind::Replay,
                    &format!("{peer}: timestamp {skew} ms away from this host's clock"),
                    "frame outside the replay window; closing connection",
                );
                break;
            }
            // The duplicate filter lives in memory: what an earlier life of this server
            // delivered it does not know. A frame stamped before this server started may be
            // one of those, captured and replayed: refused (within the replay window only;
            // older frames are refused above anyway).
            if h.timestamp_ms < shared.started_ms {
                inc(&c.replays_refused, 1);
                log(
                    Kind::Replay,
                    &format!("{peer}: flow {:#x}", h.flow_id),
                    "frame stamped before this server started (possible replay across a restart); closing connection",
                );
                break;
            }
        }
        let call = h.flags & flags::CALL != 0;
        if !call && h.copies == 1 && f.payload.is_empty() {
            // A keepalive (docs/protocol.md): acknowledged at once, nothing delivered, nothing
            // remembered.
            inc(&c.keepalives, 1);
            let head = Header {
                flags: flags::REPLY,
                ..h
            }
            .encode(key, &[]);
            let mut w = wr.lock().await;
            if let Err(e) = w.send(&head, &[]).await {
                debug!(error = %e, "write failed");
                break;
            }
            unflushed = true;
            continue;
        }
        let len = f.payload.len() as u64;
        inc(&c.copies_received, 1);
        inc(&c.bytes_received, len);
        // With a key the flow id is authenticated (the tag covers it), so it alone names the
        // flow: a replay from another address is the same flow, and a sender behind NAT or
        // with several addresses is still served once. Without a key anyone can forge any
        // id, so a flow is named by its sender's address and id.
        let dkey = (key.is_none().then(|| peer.ip()), h.flow_id);
        // A flow whose acknowledgement waits for the application is answered like a call:
        // its copies wait in the duplicate filter until the application has it. Under
        // `AckAfter::Queue` a flow's later copies wait too, until its first copy has entered
        // the queue: a `DUP` acknowledgement never goes out for a flow still waiting for room.
        // (Its first copy registers no waiter, and no response writer is started for it: the
        // common path stays as cheap as before; a later copy registers itself if it must wait.)
        let queue_ack = !call && cfg.ack_after == AckAfter::Queue;
        let waits = true;
        let waiter = if !queue_ack {
            let (tx, _) = responses.get_or_insert_with(|| {
                spawn_response_writer(wr.clone(), dead.clone(), progress.clone(), shared.clone())
            });
            Some(tx.clone())
        } else {
            None
        };
        let seen = {
            let mut d = shared.dedup.lock().expect("dedup lock");
            d.on_copy(
                dkey,
                h.copy,
                h.copies,
                waits,
                waiter.map(|tx| (tx, h)),
                (h.digest, h.timestamp_ms, key.is_some()),
                Instant::now(),
            )
        };
        let reply = |dup: bool| Header {
            flags: flags::REPLY | if dup { flags::DUP } else { 0 },
            ..h
        };
        let out: Option<Out> = match seen {
            Seen::New => {
                if call {
                    inc(&c.calls_delivered, 1);
                } else {
                    inc(&c.flows_delivered, 1);
                }
                let inc_msg = Incoming {
                    kind: if call {
                        IncomingKind::Call
                    } else {
                        IncomingKind::Flow
                    },
                    flow_id: h.flow_id,
                    peer,
                    copy: h.copy,
                    timestamp_ms: h.timestamp_ms,
                    data: f.payload,
                    received: std::time::Instant::now(),
                    responder: (!queue_ack).then(|| Responder {
                        key: dkey,
                        peer: peer.ip(),
                        shared: shared.clone(),
                        done: false,
                        armed: call,
                    }),
                };
                // Waiting for room in the application's queue is not the peer's fault: the
                // connection cannot be evicted meanwhile.
                progress.busy();
                if app.send(inc_msg).await.is_err() {
                    break;
                }
                if queue_ack {
                    // Admitted: acknowledge the later copies that waited for it, then this one.
                    let waiters = shared.dedup.lock().expect("dedup lock").admit(dkey);
                    if !waiters.is_empty() {
                        answer_waiters(shared, waiters, &Arc::from(&[][..]));
                    }
                    progress.mark(shared.now_ms());
                }
                queue_ack.then(|| Out {
                    head: reply(false).encode(key, &[]),
                    body: None,
                    _charge: None,
                })
            }
            Seen::Conflict => {
                log(
                    Kind::Digest,
                    &format!("{peer}: flow {:#x} copy {}", h.flow_id, h.copy),
                    "copy differs from the flow's first copy (digest); closing connection",
                );
                break;
            }
            Seen::Stale => {
                inc(&c.replays_refused, 1);
                log(
                    Kind::Replay,
                    &format!("{peer}: flow {:#x}", h.flow_id),
                    "possible replay (older than a forgotten id); closing connection",
                );
                break;
            }
            Seen::Dup { repeat: true, .. } if key.is_some() => {
                // A sender never writes the same copy of a flow twice: with a key, a copy index
                // that already arrived is a replay (from any address). Not delivered, not
                // answered.
                inc(&c.replays_refused, 1);
                log(
                    Kind::Replay,
                    &format!("{peer}: flow {:#x} copy {}", h.flow_id, h.copy),
                    "replayed copy (this copy of the flow already arrived); closing connection",
                );
                break;
            }
            Seen::Dup {
                cached,
                gone,
                waiting,
                ..
            } => {
                inc(&c.duplicates, 1);
                inc(&c.duplicate_bytes, len);
                debug!(
                    flow_id = h.flow_id,
                    copy = h.copy,
                    "late duplicate discarded"
                );
                // Under `AckAfter::Queue`: a copy of a flow whose first copy still waits for
                // room waits for its admission (registered now); otherwise acknowledged.
                let queued_wait = queue_ack && waiting && {
                    let (tx, _) = responses.get_or_insert_with(|| {
                        spawn_response_writer(
                            wr.clone(),
                            dead.clone(),
                            progress.clone(),
                            shared.clone(),
                        )
                    });
                    let tx = tx.clone();
                    shared
                        .dedup
                        .lock()
                        .expect("dedup lock")
                        .add_waiter(dkey, (tx, h))
                };
                match (waits && !queue_ack, cached) {
                    _ if queued_wait => {
                        progress.busy();
                        None
                    }
                    (false, _) => Some(Out {
                        head: reply(true).encode(key, &[]),
                        body: None,
                        _charge: None,
                    }),
                    // A flow whose (empty) acknowledgement body was dropped: acknowledged.
                    (true, None) if gone && !call => Some(Out {
                        head: reply(true).encode(key, &[]),
                        body: None,
                        _charge: None,
                    }),
                    // Executed, but its response was dropped (byte bounds): say so, never
                    // deliver it again.
                    (true, None) if gone => Some(Out {
                        head: Header {
                            flags: flags::REPLY | flags::DUP | flags::GONE,
                            ..h
                        }
                        .encode(key, &[]),
                        body: None,
                        _charge: None,
                    }),
                    // `reply_once`: the response went to the copy delivered first.
                    (true, Some(b)) if call && cfg.reply_once && !b.is_empty() => {
                        inc(&c.replies_elsewhere, 1);
                        Some(Out {
                            head: Header {
                                flags: flags::REPLY | flags::DUP | flags::ELSEWHERE,
                                ..h
                            }
                            .encode(key, &[]),
                            body: None,
                            _charge: None,
                        })
                    }
                    (true, Some(b)) => {
                        inc(&c.response_bytes, b.len() as u64);
                        Some(Out {
                            head: reply(true).encode(key, &b),
                            body: Some(b),
                            _charge: None,
                        })
                    }
                    // Call (or flow) still with the application: this connection was added
                    // as a waiter.
                    (true, None) => {
                        progress.busy();
                        None
                    }
                }
            }
        };
        if let Some(o) = out {
            let mut w = wr.lock().await;
            if let Err(e) = w.send(&o.head, o.body.as_deref().unwrap_or(&[])).await {
                debug!(error = %e, "write failed");
                break;
            }
            unflushed = true;
        }
    }
    if unflushed {
        let _ = wr.lock().await.flush().await;
    }
    if let Some((tx, writer)) = responses {
        drop(tx);
        // Let pending responses go out (bounded), then close.
        let _ = tokio::time::timeout(cfg.idle_timeout, writer).await;
    }
    if peer_gone {
        // The write half would shut down on drop (one more syscall, which fails with ENOTCONN
        // after the client's reset); the socket closes with the read half all the same.
        if let Ok(w) = Arc::try_unwrap(wr) {
            w.into_inner().half.forget();
        }
    }
}
