//! A packet's hop in the event loop: admission at a port (FIFO or priority-scheduled),
//! transmit completions, lazy catch-up of the ports, and arrival at the link's far end.

use super::world::{on_data_path, End, World};
use crate::engine::{Place, Time};
use crate::network::NodeKind;
use crate::packet::Packet;

impl<'a, const P: bool> World<'a, P> {
    #[inline(always)]
    pub(super) fn enqueue(&mut self, link: u32, pkt: Packet) {
        if !self.ports[link as usize].is_fast() {
            self.enqueue_other(link, pkt);
            return;
        }
        self.enqueue_fifo::<true>(link, pkt);
    }

    /// Offers a packet to a port off the fast path: a priority-scheduled one, or a FIFO port
    /// whose clock is not exact.
    #[cold]
    #[inline(never)]
    pub(super) fn enqueue_other(&mut self, link: u32, pkt: Packet) {
        if self.ports[link as usize].is_scheduled() {
            self.enqueue_scheduled(link, pkt);
            return;
        }
        self.enqueue_fifo::<false>(link, pkt);
    }

    /// Offers a packet to a FIFO port (`FAST`: one of which [`Port::is_fast`] holds) and
    /// schedules its arrival if it found the link idle.
    ///
    /// [`Port::is_fast`]: crate::port::Port::is_fast
    #[inline(always)]
    pub(super) fn enqueue_fifo<const FAST: bool>(&mut self, link: u32, pkt: Packet) {
        if P {
            self.enqueue_fifo_part::<FAST>(link, pkt);
            return;
        }
        let port = &mut self.ports[link as usize];
        let r = if FAST {
            port.enqueue_fast(pkt, self.now)
        } else {
            port.enqueue_general(pkt, self.now)
        };
        match r {
            Some(true) => {
                let t = port.head_arrival().expect("just enqueued");
                self.q.push_near(t, link);
            }
            Some(false) => {}
            None => self.count_drops(link, 1),
        }
    }

    /// Offers a packet to a priority-scheduled (pFabric) port.
    #[cold]
    #[inline(never)]
    pub(super) fn enqueue_scheduled(&mut self, link: u32, pkt: Packet) {
        let c = &self.conns[pkt.conn as usize];
        let priority = self.scheme.priority.expect("a scheme with priority ports");
        let prio = priority(&pkt, c.snd.size(), self.tcp.mss);
        let done_id = self.tx_done_id(link);
        let lazy = self.lazy_completions(link);
        let place = self.q.last_place();
        if lazy {
            self.catch_up(link, self.now, place);
        }
        let port = &mut self.ports[link as usize];
        let r = port.sched_enqueue(pkt, prio, self.now, place, lazy);
        if P {
            if r.started.is_some() {
                self.wire_admitted(link, place);
            }
        } else if r.head_arrival {
            let t = port.head_arrival().expect("just sent");
            self.q.push_near(t, link);
        }
        if r.started.is_some() {
            // The completion's place in the order; it becomes an event only if a packet
            // comes to wait for it.
            let port = &mut self.ports[link as usize];
            port.sched_set_tx_place(self.q.place(done_id));
        }
        if let Some((t, place)) = r.tx_done {
            self.q.push_near_at(t, done_id, place);
        }
        if r.dropped > 0 {
            self.count_drops(link, r.dropped as u64);
        }
    }

    /// Near-event id of link `link`'s transmit completion (arrivals use the link id).
    pub(super) fn tx_done_id(&self, link: u32) -> u32 {
        self.ports.len() as u32 + link
    }

    /// Whether scheduled port `link` decides its transmit completions late, at the next
    /// event that sees the port ([`Port::sched_catch_up`]), instead of as events of their
    /// own: in a sequential run, on a link with a propagation delay. (A partitioned run
    /// keeps the events: the arrival that would decide them may be another part's. The
    /// `tie-stats` build keeps them too: it records every event's ancestry.) Either way the
    /// run is the same, bit for bit; each completion decided late counts as an event.
    ///
    /// [`Port::sched_catch_up`]: crate::port::Port::sched_catch_up
    #[inline]
    pub(super) fn lazy_completions(&self, link: u32) -> bool {
        !P && !cfg!(feature = "tie-stats") && self.ports[link as usize].sched_lazy_ok()
    }

    /// A packet arrives at the end of link `link`, whose port is off the fast path: if the
    /// port is scheduled and decides its completions late, those before this event are
    /// decided first (the next packet on the wire may be one of them).
    #[cold]
    #[inline(never)]
    pub(super) fn catch_up_before_arrival(&mut self, link: u32) {
        if self.ports[link as usize].is_scheduled() && self.lazy_completions(link) {
            self.catch_up(link, self.now, self.q.last_place());
        }
    }

    /// Decides scheduled port `link`'s completions before `now` and `place`
    /// ([`Port::sched_catch_up`]), counted as events; returns the time of the last, if any.
    ///
    /// [`Port::sched_catch_up`]: crate::port::Port::sched_catch_up
    #[inline]
    pub(super) fn catch_up(&mut self, link: u32, now: Time, place: Place) -> Option<Time> {
        let done_id = self.tx_done_id(link);
        let (n, last) = self.ports[link as usize].sched_catch_up(now, place, done_id);
        self.counters.events += n;
        (n > 0).then_some(last)
    }

    /// At the end of a sequential run, whose events from `limit` on were not run: the
    /// completions before `limit` that no later event decided are decided now, as their
    /// events would have been; the run's time moves to the last of them.
    pub(super) fn catch_up_at_end(&mut self, limit: Time) {
        if self.scheme.priority.is_none() {
            return;
        }
        for link in 0..self.ports.len() as u32 {
            if !self.ports[link as usize].is_scheduled() || !self.lazy_completions(link) {
                continue;
            }
            if let Some(last) = self.catch_up(link, limit, ((0, 0), 0)) {
                self.now = self.now.max(last);
            }
        }
    }

    /// A scheduled port finished a transmission: it starts its next packet.
    pub(super) fn on_tx_done(&mut self, link: u32) {
        let done_id = self.tx_done_id(link);
        let place = self.q.last_place();
        let port = &mut self.ports[link as usize];
        if let Some((_, wire_was_empty)) = port.sched_tx_done(self.now) {
            if P {
                self.wire_admitted(link, place);
            } else if wire_was_empty {
                let t = port.head_arrival().expect("just sent");
                self.q.push_near(t, link);
            }
            let port = &mut self.ports[link as usize];
            port.sched_set_tx_place(self.q.place(done_id));
            if let Some((t, place)) = port.sched_claim_tx_event() {
                self.q.push_near_at(t, done_id, place);
            }
        }
    }

    #[cold]
    #[inline(never)]
    pub(super) fn count_drops(&mut self, link: u32, n: u64) {
        if n == 0 {
            return;
        }
        self.counters.drops += n;
        if self.topo.nodes[self.topo.links[link as usize].from as usize] == NodeKind::Host {
            self.counters.host_drops += n;
        } else {
            self.counters.switch_drops += n;
        }
    }

    /// A packet reached the end of `link`. Returns whether it reached its end host (only
    /// then can the run's end condition change).
    #[inline]
    pub(super) fn on_arrive(&mut self, link: u32) -> bool {
        if !P && !self.ports[link as usize].is_fast() {
            self.catch_up_before_arrival(link);
        }
        let port = &mut self.ports[link as usize];
        let mut pkt = port.pop_arrived();
        // The next packet's arrival is this event's first push, whether or not a packet is
        // there yet: the places of its other pushes do not depend on that (in a partitioned
        // run the packet may have been admitted by a queue not yet run to this time).
        let anc = self.q.take_anc();
        if P {
            // Unless its admission scheduled it already (see `wire_admitted`).
            pkt.hop &= !crate::packet::HOP_WIRE_SCHEDULED;
            if let Some(h) = port.head_packet() {
                if h.hop & crate::packet::HOP_WIRE_SCHEDULED == 0 {
                    let t = port.head_arrival().expect("a head packet");
                    self.q.push_near_taken(t, link, anc);
                }
            }
        } else if let Some(t) = port.head_arrival() {
            self.q.push_near_taken(t, link, anc);
        }
        // Hops are counted by the ports (`Port::packets`), summed after the run.
        let forward = on_data_path(pkt.kind);
        // Compact per-connection paths (not the whole connection state) on the per-hop path.
        if let Some(next) = self.paths.advance(&mut pkt, !forward as usize) {
            self.enqueue(next, pkt);
            return false;
        }
        // At the end host.
        self.counters.packets_delivered += 1;
        let conn_id = pkt.conn;
        let tcp = self.tcp;
        let now = self.now;
        let mut out = std::mem::take(&mut self.out);
        let c = &mut self.conns[conn_id as usize];
        if c.multipath {
            self.out = out;
            self.mp_arrive(conn_id, &pkt, forward);
            return true;
        }
        let end = if forward {
            let completed = c.rcv.on_packet(&tcp, &pkt, now, &mut out);
            self.out = out;
            if P {
                self.note_for_other_end(conn_id, End::Receiver);
            }
            if completed {
                self.copy_completed(conn_id);
            }
            End::Receiver
        } else {
            c.snd.on_packet(&tcp, &pkt, c.rcv.sack_log(), now, &mut out);
            self.out = out;
            End::Sender
        };
        self.flush(conn_id, end);
        true
    }

    /// A packet of a multipath subflow reached its end host.
    #[cold]
    #[inline(never)]
    pub(super) fn mp_arrive(&mut self, conn_id: u32, pkt: &Packet, forward: bool) {
        let tcp = self.tcp;
        let now = self.now;
        let mut out = std::mem::take(&mut self.out);
        if forward {
            let c = &mut self.conns[conn_id as usize];
            c.rcv.on_packet(&tcp, pkt, now, &mut out);
            self.out = out;
            if P {
                self.note_for_other_end(conn_id, End::Receiver);
            }
            self.flush(conn_id, End::Receiver);
            self.mp_data(conn_id, pkt);
        } else {
            self.mp_couple(conn_id);
            let c = &mut self.conns[conn_id as usize];
            let una = c.snd.snd_una();
            c.snd.on_packet(&tcp, pkt, c.rcv.sack_log(), now, &mut out);
            if let Some((from, to)) = c.snd.take_report(&c.rcv, pkt.flags) {
                c.snd.on_loss_report(&tcp, from, to, now, &mut out);
            }
            self.out = out;
            self.flush(conn_id, End::Sender);
            self.mp_acked(conn_id, una);
        }
    }
}
