//! Data packets: an RTP header (`proto::rtp`) carrying the congestion-control extension
//! element (`proto::wire::cc_ext`, id 1), then payload up to the session's packet size.
//! Synthetic layers carry zero bytes as payload: the whole packet is padding that keeps the
//! layer at its announced constant rate.

use super::MediaPacket;
use proto::rtp::RtpHeader;
#[cfg(test)]
use proto::rtp::RtpPacket;
use proto::wire::cc_ext::{self, CcFields};

/// A payload-less header with the cc extension.
fn cc_header(payload_type: u8, seq: u16, timestamp: u32, ssrc: u32, cc: &CcFields) -> RtpHeader {
    RtpHeader {
        payload_type,
        sequence_number: seq,
        timestamp,
        ssrc,
        extensions: vec![(cc_ext::DEFAULT_ID, cc.to_bytes().to_vec())],
        ..RtpHeader::default()
    }
}

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
    let hdr = cc_header(payload_type, seq, timestamp, ssrc, cc);
    let payload_len = size.saturating_sub(hdr.header_len());
    const ZEROS: [u8; 1500] = [0; 1500];
    // Cannot fail: PT ≤ 127, no CSRCs, one 11-byte element with id 1.
    let _ = hdr.write(&ZEROS[..payload_len.min(ZEROS.len())], out);
}

/// Appends a media packet from the packetizer with sequence number `seq` and the cc
/// extension, padded to exactly `size` bytes when it is shorter (see [`pad_to`]).
pub fn write_media(out: &mut Vec<u8>, p: MediaPacket, seq: u16, cc: &CcFields, size: usize) {
    let start = out.len();
    let mut hdr = p.header;
    hdr.sequence_number = seq;
    // The cc element first, at a fixed offset (byte 16), ahead of the packetiser's elements
    // (the sent-frames mark).
    hdr.extensions
        .insert(0, (cc_ext::DEFAULT_ID, cc.to_bytes().to_vec()));
    hdr.padding = 0;
    if hdr.write(&p.payload, out).is_err() {
        out.truncate(start);
        return;
    }
    pad_to(out, start, size);
}

/// Appends a padding-only packet (no payload) of exactly `size` bytes on a video layer: it
/// keeps the layer at its announced rate when the encoder produced less than its budget.
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
    let start = out.len();
    let hdr = cc_header(payload_type, seq, timestamp, ssrc, cc);
    if hdr.write(&[], out).is_err() {
        out.truncate(start);
        return;
    }
    pad_to(out, start, size);
}

/// Grows the packet at `out[start..]` (written without RTP padding, with a header extension)
/// to exactly `size` bytes: whole 32-bit words of zero bytes appended to the header-extension
/// block (RFC 8285 allows zero padding bytes between and after elements, and every RTP
/// receiver skips the block by its length field), and the last 1-3 bytes as RTP padding (P
/// bit). Bunches are then of equal-size packets, which the receivers' pair estimates assume:
/// RTP padding alone cannot exceed 255 bytes. Packets already `size` or longer are left as
/// they are.
pub fn pad_to(out: &mut Vec<u8>, start: usize, size: usize) {
    let len = out.len() - start;
    if len >= size || len < 12 || out[start] & 0x10 == 0 {
        return;
    }
    let deficit = size - len;
    let (words, rest) = (deficit / 4, deficit % 4);
    let cc = (out[start] & 0x0f) as usize;
    let ext = start + 12 + 4 * cc;
    if ext + 4 > out.len() {
        return;
    }
    let old_words = u16::from_be_bytes([out[ext + 2], out[ext + 3]]) as usize;
    let add = words.min(65_535 - old_words);
    let end = ext + 4 + 4 * old_words;
    out.splice(end..end, std::iter::repeat_n(0u8, 4 * add));
    out[ext + 2..ext + 4].copy_from_slice(&((old_words + add) as u16).to_be_bytes());
    if rest > 0 {
        out[start] |= 0x20;
        out.extend(std::iter::repeat_n(0u8, rest - 1));
        out.push(rest as u8);
    }
}

/// Parses the cc fields back out of a packet (tests).
#[cfg(test)]
pub(crate) fn parse_cc(buf: &[u8]) -> Option<CcFields> {
    let p = RtpPacket::parse(buf).ok()?;
    CcFields::parse(p.extension(cc_ext::DEFAULT_ID)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cc() -> CcFields {
        CcFields {
            layer: 2,
            bunch_pos: 1,
            bunch_len: 2,
            send_time_us: 42,
        }
    }

    #[test]
    fn padding_packets_have_exact_size_and_parse() {
        for size in [29usize, 100, 283, 284, 512, 1199, 1200] {
            let mut out = vec![9u8; 3]; // something before: `start` is respected
            write_padding(&mut out, 96, 7, 1000, 55, &cc(), size);
            let p = &out[3..];
            assert_eq!(p.len(), size.max(28), "size {size}");
            let r = RtpPacket::parse(p).unwrap();
            assert!(r.payload().is_empty());
            assert_eq!(r.sequence_number(), 7);
            assert_eq!(parse_cc(p), Some(cc()));
        }
    }

    #[test]
    fn media_packets_padded_to_size_keep_their_payload() {
        let payload: Vec<u8> = (0..301u32).map(|i| (i % 251) as u8).collect();
        let lp = MediaPacket {
            header: RtpHeader {
                marker: true,
                payload_type: 96,
                sequence_number: 1,
                timestamp: 77,
                ssrc: 5,
                ..Default::default()
            },
            payload: payload.clone(),
        };
        for size in [300usize, 345, 346, 347, 348, 1200] {
            let mut out = Vec::new();
            write_media(&mut out, lp.clone(), 9, &cc(), size);
            let r = RtpPacket::parse(&out).unwrap();
            assert_eq!(r.payload(), &payload[..]);
            assert_eq!(r.sequence_number(), 9);
            assert!(r.marker());
            assert_eq!(out.len(), size.max(12 + 16 + 301), "size {size}");
            assert_eq!(parse_cc(&out), Some(cc()));
        }
    }
}
