//! A partitioned run: the network split into parts (fat-tree pods, or single nodes), each
//! with its own event queue, run one lookahead window at a time. Within a window each part
//! runs its own events in order, alone; the events it schedules for another part (a packet
//! that reaches a node of that part, a message to a connection's source) lie at least one
//! lookahead ahead, so they are handed over when the window ends. This is the schedule of a
//! conservative parallel engine, run on one thread: the parts of a window may run in any
//! order (a test runs them in reverse) and the results stay those of the sequential engine,
//! bit for bit, because
//! - events of one time are ordered by their own ancestry, never by a global counter
//!   ([`crate::engine::Anc`]);
//! - what happens at a host depends only on what reached it: completions reach the source
//!   as messages one ACK path's propagation delay later, flows are numbered and their
//!   replication ports drawn in arrival order before they start;
//! - a link is shared by two parts (its port's queue at the sending node, its far end at
//!   the receiving one), and whether the next packet's arrival is scheduled by its
//!   admission or by the arrival of the packet ahead of it is decided from the port's own
//!   history and the window's end (`wire_admitted`), not from which part happened to run
//!   first;
//! - the run ends at the end of the window in which the last flow completes, in both.
//!
//! Everything else a part touches belongs to its nodes, except state read across a link
//! whose content is settled before the reader can see it (a packet's path, the receiver's
//! SACK log prefix an ACK names, MPTCP-L's loss report an ACK's tag names — the receiver
//! keeps every report whatever the sender has read —, the sender's mapping of a segment a
//! packet carries). They live in shared vectors here; a threaded run
//! ([`super::threads`]) gives each part a replica and copies them across at window ends.

use super::error::{Progress, SimError};
use super::parts::{fat_tree_pods, PartitionPlan, Partitioning, Parts};
use super::world::{ev, End, World, DEEP_PREFETCH_LINKS, EV_FLOW};
use crate::engine::{anc_b, Event, EventQueue, Place, Time};
use crate::network::FiveTuple;
use crate::packet::HOP_WIRE_SCHEDULED;
use std::time::Instant;

impl<const P: bool> World<'_, P> {
    /// Splits the network as `plan` says (a partitioned run, before it starts).
    pub(super) fn partition(&mut self, plan: &PartitionPlan) -> Result<(), SimError> {
        self.partition_as(plan, None)
    }

    /// [`World::partition`]; `own`: the one part this world will run (a threaded replica),
    /// whose event queue alone is built (`Parts::queues` then holds that one).
    pub(super) fn partition_as(
        &mut self,
        plan: &PartitionPlan,
        own: Option<u32>,
    ) -> Result<(), SimError> {
        let nodes = self.topo.nodes.len();
        let pods = match plan.partitioning {
            Partitioning::Pods(_) => fat_tree_pods(&self.topo, self.cfg),
            Partitioning::Nodes => None,
        };
        if let (Some(_), Partitioning::Pods(n)) = (own, plan.partitioning) {
            // A thread runs one part: there must be a part of the network for each.
            let (parts, what) = match &pods {
                Some((_, k)) => (*k, "pods of the fat-tree"),
                None => (nodes, "nodes"),
            };
            if n as usize > parts {
                return Err(SimError::Input(format!(
                    "threads: {n} threads, but a thread runs a part of the network and there \
                     are only {parts} {what}: use at most {parts}"
                )));
            }
        }
        if let Some((i, l)) = self
            .topo
            .links
            .iter()
            .enumerate()
            .find(|(_, l)| l.delay == 0)
        {
            return Err(SimError::Input(format!(
                "a partitioned run needs every link's delay above 0 (its lookahead); link {i} \
                 ({} -> {}) has none",
                l.from, l.to
            )));
        }
        let (node_part, n) = match plan.partitioning {
            Partitioning::Nodes => ((0..nodes as u32).collect::<Vec<u32>>(), nodes as u32),
            Partitioning::Pods(0) => {
                return Err(SimError::Input(
                    "a partitioned run needs at least one part".into(),
                ))
            }
            Partitioning::Pods(n) => match pods {
                Some((pod, _)) => (pod.iter().map(|&p| p % n).collect(), n),
                None => ((0..nodes as u32).map(|i| i % n).collect(), n),
            },
        };
        let link_end_part = self
            .topo
            .links
            .iter()
            .map(|l| node_part[l.to as usize])
            .collect();
        // A part's queue holds about 1/n of the events: slots n times wider keep as many
        // events per slot as the sequential queue's (only the speed depends on the width).
        let (ids, slot, horizon) = self.q_shape;
        let slot = slot.saturating_mul(n as u64).min(horizon.max(1));
        let built = if own.is_some() { 1 } else { n };
        let queues = (0..built)
            .map(|_| EventQueue::new(ids, slot, horizon))
            .collect();
        let mut order: Vec<u32> = (0..n).collect();
        if plan.reverse {
            order.reverse();
        }
        self.q = EventQueue::new(0, 1, 1);
        self.part = Some(Box::new(Parts {
            n,
            node_part,
            link_end_part,
            queues,
            cur: u32::MAX,
            window_end: 0,
            inbox: vec![Vec::new(); n as usize],
            wire_last: vec![None; self.topo.links.len()],
            order,
            threaded: None,
        }));
        Ok(())
    }

    pub(super) fn parts(&mut self) -> &mut Parts {
        self.part.as_mut().expect("a partitioned run")
    }

    /// Schedules timer `payload` at `t` for the part of `node` (this part's own queue, or
    /// handed over at the window's end).
    pub(super) fn push_timer_at(&mut self, t: Time, payload: u64, node: u32) {
        if P {
            let p = self.parts();
            let owner = p.node_part[node as usize];
            if owner != p.cur {
                let anc = self.q.take_anc();
                self.parts().send(owner, t, anc, Event::Timer(payload));
                return;
            }
        }
        self.q.push_timer(t, payload);
    }

    /// [`World::enqueue_fifo`] in a partitioned run.
    #[inline(never)]
    pub(super) fn enqueue_fifo_part<const FAST: bool>(
        &mut self,
        link: u32,
        pkt: crate::packet::Packet,
    ) {
        let place = self.q.last_place();
        let port = &mut self.ports[link as usize];
        let r = if FAST {
            port.enqueue_fast(pkt, self.now)
        } else {
            port.enqueue_general(pkt, self.now)
        };
        match r {
            Some(_) => self.wire_admitted(link, place),
            None => self.count_drops(link, 1),
        }
    }

    /// A packet was just admitted to `link` (its port's queue) by the current event, at
    /// `place`.
    ///
    /// The sequential engine schedules a packet's arrival at the link's end when it is
    /// admitted to an empty link (as this event's push), else when the packet ahead of it
    /// arrives (as that arrival's first push). Whether that packet had arrived is a matter
    /// of time order — its arrival event before or after this one — which this part
    /// decides from the time and place of the last admitted packet's arrival event. If the
    /// packet ahead is still on its way and its far end is another part, that part runs
    /// the arrival ahead in this window (before it can see this packet, handed over at the
    /// window's end) exactly when the arrival is before the window's end: then this part
    /// hands this packet's arrival over itself, in the place the arrival ahead would have
    /// given it, and marks the packet so that the far end does not schedule it again;
    /// else it leaves it to the arrival ahead. The answer depends on times alone, not on
    /// which part ran first, nor on whether the parts share the port (one thread) or
    /// the far end holds its own copy of the link's packets (threads).
    pub(super) fn wire_admitted(&mut self, link: u32, place: Place) {
        let now = self.now;
        let p = self.part.as_deref_mut().expect("a partitioned run");
        let port = &mut self.ports[link as usize];
        let (arrival, pkt) = port.last_admitted().expect("just admitted");
        let last = &mut p.wire_last[link as usize];
        let ahead_on_wire =
            last.filter(|&(t, anc)| (t, anc, link as u64) > (now, place.0, place.1));
        let owner = p.link_end_part[link as usize];
        let remote = owner != p.cur;
        let (anc, schedule) = match ahead_on_wire {
            None => (self.q.take_anc(), true),
            // On a link within the part, the arrival ahead (later in time order, run by
            // this part) will see this packet.
            Some((t, a)) => ((t, anc_b(t, a.0, 0)), remote && t < p.window_end),
        };
        *last = Some((arrival, anc));
        if schedule {
            pkt.hop |= HOP_WIRE_SCHEDULED;
        }
        let pkt = *pkt;
        if let Some(x) = p.threaded.as_deref_mut().filter(|_| remote) {
            // The far end's copy of the link gets the packet at the window's end; this
            // copy keeps only what admissions read (packets that have arrived by now no
            // longer count in the backlog).
            x.wire_out[owner as usize].push((link, arrival, pkt));
            port.retire_arrived(now);
        }
        if !schedule {
            return;
        }
        if remote {
            p.send(owner, arrival, anc, Event::Near(link));
        } else {
            // The far end is this part, which runs in time order: the link was empty
            // exactly when the packet ahead had arrived, and the place is this event's.
            self.q.push_near_taken(arrival, link, anc);
        }
    }

    /// A threaded run: `end` of connection `conn` (here) may have written what the other
    /// end's copy reads — the receiver its SACK log or MPTCP-L reports, a subflow's sender
    /// its data-segment assignments —, which must reach the other end's part if that is
    /// another.
    #[inline]
    pub(super) fn note_for_other_end(&mut self, conn: u32, end: End) {
        let p = self.part.as_deref_mut().expect("a partitioned run");
        if let Some(x) = p.threaded.as_deref_mut() {
            let t = self.conns[conn as usize].tuple;
            let (other, dirty) = match end {
                End::Receiver => (t.src, &mut x.sack_dirty),
                End::Sender => (t.dst, &mut x.dsn_dirty),
            };
            if p.node_part[other as usize] != p.cur {
                dirty.push(conn);
            }
        }
    }

    /// A threaded run: HCA gave connection `conn` of flow `flow` five-tuple `t` and the flow
    /// keeps `kept` copies, which every other part must know.
    pub(super) fn note_hca(&mut self, flow: u32, conn: u32, t: FiveTuple, kept: u8) {
        let p = self.part.as_deref_mut().expect("a partitioned run");
        if let Some(x) = p.threaded.as_deref_mut() {
            x.hca_out.push((flow, conn, t, kept));
        }
    }

    /// Admits the flows that arrive before `limit` and hands each flow event to its source's
    /// part, in the place the sequential engine's chain of flow events gives it.
    pub(super) fn draw_arrivals(&mut self, limit: Time) {
        loop {
            if self.pending.is_none() {
                if self.arrivals_done {
                    return;
                }
                match self.draw_arrival() {
                    Some(a) => {
                        // Scheduled by the previous flow event as its first push (the
                        // first before any event).
                        let (t, anc) = match self.gen_prev {
                            None => (a.time, (0, anc_b(0, 0, 0))),
                            Some((pt, pa)) => (a.time.max(pt), (pt, anc_b(pt, pa.0, 0))),
                        };
                        self.pending = Some((a, t, anc));
                    }
                    None => {
                        self.arrivals_done = true;
                        return;
                    }
                }
            }
            let (a, t, anc) = self.pending.expect("drawn above");
            if t >= limit {
                return;
            }
            self.pending = None;
            self.gen_prev = Some((t, anc));
            let id = self.admit_flow(a, t);
            let p = self.parts();
            let owner = p.node_part[a.src as usize];
            // A threaded run admits every flow in every part (the same draws), and each
            // part starts its own.
            if p.threaded.is_none() || owner == p.cur {
                p.inbox[owner as usize].push((t, anc, Event::Timer(ev(EV_FLOW, id))));
            }
        }
    }

    /// Puts the events handed over in this window into their parts' queues.
    fn deliver(&mut self) {
        let p = self.part.as_mut().expect("a partitioned run");
        for (q, inbox) in p.queues.iter_mut().zip(p.inbox.iter_mut()) {
            for (t, anc, e) in inbox.drain(..) {
                match e {
                    Event::Near(id) => q.push_near_remote(t, id, anc),
                    Event::Timer(x) => q.push_timer_remote(t, x, anc),
                }
            }
        }
    }

    /// The earliest pending event of any part, or flow not yet admitted.
    fn next_time(&self) -> Option<Time> {
        let p = self.part.as_ref().expect("a partitioned run");
        let queued = p.queues.iter().filter_map(|q| q.peek_time()).min();
        let flow = self.pending.map(|(_, t, _)| t);
        match (queued, flow) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs the queue's events before `limit` (of `links` links' network; `deep`: the deep
    /// prefetch pipeline), counting them in `events`; returns the time of the last one (0 if
    /// none).
    #[inline]
    pub(super) fn run_part_until(
        &mut self,
        limit: Time,
        links: u32,
        deep: bool,
        events: &mut u64,
    ) -> Time {
        let mut last = 0;
        while let Some((t, e)) = self.q.pop_before(limit) {
            self.now = t;
            last = t;
            *events += 1;
            let hint = self.prefetch_next(deep);
            self.step(links, e);
            self.prefetch_next_head(deep, hint);
        }
        last
    }

    /// The run loop of a partitioned run.
    pub(super) fn run_partitioned(
        &mut self,
        progress: &mut dyn FnMut(&Progress) -> bool,
    ) -> Result<(), SimError> {
        let end = (self.end_arrivals + self.cfg.workload.drain.ps()).saturating_add(1);
        let lookahead = self.lookahead();
        let links = self.ports.len() as u32;
        let deep = links >= DEEP_PREFETCH_LINKS;
        let n = self.parts().n as usize;
        let mut events: u64 = 0;
        let mut last = 0;
        let mut last_report = Instant::now();
        let mut start = 0;
        loop {
            let window_end = start + lookahead;
            let limit = window_end.min(end);
            self.parts().window_end = window_end;
            self.draw_arrivals(limit);
            self.deliver();
            for i in 0..n {
                let p = self.part.as_mut().expect("a partitioned run");
                let part = p.order[i];
                p.cur = part;
                std::mem::swap(&mut self.q, &mut p.queues[part as usize]);
                last = last.max(self.run_part_until(limit, links, deep, &mut events));
                let p = self.part.as_mut().expect("a partitioned run");
                std::mem::swap(&mut self.q, &mut p.queues[part as usize]);
                p.cur = u32::MAX;
            }
            self.deliver();
            if self.arrivals_done && self.counters.flows_finished == self.counters.flows {
                break;
            }
            match self.next_time() {
                Some(t) if t < end => start = t / lookahead * lookahead,
                _ => break,
            }
            if last_report.elapsed().as_millis() >= 200 {
                last_report = Instant::now();
                if !progress(&self.progress(last, events)) {
                    return Err(SimError::Cancelled);
                }
            }
        }
        self.now = last;
        self.counters.events = events;
        Ok(())
    }
}
