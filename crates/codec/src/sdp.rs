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
    /// Extension id of the CC extension (1..=14 for the one-byte form). Default 1.
    pub cc_ext_id: u8,
    /// SSRC of the stream, written as `a=ssrc:` when set.
    pub ssrc: Option<u32>,
    /// Session id / version for `o=`.
    pub session_id: u64,
    /// FEC of the stream (`a=x-layercast-fec:`, docs/protocols/fec.md). The repair payload
    /// type is not listed on the `m=` line: stock receivers drop its packets.
    pub fec: Option<crate::fec::FecParams>,
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
            cc_ext_id: 1,
            ssrc: None,
            session_id: 1,
            fec: None,
        }
    }

    /// Render the SDP text (CRLF line ends), through [`SessionSdp`] (the one SDP writer).
    pub fn render(&self) -> Result<String> {
        if self.payload_type < 96 || self.payload_type > 127 {
            return Err(Error::Config(
                "VP9 needs a dynamic payload type 96..=127".into(),
            ));
        }
        SessionSdp {
            session_name: self.session_name.replace(['\r', '\n'], " "),
            origin: self.origin,
            session_id: self.session_id,
            version: self.session_id,
            ttl: self.ttl,
            source_filter: None,
            cc_ext_id: self.cc_ext_id,
            media: vec![MediaSdp {
                media: "video",
                dest: self.dest,
                port: self.port,
                payload_type: self.payload_type,
                encoding: "VP9/90000".into(),
                mid: None,
                ssrc: self.ssrc,
                fec: self.fec,
            }],
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
    /// `a=mid` (RFC 9143), when the stream belongs to a track.
    pub mid: Option<String>,
    pub ssrc: Option<u32>,
    /// FEC of the stream (`a=x-layercast-fec:`, docs/protocols/fec.md). The repair payload
    /// type is not listed on the `m=` line: stock receivers drop its packets.
    pub fec: Option<crate::fec::FecParams>,
}

/// A whole session (RFC 8866): session-level lines and one `m=` section per stream, each with
/// its own connection line, the congestion-control extension and `recvonly`. Every free text
/// and token is checked: a CR, LF or other control character is an error, never written (a
/// session name from the API must not add lines).
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
            if !(96..=127).contains(&m.payload_type) {
                return Err(Error::Config("dynamic payload types are 96..=127".into()));
            }
            l(format!(
                "m={} {} RTP/AVP {}",
                m.media, m.port, m.payload_type
            ));
            l(format!("c={}", conn(&m.dest)));
            if let Some(src) = self.source_filter {
                l(format!(
                    "a=source-filter: incl IN {} {} {src}",
                    fam(&m.dest),
                    m.dest
                ));
            }
            l(format!("a=rtpmap:{} {}", m.payload_type, m.encoding));
            l(format!("a=extmap:{} {}", self.cc_ext_id, CC_EXTENSION_URI));
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
}
