//! Repair of a stream without spare slots (the audio track) against the burst losses of an
//! overflowing queue: every media packet is sent a second time, `lag` packets later, as a
//! one-packet repair (an RFC 8627 repair whose mask has one bit: its recovery fields are the
//! packet itself). A loss burst shorter than the lag is over by the time the copies of its
//! packets leave, so they come back, at the cost of the stream's rate once more. The repairs
//! form a stream of their own (their own SSRC and sequence numbers, RFC 8627's
//! separate-stream arrangement) so that stock receivers of the media never see them; the
//! receiver hands their payload to [`super::FecDecoder::push_separate_repair`].
//!
//! Column parity (one repair per `k` packets) was measured first on the audio down-switch:
//! the queue dropped 6 of 7 audio packets in 140 ms, two per column, and its repairs, sent
//! together at the block's end, shared the packets' fate.

use super::{invalid, Parity, Protected, MAX_SPAN};
use crate::error::Result;
use crate::rtp::{MediaPacket, RtpHeader};
use std::collections::VecDeque;

/// Lagged one-packet repairs of one media stream.
#[derive(Debug, Clone)]
pub struct LaggedRepair {
    lag: usize,
    payload_type: u8,
    ssrc: u32,
    seq: u16,
    window: VecDeque<(u16, Protected)>,
}

impl LaggedRepair {
    /// Repairs of payload type `payload_type` on SSRC `ssrc`, each packet's `lag` packets
    /// after it (1..[`MAX_SPAN`]).
    pub fn new(lag: u8, payload_type: u8, ssrc: u32) -> Result<LaggedRepair> {
        if lag == 0 || lag >= MAX_SPAN || payload_type > 127 {
            return Err(invalid(format!(
                "lagged repair lag {lag} payload type {payload_type}"
            )));
        }
        Ok(LaggedRepair {
            lag: lag as usize,
            payload_type,
            ssrc,
            seq: 0,
            window: VecDeque::new(),
        })
    }

    /// The announced parameters, as [`super::FecParams`] reads them: one packet per repair
    /// (`row`), and `span` = the lag + 1 (how far behind the newest packet a repair reaches).
    pub fn announced_params(&self) -> Vec<u8> {
        vec![1, self.lag as u8 + 1]
    }

    /// One media packet as sent (its sequence number, header and payload); returns the
    /// repair due now: the copy of the packet `lag` before it, once there is one. A packet
    /// whose sequence number does not follow the previous one forgets the older ones (the
    /// sender restarted).
    pub fn push_media(
        &mut self,
        seq: u16,
        header: &RtpHeader,
        payload: &[u8],
    ) -> Option<MediaPacket> {
        if let Some((last, _)) = self.window.back() {
            if seq != last.wrapping_add(1) {
                self.window.clear();
            }
        }
        self.window.push_back((seq, Protected::of(header, payload)));
        if self.window.len() <= self.lag {
            return None;
        }
        let (base, p) = self.window.pop_front()?;
        let mut par = Parity::default();
        par.add(&p);
        let out = par.repair_payload(base, 1);
        self.seq = self.seq.wrapping_add(1);
        Some(MediaPacket {
            header: RtpHeader {
                payload_type: self.payload_type,
                sequence_number: self.seq,
                timestamp: header.timestamp,
                ssrc: self.ssrc,
                ..Default::default()
            },
            payload: out,
        })
    }
}
