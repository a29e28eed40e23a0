//! RTP fixed header (RFC 3550 §5.1) with RFC 8285 header extensions: the generic part of the
//! data packets every Layercast sender writes and every receiver reads (the codec crate
//! re-exports it as `codec::rtp`).
//!
//! [`RtpPacket`] is a zero-copy view over a received datagram: [`RtpPacket::parse`] validates
//! every length once, so the accessors afterwards cannot fail or panic. [`RtpHeader`] is the
//! owned form used to build packets; [`RtpHeader::write`] appends header, payload and padding to a
//! caller-owned buffer so senders can reuse allocations.
//!
//! Header extensions: on parse, both the one-byte (profile `0xBEDE`) and two-byte (profile
//! `0x100x`) forms are recognised and iterated element by element with
//! [`RtpPacket::extensions`]; any other profile is exposed raw via
//! [`RtpPacket::extension_profile`] / [`RtpPacket::extension_data`]. On write, the one-byte
//! form is chosen when every element fits it (id 1..=14, 1..=16 bytes), else the two-byte form.

use crate::error::{Error, Result};

pub(crate) fn need(what: &'static str, need: usize, have: usize) -> Result<()> {
    if have < need {
        Err(Error::Truncated { what, need, have })
    } else {
        Ok(())
    }
}

fn malformed(what: &'static str, detail: impl ToString) -> Error {
    Error::Malformed {
        what,
        detail: detail.to_string(),
    }
}

fn out_of_range(field: &'static str, value: u64) -> Error {
    Error::Invalid {
        field,
        reason: format!("{value} does not fit"),
    }
}

/// An RTP packet in owned form before its sender numbers it: what a packetizer hands a
/// sender's queue, and what [`crate::fec::FecEncoder`] returns for a repair slot (the sender
/// sets the stream's sequence number, and adds its header extensions, when it writes it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MediaPacket {
    pub header: RtpHeader,
    pub payload: Vec<u8>,
}

/// RTP fixed-header length without CSRCs.
pub const FIXED_HEADER_LEN: usize = 12;
/// One-byte header-extension profile (RFC 8285 §4.2).
pub const ONE_BYTE_PROFILE: u16 = 0xBEDE;
/// Two-byte header-extension profile; the low 4 bits are "appbits" (RFC 8285 §4.3).
pub const TWO_BYTE_PROFILE: u16 = 0x1000;

/// A validated, zero-copy view of one RTP packet.
#[derive(Debug, Clone, Copy)]
pub struct RtpPacket<'a> {
    buf: &'a [u8],
    /// Offset of the first payload byte.
    payload_start: usize,
    /// Offset one past the last payload byte (start of padding).
    payload_end: usize,
    /// Header-extension profile and the range of its data (without the 4-byte ext header).
    ext: Option<(u16, usize, usize)>,
}

impl<'a> RtpPacket<'a> {
    /// Validate `buf` as an RTP packet. Never panics; any inconsistency is an [`Error`].
    pub fn parse(buf: &'a [u8]) -> Result<Self> {
        need("RTP header", FIXED_HEADER_LEN, buf.len())?;
        let version = buf[0] >> 6;
        if version != 2 {
            return Err(malformed("RTP version", version));
        }
        let cc = (buf[0] & 0x0f) as usize;
        let mut off = FIXED_HEADER_LEN + 4 * cc;
        need("RTP CSRC list", off, buf.len())?;
        let mut ext = None;
        if buf[0] & 0x10 != 0 {
            need("RTP extension header", off + 4, buf.len())?;
            let profile = u16::from_be_bytes([buf[off], buf[off + 1]]);
            let words = u16::from_be_bytes([buf[off + 2], buf[off + 3]]) as usize;
            let start = off + 4;
            let end = start + 4 * words;
            need("RTP extension data", end, buf.len())?;
            ext = Some((profile, start, end));
            off = end;
        }
        let mut end = buf.len();
        if buf[0] & 0x20 != 0 {
            let pad = buf[buf.len() - 1] as usize;
            if pad == 0 || pad > buf.len() - off {
                return Err(malformed("RTP padding", pad));
            }
            end -= pad;
        }
        let pkt = RtpPacket {
            buf,
            payload_start: off,
            payload_end: end,
            ext,
        };
        // Validate the extension elements now so iteration later is infallible in practice.
        for e in pkt.extensions() {
            e?;
        }
        Ok(pkt)
    }

    /// The whole datagram.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.buf
    }
    /// Padding bit.
    pub fn has_padding(&self) -> bool {
        self.buf[0] & 0x20 != 0
    }
    /// Number of padding bytes (including the count byte), 0 without padding.
    pub fn padding_len(&self) -> usize {
        self.buf.len() - self.payload_end
    }
    /// Extension bit.
    pub fn has_extension(&self) -> bool {
        self.ext.is_some()
    }
    /// Marker bit.
    pub fn marker(&self) -> bool {
        self.buf[1] & 0x80 != 0
    }
    /// Payload type (7 bits).
    pub fn payload_type(&self) -> u8 {
        self.buf[1] & 0x7f
    }
    /// Sequence number.
    pub fn sequence_number(&self) -> u16 {
        u16::from_be_bytes([self.buf[2], self.buf[3]])
    }
    /// RTP timestamp.
    pub fn timestamp(&self) -> u32 {
        u32::from_be_bytes([self.buf[4], self.buf[5], self.buf[6], self.buf[7]])
    }
    /// Synchronisation source.
    pub fn ssrc(&self) -> u32 {
        u32::from_be_bytes([self.buf[8], self.buf[9], self.buf[10], self.buf[11]])
    }
    /// Contributing sources.
    pub fn csrcs(&self) -> impl Iterator<Item = u32> + 'a {
        let cc = (self.buf[0] & 0x0f) as usize;
        self.buf[FIXED_HEADER_LEN..FIXED_HEADER_LEN + 4 * cc]
            .chunks_exact(4)
            .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
    }
    /// Header-extension profile ("defined by profile" field), if the X bit is set.
    pub fn extension_profile(&self) -> Option<u16> {
        self.ext.map(|e| e.0)
    }
    /// Raw header-extension data (after the 4-byte extension header).
    pub fn extension_data(&self) -> Option<&'a [u8]> {
        self.ext.map(|(_, s, e)| &self.buf[s..e])
    }
    /// Iterate RFC 8285 elements as `(id, data)`. Empty for a non-8285 profile or no extension.
    pub fn extensions(&self) -> ExtensionIter<'a> {
        match self.ext {
            Some((p, s, e)) if p == ONE_BYTE_PROFILE => ExtensionIter {
                data: &self.buf[s..e],
                two_byte: false,
                pos: 0,
            },
            Some((p, s, e)) if p & 0xfff0 == TWO_BYTE_PROFILE => ExtensionIter {
                data: &self.buf[s..e],
                two_byte: true,
                pos: 0,
            },
            _ => ExtensionIter {
                data: &[],
                two_byte: false,
                pos: 0,
            },
        }
    }
    /// The first element with this id, if any.
    pub fn extension(&self, id: u8) -> Option<&'a [u8]> {
        self.extensions()
            .filter_map(|e| e.ok())
            .find(|(i, _)| *i == id)
            .map(|(_, d)| d)
    }
    /// Payload bytes (without header, extension and padding).
    pub fn payload(&self) -> &'a [u8] {
        &self.buf[self.payload_start..self.payload_end]
    }
    /// Header length in bytes (fixed + CSRC + extension).
    pub fn header_len(&self) -> usize {
        self.payload_start
    }
    /// Owned copy of the header fields.
    pub fn to_header(&self) -> RtpHeader {
        RtpHeader {
            marker: self.marker(),
            payload_type: self.payload_type(),
            sequence_number: self.sequence_number(),
            timestamp: self.timestamp(),
            ssrc: self.ssrc(),
            csrcs: self.csrcs().collect(),
            extensions: self
                .extensions()
                .filter_map(|e| e.ok())
                .map(|(i, d)| (i, d.to_vec()))
                .collect(),
            padding: self.padding_len() as u8,
        }
    }
}

/// Iterator over RFC 8285 header-extension elements.
#[derive(Debug, Clone)]
pub struct ExtensionIter<'a> {
    data: &'a [u8],
    two_byte: bool,
    pos: usize,
}

impl<'a> Iterator for ExtensionIter<'a> {
    type Item = Result<(u8, &'a [u8])>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let b = *self.data.get(self.pos)?;
            if b == 0 {
                // Padding byte between or after elements (id 0 in both forms).
                self.pos += 1;
                continue;
            }
            let (id, len, hdr) = if self.two_byte {
                let Some(&l) = self.data.get(self.pos + 1) else {
                    self.pos = self.data.len();
                    return Some(Err(malformed(
                        "RTP header extension",
                        "two-byte element header cut",
                    )));
                };
                (b, l as usize, 2)
            } else {
                let id = b >> 4;
                if id == 15 {
                    // Reserved id: stop processing the rest (RFC 8285 §4.2).
                    self.pos = self.data.len();
                    return None;
                }
                (id, (b & 0x0f) as usize + 1, 1)
            };
            let start = self.pos + hdr;
            let end = start + len;
            if end > self.data.len() {
                self.pos = self.data.len();
                return Some(Err(malformed(
                    "RTP header extension",
                    "element longer than extension block",
                )));
            }
            self.pos = end;
            return Some(Ok((id, &self.data[start..end])));
        }
    }
}

/// Owned RTP header, used to build packets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RtpHeader {
    pub marker: bool,
    pub payload_type: u8,
    pub sequence_number: u16,
    pub timestamp: u32,
    pub ssrc: u32,
    pub csrcs: Vec<u32>,
    /// RFC 8285 elements `(id, data)` in wire order.
    pub extensions: Vec<(u8, Vec<u8>)>,
    /// Padding bytes to append (0 = none; otherwise the count includes the count byte).
    pub padding: u8,
}

impl RtpHeader {
    /// Whether the one-byte form can carry every element.
    fn one_byte_ok(&self) -> bool {
        self.extensions
            .iter()
            .all(|(id, d)| (1..=14).contains(id) && (1..=16).contains(&d.len()))
    }

    /// Bytes the header (fixed + CSRC + extension block) will occupy.
    pub fn header_len(&self) -> usize {
        let mut n = FIXED_HEADER_LEN + 4 * self.csrcs.len();
        if !self.extensions.is_empty() {
            let per = if self.one_byte_ok() { 1 } else { 2 };
            let body: usize = self.extensions.iter().map(|(_, d)| per + d.len()).sum();
            n += 4 + body.div_ceil(4) * 4;
        }
        n
    }

    /// Append header, `payload` and padding to `out`. Fails (writing nothing) if a field does
    /// not fit: more than 15 CSRCs, a PT above 127, an extension id 0 or 15 in one-byte
    /// form, id 0 or data over 255 bytes in two-byte form, or an extension block over 65535
    /// words.
    pub fn write(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<()> {
        if self.csrcs.len() > 15 {
            return Err(out_of_range("CSRC count", self.csrcs.len() as u64));
        }
        if self.payload_type > 127 {
            return Err(out_of_range("payload type", self.payload_type as u64));
        }
        let one = self.one_byte_ok();
        if !one {
            for (id, d) in &self.extensions {
                if *id == 0 || d.len() > 255 {
                    let value = if *id == 0 { 0 } else { d.len() as u64 };
                    return Err(out_of_range("extension element", value));
                }
            }
        }
        let hl = self.header_len();
        if !self.extensions.is_empty()
            && (hl - FIXED_HEADER_LEN - 4 * self.csrcs.len() - 4) / 4 > 0xffff
        {
            return Err(out_of_range("extension length", hl as u64));
        }
        let start = out.len();
        out.reserve(hl + payload.len() + self.padding as usize);
        let mut b0 = 0x80 | self.csrcs.len() as u8;
        if self.padding > 0 {
            b0 |= 0x20;
        }
        if !self.extensions.is_empty() {
            b0 |= 0x10;
        }
        out.push(b0);
        out.push(((self.marker as u8) << 7) | self.payload_type);
        out.extend_from_slice(&self.sequence_number.to_be_bytes());
        out.extend_from_slice(&self.timestamp.to_be_bytes());
        out.extend_from_slice(&self.ssrc.to_be_bytes());
        for c in &self.csrcs {
            out.extend_from_slice(&c.to_be_bytes());
        }
        if !self.extensions.is_empty() {
            let profile = if one {
                ONE_BYTE_PROFILE
            } else {
                TWO_BYTE_PROFILE
            };
            out.extend_from_slice(&profile.to_be_bytes());
            let len_pos = out.len();
            out.extend_from_slice(&[0, 0]);
            let body_start = out.len();
            for (id, d) in &self.extensions {
                if one {
                    out.push((id << 4) | (d.len() as u8 - 1));
                } else {
                    out.push(*id);
                    out.push(d.len() as u8);
                }
                out.extend_from_slice(d);
            }
            while (out.len() - body_start) & 3 != 0 {
                out.push(0);
            }
            let words = ((out.len() - body_start) / 4) as u16;
            out[len_pos..len_pos + 2].copy_from_slice(&words.to_be_bytes());
        }
        debug_assert_eq!(out.len() - start, hl);
        out.extend_from_slice(payload);
        if self.padding > 0 {
            out.extend(std::iter::repeat_n(0u8, self.padding as usize - 1));
            out.push(self.padding);
        }
        Ok(())
    }

    /// Convenience: a fresh `Vec` with the serialised packet.
    pub fn to_vec(&self, payload: &[u8]) -> Result<Vec<u8>> {
        let mut v = Vec::new();
        self.write(payload, &mut v)?;
        Ok(v)
    }
}

/// Rewrite the marker bit of a serialised RTP packet in place (used to repair end-of-picture
/// marking for partial subscribers without re-serialising).
pub fn set_marker(buf: &mut [u8], marker: bool) -> Result<()> {
    need("RTP header", FIXED_HEADER_LEN, buf.len())?;
    if marker {
        buf[1] |= 0x80;
    } else {
        buf[1] &= 0x7f;
    }
    Ok(())
}

/// Wrapping comparison of RTP sequence numbers: `a` is before `b` (RFC 3550 serial arithmetic).
pub fn seq_before(a: u16, b: u16) -> bool {
    a != b && b.wrapping_sub(a) < 0x8000
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn minimal_packet() {
        let h = RtpHeader {
            marker: true,
            payload_type: 96,
            sequence_number: 0xfffe,
            timestamp: 0x01020304,
            ssrc: 0xdeadbeef,
            ..Default::default()
        };
        let v = h.to_vec(b"abc").unwrap();
        assert_eq!(
            v,
            [0x80, 0xe0, 0xff, 0xfe, 1, 2, 3, 4, 0xde, 0xad, 0xbe, 0xef, b'a', b'b', b'c']
        );
        let p = RtpPacket::parse(&v).unwrap();
        assert!(p.marker());
        assert_eq!(p.payload_type(), 96);
        assert_eq!(p.payload(), b"abc");
        assert_eq!(p.to_header(), h);
    }

    #[test]
    fn rfc8285_one_byte_example_layout() {
        // id 1 with 1 byte, id 2 with 2 bytes: 0xBEDE, length 2 words (2+3 = 5 bytes -> 8).
        let h = RtpHeader {
            payload_type: 100,
            extensions: vec![(1, vec![0xaa]), (2, vec![0xbb, 0xcc])],
            ..Default::default()
        };
        let v = h.to_vec(&[]).unwrap();
        assert_eq!(&v[12..16], &[0xbe, 0xde, 0, 2]);
        assert_eq!(&v[16..24], &[0x10, 0xaa, 0x21, 0xbb, 0xcc, 0, 0, 0]);
        let p = RtpPacket::parse(&v).unwrap();
        let e: Vec<_> = p.extensions().map(|e| e.unwrap()).collect();
        assert_eq!(e, vec![(1, &[0xaa][..]), (2, &[0xbb, 0xcc][..])]);
        assert_eq!(p.extension(2), Some(&[0xbb, 0xcc][..]));
        assert_eq!(p.extension(3), None);
    }

    #[test]
    fn two_byte_form_when_needed() {
        let h = RtpHeader {
            extensions: vec![(1, vec![]), (200, vec![7; 20])],
            ..Default::default()
        };
        let v = h.to_vec(b"x").unwrap();
        assert_eq!(&v[12..14], &[0x10, 0x00]);
        let p = RtpPacket::parse(&v).unwrap();
        assert_eq!(p.extension(200).unwrap(), &[7; 20][..]);
        assert_eq!(p.extension(1).unwrap(), &[] as &[u8]);
        assert_eq!(p.payload(), b"x");
    }

    #[test]
    fn padding_and_csrc() {
        let h = RtpHeader {
            csrcs: vec![1, 2, 3],
            padding: 7,
            ..Default::default()
        };
        let v = h.to_vec(b"hello").unwrap();
        let p = RtpPacket::parse(&v).unwrap();
        assert!(p.has_padding());
        assert_eq!(p.padding_len(), 7);
        assert_eq!(p.csrcs().collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(p.payload(), b"hello");
    }

    #[test]
    fn errors() {
        assert!(matches!(
            RtpPacket::parse(&[0x80; 5]),
            Err(Error::Truncated { .. })
        ));
        let mut v = RtpHeader::default().to_vec(b"x").unwrap();
        v[0] = 0x40;
        assert!(matches!(
            RtpPacket::parse(&v),
            Err(Error::Malformed {
                what: "RTP version",
                ..
            })
        ));
        v[0] = 0xa0; // padding bit, last byte 'x' = 120 > available
        assert!(matches!(
            RtpPacket::parse(&v),
            Err(Error::Malformed {
                what: "RTP padding",
                ..
            })
        ));
        v[0] = 0x8f; // 15 CSRCs but none present
        assert!(matches!(RtpPacket::parse(&v), Err(Error::Truncated { .. })));
        // One-byte element overrunning its block.
        let mut v = RtpHeader {
            extensions: vec![(1, vec![1])],
            ..Default::default()
        }
        .to_vec(&[])
        .unwrap();
        v[16] = 0x1f; // id 1, 16 bytes: overruns the 4-byte block
        assert!(matches!(
            RtpPacket::parse(&v),
            Err(Error::Malformed {
                what: "RTP header extension",
                ..
            })
        ));
        let too_many = RtpHeader {
            csrcs: vec![0; 16],
            ..Default::default()
        };
        assert!(too_many.to_vec(&[]).is_err());
    }

    #[test]
    fn seq_order() {
        assert!(seq_before(1, 2));
        assert!(seq_before(0xffff, 0));
        assert!(!seq_before(2, 1));
        assert!(!seq_before(5, 5));
    }

    fn arb_header() -> impl Strategy<Value = RtpHeader> {
        (
            any::<bool>(),
            0u8..128,
            any::<u16>(),
            any::<u32>(),
            any::<u32>(),
            proptest::collection::vec(any::<u32>(), 0..16),
            prop_oneof![
                proptest::collection::vec(
                    (1u8..15, proptest::collection::vec(any::<u8>(), 1..17)),
                    0..5
                ),
                proptest::collection::vec(
                    (1u8..=255, proptest::collection::vec(any::<u8>(), 0..40)),
                    0..5
                ),
            ],
            any::<u8>(),
        )
            .prop_map(
                |(
                    marker,
                    payload_type,
                    sequence_number,
                    timestamp,
                    ssrc,
                    csrcs,
                    extensions,
                    padding,
                )| {
                    RtpHeader {
                        marker,
                        payload_type,
                        sequence_number,
                        timestamp,
                        ssrc,
                        csrcs,
                        extensions,
                        padding,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn roundtrip(h in arb_header(), payload in proptest::collection::vec(any::<u8>(), 0..200)) {
            let v = h.to_vec(&payload).unwrap();
            prop_assert_eq!(v.len(), h.header_len() + payload.len() + h.padding as usize);
            let p = RtpPacket::parse(&v).unwrap();
            prop_assert_eq!(p.payload(), &payload[..]);
            prop_assert_eq!(p.to_header(), h);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(p) = RtpPacket::parse(&data) {
                // Every accessor is safe on a validated packet.
                let _ = (p.marker(), p.payload_type(), p.sequence_number(), p.timestamp(), p.ssrc());
                let _ = p.csrcs().count();
                let _ = p.extensions().count();
                prop_assert!(p.header_len() + p.payload().len() + p.padding_len() == data.len());
                let _ = p.to_header();
            }
        }
    }
}
