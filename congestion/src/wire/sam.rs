//! Binary Session Announcement Message (SAM, `era.md` §1.1.5): the encoding of
//! [`SessionInfo`] that the sender multicasts on the announcement group and serves over HTTP.
//!
//! # Layout (version 1, big-endian)
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `"LCSA"` |
//! | 4 | 1 | version = 1 |
//! | 5 | 1 | flags: bit 0 = signature trailer present; other bits must be 0 |
//! | 6 | 2 | N = number of layers, 1..=256 |
//! | 8 | 4 | session id |
//! | 12 | 4 | announce seq |
//! | 16 | 4 | sender IPv4 address |
//! | 20 | 2 | packet size M, bytes (≥ 1) |
//! | 22 | 1 | bunch length (≥ 1) |
//! | 23 | 1 | reserved, 0 |
//! | 24 | 4 | adaptation interval, µs (≥ 1) |
//! | 28 | 4 | announce interval, µs (≥ 1) |
//! | 32 | 14·N | per layer: rate bit/s u64, group IPv4 (4), port u16 |
//! | 32+14N | 2 | codec string length C |
//! | 34+14N | C | codec string, UTF-8 |
//! | 34+14N+C | 2 | signature trailer length S (only if flag bit 0) |
//! | 36+14N+C | S | signature trailer (opaque here; filled by the signing issue) |
//!
//! The signed bytes are everything before the trailer's length field, flags byte included (so
//! the "signed" bit is covered by the signature). Nothing may follow the message: trailing
//! bytes are an error, so a signature can't be smuggled past an unsigned-looking message.
//!
//! Decoding never panics: every length is checked before use and every failure is an
//! [`Error`].

use crate::error::{Error, Result};
use crate::session::{LayerInfo, SessionInfo};
use std::net::Ipv4Addr;
use std::ops::Range;
use std::time::Duration;

/// Magic at offset 0.
pub const MAGIC: [u8; 4] = *b"LCSA";
/// The version this code writes and reads.
pub const VERSION: u8 = 1;
/// Flags bit: a signature trailer follows the codec string.
pub const FLAG_SIGNED: u8 = 0x01;
/// Fixed header length (bytes before the layer table).
pub const HEADER_LEN: usize = 32;
/// Bytes per layer entry.
pub const LAYER_ENTRY_LEN: usize = 14;
/// Most layers a SAM may carry (layer indices are `u8` on the data path).
pub const MAX_LAYERS: usize = 256;
/// Largest signature trailer accepted (Ed25519 needs 64 bytes plus a key id; leave room).
pub const MAX_TRAILER: usize = 1024;

/// A decoded SAM: the session description and, if present, the signature trailer.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodedSam<'a> {
    /// The session description.
    pub info: SessionInfo,
    /// The signature trailer, if the flag is set.
    pub signature: Option<SignatureTrailer<'a>>,
}

/// The optional signature trailer, returned apart from the session for the verifier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignatureTrailer<'a> {
    /// Byte range of the input that the signature covers (always starts at 0).
    pub signed_range: Range<usize>,
    /// The trailer's bytes (opaque at this layer).
    pub signature: &'a [u8],
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or(Error::Truncated {
            what,
            need: usize::MAX,
            have: self.buf.len(),
        })?;
        if end > self.buf.len() {
            return Err(Error::Truncated {
                what,
                need: end,
                have: self.buf.len(),
            });
        }
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self, what: &'static str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }
    fn u16(&mut self, what: &'static str) -> Result<u16> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self, what: &'static str) -> Result<u32> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self, what: &'static str) -> Result<u64> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }
    fn ip(&mut self, what: &'static str) -> Result<Ipv4Addr> {
        Ok(Ipv4Addr::from(self.u32(what)?))
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> Error {
    Error::Invalid {
        field,
        reason: reason.into(),
    }
}

fn micros_u32(d: Duration, field: &'static str) -> Result<u32> {
    let us = d.as_micros();
    if us == 0 || us > u32::MAX as u128 {
        return Err(invalid(
            field,
            format!("{us} µs is outside 1..=4294967295 µs"),
        ));
    }
    Ok(us as u32)
}

/// Checks that `info` can be encoded (the same rules decode enforces).
pub fn validate(info: &SessionInfo) -> Result<()> {
    if info.layers.is_empty() || info.layers.len() > MAX_LAYERS {
        return Err(invalid(
            "layer count",
            format!("{} is outside 1..={MAX_LAYERS}", info.layers.len()),
        ));
    }
    if info.packet_size == 0 {
        return Err(invalid("packet_size", "must be at least 1"));
    }
    if info.bunch_len == 0 {
        return Err(invalid("bunch_len", "must be at least 1"));
    }
    micros_u32(info.adapt_interval, "adapt_interval")?;
    micros_u32(info.announce_interval, "announce_interval")?;
    if info.codec.len() > u16::MAX as usize {
        return Err(invalid("codec", "longer than 65535 bytes"));
    }
    Ok(())
}

fn encode_body(info: &SessionInfo, flags: u8, out: &mut Vec<u8>) -> Result<()> {
    validate(info)?;
    out.reserve(HEADER_LEN + LAYER_ENTRY_LEN * info.layers.len() + 2 + info.codec.len());
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(flags);
    out.extend_from_slice(&(info.layers.len() as u16).to_be_bytes());
    out.extend_from_slice(&info.session_id.to_be_bytes());
    out.extend_from_slice(&info.announce_seq.to_be_bytes());
    out.extend_from_slice(&info.sender.octets());
    out.extend_from_slice(&info.packet_size.to_be_bytes());
    out.push(info.bunch_len);
    out.push(0);
    out.extend_from_slice(&micros_u32(info.adapt_interval, "adapt_interval")?.to_be_bytes());
    out.extend_from_slice(&micros_u32(info.announce_interval, "announce_interval")?.to_be_bytes());
    for l in &info.layers {
        out.extend_from_slice(&l.rate_bps.to_be_bytes());
        out.extend_from_slice(&l.group.octets());
        out.extend_from_slice(&l.port.to_be_bytes());
    }
    out.extend_from_slice(&(info.codec.len() as u16).to_be_bytes());
    out.extend_from_slice(info.codec.as_bytes());
    Ok(())
}

/// Appends the unsigned SAM for `info` to `out`.
pub fn encode(info: &SessionInfo, out: &mut Vec<u8>) -> Result<()> {
    encode_body(info, 0, out)
}

/// The unsigned SAM as a new vector.
pub fn to_bytes(info: &SessionInfo) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    encode(info, &mut v)?;
    Ok(v)
}

/// Appends a signed SAM: the body with the signed flag set, then `sign(body)`'s output as the
/// length-prefixed trailer. `sign` receives exactly the bytes that
/// [`SignatureTrailer::signed_range`] will cover on decode.
pub fn encode_signed(
    info: &SessionInfo,
    out: &mut Vec<u8>,
    sign: impl FnOnce(&[u8]) -> Vec<u8>,
) -> Result<()> {
    let start = out.len();
    encode_body(info, FLAG_SIGNED, out)?;
    let sig = sign(&out[start..]);
    if sig.len() > MAX_TRAILER {
        out.truncate(start);
        return Err(invalid(
            "signature trailer",
            format!("{} bytes exceed {MAX_TRAILER}", sig.len()),
        ));
    }
    out.extend_from_slice(&(sig.len() as u16).to_be_bytes());
    out.extend_from_slice(&sig);
    Ok(())
}

/// Decodes a SAM. The whole of `buf` must be one message.
pub fn decode(buf: &[u8]) -> Result<DecodedSam<'_>> {
    let mut r = Reader { buf, pos: 0 };
    let magic = r.take(4, "SAM header")?;
    if magic != MAGIC {
        return Err(Error::Malformed {
            what: "SAM magic",
            detail: format!("{magic:02x?}"),
        });
    }
    let version = r.u8("SAM header")?;
    if version != VERSION {
        return Err(Error::Malformed {
            what: "SAM version",
            detail: format!("{version}, this code reads {VERSION}"),
        });
    }
    let flags = r.u8("SAM header")?;
    if flags & !FLAG_SIGNED != 0 {
        return Err(Error::Malformed {
            what: "SAM flags",
            detail: format!("unknown bits in {flags:#04x}"),
        });
    }
    let n = r.u16("SAM header")? as usize;
    if n == 0 || n > MAX_LAYERS {
        return Err(invalid(
            "layer count",
            format!("{n} is outside 1..={MAX_LAYERS}"),
        ));
    }
    let session_id = r.u32("SAM header")?;
    let announce_seq = r.u32("SAM header")?;
    let sender = r.ip("SAM header")?;
    let packet_size = r.u16("SAM header")?;
    if packet_size == 0 {
        return Err(invalid("packet_size", "must be at least 1"));
    }
    let bunch_len = r.u8("SAM header")?;
    if bunch_len == 0 {
        return Err(invalid("bunch_len", "must be at least 1"));
    }
    let reserved = r.u8("SAM header")?;
    if reserved != 0 {
        return Err(Error::Malformed {
            what: "SAM reserved byte",
            detail: format!("{reserved:#04x}, must be 0"),
        });
    }
    let adapt = r.u32("SAM header")?;
    let announce = r.u32("SAM header")?;
    if adapt == 0 {
        return Err(invalid("adapt_interval", "must be at least 1 µs"));
    }
    if announce == 0 {
        return Err(invalid("announce_interval", "must be at least 1 µs"));
    }
    // Check the table's full length before allocating for it.
    if buf.len() < HEADER_LEN + n * LAYER_ENTRY_LEN {
        return Err(Error::Truncated {
            what: "SAM layer table",
            need: HEADER_LEN + n * LAYER_ENTRY_LEN,
            have: buf.len(),
        });
    }
    let mut layers = Vec::with_capacity(n);
    for _ in 0..n {
        let rate_bps = r.u64("SAM layer table")?;
        let group = r.ip("SAM layer table")?;
        let port = r.u16("SAM layer table")?;
        layers.push(LayerInfo {
            rate_bps,
            group,
            port,
        });
    }
    let clen = r.u16("SAM codec")? as usize;
    let codec = std::str::from_utf8(r.take(clen, "SAM codec")?)
        .map_err(|e| Error::Malformed {
            what: "SAM codec string",
            detail: e.to_string(),
        })?
        .to_string();
    let signed_end = r.pos;
    let signature = if flags & FLAG_SIGNED != 0 {
        let slen = r.u16("SAM signature trailer")? as usize;
        if slen > MAX_TRAILER {
            return Err(invalid(
                "signature trailer",
                format!("{slen} bytes exceed {MAX_TRAILER}"),
            ));
        }
        let sig = r.take(slen, "SAM signature trailer")?;
        Some(SignatureTrailer {
            signed_range: 0..signed_end,
            signature: sig,
        })
    } else {
        None
    };
    if r.pos != buf.len() {
        return Err(Error::Malformed {
            what: "SAM length",
            detail: format!("{} trailing bytes", buf.len() - r.pos),
        });
    }
    Ok(DecodedSam {
        info: SessionInfo {
            session_id,
            announce_seq,
            sender,
            layers,
            packet_size,
            bunch_len,
            adapt_interval: Duration::from_micros(adapt as u64),
            announce_interval: Duration::from_micros(announce as u64),
            codec,
        },
        signature,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> SessionInfo {
        let mut s = SessionInfo::equal_layers(3, 20_000, Ipv4Addr::new(239, 1, 2, 3), 5000);
        s.session_id = 0xA1B2C3D4;
        s.announce_seq = 7;
        s.sender = Ipv4Addr::new(10, 0, 0, 1);
        s.codec = "VP9 L3T3".into();
        s
    }

    #[test]
    fn layout_offsets() {
        let b = to_bytes(&sample()).unwrap();
        assert_eq!(&b[0..4], b"LCSA");
        assert_eq!(b[4], 1);
        assert_eq!(b[5], 0);
        assert_eq!(&b[6..8], &[0, 3]);
        assert_eq!(&b[8..12], &[0xA1, 0xB2, 0xC3, 0xD4]);
        assert_eq!(&b[12..16], &[0, 0, 0, 7]);
        assert_eq!(&b[16..20], &[10, 0, 0, 1]);
        assert_eq!(&b[20..22], &512u16.to_be_bytes());
        assert_eq!(b[22], 2);
        assert_eq!(&b[24..28], &1_000_000u32.to_be_bytes());
        assert_eq!(&b[32..40], &20_000u64.to_be_bytes());
        assert_eq!(&b[40..44], &[239, 1, 2, 3]);
        assert_eq!(&b[44..46], &5000u16.to_be_bytes());
        assert_eq!(&b[74..76], &8u16.to_be_bytes());
        assert_eq!(&b[76..], b"VP9 L3T3");
        let d = decode(&b).unwrap();
        assert_eq!(d.info, sample());
        assert_eq!(d.signature, None);
    }

    #[test]
    fn signed_trailer_is_returned_apart() {
        let mut v = Vec::new();
        let mut seen = Vec::new();
        encode_signed(&sample(), &mut v, |body| {
            seen = body.to_vec();
            vec![0x55; 64]
        })
        .unwrap();
        let d = decode(&v).unwrap();
        let t = d.signature.unwrap();
        assert_eq!(&v[t.signed_range.clone()], &seen[..]);
        assert_eq!(t.signature, &[0x55; 64][..]);
        assert_eq!(v[5], FLAG_SIGNED);
        // Truncating the trailer or appending bytes is an error.
        assert!(decode(&v[..v.len() - 1]).is_err());
        let mut longer = v.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
        // An oversized signature is refused and leaves `out` untouched.
        let mut w = vec![1, 2];
        assert!(encode_signed(&sample(), &mut w, |_| vec![0; MAX_TRAILER + 1]).is_err());
        assert_eq!(w, vec![1, 2]);
    }

    #[test]
    fn rejects_malformed() {
        let good = to_bytes(&sample()).unwrap();
        for cut in 0..good.len() {
            assert!(
                decode(&good[..cut]).is_err(),
                "prefix of {cut} bytes accepted"
            );
        }
        let mut bad = good.clone();
        bad[0] = b'X';
        assert!(matches!(decode(&bad), Err(Error::Malformed { .. })));
        let mut bad = good.clone();
        bad[4] = 2;
        assert!(matches!(decode(&bad), Err(Error::Malformed { .. })));
        let mut bad = good.clone();
        bad[5] = 0x80;
        assert!(decode(&bad).is_err());
        let mut bad = good.clone();
        bad[6] = 0;
        bad[7] = 0;
        assert!(decode(&bad).is_err());
        let mut bad = good.clone();
        bad[22] = 0;
        assert!(decode(&bad).is_err());
        let mut bad = good.clone();
        let n = bad.len();
        bad[n - 1] = 0xFF; // invalid UTF-8
        assert!(decode(&bad).is_err());
        let mut s = sample();
        s.layers.clear();
        assert!(to_bytes(&s).is_err());
        let mut s = sample();
        s.adapt_interval = Duration::ZERO;
        assert!(to_bytes(&s).is_err());
        let mut s = sample();
        s.announce_interval = Duration::from_secs(10_000);
        assert!(to_bytes(&s).is_err());
    }

    fn arb_info() -> impl Strategy<Value = SessionInfo> {
        (
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            proptest::collection::vec((any::<u64>(), any::<u32>(), any::<u16>()), 1..=40),
            1u16..,
            1u8..,
            1u32..,
            1u32..,
            "\\PC{0,40}",
        )
            .prop_map(|(sid, seq, snd, layers, m, b, ai, an, codec)| SessionInfo {
                session_id: sid,
                announce_seq: seq,
                sender: Ipv4Addr::from(snd),
                layers: layers
                    .into_iter()
                    .map(|(r, g, p)| LayerInfo {
                        rate_bps: r,
                        group: Ipv4Addr::from(g),
                        port: p,
                    })
                    .collect(),
                packet_size: m,
                bunch_len: b,
                adapt_interval: Duration::from_micros(ai as u64),
                announce_interval: Duration::from_micros(an as u64),
                codec,
            })
    }

    proptest! {
        #[test]
        fn round_trip(info in arb_info(), sig in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..100))) {
            let mut v = Vec::new();
            match &sig {
                None => encode(&info, &mut v).unwrap(),
                Some(s) => encode_signed(&info, &mut v, |_| s.clone()).unwrap(),
            }
            let d = decode(&v).unwrap();
            prop_assert_eq!(&d.info, &info);
            prop_assert_eq!(d.signature.map(|t| t.signature.to_vec()), sig);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data: Vec<u8>) {
            let _ = decode(&data);
        }

        #[test]
        fn mutated_messages_never_panic(info in arb_info(), idx: usize, byte: u8) {
            let mut v = to_bytes(&info).unwrap();
            let i = idx % v.len();
            v[i] = byte;
            if let Ok(d) = decode(&v) {
                // Whatever decodes must re-encode to the same bytes.
                prop_assert_eq!(to_bytes(&d.info).unwrap(), v);
            }
        }
    }
}
