//! Parses arbitrary bytes as a cc extension element and as an RTP header-extension body.
#![no_main]
use congestion::wire::cc_ext::{find_element, CcFields};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = CcFields::parse(data) {
        // Whatever parses re-encodes to the first 11 bytes.
        assert_eq!(&f.to_bytes()[..], &data[..11]);
    }
    if data.len() >= 3 {
        let profile = u16::from_be_bytes([data[0], data[1]]);
        let id = data[2];
        let body = &data[3..];
        let _ = find_element(profile, body, id);
        let _ = CcFields::from_extension(profile, body, id);
    }
});
