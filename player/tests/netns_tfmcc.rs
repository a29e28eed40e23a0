//! TFMCC in the real stack (issue 6): one `protocol: tfmcc` session, two players running
//! `--controller tfmcc`, one behind a 1 Mbit/s tbf, one behind 4 Mbit/s. The sender's rate
//! must settle at the slow path's share and the slow receiver must be the CLR.
//!
//! ```text
//!  ns S  s0 10.78.0.1 ──┐
//!  ns C1 c0 10.78.0.2 ──┤ ns B: bridge br0 (no IGMP snooping: multicast floods every port);
//!  ns C2 c0 10.78.0.3 ──┘ tbf 1 Mbit/s on the port towards C1, 4 Mbit/s towards C2
//! ```
//! The players find the session by its announcement (SAM on 239.255.76.1:5000) and send
//! their reports, unicast, to the announced sender on layer 0's port + 1; the reverse path
//! has no shaper. Namespaces `lc-t<pid>-<n>-*`, removed in `Drop` (also on panic).
//!
//! Band (docs/protocols/tfmcc.md, "Live system"): alone on a drop-tail path TFMCC is
//! TCP-friendly and TCP alone fills the link, so the rate should settle at the slow
//! bottleneck; the spec's closest emulation check, E4 (TFRC on an empty link: "within ±30 %
//! of the bottleneck" after slow start), gives the band: mean rate over the last 20 s of a
//! 60 s run within 0.7-1.3 Mbit/s, and the slow receiver CLR in >= 90 % of those samples
//! (E11's "CLR is the worst receiver >= 90 % of the time"). Run as root:
//! `cargo test --release -p layercast-player --test netns_tfmcc -- --nocapture`.

mod common;
use common::{bin, one_testbed_at_a_time, prerequisites};
use serde_json::Value;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SERVER: &str = "10.78.0.1";

// The tests of this file measure rates on a 2-core machine: one at a time
// (`one_testbed_at_a_time`), so that neither starves the other's receivers (a concurrent run
// showed a 22 % loss second at the honest receiver, which is the host, not the path).

fn sh(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

struct Net {
    ns: Vec<String>,
    dir: PathBuf,
    children: Vec<Child>,
    /// Bearer token for [`Net::get`] (servers with `--api-token`).
    token: Option<String>,
    /// [`Net::get`] over TLS (servers with `--tls`; the test does not verify the certificate,
    /// the players it starts pin it).
    tls: bool,
}

impl Net {
    fn new() -> Net {
        let base = format!("lc-t{}-{}", std::process::id(), rand_suffix());
        let dir = std::env::temp_dir().join(&base);
        std::fs::create_dir_all(&dir).unwrap();
        let names = ["s", "b", "c1", "c2"].map(|x| format!("{base}-{x}"));
        let n = Net {
            ns: names.to_vec(),
            dir,
            children: Vec::new(),
            token: None,
            tls: false,
        };
        let (s, b, c1, c2) = (&names[0], &names[1], &names[2], &names[3]);
        for ns in &names {
            sh(&["ip", "netns", "add", ns]);
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        sh(&[
            "ip",
            "-n",
            b,
            "link",
            "add",
            "br0",
            "type",
            "bridge",
            "mcast_snooping",
            "0",
        ]);
        for (peer, port, dev, addr) in [
            (s, "bs", "s0", "10.78.0.1/24"),
            (c1, "b1", "c0", "10.78.0.2/24"),
            (c2, "b2", "c0", "10.78.0.3/24"),
        ] {
            sh(&[
                "ip", "-n", b, "link", "add", port, "type", "veth", "peer", "name", dev, "netns",
                peer,
            ]);
            sh(&["ip", "-n", b, "link", "set", port, "master", "br0"]);
            sh(&["ip", "-n", b, "link", "set", port, "up"]);
            sh(&["ip", "-n", peer, "addr", "add", addr, "dev", dev]);
            sh(&["ip", "-n", peer, "link", "set", dev, "up"]);
            sh(&["ip", "-n", peer, "route", "add", "239.0.0.0/8", "dev", dev]);
            for (ns, i) in [(b.as_str(), port), (peer.as_str(), dev)] {
                let _ = Command::new("ip")
                    .args([
                        "netns", "exec", ns, "ethtool", "-K", i, "tx", "off", "rx", "off",
                    ])
                    .args(["gso", "off", "gro", "off", "tso", "off"])
                    .output();
            }
        }
        sh(&["ip", "-n", b, "link", "set", "br0", "up"]);
        // The bottlenecks: a one-packet bucket (serialises packets) and 100 ms of queue.
        for (port, rate) in [("b1", 1_000_000u64), ("b2", 4_000_000)] {
            let limit = (rate / 8 / 10).to_string();
            let r = format!("{rate}bit");
            sh(&[
                "ip", "netns", "exec", b, "tc", "qdisc", "add", "dev", port, "root", "tbf", "rate",
                &r, "burst", "1600", "limit", &limit,
            ]);
        }
        n
    }

    fn spawn(&mut self, ns: usize, tag: &str, prog: &std::path::Path, args: &[&str]) {
        let log = std::fs::File::create(self.dir.join(format!("{tag}.log"))).unwrap();
        let c = Command::new("ip")
            .args(["netns", "exec", &self.ns[ns]])
            .arg(prog)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.children.push(c);
    }

    /// Runs `f` on a thread inside namespace number `ns`.
    fn in_ns<T: Send + 'static>(&self, ns: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
        let nsfile = format!("/var/run/netns/{}", self.ns[ns]);
        std::thread::spawn(move || {
            let fd = std::fs::File::open(&nsfile).expect("netns file");
            use std::os::fd::AsRawFd;
            // SAFETY: setns on this thread only, with a valid netns fd.
            assert_eq!(
                unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) },
                0
            );
            f()
        })
        .join()
        .expect("netns thread")
    }

    /// Runs `f` on a new thread inside namespace number `ns`, without waiting for it.
    fn spawn_in_ns<T: Send + 'static>(
        &self,
        ns: usize,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let nsfile = format!("/var/run/netns/{}", self.ns[ns]);
        std::thread::spawn(move || {
            let fd = std::fs::File::open(&nsfile).expect("netns file");
            use std::os::fd::AsRawFd;
            // SAFETY: setns on this thread only, with a valid netns fd.
            assert_eq!(
                unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) },
                0
            );
            f()
        })
    }

    /// GET `path` from the server, inside its namespace.
    fn get(&self, path: &str) -> Option<Value> {
        let nsfile = format!("/var/run/netns/{}", self.ns[0]);
        let path = path.to_string();
        let tls = self.tls;
        let auth = self
            .token
            .as_ref()
            .map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
        std::thread::spawn(move || -> Option<Value> {
            let fd = std::fs::File::open(&nsfile).ok()?;
            use std::os::fd::AsRawFd;
            // SAFETY: setns on this thread only, with a valid netns fd.
            if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return None;
            }
            let addr = format!("{SERVER}:8080").parse().ok()?;
            let tcp = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
            tcp.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
            let mut s: Box<dyn ReadWrite> = if tls {
                let mut c =
                    openssl::ssl::SslConnector::builder(openssl::ssl::SslMethod::tls()).ok()?;
                c.set_verify(openssl::ssl::SslVerifyMode::NONE);
                Box::new(c.build().connect("layercast", tcp).ok()?)
            } else {
                Box::new(tcp)
            };
            write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n{auth}\r\n").ok()?;
            let mut body = String::new();
            s.read_to_string(&mut body).ok()?;
            let (_, b) = body.split_once("\r\n\r\n")?;
            serde_json::from_str(b).ok()
        })
        .join()
        .ok()
        .flatten()
    }
}

fn rand_suffix() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(1);
    (h.finish() % 100_000) as u32
}

impl Drop for Net {
    fn drop(&mut self) {
        for c in &mut self.children {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        }
        let t0 = Instant::now();
        for c in &mut self.children {
            while t0.elapsed() < Duration::from_secs(3) {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in &self.ns {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
        if std::thread::panicking() || std::env::var("LAYERCAST_KEEP_LOGS").is_ok() {
            eprintln!("logs kept in {:?}", self.dir);
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn player_rid(dir: &std::path::Path, tag: &str) -> Option<u64> {
    let text = std::fs::read_to_string(dir.join(tag).join("player.jsonl")).ok()?;
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|l| l["tfmcc"]["rid"].as_u64())
}

/// Starts the server in namespace 0 with one session, SAMs every 500 ms on the announcement
/// group (the set-up the rate and video tests share).
fn spawn_server(net: &mut Net, server: &std::path::Path, session: &str) {
    net.spawn(
        0,
        "server",
        server,
        &[
            // Development mode: the test's private namespaces (docs/security.md §9.8).
            "--dev",
            "--http-addr",
            "10.78.0.1:8080",
            "--interface",
            SERVER,
            "--loop",
            "false",
            "--announce",
            "239.255.76.1:5000",
            "--announce-interval-ms",
            "500",
            "--session",
            session,
        ],
    );
}

#[test]
fn tfmcc_rate_follows_the_slow_receiver() {
    if !prerequisites() {
        return;
    }
    let _serial = one_testbed_at_a_time();
    const SECS: f64 = 60.0;
    let mut net = Net::new();
    let server = bin("layercast-server");
    let player = bin("layercast-player");
    spawn_server(
        &mut net,
        &server,
        r#"{"id":"tf","protocol":"tfmcc","layer_rates_bps":[8000000],"packet_size":1000}"#,
    );
    std::thread::sleep(Duration::from_millis(500));
    // Players outlive the sampling and the forged-report checks after it (with only 2 s of
    // margin a loaded host let them leave before the final read, and the rate fell with them).
    let d = (SECS + 10.0).to_string();
    for (ns, tag, ip) in [(2, "slow", "10.78.0.2"), (3, "fast", "10.78.0.3")] {
        let out = net.dir.join(tag).to_string_lossy().to_string();
        net.spawn(
            ns,
            tag,
            &player,
            &[
                "--announce",
                "239.255.76.1:5000",
                "--controller",
                "tfmcc",
                "--interface",
                ip,
                "--headless",
                "--out",
                &out,
                "--duration",
                &d,
                "--viewer-id",
                tag,
            ],
        );
    }
    // One sample of the server's TFMCC state a second.
    let t0 = Instant::now();
    let mut samples: Vec<(f64, f64, Option<u64>)> = Vec::new();
    while t0.elapsed().as_secs_f64() < SECS {
        std::thread::sleep(Duration::from_secs(1));
        if let Some(s) = net.get("/api/sessions/tf") {
            let tf = &s["tfmcc"];
            samples.push((
                t0.elapsed().as_secs_f64(),
                tf["rate_bps"].as_f64().unwrap_or(f64::NAN),
                tf["clr_rid"].as_u64(),
            ));
        }
    }
    // Junk, forged (receiver id 0) and signed-but-unverifiable reports from the fast
    // receiver's namespace: counted drops, the session keeps running.
    let fb = net.get("/api/sessions/tf").expect("session JSON")["tfmcc"]["feedback_addr"]
        .as_str()
        .expect("feedback_addr")
        .to_string();
    net.in_ns(3, move || {
        let s = std::net::UdpSocket::bind("10.78.0.3:0").unwrap();
        let mut rep = congestion::wire::tfmcc::TfmccReport {
            rid: 0,
            round: 0,
            have_rtt: false,
            have_loss: false,
            leave: false,
            is_clr: false,
            ts_us: 1,
            echo_ts_us: 1,
            x_rate: 1,
            x_recv: 1,
            rtt_us: 1000,
            p_fixed: 0,
            auth: Default::default(),
        };
        for _ in 0..5 {
            s.send_to(b"junk", &fb).unwrap();
            s.send_to(&rep.to_bytes(), &fb).unwrap();
        }
        rep.rid = 77;
        rep.auth.kind = 1;
        rep.auth.tag = vec![0; 16];
        s.send_to(&rep.to_bytes(), &fb).unwrap();
    });
    std::thread::sleep(Duration::from_millis(500));
    let metrics = net.get("/api/sessions/tf").unwrap_or(Value::Null);
    let dropped = &metrics["tfmcc"]["reports_dropped"];
    assert_eq!(dropped["malformed"].as_u64(), Some(5), "{metrics}");
    assert_eq!(dropped["forged"].as_u64(), Some(5), "{metrics}");
    assert_eq!(dropped["auth"].as_u64(), Some(1), "{metrics}");
    assert!(metrics["tfmcc"]["rate_bps"].as_f64().unwrap_or(0.0) > 100_000.0);
    let slow = player_rid(&net.dir, "slow").expect("slow player logged no TFMCC rid");
    let fast = player_rid(&net.dir, "fast").expect("fast player logged no TFMCC rid");
    let last: Vec<_> = samples
        .iter()
        .filter(|s| s.0 >= SECS - 20.0 && s.1.is_finite())
        .collect();
    assert!(last.len() >= 10, "too few samples: {samples:?}");
    let mean = last.iter().map(|s| s.1).sum::<f64>() / last.len() as f64;
    let clr_slow = last.iter().filter(|s| s.2 == Some(slow)).count() as f64 / last.len() as f64;
    let clr_fast = last.iter().filter(|s| s.2 == Some(fast)).count();
    eprintln!("samples (t, rate, clr): {samples:?}");
    eprintln!("final session: {metrics}");
    eprintln!(
        "mean rate {mean:.0} bit/s over the last 20 s; slow CLR {:.0} % (fast CLR {clr_fast} samples); rids slow {slow:08x} fast {fast:08x}",
        clr_slow * 100.0
    );
    let pass = (700_000.0..=1_300_000.0).contains(&mean) && clr_slow >= 0.9;
    testkit::record(
        "issue6/tfmcc-live",
        &format!(
            "1 + 4 Mbit/s receivers: sender {:.0} kbit/s (mean of the last 20 s of 60 s; band 700-1300), slow receiver CLR {:.0} % of samples (>= 90)",
            mean / 1e3,
            clr_slow * 100.0
        ),
        Some(pass),
        "cargo test --release -p layercast-player --test netns_tfmcc",
    );
    assert!(
        (700_000.0..=1_300_000.0).contains(&mean),
        "mean rate {mean} outside 0.7-1.3 Mbit/s"
    );
    assert!(clr_slow >= 0.9, "slow receiver CLR only {clr_slow}");
}

/// The UDP payloads sent to any of `ports` seen on this namespace's interfaces within `for_`
/// (a packet socket: what an attacker with a tap on the honest receiver's link sees). The
/// newest payload per port.
fn capture_reports(ports: &[u16], for_: Duration) -> std::collections::HashMap<u16, Vec<u8>> {
    let mut got = std::collections::HashMap::new();
    // SAFETY: plain socket(2); the fd is closed below.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_DGRAM,
            (libc::ETH_P_ALL as u16).to_be() as i32,
        )
    };
    assert!(
        fd >= 0,
        "packet socket: {}",
        std::io::Error::last_os_error()
    );
    let tv = libc::timeval {
        tv_sec: 0,
        tv_usec: 200_000,
    };
    // SAFETY: a valid timeval of the size given.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as u32,
        );
    }
    let t0 = Instant::now();
    let mut buf = [0u8; 2048];
    while t0.elapsed() < for_ && got.len() < ports.len() {
        // SAFETY: recv into a buffer of the given length.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
        if n <= 0 {
            continue;
        }
        let p = &buf[..n as usize];
        // IPv4, UDP.
        if p.len() < 28 || p[0] >> 4 != 4 || p[9] != 17 {
            continue;
        }
        let ihl = 4 * (p[0] & 15) as usize;
        let Some(udp) = p.get(ihl..) else { continue };
        if udp.len() < 8 {
            continue;
        }
        let dport = u16::from_be_bytes([udp[2], udp[3]]);
        if ports.contains(&dport) {
            got.insert(dport, udp[8..].to_vec());
        }
    }
    // SAFETY: our own fd.
    unsafe { libc::close(fd) };
    got
}

/// Issue 9: forged TFMCC feedback cannot drive the rate down. Two TFMCC sessions with a
/// 1 Mbit/s ceiling on one server: `sec` with `auth_reports: true`, `open` without (the
/// control). One honest player per session in C2 (4 Mbit/s path: both settle at the
/// ceiling). Once both run at the ceiling, an attacker in C1 (namespace 2) on the same LAN, having
/// captured a genuine report of each session on the honest receiver's link, sends for 20 s,
/// five times a second and session: a report in the honest receiver's name claiming
/// 8 kbit/s without a MAC, the same with a guessed MAC (random tag), and a verbatim replay of
/// the captured genuine report (`sec`); the unsigned claim only (`open`). Then a burst of
/// 1000 guessed-MAC reports at once (the per-source bucket: 2 s of the session's packet
/// rate, 275 here).
///
/// Band: `sec`'s mean rate during the attack >= 80 % of the ceiling (it ran at the ceiling
/// before; an accepted forged report would cut it to the 8 kbit/s claimed, the limiter to at
/// most one halving per R_max); every attacker report counted (`auth`, `replayed`,
/// `rate_limited`) and none taken. The control `open` must fall below 50 % of its ceiling,
/// which shows the attack would bite without authentication.
#[test]
fn forged_tfmcc_feedback_cannot_drive_the_rate_down() {
    if !prerequisites() {
        return;
    }
    let _serial = one_testbed_at_a_time();
    const API: &str = "tfmcc-auth-api-token-0001";
    const PLAYER: &str = "tfmcc-auth-player-token-0001";
    const CEIL: f64 = 1_000_000.0;
    const ATTACK_S: f64 = 20.0;
    let mut net = Net::new();
    net.token = Some(PLAYER.to_string());
    // Report keys cross the network: over HTTPS only (F5).
    net.tls = true;
    let server = bin("layercast-server");
    let player = bin("layercast-player");
    let (cert, key) = (
        net.dir.join("cert.pem").to_string_lossy().to_string(),
        net.dir.join("key.pem").to_string_lossy().to_string(),
    );
    let state = net.dir.join("state").to_string_lossy().to_string();
    net.spawn(
        0,
        "server",
        &server,
        &[
            "--http-addr",
            "10.78.0.1:8080",
            "--interface",
            SERVER,
            "--loop",
            "false",
            "--tls",
            "true",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--state-dir",
            &state,
            "--api-token",
            API,
            "--player-token",
            PLAYER,
            "--session",
            r#"{"id":"sec","protocol":"tfmcc","layer_rates_bps":[1000000],"packet_size":1000,"auth_reports":true,"group":"239.255.77.0","port":5004}"#,
            "--session",
            r#"{"id":"open","protocol":"tfmcc","layer_rates_bps":[1000000],"packet_size":1000,"group":"239.255.78.0","port":5104}"#,
        ],
    );
    let t0 = Instant::now();
    let mut fb = std::collections::HashMap::new();
    while t0.elapsed() < Duration::from_secs(10) && fb.len() < 2 {
        std::thread::sleep(Duration::from_millis(200));
        for id in ["sec", "open"] {
            if let Some(a) = net
                .get(&format!("/api/sessions/{id}"))
                .and_then(|s| s["tfmcc"]["feedback_addr"].as_str().map(str::to_string))
            {
                fb.insert(id, a.parse::<std::net::SocketAddrV4>().unwrap());
            }
        }
    }
    assert_eq!(fb.len(), 2, "sessions did not come up");
    let log = std::fs::read_to_string(net.dir.join("server.log")).unwrap_or_default();
    let fp: String = log
        .split("sha256:")
        .nth(1)
        .map(|s| s.trim().chars().take(64).collect())
        .unwrap_or_default();
    assert_eq!(fp.len(), 64, "certificate fingerprint in {log}");
    let d = (ATTACK_S + 60.0).to_string();
    for id in ["sec", "open"] {
        let out = net.dir.join(id).to_string_lossy().to_string();
        let url = format!("https://{SERVER}:8080/api/sessions/{id}/announcement");
        net.spawn(
            3,
            id,
            &player,
            &[
                "--session-url",
                &url,
                "--token",
                PLAYER,
                "--tls-fingerprint",
                &fp,
                "--controller",
                "tfmcc",
                "--interface",
                "10.78.0.3",
                "--headless",
                "--out",
                &out,
                "--duration",
                &d,
                "--viewer-id",
                id,
            ],
        );
    }
    let rate = |net: &Net, id: &str| {
        net.get(&format!("/api/sessions/{id}"))
            .and_then(|s| s["tfmcc"]["rate_bps"].as_f64())
            .unwrap_or(f64::NAN)
    };
    // Warm-up (slow start doubles once per feedback round, of several R_max): until both
    // run at the ceiling, at most 40 s; then one genuine report of each captured.
    let t2 = Instant::now();
    while t2.elapsed() < Duration::from_secs(40)
        && !(rate(&net, "sec") >= 0.9 * CEIL && rate(&net, "open") >= 0.9 * CEIL)
    {
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!("warm-up took {:.1} s", t2.elapsed().as_secs_f64());
    let ports = [fb["sec"].port(), fb["open"].port()];
    let captured = net.in_ns(3, move || capture_reports(&ports, Duration::from_secs(5)));
    let before = (rate(&net, "sec"), rate(&net, "open"));
    assert!(
        before.0 >= 0.8 * CEIL && before.1 >= 0.8 * CEIL,
        "not at the ceiling before the attack: {before:?}"
    );
    let genuine_sec = captured
        .get(&ports[0])
        .expect("no report of sec captured")
        .clone();
    let genuine_open = captured
        .get(&ports[1])
        .expect("no report of open captured")
        .clone();
    let sec_rep = congestion::wire::tfmcc::TfmccReport::parse(&genuine_sec).unwrap();
    assert_eq!(
        sec_rep.auth.kind, 1,
        "the honest player's report is not MACed"
    );
    assert_eq!(sec_rep.auth.tag.len(), 16);
    let open_rep = congestion::wire::tfmcc::TfmccReport::parse(&genuine_open).unwrap();
    assert_eq!(open_rep.auth.kind, 0);
    let dropped0 = net.get("/api/sessions/sec").unwrap()["tfmcc"]["reports_dropped"].clone();
    // The attack.
    let (fb_sec, fb_open) = (fb["sec"], fb["open"]);
    let sec_rep2 = sec_rep.clone();
    let attacker = net.spawn_in_ns(2, move || {
        let s = std::net::UdpSocket::bind("10.78.0.2:0").unwrap();
        let tiny = |r: &congestion::wire::tfmcc::TfmccReport, k: u32| {
            let mut f = r.clone();
            f.ts_us = r.ts_us.wrapping_add(k * 200_000);
            f.x_rate = 1000;
            f.have_loss = true;
            f.p_fixed = u32::MAX / 10;
            f.auth = Default::default();
            f
        };
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut sent = 0u64;
        let t0 = Instant::now();
        let mut k = 1u32;
        while t0.elapsed().as_secs_f64() < ATTACK_S {
            // Without a MAC, with a guessed MAC, a replay.
            let plain = tiny(&sec_rep, k);
            s.send_to(&plain.to_bytes(), fb_sec).unwrap();
            let mut guessed = plain.clone();
            guessed.auth.kind = 1;
            guessed.auth.tag = (0..16)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng as u8
                })
                .collect();
            s.send_to(&guessed.to_bytes(), fb_sec).unwrap();
            s.send_to(&genuine_sec, fb_sec).unwrap();
            sent += 3;
            s.send_to(&tiny(&open_rep, k).to_bytes(), fb_open).unwrap();
            k += 1;
            std::thread::sleep(Duration::from_millis(200));
        }
        sent
    });
    let t1 = Instant::now();
    let mut during: Vec<(f64, f64)> = Vec::new();
    while t1.elapsed().as_secs_f64() < ATTACK_S - 0.5 {
        std::thread::sleep(Duration::from_secs(1));
        during.push((rate(&net, "sec"), rate(&net, "open")));
    }
    let sent = attacker.join().expect("attacker");
    std::thread::sleep(Duration::from_millis(500));
    let mid = net.get("/api/sessions/sec").unwrap()["tfmcc"].clone();
    // The burst.
    net.in_ns(2, move || {
        let s = std::net::UdpSocket::bind("10.78.0.2:0").unwrap();
        let mut r = sec_rep2;
        r.auth.tag = vec![0x5a; 16];
        for k in 0..1000u32 {
            r.ts_us = r.ts_us.wrapping_add(k);
            s.send_to(&r.to_bytes(), fb_sec).unwrap();
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    let end = net.get("/api/sessions/sec").unwrap()["tfmcc"].clone();
    let c = |v: &Value, k: &str| v["reports_dropped"][k].as_u64().unwrap_or(0);
    let c0 = |k: &str| dropped0[k].as_u64().unwrap_or(0);
    let (auth, replayed) = (
        c(&mid, "auth") - c0("auth"),
        c(&mid, "replayed") - c0("replayed"),
    );
    let limited = c(&mid, "rate_limited") - c0("rate_limited");
    let burst_auth = c(&end, "auth") - c(&mid, "auth");
    let burst_limited = c(&end, "rate_limited") - c(&mid, "rate_limited");
    let ok: Vec<_> = during
        .iter()
        .filter(|r| r.0.is_finite() && r.1.is_finite())
        .collect();
    assert!(ok.len() >= 10, "too few samples: {during:?}");
    let mean_sec = ok.iter().map(|r| r.0).sum::<f64>() / ok.len() as f64;
    let mean_open = ok.iter().map(|r| r.1).sum::<f64>() / ok.len() as f64;
    let min_sec = ok.iter().map(|r| r.0).fold(f64::INFINITY, f64::min);
    eprintln!("before {before:?}; during (sec, open): {during:?}");
    eprintln!("attacker sent {sent} to sec; dropped: auth {auth}, replayed {replayed}, rate_limited {limited}; burst: auth {burst_auth}, rate_limited {burst_limited}");
    eprintln!("sec at the end: {end}");
    let counted = auth + replayed + limited;
    let pass = mean_sec >= 0.8 * CEIL
        && mean_open < 0.5 * CEIL
        && counted == sent
        && auth > 0
        && replayed > 0
        && burst_auth + burst_limited <= 1000
        && burst_limited > 0;
    testkit::record(
        "issue9/tfmcc-forged-feedback",
        &format!(
            "20 s of forged reports (no MAC / guessed MAC / replay, 8 kbit/s claims) + 1000-report burst: auth session {:.0} kbit/s mean (min {:.0}) of a {:.0} kbit/s ceiling (band >= 80 %); unauthenticated control {:.0} kbit/s (< 50 %); {sent} forged counted {counted} (auth {auth}, replayed {replayed}, rate_limited {limited}); burst auth {burst_auth} + rate_limited {burst_limited}",
            mean_sec / 1e3,
            min_sec / 1e3,
            CEIL / 1e3,
            mean_open / 1e3,
        ),
        Some(pass),
        "cargo test --release -p layercast-player --test netns_tfmcc forged",
    );
    assert!(
        mean_open < 0.5 * CEIL,
        "control not hurt: open mean {mean_open}"
    );
    assert!(
        mean_sec >= 0.8 * CEIL,
        "sec mean {mean_sec} below 80 % of the ceiling"
    );
    assert_eq!(counted, sent, "every forged report counted once");
    assert!(replayed > 0 && auth > 0, "auth {auth} replayed {replayed}");
    // Part of a back-to-back burst of 1000 can overflow the socket's receive buffer in the
    // kernel (never seen by the server); what arrives is counted once.
    assert!(burst_auth + burst_limited <= 1000);
    assert!(
        burst_auth <= 400,
        "MACs checked beyond the budget: {burst_auth}"
    );
    assert!(burst_limited > 0, "the per-source bucket never bit");
}

fn unix_now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Spec check tfmcc/E17 (tfrc-tfmcc-pcc.md §7.3, docs/protocols/tfmcc.md "Live video"): a
/// TFMCC session with real video (640x360 L3T3 test pattern at 15 fps, ladder total
/// 1550 kbit/s) and one player behind the 1 Mbit/s tbf; a TCP Reno flow (iperf3) from the
/// sender's namespace to the player's starts at t = 60 s as the spec says (shorter warm-ups
/// measured the sender still recovering from its slow-start loss: 20 and 30 s gave a pre-TCP
/// mean of 0.77 and 0.44 Mbit/s) and runs 30 s.
///
/// Measured from the server's switch log and 4 samples a second of its TFMCC state:
/// the rate before TCP (mean of the 20 s before it, "≈ 1 Mbit/s": the band of the same
/// quantity in `tfmcc_rate_follows_the_slow_receiver` above, 0.7-1.3 Mbit/s, from E4; TFMCC
/// alone on this path dips after each of its loss events, two runs measured 0.79 and 0.97), the rate with TCP (mean over TCP start + 10..30 s, the
/// band "≈ 500 kbit/s" taken as 300-700 kbit/s), the reaction time (TCP start to the first
/// encoder-target switch whose target, expressed as the wire rate it serves, is within
/// ±25 % of that mean; ≤ 5 s), the smallest gap between two switches (≥ 2 s), and the video:
/// the player decodes pictures throughout with no decoder error.
///
/// Not in `make test`: timing-sensitive (the sender's loop and encoder thread on a loaded
/// host). With the target taken from X at the switch instant, runs measured 4.8, 1.0, 2.8
/// and 9.3 s (X swinging ±40 % under TCP, sampled every 2 s); with the 3-s mean of X
/// (session 8, `TargetFollower`, docs/protocols/tfmcc.md "E17: why the target follows a 3-s
/// mean") three runs at load 4–9 measured 3.5, 3.4 and 3.4 s. The polled rate trace is
/// printed for replay in the follower's unit tests. Run it as the tfmcc/E17 measurement:
/// `cargo test --release -p layercast-player --test netns_tfmcc tfmcc_video -- --ignored`.
#[test]
#[ignore = "tfmcc/E17 measurement, timing-sensitive: run with --ignored (see doc comment)"]
fn tfmcc_video_encoder_follows_x_send_when_tcp_starts() {
    if !prerequisites() {
        return;
    }
    if Command::new("iperf3").arg("--version").output().is_err() {
        eprintln!("skipped: iperf3 not installed (scripts/setup.sh)");
        return;
    }
    let _serial = one_testbed_at_a_time();
    const WARM: f64 = 60.0;
    const TCP: f64 = 30.0;
    let mut net = Net::new();
    let server = bin("layercast-server");
    let player = bin("layercast-player");
    spawn_server(
        &mut net,
        &server,
        r#"{"id":"tv","protocol":"tfmcc","source":"testpattern","packet_size":1200,"video":{"width":640,"height":360,"fps":15,"kbps_scale":1.0,"keyframe_interval_s":2}}"#,
    );
    net.spawn(
        2,
        "iperf3-server",
        std::path::Path::new("iperf3"),
        &["-s", "-1", "-B", "10.78.0.2"],
    );
    std::thread::sleep(Duration::from_millis(500));
    let out = net.dir.join("viewer").to_string_lossy().to_string();
    let d = (WARM + TCP + 5.0).to_string();
    net.spawn(
        2,
        "viewer",
        &player,
        &[
            "--announce",
            "239.255.76.1:5000",
            "--controller",
            "tfmcc",
            "--interface",
            "10.78.0.2",
            "--headless",
            "--out",
            &out,
            "--no-pictures",
            "--duration",
            &d,
            "--viewer-id",
            "viewer",
        ],
    );
    let t0 = Instant::now();
    let mut tcp_start: Option<f64> = None;
    // (unix s, rate = min(X, ceiling), encoder target) every 250 ms.
    let mut samples: Vec<(f64, f64, f64)> = Vec::new();
    while t0.elapsed().as_secs_f64() < WARM + TCP {
        if tcp_start.is_none() && t0.elapsed().as_secs_f64() >= WARM {
            tcp_start = Some(unix_now_s());
            let secs = (TCP + 2.0).to_string();
            net.spawn(
                0,
                "iperf3-client",
                std::path::Path::new("iperf3"),
                &["-c", "10.78.0.2", "-B", SERVER, "-C", "reno", "-t", &secs],
            );
        }
        std::thread::sleep(Duration::from_millis(250));
        if let Some(s) = net.get("/api/sessions/tv") {
            let tf = &s["tfmcc"];
            samples.push((
                unix_now_s(),
                tf["rate_bps"].as_f64().unwrap_or(f64::NAN),
                tf["encoder"]["target_bps"].as_f64().unwrap_or(f64::NAN),
            ));
        }
    }
    let session = net.get("/api/sessions/tv").expect("session JSON");
    let tcp_start = tcp_start.expect("TCP started");
    let enc = &session["tfmcc"]["encoder"];
    let log: Vec<(f64, f64, f64)> = enc["log"]
        .as_array()
        .expect("encoder switch log")
        .iter()
        .map(|e| {
            (
                e["unix_s"].as_f64().unwrap_or(0.0),
                e["target_bps"].as_f64().unwrap_or(0.0),
                e["rate_bps"].as_f64().unwrap_or(0.0),
            )
        })
        .collect();
    // The target expressed as the wire rate it serves (the follower's media share and
    // headroom: server/src/tfmcc.rs TargetFollower).
    let per_wire = (1200.0 - 64.0 - 8.0) / 1200.0 * 0.9;
    let mean = |a: f64, b: f64| {
        let v: Vec<f64> = samples
            .iter()
            .filter(|s| s.0 >= a && s.0 < b && s.1.is_finite())
            .map(|s| s.1)
            .collect();
        (v.iter().sum::<f64>() / v.len().max(1) as f64, v.len())
    };
    let (before, n_before) = mean(tcp_start - 20.0, tcp_start);
    let (with_tcp, n_tcp) = mean(tcp_start + 10.0, tcp_start + TCP);
    let reaction = log
        .iter()
        .filter(|e| e.0 >= tcp_start)
        .find(|e| (e.1 / per_wire - with_tcp).abs() <= 0.25 * with_tcp)
        .map(|e| e.0 - tcp_start);
    let x_reaction = samples
        .iter()
        .filter(|s| s.0 >= tcp_start)
        .find(|s| (s.1 - with_tcp).abs() <= 0.25 * with_tcp)
        .map(|s| s.0 - tcp_start);
    let min_gap = log
        .windows(2)
        .map(|w| w[1].0 - w[0].0)
        .fold(f64::INFINITY, f64::min);
    let target_before = log
        .iter()
        .rev()
        .find(|e| e.0 < tcp_start)
        .map_or(f64::NAN, |e| e.1);
    // The player: pictures decoded in the last 10 s of TCP, decoder errors over the run.
    let text =
        std::fs::read_to_string(net.dir.join("viewer").join("player.jsonl")).unwrap_or_default();
    let lines: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|l: &Value| l["video"].is_object())
        .collect();
    let decoded_at = |secs: f64| {
        lines
            .iter()
            .filter(|l| l["t"].as_f64().is_some_and(|t| t <= secs))
            .filter_map(|l| l["video"]["decoded"].as_u64())
            .max()
            .unwrap_or(0)
    };
    let decoded_tcp = decoded_at(tcp_start + TCP) - decoded_at(tcp_start + TCP - 10.0);
    let decoder_errors = lines
        .iter()
        .filter_map(|l| l["video"]["decoder_errors"].as_u64())
        .max()
        .unwrap_or(u64::MAX);
    let size = lines
        .last()
        .map(|l| (l["video"]["width"].clone(), l["video"]["height"].clone()));
    eprintln!("switch log (unix s, target bit/s, rate bit/s): {log:?}");
    // The rate trace around the TCP start (s from TCP start, kbit/s): what the follower saw.
    let trace: Vec<(f64, f64)> = samples
        .iter()
        .filter(|s| s.0 >= tcp_start - 10.0 && s.1.is_finite())
        .map(|s| {
            (
                ((s.0 - tcp_start) * 100.0).round() / 100.0,
                (s.1 / 1e3).round(),
            )
        })
        .collect();
    eprintln!("rate trace (s from TCP start, kbit/s): {trace:?}");
    eprintln!(
        "rate before TCP {before:.0} ({n_before} samples), with TCP {with_tcp:.0} ({n_tcp}); target before {target_before:.0}; reaction: target {reaction:?} s, X {x_reaction:?} s; min switch gap {min_gap:.2} s; decoded in the last 10 s {decoded_tcp}, decoder errors {decoder_errors}, size {size:?}; queue {} ms",
        enc["queue_ms"]
    );
    let pass = reaction.is_some_and(|r| r <= 5.0)
        && min_gap >= 2.0
        && (300e3..=700e3).contains(&with_tcp)
        && (700e3..=1300e3).contains(&before);
    testkit::record(
        "tfmcc/E17",
        &format!(
            "1 Mbit/s tbf, video TFMCC, TCP Reno at t = 60 s: X_send {:.0} -> {:.0} kbit/s, encoder target {:.0} -> followed within {} (<= 5 s; X itself {}), min gap between target switches {:.1} s (>= 2 s); {} pictures decoded in the last 10 s of TCP, {} decoder errors",
            before / 1e3,
            with_tcp / 1e3,
            target_before / 1e3,
            reaction.map_or("never".into(), |r| format!("{r:.1} s")),
            x_reaction.map_or("never".into(), |r| format!("{r:.1} s")),
            min_gap,
            decoded_tcp,
            decoder_errors
        ),
        Some(pass),
        "cargo test --release -p layercast-player --test netns_tfmcc tfmcc_video",
    );
    assert!(decoder_errors == 0, "decoder errors: {decoder_errors}");
    assert!(decoded_tcp >= 50, "only {decoded_tcp} pictures in 10 s");
    assert!(min_gap >= 2.0, "target switches {min_gap:.2} s apart");
    assert!(
        (700e3..=1300e3).contains(&before),
        "rate before TCP {before:.0}"
    );
    assert!(
        (300e3..=700e3).contains(&with_tcp),
        "rate with TCP {with_tcp:.0}"
    );
    assert!(
        reaction.is_some_and(|r| r <= 5.0),
        "encoder target reaction {reaction:?}"
    );
}
