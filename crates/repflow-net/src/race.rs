//! The copy race as a state machine (sans-IO: no tokio, no clock of its own). The tokio layer
//! (`client.rs`) starts one task per copy and feeds their results here; the race decides the
//! winner (the first copy answered), records each copy's failure, ends with every copy failed
//! or with the flow timeout, and does the byte accounting once the losers were cancelled.

use crate::error::CopyFailure;
use std::time::{Duration, Instant};

/// What the race says after an event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Keep waiting for the other copies.
    Wait,
    /// `copy` won after `fct`: cancel every other copy.
    Won {
        /// The winning copy.
        copy: u8,
        /// Time from the start to its reply.
        fct: Duration,
    },
    /// Every copy failed: the flow fails.
    AllFailed,
}

/// Bytes of a finished race.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Accounting {
    /// Bytes written by every copy (the winner's counted as its whole frame).
    pub total: u64,
    /// Of those, written by copies other than the winner.
    pub wasted: u64,
    /// Copies still running when the race ended (then cancelled).
    pub cancelled: u8,
}

/// One flow's race among `copies` copies.
#[derive(Debug)]
pub(crate) struct Race {
    start: Instant,
    copies: u8,
    failed: Vec<CopyFailure>,
    winner: Option<u8>,
}

impl Race {
    /// A race started at `start`.
    pub(crate) fn new(copies: u8, start: Instant) -> Self {
        Race {
            start,
            copies,
            failed: Vec::new(),
            winner: None,
        }
    }

    /// A copy was answered at `now`: the first answer wins; later ones change nothing.
    pub(crate) fn on_reply(&mut self, copy: u8, now: Instant) -> Step {
        if self.winner.is_some() || self.failed.iter().any(|f| f.copy == copy) {
            return Step::Wait;
        }
        self.winner = Some(copy);
        Step::Won {
            copy,
            fct: now.saturating_duration_since(self.start),
        }
    }

    /// A copy failed.
    pub(crate) fn on_failure(&mut self, copy: u8, error: String) -> Step {
        if self.winner.is_none() && !self.failed.iter().any(|f| f.copy == copy) {
            self.failed.push(CopyFailure { copy, error });
        }
        if self.winner.is_none() && self.failed.len() == usize::from(self.copies) {
            Step::AllFailed
        } else {
            Step::Wait
        }
    }

    /// The flow timeout expired without a winner: every copy not yet failed is recorded as
    /// stalled.
    pub(crate) fn on_timeout(&mut self, limit: Duration) {
        if self.winner.is_some() {
            return;
        }
        for c in 0..self.copies {
            if !self.failed.iter().any(|f| f.copy == c) {
                self.failed.push(CopyFailure {
                    copy: c,
                    error: format!("no reply within {limit:?} (stalled)"),
                });
            }
        }
    }

    /// Failures so far.
    #[cfg(test)]
    pub(crate) fn failures(&self) -> &[CopyFailure] {
        &self.failed
    }

    /// Takes the failures out, sorted by copy.
    pub(crate) fn take_failures(&mut self) -> Vec<CopyFailure> {
        let mut f = std::mem::take(&mut self.failed);
        f.sort_by_key(|x| x.copy);
        f
    }

    /// Byte accounting once the race ended: `written[i]` is what copy `i` had handed to its
    /// socket, `frame_len` the winner's whole frame (it was all received, so all written,
    /// even if its writer has not yet counted the last bytes), `running` the copies still
    /// running (cancelled).
    pub(crate) fn settle(&self, written: &[u64], frame_len: u64, running: u8) -> Accounting {
        let mut total: u64 = written.iter().sum();
        match self.winner {
            Some(w) => {
                let own = written.get(usize::from(w)).copied().unwrap_or(0);
                total += frame_len.saturating_sub(own);
                Accounting {
                    total,
                    wasted: total - frame_len,
                    cancelled: running,
                }
            }
            None => Accounting {
                total,
                wasted: total,
                cancelled: running,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn first_reply_wins_and_later_replies_do_not() {
        let t = Instant::now();
        let mut r = Race::new(3, t);
        assert_eq!(r.on_failure(0, "reset".into()), Step::Wait);
        assert_eq!(
            r.on_reply(2, t + 5 * MS),
            Step::Won {
                copy: 2,
                fct: 5 * MS
            }
        );
        assert_eq!(r.on_reply(1, t + 6 * MS), Step::Wait);
        // A failure after the win is not one of the flow's failures.
        assert_eq!(r.on_failure(1, "late".into()), Step::Wait);
        assert_eq!(r.failures().len(), 1);
        // Copy 2's writer counted 900 of its 1,000-byte frame; copy 0 wrote 300, copy 1 1,000.
        let a = r.settle(&[300, 1000, 900], 1000, 1);
        assert_eq!(
            a,
            Accounting {
                total: 2300,
                wasted: 1300,
                cancelled: 1
            }
        );
    }

    #[test]
    fn all_failed_and_a_failed_copy_cannot_win() {
        let t = Instant::now();
        let mut r = Race::new(2, t);
        assert_eq!(r.on_failure(1, "refused".into()), Step::Wait);
        assert_eq!(r.on_reply(1, t + MS), Step::Wait);
        assert_eq!(r.on_failure(1, "twice".into()), Step::Wait);
        assert_eq!(r.on_failure(0, "reset".into()), Step::AllFailed);
        let f = r.take_failures();
        assert_eq!(f.iter().map(|x| x.copy).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(
            r.settle(&[10, 20], 100, 0),
            Accounting {
                total: 30,
                wasted: 30,
                cancelled: 0
            }
        );
    }

    #[test]
    fn timeout_marks_the_silent_copies_stalled() {
        let t = Instant::now();
        let mut r = Race::new(3, t);
        r.on_failure(1, "reset".into());
        r.on_timeout(30 * MS);
        let f = r.take_failures();
        assert_eq!(f.len(), 3);
        assert!(f[0].error.contains("stalled") && f[1].error == "reset");
    }
}
