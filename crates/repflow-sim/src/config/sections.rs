//! The sections of a run's configuration other than the scheme: topology, queues, routing,
//! TCP and workload.

use crate::units::{Bytes, Duration, Rate};
use serde::{Deserialize, Serialize};

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
    /// Fat-tree: hosts under each edge switch (unset: k/2, the full-bisection fat-tree; more
    /// hosts oversubscribe the edge's k/2 uplinks).
    pub hosts_per_edge: Option<u32>,
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
    /// Hosts under each fat-tree edge switch (`hosts_per_edge`, or k/2).
    pub fn fat_tree_hosts_per_edge(&self) -> u32 {
        self.hosts_per_edge.unwrap_or(self.k / 2)
    }

    /// Number of hosts the topology has.
    pub fn host_count(&self) -> u32 {
        match self.kind {
            TopologyKind::FatTree => self.k * (self.k / 2) * self.fat_tree_hosts_per_edge(),
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
            hosts_per_edge: None,
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

/// A named set of TCP defaults (`tcp.profile`): every `[tcp]` field not given explicitly
/// takes the profile's value. docs/configuration.md gives each value's source.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum TcpProfile {
    /// Data-center simulation defaults: 10 ms minimum and initial RTO, IW 12, 1460-byte
    /// segments, no delayed ACKs, a 64 KB receive window, NewReno.
    #[default]
    Dc,
    /// Linux's defaults: 200 ms minimum RTO, 1 s initial RTO, 120 s maximum, IW 10, delayed
    /// ACKs (40 ms), SACK, timestamps (1448-byte payload, 52-byte headers), window scaling
    /// (no 64 KB cap), unlimited initial ssthresh.
    Linux,
    /// ns-2.35's stock one-way TCP (`Agent/TCP/Newreno` to a `TCPSink`, tcl/lib/ns-default.tcl):
    /// 1000-byte segments, IW 2 after a modelled SYN, a 20-packet window (which also sets the
    /// initial ssthresh), 200 ms minimum RTO, 3 s initial RTO, 60 s maximum, an ACK per
    /// segment, NewReno without SACK.
    Ns2,
    /// ns-3.19's TCP (December 2013, the release of the RepFlow paper's time; `TcpSocket`,
    /// `TcpSocketBase`, `RttEstimator` and `TcpNewReno` attributes): 536-byte segments, IW 1,
    /// a 65,535-byte slow-start threshold and window (no window scaling), 200 ms minimum RTO,
    /// a 3 s handshake timeout, delayed ACKs (200 ms, every second segment), NewReno without
    /// SACK.
    #[serde(rename = "ns3-2014")]
    Ns3Of2014,
}

impl TcpProfile {
    /// Every profile's name.
    pub const NAMES: &'static [&'static str] = &["dc", "linux", "ns2", "ns3-2014"];
}

/// How the congestion window grows on an ACK of new data (`tcp.cwnd_growth`).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum CwndGrowth {
    /// By the segments the ACK acknowledges (RFC 3465's appropriate byte counting with
    /// L = 2 segments in slow start; one segment per window acknowledged in congestion
    /// avoidance), as Linux does.
    #[default]
    Bytes,
    /// By the ACK, whatever it acknowledges: one segment per ACK in slow start, 1/cwnd of a
    /// segment per ACK in congestion avoidance, as ns-2's `TcpAgent::opencwnd` and ns-3's
    /// `TcpNewReno::NewAck` do. With an ACK per two segments (delayed ACKs) the window grows
    /// half as fast as by bytes.
    PerAck,
}

/// TCP parameters.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TcpConfig {
    /// The profile the other fields' defaults come from.
    pub profile: TcpProfile,
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
    /// Slow-start threshold of a new connection, in segments; unset (the default, as Linux)
    /// means unlimited: slow start runs until the first loss or ECN echo.
    pub initial_ssthresh: Option<u32>,
    /// SACK: the receiver reports the segments it holds out of order (RFC 2018) and the
    /// sender recovers by RFC 6675's scoreboard; off: NewReno (RFC 6582).
    pub sack: bool,
    /// How the window grows per ACK: `bytes` (RFC 3465, Linux) or `per-ack` (ns-2, ns-3).
    pub cwnd_growth: CwndGrowth,
    /// The flow's last segment carries FIN (the sending application closes its socket once
    /// it has written the flow) and the receiver acknowledges it at once, delayed ACKs or
    /// not: ns-3's `BulkSendApplication` closes, and `TcpSocketBase::PeerClose` answers a FIN
    /// with an ACK. Off: the last segment waits for the delayed-ACK timer like any other
    /// (ns-2's agents send no FIN).
    pub fin_ack: bool,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig::for_profile(TcpProfile::Dc)
    }
}

impl TcpConfig {
    /// Every field at `profile`'s value.
    pub fn for_profile(profile: TcpProfile) -> TcpConfig {
        let ms = |n: u64| Duration(n * 1_000_000_000);
        match profile {
            TcpProfile::Dc => TcpConfig::dc(),
            TcpProfile::Linux => TcpConfig {
                profile,
                // A 1500-byte MTU less 20 B IP, 20 B TCP and 12 B of timestamp option.
                mss: 1448,
                header: 52,
                init_cwnd: 10,
                min_rto: ms(200),
                max_rto: ms(120_000),
                initial_rto: ms(1000),
                rto_backoff: 2.0,
                handshake: true,
                delayed_ack: true,
                delayed_ack_timeout: ms(40),
                dupack_threshold: 3,
                max_window: None,
                initial_ssthresh: None,
                sack: true,
                cwnd_growth: CwndGrowth::Bytes,
                fin_ack: false,
            },
            TcpProfile::Ns2 => TcpConfig {
                profile,
                // Agent/TCP packetSize_ (payload) and tcpip_base_hdr_size_.
                mss: 1000,
                header: 40,
                // windowInit_ 2 (syn_ and delay_growth_ hold the window at 1 until the SYN is
                // answered, which the handshake models).
                init_cwnd: 2,
                min_rto: ms(200),
                max_rto: ms(60_000),
                initial_rto: ms(3000),
                rto_backoff: 2.0,
                handshake: true,
                delayed_ack: false,
                delayed_ack_timeout: ms(100),
                dupack_threshold: 3,
                // window_ 20 packets of packetSize_ bytes.
                max_window: Some(Bytes(20_000)),
                // TcpAgent::reset sets ssthresh_ to the window (max_ssthresh_ 0: no cap).
                initial_ssthresh: Some(20),
                sack: false,
                // TcpAgent::opencwnd: cwnd_ += 1 per ACK in slow start, increase_num_ / cwnd_
                // (1/cwnd) per ACK in congestion avoidance.
                cwnd_growth: CwndGrowth::PerAck,
                // ns-2's TCP agents never close a connection: no FIN.
                fin_ack: false,
            },
            TcpProfile::Ns3Of2014 => TcpConfig {
                profile,
                // TcpSocket::SegmentSize; IPv4 + TCP headers without options.
                mss: 536,
                header: 40,
                // TcpSocket::InitialCwnd (segments).
                init_cwnd: 1,
                // RttEstimator::MinRTO.
                min_rto: ms(200),
                // The backoff's cap is RttEstimator::MaxMultiplier = 64 times the RTO.
                max_rto: ms(64 * 200),
                // TcpSocket::ConnTimeout (the handshake's timer; the data timer before a
                // sample, RttEstimator::InitialEstimation, is 1 s).
                initial_rto: ms(3000),
                rto_backoff: 2.0,
                handshake: true,
                // TcpSocket::DelAckCount 2, DelAckTimeout 0.2 s.
                delayed_ack: true,
                delayed_ack_timeout: ms(200),
                // TcpNewReno::ReTxThreshold.
                dupack_threshold: 3,
                // TcpSocketBase::MaxWindowSize (no window scaling in ns-3.19).
                max_window: Some(Bytes(65_535)),
                // TcpSocket::SlowStartThreshold 0xffff bytes, in 536-byte segments.
                initial_ssthresh: Some(65_535 / 536),
                sack: false,
                // TcpNewReno::NewAck: m_cWnd += m_segmentSize per ACK in slow start, and
                // max(1, segSize² / cWnd) bytes per ACK in congestion avoidance.
                cwnd_growth: CwndGrowth::PerAck,
                // BulkSendApplication closes after MaxBytes: FIN rides on the last segment
                // (m_closeOnEmpty), and the receiver's PeerClose sends its ACK at once.
                fin_ack: true,
            },
        }
    }

    fn dc() -> TcpConfig {
        TcpConfig {
            profile: TcpProfile::Dc,
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
            initial_ssthresh: None,
            sack: false,
            cwnd_growth: CwndGrowth::Bytes,
            fin_ack: false,
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
            Some(Raw::F(v)) => Err(serde::de::Error::custom(crate::units::number_error(
                v,
                crate::units::Kind::Size,
            ))),
        }
    }
}
