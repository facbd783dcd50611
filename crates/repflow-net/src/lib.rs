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
//! - [`probe`]: hop-limited TCP SYN probes reading ICMP Time Exceeded via `IP_RECVERR`;
//! - [`Client`] and [`Server`]: the tokio layer, per-flow or pooled connections;
//! - [`load`]: an open-loop traffic generator that replays a schedule of flows.
//!
//! What it does not do: IPv6 path probes, TCP-level statistics (retransmissions), kernel
//! bypass. See `docs/library.md`.

#![forbid(unsafe_code)]

pub mod client;
mod dedup;
pub mod frame;
#[doc(hidden)]
pub mod fuzzing;
pub mod load;
pub mod logging;
pub mod paths;
mod pathsig;
pub mod policy;
pub mod probe;
mod race;
pub mod server;
mod wire;

pub use client::{AutoTable, Client, ClientConfig, ClientCounters, ConnMode, FlowReport, Route};
pub use frame::{FrameError, Header};
pub use policy::{CopiesRule, CopiesTable, PolicyConfig, PortStrategy};
pub use probe::ProbeConfig;
pub use server::{
    AckAfter, Incoming, IncomingKind, Responder, Server, ServerConfig, ServerCounters, ServerStats,
};

/// The tokio this crate is built on (for embedding it in a runtime of the same version).
pub use tokio;

use std::net::SocketAddr;
use std::sync::Arc;

/// Why one copy of a flow failed.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CopyFailure {
    /// Copy index.
    pub copy: u8,
    /// What went wrong.
    pub error: String,
}

/// Errors of the library.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// A listening address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// No copy of the flow completed; one reason per copy.
    #[error("flow {flow_id:#x}: every copy failed: {}", describe(failed))]
    AllCopiesFailed {
        /// The flow id.
        flow_id: u64,
        /// What happened to each copy.
        failed: Vec<CopyFailure>,
    },
    /// The payload does not fit a frame (4 GiB − 1).
    #[error("payload of {0} bytes is larger than a frame can carry (4 GiB - 1)")]
    TooLarge(u64),
    /// An MPTCP socket could not be opened (kernel without MPTCP, or MPTCP disabled in this
    /// network namespace).
    #[error(
        "cannot open an MPTCP socket (IPPROTO_MPTCP): {0}; it needs a kernel with MPTCP and the \
         sysctl net.mptcp.enabled = 1"
    )]
    MptcpUnavailable(std::io::Error),
    /// Other I/O error.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Linux's protocol number of Multipath TCP sockets (`IPPROTO_MPTCP`).
pub const IPPROTO_MPTCP: i32 = 262;

/// The protocol of a stream socket: MPTCP (the kernel's, `IPPROTO_MPTCP`) or plain TCP.
pub fn stream_protocol(mptcp: bool) -> socket2::Protocol {
    if mptcp {
        socket2::Protocol::from(IPPROTO_MPTCP)
    } else {
        socket2::Protocol::TCP
    }
}

/// Whether this network namespace can open MPTCP sockets: `Ok` or why not (the socket
/// error, e.g. protocol not supported when the kernel lacks MPTCP or `net.mptcp.enabled` is 0).
pub fn mptcp_check() -> Result<(), NetError> {
    socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::STREAM,
        Some(stream_protocol(true)),
    )
    .map(drop)
    .map_err(NetError::MptcpUnavailable)
}

fn describe(f: &[CopyFailure]) -> String {
    f.iter()
        .map(|c| format!("copy {}: {}", c.copy, c.error))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A payload shared by every copy of a flow without copying: a prefix of a shared buffer.
#[derive(Clone, Debug)]
pub struct Payload {
    buf: Arc<[u8]>,
    len: usize,
}

impl Payload {
    /// The first `len` bytes of `buf` (all of it if shorter).
    pub fn prefix(buf: Arc<[u8]>, len: usize) -> Self {
        let len = len.min(buf.len());
        Payload { buf, len }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl From<Vec<u8>> for Payload {
    fn from(v: Vec<u8>) -> Self {
        let len = v.len();
        Payload { buf: v.into(), len }
    }
}

impl From<&[u8]> for Payload {
    fn from(v: &[u8]) -> Self {
        Payload {
            buf: v.into(),
            len: v.len(),
        }
    }
}
