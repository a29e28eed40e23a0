//! A live source's capture times are not a perfect clock (a looped 25-fps clip at 30 fps has a
//! 24-ms and a 67-ms gap at every loop point; a camera's driver jitters), and those times are
//! the pictures' RTP timestamps. libvpx re-derives the frame rate, and from it every layer's
//! frame budget, from the gaps between the timestamps it is given, so the encoder gives it a
//! regular clock and hands the capture time back out: the coded stream must not depend on the
//! jitter, and each picture must keep its own timestamp.

use codec::synth;
use codec::vpx::{SvcConfig, SvcEncoder};

fn encode(jitter: bool) -> (Vec<i64>, Vec<Vec<u8>>) {
    let mut conf = SvcConfig::l3t3_720p();
    conf.width = 320;
    conf.height = 180;
    conf.cell_kbps = vec![vec![30, 20, 20], vec![80, 30, 30], vec![250, 80, 80]];
    conf.keyframe_interval = 60;
    let mut enc = SvcEncoder::new(conf).unwrap();
    let (mut pts_out, mut data) = (Vec::new(), Vec::new());
    let mut t_ms = 0.0f64;
    for i in 0..150u32 {
        let pts = (t_ms * 90.0) as i64;
        // The looped clip's pattern every 40 pictures, else 30 fps.
        t_ms += match (jitter, i % 40) {
            (true, 0) => 24.0,
            (true, 2) => 67.0,
            _ => 1000.0 / 30.0,
        };
        if let Some(p) = enc.encode(&synth::frame(320, 180, i), pts).unwrap() {
            assert_eq!(p.pts, pts, "picture {i} left with another timestamp");
            pts_out.push(p.pts);
            data.push(p.frames.iter().flat_map(|f| f.data.clone()).collect());
        }
    }
    (pts_out, data)
}

#[test]
fn capture_jitter_does_not_change_the_coded_stream() {
    let (pts_regular, regular) = encode(false);
    let (pts_jittered, jittered) = encode(true);
    assert_eq!(regular.len(), jittered.len());
    assert_ne!(pts_regular, pts_jittered);
    let differ: Vec<usize> = (0..regular.len())
        .filter(|&i| regular[i] != jittered[i])
        .collect();
    assert!(
        differ.is_empty(),
        "pictures coded differently under capture jitter: {differ:?}"
    );
}
