//! Multipath connections (MPTCP, MPTCP-L): a flow is one connection of several subflows,
//! each a [`Conn`] with its own five-tuple and TCP state; this file is the connection level
//! above them: the data-level sequence space, the scheduler, reinjection, data-level
//! reassembly at the receiver, LIA's coupling and subflow joins.
//!
//! Simplifications, stated: the connection-level receive buffer is unbounded (each
//! subflow's window is still `tcp.max_window`); the receiver's data-level view is the union
//! of what its subflows delivered, and the sender's (DATA_ACK) the union of what its
//! subflows had acknowledged; the DSS mapping a real packet carries in an option is read
//! from the sending subflow's map. When the receiver holds every byte the flow is complete;
//! the source learns it one ACK path's propagation delay later (as from the DATA_ACK), per
//! subflow, and stops.

use super::mp_flow::{Bits, MpFlow};
use super::world::{Conn, End, World, EV_CANCEL};
use crate::network::FiveTuple;
use crate::packet::Packet;
use crate::replication::{ephemeral_port, FlowSpec, BASE_PORT};
use crate::scheme::{Coupling, Join};
use crate::transport::{Receiver, Sender, SenderState};
use std::collections::VecDeque;

impl<const P: bool> World<'_, P> {
    /// Starts a flow of a multipath scheme: one connection of the plan's subflows.
    pub(super) fn admit_mp_flow(&mut self, spec: FlowSpec, t: crate::engine::Time) {
        let mp = self.scheme.multipath.expect("a multipath scheme");
        let plan = *mp.for_size(spec.size);
        let n = plan.subflows;
        let first_conn = self.conns.len() as u32;
        let size = spec.size;
        let total = self.tcp.segments(size);
        let mp_index = self.mp.len() as u32;
        self.mp.push(MpFlow {
            plan,
            total,
            next_new: 0,
            reinject: VecDeque::new(),
            acked: Bits::new(total),
            held: Bits::new(total),
            held_count: 0,
            cursors: if plan.redundant {
                vec![0; n as usize]
            } else {
                Vec::new()
            },
            joined: mp.join == Join::Start,
            stopped: false,
        });
        self.push_flow(spec, t, first_conn, n as u8, mp_index);
        let mut sports: Vec<u16> = Vec::with_capacity(n as usize);
        for i in 0..n {
            // Distinct source ports: each subflow its own five-tuple.
            let sport = loop {
                let p = ephemeral_port(&mut self.rng_ports);
                if !sports.contains(&p) {
                    break p;
                }
            };
            sports.push(sport);
            let t = FiveTuple {
                src: spec.src,
                dst: spec.dst,
                sport,
                dport: BASE_PORT,
                proto: 6,
            };
            let conn_id = self.conns.len() as u32;
            let (fwd, rev) = (self.topo.path(t), self.topo.path(t.reversed()));
            self.paths.push(fwd, rev);
            let snd = Sender::new_subflow(
                conn_id,
                size,
                &self.tcp,
                (self.scheme.cc)(t.dport),
                plan.detect,
            );
            self.conns.push(Conn {
                flow: spec.id as u32,
                copy: i as u8,
                tuple: t,
                fwd,
                rev,
                snd,
                rcv: Receiver::new_subflow(self.tcp.sack, plan.detect.is_some()),
                rto_at: None,
                delack_at: None,
                wire_bytes: 0,
                completed_at: None,
                multipath: true,
            });
        }
    }

    /// Starts multipath flow `id` at its source: its first subflow, or all of them.
    pub(super) fn launch_mp_flow(&mut self, id: u32) {
        let mp = self.scheme.multipath.expect("a multipath scheme");
        let f = &self.flows[id as usize];
        let (first_conn, n, size) = (f.first_conn, f.copies as u32, f.spec.size);
        let plan = self.mp[f.mp as usize].plan;
        if plan.redundant {
            self.counters.extra_copy_bytes += size * (n as u64 - 1);
        }
        self.counters.connections += n as u64;
        if plan.redundant && n > 1 {
            self.count_collisions(first_conn, n);
        }
        let started = if mp.join == Join::Start { n } else { 1 };
        for c in first_conn..first_conn + started {
            self.start_conn(c);
        }
        self.mp_pump(id);
    }

    /// A subflow's data segment reached the receiver: data-level reassembly; the flow
    /// completes when every segment is held.
    pub(super) fn mp_data(&mut self, conn_id: u32, pkt: &Packet) {
        if pkt.kind != crate::packet::kind::DATA {
            return;
        }
        let c = &self.conns[conn_id as usize];
        let (flow, copy) = (c.flow, c.copy);
        let dsn = c.snd.dsn(pkt.seq);
        let f = &self.flows[flow as usize];
        let m = &mut self.mp[f.mp as usize];
        if !m.held.set(dsn) {
            return;
        }
        m.held_count += 1;
        if m.held_count < m.total || f.finish.is_some() {
            return;
        }
        let (first, n) = (f.first_conn, f.copies as u32);
        let f = &mut self.flows[flow as usize];
        f.finish = Some(self.now);
        f.winner = copy as i32;
        self.counters.flows_finished += 1;
        self.conns[conn_id as usize].completed_at = Some(self.now);
        for s in first..first + n {
            self.send_to_source(s, EV_CANCEL);
        }
    }

    /// The source learns, from subflow `conn`, that the flow completed: the connection level
    /// sends nothing more (each subflow stops as its own word arrives).
    pub(super) fn mp_stop(&mut self, conn: u32) {
        let flow = self.conns[conn as usize].flow;
        let mpi = self.flows[flow as usize].mp as usize;
        self.mp[mpi].stopped = true;
    }

    /// Before an ACK reaches a subflow of a coupled (LIA, OLIA) connection: gives its
    /// congestion control what it needs of the other subflows ([`crate::transport::Coupling`]).
    pub(super) fn mp_couple(&mut self, conn_id: u32) {
        let Some(mp) = self.scheme.multipath else {
            return;
        };
        if mp.coupling == Coupling::Uncoupled {
            return;
        }
        let c = &self.conns[conn_id as usize];
        let f = &self.flows[c.flow as usize];
        if self.mp[f.mp as usize].plan.redundant {
            return;
        }
        let (first, n) = (f.first_conn as usize, f.copies as usize);
        let mut total = 0.0;
        let mut paths = [(0.0, 0.0); crate::scheme::MAX_SUBFLOWS as usize];
        // OLIA's (w, rtt, loss interval) per path, beside LIA's (w, rtt).
        let mut with_losses = [(0.0, 0.0, 0.0); crate::scheme::MAX_SUBFLOWS as usize];
        let mut own = None;
        let mut k = 0;
        for (i, s) in self.conns[first..first + n].iter().enumerate() {
            if s.snd.state != SenderState::Established {
                continue;
            }
            let w = f64::from(s.snd.win.cwnd);
            total += w;
            if let Some(r) = s.snd.srtt() {
                if first + i == conn_id as usize {
                    own = Some(k);
                }
                paths[k] = (w, r.max(1) as f64);
                with_losses[k] = (paths[k].0, paths[k].1, s.snd.loss_interval());
                k += 1;
            }
        }
        let paths = &paths[..k];
        let mut c = crate::transport::Coupling {
            total_cwnd: total,
            ..Default::default()
        };
        match mp.coupling {
            Coupling::Lia => c.alpha = crate::cc::Lia::alpha(paths, total),
            Coupling::Olia => {
                c.sum_w_over_rtt = paths.iter().map(|&(w, r)| w / r).sum();
                if let Some(o) = own {
                    c.own_rtt = paths[o].1;
                    c.olia_alpha = crate::cc::Olia::alpha(&with_losses[..k], o);
                }
            }
            Coupling::Uncoupled => {}
        }
        self.conns[conn_id as usize].snd.couple(&c);
    }

    /// After an ACK on a subflow: the data it acknowledged, a waiting join, and the
    /// scheduler (the ACK may have opened a window).
    pub(super) fn mp_acked(&mut self, conn_id: u32, una_before: u32) {
        let c = &self.conns[conn_id as usize];
        let flow = c.flow;
        let f = &self.flows[flow as usize];
        let (first, n, mpi) = (f.first_conn, f.copies as u32, f.mp as usize);
        for seq in una_before..c.snd.snd_una() {
            let dsn = c.snd.dsn(seq);
            self.mp[mpi].acked.set(dsn);
        }
        if !self.mp[mpi].joined && conn_id == first && c.snd.srtt().is_some() {
            self.mp[mpi].joined = true;
            for s in first + 1..first + n {
                self.start_conn(s);
            }
        }
        self.mp_pump(flow);
    }

    /// After a subflow's retransmission timeout: its unacknowledged data is reinjected on
    /// the other subflows (lowest-RTT scheduler only: a redundant flow sends everything on
    /// every subflow already).
    pub(super) fn mp_timed_out(&mut self, conn_id: u32) {
        let c = &self.conns[conn_id as usize];
        let flow = c.flow;
        let mpi = self.flows[flow as usize].mp as usize;
        if !self.mp[mpi].plan.redundant && self.flows[flow as usize].copies > 1 {
            let mut dsns = Vec::new();
            c.snd.unacked_dsns(&mut dsns);
            let m = &mut self.mp[mpi];
            for d in dsns {
                if !m.acked.has(d) && !m.reinject.contains(&d) {
                    m.reinject.push_back(d);
                }
            }
        }
        self.mp_pump(flow);
    }

    /// Whether multipath flow `mp` sends every segment on every subflow.
    pub(super) fn mp_redundant(&self, mp: u32) -> bool {
        self.mp[mp as usize].plan.redundant
    }

    /// The scheduler: gives data segments to subflows with window space and sends them.
    fn mp_pump(&mut self, flow: u32) {
        let f = &self.flows[flow as usize];
        let (first, n, mpi) = (f.first_conn, f.copies as u32, f.mp as usize);
        if self.mp[mpi].stopped {
            return;
        }
        let tcp = self.tcp;
        let now = self.now;
        if self.mp[mpi].plan.redundant {
            for (i, s) in (first..first + n).enumerate() {
                let mut sent = false;
                while self.conns[s as usize].snd.has_space(&tcp) {
                    let m = &mut self.mp[mpi];
                    let mut d = m.cursors[i];
                    while d < m.total && m.acked.has(d) {
                        d += 1;
                    }
                    if d >= m.total {
                        m.cursors[i] = d;
                        break;
                    }
                    m.cursors[i] = d + 1;
                    self.send_assigned(s, d, &tcp, now);
                    sent = true;
                }
                if sent {
                    self.flush(s, End::Sender);
                }
            }
            return;
        }
        loop {
            // Lowest smoothed RTT with window space (unsampled subflows count as 0; ties go
            // to the earliest subflow).
            let mut best: Option<(u64, u32)> = None;
            for s in first..first + n {
                let snd = &self.conns[s as usize].snd;
                if snd.has_space(&tcp) {
                    let key = snd.srtt().unwrap_or(0);
                    if best.is_none_or(|(k, _)| key < k) {
                        best = Some((key, s));
                    }
                }
            }
            let Some((_, s)) = best else {
                return;
            };
            let m = &mut self.mp[mpi];
            let mut next = None;
            while let Some(d) = m.reinject.pop_front() {
                if !m.acked.has(d) {
                    next = Some(d);
                    break;
                }
            }
            if next.is_none() && m.next_new < m.total {
                next = Some(m.next_new);
                m.next_new += 1;
            }
            let Some(d) = next else {
                return;
            };
            self.send_assigned(s, d, &tcp, now);
            self.flush(s, End::Sender);
        }
    }

    fn send_assigned(&mut self, s: u32, dsn: u32, tcp: &crate::transport::TcpParams, now: u64) {
        let mut out = std::mem::take(&mut self.out);
        let snd = &mut self.conns[s as usize].snd;
        snd.assign(dsn);
        snd.try_send(tcp, now, &mut out);
        self.out = out;
        if P {
            self.note_for_other_end(s, End::Sender);
        }
    }
}
