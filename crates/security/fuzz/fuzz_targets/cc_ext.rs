//! Parses arbitrary bytes as a cc extension element and as an RTP header-extension body.
//! The body lives in `security::fuzz_entry::cc_ext`, which `crates/security/tests/fuzz_corpus.rs`
//! also runs over the saved corpus.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| security::fuzz_entry::cc_ext(data));
