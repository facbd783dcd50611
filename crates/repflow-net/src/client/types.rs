//! The client's plain types: settings, routes, reports, counters, pool keys, flow ids.

use crate::error::CopyFailure;
use crate::paths::Fallback;
use crate::policy::{DecisionReason, PolicyConfig};
use crate::probe::ProbeConfig;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How copies travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnMode {
    /// Every copy on a new TCP connection (as in the papers); losers are reset (RST).
    PerFlow,
    /// Persistent connections per destination and path, frames multiplexed by flow id;
    /// losers' unsent frames are skipped. Short and long flows use separate connections.
    Pooled,
}

/// Settings of a [`Client`](crate::Client).
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
    /// Path probing (SmartRep port strategy, and the path pool).
    pub probe: ProbeConfig,
    /// Pooled mode: keep several connections per destination on probed paths and send each
    /// short request's copies on slots of different paths, the first on the fastest
    /// ([`crate::pathpool`]); `None`: one connection per copy (destination port + i).
    pub path_pool: Option<crate::pathpool::PathPoolConfig>,
    /// Local address to send from (`None`: chosen by the kernel).
    pub bind_ip: Option<IpAddr>,
    /// Pooled connections idle for this long are replaced instead of reused (keep it below
    /// the server's idle timeout, 30 s by default).
    pub pool_idle: Duration,
    /// Pooled connections are kept open across idle spells of up to this long since their
    /// last copy: a connection with no frame for half of `pool_idle` sends a keepalive (an
    /// empty one-way frame of one copy, which the server acknowledges and neither delivers
    /// nor remembers; docs/protocol.md), so it stays fresh instead of being replaced — and a path pool's slot keeps its connection
    /// (a reopen pays a handshake on the path). Past this long without a copy, keepalives
    /// stop and the connection ages out as before. `Duration::ZERO`: no keepalives.
    pub pool_keepalive: Duration,
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
            path_pool: None,
            bind_ip: None,
            pool_idle: Duration::from_secs(10),
            pool_keepalive: Duration::from_secs(120),
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
    /// Keepalive frames sent on idle pooled connections (see `ClientConfig::pool_keepalive`).
    pub keepalives: u64,
}

#[derive(Debug, Default)]
pub(super) struct AtomicCounters {
    pub(super) flows: AtomicU64,
    pub(super) flows_failed: AtomicU64,
    pub(super) copies_sent: AtomicU64,
    pub(super) copies_won_by_replica: AtomicU64,
    pub(super) copies_cancelled: AtomicU64,
    pub(super) copies_failed: AtomicU64,
    pub(super) frames_skipped: AtomicU64,
    pub(super) bytes_sent: AtomicU64,
    pub(super) bytes_wasted: AtomicU64,
    pub(super) probes: AtomicU64,
    pub(super) path_fallbacks: AtomicU64,
    pub(super) connections: AtomicU64,
    pub(super) pool_stalls: AtomicU64,
    pub(super) keepalives: AtomicU64,
}

pub(super) fn inc(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// A copy's failure when the server answered `GONE`: the call ran, its response was dropped
/// from the server's response cache (the call is not executed again).
pub(crate) const GONE_MESSAGE: &str = "executed, response no longer held by the server";

pub(super) struct Reply {
    pub(super) dup: bool,
    pub(super) body: Vec<u8>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct PoolKey {
    pub(super) dst: SocketAddr,
    pub(super) src_port: Option<u16>,
    pub(super) long: bool,
}

/// Flow ids that another client cannot guess: SipHash-1-3 (std's `RandomState`, whose
/// 128-bit key comes from the operating system's random source) of a per-client counter. A
/// counter behind a random prefix, as before, let anyone who saw one id predict the next.
pub(super) struct FlowIds(std::collections::hash_map::RandomState);

impl FlowIds {
    pub(super) fn new() -> Self {
        FlowIds(std::collections::hash_map::RandomState::new())
    }

    pub(super) fn id(&self, seq: u64) -> u64 {
        use std::hash::BuildHasher;
        self.0.hash_one(seq)
    }
}
