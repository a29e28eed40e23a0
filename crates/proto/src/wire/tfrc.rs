//! TFRC wire structures: the fields each data packet carries and the receiver's feedback.
//!
//! All integers are big-endian. Timestamps are the low 32 bits of a microsecond clock
//! (wrap every 71.6 minutes; every use is a modular difference, fine while RTTs stay below
//! 35 minutes).
//!
//! Data fields (16 bytes; fit the RFC 8285 one-byte header form, suggested element ID 3):
//! ```text
//!  0       1       2       3
//! +-------+-------+-------+-------+
//! | ver=1 | flags |   reserved    |
//! +-------+-------+-------+-------+
//! |      sequence number (32)     |
//! +-------------------------------+
//! |  send timestamp, us (32)      |
//! +-------------------------------+
//! |  sender's RTT estimate R, us  |   0 = no estimate yet
//! +-------------------------------+
//! ```
//!
//! Feedback (24 bytes + authentication block):
//! ```text
//! | 'T' | 'R' | ver=1 | flags |  ts_echo_us (32) | t_delay_us (32) | x_recv B/s (32) |
//! | p (32, fixed point p * (2^32-1)) | auth_type (8) | auth_len (8) | auth (auth_len) |
//! ```
//! The authentication block is where a MAC will go (a later issue): `auth_type` 0 with
//! `auth_len` 0 means unauthenticated. Parsers accept any type and hand the bytes up; the
//! policy of rejecting unauthenticated reports belongs to the host.

use crate::error::{Error, Result};

/// Byte reader that fails with [`Error::Truncated`] instead of panicking.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8], what: &'static str) -> Self {
        Reader { buf, pos: 0, what }
    }
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end {
            Some(end) => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(Error::Truncated {
                what: self.what,
                need: self.pos.saturating_add(n),
                have: self.buf.len(),
            }),
        }
    }
    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn u16(&mut self) -> Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    pub(crate) fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(crate) fn rest(&self) -> usize {
        self.buf.len() - self.pos
    }
}

/// Authentication block carried at the end of every report (TFRC feedback and TFMCC
/// receiver reports). Empty (`kind == 0`, no bytes) until report authentication is added.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthBlock {
    /// 0 = none. Other values are reserved for MAC algorithms.
    pub kind: u8,
    /// The MAC bytes (at most 255).
    pub tag: Vec<u8>,
}

impl AuthBlock {
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        let len = self.tag.len().min(255);
        out.push(self.kind);
        out.push(len as u8);
        out.extend_from_slice(&self.tag[..len]);
    }
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<AuthBlock> {
        let kind = r.u8()?;
        let len = r.u8()? as usize;
        let tag = r.take(len)?.to_vec();
        Ok(AuthBlock { kind, tag })
    }
}

/// Encodes a loss event rate in [0, 1] as 32-bit fixed point.
pub fn encode_p(p: f64) -> u32 {
    if p.is_nan() || p <= 0.0 {
        0
    } else if p >= 1.0 {
        u32::MAX
    } else {
        (p * u32::MAX as f64).round() as u32
    }
}

/// Decodes [`encode_p`].
pub fn decode_p(v: u32) -> f64 {
    v as f64 / u32::MAX as f64
}

/// Saturating conversion of a non-negative rate or duration to u32.
pub fn sat_u32(x: f64) -> u32 {
    if x.is_nan() || x <= 0.0 {
        0
    } else if x >= u32::MAX as f64 {
        u32::MAX
    } else {
        x.round() as u32
    }
}

/// Wire version of every TFRC/TFMCC structure.
pub const VERSION: u8 = 1;

/// Fields every TFRC data packet carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TfrcDataFields {
    /// Data packet sequence number (+1 per packet; the receiver extends it to 64 bits).
    pub seq: u32,
    /// Send time, low 32 bits of the sender's microsecond clock.
    pub ts_us: u32,
    /// The sender's RTT estimate in microseconds (0 = none yet).
    pub rtt_us: u32,
}

impl TfrcDataFields {
    /// Encoded length.
    pub const LEN: usize = 16;

    /// Appends the encoding.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[VERSION, 0, 0, 0]);
        out.extend_from_slice(&self.seq.to_be_bytes());
        out.extend_from_slice(&self.ts_us.to_be_bytes());
        out.extend_from_slice(&self.rtt_us.to_be_bytes());
    }

    /// Encodes into a new buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(Self::LEN);
        self.write(&mut v);
        v
    }

    /// Parses; trailing bytes are an error (the element length is exact).
    pub fn parse(buf: &[u8]) -> Result<TfrcDataFields> {
        let mut r = Reader::new(buf, "tfrc data fields");
        check_version(r.u8()?, "tfrc data fields")?;
        let _flags = r.u8()?;
        let _reserved = r.u16()?;
        let f = TfrcDataFields {
            seq: r.u32()?,
            ts_us: r.u32()?,
            rtt_us: r.u32()?,
        };
        no_trailing(&r, "tfrc data fields")?;
        Ok(f)
    }
}

/// TFRC receiver feedback (RFC 5348 §3.2.2).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TfrcFeedback {
    /// Timestamp of the newest data packet received (sender clock, us).
    pub ts_echo_us: u32,
    /// Time between that packet's arrival and this report, us.
    pub t_delay_us: u32,
    /// Receive rate over the last RTT, bytes/s.
    pub x_recv_bps: u32,
    /// Loss event rate, fixed point (see [`encode_p`]).
    pub p_fixed: u32,
    /// Where the MAC goes.
    pub auth: AuthBlock,
}

/// Magic at the start of TFRC feedback.
pub const TFRC_FEEDBACK_MAGIC: [u8; 2] = *b"TR";

impl TfrcFeedback {
    /// Loss event rate as a float.
    pub fn p(&self) -> f64 {
        decode_p(self.p_fixed)
    }

    /// Encodes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(26 + self.auth.tag.len());
        out.extend_from_slice(&TFRC_FEEDBACK_MAGIC);
        out.push(VERSION);
        out.push(0);
        out.extend_from_slice(&self.ts_echo_us.to_be_bytes());
        out.extend_from_slice(&self.t_delay_us.to_be_bytes());
        out.extend_from_slice(&self.x_recv_bps.to_be_bytes());
        out.extend_from_slice(&self.p_fixed.to_be_bytes());
        self.auth.write(&mut out);
        out
    }

    /// Parses.
    pub fn parse(buf: &[u8]) -> Result<TfrcFeedback> {
        let mut r = Reader::new(buf, "tfrc feedback");
        let magic = r.take(2)?;
        if magic != TFRC_FEEDBACK_MAGIC {
            return Err(Error::Malformed {
                what: "tfrc feedback",
                detail: format!("magic {magic:02x?}"),
            });
        }
        check_version(r.u8()?, "tfrc feedback")?;
        let _flags = r.u8()?;
        let fb = TfrcFeedback {
            ts_echo_us: r.u32()?,
            t_delay_us: r.u32()?,
            x_recv_bps: r.u32()?,
            p_fixed: r.u32()?,
            auth: AuthBlock::read(&mut r)?,
        };
        no_trailing(&r, "tfrc feedback")?;
        Ok(fb)
    }
}

pub(crate) fn check_version(v: u8, what: &'static str) -> Result<()> {
    if v != VERSION {
        return Err(Error::Malformed {
            what,
            detail: format!("version {v}, expected {VERSION}"),
        });
    }
    Ok(())
}

pub(crate) fn no_trailing(r: &Reader<'_>, what: &'static str) -> Result<()> {
    if r.rest() != 0 {
        return Err(Error::Malformed {
            what,
            detail: format!("{} trailing bytes", r.rest()),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects() {
        let d = TfrcDataFields {
            seq: 7,
            ts_us: 0xdead_beef,
            rtt_us: 100_000,
        };
        let b = d.to_bytes();
        assert_eq!(b.len(), TfrcDataFields::LEN);
        assert_eq!(TfrcDataFields::parse(&b).unwrap(), d);
        assert!(matches!(
            TfrcDataFields::parse(&b[..10]),
            Err(Error::Truncated { .. })
        ));
        let fb = TfrcFeedback {
            ts_echo_us: 1,
            t_delay_us: 2,
            x_recv_bps: 3,
            p_fixed: encode_p(0.01),
            auth: AuthBlock {
                kind: 1,
                tag: vec![9; 16],
            },
        };
        let b = fb.to_bytes();
        assert_eq!(TfrcFeedback::parse(&b).unwrap(), fb);
        assert!((fb.p() - 0.01).abs() < 1e-9);
        let mut bad = b.clone();
        bad[0] = b'X';
        assert!(matches!(
            TfrcFeedback::parse(&bad),
            Err(Error::Malformed { .. })
        ));
        assert!(TfrcFeedback::parse(&b[..b.len() - 1]).is_err());
    }
}
