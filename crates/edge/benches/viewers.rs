//! How many viewers one edge core serves at about 1 Mbit/s each, and the latency it adds
//! (`make edge-bench`; docs/edge.md "Benchmark").
//!
//! One thread (pinned to CPU 0) runs the edge core with one UDP socket on loopback and feeds it
//! a looped libvpx clip (640x360 L3T3 whose top operating point is about 1 Mbit/s), each layer
//! spread over the frame interval as the server's pacer spreads it. Another thread (CPU 1)
//! runs the load client: str0m peers, each with its own socket, doing what a browser's stack
//! does for the edge (ICE, DTLS-SRTP, receiver reports, transport-wide feedback, NACKs). The
//! number of viewers grows in steps; each step is measured for `--secs`: the media rate each
//! viewer receives, the pictures it completes at the top layer, the edge thread's CPU time, and
//! the edge-added latency (a frame's last packet fed to the edge -> received by the client).
//! A step passes when every viewer gets ≥ 90 % of the top layer's pictures and the edge thread
//! used < 90 % of its core. Flags: `--start N --step N --max N --secs S`.
//!
//! The client stamps each datagram with the kernel's receive time (`SO_TIMESTAMPNS`), as a
//! browser's network thread stamps it on arrival: with hundreds of peers on one core the
//! client reaches a datagram milliseconds after it arrived, and that lag, fed to str0m as
//! the arrival time, went into the transport-wide feedback as queueing delay the edge's
//! estimate then read as congestion (and into the latency figure as the edge's).

use codec::vp9rtp::PayloadDescriptor;
use edge::source::Source;
use edge::{Edge, EdgeConfig, UpstreamPacket};
use std::collections::{HashMap, VecDeque};
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use str0m::change::SdpAnswer;
use str0m::media::{Direction, MediaKind};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, Input, Output, Rtc};

const FRAME: Duration = Duration::from_micros(33_333);
/// A frame's last packet fed to the edge, by (browser-side picture ID, spatial layer).
type FedAt = Arc<Mutex<HashMap<(u16, u8), Instant>>>;

enum Cmd {
    Add(String, mpsc::Sender<Result<String, String>>),
    Report(mpsc::Sender<EdgeReport>),
    Stop,
}

struct EdgeReport {
    viewers: usize,
    top: usize,
    cpu: Duration,
    /// Layer down-switches so far (every viewer).
    downs: u64,
    /// The edge's own latency samples since the last report (frame complete at the edge ->
    /// its last packet out of str0m), microseconds.
    edge_lat: Vec<u64>,
    /// Longest pass of the edge loop since the last report, and passes made.
    longest_pass: Duration,
    passes: u64,
}

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The edge thread: the core, the socket, the looped source.
fn edge_thread(cmds: mpsc::Receiver<Cmd>, addr_tx: mpsc::Sender<SocketAddr>, fed: FedAt) {
    pin(0);
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
    sock.set_nonblocking(true).expect("nonblocking");
    let local = sock.local_addr().expect("addr");
    let _ = socket2::SockRef::from(&sock).set_send_buffer_size(8 << 20);
    let _ = socket2::SockRef::from(&sock).set_recv_buffer_size(8 << 20);
    addr_tx.send(local).expect("main");
    let mut src = Source::small_l3t3(1000, 60).expect("source");
    let clip: Vec<_> = (0..120)
        .map(|_| src.encode_next().expect("encode"))
        .collect();
    let info = src.session().clone();
    let mut conf = EdgeConfig::new(local);
    conf.max_viewers = 2000;
    conf.rtc.initial_estimate_bps = 1_500_000;
    conf.log_latency = true;
    let mut edge = Edge::new(conf);
    edge.set_session("bench", info).expect("session");
    let mut feed: VecDeque<(Instant, usize, Vec<u8>)> = VecDeque::new();
    let t0 = Instant::now();
    let mut n = 0u64;
    let mut buf = vec![0u8; 2048];
    let mut longest_pass = Duration::ZERO;
    let mut passes = 0u64;
    let mut pass_start = Instant::now();
    loop {
        let now = Instant::now();
        longest_pass = longest_pass.max(now - pass_start);
        pass_start = now;
        passes += 1;
        while let Ok(c) = cmds.try_recv() {
            match c {
                Cmd::Add(offer, reply) => {
                    let r = edge
                        .add_viewer(now, "bench", &offer)
                        .map(|(_, a)| a)
                        .map_err(|e| e.to_string());
                    let _ = reply.send(r);
                }
                Cmd::Report(reply) => {
                    let reps = edge.reports(now);
                    let mut edge_lat = Vec::new();
                    for r in &reps {
                        edge_lat.extend(edge.take_latency_log(r.id));
                    }
                    let _ = reply.send(EdgeReport {
                        viewers: reps.len(),
                        top: reps
                            .iter()
                            .filter(|r| r.current.spatial == 2 && r.current.temporal == 2)
                            .count(),
                        cpu: thread_cpu(),
                        downs: edge.counters().layer_switches_down,
                        edge_lat,
                        longest_pass: std::mem::take(&mut longest_pass),
                        passes: std::mem::take(&mut passes),
                    });
                }
                Cmd::Stop => return,
            }
        }
        // The source: picture n at t0 + n frames, each layer spread over 80 % of a frame.
        while feed.len() < 64 {
            let mut pic = clip[(n % clip.len() as u64) as usize].clone();
            pic.pts += (n / clip.len() as u64 * clip.len() as u64) as i64 * 3000;
            let p = src.packetize(&pic).expect("packetize");
            let base = t0 + FRAME * n as u32;
            for (k, pkts) in p.layers.into_iter().enumerate() {
                let m = pkts.len().max(1) as u32;
                for (j, b) in pkts.into_iter().enumerate() {
                    feed.push_back((base + FRAME.mul_f64(0.8) * j as u32 / m, k, b));
                }
            }
            let mut v: Vec<_> = feed.drain(..).collect();
            v.sort_by_key(|x| x.0);
            feed.extend(v);
            n += 1;
        }
        while feed.front().is_some_and(|x| x.0 <= now) {
            let (_, k, b) = feed.pop_front().expect("front");
            let at = Instant::now();
            if let Ok(pk) = codec::rtp::RtpPacket::parse(&b) {
                if let Ok((d, _)) = PayloadDescriptor::parse(pk.payload()) {
                    if d.end {
                        let mut m = fed.lock().expect("fed");
                        m.insert(
                            (
                                d.picture_id.unwrap_or(0) & 0x7fff,
                                d.layer.map_or(0, |l| l.sid),
                            ),
                            at,
                        );
                        if m.len() > 4000 {
                            m.retain(|_, t| at.duration_since(*t) < Duration::from_secs(3));
                        }
                    }
                }
            }
            edge.handle_upstream(
                at,
                "bench",
                UpstreamPacket {
                    track: 0,
                    stream: k as u8,
                    rtp: &b,
                    at,
                },
            );
        }
        while let Ok((len, from)) = sock.recv_from(&mut buf) {
            edge.handle_datagram(Instant::now(), from, local, &buf[..len]);
        }
        let now = Instant::now();
        if edge.poll_timeout().is_some_and(|t| t <= now) {
            edge.handle_timeout(now);
        }
        while let Some(t) = edge.poll_transmit() {
            let _ = sock.send_to(&t.contents, t.destination);
        }
        while let Some(e) = edge.poll_event() {
            // Down-switches say why (to stderr): on loopback each one is a misreading.
            if let edge::EdgeEvent::Target {
                viewer,
                from: Some(from),
                to,
                reason,
                estimate_bps,
                loss,
            } = e
            {
                if to < from {
                    eprintln!(
                        "down: viewer {viewer} {from:?} -> {to:?} ({reason}, estimate {:.0} kbit/s, loss {loss:.3})",
                        estimate_bps / 1000.0
                    );
                }
            }
        }
        let next = [edge.poll_timeout(), feed.front().map(|x| x.0)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now + Duration::from_millis(5));
        let wait = next
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(5));
        if !wait.is_zero() {
            let mut pfd = libc::pollfd {
                fd: sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = wait.as_millis().max(1) as i32;
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, ms) };
        }
    }
}

#[derive(Default)]
struct ClientStats {
    bytes: AtomicU64,
    top_pictures: AtomicU64,
    connected: AtomicU64,
}

/// One load client: a str0m peer on its own socket.
async fn client(
    cmds: mpsc::Sender<Cmd>,
    st: Arc<ClientStats>,
    fed: FedAt,
    lat: Arc<Mutex<Vec<(u8, u64)>>>,
) {
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let local = sock.local_addr().expect("addr");
    enable_timestamps(sock.as_raw_fd());
    let mut rtc = Rtc::builder().set_rtp_mode(true).build(Instant::now());
    rtc.add_local_candidate(Candidate::host(local, "udp").expect("candidate"));
    let mut api = rtc.sdp_api();
    api.add_media(MediaKind::Video, Direction::RecvOnly, None, None, None);
    let (offer, pending) = api.apply().expect("offer");
    let (tx, rx) = mpsc::channel();
    if cmds.send(Cmd::Add(offer.to_sdp_string(), tx)).is_err() {
        return;
    }
    let answer = loop {
        match rx.try_recv() {
            Ok(a) => break a,
            Err(mpsc::TryRecvError::Empty) => tokio::time::sleep(Duration::from_millis(2)).await,
            Err(_) => return,
        }
    };
    let Ok(answer) = answer else { return };
    let answer = SdpAnswer::from_sdp_string(&answer).expect("answer");
    rtc.sdp_api()
        .accept_answer(pending, answer)
        .expect("accept");
    let mut buf = vec![0u8; 2048];
    let mut samples = Vec::new();
    loop {
        let timeout = loop {
            match rtc.poll_output() {
                Ok(Output::Timeout(t)) => break t,
                Ok(Output::Transmit(t)) => {
                    let _ = sock.send_to(&t.contents, t.destination).await;
                }
                Ok(Output::Event(Event::Connected)) => {
                    st.connected.store(1, Ordering::Relaxed);
                }
                Ok(Output::Event(Event::RtpPacket(p))) => {
                    let now = p.timestamp;
                    st.bytes
                        .fetch_add(p.payload.len() as u64, Ordering::Relaxed);
                    if let Ok((d, _)) = PayloadDescriptor::parse(&p.payload) {
                        let sid = d.layer.map_or(0, |l| l.sid);
                        if d.end {
                            if p.header.marker && sid == 2 {
                                st.top_pictures.fetch_add(1, Ordering::Relaxed);
                            }
                            let key = (d.picture_id.unwrap_or(0) & 0x7fff, sid);
                            if let Some(t) = fed.lock().expect("fed").get(&key) {
                                samples.push((
                                    sid,
                                    now.saturating_duration_since(*t).as_micros() as u64,
                                ));
                            }
                            if samples.len() >= 64 {
                                lat.lock().expect("lat").append(&mut samples);
                            }
                        }
                    }
                }
                Ok(Output::Event(_)) => {}
                Err(_) => return,
            }
        };
        let wait = timeout.saturating_duration_since(Instant::now());
        tokio::select! {
            r = sock.readable() => {
                if r.is_err() {
                    return;
                }
                let fd = sock.as_raw_fd();
                let Ok((n, from, at)) = sock.try_io(tokio::io::Interest::READABLE, || recv_stamped(fd, &mut buf)) else { continue };
                let Ok(contents) = (&buf[..n]).try_into() else { continue };
                let input = Input::Receive(at, Receive { proto: Protocol::Udp, source: from, destination: local, contents });
                if rtc.handle_input(input).is_err() {
                    return;
                }
            }
            _ = tokio::time::sleep(wait) => {
                if rtc.handle_input(Input::Timeout(Instant::now())).is_err() {
                    return;
                }
            }
        }
    }
}

fn enable_timestamps(fd: RawFd) {
    let on: libc::c_int = 1;
    // SAFETY: a valid socket and an int option of the right size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "SO_TIMESTAMPNS: {}", std::io::Error::last_os_error());
}

/// One datagram from an IPv4 socket with `SO_TIMESTAMPNS` on: its length, its source, and
/// when it reached the socket (the kernel's wall-clock stamp moved onto the monotonic clock;
/// now if the stamp is missing).
fn recv_stamped(fd: RawFd, buf: &mut [u8]) -> std::io::Result<(usize, SocketAddr, Instant)> {
    let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut cmsg = [0u64; 8];
    // SAFETY: a zeroed msghdr is valid; every pointer set below outlives the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut addr as *mut libc::sockaddr_in).cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cmsg);
    // SAFETY: msg points at live buffers of the sizes it states.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let now = Instant::now();
    let mut at = now;
    // SAFETY: the CMSG_* walk stays inside msg_control as the kernel filled it.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                let stamp = UNIX_EPOCH + Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
                let lag = SystemTime::now().duration_since(stamp).unwrap_or_default();
                at = now.checked_sub(lag).unwrap_or(now);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    let from = SocketAddrV4::new(
        u32::from_be(addr.sin_addr.s_addr).into(),
        u16::from_be(addr.sin_port),
    );
    Ok((n as usize, SocketAddr::V4(from), at))
}

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list" || a == "--test") {
        return; // cargo test --benches: nothing to list
    }
    let start = arg(&args, "--start", 50) as usize;
    let step = arg(&args, "--step", 50) as usize;
    let max = arg(&args, "--max", 300) as usize;
    let secs = arg(&args, "--secs", 10);
    let fed: FedAt = Arc::new(Mutex::new(HashMap::new()));
    let (cmd_tx, cmd_rx) = mpsc::channel();
    let (addr_tx, addr_rx) = mpsc::channel();
    let fed2 = fed.clone();
    let edge_t = std::thread::spawn(move || edge_thread(cmd_rx, addr_tx, fed2));
    // The edge is listening once it reports its address (the clients learn it from the answer).
    addr_rx.recv().expect("edge address");
    let lat = Arc::new(Mutex::new(Vec::new()));
    let stats: Arc<Mutex<Vec<Arc<ClientStats>>>> = Arc::new(Mutex::new(Vec::new()));
    let (spawn_tx, spawn_rx) = mpsc::channel::<usize>();
    {
        let (cmd_tx, fed, lat, stats) = (cmd_tx.clone(), fed.clone(), lat.clone(), stats.clone());
        std::thread::spawn(move || {
            pin(1);
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("rt");
            rt.block_on(async move {
                loop {
                    let n = match spawn_rx.try_recv() {
                        Ok(n) => n,
                        Err(mpsc::TryRecvError::Empty) => {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            continue;
                        }
                        Err(_) => return,
                    };
                    for _ in 0..n {
                        let st = Arc::new(ClientStats::default());
                        stats.lock().expect("stats").push(st.clone());
                        tokio::spawn(client(cmd_tx.clone(), st, fed.clone(), lat.clone()));
                        tokio::task::yield_now().await;
                    }
                }
            });
        });
    }
    let report = || {
        let (tx, rx) = mpsc::channel();
        cmd_tx.send(Cmd::Report(tx)).expect("edge");
        rx.recv().expect("report")
    };
    let source_pps = 30.0;
    let mut best = 0usize;
    let mut best_p50 = f64::NAN;
    // Where the time went at that step (the row's p50 counts every spatial frame).
    let mut best_detail = String::new();
    // The first step's latency, for the record when no step is served.
    let mut first_p50: Option<(usize, f64)> = None;
    let mut rows = Vec::new();
    let mut n = 0usize;
    let mut target = start;
    while target <= max {
        spawn_tx.send(target - n).expect("clients");
        n = target;
        // Let every new viewer connect, start and climb to the top layer.
        let settle_end = Instant::now() + Duration::from_secs(15);
        while Instant::now() < settle_end {
            std::thread::sleep(Duration::from_millis(500));
            let r = report();
            if r.viewers == n && r.top == n {
                break;
            }
        }
        let snap = |s: &Vec<Arc<ClientStats>>| -> Vec<(u64, u64)> {
            s.iter()
                .map(|c| {
                    (
                        c.bytes.load(Ordering::Relaxed),
                        c.top_pictures.load(Ordering::Relaxed),
                    )
                })
                .collect()
        };
        let r0 = report();
        let a = snap(&stats.lock().expect("stats"));
        lat.lock().expect("lat").clear();
        let t = Instant::now();
        std::thread::sleep(Duration::from_secs(secs));
        let dt = t.elapsed().as_secs_f64();
        let r1 = report();
        let b = snap(&stats.lock().expect("stats"));
        let cpu = (r1.cpu - r0.cpu).as_secs_f64() / dt;
        let mut rates: Vec<f64> = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (y.0 - x.0) as f64 * 8.0 / dt)
            .collect();
        let pics: Vec<f64> = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (y.1 - x.1) as f64 / dt / source_pps)
            .collect();
        rates.sort_by(f64::total_cmp);
        let tagged = std::mem::take(&mut *lat.lock().expect("lat"));
        let mut l: Vec<u64> = tagged.iter().map(|x| x.1).collect();
        l.sort_unstable();
        let pct_of = |l: &[u64], p: f64| {
            l.get(((l.len() as f64 * p) as usize).min(l.len().saturating_sub(1)))
                .map_or(f64::NAN, |v| *v as f64 / 1000.0)
        };
        let pct = |p: f64| pct_of(&l, p);
        // Where the time goes: per spatial layer at the client, and the edge's own share.
        let by_layer: Vec<String> = (0..3u8)
            .map(|s| {
                let mut v: Vec<u64> = tagged.iter().filter(|x| x.0 == s).map(|x| x.1).collect();
                v.sort_unstable();
                format!("S{s} {:.1}/{:.1}", pct_of(&v, 0.5), pct_of(&v, 0.95))
            })
            .collect();
        let mut el = r1.edge_lat.clone();
        el.sort_unstable();
        let detail = format!(
            "p95 {:.1} ms; client p50/p95 by layer {}; edge (frame complete -> out of str0m) p50 {:.1} p95 {:.1} ms; edge loop {} passes, longest {:.1} ms",
            pct(0.95),
            by_layer.join(", "),
            pct_of(&el, 0.5),
            pct_of(&el, 0.95),
            r1.passes,
            r1.longest_pass.as_secs_f64() * 1000.0
        );
        println!("  detail: {detail}");
        let worst_pics = pics.iter().copied().fold(f64::INFINITY, f64::min);
        let ok = r1.viewers == n && worst_pics >= 0.9 && cpu < 0.9;
        let row = format!(
            "{n} viewers: edge CPU {:.0} % of a core, media rate per viewer min {:.0} / median {:.0} kbit/s, top-layer pictures worst {:.0} % of the source, {} at the top layer, {} layer down-switches, latency p50 {:.1} ms p95 {:.1} ms ({} frames) -> {}",
            cpu * 100.0,
            rates.first().copied().unwrap_or(0.0) / 1000.0,
            rates.get(rates.len() / 2).copied().unwrap_or(0.0) / 1000.0,
            worst_pics * 100.0,
            r1.top,
            r1.downs - r0.downs,
            pct(0.5),
            pct(0.95),
            l.len(),
            if ok { "served" } else { "NOT served" }
        );
        println!("{row}");
        first_p50.get_or_insert((n, pct(0.5)));
        rows.push(row);
        if !ok {
            break;
        }
        best = n;
        best_p50 = pct(0.5);
        best_detail = detail;
        target += step;
    }
    let _ = cmd_tx.send(Cmd::Stop);
    let _ = edge_t.join();
    let cmd = "make edge-bench";
    testkit::record(
        "issue22/bench-viewers",
        &format!(
            "{best} viewers at ~1 Mbit/s each on one edge core ({})",
            rows.last().cloned().unwrap_or_default()
        ),
        Some(best >= 200),
        cmd,
    );
    // The latency at the largest served step; with none served, the first step's figure is
    // still a measurement (recorded as such, and not a pass).
    let latency = if best > 0 {
        format!("edge-added latency p50 {best_p50:.1} ms at {best} viewers ({best_detail})")
    } else if let Some((n, p50)) = first_p50 {
        format!("edge-added latency p50 {p50:.1} ms at {n} viewers (a step not served)")
    } else {
        "no step measured".to_string()
    };
    testkit::record(
        "issue22/bench-latency",
        &latency,
        Some(best > 0 && best_p50.is_finite() && best_p50 <= 20.0),
        cmd,
    );
}
