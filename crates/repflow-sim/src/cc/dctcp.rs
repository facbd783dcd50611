//! DCTCP (Alizadeh et al., SIGCOMM 2010): the sender keeps α, an estimate of the fraction of
//! marked packets, updated once per window of data as α ← (1 − g)·α + g·F, and when an ACK
//! echoes congestion it cuts cwnd ← cwnd·(1 − α/2), at most once per window. Growth is
//! Reno's; losses are handled like Reno's.

use crate::transport::{reno_increase, AckInfo, CongestionControl, Window};

/// DCTCP's per-window estimate of the extent of congestion, shared by every DCTCP-style
/// algorithm. Feed it every ACK; it says when the window must be cut and with which α.
#[derive(Clone, Copy, Debug)]
pub struct AlphaEstimator {
    /// Gain g of the moving average.
    pub g: f64,
    /// Current estimate α ∈ [0, 1].
    pub alpha: f64,
    /// The observation window ends when this segment is acknowledged (`None` before the
    /// first ACK).
    win_end: Option<u32>,
    acked: u32,
    marked: u32,
    /// No further cut, and no growth, until the ACK passes this segment: one cut per window
    /// of data, as TCP's congestion-window-reduced state (RFC 3168).
    cut_end: Option<u32>,
}

/// What an ACK means for the window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EcnAction {
    /// Cut the window now; the payload is α.
    Cut(f64),
    /// A cut happened within the current window: neither cut nor grow.
    Hold,
    /// Grow as usual.
    Grow,
}

impl AlphaEstimator {
    /// An estimator with gain `g` and initial α `alpha0`.
    pub fn new(g: f64, alpha0: f64) -> AlphaEstimator {
        AlphaEstimator {
            g,
            alpha: alpha0,
            win_end: None,
            acked: 0,
            marked: 0,
            cut_end: None,
        }
    }

    /// Accounts for one ACK and says what to do with the window: cut (the ACK carries an ECN
    /// echo and every segment outstanding at the last cut has been acknowledged), hold (still
    /// inside the window of the last cut) or grow. α is updated first when the ACK closes an
    /// observation window.
    pub fn on_ack(&mut self, info: &AckInfo) -> EcnAction {
        self.acked += info.acked;
        if info.ece {
            self.marked += info.acked;
        }
        let end = *self.win_end.get_or_insert(info.snd_nxt);
        if info.ack >= end {
            if self.acked > 0 {
                let f = self.marked as f64 / self.acked as f64;
                self.alpha = (1.0 - self.g) * self.alpha + self.g * f;
            }
            self.acked = 0;
            self.marked = 0;
            self.win_end = Some(info.snd_nxt.max(info.ack + 1));
        }
        let in_cwr = self.cut_end.is_some_and(|c| info.ack <= c);
        if in_cwr {
            EcnAction::Hold
        } else if info.ece {
            self.cut_end = Some(info.snd_nxt);
            EcnAction::Cut(self.alpha)
        } else {
            EcnAction::Grow
        }
    }
}

/// Cuts the window by the fraction `b/2` (b = α for DCTCP), rounding the reduction down as
/// Linux's DCTCP does, and leaves slow start (ssthresh = the new window, at least 2).
pub fn cut_window(w: &mut Window, b: f64) {
    let reduction = (w.cwnd as f64 * b.clamp(0.0, 1.0) / 2.0).floor() as u32;
    let new = w.cwnd.saturating_sub(reduction).max(1);
    w.cwnd = new;
    w.ssthresh = new.max(2);
    w.cwnd_cnt = 0;
}

/// DCTCP congestion control.
#[derive(Clone, Copy, Debug)]
pub struct Dctcp {
    est: AlphaEstimator,
}

impl Dctcp {
    /// DCTCP with gain `g` (the paper: 1/16) and initial α `alpha0`.
    pub fn new(g: f64, alpha0: f64) -> Dctcp {
        Dctcp {
            est: AlphaEstimator::new(g, alpha0),
        }
    }

    /// Current α.
    pub fn alpha(&self) -> f64 {
        self.est.alpha
    }
}

impl CongestionControl for Dctcp {
    fn on_ack(&mut self, w: &mut Window, info: &AckInfo) {
        match self.est.on_ack(info) {
            EcnAction::Cut(alpha) => cut_window(w, alpha),
            EcnAction::Hold => {}
            EcnAction::Grow => reno_increase(w, info.grow),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::transport::test_window;

    pub(crate) fn ack(ack: u32, acked: u32, ece: bool, snd_nxt: u32, bytes_sent: u64) -> AckInfo {
        AckInfo {
            acked,
            grow: acked,
            ece,
            ack,
            snd_nxt,
            now: 0,
            bytes_sent,
        }
    }

    #[test]
    fn alpha_is_updated_once_per_window_with_the_marked_fraction() {
        let mut e = AlphaEstimator::new(1.0 / 16.0, 0.0);
        // Window [0, 8): 8 single-segment ACKs, 2 of them with ECE. The first ACK opens the
        // window ending at snd_nxt = 8; by the last one the sender has sent up to 16.
        let mut cuts = 0;
        for i in 1..=8u32 {
            let nxt = if i == 8 { 16 } else { 8 };
            if matches!(
                e.on_ack(&ack(i, 1, i == 3 || i == 4, nxt, 0)),
                EcnAction::Cut(_)
            ) {
                cuts += 1;
            }
            if i < 8 {
                assert_eq!(e.alpha, 0.0, "no update inside the window");
            }
        }
        // F = 2/8: α = 1/16 · 1/4.
        assert_eq!(e.alpha, 1.0 / 64.0);
        // Two ECEs in one window (snd_nxt stayed 8): one cut.
        assert_eq!(cuts, 1);
        // Next window [8, 16): every ACK marked, acks of 2 segments.
        for i in 1..=4u32 {
            e.on_ack(&ack(8 + 2 * i, 2, true, 16, 0));
        }
        let expected = (15.0 / 16.0) * (1.0 / 64.0) + 1.0 / 16.0;
        assert!((e.alpha - expected).abs() < 1e-15, "{}", e.alpha);
    }

    #[test]
    fn dctcp_cuts_by_half_alpha_once_per_window() {
        let mut cc = Dctcp::new(1.0 / 16.0, 0.5);
        let mut w = test_window(40, u32::MAX);
        // First ACK opens the window [.., 40) and echoes CE: cut with α = 0.5 → 40·(1 − 0.25).
        cc.on_ack(&mut w, &ack(1, 1, true, 40, 0));
        assert_eq!(w.cwnd, 30);
        assert_eq!(w.ssthresh, 30);
        // Until the data outstanding at the cut is acknowledged: no further cut, no growth.
        cc.on_ack(&mut w, &ack(2, 1, true, 40, 0));
        cc.on_ack(&mut w, &ack(39, 37, false, 40, 0));
        assert_eq!(w.cwnd, 30);
        // Then unmarked ACKs grow the window as Reno's congestion avoidance: 30 segments
        // acknowledged add one.
        for i in 0..30 {
            cc.on_ack(&mut w, &ack(41 + i, 1, false, 100, 0));
        }
        assert_eq!(w.cwnd, 31);
        // An ECE cuts again, with the α updated when the window [.., 40) closed:
        // F = 2/40 → α = (15/16)·0.5 + (1/16)·(1/20).
        let a = (15.0 / 16.0) * 0.5 + (1.0 / 16.0) * (2.0 / 40.0);
        assert!((cc.alpha() - a).abs() < 1e-15);
        cc.on_ack(&mut w, &ack(72, 1, true, 100, 0));
        assert_eq!(w.cwnd, 31 - (31.0 * a / 2.0).floor() as u32);
    }

    #[test]
    fn zero_alpha_does_not_shrink_the_window_but_ends_slow_start() {
        let mut w = Window {
            cwnd: 10,
            cwnd_cnt: 3,
            ssthresh: u32::MAX,
        };
        cut_window(&mut w, 0.0);
        assert_eq!((w.cwnd, w.ssthresh, w.cwnd_cnt), (10, 10, 0));
        cut_window(&mut w, 1.0);
        assert_eq!(w.cwnd, 5);
    }
}
