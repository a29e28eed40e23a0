//! Parses arbitrary bytes; whatever parses must re-encode to a fixed point. The body lives in
//! `security::fuzz_entry::tfmcc_data`, which `crates/security/tests/fuzz_corpus.rs` also runs.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| security::fuzz_entry::tfmcc_data(data));
