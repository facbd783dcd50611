//! pFabric (Alizadeh et al., SIGCOMM 2013), as the RepFlow paper runs it: switch ports with a
//! small buffer that serve and drop by priority, and a minimal transport on the hosts.
//!
//! Every data packet carries its flow's remaining bytes (from this segment to the end of the
//! flow) as its priority; smaller is more urgent, and control packets (SYN, ACK) carry 0.
//! A port sends the packet of highest priority, except that among the packets of the flow
//! that holds it the earliest queued goes first (pFabric's rule against reordering and
//! starvation within a flow). When an arrival would overflow the buffer, the
//! lowest-priority packet of the queue, the arrival included, is dropped (the latest queued
//! among equals).
//!
//! The transport is the simulator's TCP with pFabric's settings (see [`PfabricTransport`]):
//! it starts at line rate with a window of about one bandwidth-delay product, never slow
//! starts beyond it, detects loss only by a small fixed timeout (about three RTTs) and then
//! goes back to the first unacknowledged segment.

use super::shared::longest_rtt;
use super::unit::{Context, Parts, PortPlan, Scheme};
use crate::config::error::ConfigError;
use crate::config::sections::TcpConfig;
use crate::packet::{kind, Packet};
use crate::transport::{AckInfo, CongestionControl, Window};
use crate::units::{Bytes, Duration, PS_PER_SEC};
use serde::{Deserialize, Serialize};

/// pFabric's parameters.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PfabricScheme {
    /// Buffer of every switch port (RepFlow paper, after pFabric: 36 KB).
    #[serde(alias = "pfabric_buffer")]
    pub buffer: Bytes,
    /// Initial (and largest) window in segments; unset = one bandwidth-delay product of the
    /// longest host-to-host path, rounded up.
    #[serde(alias = "pfabric_window")]
    pub window: Option<u32>,
    /// Fixed retransmission timeout; unset = 3 × the longest path's round trip.
    #[serde(alias = "pfabric_rto")]
    pub rto: Option<Duration>,
}

impl Default for PfabricScheme {
    fn default() -> Self {
        PfabricScheme {
            buffer: Bytes(36_000),
            window: None,
            rto: None,
        }
    }
}

impl Scheme for PfabricScheme {
    fn validate(&self, tcp: &TcpConfig) -> Result<(), ConfigError> {
        let full = tcp.mss + tcp.header;
        if self.buffer.0 < full as u64 {
            return Err(ConfigError::new(
                "scheme.buffer",
                format!("must hold at least one full packet ({full} B)"),
            ));
        }
        if self.window == Some(0) {
            return Err(ConfigError::new(
                "scheme.window",
                "must be at least 1 segment",
            ));
        }
        if self.rto.is_some_and(|d| d.ps() == 0) {
            return Err(ConfigError::new("scheme.rto", "must be positive"));
        }
        Ok(())
    }

    /// Priority ports; TCP with a fixed window of about one BDP and a fixed timeout as its
    /// only loss detection (the duplicate-ACK threshold is set out of reach).
    fn build(&self, ctx: &Context) -> Parts {
        let mut parts = Parts::plain(ctx);
        let full = ctx.tcp.mss + ctx.tcp.header;
        let (rtt, bps) = longest_rtt(ctx.topo, full, ctx.tcp.header);
        let bdp = (bps as u128 * rtt as u128).div_ceil(8 * PS_PER_SEC as u128) as u64;
        let window = self
            .window
            .unwrap_or_else(|| bdp.div_ceil(full as u64).max(1) as u32);
        let rto = self.rto.map_or(3 * rtt, |d| d.ps());
        let tcp = &mut parts.tcp;
        tcp.init_cwnd = window;
        tcp.max_window = window;
        tcp.min_rto = rto;
        tcp.max_rto = rto;
        tcp.initial_rto = rto;
        tcp.backoff = 1.0;
        tcp.dupack_threshold = u32::MAX;
        parts.ports = PortPlan::Priority {
            switch_buffer: self.buffer.0,
            priority,
        };
        parts.cc = Box::new(move |_| Box::new(PfabricTransport { window }));
        parts
    }
}

/// pFabric priority of a packet of a flow of `size` bytes sent with segments of `mss`
/// payload bytes: a data segment's is the flow's bytes from its first byte to the end
/// (saturated at `u32::MAX`), a control packet's 0.
#[inline]
pub fn priority(pkt: &Packet, size: u64, mss: u32) -> u32 {
    if pkt.kind == kind::DATA {
        size.saturating_sub(pkt.seq as u64 * mss as u64)
            .min(u32::MAX as u64) as u32
    } else {
        0
    }
}

/// pFabric's window control: a fixed window (the initial window, about one BDP) that a
/// timeout shrinks to one segment and that then grows back by one segment per segment
/// acknowledged, up to the fixed window. (Loss is detected by timeout only; the sender's
/// duplicate-ACK threshold is set out of reach.)
#[derive(Clone, Copy, Debug)]
pub struct PfabricTransport {
    /// The window a flow starts with and never exceeds, segments.
    pub window: u32,
}

impl CongestionControl for PfabricTransport {
    fn on_ack(&mut self, w: &mut Window, info: &AckInfo) {
        w.cwnd = (w.cwnd + info.acked).min(self.window);
    }
    fn ssthresh_after_loss(&mut self, _w: &Window, _flight: u32) -> u32 {
        self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::test_window;

    fn p(conn: u32, seq: u32) -> Packet {
        Packet {
            conn,
            seq,
            bytes: 1500,
            kind: kind::DATA,
            ..Packet::default()
        }
    }

    #[test]
    fn priority_is_the_remaining_bytes_of_data_and_zero_for_control() {
        // A 3,000-byte flow in segments of 1,460 bytes: 3000, 1540 and 80 bytes remain.
        let prios: Vec<u32> = (0..3).map(|s| priority(&p(0, s), 3000, 1460)).collect();
        assert_eq!(prios, [3000, 1540, 80]);
        let ack = Packet {
            kind: kind::ACK,
            ..p(0, 1)
        };
        assert_eq!(priority(&ack, 3000, 1460), 0);
        assert_eq!(priority(&p(0, 0), 1 << 40, 1460), u32::MAX);
    }

    #[test]
    fn window_is_fixed_and_regrows_after_a_timeout() {
        let mut cc = PfabricTransport { window: 8 };
        let mut w = test_window(1, 8);
        let info = AckInfo {
            acked: 3,
            grow: 3,
            ece: false,
            ack: 3,
            snd_nxt: 4,
            now: 0,
            bytes_sent: 0,
        };
        cc.on_ack(&mut w, &info);
        assert_eq!(w.cwnd, 4);
        cc.on_ack(&mut w, &info);
        cc.on_ack(&mut w, &info);
        assert_eq!(w.cwnd, 8);
    }
}
