//! The receiving side: recovers lost media packets of one layer from its repair packets.

use super::{FecParams, Parity, Protected, RepairHeader};
use crate::error::Result;
use crate::rtp::{RtpHeader, RtpPacket};
use std::collections::VecDeque;

/// Media packets remembered, in sequence numbers behind the newest packet of the layer: a
/// repair can only use packets this recent (a repair spans at most 110, and this crate's
/// encoder at most [`super::MAX_SPAN`], sequence numbers, sent soon after them).
const HISTORY: u64 = 256;

/// Repairs kept waiting for a second loss to be repaired first; the oldest go beyond this.
const MAX_REPAIRS: usize = 128;

/// What a received packet was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// A media packet, new: hand it to picture assembly.
    Media,
    /// A repair packet, taken in (see [`FecDecoder::poll_recovered`]).
    Repair,
    /// A media packet already received or recovered: drop it.
    Duplicate,
}

/// Counters of one layer's decoder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FecDecoderStats {
    pub media: u64,
    pub repairs: u64,
    /// Media packets rebuilt from a repair.
    pub recovered: u64,
    pub duplicates: u64,
    /// Repair packets that did not parse.
    pub malformed: u64,
    /// Repairs whose recovered packet failed the checks (wrong length, payload type or
    /// header bits), or that referred to packets older than the history: dropped.
    pub unusable: u64,
    /// Repairs dropped unused because they still missed two or more packets when they aged
    /// out or the store was full.
    pub expired: u64,
}

#[derive(Debug, Clone)]
struct Stored {
    /// Extended sequence numbers protected.
    seqs: Vec<u64>,
    header: RepairHeader,
    data: Vec<u8>,
}

/// FEC decoder of one layer (one RTP stream).
///
/// Feed it every received packet of the layer ([`FecDecoder::push`]): media packets are
/// remembered (and handed back to the caller for assembly), repair packets are taken in.
/// Whenever a repair misses exactly one of its packets, that packet is rebuilt bit-exactly
/// (RTP header without extensions, payload) and queued for [`FecDecoder::poll_recovered`];
/// a recovered packet may complete another repair, so several can come out of one input.
#[derive(Debug, Clone)]
pub struct FecDecoder {
    pub(super) params: FecParams,
    ssrc: Option<u32>,
    /// Highest extended sequence number seen.
    highest: Option<u64>,
    /// Ring of remembered media packets, indexed by extended sequence number % HISTORY.
    media: Vec<Option<(u64, Protected)>>,
    repairs: VecDeque<Stored>,
    out: VecDeque<Vec<u8>>,
    /// Payload type of the layer's media (the first media packet's).
    media_pt: Option<u8>,
    stats: FecDecoderStats,
}

impl FecDecoder {
    /// A decoder for repair packets of `params.payload_type` (the rest of `params` is
    /// informative: every repair header says what it protects).
    pub fn new(params: FecParams) -> FecDecoder {
        FecDecoder {
            params,
            ssrc: None,
            highest: None,
            media: vec![None; HISTORY as usize],
            repairs: VecDeque::new(),
            out: VecDeque::new(),
            media_pt: None,
            stats: FecDecoderStats::default(),
        }
    }

    pub fn stats(&self) -> &FecDecoderStats {
        &self.stats
    }

    /// Whether `pt` is this layer's repair payload type.
    pub fn is_repair(&self, pt: u8) -> bool {
        pt == self.params.payload_type
    }

    /// Forgets everything (a new sender instance).
    pub fn reset(&mut self) {
        *self = FecDecoder::new(self.params);
    }

    /// One received packet of the layer. A malformed repair packet is an error (counted);
    /// a payload-less media packet (padding) is `Media` with nothing remembered.
    pub fn push(&mut self, p: &RtpPacket) -> Result<Received> {
        if self.ssrc.is_some_and(|s| s != p.ssrc()) {
            self.reset();
        }
        self.ssrc = Some(p.ssrc());
        let ext = self.extend(p.sequence_number());
        if self.is_repair(p.payload_type()) {
            self.stats.repairs += 1;
            let (h, n) = match RepairHeader::parse(p.payload()) {
                Ok(x) => x,
                Err(e) => {
                    self.stats.malformed += 1;
                    return Err(e);
                }
            };
            let data = &p.payload()[n..];
            // SN base is at or before the repair's own sequence number.
            let back = p.sequence_number().wrapping_sub(h.sn_base) as u64;
            match ext.checked_sub(back) {
                Some(base) => self.keep_repair(h, data, base, ext),
                None => self.stats.unusable += 1,
            }
            return Ok(Received::Repair);
        }
        self.stats.media += 1;
        if p.payload().is_empty() {
            return Ok(Received::Media);
        }
        if self.slot(ext).is_some() {
            self.stats.duplicates += 1;
            return Ok(Received::Duplicate);
        }
        self.media_pt.get_or_insert(p.payload_type());
        self.store(
            ext,
            Protected {
                marker: p.marker(),
                payload_type: p.payload_type(),
                timestamp: p.timestamp(),
                payload: p.payload().to_vec(),
            },
        );
        self.peel();
        Ok(Received::Media)
    }

    /// The payload of a repair packet that came on a stream of its own (its own SSRC and
    /// sequence numbers: [`super::LaggedRepair`]); its SN base is placed against the newest
    /// media packet seen, so it must come within half the sequence space of it. Malformed:
    /// an error (counted).
    pub fn push_separate_repair(&mut self, payload: &[u8]) -> Result<()> {
        self.stats.repairs += 1;
        let (h, n) = match RepairHeader::parse(payload) {
            Ok(x) => x,
            Err(e) => {
                self.stats.malformed += 1;
                return Err(e);
            }
        };
        let Some(high) = self.highest else {
            self.stats.unusable += 1;
            return Ok(());
        };
        let d = h.sn_base.wrapping_sub(high as u16) as i16 as i64;
        match u64::try_from(high as i64 + d) {
            Ok(base) => self.keep_repair(h, &payload[n..], base, high),
            Err(_) => self.stats.unusable += 1,
        }
        Ok(())
    }

    /// Keeps a repair whose SN base is the extended `base` (`newest`: the newest sequence
    /// number known when it came) and recovers what it can.
    fn keep_repair(&mut self, h: RepairHeader, data: &[u8], base: u64, newest: u64) {
        let seqs: Vec<u64> = (0..110u64)
            .filter(|i| h.mask >> i & 1 == 1)
            .map(|i| base + i)
            .collect();
        let newest = self.highest.unwrap_or(newest);
        if seqs.is_empty() || seqs.iter().any(|&s| s + HISTORY <= newest) {
            self.stats.unusable += 1;
            return;
        }
        if self.repairs.len() >= MAX_REPAIRS {
            self.repairs.pop_front();
            self.stats.expired += 1;
        }
        self.repairs.push_back(Stored {
            seqs,
            header: h,
            data: data.to_vec(),
        });
        self.peel();
    }

    /// The next recovered media packet (serialised RTP, no header extension), if any.
    pub fn poll_recovered(&mut self) -> Option<Vec<u8>> {
        self.out.pop_front()
    }

    fn extend(&mut self, seq: u16) -> u64 {
        let ext = match self.highest {
            None => seq as u64 + (1 << 16),
            Some(h) => {
                let d = seq.wrapping_sub(h as u16) as i16 as i64;
                (h as i64 + d).max(0) as u64
            }
        };
        if self.highest.is_none_or(|h| ext > h) {
            self.highest = Some(ext);
            self.expire();
        }
        ext
    }

    fn slot(&self, ext: u64) -> Option<&Protected> {
        match &self.media[(ext % HISTORY) as usize] {
            Some((e, p)) if *e == ext => Some(p),
            _ => None,
        }
    }

    fn store(&mut self, ext: u64, p: Protected) {
        if self.highest.is_some_and(|h| ext + HISTORY <= h) {
            return;
        }
        self.media[(ext % HISTORY) as usize] = Some((ext, p));
    }

    /// Drops repairs that refer to packets no longer remembered.
    fn expire(&mut self) {
        let Some(h) = self.highest else { return };
        let before = self.repairs.len();
        self.repairs
            .retain(|r| r.seqs.iter().all(|&s| s + HISTORY > h));
        self.stats.expired += (before - self.repairs.len()) as u64;
    }

    /// Recovers every packet that some repair misses alone, until none does.
    fn peel(&mut self) {
        loop {
            let mut progress = false;
            let mut i = 0;
            while i < self.repairs.len() {
                let missing: Vec<u64> = self.repairs[i]
                    .seqs
                    .iter()
                    .copied()
                    .filter(|&s| self.slot(s).is_none())
                    .collect();
                match missing.len() {
                    0 => {
                        self.repairs.remove(i);
                    }
                    1 => {
                        if let Some(r) = self.repairs.remove(i) {
                            self.recover(&r, missing[0]);
                        }
                        progress = true;
                    }
                    _ => i += 1,
                }
            }
            if !progress {
                break;
            }
        }
    }

    fn recover(&mut self, r: &Stored, lost: u64) {
        let h = &r.header;
        let mut par = Parity {
            marker: h.marker,
            payload_type: h.payload_type,
            length: h.length,
            timestamp: h.timestamp,
            payload: r.data.clone(),
        };
        for &s in &r.seqs {
            if s != lost {
                if let Some(p) = self.slot(s).cloned() {
                    par.add(&p);
                }
            }
        }
        let len = par.length as usize;
        let pt_ok = par.payload_type != self.params.payload_type
            && self.media_pt.is_none_or(|m| m == par.payload_type);
        if h.padding || h.extension || h.csrc_count != 0 || len > par.payload.len() || !pt_ok {
            self.stats.unusable += 1;
            return;
        }
        par.payload.truncate(len);
        let hdr = RtpHeader {
            marker: par.marker,
            payload_type: par.payload_type,
            sequence_number: lost as u16,
            timestamp: par.timestamp,
            ssrc: self.ssrc.unwrap_or(0),
            ..Default::default()
        };
        let Ok(bytes) = hdr.to_vec(&par.payload) else {
            self.stats.unusable += 1;
            return;
        };
        self.stats.recovered += 1;
        self.store(
            lost,
            Protected {
                marker: par.marker,
                payload_type: par.payload_type,
                timestamp: par.timestamp,
                payload: par.payload,
            },
        );
        self.out.push_back(bytes);
    }
}
