//! The repair header: RFC 8627 §4.2.2.1, flexible mask (R = 0, F = 0), one SN base and mask.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |0|0|P|X|  CC   |M| PT recovery |        length recovery        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                          TS recovery                          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |           SN base             |k|          Mask [0-14]        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |k|                   Mask [15-45] (optional)                   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                     Mask [46-109] (optional)                  |
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Mask bit i (most significant first) set: the packet with sequence number SN base + i is
//! protected. A k bit of 1 ends the mask (15 or 46 bits); otherwise it runs to 110 bits. The
//! repair payload (the XOR of the protected packets' payloads) follows.

use crate::error::{Error, Result};
use crate::rtp::need;

/// One parsed repair header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepairHeader {
    /// XOR of the protected packets' P, X and CC fields (zero for what this crate protects).
    pub padding: bool,
    pub extension: bool,
    pub csrc_count: u8,
    /// XOR of the marker bits.
    pub marker: bool,
    /// XOR of the payload types.
    pub payload_type: u8,
    /// XOR of the protected lengths (bytes after the fixed RTP header).
    pub length: u16,
    /// XOR of the RTP timestamps.
    pub timestamp: u32,
    /// Sequence number of mask bit 0.
    pub sn_base: u16,
    /// Bit i set = SN base + i protected (i < 110).
    pub mask: u128,
}

impl RepairHeader {
    /// Bits of the shortest mask form that holds `mask`: 15, 46 or 110.
    pub fn mask_bits(&self) -> u32 {
        let top = 128 - self.mask.leading_zeros();
        if top <= 15 {
            15
        } else if top <= 46 {
            46
        } else {
            110
        }
    }

    /// Bytes [`RepairHeader::write`] produces: 12, 16 or 24.
    pub fn len(&self) -> usize {
        match self.mask_bits() {
            15 => 12,
            46 => 16,
            _ => 24,
        }
    }

    /// Never empty: a header has at least its 12 fixed bytes.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Sequence numbers this header protects, in mask order.
    pub fn protected(&self) -> impl Iterator<Item = u16> + '_ {
        (0..110u16)
            .filter(|&i| self.mask >> i & 1 == 1)
            .map(|i| self.sn_base.wrapping_add(i))
    }

    /// Appends the header (shortest mask form). Mask bits at 110 and above are dropped.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(
            ((self.padding as u8) << 5) | ((self.extension as u8) << 4) | (self.csrc_count & 0x0f),
        );
        out.push(((self.marker as u8) << 7) | (self.payload_type & 0x7f));
        out.extend_from_slice(&self.length.to_be_bytes());
        out.extend_from_slice(&self.timestamp.to_be_bytes());
        out.extend_from_slice(&self.sn_base.to_be_bytes());
        // Bit i of the mask goes to wire position i (MSB first) across the three fields.
        let bit = |i: u32| (self.mask >> i & 1) as u64;
        let field = |from: u32, n: u32| (0..n).fold(0u64, |acc, j| (acc << 1) | bit(from + j));
        let bits = self.mask_bits();
        let k1 = (bits == 15) as u16;
        out.extend_from_slice(&((k1 << 15) | field(0, 15) as u16).to_be_bytes());
        if bits >= 46 {
            let k2 = (bits == 46) as u32;
            out.extend_from_slice(&((k2 << 31) | field(15, 31) as u32).to_be_bytes());
        }
        if bits == 110 {
            out.extend_from_slice(&field(46, 64).to_be_bytes());
        }
    }

    /// Parses a repair payload's header; returns it and its length (the repair payload
    /// starts there). Refuses R = 1 (retransmission) and F = 1 (fixed L/D masks).
    pub fn parse(buf: &[u8]) -> Result<(RepairHeader, usize)> {
        need("FEC header", 12, buf.len())?;
        if buf[0] & 0xc0 != 0 {
            return Err(Error::Malformed {
                what: "FEC repair header",
                detail: "R or F bit set (only the flexible mask is used)".into(),
            });
        }
        let mut h = RepairHeader {
            padding: buf[0] & 0x20 != 0,
            extension: buf[0] & 0x10 != 0,
            csrc_count: buf[0] & 0x0f,
            marker: buf[1] & 0x80 != 0,
            payload_type: buf[1] & 0x7f,
            length: u16::from_be_bytes([buf[2], buf[3]]),
            timestamp: u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]),
            sn_base: u16::from_be_bytes([buf[8], buf[9]]),
            mask: 0,
        };
        let w1 = u16::from_be_bytes([buf[10], buf[11]]);
        let mut put = |from: u32, n: u32, v: u64| {
            for j in 0..n {
                if v >> (n - 1 - j) & 1 == 1 {
                    h.mask |= 1u128 << (from + j);
                }
            }
        };
        put(0, 15, (w1 & 0x7fff) as u64);
        if w1 & 0x8000 != 0 {
            return Ok((h, 12));
        }
        need("FEC mask 15-45", 16, buf.len())?;
        let w2 = u32::from_be_bytes([buf[12], buf[13], buf[14], buf[15]]);
        put(15, 31, (w2 & 0x7fff_ffff) as u64);
        if w2 & 0x8000_0000 != 0 {
            return Ok((h, 16));
        }
        need("FEC mask 46-109", 24, buf.len())?;
        let w3 = u64::from_be_bytes([
            buf[16], buf[17], buf[18], buf[19], buf[20], buf[21], buf[22], buf[23],
        ]);
        put(46, 64, w3);
        Ok((h, 24))
    }
}
