//! Ideal FCT: the completion time of a flow alone on an idle network along a given path.
//!
//! The flow's own sender and receiver state machines (the same code the simulator runs) are
//! driven over an idle pipeline of store-and-forward FIFO links: with no other traffic, a
//! link's only queueing is behind the flow's own earlier packets, so each packet's arrival
//! follows from `start = max(arrival, previous finish)`, `finish = start + bytes / rate` at
//! every hop. The result is exact: a flow alone in the simulator finishes at this time to the
//! picosecond (a test checks it), and the cost is a small fraction of simulating the flow.

use crate::engine::Time;
use crate::network::TxClock;
use crate::packet::{kind, Packet};
use crate::transport::{CongestionControl, Receiver, Sender, TcpParams};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A link as the idle replay needs it.
#[derive(Clone, Copy, Debug)]
pub struct Hop {
    /// Serialization clock.
    pub clock: TxClock,
    /// Propagation delay, ps.
    pub delay: Time,
}

fn traverse(hops: &[Hop], busy: &mut [Time], t_send: Time, bytes: u32) -> Time {
    traverse_waits(hops, busy, t_send, bytes).0
}

/// Sends a packet of `bytes` at `t_send` across `hops`, whose links are busy until `busy`
/// (updated): returns when it arrives, and whether it waited at any hop after the first.
fn traverse_waits(hops: &[Hop], busy: &mut [Time], t_send: Time, bytes: u32) -> (Time, bool) {
    let mut t = t_send;
    let mut waited = false;
    for (j, (h, b)) in hops.iter().zip(busy.iter_mut()).enumerate() {
        waited |= j > 0 && *b > t;
        let start = t.max(*b);
        let fin = start + h.clock.tx(bytes);
        *b = fin;
        t = fin + h.delay;
    }
    (t, waited)
}

/// Sends segments `first..` of a `size`-byte flow at `now` onto path `hops`, whose links
/// are busy until `busy`, and returns when the last one arrives. The NIC (hop 0) is backlogged,
/// so segments leave it back to back.
///
/// Steady state is skipped in one step, exactly: once a segment crossed every hop after the
/// NIC without waiting, and no hop sends its size slower than the NIC, the next segment of the
/// same size leaves the NIC exactly one NIC transmission time `T` later, finds every later hop
/// free (that hop finished the previous one within `T` of its arrival) and so arrives `T`
/// later everywhere; by induction `m` more such segments move every link's busy time and the
/// arrival by `m·T`. The result equals sending the segments one by one (a test checks it).
fn back_to_back(
    hops: &[Hop],
    busy: &mut [Time],
    now: Time,
    segments: std::ops::Range<u32>,
    size: u64,
    p: &TcpParams,
) -> Time {
    let (first, total) = (segments.start, segments.end);
    let mut last = 0;
    let mut seq = first;
    while seq < total {
        let bytes = p.payload(size, seq) + p.header;
        let (t, waited) = traverse_waits(hops, busy, now, bytes);
        last = t;
        seq += 1;
        // Segments after `seq - 1` of the same size: all full ones but the last segment
        // (which is full too when the size is a multiple of the MSS).
        let same = if seq >= total {
            0
        } else if p.payload(size, total - 1) + p.header == bytes {
            total - seq
        } else {
            (total - 1).saturating_sub(seq)
        };
        if same > 0 && !waited {
            let t0 = hops[0].clock.tx(bytes);
            if hops.iter().all(|h| h.clock.tx(bytes) <= t0) {
                let shift = same as Time * t0;
                busy.iter_mut().for_each(|b| *b += shift);
                last += shift;
                seq += same;
            }
        }
    }
    last
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    AtReceiver(usize),
    AtSender(usize),
    Rto,
    DelAck,
}

/// A tiny event queue: the replay has few pending events (one window of packets), so a
/// binary heap keyed by `(time, sequence)` is cheapest; packets wait in a side table.
struct Queue {
    heap: BinaryHeap<Reverse<(Time, u64, Ev)>>,
    seq: u64,
    /// Each packet in flight with its tag: a data segment's start on the NIC; an ACK's
    /// trigger (the NIC start of the data segment whose arrival made the receiver send it;
    /// none when a timer did).
    packets: Vec<(Packet, Option<Time>)>,
    free: Vec<usize>,
}

impl Queue {
    fn push(&mut self, t: Time, e: Ev) {
        self.heap.push(Reverse((t, self.seq, e)));
        self.seq += 1;
    }
    fn store(&mut self, p: Packet, tag: Option<Time>) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.packets[i] = (p, tag);
                i
            }
            None => {
                self.packets.push((p, tag));
                self.packets.len() - 1
            }
        }
    }
    fn pop(&mut self) -> Option<(Time, Ev)> {
        self.heap.pop().map(|Reverse((t, _, e))| (t, e))
    }
}

/// Time from the flow's start until its receiver holds every byte, alone on an idle network
/// with forward path `fwd` and reverse (ACK) path `rev`.
pub fn ideal_fct(
    fwd: &[Hop],
    rev: &[Hop],
    size: u64,
    p: &TcpParams,
    cc: Box<dyn CongestionControl>,
) -> Time {
    replay(fwd, rev, size, p, cc, true, &mut |_| {}).0
}

/// [`ideal_fct`] of flows of each of `sizes` bytes on one pair of paths and one congestion
/// control, in the order given, from a single replay: that of the largest.
///
/// A flow's sender and receiver behave alike whatever its size until its last segment is
/// first sent: the size only tells the sender where to stop and the receiver when it is
/// done, and nothing is lost on an idle network. So a flow of `n` segments sends its last
/// segment exactly when the largest flow first sends segment `n - 1`, with the forward path's
/// links then busy as they are in the largest flow's replay, and it completes when that
/// (possibly shorter) segment arrives; its own earlier segments have all arrived by then,
/// since a path's links keep their order. Where the replay skips its steady state (see
/// [`replay`]), a flow not yet at its last segment would have skipped at the same point,
/// from the same state: its remaining segments leave back to back. The results equal one
/// replay per size (a test checks it); the cost is one replay in all.
pub fn ideal_fcts(
    fwd: &[Hop],
    rev: &[Hop],
    sizes: &[u64],
    p: &TcpParams,
    cc: Box<dyn CongestionControl>,
) -> Vec<Time> {
    let mut fcts = vec![0; sizes.len()];
    let Some(&largest) = sizes.iter().max() else {
        return fcts;
    };
    // Flows by their last segment's index.
    let last_seg = |i: usize| p.segments(sizes[i]) - 1;
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_unstable_by_key(|&i| last_seg(i));
    let mut next = 0;
    let mut busy = vec![0; fwd.len()];
    replay(fwd, rev, largest, p, cc, true, &mut |ev| match ev {
        Milestone::FirstSend { seq, now, busy_f } => {
            while next < order.len() && last_seg(order[next]) == seq {
                let i = order[next];
                busy.copy_from_slice(busy_f);
                fcts[i] = traverse(fwd, &mut busy, now, p.payload(sizes[i], seq) + p.header);
                next += 1;
            }
        }
        Milestone::Skip { from, now, busy_f } => {
            for &i in &order[next..] {
                debug_assert!(last_seg(i) >= from);
                busy.copy_from_slice(busy_f);
                fcts[i] = back_to_back(fwd, &mut busy, now, from..last_seg(i) + 1, sizes[i], p);
            }
            next = order.len();
        }
    });
    debug_assert_eq!(next, order.len(), "every flow's last segment was sent");
    fcts
}

/// What a replay reports as it goes ([`ideal_fcts`]).
enum Milestone<'a> {
    /// Segment `seq` leaves for the first time at `now`, with the forward links busy until
    /// `busy_f` (before it).
    FirstSend {
        seq: u32,
        now: Time,
        busy_f: &'a [Time],
    },
    /// The replay skips its steady state at `now`: segments `from..` leave back to back onto
    /// forward links busy until `busy_f`.
    Skip {
        from: u32,
        now: Time,
        busy_f: &'a [Time],
    },
}

/// [`ideal_fct`], and whether it skipped steady state; `skip`: whether it may (off in tests
/// only, to check that the skip is exact). `report` hears of each segment's first sending
/// and of the skip.
fn replay(
    fwd: &[Hop],
    rev: &[Hop],
    size: u64,
    p: &TcpParams,
    cc: Box<dyn CongestionControl>,
    skip: bool,
    report: &mut dyn FnMut(Milestone),
) -> (Time, bool) {
    let mut busy_f = vec![0; fwd.len()];
    let mut busy_r = vec![0; rev.len()];
    let mut snd = Sender::new(0, size, p, cc);
    let mut rcv = Receiver::new(snd.total_segments(), p.sack);
    let mut q = Queue {
        heap: BinaryHeap::with_capacity(64),
        seq: 0,
        packets: Vec::with_capacity(64),
        free: Vec::new(),
    };
    let mut out: Vec<Packet> = Vec::new();
    let mut rto_at: Option<Time> = None;
    let mut delack_at: Option<Time> = None;
    // Fast-forward: once the sender's NIC is busy without a gap and still has a backlog,
    // and ACKs come back for segments that left it back to back, every later ACK arrives a
    // fixed time after the previous one and opens at least as many new segments as it
    // acknowledges (no loss, the window never shrinks), so the NIC never idles again: the
    // remaining segments leave back to back and their timing follows from the link
    // recurrence alone. This holds when no link on the data path is slower than the NIC and
    // no link on the ACK path takes longer for an ACK than the NIC for a full segment (ACKs
    // keep their spacing); otherwise the replay runs to the end. Two ways to know that the
    // ACKs come back regularly:
    // - an ACK per segment: the NIC has been busy for longer than one ACK loop (so the ACK
    //   just received is for a segment sent in this busy period, and so are all later
    //   ones); ACKs then come one NIC time `T` apart, and a backlog of more than `T` lasts
    //   until the next;
    // - delayed ACKs (every second segment): the ACK just received was sent on the arrival
    //   of a segment `m` that left the NIC in this busy period (a timer's ACK may be for a
    //   segment of long before). An ACK leaves nothing pending at the receiver, so the next
    //   ACK is sent on the arrival of `m + 2`, which left the NIC `2T` after `m`: ACKs come
    //   `2T` apart, each opening at least two segments, and a backlog of more than `2T`
    //   lasts until the next.
    let full = p.mss + p.header;
    let nic_full = fwd[0].clock.tx(full);
    let nic_bottleneck = fwd.iter().all(|h| h.clock.tx(full) <= nic_full)
        && rev.iter().all(|h| h.clock.tx(p.header) <= nic_full);
    // (Used without delayed ACKs.)
    let ack_loop: Time = fwd.iter().map(|h| h.clock.tx(full) + h.delay).sum::<Time>()
        + rev
            .iter()
            .map(|h| h.clock.tx(p.header) + h.delay)
            .sum::<Time>()
        + nic_full;
    let mut nic_busy_since: Time = 0;
    // The trigger of the ACK just received (see `Queue::packets`), if the last event was one.
    let mut after_ack: Option<Option<Time>> = None;
    // The NIC start of the segment whose arrival is being handled, while the receiver's
    // replies are routed.
    let mut trigger: Option<Time> = None;
    snd.start(p, 0, &mut out);
    let mut now: Time = 0;
    // Segments sent at least once: new data leaves in order, so the next first sending is
    // of this segment.
    let mut first_sends: u32 = 0;
    loop {
        // Route what the endpoints emitted at `now`.
        for pkt in out.drain(..) {
            match pkt.kind {
                kind::DATA | kind::SYN => {
                    if now > busy_f[0] {
                        nic_busy_since = now;
                    }
                    if pkt.kind == kind::DATA && pkt.seq == first_sends {
                        report(Milestone::FirstSend {
                            seq: pkt.seq,
                            now,
                            busy_f: &busy_f,
                        });
                        first_sends += 1;
                    }
                    let start = now.max(busy_f[0]);
                    let t = traverse(fwd, &mut busy_f, now, pkt.bytes as u32);
                    let i = q.store(pkt, Some(start));
                    q.push(t, Ev::AtReceiver(i));
                }
                _ => {
                    let t = traverse(rev, &mut busy_r, now, pkt.bytes as u32);
                    let i = q.store(pkt, trigger);
                    q.push(t, Ev::AtSender(i));
                }
            }
        }
        trigger = None;
        if let Some(ack_trigger) = after_ack {
            let steady = if p.delayed_ack {
                ack_trigger.is_some_and(|s| s >= nic_busy_since) && busy_f[0] > now + 2 * nic_full
            } else {
                now.saturating_sub(nic_busy_since) >= ack_loop && busy_f[0] > now + nic_full
            };
            if skip && steady && nic_bottleneck && snd.snd_max() < snd.total_segments() {
                report(Milestone::Skip {
                    from: snd.snd_max(),
                    now,
                    busy_f: &busy_f,
                });
                let t = back_to_back(
                    fwd,
                    &mut busy_f,
                    now,
                    snd.snd_max()..snd.total_segments(),
                    size,
                    p,
                );
                return (t, true);
            }
        }
        if let Some(d) = snd.rto_deadline {
            if rto_at.is_none_or(|a| d < a) {
                rto_at = Some(d);
                q.push(d, Ev::Rto);
            }
        }
        if let Some(d) = rcv.delack_deadline {
            if delack_at.is_none_or(|a| d < a) {
                delack_at = Some(d);
                q.push(d, Ev::DelAck);
            }
        }
        let Some((t, ev)) = q.pop() else {
            unreachable!("an unfinished idle flow always has a pending event")
        };
        now = t;
        after_ack = None;
        match ev {
            Ev::AtReceiver(i) => {
                q.free.push(i);
                let (pkt, sent) = q.packets[i];
                trigger = sent;
                if rcv.on_packet(p, &pkt, now, &mut out) {
                    return (now, false);
                }
            }
            Ev::AtSender(i) => {
                q.free.push(i);
                let (pkt, ack_trigger) = q.packets[i];
                after_ack = Some(ack_trigger);
                snd.on_packet(p, &pkt, rcv.sack_log(), now, &mut out)
            }
            Ev::Rto => {
                if rto_at == Some(now) {
                    rto_at = None;
                    match snd.rto_deadline {
                        Some(d) if d <= now => snd.on_timeout(p, now, &mut out),
                        _ => {}
                    }
                }
            }
            Ev::DelAck => {
                if delack_at == Some(now) {
                    delack_at = None;
                    match rcv.delack_deadline {
                        Some(d) if d <= now => rcv.on_delack_timer(0, p, &mut out),
                        _ => {}
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TcpConfig;
    use crate::transport::NewReno;
    use crate::units::Rate;

    fn hops(n: usize, rate: u64, delay: Time) -> Vec<Hop> {
        vec![
            Hop {
                clock: TxClock::new(Rate(rate)),
                delay
            };
            n
        ]
    }

    /// Link rates the randomized tests draw from (the last slower than the others).
    const RATES: [u64; 5] = [
        1_000_000_000,
        10_000_000_000,
        40_000_000_000,
        3_000_000_000,
        100_000_000,
    ];

    /// A seeded stream of draws: each call gives a number below its argument.
    fn draws(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut x = seed;
        move |n| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % n
        }
    }

    #[test]
    fn one_packet_without_handshake_is_store_and_forward() {
        let mut p = TcpParams::from_config(&TcpConfig::default());
        p.handshake = false;
        let f = hops(3, 1_000_000_000, 1_000_000);
        // 1000 B payload + 40 B header = 1040 B = 8.32 us per hop, + 1 us delay per hop.
        let t = ideal_fct(&f, &f, 1000, &p, Box::new(NewReno));
        assert_eq!(t, 3 * (8_320_000 + 1_000_000));
    }

    #[test]
    fn handshake_adds_one_small_round_trip() {
        let mut p = TcpParams::from_config(&TcpConfig::default());
        let f = hops(2, 1_000_000_000, 1_000_000);
        p.handshake = false;
        let a = ideal_fct(&f, &f, 1000, &p, Box::new(NewReno));
        p.handshake = true;
        let b = ideal_fct(&f, &f, 1000, &p, Box::new(NewReno));
        // SYN and SYN-ACK: 40 B = 0.32 us per hop + 1 us delay, 2 hops each way.
        assert_eq!(b - a, 4 * (320_000 + 1_000_000));
    }

    /// The skip over steady state gives what sending every segment one by one gives: paths
    /// with faster, equal and slower hops after the NIC, busy or idle links, sizes that are and
    /// are not multiples of the MSS, a tiny last segment, header sizes.
    #[test]
    fn back_to_back_skip_is_exact() {
        let mut next = draws(0x1234_5678);
        let rates = &RATES[..4];
        let mut skipped_something = false;
        for case in 0..400 {
            let mut p = TcpParams::from_config(&TcpConfig::default());
            p.header = [40, 52, 1][case % 3];
            let n = 1 + next(6) as usize;
            let hops: Vec<Hop> = (0..n)
                .map(|_| Hop {
                    clock: TxClock::new(Rate(rates[next(4) as usize])),
                    delay: next(3) * 1_000_000,
                })
                .collect();
            let size = match case % 4 {
                0 => (1 + next(300)) * p.mss as u64,
                1 => (1 + next(300)) * p.mss as u64 + 1,
                _ => 1 + next(500_000),
            };
            let total = p.segments(size);
            let first = next(total as u64) as u32;
            let now = 5_000_000 + next(1000);
            let busy0: Vec<Time> = (0..n)
                .map(|j| {
                    if j == 0 {
                        now + 1 + next(50_000_000)
                    } else {
                        next(80_000_000)
                    }
                })
                .collect();
            let mut want_busy = busy0.clone();
            let mut want = 0;
            for seq in first..total {
                want = traverse(&hops, &mut want_busy, now, p.payload(size, seq) + p.header);
            }
            let mut got_busy = busy0.clone();
            let got = back_to_back(&hops, &mut got_busy, now, first..total, size, &p);
            assert_eq!(
                got, want,
                "case {case}: {n} hops, size {size}, from {first}"
            );
            assert_eq!(got_busy, want_busy, "case {case}");
            skipped_something |= total - first > 10 && n > 1;
        }
        assert!(skipped_something);
    }

    /// The whole replay with the skip gives what it gives without, for every profile (with
    /// and without delayed ACKs, SACK, handshakes), initial windows, receive-window caps,
    /// paths whose data or ACK links are faster, equal or slower than the NIC, and sizes
    /// from one segment to thousands; and the skip is taken on both kinds of profile.
    #[test]
    fn skipping_steady_state_is_exact() {
        use crate::config::TcpProfile;
        let mut next = draws(0x9e37_79b9);
        let rates = RATES;
        let profiles = [
            TcpProfile::Dc,
            TcpProfile::Linux,
            TcpProfile::Ns2,
            TcpProfile::Ns3Of2014,
        ];
        let mut skipped = [0u32; 2];
        for case in 0..600 {
            let mut c = TcpConfig::for_profile(profiles[case % 4]);
            if next(2) == 0 {
                c.init_cwnd = 1 + next(16) as u32;
            }
            if next(4) == 0 {
                c.max_window = None;
            }
            if next(4) == 0 {
                c.delayed_ack = !c.delayed_ack;
            }
            let p = TcpParams::from_config(&c);
            let n = 1 + next(6) as usize;
            let uniform = next(3) != 0;
            let mut path = || -> Vec<Hop> {
                let r = rates[next(5) as usize];
                (0..n)
                    .map(|_| {
                        let rate = if uniform { r } else { rates[next(5) as usize] };
                        Hop {
                            clock: TxClock::new(Rate(rate)),
                            delay: next(4) * 1_000_000,
                        }
                    })
                    .collect()
            };
            let fwd = path();
            let rev = path();
            let size = match case % 3 {
                0 => 1 + next(20 * p.mss as u64),
                1 => (1 + next(3000)) * p.mss as u64,
                _ => 1 + next(3000 * p.mss as u64),
            };
            let cc = || Box::new(NewReno) as Box<dyn CongestionControl>;
            let (want, never) = replay(&fwd, &rev, size, &p, cc(), false, &mut |_| {});
            assert!(!never);
            let (got, skip) = replay(&fwd, &rev, size, &p, cc(), true, &mut |_| {});
            assert_eq!(
                got, want,
                "case {case}: {:?}, delayed ACKs {}, size {size}, {n} hops",
                c.profile, p.delayed_ack
            );
            skipped[p.delayed_ack as usize] += skip as u32;
        }
        assert!(
            skipped[0] > 20 && skipped[1] > 20,
            "the skip was taken too rarely to be tested: {skipped:?}"
        );
    }

    /// One replay for many sizes gives what one replay per size gives, without skipping:
    /// every profile, delayed ACKs on and off, windows that do and do not fill the NIC (the
    /// fixed window of pFabric's transport among them), uniform and mixed paths, sizes from
    /// one byte to thousands of segments, repeated, in any order.
    #[test]
    fn one_replay_for_many_sizes_is_exact() {
        use crate::config::TcpProfile;
        use crate::scheme::PfabricTransport;
        let mut next = draws(0x5eed_1dea);
        let profiles = [
            TcpProfile::Dc,
            TcpProfile::Linux,
            TcpProfile::Ns2,
            TcpProfile::Ns3Of2014,
        ];
        let (mut skipped, mut fixed) = (0, 0);
        for case in 0..240 {
            let mut c = TcpConfig::for_profile(profiles[case % 4]);
            if next(2) == 0 {
                c.init_cwnd = 1 + next(16) as u32;
            }
            if next(4) == 0 {
                c.delayed_ack = !c.delayed_ack;
            }
            let mut p = TcpParams::from_config(&c);
            // Half the cases: pFabric's transport, a fixed window of 1 to 20 segments.
            let window = (case % 2 == 1).then(|| 1 + next(20) as u32);
            if let Some(w) = window {
                p.init_cwnd = w;
                p.max_window = w;
                p.dupack_threshold = u32::MAX;
                fixed += 1;
            }
            let cc = || -> Box<dyn CongestionControl> {
                match window {
                    Some(window) => Box::new(PfabricTransport { window }),
                    None => Box::new(NewReno),
                }
            };
            let n = 1 + next(6) as usize;
            let uniform = next(3) != 0;
            let mut path = || -> Vec<Hop> {
                let r = RATES[next(5) as usize];
                (0..n)
                    .map(|_| Hop {
                        clock: TxClock::new(Rate(if uniform {
                            r
                        } else {
                            RATES[next(5) as usize]
                        })),
                        delay: next(4) * 1_000_000,
                    })
                    .collect()
            };
            let (fwd, rev) = (path(), path());
            let mss = p.mss as u64;
            let mut sizes: Vec<u64> = (0..12)
                .map(|j| match j % 4 {
                    0 => 1 + next(3 * mss),
                    1 => (1 + next(40)) * mss,
                    2 => 1 + next(40 * mss),
                    _ => 1 + next(2000 * mss),
                })
                .collect();
            sizes.push(sizes[3]);
            let got = ideal_fcts(&fwd, &rev, &sizes, &p, cc());
            let largest = *sizes.iter().max().unwrap();
            skipped += replay(&fwd, &rev, largest, &p, cc(), true, &mut |_| {}).1 as u32;
            for (&size, &t) in sizes.iter().zip(&got) {
                let (want, _) = replay(&fwd, &rev, size, &p, cc(), false, &mut |_| {});
                assert_eq!(
                    t, want,
                    "case {case}: {:?}, window {window:?}, delayed ACKs {}, size {size}, {n} hops",
                    c.profile, p.delayed_ack
                );
            }
        }
        // Both ways of settling a size were taken.
        assert!(
            skipped > 20 && fixed > 100,
            "skipped {skipped}, fixed windows {fixed}"
        );
    }

    #[test]
    fn initial_window_is_pipelined() {
        let mut p = TcpParams::from_config(&TcpConfig::default());
        p.handshake = false;
        let f = hops(2, 1_000_000_000, 0);
        // 12 full segments fit the initial window: the last leaves the NIC after 12 × 12 us
        // and crosses the second hop in another 12 us.
        let t = ideal_fct(&f, &f, 12 * 1460, &p, Box::new(NewReno));
        assert_eq!(t, 13 * 12_000_000);
    }
}
