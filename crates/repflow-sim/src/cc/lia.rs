//! LIA, the Linked Increases Algorithm of MPTCP (RFC 6356): slow start and window cuts
//! as TCP's, but in congestion avoidance each ACK on subflow `i` grows its window by
//! `min(alpha / cwnd_total, 1 / cwnd_i)` segments per segment acknowledged, where
//! `alpha = cwnd_total · max_i(cwnd_i / rtt_i²) / (Σ_i cwnd_i / rtt_i)²`; so the connection
//! takes no more than one TCP would on its best path.

use crate::transport::{apply_fraction, slow_start, AckInfo, CongestionControl, Coupling, Window};

/// LIA's state on one subflow. Until its connection couples it ([`CongestionControl::couple`])
/// it grows as Reno does.
#[derive(Clone, Copy, Debug, Default)]
pub struct Lia {
    total_cwnd: f64,
    alpha: f64,
    /// Fractional window growth not yet applied, segments.
    acc: f64,
}

impl Lia {
    /// A subflow's LIA state.
    pub fn new() -> Lia {
        Lia::default()
    }

    /// RFC 6356's `alpha` from `(cwnd_i, rtt_i)` of the subflows with an RTT sample
    /// (segments, any time unit), and the total window over all subflows.
    pub fn alpha(subflows: &[(f64, f64)], total_cwnd: f64) -> f64 {
        let best = subflows
            .iter()
            .map(|&(w, r)| w / (r * r))
            .fold(0.0, f64::max);
        let sum: f64 = subflows.iter().map(|&(w, r)| w / r).sum();
        if sum <= 0.0 {
            return 1.0;
        }
        total_cwnd * best / (sum * sum)
    }
}

impl CongestionControl for Lia {
    fn on_ack(&mut self, w: &mut Window, info: &AckInfo) {
        let acked = slow_start(w, info.grow);
        if acked == 0 {
            return;
        }
        let own = 1.0 / f64::from(w.cwnd.max(1));
        let per_segment = if self.total_cwnd > 0.0 {
            (self.alpha / self.total_cwnd).min(own)
        } else {
            own
        };
        self.acc += f64::from(acked) * per_segment;
        apply_fraction(&mut self.acc, w);
    }

    fn couple(&mut self, c: &Coupling) {
        self.total_cwnd = c.total_cwnd;
        self.alpha = c.alpha;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::test_ack as ack;
    use crate::transport::test_window;

    fn coupling(total_cwnd: f64, alpha: f64) -> Coupling {
        Coupling {
            total_cwnd,
            alpha,
            ..Coupling::default()
        }
    }

    #[test]
    fn one_subflow_is_reno() {
        // alpha of a single path is 1: the increase is 1/cwnd per segment, as Reno's.
        let a = Lia::alpha(&[(10.0, 100.0)], 10.0);
        assert!((a - 1.0).abs() < 1e-12);
        let mut lia = Lia::new();
        lia.couple(&coupling(10.0, a));
        let mut w = test_window(10, 5);
        lia.on_ack(&mut w, &ack(10));
        assert_eq!(w.cwnd, 11);
    }

    #[test]
    fn equal_paths_share_one_tcps_increase() {
        // Two equal subflows of 10: alpha = 20·(10/r²)/(20/r)² = 1/2, increase per segment
        // min(1/2/20, 1/10) = 1/40: a whole window of 20 ACKs adds 1/2 segment per subflow,
        // one segment for the connection, as one TCP.
        let a = Lia::alpha(&[(10.0, 100.0), (10.0, 100.0)], 20.0);
        assert!((a - 0.5).abs() < 1e-12);
        let mut lia = Lia::new();
        lia.couple(&coupling(20.0, a));
        let mut w = test_window(10, 5);
        lia.on_ack(&mut w, &ack(39));
        assert_eq!(w.cwnd, 10);
        lia.on_ack(&mut w, &ack(1));
        assert_eq!(w.cwnd, 11);
    }
}
