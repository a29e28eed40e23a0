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
pub fn video_layer_rate(
    cell_kbps: u32,
    layer_fps: f64,
    packet_size: u16,
    bunch_len: u8,
    headroom: f64,
) -> u64 {
    let payload_bits = 8.0 * packet_size.saturating_sub(VIDEO_PACKET_OVERHEAD).max(1) as f64;
    let per_frame =
        cell_kbps as f64 * 1000.0 / layer_fps.max(0.01) / payload_bits + bunch_len as f64 / 2.0;
    (headroom * layer_fps * per_frame * 8.0 * packet_size as f64).round() as u64
}
