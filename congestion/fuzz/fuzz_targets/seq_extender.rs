//! Feeds arbitrary 16-bit sequence numbers to the extender (never panics, highest is monotone).
//! The body lives in `congestion::wire::fuzz_entry::seq_extender`, which `congestion/tests/fuzz_corpus.rs`
//! also runs over the saved corpus.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| congestion::wire::fuzz_entry::seq_extender(data));
