//! SDP (RFC 8866) for one cumulative layer's RTP stream, so that stock receivers (GStreamer,
//! ffmpeg/ffplay) can play layer 0 on its own.

use crate::error::{Error, Result};
use std::net::IpAddr;

/// URI of the congestion-control header extension (RFC 8285) carried by every layer.
pub const CC_EXTENSION_URI: &str = "urn:layercast:cc";

/// What the SDP of one layer stream says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerSdp {
    /// Session name (`s=`).
    pub session_name: String,
    /// Originating (sender) address for `o=`.
    pub origin: IpAddr,
    /// Destination (unicast or multicast group) for `c=`.
    pub dest: IpAddr,
    /// Multicast TTL written as `c=.../ttl` for IPv4 groups. Default 16.
    pub ttl: u8,
    pub port: u16,
    pub payload_type: u8,
    /// `encoding name/clock rate` of the `a=rtpmap:` line. Default `VP9/90000`.
    pub encoding: String,
    /// Extension id of the CC extension (1..=14 for the one-byte form). Default 1.
    pub cc_ext_id: u8,
    /// SSRC of the stream, written as `a=ssrc:` when set.
    pub ssrc: Option<u32>,
    /// Session id for `o=`.
    pub session_id: u64,
    /// Session version for `o=` (a sender bumps it when the description changes). Default =
    /// `session_id`.
    pub session_version: u64,
    /// Source-specific multicast: the one sender a receiver should accept, written as
    /// `a=source-filter:` (RFC 4570) for the video group and for the audio group.
    pub source: Option<IpAddr>,
    /// FEC of the stream (`a=x-layercast-fec:`, docs/protocols/fec.md). The repair payload
    /// type is not listed on the `m=` line: stock receivers drop its packets.
    pub fec: Option<crate::fec::FecParams>,
    /// The session's audio track, written as a second media section after the video.
    pub audio: Option<OpusSdp>,
}

/// The `m=audio` section of an Opus track (RFC 7587 §7): its own group, `opus/48000/2` as
/// the RFC requires whatever the channel count, and the `fmtp` parameters a receiver needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpusSdp {
    /// The audio group (or unicast destination), written as a media-level `c=`.
    pub dest: IpAddr,
    pub ttl: u8,
    pub port: u16,
    pub payload_type: u8,
    /// Channels the encoder codes (2 = `stereo=1`).
    pub channels: u8,
    pub inband_fec: bool,
    /// Target bit rate, bit/s (`maxaveragebitrate`).
    pub bitrate: u32,
    pub ssrc: Option<u32>,
}

impl OpusSdp {
    /// The media section (CRLF line ends), `m=` line first; `source` as in [`LayerSdp`].
    fn render(&self, source: Option<IpAddr>) -> Result<String> {
        if !(96..=127).contains(&self.payload_type) {
            return Err(Error::Config(
                "Opus needs a dynamic payload type 96..=127".into(),
            ));
        }
        let fam = if self.dest.is_ipv4() { "IP4" } else { "IP6" };
        let c = match self.dest {
            IpAddr::V4(a) if a.is_multicast() => format!("c=IN IP4 {a}/{}", self.ttl),
            a => format!("c=IN {fam} {a}"),
        };
        let pt = self.payload_type;
        let mut s = format!("m=audio {} RTP/AVP {pt}\r\n{c}\r\n", self.port);
        s.push_str(&format!("a=rtpmap:{pt} opus/48000/2\r\n"));
        s.push_str(&format!(
            "a=fmtp:{pt} minptime=10;useinbandfec={};stereo={};sprop-stereo={};maxaveragebitrate={}\r\n",
            u8::from(self.inband_fec),
            u8::from(self.channels == 2),
            u8::from(self.channels == 2),
            self.bitrate
        ));
        s.push_str("a=ptime:20\r\n");
        if let Some(ssrc) = self.ssrc {
            s.push_str(&format!("a=ssrc:{ssrc} cname:layercast\r\n"));
        }
        if let Some(f) = source_filter(self.dest, source) {
            s.push_str(&f);
            s.push_str("\r\n");
        }
        s.push_str("a=recvonly\r\n");
        Ok(s)
    }
}

/// `a=source-filter: incl` (RFC 4570) naming `source` as the one sender of `dest`, without
/// line end; none when there is no source or the address families differ.
fn source_filter(dest: IpAddr, source: Option<IpAddr>) -> Option<String> {
    let src = source?;
    let fam = match (dest, src) {
        (IpAddr::V4(_), IpAddr::V4(_)) => "IP4",
        (IpAddr::V6(_), IpAddr::V6(_)) => "IP6",
        _ => return None,
    };
    Some(format!("a=source-filter: incl IN {fam} {dest} {src}"))
}

impl LayerSdp {
    /// Defaults for layer 0 to `dest:port`.
    pub fn new(origin: IpAddr, dest: IpAddr, port: u16) -> Self {
        LayerSdp {
            session_name: "Layercast layer 0".into(),
            origin,
            dest,
            ttl: 16,
            port,
            payload_type: 96,
            encoding: "VP9/90000".into(),
            cc_ext_id: 1,
            ssrc: None,
            session_id: 1,
            session_version: 1,
            source: None,
            fec: None,
            audio: None,
        }
    }

    /// Render the SDP text (CRLF line ends).
    pub fn render(&self) -> Result<String> {
        if self.payload_type < 96 || self.payload_type > 127 {
            return Err(Error::Config(
                "VP9 needs a dynamic payload type 96..=127".into(),
            ));
        }
        if !(1..=14).contains(&self.cc_ext_id) {
            return Err(Error::Config("extension id must be 1..=14".into()));
        }
        let fam = |a: &IpAddr| if a.is_ipv4() { "IP4" } else { "IP6" };
        let mut s = String::new();
        let mut l = |line: String| {
            s.push_str(&line);
            s.push_str("\r\n");
        };
        l("v=0".into());
        l(format!(
            "o=- {} {} IN {} {}",
            self.session_id,
            self.session_version,
            fam(&self.origin),
            self.origin
        ));
        l(format!(
            "s={}",
            self.session_name.replace(['\r', '\n'], " ")
        ));
        let c = match self.dest {
            IpAddr::V4(a) if a.is_multicast() => format!("c=IN IP4 {a}/{}", self.ttl),
            a => format!("c=IN {} {a}", fam(&a)),
        };
        l(c);
        l("t=0 0".into());
        if let Some(f) = source_filter(self.dest, self.source) {
            l(f);
        }
        l(format!(
            "m=video {} RTP/AVP {}",
            self.port, self.payload_type
        ));
        l(format!(
            "a=rtpmap:{} {}",
            self.payload_type,
            self.encoding.replace(['\r', '\n'], " ")
        ));
        l(format!("a=extmap:{} {}", self.cc_ext_id, CC_EXTENSION_URI));
        if let Some(f) = &self.fec {
            l(format!("a=x-layercast-fec:{}", f.sdp_attribute()));
        }
        if let Some(ssrc) = self.ssrc {
            l(format!("a=ssrc:{ssrc} cname:layercast"));
        }
        l("a=recvonly".into());
        if let Some(a) = &self.audio {
            s.push_str(&a.render(self.source)?);
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer0_sdp() {
        let s = LayerSdp::new(
            "127.0.0.1".parse().unwrap(),
            "239.1.2.3".parse().unwrap(),
            5004,
        )
        .render()
        .unwrap();
        assert!(s.contains("c=IN IP4 239.1.2.3/16\r\n"));
        assert!(s.contains("m=video 5004 RTP/AVP 96\r\n"));
        assert!(s.contains("a=rtpmap:96 VP9/90000\r\n"));
        assert!(s.contains("a=extmap:1 urn:layercast:cc\r\n"));
        assert!(s.starts_with("v=0\r\n"));
        let mut bad = LayerSdp::new("::1".parse().unwrap(), "::1".parse().unwrap(), 1);
        bad.payload_type = 5;
        assert!(bad.render().is_err());
    }

    #[test]
    fn opus_section_after_the_video() {
        let mut l = LayerSdp::new(
            "127.0.0.1".parse().unwrap(),
            "239.1.2.3".parse().unwrap(),
            5004,
        );
        l.audio = Some(OpusSdp {
            dest: "239.1.2.9".parse().unwrap(),
            ttl: 16,
            port: 5020,
            payload_type: 111,
            channels: 2,
            inband_fec: true,
            bitrate: 64_000,
            ssrc: Some(7),
        });
        l.fec = Some(crate::fec::FecParams::default());
        l.source = Some("10.0.0.1".parse().unwrap());
        let s = l.render().unwrap();
        let v = s.find("m=video").unwrap();
        let a = s
            .find("m=audio 5020 RTP/AVP 111\r\nc=IN IP4 239.1.2.9/16\r\n")
            .unwrap();
        assert!(v < a);
        // The FEC attribute belongs to the video section, not to the audio one.
        let fec = s.find("a=x-layercast-fec:").unwrap();
        assert!(v < fec && fec < a, "{s}");
        assert_eq!(s.matches("a=x-layercast-fec:").count(), 1);
        // SSM: one filter for the video group before the media sections, one for the audio
        // group inside its section.
        let fv = s
            .find("a=source-filter: incl IN IP4 239.1.2.3 10.0.0.1\r\n")
            .unwrap();
        let fa = s
            .find("a=source-filter: incl IN IP4 239.1.2.9 10.0.0.1\r\n")
            .unwrap();
        assert!(fv < v && a < fa, "{s}");
        assert!(s.contains("a=rtpmap:111 opus/48000/2\r\n"));
        assert!(s.contains("useinbandfec=1;stereo=1;sprop-stereo=1;maxaveragebitrate=64000"));
        l.audio.as_mut().unwrap().payload_type = 0;
        assert!(l.render().is_err());
    }
}
