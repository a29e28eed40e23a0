//! The I/O shell: one thread per direction (read ingress socket, drive the sans-IO
//! [`Direction`], write egress socket, sleep with `ppoll` until the next event) and a control
//! thread serving the Unix socket.

use crate::config::LinkParams;
use crate::ctl::{self, Request, Which};
use crate::hist::{Histogram, Summary};
use crate::link::{Counters, Direction, GroupStats};
use crate::sock::{RawSock, Recv};
use crate::Error;
use congestion::Time;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// Longest sleep, so control messages and stop requests are seen promptly.
const MAX_SLEEP_NS: u64 = 5_000_000;
/// Frames read per loop before servicing the link (keeps release timing honest under load).
const RX_BATCH: usize = 64;

/// Monotonic clock in ns.
pub fn mono_ns() -> u64 {
    clock(libc::CLOCK_MONOTONIC)
}

fn clock(id: libc::clockid_t) -> u64 {
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: valid timespec pointer.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Wall clock, ns since the Unix epoch.
pub fn wall_ns() -> u64 {
    clock(libc::CLOCK_REALTIME)
}

/// Wall clock minus monotonic clock, ns: added to link times to report wall-clock times that
/// other processes (players, iperf3) can be compared with.
pub fn wall_offset_ns() -> i128 {
    clock(libc::CLOCK_REALTIME) as i128 - clock(libc::CLOCK_MONOTONIC) as i128
}

/// What a direction reports.
#[derive(Clone, Debug, Serialize)]
pub struct DirSnapshot {
    /// Parameters in force.
    pub params: LinkParams,
    /// Counters.
    pub counters: Counters,
    /// Lateness of each frame's actual send against its scheduled release.
    pub release_error: Summary,
    /// Per multicast group facts (wall-clock ns).
    pub groups: BTreeMap<String, GroupStats>,
}

enum Msg {
    Set(Box<crate::config::LinkUpdate>, Sender<Result<(), String>>),
    Get(Sender<DirSnapshot>),
}

/// Command-line options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Interface a.
    pub if_a: String,
    /// Interface b.
    pub if_b: String,
    /// Parameters a → b.
    pub ab: LinkParams,
    /// Parameters b → a.
    pub ba: LinkParams,
    /// Control socket path.
    pub ctl: Option<PathBuf>,
    /// Random seed (directions use seed and seed+1).
    pub seed: u64,
    /// Where to write the final snapshot (JSON) on exit.
    pub stats_out: Option<PathBuf>,
    /// SCHED_FIFO priority for the two wire threads (0 = normal scheduling). Opt-in: on a
    /// loaded machine it takes the 99th-percentile release error from milliseconds to tens of
    /// microseconds, at the price of pre-empting everything else while frames flow.
    pub rt_prio: i32,
    /// Keep every CPU busy with a lowest-priority (SCHED_IDLE) spinner while the emulator runs,
    /// so no vCPU ever halts. Opt-in, for tests that need pair timing on an otherwise idle VM:
    /// there the vCPU of a sleeping wire thread halts, and when its timer fires the hypervisor
    /// may take milliseconds to run it again (fresh-clone CI runs, nothing else running:
    /// release p99 2.6 and 3.5 ms, against about 0.1 ms at load 12). A spinner yields to
    /// every other task at once (SCHED_IDLE), so it only fills time the CPU would idle; it
    /// does burn that time.
    pub keep_awake: bool,
}

/// Spins at SCHED_IDLE priority until `stop` (see [`Options::keep_awake`]).
fn keep_awake_spinner(stop: Arc<AtomicBool>) {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: valid sched_param for the calling thread (pid 0).
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &p) } != 0 {
        return; // never spin at normal priority
    }
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..1000 {
            std::hint::spin_loop();
        }
    }
}

/// Starts one SCHED_IDLE spinner per CPU ([`Options::keep_awake`]) that runs until `stop`.
/// Also used alone by `layercast-linkemu keep-awake`, for beds whose timing-critical part is
/// a kernel qdisc (tbf) rather than this emulator: on a VM an idle vCPU halts and the
/// hypervisor takes milliseconds to wake it for the qdisc's timer, which splits packet pairs.
pub fn spawn_keep_awake(stop: &Arc<AtomicBool>) -> Result<(), Error> {
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    for i in 0..cpus {
        let st = stop.clone();
        thread::Builder::new()
            .name(format!("awake{i}"))
            .spawn(move || keep_awake_spinner(st))
            .map_err(|e| Error::Sys {
                what: "spawn".into(),
                source: e,
            })?;
    }
    Ok(())
}

fn set_rt(prio: i32) -> Result<(), Error> {
    if prio <= 0 {
        return Ok(());
    }
    let p = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: valid sched_param for the calling thread (pid 0).
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } != 0 {
        return Err(Error::last_os("sched_setscheduler(SCHED_FIFO)"));
    }
    Ok(())
}

fn set_timer_slack() {
    // 1 ns slack: ppoll wakes when asked rather than up to 50 µs later.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

fn snapshot(d: &Direction, h: &Histogram, off: i128) -> DirSnapshot {
    DirSnapshot {
        params: d.params().clone(),
        counters: d.counters(),
        release_error: h.summary(),
        groups: d.groups(off),
    }
}

fn worker(
    mut d: Direction,
    rx: Arc<RawSock>,
    tx: Arc<RawSock>,
    inbox: Receiver<Msg>,
    stop: Arc<AtomicBool>,
    rt_prio: i32,
) -> Result<DirSnapshot, Error> {
    set_timer_slack();
    set_rt(rt_prio)?;
    let off = wall_offset_ns();
    let mut hist = Histogram::default();
    let mut buf = vec![0u8; 65_536];
    let mut last_stats = mono_ns();
    let _ = rx.kernel_drops(); // reset
    while !stop.load(Ordering::Relaxed) {
        while let Ok(m) = inbox.try_recv() {
            match m {
                Msg::Set(u, reply) => {
                    let r = d.update(Time(mono_ns()), &u).map_err(|e| e.to_string());
                    let _ = reply.send(r);
                }
                Msg::Get(reply) => {
                    let _ = reply.send(snapshot(&d, &hist, off));
                }
            }
        }
        for _ in 0..RX_BATCH {
            match rx.recv(&mut buf)? {
                Recv::Frame { len, truncated } => {
                    if truncated {
                        d.add_shell_drops(1, 0);
                        continue;
                    }
                    d.arrive(Time(mono_ns()), buf[..len].to_vec());
                }
                Recv::Empty => break,
            }
        }
        let now = Time(mono_ns());
        d.service(now);
        let mut send_fail = 0;
        while let Some((at, frame)) = d.poll_release(now) {
            if !tx.send(&frame) {
                send_fail += 1;
            }
            hist.record(mono_ns().saturating_sub(at.as_nanos()) / 1000);
        }
        let t = mono_ns();
        let kdrops = if t - last_stats > 100_000_000 {
            last_stats = t;
            rx.kernel_drops()
        } else {
            0
        };
        if send_fail > 0 || kdrops > 0 {
            d.add_shell_drops(send_fail, kdrops);
        }
        let wake = d.next_wakeup().as_nanos();
        let t = mono_ns();
        let sleep = wake.saturating_sub(t).min(MAX_SLEEP_NS);
        if sleep == 0 {
            continue;
        }
        let mut pfd = libc::pollfd {
            fd: rx.raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: (sleep / 1_000_000_000) as libc::time_t,
            tv_nsec: (sleep % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: one valid pollfd, a valid timespec, no signal mask change.
        unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    }
    d.add_shell_drops(0, rx.kernel_drops());
    Ok(snapshot(&d, &hist, off))
}

fn handle_conn(
    s: UnixStream,
    ab: Sender<Msg>,
    ba: Sender<Msg>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<()> {
    let mut w = s.try_clone()?;
    for line in BufReader::new(s).lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let reply = match ctl::parse(&line) {
            Err(e) => serde_json::json!({"ok": false, "error": e.to_string()}),
            Ok(Request::Stop) => {
                stop.store(true, Ordering::Relaxed);
                serde_json::json!({"ok": true})
            }
            Ok(Request::Get) => {
                let get = |tx: &Sender<Msg>| {
                    let (rtx, rrx) = mpsc::channel();
                    tx.send(Msg::Get(rtx)).ok()?;
                    rrx.recv_timeout(Duration::from_secs(2)).ok()
                };
                match (get(&ab), get(&ba)) {
                    (Some(a), Some(b)) => serde_json::json!({
                        "ok": true,
                        "time_ns": clock(libc::CLOCK_REALTIME),
                        "ab": a, "ba": b
                    }),
                    _ => serde_json::json!({"ok": false, "error": "worker stopped"}),
                }
            }
            Ok(Request::Set(which, u)) => {
                let targets: Vec<&Sender<Msg>> = match which {
                    Which::Ab => vec![&ab],
                    Which::Ba => vec![&ba],
                    Which::Both => vec![&ab, &ba],
                };
                let mut err = None;
                for t in targets {
                    let (rtx, rrx) = mpsc::channel();
                    let r = t
                        .send(Msg::Set(Box::new((*u).clone()), rtx))
                        .map_err(|_| "worker stopped".to_string())
                        .and_then(|_| {
                            rrx.recv_timeout(Duration::from_secs(2))
                                .map_err(|_| "worker stopped".to_string())
                        })
                        .and_then(|r| r);
                    if let Err(e) = r {
                        err = Some(e);
                    }
                }
                match err {
                    None => serde_json::json!({"ok": true}),
                    Some(e) => serde_json::json!({"ok": false, "error": e}),
                }
            }
        };
        w.write_all(reply.to_string().as_bytes())?;
        w.write_all(b"\n")?;
    }
    Ok(())
}

/// Runs the emulator until `stop` is set (signal or control `stop`). Returns the final
/// snapshots (a→b, b→a).
pub fn run(opts: Options, stop: Arc<AtomicBool>) -> Result<(DirSnapshot, DirSnapshot), Error> {
    let a = Arc::new(RawSock::open(&opts.if_a)?);
    let b = Arc::new(RawSock::open(&opts.if_b)?);
    let (ab_tx, ab_rx) = mpsc::channel();
    let (ba_tx, ba_rx) = mpsc::channel();

    if let Some(path) = &opts.ctl {
        let _ = std::fs::remove_file(path);
        let l = UnixListener::bind(path).map_err(|e| Error::Sys {
            what: format!("bind control socket {}", path.display()),
            source: e,
        })?;
        l.set_nonblocking(true).map_err(|e| Error::Sys {
            what: "control socket".into(),
            source: e,
        })?;
        let (ab, ba, st) = (ab_tx.clone(), ba_tx.clone(), stop.clone());
        thread::Builder::new()
            .name("ctl".into())
            .spawn(move || {
                while !st.load(Ordering::Relaxed) {
                    match l.accept() {
                        Ok((s, _)) => {
                            let _ = s.set_nonblocking(false);
                            let (ab, ba, st) = (ab.clone(), ba.clone(), st.clone());
                            let _ = thread::Builder::new()
                                .name("ctl-conn".into())
                                .spawn(move || handle_conn(s, ab, ba, st));
                        }
                        Err(_) => thread::sleep(Duration::from_millis(20)),
                    }
                }
            })
            .map_err(|e| Error::Sys {
                what: "spawn".into(),
                source: e,
            })?;
    }

    let rt_prio = opts.rt_prio;
    if opts.keep_awake {
        spawn_keep_awake(&stop)?;
    }
    let spawn = |name: &str, d: Direction, rx, tx, inbox, st: Arc<AtomicBool>| {
        thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let r = worker(d, rx, tx, inbox, st.clone(), rt_prio);
                // One direction failing stops the whole wire.
                st.store(true, Ordering::Relaxed);
                r
            })
            .map_err(|e| Error::Sys {
                what: "spawn".into(),
                source: e,
            })
    };
    let h_ab = spawn(
        "ab",
        Direction::new(opts.ab.clone(), opts.seed)?,
        a.clone(),
        b.clone(),
        ab_rx,
        stop.clone(),
    )?;
    let h_ba = spawn(
        "ba",
        Direction::new(opts.ba.clone(), opts.seed.wrapping_add(1))?,
        b,
        a,
        ba_rx,
        stop.clone(),
    )?;
    println!(
        "{}",
        serde_json::json!({"ready": true, "a": opts.if_a, "b": opts.if_b,
                           "ctl": opts.ctl.as_ref().map(|p| p.display().to_string())})
    );
    let _ = std::io::stdout().flush();
    let r_ab = h_ab.join().map_err(|_| Error::WorkerGone)?;
    let r_ba = h_ba.join().map_err(|_| Error::WorkerGone)?;
    stop.store(true, Ordering::Relaxed);
    drop((ab_tx, ba_tx));
    if let Some(path) = &opts.ctl {
        let _ = std::fs::remove_file(path);
    }
    let (sa, sb) = (r_ab?, r_ba?);
    if let Some(out) = &opts.stats_out {
        let j = serde_json::json!({"ab": sa, "ba": sb});
        std::fs::write(out, j.to_string()).map_err(|e| Error::Sys {
            what: format!("write {}", out.display()),
            source: e,
        })?;
    }
    Ok((sa, sb))
}
