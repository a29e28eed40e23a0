//! The RTCP sockets of a session, open while transport layer 0 is held: the audio stream's
//! RTCP port (its RTP port + 1: the audio sender reports, [`crate::audio::Audio::push_rtcp`])
//! and layer 0's (the video's sender reports, one mapping for every layer). The audio stream
//! and its repair stream are media: their sockets follow the Subscriber's joins like every
//! stream of layer 0, and their datagrams go to the session's audio track.

use crate::audio::{Audio, SrMap};
use crate::net::McastSocket;
use proto::{SessionInfo, TrackKind};
use std::net::Ipv4Addr;

/// Open sockets, in the order [`RtcpNet::fds`] lists them.
#[derive(Default)]
pub struct RtcpNet {
    socks: Vec<(Kind, McastSocket)>,
    pub truncated: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Audio,
    Video,
}

impl RtcpNet {
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
            want.push((Kind::Audio, s.group, s.port.wrapping_add(1)));
        }
        if let (Some(l0), Some(_)) = (info.layers.first(), info.track(TrackKind::Video)) {
            want.push((Kind::Video, l0.group, l0.port.wrapping_add(1)));
        }
        for (k, g, p) in want {
            match McastSocket::open_from(g, p, iface, ssm) {
                Ok(s) => self.socks.push((k, s)),
                Err(e) => eprintln!("layercast-player: RTCP socket {g}:{p}: {e}"),
            }
        }
    }

    /// Closes everything (a new session layout).
    pub fn reset(&mut self) {
        self.socks.clear();
    }

    pub fn fds(&self) -> Vec<i32> {
        self.socks.iter().map(|(_, s)| s.raw_fd()).collect()
    }

    /// Reads what socket `i` (an index into [`RtcpNet::fds`]) has: audio sender reports to
    /// `audio`, the video's (layer 0's SSRC) to `video_sr`, each after the Subscriber has
    /// vetted it (sealed in an encrypted session).
    pub fn drain(
        &mut self,
        i: usize,
        buf: &mut [u8],
        sub: &mut session::Subscriber,
        mut audio: Option<&mut Audio>,
        video_sr: &mut Option<SrMap>,
        video_ssrc: Option<u32>,
    ) {
        let Some((kind, s)) = self.socks.get(i) else {
            return;
        };
        for _ in 0..64 {
            let Ok(Some((n, _ts, trunc))) = s.recv(buf) else {
                break;
            };
            if trunc {
                self.truncated += 1;
                continue;
            }
            let Some(data) = sub.handle_sender_report(&buf[..n]) else {
                continue;
            };
            let data = &data[..];
            match kind {
                Kind::Audio => {
                    if let Some(a) = audio.as_deref_mut() {
                        a.push_rtcp(data);
                    }
                }
                Kind::Video => {
                    if let Some(m) = SrMap::from_rtcp(data, video_ssrc, 90_000) {
                        *video_sr = Some(m);
                    }
                }
            }
        }
    }
}
