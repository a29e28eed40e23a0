//! Media AEAD open: arbitrary bytes never open; a sealed packet XOR the input opens iff unchanged.
//! The body lives in `congestion::wire::fuzz_entry::media_open`, which `congestion/tests/fuzz_corpus.rs`
//! also runs over the saved corpus.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| congestion::wire::fuzz_entry::media_open(data));
