//! The announced rate of a video layer from its cell's budget.

/// Frames per second carried by temporal layer `t` of `nt` (patterns 0, 01, 0212).
pub fn temporal_fps(fps: u32, nt: usize, t: usize) -> f64 {
    let f = fps as f64;
    match (nt, t) {
        (1, _) => f,
        (2, _) => f / 2.0,
        (_, 0) | (_, 1) => f / 4.0,
        _ => f / 2.0,
    }
}

/// Bytes of a video packet that carry no VP9 payload: the RTP header (12), the cc extension
/// block (16) and the room kept for the FEC header ([`codec::fec::MAX_HEADER_LEN`]), so that a
/// repair packet is no longer than the media packets it protects (docs/protocols/fec.md).
pub const VIDEO_PACKET_OVERHEAD: u16 = 12 + 16 + codec::fec::MAX_HEADER_LEN as u16;

/// Announced rate of a video layer: `headroom` times what the cell's frames occupy on the wire
/// at its budget (docs/server.md "Layer rates"): the budget in packets of `packet_size` bytes
/// (`packet_size - VIDEO_PACKET_OVERHEAD` of VP9 payload each), plus `bunch_len / 2` packets
/// per frame: a frame's last packet is on average half full, and a bunch its frame leaves
/// short is completed with repair (FEC) packets, on average half a bunch less one packet.
/// At least one whole bunch per frame: a frame smaller than a packet still takes a bunch, and
/// a layer given less (the 30-fps suite's 180p layers at 1200 bytes: 1.7-1.9 packets per
/// frame of slots for one 2-packet bunch per frame) falls behind its frames until the burst
/// credit runs out, so every picture waited ~120 ms there (trace study
/// `video::latency_study::clip_study`, docs/server.md "Layer rates").
pub fn video_layer_rate(
    cell_kbps: u32,
    layer_fps: f64,
    packet_size: u16,
    bunch_len: u8,
    headroom: f64,
) -> u64 {
    let payload_bits = 8.0 * packet_size.saturating_sub(VIDEO_PACKET_OVERHEAD).max(1) as f64;
    let payload = cell_kbps as f64 * 1000.0 / layer_fps.max(0.01) / payload_bits;
    let per_frame = (payload + bunch_len as f64 / 2.0).max(bunch_len as f64);
    (headroom * layer_fps * per_frame * 8.0 * packet_size as f64).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cell whose frames fit in one packet still gets one whole bunch per frame; above a
    /// packet per frame the half-bunch rule holds.
    #[test]
    fn a_frame_smaller_than_a_packet_gets_a_whole_bunch() {
        // 48 kbit/s at 7.5 fps: 800 B per frame, 1200-B packets in pairs.
        let r = video_layer_rate(48, 7.5, 1200, 2, 1.0);
        assert_eq!(r, (7.5f64 * 2.0 * 1200.0 * 8.0).round() as u64);
        // 225 kbit/s at 7.5 fps: 3.6 packets of payload, plus one.
        let payload = 225_000.0 / 7.5 / (8.0 * (1200 - VIDEO_PACKET_OVERHEAD) as f64);
        let r = video_layer_rate(225, 7.5, 1200, 2, 1.0);
        assert_eq!(r, (7.5 * (payload + 1.0) * 9600.0).round() as u64);
    }
}
