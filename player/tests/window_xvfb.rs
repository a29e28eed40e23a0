//! The player's window under Xvfb: without `--headless` and with DISPLAY set, the player opens
//! an autovideosink window of the session's top size showing the decoded video with the stats
//! overlay. The test checks that a window of that size exists (xwininfo), grabs it with
//! ffmpeg's x11grab (kept as `target/artefacts/player-window.png`) and requires non-black
//! video in it. Needs Xvfb and xwininfo (apt xvfb x11-utils, scripts/setup.sh) and root.
//! Run: `cargo test -p layercast-player --test window_xvfb`.

mod common;
use common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Xvfb(std::process::Child);
impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running Xvfb and its display name. Waits until the X server answers (`xwininfo -root`), so
/// the player never starts before its display exists (a fixed sleep raced Xvfb's start-up on a
/// loaded host: the player fell back to headless), and moves to the next display number when one
/// is taken (Xvfb exits at once with "server already active"). `-noreset`: by default Xvfb resets
/// when its last client leaves, and a player connecting during that reset (right after the
/// readiness probe disconnects) gets "Could not open display" and runs headless.
fn start_xvfb() -> (Xvfb, String) {
    for attempt in 0..20 {
        let display = format!(":{}", 90 + (std::process::id() + attempt) % 400);
        let mut x = Xvfb(
            Command::new("Xvfb")
                .args([
                    display.as_str(),
                    "-screen",
                    "0",
                    "1024x768x24",
                    "-nolisten",
                    "tcp",
                    "-noreset",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("Xvfb"),
        );
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(15) {
            if matches!(x.0.try_wait(), Ok(Some(_))) {
                break;
            }
            let up = Command::new("xwininfo")
                .args(["-display", &display, "-root"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|st| st.success());
            if up {
                return (x, display);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if x.0.try_wait().ok().flatten().is_none() {
            panic!("Xvfb on {display} did not answer within 15 s");
        }
    }
    panic!("no free X display for Xvfb in 20 tries");
}

/// `(x, y)` of a mapped window of exactly `w x h`, from `xwininfo -root -tree`.
fn find_window(display: &str, w: u32, h: u32) -> Option<(i32, i32, String)> {
    let out = Command::new("xwininfo")
        .args(["-display", display, "-root", "-tree"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let want = format!("{w}x{h}+");
    for line in text.lines() {
        // `0x200001 "name": ()  640x360+0+0  +0+0` — the last field is the absolute position.
        if line.contains(&want) {
            let abs = line.split_whitespace().last()?;
            let mut it = abs.trim_start_matches('+').split('+');
            let x = it.next()?.parse().ok()?;
            let y = it.next()?.parse().ok()?;
            return Some((x, y, line.trim().to_string()));
        }
    }
    None
}

#[test]
fn window_shows_video_under_xvfb() {
    if !prerequisites() {
        return;
    }
    if Command::new("Xvfb").arg("-help").output().is_err() {
        panic!("Xvfb missing: apt-get install xvfb x11-utils (scripts/setup.sh)");
    }
    let (_x, display) = start_xvfb();
    let mut tb = Testbed::new(100_000_000, 1_000_000, 1514);
    tb.start_server(
        r#"{"name":"win","source":"testpattern","protocol":"era","packet_size":1200,
            "video":{"width":640,"height":360,"temporal":3}}"#,
    );
    std::thread::sleep(Duration::from_millis(1000));
    // The player inherits DISPLAY; the X server's filesystem socket works across network
    // namespaces.
    std::env::set_var("DISPLAY", &display);
    let url = tb.url("win");
    let s = tb.s.clone();
    let out = tb.dir.join("win").to_string_lossy().to_string();
    let p = bin("layercast-player");
    tb.spawn(
        "win",
        &s,
        &p,
        &[
            "--session-url",
            &url,
            "--fixed-layers",
            "9",
            "--interface",
            SERVER_IP,
            "--duration",
            "12",
            "--out",
            &out,
            "--no-pictures",
        ],
    );
    // Wait (bounded) for the window, then for video in it.
    let t0 = Instant::now();
    let mut found = None;
    let mut shot_stats = (0.0, 0.0);
    let artefacts = testkit::results_dir().join("..").join("artefacts");
    std::fs::create_dir_all(&artefacts).unwrap();
    let png = artefacts.join("player-window.png");
    while t0.elapsed() < Duration::from_secs(11) {
        std::thread::sleep(Duration::from_millis(700));
        let Some((x, y, line)) = find_window(&display, 640, 360) else {
            continue;
        };
        found = Some(line);
        let raw = tb.dir.join("shot.gray");
        let grab = |args: &[&str]| {
            Command::new("ffmpeg")
                .args([
                    "-loglevel",
                    "error",
                    "-y",
                    "-f",
                    "x11grab",
                    "-video_size",
                    "640x360",
                ])
                .arg("-i")
                .arg(format!("{display}.0+{x},{y}"))
                .args(["-frames:v", "1"])
                .args(args)
                .status()
                .is_ok_and(|s| s.success())
        };
        if !grab(&["-f", "rawvideo", "-pix_fmt", "gray", raw.to_str().unwrap()]) {
            continue;
        }
        let g = std::fs::read(&raw).unwrap_or_default();
        if g.len() != 640 * 360 {
            continue;
        }
        let mean = g.iter().map(|&v| v as f64).sum::<f64>() / g.len() as f64;
        let lit = g.iter().filter(|&&v| v > 24).count() as f64 / g.len() as f64;
        shot_stats = (mean, lit);
        if lit > 0.5 {
            grab(&[png.to_str().unwrap()]);
            break;
        }
    }
    let st = tb.wait("win", Duration::from_secs(20));
    let log = tb.log("win");
    eprintln!(
        "window: {found:?}; grab mean luma {:.1}, {:.0} % of pixels above 24; screenshot {}\n{log}",
        shot_stats.0,
        shot_stats.1 * 100.0,
        png.display()
    );
    let pass = st.is_some_and(|s| s.success()) && found.is_some() && shot_stats.1 > 0.5;
    testkit::record(
        "issue6/player-window",
        &format!(
            "Xvfb, player without --headless, VP9 L3T3 640x360 all layers: window {:?}; grab \
             mean luma {:.1}, {:.0} % of pixels above 24 (screenshot target/artefacts/player-window.png)",
            found.as_deref().unwrap_or("none"),
            shot_stats.0,
            shot_stats.1 * 100.0
        ),
        Some(pass),
        "cargo test -p layercast-player --test window_xvfb",
    );
    assert!(st.is_some_and(|s| s.success()), "player failed: {log}");
    assert!(found.is_some(), "no 640x360 window on {display}: {log}");
    assert!(
        shot_stats.1 > 0.5,
        "window mostly black: mean {:.1}, lit {:.2}",
        shot_stats.0,
        shot_stats.1
    );
    assert!(png.exists());
    assert!(
        !log.contains("running headless"),
        "the player must not fall back to headless with DISPLAY set: {log}"
    );
}
