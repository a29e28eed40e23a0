//! Decodes arbitrary bytes as a Session Announcement Message (strict: re-encodes byte for byte).
//! The body lives in `security::fuzz_entry::sam`, which `crates/security/tests/fuzz_corpus.rs`
//! also runs over the saved corpus.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| security::fuzz_entry::sam(data));
