//! ECN-based congestion-control algorithms, each one small implementation of
//! [`CongestionControl`] on top of the TCP sender:
//! [`Dctcp`], [`L2dct`] and [`FaDctcp`]. They share the DCTCP congestion estimate
//! ([`AlphaEstimator`]: the fraction of ECN-echoed segments per window of data, smoothed
//! with gain g) and differ only in how they turn it into a window cut (and, for L²DCT, in
//! the additive increase).

mod dctcp;
mod fa_dctcp;
mod l2dct;

pub use dctcp::{cut_window, AlphaEstimator, Dctcp, EcnAction};
pub use fa_dctcp::{FaDctcp, FA_SWITCH_ALPHA};
pub use l2dct::{L2dct, L2dctParams};

use crate::config::{SchemeConfig, SchemeName};
use crate::pfabric::PfabricTransport;
use crate::transport::{CongestionControl, NewReno};

/// Builds the congestion control of every new connection of a run's scheme.
#[derive(Clone, Copy, Debug)]
pub struct CcFactory {
    name: SchemeName,
    g: f64,
    alpha0: f64,
    l2dct: L2dctParams,
    fa_threshold: u64,
    fa_long_ports: Option<[u16; 2]>,
    pfabric_window: u32,
}

impl CcFactory {
    /// The factory for scheme `s`; `pfabric_window` is pFabric's window in segments.
    pub fn new(s: &SchemeConfig, pfabric_window: u32) -> CcFactory {
        CcFactory {
            name: s.name,
            g: s.dctcp_g,
            alpha0: s.dctcp_alpha_init,
            l2dct: L2dctParams {
                w_max: s.l2dct_w_max,
                w_min: s.l2dct_w_min,
                from_bytes: s.l2dct_from.0,
                to_bytes: s.l2dct_to.0,
            },
            fa_threshold: s.fa_threshold.0,
            fa_long_ports: s.fa_long_ports,
            pfabric_window,
        }
    }

    /// Congestion control of a connection to destination port `dport`.
    pub fn make(&self, dport: u16) -> Box<dyn CongestionControl> {
        match self.name {
            SchemeName::Dctcp | SchemeName::RepflowDctcp => {
                Box::new(Dctcp::new(self.g, self.alpha0))
            }
            SchemeName::L2dct => Box::new(L2dct::new(self.g, self.alpha0, self.l2dct)),
            SchemeName::FaDctcp => {
                let long = self
                    .fa_long_ports
                    .is_some_and(|[a, b]| (a..=b).contains(&dport));
                Box::new(FaDctcp::new(self.g, self.alpha0, self.fa_threshold, long))
            }
            SchemeName::Pfabric => Box::new(PfabricTransport {
                window: self.pfabric_window,
            }),
            _ => Box::new(NewReno),
        }
    }
}
