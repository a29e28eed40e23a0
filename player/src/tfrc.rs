//! `layercast-player --controller tfrc --listen ADDR:PORT`: the receiver of a live unicast
//! TFRC flow (`layercast-server tfrc`, `server/src/tfrc.rs`).
//!
//! The sans-IO [`baselines::tfrc::TfrcReceiver`] measures the loss event rate and the
//! receive rate and says when to report; this shell feeds it the RTP data packets from a UDP
//! socket and sends its `TfrcFeedback` back to the data's source address. Unicast, one
//! sender: the first valid data packet fixes the peer, packets from elsewhere are counted
//! (`foreign`) and dropped; packets that are not RTP with a valid TFRC element (ID
//! [`ELEMENT_ID`], version 1, exact length) are counted (`malformed`) and dropped.
//!
//! Why not through the layered receive loop: that loop joins multicast groups named by a
//! SAM and drives `LayeredController`s; a TFRC flow has no SAM, groups or layers, and its
//! receiver needs the per-packet TFRC fields, so it has its own small loop here.
//!
//! `--out DIR` writes `DIR/player.jsonl`: one line per second with the same `t`,
//! `elapsed_s`, `rate_bps`, `packets_1s`, `lost_1s` as the layered player (so the testbed
//! reads both alike) plus a `tfrc` member, and an `exit` line.

use crate::error::{Error, Result};
use baselines::tfrc::{TfrcReceiver, TfrcReceiverConfig};
use clap::Parser;
use codec::rtp::RtpPacket;
use congestion::wire::tfrc::TfrcDataFields;
use congestion::Time;
use serde_json::json;
use std::io::Write;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// RFC 8285 element ID of the TFRC data fields (as `server/src/tfrc.rs` writes them).
pub const ELEMENT_ID: u8 = 3;

/// Receiver options.
#[derive(Clone, Debug)]
pub struct RecvConfig {
    pub listen: SocketAddrV4,
    pub out: Option<PathBuf>,
    pub duration: Option<f64>,
    pub viewer_id: String,
}

/// The receiver's command line (`layercast-player --controller tfrc --help`).
#[derive(Debug, Parser)]
#[command(
    name = "layercast-player",
    version,
    about = "layercast-player --controller tfrc: receive one live unicast TFRC flow",
    long_about = None,
    override_usage = "layercast-player --controller tfrc --listen <ADDR:PORT> [OPTIONS]",
    args_override_self = true,
    allow_negative_numbers = true
)]
struct Cli {
    /// Selects this receiver
    #[arg(long, value_name = "tfrc", value_parser = ["tfrc"], required = true)]
    controller: String,
    /// Where the data arrives (layercast-server tfrc --to ADDR:PORT)
    #[arg(long, value_name = "ADDR:PORT")]
    listen: SocketAddrV4,
    /// Write DIR/player.jsonl (one JSON line per second)
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Stop after this long
    #[arg(long, value_name = "SECS", value_parser = crate::cli::duration_secs)]
    duration: Option<f64>,
    /// The viewer's id in the log [default: p<pid>]
    #[arg(long, value_name = "ID")]
    viewer_id: Option<String>,
    /// Accepted and ignored (the layered player's flag)
    #[arg(long)]
    headless: bool,
    /// Accepted and ignored (the layered player's flag)
    #[arg(long, value_name = "ADDR")]
    interface: Option<std::net::Ipv4Addr>,
}

/// Whether the command line asks for the TFRC receiver (`--controller tfrc`).
pub fn wanted(args: &[String]) -> bool {
    args.windows(2)
        .any(|w| w[0] == "--controller" && w[1] == "tfrc")
        || args.iter().any(|a| a == "--controller=tfrc")
}

/// Parses the receiver's flags (without the program name); `Ok(None)` after `--help` or
/// `--version` printed their text. A bad command line is [`Error::Cli`].
pub fn parse_args(args: &[String]) -> Result<Option<RecvConfig>> {
    let argv = std::iter::once("layercast-player").chain(args.iter().map(String::as_str));
    let cli = match Cli::try_parse_from(argv) {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return Ok(None);
        }
        Err(e) => return Err(Error::Cli(e)),
    };
    Ok(Some(RecvConfig {
        listen: cli.listen,
        out: cli.out,
        duration: cli.duration,
        viewer_id: cli
            .viewer_id
            .unwrap_or_else(|| format!("p{}", std::process::id())),
    }))
}

/// Totals at exit.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecvSummary {
    pub packets: u64,
    pub bytes: u64,
    pub malformed: u64,
    pub foreign: u64,
    pub feedbacks: u64,
    /// Packets declared lost, loss events (the loss history's counters).
    pub lost: u64,
    pub loss_events: u64,
    pub p: f64,
}

/// Parses one datagram as a TFRC data packet.
pub fn parse_data(buf: &[u8]) -> Option<TfrcDataFields> {
    let p = RtpPacket::parse(buf).ok()?;
    TfrcDataFields::parse(p.extension(ELEMENT_ID)?).ok()
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

/// Runs the receiver until `stop` or the duration.
pub fn run(cfg: &RecvConfig, stop: &AtomicBool) -> Result<RecvSummary> {
    let sock =
        UdpSocket::bind(cfg.listen).map_err(|e| Error::io(format!("bind {}", cfg.listen), e))?;
    sock.set_nonblocking(true)
        .map_err(|e| Error::io("non-blocking socket", e))?;
    // A receive buffer of 2 MB (as the layered receiver's, `net.rs`; the kernel caps it at
    // `net.core.rmem_max`): the default ~200 kB holds well under 100 ms of a few Mbit/s, and
    // a receiver held off the CPU that long lost packets the path had delivered.
    let rcvbuf: libc::c_int = 2 << 20;
    // SAFETY: a valid socket fd, a c_int option value of the stated size.
    let r = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&sock),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &rcvbuf as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(Error::io("SO_RCVBUF", std::io::Error::last_os_error()));
    }
    let mut log = match &cfg.out {
        Some(d) => {
            std::fs::create_dir_all(d)
                .map_err(|e| Error::io(format!("mkdir {}", d.display()), e))?;
            let p = d.join("player.jsonl");
            Some(std::io::BufWriter::new(std::fs::File::create(&p).map_err(
                |e| Error::io(format!("create {}", p.display()), e),
            )?))
        }
        None => None,
    };
    let mut line = |v: serde_json::Value| {
        if let Some(w) = &mut log {
            let _ = writeln!(w, "{v}");
            let _ = w.flush();
        }
    };
    let mut rx = TfrcReceiver::new(TfrcReceiverConfig::default());
    let start = Instant::now();
    let clock = || Time::from_micros(start.elapsed().as_micros() as u64);
    let end = cfg.duration.map(|d| start + Duration::from_secs_f64(d));
    let mut sum = RecvSummary::default();
    let mut peer: Option<SocketAddr> = None;
    let mut buf = [0u8; 65_536];
    let mut next_sec = 1.0f64;
    let mut sec = (0u64, 0u64, 0u64); // bytes, packets, lost counter at the second's start
    let mut prev_elapsed = 0.0f64;
    loop {
        if stop.load(Ordering::SeqCst) || end.is_some_and(|e| Instant::now() >= e) {
            break;
        }
        let now = clock();
        let t = now.as_secs_f64();
        if rx.poll_timeout().is_some_and(|d| now >= d) {
            rx.handle_timeout(now);
        }
        while let Some(fb) = rx.poll_feedback() {
            if let Some(p) = peer {
                // A send error (ENOBUFS, unreachable) is a lost report; TFRC tolerates it.
                let _ = sock.send_to(&fb.to_bytes(), p);
                sum.feedbacks += 1;
            }
        }
        if t >= next_sec {
            let dt = (t - prev_elapsed).max(1e-9);
            let (_, lost, events) = rx.history().counters();
            line(
                json!({"t": crate::net::realtime_ns() as f64 / 1e9, "elapsed_s": t,
                "rate_bps": 8.0 * sec.0 as f64 / dt, "packets_1s": sec.1,
                "lost_1s": lost - sec.2, "viewer": cfg.viewer_id,
                "tfrc": {"p": rx.loss_event_rate(), "x_recv_bps": 8.0 * rx.x_recv(now),
                         "feedbacks": sum.feedbacks, "loss_events": events,
                         "malformed": sum.malformed, "foreign": sum.foreign}}),
            );
            sec = (0, 0, lost);
            prev_elapsed = t;
            next_sec += 1.0;
        }
        let mut wake = next_sec;
        if let Some(d) = rx.poll_timeout() {
            wake = wake.min(d.as_secs_f64());
        }
        let wait = (wake - clock().as_secs_f64()).clamp(50e-6, 0.05);
        if !wait_readable(sock.as_raw_fd(), Duration::from_secs_f64(wait)) {
            continue;
        }
        match sock.recv_from(&mut buf) {
            Ok((n, from)) => {
                let Some(f) = parse_data(&buf[..n]) else {
                    sum.malformed += 1;
                    continue;
                };
                match peer {
                    None => peer = Some(from),
                    Some(p) if p != from => {
                        sum.foreign += 1;
                        continue;
                    }
                    Some(_) => {}
                }
                rx.handle_data(clock(), &f, n as u32);
                sum.packets += 1;
                sum.bytes += n as u64;
                sec.0 += n as u64;
                sec.1 += 1;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(Error::io("receive data", e)),
        }
    }
    let (_, lost, events) = rx.history().counters();
    sum.lost = lost;
    sum.loss_events = events;
    sum.p = rx.loss_event_rate();
    line(json!({"event": "exit", "elapsed_s": clock().as_secs_f64(),
        "t": crate::net::realtime_ns() as f64 / 1e9, "packets": sum.packets, "bytes": sum.bytes,
        "lost": lost, "loss_events": events, "p": sum.p, "feedbacks": sum.feedbacks,
        "malformed": sum.malformed, "foreign": sum.foreign}));
    eprintln!(
        "layercast-player tfrc: {} packets ({} lost, {} loss events, p {:.4}), {} feedbacks, {} malformed, {} foreign",
        sum.packets, lost, events, sum.p, sum.feedbacks, sum.malformed, sum.foreign
    );
    Ok(sum)
}

/// `layercast-player --controller tfrc ...`: exit code.
pub fn main(args: &[String], stop: &AtomicBool) -> i32 {
    match parse_args(args) {
        Ok(None) => 0,
        Ok(Some(c)) => match run(&c, stop) {
            Ok(_) => 0,
            Err(e) => {
                eprintln!("layercast-player: {e}");
                1
            }
        },
        Err(Error::Cli(e)) => {
            let _ = e.print();
            2
        }
        Err(e) => {
            eprintln!("layercast-player: {e}");
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baselines::tfrc::{TfrcSender, TfrcSenderConfig};
    use clap::CommandFactory;
    use codec::rtp::RtpHeader;
    use congestion::wire::tfrc::TfrcFeedback;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    /// The clap error of a command line that must not parse, as text.
    fn clap_err(s: &str, kind: clap::error::ErrorKind) -> String {
        match parse_args(&args(s)) {
            Err(Error::Cli(e)) => {
                assert_eq!(e.kind(), kind, "{s}: {e}");
                e.to_string()
            }
            Err(e) => panic!("{s}: not a clap error: {e}"),
            Ok(_) => panic!("{s} parsed"),
        }
    }

    #[test]
    fn flags() {
        use clap::error::ErrorKind;
        assert!(wanted(&args("--controller tfrc --listen 127.0.0.1:1")));
        assert!(wanted(&args("--listen 127.0.0.1:1 --controller=tfrc")));
        assert!(!wanted(&args("--controller tfmcc")));
        let c = parse_args(&args(
            "--controller tfrc --listen 127.0.0.1:9 --headless --duration 2 --interface 10.0.0.1",
        ))
        .unwrap()
        .unwrap();
        assert_eq!(c.listen, "127.0.0.1:9".parse().unwrap());
        assert_eq!(c.duration, Some(2.0));
        assert_eq!(
            (c.out, c.viewer_id),
            (None, format!("p{}", std::process::id()))
        );
        // The testbed's command line (e2e/src/tfrc-checks.ts), and the `=` spelling.
        let c = parse_args(&args(
            "--controller=tfrc --listen=10.1.0.2:6001 --out /tmp/r --duration 31.5 --viewer-id r1",
        ))
        .unwrap()
        .unwrap();
        assert_eq!(c.out, Some(PathBuf::from("/tmp/r")));
        assert_eq!((c.duration, c.viewer_id.as_str()), (Some(31.5), "r1"));
        let e = clap_err("--controller tfrc", ErrorKind::MissingRequiredArgument);
        assert!(e.contains("--listen"), "{e}");
        let e = clap_err("--controller tfrc --listen x", ErrorKind::ValueValidation);
        assert!(e.contains("--listen"), "{e}");
        let e = clap_err(
            "--controller tfrc --listen 127.0.0.1:9 --bogus 1",
            ErrorKind::UnknownArgument,
        );
        assert!(e.contains("--bogus"), "{e}");
        let e = clap_err("--controller tfrc --listen", ErrorKind::InvalidValue);
        assert!(e.contains("--listen"), "{e}");
        for d in ["0", "-1", "inf", "1e10"] {
            let e = clap_err(
                &format!("--controller tfrc --listen 127.0.0.1:9 --duration {d}"),
                ErrorKind::ValueValidation,
            );
            assert!(e.contains("--duration") && e.contains("positive"), "{e}");
        }
        let e = clap_err(
            "--controller tfrc --listen 127.0.0.1:9 --interface eth0",
            ErrorKind::ValueValidation,
        );
        assert!(e.contains("--interface"), "{e}");
        // Flags of the layered player that this receiver does not take.
        let e = clap_err(
            "--controller tfrc --listen 127.0.0.1:9 --announce 239.1.1.1:5000",
            ErrorKind::UnknownArgument,
        );
        assert!(e.contains("--announce"), "{e}");
        assert!(parse_args(&args("--controller tfrc --help"))
            .unwrap()
            .is_none());
        assert!(parse_args(&args("--controller tfrc --version"))
            .unwrap()
            .is_none());
        let help = Cli::command().render_help().to_string();
        for s in [
            "--listen <ADDR:PORT>",
            "layercast-server tfrc --to",
            "--out <DIR>",
            "--duration <SECS>",
            "--viewer-id <ID>",
            "p<pid>",
            "--headless",
            "--interface <ADDR>",
            "ignored",
            "--version",
        ] {
            assert!(help.contains(s), "--help lacks {s:?}:\n{help}");
        }
    }

    fn packet(f: &TfrcDataFields, size: usize) -> Vec<u8> {
        let h = RtpHeader {
            payload_type: 96,
            sequence_number: f.seq as u16,
            ssrc: 1,
            extensions: vec![(ELEMENT_ID, f.to_bytes())],
            ..Default::default()
        };
        let mut out = Vec::new();
        h.write(&vec![0; size - h.header_len()], &mut out).unwrap();
        out
    }

    /// The live receiver on loopback against a test sender built from `TfrcSender` that
    /// skips (never sends) every 25th sequence number and slips junk in: the receiver must
    /// report a loss event rate near 1/25 and a receive rate, count the junk, and write its
    /// per-second log.
    #[test]
    fn loopback_receiver_reports_loss_and_counts_junk() {
        let dir = std::env::temp_dir().join(format!("lc-tfrc-rx-{}", std::process::id()));
        let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
        let listen = match probe.local_addr().unwrap() {
            SocketAddr::V4(a) => a,
            _ => unreachable!(),
        };
        drop(probe);
        let cfg = RecvConfig {
            listen,
            out: Some(dir.clone()),
            duration: Some(2.5),
            viewer_id: "t".into(),
        };
        let rxt = std::thread::spawn(move || run(&cfg, &AtomicBool::new(false)));
        // Start sending once the receiver's socket is bound (the kernel's UDP table lists
        // its port), not after a fixed sleep: on a loaded host the thread took longer to
        // bind, and the first packets and the junk below went to a closed port. (Binding the
        // port to test it would race the receiver's own bind.)
        let port = format!(":{:04X}", listen.port());
        let ready = Instant::now();
        while !std::fs::read_to_string("/proc/net/udp")
            .unwrap_or_default()
            .lines()
            .any(|l| {
                l.split_whitespace()
                    .nth(1)
                    .is_some_and(|a| a.ends_with(&port))
            })
        {
            assert!(
                ready.elapsed() < Duration::from_secs(10),
                "receiver never bound"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_nonblocking(true).unwrap();
        let mut tx = TfrcSender::new(TfrcSenderConfig {
            packet_size: 400,
            ..Default::default()
        });
        let start = Instant::now();
        let mut buf = [0u8; 256];
        let mut fbs = Vec::new();
        let mut sent = 0u32;
        // Send times of the packets left out, and the largest RTT the sender stamped.
        let mut dropped_at: Vec<Time> = Vec::new();
        let mut max_rtt_us = 0u32;
        // A fixed 2000 packets/s; the receiver's reports are parsed and fed to the sender
        // so that it stamps an RTT into the data (the receiver's feedback timer needs it).
        while start.elapsed() < Duration::from_secs(2) {
            let now = Time::from_micros(start.elapsed().as_micros() as u64);
            if now.as_secs_f64() * 2000.0 > sent as f64 {
                let f = tx.data_header(now);
                sent += 1;
                max_rtt_us = max_rtt_us.max(f.rtt_us);
                if f.seq % 25 != 24 {
                    sock.send_to(&packet(&f, 400), listen).unwrap();
                } else {
                    dropped_at.push(now);
                }
                if sent == 100 {
                    sock.send_to(b"not rtp", listen).unwrap();
                    sock.send_to(&packet(&f, 400)[..30], listen).unwrap();
                }
            }
            match sock.recv_from(&mut buf) {
                Ok((n, _)) => {
                    let fb = TfrcFeedback::parse(&buf[..n]).unwrap();
                    let now = Time::from_micros(start.elapsed().as_micros() as u64);
                    tx.handle_feedback(now, &fb);
                    fbs.push(fb);
                }
                Err(_) => std::thread::sleep(Duration::from_micros(100)),
            }
        }
        let sum = rxt.join().unwrap().unwrap();
        assert_eq!(sum.malformed, 2, "{sum:?}");
        assert_eq!(sum.foreign, 0);
        assert!(sum.packets > 3000, "{sum:?}");
        assert!(sum.lost > 100 && sum.loss_events > 100, "{sum:?}");
        let p = fbs.last().unwrap().p();
        // One loss in 25 packets: p = 1/25 when every loss is its own loss event. Losses sent
        // within one RTT of an event's first loss join that event (RFC 5348 §5.2): on a
        // loaded host the sender catches up in bursts and the feedback (so the RTT) is
        // delayed, so the lower bound scales with the fewest events the stamped RTTs allow.
        let window = Duration::from_micros(u64::from(max_rtt_us));
        let mut events = 0usize;
        let mut start: Option<Time> = None;
        for &t in &dropped_at {
            if start.is_none_or(|s| t.saturating_since(s) > window) {
                events += 1;
                start = Some(t);
            }
        }
        let share = events as f64 / dropped_at.len().max(1) as f64;
        assert!(
            p > 0.03 * share && p < 0.05,
            "p = {p}, {events} of {} losses at least apart by the largest stamped RTT {max_rtt_us} us",
            dropped_at.len()
        );
        // 2000 packets/s of 400 B, 24 in 25 delivered: about 6.1 Mbit/s of receive rate.
        // X_recv is over one RTT (RFC 5348 §6.2), here a loopback RTT of at most 1 ms that
        // holds 1-3 packets: only its sign is checked; the rate is checked on the log.
        assert!(fbs.last().unwrap().x_recv_bps > 0);
        let log = std::fs::read_to_string(dir.join("player.jsonl")).unwrap();
        // The second logged second (receiver time 1-2 s) is all inside the sending: 2000
        // packets/s of 400 B with 1 in 25 never sent = 6.144 Mbit/s.
        let second: serde_json::Value = serde_json::from_str(log.lines().nth(1).unwrap()).unwrap();
        let r = second["rate_bps"].as_f64().unwrap();
        assert!((r / 6.144e6 - 1.0).abs() < 0.1, "{second}");
        assert!(log.contains("\"event\":\"exit\""));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
