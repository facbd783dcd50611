//! Sending a copy on a persistent connection (pooled mode): opening the connection with its
//! writer and reader tasks, then queueing the frame and awaiting its reply.

use super::base::{Client, Inner};
use super::pool::{OutFrame, Pending, PendingGuard, PooledConn, Sent, POOL_QUEUE, SENT_MAX};
use super::types::{inc, PoolKey, Reply, Route};
use crate::frame::flags;
use crate::wire::{write_counted, FrameReader};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};
use tracing::debug;

/// Ports a pool slot's copy tries before it fails (each failed connect moves the slot).
const POOL_CONNECT_ATTEMPTS: u32 = 4;

impl Client {
    /// Whether `key` is a path pool's slot (a probed source port of a client with a pool).
    fn is_pool_slot(&self, key: PoolKey) -> bool {
        key.src_port.is_some() && self.inner.cfg.path_pool.is_some()
    }

    pub(super) async fn pooled_conn(&self, key: PoolKey) -> Result<Arc<PooledConn>, String> {
        let now_ms = self.now().as_millis() as u64;
        let idle_ms = self.inner.cfg.pool_idle.as_millis() as u64;
        // A connection idle for long may be closed by the server's idle timeout at any moment;
        // replace it rather than race that close.
        let live = |inner: &Inner| {
            let pools = inner.pools.lock().expect("pools lock");
            pools
                .get(&key)
                .filter(|c| c.fresh(now_ms, idle_ms))
                .cloned()
        };
        if let Some(c) = live(&self.inner) {
            return Ok(c);
        }
        // One gate per key: a second open of the same connection waits and then finds the
        // first's; opens of different connections do not wait for one another (a handshake
        // whose SYN was dropped waits a second, and must hold up no other slot's).
        let gate = self
            .inner
            .connecting
            .lock()
            .expect("connecting lock")
            .entry(key)
            .or_default()
            .clone();
        let result = {
            let _open = gate.lock().await;
            match live(&self.inner) {
                Some(c) => Ok(c),
                None => self.open_pooled(key, now_ms).await,
            }
        };
        let mut gates = self.inner.connecting.lock().expect("connecting lock");
        if Arc::strong_count(&gate) == 2 {
            gates.remove(&key); // nobody else waits on it
        }
        result
    }

    /// Opens `key`'s connection (its old one, if any, leaves the map first) with its writer
    /// and reader tasks, and puts it in the map.
    async fn open_pooled(&self, key: PoolKey, now_ms: u64) -> Result<Arc<PooledConn>, String> {
        let slot = self.is_pool_slot(key);
        // A pool slot reconnects from the same source port: its old connection (idle too
        // long, or closed) must be gone first, or the kernel refuses the five-tuple. It
        // leaves the map now; its tasks end at their next poll and its socket closes with a
        // reset (below), leaving no TIME_WAIT behind.
        let old = self.inner.pools.lock().expect("pools lock").remove(&key);
        if let Some(old) = old {
            drop(old);
            if slot {
                for _ in 0..4 {
                    tokio::task::yield_now().await;
                }
            }
        }
        let stream = self
            .connect(Route {
                dst: key.dst,
                src_port: key.src_port,
            })
            .await?;
        // Persistent connections close normally; a pool slot's with a reset, so that its
        // source port can be used again at once.
        let _ = socket2::SockRef::from(&stream).set_linger(slot.then_some(Duration::ZERO));
        let (rd, wr) = stream.into_split();
        let mut rd = FrameReader::new(rd, 16 * 1024);
        let mut wr = tokio::io::BufWriter::with_capacity(16 * 1024, wr);
        let (tx, mut rx) = mpsc::channel::<OutFrame>(POOL_QUEUE);
        let stall = self.inner.cfg.flow_timeout;
        let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
        let sent: Sent = Arc::new(Mutex::new(HashMap::new()));
        let alive = Arc::new(AtomicBool::new(true));
        let fail_all = |pending: &Pending, why: &str| {
            for (_, tx) in pending.lock().expect("pending lock").drain() {
                let _ = tx.send(Err(why.to_string()));
            }
        };
        let counters = self.inner.counters.clone();
        let (p2, a2, s2) = (pending.clone(), alive.clone(), sent.clone());
        let last_used = Arc::new(AtomicU64::new(now_ms));
        let last_copy = Arc::new(AtomicU64::new(now_ms));
        let keepalive = self.keepalive_plan();
        let (me_w, lu, lc) = (self.clone(), last_used.clone(), last_copy.clone());
        let writer = tokio::spawn(async move {
            // Frames queued together go out in one write; a frame whose flow already
            // completed on another copy is skipped. With keepalives, a connection with no
            // frame for `every` sends an empty flow, until `window` has passed since its
            // last copy.
            loop {
                let next = match keepalive {
                    None => rx.recv().await,
                    Some((every, window)) => match tokio::time::timeout(every, rx.recv()).await {
                        Ok(next) => next,
                        Err(_) => {
                            let now = me_w.now().as_millis() as u64;
                            if now.saturating_sub(lc.load(Ordering::Relaxed)) < window {
                                lu.fetch_max(now, Ordering::Relaxed);
                                inc(&counters.keepalives, 1);
                                Some(me_w.keepalive_frame())
                            } else {
                                rx.recv().await
                            }
                        }
                    },
                };
                let Some(mut f) = next else { break };
                let mut res = Ok(());
                loop {
                    if f.cancel.load(Ordering::Relaxed) {
                        inc(&counters.frames_skipped, 1);
                        s2.lock().expect("sent lock").remove(&f.key);
                    } else {
                        let w = write_counted(&mut wr, &f.head, f.payload.as_slice(), &f.written);
                        res = match tokio::time::timeout(stall, w).await {
                            Ok(r) => r,
                            Err(_) => {
                                inc(&counters.pool_stalls, 1);
                                Err(std::io::Error::new(
                                    std::io::ErrorKind::TimedOut,
                                    "no progress within the flow timeout (peer not reading)",
                                ))
                            }
                        };
                        if res.is_err() {
                            break;
                        }
                    }
                    match rx.try_recv() {
                        Ok(next) => f = next,
                        Err(_) => break,
                    }
                }
                if res.is_ok() {
                    res = match tokio::time::timeout(stall, wr.flush()).await {
                        Ok(r) => r,
                        Err(_) => {
                            inc(&counters.pool_stalls, 1);
                            Err(std::io::ErrorKind::TimedOut.into())
                        }
                    };
                }
                if let Err(e) = res {
                    a2.store(false, Ordering::Relaxed);
                    s2.lock().expect("sent lock").clear();
                    fail_all(&p2, &format!("pooled connection write: {e}"));
                    return;
                }
            }
        });
        let me = self.clone();
        let (p3, a3, s3) = (pending.clone(), alive.clone(), sent.clone());
        let reader = tokio::spawn(async move {
            loop {
                // No read timeout: the server closes idle connections, and `transfer` bounds
                // each flow.
                match me.read_reply(&mut rd, None).await {
                    Ok(f) => {
                        let k = (f.header.flow_id, f.header.copy);
                        let queued = s3.lock().expect("sent lock").remove(&k);
                        if let (Some(t), Some(port)) = (queued, key.src_port) {
                            // Every reply, the losers' too: the slot's response time.
                            me.inner.pathpool.lock().expect("pathpool lock").observe(
                                key.dst,
                                port,
                                t.elapsed(),
                            );
                        }
                        if f.header.flags & flags::ELSEWHERE != 0 {
                            // The response went to another copy: this one keeps waiting
                            // (until the flow completes, or its timeout).
                            continue;
                        }
                        let tx = p3.lock().expect("pending lock").remove(&k);
                        if let Some(tx) = tx {
                            let _ = tx.send(if f.header.flags & flags::GONE != 0 {
                                Err(super::types::GONE_MESSAGE.into())
                            } else {
                                Ok(Reply {
                                    dup: f.header.flags & flags::DUP != 0,
                                    body: f.payload,
                                })
                            });
                        }
                    }
                    Err(e) => {
                        a3.store(false, Ordering::Relaxed);
                        s3.lock().expect("sent lock").clear();
                        fail_all(&p3, &format!("pooled connection: {e}"));
                        return;
                    }
                }
            }
        });
        let c = Arc::new(PooledConn {
            tx,
            last_used,
            last_copy,
            pending,
            sent,
            alive,
            tasks: [writer, reader],
        });
        self.inner
            .pools
            .lock()
            .expect("pools lock")
            .insert(key, c.clone());
        Ok(c)
    }

    /// Keepalives of pooled connections: `(every, window in ms)`, or `None` when off (no
    /// window, or no idle limit to stay below).
    fn keepalive_plan(&self) -> Option<(Duration, u64)> {
        let cfg = &self.inner.cfg;
        let every = cfg.pool_idle / 2;
        (!cfg.pool_keepalive.is_zero() && !every.is_zero())
            .then_some((every, cfg.pool_keepalive.as_millis() as u64))
    }

    /// An empty one-way flow (one copy, a fresh flow id): the server acknowledges it, which
    /// nobody awaits (the reader drops a reply it has no waiter for).
    fn keepalive_frame(&self) -> OutFrame {
        let inner = &self.inner;
        let flow_id = inner.ids.id(inner.next_seq.fetch_add(1, Ordering::Relaxed));
        let head = crate::frame::Header {
            flags: 0,
            copy: 0,
            copies: 1,
            flow_id,
            length: 0,
            timestamp_ms: crate::frame::now_ms(),
            digest: 0,
        }
        .encode(inner.cfg.key.as_deref(), &[]);
        OutFrame {
            head,
            payload: Vec::new().into(),
            cancel: Arc::new(AtomicBool::new(false)),
            written: Arc::new(AtomicU64::new(0)),
            key: (flow_id, 0),
        }
    }

    pub(super) async fn copy_pooled(
        &self,
        key: PoolKey,
        frame: OutFrame,
        flow_id: u64,
        copy: u8,
    ) -> Result<Reply, String> {
        let mut key = key;
        let mut attempts = 0;
        let conn = loop {
            match self.pooled_conn(key).await {
                Ok(c) => break c,
                // A pool slot's port may be bound to the same destination by another
                // process (EADDRNOTAVAIL) or refuse to bind: the slot takes another port and
                // the copy tries it, a few times at most.
                Err(e) if self.is_pool_slot(key) => {
                    attempts += 1;
                    let new = self.pool_copy_failed(key);
                    match new {
                        Some(p) if attempts < POOL_CONNECT_ATTEMPTS => {
                            debug!(error = %e, port = p, "pool slot moved to another port");
                            key.src_port = Some(p);
                        }
                        _ => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        };
        let now_ms = self.now().as_millis() as u64;
        conn.last_used.fetch_max(now_ms, Ordering::Relaxed);
        conn.last_copy.fetch_max(now_ms, Ordering::Relaxed);
        let (otx, orx) = oneshot::channel();
        conn.pending
            .lock()
            .expect("pending lock")
            .insert((flow_id, copy), otx);
        let _guard = PendingGuard {
            pending: conn.pending.clone(),
            key: (flow_id, copy),
        };
        if self.is_pool_slot(key) {
            let mut sent = conn.sent.lock().expect("sent lock");
            if sent.len() < SENT_MAX {
                sent.insert((flow_id, copy), std::time::Instant::now());
            }
        }
        conn.tx
            .send(frame)
            .await
            .map_err(|_| "pooled connection closed".to_string())?;
        match orx.await {
            Ok(r) => r,
            Err(_) => Err("pooled connection closed".into()),
        }
    }
}
