//! What the sidecars count ([`ProxyCounters`]) and their rate-limited refusal log.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;
use tracing::warn;

macro_rules! counters {
    ($($(#[doc = $d:literal])* $name:ident),* $(,)?) => {
        /// Counters of a sidecar (a snapshot); a field that does not apply to a side stays 0.
        #[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
        pub struct ProxyCounters {
            $($(#[doc = $d])* pub $name: u64,)*
        }

        #[derive(Debug, Default)]
        pub(crate) struct Atomic {
            $(pub(crate) $name: AtomicU64,)*
        }

        impl Atomic {
            pub(crate) fn snapshot(&self) -> ProxyCounters {
                ProxyCounters { $($name: self.$name.load(Ordering::Relaxed),)* }
            }
        }
    };
}

counters! {
    /// Application connections accepted (client) or upstream connections opened (server).
    connections,
    /// Requests carried (client: application requests; server: requests executed upstream).
    requests,
    /// Calls made (client) or received (server); a Redis pipeline run is one call.
    calls,
    /// Refused: a sidecar already holds its maximum of connections.
    refused_connections,
    /// Refused: bytes that do not parse as the protocol.
    refused_malformed,
    /// Refused: a request or response above the size limit.
    refused_too_large,
    /// Refused: a command the proxy cannot carry (connection state, pub/sub).
    refused_unsupported,
    /// Refused (server): the flow id was already executed (journal), e.g. a copy arriving
    /// after a restart.
    refused_executed,
    /// Refused (server): the request is older than the journal window.
    refused_stale,
    /// Refused (server): no upstream connection became free within the pool wait.
    refused_pool_busy,
    /// Refused (server): the upstream could not be reached (nothing sent).
    refused_upstream_down,
    /// Calls that failed in repflow-net (every copy failed or timed out) (client).
    calls_failed,
    /// Requests handed upstream whose response could not be read (the outcome is unknown).
    outcome_unknown,
    /// Application connections that idled out or stopped reading (client).
    timeouts,
    /// Journal rotations forced by its capacity before the window had passed (server).
    journal_early_rotations,
    /// Refused (client): the application connections' buffers would exceed `max_buffered`.
    refused_memory,
    /// Requests sent on a new upstream connection after the upstream closed a pooled one
    /// without answering them: never written to it, or idempotent (server).
    upstream_resent,
}

pub(crate) fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Logs refusals at `warn`, at most one line per kind per second, each with `also=N`
/// (refusals of that kind since the previous line).
#[derive(Debug)]
pub(crate) struct RefusalLog {
    epoch: Instant,
    last: Mutex<HashMap<&'static str, (u64, u64)>>,
}

impl Default for RefusalLog {
    fn default() -> Self {
        RefusalLog {
            epoch: Instant::now(),
            last: Mutex::new(HashMap::new()),
        }
    }
}

impl RefusalLog {
    /// Counts one refusal of `kind` and logs it unless one was logged this second.
    pub(crate) fn refuse(
        &self,
        side: &'static str,
        kind: &'static str,
        detail: &dyn std::fmt::Display,
    ) {
        let sec = self.epoch.elapsed().as_secs() + 1;
        let also = {
            let mut m = self.last.lock().expect("refusal log lock");
            let e = m.entry(kind).or_insert((0, 0));
            if e.0 == sec {
                e.1 += 1;
                return;
            }
            let held = e.1;
            *e = (sec, 0);
            held
        };
        warn!(side, kind, also, "proxy refused: {detail}");
    }
}
