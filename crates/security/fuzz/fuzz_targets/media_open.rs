//! Media AEAD open: arbitrary bytes never open; a sealed packet XOR the input opens iff unchanged.
//! The body lives in `security::fuzz_entry::media_open`, which `crates/security/tests/fuzz_corpus.rs`
//! also runs over the saved corpus.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| security::fuzz_entry::media_open(data));
