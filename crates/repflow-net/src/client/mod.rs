//! The sending side: replicate a flow over several TCP connections whose five-tuples differ,
//! return at the first copy that is acknowledged (or answered), cancel the others.
//!
//! - `connect`: opening a copy's connection and writing its frame; per-flow copies;
//! - `pool`: persistent connections (pooled mode), their writer and reader tasks;
//! - `transfer`: one flow end to end, driving the copy race (`crate::race`).

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

mod connect;
mod pool;
mod transfer;

use pool::{OutFrame, PooledConn};

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
    /// Open every connection as a Multipath TCP socket (`IPPROTO_MPTCP`): the kernel's path
    /// manager may then add subflows, and falls back to TCP when the server does not speak
    /// MPTCP.
    pub mptcp: bool,
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
            mptcp: false,
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
}
