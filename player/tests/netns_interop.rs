//! Layer 0 of a video session is a standard VP9 RTP stream (DESIGN.md, wire format rules):
//! stock GStreamer (`udpsrc ! rtpvp9depay ! vp9dec`) and ffmpeg with the SDP the server
//! publishes decode it, with FEC repair packets in the stream and with the Opus audio track.
//! Run as root: `cargo test -p layercast-player --test netns_interop`.

mod common;
use common::*;
use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// GET `path` from the server over the control link; the body (read up to its
/// `Content-Length`, or to the end of the connection).
fn http_get(tb: &Testbed, path: &str) -> String {
    let c = tb.c.clone();
    let path = path.to_string();
    tb.in_ns(&c, move || {
        let mut s = std::net::TcpStream::connect(SERVER_HTTP).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .unwrap();
        let mut out = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n) = s.read(&mut chunk) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&chunk[..n]);
            let t = String::from_utf8_lossy(&out);
            if let Some((head, body)) = t.split_once("\r\n\r\n") {
                let len = head.lines().find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                });
                if len.is_some_and(|len| body.len() >= len) {
                    break;
                }
            }
        }
        let t = String::from_utf8_lossy(&out).to_string();
        t.split_once("\r\n\r\n").map_or("", |x| x.1).to_string()
    })
}

/// Repair packets the server has sent so far (`layercast_sender_repair_packets_total`).
fn repairs_sent(tb: &Testbed) -> u64 {
    let m = http_get(tb, "/metrics");
    m.lines()
        .find(|l| l.starts_with("layercast_sender_repair_packets_total{"))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

/// Runs `ffmpeg -i SDP ARGS -f null -` in the player's namespace (bounded by `timeout`
/// seconds); returns its status and stderr.
fn ffmpeg(
    tb: &Testbed,
    sdp: &std::path::Path,
    timeout: &str,
    args: &[&str],
) -> (std::process::Output, String) {
    let ff = Command::new("ip")
        .args([
            "netns",
            "exec",
            &tb.c,
            "timeout",
            timeout,
            "ffmpeg",
            "-hide_banner",
            "-nostdin",
        ])
        .args(["-protocol_whitelist", "file,udp,rtp", "-i"])
        .arg(sdp)
        .args(args)
        .args(["-f", "null", "-"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&ff.stderr).to_string();
    (ff, out)
}

/// The last `frame=` count ffmpeg printed.
fn ffmpeg_frames(out: &str) -> u64 {
    out.rsplit("frame=")
        .next()
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Sets up a video session and returns the testbed and the path of the published SDP.
fn setup() -> Option<(Testbed, std::path::PathBuf)> {
    // The server's default video (1280x720@30, 600-byte packets): layer 0 carries FEC repair
    // packets (payload type 97) in its slots without media.
    setup_with(r#"{"name":"iop","source":"testpattern","video":{"keyframe_interval_s":1}}"#)
}

/// As [`setup`] with the session given as JSON (its name must be `iop`).
fn setup_with(session: &str) -> Option<(Testbed, std::path::PathBuf)> {
    if !prerequisites() {
        return None;
    }
    if !have("gst-launch-1.0") || !have("ffmpeg") {
        let msg = "gst-launch-1.0 or ffmpeg missing";
        if std::env::var("LAYERCAST_REQUIRE_NETNS").as_deref() == Ok("1") {
            panic!("{msg}");
        }
        eprintln!("SKIPPED: {msg}");
        return None;
    }
    let mut tb = Testbed::new(10_000_000, 100_000, 1514);
    tb.start_server(session);
    // The in-process GStreamer source of a `gst-testpattern` session takes a moment to start.
    std::thread::sleep(Duration::from_millis(1500));
    // The SDP, fetched over the control link.
    let sdp = http_get(&tb, "/api/sessions/iop/sdp");
    assert!(sdp.contains("a=rtpmap:96 VP9/90000"), "{sdp}");
    assert!(sdp.contains("m=video 5004 RTP/AVP 96\r\n"), "{sdp}");
    assert!(sdp.contains("a=x-layercast-fec:97 "), "{sdp}");
    let sdp_path = tb.dir.join("layer0.sdp");
    std::fs::write(&sdp_path, &sdp).unwrap();
    Some((tb, sdp_path))
}

#[test]
fn stock_gstreamer_plays_layer_0() {
    let Some((tb, _)) = setup() else { return };
    // GStreamer: 6 s of layer 0, one line per decoded frame from fakesink.
    let gst = Command::new("ip")
        .args([
            "netns",
            "exec",
            &tb.c,
            "timeout",
            "-s",
            "INT",
            "6",
            "gst-launch-1.0",
            "-v",
            "-e",
        ])
        .args([
            "udpsrc",
            "address=239.255.77.0",
            "port=5004",
            "multicast-iface=c0",
        ])
        .arg("caps=application/x-rtp,media=video,clock-rate=90000,encoding-name=VP9,payload=96")
        .args([
            "!",
            "rtpvp9depay",
            "!",
            "vp9dec",
            "!",
            "fakesink",
            "silent=false",
            "sync=false",
        ])
        .output()
        .unwrap();
    let gst_out =
        String::from_utf8_lossy(&gst.stdout).to_string() + &String::from_utf8_lossy(&gst.stderr);
    let gst_frames = gst_out
        .lines()
        .filter(|l| l.contains("last-message = chain"))
        .count();
    let gst_errors = gst_out.lines().filter(|l| l.starts_with("ERROR")).count();
    let repairs = repairs_sent(&tb);
    let summary = format!("gst-launch udpsrc ! rtpvp9depay ! vp9dec: {gst_frames} frames of layer 0 in 6 s, {gst_errors} errors; the server sent {repairs} FEC repair packets meanwhile");
    eprintln!("{summary}");
    let ok = gst_frames >= 5 && gst_errors == 0 && repairs > 0;
    testkit::record(
        "issue6/stock-gst",
        &summary,
        Some(ok),
        "cargo test --release -p layercast-player --test netns_interop",
    );
    assert!(ok, "{summary}\n{gst_out}");
}

/// ffmpeg (the demuxer ffplay uses; ffplay itself needs a display) with the SDP the server
/// publishes. Debian 12's ffmpeg 5.1 implements an old VP9 RTP draft and rejects a scalability
/// structure with several spatial layers, so the codec sends layer 0 an SS that describes
/// layer 0 only (docs/codec.md).
#[test]
fn stock_ffmpeg_plays_layer_0() {
    let Some((tb, sdp_path)) = setup() else {
        return;
    };
    // ffmpeg with the published SDP: decode 10 frames of layer 0.
    let (ff, ff_out) = ffmpeg(&tb, &sdp_path, "15", &["-frames:v", "10"]);
    let ff_frames = ffmpeg_frames(&ff_out);
    let repairs = repairs_sent(&tb);
    let summary = format!(
        "ffmpeg -i layer0.sdp: {ff_frames} frames (exit {:?}); the server sent {repairs} FEC repair packets meanwhile",
        ff.status.code()
    );
    eprintln!("{summary}");
    let ok = ff_frames >= 10 && ff.status.success() && repairs > 0;
    testkit::record(
        "issue6/stock-ffplay",
        &summary,
        Some(ok),
        "cargo test --release -p layercast-player --test netns_interop",
    );
    assert!(ok, "{summary}\n{ff_out}");
}

/// Issue 21: the session's audio track, in the SDP as `m=audio` (Opus on its own group), with
/// the default packet size and FEC repair in layer 0's spare slots.
const AV_SESSION: &str = r#"{"name":"iop","source":"gst-testpattern",
    "video":{"width":320,"height":180,"fps":15,"spatial":2,"keyframe_interval_s":1},"audio":{"kbps":48}}"#;

/// ffmpeg with the published SDP decodes layer 0's video and the Opus audio together.
#[test]
fn stock_ffmpeg_plays_layer_0_with_audio() {
    let Some((tb, sdp_path)) = setup_with(AV_SESSION) else {
        return;
    };
    let sdp = std::fs::read_to_string(&sdp_path).unwrap();
    assert!(
        sdp.contains("m=audio ") && sdp.contains("a=rtpmap:111 opus/48000/2"),
        "{sdp}"
    );
    let (ff, out) = ffmpeg(&tb, &sdp_path, "20", &["-t", "5"]);
    let frames = ffmpeg_frames(&out);
    let audio_kb: u64 = out
        .rsplit("audio:")
        .next()
        .and_then(|r| r.split("kB").next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let opus_in = out.contains("Audio: opus");
    let repairs = repairs_sent(&tb);
    let summary = format!(
        "ffmpeg -i layer0.sdp (m=video + m=audio): {frames} video frames, {audio_kb} kB of decoded audio, opus input stream {opus_in} (exit {:?}); the server sent {repairs} FEC repair packets meanwhile",
        ff.status.code()
    );
    eprintln!("{summary}");
    let ok = frames >= 10 && audio_kb > 0 && opus_in && ff.status.success() && repairs > 0;
    testkit::record(
        "issue21/interop-ffmpeg-audio",
        &summary,
        Some(ok),
        "cargo test --release -p layercast-player --test netns_interop",
    );
    assert!(ok, "{summary}\n{out}\n{sdp}");
}

/// gst-launch with `sdpdemux` on the published SDP plays both media: `rtpvp9depay ! vp9dec`
/// for layer 0 and `rtpopusdepay ! opusdec` for the audio.
#[test]
fn stock_gstreamer_plays_layer_0_with_audio() {
    let Some((tb, sdp_path)) = setup_with(AV_SESSION) else {
        return;
    };
    let loc = format!("location={}", sdp_path.display());
    let gst = Command::new("ip")
        .args([
            "netns",
            "exec",
            &tb.c,
            "timeout",
            "-s",
            "INT",
            "8",
            "gst-launch-1.0",
            "-v",
            "-e",
        ])
        .args(["filesrc", &loc, "!", "sdpdemux", "name=d"])
        .args([
            "d.",
            "!",
            "queue",
            "!",
            "rtpvp9depay",
            "!",
            "vp9dec",
            "!",
            "fakesink",
            "name=vs",
            "silent=false",
            "sync=false",
        ])
        .args([
            "d.",
            "!",
            "queue",
            "!",
            "rtpopusdepay",
            "!",
            "opusdec",
            "!",
            "fakesink",
            "name=as",
            "silent=false",
            "sync=false",
        ])
        .output()
        .unwrap();
    let out =
        String::from_utf8_lossy(&gst.stdout).to_string() + &String::from_utf8_lossy(&gst.stderr);
    let count = |sink: &str| {
        out.lines()
            .filter(|l| {
                l.contains(&format!("GstFakeSink:{sink}")) && l.contains("last-message = chain")
            })
            .count()
    };
    let (v, a) = (count("vs"), count("as"));
    let errors = out
        .lines()
        .filter(|l| l.starts_with("ERROR") || l.contains("erroneous pipeline"))
        .count();
    let repairs = repairs_sent(&tb);
    let summary = format!(
        "gst-launch sdpdemux: {v} video buffers (vp9dec), {a} audio buffers (opusdec) in 8 s, {errors} errors; the server sent {repairs} FEC repair packets meanwhile"
    );
    eprintln!("{summary}");
    let ok = v >= 5 && a >= 20 && errors == 0 && repairs > 0;
    testkit::record(
        "issue21/interop-gst-audio",
        &summary,
        Some(ok),
        "cargo test --release -p layercast-player --test netns_interop",
    );
    assert!(ok, "{summary}\n{out}");
}
