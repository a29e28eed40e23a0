//! Signed-SAM verification: arbitrary bytes never verify; a valid SAM XOR the input verifies iff unchanged.
//! The body lives in `security::fuzz_entry::sam_verify`, which `crates/security/tests/fuzz_corpus.rs`
//! also runs over the saved corpus.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| security::fuzz_entry::sam_verify(data));
