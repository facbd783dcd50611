//! A small `tracing` subscriber that writes events to standard error, filtered by level per
//! target in the `RUST_LOG` syntax (`warn`, `repflow_net=debug`, `info,repflow_net::server=trace`).
//! Programs embedding the library usually install their own subscriber; the `repflow` CLI,
//! which has none on the Python side, installs this one.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// A filter string that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("log filter {0:?}: expected LEVEL or TARGET=LEVEL items separated by commas (levels: error, warn, info, debug, trace, off)")]
pub struct FilterError(String);

/// Per-target maximum levels (`None`: off).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    default: Option<Level>,
    targets: Vec<(String, Option<Level>)>,
}

fn level(s: &str) -> Result<Option<Level>, ()> {
    Ok(Some(match s.trim().to_ascii_lowercase().as_str() {
        "off" => return Ok(None),
        "error" => Level::ERROR,
        "warn" => Level::WARN,
        "info" => Level::INFO,
        "debug" => Level::DEBUG,
        "trace" => Level::TRACE,
        _ => return Err(()),
    }))
}

impl Filter {
    /// Parses `RUST_LOG` syntax; targets not named get `warn` unless a bare level is given.
    pub fn parse(spec: &str) -> Result<Filter, FilterError> {
        let bad = || FilterError(spec.to_string());
        let mut f = Filter {
            default: Some(Level::WARN),
            targets: Vec::new(),
        };
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match item.split_once('=') {
                None => f.default = level(item).map_err(|_| bad())?,
                Some((t, l)) => {
                    let t = t.trim();
                    if t.is_empty() {
                        return Err(bad());
                    }
                    f.targets
                        .push((t.to_string(), level(l).map_err(|_| bad())?));
                }
            }
        }
        // Longest target first: the most specific directive wins.
        f.targets.sort_by_key(|(t, _)| std::cmp::Reverse(t.len()));
        Ok(f)
    }

    /// Whether an event of `level` from `target` passes.
    pub fn enabled(&self, target: &str, level: &Level) -> bool {
        let max = self
            .targets
            .iter()
            .find(|(t, _)| {
                target == t
                    || (target.starts_with(t.as_str()) && target[t.len()..].starts_with("::"))
            })
            .map_or(self.default, |(_, l)| *l);
        max.is_some_and(|m| *level <= m)
    }
}

struct StderrSubscriber {
    filter: Filter,
    next_id: AtomicU64,
}

struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, " {value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            let _ = write!(self.0, " {value}");
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }
}

impl Subscriber for StderrSubscriber {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        self.filter.enabled(m.target(), m.level())
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(self.next_id.fetch_add(1, Ordering::Relaxed).max(1))
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, e: &Event<'_>) {
        let m = e.metadata();
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let mut line = Fields(format!(
            "{}.{:03} {:>5} {}:",
            t.as_secs(),
            t.subsec_millis(),
            m.level(),
            m.target()
        ));
        e.record(&mut line);
        line.0.push('\n');
        let _ = std::io::stderr().lock().write_all(line.0.as_bytes());
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// Installs the standard-error subscriber process-wide with `filter` (`RUST_LOG` syntax).
/// Returns `Ok(false)` if a subscriber was already installed (then nothing changes).
pub fn init_stderr(filter: &str) -> Result<bool, FilterError> {
    let sub = StderrSubscriber {
        filter: Filter::parse(filter)?,
        next_id: AtomicU64::new(1),
    };
    Ok(tracing::subscriber::set_global_default(sub).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_levels_by_target() {
        let f = Filter::parse("info,repflow_net::server=debug,noisy=off").unwrap();
        assert!(f.enabled("repflow_net::server", &Level::DEBUG));
        assert!(!f.enabled("repflow_net::server", &Level::TRACE));
        assert!(!f.enabled("repflow_net::client", &Level::DEBUG));
        assert!(f.enabled("repflow_net::client", &Level::INFO));
        assert!(!f.enabled("noisy", &Level::ERROR));
        assert!(!f.enabled("repflow_net::serverx", &Level::DEBUG));
        let d = Filter::parse("").unwrap();
        assert!(d.enabled("x", &Level::WARN) && !d.enabled("x", &Level::INFO));
        assert!(Filter::parse("loud").is_err());
        assert!(Filter::parse("=debug").is_err());
    }
}
