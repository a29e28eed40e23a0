//! The audio track inside the Subscriber: its endpoints ride in transport layer 0 (joined and
//! left with it, like every stream of the layer), its datagrams are opened and handed to the
//! track's receive side ([`crate::audio::AudioReceive`]) instead of the video path, and a new
//! session description builds the track afresh.

use super::*;
use crate::audio::AudioLayout;

impl Subscriber {
    /// The endpoints a receiver of layer `k` joins: the layer's own and its tracks' streams
    /// (`SessionInfo::endpoints_of_layer`), plus the audio repair stream's port when the audio
    /// stream riding in `k` has repair.
    pub(super) fn layer_endpoints(info: &SessionInfo, k: usize) -> Vec<(Ipv4Addr, u16)> {
        let mut v = info.endpoints_of_layer(k);
        if let Some(a) = AudioLayout::of(info).filter(|a| a.layer as usize == k) {
            if let Some(p) = a.repair_port() {
                if !v.contains(&(a.group, p)) {
                    v.push((a.group, p));
                }
            }
        }
        v
    }

    /// The audio track of a newly accepted description (or none).
    pub(super) fn configure_audio(&mut self, info: &SessionInfo) {
        let delay = self.cfg.audio_delay.as_nanos() as u64;
        self.audio = AudioLayout::of(info)
            .filter(|_| self.cfg.deliver_media)
            .map(|l| AudioReceive::new(&l, delay));
    }

    /// Takes a datagram that belongs to the audio track (on a held endpoint); returns whether
    /// it did.
    pub(super) fn audio_datagram(
        &mut self,
        group: Ipv4Addr,
        port: u16,
        recv_time: Time,
        bytes: &[u8],
    ) -> bool {
        let Some(a) = self.audio.as_mut() else {
            return false;
        };
        let l = a.layout();
        let repair = l.repair_port() == Some(port);
        if l.group != group || (l.port != port && !repair) {
            return false;
        }
        if !self
            .streams
            .iter()
            .any(|s| (s.group, s.port) == (group, port))
        {
            self.drops.wrong_layer += 1;
            return true;
        }
        let Some(data) = super::input::open_media(self.opener.as_mut(), bytes) else {
            a.auth_failed();
            return true;
        };
        if repair {
            a.push_repair(recv_time.as_nanos(), &data);
        } else {
            a.push_media(recv_time.as_nanos(), &data);
        }
        true
    }
}
