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
            self.session_id,
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
        l(format!(
            "m=video {} RTP/AVP {}",
            self.port, self.payload_type
        ));
        l(format!("a=rtpmap:{} VP9/90000", self.payload_type));
        l(format!("a=extmap:{} {}", self.cc_ext_id, CC_EXTENSION_URI));
        if let Some(f) = &self.fec {
            l(format!("a=x-layercast-fec:{}", f.sdp_attribute()));
        }
        if let Some(ssrc) = self.ssrc {
            l(format!("a=ssrc:{ssrc} cname:layercast"));
        }
        l("a=recvonly".into());
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
}
