//! The server sidecar: repflow-net requests in, each executed once by the real server.

use super::envelope::{open_request, response, Protocol, Status};
use super::error::ProxyError;
use super::hops::{HopSnapshot, ServerHops};
use super::journal::{Claim, Journal, JournalConfig};
use super::refusals::{inc, Atomic, ProxyCounters, RefusalLog};
use super::upstream::{safe_method, Part, Pool, PoolConfig, UpstreamError};
use super::{http, resp};
use crate::{Incoming, IncomingKind, Server, ServerConfig, ServerStats};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tracing::{debug, info};

/// Settings of a [`ProxyServer`].
#[derive(Clone, Debug)]
pub struct ProxyServerConfig {
    /// The repflow-net server (ports, key, limits, dedup window). Its `max_flow_size` bounds
    /// a request: the client sidecar's `max_request` plus 4 bytes of envelope.
    pub server: ServerConfig,
    /// The real server.
    pub upstream: SocketAddr,
    /// The protocol carried.
    pub protocol: Protocol,
    /// Upstream connections at most (busy or idle).
    pub pool_size: usize,
    /// How long a request waits for a free upstream connection before it is refused.
    pub pool_wait: Duration,
    /// Time allowed to open an upstream connection.
    pub connect_timeout: Duration,
    /// Time allowed for one exchange with the upstream (write and whole response).
    pub upstream_timeout: Duration,
    /// Largest upstream response carried back (bytes).
    pub max_response: usize,
    /// Requests being handled at once (waiting for the pool included); more wait in the
    /// repflow-net server's queue.
    pub max_inflight: usize,
    /// Executed ids persisted across restarts (`None`: remembered in memory only, by the
    /// repflow-net dedup, so a copy arriving after a restart may execute again).
    pub journal: Option<JournalConfig>,
}

impl ProxyServerConfig {
    /// Defaults: pool of 64, 1 s pool wait, 2 s connect, 30 s exchange, 16 MiB responses,
    /// 1,024 requests in flight, no journal.
    pub fn new(server: ServerConfig, upstream: SocketAddr, protocol: Protocol) -> Self {
        ProxyServerConfig {
            server,
            upstream,
            protocol,
            pool_size: 64,
            pool_wait: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(2),
            upstream_timeout: Duration::from_secs(30),
            max_response: 16 << 20,
            max_inflight: 1024,
            journal: None,
        }
    }
}

struct Shared {
    protocol: Protocol,
    pool: Pool,
    journal: Option<Journal>,
    /// Requests sent before now − window are refused (the journal forgets older ids).
    window_ms: Option<u64>,
    max_request: usize,
    counters: Atomic,
    hops: ServerHops,
    log: RefusalLog,
}

/// The server sidecar. Bind it, then `run` it (until the task is dropped).
pub struct ProxyServer {
    server: Server,
    shared: Arc<Shared>,
    inflight: Arc<Semaphore>,
}

impl std::fmt::Debug for ProxyServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyServer")
            .field("addrs", &self.server.local_addrs())
            .field("protocol", &self.shared.protocol)
            .finish()
    }
}

/// A handle that reads a running [`ProxyServer`]'s counters.
#[derive(Clone)]
pub struct ProxyServerStats(Arc<Shared>, ServerStats);

impl std::fmt::Debug for ProxyServerStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProxyServerStats")
    }
}

impl ProxyServerStats {
    /// The sidecar's counters.
    pub fn counters(&self) -> ProxyCounters {
        self.0.counters.snapshot()
    }

    /// Its per-hop time histograms (`server_queue`, `server_in`, `server_upstream`; see
    /// [`hops`](super::hops)), cumulative since it started.
    pub fn hops(&self) -> Vec<HopSnapshot> {
        self.0.hops.snapshot()
    }

    /// The counters of its repflow-net server.
    pub fn net(&self) -> crate::ServerCounters {
        self.1.counters()
    }
}

impl ProxyServer {
    /// Opens the journal (refusing to start without it when configured), binds the
    /// repflow-net server and prepares the pool (no upstream connection is opened yet).
    pub async fn bind(cfg: ProxyServerConfig) -> Result<ProxyServer, ProxyError> {
        let journal = match &cfg.journal {
            None => None,
            Some(j) => Some(
                Journal::open(j.clone()).map_err(|source| ProxyError::Journal {
                    path: j.path.clone(),
                    source,
                })?,
            ),
        };
        let max_request = cfg.server.max_flow_size as usize;
        let server = Server::bind(cfg.server.clone()).await?;
        let remembered = journal.as_ref().map_or(0, Journal::len);
        info!(
            addrs = ?server.local_addrs(),
            upstream = %cfg.upstream,
            protocol = cfg.protocol.name(),
            journal = ?cfg.journal.as_ref().map(|j| &j.path),
            remembered,
            "proxy server sidecar listening"
        );
        Ok(ProxyServer {
            server,
            shared: Arc::new(Shared {
                protocol: cfg.protocol,
                pool: Pool::new(PoolConfig {
                    addr: cfg.upstream,
                    size: cfg.pool_size,
                    wait: cfg.pool_wait,
                    connect_timeout: cfg.connect_timeout,
                    timeout: cfg.upstream_timeout,
                    max_response: cfg.max_response,
                }),
                window_ms: cfg.journal.as_ref().map(|j| j.window.as_millis() as u64),
                journal,
                max_request,
                counters: Atomic::default(),
                hops: ServerHops::default(),
                log: RefusalLog::default(),
            }),
            inflight: Arc::new(Semaphore::new(cfg.max_inflight.max(1))),
        })
    }

    /// The repflow-net addresses bound.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        self.server.local_addrs()
    }

    /// A handle on the counters.
    pub fn stats(&self) -> ProxyServerStats {
        ProxyServerStats(self.shared.clone(), self.server.stats())
    }

    /// Serves until the server stops (or the future is dropped).
    pub async fn run(mut self) {
        while let Some(inc_msg) = self.server.next().await {
            let permit = self
                .inflight
                .clone()
                .acquire_owned()
                .await
                .expect("never closed");
            let shared = self.shared.clone();
            tokio::spawn(async move {
                handle(&shared, inc_msg).await;
                drop(permit);
            });
        }
    }
}

/// A request that may be handed to the upstream.
struct Valid {
    /// Each Redis command, or the one HTTP request or `conn` connection.
    parts: Vec<Part>,
    /// An HTTP `HEAD` (its response has no body).
    to_head: bool,
    /// Every command is known to leave its connection's state unchanged: the upstream
    /// connection may go back to the pool afterwards.
    reusable: bool,
}

/// Why request bytes are refused: `(kind, unsupported, message)`; `unsupported` for a
/// command the proxy does not carry, otherwise malformed.
type Invalid = (&'static str, bool, String);

/// Checks the request bytes. The server sidecar checks Redis command names itself (it is
/// the one that talks to the upstream): a client sidecar of another build, or anyone
/// holding the key, could send a connection-state command without the client's check.
fn validate(proto: Protocol, req: &[u8], max: usize) -> Result<Valid, Invalid> {
    let malformed = |m: String| ("malformed", false, m);
    match proto {
        Protocol::Conn => Ok(Valid {
            parts: vec![Part {
                end: req.len(),
                idempotent: false,
            }],
            to_head: false,
            reusable: false,
        }),
        Protocol::Redis => {
            let (mut at, mut parts, mut reusable) = (0, Vec::new(), true);
            while at < req.len() {
                match resp::request(&req[at..], max) {
                    Ok(Some(resp::Request {
                        len,
                        name: Some(name),
                    })) => {
                        match resp::classify(&name) {
                            resp::Command::Stateless => {}
                            resp::Command::Unknown => reusable = false,
                            resp::Command::ConnectionState | resp::Command::Quit => {
                                let name = String::from_utf8_lossy(&name).to_ascii_uppercase();
                                return Err((
                                    "unsupported",
                                    true,
                                    format!("command '{name}' changes connection state and is not carried by the proxy"),
                                ));
                            }
                        }
                        at += len;
                        parts.push(Part {
                            end: at,
                            idempotent: resp::read_only(&name),
                        });
                    }
                    Ok(_) => {
                        return Err(malformed("incomplete or blank command in a batch".into()))
                    }
                    Err(e) => return Err(malformed(e.to_string())),
                }
            }
            if parts.is_empty() {
                return Err(malformed("empty batch".into()));
            }
            Ok(Valid {
                parts,
                to_head: false,
                reusable,
            })
        }
        Protocol::Http => match http::request(req, max) {
            Ok(Some(m)) if m.len == req.len() => Ok(Valid {
                parts: vec![Part {
                    end: req.len(),
                    idempotent: safe_method(req),
                }],
                to_head: m.head.head_or_status == 1,
                reusable: true,
            }),
            Ok(_) => Err(malformed("not exactly one complete HTTP request".into())),
            Err(e) => Err(malformed(e.to_string())),
        },
    }
}

async fn handle(sh: &Shared, inc_msg: Incoming) {
    if inc_msg.kind != IncomingKind::Call {
        return; // One-way flows are acknowledged by the library and carry nothing here.
    }
    let c = &sh.counters;
    inc(&c.calls);
    let handled = Instant::now();
    sh.hops
        .server_queue
        .record(handled.saturating_duration_since(inc_msg.received));
    let refuse = |kind: &'static str, msg: String| {
        sh.log.refuse(
            "server",
            kind,
            &format_args!("flow {:#x}: {msg}", inc_msg.flow_id),
        );
        response(Status::Refused, msg.as_bytes())
    };
    let req = match open_request(&inc_msg.data, sh.protocol) {
        Ok(r) => r,
        Err(m) => {
            inc(&c.refused_malformed);
            let r = refuse("envelope", m.into());
            return inc_msg.respond(r);
        }
    };
    let Valid {
        parts,
        to_head,
        reusable,
    } = match validate(sh.protocol, req, sh.max_request) {
        Ok(v) => v,
        Err((kind, unsupported, m)) => {
            inc(if unsupported {
                &c.refused_unsupported
            } else {
                &c.refused_malformed
            });
            let r = refuse(kind, m);
            return inc_msg.respond(r);
        }
    };
    if let Some(w) = sh.window_ms {
        let age = crate::frame::now_ms().saturating_sub(inc_msg.timestamp_ms);
        if age > w {
            inc(&c.refused_stale);
            let r = refuse(
                "stale",
                format!("request sent {age} ms ago, beyond the journal window"),
            );
            return inc_msg.respond(r);
        }
    }
    if let Some(j) = &sh.journal {
        if inc_msg.timestamp_ms < j.fresh_since_ms() {
            inc(&c.refused_stale);
            let r = refuse(
                "stale",
                "request sent before this journal started empty: an earlier life of the server sidecar may have executed it".into(),
            );
            return inc_msg.respond(r);
        }
        match j.claim(inc_msg.flow_id) {
            Ok(Claim::New) => {}
            Ok(Claim::NewEarlyRotation) => {
                inc(&c.journal_early_rotations);
                sh.log.refuse("server", "journal_capacity", &"journal generation full before its window: ids are remembered for less than the window; raise the journal capacity");
            }
            Ok(Claim::Executed) => {
                inc(&c.refused_executed);
                let r = refuse(
                    "executed",
                    "request already executed by an earlier life of the server sidecar; its response is lost".into(),
                );
                return inc_msg.respond(r);
            }
            Err(e) => {
                // Not recorded: not executed either (it could not be refused after a restart).
                // Logged through the per-kind limiter only: a full disk fails every request.
                let r = refuse("journal", format!("journal write failed: {e}"));
                return inc_msg.respond(r);
            }
        }
    }
    let exchange = Instant::now();
    sh.hops.server_in.record(exchange - handled);
    let result = sh
        .pool
        .exchange(sh.protocol, req, &parts, to_head, reusable)
        .await;
    sh.hops.server_upstream.record(exchange.elapsed());
    match result {
        Ok(ex) => {
            use std::sync::atomic::Ordering::Relaxed;
            let count = parts.len() as u64;
            c.connections.fetch_add(ex.opened, Relaxed);
            c.requests.fetch_add(count - ex.failed, Relaxed);
            c.upstream_resent.fetch_add(ex.resent, Relaxed);
            if ex.failed > 0 {
                c.outcome_unknown.fetch_add(ex.failed, Relaxed);
                sh.log.refuse(
                    "server",
                    "upstream_closed",
                    &format_args!(
                        "flow {:#x}: the upstream closed a pooled connection; {} of {count} requests answered with an error (outcome unknown), {} sent again",
                        inc_msg.flow_id, ex.failed, ex.resent
                    ),
                );
            }
            debug!(
                flow_id = inc_msg.flow_id,
                count,
                resent = ex.resent,
                failed = ex.failed,
                bytes = ex.body.len(),
                "executed"
            );
            inc_msg.respond(response(Status::Ok, &ex.body));
        }
        Err(e) => {
            let kind = match &e {
                UpstreamError::PoolBusy => {
                    inc(&c.refused_pool_busy);
                    "pool_busy"
                }
                UpstreamError::Down(_) => {
                    inc(&c.refused_upstream_down);
                    "upstream_down"
                }
                UpstreamError::TooLarge(_) => {
                    inc(&c.refused_too_large);
                    "response_too_large"
                }
                UpstreamError::Unknown(_) => {
                    inc(&c.outcome_unknown);
                    "outcome_unknown"
                }
            };
            let msg = e.to_string();
            sh.log.refuse(
                "server",
                kind,
                &format_args!("flow {:#x}: {msg}", inc_msg.flow_id),
            );
            inc_msg.respond(response(e.status(), msg.as_bytes()));
        }
    }
}
