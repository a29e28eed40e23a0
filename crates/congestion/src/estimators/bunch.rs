//! Packet-pair / packet-bunch bandwidth sampler (`era.md` §1.1.9, `plm.md` §3).
//!
//! Per layer, a bunch of `k` back-to-back packets that crossed the bottleneck in a row is
//! spread by the bottleneck's serialisation. One sample per complete bunch:
//!
//! `R = 8 · Σ size(packets 2..k) / (t_k − t_1)` bit/s
//!
//! (for pairs of equal size M this is ERA's Eq. 5-2, `8M / t_gap`; using the later packets'
//! sizes is E10's "second packet's size" rule). A bunch is abandoned — no sample — when any
//! packet of it is missing or arrives out of order (its sequence number or position is not the
//! expected next one), when a new bunch starts before it completes, when the bunch length
//! changes mid-bunch, or when `t_k <= t_1`.

use crate::controller::PacketArrival;
use crate::time::Time;

/// One bandwidth sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BunchSample {
    /// Layer the bunch was on.
    pub layer: u8,
    /// Estimated bottleneck bandwidth, bit/s.
    pub rate_bps: f64,
    /// Arrival time of the bunch's last packet.
    pub at: Time,
    /// Packets in the bunch.
    pub len: u8,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Pending {
    first_seq: u64,
    next_pos: u8,
    len: u8,
    t1: Time,
    bytes: u64,
}

/// Why a bunch produced no sample (counted, for the stats and tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BunchCounters {
    /// Complete bunches that produced a sample.
    pub samples: u64,
    /// Bunches abandoned because of a gap, reordering or a new bunch starting early.
    pub abandoned: u64,
    /// Bunches with `t_k <= t_1` (timestamp resolution too coarse).
    pub zero_gap: u64,
}

/// The per-layer sampler.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BunchSampler {
    pending: Vec<Option<Pending>>,
    /// What happened so far.
    pub counters: BunchCounters,
}

impl BunchSampler {
    /// A sampler with no state.
    pub fn new() -> BunchSampler {
        BunchSampler::default()
    }

    /// Drops any bunch in progress on `layer` (call on join/leave).
    pub fn reset_layer(&mut self, layer: u8) {
        if let Some(p) = self.pending.get_mut(layer as usize) {
            *p = None;
        }
    }

    /// Drops every bunch in progress.
    pub fn reset(&mut self) {
        self.pending.iter_mut().for_each(|p| *p = None);
    }

    /// Feeds one packet; returns a sample when it completes a bunch.
    #[inline]
    pub fn on_packet(&mut self, pkt: &PacketArrival) -> Option<BunchSample> {
        let i = pkt.layer as usize;
        if self.pending.len() <= i {
            self.pending.resize(i + 1, None);
        }
        let slot = &mut self.pending[i];
        if pkt.bunch_pos == 0 {
            if slot.is_some() {
                self.counters.abandoned += 1;
            }
            *slot = (pkt.bunch_len >= 2).then_some(Pending {
                first_seq: pkt.seq,
                next_pos: 1,
                len: pkt.bunch_len,
                t1: pkt.recv_time,
                bytes: 0,
            });
            return None;
        }
        let Some(mut p) = slot.take() else {
            return None; // the first packet of this bunch was lost or reordered
        };
        if pkt.bunch_pos != p.next_pos
            || pkt.bunch_len != p.len
            || pkt.seq != p.first_seq.wrapping_add(pkt.bunch_pos as u64)
        {
            self.counters.abandoned += 1;
            return None;
        }
        p.bytes += pkt.size as u64;
        if pkt.bunch_pos + 1 < p.len {
            p.next_pos += 1;
            *slot = Some(p);
            return None;
        }
        let dt = pkt.recv_time.as_nanos().saturating_sub(p.t1.as_nanos());
        if dt == 0 {
            self.counters.zero_gap += 1;
            return None;
        }
        self.counters.samples += 1;
        Some(BunchSample {
            layer: pkt.layer,
            rate_bps: 8.0 * p.bytes as f64 * 1e9 / dt as f64,
            at: pkt.recv_time,
            len: p.len,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(layer: u8, seq: u64, pos: u8, len: u8, size: u32, t_us: u64) -> PacketArrival {
        PacketArrival {
            layer,
            seq,
            bunch_pos: pos,
            bunch_len: len,
            size,
            send_time_us: 0,
            recv_time: Time::from_micros(t_us),
        }
    }

    #[test]
    fn pair_gives_8m_over_gap() {
        let mut s = BunchSampler::new();
        assert_eq!(s.on_packet(&pkt(0, 10, 0, 2, 512, 1_000)), None);
        // 512 bytes at 400 kbit/s take 10.24 ms.
        let r = s.on_packet(&pkt(0, 11, 1, 2, 512, 11_240)).unwrap();
        assert!((r.rate_bps - 400_000.0).abs() < 1e-6, "{}", r.rate_bps);
        assert_eq!(r.layer, 0);
    }

    #[test]
    fn bunch_of_four_uses_packets_two_to_k() {
        let mut s = BunchSampler::new();
        s.on_packet(&pkt(2, 0, 0, 4, 9999, 0)); // first packet's size is not used
        s.on_packet(&pkt(2, 1, 1, 4, 1000, 1000));
        // Interleaved other layer's pair does not disturb layer 2.
        s.on_packet(&pkt(3, 50, 0, 2, 1000, 1500));
        s.on_packet(&pkt(2, 2, 2, 4, 1000, 2000));
        let r = s.on_packet(&pkt(2, 3, 3, 4, 1000, 3000)).unwrap();
        assert!((r.rate_bps - 8.0 * 3000.0 / 0.003).abs() < 1e-3);
        assert_eq!(r.len, 4);
    }

    #[test]
    fn abandons_on_gap_reorder_and_zero_gap() {
        let mut s = BunchSampler::new();
        // Missing middle packet.
        s.on_packet(&pkt(0, 0, 0, 3, 500, 0));
        assert_eq!(s.on_packet(&pkt(0, 2, 2, 3, 500, 100)), None);
        // Second packet without a first.
        assert_eq!(s.on_packet(&pkt(0, 5, 1, 2, 500, 200)), None);
        // Sequence gap with positions that look fine (a whole bunch lost in between).
        s.on_packet(&pkt(0, 10, 0, 2, 500, 300));
        assert_eq!(s.on_packet(&pkt(0, 13, 1, 2, 500, 400)), None);
        // New bunch before completion.
        s.on_packet(&pkt(0, 20, 0, 2, 500, 500));
        s.on_packet(&pkt(0, 22, 0, 2, 500, 600));
        assert!(s.on_packet(&pkt(0, 23, 1, 2, 500, 700)).is_some());
        // Same timestamp.
        s.on_packet(&pkt(0, 30, 0, 2, 500, 800));
        assert_eq!(s.on_packet(&pkt(0, 31, 1, 2, 500, 800)), None);
        assert_eq!(s.counters.samples, 1);
        assert_eq!(s.counters.zero_gap, 1);
        assert_eq!(s.counters.abandoned, 3);
    }
}
