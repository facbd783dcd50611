//! FA-DCTCP (Joy and Nayak, "Improving Flow Completion Time for Short Flows in Datacenter
//! Networks", 2015): DCTCP whose window cut depends on the flow's type. Long flows cut as
//! DCTCP, cwnd·(1 − α/2); short flows cut cwnd·(1 − α^β/2) with β = 3 while α ≤ 0.6 and
//! β = 2 above, so they back off less and finish sooner. A flow is short until it has sent
//! more than a byte threshold (the paper's implementation flags a connection as long once
//! its socket-buffer usage exceeds 1 MB), or by its destination port when a port range of
//! long-flow services is configured. Growth and loss handling are TCP's.

use super::dctcp::{cut_window, AlphaEstimator, EcnAction};
use crate::transport::{reno_increase, AckInfo, CongestionControl, Window};

/// α above which short flows switch from β = 3 to β = 2.
pub const FA_SWITCH_ALPHA: f64 = 0.6;

/// FA-DCTCP congestion control.
#[derive(Clone, Copy, Debug)]
pub struct FaDctcp {
    est: AlphaEstimator,
    threshold: u64,
    always_long: bool,
}

impl FaDctcp {
    /// FA-DCTCP with DCTCP gain `g`, initial α `alpha0`; the flow counts as long once it has
    /// sent more than `threshold` bytes, or from the start if `always_long` (its destination
    /// port lies in the configured long-flow range).
    pub fn new(g: f64, alpha0: f64, threshold: u64, always_long: bool) -> FaDctcp {
        FaDctcp {
            est: AlphaEstimator::new(g, alpha0),
            threshold,
            always_long,
        }
    }

    /// The decrease exponent β for a flow that has sent `sent` bytes at congestion `alpha`.
    pub fn beta(&self, sent: u64, alpha: f64) -> i32 {
        if self.always_long || sent > self.threshold {
            1
        } else if alpha <= FA_SWITCH_ALPHA {
            3
        } else {
            2
        }
    }
}

impl CongestionControl for FaDctcp {
    fn on_ack(&mut self, w: &mut Window, info: &AckInfo) {
        match self.est.on_ack(info) {
            EcnAction::Cut(alpha) => {
                let beta = self.beta(info.bytes_sent, alpha);
                cut_window(w, alpha.powi(beta));
            }
            EcnAction::Hold => {}
            EcnAction::Grow => reno_increase(w, info.grow),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::dctcp::tests::ack;
    use crate::transport::test_window;

    fn cut(alpha: f64, sent: u64, always_long: bool) -> u32 {
        let mut cc = FaDctcp::new(1.0 / 16.0, alpha, 1_000_000, always_long);
        let mut w = test_window(100, u32::MAX);
        cc.on_ack(&mut w, &ack(1, 1, true, 100, sent));
        w.cwnd
    }

    #[test]
    fn short_flows_cut_by_alpha_cubed_or_squared() {
        // α = 0.5 ≤ 0.6, short: b = 0.125 → 100 − 6 (6.25 rounded down).
        assert_eq!(cut(0.5, 10_000, false), 94);
        // α = 0.8 > 0.6, short: b = 0.64 → 100 − 32.
        assert_eq!(cut(0.8, 10_000, false), 68);
        // α = 0.6 is still the mild regime: b = 0.216 → 100 − 10 (10.8).
        assert_eq!(cut(0.6, 10_000, false), 90);
    }

    #[test]
    fn long_flows_cut_as_dctcp() {
        // Past the threshold, b = α: α = 0.5 → 100 − 25; α = 0.8 → 100 − 40.
        assert_eq!(cut(0.5, 1_000_001, false), 75);
        assert_eq!(cut(0.8, 2_000_000, false), 60);
        // Exactly the threshold is still short.
        assert_eq!(cut(0.5, 1_000_000, false), 94);
        // A long-flow port makes a flow long from its first byte.
        assert_eq!(cut(0.5, 0, true), 75);
    }
}
