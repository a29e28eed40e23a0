//! Column parity for a stream without spare slots (the audio track): the packets of a block of
//! `stride x depth` are read as `depth` rows of `stride`; each column gets one repair, sent
//! when the block is complete. Any burst of up to `stride` consecutive losses in a block loses
//! at most one packet per column, so every one of them comes back; the cost is `1 / depth` of
//! the stream's packets. The repairs form a stream of their own (their own SSRC and sequence
//! numbers, RFC 8627's separate-stream arrangement) so that stock receivers of the media never
//! see them; the receiver hands their payload to [`super::FecDecoder::push_separate_repair`].

use super::{invalid, Parity, Protected, RepairHeader, MAX_SPAN};
use crate::error::Result;
use crate::rtp::{MediaPacket, RtpHeader};

/// Column parity encoder of one media stream.
#[derive(Debug, Clone)]
pub struct ColumnEncoder {
    stride: usize,
    depth: usize,
    payload_type: u8,
    ssrc: u32,
    seq: u16,
    block: Vec<(u16, Protected)>,
}

impl ColumnEncoder {
    /// Repairs of payload type `payload_type` on SSRC `ssrc`, over blocks of `stride` columns
    /// and `depth` rows (`stride * (depth - 1) + 1` at most [`MAX_SPAN`]).
    pub fn new(stride: u8, depth: u8, payload_type: u8, ssrc: u32) -> Result<ColumnEncoder> {
        let span = stride as usize * (depth as usize).saturating_sub(1) + 1;
        if stride == 0 || depth < 2 || span > MAX_SPAN as usize || payload_type > 127 {
            return Err(invalid(format!(
                "column FEC stride {stride} depth {depth} payload type {payload_type}"
            )));
        }
        Ok(ColumnEncoder {
            stride: stride as usize,
            depth: depth as usize,
            payload_type,
            ssrc,
            seq: 0,
            block: Vec::new(),
        })
    }

    /// The announced parameters, as [`super::FecParams`] reads them: packets per repair
    /// (`row` = depth) and the distance from a repair's first to its last packet plus one.
    pub fn announced_params(&self) -> Vec<u8> {
        vec![self.depth as u8, (self.stride * (self.depth - 1) + 1) as u8]
    }

    /// One media packet as sent (its sequence number, header and payload); returns the
    /// repairs due now (the block's columns when it is complete). A packet whose sequence
    /// number does not follow the previous one starts a new block (the sender restarted).
    pub fn push_media(&mut self, seq: u16, header: &RtpHeader, payload: &[u8]) -> Vec<MediaPacket> {
        if let Some((last, _)) = self.block.last() {
            if seq != last.wrapping_add(1) {
                self.block.clear();
            }
        }
        self.block.push((
            seq,
            Protected {
                marker: header.marker,
                payload_type: header.payload_type,
                timestamp: header.timestamp,
                payload: payload.to_vec(),
            },
        ));
        if self.block.len() < self.stride * self.depth {
            return Vec::new();
        }
        let block = std::mem::take(&mut self.block);
        let ts = block.last().map_or(0, |b| b.1.timestamp);
        (0..self.stride)
            .map(|c| {
                let mut par = Parity::default();
                let mut mask = 0u128;
                let base = block[c].0;
                for (s, p) in block.iter().skip(c).step_by(self.stride) {
                    mask |= 1u128 << s.wrapping_sub(base);
                    par.add(p);
                }
                let h = RepairHeader {
                    padding: false,
                    extension: false,
                    csrc_count: 0,
                    marker: par.marker,
                    payload_type: par.payload_type,
                    length: par.length,
                    timestamp: par.timestamp,
                    sn_base: base,
                    mask,
                };
                let mut payload = Vec::with_capacity(h.len() + par.payload.len());
                h.write(&mut payload);
                payload.extend_from_slice(&par.payload);
                self.seq = self.seq.wrapping_add(1);
                MediaPacket {
                    header: RtpHeader {
                        payload_type: self.payload_type,
                        sequence_number: self.seq,
                        timestamp: ts,
                        ssrc: self.ssrc,
                        ..Default::default()
                    },
                    payload,
                }
            })
            .collect()
    }
}
