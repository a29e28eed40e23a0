//! A player across a server restart (issue 9, docs/reliability.md): the restarted server has
//! a new TFMCC report secret, so the report key the player fetched before is worthless; the
//! player must fetch its key again (the new session id says so), and no report it sends
//! after that may fail the new server's MAC check. The hard case is a server with a persistent SAM key (`--sam-key-file`): its SAMs
//! keep verifying, so nothing but the new session id shows the restart.
//!
//! One network namespace, server and player on loopback (multicast routed to `lo`).
//! `cargo test --release -p layercast-player --test netns_restart -- --nocapture` (root).

mod common;
use common::{bin, prerequisites};
use serde_json::Value;
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use testkit::netns::{in_ns, Net};

const API: &str = "restart-api-token-0123456789";
const PLAYER: &str = "restart-player-token-0123456789";
const PORT: u16 = 18290;

struct Bed {
    name: String,
    dir: std::path::PathBuf,
    server: Option<Child>,
    player: Option<Child>,
    _net: Net,
}

impl Bed {
    fn server_args(&self) -> Vec<String> {
        let key = self.dir.join("sam.key").to_string_lossy().to_string();
        let state = self.dir.join("state").to_string_lossy().to_string();
        [
            // Plain HTTP on loopback (allowed outside --dev); the rest from the state dir.
            "--tls",
            "false",
            "--state-dir",
            &state,
            "--http-addr",
            &format!("127.0.0.1:{PORT}"),
            "--interface",
            "127.0.0.1",
            "--announce",
            "239.255.79.1:5000",
            "--announce-interval-ms",
            "250",
            "--api-token",
            API,
            "--player-token",
            PLAYER,
            "--sam-key-file",
            &key,
            "--session",
            r#"{"id":"tf","protocol":"tfmcc","layer_rates_bps":[400000],"packet_size":200,"auth_reports":true,"group":"239.255.79.10","port":5204}"#,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    fn spawn(&self, prog: &std::path::Path, args: &[String], log: &str) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(log))
            .unwrap();
        Command::new("ip")
            .args(["netns", "exec", &self.name])
            .arg(prog)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap()
    }

    /// The session's TFMCC object from the server's API (None while it is down).
    fn tfmcc(&self) -> Option<Value> {
        in_ns(&self.name, || -> Option<Value> {
            let mut s = std::net::TcpStream::connect(("127.0.0.1", PORT)).ok()?;
            s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
            write!(
                s,
                "GET /api/sessions/tf HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {API}\r\n\r\n"
            )
            .ok()?;
            let (code, text) = testkit::http::read_response(&mut s);
            if code != 200 {
                return None;
            }
            let v: Value = serde_json::from_str(text.split("\r\n\r\n").nth(1)?).ok()?;
            let mut t = v["tfmcc"].clone();
            t["report_keys_bound"] = v["report_keys_bound"].clone();
            Some(t)
        })
    }

    /// Waits (at most `limit`) until the running server has accepted a report.
    fn wait_reports(&self, limit: Duration) -> Option<(f64, Value)> {
        let t0 = Instant::now();
        let mut last = Value::Null;
        while t0.elapsed() < limit {
            if let Some(t) = self.tfmcc() {
                if t["reports_received"].as_u64().unwrap_or(0) > 0 {
                    return Some((t0.elapsed().as_secs_f64(), t));
                }
                last = t;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("no report accepted in {limit:?}; last: {last}");
        None
    }

    fn log(&self, f: &str) -> String {
        std::fs::read_to_string(self.dir.join(f)).unwrap_or_default()
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        for c in [self.player.as_mut(), self.server.as_mut()]
            .into_iter()
            .flatten()
        {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() || std::env::var_os("LAYERCAST_KEEP_LOGS").is_some() {
            eprintln!("logs kept in {:?}", self.dir);
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[test]
fn player_fetches_its_report_key_again_after_a_server_restart() {
    if !prerequisites() {
        return;
    }
    let mut net = Net::new();
    let name = net.ns("rs").unwrap();
    net.ip(&name, &["route", "add", "224.0.0.0/4", "dev", "lo"])
        .unwrap();
    let dir = std::env::temp_dir().join(&name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut bed = Bed {
        name,
        dir,
        server: None,
        player: None,
        _net: net,
    };
    let server = bin("layercast-server");
    let args = bed.server_args();
    bed.server = Some(bed.spawn(&server, &args, "server.log"));
    let out = bed.dir.join("p").to_string_lossy().to_string();
    let url = format!("http://127.0.0.1:{PORT}/api/sessions/tf/announcement");
    let pargs: Vec<String> = [
        "--session-url",
        &url,
        "--announce",
        "239.255.79.1:5000",
        "--token",
        PLAYER,
        "--controller",
        "tfmcc",
        "--interface",
        "127.0.0.1",
        "--headless",
        "--out",
        &out,
        "--duration",
        "60",
        "--viewer-id",
        "p",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    bed.player = Some(bed.spawn(&bin("layercast-player"), &pargs, "player.log"));
    let bound = |bed: &Bed| {
        bed.tfmcc()
            .is_some_and(|t| t["report_keys_bound"].as_u64() == Some(1))
    };
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(15) && !bound(&bed) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        bound(&bed),
        "the player never fetched its report key\nserver: {}\nplayer: {}",
        bed.log("server.log"),
        bed.log("player.log")
    );
    let first = bed.wait_reports(Duration::from_secs(12));
    eprintln!(
        "first report accepted after {:?} s",
        first.as_ref().map(|f| f.0)
    );
    // SIGKILL, then the same server again: same SAM key (file), new session id, new report
    // secret.
    if let Some(mut c) = bed.server.take() {
        let _ = c.kill();
        let _ = c.wait();
    }
    std::thread::sleep(Duration::from_millis(500));
    bed.server = Some(bed.spawn(&server, &args, "server.log"));
    let t1 = Instant::now();
    // The new server issues this player's report key (for its same receiver id): the player
    // asked for the description again because the session id changed.
    let (mut keyed, mut auth_at_key) = (None, 0);
    while t1.elapsed() < Duration::from_secs(10) && keyed.is_none() {
        if let Some(t) = bed.tfmcc() {
            if t["report_keys_bound"].as_u64() == Some(1) {
                keyed = Some(t1.elapsed().as_secs_f64());
                auth_at_key = t["reports_dropped"]["auth"].as_u64().unwrap_or(0);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("report key issued again {keyed:?} s after the restart");
    assert!(
        keyed.is_some(),
        "the player did not ask the restarted server for its report key
player: {}",
        bed.log("player.log")
    );
    // Reports themselves: the TFMCC receiver at this session's floor rate reports rarely (one
    // report in the first 8 s here) and, after the restart, not reliably within a test's time
    // (a TFMCC-receiver matter, docs/reliability.md); so they are shown, not judged. What is
    // judged is that no report the restarted server saw failed its MAC after the re-fetch.
    let again = bed.wait_reports(Duration::from_secs(8));
    let t = bed.tfmcc().unwrap_or(Value::Null);
    eprintln!(
        "reports accepted again {:?} s after the key; tfmcc: {t}",
        again.as_ref().map(|a| a.0)
    );
    let plog = bed.log("player.log");
    // A report made with the old key in the moment before the re-fetch fails the MAC (counted
    // `auth`); none after it (the player would keep failing forever with the stale key).
    std::thread::sleep(Duration::from_millis(1500));
    let auth_end = bed.tfmcc().unwrap_or(Value::Null)["reports_dropped"]["auth"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        auth_end <= auth_at_key + 1,
        "reports failing the MAC after the key was fetched again: {auth_at_key} -> {auth_end}"
    );
    // The player fetched the description (and its key) again: two "SAM key" lines, and the
    // restart made no new SAM key (persistent file), so only the new session id caused it.
    assert!(
        plog.matches("layercast-player: SAM key").count() >= 2,
        "{plog}"
    );
    let slog = bed.log("server.log");
    let keys: Vec<&str> = slog
        .lines()
        .filter(|l| l.contains("SAM signing key"))
        .collect();
    assert_eq!(keys.len(), 2, "{slog}");
    assert_eq!(
        keys[0].split_whitespace().nth(4),
        keys[1].split_whitespace().nth(4),
        "the SAM key changed: {keys:?}"
    );
}
