//! Per-packet congestion-control fields, carried in every data packet as one RTP header
//! extension element (RFC 8285).
//!
//! Why an RTP header extension: layer 0 must stay a plain VP9 RTP stream that stock
//! depayloaders play (`DESIGN.md`, wire format rules). Receivers that do not know the
//! extension skip it (RFC 8285 §4.1.1), so the fields cost nothing to compatibility.
//!
//! The per-layer packet sequence number (ERA's PSN) is the RTP sequence number itself: every
//! cumulative layer is its own RTP stream with its own SSRC and sequence space, so the RTP
//! counter is already per layer. The host extends it to 64 bits with [`SeqExtender`].
//!
//! # Element layout (the element's data, 11 bytes, big-endian)
//!
//! | offset | size | field | meaning |
//! |---|---|---|---|
//! | 0 | 1 | `layer` | cumulative layer index, 0 = base |
//! | 1 | 1 | `bunch_pos` | position in the bunch, 0 = first (ERA's FPF is `bunch_pos == 0`) |
//! | 2 | 1 | `bunch_len` | packets in this bunch, ≥ 1 (2 = packet pair) |
//! | 3 | 8 | `send_time_us` | sender clock, microseconds, u64 |
//!
//! Bunch position and length are whole bytes (not nibbles): bunches of up to 255 packets can
//! be described, and the element is 11 bytes so that with its one-byte RFC 8285 element header
//! it fills exactly three 32-bit words (no padding).
//!
//! Negotiated in SDP as `a=extmap:1 urn:layercast:cc` (element ID 1 by default, any 1..=14
//! allowed). Parsing accepts data longer than 11 bytes and ignores the tail, so that a later
//! revision can append fields without breaking old receivers; it rejects shorter data and
//! inconsistent bunch fields.

use crate::error::{Error, Result};

/// The URI the SDP `a=extmap` line names.
pub const URI: &str = "urn:layercast:cc";
/// Default extension element ID (`a=extmap:1 urn:layercast:cc`).
pub const DEFAULT_ID: u8 = 1;
/// Length of the element's data in bytes.
pub const DATA_LEN: usize = 11;
/// RFC 8285 profile value of the one-byte header form.
pub const ONE_BYTE_PROFILE: u16 = 0xBEDE;
/// RFC 8285 two-byte header form: the top 12 bits of the profile field (`0x100`), low 4 bits
/// are "appbits".
pub const TWO_BYTE_PROFILE_MASK: u16 = 0xFFF0;
/// See [`TWO_BYTE_PROFILE_MASK`].
pub const TWO_BYTE_PROFILE: u16 = 0x1000;

/// The congestion-control fields of one data packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CcFields {
    /// Cumulative layer index (0 = base).
    pub layer: u8,
    /// Position of the packet in its bunch, 0 = first.
    pub bunch_pos: u8,
    /// Packets in the bunch (≥ 1).
    pub bunch_len: u8,
    /// Sender's send timestamp, microseconds.
    pub send_time_us: u64,
}

impl CcFields {
    /// Parses the element's data (the bytes after the RFC 8285 element header).
    pub fn parse(data: &[u8]) -> Result<CcFields> {
        if data.len() < DATA_LEN {
            return Err(Error::Truncated {
                what: "cc extension element",
                need: DATA_LEN,
                have: data.len(),
            });
        }
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&data[3..11]);
        let f = CcFields {
            layer: data[0],
            bunch_pos: data[1],
            bunch_len: data[2],
            send_time_us: u64::from_be_bytes(ts),
        };
        f.validate()?;
        Ok(f)
    }

    /// Checks the bunch fields: a bunch has at least one packet and the position lies inside it.
    pub fn validate(&self) -> Result<()> {
        if self.bunch_len == 0 {
            return Err(Error::Invalid {
                field: "bunch_len",
                reason: "must be at least 1".into(),
            });
        }
        if self.bunch_pos >= self.bunch_len {
            return Err(Error::Invalid {
                field: "bunch_pos",
                reason: format!(
                    "position {} outside a bunch of {}",
                    self.bunch_pos, self.bunch_len
                ),
            });
        }
        Ok(())
    }

    /// Appends the element's data (11 bytes) to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(self.layer);
        out.push(self.bunch_pos);
        out.push(self.bunch_len);
        out.extend_from_slice(&self.send_time_us.to_be_bytes());
    }

    /// The element's data as an array.
    pub fn to_bytes(&self) -> [u8; DATA_LEN] {
        let mut b = [0u8; DATA_LEN];
        b[0] = self.layer;
        b[1] = self.bunch_pos;
        b[2] = self.bunch_len;
        b[3..].copy_from_slice(&self.send_time_us.to_be_bytes());
        b
    }

    /// Appends a whole one-byte-form element: the `ID | L` byte (L = 10, i.e. 11 data bytes)
    /// followed by the data. `id` must be 1..=14 (RFC 8285 §4.2).
    pub fn write_element(&self, id: u8, out: &mut Vec<u8>) -> Result<()> {
        check_one_byte_id(id)?;
        out.push((id << 4) | (DATA_LEN as u8 - 1));
        self.write(out);
        Ok(())
    }

    /// Appends a complete RTP header extension holding only this element: the `0xBEDE`
    /// profile, the length in 32-bit words, the element, and padding to a word boundary.
    /// The caller sets the RTP header's X bit.
    pub fn write_extension_block(&self, id: u8, out: &mut Vec<u8>) -> Result<()> {
        write_one_byte_block(&[(id, &self.to_bytes())], out)
    }

    /// Finds and parses element `id` in an RTP header extension (`profile` and the extension
    /// body after the 4-byte extension header, as RFC 3550 §5.3.1 lays it out).
    /// `Ok(None)` if the block is well-formed but holds no such element.
    pub fn from_extension(profile: u16, body: &[u8], id: u8) -> Result<Option<CcFields>> {
        match find_element(profile, body, id)? {
            Some(d) => CcFields::parse(d).map(Some),
            None => Ok(None),
        }
    }
}

fn check_one_byte_id(id: u8) -> Result<()> {
    if !(1..=14).contains(&id) {
        return Err(Error::Invalid {
            field: "extension id",
            reason: format!("{id} is outside 1..=14 for the one-byte header form"),
        });
    }
    Ok(())
}

/// Appends an RFC 8285 one-byte-form header extension (profile `0xBEDE`, length, elements,
/// zero padding) holding `elements` as `(id, data)`. Data must be 1..=16 bytes.
pub fn write_one_byte_block(elements: &[(u8, &[u8])], out: &mut Vec<u8>) -> Result<()> {
    let mut body_len = 0usize;
    for (id, data) in elements {
        check_one_byte_id(*id)?;
        if data.is_empty() || data.len() > 16 {
            return Err(Error::Invalid {
                field: "extension element length",
                reason: format!("{} bytes; the one-byte form carries 1..=16", data.len()),
            });
        }
        body_len += 1 + data.len();
    }
    let words = body_len.div_ceil(4);
    if words > u16::MAX as usize {
        return Err(Error::Invalid {
            field: "extension block length",
            reason: format!("{words} words exceed 65535"),
        });
    }
    out.extend_from_slice(&ONE_BYTE_PROFILE.to_be_bytes());
    out.extend_from_slice(&(words as u16).to_be_bytes());
    for (id, data) in elements {
        out.push((id << 4) | (data.len() as u8 - 1));
        out.extend_from_slice(data);
    }
    out.resize(out.len() + (words * 4 - body_len), 0);
    Ok(())
}

/// Finds element `id` in an RTP header extension body, in either RFC 8285 form.
///
/// `profile` is the 16-bit "defined by profile" field; `body` the extension data after the
/// 4-byte extension header (its length must already be checked against the length field by
/// the RTP parser). Padding bytes (0) are skipped. In the one-byte form, ID 15 ends parsing
/// (RFC 8285 §4.2). An element whose declared length runs past the body is an error. Profiles
/// other than the two RFC 8285 forms give `Ok(None)` (not our extension).
pub fn find_element(profile: u16, body: &[u8], id: u8) -> Result<Option<&[u8]>> {
    let two_byte = if profile == ONE_BYTE_PROFILE {
        false
    } else if profile & TWO_BYTE_PROFILE_MASK == TWO_BYTE_PROFILE {
        true
    } else {
        return Ok(None);
    };
    let mut i = 0usize;
    while i < body.len() {
        let b = body[i];
        if b == 0 {
            i += 1; // padding
            continue;
        }
        let (eid, len, hdr) = if two_byte {
            let Some(&l) = body.get(i + 1) else {
                return Err(Error::Truncated {
                    what: "two-byte extension element header",
                    need: i + 2,
                    have: body.len(),
                });
            };
            (b, l as usize, 2)
        } else {
            let eid = b >> 4;
            if eid == 15 {
                return Ok(None);
            }
            (eid, (b & 0x0F) as usize + 1, 1)
        };
        let start = i + hdr;
        let end = start + len;
        if end > body.len() {
            return Err(Error::Truncated {
                what: "header extension element",
                need: end,
                have: body.len(),
            });
        }
        if eid == id {
            return Ok(Some(&body[start..end]));
        }
        i = end;
    }
    Ok(None)
}

/// Extends 16-bit RTP sequence numbers to 64 bits, across wrap-around and reordering.
///
/// Each arriving number is placed at the 64-bit value nearest to the highest one seen so far
/// (within ±32768), as RFC 3550 Appendix A.1 does with its cycle counter. The first number
/// `s` maps to `65536 + s`, so that packets reordered from before the first one still get a
/// valid (smaller) value instead of underflowing; only differences between extended numbers
/// carry meaning. Call [`reset`](Self::reset) when the layer is re-joined: after a leave the
/// sender's counter has moved on by an unknown amount, and the gap must not count as loss.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeqExtender {
    highest: Option<u64>,
}

impl SeqExtender {
    /// A fresh extender (no packet seen).
    pub const fn new() -> SeqExtender {
        SeqExtender { highest: None }
    }

    /// Forgets the history; the next number starts a new baseline.
    pub fn reset(&mut self) {
        self.highest = None;
    }

    /// Highest extended number seen so far.
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }

    /// Extends `seq` and updates the highest number seen.
    pub fn extend(&mut self, seq: u16) -> u64 {
        let Some(h) = self.highest else {
            let e = 65_536 + seq as u64;
            self.highest = Some(e);
            return e;
        };
        let delta = seq.wrapping_sub(h as u16) as i16 as i64;
        // `h >= 65536` holds from the first packet on and a single step moves by at most
        // 32768, but a very long backward run could still approach zero: saturate.
        let e = if delta >= 0 {
            h.saturating_add(delta as u64)
        } else {
            h.saturating_sub(delta.unsigned_abs())
        };
        if e > h {
            self.highest = Some(e);
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn layout_is_as_documented() {
        let f = CcFields {
            layer: 7,
            bunch_pos: 1,
            bunch_len: 2,
            send_time_us: 0x0102_0304_0506_0708,
        };
        assert_eq!(f.to_bytes(), [7, 1, 2, 1, 2, 3, 4, 5, 6, 7, 8]);
        let mut v = Vec::new();
        f.write(&mut v);
        assert_eq!(v, f.to_bytes());
        let mut blk = Vec::new();
        f.write_extension_block(DEFAULT_ID, &mut blk).unwrap();
        // 0xBEDE, 3 words, element header 0x1A (ID 1, L = 10), 11 data bytes, no padding.
        assert_eq!(&blk[..5], &[0xBE, 0xDE, 0x00, 0x03, 0x1A]);
        assert_eq!(blk.len(), 4 + 12);
        let back = CcFields::from_extension(0xBEDE, &blk[4..], 1).unwrap();
        assert_eq!(back, Some(f));
        assert_eq!(
            CcFields::from_extension(0xBEDE, &blk[4..], 2).unwrap(),
            None
        );
    }

    #[test]
    fn rejects_bad_input() {
        assert!(matches!(
            CcFields::parse(&[0; 10]),
            Err(Error::Truncated {
                need: 11,
                have: 10,
                ..
            })
        ));
        assert!(CcFields::parse(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).is_err()); // len 0
        assert!(CcFields::parse(&[0, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0]).is_err()); // pos == len
        assert!(CcFields::parse(&[0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0]).is_ok());
        // Longer data is accepted (forward compatible), the tail ignored.
        assert!(CcFields::parse(&[0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9, 9, 9]).is_ok());
        let f = CcFields {
            layer: 0,
            bunch_pos: 0,
            bunch_len: 1,
            send_time_us: 0,
        };
        assert!(f.write_element(0, &mut Vec::new()).is_err());
        assert!(f.write_element(15, &mut Vec::new()).is_err());
        // Element running past the body.
        assert!(find_element(0xBEDE, &[0x1A, 0, 0], 1).is_err());
    }

    #[test]
    fn finds_element_among_others_and_padding() {
        let cc = CcFields {
            layer: 3,
            bunch_pos: 0,
            bunch_len: 4,
            send_time_us: 99,
        }
        .to_bytes();
        let mut blk = Vec::new();
        write_one_byte_block(&[(3, &[0xAA, 0xBB]), (1, &cc), (5, &[1])], &mut blk).unwrap();
        assert_eq!(blk.len() % 4, 0);
        let d = find_element(0xBEDE, &blk[4..], 1).unwrap().unwrap();
        assert_eq!(d, &cc);
        assert_eq!(
            find_element(0xBEDE, &blk[4..], 5).unwrap(),
            Some(&[1u8][..])
        );
        // Two-byte form: id, len, data.
        let mut two = vec![0u8, 7, 2, 9, 9, 1, 11];
        two.extend_from_slice(&cc);
        assert_eq!(find_element(0x1000, &two, 1).unwrap(), Some(&cc[..]));
        // Unknown profile: not ours.
        assert_eq!(find_element(0x1234, &two, 1).unwrap(), None);
        // ID 15 stops parsing.
        assert_eq!(find_element(0xBEDE, &[0xF0, 0x1A], 1).unwrap(), None);
    }

    #[test]
    fn seq_extender_wraps_and_reorders() {
        let mut x = SeqExtender::new();
        let a = x.extend(65_534);
        assert_eq!(x.extend(65_535), a + 1);
        assert_eq!(x.extend(0), a + 2);
        assert_eq!(x.extend(1), a + 3);
        // Late packet from before the wrap.
        assert_eq!(x.extend(65_535), a + 1);
        assert_eq!(x.highest(), Some(a + 3));
        // Reordered before the first packet seen.
        let mut y = SeqExtender::new();
        let b = y.extend(0);
        assert_eq!(y.extend(65_535), b - 1);
        assert_eq!(y.highest(), Some(b));
        y.reset();
        assert_eq!(y.highest(), None);
    }

    proptest! {
        #[test]
        fn cc_round_trip(layer: u8, len in 1u8..=255, pos_frac in 0.0f64..1.0, ts: u64, id in 1u8..=14) {
            let pos = ((len as f64) * pos_frac) as u8;
            let f = CcFields { layer, bunch_pos: pos.min(len - 1), bunch_len: len, send_time_us: ts };
            prop_assert_eq!(CcFields::parse(&f.to_bytes()).unwrap(), f);
            let mut blk = Vec::new();
            f.write_extension_block(id, &mut blk).unwrap();
            prop_assert_eq!(CcFields::from_extension(0xBEDE, &blk[4..], id).unwrap(), Some(f));
        }

        #[test]
        fn arbitrary_bytes_never_panic(data: Vec<u8>, profile: u16, id in 0u8..=255) {
            let _ = CcFields::parse(&data);
            let _ = find_element(profile, &data, id);
            let _ = CcFields::from_extension(profile, &data, id);
        }

        #[test]
        fn seq_extender_recovers_true_sequence(start: u16, steps in proptest::collection::vec(-200i64..400, 1..300)) {
            // A true 64-bit walk whose consecutive arrivals differ by less than 2^15 must be
            // recovered exactly (up to the constant offset of the first packet).
            let mut x = SeqExtender::new();
            let mut truth: i64 = 1_000_000 + start as i64;
            let base = x.extend(truth as u16) as i64 - truth;
            let mut hi = truth;
            for s in steps {
                truth += s;
                // keep within the ±32767 window of the highest seen
                prop_assume!((truth - hi).abs() < 32_000);
                let e = x.extend(truth as u16) as i64;
                prop_assert_eq!(e - base, truth);
                hi = hi.max(truth);
            }
        }
    }
}
