//! The fuzz targets' invariants on stable Rust, over seeded random inputs (bounded: a few
//! thousand inputs, about a second): the server's stream reader against the sans-IO decoder,
//! and the duplicate filter's bounds and delivery rule. `fuzz/` runs the same functions under
//! libFuzzer on nightly (see docs/protocol.md).

use repflow_net::frame::{encode_frame, flags, Header};
use repflow_net::fuzzing::{dedup_ops, stream_reader};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A stream of valid frames, then a random mutation (or none) and a random cut.
fn stream(r: &mut Rng) -> Vec<u8> {
    let keyed = r.next().is_multiple_of(2);
    let mut s = vec![(if keyed { 0x80 } else { 0 }) | (r.next() % 64) as u8];
    for _ in 0..r.next() % 4 {
        let copies = (r.next() % 3 + 1) as u8;
        let h = Header {
            flags: [0, flags::CALL, flags::REPLY][(r.next() % 3) as usize],
            copy: (r.next() % u64::from(copies)) as u8,
            copies,
            flow_id: r.next(),
            length: 0,
            timestamp_ms: r.next() >> 20,
            digest: 0,
        };
        let len = [0, 1, 7, 63, 64, 65, 300, 5000][(r.next() % 8) as usize];
        let payload: Vec<u8> = (0..len).map(|_| r.next() as u8).collect();
        s.extend(encode_frame(h, keyed.then_some(&b"fuzz-key"[..]), &payload));
    }
    if s.len() > 1 && r.next().is_multiple_of(2) {
        let i = 1 + (r.next() as usize) % (s.len() - 1);
        s[i] ^= 1 << (r.next() % 8);
    }
    if r.next().is_multiple_of(3) {
        let keep = 1 + (r.next() as usize) % s.len();
        s.truncate(keep);
    }
    s
}

#[test]
fn stream_reader_agrees_with_the_decoder() {
    let mut r = Rng(0x2545_f491_4f6c_dd1d);
    let mut frames = 0;
    for _ in 0..3000 {
        frames += stream_reader(&stream(&mut r));
    }
    // Half the streams are intact: well over a thousand frames must come through.
    assert!(frames > 1000, "only {frames} frames read");
    // And on plain random bytes.
    for _ in 0..3000 {
        let n = (r.next() % 120) as usize;
        let b: Vec<u8> = (0..n).map(|_| r.next() as u8).collect();
        stream_reader(&b);
    }
}

#[test]
fn dedup_invariants_hold_on_random_operations() {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..2000 {
        let n = (r.next() % 800) as usize;
        let b: Vec<u8> = (0..n).map(|_| r.next() as u8).collect();
        dedup_ops(&b);
    }
}
