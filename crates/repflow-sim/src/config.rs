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
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            limit_packets: 100,
            limit_bytes: None,
            host_limit_packets: 0,
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
}

impl Default for SchemeConfig {
    fn default() -> Self {
        SchemeConfig {
            name: SchemeName::Tcp,
            threshold: Bytes(100_000),
            copies: 2,
            cancel: false,
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
        if let Some(trace) = &w.trace {
            let n_hosts = self.topology.host_count();
            let mut prev = Duration(0);
            for (i, f) in trace.iter().enumerate() {
                let field = |name: &str| format!("workload.trace[{i}].{name}");
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
        let e = Config::from_json(r#"{"bogus": 1}"#).unwrap_err();
        assert!(e.message.contains("bogus"), "{e}");
    }
}
