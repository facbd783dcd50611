//! The sending half of a TCP connection: handshake, windowed transmission, NewReno loss
//! recovery (RFC 5681, RFC 6582) and the retransmission timer (RFC 6298).

use super::detect::{DetectParams, DetectSender};
use super::params::TcpParams;
use super::sack::Scoreboard;
use super::stats::{SenderState, SenderStats};
use super::window::{AckInfo, CongestionControl, Coupling, Window};
use crate::engine::Time;
use crate::packet::{flag, kind, Packet};

/// The sending half of a connection.
pub struct Sender {
    /// Connection index (stamped on packets).
    pub conn: u32,
    pub(super) size: u64,
    pub(super) total: u32,
    /// State.
    pub state: SenderState,
    pub(super) snd_una: u32,
    pub(super) snd_nxt: u32,
    pub(super) snd_max: u32,
    /// Congestion window.
    pub win: Window,
    pub(super) cc: Box<dyn CongestionControl>,
    pub(super) dupacks: u32,
    pub(super) in_recovery: bool,
    pub(super) recover: Option<u32>,
    pub(super) srtt: Option<Time>,
    pub(super) rttvar: Time,
    pub(super) rto: Time,
    /// Retransmission deadline, if the timer runs.
    pub rto_deadline: Option<Time>,
    /// Counters.
    pub stats: SenderStats,
    pub(super) first_payload_bytes: u64,
    /// With SACK: what the receiver holds, and the recovery's end (RFC 6675 RecoveryPoint).
    pub(super) sack: Option<Box<Scoreboard>>,
    pub(super) recovery_point: u32,
    /// A multipath subflow: segments are assigned one at a time ([`Sender::assign`]), each
    /// carrying the data-level segment in `dsn`; an idle subflow waits for more.
    pub(super) open: bool,
    pub(super) dsn: Vec<u32>,
    /// MPTCP-L's Packet Sequence numbers and aggressive timer.
    pub(super) detect: Option<Box<DetectSender>>,
}

/// An RTO of `k` smoothed RTTs (no minimum; capped by `max_rto`), off the common path.
#[cold]
fn rto_in_rtts(srtt: Time, k: f64, p: &TcpParams) -> Time {
    ((srtt as f64 * k) as Time).clamp(1, p.max_rto)
}

/// Why a segment is sent (for the retransmission counters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cause {
    /// New data, or a timeout's go-back-N resend.
    Window,
    /// Loss recovery on duplicate ACKs.
    Recovery,
    /// A loss reported by a Packet Sequence gap.
    Detect,
    /// The aggressive timer.
    ATimer,
}

impl Sender {
    /// A sender for `size` bytes on connection `conn`.
    pub fn new(conn: u32, size: u64, p: &TcpParams, cc: Box<dyn CongestionControl>) -> Sender {
        Sender {
            conn,
            size,
            total: p.segments(size),
            state: SenderState::Idle,
            snd_una: 0,
            snd_nxt: 0,
            snd_max: 0,
            win: Window {
                cwnd: p.init_cwnd,
                cwnd_cnt: 0,
                ssthresh: p.initial_ssthresh,
            },
            cc,
            dupacks: 0,
            in_recovery: false,
            recover: None,
            srtt: None,
            rttvar: 0,
            rto: p.initial_rto,
            rto_deadline: None,
            stats: SenderStats::default(),
            first_payload_bytes: 0,
            sack: p
                .sack
                .then(|| Box::new(Scoreboard::new(p.dupack_threshold))),
            recovery_point: 0,
            open: false,
            dsn: Vec::new(),
            detect: None,
        }
    }

    /// A subflow of a multipath connection carrying a flow of `flow_size` bytes: it starts
    /// with no data and sends what [`Sender::assign`] gives it. With `detect`, it numbers its
    /// packets for MPTCP-L's loss detection, runs the aggressive timer and leaves loss
    /// recovery on duplicate ACKs (and SACK) to them.
    pub fn new_subflow(
        conn: u32,
        flow_size: u64,
        p: &TcpParams,
        cc: Box<dyn CongestionControl>,
        detect: Option<DetectParams>,
    ) -> Sender {
        let mut s = Sender::new(conn, flow_size, p, cc);
        s.total = 0;
        s.open = true;
        if let Some(d) = detect {
            s.detect = Some(Box::new(DetectSender::new(d)));
            s.sack = None;
        }
        s
    }

    /// Gives a subflow data-level segment `dsn` to send after what it has.
    pub fn assign(&mut self, dsn: u32) {
        debug_assert!(self.open, "only subflows take assigned data");
        self.dsn.push(dsn);
        self.total += 1;
    }

    /// The data-level segments assigned to this subflow from its `n`-th segment on.
    pub fn dsns_since(&self, n: usize) -> &[u32] {
        &self.dsn[n.min(self.dsn.len())..]
    }

    /// Appends the assignments made by the sender this copy stands for (a threaded run's
    /// receiving side, which reads them with [`Sender::dsn`]).
    pub fn mirror_dsns(&mut self, dsns: &[u32]) {
        self.dsn.extend_from_slice(dsns);
    }

    /// The data-level segment that subflow segment `seq` carries (`seq` itself for a plain
    /// connection).
    pub fn dsn(&self, seq: u32) -> u32 {
        if self.open {
            self.dsn[seq as usize]
        } else {
            seq
        }
    }

    /// Whether the window has room for a segment not yet assigned: the subflow is
    /// established and has sent everything assigned to it.
    pub fn has_space(&self, p: &TcpParams) -> bool {
        self.state == SenderState::Established
            && self.snd_nxt >= self.total
            && self.snd_nxt - self.snd_una < self.win.cwnd.min(p.max_window)
    }

    /// Smoothed RTT, once sampled.
    pub fn srtt(&self) -> Option<Time> {
        self.srtt
    }

    /// First unacknowledged segment.
    pub fn snd_una(&self) -> u32 {
        self.snd_una
    }

    /// Lets a coupled congestion control see its connection (see
    /// [`CongestionControl::couple`]).
    pub fn couple(&mut self, c: &Coupling) {
        self.cc.couple(c);
    }

    /// The congestion control's loss interval (see [`CongestionControl::loss_interval`]).
    pub fn loss_interval(&self) -> f64 {
        self.cc.loss_interval()
    }

    /// The earliest timer deadline: the retransmission timer's or MPTCP-L's aggressive timer's.
    #[inline]
    pub fn deadline(&self) -> Option<Time> {
        match &self.detect {
            None => self.rto_deadline,
            Some(d) => match (self.rto_deadline, d.atimer_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        }
    }

    /// A timer deadline passed (the caller checked `deadline() <= now`): the aggressive
    /// timer's or the retransmission timer's. Returns whether it was a retransmission
    /// timeout of data (counted in `stats.timeouts`; MPTCP reinjects the subflow's data).
    pub fn on_timer(&mut self, p: &TcpParams, now: Time, out: &mut Vec<Packet>) -> bool {
        let atimer_due = self
            .detect
            .as_ref()
            .and_then(|d| d.atimer_at)
            .is_some_and(|t| t <= now);
        if atimer_due && self.rto_deadline.is_none_or(|r| r > now) {
            self.on_atimer(p, now, out);
            false
        } else {
            let before = self.stats.timeouts;
            self.on_timeout(p, now, out);
            self.stats.timeouts > before
        }
    }

    /// Bytes of the flow.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Segments in the flow.
    pub fn total_segments(&self) -> u32 {
        self.total
    }

    /// One past the highest segment ever sent.
    pub fn snd_max(&self) -> u32 {
        self.snd_max
    }

    /// Opens the connection (SYN) or, without handshake, sends the first window.
    pub fn start(&mut self, p: &TcpParams, now: Time, out: &mut Vec<Packet>) {
        if p.handshake {
            self.state = SenderState::SynSent;
            self.send_syn(p, now, out);
        } else {
            self.state = SenderState::Established;
            self.try_send(p, now, out);
        }
    }

    fn send_syn(&mut self, p: &TcpParams, now: Time, out: &mut Vec<Packet>) {
        out.push(Packet {
            conn: self.conn,
            seq: 0,
            ts: now,
            bytes: p.header as u16,
            kind: kind::SYN,
            ..Packet::default()
        });
        self.stats.wire_bytes += p.header as u64;
        self.rto_deadline = Some(now + self.rto);
    }

    /// Sends segment `seq`; a retransmission is counted by its `cause`.
    pub(super) fn send_segment(
        &mut self,
        p: &TcpParams,
        seq: u32,
        cause: Cause,
        now: Time,
        out: &mut Vec<Packet>,
    ) {
        let payload = p.payload(self.size, self.dsn(seq));
        let mut flags = if p.ecn { flag::ECT } else { 0 };
        if self.detect.is_some() {
            let keep = self.detect_keep();
            if let Some(d) = self.detect.as_mut() {
                flags |= d.stamp(seq, now, keep);
            }
        }
        out.push(Packet {
            conn: self.conn,
            seq,
            ts: now,
            bytes: (payload + p.header) as u16,
            kind: kind::DATA,
            flags,
            hop: 0,
            next: 0,
        });
        self.stats.wire_bytes += (payload + p.header) as u64;
        self.stats.payload_bytes += payload as u64;
        if seq < self.snd_max {
            self.stats.retransmissions += 1;
            match cause {
                Cause::Recovery => self.stats.fast_retransmits += 1,
                Cause::Window => self.stats.timeout_retransmits += 1,
                Cause::Detect => self.stats.detect_retransmits += 1,
                Cause::ATimer => self.stats.atimer_retransmits += 1,
            }
        } else {
            self.first_payload_bytes += payload as u64;
        }
        if self.rto_deadline.is_none() {
            self.rto_deadline = Some(now + self.rto);
        }
        if self.detect.as_ref().is_some_and(|d| d.atimer_at.is_none()) {
            self.arm_atimer(now, seq + 1);
        }
    }

    /// Sends what the window allows.
    pub fn try_send(&mut self, p: &TcpParams, now: Time, out: &mut Vec<Packet>) {
        if self.state != SenderState::Established {
            return;
        }
        let window = self.win.cwnd.min(p.max_window);
        while self.snd_nxt < self.total && self.snd_nxt - self.snd_una < window {
            let seq = self.snd_nxt;
            if self.sack.as_ref().is_some_and(|sb| sb.held(seq)) {
                // After a timeout, go-back-N skips what SACK says the receiver holds.
                self.snd_nxt += 1;
                continue;
            }
            self.send_segment(p, seq, Cause::Window, now, out);
            self.snd_nxt += 1;
            if self.snd_nxt > self.snd_max {
                self.snd_max = self.snd_nxt;
            }
        }
    }

    #[inline]
    fn rtt_sample(&mut self, p: &TcpParams, r: Time) {
        // RFC 6298 (2.2)–(2.3), clock granularity 1 ps.
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(s) => {
                let diff = s.abs_diff(r);
                self.rttvar = (3 * self.rttvar + diff) / 4;
                self.srtt = Some((7 * s + r) / 8);
            }
        }
        let srtt = self.srtt.expect("set above");
        self.rto = match p.rto_rtts {
            Some(k) => rto_in_rtts(srtt, k, p),
            None => (srtt + (4 * self.rttvar).max(1)).clamp(p.min_rto, p.max_rto),
        };
    }

    /// Takes in a cumulative ACK of new data (`ack > snd_una`): moves `snd_una` and takes an
    /// RTT sample from the echoed send time. Returns the segments newly acknowledged.
    pub(super) fn advance(&mut self, p: &TcpParams, pkt: &Packet, ack: u32, now: Time) -> u32 {
        let acked = ack - self.snd_una;
        self.snd_una = ack;
        if self.snd_nxt < self.snd_una {
            self.snd_nxt = self.snd_una;
        }
        if pkt.ts > 0 || now > 0 {
            self.rtt_sample(p, now.saturating_sub(pkt.ts));
        }
        acked
    }

    /// Lets the congestion control grow the window for `acked` segments acknowledged outside
    /// loss recovery.
    pub(super) fn grow(&mut self, p: &TcpParams, acked: u32, ece: bool, ack: u32, now: Time) {
        let info = AckInfo {
            acked,
            grow: if p.per_ack_growth {
                acked.min(1)
            } else {
                acked
            },
            ece,
            ack,
            snd_nxt: self.snd_nxt,
            now,
            bytes_sent: self.first_payload_bytes,
        };
        self.cc.on_ack(&mut self.win, &info);
    }

    /// Handles an ACK or SYN-ACK. `sack_log` is the receiver's receipt log (see
    /// [`Scoreboard`]; empty without SACK).
    pub fn on_packet(
        &mut self,
        p: &TcpParams,
        pkt: &Packet,
        sack_log: &[u32],
        now: Time,
        out: &mut Vec<Packet>,
    ) {
        match self.state {
            SenderState::Done | SenderState::Cancelled | SenderState::Idle => return,
            SenderState::SynSent => {
                if pkt.kind == kind::SYNACK {
                    self.rtt_sample(p, now - pkt.ts);
                    self.state = SenderState::Established;
                    self.rto_deadline = None;
                    self.try_send(p, now, out);
                }
                return;
            }
            SenderState::Established => {}
        }
        if pkt.kind != kind::ACK {
            return;
        }
        if self.sack.is_some() {
            self.on_sack_ack(p, pkt, sack_log, now, out);
            return;
        }
        if self.detect.is_some() {
            self.on_detect_ack(p, pkt, now, out);
            return;
        }
        let ack = pkt.seq;
        let ece = pkt.flags & flag::ECE != 0;
        if ack > self.snd_una {
            let acked = self.advance(p, pkt, ack, now);
            if self.in_recovery {
                let recover = self.recover.expect("recovery sets recover");
                if ack > recover {
                    // Full acknowledgement: leave recovery (RFC 6582 step 3, option 1).
                    let flight = self.snd_max - self.snd_una;
                    self.win.cwnd = self.win.ssthresh.min(flight.max(1) + 1);
                    self.win.cwnd_cnt = 0;
                    self.in_recovery = false;
                    self.dupacks = 0;
                } else {
                    // Partial acknowledgement: retransmit the next hole, deflate.
                    let seq = self.snd_una;
                    self.send_segment(p, seq, Cause::Recovery, now, out);
                    self.win.cwnd = self.win.cwnd.saturating_sub(acked).saturating_add(1).max(1);
                }
            } else {
                self.dupacks = 0;
                self.grow(p, acked, ece, ack, now);
            }
            if self.all_acked() {
                return;
            }
            self.rto_deadline = Some(now + self.rto);
            self.try_send(p, now, out);
        } else if ack == self.snd_una && self.snd_una < self.snd_max {
            self.dupacks += 1;
            if self.in_recovery {
                self.win.cwnd += 1;
                self.try_send(p, now, out);
            } else if self.dupacks == p.dupack_threshold && self.recover.is_none_or(|r| ack > r) {
                let flight = self.snd_max - self.snd_una;
                self.win.ssthresh = self.cc.ssthresh_after_loss(&self.win, flight);
                self.recover = Some(self.snd_max - 1);
                self.in_recovery = true;
                let seq = self.snd_una;
                self.send_segment(p, seq, Cause::Recovery, now, out);
                self.win.cwnd = self.win.ssthresh + p.dupack_threshold;
                self.win.cwnd_cnt = 0;
                self.rto_deadline = Some(now + self.rto);
            }
        }
    }

    /// An ACK with SACK (RFC 6675): the scoreboard learns what the receiver holds; a
    /// duplicate ACK is one that reports newly held segments without moving the cumulative
    /// ACK; recovery starts at DupThresh of them or when the first unacknowledged segment is
    /// lost by the scoreboard, and sends by NextSeg while `cwnd − pipe ≥ 1`.
    fn on_sack_ack(
        &mut self,
        p: &TcpParams,
        pkt: &Packet,
        log: &[u32],
        now: Time,
        out: &mut Vec<Packet>,
    ) {
        let sb = self.sack.as_mut().expect("a SACK sender");
        let newly_held = sb.apply(log, pkt.seq);
        let ack = sb.cumulative(self.snd_una);
        let ece = pkt.flags & flag::ECE != 0;
        if ack > self.snd_una {
            let acked = self.advance(p, pkt, ack, now);
            if self.all_acked() {
                return;
            }
            self.rto_deadline = Some(now + self.rto);
            if self.in_recovery && ack >= self.recovery_point {
                // The recovery's last segment is acknowledged: it ends with cwnd = ssthresh.
                self.in_recovery = false;
                self.dupacks = 0;
                self.win.cwnd = self.win.ssthresh;
                self.win.cwnd_cnt = 0;
            } else if self.in_recovery {
                self.sack_send(p, now, out);
                return;
            } else {
                self.dupacks = 0;
                self.grow(p, acked, ece, ack, now);
            }
            self.try_send(p, now, out);
            return;
        }
        if newly_held == 0 || self.snd_una >= self.snd_max {
            return;
        }
        self.dupacks += 1;
        if self.in_recovery {
            self.sack_send(p, now, out);
            return;
        }
        let lost = self
            .sack
            .as_ref()
            .is_some_and(|sb| sb.is_lost(self.snd_una));
        let after_recover = self.recover.is_none_or(|r| self.snd_una > r);
        if (self.dupacks >= p.dupack_threshold || lost) && after_recover {
            let flight = self.snd_max - self.snd_una;
            self.win.ssthresh = self.cc.ssthresh_after_loss(&self.win, flight);
            self.win.cwnd = self.win.ssthresh;
            self.win.cwnd_cnt = 0;
            self.in_recovery = true;
            self.recovery_point = self.snd_max;
            self.recover = Some(self.snd_max - 1);
            let una = self.snd_una;
            let sb = self.sack.as_mut().expect("a SACK sender");
            sb.start_recovery(una);
            sb.mark_retransmitted(una);
            self.send_segment(p, una, Cause::Recovery, now, out);
            self.rto_deadline = Some(now + self.rto);
            self.sack_send(p, now, out);
        }
    }

    /// Once every assigned segment is acknowledged: a connection is done, a subflow idles
    /// (timers stopped) until it is given more. Returns whether that is the case.
    pub(super) fn all_acked(&mut self) -> bool {
        if self.snd_una < self.total {
            return false;
        }
        if !self.open {
            self.state = SenderState::Done;
        }
        self.rto_deadline = None;
        if let Some(d) = self.detect.as_mut() {
            d.atimer_at = None;
        }
        true
    }

    /// RFC 6675's transmission in recovery: while `cwnd − pipe ≥ 1`, the next lost segment
    /// not yet retransmitted, else new data within the receive window.
    fn sack_send(&mut self, p: &TcpParams, now: Time, out: &mut Vec<Packet>) {
        let sb = self.sack.as_ref().expect("a SACK sender");
        let mut pipe = sb.pipe(self.snd_una, self.snd_max);
        while self.win.cwnd > pipe {
            let sb = self.sack.as_mut().expect("a SACK sender");
            if let Some(s) = sb.next_lost(self.snd_una, self.snd_max) {
                sb.mark_retransmitted(s);
                self.send_segment(p, s, Cause::Recovery, now, out);
            } else if self.snd_max < self.total && self.snd_max - self.snd_una < p.max_window {
                let s = self.snd_max;
                self.send_segment(p, s, Cause::Window, now, out);
                self.snd_max += 1;
                self.snd_nxt = self.snd_max;
            } else {
                break;
            }
            pipe += 1;
        }
    }

    /// The retransmission timer fired (the caller checked `rto_deadline <= now`).
    pub fn on_timeout(&mut self, p: &TcpParams, now: Time, out: &mut Vec<Packet>) {
        self.stats.timeouts += 1;
        self.rto = ((self.rto as f64 * p.backoff) as Time).min(p.max_rto);
        match self.state {
            SenderState::SynSent => {
                self.stats.syn_timeouts += 1;
                self.send_syn(p, now, out);
            }
            SenderState::Established => {
                let flight = self.snd_max - self.snd_una;
                self.win.ssthresh = self.cc.ssthresh_after_timeout(&self.win, flight);
                self.win.cwnd = 1;
                self.win.cwnd_cnt = 0;
                self.in_recovery = false;
                self.dupacks = 0;
                self.recover = Some(self.snd_max.saturating_sub(1));
                self.snd_nxt = self.snd_una;
                self.rto_deadline = None;
                if let Some(d) = self.detect.as_mut() {
                    d.atimer_at = None;
                    d.fired_at_una = None;
                }
                self.try_send(p, now, out);
            }
            _ => self.rto_deadline = None,
        }
    }

    /// Stops sending for good (another copy won).
    pub fn cancel(&mut self) {
        if self.state != SenderState::Done {
            self.state = SenderState::Cancelled;
        }
        self.rto_deadline = None;
        if let Some(d) = self.detect.as_mut() {
            d.atimer_at = None;
        }
    }

    /// The data-level segments of what this subflow sent and has not had acknowledged
    /// (MPTCP reinjects them on other subflows after a timeout).
    pub fn unacked_dsns(&self, out: &mut Vec<u32>) {
        for seq in self.snd_una..self.snd_max.min(self.total) {
            out.push(self.dsn(seq));
        }
    }
}
