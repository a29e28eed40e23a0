//! Viewer telemetry JSON (HTTP body and UDP report payload): parse, validate, the viewer table.
//! The body lives in `layercast_server::fuzz_entry::telemetry`, which `server/tests/fuzz_corpus.rs`
//! also runs over the committed corpus.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| layercast_server::fuzz_entry::telemetry(data));
