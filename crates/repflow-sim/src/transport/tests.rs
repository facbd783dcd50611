//! Unit tests of the TCP state machines: exact segment sequences for each loss-recovery
//! path (the expected sequences are derived by hand from RFC 5681, 6582 and 6298).

use super::detect;
use super::*;
use crate::config::sections::TcpConfig;
use crate::engine::Time;
use crate::packet::{flag, kind, Packet};

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
    let mut w = test_window(10, 12);
    reno_increase(&mut w, 4);
    // Slow start is capped at two segments per ACK; the rest of the ACK counts towards
    // congestion avoidance.
    assert_eq!(w.cwnd, 12);
    assert_eq!(w.cwnd_cnt, 2);
    let mut v = test_window(10, 100);
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
    s.on_packet(&p, &ack(1), &[], 10, &mut out);
    assert_eq!(out.len(), 2, "slow start releases two per ACK");
    out.clear();
    for _ in 0..3 {
        s.on_packet(&p, &ack(1), &[], 11, &mut out);
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

/// A data segment with sequence number `seq` (no flags).
fn seg(seq: u32) -> Packet {
    Packet {
        seq,
        kind: kind::DATA,
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
    let mut r = Receiver::new(10, false);
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
    let mut r = Receiver::new(10, false);
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
    let mut r = Receiver::new(3, false);
    let mut out = Vec::new();
    assert!(!r.on_packet(&p, &seg(0), 0, &mut out));
    assert!(!r.on_packet(&p, &seg(2), 1, &mut out));
    assert_eq!(out.last().unwrap().seq, 1);
    assert!(r.on_packet(&p, &seg(1), 2, &mut out));
    assert_eq!(out.last().unwrap().seq, 3);
    assert!(!r.on_packet(&p, &seg(1), 3, &mut out));
}

#[test]
fn with_delayed_acks_a_segment_that_fills_part_of_a_gap_is_acknowledged_at_once() {
    // RFC 5681 §4.2, as ns-3, ns-2 (RFC2581_immediate_ack_) and Linux do it: while segments
    // are held above a gap, every arrival is acknowledged at once. Segments 0, 1 arrive;
    // 2, 3 and 4 are lost; 5 and 6 arrive (held). NewReno's retransmission of 2 fills part
    // of the gap and must be acknowledged at once (ACK 3, the partial ACK that makes the
    // sender resend 3), not held for the delayed-ACK timer.
    let mut p = params();
    p.delayed_ack = true;
    let mut r = Receiver::new(10, false);
    let mut out = Vec::new();
    for (t, s) in [0, 1, 5, 6].into_iter().enumerate() {
        r.on_packet(&p, &seg(s), t as Time, &mut out);
    }
    assert_eq!(acks(&out), [(2, false), (2, false), (2, false)]);
    out.clear();
    r.on_packet(&p, &seg(2), 10, &mut out);
    assert_eq!(acks(&out), [(3, false)]);
    assert_eq!(r.delack_deadline, None);
    // 3 fills part of the gap too; 4 closes it (and 5, 6 follow): both at once.
    r.on_packet(&p, &seg(3), 11, &mut out);
    r.on_packet(&p, &seg(4), 12, &mut out);
    assert_eq!(acks(&out), [(3, false), (4, false), (7, false)]);
    // With the gap closed, in-order segments go back to one ACK per two.
    out.clear();
    r.on_packet(&p, &seg(7), 13, &mut out);
    assert!(out.is_empty() && r.delack_deadline.is_some());
    r.on_packet(&p, &seg(8), 14, &mut out);
    assert_eq!(acks(&out), [(9, false)]);
}

// ---------------------------------------------------------------------------------------
// Loss recovery, segment by segment. A 12-segment flow, initial window 4, no handshake, no
// receive-window cap, NewReno; the test plays the network: it decides which segments arrive
// and feeds the ACKs a receiver would send.

const MS: Time = 1_000_000_000;

fn lossy_params(handshake: bool) -> TcpParams {
    let mut p = params();
    p.handshake = handshake;
    p.init_cwnd = 4;
    p.max_window = u32::MAX;
    p
}

fn sender(p: &TcpParams) -> Sender {
    Sender::new(0, 12 * 1460, p, Box::new(NewReno))
}

/// A cumulative ACK of segments below `next`, echoing send time `ts`.
fn ack_at(next: u32, ts: Time) -> Packet {
    Packet {
        seq: next,
        ts,
        kind: kind::ACK,
        ..Packet::default()
    }
}

fn seqs(out: &mut Vec<Packet>) -> Vec<u32> {
    let v = out.iter().map(|p| p.seq).collect();
    out.clear();
    v
}

#[test]
fn newreno_partial_ack_retransmits_the_next_hole_then_a_full_ack_ends_recovery() {
    let p = lossy_params(false);
    let mut s = sender(&p);
    let mut out = Vec::new();
    s.start(&p, 0, &mut out);
    assert_eq!(seqs(&mut out), [0, 1, 2, 3]);
    // Segments 1 and 3 are lost. Segment 0 arrives: ACK 1 opens the window to 5 (slow start,
    // one segment acknowledged), so segments 4 and 5 follow (5 in flight: 1..=5).
    s.on_packet(&p, &ack_at(1, 0), &[], MS, &mut out);
    assert_eq!(seqs(&mut out), [4, 5]);
    // Segments 2, 4 and 5 arrive: three duplicate ACKs of 1. The third triggers fast
    // retransmit (RFC 5681 3.2): ssthresh = max(FlightSize / 2, 2) = max(5 / 2, 2) = 2,
    // segment 1 is resent, cwnd = ssthresh + 3 = 5, recover = 5 (RFC 6582).
    for _ in 0..2 {
        s.on_packet(&p, &ack_at(1, 0), &[], MS, &mut out);
        assert!(out.is_empty());
    }
    s.on_packet(&p, &ack_at(1, 0), &[], MS, &mut out);
    assert_eq!(seqs(&mut out), [1]);
    assert_eq!((s.win.ssthresh, s.win.cwnd), (2, 5));
    // The retransmitted 1 fills the first hole: ACK 3, below recover, is a partial ACK
    // (RFC 6582 3.2 step 5): segment 3 is resent at once, cwnd is deflated by the two
    // segments acknowledged and one is added back (5 − 2 + 1 = 4), which lets one new
    // segment out (flight 6 − 3 = 3 < 4).
    s.on_packet(&p, &ack_at(3, MS), &[], 2 * MS, &mut out);
    assert_eq!(seqs(&mut out), [3, 6]);
    assert_eq!(s.win.cwnd, 4);
    // The retransmitted 3 completes 0..=5: ACK 6 covers recover, a full ACK (step 3, option
    // 1): cwnd = min(ssthresh, FlightSize + 1) = min(2, 1 + 1) = 2; recovery ends and
    // congestion avoidance sends one more segment.
    s.on_packet(&p, &ack_at(6, 2 * MS), &[], 3 * MS, &mut out);
    assert_eq!(seqs(&mut out), [7]);
    assert_eq!((s.win.cwnd, s.win.ssthresh), (2, 2));
    assert_eq!(s.stats.retransmissions, 2);
    assert_eq!(s.stats.fast_retransmits, 2);
    assert_eq!((s.stats.timeout_retransmits, s.stats.timeouts), (0, 0));
    // Out of recovery, three further duplicate ACKs of a segment above recover may start a
    // new recovery (the ACK covers more than recover: step 1).
    s.on_packet(&p, &ack_at(7, 3 * MS), &[], 4 * MS, &mut out);
    out.clear();
    for _ in 0..3 {
        s.on_packet(&p, &ack_at(7, 3 * MS), &[], 4 * MS, &mut out);
    }
    assert_eq!(seqs(&mut out), [7]);
    assert_eq!(s.stats.fast_retransmits, 3);
}

#[test]
fn duplicate_acks_below_recover_after_a_timeout_start_no_fast_retransmit() {
    // RFC 6582 4.1: after a timeout, recover is the highest segment sent; duplicate ACKs
    // that do not cover it are taken for the go-back-N resends' echoes, not a new loss.
    let p = lossy_params(false);
    let mut s = sender(&p);
    let mut out = Vec::new();
    s.start(&p, 0, &mut out);
    out.clear();
    s.on_timeout(&p, 10 * MS, &mut out);
    assert_eq!(seqs(&mut out), [0]);
    for _ in 0..3 {
        s.on_packet(&p, &ack_at(0, 0), &[], 11 * MS, &mut out);
    }
    assert!(out.is_empty(), "no fast retransmit below recover");
    assert_eq!(s.stats.fast_retransmits, 0);
}

#[test]
fn timeouts_back_off_exponentially_and_go_back_n_resends_from_the_first_hole() {
    let p = lossy_params(false);
    assert_eq!(
        (p.min_rto, p.initial_rto, p.backoff),
        (10 * MS, 10 * MS, 2.0)
    );
    let mut s = sender(&p);
    let mut out = Vec::new();
    s.start(&p, 0, &mut out);
    assert_eq!(seqs(&mut out), [0, 1, 2, 3]);
    assert_eq!(s.rto_deadline, Some(10 * MS));
    // The whole window is lost. The timer fires (RFC 6298 5.4–5.6): the RTO doubles to
    // 20 ms, ssthresh = max(4 / 2, 2) = 2, cwnd = 1 (RFC 5681 (4)), and only the first
    // unacknowledged segment is resent, with the timer restarted for the new RTO.
    s.on_timeout(&p, 10 * MS, &mut out);
    assert_eq!(seqs(&mut out), [0]);
    assert_eq!((s.win.cwnd, s.win.ssthresh), (1, 2));
    assert_eq!(s.rto_deadline, Some(30 * MS));
    // Lost again: 40 ms.
    s.on_timeout(&p, 30 * MS, &mut out);
    assert_eq!(seqs(&mut out), [0]);
    assert_eq!(s.rto_deadline, Some(70 * MS));
    assert_eq!(s.stats.timeouts, 2);
    // Its ACK arrives 1 ms later, echoing the resend's time: an RTT sample of 1 ms gives an
    // RTO of 1 + 4 × 0.5 = 3 ms, raised to the 10 ms minimum (the backoff is gone with the
    // new sample). Slow start: cwnd 2; go-back-N resends 1 and 2, sent once before.
    s.on_packet(&p, &ack_at(1, 30 * MS), &[], 31 * MS, &mut out);
    assert_eq!(seqs(&mut out), [1, 2]);
    assert_eq!(s.rto_deadline, Some(41 * MS));
    // Both arrive: ACK 3 acknowledges two segments at cwnd = ssthresh = 2, a whole window
    // of congestion avoidance, so cwnd = 3; the sender goes on from 3 (resent: sent once
    // before) with the new 4 and 5.
    s.on_packet(&p, &ack_at(3, 31 * MS), &[], 32 * MS, &mut out);
    assert_eq!(seqs(&mut out), [3, 4, 5]);
    assert_eq!(s.win.cwnd, 3);
    assert_eq!(
        s.stats.retransmissions, 5,
        "0 twice, then 1, 2 and 3 go back"
    );
    assert_eq!(s.stats.timeout_retransmits, 5);
    assert_eq!(s.stats.fast_retransmits, 0);
}

#[test]
fn the_backoff_stops_at_max_rto() {
    let mut p = lossy_params(false);
    p.max_rto = 25 * MS;
    let mut s = sender(&p);
    let mut out = Vec::new();
    s.start(&p, 0, &mut out);
    s.on_timeout(&p, 10 * MS, &mut out);
    assert_eq!(s.rto_deadline, Some(30 * MS));
    s.on_timeout(&p, 30 * MS, &mut out);
    assert_eq!(
        s.rto_deadline,
        Some(55 * MS),
        "20 ms doubled is capped at 25 ms"
    );
}

#[test]
fn a_lost_syn_is_resent_after_the_initial_rto_with_backoff() {
    let p = lossy_params(true);
    let mut s = sender(&p);
    let mut out = Vec::new();
    s.start(&p, 0, &mut out);
    assert_eq!(out.iter().map(|p| p.kind).collect::<Vec<_>>(), [kind::SYN]);
    out.clear();
    assert_eq!(s.rto_deadline, Some(10 * MS));
    s.on_timeout(&p, 10 * MS, &mut out);
    assert_eq!(
        out.iter().map(|p| (p.kind, p.ts)).collect::<Vec<_>>(),
        [(kind::SYN, 10 * MS)]
    );
    out.clear();
    assert_eq!(s.rto_deadline, Some(30 * MS));
    assert_eq!((s.stats.timeouts, s.stats.syn_timeouts), (1, 1));
    assert_eq!(
        s.stats.retransmissions, 0,
        "a SYN is not a data retransmission"
    );
    // The SYN-ACK echoes the resent SYN's time: RTT 1 ms; the first window follows.
    let synack = Packet {
        kind: kind::SYNACK,
        ts: 10 * MS,
        ..Packet::default()
    };
    s.on_packet(&p, &synack, &[], 11 * MS, &mut out);
    assert_eq!(seqs(&mut out), [0, 1, 2, 3]);
    assert_eq!(s.state, SenderState::Established);
    assert_eq!(s.rto_deadline, Some(21 * MS));
}

#[test]
fn a_lost_syn_ack_is_answered_again_and_a_duplicate_segment_is_counted() {
    let p = lossy_params(true);
    let mut r = Receiver::new(2, false);
    let mut out = Vec::new();
    let syn = |ts| Packet {
        kind: kind::SYN,
        ts,
        ..Packet::default()
    };
    // The SYN-ACK of the first SYN is lost; the client's timer resends the SYN, which the
    // receiver answers again (it keeps no half-open state to lose).
    r.on_packet(&p, &syn(0), MS, &mut out);
    r.on_packet(&p, &syn(10 * MS), 11 * MS, &mut out);
    assert_eq!(
        out.iter().map(|p| (p.kind, p.ts)).collect::<Vec<_>>(),
        [(kind::SYNACK, 0), (kind::SYNACK, 10 * MS)]
    );
    out.clear();
    r.on_packet(&p, &seg(1), 12 * MS, &mut out);
    r.on_packet(&p, &seg(1), 13 * MS, &mut out);
    r.on_packet(&p, &seg(0), 14 * MS, &mut out);
    r.on_packet(&p, &seg(0), 15 * MS, &mut out);
    assert_eq!(seqs(&mut out), [0, 0, 2, 2]);
    assert_eq!(r.duplicate_segments, 2, "the second 1 and the second 0");
}

#[test]
fn initial_ssthresh_ends_slow_start() {
    let mut p = lossy_params(false);
    p.initial_ssthresh = 5;
    let mut s = sender(&p);
    let mut out = Vec::new();
    s.start(&p, 0, &mut out);
    out.clear();
    // ACK 2 (two segments): slow start adds one to reach ssthresh 5, the other segment
    // counts towards congestion avoidance.
    s.on_packet(&p, &ack_at(2, 0), &[], MS, &mut out);
    assert_eq!((s.win.cwnd, s.win.cwnd_cnt), (5, 1));
}

/// Plays one round trip: the sender's first window of 10 from a 20-segment flow, segments 1
/// and 3 lost, every other segment delivered in order and its ACK returned at once. Returns
/// what the sender sent in response (before anything it sent arrives).
fn first_round_trip(sack: bool) -> (Vec<u32>, Sender, Receiver) {
    let mut p = lossy_params(false);
    p.init_cwnd = 10;
    p.sack = sack;
    let mut s = Sender::new(0, 20 * 1460, &p, Box::new(NewReno));
    let mut r = Receiver::new(20, sack);
    let mut out = Vec::new();
    s.start(&p, 0, &mut out);
    let window = seqs(&mut out);
    assert_eq!(window, (0..10).collect::<Vec<_>>());
    let mut sent = Vec::new();
    let mut acks = Vec::new();
    for seq in window.into_iter().filter(|&x| x != 1 && x != 3) {
        let seg = Packet {
            seq,
            kind: kind::DATA,
            ..Packet::default()
        };
        r.on_packet(&p, &seg, MS, &mut acks);
        for a in acks.drain(..) {
            s.on_packet(&p, &a, r.sack_log(), 2 * MS, &mut out);
            sent.extend(seqs(&mut out));
        }
    }
    (sent, s, r)
}

#[test]
fn sack_repairs_both_holes_in_one_round_trip_where_newreno_repairs_one() {
    // NewReno: the ACK of 0 releases 10 and 11 (cwnd 11); the third duplicate ACK (from 5)
    // resends 1 with ssthresh = 11 / 2 = 5 and cwnd = 5 + 3 = 8; the duplicate ACKs of 6, 7,
    // 8 and 9 inflate cwnd to 12, which lets 12 out (12 − 1 = 11 in flight). The second
    // hole waits for the partial ACK, a round trip later.
    let (sent, s, _) = first_round_trip(false);
    assert_eq!(sent, [10, 11, 1, 12]);
    assert_eq!(s.stats.fast_retransmits, 1);
    // SACK (RFC 6675): the ACK of 0 releases 10 and 11 (cwnd 11). Segments 2, 4, 5 are three
    // duplicate ACKs reporting new SACKed data: recovery with ssthresh = cwnd = 11 / 2 = 5,
    // segment 1 resent (lost: 2, 4, 5 above it). pipe counts 1 (resent) and 3, 6..=11 (in
    // flight, not lost) = 8 ≥ 5. Each of 6, 7, 8 SACKs one more segment: once 3 has three
    // SACKed segments above it (4, 5, 6) it is lost and leaves pipe; after 8, pipe = 1
    // (resent 1) + 3 (9, 10, 11) = 4 < 5, and NextSeg resends the lost 3; after 9, pipe = 4
    // again and new data 12 goes.
    let (sent, s, _) = first_round_trip(true);
    assert_eq!(sent, [10, 11, 1, 3, 12]);
    assert_eq!(s.stats.fast_retransmits, 2);
    assert_eq!((s.win.ssthresh, s.win.cwnd), (5, 5));
}

#[test]
fn sack_recovery_ends_at_the_recovery_point_and_a_timeout_skips_held_segments() {
    let mut p = lossy_params(false);
    p.init_cwnd = 10;
    p.sack = true;
    let (_, mut s, mut r) = first_round_trip(true);
    let mut out = Vec::new();
    let mut acks = Vec::new();
    // The resent 1 arrives: ACK up to 3 (partial: below the recovery point 10) keeps
    // recovery going; then the resent 3 completes 0..=11: ACK 12 ≥ recovery point ends it
    // with cwnd = ssthresh.
    for seq in [1, 3, 10, 11] {
        let seg = Packet {
            seq,
            kind: kind::DATA,
            ..Packet::default()
        };
        r.on_packet(&p, &seg, 3 * MS, &mut acks);
        for a in acks.drain(..) {
            s.on_packet(&p, &a, r.sack_log(), 4 * MS, &mut out);
        }
    }
    out.clear();
    assert_eq!(s.win.cwnd, s.win.ssthresh);
    // Now 12 is lost and 13.. arrive: a timeout then resends 12 alone and go-back-N skips
    // the segments SACK reports held.
    for seq in [13, 14] {
        let seg = Packet {
            seq,
            kind: kind::DATA,
            ..Packet::default()
        };
        r.on_packet(&p, &seg, 5 * MS, &mut acks);
        for a in acks.drain(..) {
            s.on_packet(&p, &a, r.sack_log(), 6 * MS, &mut out);
        }
    }
    out.clear();
    s.on_timeout(&p, 100 * MS, &mut out);
    assert_eq!(seqs(&mut out), [12]);
    let seg = Packet {
        seq: 12,
        kind: kind::DATA,
        ..Packet::default()
    };
    r.on_packet(&p, &seg, 101 * MS, &mut acks);
    for a in acks.drain(..) {
        s.on_packet(&p, &a, r.sack_log(), 102 * MS, &mut out);
    }
    // ACK 15 (12, 13, 14 held): slow start from cwnd 1 to 2 sends 15 and 16, none resent.
    let next = seqs(&mut out);
    assert!(next.iter().all(|&x| x >= 15), "{next:?}");
}

// MPTCP-L's loss detection on one subflow: the test plays the network between a subflow
// sender and its receiver (both real), deciding which packets arrive.

fn detect_pair(p: &TcpParams, atimer_rtts: f64) -> (Sender, Receiver) {
    let d = detect::DetectParams {
        atimer_rtts,
        keep_rtts: 2.0,
        cut_on_detect: true,
    };
    let mut s = Sender::new_subflow(0, 12 * 1460, p, Box::new(NewReno), Some(d));
    for dsn in 0..12 {
        s.assign(dsn);
    }
    (s, Receiver::new_subflow(false, true))
}

/// Delivers `data` to the receiver and every ACK it sends back to the sender (with its loss
/// report), at `now`; returns what the sender sent in response.
fn deliver(
    p: &TcpParams,
    s: &mut Sender,
    r: &mut Receiver,
    data: &[Packet],
    now: Time,
) -> Vec<Packet> {
    let mut acks = Vec::new();
    for d in data {
        r.on_packet(p, d, now, &mut acks);
    }
    let mut out = Vec::new();
    for a in &acks {
        s.on_packet(p, a, &[], now, &mut out);
        if let Some((from, to)) = s.take_report(r, a.flags) {
            s.on_loss_report(p, from, to, now, &mut out);
        }
    }
    out
}

#[test]
fn mptcp_l_resends_a_reported_gap_within_one_round_trip_and_cuts_the_window_once() {
    let p = lossy_params(false);
    let (mut s, mut r) = detect_pair(&p, 0.0);
    let mut out = Vec::new();
    s.start(&p, 0, &mut out);
    assert_eq!(out.iter().map(|x| x.seq).collect::<Vec<_>>(), [0, 1, 2, 3]);
    // Segment 1 is lost; 0, 2 and 3 arrive. The receiver sees PS 2 after PS 0: it reports
    // PS 1 in the ACK sent at once, and the sender resends segment 1 on that ACK — one
    // round trip after the loss, with no duplicate-ACK count.
    let sent = [out[0], out[2], out[3]];
    let resp = deliver(&p, &mut s, &mut r, &sent, MS);
    let resent: Vec<u32> = resp.iter().map(|x| x.seq).collect();
    assert!(resent.contains(&1), "{resent:?}");
    assert_eq!(s.stats.detect_retransmits, 1);
    assert_eq!(s.stats.fast_retransmits, 0);
    // The window was halved once: ssthresh = max(flight / 2, 2).
    assert_eq!(s.win.ssthresh, 2);
    // Sent after it: 4, 5, then the resent 1 (a new PS). Segment 4 is lost too, 5 and 1
    // arrive: the gap before 5 reports 4, which is resent; the window is not cut twice for
    // losses of one window.
    assert_eq!(resent, [4, 5, 1]);
    let resp2 = deliver(&p, &mut s, &mut r, &[resp[1], resp[2]], 2 * MS);
    assert!(resp2.iter().any(|x| x.seq == 4), "{resp2:?}");
    assert_eq!(s.stats.detect_retransmits, 2);
    assert_eq!(s.win.ssthresh, 2, "one cut per window");
}

#[test]
fn mptcp_l_aggressive_timer_resends_a_lost_tail_without_cutting_the_window() {
    let p = lossy_params(false);
    let (mut s, mut r) = detect_pair(&p, 2.0);
    let mut out = Vec::new();
    s.start(&p, 0, &mut out);
    // Everything arrives: RTT samples of 1 ms; the window grows.
    let first: Vec<Packet> = std::mem::take(&mut out);
    let resp = deliver(&p, &mut s, &mut r, &first, MS);
    assert!(!resp.is_empty());
    let cwnd = s.win.cwnd;
    // The next flight is lost entirely: no arrival, no report. The aggressive timer (2 RTTs
    // after the last progress) fires before the RTO and resends the first unacknowledged
    // segment, keeping the window.
    let deadline = s.deadline().expect("a timer runs");
    assert!(deadline <= MS + 2 * MS + 1, "2 RTTs: {deadline}");
    assert!(s.rto_deadline.expect("RTO armed") > deadline);
    let mut out = Vec::new();
    assert!(!s.on_timer(&p, deadline, &mut out), "not a timeout");
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].seq, s.snd_una());
    assert_eq!(s.stats.atimer_retransmits, 1);
    assert_eq!(s.stats.timeouts, 0);
    assert_eq!(s.win.cwnd, cwnd, "the window is kept");
    // It fires once per stall: the next deadline is the RTO's, which then cuts as usual.
    let next = s.deadline().expect("the RTO");
    assert_eq!(Some(next), s.rto_deadline);
    assert!(s.on_timer(&p, next, &mut out), "a timeout");
    assert_eq!(s.stats.timeouts, 1);
    assert_eq!(s.win.cwnd, 1);
}

#[test]
fn per_ack_growth_counts_acks_not_segments() {
    // Slow start: an ACK of two segments grows the window by two by bytes, by one per ACK.
    let mut by_bytes = test_window(10, u32::MAX);
    let mut per_ack = test_window(10, u32::MAX);
    let mut cc = NewReno;
    let mut info = test_ack(2);
    cc.on_ack(&mut by_bytes, &info);
    info.grow = 1;
    cc.on_ack(&mut per_ack, &info);
    assert_eq!((by_bytes.cwnd, per_ack.cwnd), (12, 11));
    // Congestion avoidance at cwnd 10: one segment after 10 ACKs, whatever each covers.
    let mut w = test_window(10, 10);
    for _ in 0..9 {
        cc.on_ack(&mut w, &info);
    }
    assert_eq!(w.cwnd, 10);
    cc.on_ack(&mut w, &info);
    assert_eq!(w.cwnd, 11);
}

#[test]
fn the_simulators_profiles_grow_per_ack_and_the_others_by_bytes() {
    use crate::config::{CwndGrowth, TcpProfile};
    for (profile, per_ack) in [
        (TcpProfile::Dc, false),
        (TcpProfile::Linux, false),
        (TcpProfile::Ns2, true),
        (TcpProfile::Ns3Of2014, true),
    ] {
        let c = TcpConfig::for_profile(profile);
        assert_eq!(c.cwnd_growth == CwndGrowth::PerAck, per_ack, "{profile:?}");
        assert_eq!(TcpParams::from_config(&c).per_ack_growth, per_ack);
    }
}

#[test]
fn with_fin_ack_the_last_segment_is_acknowledged_at_once() {
    // A 3-segment flow with delayed ACKs: 0 and 1 make one ACK; 2, the last, waits for the
    // delayed-ACK timer without `fin_ack` and is answered at once with it (ns-3's FIN).
    for fin in [false, true] {
        let mut p = params();
        p.delayed_ack = true;
        p.fin_ack = fin;
        let mut r = Receiver::new(3, false);
        let mut out = Vec::new();
        for s in 0..3 {
            r.on_packet(&p, &seg(s), s as Time, &mut out);
        }
        let want: &[(u32, bool)] = if fin {
            &[(2, false), (3, false)]
        } else {
            &[(2, false)]
        };
        assert_eq!(acks(&out), want, "fin_ack {fin}");
        assert_eq!(r.delack_deadline.is_some(), !fin);
    }
}

#[test]
fn only_ns3_2014_closes_with_a_fin() {
    use crate::config::TcpProfile;
    for (profile, fin) in [
        (TcpProfile::Dc, false),
        (TcpProfile::Linux, false),
        (TcpProfile::Ns2, false),
        (TcpProfile::Ns3Of2014, true),
    ] {
        let c = TcpConfig::for_profile(profile);
        assert_eq!(TcpParams::from_config(&c).fin_ack, fin, "{profile:?}");
    }
}
