//! A video session keeps every layer at its announced constant rate on the wire (issue 6: "every
//! layer at its announced rate as back-to-back bunches of equal-size packets, shortfalls
//! filled with padding"). The server runs in a private network namespace whose only interface
//! is `lo`; a receiver there joins every layer, and the per-layer rate is measured from the
//! packets' arrival times. Without root the test is skipped.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream, UdpSocket};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use testkit::netns::{in_ns, Net};

mod common;
use common::{loopback_ns, root_or_skip, server_in};

const PORT: u16 = 18097;

struct Server {
    child: Option<Child>,
    _net: Net,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn get(path: &str) -> Option<Value> {
    serde_json::from_str(&get_text(path)?).ok()
}

fn get_text(path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", PORT)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    Some(out.split("\r\n\r\n").nth(1)?.to_string())
}

/// Per layer: (announced bit/s, measured payload bit/s, packets, packets not of the session's
/// packet size, bunches seen, packets carrying media, FEC repair packets).
type LayerRate = (f64, f64, u64, u64, u64, u64, u64);

/// Bytes of RTP payload (after the header, CSRCs and extension block, before RTP padding):
/// 0 for the pacer's padding-only packets.
fn rtp_payload_len(p: &[u8]) -> usize {
    if p.len() < 12 {
        return 0;
    }
    let mut start = 12 + 4 * (p[0] & 0x0f) as usize;
    if p[0] & 0x10 != 0 && p.len() >= start + 4 {
        start += 4 + 4 * u16::from_be_bytes([p[start + 2], p[start + 3]]) as usize;
    }
    let pad = if p[0] & 0x20 != 0 {
        p[p.len() - 1] as usize
    } else {
        0
    };
    p.len().saturating_sub(start + pad)
}

#[test]
fn video_layers_are_paced_at_their_announced_rate() {
    if !root_or_skip() {
        return;
    }
    let (net, ns) = loopback_ns("vr");
    let mut srv = Server {
        child: None,
        _net: net,
    };
    // The built-in test pattern (no GStreamer), 320x180@15, L3T3: nine layers whose encoder
    // output is mostly below the announced rates (30% headroom plus a packet slot per frame),
    // so most of each layer's budget is padding.
    srv.child = Some(
        server_in(&ns)
            // Development mode: a private namespace on loopback (docs/security.md §9.8).
            .arg("--dev")
            .args(["--http-addr", &format!("127.0.0.1:{PORT}")])
            .args(["--interface", "127.0.0.1"])
            .args([
                "--session",
                r#"{"name":"v","source":"testpattern","packet_size":600,"video":{"width":320,"height":180,"fps":15,"temporal":3}}"#,
            ])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (packet_size, per_layer, (pictures, dropped, metrics)): (
        u64,
        Vec<LayerRate>,
        (u64, u64, String),
    ) = in_ns(&ns, || {
        let t0 = Instant::now();
        let sess = loop {
            if let Some(v) = get("/api/sessions/v") {
                if v["layers"].as_array().is_some_and(|l| !l.is_empty()) {
                    break v;
                }
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "server did not come up"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        let ann = get("/api/sessions/v/announcement").unwrap_or(Value::Null);
        let packet_size = sess["packet_size"]
            .as_u64()
            .or_else(|| ann["packet_size"].as_u64())
            .unwrap_or(600);
        let layers = sess["layers"].as_array().unwrap().clone();
        let socks: Vec<UdpSocket> = layers
            .iter()
            .map(|l| {
                let g: Ipv4Addr = l["group"].as_str().unwrap().parse().unwrap();
                let port = l["port"].as_u64().unwrap() as u16;
                let s = UdpSocket::bind((g, port)).unwrap();
                s.join_multicast_v4(&g, &Ipv4Addr::LOCALHOST).unwrap();
                s.set_nonblocking(true).unwrap();
                s
            })
            .collect();
        // Warm-up (encoder start, first key picture), then 6 s of measurement.
        std::thread::sleep(Duration::from_secs(1));
        let mut buf = [0u8; 2048];
        for s in &socks {
            while s.recv(&mut buf).is_ok() {}
        }
        let n = socks.len();
        // Per layer: arrival time of each bunch's first packet, packets, odd-sized packets.
        let mut firsts: Vec<Vec<Instant>> = vec![Vec::new(); n];
        let mut pkts = vec![0u64; n];
        let mut odd = vec![0u64; n];
        let mut media = vec![0u64; n];
        let mut repair = vec![0u64; n];
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(6) {
            for (k, s) in socks.iter().enumerate() {
                while let Ok(len) = s.recv(&mut buf) {
                    let now = Instant::now();
                    pkts[k] += 1;
                    if len as u64 != packet_size {
                        odd[k] += 1;
                    }
                    // Payload type 97: a FEC repair packet in a slot without media.
                    if len > 1 && buf[1] & 0x7f == 97 {
                        repair[k] += 1;
                    } else if rtp_payload_len(&buf[..len]) > 0 {
                        media[k] += 1;
                    }
                    // cc extension: 12-byte RTP header, 4-byte block header, 1-byte element
                    // header, then layer, bunch position.
                    if len >= 19 && buf[18] == 0 {
                        firsts[k].push(now);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let bunch = sess["bunch_len"]
            .as_u64()
            .or_else(|| ann["bunch_len"].as_u64())
            .unwrap_or(2);
        let out = (0..n)
            .map(|k| {
                let announced = layers[k]["rate_bps"].as_f64().unwrap();
                let f = &firsts[k];
                // Whole bunches between the first and the last bunch start: independent of
                // where the window cuts the schedule.
                let measured = if f.len() >= 2 {
                    let span = (f[f.len() - 1] - f[0]).as_secs_f64();
                    (f.len() - 1) as f64 * (bunch * packet_size * 8) as f64 / span
                } else {
                    0.0
                };
                (
                    announced,
                    measured,
                    pkts[k],
                    odd[k],
                    f.len() as u64,
                    media[k],
                    repair[k],
                )
            })
            .collect();
        let end = get("/api/sessions/v").unwrap_or(Value::Null);
        let pictures = end["video_pictures"].as_u64().unwrap_or(0);
        let dropped = end["video_dropped"].as_u64().unwrap_or(0);
        let metrics = get_text("/metrics").unwrap_or_default();
        (packet_size, out, (pictures, dropped, metrics))
    });
    let mut worst: f64 = 0.0;
    let mut lines = Vec::new();
    for (k, &(a, m, p, odd, b, media, repair)) in per_layer.iter().enumerate() {
        let dev = (m - a) / a;
        worst = worst.max(dev.abs());
        lines.push(format!(
            "L{k}: announced {:.1} kbit/s, measured {:.1} kbit/s ({:+.2}%), {p} packets ({media} media, {repair} FEC repair, the rest padding) in {b} bunches, {odd} not {packet_size} B",
            a / 1e3,
            m / 1e3,
            dev * 100.0
        ));
    }
    let report = lines.join("\n");
    // Every picture encoded is in the encode latency histogram.
    let encoded = metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix("layercast_video_encode_latency_seconds_count{session=\"v\"} ")
        })
        .and_then(|n| n.trim().parse::<u64>().ok());
    eprintln!(
        "{report}\npictures encoded: {pictures}, media packets dropped (queue full): {dropped}, in the encode latency histogram: {encoded:?}"
    );
    assert_eq!(per_layer.len(), 9, "L3T3 has nine layers");
    assert!(pictures > 0, "the encoder produced no picture");
    // Read after the session's counter: the histogram has at least as many.
    assert!(
        encoded.is_some_and(|n| n >= pictures),
        "{encoded:?} of {pictures}"
    );
    let repairs: u64 = per_layer.iter().map(|l| l.6).sum();
    assert!(repairs > 0, "no FEC repair packet on any layer:\n{report}");
    for &(_, _, p, odd, b, media, _) in &per_layer {
        assert!(media > 0, "a layer carried no media:\n{report}");
        assert!(b >= 5, "too few bunches on a layer:\n{report}");
        assert_eq!(odd, 0, "a packet of another size:\n{report}");
        assert!(p >= 2 * b - 2, "bunches not whole:\n{report}");
    }
    assert!(
        worst <= 0.03,
        "a layer is off its announced rate:\n{report}"
    );
    testkit::record(
        "issue6/video-layer-rates",
        &format!(
            "VP9 L3T3 320x180@15 test pattern, 600-byte packets: every layer within {:.2}% of its announced rate on the wire over 6 s (worst layer), all packets 600 B",
            worst * 100.0
        ),
        Some(worst <= 0.03),
        "cargo test --release -p layercast-server --test video_rate",
    );
}
