//! The sending side: replicate a flow over several TCP connections whose five-tuples differ,
//! return at the first copy that is acknowledged (or answered), cancel the others.

use crate::frame::{flags, Header};
use crate::paths::{Fallback, PortSelector, Selection};
use crate::policy::{DecisionReason, Policy, PolicyConfig, PortStrategy};
use crate::probe::{probe_port, ProbeConfig};
use crate::race::{Race, Step};
use crate::wire::{read_frame, write_counted, FrameReader, ReadError, Unsent};
use crate::{CopyFailure, NetError, Payload};
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::{debug, Instrument};

/// How copies travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnMode {
    /// Every copy on a new TCP connection (as in the papers); losers are reset (RST).
    PerFlow,
    /// Persistent connections per destination and path, frames multiplexed by flow id;
    /// losers' unsent frames are skipped. Short and long flows use separate connections.
    Pooled,
}

/// Settings of a [`Client`].
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Replication policy.
    pub policy: PolicyConfig,
    /// Connection mode.
    pub mode: ConnMode,
    /// Pre-shared key for HMAC tags (must match the server's).
    pub key: Option<Vec<u8>>,
    /// Time allowed to establish one copy's connection.
    pub connect_timeout: Duration,
    /// Time allowed for a whole flow (every copy) before it fails.
    pub flow_timeout: Duration,
    /// Largest response accepted from a server.
    pub max_response: u32,
    /// Path probing (SmartRep port strategy only).
    pub probe: ProbeConfig,
    /// Local address to send from (`None`: chosen by the kernel).
    pub bind_ip: Option<IpAddr>,
    /// Pooled connections idle for this long are replaced instead of reused (keep it below
    /// the server's idle timeout, 30 s by default).
    pub pool_idle: Duration,
    /// SmartRep's table learnt at run time: when set, the client keeps a histogram of the
    /// sizes it sends and re-runs RepNumAssign every `every` flows, replacing the copies rule.
    pub auto_table: Option<AutoTable>,
}

/// Parameters of a copies table re-learnt from the observed flow sizes (SmartRep).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AutoTable {
    /// Byte budget ε (replica bytes ≤ ε × all bytes observed).
    pub eps: f64,
    /// Probability that one path meets a large flow (0.1 in the paper).
    pub p: f64,
    /// Most replicas per flow (equal-cost paths − 1).
    pub max_extra: u8,
    /// Size-bin width in bytes (1000).
    pub unit_bytes: u64,
    /// Re-run RepNumAssign after every this many flows.
    pub every: u64,
}

impl ClientConfig {
    /// Defaults around a policy: per-flow connections, no key, 2 s connect, 30 s per flow.
    pub fn new(policy: PolicyConfig) -> Self {
        ClientConfig {
            policy,
            mode: ConnMode::PerFlow,
            key: None,
            connect_timeout: Duration::from_secs(2),
            flow_timeout: Duration::from_secs(30),
            max_response: 64 << 20,
            probe: ProbeConfig::default(),
            bind_ip: None,
            pool_idle: Duration::from_secs(10),
            auto_table: None,
        }
    }
}

/// Where one copy went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Route {
    /// Destination address of the copy.
    pub dst: SocketAddr,
    /// Source port it was bound to (`None`: kernel-chosen).
    pub src_port: Option<u16>,
}

/// What happened to one flow or call.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FlowReport {
    /// Flow id on the wire.
    pub flow_id: u64,
    /// Payload bytes.
    pub size: u64,
    /// Copies made (original included).
    pub copies: u8,
    /// Index of the copy that completed first.
    pub winner: u8,
    /// Flow completion time: from the call to the first acknowledgement (or response).
    pub fct: Duration,
    /// Bytes written to sockets by all copies (headers included) when the flow completed.
    pub bytes_sent: u64,
    /// Of those, bytes written by copies other than the winner.
    pub bytes_wasted: u64,
    /// Copies still running when the winner completed, then cancelled.
    pub cancelled: u8,
    /// Copies that failed before the winner completed.
    pub failed: Vec<CopyFailure>,
    /// The winner's acknowledgement said the receiver already had the flow (an earlier copy
    /// arrived first there, but its acknowledgement came back later).
    pub winner_was_duplicate: bool,
    /// Why the flow got this many copies.
    pub decision: DecisionReason,
    /// Set when SmartRep ports could not be chosen by path and RepFlow ports were used.
    pub fallback: Option<Fallback>,
    /// Route of each copy.
    pub routes: Vec<Route>,
}

/// Client-side counters (a snapshot).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ClientCounters {
    /// Flows and calls completed.
    pub flows: u64,
    /// Flows and calls that failed.
    pub flows_failed: u64,
    /// Copies started.
    pub copies_sent: u64,
    /// Flows won by a replica (copy index > 0) rather than the original.
    pub copies_won_by_replica: u64,
    /// Copies cancelled after another won.
    pub copies_cancelled: u64,
    /// Copies that failed (refused, reset, timed out, …).
    pub copies_failed: u64,
    /// Frames of losing copies skipped before being written (pooled mode).
    pub frames_skipped: u64,
    /// Bytes written by all copies.
    pub bytes_sent: u64,
    /// Bytes written by losing copies.
    pub bytes_wasted: u64,
    /// Path probes sent (one per source port and TTL).
    pub probes: u64,
    /// Flows whose SmartRep ports fell back to RepFlow ports.
    pub path_fallbacks: u64,
    /// Connections opened.
    pub connections: u64,
    /// Pooled connections abandoned because a write made no progress within the flow
    /// timeout (a peer that stopped reading); the next flow opens a new one.
    pub pool_stalls: u64,
}

#[derive(Debug, Default)]
struct AtomicCounters {
    flows: AtomicU64,
    flows_failed: AtomicU64,
    copies_sent: AtomicU64,
    copies_won_by_replica: AtomicU64,
    copies_cancelled: AtomicU64,
    copies_failed: AtomicU64,
    frames_skipped: AtomicU64,
    bytes_sent: AtomicU64,
    bytes_wasted: AtomicU64,
    probes: AtomicU64,
    path_fallbacks: AtomicU64,
    connections: AtomicU64,
    pool_stalls: AtomicU64,
}

fn inc(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

struct Reply {
    dup: bool,
    body: Vec<u8>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct PoolKey {
    dst: SocketAddr,
    src_port: Option<u16>,
    long: bool,
}

struct OutFrame {
    head: Vec<u8>,
    payload: Payload,
    cancel: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
}

type Pending = Arc<Mutex<HashMap<(u64, u8), oneshot::Sender<Result<Reply, String>>>>>;

/// Frames queued at most per pooled connection; further senders wait (within their flow
/// timeout) for room.
const POOL_QUEUE: usize = 1024;

struct PooledConn {
    tx: mpsc::Sender<OutFrame>,
    /// When a frame was last queued (ms since the client's epoch).
    last_used: AtomicU64,
    pending: Pending,
    alive: Arc<AtomicBool>,
    tasks: [JoinHandle<()>; 2],
}

impl Drop for PooledConn {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

struct Inner {
    cfg: ClientConfig,
    policy: Mutex<Policy>,
    histogram: Mutex<Option<crate::policy::SizeHistogram>>,
    selector: Mutex<PortSelector>,
    busy: Mutex<HashMap<SocketAddr, HashSet<u16>>>,
    probing: tokio::sync::Mutex<()>,
    pools: Mutex<HashMap<PoolKey, Arc<PooledConn>>>,
    /// Serializes opening pooled connections (lookups do not wait for it).
    connecting: tokio::sync::Mutex<()>,
    counters: Arc<AtomicCounters>,
    /// Secret key of the flow-id function (see [`FlowIds`]).
    ids: FlowIds,
    next_seq: AtomicU64,
    epoch: Instant,
}

/// A RepFlow/SmartRep client. Cheap to clone (shared state); usable from many tasks.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("mode", &self.inner.cfg.mode)
            .field("policy", &self.inner.cfg.policy)
            .finish()
    }
}

/// Flow ids that another client cannot guess: SipHash-1-3 (std's `RandomState`, whose
/// 128-bit key comes from the operating system's random source) of a per-client counter. A
/// counter behind a random prefix, as before, let anyone who saw one id predict the next.
struct FlowIds(std::collections::hash_map::RandomState);

impl FlowIds {
    fn new() -> Self {
        FlowIds(std::collections::hash_map::RandomState::new())
    }

    fn id(&self, seq: u64) -> u64 {
        use std::hash::BuildHasher;
        self.0.hash_one(seq)
    }
}

struct BusyGuard<'a> {
    inner: &'a Inner,
    dst: SocketAddr,
    ports: Vec<u16>,
}

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        if self.ports.is_empty() {
            return;
        }
        let mut b = self.inner.busy.lock().expect("busy lock");
        if let Some(s) = b.get_mut(&self.dst) {
            for p in &self.ports {
                s.remove(p);
            }
        }
    }
}

struct PendingGuard {
    pending: Pending,
    key: (u64, u8),
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        self.pending.lock().expect("pending lock").remove(&self.key);
    }
}

impl Client {
    /// A client with the given settings. Needs a tokio runtime when used, not to be built.
    pub fn new(cfg: ClientConfig) -> Self {
        let (lo, hi) = cfg.probe.ports;
        Client {
            inner: Arc::new(Inner {
                policy: Mutex::new(Policy::new(cfg.policy.clone())),
                histogram: Mutex::new(cfg.auto_table.map(|a| {
                    crate::policy::SizeHistogram::new(a.unit_bytes, cfg.policy.threshold)
                })),
                selector: Mutex::new(PortSelector::new(lo, hi)),
                busy: Mutex::new(HashMap::new()),
                probing: tokio::sync::Mutex::new(()),
                pools: Mutex::new(HashMap::new()),
                connecting: tokio::sync::Mutex::new(()),
                counters: Arc::new(AtomicCounters::default()),
                ids: FlowIds::new(),
                next_seq: AtomicU64::new(0),
                epoch: Instant::now(),
                cfg,
            }),
        }
    }

    /// The settings.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.cfg
    }

    /// Replaces the copies rule (e.g. a new SmartRep table).
    pub fn set_copies(&self, rule: crate::policy::CopiesRule) {
        self.inner
            .policy
            .lock()
            .expect("policy lock")
            .set_copies(rule);
    }

    /// A snapshot of the counters.
    pub fn counters(&self) -> ClientCounters {
        let c = &self.inner.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ClientCounters {
            flows: l(&c.flows),
            flows_failed: l(&c.flows_failed),
            copies_sent: l(&c.copies_sent),
            copies_won_by_replica: l(&c.copies_won_by_replica),
            copies_cancelled: l(&c.copies_cancelled),
            copies_failed: l(&c.copies_failed),
            frames_skipped: l(&c.frames_skipped),
            bytes_sent: l(&c.bytes_sent),
            bytes_wasted: l(&c.bytes_wasted),
            probes: l(&c.probes),
            path_fallbacks: l(&c.path_fallbacks),
            connections: l(&c.connections),
            pool_stalls: l(&c.pool_stalls),
        }
    }

    /// Sends a one-way flow; returns when the first copy is acknowledged by the receiver.
    ///
    /// Cancel-safety: dropping the future cancels every copy (connections are reset, queued
    /// pooled frames skipped); the receiver may or may not have got the flow, but never
    /// delivers it twice.
    pub async fn send(
        &self,
        dst: SocketAddr,
        data: impl Into<Payload>,
    ) -> Result<FlowReport, NetError> {
        self.transfer(dst, data.into(), false).await.map(|(r, _)| r)
    }

    /// Sends a request and returns the first response. The server handles the request once
    /// however many copies reach it.
    ///
    /// Cancel-safety: as for [`Client::send`]; the request may have been handled.
    pub async fn call(
        &self,
        dst: SocketAddr,
        data: impl Into<Payload>,
    ) -> Result<(Vec<u8>, FlowReport), NetError> {
        self.transfer(dst, data.into(), true)
            .await
            .map(|(r, b)| (b, r))
    }

    /// Probes the paths to `dst` ahead of time, until `copies` pairwise different paths are
    /// known or the probe budget is spent, and returns how many are known. SmartRep keeps
    /// what it learns per (destination, source port), so flows sent afterwards choose their
    /// ports without waiting for probes — as the SmartRep paper's probe database does. Does
    /// nothing for the `tcp` and `repflow` schemes (they do not choose ports by path).
    pub async fn warm_paths(&self, dst: SocketAddr, copies: u8) -> usize {
        if self.inner.cfg.policy.ports == PortStrategy::DstPortPlus {
            return 0;
        }
        self.ensure_probed(dst, usize::from(copies.max(2))).await;
        self.inner
            .selector
            .lock()
            .expect("selector lock")
            .distinct_paths(dst)
    }

    /// Feeds the size histogram and re-learns the copies table when due.
    fn observe(&self, size: u64) {
        let Some(a) = self.inner.cfg.auto_table else {
            return;
        };
        let table = {
            let mut h = self.inner.histogram.lock().expect("histogram lock");
            let Some(h) = h.as_mut() else { return };
            h.observe(size);
            (h.flows % a.every.max(1) == 0).then(|| h.table(a.eps, a.p, a.max_extra))
        };
        if let Some(t) = table {
            debug!(extra = ?t.extra, "re-learnt the SmartRep copies table");
            self.set_copies(crate::policy::CopiesRule::Table(t));
        }
    }

    fn now(&self) -> Duration {
        self.inner.epoch.elapsed()
    }

    async fn ensure_probed(&self, dst: SocketAddr, want: usize) {
        let inner = &self.inner;
        let _g = inner.probing.lock().await;
        let pcfg = inner.cfg.probe.clone();
        let src_ip = inner.cfg.bind_ip.unwrap_or(if dst.is_ipv4() {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        } else {
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        });
        loop {
            let next = inner
                .selector
                .lock()
                .expect("selector lock")
                .next_probe(dst, want);
            let Some(port) = next else { break };
            let cfg = pcfg.clone();
            let src = SocketAddr::new(src_ip, port);
            let outcome =
                match tokio::task::spawn_blocking(move || probe_port(&cfg, src, dst)).await {
                    Ok(o) => o,
                    Err(_) => crate::paths::ProbeOutcome::NoAnswer,
                };
            inc(&inner.counters.probes, pcfg.ttls.len() as u64);
            debug!(%dst, port, ?outcome, "path probe");
            inner
                .selector
                .lock()
                .expect("selector lock")
                .record(dst, port, outcome);
            tokio::time::sleep(pcfg.pace).await;
        }
    }

    /// Routes for `n` copies, and the ports to release afterwards (per-flow SmartRep).
    async fn plan(&self, dst: SocketAddr, n: u8) -> (Vec<Route>, Option<Fallback>, Vec<u16>) {
        let plus = |n: u8| -> Vec<Route> {
            (0..n)
                .map(|i| Route {
                    dst: SocketAddr::new(dst.ip(), dst.port().wrapping_add(u16::from(i))),
                    src_port: None,
                })
                .collect()
        };
        if n <= 1 || self.inner.cfg.policy.ports == PortStrategy::DstPortPlus {
            return (plus(n), None, Vec::new());
        }
        self.ensure_probed(dst, usize::from(n)).await;
        let pooled = self.inner.cfg.mode == ConnMode::Pooled;
        let mut busy = self.inner.busy.lock().expect("busy lock");
        let set = busy.entry(dst).or_default();
        let empty = HashSet::new();
        let sel = self.inner.selector.lock().expect("selector lock").select(
            dst,
            usize::from(n),
            if pooled { &empty } else { set },
        );
        match sel {
            Selection::Ports(ports) => {
                let routes = ports
                    .iter()
                    .map(|&p| Route {
                        dst,
                        src_port: Some(p),
                    })
                    .collect();
                let held = if pooled {
                    Vec::new()
                } else {
                    set.extend(ports.iter().copied());
                    ports
                };
                (routes, None, held)
            }
            Selection::Fallback(f) => {
                inc(&self.inner.counters.path_fallbacks, 1);
                (plus(n), Some(f), Vec::new())
            }
        }
    }

    /// Opens a connection (for the pool) and waits for its handshake.
    async fn connect(&self, route: Route) -> Result<TcpStream, String> {
        self.connect_send(route, &[], &[], &AtomicU64::new(0)).await
    }

    /// Opens a copy's connection and writes `head` and `payload` (may be empty). The socket
    /// is connected without blocking and the frame is written at once, before the socket is
    /// handed to tokio: when the path is short enough for the handshake to finish inside
    /// `connect` (loopback and same-host paths), the copy is on its way without a readiness
    /// round trip through the event loop, so the next copy starts sooner. Otherwise (the
    /// `send` finds the connection still opening) it waits up to `connect_timeout` for the
    /// handshake, then writes.
    async fn connect_send(
        &self,
        route: Route,
        head: &[u8],
        payload: &[u8],
        written: &AtomicU64,
    ) -> Result<TcpStream, String> {
        use nix::libc;
        use socket2::{Domain, Protocol, Socket, Type};
        let cfg = &self.inner.cfg;
        let domain = if route.dst.is_ipv4() {
            Domain::IPV4
        } else {
            Domain::IPV6
        };
        let s = Socket::new(domain, Type::STREAM.nonblocking(), Some(Protocol::TCP))
            .map_err(|e| format!("socket: {e}"))?;
        let _ = s.set_nodelay(true);
        // Closing resets the connection: a loser stops at once, and no TIME_WAIT is left
        // on the client, so probed source ports can be reused.
        let _ = s.set_linger(Some(Duration::ZERO));
        if route.src_port.is_some() || cfg.bind_ip.is_some() {
            let ip = cfg.bind_ip.unwrap_or(if route.dst.is_ipv4() {
                IpAddr::V4(Ipv4Addr::UNSPECIFIED)
            } else {
                IpAddr::V6(Ipv6Addr::UNSPECIFIED)
            });
            s.set_reuse_address(true)
                .map_err(|e| format!("reuseaddr: {e}"))?;
            s.bind(&SocketAddr::new(ip, route.src_port.unwrap_or(0)).into())
                .map_err(|e| format!("bind: {e}"))?;
        }
        match s.connect(&route.dst.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(format!("connect to {}: {e}", route.dst)),
        }
        let mut rest = Unsent::new(head, payload);
        while !rest.is_empty() {
            match s.send_vectored_with_flags(&rest.slices(), libc::MSG_NOSIGNAL) {
                Ok(0) => return Err("sending: wrote zero bytes".into()),
                Ok(n) => {
                    written.fetch_add(n as u64, Ordering::Relaxed);
                    rest.advance(n);
                }
                // Still connecting, or the send buffer is full: tokio takes over.
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if rest.head.len() == head.len() => {
                    return Err(format!("connect to {}: {e}", route.dst))
                }
                Err(e) => return Err(format!("sending: {e}")),
            }
        }
        let nothing_sent = rest.head.len() == head.len() && rest.body.len() == payload.len();
        let mut stream = TcpStream::from_std(std::net::TcpStream::from(s))
            .map_err(|e| format!("socket: {e}"))?;
        if nothing_sent {
            // Nothing went out: the handshake is still under way.
            match tokio::time::timeout(cfg.connect_timeout, stream.writable()).await {
                Err(_) => return Err(format!("connect to {} timed out", route.dst)),
                Ok(Err(e)) => return Err(format!("connect to {}: {e}", route.dst)),
                Ok(Ok(())) => {}
            }
            if let Ok(Some(e)) | Err(e) = stream.take_error() {
                return Err(format!("connect to {}: {e}", route.dst));
            }
        }
        inc(&self.inner.counters.connections, 1);
        if !rest.is_empty() {
            write_counted(&mut stream, rest.head, rest.body, written)
                .await
                .map_err(|e| format!("sending: {e}"))?;
        }
        Ok(stream)
    }

    /// Reads one reply frame; `wait` bounds each read (`None`: the caller bounds the flow).
    async fn read_reply(
        &self,
        rd: &mut FrameReader<impl tokio::io::AsyncRead + Unpin>,
        wait: Option<Duration>,
    ) -> Result<crate::wire::ReadFrame, String> {
        let cfg = &self.inner.cfg;
        let f = read_frame(rd, cfg.key.as_deref(), cfg.max_response, wait, wait, None)
            .await
            .map_err(|e| match e {
                ReadError::Eof => "connection closed before the reply".to_string(),
                e => format!("reading reply: {e}"),
            })?;
        if f.header.flags & flags::REPLY == 0 {
            return Err("frame without the reply flag".into());
        }
        Ok(f)
    }

    async fn copy_per_flow(
        &self,
        route: Route,
        head: &[u8],
        payload: &[u8],
        written: &AtomicU64,
        flow_id: u64,
    ) -> Result<Reply, String> {
        let mut stream = self.connect_send(route, head, payload, written).await?;
        // No timer of its own: `transfer` bounds the whole flow by `flow_timeout`.
        let f = self
            .read_reply(&mut FrameReader::new(&mut stream, 1024), None)
            .await?;
        if f.header.flow_id != flow_id {
            return Err(format!("reply for flow {}", f.header.flow_id));
        }
        // No shutdown: dropping the stream resets it (linger 0) whatever was sent before, so
        // a FIN first would only cost a syscall and a segment for the server to process.
        Ok(Reply {
            dup: f.header.flags & flags::DUP != 0,
            body: f.payload,
        })
    }

    async fn pooled_conn(&self, key: PoolKey) -> Result<Arc<PooledConn>, String> {
        let now_ms = self.now().as_millis() as u64;
        let idle_ms = self.inner.cfg.pool_idle.as_millis() as u64;
        // A connection idle for long may be closed by the server's idle timeout at any moment;
        // replace it rather than race that close.
        let live = |inner: &Inner| {
            let pools = inner.pools.lock().expect("pools lock");
            pools
                .get(&key)
                .filter(|c| {
                    c.alive.load(Ordering::Relaxed)
                        && now_ms.saturating_sub(c.last_used.load(Ordering::Relaxed)) < idle_ms
                })
                .cloned()
        };
        if let Some(c) = live(&self.inner) {
            return Ok(c);
        }
        let _connecting = self.inner.connecting.lock().await;
        if let Some(c) = live(&self.inner) {
            return Ok(c);
        }
        let stream = self
            .connect(Route {
                dst: key.dst,
                src_port: key.src_port,
            })
            .await?;
        // Persistent connections close normally.
        let _ = socket2::SockRef::from(&stream).set_linger(None);
        let (rd, wr) = stream.into_split();
        let mut rd = FrameReader::new(rd, 16 * 1024);
        let mut wr = tokio::io::BufWriter::with_capacity(16 * 1024, wr);
        let (tx, mut rx) = mpsc::channel::<OutFrame>(POOL_QUEUE);
        let stall = self.inner.cfg.flow_timeout;
        let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
        let alive = Arc::new(AtomicBool::new(true));
        let fail_all = |pending: &Pending, why: &str| {
            for (_, tx) in pending.lock().expect("pending lock").drain() {
                let _ = tx.send(Err(why.to_string()));
            }
        };
        let counters = self.inner.counters.clone();
        let (p2, a2) = (pending.clone(), alive.clone());
        let writer = tokio::spawn(async move {
            // Frames queued together go out in one write; a frame whose flow already
            // completed on another copy is skipped.
            while let Some(mut f) = rx.recv().await {
                let mut res = Ok(());
                loop {
                    if f.cancel.load(Ordering::Relaxed) {
                        inc(&counters.frames_skipped, 1);
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
                    fail_all(&p2, &format!("pooled connection write: {e}"));
                    return;
                }
            }
        });
        let me = self.clone();
        let (p3, a3) = (pending.clone(), alive.clone());
        let reader = tokio::spawn(async move {
            loop {
                // No read timeout: the server closes idle connections, and `transfer` bounds
                // each flow.
                match me.read_reply(&mut rd, None).await {
                    Ok(f) => {
                        let k = (f.header.flow_id, f.header.copy);
                        let tx = p3.lock().expect("pending lock").remove(&k);
                        if let Some(tx) = tx {
                            let _ = tx.send(Ok(Reply {
                                dup: f.header.flags & flags::DUP != 0,
                                body: f.payload,
                            }));
                        }
                    }
                    Err(e) => {
                        a3.store(false, Ordering::Relaxed);
                        fail_all(&p3, &format!("pooled connection: {e}"));
                        return;
                    }
                }
            }
        });
        let c = Arc::new(PooledConn {
            tx,
            last_used: AtomicU64::new(now_ms),
            pending,
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

    async fn copy_pooled(
        &self,
        key: PoolKey,
        frame: OutFrame,
        flow_id: u64,
        copy: u8,
    ) -> Result<Reply, String> {
        let conn = self.pooled_conn(key).await?;
        conn.last_used
            .fetch_max(self.now().as_millis() as u64, Ordering::Relaxed);
        let (otx, orx) = oneshot::channel();
        conn.pending
            .lock()
            .expect("pending lock")
            .insert((flow_id, copy), otx);
        let _guard = PendingGuard {
            pending: conn.pending.clone(),
            key: (flow_id, copy),
        };
        conn.tx
            .send(frame)
            .await
            .map_err(|_| "pooled connection closed".to_string())?;
        match orx.await {
            Ok(r) => r,
            Err(_) => Err("pooled connection closed".into()),
        }
    }

    async fn transfer(
        &self,
        dst: SocketAddr,
        payload: Payload,
        call: bool,
    ) -> Result<(FlowReport, Vec<u8>), NetError> {
        let start = Instant::now();
        let size = payload.len() as u64;
        if u32::try_from(size).is_err() {
            return Err(NetError::TooLarge(size));
        }
        let inner = &self.inner;
        let flow_id = inner.ids.id(inner.next_seq.fetch_add(1, Ordering::Relaxed));
        let span = tracing::debug_span!("flow", flow_id, size, call);
        async move {
            self.observe(size);
            let decision = inner
                .policy
                .lock()
                .expect("policy lock")
                .decide(size, self.now());
            let (routes, fallback, held) = self.plan(dst, decision.copies).await;
            let _busy = BusyGuard {
                inner,
                dst,
                ports: held,
            };
            let n = routes.len() as u8;
            let long = size > inner.cfg.policy.threshold;
            let key = inner.cfg.key.as_deref();
            let written: Vec<Arc<AtomicU64>> =
                (0..n).map(|_| Arc::new(AtomicU64::new(0))).collect();
            let cancel = Arc::new(AtomicBool::new(false));
            let mut futs = FuturesUnordered::new();
            // Every copy carries the same timestamp and digest (the receiver checks both).
            let timestamp_ms = crate::frame::now_ms();
            for (i, r) in routes.iter().enumerate() {
                let head = Header {
                    flags: if call { flags::CALL } else { 0 },
                    copy: i as u8,
                    copies: n,
                    flow_id,
                    length: 0,
                    timestamp_ms,
                    digest: 0,
                }
                .encode(key, payload.as_slice());
                let w = written[i].clone();
                let (payload, cancel, route) = (payload.clone(), cancel.clone(), *r);
                futs.push(async move {
                    let res = match inner.cfg.mode {
                        ConnMode::PerFlow => {
                            self.copy_per_flow(route, &head, payload.as_slice(), &w, flow_id)
                                .await
                        }
                        ConnMode::Pooled => {
                            let pk = PoolKey {
                                dst: route.dst,
                                src_port: route.src_port,
                                long,
                            };
                            let frame = OutFrame {
                                head,
                                payload,
                                cancel,
                                written: w,
                            };
                            self.copy_pooled(pk, frame, flow_id, i as u8).await
                        }
                    };
                    (i as u8, res)
                });
            }
            inc(&inner.counters.copies_sent, u64::from(n));
            // The tokio layer only feeds the race (crate::race) with the copies' results.
            let mut race = Race::new(n, start);
            let outcome = tokio::time::timeout(inner.cfg.flow_timeout, async {
                while let Some((i, r)) = futs.next().await {
                    match r {
                        Ok(reply) => {
                            if let Step::Won { copy, fct } = race.on_reply(i, Instant::now()) {
                                return Some((copy, fct, reply));
                            }
                        }
                        Err(e) => {
                            debug!(copy = i, error = %e, "copy failed");
                            if race.on_failure(i, e) == Step::AllFailed {
                                return None;
                            }
                        }
                    }
                }
                None
            })
            .await;
            cancel.store(true, Ordering::Relaxed);
            let still_running = futs.len() as u8;
            drop(futs);
            let c = &inner.counters;
            let snapshot = |w: &[Arc<AtomicU64>]| -> Vec<u64> {
                w.iter().map(|x| x.load(Ordering::Relaxed)).collect()
            };
            let (winner, fct, reply) = match outcome {
                Ok(Some(x)) => x,
                other => {
                    if other.is_err() {
                        race.on_timeout(inner.cfg.flow_timeout);
                    }
                    let acct = race.settle(&snapshot(&written), 0, still_running);
                    let failed = race.take_failures();
                    inc(&c.copies_failed, failed.len() as u64);
                    inc(&c.flows_failed, 1);
                    inc(&c.bytes_sent, acct.total);
                    inc(&c.bytes_wasted, acct.wasted);
                    inc(&c.copies_cancelled, u64::from(acct.cancelled));
                    return Err(NetError::AllCopiesFailed { flow_id, failed });
                }
            };
            let frame_len = Header {
                flags: u8::from(key.is_some()),
                copy: 0,
                copies: 1,
                flow_id,
                length: 0,
                timestamp_ms: 0,
                digest: 0,
            }
            .wire_len() as u64
                + size;
            let acct = race.settle(&snapshot(&written), frame_len, still_running);
            let failed = race.take_failures();
            inc(&c.copies_failed, failed.len() as u64);
            let (total, wasted) = (acct.total, acct.wasted);
            inc(&c.flows, 1);
            inc(&c.bytes_sent, total);
            inc(&c.bytes_wasted, wasted);
            inc(&c.copies_cancelled, u64::from(acct.cancelled));
            if winner > 0 {
                inc(&c.copies_won_by_replica, 1);
            }
            inner
                .policy
                .lock()
                .expect("policy lock")
                .record(self.now(), total, wasted);
            Ok((
                FlowReport {
                    flow_id,
                    size,
                    copies: n,
                    winner,
                    fct,
                    bytes_sent: total,
                    bytes_wasted: wasted,
                    cancelled: still_running,
                    failed,
                    winner_was_duplicate: reply.dup,
                    decision: decision.reason,
                    fallback,
                    routes,
                },
                reply.body,
            ))
        }
        .instrument(span)
        .await
    }
}
