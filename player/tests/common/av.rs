//! A/V offset from a headless player's outputs (issue 21): the flash pictures in
//! `frames.csv` (+ the y4m segments) and the beeps in `audio.wav` (+ `audio.csv`, which maps
//! WAV samples to play times). Offset = when the flash was shown − when its beep played
//! (positive: video late).

use super::vq::{read_csv, read_y4m, Row, Y4m};
use std::collections::HashMap;
use std::path::Path;

/// Luma above which a sample is white (Y 235 before coding; the test pattern's pictures are
/// mostly black, the natural clip's never white all over).
const FLASH_LUMA: f64 = 190.0;

/// Shown times (unix ns) of the flash pictures, with the layers held when shown. A flash is
/// a bright picture after one that is not (the picture after a flash can stay bright while
/// the encoder's rate control catches up; it is not a second flash).
pub fn flashes(dir: &Path) -> Vec<(u64, u64)> {
    let rows: Vec<Row> = read_csv(&dir.join("frames.csv"));
    let mut segs: HashMap<String, Y4m> = HashMap::new();
    let mut out = Vec::new();
    let mut prev_bright = false;
    for r in &rows {
        let Some(fi) = r.file_index else {
            prev_bright = false;
            continue;
        };
        let seg = segs
            .entry(r.file.clone())
            .or_insert_with(|| read_y4m(&dir.join(&r.file)));
        let Some(pic) = seg.frames.get(fi) else {
            continue;
        };
        let n = (seg.width * seg.height) as usize;
        // The flash is white all over: nearly every luma sample bright (a picture decoded
        // from a stale white reference after a layer join is bright in patches, not all over).
        let lit = pic[..n].iter().filter(|&&y| y as f64 > FLASH_LUMA).count();
        let bright = lit as f64 >= 0.95 * n as f64;
        if bright && !prev_bright {
            out.push((r.shown_ns, r.layers));
        }
        prev_bright = bright;
    }
    out
}

/// The WAV's samples (first channel) and the local time of sample 0 (from `audio.csv`).
pub struct Wav {
    pub left: Vec<i16>,
    pub start_ns: u64,
}

pub fn read_wav(dir: &Path) -> Wav {
    let b = std::fs::read(dir.join("audio.wav")).expect("audio.wav");
    assert_eq!(&b[..4], b"RIFF");
    let ch = u16::from_le_bytes([b[22], b[23]]) as usize;
    let left: Vec<i16> = b[44..]
        .chunks_exact(2 * ch)
        .map(|f| i16::from_le_bytes([f[0], f[1]]))
        .collect();
    let csv = std::fs::read_to_string(dir.join("audio.csv")).expect("audio.csv");
    // rtp_ts,seq,play_unix_ns,wav_sample,status,...: the first played frame anchors sample 0.
    let start_ns = csv
        .lines()
        .skip(1)
        .find_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let play: u64 = f.get(2)?.parse().ok()?;
            let sample: u64 = f.get(3)?.parse().ok()?;
            Some(play - sample * 1_000_000_000 / 48_000)
        })
        .expect("audio.csv has no played frame");
    Wav { left, start_ns }
}

/// Play times (unix ns) of beep onsets: the first 0.5-ms window whose peak exceeds a quarter
/// of full scale after at least 200 ms below it (the tone is at 5 %, the beep at 50 %). Not
/// 300: a looped clip's last beep and the next loop's first are as little as 0.25 s apart
/// (the natural clip is 5.31 s long, beeps at whole seconds), and a longer quiet time missed
/// the second, so the loop's first flash was paired with the beep before it (+0.26 s).
pub fn beeps(w: &Wav) -> Vec<u64> {
    let mut out = Vec::new();
    let mut quiet_since: Option<usize> = Some(0);
    for (i, win) in w.left.chunks(24).enumerate() {
        let peak = win.iter().map(|s| s.unsigned_abs()).max().unwrap_or(0);
        let at = i * 24;
        if peak > 8000 {
            if quiet_since.is_some_and(|q| at - q >= 9_600) {
                let first = win
                    .iter()
                    .position(|s| s.unsigned_abs() > 8000)
                    .unwrap_or(0);
                out.push(w.start_ns + (at + first) as u64 * 1_000_000_000 / 48_000);
            }
            quiet_since = None;
        } else if quiet_since.is_none() {
            quiet_since = Some(at);
        }
    }
    out
}

/// Per flash shown after `from_ns`: (offset ms, layers held), the beep being the nearest
/// within ±400 ms (flashes without one are skipped and counted in the second value).
pub fn offsets(dir: &Path, from_ns: u64) -> (Vec<(f64, u64)>, usize) {
    let f = flashes(dir);
    if std::env::var_os("LC_AV_DEBUG").is_some() {
        eprintln!("flashes {f:?}");
    }
    let b = beeps(&read_wav(dir));
    let mut out = Vec::new();
    let mut unmatched = 0;
    for (shown, layers) in f.into_iter().filter(|x| x.0 >= from_ns) {
        let near = b.iter().min_by_key(|&&t| t.abs_diff(shown));
        match near {
            Some(&t) if t.abs_diff(shown) < 400_000_000 => {
                out.push(((shown as f64 - t as f64) / 1e6, layers))
            }
            _ => unmatched += 1,
        }
    }
    (out, unmatched)
}

/// p-quantile of |offset|.
pub fn abs_quantile(v: &[(f64, u64)], p: f64) -> f64 {
    let a: Vec<f64> = v.iter().map(|x| x.0.abs()).collect();
    super::vq::quantile(&a, p)
}
