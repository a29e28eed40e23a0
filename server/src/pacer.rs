//! The media thread of a session: a shell around its sans-IO `session::Publisher`, which
//! decides which bunch goes when (the bunch schedule of `congestion::schedule`, the media
//! burst policy, TFMCC's rate) and builds the packets. What stays here is what needs the
//! operating system: the clock, timer slack of 1 ns and `SCHED_FIFO` so the thread wakes on
//! time, sleeping until `spin` before a deadline and spinning the rest, one `sendmmsg` per
//! bunch (so the thread cannot be preempted between two packets of a bunch), the feedback
//! socket, and the bunch start error histogram (actual start minus the Publisher's due time).
//! Pictures come from the encoder thread over a lock-free SPSC ring; key-picture, re-sync and
//! target commands go back through atomics (`crate::video::LayerQueues`).

use congestion::Time;
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Log-spaced histogram of bunch start errors, microseconds (bucket i holds errors < 2^i µs).
#[derive(Debug, Default, Clone)]
pub struct ErrorHistogram {
    pub buckets: [u64; 32],
    pub count: u64,
    pub max_us: u64,
    pub sum_us: u64,
}

impl ErrorHistogram {
    /// Records one error.
    pub fn record(&mut self, us: u64) {
        let i = (64 - us.leading_zeros()) as usize; // 0 for 0, 1 for 1, 2 for 2..3, ...
        self.buckets[i.min(31)] += 1;
        self.count += 1;
        self.max_us = self.max_us.max(us);
        self.sum_us += us;
    }
    /// Upper bound of the bucket holding quantile `q` (0..1), µs.
    pub fn quantile_us(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let target = (q * self.count as f64).ceil().max(1.0) as u64;
        let mut acc = 0;
        for (i, &c) in self.buckets.iter().enumerate() {
            acc += c;
            if acc >= target {
                return if i == 0 { 0 } else { (1u64 << i) - 1 };
            }
        }
        self.max_us
    }
}

/// Counters shared between the pacer thread and the HTTP side.
#[derive(Debug, Default)]
pub struct PacerStats {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    pub bunches: AtomicU64,
    pub send_errors: AtomicU64,
    pub resyncs: AtomicU64,
    pub realtime: AtomicBool,
    pub per_layer_packets: Mutex<Vec<u64>>,
    /// Media packets waiting per layer at the last flush (`Publisher::queued_packets`).
    pub per_layer_queued: Mutex<Vec<u64>>,
    /// Frames of discardable layers dropped before they were queued, per layer
    /// (`PublisherStats::discarded_frames`).
    pub per_layer_discarded: Mutex<Vec<u64>>,
    pub errors: Mutex<ErrorHistogram>,
    /// Packets the sealer refused (never expected; such a packet is not sent).
    pub seal_errors: AtomicU64,
    /// Nanoseconds spent building and sealing bunches of encrypted sessions (an upper bound on
    /// the cost of encryption), and packets sealed.
    pub seal_ns: AtomicU64,
    pub sealed: AtomicU64,
    /// Video slots without media: sent as FEC repair, or as padding.
    pub repair_packets: AtomicU64,
    pub padding_packets: AtomicU64,
    /// Datagrams read on the session's feedback socket (reports and media requests, before
    /// the Publisher vets them).
    pub feedback_datagrams: AtomicU64,
    /// Viewer reports read on it that the report task could not take (queue full, or
    /// `udp_reports` off).
    pub reports_dropped: AtomicU64,
    /// Retransmission (`PublisherStats::rtx`): packets asked for, sent again, and refused as
    /// not kept or over budget.
    pub rtx_asked: AtomicU64,
    pub rtx_sent: AtomicU64,
    pub rtx_not_kept: AtomicU64,
    pub rtx_over_budget: AtomicU64,
}

/// What the media thread runs.
pub struct PacerConfig {
    /// The session's send side.
    pub publisher: session::publisher::PublisherConfig,
    pub spin: Duration,
    /// Try `SCHED_FIFO` for the thread.
    pub realtime: bool,
    /// Video sessions: the encoder's pictures and the control flags.
    pub video: Option<(
        Arc<crate::video::LayerQueues>,
        rtrb::Consumer<session::publisher::Picture>,
    )>,
    /// The feedback port (TFMCC reports, media requests, viewer reports), when it could be
    /// bound.
    pub feedback: Option<UdpSocket>,
    /// Where viewer reports read on it go (`crate::reports`), with the session's id.
    pub reports: Option<(tokio::sync::mpsc::Sender<crate::reports::Inbound>, Arc<str>)>,
    /// TFMCC sessions: the state the API shows.
    pub tfmcc: Option<Arc<crate::tfmcc::TfmccState>>,
    /// The audio track and the RTCP sender reports: sent between bunches, never inside one
    /// (`crate::media::out`, docs/protocols/audio.md).
    pub side: Option<crate::media::out::SideStreams>,
}

/// Microseconds since the Unix epoch (the cc extension's send time).
pub fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Lets the kernel wake us within a microsecond of the requested time instead of batching
/// wake-ups over the default 50 µs slack.
fn set_timer_slack() {
    // SAFETY: prctl with PR_SET_TIMERSLACK takes an integer argument; no pointers involved.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Asks for `SCHED_FIFO` priority 10 for the media thread (needs root or CAP_SYS_NICE; on
/// failure the thread stays at normal priority). On a loaded host a normal thread can be
/// held off the CPU for milliseconds, which shows up as bunch start error. The thread spins
/// at most `spin` per bunch and sleeps otherwise, and the kernel's RT throttling bounds it.
fn set_realtime() -> bool {
    let p = libc::sched_param { sched_priority: 10 };
    // SAFETY: pthread_self is always valid; p is a valid sched_param.
    unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &p) == 0 }
}

/// Spins until `deadline` (the caller slept until `spin` before it).
fn spin_until(deadline: Instant) {
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
}

/// Waits until `fd` is readable or `timeout` passes (no fd: sleeps).
fn wait_readable(fd: Option<i32>, timeout: Duration) {
    let Some(fd) = fd else {
        std::thread::park_timeout(timeout);
        return;
    };
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask.
    unsafe {
        libc::ppoll(&mut p, 1, &ts, std::ptr::null());
    }
}

/// Longest sleep while media may arrive (the encoder's pictures and receivers' feedback are
/// looked at after at most this long; a burst policy lets media go ahead of its slots).
const MAX_SLEEP: Duration = Duration::from_millis(2);

/// Runs the media thread until `stop`: a loop over the session's [`session::Publisher`]
/// (pictures in from the encoder's ring, feedback in from the socket, bunches out with one
/// `sendmmsg` each, encoder control out through the flags of [`crate::video::LayerQueues`]).
pub fn run(mut cfg: PacerConfig, sock: UdpSocket, stats: Arc<PacerStats>, stop: Arc<AtomicBool>) {
    use session::publisher::EncoderControl;
    set_timer_slack();
    if cfg.realtime {
        stats.realtime.store(set_realtime(), Ordering::Relaxed);
    }
    let t0 = Instant::now();
    let clock = |i: Instant| Time(i.saturating_duration_since(t0).as_nanos() as u64);
    cfg.publisher.clock_offset_us = unix_micros();
    cfg.publisher.start = Time::from_millis(5);
    let n = cfg.publisher.info.layers.len();
    let sealing = cfg.publisher.sealer.is_some();
    let mut publisher = match session::Publisher::new(cfg.publisher) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("layercast-server: media thread: {e}");
            return;
        }
    };
    *stats
        .per_layer_packets
        .lock()
        .unwrap_or_else(|p| p.into_inner()) = vec![0; n];
    let mut local_hist = ErrorHistogram::default();
    let mut last_flush = Instant::now();
    let mut last_snap = t0;
    let mut flushed = PublisherTotals::default();
    let fb_fd = cfg.feedback.as_ref().map(|s| s.as_raw_fd());
    let mut rbuf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        if let Some(side) = cfg.side.as_mut() {
            // Between two bunches: ready audio packets, and the sender reports when due (the
            // loop comes back within MAX_SLEEP, well inside the audio's 20-ms packet period).
            side.poll(clock(Instant::now()), &sock, &mut publisher);
        }
        let now = clock(Instant::now());
        if let Some((q, rx)) = cfg.video.as_mut() {
            while let Ok(pic) = rx.pop() {
                publisher.push_picture(now, pic);
            }
            if q.key_requested.swap(false, Ordering::Relaxed) {
                publisher.request_key();
            }
            let sync = q.sync_requested.swap(0, Ordering::Relaxed);
            for s in 1..8 {
                if sync & (1 << s) != 0 {
                    publisher.request_resync(s);
                }
            }
        }
        if let Some(fb) = &cfg.feedback {
            for _ in 0..256 {
                let Ok((len, from)) = fb.recv_from(&mut rbuf) else {
                    break;
                };
                stats.feedback_datagrams.fetch_add(1, Ordering::Relaxed);
                let b = &rbuf[..len];
                if b.starts_with(crate::reports::MAGIC) {
                    match &cfg.reports {
                        Some((tx, id)) if crate::reports::offer(tx, id, from, b) => {}
                        _ => {
                            stats.reports_dropped.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    continue;
                }
                if len < rbuf.len() {
                    publisher.handle_feedback(clock(Instant::now()), from, &rbuf[..len]);
                }
            }
            // Retransmissions due, from the socket the requests came to (each requester's are
            // spaced; `poll_timeout` wakes the loop for the next).
            while let Some((to, bytes)) = publisher.poll_retransmit(clock(Instant::now())) {
                if fb.send_to(&bytes, to).is_err() {
                    stats.send_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        while let Some(c) = publisher.poll_encoder_control(now) {
            let Some((q, _)) = cfg.video.as_ref() else {
                continue;
            };
            match c {
                EncoderControl::KeyPicture => q.force_key.store(true, Ordering::Relaxed),
                EncoderControl::Resync(m) => {
                    q.force_sync.fetch_or(m, Ordering::Relaxed);
                }
                EncoderControl::Target {
                    kbps,
                    rate_bps,
                    x_bps,
                } => {
                    q.target_kbps.store(u64::from(kbps), Ordering::Relaxed);
                    if let Some(t) = &cfg.tfmcc {
                        t.log_switch(kbps, rate_bps, x_bps);
                    }
                }
            }
        }
        if let Some((q, _)) = cfg.video.as_ref() {
            let (received, _, _) = publisher.requests();
            q.key_requests.store(received, Ordering::Relaxed);
        }
        let due = publisher.poll_timeout(now);
        let due_i = t0 + Duration::from_nanos(due.as_nanos().min(u64::MAX / 2));
        let left = due_i.saturating_duration_since(Instant::now());
        if left > cfg.spin {
            wait_readable(fb_fd, (left - cfg.spin).min(MAX_SLEEP));
            continue;
        }
        spin_until(due_i);
        let now = clock(Instant::now());
        let built = Instant::now();
        if let Some(b) = publisher.poll_transmit(now) {
            if sealing {
                // Building and sealing the bunch: the cost of encryption, bounded above.
                stats
                    .seal_ns
                    .fetch_add(built.elapsed().as_nanos() as u64, Ordering::Relaxed);
            }
            local_hist.record(now.saturating_since(b.due).as_micros() as u64);
            let sent = send_bunch(&sock, b.packets, b.dests);
            let len = b.packets.len() as u64;
            if sent < len {
                stats.send_errors.fetch_add(len - sent, Ordering::Relaxed);
            }
        }
        if last_flush.elapsed() > Duration::from_millis(250) {
            flush(&stats, &mut local_hist, &publisher, &mut flushed);
            last_flush = Instant::now();
        }
        if let Some(t) = &cfg.tfmcc {
            if last_snap.elapsed() >= Duration::from_millis(100) {
                last_snap = Instant::now();
                let q = publisher
                    .tfmcc()
                    .map(|s| (s.snapshot(clock(last_snap)), s.reports, s.queue_dropped));
                if let Some((mut snap, reports, dropped)) = q {
                    snap.at_unix_s = unix_micros() as f64 / 1e6;
                    t.update(snap, reports, dropped);
                }
            }
        }
    }
    flush(&stats, &mut local_hist, &publisher, &mut flushed);
}

/// What the shared stats already hold of the publisher's counters.
#[derive(Default)]
struct PublisherTotals {
    packets: u64,
    bytes: u64,
    bunches: u64,
    per_layer: Vec<u64>,
}

/// Sends a whole bunch with one `sendmmsg` call, so that the thread cannot be preempted
/// between two packets of a bunch (which would space them wider than the bottleneck does
/// and make every receiver under-estimate). Returns the number of packets sent.
fn send_bunch(sock: &UdpSocket, bufs: &[Vec<u8>], dests: &[SocketAddrV4]) -> u64 {
    let sas: Vec<libc::sockaddr_in> = dests
        .iter()
        .map(|d| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: d.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*d.ip()).to_be(),
            },
            sin_zero: [0; 8],
        })
        .collect();
    let mut iovs: Vec<libc::iovec> = bufs
        .iter()
        .map(|b| libc::iovec {
            iov_base: b.as_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        })
        .collect();
    let mut msgs: Vec<libc::mmsghdr> = iovs
        .iter_mut()
        .zip(&sas)
        .map(|(iov, sa)| {
            // SAFETY: an all-zero msghdr is valid; the fields used are set below.
            let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
            h.msg_name = sa as *const _ as *mut libc::c_void;
            h.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            h.msg_iov = iov as *mut libc::iovec;
            h.msg_iovlen = 1;
            libc::mmsghdr {
                msg_hdr: h,
                msg_len: 0,
            }
        })
        .collect();
    let mut done = 0usize;
    while done < msgs.len() {
        // SAFETY: msgs[done..] point to live iovecs, buffers and sockaddrs for this call.
        let r = unsafe {
            libc::sendmmsg(
                sock.as_raw_fd(),
                msgs[done..].as_mut_ptr(),
                (msgs.len() - done) as libc::c_uint,
                0,
            )
        };
        if r <= 0 {
            break;
        }
        done += r as usize;
    }
    done as u64
}

/// Moves the thread's tallies into the shared stats (keeps the lock off the send path).
fn flush(
    stats: &PacerStats,
    hist: &mut ErrorHistogram,
    p: &session::Publisher,
    done: &mut PublisherTotals,
) {
    {
        let mut h = stats.errors.lock().unwrap_or_else(|p| p.into_inner());
        for (a, b) in h.buckets.iter_mut().zip(hist.buckets.iter()) {
            *a += b;
        }
        h.count += hist.count;
        h.sum_us += hist.sum_us;
        h.max_us = h.max_us.max(hist.max_us);
    }
    *hist = ErrorHistogram::default();
    let st = p.stats();
    stats
        .packets
        .fetch_add(st.packets - done.packets, Ordering::Relaxed);
    stats
        .bytes
        .fetch_add(st.bytes - done.bytes, Ordering::Relaxed);
    stats
        .bunches
        .fetch_add(st.bunches - done.bunches, Ordering::Relaxed);
    stats.resyncs.store(st.resyncs, Ordering::Relaxed);
    stats.seal_errors.store(st.seal_errors, Ordering::Relaxed);
    stats.sealed.store(st.sealed, Ordering::Relaxed);
    stats
        .repair_packets
        .store(st.repair_packets, Ordering::Relaxed);
    stats
        .padding_packets
        .store(st.padding_packets, Ordering::Relaxed);
    stats.rtx_asked.store(st.rtx.asked, Ordering::Relaxed);
    stats.rtx_sent.store(st.rtx.sent, Ordering::Relaxed);
    stats.rtx_not_kept.store(st.rtx.not_kept, Ordering::Relaxed);
    stats
        .rtx_over_budget
        .store(st.rtx.over_budget + st.rtx.table_full, Ordering::Relaxed);
    (done.packets, done.bytes, done.bunches) = (st.packets, st.bytes, st.bunches);
    *stats
        .per_layer_queued
        .lock()
        .unwrap_or_else(|p| p.into_inner()) =
        p.queued_packets().into_iter().map(|n| n as u64).collect();
    stats
        .per_layer_discarded
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone_from(&st.discarded_frames);
    let mut pl = stats
        .per_layer_packets
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    done.per_layer.resize(st.per_layer_packets.len(), 0);
    for ((a, b), d) in pl
        .iter_mut()
        .zip(&st.per_layer_packets)
        .zip(done.per_layer.iter_mut())
    {
        *a += b - *d;
        *d = *b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles() {
        let mut h = ErrorHistogram::default();
        for _ in 0..98 {
            h.record(3);
        }
        h.record(100);
        h.record(5000);
        assert_eq!(h.quantile_us(0.5), 3);
        assert_eq!(h.quantile_us(0.99), 127);
        assert_eq!(h.quantile_us(1.0), 8191);
        assert_eq!(h.max_us, 5000);
    }

    fn config(rates: &[u64], size: u16, bunch: u8, dst: SocketAddrV4) -> PacerConfig {
        let mut info = congestion::SessionInfo::equal_layers(rates.len(), 1, *dst.ip(), dst.port());
        for (l, r) in info.layers.iter_mut().zip(rates) {
            l.rate_bps = *r;
            l.port = dst.port();
        }
        info.packet_size = size;
        info.bunch_len = bunch;
        PacerConfig {
            publisher: session::publisher::PublisherConfig::new(info, 1000),
            spin: Duration::from_micros(50),
            realtime: false,
            video: None,
            feedback: None,
            reports: None,
            tfmcc: None,
            side: None,
        }
    }

    fn parse_cc(b: &[u8]) -> congestion::wire::cc_ext::CcFields {
        let p = codec::rtp::RtpPacket::parse(b).unwrap();
        congestion::wire::cc_ext::CcFields::parse(
            p.extension(congestion::wire::cc_ext::DEFAULT_ID).unwrap(),
        )
        .unwrap()
    }

    /// Over loopback: a 4-layer session at known rates sends, per layer, the packet count its
    /// rate implies, and every packet of a bunch arrives before any packet of another bunch.
    #[test]
    fn sends_bunches_at_rate_without_interleaving() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let std::net::SocketAddr::V4(dst) = rx.local_addr().unwrap() else {
            unreachable!()
        };
        // Loopback "groups": every layer to the same unicast address.
        let mut cfg = config(&[200_000, 400_000, 400_000, 800_000], 200, 3, dst);
        for l in cfg.publisher.info.layers.iter_mut() {
            l.group = *dst.ip();
        }
        let stats = Arc::new(PacerStats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (s2, st2) = (stats.clone(), stop.clone());
        let t0 = Instant::now();
        let h = std::thread::spawn(move || run(cfg, tx, s2, st2));
        let mut got: Vec<(u8, u8)> = Vec::new();
        let mut buf = [0u8; 2048];
        while t0.elapsed() < Duration::from_millis(600) {
            if let Ok(n) = rx.recv(&mut buf) {
                assert_eq!(n, 200);
                let p = parse_cc(&buf[..n]);
                got.push((p.layer, p.bunch_pos));
            }
        }
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
        while let Ok(n) = rx.recv(&mut buf) {
            let p = parse_cc(&buf[..n]);
            got.push((p.layer, p.bunch_pos));
        }
        for w in got.chunks(3) {
            assert_eq!(w.len(), 3);
            assert!(w.iter().all(|x| x.0 == w[0].0), "interleaved bunch {w:?}");
            assert_eq!(w.iter().map(|x| x.1).collect::<Vec<_>>(), vec![0, 1, 2]);
        }
        let sent = stats.packets.load(Ordering::Relaxed);
        assert_eq!(sent as usize, got.len());
        let count = |l: u8| got.iter().filter(|x| x.0 == l).count() as f64;
        let (c0, c3) = (count(0), count(3));
        assert!(c0 >= 6.0, "too few packets on layer 0: {c0}");
        assert!(
            (c3 / c0 - 4.0).abs() <= 4.0 * 3.0 / c0 + 0.5,
            "c3/c0 = {}",
            c3 / c0
        );
        assert_eq!(
            stats.errors.lock().unwrap().count,
            stats.bunches.load(Ordering::Relaxed)
        );
    }
}
