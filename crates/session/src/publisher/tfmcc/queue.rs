//! A TFMCC video session's send queue: the encoder's packets per ladder cell, sent as one
//! stream in picture order, trimmed when the rate falls faster than the encoder's target.

use super::HEADER_LEN;
use crate::publisher::MediaPacket;
use std::collections::VecDeque;

/// Seconds of media (at the current rate) a video session's send queue may hold; beyond it
/// [`trim_queues`] drops the oldest pictures. The encoder aims under the rate, so the queue
/// only fills when the rate falls faster than the target (hysteresis) or below what libvpx
/// can reach (a few kbit/s at start-up, before the first receiver report).
pub const QUEUE_CAP_S: f64 = 1.0;

/// Drops the oldest whole pictures (every packet with the oldest RTP timestamp) while the
/// queued bytes exceed `max_bytes`, keeping the newest picture. Returns the packets dropped.
/// The receivers lose those pictures and resume at the next switch point (spatial sync or
/// key picture, at most `keyframe_interval_s` away).
pub fn trim_queues(queues: &mut [VecDeque<MediaPacket>], max_bytes: usize) -> usize {
    let len = |p: &MediaPacket| p.payload.len() + HEADER_LEN;
    let mut total: usize = queues.iter().flatten().map(len).sum();
    let mut dropped = 0;
    while total > max_bytes {
        let Some(oldest) = queues
            .iter()
            .filter_map(|q| q.front().map(|p| p.header.timestamp))
            .reduce(|a, b| if (b.wrapping_sub(a) as i32) < 0 { b } else { a })
        else {
            break;
        };
        let newer_left = queues
            .iter()
            .flatten()
            .any(|p| p.header.timestamp != oldest);
        if !newer_left {
            break;
        }
        for q in queues.iter_mut() {
            while q.front().is_some_and(|p| p.header.timestamp == oldest) {
                if let Some(p) = q.pop_front() {
                    total -= len(&p);
                    dropped += 1;
                }
            }
        }
    }
    dropped
}

/// Takes the next media packet of a video session in send order: the earliest picture
/// (RTP timestamp, modular), and within a picture the lowest cumulative layer, i.e. spatial
/// layers bottom up. The encoder queues a whole picture at once, so each layer frame's
/// packets leave back to back and one sequence space serves every layer.
pub fn pop_next(queues: &mut [VecDeque<MediaPacket>]) -> Option<MediaPacket> {
    let mut best: Option<(usize, u32)> = None;
    for (k, q) in queues.iter().enumerate() {
        let Some(p) = q.front() else { continue };
        let ts = p.header.timestamp;
        let earlier = match best {
            None => true,
            Some((_, bts)) => (ts.wrapping_sub(bts) as i32) < 0,
        };
        if earlier {
            best = Some((k, ts));
        }
    }
    best.and_then(|(k, _)| queues[k].pop_front())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::rtp::RtpHeader;

    fn pkt(layer: usize, ts: u32, seq: u16) -> MediaPacket {
        MediaPacket {
            header: RtpHeader {
                marker: false,
                payload_type: 96,
                sequence_number: seq,
                timestamp: ts,
                ssrc: 1000 + layer as u32,
                csrcs: Vec::new(),
                extensions: Vec::new(),
                padding: 0,
            },
            payload: vec![layer as u8; 10],
        }
    }

    #[test]
    fn pop_next_sends_pictures_in_order_and_layers_bottom_up() {
        let mut q = vec![VecDeque::new(); 4];
        // Picture at ts 100 on layers 0, 2 and 3 (two packets on 2); ts 200 on 0 and 1;
        // ts 300 on 0. The copy shifted by -250 puts the last picture past the wrap.
        q[0].extend([pkt(0, 100, 1), pkt(0, 200, 2), pkt(0, 300, 3)]);
        q[1].push_back(pkt(1, 200, 1));
        q[2].extend([pkt(2, 100, 1), pkt(2, 100, 2)]);
        q[3].push_back(pkt(3, 100, 1));
        let mut q2: Vec<VecDeque<MediaPacket>> = q.clone();
        for d in q2.iter_mut() {
            for p in d.iter_mut() {
                p.header.timestamp = p.header.timestamp.wrapping_sub(250);
            }
        }
        for queues in [&mut q, &mut q2] {
            let order: Vec<(usize, u16)> = std::iter::from_fn(|| pop_next(queues))
                .map(|p| ((p.header.ssrc - 1000) as usize, p.header.sequence_number))
                .collect();
            assert_eq!(
                order,
                vec![(0, 1), (2, 1), (2, 2), (3, 1), (0, 2), (1, 1), (0, 3)]
            );
        }
        assert!(pop_next(&mut []).is_none());
    }

    #[test]
    fn trim_queues_drops_oldest_whole_pictures_and_keeps_the_newest() {
        let mut q = vec![VecDeque::new(); 3];
        // Three pictures (ts 10, 20, 30), each one packet on every layer: 74 bytes each.
        for ts in [10u32, 20, 30] {
            for (k, d) in q.iter_mut().enumerate() {
                d.push_back(pkt(k, ts, ts as u16));
            }
        }
        let one = 10 + HEADER_LEN;
        assert_eq!(trim_queues(&mut q, 9 * one), 0);
        // Room for two pictures minus a byte: the two oldest go, whole.
        assert_eq!(trim_queues(&mut q, 6 * one - 1), 6);
        assert!(q.iter().flatten().all(|p| p.header.timestamp == 30));
        // The newest picture stays, however small the cap.
        assert_eq!(trim_queues(&mut q, 0), 0);
        assert_eq!(q.iter().flatten().count(), 3);
    }
}
