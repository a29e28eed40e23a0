//! A video source that stalls on a secured server: counted, visible, and recovered.

use crate::support::{generated_api_token, https, https_text, wait_port, Ns};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// The value of one series of a Prometheus text (`name{labels} value`).
fn series(metrics: &str, name_and_labels: &str) -> Option<f64> {
    let k = format!("{name_and_labels} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&k))
        .and_then(|v| v.trim().parse().ok())
}

/// The issue's stalled-encoder fault on a server on its safe defaults (HTTPS, generated
/// tokens): a video session whose source is an HTTP stream that stops delivering bytes (the
/// server sends the head and a little of the file, then holds the connection). Pictures stop;
/// the stall is visible in `layercast_video_pictures_total` (flat: what the
/// `LayercastVideoStalled` alert watches) and counted in
/// `layercast_source_restarts_total{reason="stall"}` as the watchdog rebuilds the source; the
/// layers keep their packet rate (padding) and the API keeps answering; when the stream is
/// served again the pictures resume without a restart of anything else.
#[test]
fn stalled_source_is_counted_and_recovers_on_a_secured_server() {
    let Some(mut ns) = Ns::new("stall") else {
        return;
    };
    let clip = ns.dir.join("clip.mkv");
    let made = testkit::media::vp8_clip(&clip, 160, 90, 15, 60);
    assert!(made, "making the test clip");
    let port = 18197;
    ns.server(&[
        "--http-addr",
        "127.0.0.1:18197",
        "--interface",
        "127.0.0.1",
        "--announce",
        "",
    ]);
    let state = ns.dir.join("state");
    let api = generated_api_token(&ns, &state);
    let bytes = std::fs::read(&clip).unwrap();
    let r = ns.run(move || {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        // The source: serves the clip, or (stalled) its head and 2 KB, then nothing.
        let stalled = Arc::new(AtomicBool::new(false));
        let listener = std::net::TcpListener::bind("127.0.0.1:18301").unwrap();
        let st = stalled.clone();
        std::thread::spawn(move || {
            for c in listener.incoming().flatten() {
                let (st, bytes) = (st.clone(), bytes.clone());
                std::thread::spawn(move || {
                    let mut c = c;
                    let mut head = [0u8; 4096];
                    let _ = c.read(&mut head);
                    let h = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: video/x-matroska\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        bytes.len()
                    );
                    let _ = c.write_all(h.as_bytes());
                    if st.load(Ordering::Relaxed) {
                        let _ = c.write_all(&bytes[..2048.min(bytes.len())]);
                        // Hold the connection, sending nothing, until the source gives up.
                        std::thread::sleep(Duration::from_secs(60));
                    } else {
                        let _ = c.write_all(&bytes);
                    }
                });
            }
        });
        wait_port(port);
        let session = r#"{"name":"cam","source":"http://127.0.0.1:18301/clip.mkv","packet_size":600,"video":{"width":160,"height":90,"fps":15}}"#;
        let created = https(port, "POST", "/api/sessions", Some(&api), session).0;
        let m = || https_text(port, "GET", "/metrics", Some(&api), "").1;
        let pictures = |t: &str| series(t, r#"layercast_video_pictures_total{session="cam"}"#);
        let stalls = |t: &str| {
            series(t, r#"layercast_source_restarts_total{session="cam",reason="stall"}"#)
        };
        let packets = |t: &str| series(t, r#"layercast_sender_packets_total{session="cam"}"#);
        // Playing: pictures flow.
        let t0 = Instant::now();
        while pictures(&m()).unwrap_or(0.0) < 20.0 && t0.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(200));
        }
        let playing = pictures(&m()).unwrap_or(0.0);
        // The stall: the clip's next request (it loops at its end) gets nothing.
        stalled.store(true, Ordering::Relaxed);
        let t0 = Instant::now();
        while stalls(&m()).unwrap_or(0.0) < 1.0 && t0.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(200));
        }
        let a = m();
        std::thread::sleep(Duration::from_secs(4));
        let t_api = Instant::now();
        let b = m();
        let api_s = t_api.elapsed().as_secs_f64();
        let during = (
            pictures(&a),
            pictures(&b),
            stalls(&a),
            stalls(&b),
            packets(&a),
            packets(&b),
        );
        // Served again: pictures resume (the watchdog's next rebuild fetches it).
        stalled.store(false, Ordering::Relaxed);
        let p0 = pictures(&b).unwrap_or(0.0);
        let t0 = Instant::now();
        let mut resumed = None;
        while t0.elapsed() < Duration::from_secs(15) {
            if pictures(&m()).unwrap_or(0.0) >= p0 + 10.0 {
                resumed = Some(t0.elapsed().as_secs_f64());
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let desc = https(port, "GET", "/api/sessions/cam", Some(&api), "").1;
        (created, playing, during, api_s, resumed, desc)
    });
    let (created, playing, during, api_s, resumed, desc) = r;
    let log = ns.log();
    assert_eq!(created, 201, "{log}");
    assert!(playing >= 20.0, "never played: {playing} pictures; {log}");
    let (pa, pb, sa, sb, ka, kb) = during;
    let (pa, pb) = (pa.unwrap(), pb.unwrap());
    let (sa, sb) = (sa.unwrap(), sb.unwrap());
    let (ka, kb) = (ka.unwrap(), kb.unwrap());
    assert!(sa >= 1.0, "stall not counted: {sa}; {log}");
    // 4 s of stall: no pictures (a few may have been in the encoder's queue at the first read).
    assert!(pb - pa <= 2.0, "pictures kept coming: {pa} -> {pb}");
    assert!(sb >= sa, "{sa} -> {sb}");
    // The layers kept their packet rate (padding): packets kept going out.
    assert!(kb > ka + 50.0, "packets {ka} -> {kb}");
    assert!(api_s < 5.0, "the API took {api_s:.1} s");
    let resumed = resumed.unwrap_or_else(|| panic!("pictures did not resume; {log}"));
    let source = &desc["media"]["source"];
    testkit::record(
        "issue23/fault-stalled-source",
        &format!(
            "secured server, HTTP source stalled for 4 s: pictures {pa} -> {pb} (flat), stall restarts {sa} -> {sb}, packets {ka} -> {kb} (padding), /metrics answered in {api_s:.2} s; pictures again {resumed:.1} s after the stream was served again; source {source}"
        ),
        Some(true),
        "cargo test --release -p layercast-server --test security stalled_source",
    );
}
