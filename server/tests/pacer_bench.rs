//! Benchmark (not a pass/fail test; `#[ignore]`d so the suite stays fast): sender CPU per
//! 10 Mbit/s of paced output and the bunch start error, in a private network namespace whose
//! only interface is loopback (multicast routed to `lo`, nothing leaves the namespace).
//!
//! `cargo test -p layercast-server --release --test pacer_bench -- --ignored --nocapture`

use std::time::{Duration, Instant};

mod common;
use common::{loopback_ns, root_or_skip, server_in};

fn cpu_ticks(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = s.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat (12 and 13 after the comm field).
    f.get(11).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0)
}

#[test]
#[ignore]
fn sender_cpu_and_bunch_timing_at_10mbit() {
    if !root_or_skip() {
        return;
    }
    let (_net, ns) = loopback_ns("bench");
    let secs = 10.0;
    // 10 layers x 1 Mbit/s, 512-byte packets in pairs: 2441 packets/s, 1221 bunches/s.
    let session =
        r#"{"name":"bench","layers":10,"layer_rate_bps":1000000,"packet_size":512,"bunch_len":2}"#;
    let child = server_in(&ns)
        // Development mode: a private namespace on loopback (docs/security.md §9.8).
        .arg("--dev")
        .args([
            "--http-addr",
            "127.0.0.1:18099",
            "--interface",
            "127.0.0.1",
            "--session",
            session,
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(1000));
    let (t0, c0) = (Instant::now(), cpu_ticks(pid));
    std::thread::sleep(Duration::from_secs_f64(secs));
    let (dt, c1) = (t0.elapsed().as_secs_f64(), cpu_ticks(pid));
    // SAFETY: signal to our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let cpu = (c1 - c0) as f64 / hz / dt;
    let line = log
        .lines()
        .find(|l| l.contains("bunch start error"))
        .unwrap_or("")
        .to_string();
    eprintln!(
        "sender CPU: {:.1}% of one core per 10 Mbit/s paced output\n{line}",
        cpu * 100.0
    );
    let p99: Option<f64> = line
        .split("p99 ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok());
    testkit::record(
        "issue6/bench-sender-cpu",
        &format!(
            "{:.1}% of one core per 10 Mbit/s (512-byte pairs, 2441 pkt/s, release build)",
            cpu * 100.0
        ),
        None,
        "cargo test -p layercast-server --release --test pacer_bench -- --ignored",
    );
    if let Some(p) = p99 {
        testkit::record(
            "issue6/bench-bunch-timing",
            &format!(
                "bunch start error p99 <= {p} us (pacer thread, histogram bucket bound); {line}"
            ),
            Some(p <= 50.0),
            "cargo test -p layercast-server --release --test pacer_bench -- --ignored",
        );
    }
    assert!(cpu > 0.0 && line.contains("p99"), "{log}");
}
