//! Transport schemes, each one unit.
//!
//! A scheme is a variant of [`SchemeConfig`] carrying only its own parameters, and an
//! implementation of [`Scheme`] that builds everything a run of it needs: the switch and
//! host port discipline, the congestion control of each connection, the replication policy,
//! SmartRep's probe state and any TCP overrides ([`Parts`]). The rest of the simulator asks
//! the parts and never looks at a scheme's name.
//!
//! Adding a scheme is one file (its parameter struct and `impl Scheme`), one line in the
//! `schemes!` registry below, and nothing else.

mod dctcp;
mod mptcp;
mod pfabric;
mod repflow;
mod smartrep;
mod tcp;

pub use dctcp::{DctcpScheme, FaDctcpScheme, L2dctScheme, RepflowDctcpScheme};
pub use mptcp::{
    Coupling, Join, MptcpLScheme, MptcpScheme, MultipathPlan, SubflowPlan, MAX_SUBFLOWS,
};
pub use pfabric::{priority, PfabricScheme, PfabricTransport};
pub use repflow::RepflowScheme;
pub use smartrep::{
    rep_num_assign, FullRep, FullrepScheme, ProbeCache, RepFlowHca, RepflowHcaScheme, ReplicaTable,
    SizeHistogram, SmartRep, SmartrepScheme, DEFAULT_UNIT_BYTES,
};
pub use tcp::TcpScheme;

use crate::config::error::ConfigError;
use crate::config::sections::{QueueConfig, TcpConfig};
use crate::engine::Time;
use crate::hca::Hca;
use crate::network::Topology;
use crate::network::{Link, TxClock};
use crate::packet::Packet;
use crate::port::{DropTail, EcnThreshold, Port, Qdisc};
use crate::replication::{NoReplication, ReplicationPolicy};
use crate::transport::{CongestionControl, NewReno, TcpParams};
use crate::workload::Cdf;
use serde::{Deserialize, Serialize};

/// What a scheme sees of the run it builds for.
pub struct Context<'a> {
    /// The TCP settings.
    pub tcp: &'a TcpConfig,
    /// The network.
    pub topo: &'a Topology,
    /// The workload's flow-size distribution.
    pub cdf: &'a Cdf,
}

/// Makes the congestion control of a new connection to destination port `dport`.
pub type CcFactory = Box<dyn Fn(u16) -> Box<dyn CongestionControl>>;

/// The priority of a packet at a priority-scheduled port (smaller is more urgent), from the
/// packet, its flow's size and the segment size.
pub type PriorityFn = fn(&Packet, u64, u32) -> u32;

/// How a scheme's output ports queue packets.
#[derive(Clone, Copy, Debug)]
pub enum PortPlan {
    /// FIFO DropTail everywhere (`queue.*` limits at switches, `queue.host_limit_packets`
    /// at hosts).
    DropTail,
    /// FIFO DropTail with ECN threshold marking at switch ports (`queue.ecn_k_*`).
    EcnMarking,
    /// Priority scheduling everywhere: switch ports hold `switch_buffer` bytes, host ports
    /// `queue.host_limit_packets` full packets (0: unlimited).
    Priority {
        /// Buffer of every switch port, bytes.
        switch_buffer: u64,
        /// Priority of each packet.
        priority: PriorityFn,
    },
}

/// Everything a run of a scheme needs, built once at its start.
pub struct Parts {
    /// TCP parameters after the scheme's overrides.
    pub tcp: TcpParams,
    /// Output ports.
    pub ports: PortPlan,
    /// Congestion control of every connection.
    pub cc: CcFactory,
    /// Copies of each flow and their ports.
    pub policy: Box<dyn ReplicationPolicy>,
    /// SmartRep's probe cache, for schemes that choose ports by probing paths.
    pub hca: Option<Hca>,
    /// Multipath schemes: each flow is one connection of several subflows.
    pub multipath: Option<MultipathPlan>,
}

impl Parts {
    /// TCP NewReno over DropTail, one connection per flow: what a scheme changes from.
    pub fn plain(ctx: &Context) -> Parts {
        Parts {
            tcp: TcpParams::from_config(ctx.tcp),
            ports: PortPlan::DropTail,
            cc: Box::new(|_| Box::new(NewReno)),
            policy: Box::new(NoReplication),
            hca: None,
            multipath: None,
        }
    }

    /// The output port of `link`, whose sending node is a host when `host`.
    pub fn port(&self, link: &Link, host: bool, q: &QueueConfig) -> Port {
        let clock = TxClock::new(link.rate);
        let droptail = if host {
            DropTail {
                limit_packets: q.host_limit_packets,
                limit_bytes: 0,
            }
        } else {
            match q.limit_bytes {
                Some(b) => DropTail {
                    limit_packets: 0,
                    limit_bytes: b.0,
                },
                None => DropTail {
                    limit_packets: q.limit_packets,
                    limit_bytes: 0,
                },
            }
        };
        match self.ports {
            PortPlan::Priority { switch_buffer, .. } => {
                let full = (self.tcp.mss + self.tcp.header) as u64;
                let limit = if host {
                    droptail.limit_packets as u64 * full
                } else {
                    switch_buffer
                };
                Port::new_scheduled(clock, link.delay, limit)
            }
            PortPlan::EcnMarking if !host => {
                let (k_packets, k_bytes) = q.ecn_k(link.rate);
                let ecn = EcnThreshold {
                    limit: droptail,
                    k_packets,
                    k_bytes,
                };
                Port::new(clock, link.delay, Qdisc::Ecn(ecn))
            }
            _ => Port::new(clock, link.delay, Qdisc::DropTail(droptail)),
        }
    }

    /// The priority function of priority-scheduled ports, if the scheme has them.
    pub fn priority(&self) -> Option<PriorityFn> {
        match self.ports {
            PortPlan::Priority { priority, .. } => Some(priority),
            _ => None,
        }
    }
}

/// One transport scheme: its parameters' checks and what it builds for a run.
pub trait Scheme {
    /// Checks the parameters (against the TCP settings they depend on); errors name the field
    /// (`scheme.<parameter>`) and what is accepted.
    fn validate(&self, tcp: &TcpConfig) -> Result<(), ConfigError> {
        let _ = tcp;
        Ok(())
    }
    /// Builds the run's parts.
    fn build(&self, ctx: &Context) -> Parts;
}

/// The registry: one line per scheme, `Variant(ParameterType) = "name"`. It generates
/// [`SchemeConfig`] (tagged by `name`), the list of names and the dispatch to [`Scheme`].
macro_rules! schemes {
    ($( $(#[$doc:meta])* $variant:ident($ty:ty) = $name:literal, )*) => {
        /// The transport scheme and its parameters: `name` selects the variant, and the other
        /// keys of the `[scheme]` table are that scheme's parameters (and only those).
        #[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
        #[serde(tag = "name")]
        pub enum SchemeConfig {
            $( $(#[$doc])* #[serde(rename = $name)] $variant($ty), )*
        }

        impl SchemeConfig {
            /// Every scheme's name, in registry order.
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            /// The scheme's name.
            pub fn name(&self) -> &'static str {
                match self { $(SchemeConfig::$variant(_) => $name,)* }
            }

            /// The scheme's implementation.
            pub fn unit(&self) -> &dyn Scheme {
                match self { $(SchemeConfig::$variant(s) => s,)* }
            }

            /// The default parameters of scheme `name`, if it exists.
            pub fn with_defaults(name: &str) -> Option<SchemeConfig> {
                match name { $($name => Some(SchemeConfig::$variant(<$ty>::default())),)* _ => None }
            }

            fn parse_params(
                name: &str,
                params: serde_json::Value,
            ) -> Option<Result<SchemeConfig, serde_path_to_error::Error<serde_json::Error>>> {
                match name {
                    $($name => Some(serde_path_to_error::deserialize(params).map(SchemeConfig::$variant)),)*
                    _ => None,
                }
            }
        }
    };
}

schemes! {
    /// TCP NewReno, one connection per flow.
    Tcp(TcpScheme) = "tcp",
    /// RepFlow: flows up to a threshold on several connections with distinct ports.
    Repflow(RepflowScheme) = "repflow",
    /// RepFlow's copies on ports chosen by SmartRep's hash-collision avoidance.
    RepflowHca(RepflowHcaScheme) = "repflow-hca",
    /// SmartRep: replicas per flow size (RepNumAssign) on HCA ports.
    Smartrep(SmartrepScheme) = "smartrep",
    /// FullRep: one copy per link-disjoint path, on HCA ports.
    Fullrep(FullrepScheme) = "fullrep",
    /// DCTCP: ECN threshold marking and DCTCP senders.
    Dctcp(DctcpScheme) = "dctcp",
    /// RepFlow's replication over DCTCP.
    RepflowDctcp(RepflowDctcpScheme) = "repflow-dctcp",
    /// pFabric: priority-scheduled shallow ports and pFabric's minimal transport.
    Pfabric(PfabricScheme) = "pfabric",
    /// L²DCT over DCTCP-style marking.
    L2dct(L2dctScheme) = "l2dct",
    /// FA-DCTCP over DCTCP-style marking.
    FaDctcp(FaDctcpScheme) = "fa-dctcp",
    /// Multipath TCP: subflows on their own ECMP paths, LIA coupling.
    Mptcp(MptcpScheme) = "mptcp",
    /// MPTCP-L: short flows' segments on two subflows with fast loss detection.
    MptcpL(MptcpLScheme) = "mptcp-l",
}

impl Default for SchemeConfig {
    fn default() -> Self {
        SchemeConfig::Tcp(TcpScheme::default())
    }
}

impl SchemeConfig {
    /// Parses a `[scheme]` table (JSON object): `name` selects the scheme (default `tcp`),
    /// every other key must be one of its parameters. Errors name `scheme.<key>`.
    pub fn from_value(value: serde_json::Value) -> Result<SchemeConfig, ConfigError> {
        let serde_json::Value::Object(mut map) = value else {
            return Err(ConfigError::new(
                "scheme",
                "must be a table with `name` and the scheme's parameters",
            ));
        };
        let name = match map.remove("name") {
            Some(serde_json::Value::String(s)) => s,
            Some(other) => {
                return Err(ConfigError::new(
                    "scheme.name",
                    format!(
                        "must be a string, one of {}; got {other}",
                        Self::NAMES.join(", ")
                    ),
                ))
            }
            // As a missing `[scheme]` table: TCP.
            None => Self::default().name().to_string(),
        };
        let parsed =
            Self::parse_params(&name, serde_json::Value::Object(map)).ok_or_else(|| {
                ConfigError::new(
                    "scheme.name",
                    format!(
                        "unknown variant `{name}`, expected one of {}",
                        Self::NAMES
                            .iter()
                            .map(|n| format!("`{n}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })?;
        parsed.map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner().to_string();
            let msg = match inner.rfind(" at line ") {
                Some(i) => inner[..i].to_string(),
                None => inner,
            };
            if path == "." || msg.starts_with("unknown field `") {
                // An unknown key: serde names it in the message.
                let key = msg
                    .strip_prefix("unknown field `")
                    .and_then(|r| r.split('`').next())
                    .map(str::to_string);
                let params = Self::parameters(&name).join(", ");
                let takes = if params.is_empty() {
                    format!("scheme `{name}` takes no parameters")
                } else {
                    format!("the parameters of scheme `{name}`: {params}")
                };
                match key {
                    Some(k) => ConfigError::new(
                        format!("scheme.{k}"),
                        format!("not a parameter of this scheme ({takes})"),
                    ),
                    None => ConfigError::new("scheme", format!("{msg} ({takes})")),
                }
            } else {
                ConfigError::new(format!("scheme.{path}"), msg)
            }
        })
    }

    /// The parameter names of scheme `name` (none for an unknown name).
    pub fn parameters(name: &str) -> Vec<String> {
        Self::with_defaults(name)
            .and_then(|s| serde_json::to_value(s).ok())
            .and_then(|v| v.as_object().map(|m| m.keys().cloned().collect()))
            .map(|mut keys: Vec<String>| {
                keys.retain(|k| k != "name");
                keys
            })
            .unwrap_or_default()
    }

    /// Checks the scheme's parameters (see [`Scheme::validate`]).
    pub fn validate(&self, tcp: &TcpConfig) -> Result<(), ConfigError> {
        self.unit().validate(tcp)
    }

    /// Builds what a run of this scheme needs.
    pub fn build(&self, ctx: &Context) -> Parts {
        self.unit().build(ctx)
    }
}

/// Checks that `v` lies in [0, 1] (in (0, 1] when `lo_open`).
pub(crate) fn check_unit(field: &str, v: f64, lo_open: bool) -> Result<(), ConfigError> {
    let ok = v.is_finite() && v <= 1.0 && if lo_open { v > 0.0 } else { v >= 0.0 };
    if ok {
        return Ok(());
    }
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

/// Checks a replication scheme's copy count.
pub(crate) fn check_copies(copies: u32) -> Result<(), ConfigError> {
    if copies == 0 || copies > 64 {
        return Err(ConfigError::new(
            "scheme.copies",
            format!("must be between 1 and 64, got {copies}"),
        ));
    }
    Ok(())
}

/// Round trip of a full segment and its ACK over the longest host-to-host path, ps, and the
/// rate of host links, b/s.
pub(crate) fn longest_rtt(topo: &Topology, full: u32, header: u32) -> (Time, u64) {
    use crate::network::{FiveTuple, Path};
    let mut rtt = 0;
    for dst in 1..topo.n_hosts as u32 {
        let t = FiveTuple {
            src: 0,
            dst,
            sport: 40000,
            dport: crate::replication::BASE_PORT,
            proto: 6,
        };
        let one_way = |p: Path, bytes: u32| -> Time {
            p.links()
                .iter()
                .map(|&l| {
                    let link = &topo.links[l as usize];
                    TxClock::new(link.rate).tx(bytes) + link.delay
                })
                .sum()
        };
        rtt = rtt.max(one_way(topo.path(t), full) + one_way(topo.path(t.reversed()), header));
    }
    (rtt, topo.links[topo.out_links[0][0] as usize].rate.bps())
}
