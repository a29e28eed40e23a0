//! FEC repair packets (docs/protocols/fec.md): the RFC 8627 header parser round-trips, and
//! arbitrary packets into a decoder never panic. The body is `codec::fec::fuzz_repair_packet`,
//! which `codec/tests/fuzz_corpus.rs` replays over the committed corpus on stable.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| codec::fec::fuzz_repair_packet(data));
