//! A session's configuration and its resolved, checked form.

use super::{
    check_protocol, check_source, temporal_fps, video_layer_rate, AudioConfig, ResolvedVideo,
    VideoConfig, DEFAULT_VIDEO_PACKET,
};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;
use std::time::Duration;

/// One session, as a `[[session]]` table, a `--session` JSON flag or a `POST /api/sessions`
/// body. Unknown fields are errors so that typos do not pass silently.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionConfig {
    /// Stable id used in URLs; default: the name, else `s<n>`. Stable across restarts so a
    /// player's announcement URL keeps working.
    pub id: Option<String>,
    pub name: Option<String>,
    /// Congestion-control protocol receivers should run (`lcc`, `era`, `plm`, ...). Default
    /// `lcc`, the product controller (docs/protocols/lcc.md).
    pub protocol: Option<String>,
    /// `synthetic` (constant-rate padding layers). Video sources need the codec crate.
    pub source: Option<String>,
    /// Number of equal layers (with `layer_rate_bps`); ignored if `layer_rates_bps` is given.
    pub layers: Option<usize>,
    /// Rate of each equal layer, bit/s.
    pub layer_rate_bps: Option<u64>,
    /// Per-layer (non-cumulative) rates, bit/s, base first.
    pub layer_rates_bps: Option<Vec<u64>>,
    /// UDP payload bytes of every data packet (ERA's M). Default 512; 600 for video
    /// (`DEFAULT_VIDEO_PACKET`).
    pub packet_size: Option<u16>,
    /// Packets per bunch. Default 2 (packet pairs).
    pub bunch_len: Option<u8>,
    /// Receivers' adaptation interval, ms (ERA's RAI). Default 1000.
    pub adapt_interval_ms: Option<u64>,
    /// First group of this session (layer k on group + k).
    pub group: Option<Ipv4Addr>,
    /// First port (layer k on port + 2k).
    pub port: Option<u16>,
    /// Video parameters for `source = "testpattern"`.
    pub video: Option<VideoConfig>,
    /// An Opus audio track from the source's sound (GStreamer sources; issue 21,
    /// docs/protocols/audio.md). Absent: no audio track.
    pub audio: Option<AudioConfig>,
    /// Encrypt every data packet (ChaCha20-Poly1305 with a group key that players fetch
    /// from the authenticated key API). Needs `api_token`. Default false.
    pub encrypt: Option<bool>,
    /// TFMCC sessions only: accept only receiver reports that carry a valid HMAC under the
    /// receiver's key (derived from a per-session secret that players fetch from the
    /// authenticated key API), and apply the influence limiter to them
    /// (docs/security.md §4). Needs `api_token`. Default false.
    pub auth_reports: Option<bool>,
    /// Layered video sessions: keep each layer's packets for a second and send the ones a
    /// viewer reports lost again, to it alone, within a budget (docs/protocols/retransmission.md).
    /// Default true for layered video; TFMCC and synthetic sessions have none.
    pub retransmission: Option<bool>,
}

/// A session config with every default filled in and every value checked.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedSession {
    pub id: String,
    pub name: String,
    pub protocol: String,
    pub source: String,
    pub rates_bps: Vec<u64>,
    pub packet_size: u16,
    pub bunch_len: u8,
    pub adapt_interval: Duration,
    pub group: Ipv4Addr,
    pub port: u16,
    pub video: Option<ResolvedVideo>,
    /// The audio track (issue 21), if configured.
    pub audio: Option<crate::media::audio::AudioSettings>,
    pub encrypt: bool,
    pub auth_reports: bool,
    /// The session offers retransmission (announced in the SAM).
    pub retransmission: bool,
}

/// Smallest packet: 12-byte RTP header + 16-byte cc extension + 1 byte of payload.
pub const MIN_PACKET: u16 = 29;
/// Largest UDP payload that fits a 1500-byte MTU without fragmentation.
pub const MAX_PACKET: u16 = 1472;

impl SessionConfig {
    /// Fills defaults and validates; `ctx` names the session in errors (`session[0]`, `body`).
    pub fn resolve(
        &self,
        ctx: &str,
        default_id: &str,
        default_group: Ipv4Addr,
        default_port: u16,
    ) -> Result<ResolvedSession> {
        let key = |k: &str| format!("{ctx}.{k}");
        let protocol = self.protocol.clone().unwrap_or_else(|| "lcc".into());
        if let Err(why) = check_protocol(&protocol) {
            return Err(Error::config(&key("protocol"), why));
        }
        let source = self.source.clone().unwrap_or_else(|| "synthetic".into());
        check_source(&source).map_err(|reason| Error::config(&key("source"), reason))?;
        let video = if source == "synthetic" {
            None
        } else if crate::video::FrameSource::from_source(&source).is_some() {
            Some(self.video.clone().unwrap_or_default().resolve(&key)?)
        } else {
            return Err(Error::config(
                &key("source"),
                format!("{source:?}: one of synthetic, testpattern, gst-testpattern, file://PATH, http://, rtsp://, srt:// URIs, v4l2:///dev/videoN"),
            ));
        };
        let bunch_len = self.bunch_len.unwrap_or(2);
        if bunch_len == 0 || bunch_len > 64 {
            return Err(Error::config(
                &key("bunch_len"),
                format!("{bunch_len} outside 1..=64"),
            ));
        }
        let default_packet = if video.is_some() {
            DEFAULT_VIDEO_PACKET
        } else {
            512
        };
        let rates = match (&video, &self.layer_rates_bps) {
            (Some(v), _) => {
                let m = self.packet_size.unwrap_or(default_packet);
                v.cells()
                    .into_iter()
                    .map(|(sl, t)| {
                        video_layer_rate(
                            v.cell_kbps[sl][t],
                            temporal_fps(v.fps, v.temporal, t),
                            m,
                            bunch_len,
                            v.headroom(sl, t),
                        )
                    })
                    .collect()
            }
            (None, Some(r)) => r.clone(),
            (None, None) => {
                // Checked before the allocation: a `layers` of 10^11 from a file, a flag or
                // a POST body must be an error, not an allocation failure that aborts the
                // process (found by the config_file fuzz target).
                let n = self.layers.unwrap_or(10);
                if !(1..=255).contains(&n) {
                    return Err(Error::config(
                        &key("layers"),
                        format!("{n} layers; need 1..=255"),
                    ));
                }
                vec![self.layer_rate_bps.unwrap_or(100_000); n]
            }
        };
        if rates.is_empty() || rates.len() > 255 {
            return Err(Error::config(
                &key("layers"),
                format!("{} layers; need 1..=255", rates.len()),
            ));
        }
        if let Some(i) = rates
            .iter()
            .position(|&r| !(1_000..=1_000_000_000).contains(&r))
        {
            return Err(Error::config(
                &key("layer_rates_bps"),
                format!("layer {i} rate {} outside 1000..=1e9 bit/s", rates[i]),
            ));
        }
        let packet_size = self.packet_size.unwrap_or(default_packet);
        if video.is_some() && packet_size < 200 {
            return Err(Error::config(
                &key("packet_size"),
                "video needs at least 200 bytes",
            ));
        }
        if !(MIN_PACKET..=MAX_PACKET).contains(&packet_size) {
            return Err(Error::config(
                &key("packet_size"),
                format!("{packet_size} outside {MIN_PACKET}..={MAX_PACKET} bytes"),
            ));
        }
        let encrypt = self.encrypt.unwrap_or(false);
        if encrypt && packet_size < 64 {
            return Err(Error::config(
                &key("packet_size"),
                "encrypted packets need at least 64 bytes (22 go to the AEAD)",
            ));
        }
        let rai = self.adapt_interval_ms.unwrap_or(1000);
        if !(50..=60_000).contains(&rai) {
            return Err(Error::config(
                &key("adapt_interval_ms"),
                format!("{rai} outside 50..=60000"),
            ));
        }
        let group = self.group.unwrap_or(default_group);
        if !group.is_multicast() {
            return Err(Error::config(
                &key("group"),
                format!("{group} is not multicast"),
            ));
        }
        let last = u32::from(group).checked_add(rates.len() as u32 - 1);
        if !last.is_some_and(|l| Ipv4Addr::from(l).is_multicast()) {
            return Err(Error::config(
                &key("group"),
                format!(
                    "{} layers from {group} leave the multicast range",
                    rates.len()
                ),
            ));
        }
        let port = self.port.unwrap_or(default_port);
        if port == 0 || (port as usize) + 2 * (rates.len() - 1) > 65_535 {
            return Err(Error::config(
                &key("port"),
                format!("{port} (+2 per layer) does not fit in 1..=65535"),
            ));
        }
        let name = self.name.clone().unwrap_or_else(|| default_id.to_string());
        let id = self
            .id
            .clone()
            .or(self.name.clone())
            .unwrap_or_else(|| default_id.into());
        if id.is_empty()
            || id.len() > 64
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(Error::config(
                &key("id"),
                format!("{id:?}: use 1..64 characters of [A-Za-z0-9_-]"),
            ));
        }
        // Issue 21: the audio track needs a GStreamer source and a layered session.
        let audio = match &self.audio {
            None => None,
            Some(a) => {
                let settings = a.resolve(&key)?;
                let gst = matches!(
                    crate::video::FrameSource::from_source(&source),
                    Some(crate::video::FrameSource::Gst(_))
                );
                if !gst {
                    return Err(Error::config(
                        &key("audio"),
                        "needs a GStreamer source (gst-testpattern, a URI, a capture device)",
                    ));
                }
                if protocol == "tfmcc" {
                    return Err(Error::config(
                        &key("audio"),
                        "not carried by TFMCC sessions yet",
                    ));
                }
                Some(settings)
            }
        };
        let layered_video = video.is_some() && protocol != "tfmcc";
        let retransmission = match self.retransmission {
            Some(true) if !layered_video => {
                return Err(Error::config(
                    &key("retransmission"),
                    "only layered video sessions retransmit (not TFMCC, not synthetic layers)",
                ))
            }
            Some(on) => on,
            None => layered_video,
        };
        Ok(ResolvedSession {
            id,
            name,
            protocol,
            source,
            rates_bps: rates,
            packet_size,
            bunch_len,
            adapt_interval: Duration::from_millis(rai),
            group,
            port,
            video,
            audio,
            encrypt,
            auth_reports: self.auth_reports.unwrap_or(false),
            retransmission,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_defaults_and_validation() {
        let g = Ipv4Addr::new(239, 255, 77, 0);
        let r = SessionConfig::default()
            .resolve("s", "s1", g, 5004)
            .unwrap();
        assert_eq!(r.rates_bps, vec![100_000; 10]);
        assert_eq!((r.packet_size, r.bunch_len, r.id.as_str()), (512, 2, "s1"));
        let bad = SessionConfig {
            packet_size: Some(2000),
            ..Default::default()
        };
        let e = bad.resolve("body", "x", g, 5004).unwrap_err().to_string();
        assert!(e.contains("body.packet_size"), "{e}");
        // A huge layer count is refused before anything is allocated for it (it aborted the
        // process before: the config_file fuzz target's finding).
        let huge = SessionConfig {
            layers: Some(100_009_551_615),
            ..Default::default()
        };
        let e = huge.resolve("body", "x", g, 5004).unwrap_err().to_string();
        assert!(e.contains("body.layers"), "{e}");
        let bad = SessionConfig {
            protocol: Some("tcp".into()),
            ..Default::default()
        };
        assert!(bad
            .resolve("b", "x", g, 5004)
            .unwrap_err()
            .to_string()
            .contains("b.protocol"));
        let bad = SessionConfig {
            group: Some(Ipv4Addr::new(239, 255, 255, 255)),
            layers: Some(2),
            ..Default::default()
        };
        assert!(bad
            .resolve("b", "x", g, 5004)
            .unwrap_err()
            .to_string()
            .contains("b.group"));
    }

    /// Retransmission is on by default for layered video, off for synthetic layers and TFMCC,
    /// and asking for it where it cannot be is an error that names the key.
    #[test]
    fn retransmission_defaults_to_layered_video_only() {
        let g = Ipv4Addr::new(239, 255, 77, 0);
        let video = |protocol: &str, rtx: Option<bool>| SessionConfig {
            source: Some("testpattern".into()),
            protocol: Some(protocol.into()),
            retransmission: rtx,
            ..Default::default()
        };
        let r = video("era", None).resolve("s", "s1", g, 5004).unwrap();
        assert!(r.retransmission);
        let r = video("era", Some(false))
            .resolve("s", "s1", g, 5004)
            .unwrap();
        assert!(!r.retransmission);
        let r = SessionConfig::default()
            .resolve("s", "s1", g, 5004)
            .unwrap();
        assert!(!r.retransmission);
        let synthetic = SessionConfig {
            retransmission: Some(true),
            ..Default::default()
        };
        for bad in [synthetic, video("tfmcc", Some(true))] {
            let e = bad.resolve("s", "s1", g, 5004).unwrap_err().to_string();
            assert!(e.contains("s.retransmission"), "{e}");
        }
        assert!(
            !video("tfmcc", None)
                .resolve("s", "s1", g, 5004)
                .unwrap()
                .retransmission
        );
    }
}
