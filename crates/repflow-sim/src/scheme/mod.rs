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
//!
//! Files, lowest first: `multipath` (the [`MultipathPlan`] a multipath scheme hands the event
//! loop), `unit` (the [`Scheme`] trait, [`Context`], [`Parts`]), `shared` (checks several
//! schemes use), one file per scheme, and this one: the registry, [`SchemeConfig`].

mod dctcp;
mod mptcp;
mod multipath;
mod pfabric;
mod repflow;
mod shared;
mod smartrep;
mod tcp;
mod unit;

pub use dctcp::{DctcpScheme, FaDctcpScheme, L2dctScheme, RepflowDctcpScheme};
pub use mptcp::{MptcpLScheme, MptcpScheme};
pub use multipath::{Coupling, Join, MultipathPlan, SubflowPlan, MAX_SUBFLOWS};
pub use pfabric::{priority, PfabricScheme, PfabricTransport};
pub use repflow::RepflowScheme;
pub use smartrep::{
    rep_num_assign, FullRep, FullrepScheme, ProbeCache, RepFlowHca, RepflowHcaScheme, ReplicaTable,
    SizeHistogram, SmartRep, SmartrepScheme, DEFAULT_UNIT_BYTES,
};
pub use tcp::TcpScheme;

pub use unit::{CcFactory, Context, Parts, PortPlan, PriorityFn, Scheme};

use crate::config::error::ConfigError;
use crate::config::sections::TcpConfig;
use serde::{Deserialize, Serialize};

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
