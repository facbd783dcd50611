//! The congestion window and the congestion-control interface: [`Window`], [`AckInfo`],
//! the [`CongestionControl`] trait with MPTCP's [`Coupling`], and Reno/NewReno growth.

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
    /// Segments the window-growth rule counts for this ACK (`tcp.cwnd_growth`): `acked`
    /// when the window grows by bytes acknowledged (RFC 3465, Linux), 1 when it grows per
    /// ACK (ns-2, ns-3). Congestion controls grow by this, and keep `acked` for everything
    /// else (DCTCP's marked fraction, OLIA's loss interval).
    pub grow: u32,
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
        grow: acked,
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
        reno_increase(w, info.grow);
    }
}
