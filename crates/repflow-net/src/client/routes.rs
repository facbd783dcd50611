//! Choosing each copy's route: path probes and SmartRep's port selection.

use super::base::Client;
use super::types::{inc, ConnMode, Route};
use crate::paths::{Fallback, Selection};
use crate::policy::PortStrategy;
use crate::probe::probe_port;
use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use tracing::debug;

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
        let inner = &self.inner;
        let _g = inner.probing.lock().await;
        let pcfg = inner.cfg.probe.clone();
        let src_ip = inner.cfg.bind_ip.unwrap_or(if dst.is_ipv4() {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        } else {
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        });
        loop {
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
