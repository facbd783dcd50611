//! `repflow-net`: RepFlow and SmartRep on real TCP sockets.
//!
//! A short flow is sent over several TCP connections whose five-tuples differ, so ECMP puts
//! the copies on different paths; the application gets the first copy that completes, the
//! other copies are cancelled, and the receiver hands every flow to its application exactly
//! once.
//!
//! Layers (sans-IO core under a tokio layer):
//! - [`frame`]: the wire format (documented with test vectors in `docs/protocol.md`);
//! - [`policy`]: threshold, copies per flow (fixed or SmartRep's RepNumAssign table), port
//!   strategy, run-time overhead budget;
//! - `dedup` (the receiver's delivery decision: distinct copy indices, bounded memory, digest
//!   and replay checks) and `race` (the sender's copy race: winner, failures, timeout, byte
//!   accounting): state machines with no I/O and no clock of their own, unit-tested with a
//!   fake clock;
//! - [`paths`]: path cache and SmartRep's hash-collision avoidance (HCA) port choice;
//! - [`pathpool`]: a pooled client's connections per path and the choice of each request's
//!   slots (per-request path diversity without a handshake per request);
//! - [`probe`]: hop-limited TCP SYN probes reading ICMP Time Exceeded via `IP_RECVERR`;
//! - [`Client`] and [`Server`]: the tokio layer, per-flow or pooled connections;
//! - [`load`]: an open-loop traffic generator that replays a schedule of flows.
//!
//! What it does not do: IPv6 path probes, TCP-level statistics (retransmissions), kernel
//! bypass. See `docs/library.md`.

#![forbid(unsafe_code)]

pub mod client;
mod dedup;
mod error;
pub mod frame;
#[doc(hidden)]
pub mod fuzzing;
pub mod load;
pub mod logging;
mod mptcp;
pub mod pathpool;
pub mod paths;
mod pathsig;
mod payload;
pub mod policy;
pub mod probe;
pub mod proxy;
mod race;
pub mod server;
mod wire;

pub use client::{AutoTable, Client, ClientConfig, ClientCounters, ConnMode, FlowReport, Route};
pub use error::{CopyFailure, NetError};
pub use frame::{FrameError, Header};
pub use mptcp::{mptcp_check, stream_protocol, IPPROTO_MPTCP};
pub use payload::Payload;
pub use policy::{CopiesRule, CopiesTable, PolicyConfig, PortStrategy};
pub use probe::ProbeConfig;
pub use server::{
    AckAfter, Incoming, IncomingKind, Responder, Server, ServerConfig, ServerCounters, ServerStats,
};

/// The tokio this crate is built on (for embedding it in a runtime of the same version).
pub use tokio;
