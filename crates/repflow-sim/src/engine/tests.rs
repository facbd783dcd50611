//! Unit tests of the event queue (order, wheel geometry, ties) and the random streams.

use super::wheel::{MIN_SLOTS, WHEEL_SLOTS, WRITE_EMPTY_SLOTS};
use super::*;

/// Pops everything, as `(time, event)`.
fn drain(q: &mut EventQueue) -> Vec<(Time, Event)> {
    std::iter::from_fn(|| q.pop()).collect()
}

#[test]
fn hint_names_the_next_event_of_the_slot() {
    let mut q = EventQueue::new(8, 1000, 10_000);
    q.push_near(100, 3);
    q.push_near(100, 5);
    q.push_near(300, 1); // same 512-ps slot, later
    q.push_near(5000, 2); // another slot
    assert_eq!(q.pop(), Some((100, Event::Near(3))));
    assert_eq!(q.hint(), 5);
    assert_eq!(q.pop(), Some((100, Event::Near(5))));
    assert_eq!(q.hint(), 1);
    assert_eq!(q.pop(), Some((300, Event::Near(1))));
    assert_eq!(
        q.hint(),
        2,
        "the slot is empty: the next occupied slot's first"
    );
    assert_eq!(q.pop(), Some((5000, Event::Near(2))));
    assert_eq!(q.hint(), u32::MAX, "nothing pending");
    // A slot a whole turn ahead (its bit lies below the current one's) is not named.
    q.push_near(5000 + 64 * 512, 4);
    assert_eq!(q.hint(), u32::MAX);
    assert_eq!(q.pop(), Some((5000 + 64 * 512, Event::Near(4))));
}

#[test]
fn hints_follow_the_slot_then_the_next_occupied_slots() {
    let mut q = EventQueue::new(8, 1000, 10_000);
    for (t, id) in [(100, 3), (100, 5), (300, 1), (5000, 2), (6000, 4)] {
        q.push_near(t, id);
    }
    assert_eq!(q.pop(), Some((100, Event::Near(3))));
    assert_eq!(q.hints(), [5, 1, 2]);
    assert_eq!(q.pop(), Some((100, Event::Near(5))));
    assert_eq!(q.hints(), [1, 2, 4]);
    assert_eq!(q.pop(), Some((300, Event::Near(1))));
    assert_eq!(q.hints(), [2, 4, u32::MAX]);
    // The guesses are the order in which the events then come.
    assert_eq!(q.pop(), Some((5000, Event::Near(2))));
    assert_eq!(q.pop(), Some((6000, Event::Near(4))));
    assert_eq!(q.hints(), [u32::MAX; 3]);
}

#[test]
fn queue_orders_by_time_then_place() {
    use Event::{Near, Timer};
    let mut q = EventQueue::new(8, 1000, 10_000);
    // Before the first pop, the pushes of one (notional) event: index 0, 1, 2, 3.
    q.push_near(10, 0);
    q.push_timer(10, 100);
    q.push_near(5, 3);
    q.push_near(5, 1);
    let b0 = anc_b(0, 0, 0);
    // Scheduled by one event for one time: in push order, whatever the ids.
    assert_eq!(q.pop(), Some((5, Near(3))));
    assert_eq!(q.last_place(), ((0, b0 | 2), 3));
    // Scheduled later (at 5): after id 1; among themselves in push order, timer or not.
    q.push_timer(5, 101);
    q.push_near(5, 2);
    q.push_near(7, 4);
    let b5 = anc_b(5, 0, 0);
    assert_eq!(q.place(6), ((5, b5 | 3), 6));
    assert_eq!(q.len(), 6);
    assert_eq!(
        drain(&mut q),
        [
            (5, Near(1)),
            (5, Timer(101)),
            (5, Near(2)),
            (7, Near(4)),
            (10, Near(0)),
            (10, Timer(100))
        ]
    );
    assert!(q.is_empty());
}

#[test]
fn ties_between_creators_of_one_time_go_by_their_own_scheduling_times() {
    use Event::Near;
    let mut q = EventQueue::new(8, 1000, 100_000);
    // Two events at 100, the first scheduled at 0 (id 1), the other at 50 (id 0): 1
    // goes first. Each schedules an event at 300 (ids 2 and 3 resp.).
    q.push_near(50, 7);
    q.push_near(100, 1);
    assert_eq!(q.pop(), Some((50, Near(7))));
    q.push_near(100, 0);
    assert_eq!(q.pop(), Some((100, Near(1))));
    q.push_near(300, 3);
    assert_eq!(q.pop(), Some((100, Near(0))));
    q.push_near(300, 2);
    // Both scheduled at 100; 3's creator had been scheduled earlier (at 0, against 50).
    assert_eq!(drain(&mut q), [(300, Near(3)), (300, Near(2))]);
}

#[test]
fn a_crowded_slot_pops_in_key_order() {
    // One 1024 ps slot holding many ids with few distinct times, pushed by one event in
    // no order of id: ties go by push index (which saturates at 15), then by id.
    let mut q = EventQueue::new(64, 1024, 4096);
    let mut rng = Rng::new(5, 5);
    let mut want = Vec::new();
    for i in 0..64u32 {
        let id = (i * 37) % 64;
        let t = 2048 + rng.below(4);
        q.push_near(t, id);
        want.push((t, i.min(15), id));
    }
    want.sort();
    let want: Vec<_> = want
        .into_iter()
        .map(|(t, _, id)| (t, Event::Near(id)))
        .collect();
    assert_eq!(drain(&mut q), want);
}

#[test]
fn queue_mixes_wheel_overflow_and_timers_in_order() {
    // A wide wheel, and a 64-slot one whose horizon most events exceed. Wheels of
    // `WRITE_EMPTY_SLOTS` or more write events into empty slots without reading them,
    // the others push without a branch on emptiness: both ways are checked.
    mixes_in_order(EventQueue::new(256, 1000, 1 << 40));
    // k = 32's geometry: 65,536 slots of 64 ps, most of them empty at a push.
    let narrow = EventQueue::new(256, 64, 2_200_000);
    assert!(narrow.wheel.mask + 1 >= WRITE_EMPTY_SLOTS && narrow.wheel.shift == 6);
    mixes_in_order(narrow);
    mixes_in_order(EventQueue::new(256, 1000, 10_000));
    mixes_in_order(EventQueue::new(256, 1, 100));
    // Wide slots: many events each, pushed out of order into the current and later
    // slots.
    let wide_slots = EventQueue::new(256, 1 << 20, 1 << 30);
    assert!(wide_slots.wheel.mask + 1 < WRITE_EMPTY_SLOTS);
    mixes_in_order(wide_slots);
}

#[test]
fn wheel_width_follows_the_horizon() {
    let slots = |q: EventQueue| q.wheel.mask + 1;
    assert_eq!(slots(EventQueue::new(1, 1000, 1 << 40)), WHEEL_SLOTS);
    assert_eq!(slots(EventQueue::new(1, 1000, 10_000)), MIN_SLOTS);
    // bench-A: 1024 ps slots, 2.2 us horizon (2149 slots ahead).
    assert_eq!(slots(EventQueue::new(1, 1171, 2_200_000)), 4096);
    // Slots asked too narrow for the horizon are widened until it fits: 2.2 us in 64 ps
    // slots is 34,375 (32 ps would be 68,750, past the 65,536 a wheel has).
    let q = EventQueue::new(1, 1, 2_200_000);
    assert_eq!((q.wheel.shift, q.wheel.mask + 1), (6, WHEEL_SLOTS));
}

/// Random pushes (near ids reused once popped, near and far times, timers) and pops
/// against a reference: every pop is the least `(time, scheduled at, rank)` pending.
fn mixes_in_order(mut q: EventQueue) {
    let mut rng = Rng::new(9, 9);
    let mut now = 0u64;
    let mut free: Vec<u32> = (0..256).rev().collect();
    // Pending events as ((time, ancestry, rank), event); the queue's ancestry state
    // modelled alongside.
    type Key = (Time, Anc, u64);
    let mut pending: Vec<(Key, Event)> = Vec::new();
    let (mut cur_b, mut i) = (anc_b(0, 0, 0), 0u32);
    let mut earlier = 0u64; // a past time, for near events placed as of then
    let mut n = 0u64;
    for _ in 0..60_000 {
        if rng.below(10) < 6 || pending.is_empty() {
            // Far, near and present times, and a coarse lattice (as equal packet sizes
            // make), so that many events share a time and a time of scheduling.
            let t = match rng.below(4) {
                0 => now + rng.below(5_000),
                1 => now + rng.below(50_000_000),
                2 => now + 1000 * rng.below(4),
                _ => now,
            };
            let fresh = (now, cur_b | i.min(15));
            let (key, e) = match free.pop() {
                Some(id) if rng.below(2) == 0 => {
                    if rng.below(4) == 0 {
                        let anc = (earlier, rng.below(1 << 32) as u32);
                        q.push_near_as_of(t, id, anc);
                        ((t, anc, id as u64), Event::Near(id))
                    } else {
                        q.push_near(t, id);
                        i += 1;
                        ((t, fresh, id as u64), Event::Near(id))
                    }
                }
                other => {
                    free.extend(other);
                    q.push_timer(t, n);
                    i += 1;
                    ((t, fresh, TIMER_RANK | n), Event::Timer(n))
                }
            };
            pending.push((key, e));
            n += 1;
        } else {
            let peeked = q.peek_time();
            // Nothing before the earliest time: pop_before leaves it in place.
            assert_eq!(q.pop_before(peeked.expect("events pending")), None);
            let got = q.pop().expect("events pending");
            assert_eq!(peeked, Some(got.0));
            let k = (0..pending.len())
                .min_by_key(|&k| pending[k].0)
                .expect("not empty");
            let (key, e) = pending.swap_remove(k);
            assert_eq!(got, (key.0, e));
            assert_eq!(q.last_place(), (key.1, key.2));
            if let Event::Near(id) = e {
                free.push(id);
            }
            if key.0 > now {
                earlier = now;
            }
            now = key.0;
            (cur_b, i) = (anc_b(now, key.1 .0, 0), 0);
        }
        assert_eq!(q.len(), pending.len());
    }
    pending.sort_by_key(|&(k, _)| k);
    let want: Vec<_> = pending.iter().map(|&(k, e)| (k.0, e)).collect();
    assert_eq!(drain(&mut q), want);
}

#[test]
fn rng_streams_are_reproducible_and_distinct() {
    let a: Vec<u64> = (0..4).map(|_| Rng::new(1, 2).next_u64()).collect();
    assert!(a.windows(2).all(|w| w[0] == w[1]));
    assert_ne!(Rng::new(1, 2).next_u64(), Rng::new(1, 3).next_u64());
    assert_ne!(Rng::new(1, 2).next_u64(), Rng::new(2, 2).next_u64());
    let mut r = Rng::new(3, 3);
    let mean: f64 = (0..100_000).map(|_| r.exp(2.0)).sum::<f64>() / 100_000.0;
    assert!((mean - 2.0).abs() < 0.05);
}
