//! Every session has a working feedback port of its own: sessions without configured ports get
//! port ranges of their own (so layer 0's port + 1 is theirs), and a session whose configured
//! port collides with another's gets a free feedback port that its SAM announces. For each
//! session the test reads the signed SAM as a player does, sends a key-picture request to the
//! announced feedback address, and reads the session's `layercast_feedback_datagrams_total`.
//! The server runs in a private network namespace whose only interface is `lo`; without root
//! the test is skipped.

use congestion::wire::sam;
use proto::wire::request::{MediaRequest, RequestKind};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpStream, UdpSocket};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use testkit::netns::{in_ns, Net};

mod common;
use common::{loopback_ns, root_or_skip, server_in};

const HTTP: &str = "127.0.0.1:18091";

struct Server {
    child: Child,
    /// Owns the namespace; dropped after the child is reaped.
    _net: Net,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One GET; the status and the raw body.
fn get(path: &str) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(HTTP).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut b = Vec::new();
    let _ = s.read_to_end(&mut b);
    let end = b.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(0);
    let head = String::from_utf8_lossy(&b[..end]);
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, b[(end + 4).min(b.len())..].to_vec())
}

/// The value of `name{session="id"}` in the exposition.
fn metric(text: &str, name: &str, id: &str) -> Option<u64> {
    let key = format!("{name}{{session=\"{id}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&key))
        .and_then(|v| v.trim().parse().ok())
}

/// Starts a server with `sessions` (JSON, one `--session` each) and checks every one of
/// `ids`: one datagram sent to its announced feedback port is counted by that session alone.
/// Returns the feedback ports seen.
fn check(tag: &str, sessions: &[&str], ids: &[&str]) -> Vec<u16> {
    let (net, ns) = loopback_ns(tag);
    let mut cmd = server_in(&ns);
    cmd.args(["--http-addr", HTTP, "--interface", "127.0.0.1"])
        // Ports, not access control, are under test: no state directory, plain HTTP.
        .arg("--dev");
    for s in sessions {
        cmd.args(["--session", s]);
    }
    let mut srv = Server {
        child: cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        _net: net,
    };
    let ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
    let r = in_ns(&ns, move || {
        let t0 = Instant::now();
        while TcpStream::connect(HTTP).is_err() {
            if t0.elapsed() > Duration::from_secs(10) {
                return Err("server did not come up".to_string());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut ports = Vec::new();
        for id in &ids {
            let (code, body) = get(&format!("/api/sessions/{id}/announcement?format=sam"));
            if code != 200 {
                return Err(format!("{id}: announcement {code}"));
            }
            let info = sam::decode(&body).map_err(|e| format!("{id}: {e}"))?.info;
            let port = info.feedback_port_or_default().unwrap();
            ports.push(port);
            let req = MediaRequest::new(RequestKind::KeyPicture, info.session_id, 0, 1);
            udp.send_to(&req.to_bytes(), SocketAddrV4::new(info.sender, port))
                .unwrap();
        }
        // Each session counts exactly its own datagram.
        let t0 = Instant::now();
        loop {
            let (_, m) = get("/metrics");
            let m = String::from_utf8_lossy(&m).into_owned();
            let got: Vec<Option<u64>> = ids
                .iter()
                .map(|id| metric(&m, "layercast_feedback_datagrams_total", id))
                .collect();
            if got.iter().all(|&g| g == Some(1)) {
                return Ok(ports);
            }
            if t0.elapsed() > Duration::from_secs(3) {
                return Err(format!(
                    "feedback datagrams per session {ids:?}: {got:?} (ports {ports:?})"
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let _ = srv.child.kill();
    let _ = srv.child.wait();
    let mut log = String::new();
    if let Some(mut e) = srv.child.stderr.take() {
        let _ = e.read_to_string(&mut log);
    }
    match r {
        Ok(p) => p,
        Err(e) => panic!("{tag}: {e}\nserver log:\n{log}"),
    }
}

#[test]
fn sessions_without_ports_each_get_a_feedback_port() {
    if !root_or_skip() {
        return;
    }
    let two = check(
        "fb2",
        &[
            r#"{"name":"a","layers":3,"layer_rate_bps":20000}"#,
            r#"{"name":"b","layers":2,"layer_rate_bps":20000}"#,
        ],
        &["a", "b"],
    );
    assert_eq!(two.iter().collect::<BTreeSet<_>>().len(), 2, "{two:?}");
    // Three, the last a TFMCC session (which needs its feedback socket to start at all).
    let three = check(
        "fb3",
        &[
            r#"{"name":"a","layers":3,"layer_rate_bps":20000}"#,
            r#"{"name":"b","protocol":"plm","layers":2,"layer_rate_bps":20000}"#,
            r#"{"name":"c","protocol":"tfmcc","layers":2,"layer_rate_bps":50000}"#,
        ],
        &["a", "b", "c"],
    );
    assert_eq!(three.iter().collect::<BTreeSet<_>>().len(), 3, "{three:?}");
}

#[test]
fn a_colliding_configured_port_gets_an_announced_feedback_port() {
    if !root_or_skip() {
        return;
    }
    // "b" is configured on "a"'s ports (allowed: other groups): its feedback socket cannot
    // have 6001, so it takes another port and announces it in the SAM.
    let p = check(
        "fbx",
        &[
            r#"{"name":"a","layers":2,"layer_rate_bps":20000,"port":6000}"#,
            r#"{"name":"b","protocol":"tfmcc","layers":2,"layer_rate_bps":50000,"port":6000}"#,
        ],
        &["a", "b"],
    );
    assert_eq!(p[0], 6001);
    assert_ne!(p[1], 6001);
}
