//! What the edge needs to know about a session's video: which (spatial, temporal) cell each
//! upstream stream carries, the picture group, the picture sizes, the rates of the cells. Built
//! from the session description ([`proto::SessionInfo`]); the upstream scalability structure
//! (RFC 9628 SS), when one arrives, refines the sizes and the picture group.

use crate::error::{Error, Result};
use codec::vp9rtp::{gof_for_temporal_layers, GofEntry, ScalabilityStructure};
use proto::media::{Codec, TrackKind};
use proto::SessionInfo;

/// One (spatial, temporal) cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cell {
    pub spatial: u8,
    pub temporal: u8,
}

/// The video track of a session, as the edge forwards it.
#[derive(Debug, Clone, PartialEq)]
pub struct VideoLayout {
    /// Track id (the SDP mid of the session's own description; the browser gets its own).
    pub track_id: u8,
    /// RTP payload type of the media packets upstream (others, e.g. repair, are ignored).
    pub payload_type: u8,
    pub spatial: u8,
    pub temporal: u8,
    /// The cell each upstream stream carries, by stream index; a single stream carrying
    /// every cell (a one-layer session) has one entry and the descriptor names the cell.
    pub streams: Vec<Cell>,
    /// Rate of each stream as announced, bit/s (media + repair + padding).
    pub stream_rates: Vec<u64>,
    /// Picture size of each spatial layer, lowest first.
    pub resolutions: Vec<(u16, u16)>,
    /// The picture group (non-flexible mode): entry `i` describes the picture `i` positions
    /// after a TL0 picture that starts a group.
    pub gof: Vec<GofEntry>,
    /// Frame rate of the top temporal layer.
    pub fps: f64,
}

impl VideoLayout {
    /// The layout of the session's first VP9 track.
    pub fn from_session(name: &str, info: &SessionInfo) -> Result<Self> {
        let track = info
            .track(TrackKind::Video)
            .ok_or_else(|| Error::NoVideo(name.to_string()))?;
        let Codec::Vp9(p) = &track.codec else {
            return Err(Error::NoVideo(name.to_string()));
        };
        if p.spatial == 0 || p.spatial > 8 || p.temporal == 0 || p.temporal > 8 {
            return Err(Error::Config(format!(
                "session {name:?}: {} spatial x {} temporal layers",
                p.spatial, p.temporal
            )));
        }
        if track.streams.is_empty() {
            return Err(Error::Config(format!(
                "session {name:?}: video without streams"
            )));
        }
        let streams: Vec<Cell> = track
            .streams
            .iter()
            .map(|s| Cell {
                spatial: s.spatial,
                temporal: s.temporal,
            })
            .collect();
        let ns = p.spatial as u32;
        let resolutions = (0..ns)
            .map(|s| {
                let shift = ns - 1 - s;
                (
                    (p.width as u32).div_ceil(1 << shift) as u16,
                    (p.height as u32).div_ceil(1 << shift) as u16,
                )
            })
            .collect();
        Ok(VideoLayout {
            track_id: track.id,
            payload_type: p.payload_type,
            spatial: p.spatial,
            temporal: p.temporal,
            stream_rates: track.streams.iter().map(|s| s.rate_bps).collect(),
            streams,
            resolutions,
            gof: gof_for_temporal_layers(p.temporal as usize),
            fps: p.fps(),
        })
    }

    /// Whether one stream carries every cell.
    pub fn single_stream(&self) -> bool {
        self.streams.len() == 1 && (self.spatial > 1 || self.temporal > 1)
    }

    /// The stream that carries `cell`.
    pub fn stream_of(&self, cell: Cell) -> Option<usize> {
        if self.single_stream() {
            return Some(0);
        }
        self.streams.iter().position(|c| *c == cell)
    }

    /// Number of pictures in the picture group (1 when there is none).
    pub fn gof_len(&self) -> u64 {
        self.gof.len().max(1) as u64
    }

    /// The picture-group entry of a picture `offset` pictures after a group start.
    pub fn gof_entry(&self, offset: u64) -> Option<&GofEntry> {
        self.gof.get((offset % self.gof_len()) as usize)
    }

    /// Rate of the cells with `s <= spatial` and `t <= temporal`, bit/s (announced).
    pub fn rate_of(&self, spatial: u8, temporal: u8) -> u64 {
        if self.single_stream() {
            return self.stream_rates.first().copied().unwrap_or(0);
        }
        self.streams
            .iter()
            .zip(&self.stream_rates)
            .filter(|(c, _)| c.spatial <= spatial && c.temporal <= temporal)
            .map(|(_, r)| *r)
            .sum()
    }

    /// Adopt the sizes and picture group of an upstream scalability structure that describes
    /// every spatial layer.
    pub fn adopt_ss(&mut self, ss: &ScalabilityStructure) -> bool {
        if ss.spatial_layers != self.spatial {
            return false;
        }
        let mut changed = false;
        if ss.resolutions.len() == self.spatial as usize && ss.resolutions != self.resolutions {
            self.resolutions = ss.resolutions.clone();
            changed = true;
        }
        if !ss.gof.is_empty() && ss.gof != self.gof {
            self.gof = ss.gof.clone();
            changed = true;
        }
        changed
    }

    /// The full scalability structure the browser gets with every key picture.
    pub fn scalability_structure(&self) -> ScalabilityStructure {
        ScalabilityStructure {
            resolutions: self.resolutions.clone(),
            spatial_layers: self.spatial,
            gof: self.gof.clone(),
        }
    }

    /// Frame rate a receiver of temporal layers `0..=t` gets.
    pub fn fps_of(&self, t: u8) -> f64 {
        let down = self.temporal.saturating_sub(1).saturating_sub(t);
        self.fps / f64::from(1u32 << down.min(7))
    }

    /// The cumulative ladder index of cell `(s, t)` (what a native player holding the same
    /// top cell would report as its layer count minus one).
    pub fn ladder_index(&self, s: u8, t: u8) -> usize {
        self.stream_of(Cell {
            spatial: s,
            temporal: t,
        })
        .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::l3t3_session;
    use std::net::Ipv4Addr;

    #[test]
    fn layout_of_the_default_ladder() {
        let l = VideoLayout::from_session("s", &l3t3_session()).unwrap();
        assert_eq!(l.resolutions, vec![(320, 180), (640, 360), (1280, 720)]);
        assert_eq!(l.gof_len(), 4);
        assert_eq!(
            l.stream_of(Cell {
                spatial: 1,
                temporal: 2
            }),
            Some(5)
        );
        assert_eq!(l.rate_of(0, 2), 150_000);
        assert_eq!(l.rate_of(1, 2), 550_000);
        assert_eq!(l.rate_of(2, 2), 1_550_000);
        assert_eq!(l.fps_of(2), 30.0);
        assert_eq!(l.fps_of(0), 7.5);
    }

    #[test]
    fn synthetic_sessions_have_no_video() {
        let info = SessionInfo::equal_layers(3, 1000, Ipv4Addr::new(239, 9, 0, 0), 6000);
        assert!(matches!(
            VideoLayout::from_session("x", &info),
            Err(Error::NoVideo(_))
        ));
    }
}
