//! The lower path: the layers below the top spatial layer held, assembled and decoded on
//! their own, so that a picture whose top frame is still arriving when it is due is shown
//! from the layers below, scaled, on time.
//!
//! Why a second decoder: the top layer's frame of a key picture or a scene cut is 3-4 times
//! its layer's frame budget and reaches the player 250-500 ms after capture, where the
//! layers below are in within ~150 ms. With one decoder every later picture waits for it in
//! decode order, so the playout buffer had to hold that lateness on every picture
//! (glass-to-glass p50 ~350 ms at 30 fps). Decoding the top layer's frame of a picture needs
//! the top layer's previous frames, so the single decoder cannot skip it and come back; a
//! second decoder that never sees the top layer can run ahead. The playout buffer is then
//! sized by the lower path's lateness, and the top path's picture is shown whenever it is
//! decoded by its slot (docs/player.md "The lower path").

use codec::depay::{AssembledPicture, Assembler, AssemblerConfig};
use codec::ladder::LayerLadder;
use codec::rtp::RtpPacket;
use codec::vpx::{DecodedFrame, Decoder};

/// The next picture of `asm` that `dec` decodes, in order; pictures that do not decode are
/// counted in `errors`. Every picture is decoded (the decoder's reference state needs it);
/// the caller decides which are shown.
pub fn next_decoded(
    asm: &mut Assembler,
    dec: &mut Decoder,
    errors: &mut u64,
) -> Option<(AssembledPicture, DecodedFrame)> {
    while let Some(pic) = asm.pop() {
        let Ok(au) = pic.access_unit() else {
            *errors += 1;
            continue;
        };
        match dec.decode(&au) {
            Ok(Some(f)) => return Some((pic, f)),
            Ok(None) => {}
            Err(_) => *errors += 1,
        }
    }
    None
}

/// Releases the pictures `asm` holds only for a repair once they are due on screen (`due`
/// of their RTP timestamp): one held by a lost upper-layer packet
/// (`Assembler::oldest_awaiting_repair`), shown with the layers below until the layer's next
/// switch point, and one held only by pictures before it lost whole above TL0
/// (`Assembler::oldest_behind_missing`), which are given up. Waiting on would show them late,
/// a freeze of the whole picture. A frame still arriving (a large key or scene-cut frame) is
/// not a hole and is waited for: the playout buffer learns its lateness. Returns the spatial
/// layers above the base left out of a TL0 picture (bit s), to be re-synced.
pub fn release_due(asm: &mut Assembler, due: impl Fn(u32) -> bool) -> u8 {
    let mut broken = 0u8;
    loop {
        if let Some(ts) = asm.oldest_awaiting_repair() {
            if !due(ts) {
                break;
            }
            for s in asm.release_oldest() {
                if s > 0 {
                    broken |= 1 << s.min(7);
                }
            }
        } else if let Some(ts) = asm.oldest_behind_missing() {
            if !due(ts) {
                break;
            }
            asm.release_missing();
        } else {
            break;
        }
    }
    broken
}

/// The second assembler and decoder, holding layers 0..=`top`.
pub struct Lower {
    asm: Assembler,
    dec: Decoder,
    conf: AssemblerConfig,
    top: Option<usize>,
    /// Decoder errors on this path.
    pub decoder_errors: u64,
    /// Pictures decoded on this path.
    decoded: u64,
}

/// The layer prefix below the top spatial layer of the subscription 0..=`top`: the layers
/// before that spatial layer's first (`None` when the top is spatial layer 0: there is
/// nothing below to fall back on). Spatial-major, that is every cell of the spatial layers
/// below; in the size-first order of L3T3 a 640x360 subscription below the 720p layer falls
/// back on 320x180 at TL0-TL1 (its TL2 cell comes after the first 640x360 one).
pub fn lower_top(ladder: &LayerLadder, top: Option<usize>) -> Option<usize> {
    let top = top?;
    let top_s = (0..=top)
        .filter_map(|k| ladder.cell(k))
        .map(|c| c.spatial)
        .max()?;
    let first = (0..=top).find(|&k| ladder.cell(k).is_some_and(|c| c.spatial == top_s))?;
    first.checked_sub(1)
}

impl Lower {
    pub fn new(ladder: LayerLadder, conf: AssemblerConfig) -> Option<Lower> {
        Some(Lower {
            asm: Assembler::new(ladder, None, conf),
            dec: Decoder::new(1).ok()?,
            conf,
            top: None,
            decoder_errors: 0,
            decoded: 0,
        })
    }

    /// The subscription's top layer changed to `top` (the full path's). A path that had
    /// nothing below the top (the viewer held spatial layer 0 only) starts afresh: its
    /// assembler and decoder stopped at the pictures of before, so kept, the assembler waited
    /// for every picture in between (`reorder_pictures`, 0.5 s) and its late pictures raised
    /// the playout buffer by that much (a freeze at each such re-join). Fresh, it starts at
    /// the next key picture (which the decoder takes whatever it held) and stands in from
    /// then on.
    pub fn set_top(&mut self, top: Option<usize>) {
        let low = lower_top(self.asm.ladder(), top);
        if low == self.top {
            return;
        }
        if self.top.is_none() && self.decoded > 0 {
            self.asm = Assembler::new(self.asm.ladder().clone(), None, self.conf);
            self.decoded = 0;
        }
        self.top = low;
        self.asm.set_top_layer(low);
    }

    /// Whether the path stands in: the subscription has a spatial layer below its top, and
    /// the path has decoded a picture (after a join it starts at a key picture).
    pub fn active(&self) -> bool {
        self.top.is_some() && self.decoded > 0
    }

    /// A packet of layer `k` (ignored above the lower path's top).
    pub fn push(&mut self, k: usize, p: &RtpPacket<'_>) {
        if self.top.is_some_and(|t| k <= t) {
            // Malformed packets are counted by the full path, which sees them too.
            let _ = self.asm.push(k, p);
        }
    }

    /// [`release_due`] on this path's assembler (the layers it leaves out are the full
    /// path's too: that path asks for their re-sync).
    pub fn release_due(&mut self, due: impl Fn(u32) -> bool) {
        release_due(&mut self.asm, due);
    }

    /// The next picture decoded on this path ([`next_decoded`]).
    pub fn next(&mut self) -> Option<(AssembledPicture, DecodedFrame)> {
        let out = next_decoded(&mut self.asm, &mut self.dec, &mut self.decoder_errors);
        self.decoded += out.is_some() as u64;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lower_path_holds_every_cell_below_the_top_spatial_layer() {
        let ladder =
            LayerLadder::spatial_major(&[vec![45, 15, 15], vec![120, 40, 40], vec![300, 100, 100]])
                .unwrap();
        let got: Vec<Option<usize>> = (0..9).map(|k| lower_top(&ladder, Some(k))).collect();
        assert_eq!(
            got,
            vec![
                None,
                None,
                None,
                Some(2),
                Some(2),
                Some(2),
                Some(5),
                Some(5),
                Some(5)
            ]
        );
        assert_eq!(lower_top(&ladder, None), None);
        // Size-first: (0,0), (0,1), (1,0), (1,1), (0,2), (1,2), (2,0), (2,1), (2,2).
        let sf = LayerLadder::ordered(
            &[vec![45, 15, 15], vec![120, 40, 40], vec![300, 100, 100]],
            codec::ladder::LayerOrder::SizeFirst,
        )
        .unwrap();
        let got: Vec<Option<usize>> = (0..9).map(|k| lower_top(&sf, Some(k))).collect();
        assert_eq!(
            got,
            [
                None,
                None,
                Some(1),
                Some(1),
                Some(1),
                Some(1),
                Some(5),
                Some(5),
                Some(5)
            ]
        );
        let one = LayerLadder::spatial_major(&[vec![100, 50]]).unwrap();
        assert_eq!(lower_top(&one, Some(1)), None);
    }
}
