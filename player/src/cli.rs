//! The command line: [`Cli`] (clap) as typed, [`Args`] as the player runs with it.
//!
//! Each value is parsed and range-checked by clap, so a bad one is an error naming its flag
//! (`error: invalid value '2' for '--playout-quantile <Q>': must be within 0..=1`);
//! [`into_args`] then checks what involves several flags or a file and fills in the defaults
//! that come from other flags (telemetry URL and session id from `--session-url`).

use crate::error::{Error, Result};
use crate::{auth, http_client};
use clap::Parser;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;

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

/// The largest `--playout-delay-ms`, `--playout-max-jitter-ms` and `--resync-delay-ms`, ms.
pub const MAX_DELAY_MS: u64 = 60_000;
/// The largest `--playout-window-ms` and `--playout-long-window-ms`, ms (ten minutes).
pub const MAX_WINDOW_MS: u64 = 600_000;
/// The largest `--duration`, s (about 31 years): beyond it a deadline would not fit a clock.
pub const MAX_DURATION_S: f64 = 1e9;

/// The command line as clap parses it (`layercast-player --help`).
///
/// The help text is the flags' doc comments, one paragraph each (so `-h` and `--help` say
/// the same). Every default is the one the player ran with before clap, and a repeated flag
/// takes its last value (`args_override_self`), as the hand-written parser did.
#[derive(Debug, Parser)]
#[command(
    name = "layercast-player",
    version,
    about = "layercast-player: receive a layered multicast session (docs/player.md)",
    long_about = None,
    args_override_self = true,
    allow_negative_numbers = true
)]
pub struct Cli {
    /// http://SERVER/api/sessions/ID/announcement (polled once a second)
    #[arg(long, value_name = "URL", value_parser = http_url)]
    pub session_url: Option<String>,
    /// Listen for SAMs on this multicast group instead (e.g. 239.255.76.1:5000)
    #[arg(long, value_name = "GROUP:PORT", value_parser = multicast_addr)]
    pub announce: Option<SocketAddrV4>,
    /// Start from this session description (the JSON the server serves at
    /// /api/sessions/ID/announcement): join the base layer at once instead of waiting up to
    /// one announcement interval; later SAMs replace it
    #[arg(long, value_name = "FILE")]
    pub session_info: Option<PathBuf>,
    /// Receiver-driven controller (lcc, era, era-thesis, plm, plm-paper, ..., tfmcc): lcc is
    /// the product's, docs/protocols/lcc.md; era is the thesis' ERA without single-pair
    /// decisions and with a doubling climb after loss, docs/protocols/era.md E13-E17; plm is
    /// the paper's PLM with a doubling climb after a drop, docs/protocols/plm.md section 10;
    /// tfrc: receive a unicast TFRC flow instead (--controller tfrc --help)
    #[arg(long, value_name = "NAME", default_value = "lcc")]
    pub controller: String,
    /// TFMCC: send reports here [default: the SAM's sender, its feedback port]
    #[arg(long, value_name = "A:P")]
    pub tfmcc_feedback: Option<SocketAddrV4>,
    /// No controller: hold layers 0..N-1 (measurement mode)
    #[arg(long, value_name = "N")]
    pub fixed_layers: Option<u8>,
    /// IPv4 address of the interface to join on
    #[arg(long, value_name = "ADDR", default_value_t = Ipv4Addr::UNSPECIFIED)]
    pub interface: Ipv4Addr,
    /// No window (also when DISPLAY is not set)
    #[arg(long)]
    pub headless: bool,
    /// Write DIR/player.jsonl (one JSON line per second), DIR/frames.csv and the decoded
    /// pictures DIR/video-<seq>-<W>x<H>.y4m
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// With --out: write frames.csv but no pictures
    #[arg(long)]
    pub no_pictures: bool,
    /// Never ask the sender for lost packets again (it offers it by default)
    #[arg(long)]
    pub no_retransmission: bool,
    /// One decoder: a picture whose top-layer frame is late is waited for instead of shown
    /// from the layers below [default: two decoders]
    #[arg(long)]
    pub single_decoder: bool,
    /// With --out: read the QR stamp (frame number, capture time) of every N-th shown picture
    /// only, 0 = never (1: every picture)
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub qr_every: u64,
    /// Stop after this long
    #[arg(long, value_name = "SECS", value_parser = duration_secs)]
    pub duration: Option<f64>,
    /// Serve Prometheus metrics (layercast_player_*) on ADDR
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// Where to POST telemetry [default: from --session-url]
    #[arg(long, value_name = "URL", value_parser = http_url)]
    pub telemetry_url: Option<String>,
    /// Session id used in telemetry [default: from --session-url]
    #[arg(long, value_name = "ID")]
    pub session_name: Option<String>,
    /// The viewer's id in telemetry [default: p<pid>]
    #[arg(long, value_name = "ID")]
    pub viewer_id: Option<String>,
    /// How often the session URL is polled, ms (at least 50; tests)
    #[arg(long, value_name = "MS", hide = true, default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
    pub poll_interval_ms: u64,
    /// A fixed delay on top of the video's adaptive playout buffer [default: 0]; the audio's
    /// starting playout delay, raised when the video needs more and brought back down, never
    /// below the start, when it needs less [default: 800]; 0..=60000
    #[arg(long, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(0..=MAX_DELAY_MS))]
    pub playout_delay_ms: Option<u64>,
    /// Video: the playout buffer absorbs this quantile of the recent decode lateness, 0..=1
    #[arg(long, value_name = "Q", default_value_t = crate::playout::QUANTILE,
          value_parser = quantile)]
    pub playout_quantile: f64,
    /// Video: ... but holds pictures at most this much above the fastest recent one (later
    /// ones are shown at once), 0..=60000
    #[arg(long, value_name = "MS", default_value_t = crate::playout::MAX_JITTER_NS / 1_000_000,
          value_parser = clap::value_parser!(u64).range(0..=MAX_DELAY_MS))]
    pub playout_max_jitter_ms: u64,
    /// Video: the span of recent pictures whose lateness sizes the playout buffer, 1..=600000
    #[arg(long, value_name = "MS", default_value_t = crate::playout::WINDOW_NS / 1_000_000,
          value_parser = clap::value_parser!(u64).range(1..=MAX_WINDOW_MS))]
    pub playout_window_ms: u64,
    /// Video: ... the span while the path's queueing delay swings (a shared queue); 0: never
    /// longer; 0..=600000
    #[arg(long, value_name = "MS",
          default_value_t = crate::playout::LONG_WINDOW_NS / 1_000_000,
          value_parser = clap::value_parser!(u64).range(0..=MAX_WINDOW_MS))]
    pub playout_long_window_ms: u64,
    /// Video, two decoders: the buffer also absorbs this quantile of the top layer's lateness,
    /// about the share of pictures shown at the top layer when its frames come late, 0..=1
    #[arg(long, value_name = "Q", default_value_t = crate::playout::TOP_QUANTILE,
          value_parser = quantile)]
    pub playout_top_quantile: f64,
    /// Video: hold a newly joined upper spatial layer this long before asking the server to
    /// re-sync it, unless a switch point came first (a re-sync costs every viewer of that
    /// layer), 0..=60000
    #[arg(long, value_name = "MS", default_value_t = crate::video::RESYNC_DELAY_MS,
          value_parser = clap::value_parser!(u64).range(0..=MAX_DELAY_MS))]
    pub resync_delay_ms: u64,
    /// Bearer token for the server's API (an empty value: none)
    #[arg(
        long,
        value_name = "TOKEN",
        env = "LAYERCAST_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// Allow --token over plain http:// to a non-loopback server
    #[arg(long)]
    pub insecure: bool,
    /// https: accept only the server certificate with this SHA-256 (hex, colons allowed)
    #[arg(long, value_name = "FP", value_parser = fingerprint)]
    pub tls_fingerprint: Option<[u8; 32]>,
    /// https: verify the server against these CA certificates
    #[arg(long, value_name = "PEM")]
    pub ca_file: Option<PathBuf>,
    /// Verify SAMs with this key (else the session description's key)
    #[arg(long, value_name = "ed25519:HEX", value_parser = sam_key)]
    pub sam_key: Option<String>,
    /// Join layers source-specifically (else the description's ssm_source); any: any-source
    /// joins regardless
    #[arg(long, value_name = "SOURCE|any", value_parser = ssm)]
    pub ssm: Option<Ssm>,
}

/// `--ssm`: a source address or `any`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ssm {
    Any,
    Source(Ipv4Addr),
}

/// The reason of an [`Error::Arg`] without its key (clap names the flag itself).
fn reason(e: Error) -> String {
    match e {
        Error::Arg { reason, .. } => reason,
        e => e.to_string(),
    }
}

fn http_url(s: &str) -> std::result::Result<String, String> {
    http_client::split_url(s).map_err(reason)?;
    Ok(s.to_string())
}

fn multicast_addr(s: &str) -> std::result::Result<SocketAddrV4, String> {
    let a: SocketAddrV4 = s.parse().map_err(|e| format!("{e}"))?;
    if !a.ip().is_multicast() {
        return Err(format!("{} is not multicast", a.ip()));
    }
    Ok(a)
}

/// `--duration`: seconds, positive and finite (at most [`MAX_DURATION_S`]).
pub fn duration_secs(s: &str) -> std::result::Result<f64, String> {
    let d: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if !(d > 0.0 && d <= MAX_DURATION_S) {
        return Err(format!(
            "must be a positive number of seconds, at most {MAX_DURATION_S:e}"
        ));
    }
    Ok(d)
}

fn quantile(s: &str) -> std::result::Result<f64, String> {
    let q: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if !(0.0..=1.0).contains(&q) {
        return Err("must be within 0..=1".into());
    }
    Ok(q)
}

fn fingerprint(s: &str) -> std::result::Result<[u8; 32], String> {
    auth::parse_fingerprint(s).map_err(reason)
}

fn sam_key(s: &str) -> std::result::Result<String, String> {
    security::auth::SamVerifier::from_published(s).map_err(|e| e.to_string())?;
    Ok(s.to_string())
}

fn ssm(s: &str) -> std::result::Result<Ssm, String> {
    if s == "any" {
        return Ok(Ssm::Any);
    }
    s.parse()
        .map(Ssm::Source)
        .map_err(|e| format!("{e} (an IPv4 source address or `any`)"))
}

/// Reads and checks a session description file (`--session-info`): the same JSON and the same
/// validation as an HTTP announcement, so a bad file is a clear error at start, never a panic.
fn read_session_info(path: &std::path::Path) -> Result<congestion::SessionInfo> {
    let body = std::fs::read(path).map_err(|e| Error::io(format!("reading {path:?}"), e))?;
    let info: congestion::SessionInfo = serde_json::from_slice(&body)
        .map_err(|e| Error::arg("session-info", format!("{path:?}: {e}")))?;
    congestion::wire::sam::validate(&info)
        .map_err(|e| Error::arg("session-info", format!("{path:?}: {e}")))?;
    Ok(info)
}

/// Parses the player's flags (without the program name); `Ok(None)` after `--help` or
/// `--version` printed their text. A clap error is [`Error::Cli`] (`main` prints it with
/// clap's usage line and exits 2).
pub fn parse_args(args: &[String]) -> Result<Option<Args>> {
    let argv = std::iter::once("layercast-player").chain(args.iter().map(String::as_str));
    match Cli::try_parse_from(argv) {
        Ok(cli) => into_args(cli).map(Some),
        Err(e) if !e.use_stderr() => {
            // --help or --version: the text goes to stdout, and the player does not run.
            let _ = e.print();
            Ok(None)
        }
        Err(e) => Err(Error::Cli(e)),
    }
}

/// Turns the parsed flags into [`Args`]: reads `--session-info`, checks what involves
/// several flags, and fills in the defaults that come from other flags or the environment
/// (`DISPLAY`).
pub fn into_args(cli: Cli) -> Result<Args> {
    let session_info = match &cli.session_info {
        Some(p) => Some(read_session_info(p)?),
        None => None,
    };
    let token = cli.token.filter(|t| !t.is_empty());
    if let (Some(u), true) = (&cli.session_url, token.is_some()) {
        auth::check_token_transport(u, cli.insecure)?;
    }
    if cli.session_url.is_none() && cli.announce.is_none() && session_info.is_none() {
        return Err(Error::arg(
            "session-url",
            "give --session-url URL, --announce GROUP:PORT or --session-info FILE",
        ));
    }
    let mut a = Args {
        session_url: cli.session_url,
        session_info,
        announce: cli.announce,
        controller: cli.controller,
        fixed_layers: cli.fixed_layers,
        interface: cli.interface,
        headless: cli.headless,
        out: cli.out,
        duration: cli.duration,
        metrics_addr: cli.metrics_addr,
        telemetry_url: cli.telemetry_url,
        session_name: cli.session_name,
        viewer_id: cli
            .viewer_id
            .unwrap_or_else(|| format!("p{}", std::process::id())),
        poll_interval_ms: cli.poll_interval_ms,
        playout_delay_ms: cli.playout_delay_ms,
        playout_quantile: cli.playout_quantile,
        playout_max_jitter_ms: cli.playout_max_jitter_ms,
        playout_window_ms: cli.playout_window_ms,
        playout_long_window_ms: cli.playout_long_window_ms,
        playout_top_quantile: cli.playout_top_quantile,
        resync_delay_ms: cli.resync_delay_ms,
        tfmcc_feedback: cli.tfmcc_feedback,
        no_pictures: cli.no_pictures,
        no_retransmission: cli.no_retransmission,
        single_decoder: cli.single_decoder,
        qr_every: cli.qr_every,
        window: false,
        sam_key: cli.sam_key,
        ssm: match cli.ssm {
            Some(Ssm::Source(s)) => Some(s),
            _ => None,
        },
        ssm_any: cli.ssm == Some(Ssm::Any),
        client: auth::ClientOptions {
            token,
            fingerprint: cli.tls_fingerprint,
            ca_file: cli.ca_file,
        },
    };
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
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;
    use clap::CommandFactory;

    const ANN: &str = "239.255.76.1:5000";

    fn args(v: &[&str]) -> Result<Option<Args>> {
        parse_args(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    /// The clap error of a command line that must not parse, as text.
    fn clap_err(v: &[&str], kind: ErrorKind) -> String {
        match args(v) {
            Err(Error::Cli(e)) => {
                assert_eq!(e.kind(), kind, "{v:?}: {e}");
                e.to_string()
            }
            Err(e) => panic!("{v:?}: not a clap error: {e}"),
            Ok(_) => panic!("{v:?} parsed"),
        }
    }

    /// No flag but the source: every default as before clap (and as `--help` and
    /// docs/player.md give them).
    #[test]
    fn defaults() {
        let a = args(&["--announce", ANN, "--headless"]).unwrap().unwrap();
        assert_eq!(a.announce, Some(ANN.parse().unwrap()));
        assert_eq!(a.controller, "lcc");
        assert_eq!(a.interface, Ipv4Addr::UNSPECIFIED);
        assert_eq!(a.viewer_id, format!("p{}", std::process::id()));
        assert_eq!(a.poll_interval_ms, 1000);
        assert_eq!(a.playout_delay_ms, None);
        assert_eq!(a.playout_quantile, 1.0);
        assert_eq!(a.playout_max_jitter_ms, 1000);
        assert_eq!(a.playout_window_ms, 8000);
        assert_eq!(a.playout_long_window_ms, 40_000);
        assert_eq!(a.playout_top_quantile, 0.85);
        assert_eq!(a.resync_delay_ms, 1500);
        assert_eq!(a.qr_every, 1);
        assert!(a.headless && !a.window);
        assert!(!a.no_pictures && !a.no_retransmission && !a.single_decoder);
        assert_eq!((a.ssm, a.ssm_any), (None, false));
        assert_eq!(
            (a.fixed_layers, a.duration, a.out.clone()),
            (None, None, None)
        );
        assert_eq!(
            (a.telemetry_url.clone(), a.session_name.clone()),
            (None, None)
        );
        assert!(a.client.fingerprint.is_none() && a.client.ca_file.is_none());
    }

    /// Every flag with a value, in both spellings (`--flag value`, `--flag=value`).
    #[test]
    fn every_flag_is_read() {
        let fp = "ab".repeat(32);
        let key = security::auth::SamSigner::generate().published_key();
        let v = [
            "--session-url",
            "http://127.0.0.1:8080/api/sessions/main/announcement",
            "--announce",
            ANN,
            "--controller=era",
            "--tfmcc-feedback",
            "10.0.0.1:5001",
            "--fixed-layers",
            "3",
            "--interface=10.0.0.2",
            "--headless",
            "--out",
            "/tmp/x",
            "--no-pictures",
            "--no-retransmission",
            "--single-decoder",
            "--qr-every",
            "75",
            "--duration",
            "2.5",
            "--metrics-addr",
            "127.0.0.1:9180",
            "--viewer-id",
            "v1",
            "--poll-interval-ms",
            "200",
            "--playout-delay-ms",
            "250",
            "--playout-quantile",
            "0.5",
            "--playout-max-jitter-ms",
            "300",
            "--playout-window-ms",
            "4000",
            "--playout-long-window-ms",
            "0",
            "--playout-top-quantile",
            "0.95",
            "--resync-delay-ms",
            "0",
            "--token",
            "t0k",
            "--tls-fingerprint",
            &fp,
            "--ca-file",
            "/etc/ca.pem",
            "--sam-key",
            &key,
            "--ssm",
            "10.0.0.9",
        ];
        let a = args(&v).unwrap().unwrap();
        assert_eq!(a.controller, "era");
        assert_eq!(a.tfmcc_feedback, Some("10.0.0.1:5001".parse().unwrap()));
        assert_eq!(a.fixed_layers, Some(3));
        assert_eq!(a.interface, Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(a.out, Some(PathBuf::from("/tmp/x")));
        assert!(a.no_pictures && a.no_retransmission && a.single_decoder);
        assert_eq!(a.qr_every, 75);
        assert_eq!(a.duration, Some(2.5));
        assert_eq!(a.metrics_addr, Some("127.0.0.1:9180".parse().unwrap()));
        assert_eq!(a.viewer_id, "v1");
        assert_eq!(a.poll_interval_ms, 200);
        assert_eq!(a.playout_delay_ms, Some(250));
        assert_eq!(a.playout_quantile, 0.5);
        assert_eq!(a.playout_max_jitter_ms, 300);
        assert_eq!(a.playout_window_ms, 4000);
        assert_eq!(a.playout_long_window_ms, 0);
        assert_eq!(a.playout_top_quantile, 0.95);
        assert_eq!(a.resync_delay_ms, 0);
        assert_eq!(a.client.token.as_deref(), Some("t0k"));
        assert_eq!(a.client.fingerprint, Some([0xab; 32]));
        assert_eq!(a.client.ca_file, Some(PathBuf::from("/etc/ca.pem")));
        assert_eq!(a.sam_key.as_deref(), Some(key.as_str()));
        assert_eq!(
            (a.ssm, a.ssm_any),
            (Some(Ipv4Addr::new(10, 0, 0, 9)), false)
        );
        // From the session URL.
        assert_eq!(
            a.telemetry_url.as_deref(),
            Some("http://127.0.0.1:8080/api/telemetry")
        );
        assert_eq!(a.session_name.as_deref(), Some("main"));
        let a = args(&["--announce", ANN, "--headless", "--ssm", "any"])
            .unwrap()
            .unwrap();
        assert_eq!((a.ssm, a.ssm_any), (None, true));
        // Given explicitly, the telemetry target is not derived.
        let a = args(&[
            "--session-url=https://h/api/sessions/s/announcement",
            "--telemetry-url=https://t/x",
            "--session-name=n",
            "--headless",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(a.telemetry_url.as_deref(), Some("https://t/x"));
        assert_eq!(a.session_name.as_deref(), Some("n"));
    }

    /// A flag given twice takes its last value (scripts append to a base command line).
    #[test]
    fn a_repeated_flag_takes_its_last_value() {
        let a = args(&[
            "--announce",
            ANN,
            "--headless",
            "--headless",
            "--controller",
            "era",
            "--qr-every",
            "1",
            "--controller",
            "plm",
            "--qr-every",
            "75",
        ])
        .unwrap()
        .unwrap();
        assert_eq!((a.controller.as_str(), a.qr_every), ("plm", 75));
    }

    #[test]
    fn an_unknown_flag_is_an_error_naming_it() {
        let e = clap_err(
            &["--announce", ANN, "--bogus", "1"],
            ErrorKind::UnknownArgument,
        );
        assert!(e.contains("--bogus"), "{e}");
        // The old parser's undocumented spellings without the two dashes are gone.
        clap_err(&["--announce", ANN, "headless"], ErrorKind::UnknownArgument);
    }

    #[test]
    fn a_missing_value_is_an_error_naming_its_flag() {
        let e = clap_err(
            &["--announce", ANN, "--controller"],
            ErrorKind::InvalidValue,
        );
        assert!(e.contains("--controller"), "{e}");
        // A flag is not taken for the value of the one before it.
        let e = clap_err(&["--viewer-id", "--announce", ANN], ErrorKind::InvalidValue);
        assert!(e.contains("--viewer-id"), "{e}");
    }

    /// Out-of-range and malformed values: a clap error that names the flag and says why.
    #[test]
    fn a_bad_value_is_an_error_naming_its_flag() {
        let bad = [
            ("--playout-delay-ms", "60001", "0..=60000"),
            ("--playout-delay-ms", "-1", "invalid digit"),
            ("--playout-max-jitter-ms", "60001", "0..=60000"),
            ("--playout-window-ms", "0", "1..=600000"),
            ("--playout-long-window-ms", "600001", "0..=600000"),
            ("--resync-delay-ms", "60001", "0..=60000"),
            ("--poll-interval-ms", "3600001", "0..=3600000"),
            ("--playout-quantile", "1.5", "within 0..=1"),
            ("--playout-quantile", "NaN", "within 0..=1"),
            ("--playout-top-quantile", "-0.1", "within 0..=1"),
            ("--duration", "0", "positive number of seconds"),
            ("--duration", "-1", "positive number of seconds"),
            ("--duration", "inf", "positive number of seconds"),
            ("--duration", "1e10", "at most 1e9"),
            ("--duration", "x", "invalid float"),
            ("--fixed-layers", "256", "256"),
            ("--qr-every", "x", "invalid digit"),
            ("--interface", "eth0", "eth0"),
            ("--announce", "10.0.0.1:5000", "not multicast"),
            ("--announce", "239.1.1.1", "socket address"),
            ("--tfmcc-feedback", "x", "socket address"),
            ("--metrics-addr", "x", "invalid socket address"),
            ("--session-url", "ftp://h/x", "http:// or https://"),
            ("--telemetry-url", "http:///x", "no host"),
            ("--tls-fingerprint", "abc", "64 hex digits"),
            ("--sam-key", "ed25519:zz", "ed25519:zz"),
            ("--ssm", "x", "any"),
        ];
        for (flag, val, why) in bad {
            let e = clap_err(&["--announce", ANN, flag, val], ErrorKind::ValueValidation);
            assert!(e.contains(flag) && e.contains(why), "{flag} {val}: {e}");
        }
        // The bounds themselves are allowed.
        let a = args(&[
            "--announce",
            ANN,
            "--headless",
            "--playout-delay-ms=60000",
            "--playout-window-ms=600000",
            "--resync-delay-ms=60000",
            "--playout-quantile=0",
            "--duration=1e9",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(a.playout_delay_ms, Some(MAX_DELAY_MS));
        assert_eq!(a.duration, Some(MAX_DURATION_S));
    }

    /// Checks that involve more than one flag: a source is needed, and a token does not go
    /// over plain HTTP to another host unless `--insecure` says so.
    #[test]
    fn cross_flag_checks() {
        let e = args(&["--headless"]).unwrap_err();
        assert!(
            matches!(e, Error::Arg { ref key, .. } if key == "session-url"),
            "{e}"
        );
        let remote = "http://192.0.2.1:8080/api/sessions/s/announcement";
        assert!(args(&["--session-url", remote, "--token", "t", "--headless"]).is_err());
        assert!(args(&[
            "--session-url",
            remote,
            "--token",
            "t",
            "--insecure",
            "--headless"
        ])
        .is_ok());
        let local = "http://127.0.0.1:8080/api/sessions/s/announcement";
        assert!(args(&["--session-url", local, "--token", "t", "--headless"]).is_ok());
        // An empty token is no token: nothing to protect.
        let a = args(&["--session-url", remote, "--token", "", "--headless"])
            .unwrap()
            .unwrap();
        assert_eq!(a.client.token, None);
    }

    /// `--help` and `--version` print and stop; the help says what the old hand-written
    /// help said (the demo looks for "window" in it), hides the test-only flag, and names the
    /// token's environment variable without its value.
    #[test]
    fn help_and_version() {
        assert!(args(&["--help"]).unwrap().is_none());
        assert!(args(&["-h"]).unwrap().is_none());
        assert!(args(&["--version"]).unwrap().is_none());
        assert!(args(&["-V"]).unwrap().is_none());
        // Help wins over an otherwise incomplete or wrong command line.
        assert!(args(&["--controller", "era", "--help"]).unwrap().is_none());
        let mut cmd = Cli::command();
        let version = cmd.render_version();
        assert_eq!(
            version.trim(),
            format!("layercast-player {}", env!("CARGO_PKG_VERSION"))
        );
        // Words only: where clap wraps a line depends on the terminal's width.
        let help = cmd.render_help().to_string();
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(
            help,
            Cli::command()
                .render_long_help()
                .to_string()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
            "-h and --help say the same"
        );
        for s in [
            "--session-url <URL>",
            "--announce <GROUP:PORT>",
            "--session-info <FILE>",
            "--controller <NAME>",
            "[default: lcc]",
            "--tfmcc-feedback <A:P>",
            "--fixed-layers <N>",
            "--interface <ADDR>",
            "[default: 0.0.0.0]",
            "window",
            "--out <DIR>",
            "--no-pictures",
            "--no-retransmission",
            "--single-decoder",
            "--qr-every <N>",
            "--duration <SECS>",
            "--metrics-addr <ADDR>",
            "--telemetry-url <URL>",
            "--session-name <ID>",
            "--viewer-id <ID>",
            "p<pid>",
            "--playout-delay-ms <MS>",
            "[default: 800]",
            "--playout-quantile <Q>",
            "[default: 1]",
            "--playout-max-jitter-ms <MS>",
            "[default: 1000]",
            "--playout-window-ms <MS>",
            "[default: 8000]",
            "--playout-long-window-ms <MS>",
            "[default: 40000]",
            "--playout-top-quantile <Q>",
            "[default: 0.85]",
            "--resync-delay-ms <MS>",
            "[default: 1500]",
            "--token <TOKEN>",
            "[env: LAYERCAST_TOKEN]",
            "--insecure",
            "--tls-fingerprint <FP>",
            "--ca-file <PEM>",
            "--sam-key <ed25519:HEX>",
            "--ssm <SOURCE|any>",
            "--controller tfrc --help",
            "--version",
        ] {
            assert!(help.contains(s), "--help lacks {s:?}:\n{help}");
        }
        assert!(!help.contains("poll-interval"), "{help}");
    }

    /// The options table of docs/player.md and the command line name the same flags.
    #[test]
    fn docs_list_every_flag() {
        let doc = include_str!("../../docs/player.md");
        let table = doc
            .split("\n## Options\n")
            .nth(1)
            .expect("docs/player.md has an Options section");
        let mut documented = std::collections::BTreeSet::new();
        for row in table.lines().take_while(|l| !l.starts_with("## ")) {
            let Some(first) = row.strip_prefix('|').and_then(|r| r.split(" | ").next()) else {
                continue;
            };
            for code in first.split('`').skip(1).step_by(2) {
                if let Some(flag) = code.strip_prefix("--") {
                    documented.insert(flag.split(' ').next().unwrap().to_string());
                }
            }
        }
        let mut cmd = Cli::command();
        cmd.build();
        let flags: std::collections::BTreeSet<String> = cmd
            .get_arguments()
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| a.get_long().map(str::to_string))
            .collect();
        assert_eq!(
            documented, flags,
            "docs/player.md \"Options\" against --help"
        );
    }

    /// `--token` defaults to `LAYERCAST_TOKEN`; an empty one is no token, and the flag wins.
    /// The variable is set only in a child process (this test binary again, running this
    /// test alone), so no other test sees it.
    #[test]
    fn token_from_the_environment() {
        const CHILD: &str = "LAYERCAST_PLAYER_TEST_ENV_CHILD";
        let remote = "http://192.0.2.1:8080/api/sessions/s/announcement";
        if let Some(env) = std::env::var_os(CHILD) {
            let env = env.into_string().unwrap();
            let want = Some(env.as_str()).filter(|t| !t.is_empty());
            assert_eq!(std::env::var("LAYERCAST_TOKEN").unwrap(), env);
            let a = args(&["--announce", ANN, "--headless"]).unwrap().unwrap();
            assert_eq!(a.client.token.as_deref(), want);
            let a = args(&["--announce", ANN, "--headless", "--token", "flag"])
                .unwrap()
                .unwrap();
            assert_eq!(a.client.token.as_deref(), Some("flag"));
            let a = args(&["--announce", ANN, "--headless", "--token="])
                .unwrap()
                .unwrap();
            assert_eq!(a.client.token, None);
            // The environment's token is checked like the flag's.
            assert_eq!(
                args(&["--session-url", remote, "--headless"]).is_err(),
                want.is_some()
            );
            let help = Cli::command().render_help().to_string();
            assert!(help.contains("LAYERCAST_TOKEN"), "{help}");
            if let Some(t) = want {
                assert!(!help.contains(t), "--help shows the token: {help}");
            }
            return;
        }
        let name = concat!(module_path!(), "::token_from_the_environment");
        let name = name.split_once("::").unwrap().1;
        for token in ["s3cret-t0ken", ""] {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args([name, "--exact", "--test-threads=1"])
                .env(CHILD, token)
                .env("LAYERCAST_TOKEN", token)
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && stdout.contains("1 passed"),
                "child with LAYERCAST_TOKEN={token:?}: {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
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
}
