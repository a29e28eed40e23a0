//! Depacketizer / picture assembler: arbitrary packet sequences on arbitrary layers never
//! panic, and every returned picture starts with spatial layer 0 and has ordered layers.
#![no_main]
use codec::depay::{Assembler, AssemblerConfig};
use codec::ladder::LayerLadder;
use codec::rtp::RtpPacket;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let ladder = LayerLadder::default_720p_l3t3();
    let top = data.first().map(|b| (*b as usize) % 10).filter(|&k| k < 9);
    let mut asm = Assembler::new(ladder, top, AssemblerConfig::default());
    // Records: [layer, len, bytes...]
    let mut rest = data.get(1..).unwrap_or(&[]);
    while rest.len() >= 2 {
        let layer = rest[0] as usize % 10;
        let len = (rest[1] as usize).min(rest.len() - 2);
        let pkt = &rest[2..2 + len];
        rest = &rest[2 + len..];
        if let Ok(p) = RtpPacket::parse(pkt) {
            let _ = asm.push(layer, &p);
        }
        if layer == 9 {
            asm.flush();
        }
        while let Some(pic) = asm.pop() {
            assert_eq!(pic.frames[0].spatial, 0);
            assert!(pic.frames.windows(2).all(|w| w[0].spatial < w[1].spatial));
            let _ = pic.access_unit();
        }
    }
    asm.flush();
    while asm.pop().is_some() {}
});
