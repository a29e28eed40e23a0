//! Network-namespace testbed for the player's end-to-end tests.
//!
//! ```text
//!  ns S (server)            ns R (router: ip_forward, mrouter)           ns C (player)
//!  s0 10.77.1.1/24  <veth>  r0 10.77.1.2 (upstream)  r1 10.77.2.1  <veth>  c0 10.77.2.2/24
//!                                                    tbf on r1 egress = the bottleneck
//!  sc 10.77.3.1/24  <------------------ control veth (HTTP) ------------------>  cs 10.77.3.2/24
//! ```
//! With `LAYERCAST_BOTTLENECK=linkemu` the bottleneck is instead the project's link emulator
//! (`layercast-linkemu`, SCHED_FIFO wire threads) in a fourth namespace E between r1 and c0
//! (`r1 <veth> ea [linkemu] eb <veth> c0`, a transparent wire on the R→C direction), whose
//! release-timing histogram shows in [`Testbed::router_state`]. Either way the second packet
//! of a pair leaves when a timer-driven context runs, which on a loaded machine is sometimes
//! late by a millisecond or more (docs/player.md, "The settle-and-shed tests").
//! HTTP (announcements, telemetry) uses the direct control veth, not the bottleneck: the tbf
//! bucket is one *data* packet (see [`Testbed::new`]) and would drop full-size TCP segments.
//! The namespaces come from [`testkit::netns::Net`] (`lc-<pid>-<n>-{s,r,c}`, IPv6 off,
//! offloads off, deleted in `Drop` also when a test panics). The multicast router is the
//! `layercast-linkemu mrouter` binary (fast leave), or igmpproxy with
//! `LAYERCAST_MROUTER=igmpproxy`. Every child is killed at the latest in `Drop`; every wait is
//! bounded.

#![allow(dead_code)]

#[allow(dead_code)]
pub mod vq;

#[allow(dead_code)]
pub mod av;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use testkit::netns::{self, Net, Tbf};

pub const SERVER_IP: &str = "10.77.1.1";
/// The server's address on the control link (HTTP).
pub const SERVER_HTTP: &str = "10.77.3.1:8080";
pub const CLIENT_IP: &str = "10.77.2.2";
/// UDP + IPv4 + Ethernet header bytes that tbf counts on top of the UDP payload.
pub const WIRE_OVERHEAD: u64 = 8 + 20 + 14;

/// Holds this test binary's timing-sensitive testbeds to one at a time while the guard lives:
/// cargo runs a binary's tests in parallel, and on two cores a second testbed (link emulator,
/// server, players) delays the first one's packets enough to move what it measures (pair
/// gaps, received rates). A test that panicked holding it poisons nothing here.
pub fn one_testbed_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn sh(args: &[&str]) -> Result<String, String> {
    netns::sh(args).map_err(|e| e.0)
}

/// Whether this machine can run the namespace tests (root, `ip`, `tc`). Missing
/// prerequisites fail the test when `LAYERCAST_REQUIRE_NETNS=1` (CI), else skip it with a
/// message.
pub fn prerequisites() -> bool {
    netns::available()
}

/// Path of a workspace binary: `$LAYERCAST_BIN_DIR/NAME` when set (scripts/test.sh), else
/// next to this test's player binary (`target/<profile>/NAME`), building it first (same
/// profile) if it is not there: the player's tests also need the server and the router.
pub fn bin(name: &str) -> PathBuf {
    if name == "layercast-player" {
        return PathBuf::from(env!("CARGO_BIN_EXE_layercast-player"));
    }
    if let Some(d) = std::env::var_os("LAYERCAST_BIN_DIR") {
        let p = PathBuf::from(d).join(name);
        if p.exists() {
            return p;
        }
    }
    let player = PathBuf::from(env!("CARGO_BIN_EXE_layercast-player"));
    let p = player.with_file_name(name);
    if !p.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let release = player
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|d| d == "release");
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-p", name]);
        if release {
            cmd.arg("--release");
        }
        let st = cmd
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("running cargo build");
        assert!(st.success(), "cargo build -p {name} failed");
    }
    assert!(p.exists(), "{p:?} missing");
    p
}

pub struct Testbed {
    pub s: String,
    pub r: String,
    pub c: String,
    pub dir: PathBuf,
    pub burst: u64,
    /// The link emulator's control socket, when it is the bottleneck (else tbf on r1).
    pub emu_ctl: Option<PathBuf>,
    /// True when the fast-leave router (`layercast-linkemu mrouter`) runs, false for
    /// igmpproxy (`LAYERCAST_MROUTER=igmpproxy`).
    pub fast_router: bool,
    children: Vec<(String, Child)>,
    /// Declared last: dropped after the children are gone (see `Drop`).
    net: Net,
}

impl Testbed {
    /// Builds the namespaces with a bottleneck of `rate_bps` from the router to the player,
    /// queue `queue_bytes`: the link emulator, or with `LAYERCAST_BOTTLENECK=tbf` a `tbf` on
    /// the router's downstream interface with a bucket of `burst` bytes.
    ///
    /// The bucket must hold exactly one packet as the wire counts it (UDP payload + 42):
    /// with a bigger bucket, a pair arriving at an idle link passes partly on stored tokens
    /// and its dispersion over-estimates the rate (1000-byte packets behind a 1600-byte
    /// bucket read 2.1 Mbit/s on a 1 Mbit/s link).
    pub fn new(rate_bps: u64, queue_bytes: u64, burst: u64) -> Testbed {
        let emulated = std::env::var("LAYERCAST_BOTTLENECK").as_deref() == Ok("linkemu");
        Testbed::new_with(rate_bps, queue_bytes, burst, emulated)
    }

    /// As [`Testbed::new`], with the link emulator as the bottleneck when `emulated`.
    pub fn new_with(rate_bps: u64, queue_bytes: u64, burst: u64, emulated: bool) -> Testbed {
        let mut net = Net::new();
        let dir = std::env::temp_dir().join(net.base());
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let s = net.ns("s").unwrap();
        let r = net.ns("r").unwrap();
        let c = net.ns("c").unwrap();
        let e = if emulated {
            Some(net.ns("e").unwrap())
        } else {
            None
        };
        let mut tb = Testbed {
            s,
            r,
            c,
            dir,
            burst,
            emu_ctl: None,
            fast_router: false,
            children: Vec::new(),
            net,
        };
        let (s, r, c) = (tb.s.clone(), tb.r.clone(), tb.c.clone());
        let net = &tb.net;
        net.veth(
            &s,
            "s0",
            Some("10.77.1.1/24"),
            &r,
            "r0",
            Some("10.77.1.2/24"),
        )
        .unwrap();
        if let Some(e) = &e {
            net.veth(&r, "r1", Some("10.77.2.1/24"), e, "ea", None)
                .unwrap();
            net.veth(e, "eb", None, &c, "c0", Some("10.77.2.2/24"))
                .unwrap();
        } else {
            net.veth(
                &c,
                "c0",
                Some("10.77.2.2/24"),
                &r,
                "r1",
                Some("10.77.2.1/24"),
            )
            .unwrap();
        }
        net.veth(
            &s,
            "sc",
            Some("10.77.3.1/24"),
            &c,
            "cs",
            Some("10.77.3.2/24"),
        )
        .unwrap();
        net.ip(&s, &["route", "add", "default", "via", "10.77.1.2"])
            .unwrap();
        net.ip(&c, &["route", "add", "default", "via", "10.77.2.1"])
            .unwrap();
        for kv in [
            "net.ipv4.ip_forward=1",
            "net.ipv4.conf.all.rp_filter=0",
            "net.ipv4.conf.r0.rp_filter=0",
        ] {
            net.sysctl(&r, kv).unwrap();
        }
        // IGMPv2 on the receiver: its leave messages are explicit, so the router acts fast.
        net.sysctl(&c, "net.ipv4.conf.c0.force_igmp_version=2")
            .unwrap();
        if let Some(e) = &e {
            // Direction ab = R→C is the bottleneck; C→R (IGMP) is an unlimited wire.
            // `overhead_bytes` 14 counts the Ethernet header as tbf does on a veth, so the
            // link carries (UDP payload + 42)-byte packets at `rate_bps` as before.
            let ctl = tb.dir.join("linkemu.sock");
            let ab = Testbed::emu_link(rate_bps, queue_bytes);
            let ctl_s = ctl.to_string_lossy().to_string();
            let p = bin("layercast-linkemu");
            tb.spawn(
                "linkemu",
                e,
                &p,
                &[
                    "--a",
                    "ea",
                    "--b",
                    "eb",
                    "--ab",
                    &ab,
                    "--ba",
                    "{}",
                    "--ctl",
                    &ctl_s,
                    "--rt-prio",
                    "10",
                    // On an idle VM a sleeping wire thread's vCPU halts and wakes
                    // milliseconds late: keep the CPUs busy at SCHED_IDLE (docs/linkemu.md).
                    "--keep-awake",
                ],
            );
            tb.wait_ready("linkemu");
            tb.emu_ctl = Some(ctl);
        } else {
            tb.set_bottleneck(rate_bps, queue_bytes, true);
        }
        // Diagnostics: `LAYERCAST_PCAP=1` captures (nanosecond timestamps) the router's
        // upstream side, the bottleneck's far side (r1 egress, after tbf) and the player's
        // interface into the log directory (kept with `LAYERCAST_KEEP_LOGS=1`).
        if std::env::var("LAYERCAST_PCAP").as_deref() == Ok("1") {
            for (ns, ifc) in [(&r, "r0"), (&r, "r1"), (&c, "c0")] {
                let f = tb
                    .dir
                    .join(format!("{ifc}.pcap"))
                    .to_string_lossy()
                    .to_string();
                tb.spawn(
                    &format!("tcpdump-{ifc}"),
                    ns,
                    Path::new("tcpdump"),
                    &[
                        "-i",
                        ifc,
                        "-n",
                        "-U",
                        "--time-stamp-precision=nano",
                        "-w",
                        &f,
                    ],
                );
            }
        }
        if std::env::var("LAYERCAST_MROUTER").as_deref() == Ok("igmpproxy") {
            let conf = tb.dir.join("igmpproxy.conf");
            std::fs::write(
                &conf,
                "quickleave\nphyint r0 upstream ratelimit 0 threshold 1\n  altnet 10.77.0.0/16\nphyint r1 downstream ratelimit 0 threshold 1\nphyint lo disabled\n",
            )
            .unwrap();
            let conf = conf.to_string_lossy().to_string();
            tb.spawn(
                "igmpproxy",
                &r,
                Path::new("igmpproxy"),
                &["-d", "-v", &conf],
            );
            std::thread::sleep(Duration::from_millis(300));
        } else {
            tb.fast_router = true;
            let p = bin("layercast-linkemu");
            tb.spawn(
                "mrouter",
                &r,
                &p,
                &["mrouter", "--upstream", "r0", "--downstream", "r1"],
            );
            tb.wait_ready("mrouter");
        }
        tb
    }

    /// The emulator's settings for the R→C direction.
    fn emu_link(rate_bps: u64, queue_bytes: u64) -> String {
        serde_json::json!({
            "rate_bps": rate_bps,
            "overhead_bytes": 14,
            "queue": {"kind": "droptail", "limit_bytes": queue_bytes},
        })
        .to_string()
    }

    /// Waits (bounded) until child `tag` has printed `"ready":true` (its first line, once
    /// its sockets are open).
    fn wait_ready(&mut self, tag: &str) {
        let t0 = Instant::now();
        while !self.log(tag).contains("\"ready\":true") {
            assert!(
                !self.exited(tag) && t0.elapsed() < Duration::from_secs(10),
                "{tag} did not start: {}",
                self.log(tag)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sets (or changes) the tbf on the router's downstream interface.
    pub fn set_bottleneck(&self, rate_bps: u64, queue_bytes: u64, add: bool) {
        if self.emu_ctl.is_some() {
            self.set_link(
                &serde_json::from_str(&Testbed::emu_link(rate_bps, queue_bytes)).unwrap(),
            );
            return;
        }
        let t = Tbf {
            rate_bps,
            burst: self.burst,
            limit: queue_bytes,
        };
        self.net.tbf(&self.r, "r1", t, add).unwrap();
    }

    /// Changes the link emulator's R->C link with a partial `set` request (e.g. `{"loss":
    /// 0.01}`, `{"rate_bps": 250000}`); needs the emulator as the bottleneck.
    pub fn set_link(&self, fields: &Value) {
        let ctl = self
            .emu_ctl
            .as_ref()
            .expect("set_link needs the link emulator");
        let mut req = fields.clone();
        req["cmd"] = "set".into();
        req["dir"] = "ab".into();
        let out = sh(&[
            bin("layercast-linkemu").to_str().unwrap(),
            "ctl",
            ctl.to_str().unwrap(),
            &req.to_string(),
        ])
        .unwrap();
        assert!(out.contains("\"ok\":true"), "linkemu set {req}: {out}");
    }

    /// Starts `prog args` in namespace `ns`; stdout/stderr go to `<dir>/<tag>.log`.
    pub fn spawn(&mut self, tag: &str, ns: &str, prog: &Path, args: &[&str]) {
        let log = std::fs::File::create(self.dir.join(format!("{tag}.log"))).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(prog)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.children.push((tag.to_string(), child));
    }

    /// The announcement URL of session `id`.
    pub fn url(&self, id: &str) -> String {
        format!("http://{SERVER_HTTP}/api/sessions/{id}/announcement")
    }

    /// Starts the server in S with one session given as JSON.
    pub fn start_server(&mut self, session_json: &str) {
        let p = bin("layercast-server");
        let s = self.s.clone();
        self.spawn(
            "server",
            &s,
            &p,
            &[
                // Development mode: the test's private namespaces (docs/security.md §9.8).
                "--dev",
                "--http-addr",
                "0.0.0.0:8080",
                "--interface",
                SERVER_IP,
                "--announce",
                "239.255.76.1:5000",
                "--session",
                session_json,
            ],
        );
    }

    /// The router's multicast routes and bottleneck counters (for diagnostics).
    pub fn router_state(&self) -> String {
        let mroute =
            sh(&["ip", "netns", "exec", &self.r, "ip", "mroute", "show"]).unwrap_or_default();
        let tc = sh(&[
            "ip", "netns", "exec", &self.r, "tc", "-s", "qdisc", "show", "dev", "r1",
        ])
        .unwrap_or_default();
        let emu = self
            .emu_state()
            .map(|v| {
                format!(
                    "linkemu R->C: counters {} release_error {}",
                    v["ab"]["counters"], v["ab"]["release_error"]
                )
            })
            .unwrap_or_default();
        format!("{mroute}\n{tc}{emu}")
    }

    /// The emulator's `get` reply (counters and release-timing summary of both directions),
    /// when it is the bottleneck.
    pub fn emu_state(&self) -> Option<Value> {
        let ctl = self.emu_ctl.as_ref()?;
        let out = sh(&[
            bin("layercast-linkemu").to_str()?,
            "ctl",
            ctl.to_str()?,
            r#"{"cmd":"get"}"#,
        ])
        .ok()?;
        serde_json::from_str(out.trim()).ok()
    }

    /// Sends a signal to the named child.
    pub fn signal(&mut self, tag: &str, sig: libc::c_int) {
        for (t, c) in &self.children {
            if t == tag {
                // `ip netns exec` execs the program, so the pid is the program's.
                // SAFETY: kill(2) on our own child's pid.
                unsafe { libc::kill(c.id() as i32, sig) };
            }
        }
    }

    /// Whether the named child has exited (it stays listed).
    pub fn exited(&mut self, tag: &str) -> bool {
        self.children
            .iter_mut()
            .find(|(t, _)| t == tag)
            .is_none_or(|(_, c)| matches!(c.try_wait(), Ok(Some(_))))
    }

    /// Waits (bounded) for the named child to exit and forgets it.
    pub fn wait(&mut self, tag: &str, limit: Duration) -> Option<std::process::ExitStatus> {
        let t0 = Instant::now();
        let i = self.children.iter().position(|(t, _)| t == tag)?;
        loop {
            if let Ok(Some(st)) = self.children[i].1.try_wait() {
                self.children.remove(i);
                return Some(st);
            }
            if t0.elapsed() > limit {
                let _ = self.children[i].1.kill();
                let _ = self.children[i].1.wait();
                self.children.remove(i);
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs the player in C with `args` plus `--headless --out DIR --duration SECS`, waits
    /// for it (bounded) and returns its per-second log lines.
    pub fn run_player(&mut self, tag: &str, secs: f64, args: &[&str]) -> Vec<Value> {
        self.start_player(tag, secs, args);
        let st = self.wait(tag, Duration::from_secs_f64(secs + 15.0));
        assert!(
            st.is_some_and(|s| s.success()),
            "player {tag} failed: {}",
            self.log(tag)
        );
        self.player_log(tag)
    }

    pub fn start_player(&mut self, tag: &str, secs: f64, args: &[&str]) {
        let c = self.c.clone();
        self.start_player_in(tag, &c, CLIENT_IP, secs, args);
    }

    /// A player in namespace `ns` joining on `iface` (e.g. the server's namespace: an open
    /// path, multicast looped back on the sender's interface).
    pub fn start_player_in(&mut self, tag: &str, ns: &str, iface: &str, secs: f64, args: &[&str]) {
        let out = self.dir.join(tag);
        let out_s = out.to_string_lossy().to_string();
        let d = secs.to_string();
        let mut a: Vec<&str> = vec![
            "--headless",
            "--out",
            &out_s,
            "--duration",
            &d,
            "--interface",
            iface,
        ];
        a.extend_from_slice(args);
        let p = bin("layercast-player");
        self.spawn(tag, ns, &p, &a);
    }

    /// The pid of the named child (`ip netns exec` execs the program, so it is the program's).
    pub fn pid(&self, tag: &str) -> Option<u32> {
        self.children
            .iter()
            .find(|(t, _)| t == tag)
            .map(|(_, c)| c.id())
    }

    pub fn player_log(&self, tag: &str) -> Vec<Value> {
        let p = self.dir.join(tag).join("player.jsonl");
        std::fs::read_to_string(&p)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    pub fn log(&self, tag: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("{tag}.log"))).unwrap_or_default()
    }

    /// Runs `f` on a thread that has entered namespace `ns` (sockets it opens live there).
    pub fn in_ns<T: Send + 'static>(&self, ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        netns::in_ns(ns, f)
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        for (_, c) in self.children.iter_mut() {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        }
        let t0 = Instant::now();
        for (_, c) in self.children.iter_mut() {
            while t0.elapsed() < Duration::from_secs(2) {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        // The namespaces go with `self.net`, dropped after this function.
        if std::env::var("LAYERCAST_KEEP_LOGS").is_err() && !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("testbed logs kept in {:?}", self.dir);
        }
    }
}

/// Median of the finite values of `key` in `lines` (skipping the first `skip` lines).
pub fn median(lines: &[Value], key: &str, skip: usize) -> Option<f64> {
    let mut v: Vec<f64> = lines
        .iter()
        .skip(skip)
        .filter_map(|l| l.get(key).and_then(Value::as_f64))
        .filter(|x| x.is_finite())
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// The wall clock now, ns since the Unix epoch (the clock the player's files use).
pub fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// The newest log line's non-null `key` object (the player writes some only once a second).
pub fn last_of(lines: &[Value], key: &str) -> Value {
    lines
        .iter()
        .rev()
        .find_map(|l| l.get(key).filter(|v| !v.is_null()).cloned())
        .unwrap_or(Value::Null)
}
