//! SDP (RFC 8866): [`SessionSdp`], the one writer, renders a whole session (one `m=` section
//! per stream); [`LayerSdp`] is the view of layer 0 and the audio track that stock receivers
//! (GStreamer, ffmpeg/ffplay) can play on their own.

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
    /// `a=source-filter:` (RFC 4570) in the video section and in the audio section.
    pub source: Option<IpAddr>,
    /// FEC of the stream (`a=x-layercast-fec:`, docs/protocols/fec.md). The repair payload
    /// type is not listed on the `m=` line: stock receivers drop its packets.
    pub fec: Option<crate::fec::FecParams>,
    /// The session's audio track, written as a second media section after the video.
    pub audio: Option<OpusSdp>,
}

/// The `m=audio` section of an Opus track (RFC 7587 §7): its own group, `opus/48000/2` as
/// the RFC requires whatever the channel count, and the `fmtp` parameters a receiver needs.
/// The session's TTL applies to its group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpusSdp {
    /// The audio group (or unicast destination), written as a media-level `c=`.
    pub dest: IpAddr,
    pub port: u16,
    pub payload_type: u8,
    /// Channels the encoder codes (2 = `stereo=1`).
    pub channels: u8,
    pub inband_fec: bool,
    /// Target bit rate, bit/s (`maxaveragebitrate`).
    pub bitrate: u32,
    pub ssrc: Option<u32>,
    /// `a=mid` (RFC 9143), when the stream belongs to a track.
    pub mid: Option<String>,
}

impl OpusSdp {
    /// The media section, for [`SessionSdp`]. Audio packets carry no congestion-control
    /// extension (they ride in layer 0's rate), so none is declared.
    pub fn media(&self) -> MediaSdp {
        let stereo = u8::from(self.channels == 2);
        MediaSdp {
            media: "audio",
            dest: self.dest,
            port: self.port,
            payload_type: self.payload_type,
            encoding: "opus/48000/2".into(),
            fmtp: Some(format!(
                "minptime=10;useinbandfec={};stereo={stereo};sprop-stereo={stereo};maxaveragebitrate={}",
                u8::from(self.inband_fec),
                self.bitrate
            )),
            ptime_ms: Some(20),
            cc_ext: false,
            mid: self.mid.clone(),
            ssrc: self.ssrc,
            fec: None,
        }
    }
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

    /// Render the SDP text (CRLF line ends), through [`SessionSdp`] (the one SDP writer).
    pub fn render(&self) -> Result<String> {
        let mut media = vec![MediaSdp {
            media: "video",
            dest: self.dest,
            port: self.port,
            payload_type: self.payload_type,
            encoding: self.encoding.clone(),
            fmtp: None,
            ptime_ms: None,
            cc_ext: true,
            mid: None,
            ssrc: self.ssrc,
            fec: self.fec,
        }];
        media.extend(self.audio.as_ref().map(OpusSdp::media));
        SessionSdp {
            session_name: self.session_name.replace(['\r', '\n'], " "),
            origin: self.origin,
            session_id: self.session_id,
            version: self.session_version,
            ttl: self.ttl,
            source_filter: self.source,
            cc_ext_id: self.cc_ext_id,
            media,
        }
        .render()
    }
}

/// One `m=` section of a [`SessionSdp`]: one RTP stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaSdp {
    /// `video` or `audio`.
    pub media: &'static str,
    /// Destination group or address of this stream (`c=` at media level).
    pub dest: IpAddr,
    pub port: u16,
    pub payload_type: u8,
    /// `a=rtpmap` encoding, e.g. `VP9/90000` or `opus/48000/2`.
    pub encoding: String,
    /// `a=fmtp` parameters of the payload type, if any.
    pub fmtp: Option<String>,
    /// `a=ptime`, milliseconds.
    pub ptime_ms: Option<u32>,
    /// Whether the stream's packets carry the congestion-control extension (`a=extmap`).
    pub cc_ext: bool,
    /// `a=mid` (RFC 9143), when the stream belongs to a track.
    pub mid: Option<String>,
    pub ssrc: Option<u32>,
    /// FEC of the stream (`a=x-layercast-fec:`, docs/protocols/fec.md). The repair payload
    /// type is not listed on the `m=` line: stock receivers drop its packets.
    pub fec: Option<crate::fec::FecParams>,
}

/// A whole session (RFC 8866): session-level lines and one `m=` section per stream, each with
/// its own connection line, its source filter and `recvonly`. Every free text and token is
/// checked: a CR, LF or other control character is an error, never written (a session name
/// from the API must not add lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSdp {
    pub session_name: String,
    pub origin: IpAddr,
    /// `o=` session id and version.
    pub session_id: u64,
    pub version: u64,
    pub ttl: u8,
    /// SSM source (RFC 4570 `a=source-filter`), per media section.
    pub source_filter: Option<IpAddr>,
    pub cc_ext_id: u8,
    pub media: Vec<MediaSdp>,
}

fn clean(what: &str, v: &str) -> Result<()> {
    if v.chars().any(|c| c.is_control()) {
        return Err(Error::Config(format!(
            "SDP {what} contains a control character"
        )));
    }
    Ok(())
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

impl SessionSdp {
    /// Renders the SDP text (CRLF line ends).
    pub fn render(&self) -> Result<String> {
        clean("session name", &self.session_name)?;
        if !(1..=14).contains(&self.cc_ext_id) {
            return Err(Error::Config("extension id must be 1..=14".into()));
        }
        if self.media.is_empty() {
            return Err(Error::Config("an SDP needs at least one m= section".into()));
        }
        let fam = |a: &IpAddr| if a.is_ipv4() { "IP4" } else { "IP6" };
        let conn = |a: &IpAddr| match a {
            IpAddr::V4(g) if g.is_multicast() => format!("IN IP4 {g}/{}", self.ttl),
            a => format!("IN {} {a}", fam(a)),
        };
        let mut s = String::new();
        let mut l = |line: String| {
            s.push_str(&line);
            s.push_str("\r\n");
        };
        l("v=0".into());
        l(format!(
            "o=- {} {} IN {} {}",
            self.session_id,
            self.version,
            fam(&self.origin),
            self.origin
        ));
        l(format!(
            "s={}",
            if self.session_name.is_empty() {
                "-"
            } else {
                &self.session_name
            }
        ));
        l(format!("c={}", conn(&self.media[0].dest)));
        l("t=0 0".into());
        for m in &self.media {
            clean("encoding", &m.encoding)?;
            if let Some(mid) = &m.mid {
                clean("mid", mid)?;
            }
            if let Some(f) = &m.fmtp {
                clean("fmtp", f)?;
            }
            if !(96..=127).contains(&m.payload_type) {
                return Err(Error::Config(format!(
                    "{}: dynamic payload types are 96..=127",
                    m.media
                )));
            }
            let pt = m.payload_type;
            l(format!("m={} {} RTP/AVP {pt}", m.media, m.port));
            l(format!("c={}", conn(&m.dest)));
            if let Some(f) = source_filter(m.dest, self.source_filter) {
                l(f);
            }
            l(format!("a=rtpmap:{pt} {}", m.encoding));
            if let Some(f) = &m.fmtp {
                l(format!("a=fmtp:{pt} {f}"));
            }
            if let Some(p) = m.ptime_ms {
                l(format!("a=ptime:{p}"));
            }
            if m.cc_ext {
                l(format!("a=extmap:{} {}", self.cc_ext_id, CC_EXTENSION_URI));
            }
            if let Some(f) = &m.fec {
                l(format!("a=x-layercast-fec:{}", f.sdp_attribute()));
            }
            if let Some(mid) = &m.mid {
                l(format!("a=mid:{mid}"));
            }
            if let Some(ssrc) = m.ssrc {
                l(format!("a=ssrc:{ssrc} cname:layercast"));
            }
            l("a=recvonly".into());
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

    fn session() -> SessionSdp {
        SessionSdp {
            session_name: "live".into(),
            origin: "10.0.0.1".parse().unwrap(),
            session_id: 7,
            version: 3,
            ttl: 8,
            source_filter: Some("10.0.0.1".parse().unwrap()),
            cc_ext_id: 1,
            media: vec![
                MediaSdp {
                    media: "video",
                    dest: "239.1.2.3".parse().unwrap(),
                    port: 5004,
                    payload_type: 96,
                    encoding: "VP9/90000".into(),
                    fmtp: None,
                    ptime_ms: None,
                    cc_ext: true,
                    mid: Some("0".into()),
                    ssrc: Some(9),
                    fec: Some(crate::fec::FecParams::default()),
                },
                MediaSdp {
                    media: "audio",
                    dest: "239.1.2.9".parse().unwrap(),
                    port: 5020,
                    payload_type: 111,
                    encoding: "opus/48000/2".into(),
                    fmtp: None,
                    ptime_ms: Some(20),
                    cc_ext: false,
                    mid: Some("1".into()),
                    ssrc: None,
                    fec: None,
                },
            ],
        }
    }

    #[test]
    fn session_sdp_has_one_section_per_stream() {
        let s = session().render().unwrap();
        assert_eq!(s.matches("\r\nm=").count(), 2, "{s}");
        assert!(
            s.contains("m=audio 5020 RTP/AVP 111\r\nc=IN IP4 239.1.2.9/8\r\n"),
            "{s}"
        );
        assert!(
            s.contains("a=source-filter: incl IN IP4 239.1.2.3 10.0.0.1\r\n"),
            "{s}"
        );
        assert!(s.contains("a=rtpmap:111 opus/48000/2\r\n"));
        assert!(s.contains("o=- 7 3 IN IP4 10.0.0.1\r\n"));
        // FEC is announced on the stream that carries it, and only there.
        let fec = format!(
            "a=x-layercast-fec:{}\r\n",
            crate::fec::FecParams::default().sdp_attribute()
        );
        assert_eq!(s.matches(&fec).count(), 1, "{s}");
        assert!(s.find(&fec) < s.find("m=audio"), "{s}");
        assert!(s.lines().all(|l| !l.contains('\n')));
    }

    /// A name with a line break would inject SDP lines (an `a=` or a second `m=`): refused.
    #[test]
    fn control_characters_are_refused_not_written() {
        let mut s = session();
        s.session_name = "x\r\nm=application 9 TCP evil".into();
        assert!(s.render().is_err());
        let mut s = session();
        s.media[0].encoding = "VP9/90000\na=evil".into();
        assert!(s.render().is_err());
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
            port: 5020,
            payload_type: 111,
            channels: 2,
            inband_fec: true,
            bitrate: 64_000,
            ssrc: Some(7),
            mid: None,
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
        // SSM: one filter per media section, each naming its own group.
        let fv = s
            .find("a=source-filter: incl IN IP4 239.1.2.3 10.0.0.1\r\n")
            .unwrap();
        let fa = s
            .find("a=source-filter: incl IN IP4 239.1.2.9 10.0.0.1\r\n")
            .unwrap();
        assert!(v < fv && fv < a && a < fa, "{s}");
        // Audio packets carry no congestion-control extension: one extmap, the video's.
        assert_eq!(s.matches("a=extmap:").count(), 1, "{s}");
        assert!(s.contains("a=rtpmap:111 opus/48000/2\r\n"));
        assert!(s.contains("useinbandfec=1;stereo=1;sprop-stereo=1;maxaveragebitrate=64000"));
        l.audio.as_mut().unwrap().payload_type = 0;
        assert!(l.render().is_err());
    }
}
