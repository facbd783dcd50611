//! Loopback benchmark of `repflow-net`: flows per second (per-flow and pooled connections, with
//! and without copies) and the idle-path FCT of a small flow with copies vs plain TCP.
//!
//! ```text
//! cargo run --release -p repflow-net --example netbench [-- SECONDS_PER_CASE [FCT_SIZE]]
//! ```
//!
//! Runs client and server in one process on a current-thread tokio runtime, so the figures are
//! for one core doing both ends (the client's and the server's work together). Timed figures
//! are printed, never asserted.

use repflow_net::{Client, ClientConfig, ConnMode, PolicyConfig, Server, ServerConfig};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

async fn start_server() -> SocketAddr {
    for base in (31000..40000).step_by(17) {
        let addr: SocketAddr = format!("127.0.0.1:{base}").parse().unwrap();
        if let Ok(mut s) = Server::bind(ServerConfig::ports(addr, 4)).await {
            tokio::spawn(async move { while s.next().await.is_some() {} });
            return addr;
        }
    }
    panic!("no free ports");
}

async fn throughput(addr: SocketAddr, copies: u8, mode: ConnMode, secs: f64, size: usize) -> f64 {
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
    let payload: Arc<[u8]> = vec![1u8; size].into();
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
    let t0 = Instant::now();
    while set.join_next().await.is_some() {}
    done.load(Ordering::Relaxed) as f64 / t0.elapsed().as_secs_f64()
}

async fn fct(addr: SocketAddr, copies: u8, size: usize, n: usize) -> Vec<f64> {
    let c = Client::new(ClientConfig::new(PolicyConfig::repflow(copies)));
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let r = c.send(addr, vec![7u8; size]).await.expect("flow");
        v.push(r.fct.as_secs_f64() * 1e6);
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v
}

fn pct(v: &[f64], q: f64) -> f64 {
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let size: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let addr = start_server().await;
        println!("repflow-net loopback benchmark (one core: client and server in one thread)");
        for (mode, name) in [
            (ConnMode::PerFlow, "per-flow"),
            (ConnMode::Pooled, "pooled"),
        ] {
            for copies in [1u8, 2] {
                let r = throughput(addr, copies, mode, secs, 100).await;
                println!(
                    "  {name:>8}, {copies} cop{}: {r:>9.0} flows/s (100 B flows)",
                    if copies == 1 { "y " } else { "ies" }
                );
            }
        }
        // Idle-path FCT, interleaved rounds so drift hits both alike.
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..10 {
            a.extend(fct(addr, 1, size, 200).await);
            b.extend(fct(addr, 2, size, 200).await);
        }
        a.sort_by(|x, y| x.partial_cmp(y).unwrap());
        b.sort_by(|x, y| x.partial_cmp(y).unwrap());
        println!("  idle-path FCT of a {size} B flow (per-flow connections, 2000 flows each):");
        println!(
            "    1 copy  : p50 {:.0} us  p99 {:.0} us",
            pct(&a, 0.5),
            pct(&a, 0.99)
        );
        println!(
            "    2 copies: p50 {:.0} us  p99 {:.0} us  (median {:+.1} %)",
            pct(&b, 0.5),
            pct(&b, 0.99),
            (pct(&b, 0.5) / pct(&a, 0.5) - 1.0) * 100.0
        );
    });
}
