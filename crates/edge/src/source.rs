//! An in-process upstream for tests and the benchmark: real libvpx VP9 SVC pictures of a
//! generated clip, packetized per cumulative layer exactly as the server sends them
//! ([`codec::vp9rtp::LayerStreams`]), with the session description that goes with them.
//!
//! It stands in for the `session` crate's Subscriber until that lands: what the edge consumes
//! is the same either way, RTP packets per (track, stream) with their arrival time.

use codec::ladder::LayerLadder;
use codec::vp9rtp::{LayerStreams, StreamConfig};
use codec::vpx::{EncodedPicture, SvcConfig, SvcEncoder};
use proto::media::{Track, Vp9Params};
use proto::{LayerInfo, SessionInfo};
use std::net::Ipv4Addr;

/// One encoded picture, as RTP packets per cumulative layer (index = stream).
#[derive(Debug, Clone)]
pub struct SourcePicture {
    pub index: u64,
    pub key: bool,
    pub temporal: u8,
    /// Spatial layers re-synced in this picture (bit s).
    pub sync_mask: u8,
    /// 90 kHz presentation time.
    pub pts: i64,
    pub layers: Vec<Vec<Vec<u8>>>,
}

/// Generated video through libvpx and the RFC 9628 packetizer.
pub struct Source {
    enc: SvcEncoder,
    streams: LayerStreams,
    conf: SvcConfig,
    info: SessionInfo,
    n: u32,
}

impl Source {
    /// A source of `conf` (sizes, layers, rates, key and sync intervals).
    pub fn new(conf: SvcConfig) -> codec::Result<Source> {
        let ladder = LayerLadder::spatial_major(&conf.cell_kbps)?;
        let res: Vec<(u16, u16)> = (0..conf.spatial_layers)
            .map(|s| {
                let (w, h) = conf.layer_size(s);
                (w as u16, h as u16)
            })
            .collect();
        let streams = LayerStreams::new(
            ladder.clone(),
            res,
            StreamConfig {
                first_seq: 65_000,
                first_picture_id: 0x7ff0,
                ..Default::default()
            },
        )?;
        let layers: Vec<LayerInfo> = (0..ladder.len())
            .map(|k| LayerInfo {
                rate_bps: u64::from(ladder.layer_kbps(k).unwrap_or(0)) * 1000,
                group: Ipv4Addr::new(239, 77, 0, k as u8),
                port: 7000 + 2 * k as u16,
            })
            .collect();
        let mut info =
            SessionInfo::equal_layers(layers.len(), 0, Ipv4Addr::new(239, 77, 0, 0), 7000);
        info.layers = layers;
        let p = Vp9Params {
            payload_type: 96,
            width: conf.width as u16,
            height: conf.height as u16,
            fps_num: conf.fps_num,
            fps_den: conf.fps_den,
            spatial: conf.spatial_layers as u8,
            temporal: conf.temporal_layers as u8,
        };
        info.tracks = vec![Track::vp9_ladder(0, p, &info.layers, 0x4C43_0000)];
        Ok(Source {
            enc: SvcEncoder::new(conf.clone())?,
            streams,
            conf,
            info,
            n: 0,
        })
    }

    /// A small L3T3 source (640x360 top, 160x90 base) with the default ladder's rate shape
    /// scaled to `total_kbps`, keys every `key_interval` and spatial syncs every 28 frames.
    pub fn small_l3t3(total_kbps: u32, key_interval: u32) -> codec::Result<Source> {
        let mut conf = SvcConfig::l3t3_720p();
        conf.width = 640;
        conf.height = 360;
        conf.cell_kbps = codec::ladder::scale_cells(&conf.cell_kbps, total_kbps);
        conf.keyframe_interval = key_interval;
        Source::new(conf)
    }

    /// The session description of this source.
    pub fn session(&self) -> &SessionInfo {
        &self.info
    }

    /// The encoder configuration.
    pub fn config(&self) -> &SvcConfig {
        &self.conf
    }

    /// Frame interval, 90 kHz ticks.
    pub fn frame_ticks(&self) -> i64 {
        (90_000 * self.conf.fps_den as i64) / self.conf.fps_num.max(1) as i64
    }

    /// Asks the encoder for a key picture (on its next TL0 picture).
    pub fn request_key(&mut self) {
        self.enc.request_keyframe();
    }

    /// Encodes the next picture (without packetizing it).
    pub fn encode_next(&mut self) -> codec::Result<EncodedPicture> {
        loop {
            let f = codec::synth::frame(self.conf.width, self.conf.height, self.n);
            let pts = self.n as i64 * self.frame_ticks();
            self.n += 1;
            if let Some(pic) = self.enc.encode(&f, pts)? {
                return Ok(pic);
            }
        }
    }

    /// Packetizes an encoded picture (sequence numbers, timestamps and picture IDs continue
    /// from the previous one, whatever picture this is: a clip can be looped from a key).
    pub fn packetize(&mut self, pic: &EncodedPicture) -> codec::Result<SourcePicture> {
        let pk = self.streams.packets(pic)?;
        let layers = pk
            .into_iter()
            .map(|v| v.into_iter().map(|p| p.to_bytes(&[])).collect())
            .collect::<codec::Result<Vec<Vec<Vec<u8>>>>>()?;
        Ok(SourcePicture {
            index: pic.index,
            key: pic.key,
            temporal: pic.temporal,
            sync_mask: pic.sync_mask,
            pts: pic.pts,
            layers,
        })
    }

    /// Encodes and packetizes the next picture.
    pub fn next_picture(&mut self) -> codec::Result<SourcePicture> {
        let pic = self.encode_next()?;
        self.packetize(&pic)
    }
}
