//! Tests (c) and (d): malformed input is counted and dropped; a server restart is survived.
//! Run as root: `cargo test -p layercast-player --test netns_robust`.

mod common;
use codec::rtp::RtpHeader;
use common::*;
use congestion::wire::cc_ext::CcFields;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

fn http(method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect_timeout(&SERVER_HTTP.parse().unwrap(), Duration::from_secs(2))
        .expect("connect to server");
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    testkit::http::read_response(&mut s)
}

fn rtp(seq: u16, ext: Option<Vec<u8>>) -> Vec<u8> {
    let h = RtpHeader {
        payload_type: 96,
        sequence_number: seq,
        ssrc: 0xdead_beef,
        extensions: ext.map(|e| vec![(1u8, e)]).unwrap_or_default(),
        ..Default::default()
    };
    let mut out = Vec::new();
    h.write(&[0u8; 100], &mut out).unwrap();
    out
}

fn last_stats(lines: &[Value]) -> &Value {
    lines
        .iter()
        .rev()
        .find(|l| l.get("dropped").is_some())
        .expect("no stats line")
}

#[test]
fn malformed_input_is_counted_and_dropped() {
    if !prerequisites() {
        return;
    }
    let mut tb = Testbed::new(10_000_000, 60_000, 554);
    tb.start_server(r#"{"name":"m","layers":2,"layer_rate_bps":100000}"#);
    std::thread::sleep(Duration::from_millis(500));
    tb.start_player(
        "player",
        5.0,
        &[
            "--session-url",
            &tb.url("m"),
            "--announce",
            "239.255.76.1:5000",
            "--fixed-layers",
            "2",
        ],
    );
    std::thread::sleep(Duration::from_millis(1500));
    let s = tb.s.clone();
    tb.in_ns(&s, || {
        let u = UdpSocket::bind("10.77.1.1:0").unwrap();
        u.set_multicast_ttl_v4(8).unwrap();
        let l0 = SocketAddrV4::new("239.255.77.0".parse().unwrap(), 5004);
        let ann = SocketAddrV4::new("239.255.76.1".parse().unwrap(), 5000);
        for _ in 0..3 {
            u.send_to(b"hello, not RTP", l0).unwrap(); // malformed_rtp
            u.send_to(b"LCSA\x01garbage", ann).unwrap(); // malformed_sam
        }
        for i in 0..2 {
            u.send_to(&rtp(i, None), l0).unwrap(); // missing_cc
            u.send_to(&rtp(i, Some(vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])), l0)
                .unwrap(); // bad_cc (bunch_len 0)
            let wrong = CcFields {
                layer: 1,
                bunch_pos: 0,
                bunch_len: 2,
                send_time_us: 1,
            };
            u.send_to(&rtp(i, Some(wrong.to_bytes().to_vec())), l0)
                .unwrap(); // wrong_layer
        }
    });
    let c = tb.c.clone();
    let (codes, metrics) = tb.in_ns(&c, || {
        let bodies = [
            "{not json",
            r#"{"viewer_id":"x"}"#,
            r#"{"viewer_id":"x","session_id":"m","protocol":"era","layers":1,"max_layers":2,"rate_bps":1,"estimate_bps":null,"loss_ratio":5}"#,
        ];
        let codes: Vec<u16> = bodies.iter().map(|b| http("POST", "/api/telemetry", b).0).collect();
        (codes, http("GET", "/metrics", "").1)
    });
    assert_eq!(codes, vec![400, 400, 400]);
    assert!(
        metrics.contains("layercast_dropped_total{what=\"telemetry\",reason=\"malformed\"} 3"),
        "{metrics}"
    );
    let st = tb.wait("player", Duration::from_secs(20));
    assert!(
        st.is_some_and(|s| s.success()),
        "player: {}",
        tb.log("player")
    );
    let lines = tb.player_log("player");
    let d = &last_stats(&lines)["dropped"];
    assert_eq!(d["malformed_rtp"], 3, "{d}");
    // Bad SAMs are counted as `malformed_sam` ("did not decode") in both modes; when the
    // session description pinned a SAM key (the server signs by default, docs/security.md)
    // the verifier counts the same three by reason too (`security.sam.malformed`).
    assert_eq!(d["malformed_sam"], 3, "{d}");
    let sec = last_stats(&lines)["security"]["sam"]["malformed"]
        .as_u64()
        .unwrap_or(0);
    assert!(sec == 0 || sec == 3, "verifier's malformed count {sec}");
    assert_eq!(d["missing_cc"], 2, "{d}");
    assert_eq!(d["bad_cc"], 2, "{d}");
    assert_eq!(d["wrong_layer"], 2, "{d}");
    // Reception went on undisturbed: both layers' packets every second, nothing lost after
    // the join settled (the first second loses packets while igmpproxy installs the route).
    let last = last_stats(&lines);
    assert!(last["packets_1s"].as_u64().unwrap() > 30, "{last}");
    let lost_after_join =
        last["packets_lost"].as_u64().unwrap() - lines[1]["packets_lost"].as_u64().unwrap();
    assert_eq!(lost_after_join, 0, "{last}");
    // And the server is still up.
    let c = tb.c.clone();
    let (code, _) = tb.in_ns(&c, || http("GET", "/api/sessions", ""));
    assert_eq!(code, 200);
    testkit::record(
        "issue6/malformed",
        "player: 3 bad RTP, 2 no-ext, 2 bad ext, 2 wrong-layer, 3 bad SAM counted; server: 3 bad telemetry -> 400 + counted; no loss, no crash",
        Some(true),
        "cargo test -p layercast-player --test netns_robust malformed",
    );
}

#[test]
fn player_resumes_after_server_restart() {
    if !prerequisites() {
        return;
    }
    let session = r#"{"name":"r","layers":3,"layer_rate_bps":100000}"#;
    let mut tb = Testbed::new(10_000_000, 60_000, 554);
    tb.start_server(session);
    std::thread::sleep(Duration::from_millis(500));
    tb.start_player(
        "player",
        9.0,
        &["--session-url", &tb.url("r"), "--fixed-layers", "3"],
    );
    std::thread::sleep(Duration::from_secs(3));
    tb.signal("server", libc::SIGKILL);
    assert!(tb.wait("server", Duration::from_secs(5)).is_some());
    let killed = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    tb.start_server(session);
    let down = killed.elapsed().as_secs_f64();
    let st = tb.wait("player", Duration::from_secs(25));
    assert!(
        st.is_some_and(|s| s.success()),
        "player: {}",
        tb.log("player")
    );
    let lines = tb.player_log("player");
    let ids: Vec<u64> = lines
        .iter()
        .filter_map(|l| l["session_id"].as_u64())
        .collect();
    let first = ids.first().copied().expect("never got a session");
    assert!(
        ids.iter().any(|&i| i != first),
        "no new session after restart: {ids:?}"
    );
    // Longest silence seen by the player (kernel timestamps) minus the time the server was
    // down = how long the player took to resume once the server was back.
    let max_gap_s = lines
        .iter()
        .filter_map(|l| l["max_gap_ms"].as_f64())
        .fold(0.0, f64::max)
        / 1e3;
    let resume = max_gap_s - down;
    eprintln!("server down {down:.2} s, longest silence {max_gap_s:.2} s, resume {resume:.2} s");
    let last = last_stats(&lines);
    assert!(
        last["packets_1s"].as_u64().unwrap() > 50,
        "not receiving at the end: {last}"
    );
    // The new sequence space is not mistaken for loss (losses after the join settled).
    let lost_after_join =
        last["packets_lost"].as_u64().unwrap() - lines[1]["packets_lost"].as_u64().unwrap();
    assert!(lost_after_join < 10, "{last}");
    let pass = resume <= 2.0;
    testkit::record(
        "issue6/server-restart",
        &format!("{resume:.2} s after restart (silence {max_gap_s:.2} s, server down {down:.2} s)"),
        Some(pass),
        "cargo test -p layercast-player --test netns_robust restart",
    );
    assert!(pass, "resumed {resume:.2} s after the server came back");
}

/// Joining by listening to the announcement group alone (binary SAM, no HTTP), with ERA;
/// the player's telemetry shows up in the server's `/api/viewers`, and its own `/metrics`
/// answers with the `layercast_player_` prefix.
#[test]
fn joins_from_the_announcement_group_and_reports() {
    if !prerequisites() {
        return;
    }
    let mut tb = Testbed::new(2_000_000, 30_000, 554);
    tb.start_server(r#"{"name":"a","layers":4,"layer_rate_bps":100000}"#);
    std::thread::sleep(Duration::from_millis(500));
    let tele = format!("http://{SERVER_HTTP}/api/telemetry");
    tb.start_player(
        "player",
        6.0,
        &[
            "--announce",
            "239.255.76.1:5000",
            "--controller",
            "era",
            "--telemetry-url",
            &tele,
            "--session-name",
            "a",
            "--viewer-id",
            "sam-viewer",
            "--metrics-addr",
            "10.77.3.2:9100",
        ],
    );
    std::thread::sleep(Duration::from_secs(4));
    let c = tb.c.clone();
    let (viewers, metrics) = tb.in_ns(&c, || {
        let v = http("GET", "/api/viewers", "").1;
        let mut s =
            TcpStream::connect_timeout(&"10.77.3.2:9100".parse().unwrap(), Duration::from_secs(2))
                .unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut m = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n) = s.read(&mut chunk) {
            if n == 0 {
                break;
            }
            m.extend_from_slice(&chunk[..n]);
            if String::from_utf8_lossy(&m).contains("layercast_player_dropped_total") {
                break;
            }
        }
        (v, String::from_utf8_lossy(&m).to_string())
    });
    let st = tb.wait("player", Duration::from_secs(20));
    assert!(
        st.is_some_and(|s| s.success()),
        "player: {}",
        tb.log("player")
    );
    let lines = tb.player_log("player");
    let last = last_stats(&lines);
    // 4 × 100 kbit/s fit in 2 Mbit/s: ERA holds all four.
    assert_eq!(last["layers"], 4, "{last}");
    assert!(last["session_id"].as_u64().is_some());
    let body = viewers.split("\r\n\r\n").nth(1).unwrap_or("");
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let me = v
        .as_array()
        .and_then(|a| a.iter().find(|x| x["id"] == "sam-viewer"))
        .cloned();
    let me = me.unwrap_or_else(|| panic!("viewer missing: {viewers}"));
    assert_eq!(me["session_id"], "a");
    assert_eq!(me["protocol"], "era");
    assert_eq!(me["max_layers"], 4);
    assert!(me["layers"].as_u64().unwrap() >= 1, "{me}");
    assert!(
        me["decisions"].as_array().is_some_and(|d| !d.is_empty()),
        "{me}"
    );
    assert!(
        metrics.contains("layercast_player_layers{viewer=\"sam-viewer\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("layercast_player_packets_received_total"),
        "{metrics}"
    );
}
