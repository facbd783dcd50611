//! The run configuration: one serde schema shared by TOML files, the command line and the
//! Python API, validated up front with errors that name the field and what is accepted.

pub mod error;
pub mod sections;

use crate::scheme::SchemeConfig;
use crate::units::Duration;
pub use error::ConfigError;
pub use sections::{
    CwndGrowth, HashKind, PairPattern, QueueConfig, RoutingConfig, TcpConfig, TcpProfile,
    TopologyConfig, TopologyKind, TraceFlow, WorkloadConfig,
};
use serde::{Deserialize, Serialize};

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

impl Config {
    /// Parses a JSON configuration; errors name the field at fault. The `[scheme]` table is
    /// read by [`SchemeConfig::from_value`], so that an error in a scheme's parameters names
    /// `scheme.<parameter>`.
    pub fn from_json(text: &str) -> Result<Config, ConfigError> {
        let mut value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| ConfigError::new("config", format!("not valid JSON: {e}")))?;
        let scheme = value.as_object_mut().and_then(|m| m.remove("scheme"));
        if let Some(tcp) = value.as_object_mut().and_then(|m| m.get_mut("tcp")) {
            apply_profile(tcp)?;
        }
        let mut cfg: Config = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner().to_string();
            // serde_json appends " at line L column C"; drop it, the path says more.
            let msg = match inner.rfind(" at line ") {
                Some(i) => inner[..i].to_string(),
                None => inner,
            };
            ConfigError::new(if path == "." { "config".into() } else { path }, msg)
        })?;
        if let Some(s) = scheme {
            cfg.scheme = SchemeConfig::from_value(s)?;
        }
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
                if let Some(h) = t.hosts_per_edge {
                    if !(1..=256).contains(&h) {
                        return Err(ConfigError::new(
                            "topology.hosts_per_edge",
                            format!("hosts per edge switch must be 1–256 (unset: k/2), got {h}"),
                        ));
                    }
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
        if tcp.initial_ssthresh.is_some_and(|s| s < 2) {
            return Err(ConfigError::new(
                "tcp.initial_ssthresh",
                "must be at least 2 segments (RFC 5681's smallest ssthresh), or unset for none",
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
        if self.queue.ecn_k_packets == Some(0) {
            return Err(ConfigError::new(
                "queue.ecn_k_packets",
                "must be at least 1 packet",
            ));
        }
        if self.queue.ecn_k_bytes.is_some_and(|b| b.0 == 0) {
            return Err(ConfigError::new("queue.ecn_k_bytes", "must be positive"));
        }
        self.scheme.validate(&self.tcp)?;
        Ok(())
    }
}

/// Fills the `[tcp]` table's missing fields from its profile (`dc` when none is named), so
/// that fields given explicitly override the profile and the result records every value.
fn apply_profile(tcp: &mut serde_json::Value) -> Result<(), ConfigError> {
    let Some(table) = tcp.as_object_mut() else {
        return Ok(()); // the schema check reports the type
    };
    let profile: TcpProfile = match table.get("profile") {
        None => TcpProfile::Dc,
        Some(v) => serde_json::from_value(v.clone()).map_err(|_| {
            ConfigError::new(
                "tcp.profile",
                format!(
                    "unknown profile {v}; one of {}",
                    TcpProfile::NAMES.join(", ")
                ),
            )
        })?,
    };
    let base = serde_json::to_value(TcpConfig::for_profile(profile))
        .map_err(|e| ConfigError::new("tcp.profile", e.to_string()))?;
    if let serde_json::Value::Object(base) = base {
        for (k, v) in base {
            table.entry(k).or_insert(v);
        }
    }
    Ok(())
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
    fn a_tcp_profile_sets_every_field_and_explicit_fields_override_it() {
        let c = Config::from_json(r#"{"tcp": {"profile": "linux"}}"#).unwrap();
        assert_eq!(c.tcp, TcpConfig::for_profile(TcpProfile::Linux));
        assert_eq!(c.tcp.min_rto, Duration(200_000_000_000));
        assert!(c.tcp.sack && c.tcp.delayed_ack && c.tcp.max_window.is_none());
        let c = Config::from_json(r#"{"tcp": {"profile": "linux", "min_rto": "5ms"}}"#).unwrap();
        assert_eq!(c.tcp.min_rto, Duration(5_000_000_000));
        assert_eq!(c.tcp.initial_rto, Duration(1_000_000_000_000));
        // The resolved configuration reads back to itself.
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(Config::from_json(&text).unwrap(), c);
        let e = Config::from_json(r#"{"tcp": {"profile": "bsd"}}"#).unwrap_err();
        assert_eq!(e.field, "tcp.profile");
        assert!(e.message.contains("dc, linux"), "{e}");
        assert_eq!(Config::default().tcp.profile, TcpProfile::Dc);
    }

    #[test]
    fn the_ns3_2014_profile_is_ns3_19s_tcp() {
        let c = Config::from_json(r#"{"tcp": {"profile": "ns3-2014"}}"#).unwrap();
        c.validate().unwrap();
        let t = &c.tcp;
        assert_eq!(t.profile, TcpProfile::Ns3Of2014);
        assert_eq!(
            (t.mss, t.init_cwnd, t.initial_ssthresh),
            (536, 1, Some(122))
        );
        assert_eq!(t.min_rto, Duration(200_000_000_000));
        assert!(t.delayed_ack && !t.sack);
        assert_eq!(t.max_window, Some(crate::units::Bytes(65_535)));
        // the name reads back
        let text = serde_json::to_string(&c).unwrap();
        assert!(text.contains("\"ns3-2014\""), "{text}");
    }

    #[test]
    fn the_ns2_profile_is_ns2_35s_stock_one_way_tcp() {
        let c = Config::from_json(r#"{"tcp": {"profile": "ns2"}}"#).unwrap();
        c.validate().unwrap();
        let t = &c.tcp;
        assert_eq!((t.mss, t.header, t.init_cwnd), (1000, 40, 2));
        assert_eq!(t.min_rto, Duration(200_000_000_000));
        assert_eq!(t.initial_rto, Duration(3_000_000_000_000));
        assert_eq!(t.max_window, Some(crate::units::Bytes(20_000)));
        assert_eq!(t.initial_ssthresh, Some(20));
        assert!(!t.sack && !t.delayed_ack);
    }

    #[test]
    fn errors_name_the_field() {
        let e = Config::from_json(r#"{"topology": {"k": 5}}"#).unwrap_err();
        assert_eq!(e.field, "topology.k");
        let e = Config::from_json(r#"{"topology": {"hosts_per_edge": 0}}"#).unwrap_err();
        assert_eq!(e.field, "topology.hosts_per_edge");
        assert!(e.message.contains("1–256"), "{e}");
        let e = Config::from_json(r#"{"topology": {"kind": "torus"}}"#).unwrap_err();
        assert_eq!(e.field, "topology.kind");
        assert!(e.message.contains("fat-tree"), "{e}");
        let e = Config::from_json(r#"{"workload": {"load": 1.0}}"#).unwrap_err();
        assert_eq!(e.field, "workload.load");
        let e = Config::from_json(r#"{"workload": {"duration": "soon"}}"#).unwrap_err();
        assert_eq!(e.field, "workload.duration");
        // A quantity needs a unit, as a string or a number.
        for text in [
            r#"{"tcp": {"min_rto": "10"}}"#,
            r#"{"tcp": {"min_rto": 10}}"#,
        ] {
            let e = Config::from_json(text).unwrap_err();
            assert_eq!(e.field, "tcp.min_rto");
            assert!(
                e.message.contains("'10' has no unit: give one, e.g. 10ms"),
                "{e}"
            );
        }
        let e = Config::from_json(r#"{"tcp": {"max_window": 65535}}"#).unwrap_err();
        assert_eq!(e.field, "tcp.max_window");
        let e = Config::from_json(r#"{"topology": {"link_rate": "-1Gbps"}}"#).unwrap_err();
        assert_eq!(e.field, "topology.link_rate");
        let e = Config::from_json(r#"{"scheme": {"name": "carrier-pigeon"}}"#).unwrap_err();
        assert_eq!(e.field, "scheme.name");
        // A scheme takes only its own parameters, each checked under its own name.
        let e = Config::from_json(r#"{"scheme": {"name": "tcp", "copies": 2}}"#).unwrap_err();
        assert_eq!(e.field, "scheme.copies");
        assert!(e.message.contains("takes no parameters"), "{e}");
        let e = Config::from_json(r#"{"scheme": {"name": "repflow", "copeis": 2}}"#).unwrap_err();
        assert_eq!(e.field, "scheme.copeis");
        assert!(e.message.contains("cancel, copies, threshold"), "{e}");
        let e = Config::from_json(r#"{"scheme": {"name": "repflow", "copies": 0}}"#).unwrap_err();
        assert_eq!(e.field, "scheme.copies");
        let e =
            Config::from_json(r#"{"scheme": {"name": "repflow", "copies": "two"}}"#).unwrap_err();
        assert_eq!(e.field, "scheme.copies");
        let e = Config::from_json(r#"{"scheme": {"name": "dctcp", "g": 2}}"#).unwrap_err();
        assert_eq!(e.field, "scheme.g");
        // Parameter names of earlier releases are still read.
        let c = Config::from_json(r#"{"scheme": {"name": "l2dct", "l2dct_w_max": 1.5}}"#).unwrap();
        assert!(matches!(c.scheme, SchemeConfig::L2dct(ref p) if p.w_max == 1.5));
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
