//! `layercast-linkemu keep-awake`: one SCHED_IDLE spinner per CPU until SIGTERM, then a clean
//! exit (the testbed's `keepAwake` beds start it and kill it at teardown).

use std::process::Command;
use std::time::{Duration, Instant};

/// Scheduling policy of every thread of `pid` named `awake*` (field 41 of
/// /proc/PID/task/TID/stat; 5 = SCHED_IDLE).
fn spinner_policies(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("awake") {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // Fields after the ")" that closes comm start at field 3.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        if let Some(p) = rest.split_whitespace().nth(41 - 3) {
            out.push(p.parse().unwrap_or(u32::MAX));
        }
    }
    out
}

#[test]
fn keep_awake_spins_at_idle_priority_and_stops_on_sigterm() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_layercast-linkemu"))
        .arg("keep-awake")
        .spawn()
        .expect("spawn layercast-linkemu keep-awake");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut policies = Vec::new();
    while Instant::now() < deadline {
        policies = spinner_policies(child.id());
        if policies.len() == cpus {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(policies.len(), cpus, "one spinner per CPU: {policies:?}");
    assert!(
        policies.iter().all(|&p| p == 5),
        "all SCHED_IDLE (5): {policies:?}"
    );
    let status = status.expect("keep-awake stops within 5 s of SIGTERM");
    assert!(status.success(), "clean exit after SIGTERM: {status:?}");
}
