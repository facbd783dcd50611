//! How refusals reach the log: one rate limiter per kind of refusal, so that a flood of one
//! kind can neither flood the log nor hide the other kinds, and a summary line for what a
//! limiter held back, written once the kind has been quiet for a second.

use std::sync::Mutex;
use std::time::{Duration, Instant};
use tracing::warn;

/// What was refused (each kind has its own limiter; its name is the `kind` field of the line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `accept` failed (e.g. out of file descriptors, os error 24).
    Accept,
    /// `max_connections` reached and no connection could be evicted.
    Full,
    /// The source address's share reached and none of its connections could be evicted.
    SourceShare,
    /// A connection evicted to make room (it had made the least progress).
    Evicted,
    /// Bytes that are not a frame (wrong magic).
    Garbage,
    /// Another protocol version.
    Version,
    /// A malformed or oversized header, reply flags on a request.
    Malformed,
    /// A missing, unexpected or wrong authentication tag.
    Auth,
    /// A possible replay (timestamp outside the window, repeated copy, older than forgotten).
    Replay,
    /// A payload that does not match its digest, or differs from the flow's first copy.
    Digest,
    /// Header or idle timeout with a frame begun.
    Timeout,
    /// A frame not complete within `frame_timeout`.
    FrameTimeout,
}

const KINDS: [Kind; 12] = [
    Kind::Accept,
    Kind::Full,
    Kind::SourceShare,
    Kind::Evicted,
    Kind::Garbage,
    Kind::Version,
    Kind::Malformed,
    Kind::Auth,
    Kind::Replay,
    Kind::Digest,
    Kind::Timeout,
    Kind::FrameTimeout,
];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Accept => "accept",
            Kind::Full => "full",
            Kind::SourceShare => "source_share",
            Kind::Evicted => "evicted",
            Kind::Garbage => "garbage",
            Kind::Version => "version",
            Kind::Malformed => "malformed",
            Kind::Auth => "auth",
            Kind::Replay => "replay",
            Kind::Digest => "digest",
            Kind::Timeout => "timeout",
            Kind::FrameTimeout => "frame_timeout",
        }
    }

    fn index(self) -> usize {
        KINDS
            .iter()
            .position(|k| *k == self)
            .expect("every kind is listed")
    }
}

/// Lines per kind at most once per this period.
const PERIOD: Duration = Duration::from_secs(1);

#[derive(Default)]
struct State {
    /// When the kind's last line was written.
    last: Option<Instant>,
    /// Refusals of this kind since its last line, not written.
    held: u64,
    /// The most recent of them (peer and what), for the summary line.
    latest: String,
}

/// The server's refusal log: at most one line per kind per second, plus one summary line per
/// kind for the refusals held back, written by [`Refusals::flush`] once the kind has been
/// quiet for a second (the server calls it every second and when it stops).
#[derive(Default)]
pub(crate) struct Refusals {
    kinds: Mutex<[State; KINDS.len()]>,
}

impl std::fmt::Debug for Refusals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Refusals")
    }
}

impl Refusals {
    /// Records one refusal of `kind` from `peer`; writes a line unless this kind had one
    /// within the last second.
    pub(crate) fn log(&self, kind: Kind, peer: &str, what: &str) {
        let now = Instant::now();
        let mut g = self.kinds.lock().expect("refusal log");
        let s = &mut g[kind.index()];
        if s.last.is_some_and(|t| now.duration_since(t) < PERIOD) {
            s.held += 1;
            s.latest.clear();
            s.latest.push_str(peer);
            s.latest.push_str(": ");
            s.latest.push_str(what);
            return;
        }
        let also = std::mem::take(&mut s.held);
        s.last = Some(now);
        drop(g);
        warn!(kind = kind.name(), peer, also, "{what}");
    }

    /// Writes one summary line per kind whose held-back refusals have not been written and
    /// that has been quiet for a second (every kind when `all`, at shutdown).
    pub(crate) fn flush(&self, all: bool) {
        let now = Instant::now();
        let mut lines = Vec::new();
        {
            let mut g = self.kinds.lock().expect("refusal log");
            for (k, s) in KINDS.iter().zip(g.iter_mut()) {
                let quiet = s.last.is_none_or(|t| now.duration_since(t) >= PERIOD);
                if s.held > 0 && (quiet || all) {
                    lines.push((*k, std::mem::take(&mut s.held), s.latest.clone()));
                    s.last = Some(now);
                }
            }
        }
        for (k, n, latest) in lines {
            warn!(
                kind = k.name(),
                held = n,
                latest = latest.as_str(),
                "{n} more refusals of this kind since its last line (rate-limited to one line a second)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_limited_apart_and_held_refusals_are_flushed() {
        let r = Refusals::default();
        for k in KINDS {
            r.log(k, "p", "x");
        }
        {
            let g = r.kinds.lock().unwrap();
            assert!(g.iter().all(|s| s.last.is_some() && s.held == 0));
        }
        r.log(Kind::Garbage, "p", "x");
        r.log(Kind::Garbage, "q", "y");
        assert_eq!(r.kinds.lock().unwrap()[Kind::Garbage.index()].held, 2);
        r.flush(false);
        assert_eq!(r.kinds.lock().unwrap()[Kind::Garbage.index()].held, 2);
        r.flush(true);
        assert_eq!(r.kinds.lock().unwrap()[Kind::Garbage.index()].held, 0);
    }
}
