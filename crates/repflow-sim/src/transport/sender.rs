//! The sending half of a TCP connection: handshake, windowed transmission, NewReno loss
//! recovery (RFC 5681, RFC 6582) and the retransmission timer (RFC 6298).

use super::{AckInfo, CongestionControl, Scoreboard, SenderState, SenderStats, TcpParams, Window};
use crate::engine::Time;
use crate::packet::{flag, kind, Packet};

/// The sending half of a connection.
pub struct Sender {
    /// Connection index (stamped on packets).
    pub conn: u32,
    size: u64,
    total: u32,
    /// State.
    pub state: SenderState,
    snd_una: u32,
    snd_nxt: u32,
    snd_max: u32,
    /// Congestion window.
    pub win: Window,
    cc: Box<dyn CongestionControl>,
    dupacks: u32,
    in_recovery: bool,
    recover: Option<u32>,
    srtt: Option<Time>,
    rttvar: Time,
    rto: Time,
    /// Retransmission deadline, if the timer runs.
    pub rto_deadline: Option<Time>,
    /// Counters.
    pub stats: SenderStats,
    first_payload_bytes: u64,
    /// With SACK: what the receiver holds, and the recovery's end (RFC 6675 RecoveryPoint).
    sack: Option<Box<Scoreboard>>,
    recovery_point: u32,
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

    /// Sends segment `seq`; a retransmission is counted as loss recovery's when `recovery`,
    /// else as a timeout's.
    fn send_segment(
        &mut self,
        p: &TcpParams,
        seq: u32,
        recovery: bool,
        now: Time,
        out: &mut Vec<Packet>,
    ) {
        let payload = p.payload(self.size, seq);
        out.push(Packet {
            conn: self.conn,
            seq,
            ts: now,
            bytes: (payload + p.header) as u16,
            kind: kind::DATA,
            flags: if p.ecn { flag::ECT } else { 0 },
            hop: 0,
            next: 0,
        });
        self.stats.wire_bytes += (payload + p.header) as u64;
        self.stats.payload_bytes += payload as u64;
        if seq < self.snd_max {
            self.stats.retransmissions += 1;
            if recovery {
                self.stats.fast_retransmits += 1;
            } else {
                self.stats.timeout_retransmits += 1;
            }
        } else {
            self.first_payload_bytes += payload as u64;
        }
        if self.rto_deadline.is_none() {
            self.rto_deadline = Some(now + self.rto);
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
            self.send_segment(p, seq, false, now, out);
            self.snd_nxt += 1;
            if self.snd_nxt > self.snd_max {
                self.snd_max = self.snd_nxt;
            }
        }
    }

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
        let rto = self.srtt.expect("set above") + (4 * self.rttvar).max(1);
        self.rto = rto.clamp(p.min_rto, p.max_rto);
    }

    /// Takes in a cumulative ACK of new data (`ack > snd_una`): moves `snd_una` and takes an
    /// RTT sample from the echoed send time. Returns the segments newly acknowledged.
    fn advance(&mut self, p: &TcpParams, pkt: &Packet, ack: u32, now: Time) -> u32 {
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
    fn grow(&mut self, acked: u32, ece: bool, ack: u32, now: Time) {
        let info = AckInfo {
            acked,
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
                    self.send_segment(p, seq, true, now, out);
                    self.win.cwnd = self.win.cwnd.saturating_sub(acked).saturating_add(1).max(1);
                }
            } else {
                self.dupacks = 0;
                self.grow(acked, ece, ack, now);
            }
            if self.snd_una >= self.total {
                self.state = SenderState::Done;
                self.rto_deadline = None;
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
                self.send_segment(p, seq, true, now, out);
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
            if self.snd_una >= self.total {
                self.state = SenderState::Done;
                self.rto_deadline = None;
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
                self.grow(acked, ece, ack, now);
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
            self.send_segment(p, una, true, now, out);
            self.rto_deadline = Some(now + self.rto);
            self.sack_send(p, now, out);
        }
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
                self.send_segment(p, s, true, now, out);
            } else if self.snd_max < self.total && self.snd_max - self.snd_una < p.max_window {
                let s = self.snd_max;
                self.send_segment(p, s, false, now, out);
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
    }
}
