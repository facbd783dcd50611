//! The receiving side: listens on one or more ports, accepts every copy, hands each flow or
//! request to the application exactly once, acknowledges or answers every copy, and discards
//! late duplicates.

use crate::dedup::{Dedup, Seen};
use crate::frame::{flags, Header, HEADER_LEN};
use crate::wire::{read_frame, write_all, FrameReader, ReadError};
use crate::NetError;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinHandle;
use tracing::{debug, warn, Instrument};

/// Limits and settings of a [`Server`].
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Addresses to listen on (RepFlow: consecutive ports, so copy `i` can use port + `i`).
    pub addrs: Vec<SocketAddr>,
    /// Pre-shared key: when set, every frame must carry a valid HMAC tag.
    pub key: Option<Vec<u8>>,
    /// Largest accepted payload (bytes).
    pub max_flow_size: u32,
    /// Largest number of connections served at once; more are closed at once (reset).
    pub max_connections: usize,
    /// Largest number of connections one source address may hold at once (a share of
    /// `max_connections`, so that one host cannot take every slot); more are reset.
    pub max_connections_per_source: usize,
    /// Time allowed for a new connection's first frame header to arrive.
    pub header_timeout: Duration,
    /// Time allowed between two reads (within a frame, or between frames on a pooled
    /// connection) before the connection is closed.
    pub idle_timeout: Duration,
    /// Time allowed for the rest of a frame (tag and payload) once its header has arrived,
    /// however steadily it trickles in; the connection is closed when it runs out.
    pub frame_timeout: Duration,
    /// Time allowed for every write (acknowledgements, responses) to be accepted by the
    /// socket; a peer that does not read has its connection closed when it runs out.
    pub write_timeout: Duration,
    /// With a key: frames whose timestamp differs from this host's clock by more than this
    /// are refused as possible replays (the duplicate filter then remembers ids at least
    /// twice as long, so that a replay inside the window is always recognised).
    pub replay_window: Duration,
    /// Flow ids remembered at most by the duplicate filter.
    pub dedup_capacity: usize,
    /// How long a flow id is remembered (unless all its copies arrived earlier).
    pub dedup_ttl: Duration,
    /// Flows delivered but not yet taken by the application before readers wait.
    pub queue: usize,
    /// Listen on Multipath TCP sockets (`IPPROTO_MPTCP`); they also accept plain TCP clients.
    pub mptcp: bool,
}

impl ServerConfig {
    /// Listens on `addr`'s port and the `ports − 1` following ones, with default limits.
    pub fn ports(addr: SocketAddr, ports: u16) -> Self {
        let addrs = (0..ports.max(1))
            .map(|i| SocketAddr::new(addr.ip(), addr.port().wrapping_add(i)))
            .collect();
        ServerConfig {
            addrs,
            key: None,
            max_flow_size: 64 << 20,
            max_connections: 4096,
            max_connections_per_source: 1024,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            frame_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(10),
            replay_window: Duration::from_secs(30),
            dedup_capacity: 1 << 18,
            dedup_ttl: Duration::from_secs(60),
            queue: 1024,
            mptcp: false,
        }
    }
}

/// Whether an [`Incoming`] is a one-way flow or a request that wants a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncomingKind {
    /// A one-way flow (already acknowledged to the sender).
    Flow,
    /// A request; answer it with [`Incoming::respond`].
    Call,
}

/// A flow or request, delivered once however many copies arrive.
#[derive(Debug)]
pub struct Incoming {
    /// Flow or call.
    pub kind: IncomingKind,
    /// The sender's flow id.
    pub flow_id: u64,
    /// Address of the connection that delivered the first complete copy.
    pub peer: SocketAddr,
    /// Which copy arrived first.
    pub copy: u8,
    /// The payload.
    pub data: Vec<u8>,
    responder: Option<Responder>,
}

impl Incoming {
    /// Answers a call: the response goes back on every connection that carried a copy of the
    /// request (and to copies that arrive later, while the flow id is remembered). Does
    /// nothing for a flow. Dropping a call's `Incoming` without responding sends an empty
    /// response.
    pub fn respond(mut self, data: Vec<u8>) {
        if let Some(r) = self.responder.take() {
            r.respond(data);
        }
    }

    /// Takes the responder out, to answer later or from elsewhere.
    pub fn take_responder(&mut self) -> Option<Responder> {
        self.responder.take()
    }
}

/// The handle that answers one call (see [`Incoming::respond`]).
#[derive(Debug)]
pub struct Responder {
    key: DedupKey,
    shared: Arc<Shared>,
    done: bool,
}

impl Responder {
    /// Sends the response. Never blocks; a connection whose send queue is full misses it.
    pub fn respond(mut self, data: Vec<u8>) {
        self.finish(data);
    }

    fn finish(&mut self, data: Vec<u8>) {
        if self.done {
            return;
        }
        self.done = true;
        let body: Arc<[u8]> = data.into();
        let waiters = {
            let mut d = self.shared.dedup.lock().expect("dedup lock");
            d.complete(self.key, body.clone(), Instant::now())
        };
        for (tx, h) in waiters {
            let head = Header {
                flags: flags::REPLY,
                ..h
            }
            .encode(self.shared.cfg.key.as_deref(), &body);
            if tx
                .try_send(Out {
                    head,
                    body: Some(body.clone()),
                })
                .is_err()
            {
                // The connection's response queue is full (or it closed): counted.
                inc(&self.shared.counters.responses_dropped, 1);
                debug!(flow_id = h.flow_id, copy = h.copy, "response not queued");
            }
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.finish(Vec::new());
    }
}

/// Server-side counters (a snapshot).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ServerCounters {
    /// Connections accepted.
    pub connections: u64,
    /// Connections refused because of `max_connections`.
    pub connections_rejected: u64,
    /// Frames (copies) received completely.
    pub copies_received: u64,
    /// Flows delivered to the application.
    pub flows_delivered: u64,
    /// Calls delivered to the application.
    pub calls_delivered: u64,
    /// Late duplicate copies discarded.
    pub duplicates: u64,
    /// Payload bytes received (all copies).
    pub bytes_received: u64,
    /// Payload bytes of discarded duplicates.
    pub duplicate_bytes: u64,
    /// Connections closed for a malformed or oversized frame.
    pub malformed: u64,
    /// Connections closed for a missing or wrong authentication tag.
    pub auth_failures: u64,
    /// Connections closed by the header or idle timeout.
    pub timeouts: u64,
    /// Connections refused because their source address held its share
    /// (`max_connections_per_source`).
    pub connections_rejected_source: u64,
    /// Connections closed because a frame did not complete within `frame_timeout`.
    pub frame_timeouts: u64,
    /// Connections closed because a write was not accepted within `write_timeout`.
    pub write_timeouts: u64,
    /// Call responses not queued for a connection (its queue of 256 was full or it closed).
    pub responses_dropped: u64,
    /// Frames refused because their payload does not match their digest, or differs from an
    /// earlier copy of the same flow (connection closed).
    pub digest_mismatches: u64,
    /// Frames refused as possible replays (with a key): timestamp outside the replay window,
    /// or not newer than an id the full duplicate filter had to forget (connection closed).
    pub replays_refused: u64,
    /// Bytes currently held in receive buffers of frames not yet complete (all connections).
    pub buffered_bytes: u64,
    /// Highest value `buffered_bytes` reached.
    pub buffered_peak: u64,
    /// Flow ids forgotten by the duplicate filter before all their copies arrived.
    pub dedup_evictions: u64,
    /// Flow ids forgotten because the duplicate filter was full (before their TTL).
    pub dedup_capacity_evictions: u64,
    /// Calls forgotten by the duplicate filter before the application answered them.
    pub calls_expired: u64,
    /// Frames whose copy index had already arrived for their flow (repeats, not delivered).
    pub repeated_copies: u64,
    /// Flow ids the duplicate filter remembers now.
    pub dedup_entries: u64,
}

#[derive(Debug, Default)]
struct AtomicCounters {
    connections: AtomicU64,
    connections_rejected: AtomicU64,
    copies_received: AtomicU64,
    flows_delivered: AtomicU64,
    calls_delivered: AtomicU64,
    duplicates: AtomicU64,
    bytes_received: AtomicU64,
    duplicate_bytes: AtomicU64,
    malformed: AtomicU64,
    auth_failures: AtomicU64,
    timeouts: AtomicU64,
    connections_rejected_source: AtomicU64,
    frame_timeouts: AtomicU64,
    write_timeouts: AtomicU64,
    responses_dropped: AtomicU64,
    digest_mismatches: AtomicU64,
    replays_refused: AtomicU64,
    buffer: Arc<crate::wire::BufferGauge>,
}

fn inc(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

type DedupKey = (IpAddr, u64);

/// A frame queued for a connection's writer.
#[derive(Debug)]
struct Out {
    head: Vec<u8>,
    body: Option<Arc<[u8]>>,
}

type Waiter = (mpsc::Sender<Out>, Header);

#[derive(Debug)]
struct Shared {
    cfg: ServerConfig,
    counters: AtomicCounters,
    dedup: Mutex<Dedup<DedupKey, Waiter>>,
    /// Connections held per source address (entries removed at zero).
    per_source: Mutex<HashMap<IpAddr, usize>>,
}

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
            dedup: Mutex::new(Dedup::new(
                cfg.dedup_capacity,
                if cfg.key.is_some() {
                    cfg.dedup_ttl.max(2 * cfg.replay_window)
                } else {
                    cfg.dedup_ttl
                },
            )),
            per_source: Mutex::new(HashMap::new()),
            counters: AtomicCounters::default(),
            cfg,
        });
        let sem = Arc::new(Semaphore::new(shared.cfg.max_connections.max(1)));
        let (stop_tx, stop_rx) = watch::channel(false);
        let tasks = listeners
            .into_iter()
            .map(|l| {
                let (shared, sem, tx, stop) =
                    (shared.clone(), sem.clone(), tx.clone(), stop_rx.clone());
                tokio::spawn(accept_loop(l, shared, sem, tx, stop))
            })
            .collect();
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
        self.rx.recv().await
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

impl Shared {
    fn counters(&self) -> ServerCounters {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (d, dedup_entries) = {
            let g = self.dedup.lock().expect("dedup lock");
            (g.stats(), g.len() as u64)
        };
        ServerCounters {
            connections: l(&c.connections),
            connections_rejected: l(&c.connections_rejected),
            copies_received: l(&c.copies_received),
            flows_delivered: l(&c.flows_delivered),
            calls_delivered: l(&c.calls_delivered),
            duplicates: l(&c.duplicates),
            bytes_received: l(&c.bytes_received),
            duplicate_bytes: l(&c.duplicate_bytes),
            malformed: l(&c.malformed),
            auth_failures: l(&c.auth_failures),
            timeouts: l(&c.timeouts),
            connections_rejected_source: l(&c.connections_rejected_source),
            frame_timeouts: l(&c.frame_timeouts),
            write_timeouts: l(&c.write_timeouts),
            responses_dropped: l(&c.responses_dropped),
            digest_mismatches: l(&c.digest_mismatches) + d.conflicts,
            replays_refused: l(&c.replays_refused),
            buffered_bytes: c.buffer.current(),
            buffered_peak: c.buffer.peak(),
            dedup_evictions: d.evictions,
            dedup_capacity_evictions: d.capacity_evictions,
            calls_expired: d.calls_expired,
            repeated_copies: d.repeats,
            dedup_entries,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Whether a socket error means the protocol itself is unavailable (no MPTCP in the kernel,
/// or `net.mptcp.enabled` = 0).
fn is_protocol_error(e: &std::io::Error) -> bool {
    use nix::libc;
    matches!(
        e.raw_os_error(),
        Some(libc::EPROTONOSUPPORT | libc::ENOPROTOOPT | libc::EAFNOSUPPORT)
    )
}

fn bind_listener(addr: SocketAddr, mptcp: bool) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let s = Socket::new(
        domain,
        Type::STREAM.nonblocking(),
        Some(crate::stream_protocol(mptcp)),
    )?;
    s.set_reuse_address(true)?;
    // Accepted connections inherit TCP_NODELAY from the listener on Linux, which saves a
    // setsockopt per connection (see `serve_conn`).
    s.set_nodelay(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    TcpListener::from_std(std::net::TcpListener::from(s))
}

async fn accept_loop(
    l: TcpListener,
    shared: Arc<Shared>,
    sem: Arc<Semaphore>,
    tx: mpsc::Sender<Incoming>,
    stop: watch::Receiver<bool>,
) {
    let mut refuse = RateLimited::new();
    loop {
        let (stream, peer) = match l.accept().await {
            Ok(x) => x,
            Err(e) => {
                warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Ok(permit) = sem.clone().try_acquire_owned() else {
            inc(&shared.counters.connections_rejected, 1);
            refuse.log(&format!("{peer}"), "connection limit reached; resetting");
            let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
            continue;
        };
        let Some(share) = SourceShare::take(&shared, peer.ip()) else {
            inc(&shared.counters.connections_rejected_source, 1);
            refuse.log(
                &format!("{peer}"),
                "per-source connection share reached; resetting",
            );
            let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
            continue;
        };
        inc(&shared.counters.connections, 1);
        let (shared, tx, mut stop) = (shared.clone(), tx.clone(), stop.clone());
        let span = tracing::debug_span!("conn", %peer);
        tokio::spawn(
            async move {
                tokio::select! {
                    _ = serve_conn(stream, peer, &shared, &tx) => {}
                    _ = stop.changed() => {}
                }
                drop(share);
                drop(permit);
            }
            .instrument(span),
        );
    }
}

/// A warning logged at most once a second, with the number of occurrences it stands for.
pub(crate) struct RateLimited {
    last: Option<Instant>,
    skipped: u64,
}

impl RateLimited {
    pub(crate) fn new() -> Self {
        RateLimited {
            last: None,
            skipped: 0,
        }
    }

    pub(crate) fn log(&mut self, peer: &str, what: &str) {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            self.skipped += 1;
            return;
        }
        warn!(peer, also = self.skipped, "{what}");
        self.last = Some(now);
        self.skipped = 0;
    }
}

/// One connection's place in its source address's share; released on drop.
struct SourceShare {
    shared: Arc<Shared>,
    ip: IpAddr,
}

impl SourceShare {
    fn take(shared: &Arc<Shared>, ip: IpAddr) -> Option<SourceShare> {
        let mut m = shared.per_source.lock().expect("per-source lock");
        let n = m.entry(ip).or_insert(0);
        if *n >= shared.cfg.max_connections_per_source.max(1) {
            if *n == 0 {
                m.remove(&ip);
            }
            return None;
        }
        *n += 1;
        Some(SourceShare {
            shared: shared.clone(),
            ip,
        })
    }
}

impl Drop for SourceShare {
    fn drop(&mut self) {
        let mut m = self.shared.per_source.lock().expect("per-source lock");
        if let Some(n) = m.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.ip);
            }
        }
    }
}

/// Largest run of replies held back to be written together.
const WRITE_BATCH: usize = 16 * 1024;

/// The write side of a connection: replies are appended to a buffer that grows only as far
/// as needed (20 bytes for a per-flow connection's one acknowledgement, where a 16 KiB
/// `BufWriter` cost a large allocation per connection) and go out on `flush`, coalesced on
/// pooled connections.
struct ConnWriter {
    half: OwnedWriteHalf,
    buf: Vec<u8>,
    /// Every write must be accepted within this time.
    limit: Duration,
    shared: Arc<Shared>,
}

impl ConnWriter {
    async fn send(&mut self, head: &[u8], body: &[u8]) -> std::io::Result<()> {
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

    async fn flush(&mut self) -> std::io::Result<()> {
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

type SharedWriter = Arc<tokio::sync::Mutex<ConnWriter>>;

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
fn next_frame_buffered(buf: &[u8]) -> bool {
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
fn spawn_response_writer(
    wr: SharedWriter,
    dead: Arc<tokio::sync::Notify>,
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
        }
    });
    (tx, h)
}

/// Logs a refused frame, at most once a second for the whole server.
fn frame_log(peer: &str, what: &str) {
    static LIMIT: Mutex<Option<RateLimited>> = Mutex::new(None);
    let mut g = LIMIT.lock().expect("log limiter");
    g.get_or_insert_with(RateLimited::new).log(peer, what);
}

async fn serve_conn(
    stream: TcpStream,
    peer: SocketAddr,
    shared: &Arc<Shared>,
    app: &mpsc::Sender<Incoming>,
) {
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
                frame_log(
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
                    frame_log(
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
            Err(ReadError::Frame(e @ crate::FrameError::BadDigest { .. })) => {
                inc(&c.digest_mismatches, 1);
                frame_log(
                    &format!("{peer}: {e}"),
                    "rejected frame; closing connection",
                );
                break;
            }
            Err(ReadError::Frame(e)) => {
                if matches!(
                    e,
                    crate::FrameError::BadTag
                        | crate::FrameError::MissingTag
                        | crate::FrameError::UnexpectedTag
                ) {
                    inc(&c.auth_failures, 1);
                } else {
                    inc(&c.malformed, 1);
                }
                frame_log(
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
        let h = f.header;
        if h.flags & (flags::REPLY | flags::DUP) != 0 {
            inc(&c.malformed, 1);
            frame_log(
                &format!("{peer}"),
                "reply flags on a request; closing connection",
            );
            break;
        }
        if key.is_some() {
            let skew = crate::frame::now_ms().abs_diff(h.timestamp_ms);
            if skew > cfg.replay_window.as_millis() as u64 {
                inc(&c.replays_refused, 1);
                frame_log(
                    &format!("{peer}: timestamp {skew} ms away from this host's clock"),
                    "frame outside the replay window; closing connection",
                );
                break;
            }
        }
        let len = f.payload.len() as u64;
        inc(&c.copies_received, 1);
        inc(&c.bytes_received, len);
        let call = h.flags & flags::CALL != 0;
        let dkey = (peer.ip(), h.flow_id);
        let waiter = if call {
            let (tx, _) =
                responses.get_or_insert_with(|| spawn_response_writer(wr.clone(), dead.clone()));
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
                call,
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
                    data: f.payload,
                    responder: call.then(|| Responder {
                        key: dkey,
                        shared: shared.clone(),
                        done: false,
                    }),
                };
                if app.send(inc_msg).await.is_err() {
                    break;
                }
                (!call).then(|| Out {
                    head: reply(false).encode(key, &[]),
                    body: None,
                })
            }
            Seen::Conflict => {
                frame_log(
                    &format!("{peer}: flow {:#x} copy {}", h.flow_id, h.copy),
                    "copy differs from the flow's first copy (digest); closing connection",
                );
                break;
            }
            Seen::Stale => {
                inc(&c.replays_refused, 1);
                frame_log(
                    &format!("{peer}: flow {:#x}", h.flow_id),
                    "possible replay (older than a forgotten id); closing connection",
                );
                break;
            }
            Seen::Dup { cached, .. } => {
                inc(&c.duplicates, 1);
                inc(&c.duplicate_bytes, len);
                debug!(
                    flow_id = h.flow_id,
                    copy = h.copy,
                    "late duplicate discarded"
                );
                match (call, cached) {
                    (false, _) => Some(Out {
                        head: reply(true).encode(key, &[]),
                        body: None,
                    }),
                    (true, Some(b)) => Some(Out {
                        head: reply(true).encode(key, &b),
                        body: Some(b),
                    }),
                    // Call still being processed: this connection was added as a waiter.
                    (true, None) => None,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `serve_conn` skips TCP_NODELAY on Linux because accepted sockets inherit it from the
    /// listener; if that ever stops holding, acknowledgements would wait for Nagle.
    #[tokio::test]
    async fn accepted_sockets_are_nodelay() {
        let l = bind_listener("127.0.0.1:0".parse().unwrap(), false).unwrap();
        let addr = l.local_addr().unwrap();
        let _c = TcpStream::connect(addr).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        assert!(s.nodelay().unwrap());
    }
}
