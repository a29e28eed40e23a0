//! The media model: a session carries tracks (video, audio), each with a codec whose
//! parameters are typed, and an ordered list of streams that ride in the session's cumulative
//! transport layers.
//!
//! Why two levels: the congestion controllers only need the transport layers
//! ([`crate::LayerInfo`]: what a receiver joins, at which rate), while decoders, the edge and
//! the SDP need to know what each stream carries. A video track has one stream per
//! (spatial, temporal) cell of its ladder, stream `k` riding in transport layer `k`; an audio
//! track has one stream, on its own group, that rides in transport layer 0: every viewer who
//! holds any video hears it, and its rate counts in layer 0's announced rate so the controllers
//! see it.

use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;

/// What a track carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrackKind {
    Video,
    Audio,
}

impl TrackKind {
    /// The SDP media type (`m=` line).
    pub fn sdp_media(self) -> &'static str {
        match self {
            TrackKind::Video => "video",
            TrackKind::Audio => "audio",
        }
    }
}

/// VP9 with spatial and temporal layers, RTP payload per RFC 9628.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vp9Params {
    /// RTP payload type.
    pub payload_type: u8,
    /// Picture size of the top spatial layer.
    pub width: u16,
    pub height: u16,
    /// Frame rate of the top temporal layer, `fps_num / fps_den`.
    pub fps_num: u32,
    pub fps_den: u32,
    /// Number of spatial and temporal layers of the encode.
    pub spatial: u8,
    pub temporal: u8,
}

impl Vp9Params {
    /// Frame rate of the top temporal layer.
    pub fn fps(&self) -> f64 {
        if self.fps_den == 0 {
            0.0
        } else {
            self.fps_num as f64 / self.fps_den as f64
        }
    }
}

/// Opus, RTP payload per RFC 7587 (the RTP clock is always 48 kHz).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpusParams {
    /// RTP payload type.
    pub payload_type: u8,
    /// Channels of the encode (1 or 2).
    pub channels: u8,
    /// Frame duration, milliseconds (2.5 to 60; 20 is usual).
    pub frame_ms: u8,
    /// Whether the encoder puts in-band FEC (LBRR) into its packets.
    pub inband_fec: bool,
}

/// A track's codec with its parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Codec {
    Vp9(Vp9Params),
    Opus(OpusParams),
}

impl Codec {
    /// RTP payload type of the media packets.
    pub fn payload_type(&self) -> u8 {
        match self {
            Codec::Vp9(p) => p.payload_type,
            Codec::Opus(p) => p.payload_type,
        }
    }

    /// RTP clock rate, Hz.
    pub fn clock_rate(&self) -> u32 {
        match self {
            Codec::Vp9(_) => 90_000,
            Codec::Opus(_) => 48_000,
        }
    }

    /// A short description for logs and the API, e.g. `VP9 L3T3 1280x720@30`.
    pub fn describe(&self) -> String {
        match self {
            Codec::Vp9(p) => format!(
                "VP9 L{}T{} {}x{}@{}",
                p.spatial,
                p.temporal,
                p.width,
                p.height,
                trim_fps(p.fps())
            ),
            Codec::Opus(p) => format!(
                "Opus 48k {}ch {} ms{}",
                p.channels,
                p.frame_ms,
                if p.inband_fec { " fec" } else { "" }
            ),
        }
    }
}

fn trim_fps(f: f64) -> String {
    let s = format!("{f:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// One RTP stream of a track.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stream {
    /// The cumulative transport layer it rides in (index into `SessionInfo::layers`): a
    /// receiver that holds that layer receives this stream.
    pub layer: u8,
    /// Spatial and temporal layer ids of the cell this stream carries (video; 0 for audio).
    pub spatial: u8,
    pub temporal: u8,
    /// Where it is sent (for video the transport layer's own group and port).
    pub group: Ipv4Addr,
    pub port: u16,
    /// Its RTP SSRC (it has its own sequence-number space).
    pub ssrc: u32,
    /// Its rate alone, bit/s, as counted in its transport layer's announced rate (media plus
    /// repair plus padding).
    pub rate_bps: u64,
    /// How the stream's slots without media carry repair, if they do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<Repair>,
}

/// Forward error correction carried inside a stream's constant-rate slots (`docs/protocols/fec.md`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repair {
    /// RTP payload type of the repair packets (same SSRC and sequence space as the media).
    pub payload_type: u8,
    /// Scheme-specific parameters, opaque at this level (the codec crate reads them).
    pub params: Vec<u8>,
}

/// A track of the session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Track {
    /// Track id, unique in the session (the SDP `a=mid`).
    pub id: u8,
    pub kind: TrackKind,
    pub codec: Codec,
    /// Its streams in dependency order (a video track's stream `k` needs streams `0..k`).
    pub streams: Vec<Stream>,
}

impl Track {
    /// A VP9 track over `layers`: one stream per (spatial, temporal) cell in spatial-major
    /// order, stream `k` in transport layer `k` on that layer's group with SSRC
    /// `ssrc_base + k`; over a single layer (a TFMCC session) one stream carries every cell.
    pub fn vp9_ladder(id: u8, p: Vp9Params, layers: &[crate::LayerInfo], ssrc_base: u32) -> Track {
        let temporal = p.temporal.max(1);
        let cells: Vec<(u8, u8)> = (0..p.spatial.max(1))
            .flat_map(|s| (0..temporal).map(move |t| (s, t)))
            .collect();
        Self::vp9_cells(id, p, layers, &cells, ssrc_base)
    }

    /// [`Track::vp9_ladder`] with the cells in the ladder's own order: stream `k` carries
    /// `cells[k]` (spatial, temporal). Receivers build their ladder from the streams, so any
    /// order that keeps every cell's dependencies below it works.
    pub fn vp9_cells(
        id: u8,
        p: Vp9Params,
        layers: &[crate::LayerInfo],
        order: &[(u8, u8)],
        ssrc_base: u32,
    ) -> Track {
        let cells = p.spatial as usize * p.temporal.max(1) as usize;
        let streams = if layers.len() == 1 && cells > 1 {
            vec![Stream {
                layer: 0,
                spatial: p.spatial.saturating_sub(1),
                temporal: p.temporal.saturating_sub(1),
                group: layers[0].group,
                port: layers[0].port,
                ssrc: ssrc_base,
                rate_bps: layers[0].rate_bps,
                repair: None,
            }]
        } else {
            layers
                .iter()
                .enumerate()
                .map(|(k, l)| Stream {
                    layer: k as u8,
                    spatial: order.get(k).map_or(0, |c| c.0),
                    temporal: order.get(k).map_or(0, |c| c.1),
                    group: l.group,
                    port: l.port,
                    ssrc: ssrc_base.wrapping_add(k as u32),
                    rate_bps: l.rate_bps,
                    repair: None,
                })
                .collect()
        };
        Track {
            id,
            kind: TrackKind::Video,
            codec: Codec::Vp9(p),
            streams,
        }
    }

    /// The stream with this SSRC.
    pub fn stream_by_ssrc(&self, ssrc: u32) -> Option<(usize, &Stream)> {
        self.streams
            .iter()
            .enumerate()
            .find(|(_, s)| s.ssrc == ssrc)
    }
}
