//! A config file (TOML): server keys and [[session]] tables, each session resolved.
//! The body lives in `layercast_server::fuzz_entry::config_file`, which `server/tests/fuzz_corpus.rs`
//! also runs over the committed corpus.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| layercast_server::fuzz_entry::config_file(data));
