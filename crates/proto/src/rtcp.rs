//! RTCP sender reports (RFC 3550 §6.4.1) with a source description (§6.5.1, CNAME), the one
//! RTCP a Layercast sender emits: each stream's NTP ↔ RTP time mapping, which is how a
//! receiver (ours or a stock one) puts the audio and the video of a session on one clock.
//!
//! A compound packet is SR followed by SDES with one CNAME chunk (§6.1: every compound packet
//! carries a CNAME; receivers group the streams of one session by it for lip sync).

use crate::error::{Error, Result};
use crate::rtp::need;

/// RTCP packet type of a sender report.
pub const PT_SR: u8 = 200;
/// RTCP packet type of a source description.
pub const PT_SDES: u8 = 202;

/// Seconds between 1900-01-01 (NTP era 0) and 1970-01-01 (Unix).
const NTP_UNIX_OFFSET: u64 = 2_208_988_800;

/// 64-bit NTP time of a Unix time in nanoseconds.
pub fn ntp_from_unix_ns(ns: u64) -> u64 {
    let secs = ns / 1_000_000_000 + NTP_UNIX_OFFSET;
    let frac = ((ns % 1_000_000_000) << 32) / 1_000_000_000;
    (secs << 32) | frac
}

/// Unix time in nanoseconds of a 64-bit NTP time (era 0).
pub fn unix_ns_from_ntp(ntp: u64) -> u64 {
    let secs = (ntp >> 32).saturating_sub(NTP_UNIX_OFFSET);
    let frac = ((ntp & 0xffff_ffff) * 1_000_000_000) >> 32;
    secs * 1_000_000_000 + frac
}

/// The sender information of one SR.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SenderReport {
    pub ssrc: u32,
    /// Wall-clock time of the report, 64-bit NTP.
    pub ntp: u64,
    /// The same instant on the stream's RTP clock.
    pub rtp_ts: u32,
    pub packets: u32,
    pub octets: u32,
}

impl SenderReport {
    /// The compound packet SR + SDES(CNAME). `cname` is cut to 255 bytes.
    pub fn to_bytes(&self, cname: &str) -> Vec<u8> {
        let mut v = Vec::with_capacity(28 + 12 + cname.len());
        // SR: V=2, P=0, RC=0; length 6 words after the first.
        v.extend_from_slice(&[0x80, PT_SR, 0, 6]);
        v.extend_from_slice(&self.ssrc.to_be_bytes());
        v.extend_from_slice(&self.ntp.to_be_bytes());
        v.extend_from_slice(&self.rtp_ts.to_be_bytes());
        v.extend_from_slice(&self.packets.to_be_bytes());
        v.extend_from_slice(&self.octets.to_be_bytes());
        // SDES: one chunk = SSRC, CNAME item, END, padded to a word.
        let name = &cname.as_bytes()[..cname.len().min(255)];
        let chunk = 4 + 2 + name.len() + 1;
        let padded = chunk.div_ceil(4) * 4;
        v.extend_from_slice(&[0x81, PT_SDES]);
        v.extend_from_slice(&((padded / 4) as u16).to_be_bytes());
        v.extend_from_slice(&self.ssrc.to_be_bytes());
        v.extend_from_slice(&[1, name.len() as u8]);
        v.extend_from_slice(name);
        v.resize(v.len() + (padded - chunk) + 1, 0);
        v
    }
}

/// The sender reports in a compound RTCP packet (other packet types are skipped). Errors if
/// the compound packet's framing is broken (RFC 3550 §6.1 validity: version 2, lengths that
/// add up, the first packet an SR or RR).
pub fn parse_sender_reports(buf: &[u8]) -> Result<Vec<SenderReport>> {
    let mut out = Vec::new();
    let mut rest = buf;
    let mut first = true;
    need("rtcp header", 4, rest.len())?;
    while !rest.is_empty() {
        need("rtcp header", 4, rest.len())?;
        if rest[0] >> 6 != 2 {
            return Err(Error::Malformed {
                what: "rtcp packet",
                detail: format!("version {}", rest[0] >> 6),
            });
        }
        let pt = rest[1];
        if first && pt != PT_SR && pt != 201 {
            return Err(Error::Invalid {
                field: "rtcp first packet type",
                reason: format!("{pt} is neither SR nor RR"),
            });
        }
        first = false;
        let len = (u16::from_be_bytes([rest[2], rest[3]]) as usize + 1) * 4;
        need("rtcp packet", len, rest.len())?;
        if pt == PT_SR {
            need("sender report", 28, len)?;
            let w = |i: usize| u32::from_be_bytes([rest[i], rest[i + 1], rest[i + 2], rest[i + 3]]);
            out.push(SenderReport {
                ssrc: w(4),
                ntp: ((w(8) as u64) << 32) | w(12) as u64,
                rtp_ts: w(16),
                packets: w(20),
                octets: w(24),
            });
        }
        rest = &rest[len..];
    }
    Ok(out)
}

/// Whether a datagram looks like RTCP rather than RTP (RFC 5761 §4: packet types 192-223).
pub fn is_rtcp(buf: &[u8]) -> bool {
    buf.len() >= 2 && (192..=223).contains(&buf[1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sr_round_trip_and_layout() {
        let sr = SenderReport {
            ssrc: 0x1234_5678,
            ntp: ntp_from_unix_ns(1_763_776_000_250_000_000),
            rtp_ts: 4_000_000_000,
            packets: 77,
            octets: 12_345,
        };
        let b = sr.to_bytes("layercast-demo");
        assert_eq!(&b[..4], &[0x80, 200, 0, 6]);
        assert_eq!(b.len() % 4, 0);
        assert_eq!(b[28], 0x81);
        assert_eq!(b[29], 202);
        assert!(is_rtcp(&b));
        assert_eq!(parse_sender_reports(&b).unwrap(), vec![sr.clone()]);
        // NTP: 2025-11-22 00:26:40.25 UTC; fraction 0.25 = 2^30.
        assert_eq!(sr.ntp & 0xffff_ffff, 1 << 30);
        assert_eq!(sr.ntp >> 32, 1_763_776_000 + 2_208_988_800);
        assert_eq!(unix_ns_from_ntp(sr.ntp), 1_763_776_000_250_000_000);
        // Broken framing is an error.
        assert!(parse_sender_reports(&b[..30]).is_err());
        let mut v = b.clone();
        v[0] = 0x40;
        assert!(parse_sender_reports(&v).is_err());
        assert!(parse_sender_reports(&[]).is_err());
        assert!(!is_rtcp(&[0x80, 96]));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_sender_reports(&data);
        }

        #[test]
        fn ntp_conversion_round_trips_to_a_nanosecond(ns in 0u64..2_085_978_495_000_000_000) {
            let back = unix_ns_from_ntp(ntp_from_unix_ns(ns));
            prop_assert!(ns - back <= 1);
        }
    }
}
