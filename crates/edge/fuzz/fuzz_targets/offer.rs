//! Any bytes as a browser's WHEP offer: text checks, str0m's SDP parser, the negotiation.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    edge::whep::fuzz_offer(data);
});
