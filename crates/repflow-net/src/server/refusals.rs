//! How refusals reach the log: rate-limited warnings, so that a flood of refused peers
//! cannot flood the log.

use std::sync::Mutex;
use std::time::{Duration, Instant};
use tracing::warn;

/// A warning logged at most once a second, with the number of occurrences it stands for.
pub(crate) struct RateLimited {
    last: Option<Instant>,
    skipped: u64,
}

impl RateLimited {
    pub(crate) fn new() -> Self {
        RateLimited {
            last: None,
            skipped: 0,
        }
    }

    pub(crate) fn log(&mut self, peer: &str, what: &str) {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            self.skipped += 1;
            return;
        }
        warn!(peer, also = self.skipped, "{what}");
        self.last = Some(now);
        self.skipped = 0;
    }
}
/// Logs a refused frame, at most once a second for the whole server.
pub(crate) fn frame_log(peer: &str, what: &str) {
    static LIMIT: Mutex<Option<RateLimited>> = Mutex::new(None);
    let mut g = LIMIT.lock().expect("log limiter");
    g.get_or_insert_with(RateLimited::new).log(peer, what);
}
