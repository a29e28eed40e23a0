//! Binary Session Announcement Message (SAM, `era.md` §1.1.5): the encoding of
//! [`SessionInfo`] that the sender multicasts on the announcement group and serves over HTTP.
//!
//! # Layout (version 2, big-endian)
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `"LCSA"` |
//! | 4 | 1 | version = 2 |
//! | 5 | 1 | flags: bit 0 = signature trailer present; bit 1 = feedback port present; other bits must be 0 |
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
    if flags & !(FLAG_SIGNED | FLAG_FEEDBACK_PORT) != 0 {
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
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> SessionInfo {
        let mut s = SessionInfo::equal_layers(3, 20_000, Ipv4Addr::new(239, 1, 2, 3), 5000);
        s.session_id = 0xA1B2C3D4;
        s.announce_seq = 7;
        s.sender = Ipv4Addr::new(10, 0, 0, 1);
        s.tracks = vec![Track {
            id: 0,
            kind: TrackKind::Video,
            codec: Codec::Vp9(Vp9Params {
                payload_type: 96,
                width: 1280,
                height: 720,
                fps_num: 30,
                fps_den: 1,
                spatial: 1,
                temporal: 3,
            }),
            streams: (0..3u8)
                .map(|k| Stream {
                    layer: k,
                    spatial: 0,
                    temporal: k,
                    group: Ipv4Addr::new(239, 1, 2, 3 + k),
                    port: 5000 + k as u16,
                    ssrc: 0x1000 + k as u32,
                    rate_bps: 20_000,
                    repair: (k == 0).then(|| Repair {
                        payload_type: 97,
                        params: vec![4, 1],
                    }),
                })
                .collect(),
        }];
        s
    }

    #[test]
    fn layout_offsets() {
        let b = to_bytes(&sample()).unwrap();
        assert_eq!(&b[0..4], b"LCSA");
        assert_eq!(b[4], 2);
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
        assert_eq!(b[74], 1, "one track");
        // Track record: length, id, kind video, codec VP9, 15 bytes of parameters, 3 streams.
        let len = u16::from_be_bytes([b[75], b[76]]) as usize;
        assert_eq!(len, b.len() - 77);
        assert_eq!(&b[77..80], &[0, 1, 1]);
        assert_eq!(b[80], 96);
        assert_eq!(&b[81..85], &[0x05, 0x00, 0x02, 0xD0]);
        assert_eq!(b[95], 3);
        // First stream: layer 0, S0T0, group, port, SSRC, rate, repair PT 97 with 2 bytes.
        assert_eq!(&b[96..99], &[0, 0, 0]);
        assert_eq!(&b[99..103], &[239, 1, 2, 3]);
        assert_eq!(&b[105..109], &0x1000u32.to_be_bytes());
        assert_eq!(&b[117..121], &[97, 2, 4, 1]);
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
        bad[4] = 3;
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
        // Version 1 (a codec string where the tracks are) is refused, not misread.
        let mut bad = good.clone();
        bad[4] = 1;
        match decode(&bad) {
            Err(Error::Malformed { what, detail }) => {
                assert_eq!(what, "SAM version");
                assert!(detail.contains("older sender"), "{detail}");
            }
            other => panic!("{other:?}"),
        }
        // Unknown track kind and codec are errors.
        let mut bad = good.clone();
        bad[78] = 9;
        assert!(matches!(decode(&bad), Err(Error::Malformed { .. })));
        let mut bad = good.clone();
        bad[79] = 9;
        assert!(matches!(decode(&bad), Err(Error::Malformed { .. })));
        // A stream naming a layer the session does not have.
        let mut s = sample();
        s.tracks[0].streams[2].layer = 3;
        assert!(to_bytes(&s).is_err());
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

    #[test]
    fn feedback_port_only_when_not_the_default() {
        let mut s = sample();
        let plain = to_bytes(&s).unwrap();
        assert_eq!(plain[5], 0);
        assert_eq!(
            decode(&plain).unwrap().info.feedback_port_or_default(),
            Some(5001)
        );
        // The default port set explicitly encodes as its absence.
        s.feedback_port = Some(5001);
        assert_eq!(to_bytes(&s).unwrap(), plain);
        s.feedback_port = Some(41_000);
        let b = to_bytes(&s).unwrap();
        assert_eq!(b[5], FLAG_FEEDBACK_PORT);
        assert_eq!(b.len(), plain.len() + 2);
        assert_eq!(&b[b.len() - 2..], &41_000u16.to_be_bytes());
        let d = decode(&b).unwrap();
        assert_eq!(d.info, s);
        assert_eq!(d.info.feedback_port_or_default(), Some(41_000));
        // Signed: the port is under the signature.
        let mut v = Vec::new();
        encode_signed(&s, &mut v, |_| vec![7; 8]).unwrap();
        let d = decode(&v).unwrap();
        assert_eq!(d.info.feedback_port, Some(41_000));
        assert_eq!(d.signature.unwrap().signed_range, 0..b.len());
        // A second encoding of the default, port 0, or a missing port are refused.
        let mut bad = b.clone();
        let n = bad.len();
        bad[n - 2..].copy_from_slice(&5001u16.to_be_bytes());
        assert!(decode(&bad).is_err());
        bad[n - 2..].copy_from_slice(&[0, 0]);
        assert!(decode(&bad).is_err());
        assert!(decode(&b[..n - 1]).is_err());
        s.feedback_port = Some(0);
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
            proptest::collection::vec(arb_track(), 0..=3),
            proptest::option::of(1u16..),
        )
            .prop_map(|(sid, seq, snd, layers, m, b, ai, an, mut tracks, fb)| {
                let n = layers.len() as u8;
                // One encoding: the default port is announced by its absence.
                let fb = fb.filter(|&p| Some(p) != layers[0].2.checked_add(1));
                for st in tracks.iter_mut().flat_map(|t| t.streams.iter_mut()) {
                    st.layer %= n;
                }
                SessionInfo {
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
                    tracks,
                    feedback_port: fb,
                }
            })
    }

    fn arb_track() -> impl Strategy<Value = Track> {
        let stream = (
            any::<(u8, u8, u8, u32, u16, u32, u64)>(),
            proptest::option::of((1u8..=127, proptest::collection::vec(any::<u8>(), 0..8))),
        )
            .prop_map(
                |((layer, spatial, temporal, g, port, ssrc, rate_bps), rep)| Stream {
                    layer,
                    spatial,
                    temporal,
                    group: Ipv4Addr::from(g),
                    port,
                    ssrc,
                    rate_bps,
                    repair: rep.map(|(payload_type, params)| Repair {
                        payload_type,
                        params,
                    }),
                },
            );
        let codec = prop_oneof![
            any::<(u8, u16, u16, u32, u32, u8, u8)>().prop_map(|(pt, w, h, n, d, sp, te)| {
                Codec::Vp9(Vp9Params {
                    payload_type: pt,
                    width: w,
                    height: h,
                    fps_num: n,
                    fps_den: d,
                    spatial: sp,
                    temporal: te,
                })
            }),
            any::<(u8, u8, u8, bool)>().prop_map(|(pt, ch, ms, fec)| {
                Codec::Opus(OpusParams {
                    payload_type: pt,
                    channels: ch,
                    frame_ms: ms,
                    inband_fec: fec,
                })
            }),
        ];
        (
            any::<u8>(),
            any::<bool>(),
            codec,
            proptest::collection::vec(stream, 1..5),
        )
            .prop_map(|(id, video, codec, streams)| Track {
                id,
                kind: if video {
                    TrackKind::Video
                } else {
                    TrackKind::Audio
                },
                codec,
                streams,
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
