//! The run configuration: one serde schema shared by TOML files, the command line and the
//! Python API, validated up front with errors that name the field and what is accepted.

use crate::units::{Bytes, Duration, Rate};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A configuration that cannot be used, with the dotted path of the offending field.
#[derive(Debug, Error, Clone, PartialEq)]
#[error("{field}: {message}")]
pub struct ConfigError {
    /// Dotted path of the field, e.g. `topology.k`.
    pub field: String,
    /// What is wrong and what would be accepted.
    pub message: String,
}

impl ConfigError {
    /// Builds an error for `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Everything that defines one simulation run. Defaults reproduce the RepFlow paper's NS-3
/// setup at a smaller scale (8-pod fat-tree, 1 Gb/s, web search at load 0.5).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Master seed; every random stream of the run derives from it.
    pub seed: u64,
    /// The network.
    pub topology: TopologyConfig,
    /// Switch and host output queues.
    pub queue: QueueConfig,
    /// ECMP routing.
    pub routing: RoutingConfig,
    /// TCP parameters.
    pub tcp: TcpConfig,
    /// Traffic.
    pub workload: WorkloadConfig,
    /// Transport scheme and replication.
    pub scheme: SchemeConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            seed: 1,
            topology: TopologyConfig::default(),
            queue: QueueConfig::default(),
            routing: RoutingConfig::default(),
            tcp: TcpConfig::default(),
            workload: WorkloadConfig::default(),
            scheme: SchemeConfig::default(),
        }
    }
}

/// Topology families.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum TopologyKind {
    /// k-ary fat-tree (Al-Fares et al.): k pods, k³/4 hosts, (k/2)² core switches.
    FatTree,
    /// Two-tier leaf-spine: every leaf connects to every spine.
    LeafSpine,
    /// One switch with `hosts` hosts.
    Star,
    /// RepFlow's Fig. 3: edge switches S1, S2; middle switches S3, S4; H1, H2 under S1 and
    /// H3, H4 under S2.
    Toy,
}

/// The network's shape, link rates and propagation delays.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TopologyConfig {
    /// `fat-tree`, `leaf-spine`, `star` or `toy`.
    pub kind: TopologyKind,
    /// Fat-tree arity (even, ≥ 4).
    pub k: u32,
    /// Leaf-spine: number of leaves.
    pub leaves: u32,
    /// Leaf-spine: number of spines.
    pub spines: u32,
    /// Leaf-spine: hosts under each leaf.
    pub hosts_per_leaf: u32,
    /// Star: number of hosts.
    pub hosts: u32,
    /// Rate of every link (host links; switch-to-switch links too unless `uplink_rate`).
    pub link_rate: Rate,
    /// Rate of switch-to-switch links (default: `link_rate`).
    pub uplink_rate: Option<Rate>,
    /// One-way propagation delay of every link.
    pub link_delay: Duration,
}

impl TopologyConfig {
    /// Number of hosts the topology has.
    pub fn host_count(&self) -> u32 {
        match self.kind {
            TopologyKind::FatTree => self.k * self.k * self.k / 4,
            TopologyKind::LeafSpine => self.leaves * self.hosts_per_leaf,
            TopologyKind::Star => self.hosts,
            TopologyKind::Toy => 4,
        }
    }
}

impl Default for TopologyConfig {
    fn default() -> Self {
        TopologyConfig {
            kind: TopologyKind::FatTree,
            k: 8,
            leaves: 4,
            spines: 4,
            hosts_per_leaf: 8,
            hosts: 8,
            link_rate: Rate(1_000_000_000),
            uplink_rate: None,
            link_delay: Duration(2_000_000), // 2 us: 6 hops each way ≈ 32 us RTT at 1 Gb/s
        }
    }
}

/// Output-queue limits.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct QueueConfig {
    /// DropTail limit of switch ports, in packets (ignored when `limit_bytes` is set).
    pub limit_packets: u32,
    /// DropTail limit of switch ports in bytes (overrides `limit_packets`).
    pub limit_bytes: Option<Bytes>,
    /// Limit of host (NIC) output queues, in packets; 0 (the default) means unlimited: a real
    /// host does not drop its own packets — Linux's TCP small queues stop a socket before the
    /// qdisc overflows — so the host queue stands for socket buffer and NIC together.
    pub host_limit_packets: u32,
    /// ECN marking threshold K of switch ports, packets, for the DCTCP family of schemes.
    /// Unset: from each port's rate as the DCTCP paper sets it: 20 packets up to 1 Gb/s,
    /// 65 packets above.
    pub ecn_k_packets: Option<u32>,
    /// ECN marking threshold K in bytes (overrides `ecn_k_packets`).
    pub ecn_k_bytes: Option<Bytes>,
}

impl QueueConfig {
    /// The marking threshold of a switch port sending at `rate`: `(packets, bytes)`, one of
    /// them zero.
    pub fn ecn_k(&self, rate: Rate) -> (u32, u64) {
        if let Some(b) = self.ecn_k_bytes {
            return (0, b.0);
        }
        let k = self
            .ecn_k_packets
            .unwrap_or(if rate.bps() <= 1_000_000_000 { 20 } else { 65 });
        (k, 0)
    }
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            limit_packets: 100,
            limit_bytes: None,
            host_limit_packets: 0,
            ecn_k_packets: None,
            ecn_k_bytes: None,
        }
    }
}

/// ECMP hash functions.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum HashKind {
    /// A seeded 64-bit mixer (SplitMix64 over the packed five-tuple and the switch salt).
    Default,
    /// CRC-16/CCITT-FALSE of the five-tuple bytes, rotated by a per-switch offset and XORed
    /// with a per-switch seed (as switch ASICs' hash-offset settings do against polarization).
    Crc16,
    /// CRC-32 (IEEE) of the five-tuple bytes, with the same per-switch offset and seed.
    Crc32,
}

/// Routing options.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RoutingConfig {
    /// Hash used by ECMP hash-threshold selection.
    pub hash: HashKind,
}

impl Default for RoutingConfig {
    fn default() -> Self {
        RoutingConfig {
            hash: HashKind::Default,
        }
    }
}

/// TCP NewReno parameters.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TcpConfig {
    /// Maximum segment size (payload bytes per packet).
    pub mss: u32,
    /// Header bytes added to every packet (IP + TCP).
    pub header: u32,
    /// Initial congestion window, in segments.
    pub init_cwnd: u32,
    /// Minimum retransmission timeout (RFC 6298 says 1 s; data-center studies use 1–10 ms).
    pub min_rto: Duration,
    /// Maximum retransmission timeout (cap of the exponential backoff).
    pub max_rto: Duration,
    /// RTO before the first RTT sample (RFC 6298: 1 s; default here: `min_rto`'s default).
    pub initial_rto: Duration,
    /// Factor applied to the RTO after each timeout (RFC 6298: 2).
    pub rto_backoff: f64,
    /// Open every connection with a SYN / SYN-ACK exchange before data.
    pub handshake: bool,
    /// Acknowledge every second segment (or after `delayed_ack_timeout`).
    pub delayed_ack: bool,
    /// Delayed-ACK timer.
    pub delayed_ack_timeout: Duration,
    /// Duplicate ACKs that trigger fast retransmit.
    pub dupack_threshold: u32,
    /// Cap on bytes in flight (the receive window). Default 65,535 B: ns-3 as used by the
    /// RepFlow paper has no window scaling, and the paper's model takes M = 64 KB. `null`
    /// (JSON) or `"none"` removes the cap.
    #[serde(with = "opt_bytes")]
    pub max_window: Option<Bytes>,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            mss: 1460,
            header: 40,
            init_cwnd: 12,
            min_rto: Duration(10_000_000_000),
            max_rto: Duration(60 * crate::units::PS_PER_SEC),
            initial_rto: Duration(10_000_000_000),
            rto_backoff: 2.0,
            handshake: true,
            delayed_ack: false,
            delayed_ack_timeout: Duration(1_000_000_000),
            dupack_threshold: 3,
            max_window: Some(Bytes(65_535)),
        }
    }
}

/// Which host pairs exchange flows.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum PairPattern {
    /// Source and destination drawn uniformly among distinct hosts.
    Random,
    /// As `random`, but the destination is in another pod (fat-tree) or under another leaf.
    InterPod,
    /// Every flow goes to host 0 (an aggregator); the source is uniform over the others.
    Incast,
}

/// Traffic: flow sizes, arrivals, duration.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WorkloadConfig {
    /// Flow-size CDF: a built-in name (`websearch`, `datamining`, …) or a file path.
    pub cdf: String,
    /// Resolved CDF text (filled in by the front end when `cdf` is a path or a built-in name;
    /// recorded so that a run's metadata holds the exact distribution it used).
    pub cdf_text: Option<String>,
    /// Offered load ρ: mean flow-byte arrival rate as a fraction of aggregate host-link
    /// capacity (sum over hosts of their link rate), 0 < ρ < 1.
    pub load: f64,
    /// Flows arrive during this time; afterwards the run drains.
    pub duration: Duration,
    /// Longest drain after the last arrival; flows still open are reported unfinished.
    pub drain: Duration,
    /// Host-pair pattern.
    pub pairs: PairPattern,
    /// Optional cap on the number of flows.
    pub max_flows: Option<u64>,
    /// Explicit flows replacing the Poisson arrivals (trace replay); `load` and `cdf` are then
    /// ignored for arrivals and sizes.
    pub trace: Option<Vec<TraceFlow>>,
    /// Explicit flows started in addition to the Poisson arrivals (e.g. long-lived background
    /// flows beside a query workload); ignored when `trace` is set.
    pub background: Option<Vec<TraceFlow>>,
}

/// One flow of an explicit trace.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TraceFlow {
    /// Arrival time.
    pub start: Duration,
    /// Source host index.
    pub src: u32,
    /// Destination host index.
    pub dst: u32,
    /// Application bytes.
    pub size: Bytes,
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        WorkloadConfig {
            cdf: "websearch".into(),
            cdf_text: None,
            load: 0.5,
            duration: Duration(50_000_000_000),
            drain: Duration(10 * crate::units::PS_PER_SEC),
            pairs: PairPattern::Random,
            max_flows: None,
            trace: None,
            background: None,
        }
    }
}

/// Transport schemes.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum SchemeName {
    /// TCP NewReno, one connection per flow.
    Tcp,
    /// RepFlow: flows ≤ threshold sent on `copies` connections with distinct destination ports.
    Repflow,
    /// RepFlow's `copies` connections with SmartRep's hash-collision avoidance: source ports
    /// chosen by path probes so that the copies' paths share no switch-to-switch link.
    RepflowHca,
    /// SmartRep: replicas per flow size from RepNumAssign (budget `eps`, parameter `p`), ports
    /// from HCA, no copies between hosts under one ToR.
    Smartrep,
    /// FullRep: every short flow gets one copy per link-disjoint equal-cost path (HCA ports).
    Fullrep,
    /// DCTCP: ECN threshold marking at switch ports, DCTCP senders, one connection per flow.
    Dctcp,
    /// RepFlow's replication over DCTCP.
    RepflowDctcp,
    /// pFabric: priority-scheduled 36 KB switch ports and pFabric's minimal transport.
    Pfabric,
    /// L²DCT over DCTCP-style ECN marking.
    L2dct,
    /// FA-DCTCP over DCTCP-style ECN marking.
    FaDctcp,
}

impl SchemeName {
    /// Whether the scheme's senders are ECN-capable and its switch ports mark at K.
    pub fn uses_ecn(self) -> bool {
        matches!(
            self,
            SchemeName::Dctcp | SchemeName::RepflowDctcp | SchemeName::L2dct | SchemeName::FaDctcp
        )
    }
}

/// Scheme and replication options.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SchemeConfig {
    /// The scheme.
    pub name: SchemeName,
    /// Flows of at most this many bytes are replicated.
    pub threshold: Bytes,
    /// Copies of a replicated flow (the original included).
    pub copies: u32,
    /// Stop the other copies once one completes (beyond the papers).
    pub cancel: bool,
    /// SmartRep: replica bytes may be at most this fraction of all bytes (RepNumAssign's ε).
    pub eps: f64,
    /// SmartRep: probability that a copy meets a large flow (RepNumAssign's p).
    pub p: f64,
    /// SmartRep: earlier run whose flow sizes are the history (run directory, `flows.parquet`
    /// or `run.json`); unset = the workload's CDF. Read by the front end into `table`.
    pub history: Option<String>,
    /// SmartRep: explicit replica table, `table[i]` replicas for sizes in
    /// `(i KB, (i+1) KB]` (1 KB = 1000 B); unset = computed by RepNumAssign at run start.
    pub table: Option<Vec<u32>>,
    /// HCA: host and switch time per probe on top of its round trip (paper: 18 + 11 µs).
    pub probe_processing: Duration,
    /// HCA: `cold` = the probe cache starts empty and flows wait for their probes; `warm` =
    /// probes were done in advance (the paper's evaluation): no waiting.
    pub probe_cache: ProbeCache,
    /// DCTCP family: gain g of the α moving average (DCTCP paper: 1/16).
    pub dctcp_g: f64,
    /// DCTCP family: α of a new connection (ns-2's DCTCP: 0; Linux: 1).
    pub dctcp_alpha_init: f64,
    /// L²DCT: weight of a flow that has sent little (public ns-3 port of L²DCT: 2.5).
    pub l2dct_w_max: f64,
    /// L²DCT: weight of a flow that has sent much (same source: 0.125).
    pub l2dct_w_min: f64,
    /// L²DCT: bytes sent up to which the weight is `l2dct_w_max` (same source: 200 segments).
    pub l2dct_from: Bytes,
    /// L²DCT: bytes sent from which the weight is `l2dct_w_min` (same source: 1000 segments).
    pub l2dct_to: Bytes,
    /// FA-DCTCP: a flow is long once it has sent more than this (paper: 1 MB).
    pub fa_threshold: Bytes,
    /// FA-DCTCP: destination ports `[first, last]` of long-flow services; a connection to
    /// one of them is long from its first byte. Unset: classify by `fa_threshold` only.
    pub fa_long_ports: Option<[u16; 2]>,
    /// pFabric: buffer of every switch port (RepFlow paper, after pFabric: 36 KB).
    pub pfabric_buffer: Bytes,
    /// pFabric: initial (and largest) window in segments; unset = one bandwidth-delay
    /// product of the longest host-to-host path, rounded up.
    pub pfabric_window: Option<u32>,
    /// pFabric: fixed retransmission timeout; unset = 3 × the longest path's round trip.
    pub pfabric_rto: Option<Duration>,
}

/// Whether HCA's probe cache starts empty.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ProbeCache {
    /// Empty at start: a flow waits for the probes of ports not yet in the cache.
    Cold,
    /// Filled in advance: lookups cost no time.
    Warm,
}

impl Default for SchemeConfig {
    fn default() -> Self {
        SchemeConfig {
            name: SchemeName::Tcp,
            threshold: Bytes(100_000),
            copies: 2,
            cancel: false,
            eps: 0.03,
            p: 0.1,
            history: None,
            table: None,
            probe_processing: Duration(29_000_000),
            probe_cache: ProbeCache::Cold,
            dctcp_g: 1.0 / 16.0,
            dctcp_alpha_init: 0.0,
            l2dct_w_max: 2.5,
            l2dct_w_min: 0.125,
            l2dct_from: Bytes(200 * 1460),
            l2dct_to: Bytes(1000 * 1460),
            fa_threshold: Bytes(1_000_000),
            fa_long_ports: None,
            pfabric_buffer: Bytes(36_000),
            pfabric_window: None,
            pfabric_rto: None,
        }
    }
}

impl Config {
    /// Parses a JSON configuration; errors name the field at fault.
    pub fn from_json(text: &str) -> Result<Config, ConfigError> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let cfg: Config = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner().to_string();
            // serde_json appends " at line L column C"; drop it, the path says more.
            let msg = match inner.rfind(" at line ") {
                Some(i) => inner[..i].to_string(),
                None => inner,
            };
            ConfigError::new(if path == "." { "config".into() } else { path }, msg)
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks the congestion-control and pFabric parameters.
    fn validate_cc(&self) -> Result<(), ConfigError> {
        let s = &self.scheme;
        let unit = |field: &str, v: f64, lo_open: bool| -> Result<(), ConfigError> {
            let ok = v.is_finite() && v <= 1.0 && if lo_open { v > 0.0 } else { v >= 0.0 };
            if ok {
                Ok(())
            } else {
                let range = if lo_open {
                    "0 < x ≤ 1"
                } else {
                    "0 ≤ x ≤ 1"
                };
                Err(ConfigError::new(
                    field,
                    format!("must be a number with {range}, got {v}"),
                ))
            }
        };
        unit("scheme.dctcp_g", s.dctcp_g, true)?;
        unit("scheme.dctcp_alpha_init", s.dctcp_alpha_init, false)?;
        if !(s.l2dct_w_min.is_finite() && s.l2dct_w_min > 0.0) {
            return Err(ConfigError::new(
                "scheme.l2dct_w_min",
                "must be a positive number",
            ));
        }
        if !(s.l2dct_w_max.is_finite() && s.l2dct_w_max >= s.l2dct_w_min) {
            return Err(ConfigError::new(
                "scheme.l2dct_w_max",
                "must be a number at least scheme.l2dct_w_min",
            ));
        }
        if s.l2dct_to < s.l2dct_from {
            return Err(ConfigError::new(
                "scheme.l2dct_to",
                "must be at least scheme.l2dct_from",
            ));
        }
        if let Some([a, b]) = s.fa_long_ports {
            if a > b {
                return Err(ConfigError::new(
                    "scheme.fa_long_ports",
                    "must be [first, last] with first ≤ last",
                ));
            }
        }
        if s.pfabric_buffer.0 < (self.tcp.mss + self.tcp.header) as u64 {
            return Err(ConfigError::new(
                "scheme.pfabric_buffer",
                format!(
                    "must hold at least one full packet ({} B)",
                    self.tcp.mss + self.tcp.header
                ),
            ));
        }
        if s.pfabric_window == Some(0) {
            return Err(ConfigError::new(
                "scheme.pfabric_window",
                "must be at least 1 segment",
            ));
        }
        if s.pfabric_rto.is_some_and(|d| d.ps() == 0) {
            return Err(ConfigError::new("scheme.pfabric_rto", "must be positive"));
        }
        if self.queue.ecn_k_packets == Some(0) {
            return Err(ConfigError::new(
                "queue.ecn_k_packets",
                "must be at least 1 packet",
            ));
        }
        if self.queue.ecn_k_bytes.is_some_and(|b| b.0 == 0) {
            return Err(ConfigError::new("queue.ecn_k_bytes", "must be positive"));
        }
        Ok(())
    }

    /// Checks every cross-field and range constraint.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let t = &self.topology;
        match t.kind {
            TopologyKind::FatTree => {
                if t.k < 4 || !t.k.is_multiple_of(2) {
                    return Err(ConfigError::new(
                        "topology.k",
                        format!("fat-tree arity must be an even number ≥ 4, got {}", t.k),
                    ));
                }
                if t.k > 64 {
                    return Err(ConfigError::new(
                        "topology.k",
                        format!("fat-tree arity at most 64 is supported, got {}", t.k),
                    ));
                }
            }
            TopologyKind::LeafSpine => {
                for (name, v) in [
                    ("topology.leaves", t.leaves),
                    ("topology.spines", t.spines),
                    ("topology.hosts_per_leaf", t.hosts_per_leaf),
                ] {
                    if v == 0 {
                        return Err(ConfigError::new(name, "must be at least 1"));
                    }
                }
                if t.leaves * t.hosts_per_leaf < 2 {
                    return Err(ConfigError::new(
                        "topology.hosts_per_leaf",
                        "leaf-spine needs at least 2 hosts in all",
                    ));
                }
            }
            TopologyKind::Star => {
                if t.hosts < 2 {
                    return Err(ConfigError::new(
                        "topology.hosts",
                        format!("a star needs at least 2 hosts, got {}", t.hosts),
                    ));
                }
            }
            TopologyKind::Toy => {}
        }
        if self.queue.limit_packets == 0 && self.queue.limit_bytes.is_none() {
            return Err(ConfigError::new(
                "queue.limit_packets",
                "must be at least 1 packet",
            ));
        }
        if let Some(b) = self.queue.limit_bytes {
            if b.0 < (self.tcp.mss + self.tcp.header) as u64 {
                return Err(ConfigError::new(
                    "queue.limit_bytes",
                    format!(
                        "must hold at least one full packet ({} B)",
                        self.tcp.mss + self.tcp.header
                    ),
                ));
            }
        }
        let tcp = &self.tcp;
        if tcp.mss == 0 || tcp.mss > 65_000 {
            return Err(ConfigError::new(
                "tcp.mss",
                "must be between 1 and 65000 bytes",
            ));
        }
        if tcp.header == 0 || tcp.mss as u64 + tcp.header as u64 > 65_535 {
            return Err(ConfigError::new(
                "tcp.header",
                "must be at least 1 byte, with tcp.mss + tcp.header at most 65535 bytes",
            ));
        }
        if tcp.init_cwnd == 0 {
            return Err(ConfigError::new(
                "tcp.init_cwnd",
                "must be at least 1 segment",
            ));
        }
        if tcp.min_rto.ps() == 0 {
            return Err(ConfigError::new("tcp.min_rto", "must be positive"));
        }
        if tcp.max_rto < tcp.min_rto {
            return Err(ConfigError::new(
                "tcp.max_rto",
                "must be at least tcp.min_rto",
            ));
        }
        if tcp.initial_rto.ps() == 0 {
            return Err(ConfigError::new("tcp.initial_rto", "must be positive"));
        }
        if !(tcp.rto_backoff.is_finite() && tcp.rto_backoff >= 1.0) {
            return Err(ConfigError::new("tcp.rto_backoff", "must be a number ≥ 1"));
        }
        if tcp.dupack_threshold == 0 {
            return Err(ConfigError::new(
                "tcp.dupack_threshold",
                "must be at least 1",
            ));
        }
        if tcp.delayed_ack && tcp.delayed_ack_timeout.ps() == 0 {
            return Err(ConfigError::new(
                "tcp.delayed_ack_timeout",
                "must be positive",
            ));
        }
        if let Some(w) = tcp.max_window {
            if w.0 < tcp.mss as u64 {
                return Err(ConfigError::new(
                    "tcp.max_window",
                    "must be at least one MSS",
                ));
            }
        }
        let w = &self.workload;
        if !(w.load.is_finite() && w.load > 0.0 && w.load < 1.0) {
            return Err(ConfigError::new(
                "workload.load",
                format!("must be a number strictly between 0 and 1, got {}", w.load),
            ));
        }
        if w.duration.ps() == 0 {
            return Err(ConfigError::new(
                "workload.duration",
                "must be a positive duration",
            ));
        }
        if w.cdf.trim().is_empty() && w.cdf_text.is_none() {
            return Err(ConfigError::new(
                "workload.cdf",
                "name a built-in workload or a CDF file",
            ));
        }
        if w.pairs == PairPattern::InterPod && t.kind == TopologyKind::Star {
            return Err(ConfigError::new(
                "workload.pairs",
                "inter-pod pairs need a fat-tree, leaf-spine or toy topology, not a star",
            ));
        }
        if w.max_flows == Some(0) {
            return Err(ConfigError::new(
                "workload.max_flows",
                "must be at least 1 (leave it unset for no cap)",
            ));
        }
        for (list, trace) in [("trace", &w.trace), ("background", &w.background)] {
            let Some(trace) = trace else { continue };
            let n_hosts = self.topology.host_count();
            let mut prev = Duration(0);
            for (i, f) in trace.iter().enumerate() {
                let field = |name: &str| format!("workload.{list}[{i}].{name}");
                if f.src >= n_hosts || f.dst >= n_hosts || f.src == f.dst {
                    return Err(ConfigError::new(
                        field("dst"),
                        format!("src and dst must be distinct hosts in 0..{n_hosts}"),
                    ));
                }
                if f.size.0 == 0 {
                    return Err(ConfigError::new(field("size"), "must be at least 1 byte"));
                }
                if f.start < prev {
                    return Err(ConfigError::new(
                        field("start"),
                        "trace must be sorted by start",
                    ));
                }
                prev = f.start;
            }
        }
        let s = &self.scheme;
        if s.copies == 0 || s.copies > 64 {
            return Err(ConfigError::new(
                "scheme.copies",
                "must be between 1 and 64",
            ));
        }
        self.validate_cc()?;
        if !(s.eps.is_finite() && s.eps > 0.0 && s.eps < 1.0) {
            return Err(ConfigError::new(
                "scheme.eps",
                format!("must be a number strictly between 0 and 1, got {}", s.eps),
            ));
        }
        if !(s.p.is_finite() && s.p > 0.0 && s.p < 1.0) {
            return Err(ConfigError::new(
                "scheme.p",
                format!("must be a number strictly between 0 and 1, got {}", s.p),
            ));
        }
        if let Some(t) = &s.table {
            if t.iter().any(|&x| x > 63) {
                return Err(ConfigError::new(
                    "scheme.table",
                    "replicas per size bin must be between 0 and 63",
                ));
            }
        } else if s.history.is_some() && s.name == SchemeName::Smartrep {
            return Err(ConfigError::new(
                "scheme.history",
                "the earlier run's flow sizes must be turned into scheme.table by the front end \
                 (repflow sim / repflow.simulate do it); set scheme.table or unset scheme.history",
            ));
        }
        Ok(())
    }
}

/// `Option<Bytes>` that also accepts the string `"none"`.
mod opt_bytes {
    use crate::units::Bytes;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<Bytes>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(b) => s.serialize_str(&b.to_string()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Bytes>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            S(String),
            F(f64),
        }
        match Option::<Raw>::deserialize(d)? {
            None => Ok(None),
            Some(Raw::S(s)) if s.trim().eq_ignore_ascii_case("none") => Ok(None),
            Some(Raw::S(s)) => Bytes::parse(&s).map(Some).map_err(serde::de::Error::custom),
            Some(Raw::F(v)) if v.is_finite() && v >= 0.0 => Ok(Some(Bytes(v.round() as u64))),
            Some(Raw::F(v)) => Err(serde::de::Error::custom(format!(
                "{v} is not a size in bytes"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_round_trips() {
        let c = Config::default();
        c.validate().unwrap();
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(Config::from_json(&text).unwrap(), c);
    }

    #[test]
    fn errors_name_the_field() {
        let e = Config::from_json(r#"{"topology": {"k": 5}}"#).unwrap_err();
        assert_eq!(e.field, "topology.k");
        let e = Config::from_json(r#"{"topology": {"kind": "torus"}}"#).unwrap_err();
        assert_eq!(e.field, "topology.kind");
        assert!(e.message.contains("fat-tree"), "{e}");
        let e = Config::from_json(r#"{"workload": {"load": 1.0}}"#).unwrap_err();
        assert_eq!(e.field, "workload.load");
        let e = Config::from_json(r#"{"workload": {"duration": "soon"}}"#).unwrap_err();
        assert_eq!(e.field, "workload.duration");
        let e = Config::from_json(r#"{"topology": {"link_rate": "-1Gbps"}}"#).unwrap_err();
        assert_eq!(e.field, "topology.link_rate");
        let e = Config::from_json(r#"{"scheme": {"name": "carrier-pigeon"}}"#).unwrap_err();
        assert_eq!(e.field, "scheme.name");
        let e = Config::from_json(r#"{"workload": {"max_flows": 0}}"#).unwrap_err();
        assert_eq!(e.field, "workload.max_flows");
        // Packet sizes are 16-bit on the simulator's per-hop path.
        let e = Config::from_json(r#"{"tcp": {"header": 0}}"#).unwrap_err();
        assert_eq!(e.field, "tcp.header");
        let e = Config::from_json(r#"{"tcp": {"mss": 65000, "header": 536}}"#).unwrap_err();
        assert_eq!(e.field, "tcp.header");
        let e = Config::from_json(r#"{"bogus": 1}"#).unwrap_err();
        assert!(e.message.contains("bogus"), "{e}");
    }
}
