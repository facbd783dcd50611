//! Bindings of `repflow-net` (the real-socket RepFlow/SmartRep library): thin conversions
//! only. Every blocking call releases the GIL and wakes every 100 ms to honour Ctrl-C.

use pyo3::exceptions::{PyConnectionError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use repflow_net::load::{run_schedule, ScheduledFlow};
use repflow_net::policy::{CopiesTable, SizeHistogram};
use repflow_net::{
    AckAfter, Client, ClientConfig, ConnMode, CopiesRule, IncomingKind, PolicyConfig, Responder,
    Server, ServerConfig, ServerStats,
};
use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

pub(crate) fn rt() -> &'static repflow_net::tokio::runtime::Runtime {
    static RT: OnceLock<repflow_net::tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        repflow_net::tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("repflow-net")
            .enable_all()
            .build()
            .expect("tokio runtime")
    })
}

/// Runs `fut` on the shared runtime, without the GIL, checking for signals every 100 ms
/// (a pending KeyboardInterrupt aborts the future).
pub(crate) fn wait<T: Send + 'static>(
    py: Python<'_>,
    fut: impl Future<Output = T> + Send + 'static,
) -> PyResult<T> {
    let mut h = rt().spawn(fut);
    loop {
        let r = py.allow_threads(|| {
            rt().block_on(async {
                repflow_net::tokio::time::timeout(Duration::from_millis(100), &mut h).await
            })
        });
        match r {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) => return Err(PyRuntimeError::new_err(e.to_string())),
            Err(_) => {
                if let Err(e) = py.check_signals() {
                    h.abort();
                    return Err(e);
                }
            }
        }
    }
}

pub(crate) fn addr(field: &str, text: &str) -> PyResult<SocketAddr> {
    text.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "{field}: cannot read {text:?} as ADDR:PORT (e.g. 127.0.0.1:7000)"
            ))
        })
}

pub(crate) fn secs(field: &str, v: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(v)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            PyValueError::new_err(format!("{field}: must be a positive number of seconds"))
        })
}

macro_rules! json {
    ($v:expr) => {
        serde_json::to_string($v).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    };
}

/// Largest byte limit a binding accepts (1 TiB), as the CLI's size options.
pub(crate) const MAX_BYTE_LIMIT: usize = 1 << 40;

/// A byte limit of the server's memory bounds: 0 (hold nothing) to [`MAX_BYTE_LIMIT`].
pub(crate) fn byte_limit(field: &str, v: usize) -> PyResult<usize> {
    if v > MAX_BYTE_LIMIT {
        return Err(PyValueError::new_err(format!(
            "{field}: must be between 0B and 1024GiB, got {v}B"
        )));
    }
    Ok(v)
}

/// A RepFlow server listening on `listen`'s port and the `ports − 1` following ones.
///
/// With `sink=True` (the default) flows are received and dropped and calls are answered
/// with their own payload, in the background; otherwise take them with `recv`.
#[pyclass(module = "repflow._core")]
struct NetServer {
    server: Arc<repflow_net::tokio::sync::Mutex<Option<Server>>>,
    stats: ServerStats,
    addrs: Vec<SocketAddr>,
    responders: Mutex<HashMap<u64, Responder>>,
    next_token: Mutex<u64>,
    sink: Option<repflow_net::tokio::task::JoinHandle<()>>,
}

#[pymethods]
impl NetServer {
    #[new]
    #[pyo3(signature = (listen, ports=4, key=None, max_flow_size=1<<20, max_connections=4096,
                        header_timeout=10.0, idle_timeout=30.0, sink=true,
                        max_connections_per_source=None, frame_timeout=60.0, write_timeout=10.0,
                        dedup_capacity=1<<18, dedup_ttl=60.0, replay_window=30.0, mptcp=false,
                        ack_after="queue", evict_after=0.0, response_cache_bytes=64<<20,
                        response_cache_bytes_per_peer=16<<20, response_queue_bytes=64<<20))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        listen: &str,
        ports: u16,
        key: Option<Vec<u8>>,
        max_flow_size: u32,
        max_connections: usize,
        header_timeout: f64,
        idle_timeout: f64,
        sink: bool,
        max_connections_per_source: Option<usize>,
        frame_timeout: f64,
        write_timeout: f64,
        dedup_capacity: usize,
        dedup_ttl: f64,
        replay_window: f64,
        mptcp: bool,
        ack_after: &str,
        evict_after: f64,
        response_cache_bytes: usize,
        response_cache_bytes_per_peer: usize,
        response_queue_bytes: usize,
    ) -> PyResult<Self> {
        let mut cfg = ServerConfig::ports(addr("--listen", listen)?, ports);
        cfg.key = key;
        cfg.max_flow_size = max_flow_size;
        cfg.max_connections = max_connections;
        // Default share: a quarter of the connections (at least one).
        cfg.max_connections_per_source =
            max_connections_per_source.unwrap_or((max_connections / 4).max(1));
        cfg.header_timeout = secs("header_timeout", header_timeout)?;
        cfg.idle_timeout = secs("idle_timeout", idle_timeout)?;
        cfg.frame_timeout = secs("frame_timeout", frame_timeout)?;
        cfg.write_timeout = secs("write_timeout", write_timeout)?;
        cfg.dedup_capacity = dedup_capacity.max(1);
        cfg.dedup_ttl = secs("dedup_ttl", dedup_ttl)?;
        cfg.replay_window = secs("replay_window", replay_window)?;
        cfg.mptcp = mptcp;
        cfg.ack_after = AckAfter::parse(ack_after).ok_or_else(|| {
            PyValueError::new_err(format!(
                "ack_after: expected queue, consume or handled, got {ack_after:?}"
            ))
        })?;
        cfg.evict_after = Duration::try_from_secs_f64(evict_after).map_err(|_| {
            PyValueError::new_err("evict_after: must be zero or a positive number of seconds")
        })?;
        cfg.response_cache_bytes = byte_limit("response_cache_bytes", response_cache_bytes)?;
        cfg.response_cache_bytes_per_peer = byte_limit(
            "response_cache_bytes_per_peer",
            response_cache_bytes_per_peer,
        )?;
        cfg.response_queue_bytes = byte_limit("response_queue_bytes", response_queue_bytes)?;
        let server =
            wait(py, Server::bind(cfg))?.map_err(|e| PyConnectionError::new_err(e.to_string()))?;
        let stats = server.stats();
        let addrs = server.local_addrs().to_vec();
        let server = Arc::new(repflow_net::tokio::sync::Mutex::new(Some(server)));
        let sink = sink.then(|| {
            let s = server.clone();
            rt().spawn(async move {
                let mut g = s.lock().await;
                let Some(srv) = g.as_mut() else { return };
                while let Some(inc) = srv.next().await {
                    if inc.kind == IncomingKind::Call {
                        let d = inc.data.clone();
                        inc.respond(d);
                    }
                }
            })
        });
        Ok(NetServer {
            server,
            stats,
            addrs,
            responders: Mutex::new(HashMap::new()),
            next_token: Mutex::new(0),
            sink,
        })
    }

    /// Installs a process-wide `tracing` subscriber writing to standard error, filtered by
    /// `filter` (`RUST_LOG` syntax, e.g. `warn` or `repflow_net=debug`); `False` if one was
    /// already installed.
    #[staticmethod]
    fn init_logging(filter: &str) -> PyResult<bool> {
        repflow_net::logging::init_stderr(filter).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// The bound addresses as `ADDR:PORT` strings.
    fn addrs(&self) -> Vec<String> {
        self.addrs.iter().map(|a| a.to_string()).collect()
    }

    /// Counters as JSON text.
    fn counters(&self) -> PyResult<String> {
        json!(&self.stats.counters())
    }

    /// The next flow or call within `timeout` seconds, or `None`: a tuple `(token, kind,
    /// flow_id, peer, copy, data)` with kind `"flow"` or `"call"`; answer a call with
    /// `respond(token, data)`.
    #[pyo3(signature = (timeout=1.0))]
    fn recv<'py>(&self, py: Python<'py>, timeout: f64) -> PyResult<Option<Bound<'py, PyAny>>> {
        if self.sink.is_some() {
            return Err(PyValueError::new_err(
                "recv: this server was started with sink=True",
            ));
        }
        let t = secs("timeout", timeout)?;
        let s = self.server.clone();
        let got = wait(py, async move {
            let mut g = s.lock().await;
            match g.as_mut() {
                Some(srv) => repflow_net::tokio::time::timeout(t, srv.next())
                    .await
                    .ok()
                    .flatten(),
                None => None,
            }
        })?;
        let Some(mut inc) = got else { return Ok(None) };
        let token = {
            let mut n = self.next_token.lock().expect("token lock");
            *n += 1;
            *n
        };
        let kind = match inc.kind {
            IncomingKind::Flow => "flow",
            IncomingKind::Call => "call",
        };
        if let Some(r) = inc.take_responder() {
            self.responders
                .lock()
                .expect("responders lock")
                .insert(token, r);
        }
        let t = (
            token,
            kind,
            inc.flow_id,
            inc.peer.to_string(),
            inc.copy,
            PyBytes::new(py, &inc.data),
        );
        Ok(Some(t.into_pyobject(py)?.into_any()))
    }

    /// Answers the call received with `token`.
    fn respond(&self, token: u64, data: Vec<u8>) -> PyResult<()> {
        let r = self
            .responders
            .lock()
            .expect("responders lock")
            .remove(&token);
        match r {
            Some(r) => {
                r.respond(data);
                Ok(())
            }
            None => Err(PyValueError::new_err(format!(
                "respond: no pending call with token {token}"
            ))),
        }
    }

    /// Stops serving and closes every connection.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        if let Some(h) = self.sink.take() {
            h.abort();
        }
        self.responders.lock().expect("responders lock").clear();
        let s = self.server.clone();
        wait(py, async move {
            s.lock().await.take();
        })
    }
}

impl Drop for NetServer {
    fn drop(&mut self) {
        if let Some(h) = self.sink.take() {
            h.abort();
        }
        if let Ok(mut g) = self.server.try_lock() {
            g.take();
        }
    }
}

/// A RepFlow/SmartRep client; see `docs/library.md` for the parameters.
#[pyclass(module = "repflow._core")]
struct NetClient {
    client: Client,
}

fn payload_buf() -> Arc<[u8]> {
    static BUF: OnceLock<Arc<[u8]>> = OnceLock::new();
    BUF.get_or_init(|| vec![0x5a_u8; 1 << 20].into()).clone()
}

fn sized_payload(size: u64) -> repflow_net::Payload {
    let buf = payload_buf();
    if (size as usize) <= buf.len() {
        repflow_net::Payload::prefix(buf, size as usize)
    } else {
        vec![0x5a_u8; size as usize].into()
    }
}

#[pymethods]
impl NetClient {
    #[new]
    #[pyo3(signature = (scheme="repflow", copies=2, threshold=100_000, mode="per-flow", key=None,
                        bind_ip=None, overhead_budget=None, budget_window=1.0, copies_table=None,
                        probe_ttls=vec![2, 3], probe_timeout=0.2, probe_pace=0.002,
                        probe_ports=(21000, 22999), connect_timeout=2.0, flow_timeout=30.0,
                        auto_table=None, mptcp=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        scheme: &str,
        copies: u8,
        threshold: u64,
        mode: &str,
        key: Option<Vec<u8>>,
        bind_ip: Option<&str>,
        overhead_budget: Option<f64>,
        budget_window: f64,
        copies_table: Option<(u64, Vec<u16>)>,
        probe_ttls: Vec<u8>,
        probe_timeout: f64,
        probe_pace: f64,
        probe_ports: (u16, u16),
        connect_timeout: f64,
        flow_timeout: f64,
        auto_table: Option<(f64, f64, u8, u64)>,
        mptcp: bool,
    ) -> PyResult<Self> {
        let rule = match copies_table {
            Some((unit_bytes, extra)) => CopiesRule::Table(CopiesTable {
                unit_bytes,
                extra: extra.into_iter().map(|e| e.min(255) as u8).collect(),
            }),
            None => CopiesRule::Fixed(copies.max(1)),
        };
        let mut policy = match scheme {
            "tcp" => PolicyConfig::tcp(),
            "repflow" => PolicyConfig {
                copies: rule,
                ..PolicyConfig::repflow(2)
            },
            "smartrep" => PolicyConfig::smartrep(rule),
            other => {
                return Err(PyValueError::new_err(format!(
                    "--scheme: unknown scheme {other:?}; use tcp, repflow or smartrep"
                )))
            }
        };
        policy.threshold = threshold;
        if let Some(b) = overhead_budget {
            if !(0.0..=1.0).contains(&b) {
                return Err(PyValueError::new_err("overhead_budget: must be in [0, 1]"));
            }
            policy.overhead_budget = Some((b, secs("budget_window", budget_window)?));
        }
        let mut cfg = ClientConfig::new(policy);
        cfg.mode = match mode {
            "per-flow" => ConnMode::PerFlow,
            "pooled" => ConnMode::Pooled,
            other => {
                return Err(PyValueError::new_err(format!(
                    "--mode: unknown mode {other:?}; use per-flow or pooled"
                )))
            }
        };
        cfg.key = key;
        cfg.mptcp = mptcp;
        cfg.bind_ip = match bind_ip {
            Some(t) => Some(t.parse::<IpAddr>().map_err(|_| {
                PyValueError::new_err(format!("--bind: cannot read {t:?} as an IP address"))
            })?),
            None => None,
        };
        if probe_ttls.is_empty() || probe_ttls.contains(&0) {
            return Err(PyValueError::new_err(
                "probe_ttls: give one or more TTLs ≥ 1",
            ));
        }
        cfg.probe.ttls = probe_ttls;
        cfg.probe.timeout = secs("probe_timeout", probe_timeout)?;
        cfg.probe.pace = Duration::try_from_secs_f64(probe_pace)
            .map_err(|_| PyValueError::new_err("probe_pace: must be ≥ 0 seconds"))?;
        cfg.probe.ports = probe_ports;
        cfg.probe.src_ip = cfg.bind_ip;
        cfg.connect_timeout = secs("connect_timeout", connect_timeout)?;
        cfg.flow_timeout = secs("flow_timeout", flow_timeout)?;
        if let Some((eps, p, max_extra, every)) = auto_table {
            if !(eps > 0.0 && eps < 1.0 && p > 0.0 && p < 1.0 && every > 0) {
                return Err(PyValueError::new_err(
                    "auto_table: give (eps in (0,1), p in (0,1), max_extra, every > 0)",
                ));
            }
            cfg.auto_table = Some(repflow_net::AutoTable {
                eps,
                p,
                max_extra,
                unit_bytes: 1000,
                every,
            });
        }
        // The client spawns its pooled-connection tasks on the shared runtime.
        let _guard = rt().enter();
        Ok(NetClient {
            client: Client::new(cfg),
        })
    }

    /// Sends a flow of `data` (bytes) or of `size` filler bytes to `addr`; returns the report
    /// as JSON text. Raises ConnectionError (one reason per copy) when every copy fails.
    #[pyo3(signature = (addr, data=None, size=None))]
    fn send(
        &self,
        py: Python<'_>,
        addr: &str,
        data: Option<Vec<u8>>,
        size: Option<u64>,
    ) -> PyResult<String> {
        let dst = self::addr("--to", addr)?;
        let payload = match (data, size) {
            (Some(d), None) => d.into(),
            (None, Some(s)) => sized_payload(s),
            _ => {
                return Err(PyValueError::new_err(
                    "send: give exactly one of data or size",
                ))
            }
        };
        let c = self.client.clone();
        let r = wait(py, async move { c.send(dst, payload).await })?
            .map_err(|e| PyConnectionError::new_err(e.to_string()))?;
        json!(&r)
    }

    /// Probes the paths to `addr` until `copies` pairwise different ones are known (SmartRep;
    /// 0 for the other schemes); returns how many are known.
    fn warm_paths(&self, py: Python<'_>, addr: &str, copies: u8) -> PyResult<usize> {
        let dst = self::addr("--to", addr)?;
        let c = self.client.clone();
        wait(py, async move { c.warm_paths(dst, copies).await })
    }

    /// Sends a request and returns `(response, report JSON)`.
    fn call<'py>(
        &self,
        py: Python<'py>,
        addr: &str,
        data: Vec<u8>,
    ) -> PyResult<(Bound<'py, PyBytes>, String)> {
        let dst = self::addr("--to", addr)?;
        let c = self.client.clone();
        let (body, r) = wait(py, async move { c.call(dst, data).await })?
            .map_err(|e| PyConnectionError::new_err(e.to_string()))?;
        Ok((PyBytes::new(py, &body), json!(&r)?))
    }

    /// Counters as JSON text.
    fn counters(&self) -> PyResult<String> {
        json!(&self.client.counters())
    }

    /// Replays a schedule (`at` seconds, `dsts` addresses, `sizes` bytes, sorted by `at`):
    /// flows at or after `duration` are not started, flows still running at
    /// `duration + drain` are cancelled. Returns a dict of columns over the started flows:
    /// `index, start, fct` (NaN when unfinished or failed), `copies, winner` (−1),
    /// `bytes_sent, bytes_wasted, error` (None or text), `fallback` (None or text).
    fn run_load<'py>(
        &self,
        py: Python<'py>,
        at: Vec<f64>,
        dsts: Vec<String>,
        sizes: Vec<u64>,
        duration: f64,
        drain: f64,
    ) -> PyResult<Bound<'py, PyDict>> {
        if at.len() != dsts.len() || at.len() != sizes.len() {
            return Err(PyValueError::new_err(
                "run_load: at, dsts and sizes differ in length",
            ));
        }
        let mut flows = Vec::with_capacity(at.len());
        let mut parsed: HashMap<&str, SocketAddr> = HashMap::new();
        for ((t, d), s) in at.iter().zip(&dsts).zip(&sizes) {
            let dst = match parsed.get(d.as_str()) {
                Some(a) => *a,
                None => {
                    let a = addr("--peers", d)?;
                    parsed.insert(d, a);
                    a
                }
            };
            flows.push(ScheduledFlow {
                at: Duration::try_from_secs_f64(*t)
                    .map_err(|_| PyValueError::new_err("run_load: negative start time"))?,
                dst,
                size: *s,
            });
        }
        let duration = secs("duration", duration)?;
        let drain = Duration::try_from_secs_f64(drain)
            .map_err(|_| PyValueError::new_err("drain: must be ≥ 0 seconds"))?;
        let c = self.client.clone();
        let out = wait(py, async move {
            run_schedule(&c, &flows, duration, drain).await
        })?;
        let d = PyDict::new(py);
        let mut index = Vec::new();
        let mut start = Vec::new();
        let mut fct = Vec::new();
        let mut copies = Vec::new();
        let mut winner = Vec::new();
        let mut sent = Vec::new();
        let mut wasted = Vec::new();
        let mut error: Vec<Option<String>> = Vec::new();
        let mut fallback: Vec<Option<String>> = Vec::new();
        for o in &out {
            index.push(o.index as i64);
            start.push(o.started.as_secs_f64());
            match &o.result {
                Some(Ok(r)) => {
                    fct.push(r.fct.as_secs_f64());
                    copies.push(i64::from(r.copies));
                    winner.push(i64::from(r.winner));
                    sent.push(r.bytes_sent as i64);
                    wasted.push(r.bytes_wasted as i64);
                    error.push(None);
                    fallback.push(r.fallback.as_ref().map(|f| json!(f)).transpose()?);
                }
                other => {
                    fct.push(f64::NAN);
                    copies.push(0);
                    winner.push(-1);
                    sent.push(0);
                    wasted.push(0);
                    error.push(Some(match other {
                        Some(Err(e)) => e.clone(),
                        _ => "unfinished when the run stopped".into(),
                    }));
                    fallback.push(None);
                }
            }
        }
        d.set_item("index", PyList::new(py, index)?)?;
        d.set_item("start", PyList::new(py, start)?)?;
        d.set_item("fct", PyList::new(py, fct)?)?;
        d.set_item("copies", PyList::new(py, copies)?)?;
        d.set_item("winner", PyList::new(py, winner)?)?;
        d.set_item("bytes_sent", PyList::new(py, sent)?)?;
        d.set_item("bytes_wasted", PyList::new(py, wasted)?)?;
        d.set_item("error", PyList::new(py, error)?)?;
        d.set_item("fallback", PyList::new(py, fallback)?)?;
        Ok(d)
    }
}

/// SmartRep's RepNumAssign over observed flow sizes: returns `(unit_bytes, extra)` where
/// `extra[k-1]` is the number of replicas for sizes in `((k−1)·unit, k·unit]` up to
/// `threshold`.
#[pyfunction]
#[pyo3(signature = (sizes, eps=0.03, p=0.1, max_extra=3, unit_bytes=1000, threshold=100_000))]
fn smartrep_table(
    sizes: Vec<u64>,
    eps: f64,
    p: f64,
    max_extra: u8,
    unit_bytes: u64,
    threshold: u64,
) -> PyResult<(u64, Vec<u16>)> {
    if !(eps > 0.0 && eps < 1.0) {
        return Err(PyValueError::new_err("--smartrep-eps: must be in (0, 1)"));
    }
    if !(p > 0.0 && p < 1.0) {
        return Err(PyValueError::new_err("p: must be in (0, 1)"));
    }
    let mut h = SizeHistogram::new(unit_bytes, threshold);
    for s in sizes {
        h.observe(s);
    }
    let t = h.table(eps, p, max_extra);
    Ok((t.unit_bytes, t.extra.into_iter().map(u16::from).collect()))
}

/// `None` when this network namespace can open Multipath TCP sockets, else why not (one line
/// naming the `net.mptcp.enabled` sysctl).
#[pyfunction]
fn mptcp_error() -> Option<String> {
    repflow_net::mptcp_check().err().map(|e| e.to_string())
}

/// Registers the network classes and functions on `repflow._core`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NetServer>()?;
    m.add_class::<NetClient>()?;
    m.add_function(wrap_pyfunction!(mptcp_error, m)?)?;
    m.add_function(wrap_pyfunction!(smartrep_table, m)?)?;
    Ok(())
}
