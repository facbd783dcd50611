//! Multipath TCP (RFC 8684) and MPTCP-L.
//!
//! **MPTCP**: each flow is one connection of `subflows` TCP subflows, each with its own
//! source port (so ECMP hashes it on its own), sharing the flow's data-level sequence space.
//! The scheduler gives the next data segment to the subflow with the lowest smoothed RTT
//! that has window space (Linux's default); the receiver reassembles at data level and the
//! flow completes when it holds every byte. Subflows grow their windows by LIA (RFC 6356)
//! or, uncoupled, each by NewReno. A subflow that times out has its unacknowledged data
//! reinjected on the others (as Linux does). Subflows join all at once at the start (what
//! simulators usually assume) or after the first subflow's first round trip (what the Linux
//! kernel does: MP_JOIN waits for the MP_CAPABLE handshake).
//!
//! **MPTCP-L** (Wang, Zhou and Sun, CloudNet 2016): flows of at most `threshold` bytes use
//! two subflows and send every segment on both (a redundant scheduler), with MPTCP-L's loss
//! detection on each subflow ([`crate::transport::detect`]): Packet Sequence gaps reported
//! by the receiver, resent within about one RTT, and an aggressive timer of `atimer_rtts`
//! RTTs that resends the first unacknowledged segment without cutting the window. Longer
//! flows are standard MPTCP over `subflows` subflows.

use super::multipath::{Coupling, Join, MultipathPlan, SubflowPlan, MAX_SUBFLOWS};
use super::unit::{CcFactory, Context, Parts, Scheme};
use crate::config::error::ConfigError;
use crate::config::sections::TcpConfig;
use crate::transport::detect::DetectParams;
use crate::transport::{CongestionControl, NewReno};
use crate::units::Bytes;
use serde::{Deserialize, Serialize};

fn check_subflows(field: &str, n: u32) -> Result<(), ConfigError> {
    if n == 0 || n > MAX_SUBFLOWS {
        return Err(ConfigError::new(
            field,
            format!("must be between 1 and {MAX_SUBFLOWS}, got {n}"),
        ));
    }
    Ok(())
}

fn check_rtts(field: &str, v: Option<f64>, zero_ok: bool) -> Result<(), ConfigError> {
    match v {
        Some(k) if !k.is_finite() || k < 0.0 || (k == 0.0 && !zero_ok) || k > 1000.0 => {
            Err(ConfigError::new(
                field,
                format!(
                    "must be a number of RTTs, {} x ≤ 1000, got {k}",
                    if zero_ok { "0 ≤" } else { "0 <" }
                ),
            ))
        }
        _ => Ok(()),
    }
}

fn cc_factory(coupling: Coupling) -> CcFactory {
    match coupling {
        Coupling::Lia => {
            Box::new(|_| Box::new(crate::cc::Lia::new()) as Box<dyn CongestionControl>)
        }
        Coupling::Uncoupled => Box::new(|_| Box::new(NewReno)),
        Coupling::Olia => {
            Box::new(|_| Box::new(crate::cc::Olia::new()) as Box<dyn CongestionControl>)
        }
    }
}

/// MPTCP's parameters.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MptcpScheme {
    /// Subflows per connection, 1–64 (8, as in the MPTCP-in-data-centers studies).
    pub subflows: u32,
    /// Congestion-control coupling: `lia`, `olia` or `uncoupled`.
    pub coupling: Coupling,
    /// Subflow join timing: `start` or `after-rtt`.
    pub join: Join,
    /// RTO as this many smoothed RTTs (no minimum); unset: RFC 6298 with `tcp.min_rto`.
    pub rto_rtts: Option<f64>,
}

impl Default for MptcpScheme {
    fn default() -> Self {
        MptcpScheme {
            subflows: 8,
            coupling: Coupling::Lia,
            join: Join::Start,
            rto_rtts: None,
        }
    }
}

impl Scheme for MptcpScheme {
    fn validate(&self, _tcp: &TcpConfig) -> Result<(), ConfigError> {
        check_subflows("scheme.subflows", self.subflows)?;
        check_rtts("scheme.rto_rtts", self.rto_rtts, false)
    }

    fn build(&self, ctx: &Context) -> Parts {
        let plan = SubflowPlan {
            subflows: self.subflows,
            redundant: false,
            detect: None,
        };
        let mut parts = Parts::plain(ctx);
        parts.tcp.rto_rtts = self.rto_rtts;
        parts.cc = cc_factory(self.coupling);
        parts.multipath = Some(MultipathPlan {
            long: plan,
            short_threshold: None,
            short: plan,
            coupling: self.coupling,
            join: self.join,
        });
        parts
    }
}

/// MPTCP-L's parameters.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MptcpLScheme {
    /// Flows of at most this many bytes are latency-sensitive (the paper's 1 MB).
    pub threshold: Bytes,
    /// Subflows of a latency-sensitive flow, each carrying every segment (the paper's 2).
    pub short_subflows: u32,
    /// Subflows of a longer flow (standard MPTCP), 1–64.
    pub subflows: u32,
    /// Congestion-control coupling of long flows' subflows: `lia`, `olia` or `uncoupled` (a short
    /// flow's redundant subflows are each their own NewReno: they carry the same data).
    pub coupling: Coupling,
    /// Subflow join timing: `start` or `after-rtt`.
    pub join: Join,
    /// Packet Sequence loss detection on short flows' subflows.
    pub detect: bool,
    /// Aggressive timer, smoothed RTTs (the paper's 2; 0: off).
    pub atimer_rtts: f64,
    /// How long the sender keeps a Packet Sequence → segment entry, smoothed RTTs (the
    /// paper's 2).
    pub table_rtts: f64,
    /// A detected loss halves the window once per window of data, as fast retransmit does
    /// (the paper does not say; `false` resends without a cut).
    pub cut_on_detect: bool,
    /// RTO as this many smoothed RTTs (no minimum), for every subflow; unset: RFC 6298.
    pub rto_rtts: Option<f64>,
}

impl Default for MptcpLScheme {
    fn default() -> Self {
        MptcpLScheme {
            threshold: Bytes(1_000_000),
            short_subflows: 2,
            subflows: 8,
            coupling: Coupling::Lia,
            join: Join::Start,
            detect: true,
            atimer_rtts: 2.0,
            table_rtts: 2.0,
            cut_on_detect: true,
            rto_rtts: None,
        }
    }
}

impl Scheme for MptcpLScheme {
    fn validate(&self, _tcp: &TcpConfig) -> Result<(), ConfigError> {
        check_subflows("scheme.subflows", self.subflows)?;
        check_subflows("scheme.short_subflows", self.short_subflows)?;
        check_rtts("scheme.atimer_rtts", Some(self.atimer_rtts), true)?;
        check_rtts("scheme.table_rtts", Some(self.table_rtts), false)?;
        check_rtts("scheme.rto_rtts", self.rto_rtts, false)
    }

    fn build(&self, ctx: &Context) -> Parts {
        let mut parts = Parts::plain(ctx);
        parts.tcp.rto_rtts = self.rto_rtts;
        parts.cc = cc_factory(self.coupling);
        let detect = self.detect.then_some(DetectParams {
            atimer_rtts: self.atimer_rtts,
            keep_rtts: self.table_rtts,
            cut_on_detect: self.cut_on_detect,
        });
        parts.multipath = Some(MultipathPlan {
            long: SubflowPlan {
                subflows: self.subflows,
                redundant: false,
                detect: None,
            },
            short_threshold: Some(self.threshold.0),
            short: SubflowPlan {
                subflows: self.short_subflows,
                redundant: true,
                detect,
            },
            coupling: self.coupling,
            join: self.join,
        });
        parts
    }
}
