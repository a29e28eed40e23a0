//! Parses arbitrary bytes as a cc extension element and as an RTP header-extension body.
//! The body lives in `congestion::wire::fuzz_entry::cc_ext`, which `congestion/tests/fuzz_corpus.rs`
//! also runs over the saved corpus.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| congestion::wire::fuzz_entry::cc_ext(data));
