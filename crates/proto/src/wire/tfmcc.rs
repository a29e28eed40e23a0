//! TFMCC wire structures: the sender's fields on every data packet (an RTP header extension
//! element, RFC 8285) and the receiver report (a UDP payload to the sender's feedback port).
//!
//! All integers big-endian; rates in **bytes/s** (u32: up to 34 Gbit/s); times in
//! microseconds, timestamps as the low 32 bits of a microsecond clock (modular differences;
//! fine while RTTs stay below 35 minutes). RFC 4654 §2.2 specifies contents, not layouts;
//! ours follows the spec's suggestion (§2.9.3) with wider fields than libtfmcc's 16-bit ms.
//!
//! # Data fields: RTP header extension element, ID [`TFMCC_EXT_ID`] = 2, 32 bytes
//! 32 bytes do not fit the one-byte header form (at most 16 bytes per element), so the element
//! travels in the **two-byte header form** (`0x100` profile, RFC 8285 §4.3):
//! ```text
//!  0       1       2       3
//! +-------+-------+-------+-------+
//! | ver=1 | flags | round (16)    |   flags: 0x80 IC (echo_rid is the CLR), 0x40 SLOW_START,
//! +-------+-------+-------+-------+          0x20 SUPP_FROM_LOSS (x_supp came from a report
//! | seq (32)                      |          with have_loss), 0x10 ECHO (echo fields valid)
//! | ts_us: send time (32)         |
//! | max_rtt_us: R_max (32)        |
//! | x_supp: suppression rate B/s  |   0xFFFFFFFF = "infinity" (start of a round)
//! | x_send: current rate B/s      |
//! | echo_rid (32)                 |
//! | echo_ts_us (32)               |   receiver's report timestamp + sender hold time
//! +-------------------------------+
//! ```
//!
//! # Receiver report, 36 bytes + authentication block
//! ```text
//! | 'T' 'M' | ver=1 | flags | round (16) | reserved (16) |
//! | rid | ts_us | echo_ts_us | x_rate | x_recv | rtt_us | p (fixed point) |   7 x 32 bits
//! | auth_type (8) | auth_len (8) | auth (auth_len bytes) |
//! ```
//! flags: 0x80 HAVE_RTT, 0x40 HAVE_LOSS, 0x20 LEAVE, 0x10 IS_CLR. `x_rate` is the desired
//! rate (the equation rate, or twice the receive rate before the first loss, RFC 4654
//! §4.3.4); `x_recv` the measured receive rate; `rtt_us` the RTT the rate was computed with
//! (lets the sender correct a rate computed with the initial RTT); `echo_ts_us` the newest data
//! timestamp plus the receiver's hold time. The authentication block is the place for a MAC
//! (a later issue); `auth_type` 0 / `auth_len` 0 = none.

use super::tfrc::{check_version, no_trailing, AuthBlock, Reader, VERSION};
use crate::error::{Error, Result};

/// RTP header extension element ID used for the TFMCC data fields.
pub const TFMCC_EXT_ID: u8 = 2;

/// Magic at the start of a receiver report.
pub const TFMCC_REPORT_MAGIC: [u8; 2] = *b"TM";

/// `x_supp` value meaning "no suppression yet" (the largest representable rate).
pub const RATE_INFINITE: u32 = u32::MAX;

/// The echo of one receiver report in a data packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Echo {
    /// Whose report is echoed.
    pub rid: u32,
    /// That report's timestamp plus the time the sender held it.
    pub ts_us: u32,
    /// `IC`: `rid` is the current limiting receiver.
    pub is_clr: bool,
}

/// Fields every TFMCC data packet carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TfmccDataFields {
    /// Data sequence number (+1 per packet).
    pub seq: u32,
    /// Send timestamp, sender clock, us.
    pub ts_us: u32,
    /// Feedback round counter.
    pub round: u16,
    /// Sender is in slow start.
    pub slow_start: bool,
    /// `x_supp` was set by a report with `have_loss` (slow-start suppression rule).
    pub supp_from_loss: bool,
    /// Maximum RTT `R_max`, us.
    pub max_rtt_us: u32,
    /// Suppression rate, bytes/s ([`RATE_INFINITE`] = none).
    pub x_supp: u32,
    /// Current sending rate, bytes/s.
    pub x_send: u32,
    /// Echoed report, if any.
    pub echo: Option<Echo>,
}

impl TfmccDataFields {
    /// Encoded length of the element payload.
    pub const LEN: usize = 32;

    /// Appends the element payload (without the RFC 8285 element header).
    pub fn write(&self, out: &mut Vec<u8>) {
        let mut flags = 0u8;
        let echo = self.echo.unwrap_or_default();
        if self.echo.is_some() {
            flags |= 0x10;
            if echo.is_clr {
                flags |= 0x80;
            }
        }
        if self.slow_start {
            flags |= 0x40;
        }
        if self.supp_from_loss {
            flags |= 0x20;
        }
        out.push(VERSION);
        out.push(flags);
        out.extend_from_slice(&self.round.to_be_bytes());
        for v in [
            self.seq,
            self.ts_us,
            self.max_rtt_us,
            self.x_supp,
            self.x_send,
            echo.rid,
            echo.ts_us,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }

    /// Encodes the element payload.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(Self::LEN);
        self.write(&mut v);
        v
    }

    /// Parses the element payload.
    pub fn parse(buf: &[u8]) -> Result<TfmccDataFields> {
        let what = "tfmcc data fields";
        let mut r = Reader::new(buf, what);
        check_version(r.u8()?, what)?;
        let flags = r.u8()?;
        if flags & 0x0f != 0 {
            return Err(Error::Malformed {
                what,
                detail: format!("reserved flag bits {flags:#04x}"),
            });
        }
        let round = r.u16()?;
        let seq = r.u32()?;
        let ts_us = r.u32()?;
        let max_rtt_us = r.u32()?;
        let x_supp = r.u32()?;
        let x_send = r.u32()?;
        let rid = r.u32()?;
        let ets = r.u32()?;
        no_trailing(&r, what)?;
        let echo = (flags & 0x10 != 0).then_some(Echo {
            rid,
            ts_us: ets,
            is_clr: flags & 0x80 != 0,
        });
        if echo.is_none() && (flags & 0x80 != 0 || rid != 0 || ets != 0) {
            return Err(Error::Malformed {
                what,
                detail: "echo fields set without the ECHO flag".into(),
            });
        }
        Ok(TfmccDataFields {
            seq,
            ts_us,
            round,
            slow_start: flags & 0x40 != 0,
            supp_from_loss: flags & 0x20 != 0,
            max_rtt_us,
            x_supp,
            x_send,
            echo,
        })
    }

    /// A complete RTP header extension block (RFC 8285 two-byte form) holding just this
    /// element: `0x1000`, length in 32-bit words, then `ID=2, len=32, payload`, padded.
    pub fn to_extension_block(&self) -> Vec<u8> {
        let payload = self.to_bytes();
        encode_two_byte_block(&[(TFMCC_EXT_ID, &payload)])
    }

    /// Finds and parses the TFMCC element in an RTP header extension block (either form).
    /// `Ok(None)` if the block has no element with ID 2.
    pub fn from_extension_block(block: &[u8]) -> Result<Option<TfmccDataFields>> {
        match find_extension_element(block, TFMCC_EXT_ID)? {
            Some(e) => Ok(Some(TfmccDataFields::parse(e)?)),
            None => Ok(None),
        }
    }
}

/// Encodes RFC 8285 two-byte-header elements into one extension block (profile `0x1000`,
/// appbits 0). Elements longer than 255 bytes are truncated to 255 (callers use short ones).
pub fn encode_two_byte_block(elements: &[(u8, &[u8])]) -> Vec<u8> {
    let mut body = Vec::new();
    for (id, data) in elements {
        let len = data.len().min(255);
        body.push(*id);
        body.push(len as u8);
        body.extend_from_slice(&data[..len]);
    }
    while body.len() % 4 != 0 {
        body.push(0);
    }
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&0x1000u16.to_be_bytes());
    out.extend_from_slice(&((body.len() / 4) as u16).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Finds element `id` in an RTP header extension block: 2-byte profile, 2-byte length in
/// words, then elements in the one-byte (`0xBEDE`) or two-byte (`0x100X`) form.
pub fn find_extension_element(block: &[u8], id: u8) -> Result<Option<&[u8]>> {
    let what = "rtp header extension";
    let mut r = Reader::new(block, what);
    let profile = r.u16()?;
    let words = r.u16()? as usize;
    let body = r.take(words * 4)?;
    let one_byte = profile == 0xBEDE;
    if !one_byte && profile & 0xfff0 != 0x1000 {
        return Err(Error::Malformed {
            what,
            detail: format!("profile {profile:#06x} is not RFC 8285"),
        });
    }
    let mut i = 0usize;
    while i < body.len() {
        let (eid, len, hdr) = if one_byte {
            let b = body[i];
            if b == 0 {
                i += 1;
                continue;
            }
            let eid = b >> 4;
            if eid == 15 {
                break; // reserved: stop parsing (RFC 8285 §4.2)
            }
            (eid, (b & 0x0f) as usize + 1, 1)
        } else {
            let eid = body[i];
            if eid == 0 {
                i += 1;
                continue;
            }
            let Some(&l) = body.get(i + 1) else {
                return Err(Error::Truncated {
                    what,
                    need: i + 2,
                    have: body.len(),
                });
            };
            (eid, l as usize, 2)
        };
        let start = i + hdr;
        let end = start + len;
        if end > body.len() {
            return Err(Error::Truncated {
                what,
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

/// Receiver report flags and fields (RFC 4654 §2.2.2 plus the spec's additions).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TfmccReport {
    /// Receiver ID (chosen by the host, e.g. from its address).
    pub rid: u32,
    /// Highest feedback round seen.
    pub round: u16,
    /// The receiver has measured its RTT at least once.
    pub have_rtt: bool,
    /// The receiver has seen a loss event.
    pub have_loss: bool,
    /// The receiver is about to leave.
    pub leave: bool,
    /// The receiver believes it is the CLR.
    pub is_clr: bool,
    /// Report send time, receiver clock, us.
    pub ts_us: u32,
    /// Newest data timestamp + hold time, us.
    pub echo_ts_us: u32,
    /// Desired rate, bytes/s.
    pub x_rate: u32,
    /// Measured receive rate, bytes/s.
    pub x_recv: u32,
    /// RTT used for `x_rate`, us.
    pub rtt_us: u32,
    /// Loss event rate, fixed point.
    pub p_fixed: u32,
    /// Where the MAC goes.
    pub auth: AuthBlock,
}

impl TfmccReport {
    /// Fixed length without the authentication block's tag bytes.
    pub const MIN_LEN: usize = 38;

    /// Encodes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::MIN_LEN + self.auth.tag.len());
        out.extend_from_slice(&TFMCC_REPORT_MAGIC);
        out.push(VERSION);
        let mut flags = 0u8;
        if self.have_rtt {
            flags |= 0x80;
        }
        if self.have_loss {
            flags |= 0x40;
        }
        if self.leave {
            flags |= 0x20;
        }
        if self.is_clr {
            flags |= 0x10;
        }
        out.push(flags);
        out.extend_from_slice(&self.round.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        for v in [
            self.rid,
            self.ts_us,
            self.echo_ts_us,
            self.x_rate,
            self.x_recv,
            self.rtt_us,
            self.p_fixed,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        self.auth.write(&mut out);
        out
    }

    /// Parses.
    pub fn parse(buf: &[u8]) -> Result<TfmccReport> {
        let what = "tfmcc report";
        let mut r = Reader::new(buf, what);
        let magic = r.take(2)?;
        if magic != TFMCC_REPORT_MAGIC {
            return Err(Error::Malformed {
                what,
                detail: format!("magic {magic:02x?}"),
            });
        }
        check_version(r.u8()?, what)?;
        let flags = r.u8()?;
        if flags & 0x0f != 0 {
            return Err(Error::Malformed {
                what,
                detail: format!("reserved flag bits {flags:#04x}"),
            });
        }
        let round = r.u16()?;
        let _reserved = r.u16()?;
        let rep = TfmccReport {
            rid: r.u32()?,
            round,
            have_rtt: flags & 0x80 != 0,
            have_loss: flags & 0x40 != 0,
            leave: flags & 0x20 != 0,
            is_clr: flags & 0x10 != 0,
            ts_us: r.u32()?,
            echo_ts_us: r.u32()?,
            x_rate: r.u32()?,
            x_recv: r.u32()?,
            rtt_us: r.u32()?,
            p_fixed: r.u32()?,
            auth: AuthBlock::read(&mut r)?,
        };
        no_trailing(&r, what)?;
        Ok(rep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TfmccDataFields {
        TfmccDataFields {
            seq: 1,
            ts_us: 2,
            round: 3,
            slow_start: true,
            supp_from_loss: false,
            max_rtt_us: 500_000,
            x_supp: RATE_INFINITE,
            x_send: 2000,
            echo: Some(Echo {
                rid: 9,
                ts_us: 77,
                is_clr: true,
            }),
        }
    }

    #[test]
    fn data_fields_round_trip_through_extension_block() {
        let f = sample();
        let block = f.to_extension_block();
        assert_eq!(block.len(), 4 + 36);
        assert_eq!(&block[..2], &[0x10, 0x00]);
        assert_eq!(block[4], TFMCC_EXT_ID);
        assert_eq!(block[5], 32);
        assert_eq!(
            TfmccDataFields::from_extension_block(&block).unwrap(),
            Some(f)
        );
        let no_echo = TfmccDataFields { echo: None, ..f };
        assert_eq!(
            TfmccDataFields::parse(&no_echo.to_bytes()).unwrap(),
            no_echo
        );
    }

    #[test]
    fn one_byte_form_is_searched_too() {
        // ID 1, len 2 (encoded 1), then ID 3 len 1.
        let block = [
            0xBE, 0xDE, 0x00, 0x02, 0x11, 0xaa, 0xbb, 0x30, 0xcc, 0, 0, 0,
        ];
        assert_eq!(
            find_extension_element(&block, 1).unwrap(),
            Some(&[0xaa, 0xbb][..])
        );
        assert_eq!(
            find_extension_element(&block, 3).unwrap(),
            Some(&[0xcc][..])
        );
        assert_eq!(find_extension_element(&block, 2).unwrap(), None);
        assert!(find_extension_element(&[0xBE, 0xDE, 0, 5], 1).is_err());
        assert!(find_extension_element(&[0x12, 0x34, 0, 0], 1).is_err());
    }

    #[test]
    fn report_round_trip_and_errors() {
        let rep = TfmccReport {
            rid: 0x0a00_0001,
            round: 65535,
            have_rtt: true,
            have_loss: false,
            leave: true,
            is_clr: false,
            ts_us: 1,
            echo_ts_us: 2,
            x_rate: 3,
            x_recv: 4,
            rtt_us: 5,
            p_fixed: 6,
            auth: AuthBlock::default(),
        };
        let b = rep.to_bytes();
        assert_eq!(b.len(), TfmccReport::MIN_LEN);
        assert_eq!(TfmccReport::parse(&b).unwrap(), rep);
        for n in 0..b.len() {
            assert!(TfmccReport::parse(&b[..n]).is_err());
        }
        let mut bad = b.clone();
        bad[3] |= 0x01;
        assert!(TfmccReport::parse(&bad).is_err());
    }
}
