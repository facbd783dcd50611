//! Fuzz target: the duplicate filter's bounds and delivery rule under arbitrary operations.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    repflow_net::fuzzing::dedup_ops(data);
});
