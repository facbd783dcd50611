//! The real server behind the server sidecar: a bounded pool of plain TCP connections and one
//! exchange (write the request, read exactly its response, delimited by the codec).

use super::envelope::{Protocol, Status};
use super::{http, resp};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Why an exchange with the real server failed.
#[derive(Debug)]
pub(crate) enum UpstreamError {
    /// Nothing was sent: no connection free within the pool wait.
    PoolBusy,
    /// Nothing was sent: the connection could not be opened.
    Down(std::io::Error),
    /// The request was (maybe partly) sent: outcome unknown.
    Unknown(String),
    /// The response exceeds the limit (the request was executed).
    TooLarge(usize),
}

impl UpstreamError {
    /// The status the client sidecar gets.
    pub(crate) fn status(&self) -> Status {
        match self {
            UpstreamError::PoolBusy | UpstreamError::Down(_) => Status::Refused,
            _ => Status::Unknown,
        }
    }
}

impl std::fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpstreamError::PoolBusy => write!(f, "upstream pool busy (no connection free in time)"),
            UpstreamError::Down(e) => write!(f, "upstream unreachable: {e}"),
            UpstreamError::Unknown(m) => {
                write!(f, "upstream exchange failed, outcome unknown: {m}")
            }
            UpstreamError::TooLarge(n) => write!(f, "upstream response above {n} bytes"),
        }
    }
}

/// Settings of the pool.
#[derive(Clone, Debug)]
pub(crate) struct PoolConfig {
    pub(crate) addr: SocketAddr,
    pub(crate) size: usize,
    pub(crate) wait: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) timeout: Duration,
    pub(crate) max_response: usize,
}

/// At most `size` connections, busy or idle.
pub(crate) struct Pool {
    cfg: PoolConfig,
    slots: Arc<Semaphore>,
    idle: Mutex<Vec<TcpStream>>,
}

/// Whether an idle connection is still usable: no EOF, no unexpected bytes, no error.
fn alive(s: &TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.try_read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// Whether an HTTP request's method is safe to send again (RFC 9110: GET, HEAD, OPTIONS).
fn safe_method(req: &[u8]) -> bool {
    [&b"GET "[..], b"HEAD ", b"OPTIONS "]
        .iter()
        .any(|m| req.starts_with(m))
}

impl Pool {
    pub(crate) fn new(cfg: PoolConfig) -> Pool {
        Pool {
            slots: Arc::new(Semaphore::new(cfg.size.max(1))),
            idle: Mutex::new(Vec::new()),
            cfg,
        }
    }

    /// A connection (idle or new) and its slot; `opened` is set when it is new.
    async fn get(
        &self,
        fresh: bool,
    ) -> Result<(OwnedSemaphorePermit, TcpStream, bool), UpstreamError> {
        let permit = tokio::time::timeout(self.cfg.wait, self.slots.clone().acquire_owned())
            .await
            .map_err(|_| UpstreamError::PoolBusy)?
            .expect("pool semaphore never closed");
        if !fresh {
            loop {
                let s = self.idle.lock().expect("pool lock").pop();
                match s {
                    Some(s) if alive(&s) => return Ok((permit, s, false)),
                    Some(_) => continue,
                    None => break,
                }
            }
        }
        Ok((permit, self.connect().await?, true))
    }

    /// A new connection to the upstream.
    async fn connect(&self) -> Result<TcpStream, UpstreamError> {
        let s = tokio::time::timeout(self.cfg.connect_timeout, TcpStream::connect(self.cfg.addr))
            .await
            .map_err(|_| {
                UpstreamError::Down(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "connect timed out",
                ))
            })?
            .map_err(UpstreamError::Down)?;
        let _ = s.set_nodelay(true);
        Ok(s)
    }

    fn put(&self, s: TcpStream) {
        self.idle.lock().expect("pool lock").push(s);
    }

    /// Sends `req` (already validated: `count` Redis commands, one HTTP request of method
    /// HEAD when `to_head`, or a `conn` connection's bytes) and returns the response bytes
    /// and whether a new connection was opened.
    ///
    /// The connection goes back to the pool only when `reusable` (every command is known
    /// to leave the connection's state unchanged), the response was exactly what the
    /// request calls for (one reply per Redis command, no byte more; one HTTP response not
    /// asking to close), and, for Redis, no reply is `+QUEUED` (a sign of a transaction
    /// left open). Anything else closes it: no request can leave a pooled connection in a
    /// state the next request sees.
    pub(crate) async fn exchange(
        &self,
        proto: Protocol,
        req: &[u8],
        count: usize,
        to_head: bool,
        reusable: bool,
    ) -> Result<(Vec<u8>, bool), UpstreamError> {
        let fresh = proto == Protocol::Conn;
        let (_permit, mut s, mut opened) = self.get(fresh).await?;
        let mut got = 0usize;
        let mut r = self
            .attempt(&mut s, proto, req, count, to_head, &mut got)
            .await;
        // A pooled HTTP connection the upstream closed (its keep-alive limit or timeout) ends
        // without a byte of response: a safe request (GET, HEAD, OPTIONS) goes again, once,
        // on a new connection; the application never sees the pool's close.
        if r.is_err() && got == 0 && !opened && proto == Protocol::Http && safe_method(req) {
            s = self.connect().await?;
            opened = true;
            r = self
                .attempt(&mut s, proto, req, count, to_head, &mut got)
                .await;
        }
        let (body, reuse) = r?;
        if reuse && reusable {
            self.put(s);
        }
        Ok((body, opened))
    }

    /// One write of `req` and read of its response on `s`, within the upstream timeout;
    /// `got` counts the response bytes read. `(response, whether s may be reused)`.
    async fn attempt(
        &self,
        s: &mut TcpStream,
        proto: Protocol,
        req: &[u8],
        count: usize,
        to_head: bool,
        got: &mut usize,
    ) -> Result<(Vec<u8>, bool), UpstreamError> {
        let fresh = proto == Protocol::Conn;
        let max = self.cfg.max_response;
        let work = async {
            s.write_all(req)
                .await
                .map_err(|e| UpstreamError::Unknown(format!("write: {e}")))?;
            if fresh {
                s.shutdown()
                    .await
                    .map_err(|e| UpstreamError::Unknown(format!("shutdown: {e}")))?;
            }
            let mut buf: Vec<u8> = Vec::with_capacity(4096);
            // Redis: replies found so far, where the next one starts, and whether one of
            // them is `+QUEUED`.
            let (mut found, mut at, mut queued) = (0usize, 0usize, false);
            loop {
                let mut eof = false;
                if buf.len() >= max {
                    return Err(UpstreamError::TooLarge(max));
                }
                if buf.capacity() - buf.len() < 4096 {
                    buf.reserve(16 * 1024);
                }
                let n = s
                    .read_buf(&mut buf)
                    .await
                    .map_err(|e| UpstreamError::Unknown(format!("read: {e}")))?;
                *got += n;
                if buf.len() > max {
                    return Err(UpstreamError::TooLarge(max));
                }
                if n == 0 {
                    eof = true;
                }
                match proto {
                    Protocol::Conn => {
                        if eof {
                            return Ok((buf, false));
                        }
                    }
                    Protocol::Redis => {
                        while found < count {
                            match resp::reply(&buf[at..], max - at) {
                                Ok(Some(n)) => {
                                    queued |= &buf[at..at + n] == b"+QUEUED\r\n";
                                    at += n;
                                    found += 1;
                                }
                                Ok(None) => break,
                                Err(resp::RespError::TooLarge(_)) => {
                                    return Err(UpstreamError::TooLarge(max))
                                }
                                Err(e) => {
                                    return Err(UpstreamError::Unknown(format!(
                                        "unparsable reply: {e}"
                                    )))
                                }
                            }
                        }
                        if found == count {
                            if at != buf.len() {
                                return Err(UpstreamError::Unknown(
                                    "more reply bytes than requests".into(),
                                ));
                            }
                            return Ok((buf, !queued));
                        }
                        if eof {
                            return Err(UpstreamError::Unknown("connection closed".into()));
                        }
                    }
                    Protocol::Http => match http::response(&buf, to_head, max) {
                        Ok(Some(m)) => {
                            if m.len != buf.len() {
                                return Err(UpstreamError::Unknown(
                                    "bytes after the response".into(),
                                ));
                            }
                            if m.head.close {
                                // The upstream closes this pooled connection: that is the
                                // pool's business, not the application's.
                                if let Some(b) = http::without_connection_header(&buf, m.head.len) {
                                    return Ok((b, false));
                                }
                            }
                            return Ok((buf, !m.head.close));
                        }
                        Ok(None) if eof => {
                            // A response delimited by the close of the connection.
                            return match http::response_head(&buf, to_head, max) {
                                Ok(Some(h)) if h.body == http::Body::UntilClose => Ok((buf, false)),
                                _ => Err(UpstreamError::Unknown("connection closed".into())),
                            };
                        }
                        Ok(None) => {}
                        Err(http::HttpError::TooLarge(_)) => {
                            return Err(UpstreamError::TooLarge(max))
                        }
                        Err(e) => {
                            return Err(UpstreamError::Unknown(format!("unparsable response: {e}")))
                        }
                    },
                }
            }
        };
        tokio::time::timeout(self.cfg.timeout, work)
            .await
            .map_err(|_| UpstreamError::Unknown("no response within the upstream timeout".into()))?
    }
}
