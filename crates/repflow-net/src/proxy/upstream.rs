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
use tracing::debug;

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
pub(crate) fn safe_method(req: &[u8]) -> bool {
    [&b"GET "[..], b"HEAD ", b"OPTIONS "]
        .iter()
        .any(|m| req.starts_with(m))
}

/// One request of an exchange (an HTTP request, or one Redis command of a pipelined run):
/// where its bytes end in the exchange's bytes, and whether it may be sent again after it
/// was written (an HTTP GET, HEAD or OPTIONS; a read-only Redis command).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Part {
    pub(crate) end: usize,
    pub(crate) idempotent: bool,
}

/// What an exchange gave back.
#[derive(Debug, Default)]
pub(crate) struct Exchanged {
    /// The response bytes, one response per request in order (the proxy's own error response
    /// in place of the ones counted in `failed`).
    pub(crate) body: Vec<u8>,
    /// Upstream connections opened for it.
    pub(crate) opened: u64,
    /// Requests sent on a new connection after the upstream closed a pooled one without
    /// answering them (never written to it, or idempotent).
    pub(crate) resent: u64,
    /// Requests answered with the proxy's error response instead: written to a pooled
    /// connection the upstream then closed without answering them, and not idempotent (or
    /// their second sending failed too); their outcome is unknown.
    pub(crate) failed: u64,
}

/// How far an attempt got: bytes of the request written, and the response bytes read
/// (for Redis, `replies` complete replies in `buf[..reply_end]`).
#[derive(Debug, Default)]
struct Progress {
    sent: usize,
    got: usize,
    replies: usize,
    reply_end: usize,
    buf: Vec<u8>,
    /// The attempt ended because the connection closed or failed (EOF, reset), not by a
    /// timeout or a response it could not accept.
    closed: bool,
}

/// The `n` complete Redis replies at the start of `buf`.
fn split_replies(buf: &[u8], n: usize) -> Vec<&[u8]> {
    let mut out = Vec::with_capacity(n);
    let mut at = 0;
    while out.len() < n {
        match resp::reply(&buf[at..], buf.len() - at) {
            Ok(Some(k)) => {
                out.push(&buf[at..at + k]);
                at += k;
            }
            _ => break,
        }
    }
    out
}

/// The proxy's own response for a request it could not get answered: a Redis error reply,
/// or an HTTP `502` that leaves the application's connection open (no body after a HEAD).
pub(crate) fn error_response(proto: Protocol, to_head: bool, msg: &str) -> Vec<u8> {
    let msg: String = msg
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match proto {
        Protocol::Redis => format!("-ERR repflow proxy: {msg}\r\n").into_bytes(),
        _ => {
            let body = format!("repflow proxy: {msg}\n");
            let mut out = format!(
                "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .into_bytes();
            if !to_head {
                out.extend_from_slice(body.as_bytes());
            }
            out
        }
    }
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

    /// Sends `req` (already validated: the requests `parts`, one HTTP request of method HEAD
    /// when `to_head`, Redis commands, or a `conn` connection's bytes) and returns the
    /// responses.
    ///
    /// The connection goes back to the pool only when `reusable` (every command is known
    /// to leave the connection's state unchanged), the response was exactly what the
    /// request calls for (one reply per Redis command, no byte more; one HTTP response not
    /// asking to close), and, for Redis, no reply is `+QUEUED` (a sign of a transaction
    /// left open). Anything else closes it: no request can leave a pooled connection in a
    /// state the next request sees.
    ///
    /// An upstream connection the upstream closed before answering every request (its
    /// keep-alive limit or timeout, a restart) is the pool's event, not the application's:
    /// the requests it left unanswered that were never written to it (they cannot have
    /// executed) and the idempotent ones are sent once more on a new connection; the others
    /// (written, so perhaps executed) get the proxy's error response each, and the replies
    /// that did arrive are kept. The exchange then succeeds as a whole, so the
    /// application's connection stays open and its later requests go on.
    pub(crate) async fn exchange(
        &self,
        proto: Protocol,
        req: &[u8],
        parts: &[Part],
        to_head: bool,
        reusable: bool,
    ) -> Result<Exchanged, UpstreamError> {
        let fresh = proto == Protocol::Conn;
        let count = parts.len();
        let (_permit, mut s, opened) = self.get(fresh).await?;
        let mut ex = Exchanged {
            opened: u64::from(opened),
            ..Exchanged::default()
        };
        let mut p = Progress::default();
        let err = match self
            .attempt(&mut s, proto, req, count, to_head, &mut p)
            .await
        {
            Ok((body, reuse)) => {
                if reuse && reusable {
                    self.put(s);
                }
                ex.body = body;
                return Ok(ex);
            }
            Err(e) => e,
        };
        drop(s);
        // A close before the responses is the pool's event (the connection reached the
        // upstream's keep-alive limit or timeout, or the upstream restarted), whether the
        // connection was idle in the pool or just opened (an upstream's limit can fall in
        // the middle of a pipelined run). An HTTP response cut short, a timeout or a
        // response refused is the upstream's failure: outcome unknown as a whole.
        let pool_close = !fresh && p.closed && (proto == Protocol::Redis || p.got == 0);
        if !pool_close {
            return Err(err);
        }
        let start = |i: usize| if i == 0 { 0 } else { parts[i - 1].end };
        let answered = p.replies;
        let again: Vec<usize> = (answered..count)
            .filter(|&i| start(i) >= p.sent || parts[i].idempotent)
            .collect();
        debug!(
            upstream = %self.cfg.addr,
            error = %err,
            answered,
            unanswered = count - answered,
            again = again.len(),
            "upstream closed a pooled connection"
        );
        // The replies to the requests sent again, in order; fewer when that failed too.
        let mut second: Vec<Vec<u8>> = Vec::new();
        let mut second_err: Option<String> = None;
        if !again.is_empty() {
            let mut req2 = Vec::new();
            for &i in &again {
                req2.extend_from_slice(&req[start(i)..parts[i].end]);
            }
            match self.connect().await {
                Ok(mut s2) => {
                    ex.opened += 1;
                    let mut p2 = Progress::default();
                    match self
                        .attempt(&mut s2, proto, &req2, again.len(), to_head, &mut p2)
                        .await
                    {
                        Ok((b, reuse)) => {
                            if reuse && reusable {
                                self.put(s2);
                            }
                            second = match proto {
                                Protocol::Redis => split_replies(&b, again.len())
                                    .into_iter()
                                    .map(<[u8]>::to_vec)
                                    .collect(),
                                _ => vec![b],
                            };
                        }
                        Err(e) => {
                            second = split_replies(&p2.buf[..p2.reply_end], p2.replies)
                                .into_iter()
                                .map(<[u8]>::to_vec)
                                .collect();
                            second_err = Some(e.to_string());
                        }
                    }
                }
                Err(e) => second_err = Some(e.to_string()),
            }
        }
        ex.body = p.buf[..p.reply_end].to_vec();
        let mut second = second.into_iter();
        for i in answered..count {
            if again.contains(&i) {
                if let Some(r) = second.next() {
                    ex.body.extend_from_slice(&r);
                    ex.resent += 1;
                    continue;
                }
                let why = second_err.as_deref().unwrap_or("no response");
                ex.body.extend_from_slice(&error_response(
                    proto,
                    to_head,
                    &format!("the upstream closed a pooled connection before answering; sent again on a new connection, that failed too, outcome unknown: {why}"),
                ));
            } else {
                ex.body.extend_from_slice(&error_response(
                    proto,
                    to_head,
                    "the upstream closed a pooled connection after this request was written and before its response; outcome unknown (not sent again: not idempotent)",
                ));
            }
            ex.failed += 1;
        }
        Ok(ex)
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
        p: &mut Progress,
    ) -> Result<(Vec<u8>, bool), UpstreamError> {
        let fresh = proto == Protocol::Conn;
        let max = self.cfg.max_response;
        let work = async {
            while p.sent < req.len() {
                match s.write(&req[p.sent..]).await {
                    Ok(0) => {
                        p.closed = true;
                        return Err(UpstreamError::Unknown("write: connection closed".into()));
                    }
                    Ok(n) => p.sent += n,
                    Err(e) => {
                        p.closed = true;
                        return Err(UpstreamError::Unknown(format!("write: {e}")));
                    }
                }
            }
            if fresh {
                s.shutdown()
                    .await
                    .map_err(|e| UpstreamError::Unknown(format!("shutdown: {e}")))?;
            }
            p.buf.reserve(4096);
            // Redis: whether one of the replies is `+QUEUED`.
            let mut queued = false;
            loop {
                let mut eof = false;
                if p.buf.len() >= max {
                    return Err(UpstreamError::TooLarge(max));
                }
                if p.buf.capacity() - p.buf.len() < 4096 {
                    p.buf.reserve(16 * 1024);
                }
                let n = match s.read_buf(&mut p.buf).await {
                    Ok(n) => n,
                    Err(e) => {
                        p.closed = true;
                        return Err(UpstreamError::Unknown(format!("read: {e}")));
                    }
                };
                p.got += n;
                if p.buf.len() > max {
                    return Err(UpstreamError::TooLarge(max));
                }
                if n == 0 {
                    eof = true;
                    p.closed = true;
                }
                match proto {
                    Protocol::Conn => {
                        if eof {
                            return Ok((std::mem::take(&mut p.buf), false));
                        }
                    }
                    Protocol::Redis => {
                        while p.replies < count {
                            match resp::reply(&p.buf[p.reply_end..], max - p.reply_end) {
                                Ok(Some(n)) => {
                                    queued |=
                                        &p.buf[p.reply_end..p.reply_end + n] == b"+QUEUED\r\n";
                                    p.reply_end += n;
                                    p.replies += 1;
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
                        if p.replies == count {
                            if p.reply_end != p.buf.len() {
                                return Err(UpstreamError::Unknown(
                                    "more reply bytes than requests".into(),
                                ));
                            }
                            return Ok((std::mem::take(&mut p.buf), !queued));
                        }
                        if eof {
                            return Err(UpstreamError::Unknown("connection closed".into()));
                        }
                    }
                    Protocol::Http => match http::response(&p.buf, to_head, max) {
                        Ok(Some(m)) => {
                            if m.len != p.buf.len() {
                                return Err(UpstreamError::Unknown(
                                    "bytes after the response".into(),
                                ));
                            }
                            if m.head.close {
                                // The upstream closes this pooled connection: that is the
                                // pool's business, not the application's.
                                if let Some(b) = http::without_connection_header(&p.buf, m.head.len)
                                {
                                    return Ok((b, false));
                                }
                            }
                            return Ok((std::mem::take(&mut p.buf), !m.head.close));
                        }
                        Ok(None) if eof => {
                            // A response delimited by the close of the connection.
                            return match http::response_head(&p.buf, to_head, max) {
                                Ok(Some(h)) if h.body == http::Body::UntilClose => {
                                    Ok((std::mem::take(&mut p.buf), false))
                                }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::net::TcpListener;

    /// A Redis upstream whose first connection reads 64 KiB and resets (`SO_LINGER` 0)
    /// without a reply; every later connection answers each command `+OK`, counting them.
    async fn resetting_upstream() -> (SocketAddr, Arc<AtomicUsize>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let executed = Arc::new(AtomicUsize::new(0));
        let n = executed.clone();
        tokio::spawn(async move {
            let (mut first, _) = l.accept().await.unwrap();
            let mut b = vec![0u8; 64 * 1024];
            let mut got = 0;
            while got < b.len() {
                got += first.read(&mut b[got..]).await.unwrap();
            }
            socket2::SockRef::from(&first)
                .set_linger(Some(Duration::ZERO))
                .unwrap();
            drop(first);
            loop {
                let (mut s, _) = l.accept().await.unwrap();
                let n = n.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = vec![0u8; 64 * 1024];
                    loop {
                        while let Ok(Some(r)) = resp::request(&buf, 1 << 20) {
                            buf.drain(..r.len);
                            n.fetch_add(1, Ordering::SeqCst);
                            if s.write_all(b"+OK\r\n").await.is_err() {
                                return;
                            }
                        }
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(k) => buf.extend_from_slice(&chunk[..k]),
                        }
                    }
                });
            }
        });
        (addr, executed)
    }

    /// A pipelined run larger than the sockets' buffers meets an upstream that resets the
    /// connection after reading its first 64 KiB: the commands whose bytes were never
    /// written (they cannot have executed) are sent on a new connection, whatever they are,
    /// and executed once; the SETs that were (perhaps partly) written get the proxy's error.
    /// Before, the whole run was one `outcome unknown` error.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn commands_never_written_to_a_reset_connection_are_sent_again() {
        let (addr, executed) = resetting_upstream().await;
        let pool = Pool::new(PoolConfig {
            addr,
            size: 4,
            wait: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(2),
            timeout: Duration::from_secs(10),
            max_response: 1 << 20,
        });
        let value = "v".repeat(60_000);
        let mut req = Vec::new();
        let mut parts = Vec::new();
        for i in 0..400 {
            let k = format!("k{i}");
            req.extend_from_slice(
                format!(
                    "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{value}\r\n",
                    k.len(),
                    value.len()
                )
                .as_bytes(),
            );
            parts.push(Part {
                end: req.len(),
                idempotent: false,
            });
        }
        assert!(
            req.len() > 20 << 20,
            "larger than loopback's socket buffers"
        );
        let ex = pool
            .exchange(Protocol::Redis, &req, &parts, false, true)
            .await
            .expect("the exchange succeeds request by request");
        let replies = split_replies(&ex.body, parts.len());
        assert_eq!(replies.len(), parts.len());
        let failed = replies
            .iter()
            .take_while(|r| r.starts_with(b"-ERR"))
            .count();
        assert!(failed >= 1, "the first SET was written");
        assert!(
            failed < parts.len(),
            "some SETs were never written (buffers < 24 MB)"
        );
        assert!(
            replies[failed..].iter().all(|r| *r == b"+OK\r\n"),
            "after the written ones, every SET was sent again and answered"
        );
        assert_eq!(ex.failed as usize, failed);
        assert_eq!(ex.resent as usize, parts.len() - failed);
        assert_eq!(executed.load(Ordering::SeqCst), parts.len() - failed);
        assert!(
            String::from_utf8_lossy(replies[0]).contains("outcome unknown (not sent again"),
            "{}",
            String::from_utf8_lossy(replies[0])
        );
    }
}
