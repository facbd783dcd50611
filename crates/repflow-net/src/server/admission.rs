//! Admission of a new connection: its source address's share of the connection slots.

use super::shared::Shared;
use std::net::IpAddr;
use std::sync::Arc;

/// One connection's place in its source address's share; released on drop.
pub(crate) struct SourceShare {
    shared: Arc<Shared>,
    ip: IpAddr,
}

impl SourceShare {
    pub(crate) fn take(shared: &Arc<Shared>, ip: IpAddr) -> Option<SourceShare> {
        let mut m = shared.per_source.lock().expect("per-source lock");
        let n = m.entry(ip).or_insert(0);
        if *n >= shared.cfg.max_connections_per_source.max(1) {
            if *n == 0 {
                m.remove(&ip);
            }
            return None;
        }
        *n += 1;
        Some(SourceShare {
            shared: shared.clone(),
            ip,
        })
    }
}

impl Drop for SourceShare {
    fn drop(&mut self) {
        let mut m = self.shared.per_source.lock().expect("per-source lock");
        if let Some(n) = m.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.ip);
            }
        }
    }
}
