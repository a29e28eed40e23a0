//! Interoperability: layer 0 alone, sent as RTP to 127.0.0.1, must decode with stock
//! GStreamer (`rtpvp9depay ! vp9dec`) and ffmpeg (with the SDP `codec::sdp` writes).
//! Each check is skipped, with a message, only if its binary is absent.

use codec::fec::{FecEncoder, FecParams};
use codec::ladder::LayerLadder;
use codec::sdp::LayerSdp;
use codec::synth;
use codec::vp9rtp::{LayerStreams, StreamConfig};
use codec::vpx::{SvcConfig, SvcEncoder};
use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Layer-0 packets of a 4 s clip as the server's pacer sends them: a CC extension element
/// on every packet, one sequence space, and after each picture one or two FEC repair packets
/// (payload type 97, `codec::fec`) in the slots the picture left free. Returns the packets per
/// picture, the number of packets, and the number of repair packets among them.
fn layer0_packets() -> (Vec<Vec<Vec<u8>>>, usize, usize) {
    let mut conf = SvcConfig::l3t3_720p();
    conf.keyframe_interval = 0;
    let ladder = LayerLadder::spatial_major(&conf.cell_kbps).unwrap();
    let res = (0..3)
        .map(|s| {
            let (w, h) = conf.layer_size(s);
            (w as u16, h as u16)
        })
        .collect();
    let mut enc = SvcEncoder::new(conf).unwrap();
    let mut ls = LayerStreams::new(ladder, res, StreamConfig::default()).unwrap();
    let mut fec = FecEncoder::new(FecParams::default(), 1200 - 12 - 16).unwrap();
    let cc = [(1u8, vec![0xab, 0xcd, 0x01, 0x02])];
    let mut pics = Vec::new();
    let (mut n_pkts, mut n_repair, mut seq) = (0, 0, 0u16);
    for n in 0..120u32 {
        let f = synth::frame(1280, 720, n);
        let pic = enc.encode(&f, n as i64 * 3000).unwrap().unwrap();
        let per_layer = ls.packets(&pic).unwrap();
        if per_layer[0].is_empty() {
            continue;
        }
        let mut v = Vec::new();
        for p in &per_layer[0] {
            fec.push_media(seq, &p.header, &p.payload);
            let mut p = p.clone();
            p.header.sequence_number = seq;
            v.push(p.to_bytes(&cc).unwrap());
            seq = seq.wrapping_add(1);
        }
        for _ in 0..1 + pics.len() % 2 {
            let r = fec.repair().expect("a repair for every picture");
            let mut r = codec::vp9rtp::LayerPacket {
                layer: 0,
                header: r.header,
                payload: r.payload,
            };
            r.header.sequence_number = seq;
            v.push(r.to_bytes(&cc).unwrap());
            seq = seq.wrapping_add(1);
            n_repair += 1;
        }
        n_pkts += v.len();
        pics.push(v);
    }
    (pics, n_pkts, n_repair)
}

fn have(bin: &str) -> bool {
    Command::new(bin)
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Collect a child's stdout and stderr lines on a channel.
fn lines(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    if let Some(o) = child.stdout.take() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(o).lines().map_while(|l| l.ok()) {
                let _ = tx.send(l);
            }
        });
    }
    if let Some(e) = child.stderr.take() {
        std::thread::spawn(move || {
            for l in BufReader::new(e).lines().map_while(|l| l.ok()) {
                let _ = tx.send(l);
            }
        });
    }
    rx
}

/// Wait for the child to exit within `limit`; kill it otherwise. Returns exit success.
fn wait_or_kill(child: &mut Child, limit: Duration) -> Option<bool> {
    let t0 = Instant::now();
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st.success());
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether some socket is bound to UDP `port` (Linux `/proc/net/udp`): the receiver is ready.
fn udp_bound(port: u16) -> bool {
    let want = format!(":{port:04X}");
    ["/proc/net/udp", "/proc/net/udp6"].iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|t| {
            t.lines().skip(1).any(|l| {
                l.split_whitespace()
                    .nth(1)
                    .is_some_and(|a| a.ends_with(&want))
            })
        })
    })
}

fn send(pics: &[Vec<Vec<u8>>], port: u16, gap: Duration) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    for pic in pics {
        for p in pic {
            sock.send_to(p, ("127.0.0.1", port)).unwrap();
        }
        std::thread::sleep(gap);
    }
}

#[test]
fn layer0_plays_in_gstreamer() {
    if !have("gst-launch-1.0") {
        eprintln!("SKIPPED: gst-launch-1.0 not installed");
        return;
    }
    let (pics, n_pkts, n_repair) = layer0_packets();
    let port = free_port();
    let mut child = Command::new("gst-launch-1.0")
        .args([
            "-v",
            "udpsrc",
            "address=127.0.0.1",
            &format!("port={port}"),
            &format!("num-buffers={n_pkts}"),
            "caps=application/x-rtp,media=video,clock-rate=90000,encoding-name=VP9,payload=96",
            "!",
            "rtpvp9depay",
            "!",
            "vp9dec",
            "!",
            "fakesink",
            "silent=false",
            "sync=false",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines(&mut child);
    let t0 = Instant::now();
    let mut out = Vec::new();
    // The pipeline is listening once it reports PLAYING.
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(l) => {
                let playing = l.contains("PLAYING");
                out.push(l);
                if playing {
                    break;
                }
            }
            Err(_) if t0.elapsed() > Duration::from_secs(20) => {
                panic!("gst never started: {out:?}")
            }
            Err(_) => {}
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    send(&pics, port, Duration::from_millis(4));
    let ok = wait_or_kill(&mut child, Duration::from_secs(30));
    out.extend(rx.try_iter());
    let frames = out
        .iter()
        .filter(|l| l.contains("last-message = chain"))
        .count();
    let text = out.join("\n");
    assert_eq!(ok, Some(true), "gst-launch did not finish cleanly:\n{text}");
    assert!(
        text.contains("width=(int)320") && text.contains("height=(int)180"),
        "{text}"
    );
    // Every picture reaches the sink (loopback does not lose packets at this rate).
    assert!(
        frames >= pics.len() - 1,
        "{frames} of {} pictures decoded by vp9dec:\n{text}",
        pics.len()
    );
    assert!(
        !text.contains("ERROR") && !text.contains("WARNING"),
        "{text}"
    );
    println!(
        "gstreamer decoded {frames} of {} layer-0 pictures ({n_repair} FEC repair packets among {n_pkts})",
        pics.len()
    );
    testkit::record(
        "issue5/interop-gst",
        &format!(
            "gst-launch udpsrc ! rtpvp9depay ! vp9dec decoded {frames} of {} pictures, 320x180, with {n_repair} FEC repair packets (PT 97) among the {n_pkts}",
            pics.len()
        ),
        Some(true),
        "cargo test --release -p layercast-codec --test interop",
    );
}

#[test]
fn layer0_plays_in_ffmpeg_with_our_sdp() {
    if !have("ffmpeg") {
        eprintln!("SKIPPED: ffmpeg not installed");
        return;
    }
    let (pics, _, n_repair) = layer0_packets();
    let port = free_port();
    let mut sdp = LayerSdp::new(
        "127.0.0.1".parse().unwrap(),
        "127.0.0.1".parse().unwrap(),
        port,
    );
    sdp.fec = Some(FecParams::default());
    let sdp = sdp.render().unwrap();
    assert!(
        sdp.contains("a=x-layercast-fec:97 row=4;span=46\r\n"),
        "{sdp}"
    );
    let dir = std::env::temp_dir().join(format!("lc-codec-sdp-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("layer0.sdp");
    std::fs::write(&path, &sdp).unwrap();
    let want = pics.len() - 4;
    let mut child = Command::new("ffmpeg")
        .args([
            "-hide_banner",
            "-nostdin",
            "-loglevel",
            "info",
            "-protocol_whitelist",
            "file,udp,rtp",
            "-i",
        ])
        .arg(&path)
        .args(["-frames:v", &want.to_string(), "-f", "null", "-"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines(&mut child);
    // ffmpeg prints nothing until it has probed the stream: wait until it has bound the port
    // (a receiver that misses the key picture cannot decode anything).
    let t0 = Instant::now();
    while !udp_bound(port) {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "ffmpeg never bound port {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    send(&pics, port, Duration::from_millis(20));
    let ok = wait_or_kill(&mut child, Duration::from_secs(30));
    let out: Vec<String> = rx.try_iter().collect();
    let text = out.join("\n");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(ok, Some(true), "ffmpeg did not finish cleanly:\n{text}");
    assert!(text.contains("vp9") && text.contains("320x180"), "{text}");
    assert!(
        !text.to_lowercase().contains("error while decoding"),
        "{text}"
    );
    println!(
        "ffmpeg decoded {want} frames of layer 0 via {} ({n_repair} repair packets ignored)",
        path.display()
    );
    testkit::record(
        "issue5/interop-ffmpeg",
        &format!("ffmpeg -i layer0.sdp decoded {want} frames, vp9 320x180, no decode error, with {n_repair} FEC repair packets (PT 97) in the stream"),
        Some(true),
        "cargo test --release -p layercast-codec --test interop",
    );
}
