//! The DCTCP family: switch ports mark ECN above a threshold K and ECN-capable senders react
//! to the fraction of marked packets. DCTCP (Alizadeh et al., SIGCOMM 2010), RepFlow over
//! DCTCP, L²DCT (Munir et al., INFOCOM 2013) and FA-DCTCP (Joy and Nayak, 2015) differ only
//! in how the sender turns that estimate into its window (see [`crate::cc`]).

use super::repflow::{RepflowScheme, DEFAULT_THRESHOLD};
use super::shared::{check_copies, check_unit};
use super::unit::{CcFactory, Context, Parts, PortPlan, Scheme};
use crate::cc::{Dctcp, FaDctcp, L2dct, L2dctParams};
use crate::config::error::ConfigError;
use crate::config::sections::TcpConfig;
use crate::units::Bytes;
use serde::{Deserialize, Serialize};

/// Gain g of the α moving average (DCTCP paper: 1/16).
const DEFAULT_G: f64 = 1.0 / 16.0;
/// α of a new connection (ns-2's DCTCP: 0; Linux: 1).
const DEFAULT_ALPHA_INIT: f64 = 0.0;

/// ECN-capable senders over marking switch ports, with congestion control `cc`.
fn ecn_parts(ctx: &Context, cc: CcFactory) -> Parts {
    let mut parts = Parts::plain(ctx);
    parts.tcp.ecn = true;
    parts.ports = PortPlan::EcnMarking;
    parts.cc = cc;
    parts
}

/// Checks the DCTCP estimator's parameters.
fn check_estimator(g: f64, alpha_init: f64) -> Result<(), ConfigError> {
    check_unit("scheme.g", g, true)?;
    check_unit("scheme.alpha_init", alpha_init, false)
}

/// DCTCP's parameters.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DctcpScheme {
    /// Gain g of the α moving average, 0 < g ≤ 1 (DCTCP paper: 1/16).
    #[serde(alias = "dctcp_g")]
    pub g: f64,
    /// α of a new connection, 0 ≤ α ≤ 1 (ns-2's DCTCP: 0; Linux: 1).
    #[serde(alias = "dctcp_alpha_init")]
    pub alpha_init: f64,
}

impl Default for DctcpScheme {
    fn default() -> Self {
        DctcpScheme {
            g: DEFAULT_G,
            alpha_init: DEFAULT_ALPHA_INIT,
        }
    }
}

impl Scheme for DctcpScheme {
    fn validate(&self, _tcp: &TcpConfig) -> Result<(), ConfigError> {
        check_estimator(self.g, self.alpha_init)
    }

    fn build(&self, ctx: &Context) -> Parts {
        let (g, a) = (self.g, self.alpha_init);
        ecn_parts(ctx, Box::new(move |_| Box::new(Dctcp::new(g, a))))
    }
}

/// RepFlow's replication over DCTCP.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RepflowDctcpScheme {
    /// Flows of at most this many bytes are replicated.
    pub threshold: Bytes,
    /// Copies of a replicated flow (the original included), 1–64.
    pub copies: u32,
    /// Stop the other copies once one completes.
    pub cancel: bool,
    /// DCTCP's gain g.
    #[serde(alias = "dctcp_g")]
    pub g: f64,
    /// DCTCP's initial α.
    #[serde(alias = "dctcp_alpha_init")]
    pub alpha_init: f64,
}

impl Default for RepflowDctcpScheme {
    fn default() -> Self {
        RepflowDctcpScheme {
            threshold: DEFAULT_THRESHOLD,
            copies: 2,
            cancel: false,
            g: DEFAULT_G,
            alpha_init: DEFAULT_ALPHA_INIT,
        }
    }
}

impl Scheme for RepflowDctcpScheme {
    fn validate(&self, _tcp: &TcpConfig) -> Result<(), ConfigError> {
        check_copies(self.copies)?;
        check_estimator(self.g, self.alpha_init)
    }

    fn build(&self, ctx: &Context) -> Parts {
        let (g, a) = (self.g, self.alpha_init);
        let mut parts = ecn_parts(ctx, Box::new(move |_| Box::new(Dctcp::new(g, a))));
        let replication = RepflowScheme {
            threshold: self.threshold,
            copies: self.copies,
            cancel: self.cancel,
        };
        parts.policy = Box::new(replication.policy());
        parts
    }
}

/// L²DCT's parameters (defaults from the public ns-3 port of L²DCT).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct L2dctScheme {
    /// DCTCP's gain g.
    #[serde(alias = "dctcp_g")]
    pub g: f64,
    /// DCTCP's initial α.
    #[serde(alias = "dctcp_alpha_init")]
    pub alpha_init: f64,
    /// Weight of a flow that has sent little (2.5).
    #[serde(alias = "l2dct_w_max")]
    pub w_max: f64,
    /// Weight of a flow that has sent much (0.125).
    #[serde(alias = "l2dct_w_min")]
    pub w_min: f64,
    /// Bytes sent up to which the weight is `w_max` (200 segments).
    #[serde(alias = "l2dct_from")]
    pub from: Bytes,
    /// Bytes sent from which the weight is `w_min` (1000 segments).
    #[serde(alias = "l2dct_to")]
    pub to: Bytes,
}

impl Default for L2dctScheme {
    fn default() -> Self {
        L2dctScheme {
            g: DEFAULT_G,
            alpha_init: DEFAULT_ALPHA_INIT,
            w_max: 2.5,
            w_min: 0.125,
            from: Bytes(200 * 1460),
            to: Bytes(1000 * 1460),
        }
    }
}

impl Scheme for L2dctScheme {
    fn validate(&self, _tcp: &TcpConfig) -> Result<(), ConfigError> {
        check_estimator(self.g, self.alpha_init)?;
        if !(self.w_min.is_finite() && self.w_min > 0.0) {
            return Err(ConfigError::new(
                "scheme.w_min",
                "must be a positive number",
            ));
        }
        if !(self.w_max.is_finite() && self.w_max >= self.w_min) {
            return Err(ConfigError::new(
                "scheme.w_max",
                "must be a number at least scheme.w_min",
            ));
        }
        if self.to < self.from {
            return Err(ConfigError::new(
                "scheme.to",
                "must be at least scheme.from",
            ));
        }
        Ok(())
    }

    fn build(&self, ctx: &Context) -> Parts {
        let (g, a) = (self.g, self.alpha_init);
        let p = L2dctParams {
            w_max: self.w_max,
            w_min: self.w_min,
            from_bytes: self.from.0,
            to_bytes: self.to.0,
        };
        ecn_parts(ctx, Box::new(move |_| Box::new(L2dct::new(g, a, p))))
    }
}

/// FA-DCTCP's parameters.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FaDctcpScheme {
    /// DCTCP's gain g.
    #[serde(alias = "dctcp_g")]
    pub g: f64,
    /// DCTCP's initial α.
    #[serde(alias = "dctcp_alpha_init")]
    pub alpha_init: f64,
    /// A flow is long once it has sent more than this (paper: 1 MB).
    #[serde(alias = "fa_threshold")]
    pub threshold: Bytes,
    /// Destination ports `[first, last]` of long-flow services: a connection to one of them
    /// is long from its first byte. Unset: classify by `threshold` only.
    #[serde(alias = "fa_long_ports")]
    pub long_ports: Option<[u16; 2]>,
}

impl Default for FaDctcpScheme {
    fn default() -> Self {
        FaDctcpScheme {
            g: DEFAULT_G,
            alpha_init: DEFAULT_ALPHA_INIT,
            threshold: Bytes(1_000_000),
            long_ports: None,
        }
    }
}

impl Scheme for FaDctcpScheme {
    fn validate(&self, _tcp: &TcpConfig) -> Result<(), ConfigError> {
        check_estimator(self.g, self.alpha_init)?;
        if let Some([a, b]) = self.long_ports {
            if a > b {
                return Err(ConfigError::new(
                    "scheme.long_ports",
                    "must be [first, last] with first ≤ last",
                ));
            }
        }
        Ok(())
    }

    fn build(&self, ctx: &Context) -> Parts {
        let (g, alpha, threshold, ports) =
            (self.g, self.alpha_init, self.threshold.0, self.long_ports);
        ecn_parts(
            ctx,
            Box::new(move |dport| {
                let long = ports.is_some_and(|[a, b]| (a..=b).contains(&dport));
                Box::new(FaDctcp::new(g, alpha, threshold, long))
            }),
        )
    }
}
