//! Loopback benchmark of `repflow-net`: flows per second (per-flow and pooled connections, with
//! and without copies) and the idle-path FCT of a small flow with copies vs plain TCP.
//!
//! ```text
//! cargo run --release -p repflow-net --example netbench [-- SECONDS_PER_CASE [FCT_SIZE]]
//! ```
//!
//! The server runs on its own thread (a current-thread tokio runtime), the client on the main
//! thread (another one). Besides wall-clock rates it prints rates per CPU-second of each side's
//! thread (user + system time of that thread, kernel TCP work included), which do not depend on
//! what else the machine is doing. `NETBENCH_WORKERS` sets the number of concurrent senders;
//! `NETBENCH_ONLY` keeps only the cases whose name contains one of its `|`-separated parts
//! (e.g. `per-flow, 2` or `fct`, for profiling one case); `NETBENCH_FCT_THREADS=N` measures
//! the idle-path FCT from a multi-threaded client runtime of N workers (as a real client
//! would run) instead of the single client thread. `NETBENCH_PIN=C,S` pins the client thread
//! to CPU C and the server thread to CPU S (`0,1`: each end on its own core, as two hosts
//! would be; `0,0`: both ends share one core). Timed figures are printed, never asserted.
//!
//! The `copy-cost` case breaks the CPU cost of one copy down by phase: a blocking client on
//! the bench's thread opens a connection (connect), sends one frame and waits for the first
//! byte of the server's acknowledgement (first byte), then closes the socket (close), and
//! reads the thread's CPU clock between the phases. On loopback the kernel often runs the
//! receiving side's TCP work in the sender's context, so the client's figures include part
//! of what a remote server's kernel would do; the server thread's CPU per copy is printed
//! beside them.

use nix::sys::resource::{getrusage, UsageWho};
use repflow_net::{Client, ClientConfig, ConnMode, PolicyConfig, Server, ServerConfig};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// The CPUs of `NETBENCH_PIN=C,S` (client, server), if set.
fn pins() -> Option<(usize, usize)> {
    let v = std::env::var("NETBENCH_PIN").ok()?;
    let (c, s) = v.split_once(',')?;
    Some((c.trim().parse().ok()?, s.trim().parse().ok()?))
}

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu).expect("NETBENCH_PIN: CPU number out of range");
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
        .expect("NETBENCH_PIN: sched_setaffinity");
}

/// CPU time of the calling thread in seconds, from the thread's CPU clock (nanoseconds).
fn thread_clock() -> f64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .expect("clock_gettime");
    t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9
}

/// CPU seconds of one copy by phase (connect, first byte, close), client and server side,
/// averaged over `n` copies of `size`-byte flows sent one after another.
fn copy_cost(
    addr: SocketAddr,
    q: &mpsc::Sender<mpsc::Sender<f64>>,
    size: usize,
    n: usize,
) -> ([f64; 3], f64) {
    use repflow_net::frame::{now_ms, Header};
    use std::io::{Read, Write};
    let payload = vec![7u8; size];
    // Flow ids unique to this run (the server remembers ids it has seen).
    let base = (std::process::id() as u64) << 40 | (now_ms() & 0xff_ffff) << 16;
    let mut phases = [0.0f64; 3];
    let s0 = server_cpu(q);
    for i in 0..n {
        let t0 = thread_clock();
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        s.set_nodelay(true).expect("nodelay");
        let t1 = thread_clock();
        let head = Header {
            flags: 0,
            copy: 0,
            copies: 1,
            flow_id: base + i as u64,
            length: 0,
            timestamp_ms: now_ms(),
            digest: 0,
        };
        let mut frame = head.encode(None, &payload);
        frame.extend_from_slice(&payload);
        s.write_all(&frame).expect("write");
        let mut ack = [0u8; 64];
        let got = s.read(&mut ack).expect("read");
        assert!(got > 0, "the server closed without acknowledging");
        let t2 = thread_clock();
        drop(s);
        let t3 = thread_clock();
        phases[0] += t1 - t0;
        phases[1] += t2 - t1;
        phases[2] += t3 - t2;
    }
    std::thread::sleep(Duration::from_millis(100));
    let server = (server_cpu(q) - s0) / n as f64;
    (phases.map(|p| p / n as f64), server)
}

fn thread_cpu() -> f64 {
    let u = getrusage(UsageWho::RUSAGE_THREAD).expect("getrusage");
    let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 * 1e-6;
    t(u.user_time()) + t(u.system_time())
}

/// Starts the server thread; returns its address and a function reading its CPU seconds.
fn start_server() -> (SocketAddr, mpsc::Sender<mpsc::Sender<f64>>) {
    let (addr_tx, addr_rx) = mpsc::channel();
    let (q_tx, q_rx) = mpsc::channel::<mpsc::Sender<f64>>();
    let server = std::thread::Builder::new().name("netbench-server".into());
    server
        .spawn(move || {
            if let Some((_, cpu)) = pins() {
                pin(cpu);
            }
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                for base in (31000..40000).step_by(17) {
                    let addr: SocketAddr = format!("127.0.0.1:{base}").parse().unwrap();
                    if let Ok(mut s) = Server::bind(ServerConfig::ports(addr, 4)).await {
                        tokio::spawn(async move { while s.next().await.is_some() {} });
                        addr_tx.send(addr).unwrap();
                        break;
                    }
                }
                // Answer CPU-time queries from this thread.
                loop {
                    while let Ok(reply) = q_rx.try_recv() {
                        let _ = reply.send(thread_cpu());
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            });
        })
        .expect("server thread");
    (addr_rx.recv().expect("server address"), q_tx)
}

fn server_cpu(q: &mpsc::Sender<mpsc::Sender<f64>>) -> f64 {
    let (tx, rx) = mpsc::channel();
    q.send(tx).unwrap();
    rx.recv().unwrap()
}

struct Rate {
    wall: f64,
    client_cpu: f64,
    server_cpu: f64,
}

async fn throughput(
    addr: SocketAddr,
    q: &mpsc::Sender<mpsc::Sender<f64>>,
    copies: u8,
    mode: ConnMode,
    secs: f64,
) -> Rate {
    let mut cfg = ClientConfig::new(PolicyConfig::repflow(copies));
    cfg.mode = mode;
    let c = Client::new(cfg);
    let done = Arc::new(AtomicU64::new(0));
    let stop = Instant::now() + Duration::from_secs_f64(secs);
    let workers: usize = std::env::var("NETBENCH_WORKERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if mode == ConnMode::Pooled { 256 } else { 32 });
    let mut set = tokio::task::JoinSet::new();
    let payload: Arc<[u8]> = vec![1u8; 100].into();
    let (c0, s0, t0) = (thread_cpu(), server_cpu(q), Instant::now());
    for _ in 0..workers {
        let (c, done, p) = (c.clone(), done.clone(), payload.clone());
        set.spawn(async move {
            while Instant::now() < stop {
                let pl = repflow_net::Payload::prefix(p.clone(), p.len());
                if c.send(addr, pl).await.is_ok() {
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    while set.join_next().await.is_some() {}
    let n = done.load(Ordering::Relaxed) as f64;
    let r = Rate {
        wall: n / t0.elapsed().as_secs_f64(),
        client_cpu: n / (thread_cpu() - c0),
        server_cpu: n / (server_cpu(q) - s0),
    };
    // Let per-flow connections finish closing before the next case.
    tokio::time::sleep(Duration::from_millis(300)).await;
    r
}

async fn fct(addr: SocketAddr, copies: u8, size: usize, n: usize, mode: ConnMode) -> Vec<f64> {
    let mut cfg = ClientConfig::new(PolicyConfig::repflow(copies));
    cfg.mode = mode;
    let c = Client::new(cfg);
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let r = c.send(addr, vec![7u8; size]).await.expect("flow");
        v.push(r.fct.as_secs_f64() * 1e6);
    }
    v
}

fn wanted(case: &str) -> bool {
    match std::env::var("NETBENCH_ONLY") {
        Ok(only) => only.split('|').any(|p| case.contains(p.trim())),
        Err(_) => true,
    }
}

fn pct(v: &[f64], q: f64) -> f64 {
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let size: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10_000);
    if let Some((cpu, _)) = pins() {
        pin(cpu);
    }
    let (addr, q) = start_server();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        println!("repflow-net loopback benchmark (client thread + server thread), 100 B flows");
        println!(
            "  {:<20} {:>12} {:>22} {:>22}",
            "case", "flows/s", "per client CPU-second", "per server CPU-second"
        );
        for (mode, name) in [
            (ConnMode::PerFlow, "per-flow"),
            (ConnMode::Pooled, "pooled"),
        ] {
            for copies in [1u8, 2] {
                let case = format!(
                    "{name}, {copies} cop{}",
                    if copies == 1 { "y" } else { "ies" }
                );
                if !wanted(&case) {
                    continue;
                }
                let r = throughput(addr, &q, copies, mode, secs).await;
                println!(
                    "  {case:<20} {:>12.0} {:>22.0} {:>22.0}",
                    r.wall, r.client_cpu, r.server_cpu
                );
            }
        }
    });
    if wanted("copy-cost") {
        let (p, server) = copy_cost(addr, &q, size, 5000);
        let us = |x: f64| x * 1e6;
        println!("  CPU per copy of a {size} B flow (per-flow connection, 5000 copies):");
        println!(
            "    client: connect {:.1} us, first byte {:.1} us, close {:.1} us (total {:.1} us)",
            us(p[0]),
            us(p[1]),
            us(p[2]),
            us(p.iter().sum::<f64>())
        );
        println!("    server thread: {:.1} us", us(server));
    }
    if !wanted("fct") {
        return;
    }
    // Idle-path FCT, interleaved rounds so that drift hits both alike. The client runtime is
    // the bench's own thread, or a multi-threaded runtime when NETBENCH_FCT_THREADS is set.
    let threads: usize = std::env::var("NETBENCH_FCT_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let frt = if threads > 0 {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
            .unwrap()
    } else {
        rt
    };
    frt.block_on(async {
        let (mut a, mut b, mut pa, mut pb) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..10 {
            a.extend(fct(addr, 1, size, 200, ConnMode::PerFlow).await);
            b.extend(fct(addr, 2, size, 200, ConnMode::PerFlow).await);
            pa.extend(fct(addr, 1, size, 200, ConnMode::Pooled).await);
            pb.extend(fct(addr, 2, size, 200, ConnMode::Pooled).await);
        }
        let runtime = if threads > 0 {
            format!("multi-threaded client runtime, {threads} workers")
        } else {
            "client on one thread".to_string()
        };
        for (mode, one, two) in [
            ("per-flow connections", &mut a, &mut b),
            ("pooled connections", &mut pa, &mut pb),
        ] {
            one.sort_by(|x, y| x.partial_cmp(y).unwrap());
            two.sort_by(|x, y| x.partial_cmp(y).unwrap());
            println!("  idle-path FCT of a {size} B flow ({mode}, 2000 flows each, {runtime}):");
            println!(
                "    1 copy  : p50 {:.0} us  p99 {:.0} us",
                pct(one, 0.5),
                pct(one, 0.99)
            );
            println!(
                "    2 copies: p50 {:.0} us  p99 {:.0} us  (p50 {:+.1} %, p99 {:+.1} %)",
                pct(two, 0.5),
                pct(two, 0.99),
                (pct(two, 0.5) / pct(one, 0.5) - 1.0) * 100.0,
                (pct(two, 0.99) / pct(one, 0.99) - 1.0) * 100.0
            );
        }
    });
}
