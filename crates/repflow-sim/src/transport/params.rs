//! The per-run TCP parameters, in simulator units.

use crate::config::sections::{CwndGrowth, TcpConfig};
use crate::engine::Time;

/// Shared, per-run TCP parameters in simulator units.
#[derive(Clone, Copy, Debug)]
pub struct TcpParams {
    /// Maximum segment size.
    pub mss: u32,
    /// Header bytes per packet.
    pub header: u32,
    /// Initial window, segments.
    pub init_cwnd: u32,
    /// Minimum RTO, ps.
    pub min_rto: Time,
    /// Maximum RTO, ps.
    pub max_rto: Time,
    /// RTO before any RTT sample, ps.
    pub initial_rto: Time,
    /// Backoff factor.
    pub backoff: f64,
    /// Handshake before data.
    pub handshake: bool,
    /// Delayed ACKs.
    pub delayed_ack: bool,
    /// Delayed-ACK timeout, ps.
    pub delack_timeout: Time,
    /// Fast-retransmit threshold.
    pub dupack_threshold: u32,
    /// Receive-window cap, segments.
    pub max_window: u32,
    /// Slow-start threshold of a new connection, segments (`u32::MAX`: unlimited).
    pub initial_ssthresh: u32,
    /// SACK loss recovery (RFC 2018, RFC 6675) instead of NewReno's.
    pub sack: bool,
    /// Mark data packets ECN-capable.
    pub ecn: bool,
    /// With `Some(k)`: the RTO is `k` smoothed RTTs (backed off on timeouts, capped by
    /// `max_rto`, no `min_rto` floor), as MPTCP-L's simulations set it; `None`: RFC 6298.
    pub rto_rtts: Option<f64>,
    /// The window grows per ACK (ns-2, ns-3) instead of by segments acknowledged.
    pub per_ack_growth: bool,
    /// The flow's last segment carries FIN and is acknowledged at once (`tcp.fin_ack`).
    pub fin_ack: bool,
}

impl TcpParams {
    /// Converts the configuration.
    pub fn from_config(c: &TcpConfig) -> TcpParams {
        TcpParams {
            mss: c.mss,
            header: c.header,
            init_cwnd: c.init_cwnd,
            min_rto: c.min_rto.ps(),
            max_rto: c.max_rto.ps(),
            initial_rto: c.initial_rto.ps(),
            backoff: c.rto_backoff,
            handshake: c.handshake,
            delayed_ack: c.delayed_ack,
            delack_timeout: c.delayed_ack_timeout.ps(),
            dupack_threshold: c.dupack_threshold,
            max_window: c
                .max_window
                .map(|b| (b.0 / c.mss as u64).max(1).min(u32::MAX as u64) as u32)
                .unwrap_or(u32::MAX),
            initial_ssthresh: c.initial_ssthresh.unwrap_or(u32::MAX),
            sack: c.sack,
            ecn: false,
            rto_rtts: None,
            per_ack_growth: c.cwnd_growth == CwndGrowth::PerAck,
            fin_ack: c.fin_ack,
        }
    }

    /// Number of segments of a flow of `size` bytes (at least one).
    pub fn segments(&self, size: u64) -> u32 {
        size.div_ceil(self.mss as u64).max(1) as u32
    }

    /// Payload bytes of segment `seq` of a flow of `size` bytes.
    pub fn payload(&self, size: u64, seq: u32) -> u32 {
        let start = seq as u64 * self.mss as u64;
        (size.saturating_sub(start)).clamp(1, self.mss as u64) as u32
    }
}
