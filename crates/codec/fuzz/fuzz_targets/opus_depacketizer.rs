//! Opus RTP depacketizer (RFC 7587) and RTCP sender-report parser: arbitrary datagrams never
//! panic; an accepted packet's extended sequence numbers stay within half the 16-bit range of
//! the highest seen and its Opus duration is at most 120 ms.
#![no_main]
use codec::opus::{OpusDepacketizer, MAX_PACKET_SAMPLES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = codec::rtcp::parse_sender_reports(data);
    let mut d = OpusDepacketizer::new(111);
    // Records: [len, bytes...]
    let mut rest = data;
    let mut highest: Option<u64> = None;
    while let Some((&len, r)) = rest.split_first() {
        let len = (len as usize).min(r.len());
        let (pkt, r) = r.split_at(len);
        rest = r;
        if let Ok(p) = d.depacketize(pkt) {
            assert!(p.info.samples <= MAX_PACKET_SAMPLES);
            assert!(!p.payload.is_empty());
            if p.new_stream {
                highest = None;
            }
            if let Some(h) = highest {
                assert!(p.seq + 32768 >= h && p.seq <= h + 32768);
            }
            highest = Some(highest.map_or(p.seq, |h| h.max(p.seq)));
        }
    }
});
