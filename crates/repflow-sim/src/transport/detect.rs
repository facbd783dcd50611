//! MPTCP-L's loss detection (Wang, Zhou and Sun, "Improving Multipath TCP for Latency
//! Sensitive Flows in the Cloud", CloudNet 2016, §III-B and §III-C): every transmission of a
//! subflow carries a Packet Sequence number (PS) that grows by one per packet sent,
//! retransmissions included; the receiver reports the PS values missing before the one that
//! arrived in its next ACK; the sender maps a reported PS to the TCP segment it carried
//! (a table whose entries live a few RTTs) and resends that segment at once. An aggressive
//! timer of a few RTTs resends the first unacknowledged segment without cutting the window.
//!
//! On the wire the PS option travels in five spare flag bits of the simulated packet
//! (`PS mod 32`); the receiver takes the smallest PS at or above the one it expects with
//! those bits, which is exact unless 32 or more consecutive transmissions of one subflow are
//! lost (then the gap looks 32 smaller and the aggressive timer recovers what it misses).
//! The ACK that carries a report is tagged in the same bits (1–31) and the report itself
//! kept beside the connection in send order; a report whose ACK was dropped is discarded
//! when the sender sees a later tag, as if it had been lost with its ACK.

use crate::engine::Time;
use std::collections::VecDeque;

/// Flag bits that carry a PS (data) or a report tag (ACK): bits 3–7.
pub const TAG_SHIFT: u8 = 3;
/// Distinct PS values the flag bits tell apart.
pub const TAG_SPAN: u32 = 32;
/// MPTCP-L's loss-detection parameters of one subflow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DetectParams {
    /// Aggressive timer, smoothed RTTs (0: off).
    pub atimer_rtts: f64,
    /// How long a PS → segment entry is kept, smoothed RTTs.
    pub keep_rtts: f64,
    /// A detected loss halves the window (once per window of data), as fast retransmit does.
    pub cut_on_detect: bool,
}

/// The sender's half: the next PS and the PS → segment table (the paper's mTable).
#[derive(Debug)]
pub struct DetectSender {
    /// Parameters.
    pub params: DetectParams,
    next_ps: u32,
    table: VecDeque<(u32, u32, Time)>,
    /// Aggressive-timer deadline.
    pub atimer_at: Option<Time>,
    /// The first unacknowledged segment when the aggressive timer last fired (it fires once
    /// per stall; progress re-arms it).
    pub fired_at_una: Option<u32>,
    /// Segments up to this one belong to a window already cut for a detected loss.
    pub cut_until: Option<u32>,
    /// How far the receiver's reports have been read.
    pub reports: ReportReader,
}

impl DetectSender {
    /// A fresh table.
    pub fn new(params: DetectParams) -> DetectSender {
        DetectSender {
            params,
            next_ps: 0,
            table: VecDeque::new(),
            atimer_at: None,
            fired_at_una: None,
            cut_until: None,
            reports: ReportReader::default(),
        }
    }

    /// Numbers a transmission of segment `seq` sent at `now`: returns the flag bits that
    /// carry its PS.
    pub fn stamp(&mut self, seq: u32, now: Time, keep: Time) -> u8 {
        let ps = self.next_ps;
        self.next_ps = self.next_ps.wrapping_add(1);
        self.expire(now, keep);
        self.table.push_back((ps, seq, now));
        ((ps % TAG_SPAN) as u8) << TAG_SHIFT
    }

    /// Drops entries older than `keep`.
    pub fn expire(&mut self, now: Time, keep: Time) {
        while self
            .table
            .front()
            .is_some_and(|&(_, _, t)| now.saturating_sub(t) > keep)
        {
            self.table.pop_front();
        }
    }

    /// The segments carried by PS values `from..to` still in the table.
    pub fn lookup(&self, from: u32, to: u32, out: &mut Vec<u32>) {
        for &(ps, seq, _) in &self.table {
            if ps >= from && ps < to {
                out.push(seq);
            }
        }
    }

    /// Entries in the table.
    pub fn table_len(&self) -> usize {
        self.table.len()
    }
}

/// The receiver's half: the PS it expects next and the reports on their way back.
///
/// A report stands for the option a real ACK would carry; the packet carries only its tag,
/// and the sender reads the report here ([`ReportReader`]). The receiver keeps every report
/// (12 bytes each, at most one per data segment received), whatever the sender has read:
/// nothing it does depends on the sender's state, and what the sender finds depends only on
/// the reports written up to its ACK's own, not on how many followed (in a partitioned run
/// the two ends are in different parts, and a threaded run copies the reports to the
/// sender's side at window ends).
#[derive(Debug, Default)]
pub struct DetectReceiver {
    expected: u32,
    pending: Option<(u32, u32)>,
    next_tag: u8,
    /// Every report `(tag, from, to)`, in the order written.
    reports: Vec<(u8, u32, u32)>,
}

impl DetectReceiver {
    /// A data packet with flag bits `flags` arrived: notes a gap before it. Returns whether a
    /// gap was found (the receiver then acknowledges at once).
    pub fn on_data(&mut self, flags: u8) -> bool {
        let tag = u32::from(flags >> TAG_SHIFT);
        let ps = self.expected + ((tag + TAG_SPAN - self.expected % TAG_SPAN) % TAG_SPAN);
        let gap = ps > self.expected;
        if gap {
            let from = match self.pending {
                Some((f, _)) => f,
                None => self.expected,
            };
            self.pending = Some((from, ps));
        }
        self.expected = ps + 1;
        gap
    }

    /// The flag bits of the next ACK: a report tag when a gap waits to be reported (the
    /// report is kept for the sender), else 0.
    #[inline(never)]
    pub fn tag_ack(&mut self) -> u8 {
        let Some((from, to)) = self.pending.take() else {
            return 0;
        };
        self.next_tag = self.next_tag % (TAG_SPAN as u8 - 1) + 1;
        self.reports.push((self.next_tag, from, to));
        self.next_tag << TAG_SHIFT
    }

    /// Reports written so far.
    pub fn written(&self) -> usize {
        self.reports.len()
    }

    /// The reports written from the `n`-th on.
    pub fn reports_since(&self, n: usize) -> &[(u8, u32, u32)] {
        &self.reports[n.min(self.reports.len())..]
    }

    /// Appends reports written by the receiver this copy stands for (a threaded run's
    /// sending side: see [`DetectReceiver::reports_since`]).
    pub fn mirror_reports(&mut self, reports: &[(u8, u32, u32)]) {
        self.reports.extend_from_slice(reports);
    }
}

/// The sender's reading of its receiver's reports: how far it has read.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReportReader {
    next: u64,
    /// Reports never used: their ACK was lost (a later one arrived first).
    pub lost_reports: u64,
}

impl ReportReader {
    /// The report an ACK with flag bits `flags` carried (`from..to` PS lost), if any, read
    /// from `rx`; reports written before it belonged to ACKs that never arrived and are
    /// skipped.
    pub fn take(&mut self, rx: &DetectReceiver, flags: u8) -> Option<(u32, u32)> {
        let tag = flags >> TAG_SHIFT;
        if tag == 0 {
            return None;
        }
        // The ACK's own report is the first with its tag from here on: the scan never
        // looks at reports written after it.
        while let Some(&(t, from, to)) = rx.reports.get(self.next as usize) {
            self.next += 1;
            if t == tag {
                return Some((from, to));
            }
            self.lost_reports += 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_are_found_and_reported_in_order() {
        let mut tx = DetectSender::new(DetectParams {
            atimer_rtts: 2.0,
            keep_rtts: 2.0,
            cut_on_detect: true,
        });
        let mut rx = DetectReceiver::default();
        let flags: Vec<u8> = (0..5).map(|s| tx.stamp(100 + s, 10, 1_000)).collect();
        assert!(!rx.on_data(flags[0]));
        // PS 1 and 2 are lost; PS 3 arrives.
        assert!(rx.on_data(flags[3]));
        let t1 = rx.tag_ack();
        assert_ne!(t1, 0);
        assert_eq!(rx.tag_ack(), 0, "a gap is reported once");
        let mut segs = Vec::new();
        let (from, to) = ReportReader::default().take(&rx, t1).expect("the report");
        tx.lookup(from, to, &mut segs);
        assert_eq!(segs, vec![101, 102]);
    }

    #[test]
    fn a_report_on_a_lost_ack_is_discarded() {
        let mut rx = DetectReceiver::default();
        rx.on_data(0);
        rx.on_data(2 << TAG_SHIFT); // PS 1 lost
        let lost_ack = rx.tag_ack();
        rx.on_data(4 << TAG_SHIFT); // PS 3 lost
        let t2 = rx.tag_ack();
        assert_ne!(lost_ack, t2);
        let mut reader = ReportReader::default();
        assert_eq!(reader.take(&rx, t2), Some((3, 4)));
        assert_eq!(reader.lost_reports, 1);
    }

    #[test]
    fn the_receiver_keeps_every_report_whatever_the_sender_read() {
        // Two readers, one reading as reports come, one only at the end: the receiver's
        // state is the same, and the late reader finds the report each ACK carried.
        let mut rx = DetectReceiver::default();
        let mut eager = ReportReader::default();
        let mut tags = Vec::new();
        let n = 74;
        for i in 0..n {
            rx.on_data(((2 * i % TAG_SPAN) as u8) << TAG_SHIFT);
            rx.on_data((((2 * i + 2) % TAG_SPAN) as u8) << TAG_SHIFT);
            let t = rx.tag_ack();
            assert_ne!(t, 0);
            assert!(eager.take(&rx, t).is_some());
            tags.push(t);
        }
        assert_eq!(eager.lost_reports, 0);
        let mut late = ReportReader::default();
        // The first ten ACKs never reached this reader: their reports count as lost.
        assert!(late.take(&rx, tags[10]).is_some());
        assert_eq!(late.lost_reports, 10);
        assert!(late.take(&rx, tags[11]).is_some());
        assert_eq!(late.lost_reports, 10);
    }

    #[test]
    fn ps_wraps_within_the_tag_span() {
        let mut rx = DetectReceiver::default();
        for ps in 0..40u32 {
            assert!(!rx.on_data(((ps % TAG_SPAN) as u8) << TAG_SHIFT));
        }
        // 33 lost in a row look like 1 lost: the documented limit of a 5-bit field.
        assert!(rx.on_data((((40 + 33) % TAG_SPAN) as u8) << TAG_SHIFT));
    }

    #[test]
    fn old_entries_expire() {
        let mut tx = DetectSender::new(DetectParams {
            atimer_rtts: 2.0,
            keep_rtts: 2.0,
            cut_on_detect: false,
        });
        tx.stamp(0, 0, 100);
        tx.stamp(1, 50, 100);
        tx.stamp(2, 200, 100);
        assert_eq!(tx.table_len(), 1);
    }
}
