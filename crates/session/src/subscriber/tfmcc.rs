//! What a TFMCC receiver shows in telemetry, and where its extension block is found.

use congestion::tfmcc::TfmccReceiver;
use proto::Time;
use serde::Serialize;

/// The `tfmcc` member of the player's log line and telemetry.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TfmccView {
    pub rid: u32,
    /// R_calc, bit/s.
    pub rate_bps: f64,
    pub rtt_s: f64,
    pub loss_event_rate: f64,
    pub is_clr: bool,
    pub have_rtt: bool,
    pub reports_sent: u64,
    /// Packets whose TFMCC element did not parse (they still counted for rate and loss).
    pub bad_extension: u64,
}

impl TfmccView {
    pub fn of(rx: &TfmccReceiver, now: Time, bad_extension: u64) -> TfmccView {
        let r = 8.0 * rx.r_calc(now);
        TfmccView {
            rid: rx.rid(),
            rate_bps: if r.is_finite() { r } else { 0.0 },
            rtt_s: rx.rtt(),
            loss_event_rate: rx.loss_event_rate(),
            is_clr: rx.is_clr(),
            have_rtt: rx.have_rtt(),
            reports_sent: rx.reports_sent(),
            bad_extension,
        }
    }
}

/// The RTP header-extension block of `pkt` including its 4-byte header, if any.
pub fn extension_block(pkt: &[u8]) -> Option<&[u8]> {
    if pkt.len() < 12 || pkt[0] & 0x10 == 0 {
        return None;
    }
    let off = 12 + 4 * (pkt[0] & 0x0f) as usize;
    let hdr = pkt.get(off..off + 4)?;
    let words = u16::from_be_bytes([hdr[2], hdr[3]]) as usize;
    pkt.get(off..off + 4 + 4 * words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extension_block_is_found_and_bounded() {
        // V=2, X=1, CC=0; ext header 0x1000, 1 word.
        let mut p = vec![0x90, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2];
        p.extend_from_slice(&[0x10, 0x00, 0x00, 0x01, 2, 1, 7, 0]);
        assert_eq!(extension_block(&p), Some(&p[12..20]));
        // Length field beyond the packet: none, no panic.
        let mut q = p.clone();
        q[15] = 9;
        assert_eq!(extension_block(&q), None);
        // No X bit, too short.
        let mut r = p.clone();
        r[0] = 0x80;
        assert_eq!(extension_block(&r), None);
        assert_eq!(extension_block(&p[..5]), None);
    }
}
