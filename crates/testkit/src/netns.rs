//! Network namespaces for tests: one Drop-guarded builder shared by the player's testbed, the
//! server's API tests and the link emulator's tests.
//!
//! A [`Net`] owns every namespace it created (named `lc-<pid>-<n>-<role>`, so parallel tests
//! and other users of the machine never collide) and deletes them in `Drop`, also when the test
//! panics; deleting a namespace deletes the veths inside it, and with them their peers and any
//! qdisc. Interface names live inside the namespaces, so every test can use the same short ones.
//!
//! Every veth is created with checksum and segmentation offloads off (`DESIGN.md`, emulated
//! network rules: otherwise a qdisc sees one 64 KB "packet" where the wire has 45) and every
//! namespace with IPv6 off: a veth with IPv6 sends router solicitations and MLD reports by
//! itself, and on a one-packet token bucket one such packet between the two packets of a pair
//! is visible in the pair's dispersion.

use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A failed setup command, with its stderr.
#[derive(Debug)]
pub struct NetError(pub String);

impl std::fmt::Display for NetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NetError {}

/// Runs a command (bounded to 60 s by `timeout`); its stdout, or an error naming it.
pub fn sh(args: &[&str]) -> Result<String, NetError> {
    let out: Output = Command::new("timeout")
        .arg("60")
        .args(args)
        .output()
        .map_err(|e| NetError(format!("{args:?}: {e}")))?;
    if !out.status.success() {
        return Err(NetError(format!(
            "{args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether this process may build namespaces (root, with `ip` and `tc` on the PATH). When not,
/// the test should skip with a message, or fail when `LAYERCAST_REQUIRE_NETNS=1` (CI): this
/// function panics then.
pub fn available() -> bool {
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

/// A set of namespaces created together and deleted together.
#[derive(Debug)]
pub struct Net {
    base: String,
    names: Vec<String>,
}

/// One token-bucket bottleneck: rate, bucket and queue.
#[derive(Clone, Copy, Debug)]
pub struct Tbf {
    /// Token rate, bits per second.
    pub rate_bps: u64,
    /// Bucket size, bytes (one data packet as the wire counts it, for packet-pair tests).
    pub burst: u64,
    /// Queue limit, bytes.
    pub limit: u64,
}

impl Net {
    /// An empty set with a fresh base name `lc-<pid>-<n>`.
    pub fn new() -> Net {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        Net {
            base: format!("lc-{}-{n}", std::process::id()),
            names: Vec::new(),
        }
    }

    /// The base name (`lc-<pid>-<n>`), also usable for temporary files.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Creates namespace `<base>-<role>` with `lo` up and IPv6 off; returns its name.
    pub fn ns(&mut self, role: &str) -> Result<String, NetError> {
        let name = format!("{}-{role}", self.base);
        sh(&["ip", "netns", "add", &name])?;
        // Owned from here on: Drop deletes it even if the next steps fail.
        self.names.push(name.clone());
        sh(&["ip", "-n", &name, "link", "set", "lo", "up"])?;
        for k in ["all", "default"] {
            sh(&[
                "ip",
                "netns",
                "exec",
                &name,
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{k}.disable_ipv6=1"),
            ])?;
        }
        Ok(name)
    }

    /// Names of the namespaces created so far.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// A veth pair `a_if` in `a` to `b_if` in `b`, offloads off, both ends up, with the given
    /// addresses (`"10.77.1.1/24"`, or `None` for an unnumbered end).
    pub fn veth(
        &self,
        a: &str,
        a_if: &str,
        a_addr: Option<&str>,
        b: &str,
        b_if: &str,
        b_addr: Option<&str>,
    ) -> Result<(), NetError> {
        sh(&[
            "ip", "-n", a, "link", "add", a_if, "type", "veth", "peer", "name", b_if, "netns", b,
        ])?;
        for (ns, ifc, addr) in [(a, a_if, a_addr), (b, b_if, b_addr)] {
            // Best effort: a veth may refuse some of these on some kernels.
            let _ = sh(&[
                "ip", "netns", "exec", ns, "ethtool", "-K", ifc, "tx", "off", "rx", "off", "gso",
                "off", "gro", "off", "tso", "off",
            ]);
            if let Some(addr) = addr {
                sh(&["ip", "-n", ns, "addr", "add", addr, "dev", ifc])?;
            }
            sh(&["ip", "-n", ns, "link", "set", ifc, "up"])?;
        }
        Ok(())
    }

    /// `ip -n NS ARGS...`.
    pub fn ip(&self, ns: &str, args: &[&str]) -> Result<String, NetError> {
        let mut a = vec!["ip", "-n", ns];
        a.extend_from_slice(args);
        sh(&a)
    }

    /// Runs a command inside `ns` (`ip netns exec NS ARGS...`).
    pub fn exec(&self, ns: &str, args: &[&str]) -> Result<String, NetError> {
        let mut a = vec!["ip", "netns", "exec", ns];
        a.extend_from_slice(args);
        sh(&a)
    }

    /// Sets a sysctl inside `ns` (`key=value`).
    pub fn sysctl(&self, ns: &str, kv: &str) -> Result<(), NetError> {
        self.exec(ns, &["sysctl", "-qw", kv]).map(|_| ())
    }

    /// Adds (`add = true`) or changes the root `tbf` on `dev` in `ns`.
    pub fn tbf(&self, ns: &str, dev: &str, t: Tbf, add: bool) -> Result<(), NetError> {
        let (rate, burst, limit) = (
            format!("{}bit", t.rate_bps),
            t.burst.to_string(),
            t.limit.to_string(),
        );
        self.exec(
            ns,
            &[
                "tc",
                "qdisc",
                if add { "add" } else { "change" },
                "dev",
                dev,
                "root",
                "tbf",
                "rate",
                &rate,
                "burst",
                &burst,
                "limit",
                &limit,
            ],
        )
        .map(|_| ())
    }
}

impl Default for Net {
    fn default() -> Self {
        Net::new()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in self.names.drain(..).rev() {
            let _ = Command::new("ip")
                .args(["netns", "del", &ns])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

/// Runs `f` on a fresh thread that has entered namespace `ns` (sockets it opens live there).
pub fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let fd = std::fs::File::open(&path).expect("netns file");
        // SAFETY: setns on this thread only, with a valid netns fd.
        let r = unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .expect("netns thread")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two namespaces joined by a veth with a tbf: addresses answer, and Drop removes both
    /// namespaces (also their names from `ip netns list`).
    #[test]
    fn builds_and_cleans_up() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED: needs root");
            return;
        }
        let names;
        {
            let mut net = Net::new();
            let a = net.ns("a").unwrap();
            let b = net.ns("b").unwrap();
            net.veth(
                &a,
                "x0",
                Some("10.79.0.1/24"),
                &b,
                "y0",
                Some("10.79.0.2/24"),
            )
            .unwrap();
            let t = Tbf {
                rate_bps: 1_000_000,
                burst: 1514,
                limit: 10_000,
            };
            net.tbf(&a, "x0", t, true).unwrap();
            net.tbf(
                &a,
                "x0",
                Tbf {
                    rate_bps: 500_000,
                    ..t
                },
                false,
            )
            .unwrap();
            let q = net.exec(&a, &["tc", "qdisc", "show", "dev", "x0"]).unwrap();
            assert!(q.contains("tbf") && q.contains("500Kbit"), "{q}");
            let v6 = net
                .exec(&b, &["sysctl", "-n", "net.ipv6.conf.y0.disable_ipv6"])
                .unwrap();
            assert_eq!(v6.trim(), "1");
            net.exec(&a, &["ping", "-c", "1", "-W", "5", "10.79.0.2"])
                .unwrap();
            names = net.names().to_vec();
        }
        let list = sh(&["ip", "netns", "list"]).unwrap();
        for n in names {
            assert!(!list.contains(&n), "{n} still exists");
        }
    }
}
