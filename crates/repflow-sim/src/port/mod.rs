//! Output ports: a FIFO port computes every admitted packet's departure at
//! admission (a FIFO, work-conserving server fed in time order needs no "transmission done"
//! event), and keeps the packets in flight on its link in a FIFO of which only the head is
//! in the global event queue.
//!
//! Admission is decided by the port's [`Qdisc`] from its current backlog (packets and
//! bytes waiting, the packet in service excluded): DropTail, and DropTail with DCTCP's ECN
//! threshold marking ([`EcnThreshold`]). Disciplines that reorder packets (pFabric) need a
//! scheduled port ([`Port::new_scheduled`]): its next packet is chosen when the previous one
//! has been transmitted, so the simulator calls [`Port::sched_tx_done`] at that time.
//!
//! A DropTail port decides most admissions without its exact backlog: the packets it does not
//! yet know to have started, and their bytes, bound the backlog from above, and bounds below
//! the largest backlog seen (which never exceeds the packet limit) and within the byte limit
//! admit the packet without changing that largest backlog. Only otherwise does it read FIFO
//! entries to find the exact backlog. Either way the decisions are the exact ones.
//!
//! Every port integrates its backlog over time ([`Port::stats`]) at almost no cost: in a FIFO
//! port each admitted packet adds its own share of the integral of the unfinished work, its
//! whole transmission time while it waits and a linearly shrinking part while it is sent,
//! known in closed form at admission (one widening multiplication).

mod discipline;
mod prio;
mod ring;

pub use discipline::{DropTail, EcnThreshold, Qdisc};
pub use prio::PrioQueue;

use crate::engine::{Place, Time};
use crate::network::TxClock;
use crate::packet::Packet;
use ring::{InFlight, Ring};
use std::hint::select_unpredictable;

/// What a scheduled (priority) port did with an arriving packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedEnqueue {
    /// Packets dropped to make room (the arrival may be one of them).
    pub dropped: u32,
    /// The link was idle and started sending, to finish at this time: the caller records
    /// the completion's place in the event order ([`Port::sched_set_tx_place`]).
    pub started: Option<Time>,
    /// The arrival is the first packet to wait for the transmission in progress: the caller
    /// now schedules its completion, at this time and place.
    pub tx_done: Option<(Time, Place)>,
    /// The link's wire was empty: the caller schedules an arrival event for
    /// [`Port::head_arrival`].
    pub head_arrival: bool,
}

/// Time-averaged statistics of a port.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PortStats {
    /// Time the link spent transmitting, ps.
    pub busy: Time,
    /// Mean backlog over [0, now], bytes: a FIFO port's unfinished work (the untransmitted
    /// part of the packet in service included); a priority port's waiting bytes.
    pub mean_backlog_bytes: f64,
}

/// What only some ports need: those off the fast path (an inexact clock, priority
/// scheduling) and those whose discipline marks ECN. Kept apart so that a port is two cache
/// lines and the port array, which the hop reads at random, half as long.
///
/// Laid out for a scheduled (pFabric) port, which reads all of it but the marking rule at
/// every admission and completion: those fields first, from a line boundary, so that they
/// take three lines, the marking rule after them. (Unaligned, in declaration order with the
/// rule first, the 200 bytes spanned four lines, all read: the costliest pFabric point of
/// the study −2 to −4 %, docs/performance.md.)
#[derive(Clone, Debug)]
#[repr(C, align(64))]
struct PortExtra {
    /// Scheduled (priority) port: its waiting packets.
    sched: Option<PrioQueue>,
    /// Scheduled port: the place in the event order (see `engine::Place`) of the current
    /// transmission's completion, at `Port::busy_until`. The completion is an event only
    /// when a packet waits for it (`tx_event`): with none waiting, a later arrival that
    /// comes after that place finds the link idle, as it would after the event.
    tx_place: Place,
    /// Scheduled port: the completion is scheduled as an event.
    tx_event: bool,
    area_t: Time,
    /// Transmission time of admitted packets, ps, when the clock is not exact (that of an
    /// exact clock is computed from `Port::cum_bytes` when asked) or the port is scheduled.
    busy: Time,
    clock: TxClock,
    /// The marking rule of a port that marks ECN.
    ecn: Option<EcnThreshold>,
}

impl PortExtra {
    fn new(clock: TxClock, ecn: Option<EcnThreshold>) -> Box<PortExtra> {
        Box::new(PortExtra {
            clock,
            busy: 0,
            ecn,
            sched: None,
            area_t: 0,
            tx_place: Place::default(),
            tx_event: false,
        })
    }
}

/// A FIFO output port and its link.
///
/// Laid out for the per-hop path (a large network's ports do not fit in L1): the first cache line
/// holds all that a packet's arrival at the far end and a usual admission read — a port
/// with an exact clock that runs DropTail, and whose bounds decide the admission, reads no
/// other line for its decision and the packet's departure; the second holds the accumulators
/// an admission adds to (their latency is off the chain that leads to the next event), the
/// limits an exact admission reads, and what only some ports need, boxed.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub struct Port {
    // Line 1: read (and written) by arrivals and admissions.
    /// Admitted packets not yet arrived at the far end, in order.
    fifo: Ring,
    /// Index into `fifo` of the first packet whose serialization had not started at the last
    /// admission (a lower bound; advanced lazily).
    first_waiting: u32,
    /// Largest backlog seen, packets.
    pub max_backlog: u32,
    /// Bytes of the packets from `first_waiting` on (an upper bound on the bytes waiting).
    waiting_bytes: u64,
    /// When the last admitted packet finishes serialization.
    busy_until: Time,
    /// Propagation delay of the link, ps.
    delay: Time,
    /// Picoseconds per byte when the port takes the fast path: a FIFO port whose clock is
    /// exact and whose rate is at least 1,863 b/s (so that the figure fits); else 0.
    fast_ps_per_byte: u32,
    /// Byte limit for the admissions the bounds decide: the DropTail byte limit, capped at
    /// `u32::MAX` (a smaller limit only sends more admissions to the exact test, which uses
    /// the whole limit); 0 exactly when the discipline marks ECN (every admission is then
    /// decided exactly).
    fast_limit_bytes: u32,
    // Line 2: added to by an admission; read only when its bounds do not decide.
    /// ∫ backlog dt: FIFO ports in ps² of unfinished work, counting every admitted packet to
    /// its departure; scheduled ports in byte·ps of waiting bytes up to `area_t`.
    area: u128,
    /// Packets put on the link (those that crossed it, and those still in `fifo`).
    sent: u64,
    /// Bytes admitted to this port.
    cum_bytes: u64,
    /// The DropTail limits, with "no limit" (0) as the largest value, so that the test is
    /// two comparisons.
    limit_bytes: u64,
    /// Packets dropped here.
    pub drops: u64,
    limit_packets: u32,
    /// Size of the last admitted packet: it started serialization at `busy_until` less its
    /// transmission time, and once that is past, nothing waits.
    last_bytes: u16,
    /// An ECN port that marks by a packet threshold of at most `u16::MAX`: the threshold, so
    /// that neither its admissions nor its marks read the boxed state; else 0.
    ecn_k_packets: u16,
    /// `None` for a fast DropTail port.
    extra: Option<Box<PortExtra>>,
}

// What an arrival and a usual admission read fills the first cache line; the accumulators,
// the limits and the rest the second.
const _: () = assert!(std::mem::offset_of!(Port, area) == 64);
const _: () = assert!(std::mem::size_of::<Port>() == 128);
const _: () = assert!(std::mem::size_of::<Packet>() == 24);
const _: () = assert!(std::mem::size_of::<InFlight>() == 32);

impl Port {
    /// A port sending at `clock`'s rate onto a link of propagation delay `delay`.
    pub fn new(clock: TxClock, delay: Time, qdisc: Qdisc) -> Port {
        let (limit, marking) = (qdisc.limits(), qdisc.marking());
        let ecn = marking.is_some();
        let limit_bytes = if limit.limit_bytes == 0 {
            u64::MAX
        } else {
            limit.limit_bytes
        };
        let fast_ps_per_byte = clock.fast_ps_per_byte();
        let extra = (fast_ps_per_byte == 0 || ecn).then(|| PortExtra::new(clock, marking));
        Port {
            fifo: Ring::new(),
            first_waiting: 0,
            max_backlog: 0,
            waiting_bytes: 0,
            busy_until: 0,
            delay,
            fast_ps_per_byte,
            // Never 0 for DropTail (a limit of 0 is none: `u64::MAX`).
            fast_limit_bytes: if ecn {
                0
            } else {
                limit_bytes.min(u32::MAX as u64) as u32
            },
            area: 0,
            sent: 0,
            cum_bytes: 0,
            limit_bytes,
            drops: 0,
            limit_packets: if limit.limit_packets == 0 {
                u32::MAX
            } else {
                limit.limit_packets
            },
            last_bytes: 0,
            ecn_k_packets: marking
                .filter(|m| m.k_bytes == 0)
                .and_then(|m| u16::try_from(m.k_packets).ok())
                .unwrap_or(0),
            extra,
        }
    }

    /// A priority-scheduled port (pFabric) holding at most `limit_bytes` waiting
    /// (0: unlimited).
    pub fn new_scheduled(clock: TxClock, delay: Time, limit_bytes: u64) -> Port {
        let none = Qdisc::DropTail(DropTail {
            limit_packets: 0,
            limit_bytes: 0,
        });
        let mut p = Port::new(clock, delay, none);
        p.fast_ps_per_byte = 0;
        let extra = p.extra.get_or_insert_with(|| PortExtra::new(clock, None));
        extra.sched = Some(PrioQueue::new(limit_bytes));
        p
    }

    /// Whether [`Port::enqueue_fast`] serves this port: a FIFO port with an exact clock
    /// (every other port takes [`Port::enqueue`], or the scheduled port's calls).
    #[inline(always)]
    pub fn is_fast(&self) -> bool {
        self.fast_ps_per_byte != 0
    }

    /// Whether this port schedules by priority (then use [`Port::sched_enqueue`] and
    /// [`Port::sched_tx_done`] instead of [`Port::enqueue`]).
    #[inline]
    pub fn is_scheduled(&self) -> bool {
        self.extra.as_ref().is_some_and(|x| x.sched.is_some())
    }

    /// The port's clock (a fast DropTail port keeps only its picoseconds per byte).
    fn clock(&self) -> TxClock {
        match &self.extra {
            Some(x) => x.clock,
            None => TxClock::from_ps_per_byte(self.fast_ps_per_byte),
        }
    }

    /// What a port off the fast path, or marking ECN, keeps apart.
    #[inline]
    fn extra(&mut self) -> &mut PortExtra {
        self.extra
            .as_mut()
            .expect("a port off the fast path has its extra state")
    }

    /// Busy time and mean backlog over [0, `now`].
    pub fn stats(&self, now: Time) -> PortStats {
        let clock = self.clock();
        let extra = self.extra.as_deref();
        let sched = extra.and_then(|x| x.sched.as_ref().map(|q| (q, x.area_t)));
        let mut mean = 0.0;
        if now > 0 {
            let bytes_per_ps = 1e6 / clock.tx(1_000_000) as f64;
            mean = match sched {
                None => {
                    // The admitted packets' shares run to their departures; the part after
                    // `now` is the triangle of the work still unfinished then.
                    let w = self.busy_until.saturating_sub(now) as u128;
                    let area = self.area.saturating_sub(w * w / 2);
                    area as f64 * bytes_per_ps / now as f64
                }
                Some((q, area_t)) => {
                    let area = self.area + q.bytes() as u128 * now.saturating_sub(area_t) as u128;
                    area as f64 / now as f64
                }
            };
        }
        PortStats {
            busy: extra.map_or(0, |x| x.busy)
                + if sched.is_none() && clock.is_exact() {
                    clock.tx_exact_total(self.cum_bytes)
                } else {
                    0
                },
            mean_backlog_bytes: mean,
        }
    }

    /// Puts `pkt` on the wire of a scheduled port at `now`; returns when its transmission ends.
    fn sched_transmit(&mut self, pkt: Packet, now: Time) -> Time {
        let x = self.extra();
        let tx = x.clock.tx(pkt.bytes as u32);
        x.busy += tx;
        let finish = now + tx;
        self.busy_until = finish;
        self.last_bytes = pkt.bytes;
        self.sent += 1;
        // Unused by a scheduled port, but kept balanced with `pop_arrived`.
        self.waiting_bytes += pkt.bytes as u64;
        self.fifo.push_back(InFlight {
            arrival: finish + self.delay,
            pkt,
        });
        finish
    }

    /// Accounts the waiting bytes of a scheduled port up to `now`.
    #[inline]
    fn sched_area(&mut self, now: Time) {
        let x = self.extra.as_mut().expect("a scheduled port");
        let b = x.sched.as_ref().map_or(0, |q| q.bytes());
        self.area += b as u128 * now.saturating_sub(x.area_t) as u128;
        x.area_t = now;
    }

    /// Offers `pkt`, of priority `prio` (smaller is more urgent), to a scheduled port at
    /// `now`, by the event at `place` (with `now`, its place in the order). `lazy`: the
    /// port's completions are not events, and those before this one have been decided
    /// ([`Port::sched_catch_up`]); then [`SchedEnqueue::tx_done`] is always `None`.
    pub fn sched_enqueue(
        &mut self,
        pkt: Packet,
        prio: u32,
        now: Time,
        place: Place,
        lazy: bool,
    ) -> SchedEnqueue {
        self.sched_area(now);
        let mut r = SchedEnqueue {
            dropped: 0,
            started: None,
            tx_done: None,
            head_arrival: false,
        };
        let busy_until = self.busy_until;
        let x = self.extra();
        // The transmission in progress has not completed if its completion's place in the
        // event order is after this event's.
        let in_progress = (busy_until, x.tx_place) > (now, place);
        if !in_progress && !x.tx_event {
            r.head_arrival = self.fifo.is_empty();
            r.started = Some(self.sched_transmit(pkt, now));
            return r;
        }
        let q = x.sched.as_mut().expect("a scheduled port");
        r.dropped = q.push(pkt, prio);
        let waiting = q.len() as u32;
        if !lazy {
            r.tx_done = self.sched_claim_tx_event();
        }
        self.drops += r.dropped as u64;
        if waiting + 1 > self.max_backlog {
            self.max_backlog = waiting + 1;
        }
        r
    }

    /// Records the place in the event order of the completion of the transmission just
    /// started (see [`SchedEnqueue::started`] and [`Port::sched_tx_done`]).
    pub fn sched_set_tx_place(&mut self, place: Place) {
        self.extra().tx_place = place;
    }

    /// If packets wait for the transmission in progress and its completion is not yet an
    /// event, marks it as one and returns where the caller schedules it: at `busy_until`, in
    /// the place recorded by [`Port::sched_set_tx_place`].
    pub fn sched_claim_tx_event(&mut self) -> Option<(Time, Place)> {
        let busy_until = self.busy_until;
        let x = self.extra.as_mut()?;
        if x.tx_event || x.sched.as_ref()?.is_empty() {
            return None;
        }
        x.tx_event = true;
        Some((busy_until, x.tx_place))
    }

    /// Whether this scheduled port's completions can be decided late ([`Port::sched_catch_up`])
    /// instead of as events: its link has a propagation delay, so the packet whose
    /// transmission completes is still on the wire then, and its arrival at the far end — an
    /// event of this link that comes after the completion — is there to decide it.
    #[inline]
    pub fn sched_lazy_ok(&self) -> bool {
        self.delay > 0
    }

    /// A scheduled port whose completions are not events (see [`Port::sched_lazy_ok`]):
    /// decides, in order, every completion that comes before the event at `now` and `place`
    /// while packets wait — exactly as its event would have: the waiting bytes are
    /// accounted to its time, the next packet is taken and its transmission starts then, and
    /// the new completion takes the place in the event order that the event's first push
    /// would have given it (the event would have pushed nothing else: the packet just sent
    /// is still on the wire). `done_id` is the completion's near-event id. Nothing between
    /// a completion and the next event at this port sees the port, so deciding it at that
    /// event changes nothing. Returns how many completions were decided, and the time of the
    /// last.
    pub fn sched_catch_up(&mut self, now: Time, place: Place, done_id: u32) -> (u64, Time) {
        let mut n = 0;
        let mut last = 0;
        loop {
            let done = self.busy_until;
            let x = self.extra.as_mut().expect("a scheduled port");
            if (done, x.tx_place) >= (now, place) || x.sched.as_ref().is_none_or(|q| q.is_empty()) {
                return (n, last);
            }
            debug_assert!(!x.tx_event, "a port with lazy completions schedules none");
            let started = x.tx_place.0 .0;
            let Some((_, was_empty)) = self.sched_tx_done(done) else {
                unreachable!("packets wait")
            };
            debug_assert!(!was_empty, "the packet completed is on the wire");
            let anc = (done, crate::engine::anc_b(done, started, 0));
            self.extra().tx_place = (anc, done_id as u64);
            n += 1;
            last = done;
        }
    }

    /// The transmission of a scheduled port ended at `now` (its completion event): starts
    /// the next packet, if any. Returns its transmit-complete time and whether the wire was
    /// empty (the caller then schedules an arrival event for [`Port::head_arrival`]), then
    /// records the completion's place ([`Port::sched_set_tx_place`]) and schedules it if
    /// packets still wait ([`Port::sched_claim_tx_event`]).
    pub fn sched_tx_done(&mut self, now: Time) -> Option<(Time, bool)> {
        self.sched_area(now);
        let x = self.extra();
        x.tx_event = false;
        let pkt = x.sched.as_mut().expect("a scheduled port").pop()?;
        let was_empty = self.fifo.is_empty();
        Some((self.sched_transmit(pkt, now), was_empty))
    }

    /// Serialization time of `bytes` on this port: on the fast path from the first cache
    /// line's figure, else from the clock (a port off the fast path has one apart).
    #[inline(always)]
    fn tx<const FAST: bool>(&self, bytes: u16) -> Time {
        if FAST {
            bytes as u64 * self.fast_ps_per_byte as u64
        } else {
            self.clock().tx(bytes as u32)
        }
    }

    /// Backlog waiting at `now` (packets, bytes), the packet in service excluded.
    #[inline]
    fn backlog<const FAST: bool>(&mut self, now: Time) -> (u32, u64) {
        let len = self.fifo.len();
        // The last admitted packet's start.
        let last_start = self.busy_until - self.tx::<FAST>(self.last_bytes);
        if last_start <= now {
            // The last admitted packet has started (or the port is idle): so have all, and
            // no FIFO entry needs reading.
            self.first_waiting = len as u32;
            self.waiting_bytes = 0;
            return (0, 0);
        }
        let mut i = self.first_waiting as usize;
        while i < len {
            let f = self.fifo.get(i);
            // Serialization starts after `now`: `arrival - delay - tx > now`.
            if f.arrival > now + self.delay + self.tx::<FAST>(f.pkt.bytes) {
                break;
            }
            self.waiting_bytes -= f.pkt.bytes as u64;
            i += 1;
        }
        self.first_waiting = i as u32;
        ((len - i) as u32, self.waiting_bytes)
    }

    /// An ECN port that marks by the packet threshold it holds: the bounds on the backlog
    /// (waiting packets, waiting bytes with the arrival's) show that the arrival is admitted,
    /// not marked, and leaves the largest backlog seen as it is.
    #[inline(always)]
    fn ecn_clear(&self, wp_bound: u32, wb_bound: u64) -> bool {
        let k = self.ecn_k_packets as u32;
        (k != 0) & (wp_bound < self.max_backlog.min(k)) & (wb_bound <= self.limit_bytes)
    }

    /// Offers `pkt` at `now`. On admission returns `Some(true)` if the link was idle (so the
    /// caller must schedule an arrival event for [`Port::head_arrival`]), `Some(false)`
    /// otherwise; `None` if the packet was dropped.
    pub fn enqueue(&mut self, pkt: Packet, now: Time) -> Option<bool> {
        if self.is_fast() {
            self.enqueue_fast(pkt, now)
        } else {
            self.enqueue_general(pkt, now)
        }
    }

    /// [`Port::enqueue`] for a port of which [`Port::is_fast`] does not hold (kept out of
    /// line: the simulator's hop inlines only the fast path).
    #[cold]
    #[inline(never)]
    pub fn enqueue_general(&mut self, pkt: Packet, now: Time) -> Option<bool> {
        self.admit::<false>(pkt, now)
    }

    /// [`Port::enqueue`] for a port of which [`Port::is_fast`] holds (the simulator's hop).
    ///
    /// Always inlined, so that the hop's admission is one straight-line piece of code.
    #[inline(always)]
    pub fn enqueue_fast(&mut self, pkt: Packet, now: Time) -> Option<bool> {
        debug_assert!(self.is_fast());
        self.admit::<true>(pkt, now)
    }

    #[inline(always)]
    fn admit<const FAST: bool>(&mut self, mut pkt: Packet, now: Time) -> Option<bool> {
        // Bounds from above on the backlog, known without reading a FIFO entry: packets
        // before `first_waiting` have started, later ones (`waiting_bytes`) may not have. A
        // DropTail port whose bounds are below the largest backlog seen and within its byte
        // limit admits the packet, and that largest backlog stands, whatever the exact
        // backlog: it is not computed (no FIFO walk, none of its mispredicted branches).
        // Otherwise it is, and decides. (The packet limit needs no test here: the largest
        // backlog seen, an admitted packet's waiting count plus one, is at most it.)
        let wp_bound = self.fifo.len() as u32 - self.first_waiting;
        let wb_bound = self.waiting_bytes + pkt.bytes as u64;
        // An ECN port's fast limit is 0: never clear here (see below).
        let ecn = self.fast_limit_bytes == 0;
        let clear = if FAST {
            (wp_bound < self.max_backlog) & (wb_bound <= self.fast_limit_bytes as u64)
        } else {
            !ecn & (wp_bound < self.max_backlog) & (wb_bound <= self.limit_bytes)
        };
        // An ECN port whose packet threshold is in the port is clear below the threshold
        // too (the arrival is then not marked). Tested apart, so that DropTail's path
        // stays as it is.
        if !clear && !self.ecn_clear(wp_bound, wb_bound) {
            let (wp, wb) = self.backlog::<FAST>(now);
            // DropTail's limits (never 0 here: "no limit" is the largest value; `wp` stays
            // far below `u32::MAX` and `wb` below `u64::MAX - 65535`), then the marking.
            if wp >= self.limit_packets || wb + pkt.bytes as u64 > self.limit_bytes {
                self.drops += 1;
                return None;
            }
            if ecn {
                if self.ecn_k_packets != 0 {
                    EcnThreshold::mark_packets(&mut pkt, wp, self.ecn_k_packets as u32);
                } else if let Some(m) = &self.extra().ecn {
                    m.mark(&mut pkt, wp, wb);
                }
            }
            // A select: whether the backlog grew follows the traffic.
            let seen = select_unpredictable(self.busy_until > now, wp + 1, 0);
            self.max_backlog = self.max_backlog.max(seen);
        }
        let start = self.busy_until.max(now);
        let tx = self.tx::<FAST>(pkt.bytes);
        let finish = start + tx;
        self.busy_until = finish;
        self.waiting_bytes += pkt.bytes as u64;
        let was_empty = self.fifo.is_empty();
        self.fifo.push_back(InFlight {
            arrival: finish + self.delay,
            pkt,
        });
        // The accumulators (second line). This packet's share of ∫ unfinished work: tx
        // while it waits, then tx²/2 in service.
        self.area += ((2 * (start - now) + tx) as u128 * tx as u128) >> 1;
        if !FAST {
            let x = self.extra();
            if !x.clock.is_exact() {
                x.busy += tx;
            }
        }
        self.last_bytes = pkt.bytes;
        self.sent += 1;
        self.cum_bytes += pkt.bytes as u64;
        Some(was_empty)
    }

    /// Arrival time of the packet at the head of the link, if any.
    #[inline]
    pub fn head_arrival(&self) -> Option<Time> {
        self.fifo.front().map(|f| f.arrival)
    }

    /// Asks the CPU for this port's boxed state (a scheduled port's queue header), if any.
    #[inline(always)]
    pub fn prefetch_extra(&self) {
        if let Some(x) = &self.extra {
            crate::engine::prefetch(&**x as *const PortExtra);
        }
    }

    /// Asks the CPU for a scheduled port's waiting packets' keys, connections and last
    /// packet (what its next pop reads). Reads the boxed state to find them: call it once
    /// that has been asked for ([`Port::prefetch_extra`]).
    #[inline(always)]
    pub fn prefetch_queue(&self) {
        if let Some(q) = self.extra.as_ref().and_then(|x| x.sched.as_ref()) {
            q.prefetch();
        }
    }

    /// Address of the head packet's entry (a prefetch target: see `engine::prefetch`).
    #[inline]
    pub fn head_ptr(&self) -> *const u8 {
        self.fifo.front_ptr() as *const u8
    }

    /// The head packet, if any (for prefetching what its next hop needs).
    #[inline]
    pub fn head_packet(&self) -> Option<&Packet> {
        self.fifo.front().map(|f| &f.pkt)
    }

    /// The packet admitted last, still on the link (for a partitioned run's bookkeeping).
    #[inline]
    pub fn last_admitted(&mut self) -> Option<(Time, &mut Packet)> {
        self.fifo.back_mut().map(|f| (f.arrival, &mut f.pkt))
    }

    /// Removes the head packet (it has arrived at the far end).
    #[inline]
    pub fn pop_arrived(&mut self) -> Packet {
        let f = self.fifo.pop_front().expect("pop on an empty link");
        // If it was the first waiting packet, it arrived, so it started. Selects, not
        // branches: which case applies follows the traffic, and mispredicted often.
        let first = self.first_waiting == 0;
        self.waiting_bytes -= select_unpredictable(first, f.pkt.bytes as u64, 0);
        self.first_waiting -= !first as u32;
        f.pkt
    }

    /// Drops the packets that have arrived at the far end by `now` from this copy of the
    /// link (a threaded run's sending side, whose far end keeps its own copy: see
    /// [`Port::wire_push`]). Admissions read only packets that have not started, which
    /// these have, so they decide as before.
    #[inline]
    pub fn retire_arrived(&mut self, now: Time) {
        while self.fifo.front().is_some_and(|f| f.arrival <= now) {
            self.pop_arrived();
        }
    }

    /// Puts a packet, arriving at `arrival`, on this copy of the link (a threaded run's
    /// receiving side, which only pops arrivals: see [`Port::pop_arrived`]).
    #[inline]
    pub fn wire_push(&mut self, arrival: Time, pkt: Packet) {
        // Kept balanced with `pop_arrived`, as a scheduled port's transmissions are.
        self.waiting_bytes += pkt.bytes as u64;
        self.fifo.push_back(InFlight { arrival, pkt });
    }

    /// Takes the packets on `far`'s copy of the link as this copy's (after a threaded run,
    /// so that [`Port::packets`] and [`Port::in_system`] count them as the sequential
    /// engine's single copy does).
    pub fn take_wire(&mut self, far: &mut Port) {
        std::mem::swap(&mut self.fifo, &mut far.fifo);
    }

    /// Packets that crossed this link (reached its far end).
    pub fn packets(&self) -> u64 {
        self.sent - self.fifo.len() as u64
    }

    /// Packets admitted and not yet arrived (waiting ones included).
    pub fn in_system(&self) -> usize {
        self.fifo.len()
            + self
                .extra
                .as_ref()
                .and_then(|x| x.sched.as_ref())
                .map_or(0, |q| q.len())
    }
}

#[cfg(test)]
mod tests;
