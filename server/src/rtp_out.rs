//! Builds data packets: an RTP header (via `codec::rtp`) carrying the congestion-control
//! extension element (`congestion::wire::cc_ext`, id 1), then payload up to the session's
//! packet size. Synthetic layers carry zero bytes as payload: the whole packet is padding
//! that keeps the layer at its announced constant rate.

use codec::rtp::RtpHeader;
#[cfg(test)]
use codec::rtp::RtpPacket;
use codec::vp9rtp::LayerPacket;
use congestion::wire::cc_ext::{self, CcFields};

/// Appends one packet of exactly `size` bytes (if `size` leaves room for the headers) to `out`.
pub fn write_packet(
    out: &mut Vec<u8>,
    payload_type: u8,
    seq: u16,
    timestamp: u32,
    ssrc: u32,
    cc: &CcFields,
    size: usize,
) {
    let hdr = RtpHeader {
        marker: false,
        payload_type,
        sequence_number: seq,
        timestamp,
        ssrc,
        csrcs: Vec::new(),
        extensions: vec![(cc_ext::DEFAULT_ID, cc.to_bytes().to_vec())],
        padding: 0,
    };
    let payload_len = size.saturating_sub(hdr.header_len());
    const ZEROS: [u8; 1500] = [0; 1500];
    // Cannot fail: PT ≤ 127, no CSRCs, one 11-byte element with id 1.
    let _ = hdr.write(&ZEROS[..payload_len.min(ZEROS.len())], out);
}

/// Appends a media packet from the packetizer with sequence number `seq`, the cc extension,
/// and RTP padding towards `size` (at most 255 bytes: the padding count is one byte).
pub fn write_media(out: &mut Vec<u8>, p: LayerPacket, seq: u16, cc: &CcFields, size: usize) {
    let mut hdr = p.header;
    hdr.sequence_number = seq;
    hdr.extensions
        .push((cc_ext::DEFAULT_ID, cc.to_bytes().to_vec()));
    let len = hdr.header_len() + p.payload.len();
    hdr.padding = size.saturating_sub(len).min(255) as u8;
    if hdr.write(&p.payload, out).is_err() {
        out.clear();
    }
}

/// Appends a padding-only packet (no payload, RTP padding up to 255 bytes towards `size`) on
/// a video layer: it keeps the layer's rate when the encoder produced less than its budget.
/// Receivers skip payload-less packets; they still count for loss and bunch timing.
pub fn write_padding(
    out: &mut Vec<u8>,
    payload_type: u8,
    seq: u16,
    timestamp: u32,
    ssrc: u32,
    cc: &CcFields,
    size: usize,
) {
    let mut hdr = RtpHeader {
        marker: false,
        payload_type,
        sequence_number: seq,
        timestamp,
        ssrc,
        csrcs: Vec::new(),
        extensions: vec![(cc_ext::DEFAULT_ID, cc.to_bytes().to_vec())],
        padding: 0,
    };
    hdr.padding = size.saturating_sub(hdr.header_len()).clamp(1, 255) as u8;
    let _ = hdr.write(&[], out);
}

/// Parses the cc fields back out of a packet (tests).
#[cfg(test)]
pub fn parse_cc(buf: &[u8]) -> Option<CcFields> {
    let p = RtpPacket::parse(buf).ok()?;
    CcFields::parse(p.extension(cc_ext::DEFAULT_ID)?).ok()
}
