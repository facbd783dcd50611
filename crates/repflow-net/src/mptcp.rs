//! Multipath TCP sockets: the protocol number, the choice of a stream socket's protocol, and
//! the check that this network namespace can open one.

use crate::error::NetError;

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
