//! The sender's side of MPTCP-L's loss detection: the receiver's loss reports, the
//! aggressive timer, and ACK processing without duplicate-ACK recovery.

use super::params::TcpParams;
use super::receiver::Receiver;
use super::sender::{Cause, Sender};
use super::stats::SenderState;
use crate::engine::Time;
use crate::packet::{flag, Packet};

impl Sender {
    /// MPTCP-L's aggressive timer: resend the first unacknowledged segment, keep the window.
    pub(super) fn on_atimer(&mut self, p: &TcpParams, now: Time, out: &mut Vec<Packet>) {
        let una = self.snd_una;
        let d = self.detect.as_mut().expect("an MPTCP-L subflow");
        d.atimer_at = None;
        if self.state != SenderState::Established || una >= self.snd_max {
            return;
        }
        d.fired_at_una = Some(una);
        self.send_segment(p, una, Cause::ATimer, now, out);
    }

    /// Arms the aggressive timer after progress (or a first transmission) while data is
    /// outstanding; it fires once per stall.
    /// `sent_to`: one past the segment just sent, if that is beyond `snd_max`.
    pub(super) fn arm_atimer(&mut self, now: Time, sent_to: u32) {
        let (una, max, srtt) = (self.snd_una, self.snd_max.max(sent_to), self.srtt);
        let Some(d) = self.detect.as_mut() else {
            return;
        };
        if d.params.atimer_rtts <= 0.0 || una >= max || d.fired_at_una == Some(una) {
            d.atimer_at = None;
            return;
        }
        if let Some(srtt) = srtt {
            d.atimer_at = Some(now + ((srtt as f64 * d.params.atimer_rtts) as Time).max(1));
        }
    }

    /// The loss report an ACK with flag bits `flags` carried, as `from..to` Packet Sequence
    /// numbers, read from its receiver `rcv` (MPTCP-L; `None` for other ACKs and senders).
    pub fn take_report(&mut self, rcv: &Receiver, flags: u8) -> Option<(u32, u32)> {
        let rx = rcv.detect()?;
        self.detect.as_mut()?.reports.take(rx, flags)
    }

    /// MPTCP-L loss reports never used (their ACKs lost or overtaken).
    pub fn lost_reports(&self) -> u64 {
        self.detect.as_ref().map_or(0, |d| d.reports.lost_reports)
    }

    /// MPTCP-L: the receiver reported the transmissions numbered `from..to` lost; resend the
    /// segments they carried that are still unacknowledged.
    pub fn on_loss_report(
        &mut self,
        p: &TcpParams,
        from: u32,
        to: u32,
        now: Time,
        out: &mut Vec<Packet>,
    ) {
        if self.state != SenderState::Established {
            return;
        }
        let keep = self.detect_keep();
        let Some(d) = self.detect.as_mut() else {
            return;
        };
        d.expire(now, keep);
        let mut lost = Vec::new();
        d.lookup(from, to, &mut lost);
        for seq in lost {
            if seq < self.snd_una || seq >= self.snd_max {
                continue;
            }
            let d = self.detect.as_mut().expect("checked above");
            if d.params.cut_on_detect && d.cut_until.is_none_or(|c| seq > c) {
                d.cut_until = Some(self.snd_max - 1);
                let flight = self.snd_max - self.snd_una;
                self.win.ssthresh = self.cc.ssthresh_after_loss(&self.win, flight);
                self.win.cwnd = self.win.ssthresh;
                self.win.cwnd_cnt = 0;
            }
            self.send_segment(p, seq, Cause::Detect, now, out);
        }
    }

    /// How long MPTCP-L's table keeps an entry, ps.
    pub(super) fn detect_keep(&self) -> Time {
        match (&self.detect, self.srtt) {
            (Some(d), Some(srtt)) => (srtt as f64 * d.params.keep_rtts) as Time,
            _ => self.rto,
        }
    }

    /// An ACK of an MPTCP-L subflow: cumulative acknowledgement and window growth only;
    /// losses are found by the receiver's Packet Sequence reports (handled by
    /// [`Sender::on_loss_report`]) and the timers, not by duplicate ACKs.
    pub(super) fn on_detect_ack(
        &mut self,
        p: &TcpParams,
        pkt: &Packet,
        now: Time,
        out: &mut Vec<Packet>,
    ) {
        let ack = pkt.seq;
        if ack <= self.snd_una {
            return;
        }
        let acked = self.advance(p, pkt, ack, now);
        if self.all_acked() {
            return;
        }
        self.grow(p, acked, pkt.flags & flag::ECE != 0, ack, now);
        self.rto_deadline = Some(now + self.rto);
        let d = self.detect.as_mut().expect("an MPTCP-L subflow");
        d.atimer_at = None;
        d.fired_at_una = None;
        self.arm_atimer(now, 0);
        self.try_send(p, now, out);
    }
}
