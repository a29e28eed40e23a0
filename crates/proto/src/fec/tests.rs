use super::*;
use crate::rtp::{MediaPacket, RtpHeader, RtpPacket};
use proptest::prelude::*;

const SSRC: u32 = 0x4c43_0007;
/// Payload room of a 1200-byte packet after the RTP header and a 16-byte extension block.
const MAX_PAYLOAD: usize = 1200 - 12 - 16;

fn media(len: usize, seed: u32, marker: bool) -> MediaPacket {
    MediaPacket {
        header: RtpHeader {
            marker,
            payload_type: 96,
            sequence_number: 0,
            timestamp: seed.wrapping_mul(3000),
            ssrc: SSRC,
            ..Default::default()
        },
        payload: (0..len as u32)
            .map(|i| (i.wrapping_mul(31) ^ seed.wrapping_mul(7)) as u8)
            .collect(),
    }
}

/// The packet as a sender puts it on the wire: sequence number, a header-extension element
/// and RTP padding (neither is protected).
fn wire(p: &MediaPacket, seq: u16) -> Vec<u8> {
    let mut h = p.header.clone();
    h.sequence_number = seq;
    h.extensions = vec![(1, vec![0xab; 11])];
    h.padding = 3;
    h.to_vec(&p.payload).unwrap()
}

/// What the decoder must give back for a lost media packet: the packet without extensions
/// and padding.
fn bare(p: &MediaPacket, seq: u16) -> Vec<u8> {
    let mut h = p.header.clone();
    h.sequence_number = seq;
    h.to_vec(&p.payload).unwrap()
}

/// A layer's stream: `rows` groups of media packets (sizes from `sizes`), each followed by
/// `repairs` slots asked of the encoder. Returns (wire bytes, Some(bare media) | None for a
/// repair or padding slot).
fn stream(
    params: FecParams,
    first_seq: u16,
    sizes: &[usize],
    per_row: usize,
    repairs: usize,
) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut enc = FecEncoder::new(params, MAX_PAYLOAD).unwrap();
    let mut seq = first_seq;
    let mut out = Vec::new();
    for (r, chunk) in sizes.chunks(per_row).enumerate() {
        for (i, &len) in chunk.iter().enumerate() {
            let p = media(len, (r * 100 + i) as u32, i + 1 == chunk.len());
            enc.push_media(seq, &p.header, &p.payload);
            out.push((wire(&p, seq), Some(bare(&p, seq))));
            seq = seq.wrapping_add(1);
        }
        for _ in 0..repairs {
            if let Some(rp) = enc.repair() {
                assert!(rp.payload.len() <= MAX_PAYLOAD);
                out.push((wire(&rp, seq), None));
                seq = seq.wrapping_add(1);
            }
        }
    }
    out
}

/// Feeds `pkts` (skipping the indices in `lost`) into a decoder; returns every media packet
/// the assembler would get (received, as bare packets, or recovered), by sequence number.
fn receive(
    pkts: &[(Vec<u8>, Option<Vec<u8>>)],
    lost: &[usize],
) -> std::collections::BTreeMap<u16, Vec<u8>> {
    let mut dec = FecDecoder::new(FecParams::default());
    let mut got = std::collections::BTreeMap::new();
    for (i, (w, _)) in pkts.iter().enumerate() {
        if lost.contains(&i) {
            continue;
        }
        let p = RtpPacket::parse(w).unwrap();
        if dec.push(&p).unwrap() == Received::Media {
            let mut h = p.to_header();
            h.extensions.clear();
            h.padding = 0;
            got.insert(p.sequence_number(), h.to_vec(p.payload()).unwrap());
        }
        while let Some(r) = dec.poll_recovered() {
            let rp = RtpPacket::parse(&r).unwrap();
            assert!(
                got.insert(rp.sequence_number(), r.clone()).is_none(),
                "recovered a packet that was received"
            );
        }
    }
    got
}

fn expected(pkts: &[(Vec<u8>, Option<Vec<u8>>)]) -> std::collections::BTreeMap<u16, Vec<u8>> {
    pkts.iter()
        .filter_map(|(w, b)| {
            b.as_ref()
                .map(|b| (RtpPacket::parse(w).unwrap().sequence_number(), b.clone()))
        })
        .collect()
}

#[test]
fn header_forms_and_bytes() {
    let mut h = RepairHeader {
        padding: false,
        extension: false,
        csrc_count: 0,
        marker: true,
        payload_type: 96,
        length: 0x1234,
        timestamp: 0xdead_beef,
        sn_base: 65530,
        mask: 0b101,
    };
    let mut v = Vec::new();
    h.write(&mut v);
    assert_eq!(
        v,
        [0x00, 0xe0, 0x12, 0x34, 0xde, 0xad, 0xbe, 0xef, 0xff, 0xfa, 0xd0, 0x00]
    );
    assert_eq!(
        h.protected().collect::<Vec<_>>(),
        vec![65530, 65532],
        "sequence numbers wrap"
    );
    for (mask, len) in [
        (1u128 << 14, 12),
        (1 << 15, 16),
        (1 << 45, 16),
        (1 << 46, 24),
    ] {
        h.mask = mask;
        let mut v = Vec::new();
        h.write(&mut v);
        assert_eq!(v.len(), len, "mask {mask:#x}");
        assert_eq!(RepairHeader::parse(&v).unwrap(), (h, len));
    }
    // R or F set, short buffers.
    assert!(RepairHeader::parse(&[0x80; 12]).is_err());
    assert!(RepairHeader::parse(&[0x40; 12]).is_err());
    assert!(RepairHeader::parse(&[0u8; 11]).is_err());
    assert!(
        RepairHeader::parse(&[0u8; 15]).is_err(),
        "k = 0 needs 16 bytes"
    );
}

#[test]
fn params_from_packet_rate_and_sdp() {
    // 20 % spare slots: a repair every 4 media packets; 30 packets/s: 30 in 1 s.
    let p = FecParams::for_layer(30.0, 0.8);
    assert_eq!((p.row, p.span), (4, 30));
    // Busy and fast layers saturate at the mask.
    let p = FecParams::for_layer(2000.0, 0.95);
    assert_eq!((p.row, p.span), (16, MAX_SPAN));
    // Slow layers: at least two rows.
    let p = FecParams::for_layer(3.0, 0.5);
    assert_eq!((p.row, p.span), (2, 4));
    let a = p.sdp_attribute();
    assert_eq!(a, "97 row=2;span=4");
    assert_eq!(FecParams::parse_sdp_attribute(&a).unwrap(), p);
    assert_eq!(
        FecParams::parse_sdp_attribute("98 span=20;future=1").unwrap(),
        FecParams {
            payload_type: 98,
            row: 4,
            span: 20
        }
    );
    for bad in [
        "",
        "x",
        "97 row=0",
        "97 span=47",
        "97 row=9;span=8",
        "12",
        "97 row",
    ] {
        assert!(FecParams::parse_sdp_attribute(bad).is_err(), "{bad:?}");
    }
    assert!(FecEncoder::new(FecParams::default(), MAX_HEADER_LEN).is_err());
}

#[test]
fn no_loss_means_nothing_recovered_and_nothing_duplicated() {
    let sizes: Vec<usize> = (0..40).map(|i| 100 + i * 25).collect();
    let pkts = stream(FecParams::default(), 100, &sizes, 4, 1);
    assert_eq!(pkts.len(), 50);
    assert_eq!(receive(&pkts, &[]), expected(&pkts));
}

#[test]
fn a_lost_pair_is_repaired_with_the_second_pass() {
    // One row of 4 and three repairs: the row (1st pass), then even and odd packets.
    let sizes = [300, 1100, 40, 700];
    let pkts = stream(FecParams::default(), 65534, &sizes, 4, 3);
    assert_eq!(pkts.len(), 7);
    let want = expected(&pkts);
    for first in 0..3 {
        assert_eq!(receive(&pkts, &[first, first + 1]), want, "lost {first}+1");
    }
    // Three of the four: packet 1 comes back (the odd mask misses it alone), 0 and 2 do not.
    let got = receive(&pkts, &[0, 1, 2]);
    assert_eq!(got.keys().copied().collect::<Vec<_>>(), vec![1, 65535]);
}

#[test]
fn encoder_spends_idle_slots_once_then_pads() {
    let mut enc = FecEncoder::new(FecParams::default(), MAX_PAYLOAD).unwrap();
    assert!(enc.repair().is_none(), "nothing to protect yet");
    for s in 0..3u16 {
        {
            let m = media(200, s as u32, false);
            enc.push_media(s, &m.header, &m.payload);
        }
    }
    let mut n = 0;
    while enc.repair().is_some() {
        n += 1;
    }
    // 1st pass over the 3, then (2,0) = {0,2}, (2,1) = {1}, (3,0) = {0}, (3,2) = {2}; (3,1)
    // and (1,0) repeat earlier masks: distinct masks only.
    assert_eq!(n, 1 + 4);
    assert_eq!(enc.stats().first_pass, 1);
    assert_eq!(enc.stats().second_pass, 4);
    // New media restarts the second pass.
    {
        let m = media(10, 9, true);
        enc.push_media(3, &m.header, &m.payload);
    }
    assert!(enc.repair().is_some());
    assert_eq!(enc.stats().protected, 4);
}

#[test]
fn too_long_and_aged_out_packets_are_counted_unprotected() {
    let p = FecParams {
        row: 2,
        span: 4,
        ..FecParams::default()
    };
    let mut enc = FecEncoder::new(p, MAX_PAYLOAD).unwrap();
    {
        let m = media(MAX_PAYLOAD - MAX_HEADER_LEN + 1, 0, false);
        enc.push_media(0, &m.header, &m.payload);
    }
    assert_eq!(enc.stats().unprotected, 1);
    for s in 1..=6u16 {
        {
            let m = media(100, s as u32, false);
            enc.push_media(s, &m.header, &m.payload);
        }
    }
    // Window of span 4 keeps 3..=6: 1 and 2 left before any slot came.
    assert_eq!(enc.stats().unprotected, 3);
    assert_eq!(enc.pending(), 4);
}

#[test]
fn repair_before_media_and_duplicates() {
    let pkts = stream(FecParams::default(), 7, &[500, 600], 2, 1);
    let mut dec = FecDecoder::new(FecParams::default());
    let p = |i: usize| RtpPacket::parse(&pkts[i].0).unwrap();
    assert_eq!(dec.push(&p(2)).unwrap(), Received::Repair);
    assert_eq!(dec.push(&p(1)).unwrap(), Received::Media);
    // The repair now misses packet 0 alone: recovered.
    let r = dec.poll_recovered().unwrap();
    assert_eq!(&r, pkts[0].1.as_ref().unwrap());
    // ... so when it arrives late, it is a duplicate.
    assert_eq!(dec.push(&p(0)).unwrap(), Received::Duplicate);
    assert_eq!(dec.push(&p(1)).unwrap(), Received::Duplicate);
    assert_eq!(dec.stats().recovered, 1);
    assert_eq!(dec.stats().duplicates, 2);
}

#[test]
fn new_ssrc_resets_the_decoder() {
    let pkts = stream(FecParams::default(), 7, &[500, 600], 2, 1);
    let mut dec = FecDecoder::new(FecParams::default());
    dec.push(&RtpPacket::parse(&pkts[0].0).unwrap()).unwrap();
    let mut other = RtpPacket::parse(&pkts[1].0).unwrap().to_header();
    other.ssrc = 99;
    let b = other.to_vec(&[1, 2, 3]).unwrap();
    dec.push(&RtpPacket::parse(&b).unwrap()).unwrap();
    // The repair of the old stream (SSRC SSRC) resets again and recovers nothing.
    dec.push(&RtpPacket::parse(&pkts[2].0).unwrap()).unwrap();
    assert!(dec.poll_recovered().is_none());
}

fn arb_header() -> impl Strategy<Value = RepairHeader> {
    (
        any::<(bool, bool, u8, bool, u8, u16, u32, u16)>(),
        any::<u128>(),
    )
        .prop_map(|((p, x, cc, m, pt, len, ts, base), mask)| RepairHeader {
            padding: p,
            extension: x,
            csrc_count: cc & 0x0f,
            marker: m,
            payload_type: pt & 0x7f,
            length: len,
            timestamp: ts,
            sn_base: base,
            mask: mask & ((1u128 << 110) - 1),
        })
}

proptest! {
    #[test]
    fn header_round_trip(h in arb_header(), tail in proptest::collection::vec(any::<u8>(), 0..20)) {
        let mut v = Vec::new();
        h.write(&mut v);
        prop_assert_eq!(v.len(), h.len());
        v.extend_from_slice(&tail);
        prop_assert_eq!(RepairHeader::parse(&v).unwrap(), (h, h.len()));
    }

    /// Any single loss (media or repair) anywhere in a protected stream is recovered
    /// bit-exactly, whatever the row, the packet sizes and the first sequence number (with
    /// wrap-around), when every row gets its repair slot.
    #[test]
    fn any_single_loss_is_recovered_bit_exactly(
        row in 1u8..=16,
        first in any::<u16>(),
        sizes in proptest::collection::vec(1usize..=MAX_PAYLOAD - MAX_HEADER_LEN, 1..60),
        extra in 0usize..3,
        lost_at in any::<proptest::sample::Index>(),
    ) {
        let params = FecParams { row, span: MAX_SPAN, ..FecParams::default() };
        let pkts = stream(params, first, &sizes, row as usize, 1 + extra);
        let lost = lost_at.index(pkts.len());
        prop_assert_eq!(receive(&pkts, &[lost]), expected(&pkts));
    }

    /// Garbage in: no panic, and whatever comes out parses as RTP.
    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        fuzz_repair_packet(&data);
    }

    /// Real repair packets with arbitrary bytes flipped: no panic, recovered packets parse.
    #[test]
    fn corrupted_repairs_never_panic(
        flips in proptest::collection::vec((any::<proptest::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let sizes: Vec<usize> = (0..12).map(|i| 50 + 90 * i).collect();
        let mut pkts = stream(FecParams::default(), 1, &sizes, 4, 2);
        for (at, x) in flips {
            let i = at.index(pkts.len());
            let n = pkts[i].0.len();
            pkts[i].0[at.index(n)] ^= x | 1;
        }
        let mut dec = FecDecoder::new(FecParams::default());
        for (w, _) in pkts.iter().skip(1) {
            if let Ok(p) = RtpPacket::parse(w) {
                let _ = dec.push(&p);
            }
            while let Some(r) = dec.poll_recovered() {
                prop_assert!(RtpPacket::parse(&r).is_ok());
            }
        }
    }
}

/// Writes the seed corpus of the `repair_packet` fuzz target (real streams with losses, and
/// header-only inputs): `LC_WRITE_FEC_CORPUS=1 cargo test -p layercast-proto --lib
/// write_seed_corpus`.
#[test]
fn write_seed_corpus() {
    if std::env::var("LC_WRITE_FEC_CORPUS").is_err() {
        return;
    }
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../codec/fuzz/corpus/repair_packet");
    std::fs::create_dir_all(&dir).unwrap();
    let mut seeds: Vec<Vec<u8>> = Vec::new();
    for (row, rep, first) in [(1u8, 1, 0u16), (4, 1, 65530), (4, 3, 9), (16, 2, 300)] {
        let params = FecParams {
            row,
            span: MAX_SPAN,
            ..FecParams::default()
        };
        let sizes: Vec<usize> = (0..24).map(|i| 1 + (i * 97) % 1100).collect();
        let pkts = stream(params, first, &sizes, row as usize, rep);
        let all: Vec<Vec<u8>> = pkts.iter().map(|p| p.0.clone()).collect();
        seeds.push(fuzz_stream(&all));
        let lossy: Vec<Vec<u8>> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 5 != 1)
            .map(|(_, p)| p.clone())
            .collect();
        seeds.push(fuzz_stream(&lossy));
        let rp = pkts.iter().find(|p| p.1.is_none()).unwrap();
        let payload = RtpPacket::parse(&rp.0).unwrap().payload().to_vec();
        seeds.push(payload);
    }
    seeds.push(Vec::new());
    for (i, s) in seeds.iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i:02}")), s).unwrap();
    }
}

/// Lagged one-packet repairs on a separate stream: every burst shorter than the lag,
/// wherever it starts (sequence numbers wrapping), comes back bit-exact when the repairs
/// arrive; a burst that also takes the repairs of its packets does not; malformed repairs
/// are errors.
#[test]
fn lagged_repairs_recover_any_burst_shorter_than_the_lag() {
    let lag = 10u8;
    let n = 60usize;
    let first = 65_530u16;
    let pkts: Vec<MediaPacket> = (0..n)
        .map(|i| media(40 + (i * 13) % 160, i as u32, false))
        .collect();
    let mut enc = LaggedRepair::new(lag, 97, SSRC ^ 1).unwrap();
    assert_eq!(enc.announced_params(), vec![1, 11]);
    assert!(FecParams::from_announced(97, &enc.announced_params()).is_ok());
    // (index of the media packet the repair went with, repair payload)
    let mut repairs: Vec<(usize, Vec<u8>)> = Vec::new();
    for (i, p) in pkts.iter().enumerate() {
        let seq = first.wrapping_add(i as u16);
        if let Some(r) = enc.push_media(seq, &p.header, &p.payload) {
            assert_eq!((r.header.ssrc, r.header.payload_type), (SSRC ^ 1, 97));
            repairs.push((i, r.payload));
        }
    }
    assert_eq!(repairs.len(), n - lag as usize);
    // `lost(i)`: media packet i is lost; `rlost(i)`: the repair sent with packet i is lost.
    let run = |lost: &dyn Fn(usize) -> bool, rlost: &dyn Fn(usize) -> bool| -> (usize, usize) {
        let mut dec = FecDecoder::new(FecParams::from_announced(97, &[1, 11]).unwrap());
        let (mut got, mut want) = (0, 0);
        for (i, p) in pkts.iter().enumerate() {
            let seq = first.wrapping_add(i as u16);
            if lost(i) {
                want += usize::from(i + (lag as usize) < n);
            } else {
                dec.push(&RtpPacket::parse(&wire(p, seq)).unwrap()).unwrap();
            }
            for (_, r) in repairs.iter().filter(|r| r.0 == i && !rlost(i)) {
                dec.push_separate_repair(r).unwrap();
            }
            while let Some(rec) = dec.poll_recovered() {
                let s = RtpPacket::parse(&rec).unwrap().sequence_number();
                let k = s.wrapping_sub(first) as usize;
                assert!(lost(k), "recovered a packet that came");
                assert_eq!(rec, bare(&pkts[k], s));
                got += 1;
            }
        }
        (got, want)
    };
    for start in 0..n - 2 * lag as usize {
        for len in 1..lag as usize {
            let burst = |i: usize| (start..start + len).contains(&i);
            let (got, want) = run(&burst, &burst);
            assert_eq!(got, want, "burst of {len} from {start}");
        }
    }
    // A burst as long as the lag takes the repair of its first packet with it.
    let burst = |i: usize| (5..5 + 2 * lag as usize).contains(&i);
    let (got, want) = run(&burst, &burst);
    assert!(got < want);
    let mut dec = FecDecoder::new(FecParams::default());
    assert!(dec.push_separate_repair(&[1, 2, 3]).is_err());
    assert!(LaggedRepair::new(0, 97, 1).is_err());
    assert!(LaggedRepair::new(46, 97, 1).is_err());
}
