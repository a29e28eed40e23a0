//! Forward error correction per cumulative layer: XOR parity over the layer's own media
//! packets, sent in the pacer slots that would otherwise carry padding.
//!
//! Sans-IO: [`FecEncoder`] is fed the layer's media packets as they are sent (with their final
//! sequence numbers) and asked for a repair packet whenever a slot has no media;
//! [`FecDecoder`] is fed every received packet of the layer and hands out recovered media
//! packets before picture assembly. Neither reads a clock or touches a socket.
//!
//! Wire format (docs/protocols/fec.md): a repair packet is an RTP packet of the layer's own
//! stream (its SSRC, its sequence space, the caller's header extensions, the layer's packet
//! size) with payload type [`REPAIR_PAYLOAD_TYPE`]; its payload is the RFC 8627 FlexFEC header
//! with a flexible mask (R = 0, F = 0, one SN base and mask, [`header`]) followed by the XOR
//! of the protected packets. What is protected is each media packet *as the packetizer built
//! it*: fixed RTP header fields and payload, without the header extension and the padding the
//! sender adds per transmission (they carry nothing the picture needs, and leaving them out
//! keeps a repair packet no longer than the longest media packet).
//!
//! The code is systematic: media packets go out unchanged, so a receiver that ignores the
//! repair payload type (every stock RTP receiver with the layer's SDP) sees a plain VP9 stream
//! with a gap in the sequence numbers where a repair went.

mod decoder;
mod encoder;
pub mod header;
mod lagged;

pub use decoder::{FecDecoder, FecDecoderStats, Received};
pub use encoder::{FecEncoder, FecEncoderStats};
pub use header::RepairHeader;
pub use lagged::LaggedRepair;

use crate::error::{Error, Result};

/// A parameter outside its range, or an attribute that does not parse.
fn invalid(reason: String) -> Error {
    Error::Invalid {
        field: "FEC parameters",
        reason,
    }
}

/// RTP payload type of repair packets (the media uses 96).
pub const REPAIR_PAYLOAD_TYPE: u8 = 97;

/// Largest mask, in sequence numbers, one repair packet of this crate spans: the RFC 8627
/// 46-bit mask, so the FEC header is at most [`MAX_HEADER_LEN`] bytes.
pub const MAX_SPAN: u8 = 46;

/// Largest FEC header this crate writes: 8 bytes of recovery fields, SN base, a 46-bit mask.
/// A layer's media packets must leave this much room (the packetizer's `ext_reserve`) so that
/// a repair packet is no longer than the layer's packet size.
pub const MAX_HEADER_LEN: usize = 16;

/// How long after a media packet a repair may still cover it (bounds the span): the burst
/// pacer sends a frame ahead of its layer's schedule by up to its credit, and the slots
/// without media come after that.
pub const REPAIR_WINDOW_S: f64 = 1.0;

/// Per-layer FEC parameters, announced in the session description
/// (`a=x-layercast-fec:97 row=4;span=46` on the layer's media section, see
/// [`FecParams::sdp_attribute`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FecParams {
    /// Payload type of the repair packets.
    pub payload_type: u8,
    /// Media packets covered by one first-pass repair (the row).
    pub row: u8,
    /// Largest distance in sequence numbers from the first to the last packet one repair
    /// covers, plus one (2..=[`MAX_SPAN`]).
    pub span: u8,
}

impl Default for FecParams {
    fn default() -> Self {
        FecParams {
            payload_type: REPAIR_PAYLOAD_TYPE,
            row: 4,
            span: MAX_SPAN,
        }
    }
}

impl FecParams {
    /// Parameters for a layer sending `packets_per_s` packets (media, repair and padding),
    /// of which the share `media_share` (0..1) is expected to be media:
    ///
    /// * `row` = media / spare slots, rounded up (2..=16): then every media packet is in one
    ///   first-pass repair when the encoder meets its budget, and extra spare slots carry
    ///   second-pass repairs (interleaved masks, [`FecEncoder`]);
    /// * `span` = the packets sent in [`REPAIR_WINDOW_S`] (at least two rows, at most
    ///   [`MAX_SPAN`]): a repair never covers a packet older than that, so a recovered
    ///   packet is at most that late.
    pub fn for_layer(packets_per_s: f64, media_share: f64) -> FecParams {
        let m = media_share.clamp(0.05, 0.95);
        let row = (m / (1.0 - m) - 1e-9).ceil().clamp(2.0, 16.0) as u8;
        let span = (packets_per_s.max(0.0) * REPAIR_WINDOW_S)
            .ceil()
            .clamp(2.0 * row as f64, MAX_SPAN as f64) as u8;
        FecParams {
            payload_type: REPAIR_PAYLOAD_TYPE,
            row,
            span,
        }
    }

    /// Checks the ranges (`payload_type` 96..=127, `row` >= 1, `span` 2..=46, row <= span).
    pub fn validate(&self) -> Result<()> {
        if !(96..=127).contains(&self.payload_type) {
            return Err(invalid(format!(
                "FEC payload type {} outside 96..=127",
                self.payload_type
            )));
        }
        if self.row == 0 || !(2..=MAX_SPAN).contains(&self.span) || self.row > self.span {
            return Err(invalid(format!(
                "FEC row {} / span {}: need 1 <= row <= span <= {MAX_SPAN}",
                self.row, self.span
            )));
        }
        Ok(())
    }

    /// The parameter bytes announced in the session description's stream entry
    /// (`proto::Repair::params`): `[row, span]`, the payload type travelling beside them.
    pub fn announced_params(&self) -> Vec<u8> {
        vec![self.row, self.span]
    }

    /// Parameters from a session description's stream entry (payload type and
    /// [`FecParams::announced_params`] bytes; extra bytes are for later versions and ignored).
    pub fn from_announced(payload_type: u8, params: &[u8]) -> Result<FecParams> {
        let [row, span, ..] = params else {
            return Err(invalid(format!(
                "FEC parameters need 2 bytes, got {}",
                params.len()
            )));
        };
        let p = FecParams {
            payload_type,
            row: *row,
            span: *span,
        };
        p.validate()?;
        Ok(p)
    }

    /// The SDP attribute value (`97 row=4;span=46`), for `a=x-layercast-fec:` on the layer's
    /// media section. Stock receivers ignore an attribute they do not know.
    pub fn sdp_attribute(&self) -> String {
        format!("{} row={};span={}", self.payload_type, self.row, self.span)
    }

    /// Parses [`FecParams::sdp_attribute`]'s output (unknown keys are ignored, missing ones
    /// take the defaults).
    pub fn parse_sdp_attribute(v: &str) -> Result<FecParams> {
        let bad = || invalid(format!("malformed x-layercast-fec attribute {v:?}"));
        let mut it = v.trim().splitn(2, ' ');
        let pt: u8 = it.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let mut p = FecParams {
            payload_type: pt,
            ..FecParams::default()
        };
        for kv in it.next().unwrap_or("").split(';').filter(|s| !s.is_empty()) {
            let (k, val) = kv.split_once('=').ok_or_else(bad)?;
            let n: u8 = val.trim().parse().map_err(|_| bad())?;
            match k.trim() {
                "row" => p.row = n,
                "span" => p.span = n,
                _ => {}
            }
        }
        p.validate()?;
        Ok(p)
    }
}

/// One media packet as protected: the fixed RTP header fields a receiver needs and the
/// payload (no header extension, no padding). Its sequence number is implied by the mask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Protected {
    pub marker: bool,
    pub payload_type: u8,
    pub timestamp: u32,
    pub payload: Vec<u8>,
}

impl Protected {
    /// The protected form of a media packet sent with `header` and `payload`.
    pub fn of(header: &crate::rtp::RtpHeader, payload: &[u8]) -> Protected {
        Protected {
            marker: header.marker,
            payload_type: header.payload_type,
            timestamp: header.timestamp,
            payload: payload.to_vec(),
        }
    }
}

/// XOR of protected packets, in the layout of the RFC 8627 recovery fields.
#[derive(Debug, Clone, Default)]
pub(crate) struct Parity {
    pub marker: bool,
    pub payload_type: u8,
    pub length: u16,
    pub timestamp: u32,
    pub payload: Vec<u8>,
}

impl Parity {
    /// The repair payload: the RFC 8627 header for the packets of `mask` from `sn_base`,
    /// then the XOR of their payloads.
    pub fn repair_payload(&self, sn_base: u16, mask: u128) -> Vec<u8> {
        let h = RepairHeader {
            padding: false,
            extension: false,
            csrc_count: 0,
            marker: self.marker,
            payload_type: self.payload_type,
            length: self.length,
            timestamp: self.timestamp,
            sn_base,
            mask,
        };
        let mut out = Vec::with_capacity(h.len() + self.payload.len());
        h.write(&mut out);
        out.extend_from_slice(&self.payload);
        out
    }

    pub fn add(&mut self, p: &Protected) {
        self.marker ^= p.marker;
        self.payload_type ^= p.payload_type;
        self.length ^= p.payload.len() as u16;
        self.timestamp ^= p.timestamp;
        if self.payload.len() < p.payload.len() {
            self.payload.resize(p.payload.len(), 0);
        }
        for (a, b) in self.payload.iter_mut().zip(&p.payload) {
            *a ^= b;
        }
    }
}

/// Fuzz entry point of the `repair_packet` target (`codec/fuzz`) and of the corpus replay in
/// `cargo test` (`codec/tests/fuzz_corpus.rs`): arbitrary bytes as a repair header (what
/// parses re-serialises to the same header), then as a stream of RTP packets of one layer into
/// a decoder (each packet a big-endian u16 length and that many bytes). Panics only when an
/// invariant breaks.
pub fn fuzz_repair_packet(data: &[u8]) {
    if let Ok((h, n)) = RepairHeader::parse(data) {
        assert!(n <= data.len());
        let mut v = Vec::new();
        h.write(&mut v);
        let (h2, m) = RepairHeader::parse(&v).expect("own header parses");
        assert_eq!((h2, m), (h, v.len()));
    }
    let mut dec = FecDecoder::new(FecParams::default());
    let mut rest = data;
    while rest.len() >= 2 {
        let n = (u16::from_be_bytes([rest[0], rest[1]]) as usize).min(rest.len() - 2);
        let (pkt, tail) = rest[2..].split_at(n);
        rest = tail;
        if let Ok(p) = crate::rtp::RtpPacket::parse(pkt) {
            let _ = dec.push(&p);
            while let Some(r) = dec.poll_recovered() {
                let rp = crate::rtp::RtpPacket::parse(&r).expect("recovered packet parses");
                assert_ne!(rp.payload_type(), dec.params.payload_type);
            }
        }
    }
}

/// The fuzz input [`fuzz_repair_packet`] reads as a packet stream: each packet prefixed with
/// its length (seed corpus, tests).
pub fn fuzz_stream(packets: &[Vec<u8>]) -> Vec<u8> {
    let mut v = Vec::new();
    for p in packets {
        v.extend_from_slice(&(p.len().min(u16::MAX as usize) as u16).to_be_bytes());
        v.extend_from_slice(&p[..p.len().min(u16::MAX as usize)]);
    }
    v
}

#[cfg(test)]
mod tests;
