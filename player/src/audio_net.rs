//! The sockets of the audio track and of the sender reports, joined and left with transport
//! layer 0 (the audio stream rides in it: `SessionInfo::endpoints_of_layer(0)`): the audio
//! group's RTP port, its RTCP port (+1), its repair stream's port (+2, when the SAM announces
//! repair for the stream) and layer 0's RTCP port (+1, the video's sender reports). Datagrams
//! go to [`crate::audio::Audio`] and to the video path's sender-report slot with their kernel
//! receive times; audio packets and repairs also go through a FEC decoder (lagged one-packet
//! repairs, docs/protocols/audio.md "Burst repair"), and what it rebuilds goes to the audio path as if
//! it had arrived with the repair that completed it.

use crate::audio::{Audio, SrMap};
use crate::net::McastSocket;
use proto::fec::{FecDecoder, FecParams};
use proto::rtp::RtpPacket;
use proto::{SessionInfo, TrackKind};
use std::net::Ipv4Addr;

/// Open sockets, in the order [`AudioNet::fds`] lists them.
#[derive(Default)]
pub struct AudioNet {
    socks: Vec<(Kind, McastSocket)>,
    /// The audio stream's repair decoder and repair payload type, when it has repair.
    fec: Option<(FecDecoder, u8)>,
    /// First audio sequence number since the sockets opened: the first repairs carry packets
    /// from before it (sent before the join), which are not losses and are not played.
    first_seq: Option<u16>,
    /// Audio packets that failed authentication (encrypted sessions).
    pub auth_failed: u64,
    pub truncated: u64,
    /// Repair packets received, malformed or of another payload type, and audio packets
    /// rebuilt from them.
    pub repairs: u64,
    pub bad_repairs: u64,
    pub repaired: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Rtp,
    Rtcp,
    Repair,
    VideoRtcp,
}

impl AudioNet {
    /// Opens the sockets when layer 0 is held (`base_held`), closes them when it is not.
    pub fn sync(
        &mut self,
        base_held: bool,
        info: Option<&SessionInfo>,
        iface: Ipv4Addr,
        ssm: Option<Ipv4Addr>,
    ) {
        if !base_held {
            self.reset();
            return;
        }
        if !self.socks.is_empty() {
            return;
        }
        let Some(info) = info else { return };
        let mut want = Vec::new();
        if let Some(s) = info.track(TrackKind::Audio).and_then(|t| t.streams.first()) {
            want.push((Kind::Rtp, s.group, s.port));
            want.push((Kind::Rtcp, s.group, s.port.wrapping_add(1)));
            if let Some(r) = &s.repair {
                if let Ok(p) = FecParams::from_announced(r.payload_type, &r.params) {
                    want.push((Kind::Repair, s.group, s.port.wrapping_add(2)));
                    self.fec = Some((FecDecoder::new(p), r.payload_type));
                }
            }
        }
        if let (Some(l0), Some(_)) = (info.layers.first(), info.track(TrackKind::Video)) {
            want.push((Kind::VideoRtcp, l0.group, l0.port.wrapping_add(1)));
        }
        for (k, g, p) in want {
            match McastSocket::open_from(g, p, iface, ssm) {
                Ok(s) => self.socks.push((k, s)),
                Err(e) => eprintln!("layercast-player: audio/RTCP socket {g}:{p}: {e}"),
            }
        }
    }

    /// Closes everything (a new session layout).
    pub fn reset(&mut self) {
        self.socks.clear();
        self.fec = None;
        self.first_seq = None;
    }

    pub fn fds(&self) -> Vec<i32> {
        self.socks.iter().map(|(_, s)| s.raw_fd()).collect()
    }

    /// Reads what socket `i` (an index into [`AudioNet::fds`]) has: audio RTP (decrypted
    /// with `opener` for an encrypted session) to `audio`, sender reports to `audio` and to
    /// `video_sr` (layer 0's SSRC).
    pub fn drain(
        &mut self,
        i: usize,
        buf: &mut [u8],
        mut opener: Option<&mut security::auth::MediaOpener>,
        mut audio: Option<&mut Audio>,
        video_sr: &mut Option<SrMap>,
        video_ssrc: Option<u32>,
    ) {
        let Some((kind, s)) = self.socks.get(i) else {
            return;
        };
        for _ in 0..64 {
            let Ok(Some((n, ts, trunc))) = s.recv(buf) else {
                break;
            };
            if trunc {
                self.truncated += 1;
                continue;
            }
            let data = &buf[..n];
            // Media and repairs are sealed in encrypted sessions; RTCP is not.
            let plain;
            let pkt: &[u8] = if matches!(kind, Kind::Rtp | Kind::Repair) {
                match open(opener.as_deref_mut(), data) {
                    Ok(Some(p)) => {
                        plain = p;
                        &plain
                    }
                    Ok(None) => data,
                    Err(()) => {
                        self.auth_failed += 1;
                        continue;
                    }
                }
            } else {
                data
            };
            match kind {
                Kind::Rtp => {
                    if let (Some((dec, _)), Ok(p)) = (self.fec.as_mut(), RtpPacket::parse(pkt)) {
                        self.first_seq.get_or_insert(p.sequence_number());
                        let _ = dec.push(&p);
                    }
                    if let Some(a) = audio.as_deref_mut() {
                        a.push_rtp(ts, pkt);
                    }
                }
                Kind::Repair => {
                    self.repairs += 1;
                    let ok = match (self.fec.as_mut(), RtpPacket::parse(pkt)) {
                        (Some((dec, pt)), Ok(p)) if p.payload_type() == *pt => {
                            dec.push_separate_repair(p.payload()).is_ok()
                        }
                        _ => false,
                    };
                    if !ok {
                        self.bad_repairs += 1;
                    }
                }
                Kind::Rtcp => {
                    if let Some(a) = audio.as_deref_mut() {
                        a.push_rtcp(data);
                    }
                }
                Kind::VideoRtcp => {
                    if let Some(m) = SrMap::from_rtcp(data, video_ssrc, 90_000) {
                        *video_sr = Some(m);
                    }
                }
            }
            if let Some((dec, _)) = self.fec.as_mut() {
                while let Some(rec) = dec.poll_recovered() {
                    let seq = RtpPacket::parse(&rec).map_or(0, |p| p.sequence_number());
                    if self
                        .first_seq
                        .is_none_or(|f| (seq.wrapping_sub(f) as i16) < 0)
                    {
                        continue;
                    }
                    self.repaired += 1;
                    if let Some(a) = audio.as_deref_mut() {
                        a.push_rtp(ts, &rec);
                    }
                }
            }
        }
    }
}

/// A datagram of an encrypted session opened (`Ok(Some)`), of a session in the clear
/// (`Ok(None)`: use it as it is), or one that does not open (`Err`, the caller counts it).
fn open(
    opener: Option<&mut security::auth::MediaOpener>,
    data: &[u8],
) -> Result<Option<Vec<u8>>, ()> {
    match opener {
        Some(o) => o.open(data).map(|p| Some(p.packet)).map_err(|_| ()),
        None => Ok(None),
    }
}
