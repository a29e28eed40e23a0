//! The HTTP API, WebSocket and metrics of a running server, on loopback (`docs/api.md`).
//! The server runs in a private network namespace whose only interface is `lo` (its multicast
//! goes nowhere else); without root the test is skipped.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use testkit::netns::{in_ns, Net};

mod common;
use common::{loopback_ns, root_or_skip, server_in};

struct Server {
    ns: String,
    child: Option<Child>,
    /// Owns the namespace; dropped (namespace deleted) after `Drop` has reaped the child.
    _net: Net,
}

impl Server {
    /// A namespace whose only interface is `lo`, with multicast routed to it.
    fn namespace(tag: &str) -> Server {
        let (net, ns) = loopback_ns(tag);
        Server {
            ns,
            child: None,
            _net: net,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One request; returns (status, headers+body text).
fn http(method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect("127.0.0.1:18090").expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    testkit::http::read_response(&mut s)
}

fn get_code(r: &[(String, u16, Value)], name: &str) -> u16 {
    r.iter().find(|x| x.0 == name).map_or(0, |x| x.1)
}

fn json_body(resp: &str) -> Value {
    let body = resp.split("\r\n\r\n").nth(1).unwrap_or("");
    serde_json::from_str(body).unwrap_or(Value::Null)
}

#[test]
fn api_sessions_telemetry_live_metrics_shutdown() {
    if !root_or_skip() {
        return;
    }
    let pwn = format!("/tmp/lc-{}-f1-pwn", std::process::id());
    let _ = std::fs::remove_file(&pwn);
    let mut srv = Server::namespace("api");
    let ns = srv.ns.clone();
    srv.child = Some(
        server_in(&ns)
            // Development mode: a private namespace on loopback (docs/security.md §9.8).
            .arg("--dev")
            .args(["--http-addr", "127.0.0.1:18090", "--interface", "127.0.0.1"])
            // A minute between reports: the second post below is rate-limited whatever the load.
            .args(["--telemetry-min-interval-ms", "60000"])
            .args([
                "--session",
                r#"{"name":"one","layers":3,"layer_rate_bps":50000}"#,
            ])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let pwn2 = pwn.clone();
    let r = in_ns(&ns, move || {
        let pwn = pwn2;
        let t0 = Instant::now();
        while TcpStream::connect("127.0.0.1:18090").is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "server did not come up"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut r: Vec<(String, u16, Value)> = Vec::new();
        let mut call = |name: &str, m: &str, p: &str, b: &str| {
            let (c, t) = http(m, p, b);
            r.push((name.to_string(), c, json_body(&t)));
            t
        };
        call("list", "GET", "/api/sessions", "");
        call(
            "create",
            "POST",
            "/api/sessions",
            r#"{"name":"two","protocol":"plm","layer_rates_bps":[20000,40000]}"#,
        );
        call("dup", "POST", "/api/sessions", r#"{"name":"two"}"#);
        call(
            "bad",
            "POST",
            "/api/sessions",
            r#"{"name":"x","packet_size":5}"#,
        );
        // F1: the review's pipeline-injection payload (a chain that writes a file) is refused
        // before anything starts, and a cross-site form's text/plain body is refused outright.
        let inject = format!(
            r#"{{"name":"pwn","source":"file:///x filesrc location=/etc/hostname ! filesink location={pwn} videotestsrc"}}"#
        );
        call("inject", "POST", "/api/sessions", &inject);
        let plain = {
            let mut s = TcpStream::connect("127.0.0.1:18090").unwrap();
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            let b = r#"{"name":"csrf"}"#;
            write!(s, "POST /api/sessions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{b}", b.len()).unwrap();
            testkit::http::read_response(&mut s).0
        };
        call("ann", "GET", "/api/sessions/two/announcement", "");
        let sdp = call("sdp", "GET", "/api/sessions/one/sdp", "");
        let t = r#"{"viewer_id":"v1","session_id":"one","protocol":"era","layers":2,"max_layers":3,"rate_bps":100000,"estimate_bps":120000,"loss_ratio":0.01,"packets_received":10,"packets_lost":0,"decisions":[{"at_s":1.5,"from":1,"to":2,"reason":"rai","inputs":{"r_pp":120000}}]}"#;
        call("tele", "POST", "/api/telemetry", t);
        call("tele-fast", "POST", "/api/telemetry", t);
        call(
            "tele-unknown",
            "POST",
            "/api/telemetry",
            &t.replace("\"one\"", "\"nope\""),
        );
        call("tele-bad", "POST", "/api/telemetry", "[1,2");
        call("viewers", "GET", "/api/viewers", "");
        call("one", "GET", "/api/sessions/one", "");
        let metrics = call("metrics", "GET", "/metrics", "");
        call("delete", "DELETE", "/api/sessions/two", "");
        call("delete-again", "DELETE", "/api/sessions/two", "");
        // WebSocket: upgrade by hand, read the first text frame.
        let mut s = TcpStream::connect("127.0.0.1:18090").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        s.write_all(b"GET /api/live HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").unwrap();
        let mut buf = vec![0u8; 65536];
        let mut got = Vec::new();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(4) {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
            if String::from_utf8_lossy(&got).contains("\"snapshot\"") && got.ends_with(b"}") {
                break;
            }
        }
        std::thread::sleep(Duration::from_secs(1));
        (
            r,
            sdp,
            metrics,
            String::from_utf8_lossy(&got).to_string(),
            plain,
        )
    });
    let (results, sdp, metrics, ws, plain) = r;
    assert_eq!(get_code(&results, "inject"), 400);
    assert_eq!(plain, 415, "a text/plain POST must be refused");
    assert!(
        !std::path::Path::new(&pwn).exists(),
        "the injected pipeline wrote {pwn}"
    );

    let get = |n: &str| results.iter().find(|x| x.0 == n).unwrap();
    assert_eq!(get("list").1, 200);
    assert_eq!(get("list").2[0]["id"], "one");
    assert_eq!(get("list").2[0]["layers"][2]["cumulative_bps"], 150000);
    // No audio track: nothing of layer 0's rate is sound.
    assert!(get("list").2[0]["audio_rate_bps"].is_null());
    assert_eq!(get("create").1, 201);
    assert_eq!(get("create").2["protocol"], "plm");
    assert_eq!(get("create").2["layers"][1]["group"], "239.255.77.4");
    assert_eq!(get("dup").1, 409);
    assert_eq!(get("bad").1, 400);
    assert!(get("bad").2["error"]
        .as_str()
        .unwrap()
        .contains("body.packet_size"));
    assert_eq!(get("ann").2["layers"][1]["rate_bps"], 40000);
    assert!(
        sdp.contains("application/sdp")
            && sdp.contains("a=extmap:1 urn:layercast:cc")
            && sdp.contains("c=IN IP4 239.255.77.0/8"),
        "{sdp}"
    );
    assert_eq!(get("tele").1, 204);
    assert_eq!(get("tele-fast").1, 429);
    assert_eq!(get("tele-unknown").1, 404);
    assert_eq!(get("tele-bad").1, 400);
    let v = &get("viewers").2[0];
    assert_eq!(
        (v["id"].as_str(), v["layers"].as_u64(), v["gone"].as_bool()),
        (Some("v1"), Some(2), Some(false))
    );
    assert_eq!(v["decisions"][0]["inputs"]["r_pp"], 120000.0);
    assert_eq!(
        get("one").2["viewers_by_layer"],
        serde_json::json!([0, 1, 0])
    );
    assert!(
        metrics.contains("layercast_viewer_layers{session=\"one\",viewer=\"v1\"} 2"),
        "{metrics}"
    );
    assert!(metrics.contains("layercast_viewers{session=\"one\",layers=\"2\"} 1"));
    assert!(
        metrics.contains("layercast_dropped_total{what=\"telemetry\",reason=\"rate_limited\"} 1")
    );
    assert!(metrics.contains("layercast_sender_packets_total{session=\"one\"}"));
    // The key-request aggregation's outcome is exposed next to the requests.
    for name in [
        "layercast_video_key_requests_total",
        "layercast_video_keys_forced_total",
        "layercast_video_syncs_forced_total",
    ] {
        assert!(
            metrics.contains(&format!("# TYPE {name} counter")),
            "{name}"
        );
    }
    assert_eq!(get("delete").1, 204);
    assert_eq!(get("delete-again").1, 404);
    assert!(ws.starts_with("HTTP/1.1 101"), "{ws}");
    // Header names are case-insensitive (RFC 9110 §5.1).
    assert!(
        ws.to_ascii_lowercase()
            .contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="),
        "{ws}"
    );
    assert!(
        ws.contains("\"type\":\"snapshot\"") && ws.contains("\"viewers\""),
        "{ws}"
    );
    // Graceful shutdown on SIGTERM: exits 0 and reports the pacer.
    let child = srv.child.take().unwrap();
    // SAFETY: signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(
        log.contains("shutting down") && log.contains("session one:"),
        "{log}"
    );
}

/// Children of `pid` (from /proc/PID/task/*/children).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(c) = std::fs::read_to_string(t.path().join("children")) {
                out.extend(c.split_whitespace().filter_map(|x| x.parse::<u32>().ok()));
            }
        }
    }
    out
}

/// A GStreamer-sourced session (`gst-testpattern` with `debugqroverlay`) encodes pictures
/// from its in-process pipeline (issue 21: no `gst-launch-1.0` child any more); stopping it,
/// and shutting the server down, leaves no process behind.
#[test]
fn gstreamer_source_runs_and_stops_its_child() {
    gst_session(
        r#"{"name":"g","source":"gst-testpattern","video":{"width":320,"height":180,"qroverlay":true}}"#,
        20,
        18091,
    );
}

/// A file source loops: a 20-frame clip made here yields well over 20 encoded pictures.
#[test]
fn file_source_loops() {
    if Command::new("gst-launch-1.0")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: needs gst-launch-1.0");
        return;
    }
    let clip = std::env::temp_dir().join(format!("lc-{}-clip.webm", std::process::id()));
    let st = Command::new("gst-launch-1.0")
        .args([
            "-q",
            "videotestsrc",
            "num-buffers=20",
            "!",
            "video/x-raw,width=160,height=90,framerate=15/1",
            "!",
            "vp8enc",
            "!",
            "webmmux",
            "!",
            "filesink",
        ])
        .arg(format!("location={}", clip.display()))
        .status()
        .unwrap();
    assert!(st.success());
    let session = format!(
        r#"{{"name":"g","source":"file://{}","video":{{"width":320,"height":180}}}}"#,
        clip.display()
    );
    gst_session(&session, 50, 18092);
    let _ = std::fs::remove_file(&clip);
}

fn gst_session(session: &str, want: u64, port: u16) {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0
        || Command::new("gst-launch-1.0")
            .arg("--version")
            .output()
            .is_err()
    {
        eprintln!("SKIPPED: needs root and gst-launch-1.0");
        return;
    }
    let mut srv = Server::namespace("gst");
    let ns = srv.ns.clone();
    srv.child = Some(
        server_in(&ns)
            // Development mode: a private namespace on loopback (docs/security.md §9.8).
            .arg("--dev")
            .arg("--http-addr")
            .arg(format!("127.0.0.1:{port}"))
            .args(["--interface", "127.0.0.1", "--session", session])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let pid = srv.child.as_ref().unwrap().id();
    let (pictures, kids_running, kids_after_delete, code) = in_ns(&ns, move || {
        let get = |p: &str| -> (u16, Value) {
            let mut s = match TcpStream::connect(("127.0.0.1", port)) {
                Ok(s) => s,
                Err(_) => return (0, Value::Null),
            };
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            write!(
                s,
                "GET {p} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
            let mut out = String::new();
            let _ = s.read_to_string(&mut out);
            let code = out
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            (code, json_body(&out))
        };
        let t0 = Instant::now();
        let mut pictures = 0;
        while t0.elapsed() < Duration::from_secs(20) {
            let (_, v) = get("/api/sessions/g");
            pictures = v["video_pictures"].as_u64().unwrap_or(0);
            if pictures >= want {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let running = children(pid).len();
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(
            s,
            "DELETE /api/sessions/g HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        let code: u16 = out
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        (pictures, running, children(pid).len(), code)
    });
    assert!(
        pictures >= want,
        "only {pictures} pictures encoded from GStreamer"
    );
    assert_eq!(
        kids_running, 0,
        "the source pipeline runs in-process: no child process"
    );
    assert_eq!(code, 204);
    assert_eq!(kids_after_delete, 0, "gst-launch child left after DELETE");
    let child = srv.child.take().unwrap();
    // SAFETY: signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
