//! OLIA, the Opportunistic Linked-Increases Algorithm (Khalili, Gast, Popovic and Le Boudec,
//! "MPTCP is not Pareto-optimal: performance issues and a possible solution", CoNEXT 2012):
//! slow start and window cuts as TCP's; in congestion avoidance an ACK on path `r` grows its
//! window by
//!
//! ```text
//!     (w_r / rtt_r²) / (Σ_p w_p / rtt_p)²  +  α_r / w_r      segments per segment acknowledged
//! ```
//!
//! where `α_r` moves window from the paths with the largest windows (`M`) towards the best
//! paths (`B`, largest `ℓ_p² / rtt_p`, with `ℓ_p` the segments a path delivered between its
//! last two losses, or since its last one if more) that are not among them: with `n` paths
//! and `B \ M` not empty, `α_r = 1 / (n·|B \ M|)` for `r ∈ B \ M`, `α_r = −1 / (n·|M|)` for
//! `r ∈ M`, and 0 otherwise. [`Olia::alphas`] computes them; the connection passes each
//! subflow its own before an ACK ([`CongestionControl::couple`]).

use crate::transport::{apply_fraction, slow_start, AckInfo, CongestionControl, Coupling, Window};

/// OLIA's state on one subflow. Uncoupled (before its connection couples it) it grows as Reno.
#[derive(Clone, Copy, Debug, Default)]
pub struct Olia {
    c: Coupling,
    /// Fractional window change not yet applied, segments (may be negative).
    acc: f64,
    /// Segments acknowledged between the last two losses.
    l1: f64,
    /// Segments acknowledged since the last loss.
    l2: f64,
}

/// Relative tolerance under which two paths count as equally good or equally large.
const TIE: f64 = 1e-9;

impl Olia {
    /// A subflow's OLIA state.
    pub fn new() -> Olia {
        Olia::default()
    }

    /// `α_p` of every path from `(w_p, rtt_p, ℓ_p)` (segments, any time unit, segments).
    pub fn alphas(paths: &[(f64, f64, f64)]) -> Vec<f64> {
        (0..paths.len()).map(|r| Olia::alpha(paths, r)).collect()
    }

    /// `α_r` of path `r` among `paths` (as in [`Olia::alphas`], without allocating: it runs
    /// on every ACK of a coupled subflow).
    pub fn alpha(paths: &[(f64, f64, f64)], r: usize) -> f64 {
        let n = paths.len() as f64;
        let quality = |&(_, rtt, l): &(f64, f64, f64)| l * l / rtt;
        let best_q = paths.iter().map(quality).fold(f64::MIN, f64::max);
        let max_w = paths.iter().map(|p| p.0).fold(f64::MIN, f64::max);
        let near = |x: f64, top: f64| x >= top - TIE * top.abs().max(1.0);
        let in_m = |p: &(f64, f64, f64)| near(p.0, max_w);
        let in_b_not_m = |p: &(f64, f64, f64)| near(quality(p), best_q) && !in_m(p);
        let bm = paths.iter().filter(|p| in_b_not_m(p)).count() as f64;
        let m = paths.iter().filter(|p| in_m(p)).count() as f64;
        if bm == 0.0 {
            0.0
        } else if in_b_not_m(&paths[r]) {
            1.0 / (n * bm)
        } else if in_m(&paths[r]) {
            -1.0 / (n * m)
        } else {
            0.0
        }
    }
}

impl CongestionControl for Olia {
    fn on_ack(&mut self, w: &mut Window, info: &AckInfo) {
        self.l2 += f64::from(info.acked);
        let acked = slow_start(w, info.grow);
        if acked == 0 {
            return;
        }
        let wr = f64::from(w.cwnd.max(1));
        let per_segment = if self.c.sum_w_over_rtt > 0.0 && self.c.own_rtt > 0.0 {
            let s = self.c.sum_w_over_rtt;
            (wr / (self.c.own_rtt * self.c.own_rtt)) / (s * s) + self.c.olia_alpha / wr
        } else {
            1.0 / wr
        };
        self.acc += f64::from(acked) * per_segment;
        apply_fraction(&mut self.acc, w);
    }

    fn ssthresh_after_loss(&mut self, w: &Window, flight: u32) -> u32 {
        let _ = w;
        self.l1 = self.l2;
        self.l2 = 0.0;
        self.acc = 0.0;
        (flight / 2).max(2)
    }

    fn couple(&mut self, c: &Coupling) {
        self.c = *c;
    }

    fn loss_interval(&self) -> f64 {
        self.l1.max(self.l2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::test_ack as ack;
    use crate::transport::test_window;

    #[test]
    fn window_moves_from_the_largest_path_to_a_better_smaller_one() {
        // Path 0: the largest window; path 1: fewer losses (longer loss interval), smaller
        // window — it is in B but not in M.
        let a = Olia::alphas(&[(20.0, 1.0, 100.0), (10.0, 1.0, 300.0)]);
        assert_eq!(a, vec![-0.5, 0.5]);
        // The best path is also the largest: nothing to move.
        let a = Olia::alphas(&[(20.0, 1.0, 300.0), (10.0, 1.0, 100.0)]);
        assert_eq!(a, vec![0.0, 0.0]);
        // Three paths, two best outside M share the transfer.
        let a = Olia::alphas(&[(30.0, 1.0, 10.0), (10.0, 1.0, 50.0), (12.0, 1.0, 50.0)]);
        assert_eq!(a, vec![-1.0 / 3.0, 1.0 / 6.0, 1.0 / 6.0]);
    }

    #[test]
    fn one_path_is_reno_and_a_loss_starts_a_new_interval() {
        // One path: (w / rtt²) / (w / rtt)² = 1 / w, α = 0: Reno's increase.
        let mut o = Olia::new();
        o.couple(&Coupling {
            total_cwnd: 10.0,
            sum_w_over_rtt: 10.0 / 2.0,
            own_rtt: 2.0,
            ..Coupling::default()
        });
        let mut w = test_window(10, 5);
        o.on_ack(&mut w, &ack(10));
        assert_eq!(w.cwnd, 11);
        assert_eq!(o.loss_interval(), 10.0);
        assert_eq!(o.ssthresh_after_loss(&w, 11), 5);
        o.on_ack(&mut w, &ack(3));
        // max(segments between the last two losses, since the last one)
        assert_eq!(o.loss_interval(), 10.0);
    }

    #[test]
    fn a_negative_alpha_shrinks_the_largest_window() {
        let mut o = Olia::new();
        o.couple(&Coupling {
            total_cwnd: 30.0,
            sum_w_over_rtt: 30.0,
            own_rtt: 1.0,
            olia_alpha: -0.5,
            ..Coupling::default()
        });
        let mut w = test_window(20, 5);
        // per segment: 20/900 − 0.5/20 = 0.0222 − 0.025 < 0
        o.on_ack(&mut w, &ack(400));
        assert!(w.cwnd < 20, "{}", w.cwnd);
    }
}
