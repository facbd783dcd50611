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
        let mut s = from;
        while self.held(s) {
            s += 1;
        }
        s
    }

    /// RFC 6675's IsLost: `s` is not held and at least DupThresh segments above it are.
    pub fn is_lost(&self, s: u32) -> bool {
        !self.held(s) && self.top.len() == self.dupthresh && s < self.top[0]
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
        (una..high)
            .filter(|&s| !self.held(s))
            .map(|s| !self.is_lost(s) as u32 + get(&self.retransmitted, s) as u32)
            .sum()
    }

    /// RFC 6675's NextSeg rule 1: the first lost segment in `[max(next_rxt, una), high)` not
    /// yet retransmitted in this recovery.
    pub fn next_lost(&self, una: u32, high: u32) -> Option<u32> {
        (self.next_rxt.max(una)..high).find(|&s| self.is_lost(s) && !get(&self.retransmitted, s))
    }
}
