//! Adversarial suite: each test is an attack on a server (or client) on 127.0.0.1 / ::1 that
//! succeeded against the code before issue 20. Short configured timeouts keep each test
//! within a few seconds; run with `--test-threads=1` (they bind real ports and one measures
//! the process's address space).

use repflow_net::frame::{encode_frame, flags, Header, HEADER_LEN};
use repflow_net::{
    AckAfter, Client, ClientConfig, IncomingKind, PolicyConfig, Server, ServerConfig,
};
use std::io::BufRead;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn bind(tweak: impl Fn(&mut ServerConfig)) -> (Server, SocketAddr) {
    let mut cfg = ServerConfig::ports("127.0.0.1:0".parse().unwrap(), 1);
    tweak(&mut cfg);
    let s = Server::bind(cfg).await.expect("bind");
    let a = s.local_addrs()[0];
    (s, a)
}

/// Waits (at most `limit`) until `f` holds.
async fn until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    f()
}

fn frame(
    flow_id: u64,
    copy: u8,
    copies: u8,
    call: bool,
    data: &[u8],
    key: Option<&[u8]>,
) -> Vec<u8> {
    let h = Header {
        flags: if call { flags::CALL } else { 0 },
        copy,
        copies,
        flow_id,
        length: 0,
        timestamp_ms: repflow_net::frame::now_ms(),
        digest: 0,
    };
    encode_frame(h, key, data)
}

/// Reads one reply frame (header + payload) from a raw connection.
async fn reply(s: &mut TcpStream, tagged: bool) -> (Header, Vec<u8>) {
    let mut fixed = [0u8; HEADER_LEN];
    s.read_exact(&mut fixed).await.expect("reply header");
    let h = Header::parse(&fixed).expect("valid reply");
    if tagged {
        let mut t = [0u8; 16];
        s.read_exact(&mut t).await.unwrap();
    }
    let mut body = vec![0u8; h.length as usize];
    s.read_exact(&mut body).await.unwrap();
    (h, body)
}

/// A connection to `addr` from the loopback address `from` (any of 127.0.0.0/8 is local on
/// Linux), or from the default address.
async fn connect_from(addr: SocketAddr, from: Option<[u8; 4]>) -> TcpStream {
    let Some(ip) = from else {
        return TcpStream::connect(addr).await.unwrap();
    };
    let s = tokio::net::TcpSocket::new_v4().unwrap();
    s.bind(SocketAddr::from((ip, 0))).unwrap();
    s.connect(addr).await.unwrap()
}

/// Sends `bytes` from `from` and reports whether the server closed the connection without
/// answering anything (within 3 s).
async fn closed_unanswered(addr: SocketAddr, from: Option<[u8; 4]>, bytes: &[u8]) -> bool {
    let mut c = connect_from(addr, from).await;
    let _ = c.write_all(bytes).await;
    let mut b = Vec::new();
    match tokio::time::timeout(Duration::from_secs(3), c.read_to_end(&mut b)).await {
        Ok(_) => b.is_empty(),
        Err(_) => false,
    }
}

/// Everything the server delivers until it has been quiet for 300 ms.
async fn drain(srv: &mut Server) -> Vec<repflow_net::Incoming> {
    let mut v = Vec::new();
    while let Ok(Some(inc)) = tokio::time::timeout(Duration::from_millis(300), srv.next()).await {
        v.push(inc);
    }
    v
}

fn vm_size_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Memory by announcement: 40 connections each announce a 64 MiB payload and send 1 KiB.
/// Before issue 20 the server allocated every announced buffer up front (40 × 64 MiB =
/// 2.5 GiB of address space); now its buffers grow with the bytes received.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn announced_size_is_not_allocated() {
    let (srv, addr) = bind(|c| c.max_flow_size = 64 << 20).await;
    let before = vm_size_kib();
    let mut conns = Vec::new();
    for i in 0..40u64 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let mut f = Header {
            flags: 0,
            copy: 0,
            copies: 1,
            flow_id: i,
            length: (64 << 20) - 1,
            timestamp_ms: 0,
            digest: 0,
        }
        .to_bytes()
        .to_vec();
        f.extend(std::iter::repeat_n(7u8, 1024));
        s.write_all(&f).await.unwrap();
        conns.push(s);
    }
    // Let the server read what was sent.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let grown_mib = vm_size_kib().saturating_sub(before) / 1024;
    assert!(
        grown_mib < 512,
        "address space grew by {grown_mib} MiB for 40 KiB received"
    );
    // The server's own account: each connection holds one buffer step (64 KiB) at most.
    let c = srv.counters();
    assert!(c.buffered_bytes >= 40 * 1024, "{c:?}");
    assert!(c.buffered_peak <= 40 * 64 * 1024, "{c:?}");
    drop(conns);
    assert!(
        until(Duration::from_secs(5), || srv.counters().buffered_bytes
            == 0)
        .await
    );
}

/// Slowloris within a frame: a header announcing 1,000 bytes, then one byte every 100 ms
/// (always within the idle timeout). The frame deadline closes the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trickled_frame_hits_its_deadline() {
    let (srv, addr) = bind(|c| {
        c.idle_timeout = Duration::from_secs(5);
        c.frame_timeout = Duration::from_millis(500);
    })
    .await;
    let mut c = TcpStream::connect(addr).await.unwrap();
    let h = Header {
        flags: 0,
        copy: 0,
        copies: 1,
        flow_id: 9,
        length: 1000,
        timestamp_ms: 0,
        digest: 0,
    };
    c.write_all(&h.to_bytes()).await.unwrap();
    let t = Instant::now();
    let mut closed = false;
    while t.elapsed() < Duration::from_secs(4) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if c.write_all(&[1]).await.is_err() {
            closed = true;
            break;
        }
        let mut b = [0u8; 1];
        if let Ok(Ok(0) | Err(_)) =
            tokio::time::timeout(Duration::from_millis(1), c.read(&mut b)).await
        {
            closed = true;
            break;
        }
    }
    assert!(
        closed,
        "a frame trickling one byte per 100 ms was kept for 4 s"
    );
    assert_eq!(srv.counters().frame_timeouts, 1);
}

/// Slowloris from one source: 20 connections from 127.0.0.1 each trickle part of a header.
/// The global limit is 16 connections; a source may hold a quarter (4 by default) so that a
/// client from another address (::1) still gets all its flows through. The connections past
/// the share are counted (since issue 37 they evict the source's own most-stalled
/// connection rather than being refused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_source_cannot_take_every_connection() {
    let mut srv = None;
    for _ in 0..20 {
        // One server listening on both loopback addresses, same port.
        let port = std::net::TcpListener::bind("[::1]:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut cfg = ServerConfig::ports(format!("127.0.0.1:{port}").parse().unwrap(), 1);
        cfg.addrs.push(format!("[::1]:{port}").parse().unwrap());
        cfg.max_connections = 16;
        cfg.max_connections_per_source = 4;
        cfg.header_timeout = Duration::from_secs(60);
        if let Ok(s) = Server::bind(cfg).await {
            srv = Some(s);
            break;
        }
    }
    let mut srv = srv.expect("bind on 127.0.0.1 and ::1");
    let v6 = srv.local_addrs()[1];
    let v4 = srv.local_addrs()[0];
    let mut attackers = Vec::new();
    for _ in 0..20 {
        if let Ok(mut c) = TcpStream::connect(v4).await {
            let _ = c.write_all(b"RF").await;
            attackers.push(c);
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stats = srv.stats();
    let c = stats.counters();
    assert!(
        c.connections_rejected_source + c.connections_evicted >= 16,
        "{c:?}"
    );
    let sink = tokio::spawn(async move { while srv.next().await.is_some() {} });
    let mut cc = ClientConfig::new(PolicyConfig::tcp());
    cc.flow_timeout = Duration::from_secs(1);
    let client = Client::new(cc);
    let mut ok = 0;
    for i in 0..10u8 {
        if client.send(v6, vec![i; 100]).await.is_ok() {
            ok += 1;
        }
    }
    assert_eq!(
        ok, 10,
        "a client from another address got {ok}/10 flows through"
    );
    drop(attackers);
    sink.abort();
}

/// A peer that never reads: it sends a call whose response (32 MiB) cannot fit the socket
/// buffers. The write must time out and free the connection's slot (the server takes one
/// connection at a time here), instead of holding it forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_reading_peer_is_dropped() {
    let (mut srv, addr) = bind(|c| {
        c.max_connections = 1;
        c.idle_timeout = Duration::from_secs(30);
        c.write_timeout = Duration::from_millis(300);
    })
    .await;
    let stats = srv.stats();
    let app = tokio::spawn(async move {
        while let Some(inc) = srv.next().await {
            if inc.kind == IncomingKind::Call {
                inc.respond(vec![1u8; 32 << 20]);
            }
        }
    });
    let mut hog = TcpStream::connect(addr).await.unwrap();
    hog.write_all(&frame(1, 0, 1, true, b"give me a lot", None))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Within a few seconds a second connection must be served.
    let served = async {
        loop {
            let Ok(mut c) = TcpStream::connect(addr).await else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            if c.write_all(&frame(2, 0, 1, false, b"x", None))
                .await
                .is_ok()
            {
                let mut fixed = [0u8; HEADER_LEN];
                if c.read_exact(&mut fixed).await.is_ok() {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let got = tokio::time::timeout(Duration::from_secs(15), served).await;
    assert!(
        got.is_ok(),
        "a peer that never reads kept the only connection slot"
    );
    assert_eq!(stats.counters().write_timeouts, 1);
    drop(hog);
    app.abort();
}

/// Copy 0, copy 0 again, then copy 1 of one flow: delivered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_copy_index_is_delivered_once() {
    let (mut srv, addr) = bind(|_| {}).await;
    for copy in [0u8, 0, 1] {
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(&frame(77, copy, 2, false, b"once", None))
            .await
            .unwrap();
        let (h, _) = reply(&mut c, false).await;
        assert_eq!(h.flow_id, 77);
    }
    let mut n = 0;
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(300), srv.next()).await {
        n += 1;
    }
    assert_eq!(n, 1, "one flow, copies 0, 0, 1: delivered {n} times");
}

/// A copies = 1 frame then a copies = 2 frame of the same flow id: delivered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_one_then_two_is_delivered_once() {
    let (mut srv, addr) = bind(|_| {}).await;
    for (copy, copies) in [(0u8, 1u8), (1, 2)] {
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(&frame(78, copy, copies, false, b"once", None))
            .await
            .unwrap();
        reply(&mut c, false).await;
    }
    let mut n = 0;
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(300), srv.next()).await {
        n += 1;
    }
    assert_eq!(
        n, 1,
        "copies=1 then copies=2 of one flow: delivered {n} times"
    );
}

/// `run_schedule` under more load than the client keeps up with: no flow starts after
/// `duration`, and every flow the client counted as completed is recorded as completed
/// (the drain ends while many are in flight).
#[tokio::test(flavor = "current_thread")]
async fn load_records_agree_with_counters_and_stop_on_time() {
    use repflow_net::load::{run_schedule, ScheduledFlow};
    let (mut srv, addr) = bind(|_| {}).await;
    let sink = tokio::spawn(async move { while srv.next().await.is_some() {} });
    let client = Client::new(ClientConfig::new(PolicyConfig::repflow(1)));
    let duration = Duration::from_millis(30);
    let flows: Vec<ScheduledFlow> = (0..3000u64)
        .map(|i| ScheduledFlow {
            at: duration * (i as u32) / 3000,
            dst: addr,
            size: 1000,
        })
        .collect();
    let out = run_schedule(&client, &flows, duration, Duration::from_millis(20)).await;
    let late = out.iter().filter(|o| o.started > duration).count();
    let ok = out
        .iter()
        .filter(|o| matches!(o.result, Some(Ok(_))))
        .count() as u64;
    let counted = client.counters().flows;
    sink.abort();
    assert_eq!(
        late,
        0,
        "{late} of {} flows started after the duration",
        out.len()
    );
    assert_eq!(
        ok, counted,
        "records say {ok} completed, the client counted {counted}"
    );
}

/// Flow-id injection: another client on the same host sees one of the victim's flow ids and
/// sends its own data under the next ids it predicts (id + 1, + 2, …) before the victim's
/// next flows. The victim's flows must be delivered with the victim's data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guessed_flow_ids_cannot_inject() {
    let (mut srv, addr) = bind(|_| {}).await;
    let victim = Client::new(ClientConfig::new(PolicyConfig::repflow(2)));
    let first = victim.send(addr, b"victim-0".to_vec()).await.unwrap();
    for k in 1..=8u64 {
        let mut a = TcpStream::connect(addr).await.unwrap();
        let f = frame(first.flow_id.wrapping_add(k), 0, 2, false, b"forged", None);
        a.write_all(&f).await.unwrap();
        reply(&mut a, false).await;
    }
    for i in 1..=8u8 {
        victim
            .send(addr, format!("victim-{i}").into_bytes())
            .await
            .unwrap();
    }
    let mut victims = 0;
    while let Ok(Some(inc)) = tokio::time::timeout(Duration::from_millis(300), srv.next()).await {
        if inc.data.starts_with(b"victim-") {
            victims += 1;
        }
    }
    assert_eq!(
        victims, 9,
        "only {victims} of the victim's 9 flows delivered its own data"
    );
}

/// With a key, a captured tagged frame replayed: delivered once while its id is remembered;
/// after the full table forgot it, refused as older than what was forgotten; a frame whose
/// timestamp is outside the replay window is refused whatever its id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_tagged_frames_are_refused() {
    let key: &[u8] = b"secret";
    let (mut srv, addr) = bind(|c| {
        c.key = Some(key.to_vec());
        c.dedup_capacity = 1;
        c.replay_window = Duration::from_secs(5);
    })
    .await;
    let captured = frame(500, 0, 1, false, b"pay me", Some(key));
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(&captured).await.unwrap();
    let (h, _) = reply(&mut c, true).await;
    assert_eq!(h.flow_id, 500);
    // The same copy again (same address): a sender never writes a copy twice, so it is a
    // replay and is neither delivered nor answered.
    for _ in 0..2 {
        assert!(
            closed_unanswered(addr, None, &captured).await,
            "replay answered"
        );
    }
    // A newer flow pushes id 500 out of the one-entry table.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(&frame(501, 0, 1, false, b"other", Some(key)))
        .await
        .unwrap();
    reply(&mut c, true).await;
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(&captured).await.unwrap();
    let mut b = Vec::new();
    let _ = c.read_to_end(&mut b).await;
    assert!(b.is_empty(), "the replay after eviction was answered");
    // Outside the window.
    let old = encode_frame(
        Header {
            flags: 0,
            copy: 0,
            copies: 1,
            flow_id: 502,
            length: 0,
            timestamp_ms: repflow_net::frame::now_ms() - 60_000,
            digest: 0,
        },
        Some(key),
        b"old",
    );
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(&old).await.unwrap();
    let _ = c.read_to_end(&mut b).await;
    assert!(b.is_empty(), "a frame a minute old was answered");
    let mut n = Vec::new();
    while let Ok(Some(inc)) = tokio::time::timeout(Duration::from_millis(300), srv.next()).await {
        n.push(inc.flow_id);
    }
    assert_eq!(n, vec![500, 501], "deliveries");
    assert_eq!(srv.counters().replays_refused, 4);
}

/// Two copies of one flow with different content: the second is refused and counted; a
/// payload that does not match its header's digest is refused too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_with_different_content_are_refused() {
    let (mut srv, addr) = bind(|_| {}).await;
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(&frame(600, 0, 2, false, b"real data", None))
        .await
        .unwrap();
    reply(&mut c, false).await;
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(&frame(600, 1, 2, false, b"fake data", None))
        .await
        .unwrap();
    let mut b = Vec::new();
    let _ = c.read_to_end(&mut b).await;
    assert!(b.is_empty(), "a copy with other content was acknowledged");
    let mut bad = frame(601, 0, 1, false, b"abc", None);
    *bad.last_mut().unwrap() = b'x';
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(&bad).await.unwrap();
    let _ = c.read_to_end(&mut b).await;
    assert!(b.is_empty(), "a corrupted payload was acknowledged");
    let first = tokio::time::timeout(Duration::from_secs(1), srv.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.data, b"real data");
    assert!(tokio::time::timeout(Duration::from_millis(300), srv.next())
        .await
        .is_err());
    assert_eq!(srv.counters().digest_mismatches, 2);
}

/// A pooled client whose server stops reading: the stalled connection is abandoned within
/// the flow timeout (counted) and the next flow opens a new connection, instead of queueing
/// frames behind it without bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pooled_client_replaces_a_stalled_connection() {
    use repflow_net::ConnMode;
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    // Accepts and never reads.
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = l.accept().await {
            held.push(s);
        }
    });
    let mut cc = ClientConfig::new(PolicyConfig::repflow(1));
    cc.mode = ConnMode::Pooled;
    cc.flow_timeout = Duration::from_millis(500);
    let client = Client::new(cc);
    let mut flows = Vec::new();
    for _ in 0..64 {
        let c = client.clone();
        flows.push(tokio::spawn(async move {
            c.send(addr, vec![0u8; 256 << 10]).await
        }));
    }
    for f in flows {
        assert!(f.await.unwrap().is_err());
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    let _ = client.send(addr, vec![0u8; 10]).await;
    let c = client.counters();
    hold.abort();
    assert!(c.pool_stalls >= 1, "{c:?}");
    assert!(
        c.connections >= 2,
        "the stalled connection was reused: {c:?}"
    );
}

/// Issue 37, finding 1: a captured tagged flow replayed from three other addresses
/// (127.0.0.2–4). Before, the server keyed flows by (address, id) and delivered the replay
/// three more times; with a key the authenticated id alone names the flow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tagged_replay_from_other_addresses_is_refused() {
    let key: &[u8] = b"secret";
    let (mut srv, addr) = bind(|c| c.key = Some(key.to_vec())).await;
    let captured = frame(900, 0, 1, false, b"pay me once", Some(key));
    let mut c = connect_from(addr, Some([127, 0, 0, 1])).await;
    c.write_all(&captured).await.unwrap();
    let (h, _) = reply(&mut c, true).await;
    assert_eq!(h.flags & flags::DUP, 0);
    for last in 2..=4u8 {
        assert!(
            closed_unanswered(addr, Some([127, 0, 0, last]), &captured).await,
            "the replay from 127.0.0.{last} was answered"
        );
    }
    let got = drain(&mut srv).await;
    assert_eq!(got.len(), 1, "delivered {} times", got.len());
    assert_eq!(srv.counters().replays_refused, 3);
}

/// Issue 37, finding 1: a captured tagged CALL replayed from 127.0.0.9 was handled again and
/// the replayer got the response body. Now it is handled once and the replay gets nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tagged_call_replay_from_another_address_is_not_answered() {
    let key: &[u8] = b"secret";
    let (mut srv, addr) = bind(|c| c.key = Some(key.to_vec())).await;
    let handled = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let n = handled.clone();
    let app = tokio::spawn(async move {
        while let Some(inc) = srv.next().await {
            n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            inc.respond(b"the secret answer".to_vec());
        }
    });
    let captured = frame(901, 0, 1, true, b"GET balance", Some(key));
    let mut c = connect_from(addr, Some([127, 0, 0, 1])).await;
    c.write_all(&captured).await.unwrap();
    let (_, body) = reply(&mut c, true).await;
    assert_eq!(body, b"the secret answer");
    assert!(
        closed_unanswered(addr, Some([127, 0, 0, 9]), &captured).await,
        "the replayed call was answered"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(handled.load(std::sync::atomic::Ordering::SeqCst), 1);
    app.abort();
}

/// The other side of finding 1: a keyed sender whose copies leave from two addresses (NAT,
/// several interfaces) gets exactly-once delivery and every copy answered, for flows and for
/// calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_copies_from_two_addresses_are_one_flow() {
    let key: &[u8] = b"secret";
    let (mut srv, addr) = bind(|c| c.key = Some(key.to_vec())).await;
    for (copy, ip) in [(0u8, [127, 0, 0, 1]), (1, [127, 0, 0, 2])] {
        let mut c = connect_from(addr, Some(ip)).await;
        c.write_all(&frame(902, copy, 2, false, b"two roads", Some(key)))
            .await
            .unwrap();
        let (h, _) = reply(&mut c, true).await;
        assert_eq!(h.flags & flags::DUP != 0, copy == 1);
    }
    assert_eq!(drain(&mut srv).await.len(), 1);
    let mut c0 = connect_from(addr, Some([127, 0, 0, 1])).await;
    c0.write_all(&frame(903, 0, 2, true, b"q", Some(key)))
        .await
        .unwrap();
    let inc = tokio::time::timeout(Duration::from_secs(2), srv.next())
        .await
        .unwrap()
        .unwrap();
    inc.respond(b"a".to_vec());
    let (_, b0) = reply(&mut c0, true).await;
    let mut c1 = connect_from(addr, Some([127, 0, 0, 3])).await;
    c1.write_all(&frame(903, 1, 2, true, b"q", Some(key)))
        .await
        .unwrap();
    let (h1, b1) = reply(&mut c1, true).await;
    assert_eq!((b0.as_slice(), b1.as_slice()), (&b"a"[..], &b"a"[..]));
    assert_ne!(h1.flags & flags::DUP, 0);
    assert!(drain(&mut srv).await.is_empty());
}

/// Issue 37, finding 5: ten bytes of garbage, or a 20-byte header of version 1, held a
/// connection for the whole header timeout (10 s): nothing was checked before 36 bytes. The
/// magic and version are refused at their third byte now; a keyed server refuses an untagged
/// frame at its fourth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_magic_or_version_is_refused_at_once() {
    let (srv, addr) = bind(|c| c.header_timeout = Duration::from_secs(10)).await;
    let mut old = frame(1, 0, 1, false, b"", None)[..20].to_vec();
    old[2] = 1;
    for bytes in [&b"GET / HTTP"[..], &old[..], &b"RF\x02\x80"[..]] {
        let t = Instant::now();
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(bytes).await.unwrap();
        let mut b = Vec::new();
        let r = tokio::time::timeout(Duration::from_secs(3), c.read_to_end(&mut b)).await;
        assert!(
            r.is_ok() && b.is_empty(),
            "{bytes:02x?} held the connection for {:?}",
            t.elapsed()
        );
    }
    assert_eq!(srv.counters().malformed, 3);
    assert_eq!(srv.counters().timeouts, 0);
    let (ksrv, kaddr) = bind(|c| c.key = Some(b"k".to_vec())).await;
    let untagged = frame(2, 0, 1, false, b"x", None);
    assert!(closed_unanswered(kaddr, None, &untagged[..4]).await);
    assert_eq!(ksrv.counters().auth_failures, 1);
}

/// Issue 37, finding 2: 4,500 trickling connections from five addresses held all 4,096 slots
/// (a quarter each) and a legitimate client got 0/10. Here eight addresses (127.0.0.2–9)
/// trickle valid header bytes, one every 100 ms, on 8 connections each against a limit of
/// 32, and reconnect when dropped. A client from 127.0.0.1, and one from an attacker's own
/// address, must get every flow through: a full server evicts the connection that has gone
/// longest without completing a frame.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trickling_connections_from_many_addresses_do_not_starve_a_client() {
    let (mut srv, addr) = bind(|c| {
        c.max_connections = 32;
        c.max_connections_per_source = 8;
        c.header_timeout = Duration::from_secs(60);
    })
    .await;
    let stats = srv.stats();
    let sink = tokio::spawn(async move { while srv.next().await.is_some() {} });
    let stop = Arc::new(AtomicBool::new(false));
    let mut attackers = Vec::new();
    let mut header = frame(5, 0, 1, false, &[0u8; 1000], None);
    header.truncate(HEADER_LEN + 500);
    for last in 2..=9u8 {
        for _ in 0..8 {
            let (stop, header) = (stop.clone(), header.clone());
            attackers.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let s = tokio::net::TcpSocket::new_v4().unwrap();
                    s.bind(SocketAddr::from(([127, 0, 0, last], 0))).unwrap();
                    if let Ok(mut c) = s.connect(addr).await {
                        for b in &header {
                            if stop.load(Ordering::Relaxed) || c.write_all(&[*b]).await.is_err() {
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }));
        }
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    let before = stats.counters();
    assert!(
        before.connections_rejected
            + before.connections_rejected_source
            + before.connections_evicted
            > 0,
        "the attack did not fill the server: {before:?}"
    );
    let mut ok = [0; 2];
    for (i, from) in [None, Some([127, 0, 0, 2])].into_iter().enumerate() {
        let mut cc = ClientConfig::new(PolicyConfig::tcp());
        cc.flow_timeout = Duration::from_secs(2);
        cc.bind_ip = from.map(std::net::IpAddr::from);
        let client = Client::new(cc);
        for k in 0..10u8 {
            if client.send(addr, vec![k; 100]).await.is_ok() {
                ok[i] += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for a in attackers {
        a.abort();
    }
    sink.abort();
    assert_eq!(
        ok,
        [10, 10],
        "flows through (from 127.0.0.1, from an attacker's 127.0.0.2) under the flood"
    );
    assert!(stats.counters().connections_evicted >= 20);
}

/// Runs this test binary again as a child process playing the server `role` (see
/// `child_process_entry`); returns it with its stdout lines (a reader thread forwards them)
/// once it has printed its address.
fn spawn_child(
    role: &str,
) -> (
    std::process::Child,
    std::sync::mpsc::Receiver<String>,
    SocketAddr,
) {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["child_process_entry", "--exact", "--ignored", "--nocapture"])
        .env("REPFLOW_ADV_CHILD", role)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let addr = loop {
        let l = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the child server printed its address");
        if let Some(a) = l.strip_prefix("ADDR ") {
            break a.parse().unwrap();
        }
    };
    (child, rx, addr)
}

/// The child's standard error, read to its end (after it was killed).
fn child_stderr(child: &mut std::process::Child) -> Vec<String> {
    let mut s = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut s).unwrap();
    s.lines().map(str::to_string).collect()
}

/// Entry point of the child processes: a server in the role named by `REPFLOW_ADV_CHILD`
/// (nothing without it). It prints `ADDR <address>` and, for the ack roles, `TAKEN <flow id>`
/// for each flow its (slow: 5 ms a flow) application has taken, before the next.
#[test]
#[ignore = "entry point of the child processes of other tests"]
fn child_process_entry() {
    let Ok(role) = std::env::var("REPFLOW_ADV_CHILD") else {
        return;
    };
    if role == "fds" {
        use nix::sys::resource::{getrlimit, setrlimit, Resource};
        let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        setrlimit(Resource::RLIMIT_NOFILE, 64, hard).unwrap();
    }
    repflow_net::logging::init_stderr("warn").unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let mut cfg = None;
        for _ in 0..50 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut c = ServerConfig::ports(SocketAddr::from(([127, 0, 0, 1], port)), 2);
            match role.as_str() {
                "ack-consume" => c.ack_after = AckAfter::Consume,
                "ack-handled" => c.ack_after = AckAfter::Handled,
                "ack-queue" => c.ack_after = AckAfter::Queue,
                "logs" => c.key = Some(b"k".to_vec()),
                "fds" => c.max_connections = 1000,
                other => panic!("unknown role {other}"),
            }
            if let Ok(s) = Server::bind(c).await {
                cfg = Some(s);
                break;
            }
        }
        let mut srv = cfg.expect("bind two consecutive ports");
        println!("ADDR {}", srv.local_addrs()[0]);
        let end = Instant::now() + Duration::from_secs(60);
        while Instant::now() < end {
            let Ok(Some(inc)) = tokio::time::timeout(Duration::from_secs(1), srv.next()).await
            else {
                continue;
            };
            // The record is written before the acknowledgement can go (this runtime has one
            // thread: the connection tasks run when this task sleeps).
            println!("TAKEN {}", inc.flow_id);
            drop(inc);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
}

/// Sends flows (two copies, per-flow) from 32 senders to a child server for a second, kills
/// it (SIGKILL), and returns the flows acknowledged and those the application had taken.
async fn kill_during_flows(role: &str) -> (Vec<u64>, std::collections::HashSet<u64>) {
    let (mut child, lines, addr) = spawn_child(role);
    let mut cc = ClientConfig::new(PolicyConfig::repflow(2));
    cc.flow_timeout = Duration::from_secs(5);
    let client = Client::new(cc);
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut senders = Vec::new();
    for _ in 0..32 {
        let (client, acked, stop) = (client.clone(), acked.clone(), stop.clone());
        senders.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match client.send(addr, vec![3u8; 200]).await {
                    Ok(r) => acked.lock().unwrap().push(r.flow_id),
                    Err(_) => break,
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    child.kill().unwrap();
    child.wait().unwrap();
    stop.store(true, Ordering::Relaxed);
    for s in senders {
        let _ = tokio::time::timeout(Duration::from_secs(10), s).await;
    }
    let taken = lines
        .iter()
        .filter_map(|l| l.strip_prefix("TAKEN ").and_then(|v| v.parse().ok()))
        .collect();
    let acked = acked.lock().unwrap().clone();
    (acked, taken)
}

/// Issue 37, finding 3: with a slow application (5 ms a flow), `kill -9` of the server lost
/// 1,026 flows the client had been told were delivered: the acknowledgement went when the
/// flow entered the 1,024-slot queue. Under `AckAfter::Consume` (and `Handled`) every
/// acknowledged flow was taken by the application before the process died.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_flows_survive_kill_9_under_ack_after_consume() {
    for role in ["ack-consume", "ack-handled"] {
        let (acked, taken) = kill_during_flows(role).await;
        let lost: Vec<_> = acked.iter().filter(|id| !taken.contains(id)).collect();
        assert!(
            acked.len() >= 20,
            "{role}: only {} flows acknowledged",
            acked.len()
        );
        assert!(
            lost.is_empty(),
            "{role}: {} of {} acknowledged flows never reached the application",
            lost.len(),
            acked.len()
        );
    }
}

fn has_kind(line: &str, kind: &str) -> bool {
    line.contains(&format!("kind={kind} "))
        || line.contains(&format!("kind=\"{kind}\""))
        || line.ends_with(&format!("kind={kind}"))
}

/// Issue 37, finding 4: one global limiter turned five refusals of four kinds within a second
/// into one line, and the refusals held back before a quiet period were never written. Each
/// kind now has its own limiter, and what a limiter held back is summarised once the kind has
/// been quiet for a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_logged_per_kind_and_held_ones_summarised() {
    let (mut child, _lines, addr) = spawn_child("logs");
    let key: &[u8] = b"k";
    let mut old = frame(1, 0, 1, false, b"x", Some(key));
    old[2] = 1;
    let wrong_key = frame(2, 0, 1, false, b"x", Some(b"not the key"));
    let good = frame(3, 0, 1, false, b"x", Some(key));
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(&good).await.unwrap();
    reply(&mut c, true).await;
    for bytes in [&b"GET / HTTP/1.1"[..], &old, &wrong_key, &good] {
        assert!(closed_unanswered(addr, None, bytes).await);
    }
    for _ in 0..30 {
        assert!(closed_unanswered(addr, None, b"garbage!").await);
    }
    tokio::time::sleep(Duration::from_millis(2600)).await;
    child.kill().unwrap();
    child.wait().unwrap();
    let lines = child_stderr(&mut child);
    for kind in ["garbage", "version", "auth", "replay"] {
        assert!(
            lines.iter().any(|l| has_kind(l, kind)),
            "no line of kind {kind}: {lines:#?}"
        );
    }
    let garbage: Vec<_> = lines.iter().filter(|l| has_kind(l, "garbage")).collect();
    assert!(garbage.len() <= 3, "{garbage:#?}");
    assert!(
        garbage.iter().any(|l| l.contains("more refusals")),
        "the held-back garbage refusals were not summarised: {garbage:#?}"
    );
}

/// Issue 37, finding 4: out of file descriptors, "accept failed ... os error 24" was logged
/// without limit (532 lines in 5 s), and nothing said at start that `ulimit -n` was below
/// what `max_connections` needs. The child runs with `ulimit -n` 64 and 1,000 connections
/// allowed; 150 connections arrive and stay for two seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_failures_are_rate_limited_and_the_fd_limit_is_checked() {
    let (mut child, _lines, addr) = spawn_child("fds");
    let mut held = Vec::new();
    for _ in 0..150 {
        if let Ok(c) = TcpStream::connect(addr).await {
            held.push(c);
        }
    }
    tokio::time::sleep(Duration::from_millis(2000)).await;
    child.kill().unwrap();
    child.wait().unwrap();
    drop(held);
    let lines = child_stderr(&mut child);
    let start = lines
        .iter()
        .filter(|l| l.contains("open-file limit"))
        .count();
    assert_eq!(start, 1, "{lines:#?}");
    let accept = lines.iter().filter(|l| l.contains("accept failed")).count();
    assert!(
        (1..=4).contains(&accept),
        "{accept} accept lines: {lines:#?}"
    );
}

/// Issue 37, finding 5: a keyed server buffered up to `max_flow_size` (64 MiB then) per
/// connection before it could check the tag, which covers the whole payload: 6 connections
/// without the key added 385 MB. A tagged frame above 64 KiB now carries a header tag, so
/// the announced length is authenticated after 68 bytes, before any payload is read. Here a
/// peer without the key announces 900 KB twice (without a header tag, then with a forged
/// one) and sends 200 KB: nothing of it is held. A keyed client's 500 KB flow still passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_server_authenticates_a_long_length_before_reading_it() {
    let key: &[u8] = b"secret";
    let (mut srv, addr) = bind(|c| c.key = Some(key.to_vec())).await;
    for head in [0, flags::HEAD_TAG] {
        let h = Header {
            flags: flags::TAG | head,
            copy: 0,
            copies: 1,
            flow_id: 77,
            length: 900_000,
            timestamp_ms: repflow_net::frame::now_ms(),
            digest: 0,
        };
        let mut bytes = h.to_bytes().to_vec();
        bytes.extend([0u8; 16]);
        if head != 0 {
            bytes.extend([0u8; 16]);
        }
        bytes.extend(vec![7u8; 200_000]);
        let mut c = TcpStream::connect(addr).await.unwrap();
        let _ = c.write_all(&bytes).await;
        let mut b = Vec::new();
        let r = tokio::time::timeout(Duration::from_secs(3), c.read_to_end(&mut b)).await;
        assert!(
            r.is_ok() && b.is_empty(),
            "a forged long frame was kept or answered"
        );
    }
    let c = srv.counters();
    assert_eq!(c.auth_failures, 2, "{c:?}");
    assert!(
        c.buffered_peak < 64 * 1024,
        "{} B of an unauthenticated frame were held",
        c.buffered_peak
    );
    let mut cc = ClientConfig::new(PolicyConfig::tcp());
    cc.key = Some(key.to_vec());
    let client = Client::new(cc);
    client.send(addr, vec![5u8; 500_000]).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), srv.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.data.len(), 500_000);
}

/// Issue 47, finding 2: every call's response was held for late copies with no byte bound,
/// and expired only when a later frame arrived. Here the response cache holds 64 KiB in
/// all and 32 KiB per address: a flood of calls from 127.0.0.2 with 10 KB responses keeps it
/// within both bounds and does not drop 127.0.0.3's response; the late copy of a flooder's
/// call whose response was dropped is answered `DUP|GONE` (empty) and not delivered again;
/// with no traffic at all, the timer empties the cache once the TTL has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_cache_is_bounded_in_bytes_and_expires_on_a_timer() {
    let (mut srv, addr) = bind(|c| {
        c.response_cache_bytes = 64 << 10;
        c.response_cache_bytes_per_peer = 32 << 10;
        c.dedup_ttl = Duration::from_secs(2);
    })
    .await;
    let stats = srv.stats();
    let delivered = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let n = delivered.clone();
    let app = tokio::spawn(async move {
        while let Some(inc) = srv.next().await {
            n.fetch_add(1, Ordering::SeqCst);
            inc.respond(vec![b'r'; 10_000]);
        }
    });
    let call = |from: [u8; 4], id: u64, copy: u8| async move {
        let mut c = connect_from(addr, Some(from)).await;
        c.write_all(&frame(id, copy, 2, true, b"q", None))
            .await
            .unwrap();
        reply(&mut c, false).await
    };
    let (_, body) = call([127, 0, 0, 3], 7_000, 0).await;
    assert_eq!(body.len(), 10_000);
    for id in 0..40u64 {
        let (_, body) = call([127, 0, 0, 2], id, 0).await;
        assert_eq!(body.len(), 10_000);
        let held = stats.counters().response_cache_bytes;
        assert!(held <= 64 << 10, "{held} bytes held");
    }
    let c = stats.counters();
    assert!(c.response_cache_bytes <= (32 << 10) + 10_064, "{c:?}");
    assert!(c.responses_evicted >= 37, "{c:?}");
    // The victim's late copy still gets its response.
    let (h, body) = call([127, 0, 0, 3], 7_000, 1).await;
    assert_eq!((h.flags & flags::DUP != 0, body.len()), (true, 10_000));
    // The flooder's first call: answered as executed, response gone; not delivered again.
    let (h, body) = call([127, 0, 0, 2], 0, 1).await;
    assert_eq!(
        h.flags & (flags::DUP | flags::GONE),
        flags::DUP | flags::GONE,
        "{h:?}"
    );
    assert!(body.is_empty());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        delivered.load(Ordering::SeqCst),
        41,
        "nothing executed twice"
    );
    // No traffic: the timer forgets expired ids and their responses.
    assert!(
        until(Duration::from_secs(5), || {
            let c = stats.counters();
            c.response_cache_bytes == 0 && c.dedup_entries == 0
        })
        .await,
        "{:?}",
        stats.counters()
    );
    app.abort();
}

/// Issue 47, finding 3a: the duplicate filter is memory only, so a captured tagged copy
/// replayed to a restarted keyed server (within the replay window) was delivered again. A
/// keyed server now refuses frames stamped before it started; a fresh frame is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tagged_replay_after_a_server_restart_is_refused() {
    let key: &[u8] = b"restart-key";
    let (mut srv, addr) = bind(|c| c.key = Some(key.to_vec())).await;
    let captured = frame(0x4701, 0, 2, false, b"transfer 100", Some(key));
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(&captured).await.unwrap();
    let (h, _) = reply(&mut c, true).await;
    assert_eq!(h.flags & flags::DUP, 0);
    assert_eq!(drain(&mut srv).await.len(), 1);
    drop(c);
    drop(srv);
    // The restarted server (a new process would have a new, empty filter too).
    tokio::time::sleep(Duration::from_millis(5)).await;
    let (mut srv, addr) = bind(|c| c.key = Some(key.to_vec())).await;
    assert!(
        closed_unanswered(addr, None, &captured).await,
        "the replay was answered"
    );
    assert_eq!(drain(&mut srv).await.len(), 0, "replay delivered again");
    assert_eq!(srv.counters().replays_refused, 1);
    // A copy stamped now is served.
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(&frame(0x4702, 0, 1, false, b"fresh", Some(key)))
        .await
        .unwrap();
    let _ = reply(&mut c, true).await;
    assert_eq!(drain(&mut srv).await.len(), 1);
}

/// An application that takes every delivery and records its sender's address and flow id.
type Deliveries = Arc<Mutex<Vec<(std::net::IpAddr, u64)>>>;
fn record_deliveries(mut srv: Server) -> (Deliveries, tokio::task::JoinHandle<()>) {
    let delivered: Deliveries = Arc::new(Mutex::new(Vec::new()));
    let d2 = delivered.clone();
    let app = tokio::spawn(async move {
        while let Some(inc) = srv.next().await {
            d2.lock().unwrap().push((inc.peer.ip(), inc.flow_id));
        }
    });
    (delivered, app)
}

/// Issue 47, finding 3b: without a key, 262,200 zero-length flows from another address
/// pushed a legitimate flow's id out of the full duplicate filter, and its late copy was
/// delivered twice. Now a full filter forgets the oldest id of the address holding the most:
/// here 3,000 flows from 127.0.0.2 against a capacity of 1,024 leave 127.0.0.1's flow
/// remembered, and its late copy is a duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyless_flood_from_another_address_does_not_flush_a_flow() {
    let (srv, addr) = bind(|c| c.dedup_capacity = 1024).await;
    let stats = srv.stats();
    let (delivered, app) = record_deliveries(srv);
    let victim = 0x4747_beef;
    let mut v = connect_from(addr, Some([127, 0, 0, 1])).await;
    v.write_all(&frame(victim, 0, 2, false, b"pay 10", None))
        .await
        .unwrap();
    let _ = reply(&mut v, false).await;
    // The flood: one connection, 3,000 one-byte flows, acknowledgements read meanwhile.
    // (Zero-length flows of one copy are keepalives since issue 49: acknowledged, never
    // remembered, so they cannot fill the filter at all.)
    let mut f = connect_from(addr, Some([127, 0, 0, 2])).await;
    let mut flood = Vec::new();
    for id in 0..3000u64 {
        flood.extend_from_slice(&frame(id, 0, 1, false, b"x", None));
    }
    let (mut rd, mut wr) = f.split();
    let reader = async {
        for _ in 0..3000 {
            let mut fixed = [0u8; HEADER_LEN];
            rd.read_exact(&mut fixed).await.unwrap();
        }
    };
    tokio::join!(reader, async { wr.write_all(&flood).await.unwrap() });
    let c = stats.counters();
    assert!(c.dedup_capacity_evictions >= 3000 + 1 - 1024, "{c:?}");
    // The victim's late copy: a duplicate, not a second delivery.
    v.write_all(&frame(victim, 1, 2, false, b"pay 10", None))
        .await
        .unwrap();
    let (h, _) = reply(&mut v, false).await;
    assert_ne!(h.flags & flags::DUP, 0, "late copy delivered again");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let n = delivered
        .lock()
        .unwrap()
        .iter()
        .filter(|(ip, id)| ip.to_string() == "127.0.0.1" && *id == victim)
        .count();
    assert_eq!(n, 1);
    app.abort();
}

/// Keepalives (issue 49): a peer sending 3,000 empty one-way frames of one copy gets 3,000
/// plain acknowledgements, and the server delivers none, remembers none (its duplicate filter
/// is untouched) and counts each; a real flow after them is delivered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keepalive_flood_is_acknowledged_and_neither_delivered_nor_remembered() {
    let (srv, addr) = bind(|c| c.dedup_capacity = 1024).await;
    let stats = srv.stats();
    let (delivered, app) = record_deliveries(srv);
    let mut f = connect_from(addr, Some([127, 0, 0, 2])).await;
    let mut flood = Vec::new();
    for id in 0..3000u64 {
        flood.extend_from_slice(&frame(id, 0, 1, false, b"", None));
    }
    let (mut rd, mut wr) = f.split();
    let reader = async {
        for id in 0..3000u64 {
            let mut fixed = [0u8; HEADER_LEN];
            rd.read_exact(&mut fixed).await.unwrap();
            let h = Header::parse(&fixed).unwrap();
            assert_eq!((h.flow_id, h.flags), (id, flags::REPLY));
        }
    };
    tokio::join!(reader, async { wr.write_all(&flood).await.unwrap() });
    f.write_all(&frame(7, 0, 2, false, b"real", None))
        .await
        .unwrap();
    let (h, _) = reply(&mut f, false).await;
    assert_eq!(h.flags & flags::DUP, 0);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let c = stats.counters();
    assert_eq!(c.keepalives, 3000, "{c:?}");
    assert_eq!((c.copies_received, c.flows_delivered), (1, 1), "{c:?}");
    assert_eq!(c.dedup_capacity_evictions, 0, "{c:?}");
    let ids: Vec<u64> = delivered
        .lock()
        .unwrap()
        .iter()
        .map(|&(_, id)| id)
        .collect();
    assert_eq!(ids, vec![7]);
    app.abort();
}

/// Issue 47, finding 6: under `AckAfter::Queue` a copy-1 `DUP` acknowledgement was sent while
/// copy 0 still waited for room in the queue, so a process death lost acknowledged flows
/// beyond the queue (1,914 of 2,062 with 1,024 slots). Now a later copy waits for the first
/// copy's admission: every acknowledged flow is in the queue or taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_mode_dup_ack_waits_for_admission() {
    let (mut srv, addr) = bind(|c| c.queue = 1).await;
    let mut a = TcpStream::connect(addr).await.unwrap();
    a.write_all(&frame(1, 0, 1, false, b"a", None))
        .await
        .unwrap();
    let _ = reply(&mut a, false).await;
    // Flow 2's copy 0 waits for room (the queue of 1 holds flow 1).
    let mut b0 = TcpStream::connect(addr).await.unwrap();
    b0.write_all(&frame(2, 0, 2, false, b"b", None))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut b1 = TcpStream::connect(addr).await.unwrap();
    b1.write_all(&frame(2, 1, 2, false, b"b", None))
        .await
        .unwrap();
    let mut fixed = [0u8; HEADER_LEN];
    assert!(
        tokio::time::timeout(Duration::from_millis(500), b1.read_exact(&mut fixed))
            .await
            .is_err(),
        "copy 1 acknowledged while copy 0 waited for room"
    );
    // The application takes flow 1: flow 2 is admitted, both copies acknowledged.
    assert_eq!(srv.next().await.unwrap().flow_id, 1);
    let (h, _) = reply(&mut b0, false).await;
    assert_eq!((h.flow_id, h.flags & flags::DUP), (2, 0));
    tokio::time::timeout(Duration::from_secs(2), b1.read_exact(&mut fixed))
        .await
        .expect("copy 1 acknowledged after admission")
        .unwrap();
    assert_eq!(srv.next().await.unwrap().flow_id, 2);
    assert!(drain(&mut srv).await.is_empty());
}

/// Issue 47, finding 2 (the server side): a peer that sends calls on one connection and
/// never reads had up to 256 responses per connection queued for it, whatever their size
/// (a keyless `repflow serve` grew by 640 MB with 1 MiB calls). Queued responses are now
/// bounded in bytes for all connections together (`response_queue_bytes`, here 2 MiB, plus
/// one response); past it they are not queued (`responses_dropped`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_queued_for_a_non_reading_peer_are_bounded() {
    let (mut srv, addr) = bind(|c| {
        c.response_queue_bytes = 2 << 20;
        c.write_timeout = Duration::from_secs(5);
    })
    .await;
    let stats = srv.stats();
    let app = tokio::spawn(async move {
        while let Some(inc) = srv.next().await {
            inc.respond(vec![b'r'; 1 << 20]);
        }
    });
    let mut c = TcpStream::connect(addr).await.unwrap();
    let mut calls = Vec::new();
    for id in 0..40u64 {
        calls.extend_from_slice(&frame(id, 0, 1, true, b"q", None));
    }
    c.write_all(&calls).await.unwrap();
    let mut peak = 0;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        peak = peak.max(stats.counters().response_queue_bytes);
    }
    let n = stats.counters();
    assert!(peak <= (2 << 20) + (1 << 20) + 200, "{peak} bytes queued");
    assert!(n.responses_dropped > 0, "{n:?}");
    drop(c);
    app.abort();
}
