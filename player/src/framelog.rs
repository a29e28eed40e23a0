//! Headless output for quality analysis: `DIR/frames.csv` (one row per displayed picture) and
//! the decoded pictures in `DIR/video-<seq>-<W>x<H>.y4m` segments. The contract (columns,
//! file naming) is fixed in docs/player.md; e2e's video-quality analysis reads it.
//!
//! Everything slow (QR reading with zbar, file writes) runs on its own thread: the receive loop
//! only moves the picture into a channel. If the thread falls behind by more than
//! `MAX_PENDING` pictures, further pictures are logged without pixels (empty QR fields, no
//! file) and counted in `stripped`, so the receive loop never waits and the log keeps one row
//! per picture.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;

/// The header of `frames.csv` (the fixed contract).
/// `shown_unix_ns` (when the picture was displayed; the A/V offset is measured against it,
/// issue 21) is last, so readers that index the first ten columns are unchanged.
pub const CSV_HEADER: &str = "index,frame_number,capture_unix_ns,arrival_unix_ns,decoded_unix_ns,layers_held,width,height,file,file_index,shown_unix_ns";

/// Pictures in flight to the writer thread before pixels are dropped from the log.
const MAX_PENDING: usize = 90;

/// One displayed picture.
pub struct FrameMsg {
    /// Kernel receive time of the picture's last packet (unix ns).
    pub arrival_ns: u64,
    /// When the decoder returned it (unix ns).
    pub decoded_ns: u64,
    pub layers_held: usize,
    pub width: u32,
    pub height: u32,
    /// Tightly packed I420, or `None` (stripped under overload).
    pub i420: Option<Vec<u8>>,
}

/// What the writer thread saw (shared with the receive loop for the per-second log).
#[derive(Default, Debug)]
pub struct FrameLogStats {
    pub rows: AtomicU64,
    pub qr_read: AtomicU64,
    pub stripped: AtomicU64,
    pub write_errors: AtomicU64,
    /// Latest glass-to-glass latency (display ns − capture ns), ns; 0 before any.
    pub last_latency_ns: AtomicU64,
}

/// Handle of the writer thread; dropping it drains the queue and joins the thread.
pub struct FrameLog {
    tx: Option<Sender<(FrameMsg, u64)>>,
    pending: Arc<AtomicUsize>,
    pub stats: Arc<FrameLogStats>,
    thread: Option<std::thread::JoinHandle<()>>,
    pictures: bool,
    qr_every: u64,
    /// Rows queued so far (the writer's `index`, known on this side).
    pushed: u64,
    /// Set on drop: the writer stops reading QR stamps and drains the queue.
    closing: Arc<AtomicBool>,
}

impl FrameLog {
    /// Starts the writer for `dir`; `pictures = false` writes the log only. The QR stamp is
    /// read on every `qr_every`-th row (0: never; see [`FrameLog::wants_pixels`]).
    pub fn start(dir: &Path, pictures: bool, fps: f64, qr_every: u64) -> std::io::Result<FrameLog> {
        std::fs::create_dir_all(dir)?;
        let mut csv = std::io::BufWriter::new(std::fs::File::create(dir.join("frames.csv"))?);
        writeln!(csv, "{CSV_HEADER}")?;
        csv.flush()?;
        let (tx, rx) = channel::<(FrameMsg, u64)>();
        let pending = Arc::new(AtomicUsize::new(0));
        let stats = Arc::new(FrameLogStats::default());
        let closing = Arc::new(AtomicBool::new(false));
        let (p2, s2, c2, dir) = (
            pending.clone(),
            stats.clone(),
            closing.clone(),
            dir.to_path_buf(),
        );
        let thread = std::thread::Builder::new()
            .name("frame-log".into())
            .spawn(move || {
                let mut w = Writer {
                    dir,
                    pictures,
                    fps: fps.round().max(1.0) as u32,
                    csv,
                    seg: None,
                    seq: 0,
                    index: 0,
                    qr: match qr_every {
                        0 => None,
                        _ => match crate::qr::QrReader::new() {
                            Ok(q) => Some(q),
                            Err(e) => {
                                eprintln!("layercast-player: no QR reading: {e}");
                                None
                            }
                        },
                    },
                    qr_every,
                };
                for (m, shown_ns) in rx {
                    if m.i420.is_some() {
                        p2.fetch_sub(1, Ordering::Relaxed);
                    }
                    if c2.load(Ordering::Relaxed) {
                        // Closing: the rows still queued are written without reading their
                        // stamps (see `Drop`).
                        w.qr = None;
                    }
                    if w.row(&m, shown_ns, &s2).is_err() {
                        s2.write_errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                let _ = w.csv.flush();
            })?;
        Ok(FrameLog {
            tx: Some(tx),
            pending,
            stats,
            thread: Some(thread),
            pictures,
            qr_every,
            pushed: 0,
            closing,
        })
    }

    /// Whether the next pushed picture's pixels are used (written to a y4m segment or read for
    /// its QR stamp). When not, the receive loop drops them before queueing: a headless
    /// capacity player (`--no-pictures --qr-every 75`) then moves no pixels to this thread
    /// for 74 of 75 pictures.
    pub fn wants_pixels(&self) -> bool {
        self.pictures || (self.qr_every > 0 && self.pushed.is_multiple_of(self.qr_every))
    }

    /// Queues one displayed picture (shown at `shown_ns`); never blocks.
    pub fn push(&mut self, mut m: FrameMsg, shown_ns: u64) {
        if !self.wants_pixels() {
            m.i420 = None;
        }
        self.pushed += 1;
        if m.i420.is_some() {
            if self.pending.load(Ordering::Relaxed) >= MAX_PENDING {
                m.i420 = None;
                self.stats.stripped.fetch_add(1, Ordering::Relaxed);
            } else {
                self.pending.fetch_add(1, Ordering::Relaxed);
            }
        }
        if let Some(tx) = &self.tx {
            let _ = tx.send((m, shown_ns));
        }
    }
}

impl Drop for FrameLog {
    /// Drains the queue and joins the writer. Rows still queued are written without their QR
    /// stamps: a 720p player reading every stamp fell behind by up to 90 pictures (zbar about
    /// 30 ms each, up to 2 s when the reader is behind), and its exit waited for all of them
    /// (`bench_player_cpu_720p` saw the player still running 18 s after its exit line).
    fn drop(&mut self) {
        self.closing.store(true, Ordering::Relaxed);
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Segment {
    name: String,
    out: std::io::BufWriter<std::fs::File>,
    size: (u32, u32),
    frames: u64,
}

struct Writer {
    dir: PathBuf,
    pictures: bool,
    fps: u32,
    csv: std::io::BufWriter<std::fs::File>,
    seg: Option<Segment>,
    seq: u64,
    index: u64,
    qr: Option<crate::qr::QrReader>,
    /// Read the stamp of every `qr_every`-th row (`--qr-every`; 0: never).
    qr_every: u64,
}

impl Writer {
    fn row(&mut self, m: &FrameMsg, shown_ns: u64, st: &FrameLogStats) -> std::io::Result<()> {
        let due = self.qr_every > 0 && self.index.is_multiple_of(self.qr_every);
        let stamp = match (&m.i420, self.qr.as_mut()) {
            (Some(p), Some(q)) if due => q.read(p, m.width, m.height),
            _ => None,
        };
        if let Some((_, cap)) = stamp {
            st.qr_read.fetch_add(1, Ordering::Relaxed);
            st.last_latency_ns
                .store(shown_ns.saturating_sub(cap), Ordering::Relaxed);
        }
        let (mut file, mut file_index) = (String::new(), String::new());
        if let (true, Some(p)) = (self.pictures, &m.i420) {
            let size = (m.width, m.height);
            if self.seg.as_ref().is_none_or(|s| s.size != size) {
                if let Some(mut s) = self.seg.take() {
                    s.out.flush()?;
                }
                let name = format!("video-{}-{}x{}.y4m", self.seq, m.width, m.height);
                self.seq += 1;
                let mut out = std::io::BufWriter::new(std::fs::File::create(self.dir.join(&name))?);
                writeln!(
                    out,
                    "YUV4MPEG2 W{} H{} F{}:1 Ip A1:1 C420jpeg",
                    m.width, m.height, self.fps
                )?;
                self.seg = Some(Segment {
                    name,
                    out,
                    size,
                    frames: 0,
                });
            }
            if let Some(s) = self.seg.as_mut() {
                let len = codec::synth::i420_len(m.width, m.height);
                s.out.write_all(b"FRAME\n")?;
                s.out
                    .write_all(p.get(..len).ok_or(std::io::ErrorKind::InvalidData)?)?;
                file = s.name.clone();
                file_index = s.frames.to_string();
                s.frames += 1;
            }
        }
        let (num, cap) = match stamp {
            Some((n, c)) => (n.to_string(), c.to_string()),
            None => (String::new(), String::new()),
        };
        writeln!(
            self.csv,
            "{},{num},{cap},{},{},{},{},{},{file},{file_index},{shown_ns}",
            self.index, m.arrival_ns, m.decoded_ns, m.layers_held, m.width, m.height
        )?;
        // Rows are flushed as they come, so the log is complete up to the last picture even
        // if the player is killed.
        self.csv.flush()?;
        if let Some(s) = self.seg.as_mut() {
            s.out.flush()?;
        }
        self.index += 1;
        st.rows.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_segments() {
        let dir = std::env::temp_dir().join(format!("lc-framelog-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut log = FrameLog::start(&dir, true, 15.0, 1).unwrap();
        let sizes = [(160u32, 90u32), (160, 90), (320, 180), (160, 90)];
        for (i, &(w, h)) in sizes.iter().enumerate() {
            let m = FrameMsg {
                arrival_ns: 1000 + i as u64,
                decoded_ns: 2000 + i as u64,
                layers_held: 3,
                width: w,
                height: h,
                i420: Some(codec::synth::frame(w, h, i as u32)),
            };
            log.push(m, 3000);
        }
        // A stripped picture still gets its row.
        log.push(
            FrameMsg {
                arrival_ns: 1,
                decoded_ns: 2,
                layers_held: 1,
                width: 160,
                height: 90,
                i420: None,
            },
            3,
        );
        let stats = log.stats.clone();
        drop(log);
        assert_eq!(stats.rows.load(Ordering::Relaxed), 5);
        let csv = std::fs::read_to_string(dir.join("frames.csv")).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], CSV_HEADER);
        assert_eq!(lines[1], "0,,,1000,2000,3,160,90,video-0-160x90.y4m,0,3000");
        assert_eq!(lines[2], "1,,,1001,2001,3,160,90,video-0-160x90.y4m,1,3000");
        assert_eq!(
            lines[3],
            "2,,,1002,2002,3,320,180,video-1-320x180.y4m,0,3000"
        );
        assert_eq!(lines[4], "3,,,1003,2003,3,160,90,video-2-160x90.y4m,0,3000");
        assert_eq!(lines[5], "4,,,1,2,1,160,90,,,3");
        let seg0 = std::fs::read(dir.join("video-0-160x90.y4m")).unwrap();
        let hdr = b"YUV4MPEG2 W160 H90 F15:1 Ip A1:1 C420jpeg\n";
        assert!(seg0.starts_with(hdr));
        assert_eq!(
            seg0.len(),
            hdr.len() + 2 * (6 + codec::synth::i420_len(160, 90))
        );
        // Pixels round-trip: frame 1 of segment 0 is synth frame 1.
        let off = hdr.len() + (6 + codec::synth::i420_len(160, 90)) + 6;
        assert_eq!(
            &seg0[off..off + codec::synth::i420_len(160, 90)],
            &codec::synth::frame(160, 90, 1)[..]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `--qr-every N` without pictures: only every N-th picture's pixels go to the writer
    /// thread (the others are dropped on the receive side); every picture still gets its row.
    #[test]
    fn pixels_only_for_the_pictures_read() {
        let dir = std::env::temp_dir().join(format!("lc-framelog-qr-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut wanted = Vec::new();
        let mut log = FrameLog::start(&dir, false, 15.0, 3).unwrap();
        for i in 0..7u64 {
            wanted.push(log.wants_pixels());
            let m = FrameMsg {
                arrival_ns: i,
                decoded_ns: i,
                layers_held: 9,
                width: 64,
                height: 36,
                i420: Some(codec::synth::frame(64, 36, i as u32)),
            };
            log.push(m, i);
        }
        assert_eq!(wanted, [true, false, false, true, false, false, true]);
        let stats = log.stats.clone();
        drop(log);
        assert_eq!(stats.rows.load(Ordering::Relaxed), 7);
        assert_eq!(stats.stripped.load(Ordering::Relaxed), 0);
        // No y4m segment without pictures.
        let segs = std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".y4m"))
            })
            .count();
        assert_eq!(segs, 0);
        // Never with 0 and no pictures; always with pictures.
        let off = FrameLog::start(&dir.join("off"), false, 15.0, 0).unwrap();
        assert!(!off.wants_pixels());
        let pics = FrameLog::start(&dir.join("pics"), true, 15.0, 0).unwrap();
        assert!(pics.wants_pixels());
        drop((off, pics));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
