//! The VP9 payload as browsers get it, and the continuity of picture IDs and timestamps.
//!
//! Upstream, layer 0 carries no layer indices and an SS that describes only itself (so that it
//! alone is a standard single-layer stream, docs/codec.md), and the full SS rides on spatial
//! layer 1 of key pictures; references follow the picture group (non-flexible mode). A
//! browser receives every kept layer in one RTP stream in flexible mode: each frame names the
//! pictures it references (P_DIFF), so a frame the edge leaves out (an encoder's filler at the
//! top of a picture, `Frame::filler`) is referenced by nobody, which the picture group cannot
//! say (libwebrtc would wait for the missing frame). So each packet's descriptor is rewritten
//! once, for all browsers: layer indices and P_DIFFs on every packet, the edge's continuous
//! picture ID, the full SS (resolutions) on the key picture's first packet and nowhere else.
//! The VP9 bytes after the descriptor are forwarded as they came.

use codec::vp9rtp::{LayerIndices, PayloadDescriptor, ScalabilityStructure};
use std::sync::Arc;

/// The fields a rewritten descriptor gets.
#[derive(Debug, Clone)]
pub struct OutFields<'a> {
    /// 15-bit picture ID in the edge's space.
    pub pid: u16,
    pub spatial: u8,
    pub temporal: u8,
    /// Distances to the referenced pictures (1..=127, at most 3); empty when P = 0.
    pub p_diffs: &'a [u8],
    /// The SS, on the first packet of a key picture's spatial-0 frame only.
    pub ss: Option<ScalabilityStructure>,
}

/// The browser-form payload of one upstream packet: `desc` rewritten with `out`, then `data`
/// (the VP9 bytes after the upstream descriptor).
pub fn browser_payload(
    desc: &PayloadDescriptor,
    data: &[u8],
    out: &OutFields<'_>,
) -> codec::Result<Arc<[u8]>> {
    let layer = desc.layer.unwrap_or_default();
    let d = PayloadDescriptor {
        picture_id: Some(out.pid & 0x7fff),
        long_picture_id: true,
        inter_picture: desc.inter_picture,
        flexible: true,
        start: desc.start,
        end: desc.end,
        not_ref_upper: desc.not_ref_upper,
        layer: Some(LayerIndices {
            tid: out.temporal,
            switch_up: layer.switch_up,
            sid: out.spatial,
            inter_layer: layer.inter_layer,
        }),
        tl0_pic_idx: None,
        p_diffs: out.p_diffs.to_vec(),
        ss: out.ss.clone(),
    };
    let mut v = Vec::with_capacity(data.len() + 32);
    d.write(&mut v)?;
    v.extend_from_slice(data);
    Ok(v.into())
}

/// Maps upstream picture IDs and RTP timestamps into the edge's space, which stays
/// continuous (increasing) across upstream restarts, so a browser never sees its stream jump
/// backwards when the session restarts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Continuity {
    pid_offset: u64,
    ts_offset: u32,
    /// Set once the offsets are fixed (at the first picture of an upstream epoch).
    based: bool,
    /// The newest picture put out, in the edge's space (15-bit), and its timestamp.
    last: Option<(u64, u16, u32)>,
}

/// Timestamp step assumed across an upstream restart (one frame at 30 fps, 90 kHz).
const RESTART_TS_STEP: u32 = 3000;

impl Continuity {
    /// A new upstream epoch that continues after `prev` (the picture IDs and timestamps
    /// resume one step after the last ones put out).
    pub fn carry(prev: Continuity) -> Continuity {
        Continuity {
            based: false,
            last: prev
                .last
                .map(|(_, pid, ts)| (0, pid, ts.wrapping_add(RESTART_TS_STEP))),
            ..prev
        }
    }

    /// Fixes the offsets at the first picture (`pid`, `ts`) of an epoch.
    pub fn base(&mut self, pid: u64, ts: u32) {
        if self.based {
            return;
        }
        self.based = true;
        match self.last {
            Some((_, out_pid, out_ts)) => {
                let want = (out_pid as u64 + 1) & 0x7fff;
                self.pid_offset = (want + 0x8000 - (pid & 0x7fff)) & 0x7fff;
                self.ts_offset = out_ts.wrapping_sub(ts);
            }
            None => {
                self.pid_offset = 0;
                self.ts_offset = 0;
            }
        }
    }

    /// The browser-side picture ID of upstream picture `pid` (extended).
    pub fn out_pid(&self, pid: u64) -> u16 {
        ((pid + self.pid_offset) & 0x7fff) as u16
    }

    /// The browser-side RTP timestamp of upstream timestamp `ts`.
    pub fn out_ts(&self, ts: u32) -> u32 {
        ts.wrapping_add(self.ts_offset)
    }

    /// Records that picture `pid` (extended, upstream) with timestamp `ts` went out.
    pub fn saw(&mut self, pid: u64, ts: u32) {
        if self.last.is_none_or(|(p, _, _)| pid >= p || !self.based) {
            self.last = Some((pid, self.out_pid(pid), self.out_ts(ts)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer0_packet_gets_layer_indices_and_references() {
        let up = PayloadDescriptor {
            picture_id: Some(0x1234),
            long_picture_id: true,
            inter_picture: true,
            start: true,
            end: false,
            ..Default::default()
        };
        let out = OutFields {
            pid: 0x0042,
            spatial: 0,
            temporal: 0,
            p_diffs: &[4, 1],
            ss: None,
        };
        let p = browser_payload(&up, &[1, 2, 3], &out).unwrap();
        let (d, n) = PayloadDescriptor::parse(&p).unwrap();
        assert_eq!(&p[n..], &[1, 2, 3]);
        assert_eq!(d.picture_id, Some(0x42));
        assert_eq!(d.tl0_pic_idx, None);
        assert_eq!(d.p_diffs, vec![4, 1]);
        assert_eq!(d.layer.unwrap().sid, 0);
        assert!(d.inter_picture && d.start && !d.end && d.flexible && d.ss.is_none());
    }

    #[test]
    fn restart_continues_after_the_last_picture() {
        let mut c = Continuity::default();
        c.base(100, 5000);
        assert_eq!(c.out_pid(100), 100);
        c.saw(100, 5000);
        c.saw(101, 8000);
        let mut n = Continuity::carry(c);
        n.base(0x7ff0, 1_000_000);
        assert_eq!(n.out_pid(0x7ff0), 102);
        assert_eq!(n.out_pid(0x7ff0 + 20), 122);
        assert_eq!(n.out_ts(1_000_000), 8000 + RESTART_TS_STEP);
    }
}
