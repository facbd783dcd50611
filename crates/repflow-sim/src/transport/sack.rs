//! SACK loss recovery (RFC 2018 receiver, RFC 6675 sender), in segment units.
//!
//! How the SACK blocks travel: a receiver with SACK logs every distinct data segment it
//! receives, in order of arrival, and an ACK carries the length of that log when it was sent
//! (in [`crate::packet::Packet::seq`], where a plain ACK carries the cumulative ACK). The
//! receiver never discards data it holds, so the set of segments received when the ACK left
//! is exactly the log's prefix of that length, and the sender rebuilds it into its
//! [`Scoreboard`]: the cumulative ACK is the first segment not in it, the SACK blocks are its
//! runs above that. This is what an ACK with SACK blocks tells a sender, except that an ACK
//! here reports every block, where RFC 2018 fits three or four into the option space (after
//! heavy ACK loss a real sender may know fewer blocks for a while).

/// What the sender knows of the receiver's segments, and what it retransmitted in the current
/// recovery.
#[derive(Clone, Debug, Default)]
pub struct Scoreboard {
    /// Segments the receiver holds (in order or not), as far as ACKs have told.
    received: Vec<u64>,
    /// Entries of the receiver's log applied.
    applied: u32,
    /// The `dupthresh` highest segments received, ascending (RFC 6675's IsLost needs the
    /// `dupthresh`-th highest).
    top: Vec<u32>,
    dupthresh: usize,
    /// Segments retransmitted in the current recovery.
    retransmitted: Vec<u64>,
    /// RFC 6675's HighRxt + 1: where the search for the next lost segment resumes.
    pub next_rxt: u32,
}

fn get(bits: &[u64], s: u32) -> bool {
    let w = (s / 64) as usize;
    w < bits.len() && bits[w] & (1 << (s % 64)) != 0
}

fn set(bits: &mut Vec<u64>, s: u32) {
    let w = (s / 64) as usize;
    if bits.len() <= w {
        bits.resize(w + 1, 0);
    }
    bits[w] |= 1 << (s % 64);
}

/// Word `w` of a bitmap (0 past its end).
fn word(bits: &[u64], w: usize) -> u64 {
    bits.get(w).copied().unwrap_or(0)
}

/// The bits of word `w` that lie in `[a, b)`.
fn range_mask(w: usize, a: u32, b: u32) -> u64 {
    let lo = (w as u64 * 64).max(a as u64);
    let hi = ((w as u64 + 1) * 64).min(b as u64);
    if lo >= hi {
        return 0;
    }
    let (lo, hi) = ((lo % 64) as u32, (hi - 1) % 64);
    (u64::MAX << lo) & (u64::MAX >> (63 - hi))
}

/// Counts the positions in `[a, b)` where `f(word)` has a bit set, a word at a time.
fn count_in(a: u32, b: u32, f: impl Fn(usize) -> u64) -> u32 {
    if a >= b {
        return 0;
    }
    ((a / 64) as usize..=((b - 1) / 64) as usize)
        .map(|w| (f(w) & range_mask(w, a, b)).count_ones())
        .sum()
}

/// The first position in `[a, b)` where `f(word)` has a bit set.
fn first_in(a: u32, b: u32, f: impl Fn(usize) -> u64) -> Option<u32> {
    if a >= b {
        return None;
    }
    ((a / 64) as usize..=((b - 1) / 64) as usize).find_map(|w| {
        let m = f(w) & range_mask(w, a, b);
        (m != 0).then(|| w as u32 * 64 + m.trailing_zeros())
    })
}

impl Scoreboard {
    /// An empty scoreboard; a segment is lost once `dupthresh` segments above it are held
    /// (RFC 6675's DupThresh).
    pub fn new(dupthresh: u32) -> Scoreboard {
        Scoreboard {
            dupthresh: dupthresh.clamp(1, 64) as usize,
            ..Scoreboard::default()
        }
    }

    /// Applies the receiver's log up to `count` entries; returns how many segments were newly
    /// reported held.
    pub fn apply(&mut self, log: &[u32], count: u32) -> u32 {
        let count = count.min(log.len() as u32);
        let mut new = 0;
        for &s in &log[self.applied.min(count) as usize..count as usize] {
            if get(&self.received, s) {
                continue;
            }
            set(&mut self.received, s);
            new += 1;
            if self.top.len() < self.dupthresh {
                let at = self.top.partition_point(|&x| x < s);
                self.top.insert(at, s);
            } else if s > self.top[0] {
                self.top.remove(0);
                let at = self.top.partition_point(|&x| x < s);
                self.top.insert(at, s);
            }
        }
        self.applied = self.applied.max(count);
        new
    }

    /// Whether the receiver holds segment `s`.
    pub fn held(&self, s: u32) -> bool {
        get(&self.received, s)
    }

    /// The cumulative ACK: the first segment from `from` on that the receiver lacks.
    pub fn cumulative(&self, from: u32) -> u32 {
        let mut w = (from / 64) as usize;
        let mut m = !word(&self.received, w) & (u64::MAX << (from % 64));
        while m == 0 {
            w += 1;
            m = !word(&self.received, w);
        }
        w as u32 * 64 + m.trailing_zeros()
    }

    /// Segments below this one that are not held are lost (RFC 6675's IsLost: at least
    /// DupThresh held segments above); 0 while fewer than DupThresh are held.
    fn lost_below(&self) -> u32 {
        if self.top.len() == self.dupthresh {
            self.top[0]
        } else {
            0
        }
    }

    /// RFC 6675's IsLost: `s` is not held and at least DupThresh segments above it are.
    pub fn is_lost(&self, s: u32) -> bool {
        !self.held(s) && s < self.lost_below()
    }

    /// Starts a recovery at `una`: nothing retransmitted yet.
    pub fn start_recovery(&mut self, una: u32) {
        self.retransmitted.clear();
        self.next_rxt = una;
    }

    /// Records the retransmission of `s` in this recovery.
    pub fn mark_retransmitted(&mut self, s: u32) {
        set(&mut self.retransmitted, s);
        self.next_rxt = self.next_rxt.max(s + 1);
    }

    /// RFC 6675's pipe over `[una, high)`: segments not held count once unless lost, and
    /// once more if retransmitted in this recovery.
    pub fn pipe(&self, una: u32, high: u32) -> u32 {
        let (rcv, rtx) = (&self.received, &self.retransmitted);
        let not_held = count_in(una, high, |w| !word(rcv, w));
        let lost = count_in(una, high.min(self.lost_below()), |w| !word(rcv, w));
        let resent = count_in(una, high, |w| word(rtx, w) & !word(rcv, w));
        not_held - lost + resent
    }

    /// RFC 6675's NextSeg rule 1: the first lost segment in `[max(next_rxt, una), high)` not
    /// yet retransmitted in this recovery.
    pub fn next_lost(&self, una: u32, high: u32) -> Option<u32> {
        let (rcv, rtx) = (&self.received, &self.retransmitted);
        let end = high.min(self.lost_below());
        first_in(self.next_rxt.max(una), end, |w| {
            !(word(rcv, w) | word(rtx, w))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-at-a-time counts agree with segment-by-segment ones on random boards.
    #[test]
    fn word_scans_match_segment_scans() {
        let mut rng = crate::engine::Rng::new(5, 5);
        for _ in 0..200 {
            let mut sb = Scoreboard::new(3);
            let n = 1 + rng.below(300) as u32;
            let log: Vec<u32> = (0..n).filter(|_| rng.below(3) != 0).collect();
            sb.apply(&log, log.len() as u32);
            let una = rng.below(n as u64) as u32;
            sb.start_recovery(una);
            for s in una..n {
                if rng.below(5) == 0 {
                    sb.mark_retransmitted(s);
                }
            }
            sb.next_rxt = una + rng.below((n - una) as u64 + 1) as u32;
            let slow_pipe: u32 = (una..n)
                .filter(|&s| !sb.held(s))
                .map(|s| !sb.is_lost(s) as u32 + get(&sb.retransmitted, s) as u32)
                .sum();
            assert_eq!(sb.pipe(una, n), slow_pipe);
            let slow_next =
                (sb.next_rxt.max(una)..n).find(|&s| sb.is_lost(s) && !get(&sb.retransmitted, s));
            assert_eq!(sb.next_lost(una, n), slow_next);
            let slow_cum = (una..).find(|&s| !sb.held(s)).unwrap();
            assert_eq!(sb.cumulative(una), slow_cum);
        }
    }
}
