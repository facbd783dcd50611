//! L²DCT (Munir, Qazi et al., "Minimizing Flow Completion Times in Data Centers", INFOCOM
//! 2013): DCTCP's congestion estimate α combined with a weight w_c that approximates Least
//! Attained Service scheduling. A flow's weight falls from w_max to w_min as the bytes it has
//! sent grow across a size range; the window is cut to cwnd·(1 − α^{w_c}/2) (a heavy flow,
//! w_c < 1, backs off more than a light one) and grows by k = w_c/w_max segments per window
//! in congestion avoidance (a new flow, w_c = w_max, as fast as TCP). Slow start and loss
//! recovery are TCP's.

use super::dctcp::{cut_window, AlphaEstimator, EcnAction};
use crate::transport::{reno_increase, AckInfo, CongestionControl, Window};

/// L²DCT's weight function.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct L2dctParams {
    /// Weight of a flow that has sent at most `from_bytes`.
    pub w_max: f64,
    /// Weight of a flow that has sent at least `to_bytes`.
    pub w_min: f64,
    /// Bytes sent below which the weight is `w_max`.
    pub from_bytes: u64,
    /// Bytes sent from which the weight is `w_min` (linear in between).
    pub to_bytes: u64,
}

impl L2dctParams {
    /// w_c after `sent` bytes.
    pub fn weight(&self, sent: u64) -> f64 {
        if sent <= self.from_bytes {
            return self.w_max;
        }
        if sent >= self.to_bytes || self.to_bytes <= self.from_bytes {
            return self.w_min;
        }
        let x = (sent - self.from_bytes) as f64 / (self.to_bytes - self.from_bytes) as f64;
        self.w_max - (self.w_max - self.w_min) * x
    }
}

/// L²DCT congestion control.
#[derive(Clone, Copy, Debug)]
pub struct L2dct {
    est: AlphaEstimator,
    p: L2dctParams,
}

impl L2dct {
    /// L²DCT with DCTCP gain `g`, initial α `alpha0` and weight function `p`.
    pub fn new(g: f64, alpha0: f64, p: L2dctParams) -> L2dct {
        L2dct {
            est: AlphaEstimator::new(g, alpha0),
            p,
        }
    }
}

/// Congestion avoidance that adds `k` segments per window of acknowledged segments
/// (0 < k ≤ 1): one segment each time ⌈cwnd/k⌉ segments have been acknowledged.
pub fn scaled_increase(w: &mut Window, acked: u32, k: f64) {
    if w.cwnd < w.ssthresh {
        reno_increase(w, acked);
        return;
    }
    let k = k.clamp(1e-6, 1.0);
    w.cwnd_cnt += acked;
    loop {
        let need = (w.cwnd as f64 / k).ceil() as u32;
        if w.cwnd_cnt < need {
            break;
        }
        w.cwnd_cnt -= need;
        w.cwnd += 1;
    }
}

impl CongestionControl for L2dct {
    fn on_ack(&mut self, w: &mut Window, info: &AckInfo) {
        let wc = self.p.weight(info.bytes_sent);
        match self.est.on_ack(info) {
            EcnAction::Cut(alpha) => cut_window(w, alpha.powf(wc)),
            EcnAction::Hold => {}
            EcnAction::Grow => scaled_increase(w, info.grow, wc / self.p.w_max),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::dctcp::tests::ack;
    use crate::transport::test_window;

    const P: L2dctParams = L2dctParams {
        w_max: 2.5,
        w_min: 0.125,
        from_bytes: 200_000,
        to_bytes: 1_200_000,
    };

    #[test]
    fn weight_interpolates_between_w_max_and_w_min() {
        assert_eq!(P.weight(0), 2.5);
        assert_eq!(P.weight(200_000), 2.5);
        // Halfway: 2.5 − 2.375/2.
        assert_eq!(P.weight(700_000), 1.3125);
        assert_eq!(P.weight(1_200_000), 0.125);
        assert_eq!(P.weight(50_000_000), 0.125);
    }

    #[test]
    fn decrease_is_alpha_to_the_weight() {
        // α = 0.25 (initial), new flow: w_c = 2.5, b = 0.25^2.5 = 1/32: 64 → 64 − 1.
        let mut cc = L2dct::new(1.0 / 16.0, 0.25, P);
        let mut w = test_window(64, u32::MAX);
        cc.on_ack(&mut w, &ack(1, 1, true, 64, 0));
        assert_eq!(w.cwnd, 63);
        // A flow past the range: w_c = 0.125, b = 0.25^0.125 ≈ 0.8409: 64 → 64 − 26.
        let mut cc = L2dct::new(1.0 / 16.0, 0.25, P);
        let mut w = test_window(64, u32::MAX);
        cc.on_ack(&mut w, &ack(1, 1, true, 64, 5_000_000));
        assert_eq!(
            w.cwnd,
            64 - (64.0 * 0.25f64.powf(0.125) / 2.0).floor() as u32
        );
        assert_eq!(w.cwnd, 38);
    }

    #[test]
    fn increase_is_scaled_by_weight_over_w_max() {
        // Congestion avoidance at cwnd 10: a new flow (k = 1) gains one segment per 10
        // acknowledged; a heavy flow (k = 0.125/2.5 = 1/20) one per 200.
        for (sent, per_segment) in [(0u64, 10u32), (2_000_000, 200)] {
            let mut cc = L2dct::new(1.0 / 16.0, 0.0, P);
            let mut w = test_window(10, 10);
            for i in 1..per_segment {
                cc.on_ack(&mut w, &ack(i, 1, false, 1000, sent));
            }
            assert_eq!(w.cwnd, 10);
            cc.on_ack(&mut w, &ack(per_segment, 1, false, 1000, sent));
            assert_eq!(w.cwnd, 11, "sent {sent}");
        }
    }
}
