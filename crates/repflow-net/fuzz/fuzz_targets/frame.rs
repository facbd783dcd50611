//! Fuzz target: decoding arbitrary bytes never panics, and whatever decodes re-encodes to the
//! same bytes (with and without a key).
#![no_main]

use libfuzzer_sys::fuzz_target;
use repflow_net::frame::{decode_frame, encode_frame};

fuzz_target!(|data: &[u8]| {
    for key in [None, Some(&b"fuzz-key"[..])] {
        if let Ok(Some(f)) = decode_frame(data, key, 1 << 16) {
            let again = encode_frame(f.header, key, f.payload);
            assert_eq!(&again[..], &data[..f.consumed]);
        }
    }
});
