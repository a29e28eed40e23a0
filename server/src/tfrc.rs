//! `layercast-server tfrc ...`: a live unicast TFRC sender over a real UDP socket.
//!
//! The sans-IO [`baselines::tfrc::TfrcSender`] decides the allowed rate X; this shell paces
//! RTP data packets at X to one receiver (`layercast-player --controller tfrc`, see
//! `player/src/tfrc.rs`), reads the receiver's feedback on the same socket, and runs the
//! nofeedback timer. Docs: `docs/protocols/tfrc.md`, "Live mode".
//!
//! Why a subcommand and not a session kind: a TFRC flow is unicast with one receiver; it has
//! no multicast groups, layers, SAM, encoder or per-viewer API, which is all the session
//! machinery carries. The testbed's TFRC checks (E1-E5, E8 in
//! `e2e/src/tfrc-checks.ts`) only need the flow and a log of its state.
//!
//! Wire (version 1 everywhere):
//! - data: an RTP packet (v2, PT [`PAYLOAD_TYPE`], random SSRC, RTP sequence = low 16 bits
//!   of the TFRC sequence, 90-kHz timestamp) whose RFC 8285 one-byte header extension holds
//!   one element, ID [`ELEMENT_ID`], the 16-byte `TfrcDataFields` (version, seq, send time,
//!   R); zero payload up to `--packet-size` bytes of UDP payload (s of the equation).
//! - feedback: `TfrcFeedback` (`"TR"`, version 1, 24 bytes + auth block) from the receiver's
//!   port to this socket. Anything that does not parse, or comes from another address, is
//!   dropped and counted (`bad_feedback`, `foreign_feedback` in the log).

use crate::error::{Error, Result};
use baselines::tfrc::{TfrcSender, TfrcSenderConfig};
use clap::Parser;
use codec::rtp::RtpHeader;
use congestion::wire::tfrc::TfrcFeedback;
use congestion::Time;
use serde_json::{json, Value};
use std::io::Write;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// RTP payload type of TFRC data packets (dynamic range; nothing decodes the payload).
pub const PAYLOAD_TYPE: u8 = 96;
/// RFC 8285 element ID of the TFRC data fields (the one suggested in `wire/tfrc.rs`).
pub const ELEMENT_ID: u8 = 3;
/// Timer granularity the pacer allows for: after a late wake-up it catches up at most this
/// much (spec §1.11: bursts of at most `ceil(t_gran / t_ipi) + 1` packets).
const T_GRAN_S: f64 = 0.002;
/// Smallest packet: RTP header (12) + extension header (4) + element (1 + 16, padded to 20).
pub const MIN_PACKET: u32 = 36;

/// What the sender runs with (`layercast-server tfrc --help`).
#[derive(Clone, Debug)]
pub struct SenderConfig {
    /// The receiver's address (its `--listen`).
    pub to: SocketAddrV4,
    /// Local address to send from (feedback arrives here). Port 0 = any.
    pub bind: SocketAddrV4,
    /// UDP payload per packet, bytes (`s`).
    pub packet_size: u32,
    /// Stop after this long (None = until SIGINT/SIGTERM).
    pub duration: Option<f64>,
    /// Rate ceiling, bit/s: the shell never sends faster, whatever X says (the host's link).
    pub max_rate_bps: f64,
    /// JSON-lines log: a state line every `log_interval`, a line per feedback and per
    /// nofeedback expiry.
    pub log: Option<PathBuf>,
    pub log_interval: Duration,
}

/// The subcommand's command line (`layercast-server tfrc --help`).
#[derive(Debug, Parser)]
#[command(
    name = "layercast-server tfrc",
    bin_name = "layercast-server tfrc",
    version,
    about = "layercast-server tfrc: send one live unicast TFRC flow (RFC 5348)",
    long_about = None,
    args_override_self = true,
    allow_negative_numbers = true
)]
struct Cli {
    /// The receiver (layercast-player --controller tfrc --listen ADDR:PORT)
    #[arg(long, value_name = "ADDR:PORT", value_parser = receiver_addr)]
    to: SocketAddrV4,
    /// Send from / take feedback on this address
    #[arg(long, value_name = "ADDR:PORT", default_value = "0.0.0.0:0")]
    bind: SocketAddrV4,
    /// UDP payload per packet, the equation's s, 36..=65000
    #[arg(long, value_name = "BYTES", default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(MIN_PACKET as i64..=65_000))]
    packet_size: u32,
    /// Never send faster than this, kbit/s (positive)
    #[arg(long, value_name = "K", default_value_t = 100_000.0, value_parser = positive)]
    max_rate_kbps: f64,
    /// Stop after this long [default: until SIGINT/SIGTERM]
    #[arg(long, value_name = "SECS", value_parser = duration_secs)]
    duration: Option<f64>,
    /// JSON lines: state every --log-interval-ms, each feedback, each nofeedback timer expiry
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// The state lines' interval (0 counts as 1)
    #[arg(long, value_name = "MS", default_value_t = 100)]
    log_interval_ms: u64,
}

/// The largest `--duration`, s (about 31 years): beyond it the deadline would not fit a clock.
const MAX_DURATION_S: f64 = 1e9;

fn receiver_addr(s: &str) -> std::result::Result<SocketAddrV4, String> {
    let a: SocketAddrV4 = s.parse().map_err(|e| format!("{e}"))?;
    if a.port() == 0 {
        return Err("port 0".into());
    }
    Ok(a)
}

fn positive(s: &str) -> std::result::Result<f64, String> {
    let x: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if !(x > 0.0 && x.is_finite()) {
        return Err("must be a positive number".into());
    }
    Ok(x)
}

fn duration_secs(s: &str) -> std::result::Result<f64, String> {
    let d = positive(s)?;
    if d > MAX_DURATION_S {
        return Err(format!("must be at most {MAX_DURATION_S:e} seconds"));
    }
    Ok(d)
}

/// Parses the subcommand's flags (after `tfrc`); `Ok(None)` after `--help` or `--version`
/// printed their text.
pub fn parse_args(args: &[String]) -> std::result::Result<Option<SenderConfig>, clap::Error> {
    let argv = std::iter::once("tfrc").chain(args.iter().map(String::as_str));
    let c = match Cli::try_parse_from(argv) {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    Ok(Some(SenderConfig {
        to: c.to,
        bind: c.bind,
        packet_size: c.packet_size,
        duration: c.duration,
        max_rate_bps: c.max_rate_kbps * 1e3,
        log: c.log,
        log_interval: Duration::from_millis(c.log_interval_ms.max(1)),
    }))
}

/// Totals at exit.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SenderSummary {
    pub packets: u64,
    pub bytes: u64,
    pub send_errors: u64,
    pub feedbacks: u64,
    pub bad_feedback: u64,
    pub foreign_feedback: u64,
    pub nofeedback_expiries: u64,
    /// Allowed rate at exit, bit/s.
    pub x_bps: f64,
    pub rtt_s: Option<f64>,
    pub p: f64,
}

struct Log(Option<std::io::BufWriter<std::fs::File>>);

impl Log {
    fn line(&mut self, v: Value) {
        if let Some(w) = &mut self.0 {
            // A full disk must not stop the flow: the log is a by-product.
            let _ = writeln!(w, "{v}");
            let _ = w.flush();
        }
    }
}

fn unix_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn random_ssrc() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(unix_s().to_bits() as u128);
    h.finish() as u32
}

/// One data packet: RTP header with the TFRC element, zero payload up to `size` bytes.
pub fn build_packet(
    fields: &congestion::wire::tfrc::TfrcDataFields,
    ssrc: u32,
    size: u32,
    out: &mut Vec<u8>,
) -> Result<()> {
    out.clear();
    let h = RtpHeader {
        payload_type: PAYLOAD_TYPE,
        sequence_number: fields.seq as u16,
        // 90-kHz media clock from the send time (only for RTP tools; TFRC reads ts_us).
        timestamp: (fields.ts_us as u64 * 9 / 100) as u32,
        ssrc,
        extensions: vec![(ELEMENT_ID, fields.to_bytes())],
        ..Default::default()
    };
    let pay = (size as usize).saturating_sub(h.header_len());
    h.write(&vec![0u8; pay], out)
        .map_err(|e| Error::config("packet-size", format!("cannot build a packet: {e}")))
}

/// Waits until `fd` is readable or `timeout` passed (true if readable). `ppoll` with a
/// nanosecond timeout: `SO_RCVTIMEO` rounds up to scheduler ticks (4 ms at HZ = 250), which
/// would make the pacer sleep through several packet slots at 10 Mbit/s.
fn wait_readable(fd: std::os::fd::RawFd, timeout: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask.
    let n = unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
    n > 0 && p.revents & libc::POLLIN != 0
}

/// Runs the sender until `stop`, the duration, or a socket error.
pub fn run(cfg: &SenderConfig, stop: &AtomicBool) -> Result<SenderSummary> {
    let sock = UdpSocket::bind(cfg.bind).map_err(|e| Error::io(format!("bind {}", cfg.bind), e))?;
    let local = sock
        .local_addr()
        .map_err(|e| Error::io("local address", e))?;
    sock.set_nonblocking(true)
        .map_err(|e| Error::io("non-blocking socket", e))?;
    let mut log = Log(match &cfg.log {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p)
                .map_err(|e| Error::io(format!("create {}", p.display()), e))?,
        )),
        None => None,
    });
    eprintln!(
        "layercast-server tfrc: {local} -> {}, s = {} B, ceiling {:.0} kbit/s",
        cfg.to,
        cfg.packet_size,
        cfg.max_rate_bps / 1e3
    );
    let s = cfg.packet_size as f64;
    let mut tx = TfrcSender::new(TfrcSenderConfig {
        packet_size: cfg.packet_size,
        ..Default::default()
    });
    let ssrc = random_ssrc();
    let start = Instant::now();
    let clock = || Time::from_micros(start.elapsed().as_micros() as u64);
    let end = cfg.duration.map(|d| start + Duration::from_secs_f64(d));
    let mut sum = SenderSummary::default();
    let mut pkt = Vec::with_capacity(cfg.packet_size as usize);
    let mut buf = [0u8; 2048];
    // Nominal send time of the last packet, s since start (None before the first one).
    let mut nominal: Option<f64> = None;
    let mut next_log = 0.0f64;
    let mut last_log = (0.0f64, 0u64);
    // When the nofeedback timer was last armed and with which X (bytes/s): the interval it
    // ran for is logged against max(4R, 2s/X) at each expiry.
    let mut armed = (0.0f64, tx.rate_bytes());
    let ceiling = cfg.max_rate_bps / 8.0;
    loop {
        if stop.load(Ordering::SeqCst) || end.is_some_and(|e| Instant::now() >= e) {
            break;
        }
        let now = clock();
        let t = now.as_secs_f64();
        // 1) the nofeedback timer
        if tx.poll_timeout().is_some_and(|d| now >= d) {
            let before = tx.rate_bytes();
            tx.handle_timeout(now);
            let st = tx.stats();
            log.line(json!({"t": unix_s(), "elapsed_s": t, "ev": "nofeedback",
                "x_before_bps": 8.0 * before, "x_after_bps": tx.poll_rate(),
                "interval_s": t - armed.0,
                "expected_interval_s": st.rtt_s.map(|r| (4.0 * r).max(2.0 * s / armed.1)),
                "rtt_s": st.rtt_s, "p": st.p}));
            armed = (t, tx.rate_bytes());
        }
        // 2) data packets that are due at the current rate (a rate change takes effect at
        // once: the gap after the last packet is recomputed with the new X).
        let rate = tx.rate_bytes().min(ceiling).max(1e-3);
        let mut burst = 0;
        while burst < 64 {
            let due = nominal.map_or(t, |n| n + s / rate);
            if clock().as_secs_f64() < due {
                break;
            }
            let now2 = clock();
            let f = tx.data_header(now2);
            build_packet(&f, ssrc, cfg.packet_size, &mut pkt)?;
            match sock.send_to(&pkt, cfg.to) {
                Ok(_) => {
                    sum.packets += 1;
                    sum.bytes += pkt.len() as u64;
                }
                // ENOBUFS, an ICMP error from an earlier packet, ...: the packet is lost like
                // any other loss; TFRC sees it as such.
                Err(_) => sum.send_errors += 1,
            }
            nominal = Some(due.max(now2.as_secs_f64() - T_GRAN_S));
            burst += 1;
        }
        // 3) the periodic state line
        if t >= next_log {
            let st = tx.stats();
            let dt = (t - last_log.0).max(1e-9);
            log.line(json!({"t": unix_s(), "elapsed_s": t, "x_bps": tx.poll_rate(),
                "x_calc_bps": if st.x_calc_bps.is_finite() { Some(8.0 * st.x_calc_bps) } else { None },
                // (null on the first line: no interval behind it yet)
                "send_rate_bps": (last_log.0 > 0.0).then(|| 8.0 * (sum.bytes - last_log.1) as f64 / dt),
                "sent_packets": sum.packets, "sent_bytes": sum.bytes, "send_errors": sum.send_errors,
                "p": st.p, "rtt_s": st.rtt_s, "feedbacks": sum.feedbacks,
                "bad_feedback": sum.bad_feedback, "foreign_feedback": sum.foreign_feedback,
                "nofeedback_expiries": st.nofeedback_expiries}));
            last_log = (t, sum.bytes);
            next_log = t + cfg.log_interval.as_secs_f64();
        }
        // 4) wait for feedback until the next packet, timer or log line is due
        let rate = tx.rate_bytes().min(ceiling).max(1e-3);
        let mut wake = nominal.map_or(t, |n| n + s / rate).min(next_log);
        if let Some(d) = tx.poll_timeout() {
            wake = wake.min(d.as_secs_f64());
        }
        let now_s = clock().as_secs_f64();
        let wait = (wake - now_s).clamp(20e-6, 0.05);
        if !wait_readable(sock.as_raw_fd(), Duration::from_secs_f64(wait)) {
            continue;
        }
        match sock.recv_from(&mut buf) {
            Ok((n, from)) => {
                if from != SocketAddr::V4(cfg.to) {
                    sum.foreign_feedback += 1;
                    continue;
                }
                match TfrcFeedback::parse(&buf[..n]) {
                    Ok(fb) => {
                        let now = clock();
                        tx.handle_feedback(now, &fb);
                        sum.feedbacks += 1;
                        let st = tx.stats();
                        log.line(
                            json!({"t": unix_s(), "elapsed_s": now.as_secs_f64(), "ev": "fb",
                            "p": fb.p(), "x_recv_bps": 8.0 * fb.x_recv_bps as f64,
                            "x_bps": tx.poll_rate(), "rtt_s": st.rtt_s}),
                        );
                        armed = (now.as_secs_f64(), tx.rate_bytes());
                    }
                    Err(_) => sum.bad_feedback += 1,
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            // ICMP port unreachable from a receiver not started yet, and the like: counted
            // with the send errors, the flow goes on.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => sum.send_errors += 1,
            Err(e) => return Err(Error::io("receive feedback", e)),
        }
    }
    let st = tx.stats();
    sum.nofeedback_expiries = st.nofeedback_expiries;
    sum.x_bps = tx.poll_rate();
    sum.rtt_s = st.rtt_s;
    sum.p = st.p;
    log.line(
        json!({"t": unix_s(), "elapsed_s": clock().as_secs_f64(), "ev": "exit",
        "sent_packets": sum.packets, "sent_bytes": sum.bytes, "feedbacks": sum.feedbacks,
        "bad_feedback": sum.bad_feedback, "foreign_feedback": sum.foreign_feedback,
        "nofeedback_expiries": sum.nofeedback_expiries, "x_bps": sum.x_bps}),
    );
    eprintln!(
        "layercast-server tfrc: {} packets, {} feedbacks ({} malformed, {} foreign), {} nofeedback expiries, X {:.0} kbit/s",
        sum.packets, sum.feedbacks, sum.bad_feedback, sum.foreign_feedback, sum.nofeedback_expiries, sum.x_bps / 1e3
    );
    Ok(sum)
}

/// `layercast-server tfrc ARGS`: exit code.
pub fn main(args: &[String], stop: &AtomicBool) -> i32 {
    match parse_args(args) {
        Ok(None) => 0,
        Ok(Some(c)) => match run(&c, stop) {
            Ok(_) => 0,
            Err(e) => {
                eprintln!("layercast-server tfrc: {e}");
                1
            }
        },
        Err(e) => {
            // Clap's report: the error naming the flag, the usage line, a pointer to --help.
            let _ = e.print();
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baselines::tfrc::{TfrcReceiver, TfrcReceiverConfig};
    use codec::rtp::RtpPacket;
    use congestion::wire::tfrc::TfrcDataFields;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    /// The clap error of a command line that must not parse, as text.
    fn clap_err(s: &str, kind: clap::error::ErrorKind) -> String {
        match parse_args(&args(s)) {
            Err(e) => {
                assert_eq!(e.kind(), kind, "{s}: {e}");
                e.to_string()
            }
            Ok(_) => panic!("{s} parsed"),
        }
    }

    #[test]
    fn flags_are_checked() {
        use clap::error::ErrorKind;
        let e = clap_err("--packet-size 1000", ErrorKind::MissingRequiredArgument);
        assert!(e.contains("--to"), "{e}");
        let bad = [
            ("--to 127.0.0.1:0", "--to", "port 0"),
            ("--to x", "--to", "socket address"),
            (
                "--to 127.0.0.1:5000 --packet-size 10",
                "--packet-size",
                "36..=65000",
            ),
            (
                "--to 127.0.0.1:5000 --packet-size 65001",
                "--packet-size",
                "36..=65000",
            ),
            (
                "--to 127.0.0.1:5000 --duration -1",
                "--duration",
                "positive",
            ),
            (
                "--to 127.0.0.1:5000 --duration 1e10",
                "--duration",
                "at most",
            ),
            (
                "--to 127.0.0.1:5000 --max-rate-kbps 0",
                "--max-rate-kbps",
                "positive",
            ),
            (
                "--to 127.0.0.1:5000 --max-rate-kbps inf",
                "--max-rate-kbps",
                "positive",
            ),
            (
                "--to 127.0.0.1:5000 --log-interval-ms x",
                "--log-interval-ms",
                "digit",
            ),
            (
                "--to 127.0.0.1:5000 --bind 1.2.3.4",
                "--bind",
                "socket address",
            ),
        ];
        for (line, flag, why) in bad {
            let e = clap_err(line, ErrorKind::ValueValidation);
            assert!(e.contains(flag) && e.contains(why), "{line}: {e}");
        }
        let e = clap_err("--to 127.0.0.1:5000 --bogus 1", ErrorKind::UnknownArgument);
        assert!(e.contains("--bogus"), "{e}");
        assert!(e.contains("Usage: layercast-server tfrc --to"), "{e}");
        let e = clap_err("--to 127.0.0.1:5000 --log", ErrorKind::InvalidValue);
        assert!(e.contains("--log"), "{e}");
        let c = parse_args(&args("--to 127.0.0.1:5000 --max-rate-kbps 2000"))
            .unwrap()
            .unwrap();
        assert_eq!(c.max_rate_bps, 2e6);
        assert_eq!(c.packet_size, 1000);
        assert_eq!(c.bind, "0.0.0.0:0".parse().unwrap());
        assert_eq!((c.duration, c.log.clone()), (None, None));
        assert_eq!(c.log_interval, Duration::from_millis(100));
        // The testbed's command line (e2e/src/tfrc-checks.ts), and the `=` spelling.
        let c = parse_args(&args(
            "--to 10.1.0.2:6001 --bind 10.0.0.1:0 --packet-size 1000 --max-rate-kbps 90000 \
             --duration 30 --log /tmp/s.jsonl --log-interval-ms=0",
        ))
        .unwrap()
        .unwrap();
        assert_eq!(c.to, "10.1.0.2:6001".parse().unwrap());
        assert_eq!(c.bind, "10.0.0.1:0".parse().unwrap());
        assert_eq!((c.max_rate_bps, c.duration), (90e6, Some(30.0)));
        assert_eq!(c.log, Some(PathBuf::from("/tmp/s.jsonl")));
        assert_eq!(c.log_interval, Duration::from_millis(1), "0 counts as 1");
        assert!(parse_args(&args("--help")).unwrap().is_none());
        assert!(parse_args(&args("--version")).unwrap().is_none());
        let help = <Cli as clap::CommandFactory>::command()
            .render_help()
            .to_string();
        for s in [
            "--to <ADDR:PORT>",
            "--listen ADDR:PORT",
            "--bind <ADDR:PORT>",
            "[default: 0.0.0.0:0]",
            "--packet-size <BYTES>",
            "[default: 1000]",
            "--max-rate-kbps <K>",
            "[default: 100000]",
            "--duration <SECS>",
            "until SIGINT/SIGTERM",
            "--log <FILE>",
            "--log-interval-ms <MS>",
            "[default: 100]",
            "--version",
        ] {
            assert!(help.contains(s), "--help lacks {s:?}:\n{help}");
        }
    }

    #[test]
    fn packet_layout_round_trips() {
        let f = TfrcDataFields {
            seq: 70_000,
            ts_us: 123_456,
            rtt_us: 40_000,
        };
        let mut b = Vec::new();
        build_packet(&f, 7, 1000, &mut b).unwrap();
        assert_eq!(b.len(), 1000);
        let p = RtpPacket::parse(&b).unwrap();
        assert_eq!(p.payload_type(), PAYLOAD_TYPE);
        assert_eq!(p.sequence_number(), 70_000u32 as u16);
        let got = TfrcDataFields::parse(p.extension(ELEMENT_ID).unwrap()).unwrap();
        assert_eq!(got, f);
        build_packet(&f, 7, MIN_PACKET, &mut b).unwrap();
        assert_eq!(b.len(), MIN_PACKET as usize);
    }

    /// The live path on loopback: the real sender loop against a receiver built from
    /// `TfrcReceiver` that discards every 50th data packet. The sender must see the loss
    /// (p > 0, near the loss-event rate of periodic 2 % loss), run an RTT estimate, count
    /// junk feedback from the receiver's address as malformed, and pace near its X.
    #[test]
    fn loopback_flow_reacts_to_loss_and_counts_junk() {
        let rsock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let raddr = match rsock.local_addr().unwrap() {
            SocketAddr::V4(a) => a,
            _ => unreachable!(),
        };
        let cfg = SenderConfig {
            to: raddr,
            bind: "127.0.0.1:0".parse().unwrap(),
            packet_size: 500,
            duration: Some(3.0),
            max_rate_bps: 4e6,
            log: None,
            log_interval: Duration::from_millis(100),
        };
        let sender = std::thread::spawn(move || run(&cfg, &AtomicBool::new(false)));
        let mut rx = TfrcReceiver::new(TfrcReceiverConfig::default());
        let start = Instant::now();
        let mut buf = [0u8; 2048];
        let mut got = 0u64;
        let mut peer = None;
        rsock
            .set_read_timeout(Some(Duration::from_millis(5)))
            .unwrap();
        while start.elapsed() < Duration::from_secs(4) {
            let now = Time::from_micros(start.elapsed().as_micros() as u64);
            if let Ok((n, from)) = rsock.recv_from(&mut buf) {
                peer = Some(from);
                let p = RtpPacket::parse(&buf[..n]).unwrap();
                let f = TfrcDataFields::parse(p.extension(ELEMENT_ID).unwrap()).unwrap();
                got += 1;
                if f.seq % 50 != 49 {
                    rx.handle_data(now, &f, n as u32);
                }
                if got == 10 {
                    rsock.send_to(b"TR\x01junk", from).unwrap();
                }
            }
            if rx.poll_timeout().is_some_and(|d| now >= d) {
                rx.handle_timeout(now);
            }
            while let Some(fb) = rx.poll_feedback() {
                rsock.send_to(&fb.to_bytes(), peer.unwrap()).unwrap();
            }
        }
        let sum = sender.join().unwrap().unwrap();
        assert_eq!(sum.bad_feedback, 1, "{sum:?}");
        assert!(sum.feedbacks > 20, "{sum:?}");
        assert!(sum.rtt_s.is_some_and(|r| r > 0.0 && r < 0.5), "{sum:?}");
        // Periodic 1-in-50 loss: loss event rate ~ 0.02 once several intervals closed.
        assert!(sum.p > 0.01 && sum.p < 0.04, "{sum:?}");
        // Sent packets are all accounted for; the receiver saw most of them.
        assert!(got as f64 >= 0.9 * sum.packets as f64, "{got} of {sum:?}");
        assert!(sum.packets > 50, "{sum:?}");
    }
}
