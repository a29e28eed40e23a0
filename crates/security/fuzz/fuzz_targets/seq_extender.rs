//! Feeds arbitrary 16-bit sequence numbers to the extender (never panics, highest is monotone).
//! The body lives in `security::fuzz_entry::seq_extender`, which `crates/security/tests/fuzz_corpus.rs`
//! also runs over the saved corpus.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| security::fuzz_entry::seq_extender(data));
