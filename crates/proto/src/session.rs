//! What a receiver knows about a layered session: the content of the Session Announcement
//! Message (SAM, `era.md` §1.1.5), decoded. The wire encoding lives in [`crate::wire::sam`].
//!
//! Two views of one session: the cumulative transport [`LayerInfo`]s a controller joins and
//! counts, and the media [`Track`]s whose streams ride in them ([`crate::media`]).

use crate::media::{Track, TrackKind};
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;
use std::time::Duration;

/// One cumulative layer as announced by the sender.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerInfo {
    /// Rate of this layer alone (not cumulative), bit/s.
    pub rate_bps: u64,
    /// The layer's multicast group.
    pub group: Ipv4Addr,
    /// The layer's UDP port.
    pub port: u16,
}

/// The session description every receiver-driven controller needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// Sender-chosen session identifier (changes when the session restarts).
    pub session_id: u32,
    /// Announcement sequence number, so that stale or replayed SAMs can be told apart.
    pub announce_seq: u32,
    /// The sender's unicast address (SSM source, TFMCC feedback target).
    pub sender: Ipv4Addr,
    /// Layers in cumulative order: layer 0 is the base layer.
    pub layers: Vec<LayerInfo>,
    /// Nominal packet size M in bytes (payload bytes on the wire that pairs are built from).
    pub packet_size: u16,
    /// Packets per bunch (2 = packet pairs).
    pub bunch_len: u8,
    /// Rate adaptation interval (ERA's RAI, PLM's check period C).
    pub adapt_interval: Duration,
    /// Period between two announcements.
    pub announce_interval: Duration,
    /// The media tracks; empty for synthetic constant-rate layers (protocol experiments).
    #[serde(default)]
    pub tracks: Vec<Track>,
    /// The sender's feedback port (receiver reports, media requests) when it is not layer 0's
    /// port + 1; `None` means that default. See [`SessionInfo::feedback_port_or_default`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback_port: Option<u16>,
    /// The sender answers retransmission requests on the feedback port
    /// (docs/protocols/retransmission.md).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retransmission: bool,
}

impl SessionInfo {
    /// Cumulative rate of layers `0..=top`, bit/s (`R_i` of `era.md` Eq. 5-1).
    /// Indices past the last layer saturate at the full session rate.
    pub fn cumulative_rate(&self, top: usize) -> f64 {
        self.layers
            .iter()
            .take(top.saturating_add(1))
            .map(|l| l.rate_bps as f64)
            .sum()
    }

    /// Number of layers in the session.
    pub fn layer_count(&self) -> usize {
        self.layers.len()
    }

    /// The UDP port on the sender's address that receives the session's feedback: the
    /// announced one, else layer 0's port + 1 (the convention of senders that announce none).
    pub fn feedback_port_or_default(&self) -> Option<u16> {
        self.feedback_port
            .or_else(|| self.layers.first()?.port.checked_add(1))
    }

    /// The first track of `kind`.
    pub fn track(&self, kind: TrackKind) -> Option<&Track> {
        self.tracks.iter().find(|t| t.kind == kind)
    }

    /// The session's media in one line for logs and the API (`VP9 L3T3 1280x720@30 + Opus
    /// 48k 2ch 20 ms fec`; empty for synthetic layers).
    pub fn describe(&self) -> String {
        self.tracks
            .iter()
            .map(|t| t.codec.describe())
            .collect::<Vec<_>>()
            .join(" + ")
    }

    /// Every (group, port) a receiver joins for transport layer `k`: the layer's own, then
    /// those of streams that ride in it on a group of their own (the audio track with layer
    /// 0), without repeats.
    pub fn endpoints_of_layer(&self, k: usize) -> Vec<(Ipv4Addr, u16)> {
        let mut v = Vec::new();
        if let Some(l) = self.layers.get(k) {
            v.push((l.group, l.port));
        }
        for s in self.tracks.iter().flat_map(|t| &t.streams) {
            if s.layer as usize == k && !v.contains(&(s.group, s.port)) {
                v.push((s.group, s.port));
            }
        }
        v
    }

    /// A session of `n` equal layers of `rate_bps` each, on consecutive groups starting at
    /// `first_group` and ports starting at `first_port`. The thesis' default is
    /// `equal_layers(100, 20_000, ...)` with 512-byte packets and a 1 s RAI.
    pub fn equal_layers(
        n: usize,
        rate_bps: u64,
        first_group: Ipv4Addr,
        first_port: u16,
    ) -> SessionInfo {
        let base = u32::from(first_group);
        let layers = (0..n)
            .map(|k| LayerInfo {
                rate_bps,
                group: Ipv4Addr::from(base.wrapping_add(k as u32)),
                port: first_port.wrapping_add(k as u16),
            })
            .collect();
        SessionInfo {
            session_id: 1,
            announce_seq: 0,
            sender: Ipv4Addr::UNSPECIFIED,
            layers,
            packet_size: 512,
            bunch_len: 2,
            adapt_interval: Duration::from_secs(1),
            announce_interval: Duration::from_secs(1),
            tracks: Vec::new(),
            feedback_port: None,
            retransmission: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cumulative_rate_matches_eq_5_1() {
        let s = SessionInfo::equal_layers(100, 20_000, Ipv4Addr::new(239, 1, 0, 0), 5000);
        assert_eq!(s.cumulative_rate(0), 20_000.0);
        assert_eq!(s.cumulative_rate(19), 400_000.0);
        assert_eq!(s.cumulative_rate(1_000), 2_000_000.0);
        assert_eq!(s.layers[3].group, Ipv4Addr::new(239, 1, 0, 3));
    }
}
