//! The client itself: `Client`, its shared state (`Inner`), and its core methods.

use super::pool::PooledConn;
use super::types::{AtomicCounters, ClientConfig, ClientCounters, FlowIds, PoolKey};
use crate::pathpool::PathPool;
use crate::paths::PortSelector;
use crate::policy::Policy;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::debug;

pub(super) struct Inner {
    pub(super) cfg: ClientConfig,
    pub(super) policy: Mutex<Policy>,
    pub(super) histogram: Mutex<Option<crate::policy::SizeHistogram>>,
    pub(super) selector: Mutex<PortSelector>,
    /// Pooled mode with a path pool: the slots per destination ([`PathPool`]).
    pub(super) pathpool: Mutex<PathPool>,
    /// Pool slots whose connection is being opened in the background.
    pub(super) warming: Mutex<HashSet<PoolKey>>,
    pub(super) busy: Mutex<HashMap<SocketAddr, HashSet<u16>>>,
    pub(super) probing: tokio::sync::Mutex<()>,
    pub(super) pools: Mutex<HashMap<PoolKey, Arc<PooledConn>>>,
    /// A gate per pooled connection being opened: opens of one key are serialized (lookups do
    /// not wait for them), opens of different keys are not. An entry leaves once nobody
    /// waits on it.
    pub(super) connecting: Mutex<HashMap<PoolKey, Arc<tokio::sync::Mutex<()>>>>,
    pub(super) counters: Arc<AtomicCounters>,
    /// Secret key of the flow-id function (see [`FlowIds`]).
    pub(super) ids: FlowIds,
    pub(super) next_seq: AtomicU64,
    pub(super) epoch: Instant,
}

/// A RepFlow/SmartRep client. Cheap to clone (shared state); usable from many tasks.
#[derive(Clone)]
pub struct Client {
    pub(super) inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("mode", &self.inner.cfg.mode)
            .field("policy", &self.inner.cfg.policy)
            .finish()
    }
}

pub(super) struct BusyGuard<'a> {
    pub(super) inner: &'a Inner,
    pub(super) dst: SocketAddr,
    pub(super) ports: Vec<u16>,
}

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        if self.ports.is_empty() {
            return;
        }
        let mut b = self.inner.busy.lock().expect("busy lock");
        if let Some(s) = b.get_mut(&self.dst) {
            for p in &self.ports {
                s.remove(p);
            }
        }
    }
}

impl Client {
    /// A client with the given settings. Needs a tokio runtime when used, not to be built.
    pub fn new(cfg: ClientConfig) -> Self {
        let (lo, hi) = cfg.probe.ports;
        let seed = {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(0x7061_7468);
            h.finish()
        };
        let mut selector = PortSelector::new(lo, hi);
        if cfg.path_pool.is_some() {
            // Pooled connections stay bound to their probed ports: start where another
            // client on this host (a second sidecar) is unlikely to.
            selector.start = (seed >> 48) as u16;
        }
        Client {
            inner: Arc::new(Inner {
                policy: Mutex::new(Policy::new(cfg.policy.clone())),
                histogram: Mutex::new(cfg.auto_table.map(|a| {
                    crate::policy::SizeHistogram::new(a.unit_bytes, cfg.policy.threshold)
                })),
                selector: Mutex::new(selector),
                pathpool: Mutex::new(PathPool::new(
                    cfg.path_pool.clone().unwrap_or_default(),
                    (lo, hi),
                    seed,
                )),
                warming: Mutex::new(HashSet::new()),
                busy: Mutex::new(HashMap::new()),
                probing: tokio::sync::Mutex::new(()),
                pools: Mutex::new(HashMap::new()),
                connecting: Mutex::new(HashMap::new()),
                counters: Arc::new(AtomicCounters::default()),
                ids: FlowIds::new(),
                next_seq: AtomicU64::new(0),
                epoch: Instant::now(),
                cfg,
            }),
        }
    }

    /// The settings.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.cfg
    }

    /// Replaces the copies rule (e.g. a new SmartRep table).
    pub fn set_copies(&self, rule: crate::policy::CopiesRule) {
        self.inner
            .policy
            .lock()
            .expect("policy lock")
            .set_copies(rule);
    }

    /// The path pool's counters (all zero without one).
    pub fn path_pool_counters(&self) -> crate::pathpool::PathPoolCounters {
        self.inner
            .pathpool
            .lock()
            .expect("pathpool lock")
            .counters()
    }

    /// The path pool's slots for `dst` (empty without a pool, or before the first request).
    pub fn path_pool_slots(&self, dst: SocketAddr) -> Vec<crate::pathpool::Slot> {
        self.inner
            .pathpool
            .lock()
            .expect("pathpool lock")
            .slots(dst)
            .to_vec()
    }

    /// A snapshot of the counters.
    pub fn counters(&self) -> ClientCounters {
        let c = &self.inner.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ClientCounters {
            flows: l(&c.flows),
            flows_failed: l(&c.flows_failed),
            copies_sent: l(&c.copies_sent),
            copies_won_by_replica: l(&c.copies_won_by_replica),
            copies_cancelled: l(&c.copies_cancelled),
            copies_failed: l(&c.copies_failed),
            frames_skipped: l(&c.frames_skipped),
            bytes_sent: l(&c.bytes_sent),
            bytes_wasted: l(&c.bytes_wasted),
            probes: l(&c.probes),
            path_fallbacks: l(&c.path_fallbacks),
            connections: l(&c.connections),
            pool_stalls: l(&c.pool_stalls),
            keepalives: l(&c.keepalives),
        }
    }

    /// Feeds the size histogram and re-learns the copies table when due.
    pub(super) fn observe(&self, size: u64) {
        let Some(a) = self.inner.cfg.auto_table else {
            return;
        };
        let table = {
            let mut h = self.inner.histogram.lock().expect("histogram lock");
            let Some(h) = h.as_mut() else { return };
            h.observe(size);
            (h.flows % a.every.max(1) == 0).then(|| h.table(a.eps, a.p, a.max_extra))
        };
        if let Some(t) = table {
            debug!(extra = ?t.extra, "re-learnt the SmartRep copies table");
            self.set_copies(crate::policy::CopiesRule::Table(t));
        }
    }

    pub(super) fn now(&self) -> Duration {
        self.inner.epoch.elapsed()
    }
}
