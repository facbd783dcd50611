//! The library's errors: `NetError`, and `CopyFailure` (why one copy of a flow failed).

use std::net::SocketAddr;

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
    /// A one-way flow with an empty payload: on the wire, an empty flow of one copy is the
    /// protocol's keepalive, which a receiver acknowledges without delivering it
    /// (docs/protocol.md); send at least one byte, or make it a call.
    #[error("an empty one-way flow cannot be sent (the protocol's keepalive looks the same); send at least one byte, or make it a call")]
    EmptyFlow,
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

fn describe(f: &[CopyFailure]) -> String {
    f.iter()
        .map(|c| format!("copy {}: {}", c.copy, c.error))
        .collect::<Vec<_>>()
        .join("; ")
}
