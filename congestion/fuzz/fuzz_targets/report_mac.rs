//! TFMCC report MAC: arbitrary bytes never verify; a sealed report XOR the input verifies iff unchanged.
//! The body lives in `congestion::wire::fuzz_entry::report_mac`, which `congestion/tests/fuzz_corpus.rs`
//! also runs over the saved corpus.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| congestion::wire::fuzz_entry::report_mac(data));
