//! layercast-player: joins a layered multicast session, runs a receiver-driven controller on
//! kernel-timestamped packets, joins and leaves layers with IGMP, and reports (see
//! `docs/player.md`).

/// mimalloc instead of glibc malloc: under the per-second churn of reports, decisions and
/// HTTP buffers (small blocks of many lifetimes, several threads) glibc's heap kept growing
/// from fragmentation with a bounded live heap (docs/reliability.md "Soak"). Not in unit tests,
/// which count allocations with an allocator of their own.
#[cfg(not(test))]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod audio;
mod audio_net;
mod auth;
mod decode;
mod error;
mod feedback;
mod framelog;
mod freeze;
mod http_client;
mod lower;
mod net;
mod playout;
mod poller;
mod qr;
mod receiver;
mod report;
mod telemetry;
#[cfg(feature = "research")]
mod tfrc;
mod video;
mod window;

use error::{Error, Result};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::SeqCst);
}

/// Command-line options (`--help` lists them).
#[derive(Clone, Debug)]
pub struct Args {
    pub session_url: Option<String>,
    /// The session description handed over at start (`--session-info FILE`): the player joins
    /// the base layer at once instead of waiting for the first announcement.
    pub session_info: Option<congestion::SessionInfo>,
    pub announce: Option<SocketAddrV4>,
    pub controller: String,
    pub fixed_layers: Option<u8>,
    pub interface: Ipv4Addr,
    pub headless: bool,
    pub out: Option<PathBuf>,
    pub duration: Option<f64>,
    pub metrics_addr: Option<SocketAddr>,
    pub telemetry_url: Option<String>,
    pub session_name: Option<String>,
    pub viewer_id: String,
    pub poll_interval_ms: u64,
    /// A fixed delay added to the video's adaptive playout buffer (default 0), and the
    /// audio's playout delay (default `audio::DEFAULT_DELAY_MS`).
    pub playout_delay_ms: Option<u64>,
    /// Quantile of the recent decode lateness the video's playout buffer absorbs
    /// (`--playout-quantile`, `playout::PlayoutClock`).
    pub playout_quantile: f64,
    /// The most the video's playout buffer holds pictures above the fastest recent one, ms
    /// (`--playout-max-jitter-ms`): the latency bound of the jitter buffer.
    pub playout_max_jitter_ms: u64,
    /// How much recent time's decode lateness sizes the video's playout buffer, ms
    /// (`--playout-window-ms`).
    pub playout_window_ms: u64,
    /// ... and while the path's queueing delay swings, ms (`--playout-long-window-ms`; 0: never
    /// longer than `playout_window_ms`).
    pub playout_long_window_ms: u64,
    /// With the lower path: the quantile of the top path's lateness the video's playout
    /// buffer absorbs (`--playout-top-quantile`, `playout::PlayoutClock::top_decoded`).
    pub playout_top_quantile: f64,
    /// How long a newly joined upper spatial layer is held before the server is asked to
    /// re-sync it (`--resync-delay-ms`; `video::RESYNC_DELAY_MS`).
    pub resync_delay_ms: u64,
    /// TFMCC: where reports go instead of the announced sender (`crate::tfmcc`).
    pub tfmcc_feedback: Option<SocketAddrV4>,
    /// With `--out`: frames.csv only, no y4m pictures.
    pub no_pictures: bool,
    /// Never ask for lost packets again, even from a sender that offers it
    /// (`--no-retransmission`; for comparisons).
    pub no_retransmission: bool,
    /// One decoder: no lower path showing the layers below the top one while its frame is
    /// still arriving (`--single-decoder`; for comparisons, `crate::lower`).
    pub single_decoder: bool,
    /// With `--out`: read the QR stamp of every N-th shown picture (0: never). zbar is the
    /// largest cost of a headless player (56 % of its CPU at 640x360@15, docs/player.md
    /// "Cost per player").
    pub qr_every: u64,
    /// Show the video in a window (not headless and a display is set).
    pub window: bool,
    /// Pinned SAM key (`ed25519:<hex>`) for `--announce` without a session URL.
    pub sam_key: Option<String>,
    /// Join layers source-specifically (IGMPv3) to this source.
    pub ssm: Option<Ipv4Addr>,
    /// `--ssm any`: any-source joins even when the description names a source.
    pub ssm_any: bool,
    /// How the HTTP client authenticates (token, certificate pin, CA file).
    pub client: auth::ClientOptions,
}

const HELP: &str = "layercast-player: receive a layered multicast session

  --session-url URL      http://SERVER/api/sessions/ID/announcement (polled once a second)
  --announce GROUP:PORT  listen for SAMs on this group instead (e.g. 239.255.76.1:5000)
  --session-info FILE    start from this session description (the JSON the server serves at
                         /api/sessions/ID/announcement): join the base layer at once instead
                         of waiting up to one announcement interval; later SAMs replace it
  --controller NAME      receiver-driven controller (lcc, era, era-thesis, plm, plm-paper,
                         ..., tfmcc) [default: lcc, docs/protocols/lcc.md; era is the thesis'
                         ERA without single-pair decisions and with a doubling climb after
                         loss, docs/protocols/era.md E13-E17; plm is the paper's PLM with a
                         doubling climb after a drop, docs/protocols/plm.md section 10];
                         tfrc: receive a unicast TFRC flow instead (--controller tfrc --help)
  --tfmcc-feedback A:P   TFMCC: send reports here [default: SAM sender, its feedback port]
  --fixed-layers N       no controller: hold layers 0..N-1 (measurement mode)
  --interface ADDR       IPv4 address of the interface to join on [default: 0.0.0.0]
  --headless             no window (also when DISPLAY is not set)
  --out DIR              write DIR/player.jsonl (one JSON line per second), DIR/frames.csv
                         and the decoded pictures DIR/video-<seq>-<W>x<H>.y4m
  --no-pictures          with --out: write frames.csv but no pictures
  --no-retransmission    never ask the sender for lost packets again (it offers it by default)
  --single-decoder       one decoder: a picture whose top-layer frame is late is waited for
                         instead of shown from the layers below [default: two decoders]
  --qr-every N           with --out: read the QR stamp (frame number, capture time) of every
                         N-th shown picture only, 0 = never [default: 1, every picture]
  --duration SECS        stop after this long
  --metrics-addr ADDR    serve Prometheus metrics (layercast_player_*) on ADDR
  --telemetry-url URL    where to POST telemetry [default: from --session-url]
  --session-name ID      session id used in telemetry [default: from --session-url]
  --viewer-id ID         [default: p<pid>]
  --playout-delay-ms MS  a fixed delay on top of the video's adaptive playout buffer
                         [default: 0]; the audio's starting playout delay, raised
                         when the video needs more and brought back down, never
                         below the start, when it needs less [default: 800]
  --playout-quantile Q   video: the playout buffer absorbs this quantile of the recent
                         decode lateness, 0..=1 [default: 1]
  --playout-max-jitter-ms MS
                         video: ... but holds pictures at most this much above the fastest
                         recent one (later ones are shown at once) [default: 1000]
  --playout-window-ms MS video: the span of recent pictures whose lateness sizes the
                         playout buffer [default: 8000]
  --playout-long-window-ms MS
                         video: ... the span while the path's queueing delay swings
                         (a shared queue); 0: never longer [default: 40000]
  --playout-top-quantile Q
                         video, two decoders: the buffer also absorbs this quantile of the
                         top layer's lateness, about the share of pictures shown at the top
                         layer when its frames come late, 0..=1 [default: 0.85]
  --resync-delay-ms MS   video: hold a newly joined upper spatial layer this long before
                         asking the server to re-sync it, unless a switch point came first
                         (a re-sync costs every viewer of that layer) [default: 1500]
  --token TOKEN          bearer token for the server's API [default: $LAYERCAST_TOKEN]
  --insecure             allow --token over plain http:// to a non-loopback server
  --tls-fingerprint FP   https: accept only the server certificate with this SHA-256
  --ca-file PEM          https: verify the server against these CA certificates
  --sam-key ed25519:HEX  verify SAMs with this key (else the session description's key)
  --ssm SOURCE|any       join layers source-specifically (else the description's ssm_source);
                         any: any-source joins regardless
";

/// Reads and checks a session description file (`--session-info`): the same JSON and the same
/// validation as an HTTP announcement, so a bad file is a clear error at start, never a panic.
fn read_session_info(path: &str) -> Result<congestion::SessionInfo> {
    let body = std::fs::read(path).map_err(|e| Error::io(format!("reading {path:?}"), e))?;
    let info: congestion::SessionInfo = serde_json::from_slice(&body)
        .map_err(|e| Error::arg("session-info", format!("{path:?}: {e}")))?;
    congestion::wire::sam::validate(&info)
        .map_err(|e| Error::arg("session-info", format!("{path:?}: {e}")))?;
    Ok(info)
}

fn parse_args(args: &[String]) -> Result<Option<Args>> {
    let mut a = Args {
        session_url: None,
        session_info: None,
        announce: None,
        controller: "lcc".into(),
        fixed_layers: None,
        interface: Ipv4Addr::UNSPECIFIED,
        headless: false,
        out: None,
        duration: None,
        metrics_addr: None,
        telemetry_url: None,
        session_name: None,
        viewer_id: format!("p{}", std::process::id()),
        poll_interval_ms: 1000,
        playout_delay_ms: None,
        playout_quantile: crate::playout::QUANTILE,
        playout_max_jitter_ms: crate::playout::MAX_JITTER_NS / 1_000_000,
        playout_window_ms: crate::playout::WINDOW_NS / 1_000_000,
        playout_long_window_ms: crate::playout::LONG_WINDOW_NS / 1_000_000,
        playout_top_quantile: crate::playout::TOP_QUANTILE,
        resync_delay_ms: crate::video::RESYNC_DELAY_MS,
        tfmcc_feedback: None,
        no_pictures: false,
        no_retransmission: false,
        single_decoder: false,
        qr_every: 1,
        window: false,
        sam_key: None,
        ssm: None,
        ssm_any: false,
        client: auth::ClientOptions {
            token: std::env::var("LAYERCAST_TOKEN")
                .ok()
                .filter(|t| !t.is_empty()),
            ..Default::default()
        },
    };
    let mut i = 0;
    let mut insecure = false;
    while i < args.len() {
        let flag = args[i].as_str();
        if flag == "-h" || flag == "--help" {
            print!("{HELP}");
            return Ok(None);
        }
        if flag == "--headless" {
            a.headless = true;
            i += 1;
            continue;
        }
        if flag == "--insecure" {
            insecure = true;
            i += 1;
            continue;
        }
        if flag == "--no-pictures" {
            a.no_pictures = true;
            i += 1;
            continue;
        }
        if flag == "--single-decoder" {
            a.single_decoder = true;
            i += 1;
            continue;
        }
        if flag == "--no-retransmission" {
            a.no_retransmission = true;
            i += 1;
            continue;
        }
        let (name, val) = match flag.split_once('=') {
            Some((n, v)) => (n.to_string(), v.to_string()),
            None => {
                i += 1;
                let v = args
                    .get(i)
                    .ok_or_else(|| Error::arg(flag.trim_start_matches('-'), "needs a value"))?;
                (flag.to_string(), v.clone())
            }
        };
        let key = name.trim_start_matches('-').to_string();
        let bad = |e: &dyn std::fmt::Display| Error::arg(&key, format!("{val:?}: {e}"));
        match key.as_str() {
            "session-url" => {
                http_client::split_url(&val)?;
                a.session_url = Some(val.clone())
            }
            "announce" => {
                let s: SocketAddrV4 = val.parse().map_err(|e| bad(&e))?;
                if !s.ip().is_multicast() {
                    return Err(Error::arg(&key, format!("{} is not multicast", s.ip())));
                }
                a.announce = Some(s)
            }
            "session-info" => a.session_info = Some(read_session_info(&val)?),
            "controller" => a.controller = val.clone(),
            "fixed-layers" => a.fixed_layers = Some(val.parse().map_err(|e| bad(&e))?),
            "interface" => a.interface = val.parse().map_err(|e| bad(&e))?,
            "out" => a.out = Some(PathBuf::from(&val)),
            "duration" => {
                let d: f64 = val.parse().map_err(|e| bad(&e))?;
                if !(d > 0.0 && d.is_finite()) {
                    return Err(Error::arg(&key, "must be a positive number of seconds"));
                }
                a.duration = Some(d)
            }
            "metrics-addr" => a.metrics_addr = Some(val.parse().map_err(|e| bad(&e))?),
            "telemetry-url" => {
                http_client::split_url(&val)?;
                a.telemetry_url = Some(val.clone())
            }
            "session-name" => a.session_name = Some(val.clone()),
            "viewer-id" => a.viewer_id = val.clone(),
            "poll-interval-ms" => a.poll_interval_ms = val.parse().map_err(|e| bad(&e))?,
            "qr-every" => a.qr_every = val.parse().map_err(|e| bad(&e))?,
            "playout-delay-ms" => a.playout_delay_ms = Some(val.parse().map_err(|e| bad(&e))?),
            "playout-window-ms" => {
                a.playout_window_ms = val.parse().map_err(|e| bad(&e))?;
                if a.playout_window_ms == 0 {
                    return Err(Error::arg(&key, "must be above 0"));
                }
            }
            "playout-long-window-ms" => {
                a.playout_long_window_ms = val.parse().map_err(|e| bad(&e))?
            }
            "playout-max-jitter-ms" => {
                a.playout_max_jitter_ms = val.parse().map_err(|e| bad(&e))?
            }
            "playout-quantile" => {
                let q: f64 = val.parse().map_err(|e| bad(&e))?;
                if !(0.0..=1.0).contains(&q) {
                    return Err(Error::arg(&key, "must be within 0..=1"));
                }
                a.playout_quantile = q
            }
            "playout-top-quantile" => {
                let q: f64 = val.parse().map_err(|e| bad(&e))?;
                if !(0.0..=1.0).contains(&q) {
                    return Err(Error::arg(&key, "must be within 0..=1"));
                }
                a.playout_top_quantile = q
            }
            "resync-delay-ms" => {
                let ms: u64 = val.parse().map_err(|e| bad(&e))?;
                if ms > 60_000 {
                    return Err(Error::arg(&key, "must be at most 60000"));
                }
                a.resync_delay_ms = ms
            }
            "tfmcc-feedback" => a.tfmcc_feedback = Some(val.parse().map_err(|e| bad(&e))?),
            "token" => a.client.token = Some(val.clone()).filter(|t| !t.is_empty()),
            "tls-fingerprint" => a.client.fingerprint = Some(auth::parse_fingerprint(&val)?),
            "ca-file" => a.client.ca_file = Some(PathBuf::from(&val)),
            "sam-key" => {
                security::auth::SamVerifier::from_published(&val).map_err(|e| bad(&e))?;
                a.sam_key = Some(val.clone())
            }
            "ssm" if val == "any" => a.ssm_any = true,
            "ssm" => a.ssm = Some(val.parse().map_err(|e| bad(&e))?),
            _ => return Err(Error::arg(&key, "unknown flag (see --help)")),
        }
        i += 1;
    }
    if let (Some(u), true) = (&a.session_url, a.client.token.is_some()) {
        auth::check_token_transport(u, insecure)?;
    }
    if a.session_url.is_none() && a.announce.is_none() && a.session_info.is_none() {
        return Err(Error::arg(
            "session-url",
            "give --session-url URL, --announce GROUP:PORT or --session-info FILE",
        ));
    }
    if !a.headless {
        if std::env::var_os("DISPLAY").is_some_and(|d| !d.is_empty()) {
            a.window = true;
        } else {
            eprintln!("layercast-player: DISPLAY is not set: running headless (no window)");
        }
    }
    if let Some(u) = &a.session_url {
        // http://host/api/sessions/ID/announcement -> telemetry at http://host/api/telemetry
        if let Some(i) = u.find("/api/sessions/") {
            if a.telemetry_url.is_none() {
                a.telemetry_url = Some(format!("{}/api/telemetry", &u[..i]));
            }
            if a.session_name.is_none() {
                let rest = &u[i + "/api/sessions/".len()..];
                a.session_name = rest.split('/').next().map(str::to_string);
            }
        }
    }
    Ok(Some(a))
}

/// Turns transparent huge pages off for this process (`PR_SET_THP_DISABLE`), first thing in
/// `main`.
///
/// Why: mimalloc reserves a 1-GiB arena and (without the `no_thp` build feature, which the
/// workspace sets) advises it `MADV_HUGEPAGE`; a few hundred KiB of live heap spread over
/// three 2-MiB ranges were then billed as 6 MiB of huge pages, either at the first fault or
/// whenever khugepaged got round to collapsing them, minutes into a run. That made RssAnon
/// jump by 2-6 MiB at random times with no allocation behind it (the soak's one-off steps,
/// docs/reliability.md "The steps were huge pages"). With `no_thp` the arena is no longer
/// advised; this call also covers hosts whose THP mode is `always`, where any 2-MiB-aligned
/// anonymous range qualifies. RssAnon then counts the 4-KiB pages the process touched, so a
/// growth after the warm-up is a growth of memory in use. Failure (old kernel, seccomp) only
/// costs that accuracy: ignored.
fn disable_thp() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes integer arguments only and changes a flag of this
    // process's memory descriptor.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

fn main() {
    disable_thp();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let h = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    #[cfg(feature = "research")]
    if tfrc::wanted(&args) {
        // A live unicast TFRC flow (src/tfrc.rs): its own loop, no SAM or layers.
        // SAFETY: the handler only stores to an atomic.
        unsafe {
            libc::signal(libc::SIGINT, h);
            libc::signal(libc::SIGTERM, h);
        }
        std::process::exit(tfrc::main(&args, &SIGNALLED));
    }
    let a = match parse_args(&args) {
        Ok(Some(a)) => a,
        Ok(None) => return,
        Err(e) => {
            eprintln!("layercast-player: {e}");
            std::process::exit(2);
        }
    };
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, h);
        libc::signal(libc::SIGTERM, h);
    }
    auth::set_client_options(a.client.clone());
    if let Err(e) = receiver::run(a, &SIGNALLED) {
        eprintln!("layercast-player: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Result<Option<Args>> {
        parse_args(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    /// `--session-info` takes the server's announcement JSON; a bad or missing file is an
    /// argument error at start.
    #[test]
    fn session_info_file_is_read_and_checked() {
        let dir = std::env::temp_dir().join(format!("lc-player-si-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut info = congestion::SessionInfo::equal_layers(
            10,
            50_000,
            Ipv4Addr::new(239, 255, 100, 0),
            5004,
        );
        info.session_id = 77;
        let good = dir.join("good.json");
        std::fs::write(&good, serde_json::to_vec(&info).unwrap()).unwrap();
        let a = args(&["--session-info", good.to_str().unwrap(), "--headless"])
            .unwrap()
            .unwrap();
        assert_eq!(a.session_info.as_ref(), Some(&info));
        let bad = dir.join("bad.json");
        std::fs::write(&bad, b"{\"session_id\": 1}").unwrap();
        let e = args(&["--session-info", bad.to_str().unwrap()]).unwrap_err();
        assert!(
            matches!(e, Error::Arg { ref key, .. } if key == "session-info"),
            "{e}"
        );
        let mut empty = info.clone();
        empty.layers.clear();
        std::fs::write(&bad, serde_json::to_vec(&empty).unwrap()).unwrap();
        assert!(args(&["--session-info", bad.to_str().unwrap()]).is_err());
        let missing = dir.join("missing.json");
        assert!(args(&["--session-info", missing.to_str().unwrap()]).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// `disable_thp` must leave the process with THP disabled (the flag the kernel checks at
    /// every fault and in khugepaged); without it the soak's RssAnon steps come back.
    #[test]
    fn disable_thp_turns_transparent_huge_pages_off() {
        super::disable_thp();
        // SAFETY: PR_GET_THP_DISABLE takes no pointer and only reads a flag.
        let flag = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
        assert_eq!(flag, 1, "PR_GET_THP_DISABLE after disable_thp");
        // Linux >= 5.0 also shows the effective state in /proc/<pid>/status.
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        if let Some(l) = status.lines().find(|l| l.starts_with("THP_enabled:")) {
            assert_eq!(l.split_whitespace().nth(1), Some("0"), "{l}");
        }
    }
}
