//! The receiving half of a TCP connection: cumulative ACKs, out-of-order segments,
//! delayed ACKs and DCTCP's ECN echo.

use super::detect::DetectReceiver;
use super::params::TcpParams;
use crate::engine::Time;
use crate::packet::{flag, kind, Packet};

/// The receiving half of a connection.
pub struct Receiver {
    total: u32,
    rcv_nxt: u32,
    ooo: Vec<u64>,
    /// Segments held in `ooo` above `rcv_nxt` (a gap is open while this is not 0).
    held: u32,
    pending: u32,
    pending_ts: Time,
    /// Delayed-ACK deadline, if an ACK is held back.
    pub delack_deadline: Option<Time>,
    /// Every segment has arrived.
    pub complete: bool,
    /// DCTCP's CE state: the CE bit of the last data segment received.
    ce_pending: bool,
    /// Data segments that arrived when the receiver already held them: retransmissions that
    /// were not needed (spurious), as only the receiver can tell without SACK.
    pub duplicate_segments: u64,
    /// With SACK: every distinct data segment received, in order of arrival (see
    /// [`super::Scoreboard`]); an ACK carries its length.
    log: Vec<u32>,
    sack: bool,
    /// MPTCP-L: Packet Sequence tracking and loss reports.
    detect: Option<Box<DetectReceiver>>,
}

impl Receiver {
    /// A receiver for a flow of `total` segments (with SACK when `sack`).
    pub fn new(total: u32, sack: bool) -> Receiver {
        Receiver {
            total,
            rcv_nxt: 0,
            ooo: Vec::new(),
            held: 0,
            pending: 0,
            pending_ts: 0,
            delack_deadline: None,
            complete: false,
            ce_pending: false,
            duplicate_segments: 0,
            log: Vec::new(),
            sack,
            detect: None,
        }
    }

    /// The receiving end of a multipath subflow: it never completes by itself (the
    /// connection does, when its data is all there); with `detect`, it reports MPTCP-L's
    /// Packet Sequence gaps (and does without SACK).
    pub fn new_subflow(sack: bool, detect: bool) -> Receiver {
        let mut r = Receiver::new(u32::MAX, sack && !detect);
        if detect {
            r.detect = Some(Box::default());
        }
        r
    }

    /// MPTCP-L's loss detection state, whose reports the sender reads
    /// ([`crate::transport::Sender::take_report`]).
    pub fn detect(&self) -> Option<&DetectReceiver> {
        self.detect.as_deref()
    }

    /// With SACK, the distinct data segments received in order of arrival (empty without).
    pub fn sack_log(&self) -> &[u32] {
        &self.log
    }

    /// Appends `entries` to this copy's receipt log: a threaded run keeps the sender's copy
    /// of the receiver's log up to date with what the receiver logged (see
    /// [`Receiver::sack_log`]).
    pub fn mirror_log(&mut self, entries: &[u32]) {
        self.log.extend_from_slice(entries);
    }

    /// Appends MPTCP-L reports written by the receiver this copy stands for (a threaded
    /// run's sending side: see [`DetectReceiver::reports_since`]).
    pub fn mirror_reports(&mut self, reports: &[(u8, u32, u32)]) {
        if let Some(d) = self.detect.as_mut() {
            d.mirror_reports(reports);
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

    #[inline(always)]
    fn ack(&mut self, conn: u32, p: &TcpParams, ts: Time, ece: bool, out: &mut Vec<Packet>) {
        let report = match self.detect.as_mut() {
            None => 0,
            Some(d) => d.tag_ack(),
        };
        out.push(Packet {
            conn,
            // With SACK, the length of the receipt log (the cumulative ACK and the SACK
            // blocks follow from it); without, the cumulative ACK.
            seq: if self.sack {
                self.log.len() as u32
            } else {
                self.rcv_nxt
            },
            ts,
            bytes: p.header as u16,
            kind: kind::ACK,
            flags: if ece { flag::ECE } else { 0 } | report,
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
        if let Some(d) = self.detect.as_mut() {
            // A Packet Sequence gap is reported in the next ACK, sent at once.
            immediate |= d.on_data(pkt.flags);
        }
        if self.sack && s >= self.rcv_nxt && !self.has(s) {
            self.log.push(s);
        }
        if s == self.rcv_nxt {
            self.rcv_nxt += 1;
            if self.has(self.rcv_nxt) {
                immediate = true; // filled a hole
                while self.has(self.rcv_nxt) {
                    self.rcv_nxt += 1;
                    self.held -= 1;
                }
            }
        } else {
            if s > self.rcv_nxt && !self.has(s) {
                self.set(s);
                self.held += 1;
            } else {
                self.duplicate_segments += 1;
            }
            immediate = true; // out of order or duplicate
        }
        // While a gap stays open (segments held above the next expected one), every segment
        // is acknowledged at once, the one that fills part of a gap included (RFC 5681
        // §4.2; ns-3's `TcpSocketBase::ReceivedData`, ns-2's `DelAckSink` with
        // `RFC2581_immediate_ack_`, Linux's out-of-order queue): a NewReno sender in
        // recovery sends one retransmission per partial ACK, so a delayed ACK of it would
        // stall the recovery until the delayed-ACK timer or the retransmission timer.
        immediate |= self.held > 0;
        // The segment that completes the flow carries FIN under `tcp.fin_ack`: answered at
        // once.
        immediate |= p.fin_ack && self.rcv_nxt >= self.total;
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
