//! TFMCC report MAC: arbitrary bytes never verify; a sealed report XOR the input verifies iff unchanged.
//! The body lives in `security::fuzz_entry::report_mac`, which `crates/security/tests/fuzz_corpus.rs`
//! also runs over the saved corpus.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| security::fuzz_entry::report_mac(data));
