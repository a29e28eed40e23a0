//! Decodes arbitrary bytes as a Session Announcement Message.
#![no_main]
use congestion::wire::sam;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = sam::decode(data) {
        // Decode is strict, so an accepted message re-encodes byte for byte.
        let mut v = Vec::new();
        match d.signature {
            None => sam::encode(&d.info, &mut v).unwrap(),
            Some(t) => sam::encode_signed(&d.info, &mut v, |_| t.signature.to_vec()).unwrap(),
        }
        assert_eq!(v, data);
    }
});
