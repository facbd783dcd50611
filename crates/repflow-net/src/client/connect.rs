//! Opening a copy's connection, writing its frame, reading its reply (per-flow copies).

use super::base::Client;
use super::types::{inc, Reply, Route, GONE_MESSAGE};
use crate::frame::flags;
use crate::wire::{read_frame, write_counted, FrameReader, ReadError, Unsent};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::net::TcpStream;

impl Client {
    /// Opens a connection (for the pool) and waits for its handshake.
    pub(super) async fn connect(&self, route: Route) -> Result<TcpStream, String> {
        self.connect_send(route, &[], &[], &AtomicU64::new(0)).await
    }

    /// Opens a copy's connection and writes `head` and `payload` (may be empty). The socket
    /// is connected without blocking and the frame is written at once, before the socket is
    /// handed to tokio: when the path is short enough for the handshake to finish inside
    /// `connect` (loopback and same-host paths), the copy is on its way without a readiness
    /// round trip through the event loop, so the next copy starts sooner. Otherwise (the
    /// `send` finds the connection still opening) it waits up to `connect_timeout` for the
    /// handshake, then writes.
    pub(super) async fn connect_send(
        &self,
        route: Route,
        head: &[u8],
        payload: &[u8],
        written: &AtomicU64,
    ) -> Result<TcpStream, String> {
        use nix::libc;
        use socket2::{Domain, Socket, Type};
        let cfg = &self.inner.cfg;
        let domain = if route.dst.is_ipv4() {
            Domain::IPV4
        } else {
            Domain::IPV6
        };
        let proto = crate::mptcp::stream_protocol(cfg.mptcp);
        let s = Socket::new(domain, Type::STREAM.nonblocking(), Some(proto)).map_err(|e| {
            if cfg.mptcp {
                crate::error::NetError::MptcpUnavailable(e).to_string()
            } else {
                format!("socket: {e}")
            }
        })?;
        let _ = s.set_nodelay(true);
        // Closing resets the connection: a loser stops at once, and no TIME_WAIT is left
        // on the client, so probed source ports can be reused.
        let _ = s.set_linger(Some(Duration::ZERO));
        if route.src_port.is_some() || cfg.bind_ip.is_some() {
            let ip = cfg.bind_ip.unwrap_or(if route.dst.is_ipv4() {
                IpAddr::V4(Ipv4Addr::UNSPECIFIED)
            } else {
                IpAddr::V6(Ipv6Addr::UNSPECIFIED)
            });
            s.set_reuse_address(true)
                .map_err(|e| format!("reuseaddr: {e}"))?;
            s.bind(&SocketAddr::new(ip, route.src_port.unwrap_or(0)).into())
                .map_err(|e| format!("bind: {e}"))?;
        }
        match s.connect(&route.dst.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(format!("connect to {}: {e}", route.dst)),
        }
        let mut rest = Unsent::new(head, payload);
        while !rest.is_empty() {
            match s.send_vectored_with_flags(&rest.slices(), libc::MSG_NOSIGNAL) {
                Ok(0) => return Err("sending: wrote zero bytes".into()),
                Ok(n) => {
                    written.fetch_add(n as u64, Ordering::Relaxed);
                    rest.advance(n);
                }
                // Still connecting, or the send buffer is full: tokio takes over.
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if rest.head.len() == head.len() => {
                    return Err(format!("connect to {}: {e}", route.dst))
                }
                Err(e) => return Err(format!("sending: {e}")),
            }
        }
        let nothing_sent = rest.head.len() == head.len() && rest.body.len() == payload.len();
        let mut stream = TcpStream::from_std(std::net::TcpStream::from(s))
            .map_err(|e| format!("socket: {e}"))?;
        if nothing_sent {
            // Nothing went out: the handshake is still under way.
            match tokio::time::timeout(cfg.connect_timeout, stream.writable()).await {
                Err(_) => return Err(format!("connect to {} timed out", route.dst)),
                Ok(Err(e)) => return Err(format!("connect to {}: {e}", route.dst)),
                Ok(Ok(())) => {}
            }
            if let Ok(Some(e)) | Err(e) = stream.take_error() {
                return Err(format!("connect to {}: {e}", route.dst));
            }
        }
        inc(&self.inner.counters.connections, 1);
        if !rest.is_empty() {
            write_counted(&mut stream, rest.head, rest.body, written)
                .await
                .map_err(|e| format!("sending: {e}"))?;
        }
        Ok(stream)
    }

    /// Reads one reply frame; `wait` bounds each read (`None`: the caller bounds the flow).
    pub(super) async fn read_reply(
        &self,
        rd: &mut FrameReader<impl tokio::io::AsyncRead + Unpin>,
        wait: Option<Duration>,
    ) -> Result<crate::wire::ReadFrame, String> {
        let cfg = &self.inner.cfg;
        let f = read_frame(rd, cfg.key.as_deref(), cfg.max_response, wait, wait, None)
            .await
            .map_err(|e| match e {
                ReadError::Eof => "connection closed before the reply".to_string(),
                e => format!("reading reply: {e}"),
            })?;
        if f.header.flags & flags::REPLY == 0 {
            return Err("frame without the reply flag".into());
        }
        Ok(f)
    }

    pub(super) async fn copy_per_flow(
        &self,
        route: Route,
        head: &[u8],
        payload: &[u8],
        written: &AtomicU64,
        flow_id: u64,
    ) -> Result<Reply, String> {
        let mut stream = self.connect_send(route, head, payload, written).await?;
        // No timer of its own: `transfer` bounds the whole flow by `flow_timeout`.
        let f = self
            .read_reply(&mut FrameReader::new(&mut stream, 1024), None)
            .await?;
        if f.header.flow_id != flow_id {
            return Err(format!("reply for flow {}", f.header.flow_id));
        }
        if f.header.flags & flags::ELSEWHERE != 0 {
            // The response went to another copy's connection: this copy never completes
            // (the flow's other copy does, or its timeout ends it).
            return std::future::pending().await;
        }
        if f.header.flags & flags::GONE != 0 {
            return Err(GONE_MESSAGE.into());
        }
        // No shutdown: dropping the stream resets it (linger 0) whatever was sent before, so
        // a FIN first would only cost a syscall and a segment for the server to process.
        Ok(Reply {
            dup: f.header.flags & flags::DUP != 0,
            body: f.payload,
        })
    }
}
