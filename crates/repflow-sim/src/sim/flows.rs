//! A flow's life in the event loop: arrival and admission, its copies and their five-tuples
//! (SmartRep's HCA), connection start, the packets a connection emits, completion,
//! cancellation and the TCP timers.

use super::world::{
    ev, on_data_path, Conn, End, FlowState, World, EV_CANCEL, EV_DELACK, EV_FLOW, EV_HCA,
    EV_RELEASE, EV_RTO, NO_MP,
};
use crate::engine::Time;
use crate::hca::{disjoint_paths, paths_collide};
use crate::network::FiveTuple;
use crate::replication::FlowSpec;
use crate::transport::{Receiver, Sender};
use crate::workload::Arrival;

impl<'a, const P: bool> World<'a, P> {
    /// Draws the next arrival and schedules its flow event. The chain of flow events is
    /// independent of the network: each is scheduled by the one before as its first push
    /// (push index 0; the first before any event), at its arrival time or the previous
    /// flow's if earlier, so its time and place follow from the arrivals alone (a
    /// partitioned run draws them ahead).
    pub(super) fn schedule_next_arrival(&mut self) {
        match self.draw_arrival() {
            Some(a) => {
                let id = self.arrivals_scheduled - 1;
                let t = a.time.max(self.now);
                let anc = self.q.take_anc();
                self.q.push_timer_as(t, ev(EV_FLOW, id as u32), anc);
                self.pending = Some((a, t, anc));
            }
            _ => {
                self.q.take_anc();
                self.arrivals_done = true;
            }
        }
    }

    /// The next arrival, counted, unless the arrivals (or `workload.max_flows`) are
    /// exhausted.
    pub(super) fn draw_arrival(&mut self) -> Option<Arrival> {
        let capped = self
            .cfg
            .workload
            .max_flows
            .is_some_and(|m| self.arrivals_scheduled >= m);
        let next = self.arrivals.next(self.end_arrivals);
        let a = next.filter(|_| !capped)?;
        self.arrivals_scheduled += 1;
        Some(a)
    }

    /// Flow event `id`: the flow's arrival (drawn when its event was scheduled) becomes a
    /// flow. (A partitioned run admitted it when it drew it, and scheduled the next.)
    pub(super) fn on_flow(&mut self, id: u32) {
        if P {
            self.q.take_anc();
            self.launch_flow(id);
            return;
        }
        let (a, t, _) = self.pending.take().expect("a flow event has its arrival");
        self.schedule_next_arrival();
        let admitted = self.admit_flow(a, t);
        debug_assert_eq!(admitted, id);
        self.launch_flow(id);
    }

    /// Records flow `arrival` (its event due at `t`) with its copies, their five-tuples and
    /// connections: all that depends on the arrivals alone (the replication policy's port
    /// draws included), so that flows and connections are numbered in arrival order however
    /// a run is partitioned. Returns the flow's id.
    pub(super) fn admit_flow(&mut self, a: Arrival, t: Time) -> u32 {
        let (src, dst, size) = (a.src, a.dst, a.size);
        let id = self.flows.len() as u64;
        let spec = FlowSpec { id, src, dst, size };
        if self.scheme.multipath.is_some() {
            self.admit_mp_flow(spec, t);
            return id as u32;
        }
        self.copies_buf.clear();
        let paths = disjoint_paths(&self.topo, src, dst);
        self.scheme
            .policy
            .plan_paths(&spec, paths, &mut self.rng_ports, &mut self.copies_buf);
        let first_conn = self.conns.len() as u32;
        let n = self.copies_buf.len();
        self.push_flow(spec, t, first_conn, n as u8, NO_MP);
        for i in 0..n {
            let c = self.copies_buf[i];
            let tuple = FiveTuple {
                src,
                dst,
                sport: c.sport,
                dport: c.dport,
                proto: 6,
            };
            let conn_id = self.conns.len() as u32;
            let conn = self.new_conn(conn_id, id as u32, i as u8, tuple, size);
            self.paths.push(conn.fwd, conn.rev);
            self.conns.push(conn);
        }
        id as u32
    }

    /// A connection of `size` bytes, copy `copy` of flow `flow`, on five-tuple `t`.
    pub(super) fn new_conn(
        &self,
        conn_id: u32,
        flow: u32,
        copy: u8,
        t: FiveTuple,
        size: u64,
    ) -> Conn {
        let (fwd, rev) = (self.topo.path(t), self.topo.path(t.reversed()));
        let snd = Sender::new(conn_id, size, &self.tcp, (self.scheme.cc)(t.dport));
        let total = snd.total_segments();
        Conn {
            flow,
            copy,
            tuple: t,
            fwd,
            rev,
            snd,
            rcv: Receiver::new(total, self.tcp.sack),
            rto_at: None,
            delack_at: None,
            wire_bytes: 0,
            completed_at: None,
            multipath: false,
        }
    }

    /// Starts flow `id` at its source: SmartRep's HCA may replace its copies' source ports
    /// (and drop copies beyond the link-disjoint paths it finds), then the copies start, at
    /// once or after the probes.
    pub(super) fn launch_flow(&mut self, id: u32) {
        let f = &self.flows[id as usize];
        if f.mp != NO_MP {
            self.launch_mp_flow(id);
            return;
        }
        let (first_conn, spec) = (f.first_conn, f.spec);
        let hca_wait = self.choose_hca_ports(id);
        let n = self.flows[id as usize].copies as u32;
        self.counters.extra_copy_bytes += spec.size * (n as u64 - 1);
        self.counters.connections += n as u64;
        if hca_wait == 0 {
            for c in first_conn..first_conn + n {
                self.start_conn(c);
            }
        }
        if n > 1 {
            self.count_collisions(first_conn, n);
        }
        if hca_wait > 0 {
            self.q.push_timer(self.now + hca_wait, ev(EV_HCA, id));
        }
    }

    /// Counts a new flow, due at `t`, and records its state (`mp`: its connection level, or
    /// [`NO_MP`]).
    pub(super) fn push_flow(
        &mut self,
        spec: FlowSpec,
        t: Time,
        first_conn: u32,
        copies: u8,
        mp: u32,
    ) {
        self.counters.flows += 1;
        self.counters.flow_bytes += spec.size;
        if t < self.end_arrivals {
            self.counters.offered_load += spec.size as f64;
        }
        self.flows.push(FlowState {
            spec,
            start: t,
            first_conn,
            copies,
            finish: None,
            winner: -1,
            mp,
        });
    }

    pub(super) fn start_conn(&mut self, conn_id: u32) {
        let tcp = self.tcp;
        let now = self.now;
        let mut out = std::mem::take(&mut self.out);
        self.conns[conn_id as usize].snd.start(&tcp, now, &mut out);
        self.out = out;
        self.flush(conn_id, End::Sender);
    }

    /// Starts the copies of a flow that waited for its HCA probes.
    pub(super) fn start_probed_flow(&mut self, flow: u32) {
        let f = &self.flows[flow as usize];
        let (first, n) = (f.first_conn, f.copies as u32);
        for c in first..first + n {
            self.start_conn(c);
        }
    }

    /// Replaces the planned source ports of a multi-copy flow by HCA's (once per flow, off
    /// the per-packet path); drops copies beyond the link-disjoint paths found (their
    /// connections stay numbered but never start). Returns how long the flow waits for its
    /// probes.
    pub(super) fn choose_hca_ports(&mut self, id: u32) -> Time {
        let f = &self.flows[id as usize];
        let (first, n, spec) = (f.first_conn, f.copies as u32, f.spec);
        let Some(hca) = self.scheme.hca.as_mut() else {
            return 0;
        };
        if n < 2 || !self.scheme.policy.probes_paths() {
            return 0;
        }
        let dport = self.conns[first as usize].tuple.dport;
        let Some(wait) = hca.choose(
            &self.topo,
            spec.src,
            spec.dst,
            dport,
            n,
            &mut self.hca_ports,
        ) else {
            return 0;
        };
        let kept = self.hca_ports.len().max(1) as u32;
        for i in 0..self.hca_ports.len() as u32 {
            let c = first + i;
            let mut t = self.conns[c as usize].tuple;
            t.sport = self.hca_ports[i as usize];
            t.dport = dport;
            self.retuple_conn(id, c, t);
            if P {
                self.note_hca(id, c, t, kept as u8);
            }
        }
        self.flows[id as usize].copies = kept as u8;
        wait
    }

    /// Gives connection `conn` of flow `flow` five-tuple `t`: a fresh connection, on that
    /// tuple's paths (SmartRep's HCA, before the connection starts).
    pub(super) fn retuple_conn(&mut self, flow: u32, conn: u32, t: FiveTuple) {
        let copy = self.conns[conn as usize].copy;
        let size = self.flows[flow as usize].spec.size;
        let c = self.new_conn(conn, flow, copy, t, size);
        self.paths.set(conn, c.fwd, c.rev);
        self.conns[conn as usize] = c;
    }

    /// Counts a replicated flow, and a collision when two of its copies share a
    /// switch-to-switch link.
    pub(super) fn count_collisions(&mut self, first: u32, n: u32) {
        self.counters.replicated_flows += 1;
        let conns = &self.conns[first as usize..(first + n) as usize];
        let collide = (0..conns.len()).any(|i| {
            (i + 1..conns.len())
                .any(|j| paths_collide(&self.topo, conns[i].fwd.links(), conns[j].fwd.links()))
        });
        if collide {
            self.counters.copy_collisions += 1;
        }
    }

    /// Injects the packets one end of a connection emitted and re-arms that end's timer (the
    /// sender's retransmission timer, the receiver's delayed ACK): an event at one end
    /// changes nothing at the other.
    pub(super) fn flush(&mut self, conn_id: u32, end: End) {
        let mut out = std::mem::take(&mut self.out);
        let mut wire = 0;
        for mut pkt in out.iter().copied() {
            wire += pkt.bytes as u64;
            let dir = !on_data_path(pkt.kind) as usize;
            let first = self.paths.first(&mut pkt, dir);
            self.enqueue(first, pkt);
        }
        self.conns[conn_id as usize].wire_bytes += wire;
        self.counters.packets_injected += out.len() as u64;
        out.clear();
        self.out = out;
        let now = self.now;
        let c = &mut self.conns[conn_id as usize];
        match end {
            End::Sender => {
                if let Some(d) = c.snd.deadline() {
                    if c.rto_at.is_none_or(|a| d < a) {
                        c.rto_at = Some(d.max(now));
                        self.q.push_timer(d.max(now), ev(EV_RTO, conn_id));
                    }
                }
            }
            End::Receiver => {
                if let Some(d) = c.rcv.delack_deadline {
                    if c.delack_at.is_none_or(|a| d < a) {
                        c.delack_at = Some(d.max(now));
                        self.q.push_timer(d.max(now), ev(EV_DELACK, conn_id));
                    }
                }
            }
        }
    }

    pub(super) fn copy_completed(&mut self, conn_id: u32) {
        self.conns[conn_id as usize].completed_at = Some(self.now);
        if self.scheme.hca.is_some() {
            self.send_to_source(conn_id, EV_RELEASE);
        }
        let c = &self.conns[conn_id as usize];
        let (flow_id, copy) = (c.flow as usize, c.copy);
        let f = &mut self.flows[flow_id];
        if f.finish.is_some() {
            return;
        }
        f.finish = Some(self.now);
        f.winner = copy as i32;
        self.counters.flows_finished += 1;
        if self.scheme.policy.cancel_losers() && f.copies > 1 {
            let (first, n) = (f.first_conn, f.copies as u32);
            for other in first..first + n {
                if other != conn_id {
                    self.send_to_source(other, EV_CANCEL);
                }
            }
        }
    }

    /// Frees connection `conn`'s source port in SmartRep's HCA table (if the scheme has one).
    pub(super) fn release_port(&mut self, conn: u32) {
        if let Some(h) = self.scheme.hca.as_mut() {
            h.release(self.conns[conn as usize].tuple);
        }
    }

    /// Tells connection `conn`'s source, from its receiver, that something happened there
    /// (event `tag`): it learns it the ACK path's propagation delay later, as from the ACK
    /// that would carry it. (Nothing at a distance acts at once: what happens at one host
    /// depends only on what reached it.)
    pub(super) fn send_to_source(&mut self, conn: u32, tag: u64) {
        let c = &self.conns[conn as usize];
        let delay: Time = c
            .rev
            .links()
            .iter()
            .map(|&l| self.topo.links[l as usize].delay)
            .sum();
        let (t, src) = (self.now + delay, c.tuple.src);
        self.push_timer_at(t, ev(tag, conn), src);
    }

    /// The source of connection `conn` learns that its flow completed: it stops the copy
    /// (and frees its HCA port), or, for a subflow, the whole multipath connection.
    pub(super) fn on_cancel(&mut self, conn: u32) {
        self.conns[conn as usize].snd.cancel();
        self.release_port(conn);
        if self.conns[conn as usize].multipath {
            self.mp_stop(conn);
        }
    }

    pub(super) fn on_rto(&mut self, conn_id: u32) {
        let now = self.now;
        let c = &mut self.conns[conn_id as usize];
        if c.rto_at != Some(now) {
            return; // superseded
        }
        c.rto_at = None;
        match c.snd.deadline() {
            None => {}
            Some(d) if d > now => {
                c.rto_at = Some(d);
                self.q.push_timer(d, ev(EV_RTO, conn_id));
            }
            Some(_) => {
                let tcp = self.tcp;
                let mut out = std::mem::take(&mut self.out);
                let timed_out = c.snd.on_timer(&tcp, now, &mut out);
                let multipath = c.multipath;
                self.out = out;
                self.flush(conn_id, End::Sender);
                if multipath && timed_out {
                    self.mp_timed_out(conn_id);
                }
            }
        }
    }

    pub(super) fn on_delack(&mut self, conn_id: u32) {
        let now = self.now;
        let c = &mut self.conns[conn_id as usize];
        if c.delack_at != Some(now) {
            return;
        }
        c.delack_at = None;
        match c.rcv.delack_deadline {
            None => {}
            Some(d) if d > now => {
                c.delack_at = Some(d);
                self.q.push_timer(d, ev(EV_DELACK, conn_id));
            }
            Some(_) => {
                let tcp = self.tcp;
                let mut out = std::mem::take(&mut self.out);
                c.rcv.on_delack_timer(conn_id, &tcp, &mut out);
                self.out = out;
                if P {
                    // An MPTCP-L report may leave with this ACK.
                    self.note_for_other_end(conn_id, End::Receiver);
                }
                self.flush(conn_id, End::Receiver);
            }
        }
    }
}
