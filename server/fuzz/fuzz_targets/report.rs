//! A UDP viewer report datagram: the header parser.
//! The body lives in `layercast_server::fuzz_entry::report`, which `server/tests/fuzz_corpus.rs`
//! also runs over the committed corpus.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| layercast_server::fuzz_entry::report(data));
