//! Unit tests of the output ports: admission, departures, marking, backlog integrals and
//! the scheduled (pFabric) port.

use super::*;
use crate::packet::flag;
use crate::units::Rate;

fn port(limit: u32) -> Port {
    Port::new(
        TxClock::new(Rate(1_000_000_000)),
        1_000_000,
        Qdisc::DropTail(DropTail {
            limit_packets: limit,
            limit_bytes: 0,
        }),
    )
}

fn pkt() -> Packet {
    Packet {
        bytes: 1500,
        ..Packet::default()
    }
}

/// A full-size packet of connection `conn`.
fn d(conn: u32) -> Packet {
    Packet { conn, ..pkt() }
}

/// A 1 Gb/s priority-scheduled port holding at most `limit_bytes` waiting.
fn sched_port(limit_bytes: u64) -> Port {
    Port::new_scheduled(TxClock::new(Rate(1_000_000_000)), 0, limit_bytes)
}

#[test]
fn droptail_never_exceeds_its_limit_and_counts_drops() {
    let mut p = port(5);
    let mut admitted = 0;
    for _ in 0..20 {
        if p.enqueue(pkt(), 0).is_some() {
            admitted += 1;
        }
    }
    // One in service + 5 waiting.
    assert_eq!(admitted, 6);
    assert_eq!(p.drops, 14);
    assert!(p.max_backlog <= 5 + 1);
    // After one serialization time (12 us) one more fits.
    assert!(p.enqueue(pkt(), 12_000_000).is_some());
    assert!(p.enqueue(pkt(), 12_000_000).is_none());
}

#[test]
fn departures_are_back_to_back() {
    let mut p = port(100);
    assert_eq!(p.enqueue(pkt(), 0), Some(true));
    assert_eq!(p.enqueue(pkt(), 0), Some(false));
    assert_eq!(p.head_arrival(), Some(12_000_000 + 1_000_000));
    p.pop_arrived();
    assert_eq!(p.head_arrival(), Some(24_000_000 + 1_000_000));
}

#[test]
fn ecn_marks_ect_arrivals_at_or_above_k() {
    let mut p = Port::new(
        TxClock::new(Rate(1_000_000_000)),
        0,
        Qdisc::Ecn(EcnThreshold {
            limit: DropTail {
                limit_packets: 10,
                limit_bytes: 0,
            },
            k_packets: 2,
            k_bytes: 0,
        }),
    );
    let ect = Packet {
        bytes: 1500,
        flags: flag::ECT,
        ..Packet::default()
    };
    // In service, then 0, 1, 2, 3 waiting ahead of the arrival.
    for _ in 0..5 {
        p.enqueue(ect, 0);
    }
    p.enqueue(pkt(), 0); // not ECN-capable: never marked
    let marks: Vec<bool> = (0..6)
        .map(|_| p.pop_arrived().flags & flag::CE != 0)
        .collect();
    assert_eq!(marks, [false, false, false, true, true, false]);
}

#[test]
fn mean_backlog_integrates_unfinished_work() {
    let mut p = port(100);
    // Two packets at t = 0 on an idle 1 Gb/s link: 24 us of work draining linearly;
    // over [0, 48 us] the mean is (24² / 2) / 48 us of work = 6 us = 750 bytes.
    p.enqueue(pkt(), 0);
    p.enqueue(pkt(), 0);
    let s = p.stats(48_000_000);
    assert_eq!(s.busy, 24_000_000);
    assert!((s.mean_backlog_bytes - 750.0).abs() < 1e-9, "{s:?}");
    // A third packet at 6 us: integrate [0, 6] then the new 30 us of work.
    p.enqueue(pkt(), 6_000_000);
    let s = p.stats(48_000_000);
    let area_us2 = (24.0f64 * 24.0 - 18.0 * 18.0) / 2.0 + 30.0 * 30.0 / 2.0;
    assert!(
        (s.mean_backlog_bytes - area_us2 / 48.0 * 125.0).abs() < 1e-9,
        "{s:?}"
    );
}

#[test]
fn busy_time_sums_every_admitted_packet_at_exact_and_inexact_rates() {
    // 1 Gb/s: 8000 ps per byte, summed from the admitted bytes; 3 Gb/s: each packet's
    // time rounded up on its own (1500 B: 4,000,000 ps; 41 B: 109,334 ps).
    for (bps, want) in [
        (1_000_000_000u64, 2 * 12_000_000 + 328_000),
        (3_000_000_000, 2 * 4_000_000 + 109_334),
    ] {
        let mut p = Port::new(
            TxClock::new(Rate(bps)),
            1_000,
            Qdisc::DropTail(DropTail {
                limit_packets: 100,
                limit_bytes: 0,
            }),
        );
        let odd = Packet {
            bytes: 41,
            ..Packet::default()
        };
        for (q, t) in [(pkt(), 0), (odd, 5), (pkt(), 7)] {
            assert!(p.enqueue(q, t).is_some());
        }
        assert_eq!(p.stats(1).busy, want, "{bps} b/s");
    }
}

#[test]
fn backlog_counts_only_packets_not_yet_started() {
    // 1 Gb/s, 1 us delay, at most 2 packets waiting; packets of 1500 B take 12 us each.
    let mut p = port(2);
    for _ in 0..3 {
        assert!(p.enqueue(pkt(), 0).is_some()); // one in service, two waiting
    }
    assert!(p.enqueue(pkt(), 0).is_none(), "limit of 2 waiting");
    // At 12 us the second starts: one waiting, room for one more.
    assert!(p.enqueue(pkt(), 12_000_000).is_some());
    assert!(p.enqueue(pkt(), 12_000_000).is_none());
    // The last one starts at 36 us: it waits until then, and then nothing does.
    assert!(p.is_fast());
    assert_eq!(p.backlog::<true>(35_999_999), (1, 1500));
    assert_eq!(p.backlog::<false>(35_999_999), (1, 1500));
    assert_eq!(p.backlog::<true>(36_000_000), (0, 0));
    assert_eq!(p.backlog::<false>(36_000_000), (0, 0));
}

/// Random arrivals (sizes, gaps, bursts) and departures at a DropTail port, against a
/// reference that recomputes the exact backlog from every admitted packet's start time:
/// each admit/drop decision, the largest backlog and the FIFO contents agree, under
/// packet limits, byte limits and both. (Admissions skip the exact backlog when bounds
/// from above settle them; a bound that is not one fails this.)
#[test]
fn admission_matches_an_exact_backlog_reference() {
    let mut rng = crate::engine::Rng::new(21, 4);
    // 1 Gb/s takes the fast path; 3 Gb/s (no whole number of ps per byte) the other.
    let cases = [(4, 0), (0, 9000), (6, 7000), (1, 0), (30, 0)]
        .into_iter()
        .flat_map(|l| [(l, 1_000_000_000), (l, 3_000_000_000)]);
    for ((limit_packets, limit_bytes), bps) in cases {
        let clock = TxClock::new(Rate(bps));
        let mut p = Port::new(
            clock,
            2_000_000,
            Qdisc::DropTail(DropTail {
                limit_packets,
                limit_bytes,
            }),
        );
        assert_eq!(p.is_fast(), bps == 1_000_000_000);
        let tx = |b: u64| clock.tx(b as u32);
        // Reference: (start, finish, bytes) of admitted packets not yet arrived.
        let mut live: std::collections::VecDeque<(Time, Time, u64)> = Default::default();
        let (mut busy_until, mut max_seen, mut now) = (0u64, 0u32, 0u64);
        for step in 0..20_000 {
            now += match rng.below(4) {
                0 => 0,
                1 => rng.below(2_000_000),
                _ => rng.below(15_000_000),
            };
            // Departures due by `now`, in order, as the simulator pops them.
            while let Some(&(_, fin, b)) = live.front() {
                if fin + 2_000_000 > now {
                    break;
                }
                assert_eq!(p.head_arrival(), Some(fin + 2_000_000), "step {step}");
                assert_eq!(p.pop_arrived().bytes as u64, b);
                live.pop_front();
            }
            let bytes = [40u64, 1500, 576, 9000][rng.below(4) as usize];
            let waiting: Vec<_> = live.iter().filter(|&&(st, _, _)| st > now).collect();
            let (wp, wb) = (
                waiting.len() as u32,
                waiting.iter().map(|w| w.2).sum::<u64>(),
            );
            let drop = (limit_packets > 0 && wp >= limit_packets)
                || (limit_bytes > 0 && wb + bytes > limit_bytes);
            let got = p.enqueue(
                Packet {
                    bytes: bytes as u16,
                    ..Packet::default()
                },
                now,
            );
            assert_eq!(got.is_none(), drop, "step {step}: {wp} waiting, {wb} B");
            if !drop {
                if busy_until > now {
                    max_seen = max_seen.max(wp + 1);
                }
                let start = busy_until.max(now);
                busy_until = start + tx(bytes);
                live.push_back((start, busy_until, bytes));
            }
            assert_eq!(p.max_backlog, max_seen, "step {step}");
        }
        assert!(
            max_seen > 0 && p.drops > 0,
            "limits ({limit_packets}, {limit_bytes}) reached: {max_seen} {}",
            p.drops
        );
    }
}

/// The fast path's byte limit is capped at `u32::MAX`; a larger limit is still the one
/// that decides.
#[test]
fn byte_limits_beyond_four_gigabytes_decide_exactly() {
    let mut p = Port::new(
        TxClock::new(Rate(10_000_000_000)),
        1_000_000,
        Qdisc::DropTail(DropTail {
            limit_packets: 0,
            limit_bytes: 5_000_000_000,
        }),
    );
    assert!(p.is_fast());
    let big = Packet {
        bytes: 65_535,
        ..Packet::default()
    };
    let admitted = (0..80_000).filter(|_| p.enqueue(big, 0).is_some()).count();
    // One in service and k waiting while k * 65,535 <= 5e9.
    assert_eq!(admitted, 1 + 5_000_000_000 / 65_535);
    assert_eq!(p.drops, 80_000 - admitted as u64);
}

#[test]
fn scheduled_port_sends_by_priority_and_needs_tx_done_events() {
    let mut p = sched_port(3000);
    // Events at times 0..3 (scheduled then, ranks 10..); the completion is placed as
    // scheduled at 0 with rank 11.
    let r = p.sched_enqueue(d(0), 50, 0, ((0, 0), 10), false);
    assert_eq!(r.started, Some(12_000_000));
    assert!(r.head_arrival && r.tx_done.is_none());
    p.sched_set_tx_place(((0, 0), 11));
    // The first packet to wait asks for the completion event, in its place.
    let r = p.sched_enqueue(d(1), 40, 1, ((1, 0), 12), false);
    assert_eq!(
        (r.dropped, r.tx_done),
        (0, Some((12_000_000, ((0, 0), 11))))
    );
    let r = p.sched_enqueue(d(2), 10, 2, ((2, 0), 13), false);
    assert_eq!((r.dropped, r.tx_done, r.started), (0, None, None));
    // Buffer (2 packets) full: the least urgent (conn 1) goes.
    assert_eq!(p.sched_enqueue(d(3), 20, 3, ((3, 0), 14), false).dropped, 1);
    assert_eq!(p.drops, 1);
    let mut order = vec![p.pop_arrived().conn];
    let mut t = 12_000_000;
    while let Some((next, _)) = p.sched_tx_done(t) {
        p.sched_set_tx_place(((t, 0), 11));
        p.sched_claim_tx_event();
        order.push(p.pop_arrived().conn);
        t = next;
    }
    assert_eq!(order, [0, 2, 3]);
    assert_eq!(p.in_system(), 0);
}

#[test]
fn scheduled_port_completion_at_the_same_time_follows_the_event_order() {
    let mut p = sched_port(0);
    assert!(p
        .sched_enqueue(d(0), 50, 0, ((0, 0), 10), false)
        .started
        .is_some());
    p.sched_set_tx_place(((0, 0), 11));
    // An arrival at the completion's time but before it in the order (scheduled as
    // early, of a smaller rank) waits for it...
    let r = p.sched_enqueue(d(1), 40, 12_000_000, ((0, 0), 5), false);
    assert_eq!(r.tx_done, Some((12_000_000, ((0, 0), 11))));
    assert!(r.started.is_none());
    // ... and one after it (of a larger rank, of a later creator, or scheduled later) finds
    // the link idle and is sent at once.
    for place in [((0, 0), 12), ((0, 1), 0), ((1, 0), 0)] {
        let mut q = sched_port(0);
        assert!(q
            .sched_enqueue(d(0), 50, 0, ((0, 0), 10), false)
            .started
            .is_some());
        q.sched_set_tx_place(((0, 0), 11));
        let r = q.sched_enqueue(d(1), 40, 12_000_000, place, false);
        assert_eq!(r.started, Some(24_000_000));
        assert!(r.tx_done.is_none());
    }
}

#[test]
fn byte_limit() {
    let mut p = Port::new(
        TxClock::new(Rate(1_000_000_000)),
        0,
        Qdisc::DropTail(DropTail {
            limit_packets: 0,
            limit_bytes: 3000,
        }),
    );
    let n = (0..10).filter(|_| p.enqueue(pkt(), 0).is_some()).count();
    assert_eq!(n, 3); // one in service, two (3000 B) waiting

    // Neither limit set: nothing is dropped.
    let mut unlimited = port(0);
    assert!((0..10_000).all(|_| unlimited.enqueue(pkt(), 0).is_some()));
    assert_eq!(unlimited.drops, 0);
}

#[test]
fn ecn_threshold_held_in_the_port_decides_as_the_boxed_rule() {
    // The same traffic through an ECN port that holds its packet threshold (bounds may
    // decide an admission) and one made to read the boxed rule at every admission: the
    // same drops, marks, departures and statistics.
    let mut rng = crate::engine::Rng::new(11, 0);
    let (mut all_marks, mut all_drops) = (0, 0);
    for case in 0..60 {
        let k = [1, 2, 5, 20][case % 4];
        let limit = [4, 10, 30][case % 3].max(k + 2);
        let mk = || {
            Port::new(
                TxClock::new(Rate(1_000_000_000)),
                2_000_000,
                Qdisc::Ecn(EcnThreshold {
                    limit: DropTail {
                        limit_packets: limit,
                        limit_bytes: [0, 6_000, 20_000][case % 5 % 3],
                    },
                    k_packets: k,
                    k_bytes: 0,
                }),
            )
        };
        let (mut held, mut boxed) = (mk(), mk());
        assert_eq!(held.ecn_k_packets, k as u16);
        boxed.ecn_k_packets = 0;
        let mut now = 0;
        let mut marks = 0;
        for step in 0..3000u32 {
            // Bursts and gaps: arrivals 0–24 µs apart, about two packet times on average.
            now += rng.below(3) * rng.below(8_000_000);
            while held.head_arrival().is_some_and(|t| t <= now) {
                assert_eq!(held.pop_arrived(), boxed.pop_arrived(), "case {case}");
            }
            let p = Packet {
                conn: step,
                bytes: [64, 590, 1500][rng.below(3) as usize],
                flags: if rng.below(4) == 0 { 0 } else { flag::ECT },
                ..Packet::default()
            };
            let r = held.enqueue(p, now);
            assert_eq!(r, boxed.enqueue(p, now), "case {case} step {step}");
            if r.is_some() {
                let (a, b) = (
                    *held.fifo.back_mut().unwrap(),
                    *boxed.fifo.back_mut().unwrap(),
                );
                assert_eq!(a.pkt, b.pkt, "case {case} step {step}");
                marks += (a.pkt.flags & flag::CE != 0) as u32;
            }
            assert_eq!(
                held.max_backlog, boxed.max_backlog,
                "case {case} step {step}"
            );
        }
        (all_marks, all_drops) = (all_marks + marks, all_drops + held.drops);
        assert_eq!(held.drops, boxed.drops);
        assert_eq!(held.stats(now), boxed.stats(now));
    }
    assert!(
        all_marks > 10_000 && all_drops > 10_000,
        "{all_marks} marks, {all_drops} drops"
    );
}
