//! The sending side: repair packets for the slots of a layer that have no media.

use super::{invalid, FecParams, Parity, Protected, MAX_HEADER_LEN};
use crate::error::Result;
use crate::rtp::{MediaPacket, RtpHeader};
use std::collections::VecDeque;

/// Counters of one layer's encoder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FecEncoderStats {
    /// Media packets fed.
    pub media: u64,
    /// Media packets that went into a first-pass repair.
    pub protected: u64,
    /// Media packets never in a first-pass repair: too long for the repair packet, or older
    /// than the span before a slot came free.
    pub unprotected: u64,
    /// Repairs sent: first pass (new packets), second pass (interleaved masks over the recent
    /// packets, when every packet already has its first-pass repair).
    pub first_pass: u64,
    pub second_pass: u64,
    /// Slots asked for with nothing new to protect (the caller sends padding).
    pub idle: u64,
}

/// Second-pass masks over the most recent block (two rows, or the last first-pass group if
/// larger), as (stride, offset): the even and odd packets, then thirds, quarters, then the
/// whole block. A burst of two consecutive losses in one row (both packets of a pair) is
/// repaired by the first two together with the row's first-pass repair.
const SECOND_PASS: [(usize, usize); 10] = [
    (2, 0),
    (2, 1),
    (3, 0),
    (3, 1),
    (3, 2),
    (4, 0),
    (4, 1),
    (4, 2),
    (4, 3),
    (1, 0),
];

/// FEC encoder of one layer (one RTP stream).
///
/// Feed it every media packet as it is sent, with the sequence number it goes out with
/// ([`FecEncoder::push_media`]); when a slot of the layer has no media, ask it for a repair
/// ([`FecEncoder::repair`]) and send that in the slot, like a media packet (same stream,
/// sequence number, header extensions and size rules). `None` means nothing is worth
/// protecting: send padding.
///
/// First pass: the media packets not yet protected, oldest first, `row` per repair, or all of
/// them at once when more than two rows wait. Second pass, when every packet has its
/// first-pass repair: [`SECOND_PASS`] masks over the most recent block, each at most once
/// until new media comes.
#[derive(Debug, Clone)]
pub struct FecEncoder {
    params: FecParams,
    /// Longest payload a packet of the layer may carry (FEC header + recovery).
    max_payload: usize,
    /// Recent media packets (sequence number, protected form), oldest first, all within
    /// `span` sequence numbers of the newest.
    window: VecDeque<(u16, Protected)>,
    /// The newest `pending` packets of `window` have no first-pass repair yet.
    pending: usize,
    /// Next second-pass mask, and the masks (bit i = window index i) sent since new media.
    pass2: usize,
    sent2: Vec<u128>,
    /// Size of the latest first-pass group.
    last_group: usize,
    /// SSRC and timestamp of the latest media packet (the repair packet's header).
    last: Option<(u32, u32)>,
    stats: FecEncoderStats,
}

impl FecEncoder {
    /// An encoder for a layer whose packets carry at most `max_payload` payload bytes (the
    /// layer's packet size less the RTP header and the caller's header extensions). Media
    /// payloads longer than `max_payload - MAX_HEADER_LEN` are sent unprotected.
    pub fn new(params: FecParams, max_payload: usize) -> Result<FecEncoder> {
        params.validate()?;
        if max_payload <= MAX_HEADER_LEN {
            return Err(invalid(format!(
                "FEC needs more than {MAX_HEADER_LEN} payload bytes per packet, have {max_payload}"
            )));
        }
        Ok(FecEncoder {
            params,
            max_payload,
            window: VecDeque::new(),
            pending: 0,
            pass2: 0,
            sent2: Vec::new(),
            last_group: 0,
            last: None,
            stats: FecEncoderStats::default(),
        })
    }

    pub fn params(&self) -> &FecParams {
        &self.params
    }

    pub fn stats(&self) -> &FecEncoderStats {
        &self.stats
    }

    /// Media packets waiting for their first-pass repair.
    pub fn pending(&self) -> usize {
        self.pending
    }

    /// One media packet of the layer (its header and payload as the packetizer built them),
    /// as sent with sequence number `seq`.
    pub fn push_media(&mut self, seq: u16, header: &RtpHeader, payload: &[u8]) {
        self.stats.media += 1;
        if self.last.is_some_and(|(ssrc, _)| ssrc != header.ssrc) {
            // A new stream: nothing before it can be combined with it.
            self.drop_all();
        }
        self.last = Some((header.ssrc, header.timestamp));
        // Forget what a mask starting at the oldest packet could not reach (or a sequence
        // number that went backwards: a restarted numbering).
        let span = self.params.span as u16;
        while let Some(&(s, _)) = self.window.front() {
            let d = seq.wrapping_sub(s);
            if d < span && d < 0x8000 {
                break;
            }
            self.evict_front();
        }
        self.pass2 = 0;
        self.sent2.clear();
        if payload.len() + MAX_HEADER_LEN > self.max_payload {
            self.stats.unprotected += 1;
            return;
        }
        self.window.push_back((seq, Protected::of(header, payload)));
        self.pending += 1;
    }

    /// A repair packet for a slot without media, or `None` (send padding). The packet's
    /// sequence number is the caller's to set; its payload fits `max_payload`.
    pub fn repair(&mut self) -> Option<MediaPacket> {
        let n = self.window.len();
        let row = self.params.row as usize;
        // The second pass works on the newest two rows (or the last first-pass group, if
        // larger), masks as bits of their index.
        let first = n - n.min((2 * row).max(self.last_group));
        let pick: Vec<usize> = if self.pending > 0 {
            // A row at a time while slots keep up; when more than two rows wait (slots are
            // scarce: a large frame, or the burst pacer ran ahead), one repair over all of
            // them now rather than packets leaving the window unprotected; the second pass
            // then splits the group.
            let take = if self.pending <= 2 * row {
                self.pending.min(row)
            } else {
                self.pending
            };
            self.last_group = take;
            let start = n - self.pending;
            self.pending -= take;
            self.stats.first_pass += 1;
            self.stats.protected += take as u64;
            let sel: Vec<usize> = (start..start + take).collect();
            if start >= first {
                let bits = sel.iter().fold(0u128, |m, &i| m | 1 << (i - first));
                self.sent2.push(bits);
            }
            sel
        } else {
            let mut chosen = None;
            while self.pass2 < SECOND_PASS.len() {
                let (stride, off) = SECOND_PASS[self.pass2];
                self.pass2 += 1;
                let sel: Vec<usize> = (first..n).filter(|i| (i - first) % stride == off).collect();
                let bits = sel.iter().fold(0u128, |m, &i| m | 1 << (i - first));
                if !sel.is_empty() && !self.sent2.contains(&bits) {
                    self.sent2.push(bits);
                    chosen = Some(sel);
                    break;
                }
            }
            match chosen {
                Some(sel) => {
                    self.stats.second_pass += 1;
                    sel
                }
                None => {
                    self.stats.idle += 1;
                    return None;
                }
            }
        };
        let (ssrc, ts) = self.last?;
        let base = self.window[pick[0]].0;
        let mut par = Parity::default();
        let mut mask = 0u128;
        for &i in &pick {
            let (s, p) = &self.window[i];
            mask |= 1u128 << s.wrapping_sub(base);
            par.add(p);
        }
        let payload = par.repair_payload(base, mask);
        debug_assert!(payload.len() <= self.max_payload);
        Some(MediaPacket {
            header: RtpHeader {
                marker: false,
                payload_type: self.params.payload_type,
                sequence_number: 0,
                timestamp: ts,
                ssrc,
                ..Default::default()
            },
            payload,
        })
    }

    fn evict_front(&mut self) {
        if self.window.pop_front().is_some() && self.pending > self.window.len() {
            self.pending = self.window.len();
            self.stats.unprotected += 1;
        }
    }

    fn drop_all(&mut self) {
        while !self.window.is_empty() {
            self.evict_front();
        }
    }
}
