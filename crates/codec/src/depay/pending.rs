//! What is held of a picture until it is released: its layer frames, each as the RTP
//! payloads received so far, keyed by extended sequence number.

use crate::vp9rtp::PayloadDescriptor;
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
pub(super) struct Part {
    pub(super) start: bool,
    pub(super) end: bool,
    pub(super) data: Vec<u8>,
}

#[derive(Debug, Clone)]
pub(super) struct PendingFrame {
    pub(super) desc: PayloadDescriptor,
    pub(super) parts: BTreeMap<u64, Part>,
}

impl PendingFrame {
    /// Whether B..E are all here without a sequence gap ([`complete`](Self::complete)
    /// without building the payload: asked for every held picture on every packet).
    pub(super) fn is_whole(&self) -> bool {
        let Some((&first, p0)) = self.parts.iter().next() else {
            return false;
        };
        if !p0.start {
            return false;
        }
        for (expect, (&seq, p)) in (first..).zip(self.parts.iter()) {
            if seq != expect || (seq != first && p.start) {
                return false;
            }
            if p.end {
                return true;
            }
        }
        false
    }

    /// Payload if B..E are all here without a sequence gap.
    pub(super) fn complete(&self) -> Option<Vec<u8>> {
        let (&first, p0) = self.parts.iter().next()?;
        if !p0.start {
            return None;
        }
        let mut out = Vec::new();
        for (expect, (&seq, p)) in (first..).zip(self.parts.iter()) {
            if seq != expect || (seq != first && p.start) {
                return None;
            }
            out.extend_from_slice(&p.data);
            if p.end {
                return Some(out);
            }
        }
        None
    }
}

#[derive(Debug, Clone, Default)]
pub(super) struct PendingPicture {
    pub(super) timestamp: u32,
    pub(super) tid: u8,
    pub(super) frames: BTreeMap<u8, PendingFrame>,
    /// What the sender sent this picture with, from the first of its packets that carried
    /// the mark (`proto::wire::frames_ext`); `None` until one did.
    pub(super) sent: Option<proto::wire::frames_ext::SentFrames>,
}
