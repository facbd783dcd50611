//! The client sidecar: the application's TCP connections in, each request one replicated
//! repflow-net call, responses back in request order.

use super::envelope::{open_response, request_prefix, Protocol, Status, REQUEST_HEAD};
use super::error::ProxyError;
use super::hops::{ClientHops, HopSnapshot};
use super::refusals::{inc, Atomic, ProxyCounters, RefusalLog};
use super::{http, resp};
use crate::{Client, ClientConfig};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::{debug, info};

/// Settings of a [`ProxyClient`].
#[derive(Clone, Debug)]
pub struct ProxyClientConfig {
    /// Where the application connects.
    pub listen: SocketAddr,
    /// The server sidecar's first repflow-net port.
    pub to: SocketAddr,
    /// The protocol carried.
    pub protocol: Protocol,
    /// The repflow-net client (copies, threshold, key, pooled mode, timeouts).
    pub client: ClientConfig,
    /// Largest request (and, for Redis, run of pipelined commands sent together) in bytes.
    pub max_request: usize,
    /// Largest number of pipelined Redis commands sent in one call (the rest wait for the
    /// next call, in order).
    pub max_pipeline: usize,
    /// Application connections served at once; more are refused.
    pub max_connections: usize,
    /// An application connection silent this long between requests is closed.
    pub idle_timeout: Duration,
    /// Time allowed for each write to the application.
    pub write_timeout: Duration,
    /// Bytes all application connections together may hold beyond [`CONN_BASE`] each: read
    /// buffers past that size, requests in their calls, responses being written. A
    /// connection that would exceed it is refused (`refused_memory`): its request is
    /// answered "not executed" and the connection closed, or, for a response that arrived,
    /// "executed, response dropped". Memory ≈ `max_buffered` + `max_connections` ×
    /// [`CONN_BASE`] (+ responses being received by the library).
    pub max_buffered: usize,
}

/// Read-buffer bytes each application connection holds without charge to `max_buffered`.
pub const CONN_BASE: usize = 64 * 1024;

impl ProxyClientConfig {
    /// Defaults around a repflow-net client: 1 MiB requests, 256 pipelined commands per
    /// call, 1,024 connections, 60 s idle, 10 s writes.
    pub fn new(
        listen: SocketAddr,
        to: SocketAddr,
        protocol: Protocol,
        client: ClientConfig,
    ) -> Self {
        ProxyClientConfig {
            listen,
            to,
            protocol,
            client,
            max_request: 1 << 20,
            max_pipeline: 256,
            max_connections: 1024,
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(10),
            max_buffered: 256 << 20,
        }
    }
}

struct Shared {
    cfg: ProxyClientConfig,
    /// `max_buffered` in KiB permits.
    budget: Arc<Semaphore>,
    client: Client,
    counters: Atomic,
    hops: ClientHops,
    log: RefusalLog,
}

/// The client sidecar. Bind it, then `run` it.
pub struct ProxyClient {
    listener: TcpListener,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ProxyClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyClient")
            .field("listen", &self.listener.local_addr().ok())
            .field("to", &self.shared.cfg.to)
            .finish()
    }
}

/// A handle that reads a running [`ProxyClient`]'s counters.
#[derive(Clone)]
pub struct ProxyClientStats(Arc<Shared>);

impl std::fmt::Debug for ProxyClientStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProxyClientStats")
    }
}

impl ProxyClientStats {
    /// The sidecar's counters.
    pub fn counters(&self) -> ProxyCounters {
        self.0.counters.snapshot()
    }

    /// Its per-hop time histograms (`client_in`, `client_call`, `client_out`; see
    /// [`hops`](super::hops)), cumulative since it started.
    pub fn hops(&self) -> Vec<HopSnapshot> {
        self.0.hops.snapshot()
    }

    /// The counters of its repflow-net client.
    pub fn net(&self) -> crate::ClientCounters {
        self.0.client.counters()
    }

    /// The counters of its path pool (all zero without one).
    pub fn paths(&self) -> crate::pathpool::PathPoolCounters {
        self.0.client.path_pool_counters()
    }

    /// The path pool's slots towards the server sidecar (empty before the first request,
    /// or without a pool).
    pub fn slots(&self) -> Vec<crate::pathpool::Slot> {
        self.0.client.path_pool_slots(self.0.cfg.to)
    }

    /// Bytes charged to `max_buffered` now (KiB granularity).
    pub fn buffered_bytes(&self) -> usize {
        let total = (self.0.cfg.max_buffered / 1024).min(Semaphore::MAX_PERMITS);
        (total - self.0.budget.available_permits()) * 1024
    }
}

impl ProxyClient {
    /// Binds the application-facing listener.
    pub async fn bind(cfg: ProxyClientConfig) -> Result<ProxyClient, ProxyError> {
        let listener = TcpListener::bind(cfg.listen)
            .await
            .map_err(|source| ProxyError::Bind {
                addr: cfg.listen,
                source,
            })?;
        let mut ccfg = cfg.client.clone();
        ccfg.max_response = ccfg.max_response.max(1);
        info!(
            listen = ?listener.local_addr().ok(),
            to = %cfg.to,
            protocol = cfg.protocol.name(),
            "proxy client sidecar listening"
        );
        Ok(ProxyClient {
            listener,
            shared: Arc::new(Shared {
                budget: Arc::new(Semaphore::new(
                    (cfg.max_buffered / 1024).min(Semaphore::MAX_PERMITS),
                )),
                client: Client::new(ccfg),
                cfg,
                counters: Atomic::default(),
                hops: ClientHops::default(),
                log: RefusalLog::default(),
            }),
        })
    }

    /// The address bound for the application.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// A handle on the counters.
    pub fn stats(&self) -> ProxyClientStats {
        ProxyClientStats(self.shared.clone())
    }

    /// Accepts and serves application connections until the future is dropped.
    pub async fn run(self) {
        let slots = Arc::new(Semaphore::new(self.shared.cfg.max_connections.max(1)));
        loop {
            let (mut s, peer) = match self.listener.accept().await {
                Ok(v) => v,
                Err(e) => {
                    self.shared.log.refuse("client", "accept", &e);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = s.set_nodelay(true);
            let shared = self.shared.clone();
            match slots.clone().try_acquire_owned() {
                Ok(permit) => {
                    inc(&shared.counters.connections);
                    tokio::spawn(async move {
                        serve(&shared, s, peer).await;
                        drop(permit);
                    });
                }
                Err(_) => {
                    inc(&shared.counters.refused_connections);
                    shared.log.refuse(
                        "client",
                        "connections",
                        &format_args!("{peer}: max_connections reached"),
                    );
                    tokio::spawn(async move {
                        let msg = error_bytes(shared.cfg.protocol, "max connections reached", 503);
                        let _ =
                            tokio::time::timeout(Duration::from_secs(1), s.write_all(&msg)).await;
                    });
                }
            }
        }
    }
}

/// The bytes that tell the application about an error (empty for `conn`: it is closed).
fn error_bytes(proto: Protocol, msg: &str, status: u16) -> Vec<u8> {
    let msg: String = msg
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match proto {
        Protocol::Redis => format!("-ERR repflow proxy: {msg}\r\n").into_bytes(),
        Protocol::Http => {
            let reason = match status {
                400 => "Bad Request",
                413 => "Content Too Large",
                503 => "Service Unavailable",
                _ => "Bad Gateway",
            };
            let body = format!("repflow proxy: {msg}\n");
            format!(
                "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
        }
        Protocol::Conn => Vec::new(),
    }
}

/// One application connection.
async fn serve(sh: &Shared, mut s: TcpStream, peer: SocketAddr) {
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut held = None;
    let r = match sh.cfg.protocol {
        Protocol::Conn => serve_conn(sh, &mut s, &mut buf, &mut held).await,
        _ => serve_requests(sh, &mut s, &mut buf, &mut held).await,
    };
    if let Err(e) = r {
        debug!(%peer, error = %e, "application connection closed");
    }
}

/// Takes `bytes` from the budget, or `None` when it is exhausted (counted).
fn charge(sh: &Shared, bytes: usize) -> Option<OwnedSemaphorePermit> {
    let kib = u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX);
    match sh.budget.clone().try_acquire_many_owned(kib) {
        Ok(p) => Some(p),
        Err(_) => {
            inc(&sh.counters.refused_memory);
            None
        }
    }
}

fn budget_exhausted() -> std::io::Error {
    std::io::Error::other("max_buffered exhausted")
}

/// Reads more bytes within the idle timeout: `Ok(false)` at EOF. A read buffer past
/// [`CONN_BASE`] is charged to the budget (`held`).
async fn fill(
    sh: &Shared,
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
    held: &mut Option<OwnedSemaphorePermit>,
) -> std::io::Result<bool> {
    if buf.capacity() - buf.len() < 4096 {
        let want = (buf.len() + 16 * 1024).max(buf.capacity());
        if want > CONN_BASE {
            let have = held.as_ref().map_or(0, |p| p.num_permits()) * 1024;
            let need = (want - CONN_BASE).saturating_sub(have);
            if need > 0 {
                let Some(p) = charge(sh, need) else {
                    sh.log.refuse(
                        "client",
                        "memory",
                        &"application connection buffer: max_buffered exhausted",
                    );
                    return Err(budget_exhausted());
                };
                match held {
                    Some(h) => h.merge(p),
                    None => *held = Some(p),
                }
            }
        }
        buf.reserve_exact(want - buf.len());
    }
    match tokio::time::timeout(sh.cfg.idle_timeout, s.read_buf(buf)).await {
        Ok(Ok(n)) => Ok(n > 0),
        Ok(Err(e)) => Err(e),
        Err(_) => {
            inc(&sh.counters.timeouts);
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "idle timeout",
            ))
        }
    }
}

async fn write(sh: &Shared, s: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    match tokio::time::timeout(sh.cfg.write_timeout, s.write_all(bytes)).await {
        Ok(r) => r,
        Err(_) => {
            inc(&sh.counters.timeouts);
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "write timeout",
            ))
        }
    }
}

/// Refuses what the application sent: error to it, log line, connection closed.
async fn refuse(
    sh: &Shared,
    s: &mut TcpStream,
    kind: &'static str,
    msg: &str,
    status: u16,
) -> std::io::Result<()> {
    sh.log.refuse("client", kind, &msg);
    let b = error_bytes(sh.cfg.protocol, msg, status);
    write(sh, s, &b).await?;
    let _ = s.shutdown().await;
    Ok(())
}

/// Sends one call and returns the upstream's response bytes, or an error message.
async fn call(sh: &Shared, payload: Vec<u8>) -> Result<Vec<u8>, String> {
    inc(&sh.counters.calls);
    match sh.client.call(sh.cfg.to, payload).await {
        Ok((resp, _report)) => match open_response(&resp) {
            Ok((Status::Ok, _)) => {
                let mut resp = resp;
                resp.remove(0);
                Ok(resp)
            }
            Ok((Status::Refused, m)) => Err(format!(
                "refused by the server sidecar (not executed): {}",
                String::from_utf8_lossy(m)
            )),
            Ok((Status::Unknown, m)) => {
                inc(&sh.counters.outcome_unknown);
                Err(format!("outcome unknown: {}", String::from_utf8_lossy(m)))
            }
            Err(m) => Err(m.to_string()),
        },
        Err(e) => {
            inc(&sh.counters.calls_failed);
            // Copies that failed to connect sent nothing: if every copy did, nothing ran.
            let unsent = matches!(&e, crate::NetError::AllCopiesFailed { failed, .. }
                if failed.iter().all(|f| f.error.starts_with("connect to ")));
            if unsent {
                Err(format!(
                    "call failed, not executed (no copy reached the server sidecar): {e}"
                ))
            } else {
                inc(&sh.counters.outcome_unknown);
                Err(format!("call failed, outcome unknown: {e}"))
            }
        }
    }
}

/// Redis and HTTP: delimit requests, one call per HTTP request or per run of pipelined
/// Redis commands, responses written in order.
async fn serve_requests(
    sh: &Shared,
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
    held: &mut Option<OwnedSemaphorePermit>,
) -> std::io::Result<()> {
    let proto = sh.cfg.protocol;
    let max = sh.cfg.max_request;
    let mut sent_continue = false;
    // When the buffer's bytes were last read, and when the last call's response was
    // written: a request is ready at the later of the two (client_in excludes waiting
    // behind the connection's earlier call).
    let mut read_at = Instant::now();
    let mut done_at = read_at;
    loop {
        // Take the complete requests at the front of the buffer.
        let mut payload: Vec<u8> = Vec::new();
        let mut taken = 0usize;
        let mut count = 0usize;
        let mut close_after = false;
        let mut to_head = false;
        // Set when a request must be refused after the batch before it is answered.
        let mut refusal: Option<(&'static str, String, bool)> = None;
        loop {
            let rest = &buf[taken..];
            if rest.is_empty() {
                break;
            }
            match proto {
                Protocol::Redis => match resp::request(rest, max) {
                    Ok(None) => break,
                    Ok(Some(r)) => {
                        let Some(name) = &r.name else {
                            taken += r.len;
                            continue;
                        };
                        let class = resp::classify(name);
                        if class == resp::Command::Quit {
                            refusal = Some(("quit", String::new(), true));
                            break;
                        }
                        if class == resp::Command::ConnectionState {
                            let name = String::from_utf8_lossy(name).to_ascii_uppercase();
                            inc(&sh.counters.refused_unsupported);
                            refusal = Some((
                                "unsupported",
                                format!(
                                    "command '{name}' changes connection state and is not carried by the proxy"
                                ),
                                false,
                            ));
                            taken += r.len;
                            break;
                        }
                        if count > 0
                            && (count >= sh.cfg.max_pipeline || payload.len() + r.len > max)
                        {
                            break;
                        }
                        if payload.is_empty() {
                            payload.extend_from_slice(&request_prefix(proto));
                        }
                        payload.extend_from_slice(&rest[..r.len]);
                        taken += r.len;
                        count += 1;
                    }
                    Err(e) => {
                        let too_large = matches!(e, resp::RespError::TooLarge(_));
                        inc(if too_large {
                            &sh.counters.refused_too_large
                        } else {
                            &sh.counters.refused_malformed
                        });
                        refusal = Some((
                            if too_large { "too_large" } else { "malformed" },
                            format!("Protocol error: {e}"),
                            true,
                        ));
                        break;
                    }
                },
                Protocol::Http => match http::request(rest, max) {
                    Ok(None) => {
                        // Expect: 100-continue with the body still to come: let it come.
                        if !sent_continue {
                            if let Ok(Some(h)) = http::request_head(rest, max) {
                                if h.expect_continue && rest.len() == h.len {
                                    write(sh, s, b"HTTP/1.1 100 Continue\r\n\r\n").await?;
                                    sent_continue = true;
                                }
                            }
                        }
                        break;
                    }
                    Ok(Some(m)) => {
                        payload.extend_from_slice(&request_prefix(proto));
                        payload.extend_from_slice(&rest[..m.len]);
                        taken += m.len;
                        count = 1;
                        close_after = m.head.close;
                        to_head = m.head.head_or_status == 1;
                        sent_continue = false;
                        break;
                    }
                    Err(e) => {
                        let too_large = matches!(e, http::HttpError::TooLarge(_));
                        inc(if too_large {
                            &sh.counters.refused_too_large
                        } else {
                            &sh.counters.refused_malformed
                        });
                        let status = if too_large { 413 } else { 400 };
                        refusal = Some((
                            if too_large { "too_large" } else { "malformed" },
                            format!("{e} ({status})"),
                            true,
                        ));
                        break;
                    }
                },
                Protocol::Conn => unreachable!("conn is served by serve_conn"),
            }
        }
        if count > 0 {
            debug_assert!(payload.len() > REQUEST_HEAD);
            sh.counters
                .requests
                .fetch_add(count as u64, std::sync::atomic::Ordering::Relaxed);
            let Some(request_charge) = charge(sh, payload.len()) else {
                let msg = "proxy memory budget (max_buffered) exhausted, not executed";
                sh.log.refuse("client", "memory", &msg);
                let one = error_bytes(proto, msg, 503);
                let all = if proto == Protocol::Redis {
                    one.repeat(count)
                } else {
                    one
                };
                write(sh, s, &all).await?;
                let _ = s.shutdown().await;
                return Ok(());
            };
            let started = Instant::now();
            sh.hops
                .client_in
                .record(started.saturating_duration_since(read_at.max(done_at)));
            let outcome = call(sh, payload).await;
            let answered = Instant::now();
            sh.hops.client_call.record(answered - started);
            drop(request_charge);
            let outcome = match outcome {
                Ok(resp) => match charge(sh, resp.len()) {
                    Some(p) => Ok((resp, p)),
                    None => Err("response dropped: proxy memory budget (max_buffered) exhausted; the request was executed".to_string()),
                },
                Err(m) => Err(m),
            };
            match outcome {
                Ok((resp, _response_charge)) => {
                    write(sh, s, &resp).await?;
                    done_at = Instant::now();
                    sh.hops.client_out.record(done_at - answered);
                    // An upstream that closes after its response (`Connection: close`, or a
                    // body delimited by the close) expects the client to see the close too.
                    if proto == Protocol::Http {
                        close_after |= match http::response(&resp, to_head, resp.len()) {
                            Ok(Some(m)) => m.head.close,
                            _ => true,
                        };
                    }
                }
                Err(msg) => {
                    // Every request of the run gets the error, then the connection closes:
                    // what executed is unknown, the application must not assume either way.
                    sh.log.refuse("client", "call", &msg);
                    let one = error_bytes(proto, &msg, 502);
                    let all = if proto == Protocol::Redis {
                        one.repeat(count)
                    } else {
                        one
                    };
                    write(sh, s, &all).await?;
                    let _ = s.shutdown().await;
                    return Ok(());
                }
            }
            if close_after {
                let _ = s.shutdown().await;
                return Ok(());
            }
        }
        if let Some((kind, msg, close)) = refusal {
            if kind == "quit" {
                write(sh, s, b"+OK\r\n").await?;
                let _ = s.shutdown().await;
                return Ok(());
            }
            if close {
                let status = if kind == "too_large" { 413 } else { 400 };
                return refuse(sh, s, kind, &msg, status).await;
            }
            sh.log.refuse("client", kind, &msg);
            write(sh, s, &error_bytes(proto, &msg, 400)).await?;
        }
        buf.drain(..taken);
        // A buffer that grew past the base goes back to it once emptied enough (and its
        // charge to the budget with it).
        if buf.capacity() > CONN_BASE && buf.len() <= CONN_BASE / 2 {
            buf.shrink_to(CONN_BASE);
            *held = None;
        }
        // Nothing complete at the front: read more.
        if taken == 0 {
            if !fill(sh, s, buf, held).await? {
                return Ok(());
            }
            read_at = Instant::now();
        }
    }
}

/// `conn`: the application's bytes until it half-closes are one request; the upstream's
/// bytes until it closes are the response; then the connection closes.
async fn serve_conn(
    sh: &Shared,
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
    held: &mut Option<OwnedSemaphorePermit>,
) -> std::io::Result<()> {
    buf.extend_from_slice(&request_prefix(Protocol::Conn));
    while fill(sh, s, buf, held).await? {
        if buf.len() - REQUEST_HEAD > sh.cfg.max_request {
            inc(&sh.counters.refused_too_large);
            sh.log.refuse(
                "client",
                "too_large",
                &format_args!("connection sent more than {} bytes", sh.cfg.max_request),
            );
            return Ok(());
        }
    }
    inc(&sh.counters.requests);
    match call(sh, std::mem::take(buf)).await {
        Ok(resp) => {
            // The request's buffer is gone; the response is charged while it is written.
            *held = None;
            let Some(_charge) = charge(sh, resp.len()) else {
                sh.log.refuse(
                    "client",
                    "memory",
                    &"response dropped: max_buffered exhausted (executed)",
                );
                return Ok(());
            };
            write(sh, s, &resp).await?;
            let _ = s.shutdown().await;
        }
        Err(msg) => sh.log.refuse("client", "call", &msg),
    }
    Ok(())
}
