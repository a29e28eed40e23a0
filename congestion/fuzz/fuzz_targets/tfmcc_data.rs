//! Parses arbitrary bytes; whatever parses must re-encode to a fixed point. The body lives in
//! `congestion::wire::fuzz_entry::tfmcc_data`, which `congestion/tests/fuzz_corpus.rs` also runs.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| congestion::wire::fuzz_entry::tfmcc_data(data));
