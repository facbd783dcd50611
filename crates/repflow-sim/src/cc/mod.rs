//! ECN-based congestion-control algorithms, each one small implementation of
//! [`crate::transport::CongestionControl`] on top of the TCP sender:
//! [`Dctcp`], [`L2dct`] and [`FaDctcp`]. They share the DCTCP congestion estimate
//! ([`AlphaEstimator`]: the fraction of ECN-echoed segments per window of data, smoothed
//! with gain g) and differ only in how they turn it into a window cut (and, for L²DCT, in
//! the additive increase). [`Lia`] (RFC 6356) and [`Olia`] are MPTCP's coupled increases.

mod dctcp;
mod fa_dctcp;
mod l2dct;
mod lia;
mod olia;

pub use dctcp::{cut_window, AlphaEstimator, Dctcp, EcnAction};
pub use fa_dctcp::{FaDctcp, FA_SWITCH_ALPHA};
pub use l2dct::{L2dct, L2dctParams};
pub use lia::Lia;
pub use olia::Olia;
