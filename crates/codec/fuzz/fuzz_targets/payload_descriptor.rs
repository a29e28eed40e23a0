//! RFC 9628 payload descriptor parser: never panics; whatever parses re-serialises to a
//! descriptor that parses to the same value.
#![no_main]
use codec::vp9rtp::PayloadDescriptor;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((d, n)) = PayloadDescriptor::parse(data) {
        assert!(n <= data.len());
        let mut v = Vec::new();
        if d.write(&mut v).is_ok() {
            let (d2, m) = PayloadDescriptor::parse(&v).expect("own output parses");
            assert_eq!(m, v.len());
            assert_eq!(d2, d);
        }
    }
    let _ = codec::superframe::split(data);
    let _ = codec::rtp::RtpPacket::parse(data).map(|p| p.extensions().count());
});
