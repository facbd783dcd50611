//! Accepting connections: the listening sockets and the loop that admits or refuses each new
//! connection and starts its task.

use super::admission::SourceShare;
use super::conn::serve_conn;
use super::counters::inc;
use super::delivery::Incoming;
use super::refusals::RateLimited;
use super::shared::Shared;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, Semaphore};
use tracing::{warn, Instrument};

/// Whether a socket error means the protocol itself is unavailable (no MPTCP in the kernel,
/// or `net.mptcp.enabled` = 0).
pub(crate) fn is_protocol_error(e: &std::io::Error) -> bool {
    use nix::libc;
    matches!(
        e.raw_os_error(),
        Some(libc::EPROTONOSUPPORT | libc::ENOPROTOOPT | libc::EAFNOSUPPORT)
    )
}

pub(crate) fn bind_listener(addr: SocketAddr, mptcp: bool) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let s = Socket::new(
        domain,
        Type::STREAM.nonblocking(),
        Some(crate::stream_protocol(mptcp)),
    )?;
    s.set_reuse_address(true)?;
    // Accepted connections inherit TCP_NODELAY from the listener on Linux, which saves a
    // setsockopt per connection (see `serve_conn`).
    s.set_nodelay(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    TcpListener::from_std(std::net::TcpListener::from(s))
}

pub(crate) async fn accept_loop(
    l: TcpListener,
    shared: Arc<Shared>,
    sem: Arc<Semaphore>,
    tx: mpsc::Sender<Incoming>,
    stop: watch::Receiver<bool>,
) {
    let mut refuse = RateLimited::new();
    loop {
        let (stream, peer) = match l.accept().await {
            Ok(x) => x,
            Err(e) => {
                warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Ok(permit) = sem.clone().try_acquire_owned() else {
            inc(&shared.counters.connections_rejected, 1);
            refuse.log(&format!("{peer}"), "connection limit reached; resetting");
            let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
            continue;
        };
        let Some(share) = SourceShare::take(&shared, peer.ip()) else {
            inc(&shared.counters.connections_rejected_source, 1);
            refuse.log(
                &format!("{peer}"),
                "per-source connection share reached; resetting",
            );
            let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
            continue;
        };
        inc(&shared.counters.connections, 1);
        let (shared, tx, mut stop) = (shared.clone(), tx.clone(), stop.clone());
        let span = tracing::debug_span!("conn", %peer);
        tokio::spawn(
            async move {
                tokio::select! {
                    _ = serve_conn(stream, peer, &shared, &tx) => {}
                    _ = stop.changed() => {}
                }
                drop(share);
                drop(permit);
            }
            .instrument(span),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpStream;

    /// `serve_conn` skips TCP_NODELAY on Linux because accepted sockets inherit it from the
    /// listener; if that ever stops holding, acknowledgements would wait for Nagle.
    #[tokio::test]
    async fn accepted_sockets_are_nodelay() {
        let l = bind_listener("127.0.0.1:0".parse().unwrap(), false).unwrap();
        let addr = l.local_addr().unwrap();
        let _c = TcpStream::connect(addr).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        assert!(s.nodelay().unwrap());
    }
}
