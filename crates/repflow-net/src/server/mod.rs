//! The receiving side: listens on one or more ports, accepts every copy, hands each flow or
//! request to the application exactly once, acknowledges or answers every copy, and discards
//! late duplicates.
//!
//! This file holds the [`Server`] handle; each concern has its own file, lower files never
//! importing higher ones: `config` (limits), `counters`, `refusals` (rate-limited log),
//! `shared` (state all tasks share), `admission` (who gets a connection slot), `reply`
//! (the write side), `delivery` (what the application receives), `conn` (reading and deciding
//! one connection's frames), `accept` (listeners and the accept loop).

mod accept;
mod admission;
mod config;
mod conn;
mod counters;
mod delivery;
mod refusals;
mod reply;
mod shared;

pub use config::{AckAfter, ServerConfig};
pub use counters::ServerCounters;
pub use delivery::{Incoming, IncomingKind, Responder};

use crate::dedup::Dedup;
use crate::error::NetError;
use accept::{accept_loop, bind_listener, is_protocol_error};
use counters::AtomicCounters;
use shared::Shared;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// A RepFlow server. Dropping it stops accepting and closes every connection.
#[derive(Debug)]
pub struct Server {
    rx: mpsc::Receiver<Incoming>,
    shared: Arc<Shared>,
    addrs: Vec<SocketAddr>,
    tasks: Vec<JoinHandle<()>>,
    _shutdown: watch::Sender<bool>,
}

impl Server {
    /// Binds every address of `cfg` and starts serving in the background (on the current
    /// tokio runtime).
    ///
    /// Cancel-safety: if dropped before it completes, listeners bound so far are closed.
    pub async fn bind(cfg: ServerConfig) -> Result<Server, NetError> {
        let mut listeners = Vec::new();
        for &addr in &cfg.addrs {
            let l = bind_listener(addr, cfg.mptcp).map_err(|source| {
                if cfg.mptcp && is_protocol_error(&source) {
                    NetError::MptcpUnavailable(source)
                } else {
                    NetError::Bind { addr, source }
                }
            })?;
            listeners.push(l);
        }
        let addrs = listeners
            .iter()
            .map(|l| l.local_addr())
            .collect::<Result<Vec<_>, _>>()?;
        let (tx, rx) = mpsc::channel(cfg.queue.max(1));
        let shared = Arc::new(Shared {
            dedup: Mutex::new(
                Dedup::new(
                    cfg.dedup_capacity,
                    if cfg.key.is_some() {
                        cfg.dedup_ttl.max(2 * cfg.replay_window)
                    } else {
                        cfg.dedup_ttl
                    },
                )
                .with_response_bounds(cfg.response_cache_bytes, cfg.response_cache_bytes_per_peer),
            ),
            slots: Mutex::new(Default::default()),
            refusals: Default::default(),
            queued_bytes: Default::default(),
            epoch: Instant::now(),
            started_ms: crate::frame::now_ms(),
            counters: AtomicCounters::default(),
            cfg,
        });
        accept::check_fd_limit(shared.cfg.max_connections, addrs.len());
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut tasks: Vec<JoinHandle<()>> = listeners
            .into_iter()
            .map(|l| {
                let (shared, tx, stop) = (shared.clone(), tx.clone(), stop_rx.clone());
                tokio::spawn(accept_loop(l, shared, tx, stop))
            })
            .collect();
        // Writes the refusals the log's limiters held back once their kind has been quiet,
        // and forgets expired ids (and their held responses) whether or not frames arrive.
        let s = shared.clone();
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                s.refusals.flush(false);
                s.dedup.lock().expect("dedup lock").expire(Instant::now());
            }
        }));
        Ok(Server {
            rx,
            shared,
            addrs,
            tasks,
            _shutdown: stop_tx,
        })
    }

    /// The next flow or request, each delivered exactly once; `None` once the server has
    /// stopped.
    ///
    /// Cancel-safe: if the future is dropped, no flow is lost (it stays queued).
    pub async fn next(&mut self) -> Option<Incoming> {
        let mut inc = self.rx.recv().await?;
        if inc.kind == IncomingKind::Flow {
            match self.shared.cfg.ack_after {
                AckAfter::Queue => {}
                // Taken: acknowledge now (every copy that waits for it).
                AckAfter::Consume => {
                    if let Some(mut r) = inc.responder.take() {
                        r.armed = true;
                    }
                }
                // Acknowledged when the application drops it (or calls `ack`).
                AckAfter::Handled => {
                    if let Some(r) = inc.responder.as_mut() {
                        r.armed = true;
                    }
                }
            }
        }
        Some(inc)
    }

    /// The addresses actually bound (ports resolved when 0 was asked).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// A snapshot of the counters.
    pub fn counters(&self) -> ServerCounters {
        self.shared.counters()
    }

    /// A handle that reads the counters from elsewhere (e.g. while a task awaits
    /// [`Server::next`]).
    pub fn stats(&self) -> ServerStats {
        ServerStats(self.shared.clone())
    }
}

/// Reads a [`Server`]'s counters; cheap to clone.
#[derive(Clone, Debug)]
pub struct ServerStats(Arc<Shared>);

impl ServerStats {
    /// A snapshot of the counters.
    pub fn counters(&self) -> ServerCounters {
        self.0.counters()
    }
}
impl Drop for Server {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        self.shared.refusals.flush(true);
    }
}
