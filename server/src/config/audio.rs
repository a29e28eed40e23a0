//! A session's audio track.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// The audio track of a session (`"audio": {"kbps": 64}`; every field optional).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AudioConfig {
    /// Opus bit rate, kbit/s, 32..=128. Default 64.
    pub kbps: Option<u32>,
    /// 1 or 2. Default 2.
    pub channels: Option<u8>,
    /// In-band FEC (each packet carries a coarse copy of the one before). Default true.
    pub fec: Option<bool>,
}

impl AudioConfig {
    pub(super) fn resolve(
        &self,
        key: &dyn Fn(&str) -> String,
    ) -> Result<crate::media::audio::AudioSettings> {
        let kbps = self.kbps.unwrap_or(64);
        if !(32..=128).contains(&kbps) {
            return Err(Error::config(
                &key("audio.kbps"),
                format!("{kbps} outside 32..=128"),
            ));
        }
        let channels = self.channels.unwrap_or(2);
        if !(1..=2).contains(&channels) {
            return Err(Error::config(
                &key("audio.channels"),
                format!("{channels}: 1 or 2"),
            ));
        }
        Ok(crate::media::audio::AudioSettings {
            channels,
            bitrate: kbps * 1000,
            inband_fec: self.fec.unwrap_or(true),
        })
    }
}
