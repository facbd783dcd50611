//! A threaded run: the partitioned schedule ([`super::partition`]) with each part on its own
//! thread. Every thread holds a replica of the run's state (the topology, read-only, is
//! shared) and runs only its part's events, one lookahead window at a time; at a window's
//! end the threads exchange, through one mailbox per pair of parts (a lock taken once per
//! window, never per packet):
//! - the events each scheduled for another part (packet arrivals, messages to a source);
//! - the packets each admitted to a link whose far end is another part, for that part's
//!   copy of the link (the sender's copy keeps what admissions read);
//! - the entries a receiver added to its receipt log (SACK), for its sender's copy: an ACK
//!   names a prefix of the log, and it reaches the sender at least one lookahead after the
//!   entries were written;
//! - SmartRep's HCA choices (a copy's new five-tuple and paths, the copies kept), for every
//!   other part: its packets reach another part at least one lookahead after they are made;
//! - a multipath subflow's assignments of data segments, for its receiver's copy (which
//!   maps an arriving segment to the data it carries), and MPTCP-L's loss reports, for its
//!   sender's copy (an ACK carries only a report's tag).
//!
//! Each thread admits every flow (the same draws, in the same order), so that flows and
//! connections are numbered alike everywhere; only the source's part starts a flow. After
//! the last window the first thread gathers each connection's sender from its source's
//! part and its receiver from its destination's, each link's queue from its sending part
//! and the packets still on it from its far end, and sums the counters: the output is the
//! sequential engine's, bit for bit (`tests/partitioned.rs`).
//!
//! One barrier a window: before it each thread posts its mail and publishes the earliest
//! event it keeps or handed over and its completed flows; after it each takes its mail and
//! all decide alike where the next window starts and whether the run ends. Mailboxes and
//! published figures come in two sets (even and odd windows), so that a thread already
//! posting the next window's mail does not meet one still reading this window's.

use super::barrier::{BreakOnPanic, SpinBarrier};
use super::error::{Progress, SimError};
use super::exchange::{Batch, Exchange};
use super::output::{RunOutput, ThreadReport};
use super::parts::{PartitionPlan, Partitioning};
use super::serial::run;
use super::world::{build_topology, Conn, FlowState, World, DEEP_PREFETCH_LINKS};
use crate::config::Config;
use crate::engine::Event;
use crate::engine::Time;
use crate::hca::HcaStats;
use crate::metrics::Counters;
use crate::network::{FiveTuple, Topology};
use crate::port::Port;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What the threads share. Mailboxes and published figures come in two sets, used by
/// windows of even and odd number: a thread may post the next window's mail while another
/// still reads this window's (it cannot post into the same set again before everyone has
/// passed the next window's barrier).
struct Shared {
    n: usize,
    /// Mailbox of part `from` for part `to` in set `s` at `(s * n + from) * n + to`.
    boxes: Vec<Mutex<Batch>>,
    barrier: SpinBarrier,
    /// Per set and part (`s * n + part`), the earliest event the part will run or has handed
    /// over (`u64::MAX`: none).
    next: Vec<AtomicU64>,
    /// Per set and part, the flows completed at the part's hosts.
    finished: Vec<AtomicU64>,
    /// Per set and part, events run.
    events: Vec<AtomicU64>,
    /// Per part, whether its replica was built (a thread whose input failed says so).
    built: Vec<AtomicBool>,
    /// The caller cancelled the run (set by the first thread before a barrier).
    cancel: AtomicBool,
}

/// One thread's figures for the [`ThreadReport`].
#[derive(Clone, Copy, Debug, Default)]
struct ThreadFigures {
    windows: u64,
    events: u64,
    wait: f64,
    busy: f64,
    packets_exchanged: u64,
}

/// What a thread other than the first hands back: the state the output is gathered from.
struct Pieces {
    figures: ThreadFigures,
    conns: Vec<Conn>,
    flows: Vec<FlowState>,
    ports: Vec<Port>,
    counters: Counters,
    hca: Option<HcaStats>,
    last: Time,
}

/// Runs one simulation as [`super::run`] does, on `threads` threads: the network is split in
/// `threads` parts as [`Partitioning::Pods`] splits it (a fat-tree's pods dealt round-robin,
/// core switches spread; in another topology node `i` in part `i mod threads`), each part
/// run by its own thread one lookahead window (the smallest link delay) at a time. The
/// records, counters and statistics are those of [`super::run`], bit for bit. `threads` ≤ 1
/// runs the sequential engine. Every scheme runs (multipath ones too: a flow's connection
/// level keeps its sender's fields at the source's part and its receiver's at the
/// destination's).
pub fn run_threaded(
    config: &Config,
    threads: u32,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Result<RunOutput, SimError> {
    if threads <= 1 {
        return run(config, progress);
    }
    config.validate()?;
    let wall = Instant::now();
    let n = threads as usize;
    let cores = std::thread::available_parallelism().ok().map(|c| c.get());
    if cores.is_some_and(|c| c < n) {
        tracing::warn!(
            threads,
            "more threads than this machine's cores: they wait for each other at every window"
        );
    }
    let plan = PartitionPlan {
        partitioning: Partitioning::Pods(threads),
        reverse: false,
    };
    let shared = Shared {
        n,
        boxes: (0..2 * n * n)
            .map(|_| Mutex::new(Batch::default()))
            .collect(),
        // With a core each, a thread may spin through the usual wait (the imbalance of a
        // window's work, up to ~100 µs at k = 32; 2^17 rounds take 1-3 ms here) rather than
        // pay a wake-up, slow on a busy virtual machine; with more threads than cores,
        // spinning takes the core the thread waited for: park soon. Either way the barrier
        // spins less when waits outlast its spinning (other work holds the cores).
        barrier: SpinBarrier::new(
            n,
            if cores.is_some_and(|c| c >= n) {
                1 << 17
            } else {
                1 << 8
            },
        ),
        next: (0..2 * n).map(|_| AtomicU64::new(u64::MAX)).collect(),
        finished: (0..2 * n).map(|_| AtomicU64::new(0)).collect(),
        events: (0..2 * n).map(|_| AtomicU64::new(0)).collect(),
        built: (0..n).map(|_| AtomicBool::new(false)).collect(),
        cancel: AtomicBool::new(false),
    };
    // One topology for every replica (it is read-only).
    let topo = Arc::new(build_topology(config));
    let topo = &topo;
    let sh = &shared;
    std::thread::scope(|s| {
        let handles: Vec<_> = (1..threads)
            .map(|me| {
                std::thread::Builder::new()
                    .name(format!("repflow-part-{me}"))
                    .spawn_scoped(s, move || -> Result<Pieces, SimError> {
                        let _guard = BreakOnPanic(&sh.barrier);
                        sh.barrier.register();
                        let mut w = replica(config, topo, &plan, me, sh)?;
                        let (last, figures) = w.run_thread(sh, None)?;
                        Ok(w.into_pieces(last, figures))
                    })
            })
            .collect();
        if handles.iter().any(|h| h.is_err()) {
            // The threads that started would wait for the missing ones.
            sh.barrier.break_it();
        }
        let main = (|| -> Result<(World<'_, true>, ThreadFigures), SimError> {
            let _guard = BreakOnPanic(&sh.barrier);
            sh.barrier.register();
            let mut w = replica(config, topo, &plan, 0, sh)?;
            let (last, figures) = w.run_thread(sh, Some(progress))?;
            w.now = last;
            Ok((w, figures))
        })();
        let mut pieces = Vec::with_capacity(n - 1);
        let mut failure = None;
        for h in handles {
            match h {
                Err(e) => {
                    failure.get_or_insert(SimError::Input(format!(
                        "threads: could not start a thread ({e})"
                    )));
                    sh.barrier.break_it();
                }
                Ok(h) => match h.join() {
                    Ok(Ok(p)) => pieces.push(p),
                    Ok(Err(e)) => {
                        failure.get_or_insert(e);
                    }
                    Err(panic) => std::panic::resume_unwind(panic),
                },
            }
        }
        let (mut main, first) = main?;
        if let Some(e) = failure {
            return Err(e);
        }
        let figures: Vec<ThreadFigures> = std::iter::once(first)
            .chain(pieces.iter().map(|p| p.figures))
            .collect();
        let lookahead = main.lookahead();
        main.merge(pieces);
        let mut out = main.output(config, wall);
        let report = ThreadReport {
            threads,
            windows: first.windows,
            window: lookahead as f64 / crate::units::PS_PER_SEC as f64,
            events: figures.iter().map(|f| f.events).collect(),
            wait: figures.iter().map(|f| f.wait).collect(),
            busy: figures.iter().map(|f| f.busy).collect(),
            packets_exchanged: figures.iter().map(|f| f.packets_exchanged).sum(),
        };
        tracing::info!(
            threads,
            windows = report.windows,
            wait = ?report.wait,
            busy = ?report.busy,
            "threaded simulation done"
        );
        out.threads = Some(report);
        Ok(out)
    })
}

/// Builds thread `me`'s replica and waits until every thread has built its own (all fail
/// alike on bad input: the first thread reports it).
fn replica<'a>(
    config: &'a Config,
    topo: &Arc<Topology>,
    plan: &PartitionPlan,
    me: u32,
    sh: &Shared,
) -> Result<World<'a, true>, SimError> {
    let built = World::<true>::with_topology(config, Arc::clone(topo)).and_then(|mut w| {
        // (It refuses more threads than parts of the network.)
        w.partition_as(plan, Some(me))?;
        w.take_part(me, sh.n);
        Ok(w)
    });
    sh.built[me as usize].store(built.is_ok(), Ordering::Release);
    let synced = sh.barrier.wait();
    let w = built?;
    if !synced || sh.built.iter().any(|b| !b.load(Ordering::Acquire)) {
        return Err(SimError::Input(
            "threads: another thread could not build its part of the network".into(),
        ));
    }
    Ok(w)
}

impl<'a> World<'a, true> {
    /// Makes this partitioned world the replica that runs part `me` alone.
    fn take_part(&mut self, me: u32, n: usize) {
        let p = self.part.as_mut().expect("a partitioned run");
        p.cur = me;
        // (`partition_as` built this part's queue alone.)
        self.q = std::mem::take(&mut p.queues)
            .pop()
            .expect("the part's own queue");
        p.threaded = Some(Box::new(Exchange {
            wire_out: vec![Vec::new(); n],
            sack_dirty: Vec::new(),
            sack_sent: Vec::new(),
            reports_sent: Vec::new(),
            dsn_dirty: Vec::new(),
            dsn_sent: Vec::new(),
            hca_out: Vec::new(),
            out: (0..n).map(|_| Batch::default()).collect(),
        }));
    }

    /// Puts the events handed to this part into its queue.
    fn deliver_own(&mut self) {
        let p = self.part.as_mut().expect("a partitioned run");
        for (t, anc, e) in p.inbox[p.cur as usize].drain(..) {
            match e {
                Event::Near(id) => self.q.push_near_remote(t, id, anc),
                Event::Timer(x) => self.q.push_timer_remote(t, x, anc),
            }
        }
    }

    /// Posts this window's mail for the other parts in mailbox set `set`; returns the
    /// packets handed over and the earliest event handed over (`u64::MAX`: none).
    fn post(&mut self, sh: &Shared, set: usize) -> (u64, Time) {
        let mut packets = 0;
        let mut earliest = u64::MAX;
        let p = self.part.as_mut().expect("a partitioned run");
        let me = p.cur as usize;
        let x = p.threaded.as_mut().expect("a threaded run");
        let conns = self.conns.len();
        for v in [&mut x.sack_sent, &mut x.reports_sent, &mut x.dsn_sent] {
            if v.len() < conns {
                v.resize(conns, 0);
            }
        }
        for conn in x.sack_dirty.drain(..) {
            let c = &self.conns[conn as usize];
            let to = p.node_part[c.tuple.src as usize] as usize;
            let log = c.rcv.sack_log();
            let sent = &mut x.sack_sent[conn as usize];
            if log.len() as u32 > *sent {
                let b = &mut x.out[to].sack;
                b.push(conn);
                b.push(log.len() as u32 - *sent);
                b.extend_from_slice(&log[*sent as usize..]);
                *sent = log.len() as u32;
            }
            if let Some(d) = c.rcv.detect() {
                let sent = &mut x.reports_sent[conn as usize];
                let new = d.reports_since(*sent as usize);
                x.out[to].reports.extend(new.iter().map(|&r| (conn, r)));
                *sent = d.written() as u32;
            }
        }
        for conn in x.dsn_dirty.drain(..) {
            let c = &self.conns[conn as usize];
            let to = p.node_part[c.tuple.dst as usize] as usize;
            let sent = &mut x.dsn_sent[conn as usize];
            let new = c.snd.dsns_since(*sent as usize);
            if !new.is_empty() {
                let b = &mut x.out[to].dsn;
                b.push(conn);
                b.push(new.len() as u32);
                b.extend_from_slice(new);
                *sent += new.len() as u32;
            }
        }
        for to in (0..sh.n).filter(|&to| to != me) {
            let b = &mut x.out[to];
            std::mem::swap(&mut b.events, &mut p.inbox[to]);
            std::mem::swap(&mut b.wire, &mut x.wire_out[to]);
            packets += b.wire.len() as u64;
            earliest = b.events.iter().map(|e| e.0).fold(earliest, Time::min);
            b.hca.extend_from_slice(&x.hca_out);
            let mut slot = sh.boxes[(set * sh.n + me) * sh.n + to]
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            // The slot's batch was emptied by its reader: it is the next window's.
            std::mem::swap(&mut *slot, b);
        }
        x.hca_out.clear();
        (packets, earliest)
    }

    /// Takes the mail the other parts posted for this one in mailbox set `set`.
    fn collect(&mut self, sh: &Shared, set: usize) {
        let me = self.part.as_ref().expect("a partitioned run").cur as usize;
        for from in (0..sh.n).filter(|&from| from != me) {
            let mut b = sh.boxes[(set * sh.n + from) * sh.n + me]
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            for &(t, anc, e) in &b.events {
                match e {
                    Event::Near(id) => self.q.push_near_remote(t, id, anc),
                    Event::Timer(x) => self.q.push_timer_remote(t, x, anc),
                }
            }
            for &(link, arrival, pkt) in &b.wire {
                self.ports[link as usize].wire_push(arrival, pkt);
            }
            let mut i = 0;
            while i < b.sack.len() {
                let (conn, k) = (b.sack[i] as usize, b.sack[i + 1] as usize);
                self.conns[conn].rcv.mirror_log(&b.sack[i + 2..i + 2 + k]);
                i += 2 + k;
            }
            for &(flow, conn, tuple, kept) in &b.hca {
                self.apply_hca(flow, conn, tuple, kept);
            }
            let mut i = 0;
            while i < b.dsn.len() {
                let (conn, k) = (b.dsn[i] as usize, b.dsn[i + 1] as usize);
                self.conns[conn].snd.mirror_dsns(&b.dsn[i + 2..i + 2 + k]);
                i += 2 + k;
            }
            for &(conn, r) in &b.reports {
                self.conns[conn as usize]
                    .rcv
                    .mirror_reports(std::slice::from_ref(&r));
            }
            b.clear();
        }
    }

    /// Applies an HCA choice another part made: connection `conn` of flow `flow` takes
    /// five-tuple `t` (and its paths), and the flow keeps `kept` copies.
    fn apply_hca(&mut self, flow: u32, conn: u32, t: FiveTuple, kept: u8) {
        self.retuple_conn(flow, conn, t);
        self.flows[flow as usize].copies = kept;
    }

    /// The run loop of this replica's part; the first thread (`progress` given) reports
    /// progress and may cancel. Returns the time of the last event this part ran.
    fn run_thread(
        &mut self,
        sh: &Shared,
        mut progress: Option<&mut dyn FnMut(&Progress) -> bool>,
    ) -> Result<(Time, ThreadFigures), SimError> {
        let end = (self.end_arrivals + self.cfg.workload.drain.ps()).saturating_add(1);
        let mut fig = ThreadFigures::default();
        let started = Instant::now();
        let wait = |fig: &mut ThreadFigures| {
            let t = Instant::now();
            let ok = sh.barrier.wait();
            fig.wait += t.elapsed().as_secs_f64();
            ok
        };
        let lookahead = self.lookahead();
        let links = self.ports.len() as u32;
        let deep = links >= DEEP_PREFETCH_LINKS;
        let me = self.part.as_ref().expect("a partitioned run").cur as usize;
        let broken = || SimError::Input("threads: another thread stopped".into());
        let mut events: u64 = 0;
        let mut last = 0;
        let mut last_report = Instant::now();
        let mut start = 0;
        let mut finished = 0;
        loop {
            let window_end = start + lookahead;
            let limit = window_end.min(end);
            self.parts().window_end = window_end;
            self.draw_arrivals(limit);
            self.deliver_own();
            last = last.max(self.run_part_until(limit, links, deep, &mut events));
            let set = (fig.windows & 1) as usize;
            let (packets, handed) = self.post(sh, set);
            fig.windows += 1;
            fig.packets_exchanged += packets;
            // The earliest event anywhere after this window is the earliest of what each
            // part keeps and hands over: published before the barrier, read after it, the
            // same for all.
            let next = self.q.peek_time().map_or(handed, |t| t.min(handed));
            let slot = set * sh.n + me;
            sh.next[slot].store(next, Ordering::Relaxed);
            sh.finished[slot].store(self.counters.flows_finished, Ordering::Relaxed);
            sh.events[slot].store(events, Ordering::Relaxed);
            if let Some(report) = progress.as_mut() {
                if last_report.elapsed().as_millis() >= 200 {
                    last_report = Instant::now();
                    let mut p = self.progress(last, events);
                    p.flows_finished = finished;
                    let other = (1 - set) * sh.n..(2 - set) * sh.n;
                    p.events = sh.events[other]
                        .iter()
                        .map(|e| e.load(Ordering::Relaxed))
                        .sum();
                    if !report(&p) {
                        sh.cancel.store(true, Ordering::Relaxed);
                    }
                }
            }
            if !wait(&mut fig) {
                return Err(broken());
            }
            self.collect(sh, set);
            if sh.cancel.load(Ordering::Relaxed) {
                return Err(SimError::Cancelled);
            }
            let ours = set * sh.n..(set + 1) * sh.n;
            finished = sh.finished[ours.clone()]
                .iter()
                .map(|f| f.load(Ordering::Relaxed))
                .sum();
            let flow = self.pending.map(|(_, t, _)| t);
            let next = sh.next[ours]
                .iter()
                .map(|t| t.load(Ordering::Relaxed))
                .chain(flow)
                .min()
                .filter(|&t| t != u64::MAX);
            if self.arrivals_done && finished == self.counters.flows {
                break;
            }
            match next {
                Some(t) if t < end => start = t / lookahead * lookahead,
                _ => break,
            }
        }
        self.counters.events = events;
        fig.events = events;
        fig.busy = started.elapsed().as_secs_f64();
        Ok((last, fig))
    }

    /// The state the first thread gathers the output from.
    fn into_pieces(self, last: Time, figures: ThreadFigures) -> Pieces {
        Pieces {
            figures,
            conns: self.conns,
            flows: self.flows,
            ports: self.ports,
            counters: self.counters,
            hca: self.scheme.hca.map(|h| h.stats),
            last,
        }
    }

    /// Gathers the other threads' state into this (the first thread's) replica: each
    /// connection's sender from its source's part and receiver from its destination's, each
    /// flow's completion from its destination's part, each link's queue from its sending
    /// part and the packets still on it from its far end's; counters that events add to are
    /// summed (those of admissions, made alike everywhere, are this replica's).
    fn merge(&mut self, mut pieces: Vec<Pieces>) {
        let p = self.part.as_ref().expect("a partitioned run");
        let part = |node: u32| p.node_part[node as usize] as usize;
        // Pieces of part `i` at `i - 1`.
        for (i, c) in self.conns.iter_mut().enumerate() {
            let (sp, dp) = (part(c.tuple.src), part(c.tuple.dst));
            c.wire_bytes += pieces.iter().map(|x| x.conns[i].wire_bytes).sum::<u64>();
            if sp != 0 {
                let o = &mut pieces[sp - 1].conns[i];
                std::mem::swap(&mut c.snd, &mut o.snd);
                c.rto_at = o.rto_at;
            }
            if dp != 0 {
                let o = &mut pieces[dp - 1].conns[i];
                std::mem::swap(&mut c.rcv, &mut o.rcv);
                c.delack_at = o.delack_at;
                c.completed_at = o.completed_at;
            }
        }
        for (i, f) in self.flows.iter_mut().enumerate() {
            let dp = part(f.spec.dst);
            if dp != 0 {
                let o = &pieces[dp - 1].flows[i];
                f.finish = o.finish;
                f.winner = o.winner;
            }
        }
        for (l, link) in self.topo.links.iter().enumerate() {
            let (sp, dp) = (part(link.from), part(link.to));
            if sp != 0 {
                std::mem::swap(&mut self.ports[l], &mut pieces[sp - 1].ports[l]);
            }
            if dp != sp {
                // This replica's own copy went to `pieces[sp - 1]` if it was swapped out.
                let far = if dp == 0 {
                    &mut pieces[sp - 1].ports[l]
                } else {
                    &mut pieces[dp - 1].ports[l]
                };
                self.ports[l].take_wire(far);
            }
        }
        let c = &mut self.counters;
        for x in &pieces {
            let o = &x.counters;
            c.flows_finished += o.flows_finished;
            c.connections += o.connections;
            c.events += o.events;
            c.packets_injected += o.packets_injected;
            c.packets_delivered += o.packets_delivered;
            c.drops += o.drops;
            c.switch_drops += o.switch_drops;
            c.host_drops += o.host_drops;
            c.extra_copy_bytes += o.extra_copy_bytes;
            c.replicated_flows += o.replicated_flows;
            c.copy_collisions += o.copy_collisions;
            self.now = self.now.max(x.last);
        }
        if let Some(h) = self.scheme.hca.as_mut() {
            for s in pieces.iter().filter_map(|x| x.hca) {
                h.stats.probes += s.probes;
                h.stats.cache_hits += s.cache_hits;
                h.stats.fewer_paths += s.fewer_paths;
                h.stats.wait += s.wait;
            }
        }
    }
}
