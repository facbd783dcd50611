//! Choosing each copy's route: path probes and SmartRep's port selection.

use super::base::Client;
use super::types::{inc, ConnMode, PoolKey, Route};
use crate::paths::{Fallback, Selection};
use crate::policy::PortStrategy;
use crate::probe::probe_port;
use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::Ordering;
use tracing::{debug, info};

impl Client {
    /// Probes the paths to `dst` ahead of time, until `copies` pairwise different paths are
    /// known or the probe budget is spent, and returns how many are known. SmartRep keeps
    /// what it learns per (destination, source port), so flows sent afterwards choose their
    /// ports without waiting for probes — as the SmartRep paper's probe database does. Does
    /// nothing for the `tcp` and `repflow` schemes (they do not choose ports by path).
    pub async fn warm_paths(&self, dst: SocketAddr, copies: u8) -> usize {
        if self.inner.cfg.policy.ports == PortStrategy::DstPortPlus {
            return 0;
        }
        self.ensure_probed(dst, usize::from(copies.max(2))).await;
        self.inner
            .selector
            .lock()
            .expect("selector lock")
            .distinct_paths(dst)
    }

    pub(super) async fn ensure_probed(&self, dst: SocketAddr, want: usize) {
        let _g = self.inner.probing.lock().await;
        self.probe_until(dst, want, usize::MAX).await;
    }

    /// Probes `dst` (the caller holds `probing`) until `want` distinct paths are known, the
    /// selector's budget is spent or `max` ports were probed by this call.
    async fn probe_until(&self, dst: SocketAddr, want: usize, max: usize) {
        let inner = &self.inner;
        let mut done = 0;
        let pcfg = inner.cfg.probe.clone();
        let src_ip = inner.cfg.bind_ip.unwrap_or(if dst.is_ipv4() {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        } else {
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        });
        while done < max {
            done += 1;
            let next = inner
                .selector
                .lock()
                .expect("selector lock")
                .next_probe(dst, want);
            let Some(port) = next else { break };
            let cfg = pcfg.clone();
            let src = SocketAddr::new(src_ip, port);
            let outcome =
                match tokio::task::spawn_blocking(move || probe_port(&cfg, src, dst)).await {
                    Ok(o) => o,
                    Err(_) => crate::paths::ProbeOutcome::NoAnswer,
                };
            inc(&inner.counters.probes, pcfg.ttls.len() as u64);
            debug!(%dst, port, ?outcome, "path probe");
            inner
                .selector
                .lock()
                .expect("selector lock")
                .record(dst, port, outcome);
            tokio::time::sleep(pcfg.pace).await;
        }
    }

    /// Pooled mode with a path pool: routes for `n` copies of a short request, on slots of
    /// different paths (see [`crate::pathpool`]). The first request to `dst` fills its slots:
    /// it probes up to the pool's probe budget of source ports (every probe's answer is kept
    /// for later replacements).
    pub(super) async fn pool_plan(&self, dst: SocketAddr, n: u8) -> Vec<Route> {
        let filled = |c: &Client| {
            c.inner
                .pathpool
                .lock()
                .expect("pathpool lock")
                .is_filled(dst)
        };
        if !filled(self) {
            let _g = self.inner.probing.lock().await;
            if !filled(self) {
                let budget = self
                    .inner
                    .cfg
                    .path_pool
                    .as_ref()
                    .map_or(0, |p| p.probe_budget);
                let before = self.inner.counters.probes.load(Ordering::Relaxed);
                self.probe_until(dst, usize::MAX, budget).await;
                let probed = self
                    .inner
                    .selector
                    .lock()
                    .expect("selector lock")
                    .probed(dst);
                let mut pool = self.inner.pathpool.lock().expect("pathpool lock");
                pool.fill(dst, &probed);
                info!(
                    %dst,
                    slots = pool.slots(dst).len(),
                    distinct_paths = pool.distinct_paths(dst),
                    probes = self.inner.counters.probes.load(Ordering::Relaxed) - before,
                    "path pool filled"
                );
            }
        }
        let (ports, cold) = {
            let pools = self.inner.pools.lock().expect("pools lock");
            let now_ms = self.now().as_millis() as u64;
            let idle_ms = self.inner.cfg.pool_idle.as_millis() as u64;
            let ready = |port: u16| {
                pools
                    .get(&Self::slot_key(dst, port))
                    .is_some_and(|c| c.fresh(now_ms, idle_ms))
            };
            let mut pool = self.inner.pathpool.lock().expect("pathpool lock");
            let ports = pool.pick_ready(dst, usize::from(n.max(1)), ready);
            let cold: Vec<u16> = pool
                .slots(dst)
                .iter()
                .map(|s| s.port)
                .filter(|&p| !ready(p))
                .collect();
            (ports, cold)
        };
        // Slots not ready (never opened, closed, or idle past `pool_idle`) are opened in the
        // background, so that later requests find them ready; a copy that was put on one
        // anyway (none of its kind was ready) opens it itself.
        for port in cold {
            if !ports.contains(&port) {
                self.warm_slot(Self::slot_key(dst, port));
            }
        }
        ports
            .into_iter()
            .map(|p| Route {
                dst,
                src_port: Some(p),
            })
            .collect()
    }

    fn slot_key(dst: SocketAddr, port: u16) -> PoolKey {
        PoolKey {
            dst,
            src_port: Some(port),
            long: false,
        }
    }

    /// Opens pool slot `key`'s connection in a background task (once at a time per slot);
    /// if it cannot be opened, the slot moves to another port.
    fn warm_slot(&self, key: PoolKey) {
        if !self.inner.warming.lock().expect("warming lock").insert(key) {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            if let Err(e) = me.pooled_conn(key).await {
                debug!(error = %e, port = ?key.src_port, "pool slot could not be opened");
                me.pool_copy_failed(key);
            }
            me.inner.warming.lock().expect("warming lock").remove(&key);
        });
    }

    /// A copy sent on pool slot `key` failed: if its connection is gone (never opened, or
    /// closed), the slot gets a new source port and the dead connection leaves the map.
    pub(super) fn pool_copy_failed(&self, key: PoolKey) -> Option<u16> {
        let port = key.src_port?;
        let dead = {
            let mut pools = self.inner.pools.lock().expect("pools lock");
            let dead = pools
                .get(&key)
                .is_none_or(|c| !c.alive.load(Ordering::Relaxed));
            if dead {
                pools.remove(&key);
            }
            dead
        };
        if dead {
            let new = self
                .inner
                .pathpool
                .lock()
                .expect("pathpool lock")
                .replace(key.dst, port);
            debug!(dst = %key.dst, port, ?new, "path pool slot replaced");
            return new;
        }
        None
    }

    /// Routes for `n` copies, and the ports to release afterwards (per-flow SmartRep).
    pub(super) async fn plan(
        &self,
        dst: SocketAddr,
        n: u8,
    ) -> (Vec<Route>, Option<Fallback>, Vec<u16>) {
        let plus = |n: u8| -> Vec<Route> {
            (0..n)
                .map(|i| Route {
                    dst: SocketAddr::new(dst.ip(), dst.port().wrapping_add(u16::from(i))),
                    src_port: None,
                })
                .collect()
        };
        if n <= 1 || self.inner.cfg.policy.ports == PortStrategy::DstPortPlus {
            return (plus(n), None, Vec::new());
        }
        self.ensure_probed(dst, usize::from(n)).await;
        let pooled = self.inner.cfg.mode == ConnMode::Pooled;
        let mut busy = self.inner.busy.lock().expect("busy lock");
        let set = busy.entry(dst).or_default();
        let empty = HashSet::new();
        let sel = self.inner.selector.lock().expect("selector lock").select(
            dst,
            usize::from(n),
            if pooled { &empty } else { set },
        );
        match sel {
            Selection::Ports(ports) => {
                let routes = ports
                    .iter()
                    .map(|&p| Route {
                        dst,
                        src_port: Some(p),
                    })
                    .collect();
                let held = if pooled {
                    Vec::new()
                } else {
                    set.extend(ports.iter().copied());
                    ports
                };
                (routes, None, held)
            }
            Selection::Fallback(f) => {
                inc(&self.inner.counters.path_fallbacks, 1);
                (plus(n), Some(f), Vec::new())
            }
        }
    }
}
