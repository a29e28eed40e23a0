//! Tests of `source`.

use super::*;
use std::sync::atomic::AtomicBool;

/// The tests' video-only format: 64x64 at 30 fps, no sound.
const VIDEO_64: SourceFormat = SourceFormat {
    width: 64,
    height: 64,
    fps: 30,
    channels: 0,
};

/// Review finding F1: a `source` that smuggles pipeline text (extra elements writing a
/// file) is refused, and even a source that passes the scheme check can only ever be a
/// `uri` property: no element it names is created and no file appears.
#[test]
fn pipeline_text_in_a_source_is_refused_and_never_runs() {
    let dir = std::env::temp_dir().join(format!("lc-f1-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pwn = dir.join("pwn");
    let attacks = [
        format!(
            "file:///x filesrc location=/etc/hostname ! filesink location={}",
            pwn.display()
        ),
        format!("file:///x!filesink location={}", pwn.display()),
        "file:///x\tvideotestsrc".to_string(),
        "videotestsrc ! fakesink".to_string(),
        "fakesrc://x".to_string(),
        "v4l2:///dev/video0 ! filesink".to_string(),
        "v4l2:///etc/passwd".to_string(),
        "v4l2:///dev/video0?alsa=hw:0 ! x".to_string(),
        "http://".to_string(),
    ];
    for a in &attacks {
        assert!(parse(a).is_err(), "accepted {a:?}");
    }
    // A hostile but syntactically plain URI is only a property value.
    let spec = parse(&format!("file://{}/missing.mp4?x=filesink", dir.display())).unwrap();
    let src = MediaSource::new(spec, VIDEO_64, None);
    // The missing file fails the start (an error, counted by the caller); whatever the
    // outcome, no element the string names was made and no file was written.
    if let Ok(r) = src.build() {
        let names: Vec<String> = r
            .pipeline
            .iterate_recurse()
            .into_iter()
            .filter_map(|e| e.ok())
            .filter_map(|e| e.factory().map(|f| f.name().to_string()))
            .collect();
        assert!(!names.iter().any(|n| n == "filesink"), "{names:?}");
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(!pwn.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn allowed_sources_parse() {
    assert_eq!(parse("gst-testpattern"), Ok(SourceSpec::TestPattern));
    for u in [
        "file:///srv/a.mp4",
        "https://cdn.example/a.m3u8",
        "rtsp://cam/1",
        "srt://h:9000",
    ] {
        assert_eq!(parse(u), Ok(SourceSpec::Uri(u.to_string())), "{u}");
    }
    assert_eq!(
        parse("v4l2:///dev/video2?alsa=hw:1,0"),
        Ok(SourceSpec::Capture {
            video: "/dev/video2".into(),
            alsa: Some("hw:1,0".into())
        })
    );
    assert!(parse(&format!("file:///{}", "a".repeat(3000))).is_err());
}

/// The test pattern: pictures at the configured size with a white flash once per period,
/// audio with a beep that starts within one audio buffer of the flash's capture time.
#[test]
fn test_pattern_flashes_and_beeps_together() {
    let beeps: Arc<Mutex<Vec<u64>>> = Arc::default();
    let b2 = beeps.clone();
    let mut loud_prev = false;
    let sink: AudioSink = Box::new(move |pcm, cap| {
        // Onset: first sample above half scale after a quiet buffer.
        let ch = 2;
        if let Some(i) = pcm.chunks(ch).position(|f| f[0].unsigned_abs() > 8000) {
            if !loud_prev {
                b2.lock()
                    .unwrap()
                    .push(cap + i as u64 * 1_000_000_000 / 48_000);
            }
            loud_prev = true;
        } else {
            loud_prev = false;
        }
    });
    let mut src = MediaSource::new(
        SourceSpec::TestPattern,
        SourceFormat {
            width: 160,
            height: 90,
            fps: 30,
            channels: 2,
        },
        Some(sink),
    );
    let stop = AtomicBool::new(false);
    let mut flashes = Vec::new();
    let mut last = 0;
    for _ in 0..75 {
        let p = src.next_picture(&stop).unwrap();
        assert_eq!(p.i420.len(), codec::synth::i420_len(160, 90));
        assert!(p.capture_ns > last);
        last = p.capture_ns;
        if p.i420[..160 * 90].iter().all(|&y| y == 235) {
            flashes.push(p.capture_ns);
        }
    }
    let beeps = beeps.lock().unwrap().clone();
    assert!(flashes.len() >= 2, "flashes {flashes:?}");
    assert!(
        flashes.windows(2).all(|w| w[1] - w[0] == FLASH_PERIOD_NS),
        "{flashes:?}"
    );
    // The first flash is at running time 0, where the audio may start a moment later.
    for f in flashes.iter().filter(|&&f| f > flashes[0]) {
        let near = beeps
            .iter()
            .map(|b| b.abs_diff(*f))
            .min()
            .unwrap_or(u64::MAX);
        assert!(
            near <= 1_000_000,
            "flash at {f}: nearest beep {near} ns away ({beeps:?})"
        );
    }
    assert_eq!(src.stats.starts.load(Ordering::Relaxed), 1);
}

/// Finding F12: a source that stops delivering pictures is rebuilt by the watchdog and
/// the stall is counted. A file that ends loops without a gap: over 2.5 loops of a
/// 10-frame clip the pictures' capture times step by one frame period (33 ms), or by two
/// at most once per loop (`videorate` may drop a picture at the seam), never by 0 (a
/// loop's first picture on the last one's running time, dropped and counted) nor by the
/// 260-470 ms hole a rebuild left.
#[test]
fn stalled_source_is_restarted_and_files_loop() {
    let dir = std::env::temp_dir().join(format!("lc-loop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let clip = dir.join("clip.mkv");
    let ok = testkit::media::vp8_clip(&clip, 64, 64, 30, 10);
    assert!(ok, "making the test clip");
    let uri = format!("file://{}", clip.display());
    let mut src = MediaSource::new(parse(&uri).unwrap(), VIDEO_64, None);
    let stop = AtomicBool::new(false);
    let mut loops_at = Vec::new();
    let caps: Vec<u64> = (0..25)
        .map(|_| {
            let c = src.next_picture(&stop).unwrap().capture_ns;
            loops_at.push(src.stats.loops.load(Ordering::Relaxed));
            c
        })
        .collect();
    // The loop seek goes when the demuxer has read the file (it runs ahead of the clock by the
    // decoder's queue), not once the appsink has run dry: by the first loop's last picture the
    // second loop is already on its way, so its first picture is not late.
    assert!(loops_at[9] >= 1, "seek issued late: loops {loops_at:?}");
    // The demuxer runs ahead of the clock-synchronised appsink by the decoder's queue and
    // `DECODE_AHEAD_MS` (9 of this 10-picture clip's pictures), so the third and fourth
    // loops' seeks may already have happened.
    let loops = src.stats.loops.load(Ordering::Relaxed);
    assert!((2..=4).contains(&loops), "the clip looped: {loops}");
    assert_eq!(
        src.stats.starts.load(Ordering::Relaxed),
        1,
        "without a rebuild"
    );
    let steps: Vec<u64> = caps.windows(2).map(|w| (w[1] - w[0]) / 1_000_000).collect();
    let single = steps.iter().filter(|&&s| (30..=36).contains(&s)).count();
    let double = steps.iter().filter(|&&s| (63..=70).contains(&s)).count();
    assert!(single + double == steps.len() && double <= 2, "{steps:?}");
    // A source whose pipeline delivers nothing: the watchdog fires and counts.
    let mut dead = MediaSource::new(
        SourceSpec::Uri("rtsp://127.0.0.1:1/none".into()),
        VIDEO_64,
        None,
    );
    let stop2 = Arc::new(AtomicBool::new(false));
    let s2 = stop2.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(2500));
        s2.store(true, Ordering::Relaxed);
    });
    assert!(dead.next_picture(&stop2).is_none());
    t.join().unwrap();
    let st = &dead.stats;
    assert!(
        st.starts.load(Ordering::Relaxed) >= 2,
        "rebuilt: starts {} errors {} stalls {}",
        st.starts.load(Ordering::Relaxed),
        st.errors.load(Ordering::Relaxed),
        st.stalls.load(Ordering::Relaxed)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A decode hiccup (a busy core: the streaming thread that decodes and scales the file does not
/// run for 300 ms) does not make a picture late: the pipeline decodes ahead of the clock into
/// a queue, so the appsink still has pictures to hand over while the decoder catches up.
#[test]
fn a_decode_hiccup_does_not_make_pictures_late() {
    let dir = std::env::temp_dir().join(format!("lc-hiccup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let clip = dir.join("clip.mkv");
    assert!(
        testkit::media::vp8_clip(&clip, 64, 64, 30, 10),
        "making the test clip"
    );
    let uri = format!("file://{}", clip.display());
    let mut src = MediaSource::new(parse(&uri).unwrap(), VIDEO_64, None);
    let stop = AtomicBool::new(false);
    // Build and run for a second, so that whatever the pipeline buffers ahead is full.
    for _ in 0..30 {
        src.next_picture(&stop).unwrap();
    }
    let conv = src
        .pipeline
        .as_ref()
        .and_then(|r| r.pipeline.by_name("vconv"))
        .expect("the video branch's first element");
    let seen = Arc::new(AtomicU64::new(0));
    let s = seen.clone();
    conv.static_pad("sink")
        .unwrap()
        .add_probe(gst::PadProbeType::BUFFER, move |_, _| {
            if s.fetch_add(1, Ordering::Relaxed) == 5 {
                std::thread::sleep(Duration::from_millis(300));
            }
            gst::PadProbeReturn::Ok
        });
    let skipped_before = src.stats.skipped.load(Ordering::Relaxed);
    let mut caps = Vec::new();
    for _ in 0..30 {
        caps.push(src.next_picture(&stop).unwrap().capture_ns);
    }
    assert!(seen.load(Ordering::Relaxed) > 5, "the hiccup happened");
    // One frame period between pictures, except one picture more at a loop of a clip whose
    // container ends a frame short (see `stalled_source_is_restarted_and_files_loop`).
    let steps: Vec<u64> = caps.windows(2).map(|w| (w[1] - w[0]) / 1_000_000).collect();
    assert!(
        steps.iter().all(|&s| (30..=70).contains(&s)),
        "a hole: {steps:?}"
    );
    let skipped = src.stats.skipped.load(Ordering::Relaxed) - skipped_before;
    assert!(skipped <= 3, "{skipped} pictures skipped: {steps:?}");
    assert_eq!(
        src.stats.late.load(Ordering::Relaxed),
        0,
        "pictures handed over late"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
