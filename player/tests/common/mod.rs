//! Network-namespace testbed for the player's end-to-end tests.
//!
//! ```text
//!  ns S (server)            ns R (router: ip_forward, igmpproxy)          ns C (player)
//!  s0 10.77.1.1/24  <veth>  r0 10.77.1.2 (upstream)  r1 10.77.2.1  <veth>  c0 10.77.2.2/24
//!                                                    tbf on r1 egress = the bottleneck
//!  sc 10.77.3.1/24  <------------------ control veth (HTTP) ------------------>  cs 10.77.3.2/24
//! ```
//! HTTP (announcements, telemetry) uses the direct control veth, not the bottleneck: the tbf
//! bucket is one *data* packet (see [`Testbed::new`]) and would drop full-size TCP segments.
//! Namespaces are named `lc-<pid>-<n>-{s,r,c}`; interface names live inside them, so tests
//! can run in parallel. Everything (children, namespaces and with them the veths) is torn
//! down by `Drop`, also when a test panics. Every child is killed at the latest in `Drop`;
//! every wait is bounded.

#![allow(dead_code)]

pub mod mrouter;
#[allow(dead_code)]
pub mod vq;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

pub const SERVER_IP: &str = "10.77.1.1";
/// The server's address on the control link (HTTP).
pub const SERVER_HTTP: &str = "10.77.3.1:8080";
pub const CLIENT_IP: &str = "10.77.2.2";
/// UDP + IPv4 + Ethernet header bytes that tbf counts on top of the UDP payload.
pub const WIRE_OVERHEAD: u64 = 8 + 20 + 14;

fn sh(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{args:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

/// Whether this machine can run the namespace tests (root, `ip`, `tc`, igmpproxy).
/// Missing prerequisites fail the test when `LAYERCAST_REQUIRE_NETNS=1` (CI), else skip it
/// with a message.
pub fn prerequisites() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let tools = ["ip", "tc"].iter().all(|t| {
        Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let ok = root && tools;
    if !ok {
        let msg = format!("netns prerequisites missing (root={root}, ip/tc={tools})");
        if std::env::var("LAYERCAST_REQUIRE_NETNS").as_deref() == Ok("1") {
            panic!("{msg}");
        }
        eprintln!("SKIPPED: {msg}");
    }
    ok
}

/// Path of a workspace binary built next to this test (`target/<profile>/NAME`), building it
/// first if it is not there (the player's tests also need the server binary).
pub fn bin(name: &str) -> PathBuf {
    if name == "layercast-player" {
        return PathBuf::from(env!("CARGO_BIN_EXE_layercast-player"));
    }
    let player = PathBuf::from(env!("CARGO_BIN_EXE_layercast-player"));
    let p = player.with_file_name(name);
    if !p.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let st = Command::new(cargo)
            .args(["build", "-p", name])
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
    /// The multicast router (None when igmpproxy is used: `LAYERCAST_MROUTER=igmpproxy`).
    pub router: Option<mrouter::MRouter>,
    children: Vec<(String, Child)>,
}

impl Testbed {
    /// Builds the three namespaces with a `tbf` bottleneck of `rate_bps` on the router's
    /// downstream interface, queue `queue_bytes`, bucket `burst` bytes.
    ///
    /// The bucket must hold exactly one packet as the wire counts it (UDP payload + 42):
    /// with a bigger bucket, a pair arriving at an idle link passes partly on stored tokens
    /// and its dispersion over-estimates the rate (1000-byte packets behind a 1600-byte
    /// bucket read 2.1 Mbit/s on a 1 Mbit/s link).
    pub fn new(rate_bps: u64, queue_bytes: u64, burst: u64) -> Testbed {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let base = format!("lc-{}-{n}", std::process::id());
        let dir = std::env::temp_dir().join(&base);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let tb = Testbed {
            s: format!("{base}-s"),
            r: format!("{base}-r"),
            c: format!("{base}-c"),
            dir,
            burst: 1514,
            router: None,
            children: Vec::new(),
        };
        for ns in [&tb.s, &tb.r, &tb.c] {
            sh(&["ip", "netns", "add", ns]).unwrap();
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]).unwrap();
        }
        sh(&[
            "ip", "-n", &tb.s, "link", "add", "s0", "type", "veth", "peer", "name", "r0", "netns",
            &tb.r,
        ])
        .unwrap();
        sh(&[
            "ip", "-n", &tb.c, "link", "add", "c0", "type", "veth", "peer", "name", "r1", "netns",
            &tb.r,
        ])
        .unwrap();
        sh(&[
            "ip", "-n", &tb.s, "link", "add", "sc", "type", "veth", "peer", "name", "cs", "netns",
            &tb.c,
        ])
        .unwrap();
        let cmds: Vec<Vec<&str>> = vec![
            vec![
                "ip",
                "-n",
                &tb.s,
                "addr",
                "add",
                "10.77.3.1/24",
                "dev",
                "sc",
            ],
            vec![
                "ip",
                "-n",
                &tb.c,
                "addr",
                "add",
                "10.77.3.2/24",
                "dev",
                "cs",
            ],
            vec!["ip", "-n", &tb.s, "link", "set", "sc", "up"],
            vec!["ip", "-n", &tb.c, "link", "set", "cs", "up"],
            vec![
                "ip",
                "-n",
                &tb.s,
                "addr",
                "add",
                "10.77.1.1/24",
                "dev",
                "s0",
            ],
            vec![
                "ip",
                "-n",
                &tb.r,
                "addr",
                "add",
                "10.77.1.2/24",
                "dev",
                "r0",
            ],
            vec![
                "ip",
                "-n",
                &tb.r,
                "addr",
                "add",
                "10.77.2.1/24",
                "dev",
                "r1",
            ],
            vec![
                "ip",
                "-n",
                &tb.c,
                "addr",
                "add",
                "10.77.2.2/24",
                "dev",
                "c0",
            ],
            vec!["ip", "-n", &tb.s, "link", "set", "s0", "up"],
            vec!["ip", "-n", &tb.r, "link", "set", "r0", "up"],
            vec!["ip", "-n", &tb.r, "link", "set", "r1", "up"],
            vec!["ip", "-n", &tb.c, "link", "set", "c0", "up"],
            vec![
                "ip",
                "-n",
                &tb.s,
                "route",
                "add",
                "default",
                "via",
                "10.77.1.2",
            ],
            vec![
                "ip",
                "-n",
                &tb.c,
                "route",
                "add",
                "default",
                "via",
                "10.77.2.1",
            ],
            vec![
                "ip",
                "netns",
                "exec",
                &tb.r,
                "sysctl",
                "-qw",
                "net.ipv4.ip_forward=1",
            ],
            vec![
                "ip",
                "netns",
                "exec",
                &tb.r,
                "sysctl",
                "-qw",
                "net.ipv4.conf.all.rp_filter=0",
            ],
            vec![
                "ip",
                "netns",
                "exec",
                &tb.r,
                "sysctl",
                "-qw",
                "net.ipv4.conf.r0.rp_filter=0",
            ],
            // IGMPv2 on the receiver: its leave messages are explicit, so quickleave acts fast.
            vec![
                "ip",
                "netns",
                "exec",
                &tb.c,
                "sysctl",
                "-qw",
                "net.ipv4.conf.c0.force_igmp_version=2",
            ],
        ];
        for c in cmds {
            sh(&c).unwrap();
        }
        // Offloads off so tbf sees real packet sizes (best effort: veth may refuse some).
        for (ns, ifs) in [
            (&tb.s, vec!["s0"]),
            (&tb.r, vec!["r0", "r1"]),
            (&tb.c, vec!["c0"]),
        ] {
            for i in ifs {
                let _ = sh(&[
                    "ip", "netns", "exec", ns, "ethtool", "-K", i, "tx", "off", "rx", "off", "gso",
                    "off", "gro", "off", "tso", "off",
                ]);
            }
        }
        let mut tb = tb;
        tb.burst = burst;
        tb.set_bottleneck(rate_bps, queue_bytes, true);
        if std::env::var("LAYERCAST_MROUTER").as_deref() == Ok("igmpproxy") {
            let conf = tb.dir.join("igmpproxy.conf");
            std::fs::write(
                &conf,
                "quickleave\nphyint r0 upstream ratelimit 0 threshold 1\n  altnet 10.77.0.0/16\nphyint r1 downstream ratelimit 0 threshold 1\nphyint lo disabled\n",
            )
            .unwrap();
            let conf = conf.to_string_lossy().to_string();
            let r = tb.r.clone();
            tb.spawn(
                "igmpproxy",
                &r,
                Path::new("igmpproxy"),
                &["-d", "-v", &conf],
            );
        } else {
            tb.router = Some(mrouter::MRouter::start(&tb.r, "r0", "r1"));
        }
        std::thread::sleep(Duration::from_millis(300));
        tb
    }

    /// Sets (or changes) the tbf on the router's downstream interface.
    pub fn set_bottleneck(&self, rate_bps: u64, queue_bytes: u64, add: bool) {
        let rate = format!("{rate_bps}bit");
        let limit = queue_bytes.to_string();
        let burst = self.burst.to_string();
        sh(&[
            "ip",
            "netns",
            "exec",
            &self.r,
            "tc",
            "qdisc",
            if add { "add" } else { "change" },
            "dev",
            "r1",
            "root",
            "tbf",
            "rate",
            &rate,
            "burst",
            &burst,
            "limit",
            &limit,
        ])
        .unwrap();
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
        format!("{mroute}\n{tc}")
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
        let path = format!("/var/run/netns/{ns}");
        std::thread::spawn(move || {
            let fd = std::fs::File::open(&path).expect("netns file");
            use std::os::fd::AsRawFd;
            // SAFETY: setns on this thread only, with a valid netns fd.
            let r = unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .expect("netns thread")
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        self.router = None;
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
        for ns in [&self.s, &self.r, &self.c] {
            let _ = sh(&["ip", "netns", "del", ns]);
        }
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
