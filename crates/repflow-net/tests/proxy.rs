//! The proxy sidecars on loopback, against fake upstreams written here (a RESP server that
//! counts INCRs, an HTTP server that counts POSTs, an echo server), and attacks on their
//! exactly-once promise: copies after a restart, stale copies, a sidecar dying mid-request.

use repflow_net::frame::{encode_frame, flags, Header, HEADER_LEN};
use repflow_net::proxy::{
    resp, JournalConfig, Protocol, ProxyClient, ProxyClientConfig, ProxyServer, ProxyServerConfig,
};
use repflow_net::{ClientConfig, ConnMode, PolicyConfig, ServerConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A fake Redis: `INCR k` counts (one counter), `SLOW` answers after 1 s, `GET` returns the
/// counter as a bulk string, anything else `+OK`.
async fn fake_redis() -> (SocketAddr, Arc<AtomicU64>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let n = Arc::new(AtomicU64::new(0));
    let counter = n.clone();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            let n = n.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while let Ok(Some(r)) = resp::request(&buf, 1 << 20) {
                        let name =
                            String::from_utf8_lossy(&buf[r.name.clone()]).to_ascii_uppercase();
                        let out = match name.as_str() {
                            "INCR" => format!(":{}\r\n", n.fetch_add(1, Ordering::SeqCst) + 1),
                            "GET" => {
                                let v = n.load(Ordering::SeqCst).to_string();
                                format!("${}\r\n{v}\r\n", v.len())
                            }
                            "SLOW" => {
                                tokio::time::sleep(Duration::from_secs(1)).await;
                                "+SLOW\r\n".into()
                            }
                            _ => "+OK\r\n".into(),
                        };
                        buf.drain(..r.len);
                        if s.write_all(out.as_bytes()).await.is_err() {
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
    (addr, counter)
}

fn temp_journal(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("repflow-proxy-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d.join("journal")
}

/// A running server sidecar in a runtime of its own: `kill` drops that runtime, every task
/// of the sidecar (listeners, connections, requests at the upstream) dies at once, as in a
/// process killed with `kill -9` (minus the kernel's resets of its sockets, which the drop
/// of the sockets gives too). `kill` returns once those tasks and their sockets are gone.
struct Sidecar {
    addr: SocketAddr,
    upstream: SocketAddr,
    proto: Protocol,
    journal: Option<PathBuf>,
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sidecar {
    fn kill(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }

    /// Kills the sidecar if it still runs and starts a new one on the same ports, upstream
    /// and journal.
    async fn restart(&mut self) {
        self.kill();
        let journal = self.journal.clone();
        *self = server_sidecar(Some(self.addr), self.upstream, self.proto, journal).await;
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Two consecutive free ports on 127.0.0.1 (RepFlow copy i goes to port + i), drawn at
/// random from 20000-32000, below Linux's ephemeral range (`/proc/sys/net/ipv4/
/// ip_local_port_range`: 32768-60999 by default). A port the kernel hands out itself (a
/// bind to port 0) comes from that range, and so do the source ports of outgoing
/// connections: while a server sidecar is down, one of the client sidecar's (or the
/// upstream pool's) connections can take its port, and the restart on the same port then
/// cannot listen. A pair that is taken is skipped and another drawn (as `_free_port` in
/// tests/python/test_proxy.py does). Every server sidecar takes its ports here, restarted
/// or not: one picker for all.
fn free_port_pair() -> SocketAddr {
    use std::hash::{BuildHasher, RandomState};
    let rng = RandomState::new();
    for i in 0..1000u64 {
        let p = 20000 + (rng.hash_one(i) % (32000 - 20000 - 1)) as u16;
        let a = std::net::TcpListener::bind(("127.0.0.1", p));
        if a.is_ok() && std::net::TcpListener::bind(("127.0.0.1", p + 1)).is_ok() {
            return SocketAddr::from(([127, 0, 0, 1], p));
        }
    }
    panic!("no two free consecutive loopback ports in 20000-32000");
}

async fn server_sidecar(
    listen: Option<SocketAddr>,
    upstream: SocketAddr,
    proto: Protocol,
    journal: Option<PathBuf>,
) -> Sidecar {
    let listen = listen.unwrap_or_else(free_port_pair);
    let journal_path = journal.clone();
    let mut net = ServerConfig::ports(listen, 2);
    net.idle_timeout = Duration::from_secs(5);
    let mut cfg = ProxyServerConfig::new(net, upstream, proto);
    cfg.pool_size = 8;
    cfg.upstream_timeout = Duration::from_secs(5);
    cfg.journal = journal.map(|path| JournalConfig {
        path,
        window: Duration::from_secs(60),
        capacity: 1 << 16,
    });
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let s = ProxyServer::bind(cfg).await.expect("bind server sidecar");
            ready_tx.send(s.local_addrs()[0]).unwrap();
            tokio::spawn(s.run());
        });
        let _ = stop_rx.recv();
        // Not `shutdown_background`: it returns before the worker has dropped the tasks, and
        // a restart on the same ports could find the old listeners still open.
        rt.shutdown_timeout(Duration::from_secs(10));
    });
    let addr = ready_rx.await.unwrap();
    Sidecar {
        addr,
        upstream,
        proto,
        journal: journal_path,
        stop: Some(stop_tx),
        thread: Some(thread),
    }
}

async fn client_sidecar(to: SocketAddr, proto: Protocol, copies: u8) -> SocketAddr {
    let mut net = ClientConfig::new(PolicyConfig::repflow(copies));
    net.mode = ConnMode::Pooled;
    net.flow_timeout = Duration::from_secs(5);
    let cfg = ProxyClientConfig::new("127.0.0.1:0".parse().unwrap(), to, proto, net);
    let c = ProxyClient::bind(cfg).await.expect("bind client sidecar");
    let a = c.local_addr().unwrap();
    tokio::spawn(c.run());
    a
}

/// The path of an application's requests: `upstream` (its address and what it counts), a
/// server sidecar in front of it, a client sidecar sending 2 copies to that one.
struct Stack {
    /// What the upstream counts (INCRs, POSTs); an upstream of the test's own counts nothing.
    n: Arc<AtomicU64>,
    srv: Sidecar,
    /// Where the application connects: the client sidecar.
    cli: SocketAddr,
}

impl Stack {
    async fn start(
        upstream: (SocketAddr, Arc<AtomicU64>),
        proto: Protocol,
        journal: Option<PathBuf>,
    ) -> Stack {
        let (up, n) = upstream;
        let srv = server_sidecar(None, up, proto, journal).await;
        let cli = client_sidecar(srv.addr, proto, 2).await;
        Stack { n, srv, cli }
    }
}

/// Reads from `s` until `want` RESP replies have arrived (or EOF / 10 s); returns them.
async fn read_replies(s: &mut TcpStream, want: usize) -> Vec<String> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while out.len() < want {
        while let Ok(Some(n)) = resp::reply(&buf, 1 << 20) {
            out.push(String::from_utf8_lossy(&buf[..n]).trim_end().to_string());
            buf.drain(..n);
            if out.len() == want {
                return out;
            }
        }
        match tokio::time::timeout_at(deadline, s.read(&mut chunk)).await {
            Ok(Ok(k)) if k > 0 => buf.extend_from_slice(&chunk[..k]),
            _ => break,
        }
    }
    out
}

fn cmd(args: &[&str]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_pipeline_in_order_and_incr_once_with_two_copies() {
    let stack = Stack::start(fake_redis().await, Protocol::Redis, None).await;
    let mut s = TcpStream::connect(stack.cli).await.unwrap();
    let mut pipeline = Vec::new();
    for _ in 0..200 {
        pipeline.extend_from_slice(&cmd(&["INCR", "c"]));
    }
    pipeline.extend_from_slice(b"GET c\r\n"); // an inline command too
    s.write_all(&pipeline).await.unwrap();
    let replies = read_replies(&mut s, 201).await;
    let want: Vec<String> = (1..=200)
        .map(|i| format!(":{i}"))
        .chain(["$3\r\n200".into()])
        .collect();
    assert_eq!(replies, want);
    assert_eq!(
        stack.n.load(Ordering::SeqCst),
        200,
        "each INCR executed once despite 2 copies"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_refusals_are_clear_and_never_forwarded() {
    let stack = Stack::start(fake_redis().await, Protocol::Redis, None).await;
    // A stateful command: an error in its place, the connection goes on.
    let mut s = TcpStream::connect(stack.cli).await.unwrap();
    let mut b = cmd(&["INCR", "c"]);
    b.extend_from_slice(&cmd(&["MULTI"]));
    b.extend_from_slice(&cmd(&["INCR", "c"]));
    s.write_all(&b).await.unwrap();
    let r = read_replies(&mut s, 3).await;
    assert_eq!(r[0], ":1");
    assert!(
        r[1].starts_with("-ERR repflow proxy: command 'MULTI'"),
        "{r:?}"
    );
    assert_eq!(r[2], ":2");
    // Garbage after a valid command: the valid one runs, the rest is refused, closed.
    let mut s = TcpStream::connect(stack.cli).await.unwrap();
    let mut b = cmd(&["INCR", "c"]);
    b.extend_from_slice(b"*2\r\n$4\r\nINCR\r\n:1\r\n");
    s.write_all(&b).await.unwrap();
    let r = read_replies(&mut s, 3).await;
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(r[0], ":3");
    assert!(
        r[1].starts_with("-ERR repflow proxy: Protocol error"),
        "{r:?}"
    );
    let mut rest = Vec::new();
    assert_eq!(s.read_to_end(&mut rest).await.unwrap(), 0, "closed");
    assert_eq!(stack.n.load(Ordering::SeqCst), 3);
}

fn call_frame(flow_id: u64, copy: u8, timestamp_ms: u64, req: &[u8]) -> Vec<u8> {
    let mut payload = b"RP\x01\x01".to_vec();
    payload.extend_from_slice(req);
    let h = Header {
        flags: flags::CALL,
        copy,
        copies: 2,
        flow_id,
        length: 0,
        timestamp_ms,
        digest: 0,
    };
    encode_frame(h, None, &payload)
}

/// Sends one raw copy of a call to `addr` and returns the status byte and body of its response.
async fn raw_call(addr: SocketAddr, frame: &[u8]) -> (u8, Vec<u8>) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(frame).await.unwrap();
    let mut fixed = [0u8; HEADER_LEN];
    s.read_exact(&mut fixed).await.expect("reply header");
    let h = Header::parse(&fixed).expect("reply");
    let mut body = vec![0u8; h.length as usize];
    s.read_exact(&mut body).await.unwrap();
    (body[0], body[1..].to_vec())
}

/// Copy 0 of a request is executed; the server sidecar restarts; copy 1 arrives. With the
/// journal it is refused (status 1, not executed); without it, it executes a second time —
/// the attack is real, and the journal is what stops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_after_server_restart_is_not_executed_again() {
    for with_journal in [true, false] {
        let (up, n) = fake_redis().await;
        let journal = with_journal.then(|| temp_journal("restart"));
        let mut srv = server_sidecar(None, up, Protocol::Redis, journal).await;
        let id = 0x5eed_0000 + u64::from(with_journal);
        let ts = repflow_net::frame::now_ms();
        let (st, body) = raw_call(srv.addr, &call_frame(id, 0, ts, &cmd(&["INCR", "c"]))).await;
        assert_eq!((st, body.as_slice()), (0, &b":1\r\n"[..]));
        // Restart: the old sidecar is gone (its task and listeners), a new one on the same ports.
        srv.restart().await;
        let (st, body) = raw_call(srv.addr, &call_frame(id, 1, ts, &cmd(&["INCR", "c"]))).await;
        if with_journal {
            assert_eq!(st, 1, "refused: {}", String::from_utf8_lossy(&body));
            assert!(String::from_utf8_lossy(&body).contains("already executed"));
            assert_eq!(
                n.load(Ordering::SeqCst),
                1,
                "INCR executed once across the restart"
            );
        } else {
            assert_eq!(st, 0);
            assert_eq!(
                n.load(Ordering::SeqCst),
                2,
                "without a journal the copy executes again"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_older_than_the_window_are_refused() {
    let (up, n) = fake_redis().await;
    let srv = server_sidecar(None, up, Protocol::Redis, Some(temp_journal("stale"))).await;
    let old = repflow_net::frame::now_ms() - 120_000;
    let (st, body) = raw_call(srv.addr, &call_frame(77, 0, old, &cmd(&["INCR", "c"]))).await;
    assert_eq!(st, 1, "{}", String::from_utf8_lossy(&body));
    // Half-parsed or mismatched envelopes are refused before the upstream too.
    let (st, _) = raw_call(
        srv.addr,
        &call_frame(78, 0, repflow_net::frame::now_ms(), b"*2\r\n$4\r\nINCR\r\n"),
    )
    .await;
    assert_eq!(st, 1);
    assert_eq!(n.load(Ordering::SeqCst), 0);
}

/// The server sidecar dies while a request is at the upstream: the application gets an
/// error and its connection closes; the request executed at most once; after a restart on
/// the same journal the service works again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_sidecar_dies_mid_request() {
    let journal = Some(temp_journal("dies"));
    let mut stack = Stack::start(fake_redis().await, Protocol::Redis, journal).await;
    let mut s = TcpStream::connect(stack.cli).await.unwrap();
    let mut b = cmd(&["INCR", "c"]);
    b.extend_from_slice(&cmd(&["SLOW"]));
    s.write_all(&cmd(&["INCR", "c"])).await.unwrap();
    assert_eq!(read_replies(&mut s, 1).await, [":1"]);
    s.write_all(&b).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    stack.srv.kill();
    let r = read_replies(&mut s, 2).await;
    assert_eq!(r.len(), 2, "{r:?}");
    assert!(
        r.iter().all(|x| x.starts_with("-ERR repflow proxy:")),
        "{r:?}"
    );
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest)).await;
    assert!(stack.n.load(Ordering::SeqCst) <= 2);
    let before = stack.n.load(Ordering::SeqCst);
    stack.srv.restart().await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let mut s = TcpStream::connect(stack.cli).await.unwrap();
    s.write_all(&cmd(&["INCR", "c"])).await.unwrap();
    assert_eq!(read_replies(&mut s, 1).await, [format!(":{}", before + 1)]);
}

/// A fake HTTP/1.1 server: counts POSTs, answers each request with its count (chunked for
/// `/chunked`), keeps the connection open.
async fn fake_http() -> (SocketAddr, Arc<AtomicU64>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let n = Arc::new(AtomicU64::new(0));
    let counter = n.clone();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            let n = n.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while let Ok(Some(m)) = repflow_net::proxy::http::request(&buf, 1 << 20) {
                        let post = buf.starts_with(b"POST");
                        let chunked = buf.windows(8).take(40).any(|w| w == b"/chunked");
                        let v = if post {
                            n.fetch_add(1, Ordering::SeqCst) + 1
                        } else {
                            n.load(Ordering::SeqCst)
                        };
                        let body = v.to_string();
                        let out = if chunked {
                            format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n", body.len())
                        } else {
                            format!(
                                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                                body.len()
                            )
                        };
                        buf.drain(..m.len);
                        if s.write_all(out.as_bytes()).await.is_err() {
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
    (addr, counter)
}

async fn read_http(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<String> {
    let mut chunk = [0u8; 4096];
    loop {
        if let Ok(Some(m)) = repflow_net::proxy::http::response(buf, false, 1 << 20) {
            let r = String::from_utf8_lossy(&buf[..m.len]).to_string();
            buf.drain(..m.len);
            return Some(r);
        }
        match tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk)).await {
            Ok(Ok(k)) if k > 0 => buf.extend_from_slice(&chunk[..k]),
            _ => return None,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_keep_alive_chunked_and_post_once() {
    let journal = Some(temp_journal("http"));
    let stack = Stack::start(fake_http().await, Protocol::Http, journal).await;
    let mut s = TcpStream::connect(stack.cli).await.unwrap();
    let mut buf = Vec::new();
    for i in 1..=5u64 {
        s.write_all(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi")
            .await
            .unwrap();
        let r = read_http(&mut s, &mut buf).await.expect("response");
        assert!(r.ends_with(&format!("\r\n\r\n{i}")), "{r}");
    }
    s.write_all(
        b"POST /chunked HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
    )
    .await
    .unwrap();
    let r = read_http(&mut s, &mut buf).await.expect("chunked response");
    assert!(
        r.contains("Transfer-Encoding: chunked") && r.contains("\r\n6\r\n"),
        "{r}"
    );
    assert_eq!(
        stack.n.load(Ordering::SeqCst),
        6,
        "each POST once despite 2 copies"
    );
    // Smuggling-shaped input: 400, closed, not forwarded.
    s.write_all(b"POST / HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\nhi")
        .await
        .unwrap();
    let r = read_http(&mut s, &mut buf).await.expect("400");
    assert!(r.starts_with("HTTP/1.1 400 "), "{r}");
    assert_eq!(stack.n.load(Ordering::SeqCst), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conn_mode_carries_a_whole_connection() {
    // An upstream that answers every connection with its bytes reversed, then closes.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            tokio::spawn(async move {
                let mut b = Vec::new();
                s.read_to_end(&mut b).await.unwrap();
                b.reverse();
                s.write_all(&b).await.unwrap();
            });
        }
    });
    let stack = Stack::start((up, Arc::default()), Protocol::Conn, None).await;
    for _ in 0..3 {
        let mut s = TcpStream::connect(stack.cli).await.unwrap();
        s.write_all(b"hello proxy").await.unwrap();
        s.shutdown().await.unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, b"yxorp olleh");
    }
}

/// A response delimited by the upstream's close reaches the application whole, and the
/// application's connection is closed after it (that close is how it finds the body's end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_response_until_close_closes_the_client_connection() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while repflow_net::proxy::http::request(&buf, 1 << 20) == Ok(None) {
                    let k = s.read(&mut chunk).await.unwrap();
                    buf.extend_from_slice(&chunk[..k]);
                }
                s.write_all(b"HTTP/1.0 200 OK\r\n\r\nuntil close")
                    .await
                    .unwrap();
            });
        }
    });
    let stack = Stack::start((up, Arc::default()), Protocol::Http, None).await;
    let mut s = TcpStream::connect(stack.cli).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out))
        .await
        .expect("closed after the response")
        .unwrap();
    assert_eq!(out, b"HTTP/1.0 200 OK\r\n\r\nuntil close");
}
