//! The event loop: dispatch of each event, the prefetch pipeline that loads the next
//! events' state ahead, progress reports and the end of the run.

use super::error::{Progress, SimError};
use super::world::{
    window_end, World, BUSY_PREFETCH_LINKS, DEEP_PENDING, DEEP_PREFETCH_LINKS, EV_CANCEL,
    EV_DELACK, EV_FLOW, EV_HCA, EV_RELEASE, EV_RTO,
};
use crate::engine::prefetch;
use crate::engine::{Event, Time};
use crate::units::PS_PER_SEC;
use std::time::Instant;

impl<'a, const P: bool> World<'a, P> {
    /// Prefetches for the likely next three events, each stage one event after the one
    /// before: the third's port line and wheel node; the second's head packet (its port
    /// line was asked for one event ago); the first's next port, both its lines, and route
    /// (its head packet was asked for one event ago). Nothing here changes state.
    ///
    /// The next port's second line (the accumulators an admission adds to, and the limits it
    /// reads when its bounds do not decide) was a miss of its own at k = 32: cachegrind (2 MiB
    /// last level) counted 0.75 last-level misses per hop on it. Asking for it too: k = 32 at
    /// 10 Gb/s, with its drain and its loaded network alone, −3 % each (medians of seven
    /// interleaved rounds). Ports are 128 bytes aligned to 64, so the two lines take two
    /// requests. Not with priority-scheduled ports, whose pipeline asks for more already:
    /// the second request cost pFabric 2 % (k = 16, web search at 0.8, 100 ms of arrivals).
    #[inline(always)]
    pub(super) fn prefetch_pipeline(&self, h1: u32, h2: u32, h3: u32) {
        prefetch(self.ports.as_ptr().wrapping_add(h3 as usize));
        self.q.prefetch_node(h3);
        if let Some(p) = self.ports.get(h2 as usize) {
            prefetch(p.head_ptr());
            if self.sched_ports {
                p.prefetch_extra();
            }
        }
        if let Some(p) = self.ports.get(h1 as usize) {
            if self.sched_ports {
                p.prefetch_queue();
            }
            if let Some(pkt) = p.head_packet() {
                let next = self.ports.as_ptr().wrapping_add(pkt.next as usize);
                prefetch(next);
                if !self.sched_ports {
                    prefetch(next.cast::<u8>().wrapping_add(64));
                }
                self.paths.prefetch(pkt.conn);
            }
        }
    }

    /// With priority-scheduled ports, before packet arrival `e` runs: asks for the boxed
    /// state of the port its packet goes to next, which the admission reads first (that
    /// port's line was asked for one event ago, so the box's address is at hand; the
    /// pipeline's own stages cannot reach it). Read-only; any event is accepted.
    #[inline(always)]
    pub(super) fn prefetch_next_port_state(&self, e: Event) {
        if let Event::Near(id) = e {
            if let Some(h) = self.ports.get(id as usize).and_then(|p| p.head_packet()) {
                if let Some(next) = self.ports.get(h.next as usize) {
                    next.prefetch_extra();
                }
            }
        }
    }

    /// The smallest link delay: the least time between an event at one node and its
    /// effect at another (0 if a link has none).
    pub(super) fn lookahead(&self) -> Time {
        self.topo.links.iter().map(|l| l.delay).min().unwrap_or(0)
    }

    /// Before an event: prefetches for the likely next event(s) (`deep`: the three-stage
    /// pipeline) and returns the likely next event's port (a hint: any id, even none, is
    /// harmless).
    #[inline(always)]
    pub(super) fn prefetch_next(&self, deep: bool) -> u32 {
        if deep {
            let [h1, h2, h3] = self.q.hints();
            self.prefetch_pipeline(h1, h2, h3);
            h1
        } else {
            let hint = self.q.hint();
            prefetch(self.ports.as_ptr().wrapping_add(hint as usize));
            self.q.prefetch_node(hint);
            hint
        }
    }

    /// After an event: the likely next event's port line was asked for before it and has had
    /// its time to arrive: asks for that port's head packet's entry now (the hint taken
    /// before this event's pushes: a hint need not be right), so that the next arrival finds
    /// both (its ring is a separate allocation, cold at scale). The deep pipeline does this
    /// itself.
    #[inline(always)]
    pub(super) fn prefetch_next_head(&self, deep: bool, hint: u32) {
        if !deep {
            if let Some(p) = self.ports.get(hint as usize) {
                prefetch(p.head_ptr());
            }
        }
    }

    /// Every event but a packet arrival.
    #[inline(never)]
    pub(super) fn on_other_event(&mut self, e: u64) {
        let id = e as u32;
        match e >> 32 {
            EV_RTO => self.on_rto(id),
            EV_DELACK => self.on_delack(id),
            EV_FLOW => self.on_flow(id),
            EV_HCA => self.start_probed_flow(id),
            EV_RELEASE => self.release_port(id),
            EV_CANCEL => self.on_cancel(id),
            _ => unreachable!("unknown event tag"),
        }
    }

    /// Hands the event just popped, with its node, to the tie statistics.
    #[cfg(feature = "tie-stats")]
    pub(super) fn count_tie(&mut self, links: u32, e: Event) {
        use super::parallelism::At;
        let conn = |x: u64| &self.conns[x as u32 as usize];
        let at = match e {
            Event::Near(id) if id < links => At::LinkEnd(id),
            Event::Near(id) => At::LinkStart(id - links),
            Event::Timer(x) if x >> 32 == EV_RTO => At::Node(conn(x).tuple.src),
            Event::Timer(x) if x >> 32 == EV_DELACK => At::Node(conn(x).tuple.dst),
            Event::Timer(_) => return,
        };
        self.parallelism.on_event(&self.q.ancestry, at);
    }

    /// Where the run stands at simulated time `now`, after `events` events.
    pub(super) fn progress(&self, now: Time, events: u64) -> Progress {
        Progress {
            sim_time: now as f64 / PS_PER_SEC as f64,
            duration: self.end_arrivals as f64 / PS_PER_SEC as f64,
            flows_started: self.counters.flows,
            flows_finished: self.counters.flows_finished,
            events,
        }
    }

    /// Handles one event (of `links` links' network); returns whether it may have ended
    /// the run.
    #[inline(always)]
    pub(super) fn step(&mut self, links: u32, e: Event) -> bool {
        match e {
            Event::Near(id) if id < links => self.on_arrive(id),
            Event::Near(id) => {
                self.on_tx_done(id - links);
                true
            }
            Event::Timer(x) => {
                self.on_other_event(x);
                true
            }
        }
    }

    pub(super) fn run(
        &mut self,
        progress: &mut dyn FnMut(&Progress) -> bool,
    ) -> Result<(), SimError> {
        if P {
            return self.run_partitioned(progress);
        }
        let t_end = self.end_arrivals + self.cfg.workload.drain.ps();
        // Events at `limit` or later are not run: past the drain, or past the end of the
        // lookahead window in which the last flow completed (a partitioned run sees that
        // only at a window's end: ending there too gives both the same counters).
        let mut limit = t_end.saturating_add(1);
        let lookahead = self.lookahead();
        let mut last_report = Instant::now();
        let mut events: u64 = 0;
        let links = self.ports.len() as u32;
        // Large networks (the ports' hot lines alone past 1 MiB, half this machine's L2) wait
        // on memory at every stage of a hop: prefetch for the next three events, in a
        // pipeline. Measured on the loaded phase: +20 % at k = 32 (49,152 links), nothing
        // at k = 16 (6,144), −5 % at k = 8 (768), which keep the one-event prefetch. Runs
        // with priority-scheduled ports (pFabric) take it from 4,096 links: its stages also
        // ask for a port's boxed state and then its queue, which the port's next pop reads
        // (a whole pFabric point at k = 16, web search at load 0.8: −10 %; at k = 8, whose
        // state fits the caches, it cost 20 %), and each event asks for the boxed state of
        // the port its packet goes to next (+6 % events/s on that point's slow phase).
        // Other networks of 4,096 links or more take it while many events are pending
        // (`DEEP_PENDING`): the costliest TCP point of the study (k = 16, web search at 0.8)
        // −4 to −6 %, DCTCP's slow phase +3 to +8 % events/s; on short queues it cost (data
        // mining at 0.8: +3 % with the pipeline throughout), so those keep the one-event
        // prefetch. Prefetches only read: the choice never changes a result.
        let always_deep =
            links >= DEEP_PREFETCH_LINKS || (self.sched_ports && links >= BUSY_PREFETCH_LINKS);
        let next_port_state = always_deep && self.sched_ports;
        let mut deep = always_deep;
        while let Some((t, e)) = self.q.pop() {
            if t >= limit {
                break;
            }
            self.now = t;
            events += 1;
            #[cfg(feature = "tie-stats")]
            self.count_tie(links, e);
            if next_port_state {
                self.prefetch_next_port_state(e);
            }
            let hint = self.prefetch_next(deep);
            // Packet arrivals are nearly all events. A packet forwarded by a switch cannot
            // end the run: the end test is skipped.
            #[cfg(feature = "parallelism-stats")]
            if let Event::Near(id) = e {
                if id < links {
                    self.parallelism.on_arrival(t, id);
                }
            }
            let may_end = self.step(links, e);
            self.prefetch_next_head(deep, hint);
            if may_end && self.arrivals_done && self.counters.flows_finished == self.counters.flows
            {
                limit = limit.min(window_end(t, lookahead));
            }
            if events & 0xFFFF == 0 {
                if !always_deep && links >= BUSY_PREFETCH_LINKS {
                    deep = self.q.len() >= DEEP_PENDING;
                }
                if last_report.elapsed().as_millis() >= 200 {
                    last_report = Instant::now();
                    if !progress(&self.progress(self.now, events)) {
                        return Err(SimError::Cancelled);
                    }
                }
            }
        }
        self.catch_up_at_end(limit);
        // (Completions decided late are counted there already.)
        self.counters.events += events;
        Ok(())
    }
}
