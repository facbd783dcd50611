//! The server sidecar's journal: the flow ids it handed to the real server, written before
//! each hand-over and read back at start, so that a copy of a request that arrives after a
//! restart of the sidecar is refused instead of executed a second time.
//!
//! Two files, `PATH.0` and `PATH.1`, of 16-byte records (flow id, wall-clock milliseconds,
//! little-endian); one receives appends, the other holds the previous generation. The active
//! one is switched (and the other truncated) when it has been active for `window` or holds
//! `capacity` ids, so an id is remembered at least `window` (unless the capacity forces an
//! early switch, which is counted) and the files hold at most 2 × `capacity` records.
//! At start both files are read, records younger than `window` kept, rewritten into `PATH.0`
//! (write, fsync, rename) and `PATH.1` emptied.
//!
//! Each record is one `write(2)` before the request is sent upstream: it survives the
//! process's death (`kill -9`); it is not fsynced, so a crash of the host may lose the last
//! records (documented in docs/proxy.md).
//!
//! A journal that went missing is not silently started anew: the first open also writes
//! `PATH.created`, and an open that finds that marker without `PATH.0` and `PATH.1` refuses
//! (one line saying why) unless `allow_missing` is set. Whenever the journal starts empty
//! (first start, files or directory lost, `allow_missing`), it remembers nothing before that
//! moment: [`Journal::fresh_since_ms`] is then the start time, and the server sidecar refuses
//! requests stamped before it, which an earlier life may have executed.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where and how long the server sidecar remembers the requests it executed.
#[derive(Clone, Debug)]
pub struct JournalConfig {
    /// Path prefix of the two journal files (`PATH.0`, `PATH.1`).
    pub path: PathBuf,
    /// How long an id is remembered at least (≥ the repflow-net dedup window).
    pub window: Duration,
    /// Ids per generation (memory ≈ 2 × capacity × 16 bytes, files ≤ 2 × capacity × 16).
    pub capacity: usize,
    /// Start a new journal when `PATH.0` and `PATH.1` are missing although `PATH.created`
    /// shows one was kept here (otherwise [`ProxyServer::bind`](super::ProxyServer::bind)
    /// refuses to start). Requests stamped before the new journal's start are refused either
    /// way.
    pub allow_missing: bool,
}

const RECORD: usize = 16;

struct State {
    file: File,
    active: u8,
    since: Instant,
    current: HashSet<u64>,
    previous: HashSet<u64>,
}

/// The journal (see the module documentation).
pub(crate) struct Journal {
    cfg: JournalConfig,
    /// Wall-clock ms since which the journal remembers every execution (0: it was read back).
    fresh_since_ms: u64,
    state: Mutex<State>,
}

/// What [`Journal::claim`] decided.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// New id, recorded: execute it.
    New,
    /// Already executed (in this life or a previous one): do not.
    Executed,
    /// New id, recorded, but the journal had to drop a generation younger than its window.
    NewEarlyRotation,
}

fn file_name(base: &Path, gen: u8) -> PathBuf {
    suffixed(base, &gen.to_string())
}

fn suffixed(base: &Path, suffix: &str) -> PathBuf {
    let mut s = base.as_os_str().to_owned();
    s.push(format!(".{suffix}"));
    PathBuf::from(s)
}

fn read_records(
    path: &Path,
    now_ms: u64,
    window_ms: u64,
    out: &mut Vec<[u8; RECORD]>,
) -> std::io::Result<()> {
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(mut f) => {
            f.read_to_end(&mut bytes)?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    }
    // A torn last record (the process died inside a write) is ignored.
    for rec in bytes.chunks_exact(RECORD) {
        let ts = u64::from_le_bytes(rec[8..].try_into().expect("8 bytes"));
        if now_ms.saturating_sub(ts) <= window_ms && ts <= now_ms + window_ms {
            out.push(rec.try_into().expect("16 bytes"));
        }
    }
    Ok(())
}

impl Journal {
    /// Opens (and compacts) the journal at `cfg.path`.
    pub(crate) fn open(cfg: JournalConfig) -> std::io::Result<Journal> {
        if let Some(dir) = cfg.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let now_ms = crate::frame::now_ms();
        let window_ms = cfg.window.as_millis() as u64;
        let marker = suffixed(&cfg.path, "created");
        let present = file_name(&cfg.path, 0).exists() || file_name(&cfg.path, 1).exists();
        if !present && marker.exists() && !cfg.allow_missing {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "{}.0 and .1 are missing but {} shows a journal was kept here, so a copy of a request already executed could execute again; restore them, or start a new journal with --journal-allow-missing (allow_missing)",
                    cfg.path.display(),
                    marker.display()
                ),
            ));
        }
        if !marker.exists() {
            File::create(&marker)?.sync_all()?;
        }
        let mut recs = Vec::new();
        for gen in 0..2 {
            read_records(&file_name(&cfg.path, gen), now_ms, window_ms, &mut recs)?;
        }
        let tmp = file_name(&cfg.path, 9);
        {
            let mut f = File::create(&tmp)?;
            f.write_all(&recs.concat())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, file_name(&cfg.path, 0))?;
        File::create(file_name(&cfg.path, 1))?;
        let file = OpenOptions::new()
            .append(true)
            .open(file_name(&cfg.path, 0))?;
        let current = recs
            .iter()
            .map(|r| u64::from_le_bytes(r[..8].try_into().expect("8 bytes")))
            .collect();
        Ok(Journal {
            cfg,
            fresh_since_ms: if present { 0 } else { now_ms },
            state: Mutex::new(State {
                file,
                active: 0,
                since: Instant::now(),
                current,
                previous: HashSet::new(),
            }),
        })
    }

    /// Wall-clock ms before which the journal may not know what was executed: the time it
    /// started empty (0 when it was read back from its files).
    pub(crate) fn fresh_since_ms(&self) -> u64 {
        self.fresh_since_ms
    }

    /// Ids remembered now.
    pub(crate) fn len(&self) -> usize {
        let s = self.state.lock().expect("journal lock");
        s.current.len() + s.previous.len()
    }

    /// Records `id` as about to be executed, unless it already was.
    pub(crate) fn claim(&self, id: u64) -> std::io::Result<Claim> {
        let mut s = self.state.lock().expect("journal lock");
        if s.current.contains(&id) || s.previous.contains(&id) {
            return Ok(Claim::Executed);
        }
        let mut early = false;
        if s.current.len() >= self.cfg.capacity || s.since.elapsed() >= self.cfg.window {
            early = s.since.elapsed() < self.cfg.window;
            let next = 1 - s.active;
            s.file = File::create(file_name(&self.cfg.path, next))?;
            s.active = next;
            s.since = Instant::now();
            s.previous = std::mem::take(&mut s.current);
        }
        let mut rec = [0u8; RECORD];
        rec[..8].copy_from_slice(&id.to_le_bytes());
        rec[8..].copy_from_slice(&crate::frame::now_ms().to_le_bytes());
        s.file.write_all(&rec)?;
        s.current.insert(id);
        Ok(if early {
            Claim::NewEarlyRotation
        } else {
            Claim::New
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(dir: &Path, window: Duration, capacity: usize) -> JournalConfig {
        JournalConfig {
            path: dir.join("j"),
            window,
            capacity,
            allow_missing: false,
        }
    }

    fn tempdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("repflow-journal-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn survives_reopen() {
        let d = tempdir("reopen");
        let j = Journal::open(cfg(&d, Duration::from_secs(60), 100)).unwrap();
        assert_eq!(j.claim(7).unwrap(), Claim::New);
        assert_eq!(j.claim(7).unwrap(), Claim::Executed);
        drop(j);
        let j = Journal::open(cfg(&d, Duration::from_secs(60), 100)).unwrap();
        assert_eq!(j.claim(7).unwrap(), Claim::Executed);
        assert_eq!(j.claim(8).unwrap(), Claim::New);
        drop(j);
        // A torn record at the end is ignored.
        let mut f = OpenOptions::new().append(true).open(d.join("j.0")).unwrap();
        f.write_all(&[1, 2, 3]).unwrap();
        drop(f);
        let j = Journal::open(cfg(&d, Duration::from_secs(60), 100)).unwrap();
        assert_eq!(j.claim(8).unwrap(), Claim::Executed);
        assert_eq!(j.len(), 2);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn bounded_by_capacity_and_window() {
        let d = tempdir("bounds");
        let j = Journal::open(cfg(&d, Duration::from_secs(60), 4)).unwrap();
        for id in 0..4 {
            assert_eq!(j.claim(id).unwrap(), Claim::New);
        }
        assert_eq!(j.claim(4).unwrap(), Claim::NewEarlyRotation);
        for id in 5..8 {
            j.claim(id).unwrap();
        }
        assert_eq!(j.claim(8).unwrap(), Claim::NewEarlyRotation);
        // Ids 0..4 are gone (two generations of 4 kept), 4..9 remembered.
        assert!(j.len() <= 8);
        assert_eq!(j.claim(0).unwrap(), Claim::New);
        assert_eq!(j.claim(5).unwrap(), Claim::Executed);
        drop(j);
        // Records older than the window are dropped at start.
        let j = Journal::open(cfg(&d, Duration::ZERO, 4)).unwrap();
        assert!(j.len() <= 9);
        let _ = std::fs::remove_dir_all(&d);
    }
}
