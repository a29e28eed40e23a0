//! Reading the player's headless video output (`frames.csv`, y4m segments) and the server's
//! `reference.y4m` for the video tests.

use std::collections::HashMap;
use std::path::Path;

/// A y4m file: size and frames (tightly packed I420).
pub struct Y4m {
    pub width: u32,
    pub height: u32,
    pub frames: Vec<Vec<u8>>,
}

pub fn read_y4m(p: &Path) -> Y4m {
    let data = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let nl = data.iter().position(|&b| b == b'\n').expect("y4m header");
    let header = std::str::from_utf8(&data[..nl]).unwrap();
    let mut w = 0;
    let mut h = 0;
    for tok in header.split_whitespace() {
        if let Some(v) = tok.strip_prefix('W') {
            w = v.parse().unwrap();
        }
        if let Some(v) = tok.strip_prefix('H') {
            h = v.parse().unwrap();
        }
    }
    let len = codec::synth::i420_len(w, h);
    let mut frames = Vec::new();
    let mut off = nl + 1;
    while off + 6 + len <= data.len() {
        assert_eq!(&data[off..off + 6], b"FRAME\n", "{}", p.display());
        frames.push(data[off + 6..off + 6 + len].to_vec());
        off += 6 + len;
    }
    Y4m {
        width: w,
        height: h,
        frames,
    }
}

/// One row of `frames.csv`.
#[derive(Debug, Clone)]
pub struct Row {
    pub index: u64,
    pub frame_number: Option<u64>,
    pub capture_ns: Option<u64>,
    pub arrival_ns: u64,
    pub decoded_ns: u64,
    pub layers: u64,
    pub width: u32,
    pub height: u32,
    pub file: String,
    pub file_index: Option<usize>,
    /// When the picture was displayed (unix ns).
    pub shown_ns: u64,
}

pub const HEADER: &str = "index,frame_number,capture_unix_ns,arrival_unix_ns,decoded_unix_ns,layers_held,width,height,file,file_index,shown_unix_ns";

pub fn read_csv(p: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(HEADER), "frames.csv header");
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 11, "row {l:?}");
            Row {
                index: f[0].parse().unwrap(),
                frame_number: f[1].parse().ok(),
                capture_ns: f[2].parse().ok(),
                arrival_ns: f[3].parse().unwrap(),
                decoded_ns: f[4].parse().unwrap(),
                layers: f[5].parse().unwrap(),
                width: f[6].parse().unwrap(),
                height: f[7].parse().unwrap(),
                file: f[8].to_string(),
                file_index: f[9].parse().ok(),
                shown_ns: f[10].parse().unwrap(),
            }
        })
        .collect()
}

/// PSNR of every decoded picture whose frame number was read, against the reference frame of
/// that number box-scaled to the picture's size (as `codec`'s PSNR reference). Returns
/// (frame number, layers, psnr) per picture.
pub fn psnr_rows(dir: &Path, rows: &[Row], reference: &Y4m) -> Vec<(u64, u64, f64)> {
    let mut segs: HashMap<String, Y4m> = HashMap::new();
    let mut out = Vec::new();
    for r in rows {
        let (Some(n), Some(fi)) = (r.frame_number, r.file_index) else {
            continue;
        };
        let Some(refr) = reference.frames.get(n as usize) else {
            continue;
        };
        let seg = segs
            .entry(r.file.clone())
            .or_insert_with(|| read_y4m(&dir.join(&r.file)));
        assert_eq!((seg.width, seg.height), (r.width, r.height), "{}", r.file);
        let pic = &seg.frames[fi];
        let scaled =
            codec::synth::scale_i420(refr, reference.width, reference.height, r.width, r.height);
        out.push((n, r.layers, codec::synth::psnr(pic, &scaled)));
    }
    out
}

/// The p-quantile (0..=1) of `v` (sorted copy).
pub fn quantile(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    if s.is_empty() {
        return f64::NAN;
    }
    s[((s.len() - 1) as f64 * p).round() as usize]
}
