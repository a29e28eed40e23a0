//! Feeds arbitrary 16-bit sequence numbers to the extender: it must never panic and must
//! keep its highest value monotone.
#![no_main]
use congestion::wire::SeqExtender;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut x = SeqExtender::new();
    let mut hi = 0u64;
    for c in data.chunks_exact(2) {
        let s = u16::from_be_bytes([c[0], c[1]]);
        let e = x.extend(s);
        assert_eq!(e as u16, s);
        let h = x.highest().unwrap();
        assert!(h >= hi);
        hi = h;
    }
});
