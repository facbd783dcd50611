//! Hop-limited TCP path probes (Linux), the I/O half of SmartRep's HCA.
//!
//! A probe opens a TCP connection from a chosen source port with a small IP TTL and
//! `IP_RECVERR` set. The router at which the TTL runs out answers the SYN with an ICMP Time
//! Exceeded; the kernel queues it on the socket's error queue with the router's address as
//! the *offender*, which `recvmsg(MSG_ERRQUEUE)` reads. No raw socket (and no privilege) is
//! needed. If the destination itself answers (SYN-ACK or RST) it is within the TTL; if nothing
//! answers within the timeout the probe is silent. Loopback never decrements the TTL, so on
//! 127.0.0.1 a probe always reaches the destination and never sees an ICMP; the client then
//! falls back to plain RepFlow ports and says so in the flow report.
//!
//! Probes are paced (see [`ProbeConfig::pace`]) because routers rate-limit ICMP errors.

use crate::pathsig::{Hop, ProbeOutcome};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{
    recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, SockaddrStorage,
};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

/// ICMP type "Time Exceeded".
const ICMP_TIME_EXCEEDED: u8 = 11;
/// `SO_EE_ORIGIN_ICMP` of `<linux/errqueue.h>`.
const SO_EE_ORIGIN_ICMP: u8 = 2;

/// How path probes are made.
#[derive(Clone, Debug)]
pub struct ProbeConfig {
    /// TTLs probed per source port; the path signature is the hop seen at each. In a fat-tree
    /// seen from a host, TTL 2 reaches the aggregation switch and TTL 3 the core.
    pub ttls: Vec<u8>,
    /// How long to wait for an answer to one probe.
    pub timeout: Duration,
    /// Minimum gap between two probes (ICMP rate limits).
    pub pace: Duration,
    /// Candidate source ports (inclusive range). Keep it outside the ephemeral range.
    pub ports: (u16, u16),
    /// Local address probes and copies are sent from (`None`: any).
    pub src_ip: Option<IpAddr>,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            ttls: vec![2, 3],
            timeout: Duration::from_millis(200),
            pace: Duration::from_millis(2),
            ports: (21000, 22999),
            src_ip: None,
        }
    }
}

/// Sends one SYN from `src` to `dst` with IP TTL `ttl` and waits up to `timeout`.
///
/// Returns `Ok(Some(Hop::Router(addr)))` for an ICMP Time Exceeded from `addr`,
/// `Ok(Some(Hop::Destination))` when the destination answered, `Ok(None)` when nothing
/// answered. Blocking: call it from a blocking thread. IPv4 only (IPv6 returns `Ok(None)`).
pub fn probe_hop(
    src: SocketAddr,
    dst: SocketAddr,
    ttl: u8,
    timeout: Duration,
) -> io::Result<Option<Hop>> {
    if !dst.is_ipv4() {
        return Ok(None);
    }
    let sock = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    sock.set_nonblocking(true)?;
    sock.set_reuse_address(true)?;
    // Abort (RST) instead of a FIN handshake if the destination answers.
    sock.set_linger(Some(Duration::ZERO))?;
    sock.bind(&SockAddr::from(src))?;
    sock.set_ttl(u32::from(ttl))?;
    setsockopt(&sock, sockopt::Ipv4RecvErr, &true).map_err(io::Error::from)?;
    match sock.connect(&SockAddr::from(dst)) {
        Ok(()) => return Ok(Some(Hop::Destination)),
        Err(e) if e.raw_os_error() == Some(nix::libc::EINPROGRESS) => {}
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            return Ok(Some(Hop::Destination))
        }
        Err(e) => return Err(e),
    }
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        let ms =
            PollTimeout::try_from(left.max(Duration::from_millis(1))).unwrap_or(PollTimeout::MAX);
        let mut fds = [PollFd::new(
            sock.as_fd(),
            PollFlags::POLLOUT | PollFlags::POLLERR,
        )];
        match poll(&mut fds, ms) {
            Ok(0) => return Ok(None),
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
        if let Some(hop) = read_icmp_offender(&sock)? {
            return Ok(Some(hop));
        }
        // No ICMP queued: did the connection complete or get refused?
        match sock.take_error()? {
            None => return Ok(Some(Hop::Destination)),
            Some(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                return Ok(Some(Hop::Destination))
            }
            // An error without a queued ICMP (e.g. a local route failure).
            Some(e) => return Err(e),
        }
    }
}

/// Reads the socket's error queue; returns the offender of a queued ICMP Time Exceeded.
fn read_icmp_offender(sock: &Socket) -> io::Result<Option<Hop>> {
    let mut data = [0u8; 256];
    let mut iov = [IoSliceMut::new(&mut data)];
    let mut cmsg = nix::cmsg_space!(nix::libc::sock_extended_err, nix::libc::sockaddr_in);
    let msg = match recvmsg::<SockaddrStorage>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT,
    ) {
        Ok(m) => m,
        Err(nix::errno::Errno::EAGAIN) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    for c in msg.cmsgs().map_err(io::Error::from)? {
        if let ControlMessageOwned::Ipv4RecvErr(ee, Some(offender)) = c {
            if ee.ee_origin == SO_EE_ORIGIN_ICMP && ee.ee_type == ICMP_TIME_EXCEEDED {
                let ip = std::net::Ipv4Addr::from(u32::from_be(offender.sin_addr.s_addr));
                return Ok(Some(Hop::Router(IpAddr::V4(ip))));
            }
        }
    }
    Ok(None)
}

/// Probes one source port at every TTL of `cfg` (blocking, paced by `cfg.pace` between
/// TTLs). Errors of single probes count as silence. The outcome is a path only when at least
/// one router answered and no TTL stayed silent.
pub fn probe_port(cfg: &ProbeConfig, src: SocketAddr, dst: SocketAddr) -> ProbeOutcome {
    let mut sig = Vec::new();
    let mut answered = false;
    for (i, &ttl) in cfg.ttls.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(cfg.pace);
        }
        match probe_hop(src, dst, ttl, cfg.timeout) {
            Ok(Some(h)) => {
                answered = true;
                let reached = h == Hop::Destination;
                sig.push(h);
                if reached {
                    break;
                }
            }
            Ok(None) => sig.push(Hop::Silent),
            Err(e) => {
                tracing::debug!(%src, %dst, ttl, error = %e, "probe failed");
                sig.push(Hop::Silent);
            }
        }
    }
    // On loopback every probe "reaches the destination" without any ICMP: that tells nothing
    // about ECMP, so only an ICMP answer counts as a path. A silent TTL (lost probe, ICMP rate
    // limit) would make two equal paths look different, so such a signature is not used.
    let complete = !sig.contains(&Hop::Silent);
    if answered && complete && sig.iter().any(|h| matches!(h, Hop::Router(_))) {
        ProbeOutcome::Path(sig)
    } else {
        ProbeOutcome::NoAnswer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_probe_reaches_destination_without_icmp() {
        // A listener: the TTL-1 SYN is delivered locally (loopback does not decrement TTL),
        // so the probe sees the destination, never an ICMP offender.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dst = l.local_addr().unwrap();
        let src: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let hop = probe_hop(src, dst, 1, Duration::from_millis(500)).unwrap();
        assert_eq!(hop, Some(Hop::Destination));
        // A closed port: refused, also the destination.
        drop(l);
        let hop = probe_hop(src, dst, 1, Duration::from_millis(500)).unwrap();
        assert_eq!(hop, Some(Hop::Destination));
        // A whole probe therefore has no path answer.
        let cfg = ProbeConfig {
            ttls: vec![1, 2],
            ..ProbeConfig::default()
        };
        assert_eq!(probe_port(&cfg, src, dst), ProbeOutcome::NoAnswer);
    }
}
