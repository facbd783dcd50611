//! TCP as a sans-IO state machine: a sender that owns sequence space, ACK processing,
//! fast retransmit / NewReno recovery (RFC 6582) and the retransmission timer (RFC 6298),
//! and a receiver that acknowledges cumulatively (optionally delayed). Congestion control is
//! a small trait, [`CongestionControl`], with [`NewReno`] as its first implementation.
//!
//! The state machines never see the network: they emit [`Packet`]s into an output buffer and
//! expose their timer deadlines; the simulator routes the packets and fires the timers.
//! Sequence numbers count segments (every segment is `mss` bytes but the last).

use crate::config::TcpConfig;
use crate::engine::Time;
use crate::packet::{flag, kind, Packet};

/// The congestion window state that congestion-control algorithms update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Congestion window, segments.
    pub cwnd: u32,
    /// Acknowledged segments counted towards the next congestion-avoidance increase.
    pub cwnd_cnt: u32,
    /// Slow-start threshold, segments.
    pub ssthresh: u32,
}

/// Facts about an acknowledgement that a congestion-control algorithm may use.
#[derive(Clone, Copy, Debug)]
pub struct AckInfo {
    /// Segments newly acknowledged.
    pub acked: u32,
    /// The ACK carried an ECN echo.
    pub ece: bool,
    /// Cumulative acknowledgement (next segment the receiver expects).
    pub ack: u32,
    /// Next new segment the sender would send.
    pub snd_nxt: u32,
    /// Arrival time of the ACK.
    pub now: Time,
    /// Payload bytes the connection has sent so far (first transmissions).
    pub bytes_sent: u64,
}

/// A congestion-control algorithm: one small implementation per algorithm, driven by the
/// TCP sender (which owns loss detection, recovery and timers).
pub trait CongestionControl: Send {
    /// New data was acknowledged outside loss recovery.
    fn on_ack(&mut self, w: &mut Window, info: &AckInfo);
    /// Loss detected by duplicate ACKs: returns the new slow-start threshold.
    fn ssthresh_after_loss(&mut self, w: &Window, flight: u32) -> u32 {
        let _ = w;
        (flight / 2).max(2)
    }
    /// Retransmission timeout: returns the new slow-start threshold.
    fn ssthresh_after_timeout(&mut self, w: &Window, flight: u32) -> u32 {
        self.ssthresh_after_loss(w, flight)
    }
}

/// Reno/NewReno window growth: slow start adds one segment per segment acknowledged,
/// congestion avoidance one segment per window.
#[derive(Clone, Copy, Debug, Default)]
pub struct NewReno;

/// Largest slow-start increase per ACK, segments (RFC 3465's limit L = 2·SMSS): a
/// cumulative ACK that covers many segments at once (after a hole is filled) must not turn
/// into a line-rate burst of that many new segments.
pub const ABC_LIMIT: u32 = 2;

/// The standard additive growth, shared by every algorithm that keeps Reno's increase:
/// slow start adds the segments acknowledged (at most [`ABC_LIMIT`] per ACK) up to
/// `ssthresh`; congestion avoidance adds one segment per window of acknowledged segments.
pub fn reno_increase(w: &mut Window, acked: u32) {
    let mut acked = acked;
    if w.cwnd < w.ssthresh {
        let room = w.ssthresh - w.cwnd;
        let ss = acked.min(room).min(ABC_LIMIT);
        w.cwnd += ss;
        acked -= acked.min(room);
    }
    if acked > 0 {
        w.cwnd_cnt += acked;
        while w.cwnd_cnt >= w.cwnd {
            w.cwnd_cnt -= w.cwnd;
            w.cwnd += 1;
        }
    }
}

impl CongestionControl for NewReno {
    fn on_ack(&mut self, w: &mut Window, info: &AckInfo) {
        reno_increase(w, info.acked);
    }
}

/// Sender connection states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SenderState {
    /// Not started.
    Idle,
    /// SYN sent, waiting for SYN-ACK.
    SynSent,
    /// Sending data.
    Established,
    /// Every segment acknowledged.
    Done,
    /// Stopped by the replication layer (another copy won).
    Cancelled,
}

/// Counters of one sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Wire bytes sent (SYN, data, retransmissions).
    pub wire_bytes: u64,
    /// Payload bytes sent, retransmissions included.
    pub payload_bytes: u64,
    /// Data segments retransmitted.
    pub retransmissions: u64,
    /// Retransmission timeouts (SYN timeouts included).
    pub timeouts: u64,
}

/// Shared, per-run TCP parameters in simulator units.
#[derive(Clone, Copy, Debug)]
pub struct TcpParams {
    /// Maximum segment size.
    pub mss: u32,
    /// Header bytes per packet.
    pub header: u32,
    /// Initial window, segments.
    pub init_cwnd: u32,
    /// Minimum RTO, ps.
    pub min_rto: Time,
    /// Maximum RTO, ps.
    pub max_rto: Time,
    /// RTO before any RTT sample, ps.
    pub initial_rto: Time,
    /// Backoff factor.
    pub backoff: f64,
    /// Handshake before data.
    pub handshake: bool,
    /// Delayed ACKs.
    pub delayed_ack: bool,
    /// Delayed-ACK timeout, ps.
    pub delack_timeout: Time,
    /// Fast-retransmit threshold.
    pub dupack_threshold: u32,
    /// Receive-window cap, segments.
    pub max_window: u32,
    /// Mark data packets ECN-capable.
    pub ecn: bool,
}

impl TcpParams {
    /// Converts the configuration.
    pub fn from_config(c: &TcpConfig) -> TcpParams {
        TcpParams {
            mss: c.mss,
            header: c.header,
            init_cwnd: c.init_cwnd,
            min_rto: c.min_rto.ps(),
            max_rto: c.max_rto.ps(),
            initial_rto: c.initial_rto.ps(),
            backoff: c.rto_backoff,
            handshake: c.handshake,
            delayed_ack: c.delayed_ack,
            delack_timeout: c.delayed_ack_timeout.ps(),
            dupack_threshold: c.dupack_threshold,
            max_window: c
                .max_window
                .map(|b| (b.0 / c.mss as u64).max(1).min(u32::MAX as u64) as u32)
                .unwrap_or(u32::MAX),
            ecn: false,
        }
    }

    /// Number of segments of a flow of `size` bytes (at least one).
    pub fn segments(&self, size: u64) -> u32 {
        size.div_ceil(self.mss as u64).max(1) as u32
    }

    /// Payload bytes of segment `seq` of a flow of `size` bytes.
    pub fn payload(&self, size: u64, seq: u32) -> u32 {
        let start = seq as u64 * self.mss as u64;
        (size.saturating_sub(start)).clamp(1, self.mss as u64) as u32
    }
}

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
                ssthresh: u32::MAX,
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

    fn send_segment(&mut self, p: &TcpParams, seq: u32, now: Time, out: &mut Vec<Packet>) {
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
            self.send_segment(p, seq, now, out);
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

    /// Handles an ACK or SYN-ACK.
    pub fn on_packet(&mut self, p: &TcpParams, pkt: &Packet, now: Time, out: &mut Vec<Packet>) {
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
        let ack = pkt.seq;
        let ece = pkt.flags & flag::ECE != 0;
        if ack > self.snd_una {
            let acked = ack - self.snd_una;
            self.snd_una = ack;
            if self.snd_nxt < self.snd_una {
                self.snd_nxt = self.snd_una;
            }
            if pkt.ts > 0 || now > 0 {
                self.rtt_sample(p, now.saturating_sub(pkt.ts));
            }
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
                    self.send_segment(p, seq, now, out);
                    self.win.cwnd = self.win.cwnd.saturating_sub(acked).saturating_add(1).max(1);
                }
            } else {
                self.dupacks = 0;
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
                self.send_segment(p, seq, now, out);
                self.win.cwnd = self.win.ssthresh + p.dupack_threshold;
                self.win.cwnd_cnt = 0;
                self.rto_deadline = Some(now + self.rto);
            }
        }
    }

    /// The retransmission timer fired (the caller checked `rto_deadline <= now`).
    pub fn on_timeout(&mut self, p: &TcpParams, now: Time, out: &mut Vec<Packet>) {
        self.stats.timeouts += 1;
        self.rto = ((self.rto as f64 * p.backoff) as Time).min(p.max_rto);
        match self.state {
            SenderState::SynSent => {
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

/// The receiving half of a connection.
pub struct Receiver {
    total: u32,
    rcv_nxt: u32,
    ooo: Vec<u64>,
    pending: u32,
    pending_ts: Time,
    /// Delayed-ACK deadline, if an ACK is held back.
    pub delack_deadline: Option<Time>,
    /// Every segment has arrived.
    pub complete: bool,
    /// DCTCP's CE state: the CE bit of the last data segment received.
    ce_pending: bool,
}

impl Receiver {
    /// A receiver for a flow of `total` segments.
    pub fn new(total: u32) -> Receiver {
        Receiver {
            total,
            rcv_nxt: 0,
            ooo: Vec::new(),
            pending: 0,
            pending_ts: 0,
            delack_deadline: None,
            complete: false,
            ce_pending: false,
        }
    }

    /// Next segment expected.
    pub fn rcv_nxt(&self) -> u32 {
        self.rcv_nxt
    }

    fn has(&self, s: u32) -> bool {
        let w = (s / 64) as usize;
        w < self.ooo.len() && self.ooo[w] & (1 << (s % 64)) != 0
    }

    fn set(&mut self, s: u32) {
        let w = (s / 64) as usize;
        if self.ooo.len() <= w {
            self.ooo.resize(w + 1, 0);
        }
        self.ooo[w] |= 1 << (s % 64);
    }

    fn ack(&mut self, conn: u32, p: &TcpParams, ts: Time, ece: bool, out: &mut Vec<Packet>) {
        out.push(Packet {
            conn,
            seq: self.rcv_nxt,
            ts,
            bytes: p.header as u16,
            kind: kind::ACK,
            flags: if ece { flag::ECE } else { 0 },
            ..Packet::default()
        });
        self.pending = 0;
        self.delack_deadline = None;
    }

    /// Handles a SYN or data segment; returns `true` when this segment completes the flow.
    pub fn on_packet(
        &mut self,
        p: &TcpParams,
        pkt: &Packet,
        now: Time,
        out: &mut Vec<Packet>,
    ) -> bool {
        if pkt.kind == kind::SYN {
            out.push(Packet {
                conn: pkt.conn,
                seq: 0,
                ts: pkt.ts,
                bytes: p.header as u16,
                kind: kind::SYNACK,
                ..Packet::default()
            });
            return false;
        }
        let s = pkt.seq;
        let ce = pkt.flags & flag::CE != 0;
        // DCTCP's receiver (Alizadeh et al. 2010, Fig. 10): the ECN echo of every ACK is the
        // CE state of the segments it covers. When the CE state changes while segments are
        // held back by delayed ACKs, those segments are acknowledged at once with the old
        // state (cumulative ACK up to the segment before this one); the new segment then
        // starts the next delayed ACK under the new state. Without delayed ACKs every ACK
        // echoes the CE bit of the segment that triggered it. Plain TCP never sees CE.
        if ce != self.ce_pending && self.pending > 0 {
            let ts = self.pending_ts;
            let prev = self.ce_pending;
            self.ack(pkt.conn, p, ts, prev, out);
        }
        self.ce_pending = ce;
        let mut immediate = !p.delayed_ack;
        if s == self.rcv_nxt {
            self.rcv_nxt += 1;
            if self.has(self.rcv_nxt) {
                immediate = true; // filled a hole
                while self.has(self.rcv_nxt) {
                    self.rcv_nxt += 1;
                }
            }
        } else {
            if s > self.rcv_nxt {
                self.set(s);
            }
            immediate = true; // out of order or duplicate
        }
        if self.rcv_nxt >= self.total && !self.ooo.is_empty() {
            self.ooo = Vec::new();
        }
        if self.pending == 0 {
            self.pending_ts = pkt.ts;
        }
        self.pending += 1;
        if immediate || self.pending >= 2 {
            let ts = self.pending_ts;
            self.ack(pkt.conn, p, ts, ce, out);
        } else {
            self.delack_deadline = Some(now + p.delack_timeout);
        }
        if !self.complete && self.rcv_nxt >= self.total {
            self.complete = true;
            return true;
        }
        false
    }

    /// The delayed-ACK timer fired.
    pub fn on_delack_timer(&mut self, conn: u32, p: &TcpParams, out: &mut Vec<Packet>) {
        if self.pending > 0 {
            let ts = self.pending_ts;
            let ce = self.ce_pending;
            self.ack(conn, p, ts, ce, out);
        }
        self.delack_deadline = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> TcpParams {
        TcpParams::from_config(&TcpConfig::default())
    }

    #[test]
    fn segments_and_payloads() {
        let p = params();
        assert_eq!(p.segments(1), 1);
        assert_eq!(p.segments(1460), 1);
        assert_eq!(p.segments(1461), 2);
        assert_eq!(p.payload(1461, 1), 1);
        assert_eq!(p.payload(2920, 1), 1460);
    }

    #[test]
    fn reno_growth() {
        let mut w = Window {
            cwnd: 10,
            cwnd_cnt: 0,
            ssthresh: 12,
        };
        reno_increase(&mut w, 4);
        // Slow start is capped at two segments per ACK; the rest of the ACK counts towards
        // congestion avoidance.
        assert_eq!(w.cwnd, 12);
        assert_eq!(w.cwnd_cnt, 2);
        let mut v = Window {
            cwnd: 10,
            cwnd_cnt: 0,
            ssthresh: 100,
        };
        reno_increase(&mut v, 10);
        assert_eq!(v.cwnd, 12);
        reno_increase(&mut w, 10);
        assert_eq!(w.cwnd, 13);
    }

    #[test]
    fn fast_retransmit_on_three_dupacks() {
        let mut p = params();
        p.handshake = false;
        let mut s = Sender::new(0, 20 * 1460, &p, Box::new(NewReno));
        let mut out = Vec::new();
        s.start(&p, 0, &mut out);
        assert_eq!(out.len(), 12);
        out.clear();
        let ack = |seq| Packet {
            seq,
            kind: kind::ACK,
            ts: 0,
            ..Packet::default()
        };
        s.on_packet(&p, &ack(1), 10, &mut out);
        assert_eq!(out.len(), 2, "slow start releases two per ACK");
        out.clear();
        for _ in 0..3 {
            s.on_packet(&p, &ack(1), 11, &mut out);
        }
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].seq, 1);
        assert_eq!(s.stats.retransmissions, 1);
        assert_eq!(s.win.ssthresh, 6);
    }

    fn ce_seg(seq: u32, ce: bool) -> Packet {
        Packet {
            seq,
            kind: kind::DATA,
            flags: flag::ECT | if ce { flag::CE } else { 0 },
            ..Packet::default()
        }
    }

    fn acks(out: &[Packet]) -> Vec<(u32, bool)> {
        out.iter()
            .map(|a| (a.seq, a.flags & flag::ECE != 0))
            .collect()
    }

    #[test]
    fn dctcp_echo_without_delayed_acks_copies_each_segments_ce() {
        let p = params();
        let mut r = Receiver::new(10);
        let mut out = Vec::new();
        for (i, ce) in [false, true, true, false, true].into_iter().enumerate() {
            r.on_packet(&p, &ce_seg(i as u32, ce), i as Time, &mut out);
        }
        assert_eq!(
            acks(&out),
            [(1, false), (2, true), (3, true), (4, false), (5, true)]
        );
    }

    #[test]
    fn dctcp_echo_with_delayed_acks_follows_the_two_state_machine() {
        let mut p = params();
        p.delayed_ack = true;
        let mut r = Receiver::new(10);
        let mut out = Vec::new();
        let ces = [false, false, true, true, false, true];
        for (i, ce) in ces.into_iter().enumerate() {
            r.on_packet(&p, &ce_seg(i as u32, ce), i as Time, &mut out);
        }
        // 0,1: one ACK (2) without ECE. 2: CE state flips with nothing held: held back.
        // 3: second segment under CE: ACK 4 with ECE. 4: flips back, nothing held: held.
        // 5: flips to CE while 4 is held: 4 is acknowledged at once without ECE (ACK 5),
        // and 5 waits under the new state.
        assert_eq!(acks(&out), [(2, false), (4, true), (5, false)]);
        out.clear();
        r.on_delack_timer(0, &p, &mut out);
        assert_eq!(acks(&out), [(6, true)]);
    }

    #[test]
    fn receiver_acks_holes_and_completes_once() {
        let p = params();
        let mut r = Receiver::new(3);
        let mut out = Vec::new();
        let seg = |seq| Packet {
            seq,
            kind: kind::DATA,
            ..Packet::default()
        };
        assert!(!r.on_packet(&p, &seg(0), 0, &mut out));
        assert!(!r.on_packet(&p, &seg(2), 1, &mut out));
        assert_eq!(out.last().unwrap().seq, 1);
        assert!(r.on_packet(&p, &seg(1), 2, &mut out));
        assert_eq!(out.last().unwrap().seq, 3);
        assert!(!r.on_packet(&p, &seg(1), 3, &mut out));
    }
}
