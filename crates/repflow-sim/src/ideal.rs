//! Ideal FCT: the completion time of a flow alone on an idle network along a given path.
//!
//! The flow's own sender and receiver state machines (the same code the simulator runs) are
//! driven over an idle pipeline of store-and-forward FIFO links: with no other traffic, a
//! link's only queueing is behind the flow's own earlier packets, so each packet's arrival
//! follows from `start = max(arrival, previous finish)`, `finish = start + bytes / rate` at
//! every hop. The result is exact: a flow alone in the simulator finishes at this time to the
//! picosecond (a test checks it), and the cost is a small fraction of simulating the flow.

use crate::engine::{EventQueue, Time};
use crate::network::TxClock;
use crate::queue::{kind, Packet};
use crate::transport::{CongestionControl, Receiver, Sender, TcpParams};

/// A link as the idle replay needs it.
#[derive(Clone, Copy, Debug)]
pub struct Hop {
    /// Serialization clock.
    pub clock: TxClock,
    /// Propagation delay, ps.
    pub delay: Time,
}

fn traverse(hops: &[Hop], busy: &mut [Time], t_send: Time, bytes: u32) -> Time {
    let mut t = t_send;
    for (h, b) in hops.iter().zip(busy.iter_mut()) {
        let start = t.max(*b);
        let fin = start + h.clock.tx(bytes);
        *b = fin;
        t = fin + h.delay;
    }
    t
}

enum Ev {
    AtReceiver(Packet),
    AtSender(Packet),
    Rto,
    DelAck,
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
    let mut busy_f = vec![0; fwd.len()];
    let mut busy_r = vec![0; rev.len()];
    let mut snd = Sender::new(0, size, p, cc);
    let mut rcv = Receiver::new(snd.total_segments());
    let mut q: EventQueue<Ev> = EventQueue::new();
    let mut out: Vec<Packet> = Vec::new();
    let mut rto_at: Option<Time> = None;
    let mut delack_at: Option<Time> = None;
    snd.start(p, 0, &mut out);
    let mut now: Time = 0;
    loop {
        // Route what the endpoints emitted at `now`.
        for pkt in out.drain(..) {
            match pkt.kind {
                kind::DATA | kind::SYN => {
                    let t = traverse(fwd, &mut busy_f, now, pkt.bytes);
                    q.push(t, Ev::AtReceiver(pkt));
                }
                _ => {
                    let t = traverse(rev, &mut busy_r, now, pkt.bytes);
                    q.push(t, Ev::AtSender(pkt));
                }
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
        match ev {
            Ev::AtReceiver(pkt) => {
                if rcv.on_packet(p, &pkt, now, &mut out) {
                    return now;
                }
            }
            Ev::AtSender(pkt) => snd.on_packet(p, &pkt, now, &mut out),
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
