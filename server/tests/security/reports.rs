//! Viewer reports: per-receiver report keys bound to their first client, the authenticated
//! UDP report channel, and viewer tokens that speak for one viewer only.

use crate::common::report;
use crate::support::{body, raw, req, wait_port, Ns, API, PLAYER};
use std::net::UdpSocket;
use std::process::Command;
use std::time::{Duration, Instant};

/// `auth_reports` TFMCC sessions (docs/security.md §9.7): the key API hands a player the
/// report key of the receiver id it names, distinct per id and stable per id; a bad id is
/// 400, no token 401; the key of an id goes only to the client that first asked for it (its
/// `binding` secret): the same client gets it again, another token holder gets 403 (counted),
/// a request without a binding 400; a key from the API MACs a report the sender accepts,
/// while a report MACed under another id's key, an unsigned one and a replay are counted
/// drops.
#[test]
fn auth_reports_keys_per_receiver() {
    let Some(mut ns) = Ns::new("rk") else { return };
    ns.server(&[
        "--http-addr",
        "127.0.0.1:18192",
        "--interface",
        "127.0.0.1",
        "--tls",
        "false",
        "--api-token",
        API,
        "--player-token",
        PLAYER,
        "--session",
        r#"{"id":"tf","protocol":"tfmcc","layer_rates_bps":[500000],"packet_size":1000,"auth_reports":true}"#,
    ]);
    let (a, b) = ("a1".repeat(16), "b2".repeat(16));
    let (codes, k5, k5b, k6, desc, metrics) = ns.run(move || {
        wait_port(18192);
        let get = |path: &str, tok: Option<&str>| raw(18192, &req("GET", path, tok, ""));
        let k = |rid: u32, bind: &str| {
            get(
                &format!("/api/sessions/tf/keys?rid={rid}&binding={bind}"),
                Some(PLAYER),
            )
        };
        let codes = [
            get(&format!("/api/sessions/tf/keys?rid=5&binding={a}"), None).0,
            get(
                &format!("/api/sessions/tf/keys?rid=0&binding={a}"),
                Some(PLAYER),
            )
            .0,
            get(
                &format!("/api/sessions/tf/keys?rid=x&binding={a}"),
                Some(PLAYER),
            )
            .0,
            get("/api/sessions/tf/keys?rid=5", Some(PLAYER)).0,
            get("/api/sessions/tf/keys?rid=5&binding=abc", Some(PLAYER)).0,
        ];
        let desc = body(&get("/api/sessions/tf", Some(PLAYER)).1);
        let k5 = body(&k(5, &a).1);
        // Another token holder asking for 5's key (e.g. having read 5 off a report): refused.
        let taken = k(5, &b);
        let k5b = body(&k(5, &a).1);
        let k6 = body(&k(6, &b).1);
        let metrics = raw(18192, &req("GET", "/metrics", Some(API), "")).1;
        (
            [codes.to_vec(), vec![taken.0]].concat(),
            k5,
            k5b,
            k6,
            desc,
            metrics,
        )
    });
    assert_eq!(codes, [401, 400, 400, 400, 400, 403], "{}", ns.log());
    assert!(
        metrics.contains("layercast_dropped_total{what=\"api\",reason=\"rid_taken\"} 1"),
        "{metrics}"
    );
    assert_eq!(desc["auth_reports"], true);
    assert_eq!(k5["rid"], 5);
    let hex5 = k5["report_key"].as_str().expect("report_key").to_string();
    assert_eq!(hex5.len(), 64);
    assert_eq!(k5b["report_key"], k5["report_key"]);
    assert_ne!(k6["report_key"], k5["report_key"]);
    let fb: std::net::SocketAddr = desc["tfmcc"]["feedback_addr"]
        .as_str()
        .expect("feedback_addr")
        .parse()
        .unwrap();
    // Reports: one genuine (rid 5), its replay, one unsigned, one under 6's key relabelled 5.
    let hex6 = k6["report_key"].as_str().unwrap().to_string();
    let after = ns.run(move || {
        use congestion::wire::tfmcc::TfmccReport;
        use security::auth::ReceiverKey;
        let key5 = ReceiverKey::from_hex(5, &hex5).unwrap();
        let key6 = ReceiverKey::from_hex(6, &hex6).unwrap();
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        // The echo must be a recent sender timestamp: the sender's clock starts with the
        // session, so a small value (well under its uptime) is within its 60 s.
        let rep = TfmccReport {
            rid: 5,
            round: 0,
            have_rtt: false,
            have_loss: false,
            leave: false,
            is_clr: false,
            ts_us: 1000,
            echo_ts_us: 1,
            x_rate: 40_000,
            x_recv: 20_000,
            rtt_us: 10_000,
            p_fixed: 0,
            auth: Default::default(),
        };
        let genuine = key5.seal_tfmcc(&rep).unwrap();
        s.send_to(&genuine, fb).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        s.send_to(&genuine, fb).unwrap();
        let mut plain = rep.clone();
        plain.ts_us = 2000;
        s.send_to(&plain.to_bytes(), fb).unwrap();
        let mut r6 = rep.clone();
        r6.rid = 6;
        r6.ts_us = 3000;
        let mut relabelled = TfmccReport::parse(&key6.seal_tfmcc(&r6).unwrap()).unwrap();
        relabelled.rid = 5;
        s.send_to(&relabelled.to_bytes(), fb).unwrap();
        std::thread::sleep(Duration::from_millis(400));
        body(&raw(18192, &req("GET", "/api/sessions/tf", Some(PLAYER), "")).1)
    });
    let tf = &after["tfmcc"];
    assert_eq!(tf["reports_received"], 1, "{tf}");
    assert_eq!(tf["reports_dropped"]["replayed"], 1, "{tf}");
    assert_eq!(tf["reports_dropped"]["auth"], 2, "{tf}");
    assert_eq!(tf["reports_dropped"]["forged"], 0, "{tf}");
}

/// The UDP report channel: a viewer with its key (from the key API, bound to its secret)
/// is heard, gets an authenticated acknowledgement with the audience size and the budget;
/// a forged tag, a replayed timestamp and garbage are counted and change nothing; key
/// requests within 500 ms are coalesced.
#[test]
fn udp_reports_authenticated_acknowledged_and_counted() {
    let Some(mut ns) = Ns::new("rep") else { return };
    ns.server(&[
        "--http-addr",
        "127.0.0.1:18290",
        "--interface",
        "127.0.0.1",
        "--announce",
        "",
        "--tls",
        "false",
        "--api-token",
        API,
        "--player-token",
        PLAYER,
        "--report-budget-bps",
        "100000",
        "--session",
        r#"{"name":"one","layers":2,"layer_rate_bps":50000}"#,
    ]);
    let r = ns.run(move || {
        wait_port(18290);
        let binding = "ab".repeat(16);
        let keys = body(
            &raw(
                18290,
                &req("GET", &format!("/api/sessions/one/keys?rid=77&binding={binding}"), Some(PLAYER), ""),
            )
            .1,
        );
        let port = keys["report_port"].as_u64().expect("report_port") as u16;
        let key = security::auth::ReceiverKey::from_hex(77, keys["telemetry_key"].as_str().unwrap()).unwrap();
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let dst = ("127.0.0.1", port);
        let t = r#"{"viewer_id":"udp1","session_id":"one","protocol":"era","layers":2,"max_layers":2,"rate_bps":100000,"estimate_bps":null,"loss_ratio":0,"audio_packets":4821,"audio_lost":3,"audio_concealed":2}"#;
        sock.send_to(&report(&key, 0, 1000, "one", t), dst).unwrap();
        let mut buf = [0u8; 256];
        let n = sock.recv(&mut buf).expect("an acknowledgement");
        let ack = buf[..n].to_vec();
        // Forged (another rid's key), replayed (same timestamp), garbage, then two key
        // requests close together.
        let other = security::auth::ReceiverKey::from_hex(77, &"11".repeat(32)).unwrap();
        sock.send_to(&report(&other, 0, 2000, "one", t), dst).unwrap();
        sock.send_to(&report(&key, 0, 1000, "one", t), dst).unwrap();
        // On the feedback port a datagram is a report when it starts with the magic.
        sock.send_to(b"LCR1 not a report", dst).unwrap();
        sock.send_to(&report(&key, 1, 3000, "one", ""), dst).unwrap();
        sock.send_to(&report(&key, 1, 3001, "one", ""), dst).unwrap();
        std::thread::sleep(Duration::from_millis(1300));
        let viewers = body(&raw(18290, &req("GET", "/api/viewers", Some(API), "")).1);
        let metrics = raw(18290, &req("GET", "/metrics", Some(API), "")).1;
        (ack, key, viewers, metrics)
    });
    let (ack, key, viewers, metrics) = r;
    assert_eq!(&ack[..4], b"LCA1");
    assert_eq!(ack.len(), 4 + 12 + 16);
    assert_eq!(
        &ack[4..8],
        &1000u32.to_be_bytes(),
        "echoes the report's timestamp"
    );
    assert_eq!(u32::from_be_bytes(ack[12..16].try_into().unwrap()), 100_000);
    assert_eq!(
        &ack[16..],
        &key.tag(&ack[..16]),
        "the acknowledgement is authenticated"
    );
    assert_eq!(viewers[0]["id"], "udp1", "{viewers}");
    // The audio track's counters (issue 21) ride in the same report.
    assert_eq!(viewers[0]["audio_packets"], 4821, "{viewers}");
    assert_eq!(viewers[0]["audio_concealed"], 2, "{viewers}");
    let count = |k: &str| -> u64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{k} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(u64::MAX)
    };
    assert_eq!(
        count("layercast_reports_total{result=\"accepted\"}"),
        3,
        "{metrics}"
    );
    assert_eq!(count("layercast_reports_total{result=\"auth_failed\"}"), 1);
    assert_eq!(
        count("layercast_viewer_audio_lost_total{session=\"one\",viewer=\"udp1\"}"),
        3,
        "{metrics}"
    );
    assert_eq!(count("layercast_reports_total{result=\"replayed\"}"), 1);
    assert_eq!(count("layercast_reports_total{result=\"malformed\"}"), 1);
    assert_eq!(
        count("layercast_key_requests_total{result=\"coalesced\"}"),
        1
    );
}

/// A viewer's own token (a signed player token whose subject is the viewer id) speaks for
/// that viewer only: its HTTP telemetry naming another viewer is 403, and a report key issued
/// on it MACs reports for that viewer only (others are counted `wrong_viewer`, not heard).
/// Shared static tokens bind no viewer (`udp_reports_authenticated_acknowledged_and_counted`).
#[test]
fn viewer_tokens_speak_for_their_viewer_only() {
    let Some(mut ns) = Ns::new("vb") else { return };
    ns.server(&[
        "--http-addr",
        "127.0.0.1:18291",
        "--interface",
        "127.0.0.1",
        "--announce",
        "",
        "--tls",
        "false",
        "--api-token",
        API,
        "--player-token",
        PLAYER,
        "--session",
        r#"{"name":"one","layers":2,"layer_rate_bps":50000}"#,
    ]);
    // The token key the server made in its state directory at start.
    let key_file = ns.dir.join("state/token.key");
    let t0 = Instant::now();
    while !key_file.exists() && t0.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let sign = |sub: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_layercast-server"))
            .args(["token", "--role", "player", "--sub", sub])
            .arg("--token-secret-file")
            .arg(&key_file)
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    };
    let (alice, bob) = (sign("alice"), sign("bob"));
    let tele = |viewer: &str| {
        format!(
            r#"{{"viewer_id":"{viewer}","session_id":"one","protocol":"era","layers":1,"max_layers":2,"rate_bps":50000,"estimate_bps":null,"loss_ratio":0}}"#
        )
    };
    let r = ns.run(move || {
        wait_port(18291);
        let post = |tok: &str, viewer: &str| {
            raw(
                18291,
                &req("POST", "/api/telemetry", Some(tok), &tele(viewer)),
            )
            .0
        };
        let http = (post(&alice, "alice"), post(&alice, "bob"));
        let binding = "cd".repeat(16);
        let path = format!("/api/sessions/one/keys?rid=91&binding={binding}");
        let keys = body(&raw(18291, &req("GET", &path, Some(&alice), "")).1);
        // The same rid and secret on another viewer's token: not issued.
        let bob_same_rid = raw(18291, &req("GET", &path, Some(&bob), "")).0;
        let port = keys["report_port"].as_u64().expect("report_port") as u16;
        let key =
            security::auth::ReceiverKey::from_hex(91, keys["telemetry_key"].as_str().unwrap())
                .unwrap();
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        let dst = ("127.0.0.1", port);
        let mut buf = [0u8; 256];
        sock.send_to(&report(&key, 0, 1000, "one", &tele("mallory")), dst)
            .unwrap();
        let as_other = sock.recv(&mut buf).is_ok();
        sock.send_to(&report(&key, 0, 2000, "one", &tele("alice")), dst)
            .unwrap();
        let as_self = sock.recv(&mut buf).is_ok();
        std::thread::sleep(Duration::from_millis(1300));
        let viewers = body(&raw(18291, &req("GET", "/api/viewers", Some(API), "")).1);
        let metrics = raw(18291, &req("GET", "/metrics", Some(API), "")).1;
        (http, bob_same_rid, as_other, as_self, viewers, metrics)
    });
    let (http, bob_same_rid, as_other, as_self, viewers, metrics) = r;
    assert_eq!(http, (204, 403), "alice's token for alice, then for bob");
    assert_eq!(bob_same_rid, 403);
    assert!(
        !as_other,
        "a report naming another viewer is not acknowledged"
    );
    assert!(as_self, "the viewer's own report is acknowledged");
    let ids: Vec<&str> = viewers
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["id"].as_str())
        .collect();
    assert_eq!(ids, ["alice"], "{viewers}");
    for (k, want) in [
        ("layercast_reports_total{result=\"wrong_viewer\"}", 1),
        ("layercast_reports_total{result=\"accepted\"}", 1),
        (
            "layercast_dropped_total{what=\"telemetry\",reason=\"wrong_viewer\"}",
            1,
        ),
    ] {
        let got = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{k} ")))
            .and_then(|v| v.trim().parse::<u64>().ok());
        assert_eq!(got, Some(want), "{k}: {metrics}");
    }
}
