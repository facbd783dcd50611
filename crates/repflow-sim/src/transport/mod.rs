//! TCP as a sans-IO state machine: a sender that owns sequence space, ACK processing,
//! fast retransmit / NewReno recovery (RFC 6582) and the retransmission timer (RFC 6298),
//! and a receiver that acknowledges cumulatively (optionally delayed). Congestion control is
//! a small trait, [`CongestionControl`], with [`NewReno`] as its first implementation.
//!
//! The state machines never see the network: they emit [`crate::packet::Packet`]s into an output buffer and
//! expose their timer deadlines; the simulator routes the packets and fires the timers.
//! Sequence numbers count segments (every segment is `mss` bytes but the last).
//!
//! Its files, lowest first: `window` (the congestion window and the [`CongestionControl`]
//! trait), `params` ([`TcpParams`]), `stats` (a sender's state and counters), `sack`
//! ([`Scoreboard`]), [`detect`] (MPTCP-L's loss detection), `receiver` ([`Receiver`]) and
//! `sender` ([`Sender`]) with `sender_detect` (its MPTCP-L side). This file only gathers them.

pub mod detect;
mod params;
mod receiver;
mod sack;
mod sender;
mod sender_detect;
mod stats;
mod window;

pub use params::TcpParams;
pub use receiver::Receiver;
pub use sack::Scoreboard;
pub use sender::Sender;
pub use stats::{SenderState, SenderStats};
pub use window::{
    apply_fraction, reno_increase, slow_start, AckInfo, CongestionControl, Coupling, NewReno,
    Window, ABC_LIMIT,
};
#[cfg(test)]
pub(crate) use window::{test_ack, test_window};

#[cfg(test)]
mod tests;
