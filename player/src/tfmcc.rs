//! `--controller tfmcc`: the TFMCC receiver (`congestion::tfmcc::TfmccReceiver`) in the
//! player's receive loop, and the unicast socket its reports go out of.
//!
//! Why a wrapper: the loop drives every controller through `LayeredController`, whose
//! `PacketArrival` has no room for the TFMCC header-extension fields (round, sender
//! timestamp, echo, R_max, X_supp). The receiver only measures RTT and runs feedback rounds
//! when fed through `TfmccReceiver::handle_packet_with_extension`. [`TfmccCtl`] implements
//! the trait by delegation, and the loop hands it each packet's RTP extension block through
//! an [`ExtSlot`] just before `handle_packet`, so the loop's code paths stay the same for all
//! controllers. A packet without a TFMCC element (or a malformed one) still counts for the
//! receive rate and loss; malformed elements are counted.
//!
//! Reports (`Action::SendFeedback`) go to the announced sender address (SAM `sender`) on
//! layer 0's port + 1 (docs/protocols/tfmcc.md, "Live system"); when the SAM's sender is
//! 0.0.0.0 (a server bound to all interfaces), to the host of `--session-url`; or to
//! `--tfmcc-feedback ADDR:PORT` if given.

use congestion::tfmcc::{TfmccConfig, TfmccReceiver};
use congestion::wire::tfmcc::TfmccReport;
use congestion::{
    Action, Decision, LayeredController, PacketArrival, SessionInfo, Stats, Time, TimerReason,
};
use security::auth::ReceiverKey;
use serde_json::{json, Value};
use std::hash::{BuildHasher, Hasher};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::{Arc, Mutex};

/// The current packet's RTP header-extension block (with its 4-byte header), set by the
/// loop before `handle_packet`.
pub type ExtSlot = Arc<Mutex<Vec<u8>>>;

/// What the TFMCC receiver shows in telemetry, updated at every call.
#[derive(Clone, Debug, Default)]
pub struct View {
    pub rid: u32,
    pub rate_bps: f64,
    pub rtt_s: f64,
    pub loss_event_rate: f64,
    pub is_clr: bool,
    pub have_rtt: bool,
    pub reports_sent: u64,
    pub bad_extension: u64,
    /// Set by the host when the player exits cleanly: the next `handle_timeout` sends the
    /// leave report (RFC 4654 §3.3) instead of running the timers.
    pub leave_requested: bool,
}

impl View {
    /// The `tfmcc` member of the telemetry body and the log line.
    pub fn json(&self) -> Value {
        json!({"rid": self.rid, "rate_bps": self.rate_bps, "rtt_s": self.rtt_s,
               "loss_event_rate": self.loss_event_rate, "is_clr": self.is_clr,
               "have_rtt": self.have_rtt, "reports_sent": self.reports_sent,
               "bad_extension": self.bad_extension})
    }
}

/// The TFMCC receiver behind the `LayeredController` trait.
pub struct TfmccCtl {
    rx: TfmccReceiver,
    ext: ExtSlot,
    view: Arc<Mutex<View>>,
    bad_ext: u64,
    last_now: Time,
}

/// A random non-zero receiver id (unique per player process with overwhelming probability;
/// the sender's CLR logic needs only uniqueness within the session).
pub fn random_rid(viewer_id: &str) -> u32 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write(viewer_id.as_bytes());
    h.write_u32(std::process::id());
    h.write_u64(crate::net::realtime_ns());
    (h.finish() as u32).max(1)
}

impl TfmccCtl {
    /// A receiver with id `rid`; returns the controller, the slot the loop writes each
    /// packet's extension block to, and the telemetry view.
    pub fn new(rid: u32) -> (TfmccCtl, ExtSlot, Arc<Mutex<View>>) {
        let ext = ExtSlot::default();
        let view = Arc::new(Mutex::new(View {
            rid,
            ..Default::default()
        }));
        let c = TfmccCtl {
            rx: TfmccReceiver::new(TfmccConfig::default(), rid),
            ext: ext.clone(),
            view: view.clone(),
            bad_ext: 0,
            last_now: Time::ZERO,
        };
        (c, ext, view)
    }

    fn publish(&mut self, now: Time) {
        self.last_now = self.last_now.max(now);
        let now = self.last_now;
        if let Ok(mut v) = self.view.lock() {
            v.rate_bps = 8.0 * self.rx.r_calc(now);
            if !v.rate_bps.is_finite() {
                v.rate_bps = 0.0;
            }
            v.rtt_s = self.rx.rtt();
            v.loss_event_rate = self.rx.loss_event_rate();
            v.is_clr = self.rx.is_clr();
            v.have_rtt = self.rx.have_rtt();
            v.reports_sent = self.rx.reports_sent();
            v.bad_extension = self.bad_ext;
        }
    }
}

impl LayeredController for TfmccCtl {
    fn name(&self) -> &'static str {
        "tfmcc"
    }
    fn handle_announcement(&mut self, now: Time, info: &SessionInfo) {
        self.rx.handle_announcement(now, info);
    }
    fn handle_packet(&mut self, now: Time, pkt: &PacketArrival) {
        let block = self.ext.lock().map(|b| b.clone()).unwrap_or_default();
        if self
            .rx
            .handle_packet_with_extension(now, pkt, &block)
            .is_err()
        {
            self.bad_ext += 1;
        }
        self.publish(now);
    }
    fn handle_timeout(&mut self, now: Time) {
        let leave = self.view.lock().map(|v| v.leave_requested).unwrap_or(false);
        if leave {
            self.rx.leave(now);
        } else {
            self.rx.handle_timeout(now);
        }
        self.publish(now);
    }
    fn poll_action(&mut self) -> Option<Action> {
        self.rx.poll_action()
    }
    fn poll_timeout(&self) -> Option<(Time, TimerReason)> {
        self.rx.poll_timeout()
    }
    fn poll_decision(&mut self) -> Option<Decision> {
        self.rx.poll_decision()
    }
    fn stats(&self) -> Stats {
        self.rx.stats()
    }
    fn layers(&self) -> u8 {
        self.rx.layers()
    }
}

/// The RTP header-extension block of `pkt` including its 4-byte header, if any.
pub fn extension_block(pkt: &[u8]) -> Option<&[u8]> {
    if pkt.len() < 12 || pkt[0] & 0x10 == 0 {
        return None;
    }
    let off = 12 + 4 * (pkt[0] & 0x0f) as usize;
    let hdr = pkt.get(off..off + 4)?;
    let words = u16::from_be_bytes([hdr[2], hdr[3]]) as usize;
    pkt.get(off..off + 4 + 4 * words)
}

/// The unicast report sender.
pub struct Feedback {
    sock: Option<UdpSocket>,
    pub fallback_host: Option<Ipv4Addr>,
    pub override_addr: Option<SocketAddrV4>,
    /// This receiver's report key (`auth_reports` sessions): every report is sealed with it.
    pub key: Option<ReceiverKey>,
    pub sent: u64,
    pub errors: u64,
    pub no_address: u64,
}

impl Feedback {
    /// A socket bound to `iface` (port chosen by the kernel).
    pub fn new(
        iface: Ipv4Addr,
        fallback_host: Option<Ipv4Addr>,
        override_addr: Option<SocketAddrV4>,
    ) -> crate::error::Result<Feedback> {
        let sock = UdpSocket::bind(SocketAddrV4::new(iface, 0))
            .map_err(|e| crate::error::Error::io("binding the TFMCC feedback socket", e))?;
        sock.set_nonblocking(true)
            .map_err(|e| crate::error::Error::io("TFMCC feedback socket", e))?;
        Ok(Feedback {
            sock: Some(sock),
            fallback_host,
            override_addr,
            key: None,
            sent: 0,
            errors: 0,
            no_address: 0,
        })
    }

    /// Where reports for `info` go.
    pub fn dest(&self, info: &SessionInfo) -> Option<SocketAddrV4> {
        if let Some(a) = self.override_addr {
            return Some(a);
        }
        let port = info.layers.first()?.port.checked_add(1)?;
        let host = if info.sender.is_unspecified() {
            self.fallback_host?
        } else {
            info.sender
        };
        Some(SocketAddrV4::new(host, port))
    }

    /// Sends one report (counted; errors never stop the player), sealed with the report
    /// key when there is one.
    pub fn send(&mut self, bytes: &[u8], info: Option<&SessionInfo>) {
        let Some(dest) = info.and_then(|i| self.dest(i)) else {
            self.no_address += 1;
            return;
        };
        let sealed;
        let bytes = match &self.key {
            Some(k) => match TfmccReport::parse(bytes).and_then(|r| k.seal_tfmcc(&r)) {
                Ok(b) => {
                    sealed = b;
                    &sealed[..]
                }
                Err(_) => {
                    self.errors += 1;
                    return;
                }
            },
            None => bytes,
        };
        match self.sock.as_ref().map(|s| s.send_to(bytes, dest)) {
            Some(Ok(_)) => self.sent += 1,
            _ => self.errors += 1,
        }
    }
}

/// The player's `layercast_player_tfmcc_*` families (`lab` = `{viewer="..."}`).
pub fn metrics(lab: &str, fb: &Feedback, view: &Mutex<View>) -> String {
    let v = view.lock().map(|v| v.clone()).unwrap_or_default();
    let mut m = String::new();
    for (name, kind, val) in [
        ("layercast_player_tfmcc_rate_bps", "gauge", v.rate_bps),
        ("layercast_player_tfmcc_rtt_seconds", "gauge", v.rtt_s),
        (
            "layercast_player_tfmcc_loss_event_rate",
            "gauge",
            v.loss_event_rate,
        ),
        (
            "layercast_player_tfmcc_is_clr",
            "gauge",
            f64::from(u8::from(v.is_clr)),
        ),
        (
            "layercast_player_tfmcc_reports_sent_total",
            "counter",
            fb.sent as f64,
        ),
        (
            "layercast_player_tfmcc_report_errors_total",
            "counter",
            (fb.errors + fb.no_address) as f64,
        ),
    ] {
        m.push_str(&format!("# TYPE {name} {kind}\n{name}{lab} {val}\n"));
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extension_block_is_found_and_bounded() {
        // V=2, X=1, CC=0; ext header 0x1000, 1 word.
        let mut p = vec![0x90, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2];
        p.extend_from_slice(&[0x10, 0x00, 0x00, 0x01, 2, 1, 7, 0]);
        assert_eq!(extension_block(&p), Some(&p[12..20]));
        // Length field beyond the packet: none, no panic.
        let mut q = p.clone();
        q[15] = 9;
        assert_eq!(extension_block(&q), None);
        // No X bit, too short.
        let mut r = p.clone();
        r[0] = 0x80;
        assert_eq!(extension_block(&r), None);
        assert_eq!(extension_block(&p[..5]), None);
    }

    #[test]
    fn feedback_address_follows_the_announcement() {
        let mut info = SessionInfo::equal_layers(1, 1000, "239.1.1.1".parse().unwrap(), 5004);
        info.sender = "10.0.0.1".parse().unwrap();
        let mut f = Feedback::new(Ipv4Addr::LOCALHOST, Some(Ipv4Addr::LOCALHOST), None).unwrap();
        assert_eq!(f.dest(&info), Some("10.0.0.1:5005".parse().unwrap()));
        info.sender = Ipv4Addr::UNSPECIFIED;
        assert_eq!(f.dest(&info), Some("127.0.0.1:5005".parse().unwrap()));
        f.fallback_host = None;
        assert_eq!(f.dest(&info), None);
        f.send(b"x", Some(&info));
        assert_eq!((f.sent, f.no_address), (0, 1));
        f.override_addr = Some("127.0.0.2:9".parse().unwrap());
        assert_eq!(f.dest(&info), Some("127.0.0.2:9".parse().unwrap()));
    }
}
