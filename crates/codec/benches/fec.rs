//! FEC cost per packet (`codec::fec`), 1200-byte packets (1156-byte payloads), rows of 4:
//!
//! * `fec/encode_1200B_row4`: one media packet in plus, every fourth, one repair out.
//! * `fec/decode_1200B_row4_5pct_loss`: the decoder fed a pre-built stream (media + repairs)
//!   with every 20th packet lost, recoveries polled; per packet of the stream.
use codec::fec::{FecDecoder, FecEncoder, FecParams};
use codec::rtp::{RtpHeader, RtpPacket};
use codec::vp9rtp::LayerPacket;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const PAYLOAD: usize = 1156;

fn media(i: u32) -> LayerPacket {
    LayerPacket {
        layer: 2,
        header: RtpHeader {
            marker: i % 4 == 3,
            payload_type: 96,
            timestamp: i / 4 * 3000,
            ssrc: 7,
            ..Default::default()
        },
        payload: (0..PAYLOAD as u32).map(|b| (b ^ i) as u8).collect(),
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("fec");
    let pkts: Vec<LayerPacket> = (0..1000).map(media).collect();
    g.throughput(Throughput::Elements(pkts.len() as u64));
    g.bench_function("encode_1200B_row4", |b| {
        b.iter(|| {
            let mut enc = FecEncoder::new(FecParams::default(), PAYLOAD + 16).unwrap();
            let mut repairs = 0;
            for (i, p) in pkts.iter().enumerate() {
                enc.push_media(i as u16, &p.header, &p.payload);
                if i % 4 == 3 && enc.repair().is_some() {
                    repairs += 1;
                }
            }
            repairs
        })
    });
    // The stream as received: media and repairs with their sequence numbers, 5 % lost.
    let mut enc = FecEncoder::new(FecParams::default(), PAYLOAD + 16).unwrap();
    let mut wire = Vec::new();
    let mut seq = 0u16;
    for (i, p) in pkts.iter().enumerate() {
        enc.push_media(seq, &p.header, &p.payload);
        let mut h = p.header.clone();
        h.sequence_number = seq;
        wire.push(h.to_vec(&p.payload).unwrap());
        seq = seq.wrapping_add(1);
        if i % 4 == 3 {
            let r = enc.repair().unwrap();
            let mut h = r.header.clone();
            h.sequence_number = seq;
            wire.push(h.to_vec(&r.payload).unwrap());
            seq = seq.wrapping_add(1);
        }
    }
    let kept: Vec<Vec<u8>> = wire
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % 20 != 7)
        .map(|(_, w)| w)
        .collect();
    g.throughput(Throughput::Elements(kept.len() as u64));
    g.bench_function("decode_1200B_row4_5pct_loss", |b| {
        b.iter(|| {
            let mut dec = FecDecoder::new(FecParams::default());
            let mut recovered = 0;
            for w in &kept {
                let _ = dec.push(&RtpPacket::parse(w).unwrap());
                while dec.poll_recovered().is_some() {
                    recovered += 1;
                }
            }
            assert!(recovered > 40);
            recovered
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
