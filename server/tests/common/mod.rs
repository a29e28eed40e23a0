//! Pieces the server's integration tests share: the loopback namespace a test server runs in,
//! the command that starts it there (each test gives its own flags), and a UDP viewer report.
//! Every test target includes this module and uses part of it.
#![allow(dead_code)]

use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};
use testkit::netns::Net;

/// Network namespaces need root: false, and the test says it is skipped, without it.
pub fn root_or_skip() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root for a network namespace");
        return false;
    }
    true
}

/// A private network namespace (`tag` in its name) whose only interface is `lo`, with
/// multicast routed to it: what the server sends goes nowhere else. The `Net` owns the
/// namespace; drop it after the processes started in it are reaped.
pub fn loopback_ns(tag: &str) -> (Net, String) {
    let mut net = Net::new();
    let ns = net.ns(tag).unwrap();
    net.ip(&ns, &["route", "add", "224.0.0.0/4", "dev", "lo"])
        .unwrap();
    (net, ns)
}

/// `layercast-server` inside namespace `ns` (`ip netns exec`), without flags.
pub fn server_in(ns: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_layercast-server")]);
    c
}

/// Waits until 127.0.0.1:`port` accepts connections; panics after `within`.
pub fn wait_port(port: u16, within: Duration) {
    let t0 = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t0.elapsed() < within, "server did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One UDP viewer report (`docs/protocols/reports.md`), tagged with `key`:
/// `LCR1 | flags | spatial 0 | rid | ts_us | len | session | JSON | tag`.
pub fn report(
    key: &security::auth::ReceiverKey,
    flags: u8,
    ts: u32,
    session: &str,
    json: &str,
) -> Vec<u8> {
    let mut b = b"LCR1".to_vec();
    b.extend_from_slice(&[flags, 0]);
    b.extend_from_slice(&key.rid().to_be_bytes());
    b.extend_from_slice(&ts.to_be_bytes());
    b.push(session.len() as u8);
    b.extend_from_slice(session.as_bytes());
    b.extend_from_slice(json.as_bytes());
    let tag = key.tag(&b);
    b.extend_from_slice(&tag);
    b
}
