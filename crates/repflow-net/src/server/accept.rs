//! Accepting connections: the listening sockets and the loop that admits or refuses each new
//! connection and starts its task.

use super::admission::Refused;
use super::conn::serve_conn;
use super::counters::inc;
use super::delivery::Incoming;
use super::refusals::Kind;
use super::shared::Shared;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
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
        Some(crate::mptcp::stream_protocol(mptcp)),
    )?;
    s.set_reuse_address(true)?;
    // Accepted connections inherit TCP_NODELAY from the listener on Linux, which saves a
    // setsockopt per connection (see `serve_conn`).
    s.set_nodelay(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    TcpListener::from_std(std::net::TcpListener::from(s))
}

/// File descriptors a server needs besides its connections (listeners aside): the runtime's,
/// standard streams, logs, the application's own.
const FD_MARGIN: u64 = 64;

/// Warns (one line) when the process's open-file limit (`ulimit -n`) is below what
/// `max_connections` connections and `listeners` listening sockets need: past the limit,
/// `accept` fails (os error 24) instead of the server refusing or evicting by its own rules.
pub(crate) fn check_fd_limit(max_connections: usize, listeners: usize) {
    use nix::sys::resource::{getrlimit, Resource};
    let need = max_connections as u64 + listeners as u64 + FD_MARGIN;
    if let Ok((soft, _)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < need {
            warn!(
                limit = soft,
                need,
                "open-file limit (ulimit -n) {soft} is below the {need} descriptors \
                 max_connections = {max_connections} needs; accept will fail with os error 24 \
                 before the connection limit is reached (raise ulimit -n or lower \
                 max_connections)"
            );
        }
    }
}

/// Longest pause after a failed `accept` (the pause doubles from 10 ms while it fails).
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_millis(500);

pub(crate) async fn accept_loop(
    l: TcpListener,
    shared: Arc<Shared>,
    tx: mpsc::Sender<Incoming>,
    stop: watch::Receiver<bool>,
) {
    let cfg = &shared.cfg;
    let limits = (
        cfg.max_connections,
        cfg.max_connections_per_source,
        cfg.evict_after.as_millis() as u64,
    );
    let mut backoff = Duration::from_millis(10);
    loop {
        let (stream, peer) = match l.accept().await {
            Ok(x) => {
                backoff = Duration::from_millis(10);
                x
            }
            Err(e) => {
                inc(&shared.counters.accept_errors, 1);
                shared
                    .refusals
                    .log(Kind::Accept, "-", &format!("accept failed: {e}"));
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                continue;
            }
        };
        let now = shared.now_ms();
        let admitted = shared
            .slots
            .lock()
            .expect("slots lock")
            .admit(peer.ip(), now, limits);
        let slot = match admitted {
            Ok(a) => a,
            Err(why) => {
                let (counter, kind, what) = match why {
                    Refused::Full => (
                        &shared.counters.connections_rejected,
                        Kind::Full,
                        "connection limit reached, no connection idle long enough to evict; resetting",
                    ),
                    Refused::SourceShare => (
                        &shared.counters.connections_rejected_source,
                        Kind::SourceShare,
                        "per-source connection share reached, none of its connections idle long enough to evict; resetting",
                    ),
                };
                inc(counter, 1);
                shared.refusals.log(kind, &format!("{peer}"), what);
                let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
                continue;
            }
        };
        if let Some(ip) = slot.evicted {
            inc(&shared.counters.connections_evicted, 1);
            shared.refusals.log(
                Kind::Evicted,
                &format!("{ip}"),
                "connection evicted (longest without a complete frame) to admit a new one",
            );
        }
        inc(&shared.counters.connections, 1);
        let (shared, tx, mut stop) = (shared.clone(), tx.clone(), stop.clone());
        let span = tracing::debug_span!("conn", %peer);
        tokio::spawn(
            async move {
                tokio::select! {
                    _ = serve_conn(stream, peer, &shared, &tx, &slot.progress) => {}
                    _ = stop.changed() => {}
                    _ = slot.kill.notified() => {}
                }
                shared.slots.lock().expect("slots lock").leave(slot.id);
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
