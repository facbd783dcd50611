//! TCP as a sans-IO state machine: a sender that owns sequence space, ACK processing,
//! fast retransmit / NewReno recovery (RFC 6582) and the retransmission timer (RFC 6298),
//! and a receiver that acknowledges cumulatively (optionally delayed). Congestion control is
//! a small trait, [`CongestionControl`], with [`NewReno`] as its first implementation.
//!
//! The state machines never see the network: they emit [`crate::packet::Packet`]s into an output buffer and
//! expose their timer deadlines; the simulator routes the packets and fires the timers.
//! Sequence numbers count segments (every segment is `mss` bytes but the last).

use crate::config::TcpConfig;
use crate::engine::Time;

/// The congestion window state that congestion-control algorithms update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Congestion window, segments.
    pub cwnd: u32,
    /// Acknowledged segments counted towards the next congestion-avoidance increase.
    pub cwnd_cnt: u32,
    /// Slow-start threshold, segments.
    pub ssthresh: u32,
}

/// Facts about an acknowledgement that a congestion-control algorithm may use.
#[derive(Clone, Copy, Debug)]
pub struct AckInfo {
    /// Segments newly acknowledged.
    pub acked: u32,
    /// The ACK carried an ECN echo.
    pub ece: bool,
    /// Cumulative acknowledgement (next segment the receiver expects).
    pub ack: u32,
    /// Next new segment the sender would send.
    pub snd_nxt: u32,
    /// Arrival time of the ACK.
    pub now: Time,
    /// Payload bytes the connection has sent so far (first transmissions).
    pub bytes_sent: u64,
}

/// A congestion-control algorithm: one small implementation per algorithm, driven by the
/// TCP sender (which owns loss detection, recovery and timers).
pub trait CongestionControl: Send {
    /// New data was acknowledged outside loss recovery.
    fn on_ack(&mut self, w: &mut Window, info: &AckInfo);
    /// Loss detected by duplicate ACKs: returns the new slow-start threshold.
    fn ssthresh_after_loss(&mut self, w: &Window, flight: u32) -> u32 {
        let _ = w;
        (flight / 2).max(2)
    }
    /// Retransmission timeout: returns the new slow-start threshold.
    fn ssthresh_after_timeout(&mut self, w: &Window, flight: u32) -> u32 {
        self.ssthresh_after_loss(w, flight)
    }
    /// A multipath connection's coupling before an ACK of one of its subflows (uncoupled
    /// algorithms ignore it).
    fn couple(&mut self, c: &Coupling) {
        let _ = c;
    }
    /// OLIA's smoothed loss interval of this subflow: segments acknowledged between its last
    /// two losses or since the last one, whichever is more (0 for other algorithms).
    fn loss_interval(&self) -> f64 {
        0.0
    }
}

/// What a coupled congestion control learns about its connection before an ACK of one of its
/// subflows (windows in segments, RTTs in picoseconds, over the established subflows with an
/// RTT sample).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Coupling {
    /// Sum of the subflows' windows (all established subflows).
    pub total_cwnd: f64,
    /// RFC 6356's `alpha` (LIA).
    pub alpha: f64,
    /// `Σ_p cwnd_p / rtt_p` (OLIA).
    pub sum_w_over_rtt: f64,
    /// This subflow's smoothed RTT (OLIA); 0 before a sample.
    pub own_rtt: f64,
    /// OLIA's `α_r` of this subflow.
    pub olia_alpha: f64,
}

/// Slow start's part of an ACK (RFC 3465, at most [`ABC_LIMIT`] per ACK, up to `ssthresh`):
/// returns the acknowledged segments left for congestion avoidance.
pub fn slow_start(w: &mut Window, acked: u32) -> u32 {
    if w.cwnd >= w.ssthresh {
        return acked;
    }
    let room = w.ssthresh - w.cwnd;
    w.cwnd += acked.min(room).min(ABC_LIMIT);
    acked - acked.min(room)
}

/// Applies a fractional window change accumulated in `acc` (segments, either sign): whole
/// segments move into `cwnd` (never below 1), the fraction stays. Coupled increases (LIA,
/// OLIA) add fractions of a segment per ACK. (A tolerance absorbs the rounding of sums such
/// as ten times 1/10.)
pub fn apply_fraction(acc: &mut f64, w: &mut Window) {
    while *acc >= 1.0 - 1e-9 {
        *acc = (*acc - 1.0).max(0.0);
        w.cwnd += 1;
    }
    while *acc <= -1.0 + 1e-9 {
        *acc = (*acc + 1.0).min(0.0);
        w.cwnd = w.cwnd.saturating_sub(1).max(1);
    }
}

/// An ACK of `acked` segments with nothing else set (tests of congestion controls).
/// A window of `cwnd` segments with slow-start threshold `ssthresh`, for tests.
#[cfg(test)]
pub(crate) fn test_window(cwnd: u32, ssthresh: u32) -> Window {
    Window {
        cwnd,
        cwnd_cnt: 0,
        ssthresh,
    }
}

#[cfg(test)]
pub(crate) fn test_ack(acked: u32) -> AckInfo {
    AckInfo {
        acked,
        ece: false,
        ack: 0,
        snd_nxt: 0,
        now: 0,
        bytes_sent: 0,
    }
}

/// Reno/NewReno window growth: slow start adds one segment per segment acknowledged,
/// congestion avoidance one segment per window.
#[derive(Clone, Copy, Debug, Default)]
pub struct NewReno;

/// Largest slow-start increase per ACK, segments (RFC 3465's limit L = 2·SMSS): a
/// cumulative ACK that covers many segments at once (after a hole is filled) must not turn
/// into a line-rate burst of that many new segments.
pub const ABC_LIMIT: u32 = 2;

/// The standard additive growth, shared by every algorithm that keeps Reno's increase:
/// slow start adds the segments acknowledged (at most [`ABC_LIMIT`] per ACK) up to
/// `ssthresh`; congestion avoidance adds one segment per window of acknowledged segments.
pub fn reno_increase(w: &mut Window, acked: u32) {
    let acked = slow_start(w, acked);
    if acked > 0 {
        w.cwnd_cnt += acked;
        while w.cwnd_cnt >= w.cwnd {
            w.cwnd_cnt -= w.cwnd;
            w.cwnd += 1;
        }
    }
}

impl CongestionControl for NewReno {
    fn on_ack(&mut self, w: &mut Window, info: &AckInfo) {
        reno_increase(w, info.acked);
    }
}

/// Sender connection states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SenderState {
    /// Not started.
    Idle,
    /// SYN sent, waiting for SYN-ACK.
    SynSent,
    /// Sending data.
    Established,
    /// Every segment acknowledged.
    Done,
    /// Stopped by the replication layer (another copy won).
    Cancelled,
}

/// Counters of one sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Wire bytes sent (SYN, data, retransmissions).
    pub wire_bytes: u64,
    /// Payload bytes sent, retransmissions included.
    pub payload_bytes: u64,
    /// Data segments retransmitted (`fast_retransmits + timeout_retransmits +
    /// detect_retransmits + atimer_retransmits`).
    pub retransmissions: u64,
    /// Retransmissions of loss recovery: fast retransmit on duplicate ACKs and NewReno's
    /// retransmission of the next hole on a partial ACK.
    pub fast_retransmits: u64,
    /// Retransmissions after a timeout: the first unacknowledged segment and the go-back-N
    /// resends of segments sent before that follow it.
    pub timeout_retransmits: u64,
    /// Retransmission timeouts (`syn_timeouts` included).
    pub timeouts: u64,
    /// Timeouts of the handshake (SYN resent).
    pub syn_timeouts: u64,
    /// MPTCP-L: retransmissions of segments the receiver reported lost by a gap in the
    /// Packet Sequence numbers ("fast detection").
    pub detect_retransmits: u64,
    /// MPTCP-L: retransmissions by the aggressive timer (no window cut).
    pub atimer_retransmits: u64,
}

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

pub mod detect;
mod receiver;
mod sack;
mod sender;

pub use receiver::Receiver;
pub use sack::Scoreboard;
pub use sender::Sender;

#[cfg(test)]
mod tests;
