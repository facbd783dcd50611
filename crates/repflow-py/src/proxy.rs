//! Bindings of the proxy sidecars (`repflow proxy client|server`): thin conversions only.
//! A sidecar runs on the shared runtime in the background until `close` (or drop).

use crate::net::{addr, byte_limit, secs, MAX_BYTE_LIMIT};
use pyo3::exceptions::{PyConnectionError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use repflow_net::proxy::{hops::quantile_us, HopSnapshot};
use repflow_net::proxy::{
    JournalConfig, Protocol, ProxyClient, ProxyClientConfig, ProxyClientStats, ProxyError,
    ProxyServer, ProxyServerConfig, ProxyServerStats,
};
use repflow_net::{ClientConfig, ConnMode, PolicyConfig, ServerConfig};
use std::net::SocketAddr;
use std::path::PathBuf;

/// Per-hop histograms as JSON: `{name: {"count", "sum_ns", "p50_us", "p99_us", "buckets":
/// [[index, count], ...]}}` (non-empty buckets only; [`hop_quantile`] reads them).
fn hops_json(hops: &[HopSnapshot]) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    for h in hops {
        let buckets: Vec<(usize, u64)> = h
            .buckets
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| (i, c))
            .collect();
        m.insert(
            h.name.to_string(),
            serde_json::json!({
                "count": h.count(),
                "sum_ns": h.sum_ns,
                "p50_us": h.quantile_us(0.5),
                "p99_us": h.quantile_us(0.99),
                "buckets": buckets,
            }),
        );
    }
    serde_json::Value::Object(m)
}

/// The `q` quantile (µs) of a hop's `[[index, count], ...]` buckets as a sidecar's counters
/// give them (after subtracting an earlier snapshot, say); `None` when they are empty.
#[pyfunction]
fn hop_quantile(buckets: Vec<Vec<u64>>, q: f64) -> PyResult<Option<f64>> {
    let mut dense = Vec::new();
    for pair in buckets {
        let &[i, c] = pair.as_slice() else {
            return Err(PyValueError::new_err(format!(
                "hop_quantile: {pair:?} is not an [index, count] pair"
            )));
        };
        if i >= 4096 {
            return Err(PyValueError::new_err(format!(
                "hop_quantile: bucket index {i} is not a sidecar's (0 to 4095)"
            )));
        }
        let i = i as usize;
        if dense.len() <= i {
            dense.resize(i + 1, 0);
        }
        dense[i] += c;
    }
    Ok(quantile_us(&dense, q))
}

enum Stats {
    Client(ProxyClientStats),
    Server(ProxyServerStats),
}

/// A running proxy sidecar (client or server side).
#[pyclass(module = "repflow._core")]
struct ProxySidecar {
    stats: Stats,
    addrs: Vec<SocketAddr>,
    /// Dropping it stops the sidecar's runtime (and every task of the sidecar with it).
    stop: Option<repflow_net::tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Runs a sidecar on a runtime of its own, one thread (`current_thread`): no wake-up crosses
/// threads inside the sidecar, and it uses at most one core. `start` binds (on that runtime,
/// whose reactor the sockets then belong to) and returns the stats, the addresses and the
/// serving future.
fn dedicated<F, R>(py: Python<'_>, start: F) -> PyResult<ProxySidecar>
where
    F: std::future::Future<Output = Result<(Stats, Vec<SocketAddr>, R), ProxyError>>
        + Send
        + 'static,
    R: std::future::Future<Output = ()> + 'static,
{
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    // Sent or dropped by `close` (a oneshot sender needs no runtime).
    let (stop_tx, stop_rx) = repflow_net::tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("repflow-proxy".into())
        .spawn(move || {
            let rt = match repflow_net::tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(ProxyError::Io(e)));
                    return;
                }
            };
            rt.block_on(async move {
                match start.await {
                    Ok((stats, addrs, run)) => {
                        let _ = ready_tx.send(Ok((stats, addrs)));
                        repflow_net::tokio::select! {
                            _ = run => {}
                            _ = stop_rx => {}
                        }
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            });
            rt.shutdown_background();
        })
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    let r = py.allow_threads(move || ready_rx.recv());
    match r {
        Ok(Ok((stats, addrs))) => Ok(ProxySidecar {
            stats,
            addrs,
            stop: Some(stop_tx),
            thread: Some(thread),
        }),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(PyConnectionError::new_err(e.to_string()))
        }
        Err(_) => Err(PyRuntimeError::new_err(
            "the sidecar thread stopped while starting",
        )),
    }
}

fn protocol(p: &str) -> PyResult<Protocol> {
    Protocol::parse(p).ok_or_else(|| {
        PyValueError::new_err(format!(
            "--protocol: expected redis, http or conn, got {p:?}"
        ))
    })
}

fn positive(field: &str, v: usize) -> PyResult<usize> {
    if v == 0 {
        return Err(PyValueError::new_err(format!(
            "{field}: must be at least 1"
        )));
    }
    Ok(v)
}

#[pymethods]
impl ProxySidecar {
    /// Starts a client sidecar: application connections on `listen`, calls to `to`.
    #[staticmethod]
    #[pyo3(signature = (listen, to, protocol_name, copies=2, key=None, threshold=100_000,
                        max_request=1<<20, max_pipeline=256, max_connections=1024,
                        idle_timeout=60.0, flow_timeout=10.0, max_buffered=256<<20,
                        pool_paths=8, probe_budget=32, pool_keepalive=120.0))]
    #[allow(clippy::too_many_arguments)]
    fn client(
        py: Python<'_>,
        listen: &str,
        to: &str,
        protocol_name: &str,
        copies: u8,
        key: Option<Vec<u8>>,
        threshold: u64,
        max_request: usize,
        max_pipeline: usize,
        max_connections: usize,
        idle_timeout: f64,
        flow_timeout: f64,
        max_buffered: usize,
        pool_paths: usize,
        probe_budget: usize,
        pool_keepalive: f64,
    ) -> PyResult<Self> {
        let mut policy = PolicyConfig::repflow(copies.max(1));
        policy.threshold = threshold;
        let mut net = ClientConfig::new(policy);
        net.mode = ConnMode::Pooled;
        net.key = key;
        net.flow_timeout = secs("--flow-timeout", flow_timeout)?;
        // 0: no keepalives (idle pooled connections are replaced after `pool_idle`).
        net.pool_keepalive = if pool_keepalive == 0.0 {
            std::time::Duration::ZERO
        } else {
            secs("--pool-keepalive", pool_keepalive)?
        };
        // `--pool-paths 0`: one connection per copy (destination port + i), as before.
        net.path_pool = (pool_paths > 0).then(|| repflow_net::pathpool::PathPoolConfig {
            size: pool_paths,
            probe_budget,
            ..Default::default()
        });
        let mut cfg = ProxyClientConfig::new(
            addr("--listen", listen)?,
            addr("--to", to)?,
            protocol(protocol_name)?,
            net,
        );
        cfg.max_request = positive("--max-request", max_request)?;
        cfg.max_pipeline = positive("--max-pipeline", max_pipeline)?;
        cfg.max_connections = positive("--max-connections", max_connections)?;
        cfg.idle_timeout = secs("--idle-timeout", idle_timeout)?;
        // The budget is counted in KiB.
        if !(1024..=MAX_BYTE_LIMIT).contains(&max_buffered) {
            return Err(PyValueError::new_err(format!(
                "--max-buffered: must be between 1KiB and 1024GiB, got {max_buffered}B"
            )));
        }
        cfg.max_buffered = max_buffered;
        dedicated(py, async move {
            let c = ProxyClient::bind(cfg).await?;
            let addrs = vec![c.local_addr().map_err(ProxyError::Io)?];
            Ok((Stats::Client(c.stats()), addrs, c.run()))
        })
    }

    /// Starts a server sidecar: repflow-net on `listen`..+`ports`, requests to `upstream`.
    #[staticmethod]
    #[pyo3(signature = (listen, ports, upstream, protocol_name, key=None, max_request=1<<20,
                        max_response=16<<20, max_connections=4096, pool_size=64,
                        pool_wait=1.0, upstream_timeout=30.0, max_inflight=1024,
                        journal=None, journal_window=60.0, journal_capacity=1<<21,
                        journal_allow_missing=false, response_cache_bytes=64<<20,
                        response_cache_bytes_per_peer=16<<20, response_queue_bytes=64<<20,
                        reply_once=true))]
    #[allow(clippy::too_many_arguments)]
    fn server(
        py: Python<'_>,
        listen: &str,
        ports: u16,
        upstream: &str,
        protocol_name: &str,
        key: Option<Vec<u8>>,
        max_request: u32,
        max_response: usize,
        max_connections: usize,
        pool_size: usize,
        pool_wait: f64,
        upstream_timeout: f64,
        max_inflight: usize,
        journal: Option<String>,
        journal_window: f64,
        journal_capacity: usize,
        journal_allow_missing: bool,
        response_cache_bytes: usize,
        response_cache_bytes_per_peer: usize,
        response_queue_bytes: usize,
        reply_once: bool,
    ) -> PyResult<Self> {
        let mut net = ServerConfig::ports(addr("--listen", listen)?, ports);
        net.reply_once = reply_once;
        let window = secs("--journal-window", journal_window)?;
        if key.is_some() && window < 2 * net.replay_window {
            return Err(PyValueError::new_err(format!(
                "--journal-window: must be at least twice the replay window ({} s) with a key",
                net.replay_window.as_secs()
            )));
        }
        net.key = key;
        // The client sidecar's 4-byte envelope rides in front of a request of `max_request`.
        net.max_flow_size = max_request.max(1).saturating_add(4);
        net.max_connections = positive("--max-connections", max_connections)?;
        net.max_connections_per_source = (max_connections / 4).max(1);
        net.response_cache_bytes = byte_limit("--response-cache-bytes", response_cache_bytes)?;
        net.response_cache_bytes_per_peer = byte_limit(
            "--response-cache-bytes-per-peer",
            response_cache_bytes_per_peer,
        )?;
        net.response_queue_bytes = byte_limit("--response-queue-bytes", response_queue_bytes)?;
        // The library remembers ids at least as long as the journal does.
        net.dedup_ttl = net.dedup_ttl.max(window);
        let mut cfg =
            ProxyServerConfig::new(net, addr("--upstream", upstream)?, protocol(protocol_name)?);
        cfg.max_response = positive("--max-response", max_response)?;
        cfg.pool_size = positive("--pool-size", pool_size)?;
        cfg.pool_wait = secs("--pool-wait", pool_wait)?;
        cfg.upstream_timeout = secs("--upstream-timeout", upstream_timeout)?;
        cfg.max_inflight = positive("--max-inflight", max_inflight)?;
        cfg.journal = journal.map(|p| JournalConfig {
            path: PathBuf::from(p),
            window,
            capacity: journal_capacity.max(1),
            allow_missing: journal_allow_missing,
        });
        dedicated(py, async move {
            let s = ProxyServer::bind(cfg).await?;
            let addrs = s.local_addrs().to_vec();
            Ok((Stats::Server(s.stats()), addrs, s.run()))
        })
    }

    /// The bound addresses as `ADDR:PORT` strings.
    fn addrs(&self) -> Vec<String> {
        self.addrs.iter().map(|a| a.to_string()).collect()
    }

    /// Counters as JSON text: `{"proxy": {...}, "net": {...}}`.
    fn counters(&self) -> PyResult<String> {
        let v = match &self.stats {
            Stats::Client(s) => serde_json::json!({
                "proxy": s.counters(),
                "net": s.net(),
                "paths": s.paths(),
                "slots": s.slots().iter().map(|x| serde_json::json!({
                    "port": x.port,
                    "path": x.path.as_ref().map(|p| format!("{p:?}")),
                    "mean_us": x.mean_us,
                    "replies": x.replies,
                })).collect::<Vec<_>>(),
                "hops": hops_json(&s.hops()),
            }),
            Stats::Server(s) => serde_json::json!({
                "proxy": s.counters(),
                "net": s.net(),
                "hops": hops_json(&s.hops()),
            }),
        };
        Ok(v.to_string())
    }

    /// Stops the sidecar (its listeners close; requests in flight are abandoned).
    fn close(&mut self, py: Python<'_>) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            py.allow_threads(|| {
                let _ = t.join();
            });
        }
    }
}

impl Drop for ProxySidecar {
    fn drop(&mut self) {
        drop(self.stop.take());
    }
}

/// Registers the proxy class on `repflow._core`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(hop_quantile, m)?)?;
    m.add_class::<ProxySidecar>()
}
