//! Binary Session Announcement Message (SAM, `era.md` §1.1.5): the encoding of
//! [`SessionInfo`] that the sender multicasts on the announcement group and serves over HTTP.
//!
//! # Layout (version 2, big-endian)
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `"LCSA"` |
//! | 4 | 1 | version = 2 |
//! | 5 | 1 | flags: bit 0 = signature trailer present; bit 1 = feedback port present; bit 2 = the sender retransmits lost packets on request; other bits must be 0 |
//! | 6 | 2 | N = number of transport layers, 1..=256 |
//! | 8 | 4 | session id |
//! | 12 | 4 | announce seq |
//! | 16 | 4 | sender IPv4 address |
//! | 20 | 2 | packet size M, bytes (≥ 1) |
//! | 22 | 1 | bunch length (≥ 1) |
//! | 23 | 1 | reserved, 0 |
//! | 24 | 4 | adaptation interval, µs (≥ 1) |
//! | 28 | 4 | announce interval, µs (≥ 1) |
//! | 32 | 14·N | per layer: rate bit/s u64, group IPv4 (4), port u16 |
//! | 32+14N | 1 | T = number of tracks, 0..=16 |
//! | … | | T track records (below) |
//! | | 2 | feedback port (only if flag bit 1) |
//! | | 2 | signature trailer length S (only if flag bit 0) |
//! | | S | signature trailer (opaque here; `security::auth` fills and checks it) |
//!
//! A track record: `length u16` (of what follows in the record), `id u8`, `kind u8` (1 video,
//! 2 audio), `codec u8` (1 VP9, 2 Opus), `codec parameters` (VP9: payload type u8, width u16,
//! height u16, fps numerator u32, fps denominator u32, spatial u8, temporal u8; Opus: payload
//! type u8, channels u8, frame ms u8, flags u8 with bit 0 = in-band FEC), `stream count u8`
//! (1..=64), then per stream: transport layer u8, spatial u8, temporal u8, group IPv4 (4),
//! port u16, SSRC u32, rate bit/s u64, repair payload type u8 (0 = no repair), and if it is not
//! 0 a repair parameter length u8 and that many bytes.
//!
//! The feedback port (where receivers send reports and media requests, on the sender's address)
//! is layer 0's port + 1 unless the message carries one: a sender sets flag bit 1 only when
//! its feedback port differs from that default, so every session on the default stays
//! readable by receivers that predate the field (they refuse the bit with a clear error), and
//! the field has one encoding (a present port equal to the default, or 0, is an error).
//!
//! Version 1 (before tracks: a free-form codec string where the track list is) is refused with
//! a clear error rather than misread. The signed bytes are everything before the trailer's
//! length field, flags byte included (so the "signed" bit is covered by the signature).
//! Nothing may follow the message, and every field has one encoding (unknown kinds and codecs
//! are errors, not skipped), so a decoded message re-encodes to the same bytes.
//!
//! Decoding never panics: every length is checked before use and every failure is an
//! [`Error`].

use crate::error::{Error, Result};
use crate::media::{Codec, OpusParams, Repair, Stream, Track, TrackKind, Vp9Params};
use crate::session::{LayerInfo, SessionInfo};
use std::net::Ipv4Addr;
use std::ops::Range;
use std::time::Duration;

/// Magic at offset 0.
pub const MAGIC: [u8; 4] = *b"LCSA";
/// The version this code writes and reads.
pub const VERSION: u8 = 2;
/// Most tracks a SAM may carry.
pub const MAX_TRACKS: usize = 16;
/// Most streams a track may have.
pub const MAX_STREAMS: usize = 64;
/// Flags bit: a signature trailer follows the track list.
pub const FLAG_SIGNED: u8 = 0x01;
/// Flags bit: a feedback port follows the track list.
pub const FLAG_FEEDBACK_PORT: u8 = 0x02;
/// Flags bit: the sender answers retransmission requests (`wire::request`,
/// docs/protocols/retransmission.md); receivers send none to a sender without it.
pub const FLAG_RETRANSMISSION: u8 = 0x04;
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
    if info.feedback_port == Some(0) {
        return Err(invalid("feedback port", "must not be 0"));
    }
    if info.tracks.len() > MAX_TRACKS {
        return Err(invalid(
            "track count",
            format!("{} is above {MAX_TRACKS}", info.tracks.len()),
        ));
    }
    for t in &info.tracks {
        if t.streams.is_empty() || t.streams.len() > MAX_STREAMS {
            return Err(invalid(
                "stream count",
                format!(
                    "track {} has {}; need 1..={MAX_STREAMS}",
                    t.id,
                    t.streams.len()
                ),
            ));
        }
        for st in &t.streams {
            if st.layer as usize >= info.layers.len() {
                return Err(invalid(
                    "stream layer",
                    format!(
                        "track {} names layer {} of {}",
                        t.id,
                        st.layer,
                        info.layers.len()
                    ),
                ));
            }
            if let Some(r) = &st.repair {
                if r.payload_type == 0 || r.payload_type > 127 || r.params.len() > 255 {
                    return Err(invalid(
                        "repair",
                        "payload type must be 1..=127 and parameters at most 255 bytes",
                    ));
                }
            }
        }
    }
    Ok(())
}

fn encode_track(t: &Track, out: &mut Vec<u8>) {
    let at = out.len();
    out.extend_from_slice(&[0, 0]);
    out.push(t.id);
    out.push(match t.kind {
        TrackKind::Video => 1,
        TrackKind::Audio => 2,
    });
    match &t.codec {
        Codec::Vp9(p) => {
            out.push(1);
            out.push(p.payload_type);
            out.extend_from_slice(&p.width.to_be_bytes());
            out.extend_from_slice(&p.height.to_be_bytes());
            out.extend_from_slice(&p.fps_num.to_be_bytes());
            out.extend_from_slice(&p.fps_den.to_be_bytes());
            out.push(p.spatial);
            out.push(p.temporal);
        }
        Codec::Opus(p) => {
            out.push(2);
            out.extend_from_slice(&[p.payload_type, p.channels, p.frame_ms, p.inband_fec as u8]);
        }
    }
    out.push(t.streams.len() as u8);
    for st in &t.streams {
        out.extend_from_slice(&[st.layer, st.spatial, st.temporal]);
        out.extend_from_slice(&st.group.octets());
        out.extend_from_slice(&st.port.to_be_bytes());
        out.extend_from_slice(&st.ssrc.to_be_bytes());
        out.extend_from_slice(&st.rate_bps.to_be_bytes());
        match &st.repair {
            None => out.push(0),
            Some(r) => {
                out.push(r.payload_type);
                out.push(r.params.len() as u8);
                out.extend_from_slice(&r.params);
            }
        }
    }
    let len = (out.len() - at - 2) as u16;
    out[at..at + 2].copy_from_slice(&len.to_be_bytes());
}

/// The feedback port to put on the wire: the announced one unless it is the default.
fn explicit_feedback_port(info: &SessionInfo) -> Option<u16> {
    let default = info.layers.first()?.port.checked_add(1);
    info.feedback_port.filter(|&p| Some(p) != default)
}

fn encode_body(info: &SessionInfo, flags: u8, out: &mut Vec<u8>) -> Result<()> {
    validate(info)?;
    let feedback = explicit_feedback_port(info);
    let flags = flags
        | if feedback.is_some() {
            FLAG_FEEDBACK_PORT
        } else {
            0
        }
        | if info.retransmission {
            FLAG_RETRANSMISSION
        } else {
            0
        };
    out.reserve(HEADER_LEN + LAYER_ENTRY_LEN * info.layers.len() + 1 + 64 * info.tracks.len());
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
    out.push(info.tracks.len() as u8);
    for t in &info.tracks {
        encode_track(t, out);
    }
    if let Some(p) = feedback {
        out.extend_from_slice(&p.to_be_bytes());
    }
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
        let hint = if version < VERSION {
            " (an older sender without tracks: upgrade the server)"
        } else {
            " (a newer sender: upgrade this receiver)"
        };
        return Err(Error::Malformed {
            what: "SAM version",
            detail: format!("{version}, this code reads {VERSION}{hint}"),
        });
    }
    let flags = r.u8("SAM header")?;
    if flags & !(FLAG_SIGNED | FLAG_FEEDBACK_PORT | FLAG_RETRANSMISSION) != 0 {
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
    let nt = r.u8("SAM track count")? as usize;
    if nt > MAX_TRACKS {
        return Err(invalid(
            "track count",
            format!("{nt} is above {MAX_TRACKS}"),
        ));
    }
    let mut tracks = Vec::with_capacity(nt);
    for _ in 0..nt {
        let len = r.u16("SAM track")? as usize;
        let body = r.take(len, "SAM track")?;
        tracks.push(decode_track(body, n)?);
    }
    let feedback_port = if flags & FLAG_FEEDBACK_PORT != 0 {
        let p = r.u16("SAM feedback port")?;
        if p == 0 || Some(p) == layers[0].port.checked_add(1) {
            return Err(invalid(
                "feedback port",
                format!("{p}: 0, or layer 0's port + 1 sent explicitly"),
            ));
        }
        Some(p)
    } else {
        None
    };
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
            tracks,
            feedback_port,
            retransmission: flags & FLAG_RETRANSMISSION != 0,
        },
        signature,
    })
}

fn decode_track(body: &[u8], layers: usize) -> Result<Track> {
    let mut r = Reader { buf: body, pos: 0 };
    let id = r.u8("SAM track")?;
    let kind = match r.u8("SAM track")? {
        1 => TrackKind::Video,
        2 => TrackKind::Audio,
        k => {
            return Err(Error::Malformed {
                what: "SAM track kind",
                detail: format!("{k}"),
            })
        }
    };
    let codec = match r.u8("SAM track codec")? {
        1 => Codec::Vp9(Vp9Params {
            payload_type: r.u8("SAM VP9 parameters")?,
            width: r.u16("SAM VP9 parameters")?,
            height: r.u16("SAM VP9 parameters")?,
            fps_num: r.u32("SAM VP9 parameters")?,
            fps_den: r.u32("SAM VP9 parameters")?,
            spatial: r.u8("SAM VP9 parameters")?,
            temporal: r.u8("SAM VP9 parameters")?,
        }),
        2 => {
            let pt = r.u8("SAM Opus parameters")?;
            let channels = r.u8("SAM Opus parameters")?;
            let frame_ms = r.u8("SAM Opus parameters")?;
            let flags = r.u8("SAM Opus parameters")?;
            if flags & !1 != 0 {
                return Err(Error::Malformed {
                    what: "SAM Opus flags",
                    detail: format!("unknown bits in {flags:#04x}"),
                });
            }
            Codec::Opus(OpusParams {
                payload_type: pt,
                channels,
                frame_ms,
                inband_fec: flags & 1 != 0,
            })
        }
        c => {
            return Err(Error::Malformed {
                what: "SAM track codec",
                detail: format!("{c}"),
            })
        }
    };
    let ns = r.u8("SAM stream count")? as usize;
    if ns == 0 || ns > MAX_STREAMS {
        return Err(invalid(
            "stream count",
            format!("{ns} is outside 1..={MAX_STREAMS}"),
        ));
    }
    let mut streams = Vec::with_capacity(ns);
    for _ in 0..ns {
        let layer = r.u8("SAM stream")?;
        if layer as usize >= layers {
            return Err(invalid(
                "stream layer",
                format!("{layer} of {layers} layers"),
            ));
        }
        let spatial = r.u8("SAM stream")?;
        let temporal = r.u8("SAM stream")?;
        let group = r.ip("SAM stream")?;
        let port = r.u16("SAM stream")?;
        let ssrc = r.u32("SAM stream")?;
        let rate_bps = r.u64("SAM stream")?;
        let repair = match r.u8("SAM stream repair")? {
            0 => None,
            pt if pt > 127 => return Err(invalid("repair", format!("payload type {pt}"))),
            pt => {
                let n = r.u8("SAM stream repair")? as usize;
                Some(Repair {
                    payload_type: pt,
                    params: r.take(n, "SAM stream repair")?.to_vec(),
                })
            }
        };
        streams.push(Stream {
            layer,
            spatial,
            temporal,
            group,
            port,
            ssrc,
            rate_bps,
            repair,
        });
    }
    if r.pos != body.len() {
        return Err(Error::Malformed {
            what: "SAM track length",
            detail: format!("{} trailing bytes", body.len() - r.pos),
        });
    }
    Ok(Track {
        id,
        kind,
        codec,
        streams,
    })
}

#[cfg(test)]
mod tests;
