//! Hostile input against a secured session (`docs/security.md`, issue 9): the server runs
//! HTTPS (self-signed, pinned by fingerprint), bearer tokens, signed SAMs, an encrypted
//! session and an SSM source. While a player receives it, an attacker in the server's
//! namespace
//! - sends forged (other key), unsigned, garbage and replayed SAMs to the announcement group,
//! - sends garbage and well-formed-but-unsealed RTP to every layer group from a *second*
//!   address (wrong source: the SSM filter drops it), and
//! - sends the same from the session's own source address (spoofed source: only packet
//!   authentication can drop it).
//!
//! Run as root: `cargo test --release -p layercast-player --test netns_security`.

mod common;
use codec::rtp::RtpHeader;
use common::*;
use congestion::wire::cc_ext::CcFields;
use congestion::{LayerInfo, SessionInfo};
use security::auth::SamSigner;
use serde_json::Value;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

const API: &str = "control-token-for-the-test-0001";
const PLAYER: &str = "player-token-for-the-test-0001";
const ATTACKER_IP: &str = "10.77.1.9";
const GROUP0: [u8; 4] = [239, 255, 77, 0];
const PORT0: u16 = 5004;
const LAYERS: usize = 3;

fn wait_for(mut f: impl FnMut() -> bool, limit: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

fn plain_rtp(seq: u16, layer: u8) -> Vec<u8> {
    let cc = CcFields {
        layer,
        bunch_pos: 0,
        bunch_len: 1,
        send_time_us: 0,
    };
    let h = RtpHeader {
        payload_type: 96,
        sequence_number: seq,
        ssrc: 0x0bad_f00d,
        extensions: vec![(1u8, cc.to_bytes().to_vec())],
        ..Default::default()
    };
    let mut out = Vec::new();
    h.write(&[0u8; 200], &mut out).unwrap();
    out
}

fn forged_info() -> SessionInfo {
    SessionInfo {
        session_id: 0x0f0f_0f0f,
        announce_seq: 1,
        sender: Ipv4Addr::new(10, 77, 1, 9),
        layers: vec![LayerInfo {
            rate_bps: 10_000_000,
            group: Ipv4Addr::new(239, 255, 99, 1),
            port: 6000,
        }],
        packet_size: 1000,
        bunch_len: 2,
        adapt_interval: Duration::from_secs(1),
        announce_interval: Duration::from_secs(1),
        tracks: Vec::new(),
        feedback_port: None,
        retransmission: false,
    }
}

#[test]
fn secured_session_survives_forged_announcements_and_injected_data() {
    if !prerequisites() {
        return;
    }
    let mut tb = Testbed::new(10_000_000, 60_000, 554);
    // The attacker's second address on the server's link.
    let s_ns = tb.s.clone();
    let ok = std::process::Command::new("ip")
        .args([
            "-n",
            &s_ns,
            "addr",
            "add",
            &format!("{ATTACKER_IP}/24"),
            "dev",
            "s0",
        ])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let cert = tb.dir.join("cert.pem");
    let key = tb.dir.join("key.pem");
    let sam_file = tb.dir.join("sam.key");
    let (cert_s, key_s, sam_s) = (
        cert.to_string_lossy().to_string(),
        key.to_string_lossy().to_string(),
        sam_file.to_string_lossy().to_string(),
    );
    let state = tb.dir.join("state").to_string_lossy().to_string();
    let srv = bin("layercast-server");
    tb.spawn(
        "server",
        &s_ns,
        &srv,
        &[
            "--http-addr",
            "0.0.0.0:8080",
            "--interface",
            SERVER_IP,
            "--ssm-source",
            SERVER_IP,
            "--announce",
            "239.255.76.1:5000",
            "--api-token",
            API,
            "--player-token",
            PLAYER,
            "--sam-key-file",
            &sam_s,
            "--tls",
            "true",
            "--tls-cert",
            &cert_s,
            "--tls-key",
            &key_s,
            "--state-dir",
            &state,
            "--session",
            r#"{"name":"enc","layers":3,"layer_rate_bps":200000,"encrypt":true}"#,
        ],
    );
    assert!(
        wait_for(
            || tb.log("server").contains("sha256:"),
            Duration::from_secs(20)
        ),
        "server did not start: {}",
        tb.log("server")
    );
    let log = tb.log("server");
    let fp = log
        .split("sha256:")
        .nth(1)
        .map(|s| s.trim().chars().take(64).collect::<String>())
        .unwrap();
    assert_eq!(fp.len(), 64, "fingerprint in {log}");
    let url = "https://10.77.3.1:8080/api/sessions/enc/announcement";
    let secs = 16.0;
    tb.start_player(
        "good",
        secs,
        &[
            "--session-url",
            url,
            "--announce",
            "239.255.76.1:5000",
            "--tls-fingerprint",
            &fp,
            "--token",
            PLAYER,
            "--fixed-layers",
            "3",
        ],
    );
    // Control: the same, but any-source joins. It must see the wrong-source data, or the
    // SSM assertion below would prove nothing.
    tb.start_player(
        "asm",
        secs,
        &[
            "--session-url",
            url,
            "--tls-fingerprint",
            &fp,
            "--token",
            PLAYER,
            "--fixed-layers",
            "3",
            "--ssm",
            "any",
        ],
    );
    // No token: the key API refuses it, so it never joins.
    tb.start_player(
        "notoken",
        secs,
        &[
            "--session-url",
            url,
            "--tls-fingerprint",
            &fp,
            "--fixed-layers",
            "3",
        ],
    );
    // Wrong pin: the TLS handshake fails, so it never learns anything.
    let wrong_fp = "00".repeat(32);
    tb.start_player(
        "wrongpin",
        secs,
        &[
            "--session-url",
            url,
            "--tls-fingerprint",
            &wrong_fp,
            "--token",
            PLAYER,
            "--fixed-layers",
            "3",
        ],
    );
    // Inject only once both receiving players have joined (the description comes over TLS
    // first, which takes seconds on a loaded machine), so they see the whole injection.
    let joined = |tb: &Testbed, tag: &str| {
        tb.player_log(tag)
            .iter()
            .any(|l| l["packets_received"].as_u64().unwrap_or(0) > 0)
    };
    assert!(
        wait_for(
            || joined(&tb, "good") && joined(&tb, "asm"),
            Duration::from_secs(12)
        ),
        "players did not join: {} / {}",
        tb.log("good"),
        tb.log("asm")
    );
    // The attacker, in S: capture one genuine SAM, then inject for ~6 s.
    let sent = tb.in_ns(&s_ns, move || {
        let ann = UdpSocket::bind("239.255.76.1:5000").unwrap();
        ann.join_multicast_v4(
            &Ipv4Addr::new(239, 255, 76, 1),
            &Ipv4Addr::new(10, 77, 1, 1),
        )
        .unwrap();
        ann.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 2048];
        let n = ann.recv(&mut buf).expect("a genuine SAM");
        let genuine = buf[..n].to_vec();
        let wrong_src = UdpSocket::bind(format!("{ATTACKER_IP}:0")).unwrap();
        let spoofed = UdpSocket::bind(format!("{SERVER_IP}:0")).unwrap();
        for s in [&wrong_src, &spoofed] {
            s.set_multicast_ttl_v4(8).unwrap();
        }
        let ann_dst = SocketAddrV4::new(Ipv4Addr::new(239, 255, 76, 1), 5000);
        let other_key = SamSigner::generate();
        let now_ms = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64
        };
        let mut n_spoofed = 0u64;
        let t0 = Instant::now();
        let mut seq = 0u16;
        while t0.elapsed() < Duration::from_secs(6) {
            let mut f = forged_info();
            f.announce_seq = seq as u32 + 1;
            let forged = other_key.to_signed_bytes(&f, now_ms()).unwrap();
            let unsigned = congestion::wire::sam::to_bytes(&f).unwrap();
            for (sock, m) in [
                (&wrong_src, &forged),
                (&wrong_src, &unsigned),
                (&wrong_src, &genuine),
                (&wrong_src, &b"\x01garbage sam".to_vec()),
            ] {
                let _ = sock.send_to(m, ann_dst);
            }
            for k in 0..LAYERS {
                let g = Ipv4Addr::from(u32::from(Ipv4Addr::from(GROUP0)) + k as u32);
                let dst = SocketAddrV4::new(g, PORT0 + 2 * k as u16);
                let p = plain_rtp(seq, k as u8);
                let _ = wrong_src.send_to(&p, dst);
                let _ = wrong_src.send_to(b"not rtp at all", dst);
                if spoofed.send_to(&p, dst).is_ok() {
                    n_spoofed += 1;
                }
            }
            seq = seq.wrapping_add(1);
            std::thread::sleep(Duration::from_millis(50));
        }
        n_spoofed
    });
    for tag in ["good", "asm", "notoken", "wrongpin"] {
        let st = tb.wait(tag, Duration::from_secs(30));
        assert!(st.is_some(), "player {tag} did not stop: {}", tb.log(tag));
    }
    let good = tb.player_log("good");
    let last: &Value = good
        .iter()
        .rev()
        .find(|l| l.get("security").is_some())
        .unwrap_or_else(|| panic!("no log from the good player: {}", tb.log("good")));
    let d = &last["dropped"];
    let sec = &last["security"];
    let sam = &sec["sam"];
    eprintln!("good player: dropped {d} security {sec}");
    // It decrypted and played the session, on all three layers, the genuine session only.
    assert_eq!(sec["encrypted"], true);
    assert_eq!(sec["ssm_source"], SERVER_IP);
    assert_eq!(last["max_layers"], LAYERS as u64);
    assert!(last["packets_received"].as_u64().unwrap() > 100, "{last}");
    let sids: std::collections::BTreeSet<String> = good
        .iter()
        .filter_map(|l| l.get("session_id").filter(|v| !v.is_null()))
        .map(|v| v.to_string())
        .collect();
    assert_eq!(
        sids.len(),
        1,
        "the forged session was never taken: {sids:?}"
    );
    // Announcements: genuine ones accepted; each kind of hostile one refused and counted.
    assert!(sam["accepted"].as_u64().unwrap() >= 3, "{sam}");
    assert!(
        sam["bad_signature"].as_u64().unwrap() >= 10,
        "forged: {sam}"
    );
    assert!(sam["unsigned"].as_u64().unwrap() >= 10, "unsigned: {sam}");
    assert!(sam["malformed"].as_u64().unwrap() >= 10, "garbage: {sam}");
    // Replays are refused before any signature check (not newer than the last verified
    // SAM: the verification budget's gate, F10) or, if one gets that far, by the verifier.
    let replays = sam["replayed"].as_u64().unwrap() + sam["not_newer"].as_u64().unwrap();
    assert!(replays >= 10, "replayed: {sam}");
    // In an encrypted session every foreign datagram that reaches the player fails to open
    // and is counted in `media_auth_failed`. The spoofed-source ones pass the SSM filter:
    // at most `sent` of them. The wrong-source ones (2 per spoofed one) must not arrive at the
    // SSM player, so its count stays within `sent`; the any-source control player must count
    // more than `sent`, or the SSM check would prove nothing.
    let auth_failed = d["media_auth_failed"].as_u64().unwrap();
    assert_eq!(d["malformed_rtp"], 0, "{d}");
    assert!(
        auth_failed as f64 >= 0.5 * sent as f64 && auth_failed <= sent,
        "spoofed {sent}, auth failures {auth_failed}"
    );
    let asm = tb.player_log("asm");
    let asm_last = asm
        .iter()
        .rev()
        .find(|l| l.get("dropped").is_some())
        .expect("control player log");
    let asm_failed = asm_last["dropped"]["media_auth_failed"].as_u64().unwrap();
    assert_eq!(asm_last["security"]["ssm_source"], Value::Null);
    assert!(
        asm_failed > sent + sent / 2,
        "control saw no wrong-source data: {asm_failed} failures, {sent} spoofed"
    );
    // Players without the token or with the wrong pin never received anything.
    for tag in ["notoken", "wrongpin"] {
        let l = tb.player_log(tag);
        let got: u64 = l
            .iter()
            .filter_map(|x| x["packets_received"].as_u64())
            .max()
            .unwrap_or(0);
        assert_eq!(got, 0, "{tag}: {}", tb.log(tag));
    }
    assert!(tb.log("notoken").contains("401"), "{}", tb.log("notoken"));
    assert!(tb.log("wrongpin").contains("TLS"), "{}", tb.log("wrongpin"));
    // The SAM key file was made at first start, owner-only.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&sam_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "key file mode {mode:o}");
    // Cost of opening, per packet, in the player (recorded, not asserted).
    let opened = sec["opened"].as_u64().unwrap_or(0).max(1);
    let us = sec["open_ns_total"].as_u64().unwrap_or(0) as f64 / opened as f64 / 1e3;
    testkit::record(
        "issue9/open-cost",
        &format!("{us:.2} µs ({opened} packets, {LAYERS}x200 kbit/s, 512 B, release build, shared machine)"),
        None,
        "cargo test --release -p layercast-player --test netns_security",
    );
    testkit::record(
        "issue9/hostile-netns",
        &format!(
            "SAMs: {} accepted, {} forged, {} unsigned, {} replayed, {} malformed refused; wrong-source data: none seen with SSM ({auth_failed} AEAD drops <= {sent} spoofed), any-source control {asm_failed} AEAD drops",
            sam["accepted"], sam["bad_signature"], sam["unsigned"], sam["replayed"], sam["malformed"]
        ),
        Some(true),
        "cargo test --release -p layercast-player --test netns_security",
    );
}

/// Starts the server on the secured configuration (HTTPS with a self-signed certificate made
/// at the first start, tokens, SSM, signed SAMs) with a 3-layer encrypted session "enc" and
/// `extra` flags; returns the certificate's fingerprint from its log.
fn start_secured_server(tb: &mut Testbed, extra: &[&str]) -> String {
    start_secured_server_with(
        tb,
        r#"{"name":"enc","layers":3,"layer_rate_bps":200000,"encrypt":true}"#,
        extra,
    )
}

/// [`start_secured_server`] with another session "enc" (`session`, JSON).
fn start_secured_server_with(tb: &mut Testbed, session: &str, extra: &[&str]) -> String {
    let s_ns = tb.s.clone();
    let state = tb.dir.join("state").to_string_lossy().to_string();
    let srv = bin("layercast-server");
    let mut args = vec![
        "--http-addr",
        "0.0.0.0:8080",
        "--interface",
        SERVER_IP,
        "--ssm-source",
        SERVER_IP,
        "--announce",
        "239.255.76.1:5000",
        "--api-token",
        API,
        "--player-token",
        PLAYER,
        "--state-dir",
        &state,
        "--session",
        session,
    ];
    args.extend_from_slice(extra);
    tb.spawn("server", &s_ns, &srv, &args);
    assert!(
        wait_for(
            || tb.log("server").contains("sha256:"),
            Duration::from_secs(20)
        ),
        "server did not start: {}",
        tb.log("server")
    );
    tb.log("server")
        .split("sha256:")
        .nth(1)
        .map(|s| s.trim().chars().take(64).collect())
        .unwrap()
}

/// Starts player `tag` of session "enc" with the token, pinning `fp`, plus `extra` flags.
fn start_secured_player(tb: &mut Testbed, tag: &str, secs: f64, fp: &str, extra: &[&str]) {
    let mut args = vec![
        "--session-url",
        "https://10.77.3.1:8080/api/sessions/enc/announcement",
        "--announce",
        "239.255.76.1:5000",
        "--tls-fingerprint",
        fp,
        "--token",
        PLAYER,
    ];
    args.extend_from_slice(extra);
    tb.start_player(tag, secs, &args);
}

/// Media key rotation under a playing player (docs/security.md §9.3): a server on HTTPS with
/// tokens and an encrypted 3-layer session tells players to fetch the keys every second
/// (`--media-key-refresh-ms 1000`); while a player plays it, the operator rotates the media
/// key three times (lead 2.5 s, the API of the docs). The player fetches each next key
/// during the lead, so not one packet fails to open across the three switches, and it keeps
/// receiving after the last one.
#[test]
fn media_key_rotations_do_not_interrupt_a_player() {
    if !prerequisites() {
        return;
    }
    let mut tb = Testbed::new(10_000_000, 60_000, 554);
    let s_ns = tb.s.clone();
    let fp = start_secured_server(&mut tb, &["--media-key-refresh-ms", "1000"]);
    start_secured_player(&mut tb, "p", 18.0, &fp, &["--fixed-layers", "3"]);
    assert!(
        wait_for(
            || tb
                .player_log("p")
                .iter()
                .any(|l| l["packets_received"].as_u64().unwrap_or(0) > 0),
            Duration::from_secs(12)
        ),
        "player did not join: {}",
        tb.log("p")
    );
    // The operator's command (docs/security.md §9.3), from the server's host.
    let curl = |path: &str, body: &str| -> String {
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", &s_ns, "curl", "-sk", "-X"])
            .arg(if body.is_empty() { "GET" } else { "POST" })
            .args(["-H", &format!("Authorization: Bearer {API}")])
            .args(["-H", "Content-Type: application/json"])
            .args(if body.is_empty() {
                vec![]
            } else {
                vec!["-d", body]
            })
            .arg(format!("https://127.0.0.1:8080{path}"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let t_first = Instant::now();
    for epoch in 1..=3 {
        let r = curl("/api/sessions/enc/keys/rotate", r#"{"lead_ms":2500}"#);
        assert!(
            r.contains(&format!("\"epoch\":{epoch}")),
            "rotation {epoch}: {r}"
        );
        // The switch, and a little for packets of the new epoch to arrive.
        std::thread::sleep(Duration::from_millis(3000));
    }
    let last_switch_s = t_first.elapsed().as_secs_f64() - 0.5;
    let metrics = curl("/metrics", "");
    assert!(
        metrics.contains("layercast_media_key_epoch{session=\"enc\"} 3"),
        "{metrics}"
    );
    assert!(
        tb.wait("p", Duration::from_secs(30)).is_some(),
        "{}",
        tb.log("p")
    );
    let lines = tb.player_log("p");
    let last = lines
        .iter()
        .rev()
        .find(|l| l.get("security").is_some())
        .unwrap_or_else(|| panic!("no player log: {}", tb.log("p")));
    let d = &last["dropped"];
    let opened = last["security"]["opened"].as_u64().unwrap_or(0);
    eprintln!("player after three rotations: dropped {d}, opened {opened}");
    assert_eq!(d["media_auth_failed"], 0, "{d}");
    assert_eq!(d["malformed_rtp"], 0, "{d}");
    // Still receiving after the last switch: the seconds logged after it carried packets.
    let late: u64 = lines
        .iter()
        .rev()
        .take(3)
        .filter_map(|l| l["packets_1s"].as_u64())
        .sum();
    assert!(late > 50, "no packets after the rotations: {late}");
    let max_gap = lines
        .iter()
        .filter_map(|l| l["max_gap_ms"].as_f64())
        .fold(0.0, f64::max);
    testkit::record(
        "issue23/media-key-rotation-player",
        &format!(
            "3 rotations (lead 2.5 s, key refresh 1 s) under a playing 3-layer player: 0 media_auth_failed, {opened} packets opened, {late} in the last 3 s logged, largest packet gap {max_gap:.0} ms (last switch at {last_switch_s:.1} s)"
        ),
        Some(true),
        "cargo test --release -p layercast-player --test netns_security media_key",
    );
}

/// The issue's duplication-and-reordering fault on a secured session (HTTPS, token, SSM,
/// encrypted): the link emulator in front of the player duplicates 10 % and reorders 10 % of
/// the frames for 10 s. Duplicates are authentic packets, so they open; the player's replay
/// window must count them as duplicates before any estimator, nothing may fail to open, and
/// the player must be back at its level once the fault ends (no lost state). What the
/// controller does during the fault is recorded, not asserted: reordered packets read as
/// loss and it sheds (docs/reliability.md, "Duplication and reordering").
#[test]
fn duplicated_and_reordered_packets_on_a_secured_session() {
    if !prerequisites() {
        return;
    }
    let mut tb = Testbed::new_with(4_000_000, 60_000, 1514, true);
    let fp = start_secured_server(&mut tb, &[]);
    start_secured_player(&mut tb, "p", 32.0, &fp, &[]);
    let at_level = |tb: &Testbed| {
        let l = tb.player_log("p");
        l.len() >= 3
            && l[l.len() - 3..]
                .iter()
                .all(|x| x["layers"].as_u64() == Some(3))
    };
    assert!(
        wait_for(|| at_level(&tb), Duration::from_secs(20)),
        "player did not reach 3 layers: {}",
        tb.log("p")
    );
    let before = tb.player_log("p").len();
    tb.set_link(&serde_json::json!({"duplicate": 0.1, "reorder": 0.1}));
    std::thread::sleep(Duration::from_secs(10));
    tb.set_link(&serde_json::json!({"duplicate": 0, "reorder": 0}));
    let emu = tb.emu_state().expect("link emulator state");
    let during = tb.player_log("p").len();
    std::thread::sleep(Duration::from_secs(6));
    let after_ok = at_level(&tb);
    let st = tb.wait("p", Duration::from_secs(40));
    assert!(
        st.is_some_and(|s| s.success()),
        "player: {st:?} {}",
        tb.log("p")
    );
    let lines = tb.player_log("p");
    let last = lines
        .iter()
        .rev()
        .find(|l| l.get("dropped").is_some())
        .expect("player log");
    let d = &last["dropped"];
    let ab = &emu["ab"]["counters"];
    let (dup, reord) = (
        ab["duplicated"].as_u64().unwrap_or(0),
        ab["reordered"].as_u64().unwrap_or(0),
    );
    let layers: Vec<u64> = lines[before..during]
        .iter()
        .filter_map(|l| l["layers"].as_u64())
        .collect();
    let lost: u64 = lines[before..during]
        .iter()
        .filter_map(|l| l["lost_1s"].as_u64())
        .sum();
    let got: u64 = lines[before..during]
        .iter()
        .filter_map(|l| l["packets_1s"].as_u64())
        .sum();
    eprintln!(
        "link: {dup} duplicated, {reord} reordered; player: dropped {d}; layers during {layers:?}; lost {lost} of {got}"
    );
    assert!(dup > 20 && reord > 20, "the fault did not happen: {emu}");
    let seen_dup = d["duplicate"].as_u64().unwrap_or(0);
    assert!(
        seen_dup >= dup / 2 && seen_dup <= dup,
        "duplicates counted {seen_dup} of {dup} made"
    );
    assert_eq!(d["media_auth_failed"], 0, "{d}");
    assert_eq!(d["malformed_rtp"], 0, "{d}");
    // Reordering is not loss (docs/protocols/lcc.md, "Loss and reordering"): the level holds.
    assert!(
        layers.iter().all(|&l| l == 3),
        "layers during the fault {layers:?} (loss counted {lost} of {got})"
    );
    assert!(
        after_ok,
        "not back at 3 layers after the fault: {}",
        tb.log("p")
    );
    testkit::record(
        "issue23/fault-dup-reorder",
        &format!(
            "secured session, 10 s of 10 % duplication + 10 % reordering in the link emulator ({dup} duplicated, {reord} reordered): {seen_dup} duplicates counted by the player's replay window, 0 failed to open, layers during the fault {layers:?} (held), loss counted {lost} of {got} packets, back at 3 layers after"
        ),
        Some(true),
        "cargo test --release -p layercast-player --test netns_security duplicated",
    );
}

/// Sender reports of an encrypted session are sealed (docs/security.md, "Sender reports"): a
/// player plays the test pattern with sound from a secured server while an attacker on the
/// sender's address sends clear sender reports for the session's real SSRCs to the audio's
/// and layer 0's RTCP ports, mapping RTP time 0 to two instants a second apart (taken, they
/// put the sound a second away from the picture). The player refuses and counts every one, takes
/// the sealed ones (its audio clock has reports), and the beep of each flash still plays
/// within 20 ms of the flash (p95).
#[test]
fn forged_sender_reports_do_not_move_lip_sync() {
    if !prerequisites() {
        return;
    }
    let mut tb = Testbed::new_with(20_000_000, 200_000, 1514, true);
    let fp = start_secured_server_with(
        &mut tb,
        r#"{"name":"enc","source":"gst-testpattern","protocol":"era","packet_size":1200,
            "video":{"width":320,"height":180,"fps":15,"spatial":2,"temporal":3},
            "audio":{"kbps":64},"encrypt":true}"#,
        &[],
    );
    // The streams' groups, ports and SSRCs (an attacker on the path reads them off the
    // packets; the test asks the API).
    let s_ns = tb.s.clone();
    let bearer = format!("Authorization: Bearer {PLAYER}");
    let body = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &s_ns,
            "curl",
            "-sk",
            "--max-time",
            "5",
            "-H",
            &bearer,
        ])
        .arg("https://10.77.3.1:8080/api/sessions/enc/announcement")
        .output()
        .expect("curl");
    let info: SessionInfo = serde_json::from_slice(&body.stdout).unwrap_or_else(|e| {
        panic!(
            "description: {e}: {}",
            String::from_utf8_lossy(&body.stdout)
        )
    });
    let audio = info
        .track(proto::TrackKind::Audio)
        .expect("audio track")
        .streams[0]
        .clone();
    let video_ssrc = info
        .track(proto::TrackKind::Video)
        .expect("video track")
        .streams[0]
        .ssrc;
    let l0 = info.layers[0].clone();
    let start_ns = unix_ns();
    let secs = 22.0;
    start_secured_player(
        &mut tb,
        "p",
        secs,
        &fp,
        &["--controller", "era", "--qr-every", "0"],
    );
    std::thread::sleep(Duration::from_secs(5));
    let forged = tb.in_ns(&s_ns, move || {
        let sock = UdpSocket::bind(format!("{SERVER_IP}:0")).unwrap();
        sock.set_multicast_ttl_v4(8).unwrap();
        let mut n = 0u64;
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            // The two mappings a second apart: taken, they would put the sound a second
            // away from the picture.
            let now = unix_ns();
            for (ssrc, group, port, at) in [
                (audio.ssrc, audio.group, audio.port + 1, now),
                (video_ssrc, l0.group, l0.port + 1, now - 1_000_000_000),
            ] {
                let sr = codec::rtcp::SenderReport {
                    ssrc,
                    ntp: codec::rtcp::ntp_from_unix_ns(at),
                    rtp_ts: 0,
                    packets: 1,
                    octets: 100,
                };
                if sock
                    .send_to(&sr.to_bytes("x@y"), SocketAddrV4::new(group, port))
                    .is_ok()
                {
                    n += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        n
    });
    let st = tb.wait("p", Duration::from_secs_f64(secs + 20.0));
    assert!(st.is_some_and(|s| s.success()), "player: {}", tb.log("p"));
    let lines = tb.player_log("p");
    let refused = last_of(&lines, "dropped")["report_auth_failed"]
        .as_u64()
        .unwrap_or(0);
    let a = last_of(&lines, "audio");
    let (offs, unmatched) = common::av::offsets(&tb.dir.join("p"), start_ns + 4_000_000_000);
    let p95 = common::av::abs_quantile(&offs, 0.95);
    let summary = format!(
        "{forged} forged clear sender reports sent, {refused} refused; audio sender reports \
         taken {}; {} flashes, |A/V offset| p95 {p95:.1} ms, {unmatched} without a beep",
        a["sender_reports"],
        offs.len()
    );
    eprintln!("{summary}");
    let ok = refused >= forged / 2
        && refused <= forged
        && a["sender_reports"].as_u64().unwrap_or(0) >= 5
        && offs.len() >= 12
        && p95 <= 20.0;
    testkit::record(
        "issue21/forged-sender-reports",
        &summary,
        Some(ok),
        "cargo test --release -p layercast-player --test netns_security forged_sender_reports",
    );
    assert!(ok, "{summary}\n{}", tb.log("p"));
}
