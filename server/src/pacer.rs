//! The pacer: sends every layer of a session at its announced rate as back-to-back bunches of
//! equal-size packets, one bunch at a time (a bunch is never interleaved with another layer's
//! packets, because one thread sends them all).
//!
//! Timing: layer k with rate `r_k`, packet size `M` bytes and bunch length `b` sends one bunch
//! every `T_k = 8·M·b / r_k` seconds. Layer phases are spread so that layers do not fire
//! at once (`era.md` §1.1.6 [R]): layer k starts at `frac(k·φ⁻¹)·T_k` (golden-ratio
//! sequence), which spreads *every prefix* of layers evenly over the interval. A receiver
//! holds a prefix, so this is what its bottleneck queue sees; a plain `k/N` spread packs
//! the few layers a slow receiver holds into the first `k/N` of the interval, and behind a
//! 500 kbit/s link with a five-packet queue four such pairs overflow it. The thread sleeps until `spin` before the
//! deadline (timer slack set to 1 ns so the kernel does not batch the wake-up), then spins.
//! The start error of each bunch (actual − scheduled) is recorded in a histogram; if the
//! thread falls more than one second behind (suspended, overloaded) it re-anchors instead of
//! bursting to catch up, and counts the skip.

use crate::rtp_out;
use congestion::wire::cc_ext::CcFields;
use std::net::{SocketAddrV4, UdpSocket};
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
    pub errors: Mutex<ErrorHistogram>,
    /// Packets the sealer refused (never expected; such a packet is not sent).
    pub seal_errors: AtomicU64,
    /// Nanoseconds spent sealing, and packets sealed (the cost of encryption).
    pub seal_ns: AtomicU64,
    pub sealed: AtomicU64,
    /// Video slots without media: sent as FEC repair, or as padding.
    pub repair_packets: AtomicU64,
    pub padding_packets: AtomicU64,
}

/// What the pacer sends.
#[derive(Clone, Debug)]
pub struct PacerConfig {
    pub rates_bps: Vec<u64>,
    pub packet_size: u16,
    pub bunch_len: u8,
    pub dests: Vec<SocketAddrV4>,
    pub ssrc_base: u32,
    pub spin: Duration,
    pub payload_type: u8,
    /// Try `SCHED_FIFO` for the pacer thread.
    pub realtime: bool,
    /// Media packets per layer (video sources); `None` = synthetic padding layers.
    pub queues: Option<Arc<crate::video::LayerQueues>>,
    /// Seals every packet (encrypted sessions): packets are built `MEDIA_OVERHEAD` bytes
    /// short of `packet_size` and sealed to exactly `packet_size`.
    pub sealer: Option<security::auth::MediaSealer>,
    /// FEC per video layer (`codec::fec`, docs/protocols/fec.md): a slot without media carries
    /// a repair packet of the layer, padding only when there is nothing to repair. Empty =
    /// padding only.
    pub fec: Vec<codec::fec::FecParams>,
    /// Issue 21 (audio track, RTCP sender reports): sent between bunches, never inside one
    /// (`crate::media::out`).
    pub side: Option<crate::media::out::SideStreams>,
}

impl PacerConfig {
    /// Interval between two bunches of layer `k`.
    pub fn bunch_interval(&self, k: usize) -> Duration {
        let bits = 8.0 * self.packet_size as f64 * self.bunch_len as f64;
        Duration::from_secs_f64(bits / self.rates_bps[k] as f64)
    }
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

/// Asks for `SCHED_FIFO` priority 10 for the pacer thread (needs root or CAP_SYS_NICE; on
/// failure the thread stays at normal priority). On a loaded host a normal thread can be
/// held off the CPU for milliseconds, which shows up as bunch start error. The thread spins
/// at most `spin` per bunch and sleeps otherwise, and the kernel's RT throttling bounds it.
fn set_realtime() -> bool {
    let p = libc::sched_param { sched_priority: 10 };
    // SAFETY: pthread_self is always valid; p is a valid sched_param.
    unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &p) == 0 }
}

/// Sleeps/spins until `deadline` or until `stop` is set. Returns false if stopped.
fn wait_until(deadline: Instant, spin: Duration, stop: &AtomicBool) -> bool {
    wait_until_with(deadline, spin, stop, &mut |_| None)
}

/// [`wait_until`], running `between` before each sleep; it returns when it next wants to
/// run, and the sleep ends by then (issue 21: audio and RTCP go out between bunches).
fn wait_until_with(
    deadline: Instant,
    spin: Duration,
    stop: &AtomicBool,
    between: &mut dyn FnMut(Instant) -> Option<Instant>,
) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        let left = deadline - now;
        if left > spin {
            let nap = match between(now) {
                Some(t) => t
                    .saturating_duration_since(now)
                    .max(Duration::from_micros(200)),
                None => Duration::from_millis(100),
            };
            std::thread::sleep((left - spin).min(Duration::from_millis(100)).min(nap));
        } else {
            while Instant::now() < deadline {
                std::hint::spin_loop();
            }
            return true;
        }
    }
}

/// The layer whose bunch goes next under a media burst policy, and when: a layer with queued
/// media may go `credit` ahead of its schedule `next`, but no sooner than `gap` after its
/// previous bunch; a layer without media (padding) goes when its slot is due. Ties go to the
/// lower layer (the one every receiver holds).
pub(crate) fn next_bunch(
    next: &[Instant],
    last_sent: &[Option<Instant>],
    has_media: impl Fn(usize) -> bool,
    gap: &[Duration],
    credit: &[Duration],
) -> Option<(usize, Instant)> {
    (0..next.len())
        .map(|k| {
            let t = if has_media(k) {
                let lead = next[k].checked_sub(credit[k]).unwrap_or(next[k]);
                match last_sent[k] {
                    // Never later than the constant-rate slot itself.
                    Some(l) => lead.max(l + gap[k]).min(next[k]),
                    None => lead,
                }
            } else {
                next[k]
            };
            (k, t)
        })
        .min_by_key(|&(_, t)| t)
}

/// Phase of layer `k` as a fraction of its bunch interval: `frac(k·(√5−1)/2)`.
pub fn phase(k: usize) -> f64 {
    (k as f64 * 0.618_033_988_749_895).fract()
}

/// Runs the pacer on the current thread until `stop` is set.
pub fn run(mut cfg: PacerConfig, sock: UdpSocket, stats: Arc<PacerStats>, stop: Arc<AtomicBool>) {
    set_timer_slack();
    if cfg.realtime {
        stats.realtime.store(set_realtime(), Ordering::Relaxed);
    }
    let n = cfg.rates_bps.len();
    *stats
        .per_layer_packets
        .lock()
        .unwrap_or_else(|p| p.into_inner()) = vec![0; n];
    let intervals: Vec<Duration> = (0..n).map(|k| cfg.bunch_interval(k)).collect();
    let start = Instant::now() + Duration::from_millis(5);
    let mut next: Vec<Instant> = (0..n)
        .map(|k| start + intervals[k].mul_f64(phase(k)))
        .collect();
    let mut seq: Vec<u16> = vec![0; n];
    // Extended sequence numbers (the sealer's nonce input).
    let mut ext_seq: Vec<u64> = vec![0; n];
    let plain_size = match cfg.sealer {
        Some(_) => cfg.packet_size as usize - security::auth::MEDIA_OVERHEAD,
        None => cfg.packet_size as usize,
    };
    let mut last_ts: Vec<u32> = vec![0; n];
    let mut bufs: Vec<Vec<u8>> = (0..cfg.bunch_len)
        .map(|_| Vec::with_capacity(cfg.packet_size as usize))
        .collect();
    let mut local_hist = ErrorHistogram::default();
    let mut local_layer = vec![0u64; n];
    let mut last_flush = Instant::now();
    // Media burst (video sessions with `video.pacer_peak` > 1): per layer the shortest gap
    // between two media bunches and the largest lead over the schedule.
    let burst = cfg
        .queues
        .as_ref()
        .and_then(|q| q.burst.lock().unwrap_or_else(|p| p.into_inner()).clone());
    let burst: Option<(Arc<crate::video::LayerQueues>, Vec<Duration>, Vec<Duration>)> =
        match (&cfg.queues, burst) {
            (Some(q), Some(b)) if b.credit.len() == n => Some((
                q.clone(),
                intervals.iter().map(|i| i.div_f64(b.peak)).collect(),
                b.credit,
            )),
            _ => None,
        };
    let mut last_sent: Vec<Option<Instant>> = vec![None; n];
    // Repair instead of padding: payload room after the RTP header and the cc extension block.
    let mut fec: Vec<codec::fec::FecEncoder> = cfg
        .fec
        .iter()
        .filter_map(|p| codec::fec::FecEncoder::new(*p, plain_size.saturating_sub(28)).ok())
        .collect();
    // Issue 21: audio packets and sender reports between bunches.
    let mut side = cfg.side.take();
    let mut sent_per_layer = vec![0u64; n];
    while !stop.load(Ordering::Relaxed) {
        let side_next = side
            .as_mut()
            .map(|s| s.poll(Instant::now(), &sock, &sent_per_layer));
        let (k, due) = match &burst {
            None => {
                // Earliest layer due (linear scan: N is at most a few hundred).
                let (k, &due) = match next.iter().enumerate().min_by_key(|(_, t)| **t) {
                    Some(x) => x,
                    None => return,
                };
                let mut between =
                    |now: Instant| side.as_mut().map(|s| s.poll(now, &sock, &sent_per_layer));
                if !wait_until_with(due, cfg.spin, &stop, &mut between) {
                    break;
                }
                (k, due)
            }
            Some((q, gap, credit)) => {
                let guard = q.queues.lock().unwrap_or_else(|p| p.into_inner());
                let media = |k: usize| guard.get(k).is_some_and(|q| !q.is_empty());
                let Some((k, due)) = next_bunch(&next, &last_sent, media, gap, credit) else {
                    return;
                };
                let now = Instant::now();
                if due > now + cfg.spin {
                    // Sleep until the slot or until the encoder queues a picture (which may
                    // make a layer eligible earlier), then decide again.
                    let mut wait = (due - now - cfg.spin).min(Duration::from_millis(100));
                    if let Some(t) = side_next {
                        wait = wait.min(
                            t.saturating_duration_since(now)
                                .max(Duration::from_micros(200)),
                        );
                    }
                    drop(q.pushed.wait_timeout(guard, wait));
                    continue;
                }
                drop(guard);
                if !wait_until(due, cfg.spin, &stop) {
                    break;
                }
                (k, due)
            }
        };
        let began = Instant::now();
        let late = began.saturating_duration_since(due);
        if late > Duration::from_secs(1) {
            // Re-anchor every layer rather than emitting a second's worth of bunches at once.
            stats.resyncs.fetch_add(1, Ordering::Relaxed);
            for (j, t) in next.iter_mut().enumerate() {
                *t = began + intervals[j].mul_f64(phase(j));
            }
            continue;
        }
        last_sent[k] = Some(began);
        local_hist.record(late.as_micros() as u64);
        let send_us = unix_micros();
        bufs.iter_mut().for_each(Vec::clear);
        for pos in 0..cfg.bunch_len {
            let cc = CcFields {
                layer: k as u8,
                bunch_pos: pos,
                bunch_len: cfg.bunch_len,
                send_time_us: send_us,
            };
            let media = cfg.queues.as_ref().and_then(|q| q.pop(k));
            let buf = &mut bufs[pos as usize];
            match media {
                Some(p) => {
                    last_ts[k] = p.header.timestamp;
                    if let Some(f) = fec.get_mut(k) {
                        f.push_media(seq[k], &p);
                    }
                    rtp_out::write_media(buf, p, seq[k], &cc, plain_size);
                }
                None if cfg.queues.is_some() => match fec.get_mut(k).and_then(|f| f.repair()) {
                    Some(r) => {
                        stats.repair_packets.fetch_add(1, Ordering::Relaxed);
                        rtp_out::write_media(buf, r, seq[k], &cc, plain_size);
                    }
                    None => {
                        stats.padding_packets.fetch_add(1, Ordering::Relaxed);
                        rtp_out::write_padding(
                            buf,
                            cfg.payload_type,
                            seq[k],
                            last_ts[k],
                            cfg.ssrc_base.wrapping_add(k as u32),
                            &cc,
                            plain_size,
                        );
                    }
                },
                None => {
                    let ts90 = (send_us.wrapping_mul(9) / 100) as u32;
                    rtp_out::write_packet(
                        buf,
                        cfg.payload_type,
                        seq[k],
                        ts90,
                        cfg.ssrc_base.wrapping_add(k as u32),
                        &cc,
                        plain_size,
                    );
                }
            }
            if let Some(sealer) = cfg.sealer.as_mut() {
                let t0 = Instant::now();
                match sealer.seal(buf, ext_seq[k]) {
                    Ok(sealed) => *buf = sealed,
                    Err(_) => {
                        // Never sent in the clear: an empty datagram goes out instead (receivers count
                        // it malformed), keeping the bunch's sequence numbers consistent.
                        stats.seal_errors.fetch_add(1, Ordering::Relaxed);
                        buf.clear();
                    }
                }
                stats
                    .seal_ns
                    .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                stats.sealed.fetch_add(1, Ordering::Relaxed);
            }
            seq[k] = seq[k].wrapping_add(1);
            ext_seq[k] += 1;
        }
        let sent = send_bunch(&sock, &bufs[..cfg.bunch_len as usize], cfg.dests[k]);
        if sent < cfg.bunch_len as u64 {
            stats
                .send_errors
                .fetch_add(cfg.bunch_len as u64 - sent, Ordering::Relaxed);
        }
        local_layer[k] += sent;
        sent_per_layer[k] += sent;
        stats.packets.fetch_add(sent, Ordering::Relaxed);
        let bytes: u64 = bufs[..sent as usize].iter().map(|b| b.len() as u64).sum();
        stats.bytes.fetch_add(bytes, Ordering::Relaxed);
        stats.bunches.fetch_add(1, Ordering::Relaxed);
        next[k] += intervals[k];
        if last_flush.elapsed() > Duration::from_millis(250) {
            flush(&stats, &mut local_hist, &mut local_layer);
            last_flush = Instant::now();
        }
    }
    flush(&stats, &mut local_hist, &mut local_layer);
}

/// Sends a whole bunch with one `sendmmsg` call, so that the thread cannot be preempted
/// between two packets of a bunch (which would space them wider than the bottleneck does
/// and make every receiver under-estimate). Returns the number of packets sent.
fn send_bunch(sock: &UdpSocket, bufs: &[Vec<u8>], dst: SocketAddrV4) -> u64 {
    use std::os::fd::AsRawFd;
    let sa = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: dst.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*dst.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    let mut iovs: Vec<libc::iovec> = bufs
        .iter()
        .map(|b| libc::iovec {
            iov_base: b.as_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        })
        .collect();
    let mut msgs: Vec<libc::mmsghdr> = iovs
        .iter_mut()
        .map(|iov| {
            // SAFETY: an all-zero msghdr is valid; the fields used are set below.
            let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
            h.msg_name = &sa as *const _ as *mut libc::c_void;
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
        // SAFETY: msgs[done..] point to live iovecs, buffers and sockaddr for this call.
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

/// Moves thread-local tallies into the shared stats (keeps the lock off the send path).
fn flush(stats: &PacerStats, hist: &mut ErrorHistogram, layers: &mut [u64]) {
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
    let mut pl = stats
        .per_layer_packets
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    for (a, b) in pl.iter_mut().zip(layers.iter_mut()) {
        *a += *b;
        *b = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_spread_every_prefix() {
        // For each prefix of up to 16 layers, the largest gap between consecutive phases on
        // the unit circle stays below 2.5/k (the golden-ratio sequence's three-gap bound).
        for k in 2..=16 {
            let mut p: Vec<f64> = (0..k).map(phase).collect();
            p.sort_by(f64::total_cmp);
            let mut gaps: Vec<f64> = p.windows(2).map(|w| w[1] - w[0]).collect();
            gaps.push(1.0 - p[k - 1] + p[0]);
            let max = gaps.iter().cloned().fold(0.0, f64::max);
            assert!(max < 2.5 / k as f64, "prefix {k}: max gap {max}");
        }
    }

    /// `next_bunch` in virtual time: a layer of 1 Mbit/s sends 2 x 1000-B bunches every 16 ms;
    /// a 20-packet frame (10 bunches) arrives every 267 ms. With peak 4 and a credit of one
    /// frame period the frame leaves at 4 ms per bunch (within 40 ms of its arrival instead
    /// of ~150 ms), and no window holds more bunches than its length at the
    /// announced rate plus the credit: the mean rate stays the announced one.
    #[test]
    fn burst_sends_frames_at_peak_and_keeps_the_mean_rate() {
        let t0 = Instant::now();
        let ms = |x: f64| Duration::from_secs_f64(x / 1000.0);
        let interval = ms(16.0);
        let (gap, credit) = (vec![interval / 4], vec![ms(267.0)]);
        let mut next = vec![t0 + interval];
        let mut last: Vec<Option<Instant>> = vec![None];
        let mut queued = 0u32;
        let mut sent: Vec<(Instant, bool)> = Vec::new();
        let mut frame_at = t0 + ms(100.0);
        let mut frame_done: Vec<Duration> = Vec::new();
        let mut frame_start = None;
        let end = t0 + ms(5000.0);
        loop {
            let (k, due) = next_bunch(&next, &last, |_| queued > 0, &gap, &credit).unwrap();
            // The encoder queues a frame if it comes first (the pacer wakes for it).
            if frame_at <= due {
                queued += 20;
                frame_start = Some(frame_at);
                frame_at += ms(267.0);
                continue;
            }
            if due > end {
                break;
            }
            let media = queued > 0;
            queued = queued.saturating_sub(2);
            if media && queued == 0 {
                frame_done.push(due - frame_start.unwrap());
            }
            sent.push((due, media));
            last[k] = Some(due);
            next[k] += interval;
        }
        assert!(frame_done.len() >= 17, "{}", frame_done.len());
        for d in &frame_done {
            // 10 bunches, 4 ms apart; the first waits at most one gap (a padding bunch may
            // have just left), so at most 40 ms from the frame's arrival (the credit is never
            // short). Strict pacing would take 9 x 16 ms = 144 ms plus the slot phase.
            assert!(*d <= ms(40.5), "frame took {d:?}");
        }
        // Mean rate: in every window of w, at most w / interval + credit / interval + 1 bunches.
        let w = ms(500.0);
        let bound = (w.as_secs_f64() + credit[0].as_secs_f64()) / interval.as_secs_f64() + 1.0;
        for (i, &(t, _)) in sent.iter().enumerate() {
            let n = sent[i..].iter().take_while(|(u, _)| *u < t + w).count();
            assert!(n as f64 <= bound, "{n} bunches in {w:?} from {:?}", t - t0);
        }
        // And over the whole run the count is the constant-rate one (padding fills the gaps),
        // plus at most the slots the last frame ran ahead of the schedule.
        let total = sent.len() as f64;
        let expect = (end - t0).as_secs_f64() / interval.as_secs_f64();
        let lead = credit[0].as_secs_f64() / interval.as_secs_f64();
        assert!(
            total >= expect - 2.0 && total <= expect + lead + 1.0,
            "{total} vs {expect}"
        );
        // Bunches of one layer never go closer than the peak gap.
        assert!(sent.windows(2).all(|p| p[1].0 - p[0].0 >= gap[0]));
    }

    #[test]
    fn next_bunch_rules() {
        let t0 = Instant::now() + Duration::from_secs(1);
        let ms = |x: u64| Duration::from_millis(x);
        let next = [t0 + ms(50), t0 + ms(20)];
        let gap = [ms(10), ms(10)];
        let credit = [ms(100), ms(5)];
        // No media: the earliest slot (layer 1 at +20).
        assert_eq!(
            next_bunch(&next, &[None, None], |_| false, &gap, &credit),
            Some((1, t0 + ms(20)))
        );
        // Media on layer 0: it may go 100 ms ahead of its slot, i.e. at once.
        assert_eq!(
            next_bunch(&next, &[None, None], |k| k == 0, &gap, &credit),
            Some((0, t0 - ms(50)))
        );
        // ... but not sooner than the peak gap after its previous bunch.
        assert_eq!(
            next_bunch(&next, &[Some(t0), None], |k| k == 0, &gap, &credit),
            Some((0, t0 + ms(10)))
        );
        // ... and never later than its own slot.
        assert_eq!(
            next_bunch(&next, &[Some(t0 + ms(45)), None], |k| k == 0, &gap, &credit),
            Some((1, t0 + ms(20)))
        );
        assert_eq!(
            next_bunch(
                &[t0 + ms(50)],
                &[Some(t0 + ms(45))],
                |_| true,
                &gap,
                &credit
            ),
            Some((0, t0 + ms(50)))
        );
    }

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

    #[test]
    fn bunch_interval_matches_rate() {
        let c = PacerConfig {
            rates_bps: vec![20_000, 1_000_000],
            packet_size: 512,
            bunch_len: 2,
            dests: vec![],
            ssrc_base: 0,
            spin: Duration::ZERO,
            payload_type: 96,
            realtime: false,
            queues: None,
            sealer: None,
            fec: Vec::new(),
            side: None,
        };
        // 2 × 512 × 8 / 20 000 = 0.4096 s (era.md §1.1.3).
        assert!((c.bunch_interval(0).as_secs_f64() - 0.4096).abs() < 1e-9);
        assert!((c.bunch_interval(1).as_secs_f64() - 0.008192).abs() < 1e-9);
    }

    /// Over loopback: a 4-layer session at known rates sends, per layer, the packet count its
    /// rate implies over the measured wall time (±1 bunch plus rounding), and every packet of
    /// a bunch arrives before any packet of another bunch.
    #[test]
    fn sends_bunches_at_rate_without_interleaving() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let std::net::SocketAddr::V4(dst) = rx.local_addr().unwrap() else {
            unreachable!()
        };
        let cfg = PacerConfig {
            rates_bps: vec![200_000, 400_000, 400_000, 800_000],
            packet_size: 200,
            bunch_len: 3,
            dests: vec![dst; 4],
            ssrc_base: 1000,
            spin: Duration::from_micros(50),
            payload_type: 96,
            realtime: false,
            queues: None,
            sealer: None,
            fec: Vec::new(),
            side: None,
        };
        let stats = Arc::new(PacerStats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (s2, st2, c2) = (stats.clone(), stop.clone(), cfg.clone());
        let t0 = Instant::now();
        let h = std::thread::spawn(move || run(c2, tx, s2, st2));
        let mut got: Vec<(u8, u8)> = Vec::new();
        let mut buf = [0u8; 2048];
        while t0.elapsed() < Duration::from_millis(600) {
            if let Ok(n) = rx.recv(&mut buf) {
                assert_eq!(n, 200);
                let p = crate::rtp_out::parse_cc(&buf[..n]).unwrap();
                got.push((p.layer, p.bunch_pos));
            }
        }
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
        while let Ok(n) = rx.recv(&mut buf) {
            let p = crate::rtp_out::parse_cc(&buf[..n]).unwrap();
            got.push((p.layer, p.bunch_pos));
        }
        // Bunches are contiguous: positions run 0,1,2 within one layer.
        for w in got.chunks(3) {
            assert_eq!(w.len(), 3);
            assert!(w.iter().all(|x| x.0 == w[0].0), "interleaved bunch {w:?}");
            assert_eq!(w.iter().map(|x| x.1).collect::<Vec<_>>(), vec![0, 1, 2]);
        }
        let sent = stats.packets.load(Ordering::Relaxed);
        assert_eq!(sent as usize, got.len());
        // Relative rates: layer 3 sends 4× layer 0's packets, layers 1 and 2 twice.
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

    /// An encrypted session: every datagram is exactly `packet_size`, opens with the group
    /// key to a packet whose cc extension is intact, and does not open with another key.
    #[test]
    fn sealed_packets_have_the_announced_size_and_open() {
        use security::auth::{GroupKey, MediaOpener, MediaSealer};
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let std::net::SocketAddr::V4(dst) = rx.local_addr().unwrap() else {
            unreachable!()
        };
        let key = GroupKey::generate(0);
        let cfg = PacerConfig {
            rates_bps: vec![400_000, 400_000],
            packet_size: 300,
            bunch_len: 2,
            dests: vec![dst; 2],
            ssrc_base: 77,
            spin: Duration::from_micros(50),
            payload_type: 96,
            realtime: false,
            queues: None,
            sealer: Some(MediaSealer::new(key.clone())),
            fec: Vec::new(),
            side: None,
        };
        let stats = Arc::new(PacerStats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (s2, st2) = (stats.clone(), stop.clone());
        let h = std::thread::spawn(move || run(cfg, tx, s2, st2));
        let mut opener = MediaOpener::new(key);
        let mut wrong = MediaOpener::new(GroupKey::generate(0));
        let mut buf = [0u8; 2048];
        let mut n_ok = 0;
        while n_ok < 20 {
            let n = rx.recv(&mut buf).expect("pacer sends");
            assert_eq!(n, 300);
            let o = opener.open(&buf[..n]).expect("opens with the group key");
            assert_eq!(o.packet.len(), 300 - security::auth::MEDIA_OVERHEAD);
            assert!(crate::rtp_out::parse_cc(&o.packet).is_some());
            assert!(wrong.open(&buf[..n]).is_err());
            n_ok += 1;
        }
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
        assert_eq!(stats.seal_errors.load(Ordering::Relaxed), 0);
        assert!(stats.sealed.load(Ordering::Relaxed) >= 20);
    }
}
