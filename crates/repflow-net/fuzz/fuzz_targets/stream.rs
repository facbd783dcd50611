//! Fuzz target: the server's stream reader (split reads of 1–64 bytes, with or without a key)
//! agrees with the sans-IO decoder on arbitrary bytes and never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    repflow_net::fuzzing::stream_reader(data);
});
