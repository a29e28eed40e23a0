//! GStreamer glue: `videotestsrc pattern=ball` -> GstSource -> SvcEncoder -> RTP -> Assembler
//! (prefix 5: 360p) -> Decoder -> GstSink (appsink check through a fakesink).
#![cfg(feature = "gst")]

use codec::depay::{Assembler, AssemblerConfig};
use codec::gst::{GstSink, GstSource};
use codec::ladder::LayerLadder;
use codec::rtp::RtpPacket;
use codec::synth;
use codec::vp9rtp::{LayerStreams, StreamConfig};
use codec::vpx::{Decoder, SvcConfig, SvcEncoder};

#[test]
fn videotestsrc_through_encoder_and_back_out() {
    let (w, h) = (640u32, 360u32);
    let mut src = match GstSource::new("videotestsrc pattern=ball num-buffers=40", w, h, 30, 1) {
        Ok(s) => s,
        Err(e) => panic!("gstreamer source: {e}"),
    };
    let mut conf = SvcConfig::l3t3_720p();
    conf.width = w;
    conf.height = h;
    let ladder = LayerLadder::spatial_major(&conf.cell_kbps).unwrap();
    let res = (0..3)
        .map(|s| {
            let (a, b) = conf.layer_size(s);
            (a as u16, b as u16)
        })
        .collect();
    let mut enc = SvcEncoder::new(conf.clone()).unwrap();
    let mut ls = LayerStreams::new(ladder.clone(), res, StreamConfig::default()).unwrap();
    let k = 5; // spatial layers 0 and 1, all temporal layers: 320x180 output
    let mut asm = Assembler::new(ladder, Some(k), AssemblerConfig::default());
    let mut dec = Decoder::new(1).unwrap();
    let mut sink = GstSink::new("fakesink sync=false", 30, 1).unwrap();
    let mut sources = Vec::new();
    let mut n = 0u32;
    let mut psnr_sum = 0.0;
    let mut psnr_n = 0;
    let mut decoded = 0;
    while let Some(f) = src.next_frame().unwrap() {
        assert_eq!(f.i420.len(), codec::vpx::encoder_i420_len(w, h));
        let pic = enc.encode(&f.i420, n as i64 * 3000).unwrap().unwrap();
        sources.push(f.i420);
        for layer in ls.packets(&pic).unwrap().iter().take(k + 1) {
            for p in layer {
                let bytes = p.to_bytes(&[]).unwrap();
                asm.push(p.layer, &RtpPacket::parse(&bytes).unwrap())
                    .unwrap();
            }
        }
        while let Some(pic) = asm.pop() {
            let d = dec.decode(&pic.access_unit().unwrap()).unwrap().unwrap();
            assert_eq!((d.width, d.height), (320, 180));
            let idx = decoded;
            let reference = synth::scale_i420(&sources[idx], w, h, 320, 180);
            psnr_sum += synth::psnr(&reference, &d.i420);
            psnr_n += 1;
            sink.push(&d, pic.timestamp as i64).unwrap();
            decoded += 1;
        }
        n += 1;
    }
    asm.flush();
    while let Some(pic) = asm.pop() {
        let d = dec.decode(&pic.access_unit().unwrap()).unwrap().unwrap();
        sink.push(&d, pic.timestamp as i64).unwrap();
        decoded += 1;
    }
    sink.finish(10_000).unwrap();
    assert_eq!(n, 40, "source frames");
    assert_eq!(decoded, 40, "every picture decoded at prefix 5");
    assert!(psnr_n > 30);
    let mean = psnr_sum / psnr_n as f64;
    println!("videotestsrc ball, 360p source, 180p decode: mean PSNR {mean:.2} dB");
    // The ball pattern is flat colour with one moving disc: easy content.
    assert!(mean > 28.0, "mean PSNR {mean:.2}");
}
